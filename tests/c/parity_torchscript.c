/* Trains a TorchScript module (saved by tests/py/test_torchscript.py with
 * torch.jit.save, or compiled here from the source the Python side compiled)
 * through the C API and saves the trained module.
 *
 *   parity_torchscript DIR OPTIMIZER STEPS BATCH
 * DIR holds model.pt, x.bin [N, D], y.bin [N, 1] and dims.txt "N D". Writes
 * losses.bin (STEPS f32) and trained.pt. When DIR holds source.py instead of
 * model.pt, the module is compiled from it (tpt_model_from_torchscript_source)
 * over the attributes of params.txt, one line each, "NAME TRAINABLE NDIM
 * DIMS...", whose values are then set from init_NAME.bin (f32). */
#include "parity_common.h"

#define MAX_PARAMS 16

/* The module compiled from DIR/source.py, with its initial values. */
static tpt_model *compile_source(const char *dir, const tpt_input_spec *spec, size_t n_spec) {
  char path[1024];
  snprintf(path, sizeof path, "%s/source.py", dir);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char source[65536];
  size_t len = fread(source, 1, sizeof source - 1, f);
  fclose(f);
  source[len] = 0;
  static char names[MAX_PARAMS][64];
  static int64_t shapes[MAX_PARAMS][8];
  static tpt_variable_options options[MAX_PARAMS];
  tpt_torchscript_param params[MAX_PARAMS];
  size_t n = 0;
  snprintf(path, sizeof path, "%s/params.txt", dir);
  f = fopen(path, "r");
  if (!f) exit(3);
  int trainable = 0;
  long long ndim = 0;
  while (n < MAX_PARAMS && fscanf(f, "%63s %d %lld", names[n], &trainable, &ndim) == 3) {
    if (ndim < 0 || ndim > 8) exit(3);
    for (long long d = 0; d < ndim; ++d)
      if (fscanf(f, "%lld", (long long *)&shapes[n][d]) != 1) exit(3);
    options[n] = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
    options[n].trainable = trainable;
    options[n].init = TPT_INIT_ZEROS; /* the values come from init_NAME.bin */
    params[n] = (tpt_torchscript_param){names[n], shapes[n], (size_t)ndim, &options[n]};
    ++n;
  }
  fclose(f);
  tpt_model *model = NULL;
  CHECK(tpt_model_from_torchscript_source(&model, source, params, n, spec, n_spec));
  for (size_t i = 0; i < n; ++i) {
    char file[80];
    snprintf(file, sizeof file, "init_%.63s.bin", names[i]);
    tpt_tensor *value = parity_load(dir, file, params[i].shape, params[i].ndim, TPT_DTYPE_F32);
    CHECK(tpt_model_set_variable(model, names[i], value));
    tpt_tensor_free(value);
  }
  return model;
}

int main(int argc, char **argv) {
  if (argc != 5) return 2;
  const char *dir = argv[1], *kind = argv[2];
  long steps = atol(argv[3]);
  int64_t batch = atoll(argv[4]), n = 0, d = 0;
  char path[1024];
  snprintf(path, sizeof path, "%s/dims.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f || fscanf(f, "%lld %lld", (long long *)&n, (long long *)&d) != 2) return 3;
  fclose(f);
  CHECK(tpt_set_num_threads(1));
  const int64_t shape_x[] = {n, d}, shape_y[] = {n, 1};
  tpt_tensor *x = parity_load(dir, "x.bin", shape_x, 2, TPT_DTYPE_F32);
  tpt_tensor *y = parity_load(dir, "y.bin", shape_y, 2, TPT_DTYPE_F32);
  const int64_t sx[] = {-1, d}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *model = compile_source(dir, spec, 2);
  if (!model) {
    snprintf(path, sizeof path, "%s/model.pt", dir);
    CHECK(tpt_model_from_torchscript(&model, path, spec, 2));
  }
  parity_set_optimizer(model, kind);
  parity_train(dir, model, x, y, steps, batch);
  /* the module's own outputs through inference */
  tpt_tensor *pred = NULL;
  const tpt_tensor *data[] = {x, y};
  const char *names[] = {"prediction"};
  CHECK(tpt_model_infer(&pred, model, data, 2, names, 1));
  tpt_tensor_free(pred);
  snprintf(path, sizeof path, "%s/trained.pt", dir);
  CHECK(tpt_model_save_torchscript(model, path));
  tpt_model_free(model);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return 0;
}
