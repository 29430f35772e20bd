/* Trains a two-layer MLP regression through the C API, for the parity test
 * (tests/py/test_parity.py), which trains the same model from the same
 * initial values and data with python3-torch and compares.
 *
 *   parity_mlp DIR OPTIMIZER STEPS BATCH
 * DIR holds x.bin [N, D], y.bin [N, 1], w1.bin [H, D], b1.bin [H], w2.bin
 * [1, H], b2.bin [1] (raw little-endian f32) and dims.txt "N D H". OPTIMIZER
 * is "sgd" (lr 0.05, momentum 0.9) or "adam" (lr 0.01). Batches are taken in
 * order. Writes losses.bin (STEPS f32 costs) and w1.out ... b2.out. */
#include "parity_mlp_tower.h"

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: parity_mlp DIR OPTIMIZER STEPS BATCH\n");
    return 2;
  }
  const char *dir = argv[1], *kind = argv[2];
  long steps = atol(argv[3]);
  int64_t batch = atoll(argv[4]);
  char path[1024];
  snprintf(path, sizeof path, "%s/dims.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f || fscanf(f, "%lld %lld %lld", (long long *)&N, (long long *)&D, (long long *)&H) != 3) return 3;
  fclose(f);
  CHECK(tpt_set_num_threads(1));

  const int64_t sx[] = {N, D}, sy[] = {N, 1}, sw1[] = {H, D}, sb1[] = {H}, sw2[] = {1, H}, sb2[] = {1};
  tpt_tensor *x = parity_load(dir, "x.bin", sx, 2, TPT_DTYPE_F32), *y = parity_load(dir, "y.bin", sy, 2, TPT_DTYPE_F32);
  const int64_t in_x[] = {-1, D}, in_y[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, in_x, 2}, {"y", TPT_DTYPE_F32, in_y, 2}};
  tpt_model *model = NULL;
  CHECK(tpt_model_new(&model, spec, 2, parity_mlp_tower, NULL, NULL));
  CHECK(tpt_model_build(model));
  const char *names[] = {"fc1/W", "fc1/b", "fc2/W", "fc2/b"};
  const char *files[] = {"w1.bin", "b1.bin", "w2.bin", "b2.bin"};
  const int64_t *shapes[] = {sw1, sb1, sw2, sb2};
  const size_t ndims[] = {2, 1, 2, 1};
  for (int i = 0; i < 4; ++i) {
    tpt_tensor *init = parity_load(dir, files[i], shapes[i], ndims[i], TPT_DTYPE_F32);
    CHECK(tpt_model_set_variable(model, names[i], init));
    tpt_tensor_free(init);
  }
  char base_kind[32];
  parity_set_optimizer(model, parity_kind(kind, base_kind, sizeof base_kind));
  parity_train(dir, model, x, y, steps, batch);

  const char *outs[] = {"w1.out", "b1.out", "w2.out", "b2.out"};
  for (int i = 0; i < 4; ++i) {
    tpt_tensor *v = NULL;
    CHECK(tpt_model_variable(&v, model, names[i]));
    parity_save(dir, outs[i], v);
    tpt_tensor_free(v);
  }
  tpt_model_free(model);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return 0;
}
