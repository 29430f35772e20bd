/* What the parity programs (parity_mlp.c, parity_cnn.c, parity_torchscript.c)
 * share: exit on error, raw tensor files in the test's directory, the
 * optimizer settings the Python references use, and one training run whose
 * per-step costs are written to DIR/losses.bin (STEPS f32). */
#ifndef TPT_TESTS_PARITY_COMMON_H
#define TPT_TESTS_PARITY_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tptrain.h"
#include "cost_log.h"

static inline void parity_die(tpt_status *st, const char *what) {
  if (!st) return;
  fprintf(stderr, "%s: %s (%s)\n", what, tpt_status_message(st), tpt_code_name(tpt_status_code(st)));
  exit(3);
}
#define CHECK(call) parity_die((call), #call)

/* DIR/NAME as a tensor of `dtype` (raw little-endian, C order). */
static inline tpt_tensor *parity_load(const char *dir, const char *name, const int64_t *shape, size_t ndim, tpt_dtype dtype) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  size_t bytes = n * tpt_dtype_size(dtype);
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  void *buf = malloc(bytes);
  FILE *f = fopen(path, "rb");
  if (!f || fread(buf, 1, bytes, f) != bytes) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(3);
  }
  fclose(f);
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = dtype;
  tpt_tensor *t = NULL;
  CHECK(tpt_tensor_from_data(&t, buf, bytes, shape, ndim, &o));
  free(buf);
  return t;
}

static inline void parity_write(const char *dir, const char *name, const void *data, size_t bytes) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, bytes, f) != bytes) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(3);
  }
  fclose(f);
}

/* An f32 tensor to DIR/NAME. */
static inline void parity_save(const char *dir, const char *name, const tpt_tensor *t) {
  int64_t n = 0;
  CHECK(tpt_tensor_numel(&n, t));
  float *buf = malloc((size_t)n * sizeof(float));
  CHECK(tpt_tensor_copy_to(buf, (size_t)n * sizeof(float), t));
  parity_write(dir, name, buf, (size_t)n * sizeof(float));
  free(buf);
}

/* out = op(args): an ATen operator with one output (tpt_op_call). */
static inline tpt_status *parity_op1(tpt_tensor **out, const char *op, const tpt_arg *args, size_t nargs) {
  size_t n = 0;
  return tpt_op_call(out, 1, &n, op, NULL, args, nargs);
}

/* A tensor argument of tpt_op_call. */
static inline tpt_arg parity_arg(const tpt_tensor *t) {
  tpt_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TPT_ARG_TENSOR;
  a.tensor = t;
  return a;
}

/* A one-epoch trainer of `steps` steps, quiet. */
/* The precision of parity_train's trainer (a program sets it from its
 * arguments: "sgd_bf16" trains as "sgd" under TPT_PRECISION_BF16_MIXED). */
static tpt_precision parity_precision = TPT_PRECISION_FP32;
/* Dynamic loss scaling in parity_train's trainer ("adam_scaled": on, with
 * growth_interval 3); it then writes DIR/scales.bin, the step output
 * "loss_scale" after each step. */
static int parity_loss_scaling;

/* The optimizer kind of `kind` with a "_bf16" suffix taken off (which sets
 * parity_precision); `buf` holds it. */
static inline const char *parity_kind(const char *kind, char *buf, size_t size) {
  const size_t n = strlen(kind);
  if (n > 5 && strcmp(kind + n - 5, "_bf16") == 0 && n - 5 < size) {
    memcpy(buf, kind, n - 5);
    buf[n - 5] = '\0';
    parity_precision = TPT_PRECISION_BF16_MIXED;
    return buf;
  }
  if (n > 7 && strcmp(kind + n - 7, "_scaled") == 0 && n - 7 < size) {
    memcpy(buf, kind, n - 7);
    buf[n - 7] = '\0';
    parity_loss_scaling = 1;
    return buf;
  }
  return kind;
}

static inline tpt_trainer *parity_trainer(long steps) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.precision = parity_precision;
  if (parity_loss_scaling) {
    o.loss_scaling.mode = TPT_LOSS_SCALING_ON;
    o.loss_scaling.growth_interval = 3;
  }
  o.steps_per_epoch = steps;
  o.max_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *trainer = NULL;
  CHECK(tpt_trainer_new(&trainer, &o));
  return trainer;
}

/* "sgd": lr 0.05, momentum 0.9; "adam": lr 0.01 (as the Python references). */
static inline void parity_set_optimizer(tpt_model *model, const char *kind) {
  tpt_optimizer *opt = NULL;
  /* "sgd_clip" / "sgd_clip_tf": plain SGD (lr 0.05) with global-norm
   * clipping at 0.1, PyTorch's arithmetic or TensorFlow's */
  const int clip = strncmp(kind, "sgd_clip", 8) == 0;
  CHECK(tpt_optimizer_new(&opt, clip ? "sgd" : strcmp(kind, "adam_eps") == 0 ? "adam" : kind));
  if (clip) {
    CHECK(tpt_optimizer_set(opt, "learning_rate", 0.05));
    CHECK(tpt_optimizer_set(opt, "clip_global_norm", 0.1));
    CHECK(tpt_optimizer_set(opt, "clip_global_norm_tf", strcmp(kind, "sgd_clip_tf") == 0));
  } else if (strcmp(kind, "sgd") == 0) {
    CHECK(tpt_optimizer_set(opt, "learning_rate", 0.05));
    CHECK(tpt_optimizer_set(opt, "momentum", 0.9));
  } else {
    /* "adam_eps": Adam with eps 1e-3 (the CNN's: see tests/py/test_parity.py) */
    if (strcmp(kind, "adam_eps") == 0) CHECK(tpt_optimizer_set(opt, "eps", 1e-3));
    CHECK(tpt_optimizer_set(opt, "learning_rate", 0.01));
  }
  CHECK(tpt_model_set_optimizer(model, opt));
  tpt_optimizer_free(opt);
}

/* STEPS steps (one epoch) on in-order batches of (x, y); the costs go to
 * DIR/losses.bin. */
static inline void parity_train(const char *dir, tpt_model *model, const tpt_tensor *x, const tpt_tensor *y, long steps,
                         int64_t batch) {
  const tpt_tensor *data[] = {x, y};
  tpt_input *input = NULL;
  CHECK(tpt_input_from_tensors(&input, data, 2, batch, 0, 0));
  tpt_trainer *trainer = parity_trainer(steps);
  CHECK(tpt_trainer_set_model(trainer, model, input));
  cost_log costs = {0}, scales = {0};
  scales.output = "loss_scale";
  CHECK(cost_log_attach(trainer, &costs));
  if (parity_loss_scaling) CHECK(cost_log_attach(trainer, &scales));
  CHECK(tpt_trainer_run(trainer));
  if (parity_loss_scaling) {
    float *s = malloc(scales.count * sizeof(float));
    for (size_t i = 0; i < scales.count; ++i) s[i] = (float)scales.values[i];
    parity_write(dir, "scales.bin", s, scales.count * sizeof(float));
    free(s);
    free(scales.values);
  }
  size_t count = costs.count;
  float *losses = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) losses[i] = (float)costs.values[i];
  parity_write(dir, "losses.bin", losses, count * sizeof(float));
  free(costs.values);
  free(losses);
  tpt_trainer_free(trainer);
}

#endif
