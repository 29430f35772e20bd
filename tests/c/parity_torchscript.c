/* Trains a TorchScript module (saved by tests/py/test_parity.py with
 * torch.jit.save) through the C API and saves the trained module.
 *
 *   parity_torchscript DIR OPTIMIZER STEPS BATCH
 * DIR holds model.pt, x.bin [N, D], y.bin [N, 1] and dims.txt "N D". Writes
 * losses.bin (STEPS f32) and trained.pt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tptrain.h"

static void die(tpt_status *st, const char *what) {
  if (!st) return;
  fprintf(stderr, "%s: %s (%s)\n", what, tpt_status_message(st), tpt_code_name(tpt_status_code(st)));
  exit(3);
}
#define CHECK(call) die((call), #call)

static tpt_tensor *load(const char *dir, const char *name, int64_t rows, int64_t cols) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t n = (size_t)(rows * cols);
  float *buf = malloc(n * sizeof(float));
  FILE *f = fopen(path, "rb");
  if (!f || fread(buf, sizeof(float), n, f) != n) exit(3);
  fclose(f);
  const int64_t shape[] = {rows, cols};
  tpt_tensor *t = NULL;
  CHECK(tpt_tensor_from_data(&t, buf, n * sizeof(float), shape, 2, NULL));
  free(buf);
  return t;
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
  tpt_tensor *x = load(dir, "x.bin", n, d), *y = load(dir, "y.bin", n, 1);
  const int64_t sx[] = {-1, d}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *model = NULL;
  snprintf(path, sizeof path, "%s/model.pt", dir);
  CHECK(tpt_model_from_torchscript(&model, path, spec, 2));
  tpt_optimizer *opt = NULL;
  CHECK(tpt_optimizer_new(&opt, kind));
  CHECK(tpt_optimizer_set(opt, "learning_rate", strcmp(kind, "sgd") == 0 ? 0.05 : 0.01));
  if (strcmp(kind, "sgd") == 0) CHECK(tpt_optimizer_set(opt, "momentum", 0.9));
  CHECK(tpt_model_set_optimizer(model, opt));
  tpt_optimizer_free(opt);
  const tpt_tensor *data[] = {x, y};
  tpt_input *input = NULL;
  CHECK(tpt_input_from_tensors(&input, data, 2, batch, 0, 0));
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = steps;
  o.max_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *trainer = NULL;
  CHECK(tpt_trainer_new(&trainer, &o));
  CHECK(tpt_trainer_set_model(trainer, model, input));
  CHECK(tpt_trainer_run(trainer));
  size_t count = 0;
  CHECK(tpt_trainer_scalar_history(&count, NULL, NULL, 0, trainer, "cost"));
  double *costs = malloc(count * sizeof(double));
  float *lossf = malloc(count * sizeof(float));
  CHECK(tpt_trainer_scalar_history(&count, NULL, costs, count, trainer, "cost"));
  for (size_t i = 0; i < count; ++i) lossf[i] = (float)costs[i];
  snprintf(path, sizeof path, "%s/losses.bin", dir);
  f = fopen(path, "wb");
  fwrite(lossf, sizeof(float), count, f);
  fclose(f);
  /* the module's own outputs through inference */
  tpt_tensor *pred = NULL;
  const char *names[] = {"prediction"};
  CHECK(tpt_model_infer(&pred, model, data, 2, names, 1));
  tpt_tensor_free(pred);
  snprintf(path, sizeof path, "%s/trained.pt", dir);
  CHECK(tpt_model_save_torchscript(model, path));
  tpt_trainer_free(trainer);
  tpt_model_free(model);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  free(costs);
  free(lossf);
  return 0;
}
