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
 * (lr 0.05, momentum 0.9) or "adam" (lr 0.01). Batches are taken in order.
 * Writes losses.bin (STEPS f32 costs) and, for every variable, NAME.out with
 * '/' written as '_' (conv_W.out, ..., bn_mean_EMA.out, bn_variance_EMA.out). */
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

static void *read_all(const char *dir, const char *name, size_t bytes) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  void *buf = malloc(bytes);
  FILE *f = fopen(path, "rb");
  if (!f || fread(buf, 1, bytes, f) != bytes) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(3);
  }
  fclose(f);
  return buf;
}

static tpt_tensor *load(const char *dir, const char *name, const int64_t *shape, size_t ndim, tpt_dtype dtype) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  size_t bytes = n * tpt_dtype_size(dtype);
  void *buf = read_all(dir, name, bytes);
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = dtype;
  tpt_tensor *t = NULL;
  CHECK(tpt_tensor_from_data(&t, buf, bytes, shape, ndim, &o));
  free(buf);
  return t;
}

static void save(const char *dir, const char *name, const tpt_tensor *t) {
  int64_t n = 0;
  CHECK(tpt_tensor_numel(&n, t));
  float *buf = malloc((size_t)n * sizeof(float));
  CHECK(tpt_tensor_copy_to(buf, (size_t)n * sizeof(float), t));
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(buf, sizeof(float), (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(3);
  }
  fclose(f);
  free(buf);
}

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

static float *losses;
static tpt_status *record_loss(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)e;
  (void)r;
  (void)ud;
  int64_t g;
  double c;
  die(tpt_trainer_global_step(&g, t), "global_step");
  die(tpt_trainer_output_scalar(&c, t, "cost"), "cost");
  losses[g - 1] = (float)c;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: parity_cnn DIR OPTIMIZER STEPS BATCH\n");
    return 2;
  }
  const char *dir = argv[1], *kind = argv[2];
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
  tpt_tensor *x = load(dir, "x.bin", sx, 4, TPT_DTYPE_F32), *y = load(dir, "y.bin", sy, 1, TPT_DTYPE_I64);
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
    tpt_tensor *init = load(dir, files[i], shapes[i], ndims[i], TPT_DTYPE_F32);
    CHECK(tpt_model_set_variable(model, names[i], init));
    tpt_tensor_free(init);
  }
  tpt_optimizer *opt = NULL;
  CHECK(tpt_optimizer_new(&opt, kind));
  if (strcmp(kind, "sgd") == 0) {
    CHECK(tpt_optimizer_set(opt, "learning_rate", 0.05));
    CHECK(tpt_optimizer_set(opt, "momentum", 0.9));
  } else {
    CHECK(tpt_optimizer_set(opt, "learning_rate", 0.01));
  }
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
  losses = calloc((size_t)steps, sizeof(float));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_AFTER_RUN;
  d.fn = record_loss;
  tpt_callback *cb = NULL;
  CHECK(tpt_callback_new(&cb, &d));
  CHECK(tpt_trainer_add_callback(trainer, cb));
  CHECK(tpt_trainer_run(trainer));
  tpt_trainer_free(trainer);

  snprintf(path, sizeof path, "%s/losses.bin", dir);
  f = fopen(path, "wb");
  fwrite(losses, sizeof(float), (size_t)steps, f);
  fclose(f);
  const char *all[] = {"conv/W", "conv/b", "bn/gamma", "bn/beta", "bn/mean/EMA", "bn/variance/EMA", "fc/W", "fc/b"};
  for (int i = 0; i < 8; ++i) {
    char out[128];
    snprintf(out, sizeof out, "%s.out", all[i]);
    for (char *ch = out; *ch; ++ch)
      if (*ch == '/') *ch = '_';
    tpt_tensor *v = NULL;
    CHECK(tpt_model_variable(&v, model, all[i]));
    save(dir, out, v);
    tpt_tensor_free(v);
  }
  tpt_model_free(model);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  free(losses);
  return 0;
}
