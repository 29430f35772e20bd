/* Trains a TorchScript module (saved by tests/py/test_torchscript.py with
 * torch.jit.save) through the C API and saves the trained module.
 *
 *   parity_torchscript DIR OPTIMIZER STEPS BATCH
 * DIR holds model.pt, x.bin [N, D], y.bin [N, 1] and dims.txt "N D". Writes
 * losses.bin (STEPS f32) and trained.pt. */
#include "parity_common.h"

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
  tpt_model *model = NULL;
  snprintf(path, sizeof path, "%s/model.pt", dir);
  CHECK(tpt_model_from_torchscript(&model, path, spec, 2));
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
