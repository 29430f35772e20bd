/* Trains a small CNN with batch normalisation through the C API's layers, for
 * the parity test (tests/py/test_parity.py), which trains the same model from
 * the same initial values and data with python3-torch and compares.
 *
 *   parity_cnn DIR OPTIMIZER STEPS BATCH
 * DIR holds x.bin [N, 1, 8, 8] (f32), y.bin [N] (i64), the initial values
 * conv_W.bin [4, 1, 3, 3], conv_b.bin [4], bn_gamma.bin [4], bn_beta.bin [4],
 * fc_W.bin [3, 64], fc_b.bin [3] (raw little-endian f32) and dims.txt "N".
 * The model: conv2d 4 filters 3x3 SAME -> batch_norm -> relu -> max_pool 2
 * (VALID) -> flatten -> fc 3 -> softmax cross-entropy. OPTIMIZER is "sgd"
 * (lr 0.05, momentum 0.9), "adam" (lr 0.01) or "adam_eps" (lr 0.01, eps
 * 1e-3). Batches are taken in order.
 * Writes losses.bin (STEPS f32 costs) and, for every variable, NAME.out with
 * '/' written as '_' (conv_W.out, ..., bn_mean_EMA.out, bn_variance_EMA.out). */
#include "parity_common.h"

/* cost = cross_entropy(fc(flatten(max_pool(relu(bn(conv(x)))))), y) */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n_in, void *ud) {
  (void)n_in;
  (void)ud;
  tpt_tensor *c = NULL, *b = NULL, *r = NULL, *p = NULL, *f = NULL, *logits = NULL, *cost = NULL;
  tpt_status *st = NULL;
  tpt_layer_options conv = TPT_LAYER_OPTIONS_INIT; /* 3x3, stride 1, SAME, bias */
  if ((st = tpt_layer_conv2d(&c, tw, "conv", in[0], 4, &conv))) goto done;
  if ((st = tpt_layer_batch_norm(&b, tw, "bn", c, 0.9, 1e-5))) goto done;
  if ((st = tpt_layer_activation(&r, b, TPT_ACT_RELU, 0))) goto done;
  if ((st = tpt_layer_max_pool(&p, r, 2, 2, TPT_PADDING_VALID))) goto done;
  if ((st = tpt_layer_flatten(&f, p))) goto done;
  if ((st = tpt_layer_fc(&logits, tw, "fc", f, 3, NULL))) goto done;
  if ((st = tpt_loss_softmax_cross_entropy(&cost, logits, in[1]))) goto done;
  if ((st = tpt_tower_set_cost(tw, cost))) goto done;
  st = tpt_tower_set_output(tw, "logits", logits);
done:
  tpt_tensor_free(c);
  tpt_tensor_free(b);
  tpt_tensor_free(r);
  tpt_tensor_free(p);
  tpt_tensor_free(f);
  tpt_tensor_free(logits);
  tpt_tensor_free(cost);
  return st;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: parity_cnn DIR OPTIMIZER STEPS BATCH\n");
    return 2;
  }
  char kind_buf[64];
  const char *dir = argv[1], *kind = parity_kind(argv[2], kind_buf, sizeof kind_buf);
  long steps = atol(argv[3]);
  int64_t batch = atoll(argv[4]);
  long long n_rows = 0;
  char path[1024];
  snprintf(path, sizeof path, "%s/dims.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f || fscanf(f, "%lld", &n_rows) != 1) return 3;
  fclose(f);
  CHECK(tpt_set_num_threads(1));

  const int64_t N = (int64_t)n_rows;
  const int64_t sx[] = {N, 1, 8, 8}, sy[] = {N};
  tpt_tensor *x = parity_load(dir, "x.bin", sx, 4, TPT_DTYPE_F32), *y = parity_load(dir, "y.bin", sy, 1, TPT_DTYPE_I64);
  const int64_t in_x[] = {-1, 1, 8, 8}, in_y[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, in_x, 4}, {"y", TPT_DTYPE_I64, in_y, 1}};
  tpt_model *model = NULL;
  CHECK(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  CHECK(tpt_model_build(model));

  const int64_t s_cw[] = {4, 1, 3, 3}, s4[] = {4}, s_fw[] = {3, 64}, s3[] = {3};
  const char *names[] = {"conv/W", "conv/b", "bn/gamma", "bn/beta", "fc/W", "fc/b"};
  const char *files[] = {"conv_W.bin", "conv_b.bin", "bn_gamma.bin", "bn_beta.bin", "fc_W.bin", "fc_b.bin"};
  const int64_t *shapes[] = {s_cw, s4, s4, s4, s_fw, s3};
  const size_t ndims[] = {4, 1, 1, 1, 2, 1};
  for (int i = 0; i < 6; ++i) {
    tpt_tensor *init = parity_load(dir, files[i], shapes[i], ndims[i], TPT_DTYPE_F32);
    CHECK(tpt_model_set_variable(model, names[i], init));
    tpt_tensor_free(init);
  }
  parity_set_optimizer(model, kind);
  parity_train(dir, model, x, y, steps, batch);

  const char *all[] = {"conv/W", "conv/b", "bn/gamma", "bn/beta", "bn/mean/EMA", "bn/variance/EMA", "fc/W", "fc/b"};
  for (int i = 0; i < 8; ++i) {
    char out[128];
    snprintf(out, sizeof out, "%s.out", all[i]);
    for (char *ch = out; *ch; ++ch)
      if (*ch == '/') *ch = '_';
    tpt_tensor *v = NULL;
    CHECK(tpt_model_variable(&v, model, all[i]));
    parity_save(dir, out, v);
    tpt_tensor_free(v);
  }
  tpt_model_free(model);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return 0;
}
