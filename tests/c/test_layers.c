/* Layers, losses and metrics from C: output shapes (SAME / VALID, strides,
 * dilation, groups), values against hand computation (fc, a 1-channel conv,
 * SAME corners of pooling, batch normalisation in training and inference,
 * the moving averages across training steps, the build call and
 * inference), variable names and shapes, losses and metrics on tiny
 * examples, L2 regularisation with its gradient, and the errors of bad input:
 * wrong ranks and dtypes, bad options, and NULL for every pointer. */
#include <math.h>

#include "test_common.h"

/* ------------------------------------------------------------------ helpers */

static tpt_tensor *f32(const float *v, const int64_t *shape, size_t ndim) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  tpt_tensor *t = NULL;
  ok(tpt_tensor_from_data(&t, v, n * sizeof(float), shape, ndim, NULL));
  return t;
}

static tpt_tensor *i64(const int64_t *v, const int64_t *shape, size_t ndim) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_I64;
  tpt_tensor *t = NULL;
  ok(tpt_tensor_from_data(&t, v, n * sizeof(int64_t), shape, ndim, &o));
  return t;
}

/* 1, 2, 3, ... (times sign) in `shape` */
static tpt_tensor *iota(const int64_t *shape, size_t ndim, float sign) {
  float v[1024];
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  assert_true(n <= 1024);
  for (size_t i = 0; i < n; ++i) v[i] = sign * (float)(i + 1);
  return f32(v, shape, ndim);
}

static void read_f32(float *buf, size_t n, const tpt_tensor *t) {
  int64_t numel = 0;
  ok(tpt_tensor_numel(&numel, t));
  assert_int_equal(numel, n);
  ok(tpt_tensor_copy_to(buf, n * sizeof(float), t));
}

static void assert_shape(const tpt_tensor *t, size_t ndim, const int64_t *want) {
  int64_t dims[8];
  size_t got = 0;
  ok(tpt_tensor_ndim(&got, t));
  assert_int_equal(got, ndim);
  ok(tpt_tensor_shape(dims, 8, t));
  for (size_t i = 0; i < ndim; ++i)
    if (dims[i] != want[i]) fail_msg("dimension %zu is %lld, want %lld", i, (long long)dims[i], (long long)want[i]);
}

static void assert_values(const tpt_tensor *t, const float *want, size_t n, double tol) {
  float got[1024];
  assert_true(n <= 1024);
  read_f32(got, n, t);
  for (size_t i = 0; i < n; ++i)
    if (!(fabs((double)got[i] - (double)want[i]) <= tol))
      fail_msg("element %zu is %.7g, want %.7g", i, (double)got[i], (double)want[i]);
}

static double scalar(const tpt_tensor *t) {
  double v = 0;
  ok(tpt_tensor_item(&v, t));
  return v;
}

/* ------------------------------------------------------------------ the harness
 *
 * A model of one f32 input "x" whose tower function runs ctx->body, which
 * makes the output "y" (and may check things, recording the first failure:
 * cmocka's assertions must not jump through the library's C++ frames). */

typedef struct ctx ctx;
typedef tpt_status *(*body_fn)(ctx *c, tpt_tower *tw, const tpt_tensor *x, tpt_tensor **y);
struct ctx {
  body_fn body;
  const char *name;
  int64_t n;  /* units / filters */
  tpt_layer_options opts;
  double a, b;    /* momentum, eps, rate, weight ... */
  int kind;       /* which layer */
  char fail[512]; /* the first failed check inside the tower */
  int calls, builds, trainings;
  float got[256];
  size_t got_n;
};

static void record(ctx *c, int line, const char *fmt, ...) {
  if (c->fail[0]) return;
  int k = snprintf(c->fail, sizeof c->fail, "line %d: ", line);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->fail + k, sizeof c->fail - (size_t)k, fmt, ap);
  va_end(ap);
}

/* inside a tower: the status must be `code` with `fragment` */
#define EXPECT(c, call, code, fragment) expect_in((c), __LINE__, (call), (code), (fragment))
static void expect_in(ctx *c, int line, tpt_status *st, tpt_code code, const char *fragment) {
  if (!st) {
    record(c, line, "expected %s (\"%s\"), got success", tpt_code_name(code), fragment);
    return;
  }
  if (tpt_status_code(st) != code || (fragment && !strstr(tpt_status_message(st), fragment)))
    record(c, line, "got %s \"%s\", want %s with \"%s\"", tpt_code_name(tpt_status_code(st)), tpt_status_message(st),
           tpt_code_name(code), fragment);
  tpt_status_free(st);
}

static tpt_status *harness_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n_in, void *ud) {
  ctx *c = ud;
  (void)n_in;
  int32_t building = 0, training = 0;
  tpt_status *st = NULL;
  if ((st = tpt_tower_is_building(&building, tw)) || (st = tpt_tower_is_training(&training, tw))) return st;
  c->calls++;
  c->builds += building;
  tpt_tensor *y = NULL, *cost = NULL;
  if ((st = c->body(c, tw, in[0], &y))) goto done;
  if (!y) goto done;
  if ((st = tpt_tower_set_output(tw, "y", y))) goto done;
  if (training && !building) {
    c->trainings++;
    int64_t n = 0;
    if ((st = tpt_tensor_numel(&n, y))) goto done;
    if (n <= 256 && !(st = tpt_tensor_copy_to(c->got, (size_t)n * sizeof(float), y))) c->got_n = (size_t)n;
    if (st) goto done;
  }
  if (training) {
    tpt_arg a;
    memset(&a, 0, sizeof a);
    a.kind = TPT_ARG_TENSOR;
    a.tensor = y;
    size_t n_out = 0;
    if ((st = tpt_op_call(&cost, 1, &n_out, "aten::mean", NULL, &a, 1))) goto done;
    st = tpt_tower_set_cost(tw, cost);
  }
done:
  tpt_tensor_free(y);
  tpt_tensor_free(cost);
  return st;
}

static tpt_model *harness(ctx *c, const int64_t *shape, size_t ndim) {
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, ndim}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 1, harness_tower, c, NULL));
  return m;
}

static void build(tpt_model *m, ctx *c) {
  ok(tpt_model_build(m));
  if (c->fail[0]) fail_msg("in the tower: %s", c->fail);
}

static tpt_tensor *infer(tpt_model *m, const tpt_tensor *x) {
  const char *names[] = {"y"};
  tpt_tensor *y = NULL;
  ok(tpt_model_infer(&y, m, &x, 1, names, 1));
  return y;
}

static void set_var(tpt_model *m, const char *name, const float *v, const int64_t *shape, size_t ndim) {
  tpt_tensor *t = f32(v, shape, ndim);
  ok(tpt_model_set_variable(m, name, t));
  tpt_tensor_free(t);
}

static void var_values(tpt_model *m, const char *name, const float *want, size_t n, double tol) {
  tpt_tensor *v = NULL;
  ok(tpt_model_variable(&v, m, name));
  assert_values(v, want, n, tol);
  tpt_tensor_free(v);
}

static void var_shape(tpt_model *m, const char *name, size_t ndim, const int64_t *want) {
  tpt_tensor *v = NULL;
  ok(tpt_model_variable(&v, m, name));
  assert_shape(v, ndim, want);
  tpt_tensor_free(v);
}

/* Both getters: the lines of tpt_model_variable_names, and the allocated
 * array of tpt_model_variable_list joined the same way. */
static void names_are(tpt_model *m, const char *want) {
  char buf[512];
  ok(tpt_model_variable_names(buf, sizeof buf, NULL, m));
  assert_string_equal(buf, want);
  char **list = NULL, joined[512] = "";
  size_t n = 999;
  ok(tpt_model_variable_list(&list, &n, m));
  for (size_t i = 0; i < n; ++i) {
    assert_true(strlen(joined) + strlen(list[i]) + 2 < sizeof joined);
    strcat(joined, list[i]);
    strcat(joined, "\n");
  }
  assert_string_equal(joined, want);
  tpt_strings_free(list, n);
}

/* `steps` SGD steps (learning rate lr) on the rows of x, in order. */
static void train(tpt_model *m, const tpt_tensor *x, int64_t batch, int64_t steps, double lr, ctx *c) {
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, "sgd"));
  ok(tpt_optimizer_set(opt, "learning_rate", lr));
  ok(tpt_model_set_optimizer(m, opt));
  tpt_optimizer_free(opt);
  tpt_input *in = NULL;
  ok(tpt_input_from_tensors(&in, &x, 1, batch, 0, 0));
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = steps;
  o.max_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_set_model(t, m, in));
  ok(tpt_trainer_run(t));
  tpt_trainer_free(t);
  if (c->fail[0]) fail_msg("in the tower: %s", c->fail);
}

/* ------------------------------------------------------------------ bodies */

enum { FC, CONV, DECONV, BN, LN, LN_AXES, DROPOUT };

static tpt_status *one_layer(ctx *c, tpt_tower *tw, const tpt_tensor *x, tpt_tensor **y) {
  switch (c->kind) {
    case FC: return tpt_layer_fc(y, tw, c->name, x, c->n, &c->opts);
    case CONV: return tpt_layer_conv2d(y, tw, c->name, x, c->n, &c->opts);
    case DECONV: return tpt_layer_conv2d_transpose(y, tw, c->name, x, c->n, &c->opts);
    case BN: return tpt_layer_batch_norm(y, tw, c->name, x, c->a, c->b);
    case LN: return tpt_layer_layer_norm(y, tw, c->name, x, c->b);
    case LN_AXES: { /* tensorpack's LayerNorm of NCHW: over C, H, W, per-channel gamma and beta */
      const int64_t axes[] = {1, 2, 3};
      return tpt_layer_layer_norm_axes(y, tw, c->name, x, axes, 3, 1, c->b);
    }
    case DROPOUT: return tpt_layer_dropout(y, tw, x, c->a);
    default: return tpt_status_new(TPT_ERR_INTERNAL, "no such kind");
  }
}

static ctx layer_ctx(int kind, const char *name, int64_t n) {
  ctx c;
  memset(&c, 0, sizeof c);
  tpt_layer_options o = TPT_LAYER_OPTIONS_INIT;
  c.opts = o;
  c.body = one_layer;
  c.kind = kind;
  c.name = name;
  c.n = n;
  c.a = 0.9;
  c.b = 1e-5;
  return c;
}

/* The shape of one layer's output on an input of `in` (built, then inferred on ones). */
static void layer_shape(ctx *c, const int64_t *in, size_t ndim, size_t out_ndim, const int64_t *want) {
  tpt_model *m = harness(c, in, ndim);
  build(m, c);
  tpt_tensor *x = iota(in, ndim, 1);
  tpt_tensor *y = infer(m, x);
  assert_shape(y, out_ndim, want);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_model_free(m);
}

/* ------------------------------------------------------------------ fc */

static void test_fc_values_and_variables(void **state) {
  (void)state;
  ctx c = layer_ctx(FC, "fc1", 2);
  const int64_t sx[] = {2, 3}, sw[] = {2, 3}, sb[] = {2};
  tpt_model *m = harness(&c, sx, 2);
  build(m, &c);
  names_are(m, "fc1/W\nfc1/b\n");
  var_shape(m, "fc1/W", 2, sw);
  var_shape(m, "fc1/b", 1, sb);
  const float w[] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, b[] = {0.1f, -0.2f};
  set_var(m, "fc1/W", w, sw, 2);
  set_var(m, "fc1/b", b, sb, 1);
  const float xv[] = {1, 2, 3, 4, 5, 6};
  tpt_tensor *x = f32(xv, sx, 2);
  tpt_tensor *y = infer(m, x);
  const int64_t sy[] = {2, 2};
  assert_shape(y, 2, sy);
  const float want[] = {-1.9f, 2.8f, -1.9f, 7.3f};
  assert_values(y, want, 4, 1e-5);
  tpt_tensor_free(y);
  /* the same variables with a ReLU: reuse by name */
  c.opts.activation = TPT_ACT_RELU;
  y = infer(m, x);
  const float relu[] = {0, 2.8f, 0, 7.3f};
  assert_values(y, relu, 4, 1e-5);
  tpt_tensor_free(y);
  tpt_tensor_free(x);
  tpt_model_free(m);
}

static void test_fc_flattens_and_no_bias(void **state) {
  (void)state;
  ctx c = layer_ctx(FC, "fc", 5);
  c.opts.use_bias = 0;
  const int64_t sx[] = {-1, 3, 2, 2}, sw[] = {5, 12};
  tpt_model *m = harness(&c, sx, 4);
  build(m, &c);
  names_are(m, "fc/W\n");
  var_shape(m, "fc/W", 2, sw);
  const int64_t in[] = {4, 3, 2, 2}, out[] = {4, 5};
  tpt_tensor *x = iota(in, 4, 1), *y = infer(m, x);
  assert_shape(y, 2, out);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_model_free(m);
}

/* ------------------------------------------------------------------ conv2d */

static void test_conv2d_shapes(void **state) {
  (void)state;
  const int64_t in[] = {2, 3, 7, 7};
  struct {
    int64_t k, s, d, g, filters;
    tpt_padding pad;
    int64_t out;
  } cases[] = {
      {3, 1, 1, 1, 4, TPT_PADDING_SAME, 7},  {3, 1, 1, 1, 4, TPT_PADDING_VALID, 5},
      {3, 2, 1, 1, 4, TPT_PADDING_SAME, 4},  {3, 2, 1, 1, 4, TPT_PADDING_VALID, 3},
      {2, 2, 1, 1, 4, TPT_PADDING_SAME, 4},  {2, 2, 1, 1, 4, TPT_PADDING_VALID, 3},
      {3, 1, 2, 1, 4, TPT_PADDING_SAME, 7},  {3, 1, 2, 1, 4, TPT_PADDING_VALID, 3},
      {5, 3, 1, 1, 6, TPT_PADDING_SAME, 3},  {1, 1, 1, 3, 6, TPT_PADDING_SAME, 7},
      {4, 1, 1, 1, 2, TPT_PADDING_SAME, 7},  {3, 3, 2, 1, 2, TPT_PADDING_SAME, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    ctx c = layer_ctx(CONV, "conv", cases[i].filters);
    c.opts.kernel[0] = c.opts.kernel[1] = cases[i].k;
    c.opts.stride[0] = c.opts.stride[1] = cases[i].s;
    c.opts.dilation[0] = c.opts.dilation[1] = cases[i].d;
    c.opts.groups = cases[i].g;
    c.opts.padding = cases[i].pad;
    const int64_t want[] = {2, cases[i].filters, cases[i].out, cases[i].out};
    layer_shape(&c, in, 4, 4, want);
  }
  /* rectangular kernel and stride */
  ctx c = layer_ctx(CONV, "conv", 2);
  c.opts.kernel[0] = 1;
  c.opts.kernel[1] = 3;
  c.opts.stride[0] = 2;
  c.opts.stride[1] = 1;
  c.opts.padding = TPT_PADDING_VALID;
  const int64_t want[] = {2, 2, 4, 5};
  layer_shape(&c, in, 4, 4, want);
}

static void test_conv2d_variables(void **state) {
  (void)state;
  ctx c = layer_ctx(CONV, "conv1", 6);
  c.opts.groups = 2;
  c.opts.kernel[0] = 5;
  c.opts.kernel[1] = 3;
  const int64_t sx[] = {-1, 4, 8, 8}, sw[] = {6, 2, 5, 3}, sb[] = {6};
  tpt_model *m = harness(&c, sx, 4);
  build(m, &c);
  names_are(m, "conv1/W\nconv1/b\n");
  var_shape(m, "conv1/W", 4, sw);
  var_shape(m, "conv1/b", 1, sb);
  var_values(m, "conv1/b", (const float[]){0, 0, 0, 0, 0, 0}, 6, 0);
  tpt_model_free(m);
}

/* a 1-channel image through a 3x3 kernel; returns the output in buf */
static void conv_1ch(const int64_t *in, const float *w, float bias, int64_t stride, tpt_padding pad, float *buf,
                     size_t n, const int64_t *out_shape) {
  ctx c = layer_ctx(CONV, "c", 1);
  c.opts.stride[0] = c.opts.stride[1] = stride;
  c.opts.padding = pad;
  tpt_model *m = harness(&c, in, 4);
  build(m, &c);
  const int64_t sw[] = {1, 1, 3, 3}, sb[] = {1};
  set_var(m, "c/W", w, sw, 4);
  set_var(m, "c/b", &bias, sb, 1);
  tpt_tensor *x = iota(in, 4, 1), *y = infer(m, x);
  assert_shape(y, 4, out_shape);
  read_f32(buf, n, y);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_model_free(m);
}

static void expect_floats(const float *got, const float *want, size_t n, double tol) {
  for (size_t i = 0; i < n; ++i)
    if (!(fabs((double)got[i] - (double)want[i]) <= tol))
      fail_msg("element %zu is %.7g, want %.7g", i, (double)got[i], (double)want[i]);
}

static void test_conv2d_values(void **state) {
  (void)state;
  const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const float right[9] = {0, 0, 0, 0, 0, 1, 0, 0, 0}; /* picks x[i][j + 1]: cross-correlation */
  const int64_t in3[] = {1, 1, 3, 3}, in4[] = {1, 1, 4, 4};
  float out[16];
  /* x = 1..9 in 3x3, SAME: sums of the 3x3 neighbourhoods */
  const int64_t s33[] = {1, 1, 3, 3}, s11[] = {1, 1, 1, 1}, s22[] = {1, 1, 2, 2};
  conv_1ch(in3, ones, 0, 1, TPT_PADDING_SAME, out, 9, s33);
  expect_floats(out, (const float[]){12, 21, 16, 27, 45, 33, 24, 39, 28}, 9, 1e-5);
  conv_1ch(in3, ones, 0.5f, 1, TPT_PADDING_VALID, out, 1, s11);
  expect_floats(out, (const float[]){45.5f}, 1, 1e-5);
  conv_1ch(in3, right, 0, 1, TPT_PADDING_SAME, out, 9, s33);
  expect_floats(out, (const float[]){2, 3, 0, 5, 6, 0, 8, 9, 0}, 9, 1e-6);
  /* stride 2, SAME on 3x3: padding 1 on each side */
  conv_1ch(in3, ones, 0, 2, TPT_PADDING_SAME, out, 4, s22);
  expect_floats(out, (const float[]){12, 16, 24, 28}, 4, 1e-5);
  /* stride 2, SAME on 4x4: one pixel of padding, at the bottom / right (TensorFlow's) */
  conv_1ch(in4, ones, 0, 2, TPT_PADDING_SAME, out, 4, s22);
  expect_floats(out, (const float[]){54, 45, 72, 54}, 4, 1e-5);
}

/* ------------------------------------------------------------------ conv2d_transpose */

static void test_conv2d_transpose(void **state) {
  (void)state;
  const int64_t in[] = {1, 2, 3, 3};
  struct {
    int64_t k, s, d;
    tpt_padding pad;
    int64_t out;
  } cases[] = {
      {3, 2, 1, TPT_PADDING_SAME, 6}, {3, 2, 1, TPT_PADDING_VALID, 7}, {2, 2, 1, TPT_PADDING_SAME, 6},
      {2, 2, 1, TPT_PADDING_VALID, 6}, {1, 2, 1, TPT_PADDING_SAME, 6}, {1, 2, 1, TPT_PADDING_VALID, 6},
      {4, 2, 1, TPT_PADDING_SAME, 6}, {3, 1, 1, TPT_PADDING_SAME, 3}, {3, 1, 1, TPT_PADDING_VALID, 5},
      {3, 3, 2, TPT_PADDING_SAME, 9}, {5, 4, 1, TPT_PADDING_SAME, 12}, {3, 1, 2, TPT_PADDING_VALID, 7},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    ctx c = layer_ctx(DECONV, "deconv", 4);
    c.opts.kernel[0] = c.opts.kernel[1] = cases[i].k;
    c.opts.stride[0] = c.opts.stride[1] = cases[i].s;
    c.opts.dilation[0] = c.opts.dilation[1] = cases[i].d;
    c.opts.padding = cases[i].pad;
    const int64_t want[] = {1, 4, cases[i].out, cases[i].out};
    layer_shape(&c, in, 4, 4, want);
  }
  /* variables: [in, filters / groups, kh, kw] */
  ctx c = layer_ctx(DECONV, "deconv", 4);
  c.opts.groups = 2;
  tpt_model *m = harness(&c, in, 4);
  build(m, &c);
  const int64_t sw[] = {2, 2, 3, 3}, sb[] = {4};
  names_are(m, "deconv/W\ndeconv/b\n");
  var_shape(m, "deconv/W", 4, sw);
  var_shape(m, "deconv/b", 1, sb);
  tpt_model_free(m);
  /* one pixel, kernel 1..9, stride 2, SAME: the top-left 2x2 of the kernel
   * (the transpose of a SAME convolution whose padding is at the bottom / right) */
  ctx d = layer_ctx(DECONV, "d", 1);
  d.opts.stride[0] = d.opts.stride[1] = 2;
  const int64_t one[] = {1, 1, 1, 1}, sw1[] = {1, 1, 3, 3}, sb1[] = {1}, s22[] = {1, 1, 2, 2};
  m = harness(&d, one, 4);
  build(m, &d);
  set_var(m, "d/W", (const float[]){1, 2, 3, 4, 5, 6, 7, 8, 9}, sw1, 4);
  set_var(m, "d/b", (const float[]){0.5f}, sb1, 1);
  tpt_tensor *x = f32((const float[]){2}, one, 4), *y = infer(m, x);
  assert_shape(y, 4, s22);
  assert_values(y, (const float[]){2.5f, 4.5f, 8.5f, 10.5f}, 4, 1e-5);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_model_free(m);
}

/* ------------------------------------------------------------------ pooling */

static void pool_values(int is_max, float sign, int64_t size, int64_t k, int64_t s, tpt_padding pad,
                        const int64_t *out_shape, const float *want, size_t n) {
  const int64_t in[] = {1, 1, size, size};
  tpt_tensor *x = iota(in, 4, sign), *y = NULL;
  ok(is_max ? tpt_layer_max_pool(&y, x, k, s, pad) : tpt_layer_avg_pool(&y, x, k, s, pad));
  assert_shape(y, 4, out_shape);
  assert_values(y, want, n, 1e-5);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
}

static void test_pool_values(void **state) {
  (void)state;
  const int64_t s22[] = {1, 1, 2, 2}, s11[] = {1, 1, 1, 1}, s33[] = {1, 1, 3, 3};
  /* x = 1..9 in 3x3; k 2, s 2, SAME: one pixel of padding at the bottom / right */
  pool_values(1, 1, 3, 2, 2, TPT_PADDING_SAME, s22, (const float[]){5, 6, 8, 9}, 4);
  /* negative values: the padding never wins a maximum (-inf, not 0) */
  pool_values(1, -1, 3, 2, 2, TPT_PADDING_SAME, s22, (const float[]){-1, -3, -7, -9}, 4);
  pool_values(1, -1, 3, 3, 1, TPT_PADDING_SAME, s33, (const float[]){-1, -1, -2, -1, -1, -2, -4, -4, -5}, 9);
  /* averages count the pixels inside the image only */
  pool_values(0, 1, 3, 2, 2, TPT_PADDING_SAME, s22, (const float[]){3, 4.5f, 7.5f, 9}, 4);
  pool_values(0, 1, 3, 3, 1, TPT_PADDING_SAME, s33,
              (const float[]){3, 3.5f, 4, 4.5f, 5, 5.5f, 6, 6.5f, 7}, 9);
  /* VALID */
  pool_values(1, 1, 3, 2, 2, TPT_PADDING_VALID, s11, (const float[]){5}, 1);
  pool_values(0, 1, 3, 2, 2, TPT_PADDING_VALID, s11, (const float[]){3}, 1);
  pool_values(0, 1, 4, 2, 2, TPT_PADDING_VALID, s22, (const float[]){3.5f, 5.5f, 11.5f, 13.5f}, 4);
}

static void test_pool_shapes(void **state) {
  (void)state;
  const int64_t in[] = {2, 3, 7, 7};
  tpt_tensor *x = iota(in, 4, 1), *y = NULL;
  struct {
    int64_t k, s;
    tpt_padding pad;
    int64_t out;
  } cases[] = {{3, 2, TPT_PADDING_SAME, 4}, {3, 2, TPT_PADDING_VALID, 3}, {2, 2, TPT_PADDING_SAME, 4},
               {2, 2, TPT_PADDING_VALID, 3}, {3, 1, TPT_PADDING_SAME, 7}, {7, 7, TPT_PADDING_VALID, 1},
               {4, 3, TPT_PADDING_SAME, 3}, {1, 3, TPT_PADDING_SAME, 3}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int64_t want[] = {2, 3, cases[i].out, cases[i].out};
    ok(tpt_layer_max_pool(&y, x, cases[i].k, cases[i].s, cases[i].pad));
    assert_shape(y, 4, want);
    tpt_tensor_free(y);
    ok(tpt_layer_avg_pool(&y, x, cases[i].k, cases[i].s, cases[i].pad));
    assert_shape(y, 4, want);
    tpt_tensor_free(y);
  }
  ok(tpt_layer_global_avg_pool(&y, x));
  const int64_t g[] = {2, 3};
  assert_shape(y, 2, g);
  /* channel c of image n holds (n * 3 + c) * 49 + 1 .. + 49: mean + 25 */
  assert_values(y, (const float[]){25, 74, 123, 172, 221, 270}, 6, 1e-4);
  tpt_tensor_free(y);
  tpt_tensor_free(x);
}

/* ------------------------------------------------------------------ batch norm */

static void test_batch_norm_variables_and_build(void **state) {
  (void)state;
  ctx c = layer_ctx(BN, "bn", 0);
  const int64_t sx[] = {-1, 3, 4, 4}, sv[] = {3};
  tpt_model *m = harness(&c, sx, 4);
  build(m, &c);
  names_are(m, "bn/gamma\nbn/beta\nbn/mean/EMA\nbn/variance/EMA\n");
  const char *names[] = {"bn/gamma", "bn/beta", "bn/mean/EMA", "bn/variance/EMA"};
  for (int i = 0; i < 4; ++i) var_shape(m, names[i], 1, sv);
  /* initial values; the build call left the moving averages alone */
  var_values(m, "bn/gamma", (const float[]){1, 1, 1}, 3, 0);
  var_values(m, "bn/beta", (const float[]){0, 0, 0}, 3, 0);
  var_values(m, "bn/mean/EMA", (const float[]){0, 0, 0}, 3, 0);
  var_values(m, "bn/variance/EMA", (const float[]){1, 1, 1}, 3, 0);
  tpt_model_free(m);
}

static void test_batch_norm_training_and_ema(void **state) {
  (void)state;
  ctx c = layer_ctx(BN, "bn", 0);
  const int64_t sx[] = {-1, 2};
  tpt_model *m = harness(&c, sx, 2);
  build(m, &c);
  /* channel 0: 1, 2, 3, 4 (mean 2.5, variance 1.25, unbiased 5/3);
   * channel 1: 10, 10, 30, 30 (mean 20, variance 100, unbiased 400/3) */
  const int64_t s42[] = {4, 2};
  tpt_tensor *x = f32((const float[]){1, 10, 2, 10, 3, 30, 4, 30}, s42, 2);
  train(m, x, 4, 1, 0.0, &c);
  assert_int_equal(c.trainings, 1);
  double s0 = sqrt(1.25 + 1e-5), s1 = sqrt(100 + 1e-5);
  const float want[] = {(float)(-1.5 / s0), (float)(-10 / s1), (float)(-0.5 / s0), (float)(-10 / s1),
                        (float)(0.5 / s0),  (float)(10 / s1),  (float)(1.5 / s0),  (float)(10 / s1)};
  assert_int_equal(c.got_n, 8);
  expect_floats(c.got, want, 8, 1e-5);
  /* ema = 0.9 ema + 0.1 batch, the unbiased variance */
  var_values(m, "bn/mean/EMA", (const float[]){0.25f, 2.0f}, 2, 1e-6);
  var_values(m, "bn/variance/EMA", (const float[]){(float)(0.9 + 0.1 * 5 / 3.0), (float)(0.9 + 0.1 * 400 / 3.0)}, 2,
             1e-5);
  /* a second run of two steps on the same batch */
  train(m, x, 4, 2, 0.0, &c);
  assert_int_equal(c.trainings, 3);
  double m0 = 0.25, m1 = 2, v0 = 0.9 + 0.1 * 5 / 3.0, v1 = 0.9 + 0.1 * 400 / 3.0;
  for (int i = 0; i < 2; ++i) {
    m0 = 0.9 * m0 + 0.1 * 2.5;
    m1 = 0.9 * m1 + 0.1 * 20;
    v0 = 0.9 * v0 + 0.1 * 5 / 3.0;
    v1 = 0.9 * v1 + 0.1 * 400 / 3.0;
  }
  var_values(m, "bn/mean/EMA", (const float[]){(float)m0, (float)m1}, 2, 1e-5);
  var_values(m, "bn/variance/EMA", (const float[]){(float)v0, (float)v1}, 2, 1e-4);
  /* inference uses the moving averages and changes nothing */
  tpt_tensor *y = infer(m, x);
  float got[8];
  read_f32(got, 8, y);
  const float xs[] = {1, 10, 2, 10, 3, 30, 4, 30};
  for (int i = 0; i < 8; ++i) {
    double mean = i % 2 ? m1 : m0, var = i % 2 ? v1 : v0;
    double w = (xs[i] - mean) / sqrt(var + 1e-5);
    if (fabs(got[i] - w) > 1e-4) fail_msg("inference element %d is %g, want %g", i, (double)got[i], w);
  }
  tpt_tensor_free(y);
  var_values(m, "bn/mean/EMA", (const float[]){(float)m0, (float)m1}, 2, 1e-5);
  var_values(m, "bn/variance/EMA", (const float[]){(float)v0, (float)v1}, 2, 1e-4);
  tpt_tensor_free(x);
  tpt_model_free(m);
}

static void test_batch_norm_inference_values(void **state) {
  (void)state;
  ctx c = layer_ctx(BN, "bn", 0);
  c.a = 0.99;
  c.b = 1e-3;
  const int64_t sx[] = {-1, 2, 1, 2}, sv[] = {2};
  tpt_model *m = harness(&c, sx, 4);
  build(m, &c);
  set_var(m, "bn/gamma", (const float[]){2, 1}, sv, 1);
  set_var(m, "bn/beta", (const float[]){0, 0.5f}, sv, 1);
  set_var(m, "bn/mean/EMA", (const float[]){1, -1}, sv, 1);
  set_var(m, "bn/variance/EMA", (const float[]){4, 0.25f}, sv, 1);
  const int64_t s[] = {1, 2, 1, 2};
  tpt_tensor *x = f32((const float[]){3, 5, 0, -2}, s, 4), *y = infer(m, x);
  double a = sqrt(4 + 1e-3), b = sqrt(0.25 + 1e-3);
  assert_values(y, (const float[]){(float)(2 * 2 / a), (float)(2 * 4 / a), (float)(1 / b + 0.5), (float)(-1 / b + 0.5)},
                4, 1e-5);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_model_free(m);
}

/* ------------------------------------------------------------------ layer norm, dropout */

static void test_layer_norm(void **state) {
  (void)state;
  ctx c = layer_ctx(LN, "ln", 0);
  const int64_t sx[] = {-1, 4}, sv[] = {4};
  tpt_model *m = harness(&c, sx, 2);
  build(m, &c);
  names_are(m, "ln/gamma\nln/beta\n");
  var_shape(m, "ln/gamma", 1, sv);
  set_var(m, "ln/beta", (const float[]){0, 0, 0, 1}, sv, 1);
  const int64_t s[] = {2, 4};
  tpt_tensor *x = f32((const float[]){1, 2, 3, 4, 2, 2, 2, 2}, s, 2), *y = infer(m, x);
  double sd = sqrt(1.25 + 1e-5);
  assert_values(y, (const float[]){(float)(-1.5 / sd), (float)(-0.5 / sd), (float)(0.5 / sd), (float)(1.5 / sd + 1), 0,
                                   0, 0, 1},
                8, 1e-5);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_model_free(m);
}

/* Over C, H, W with per-channel gamma and beta, by hand: x [2, 2, 1, 2]. */
static void test_layer_norm_axes(void **state) {
  (void)state;
  ctx c = layer_ctx(LN_AXES, "ln", 0);
  c.b = 1e-5;
  const int64_t sx[] = {-1, 2, 1, 2}, sv[] = {2};
  tpt_model *m = harness(&c, sx, 4);
  build(m, &c);
  names_are(m, "ln/gamma\nln/beta\n");
  var_shape(m, "ln/gamma", 1, sv);
  set_var(m, "ln/gamma", (const float[]){2, 1}, sv, 1);
  set_var(m, "ln/beta", (const float[]){0, 10}, sv, 1);
  const int64_t s[] = {2, 2, 1, 2};
  const float xv[] = {1, 2, 3, 6, /* example 2: constant */ 5, 5, 5, 5};
  tpt_tensor *x = f32(xv, s, 4), *y = infer(m, x);
  /* example 1: mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5 */
  double sd = sqrt(3.5 + 1e-5);
  float want[8];
  const float gamma[] = {2, 1}, beta[] = {0, 10};
  for (int i = 0; i < 4; ++i) want[i] = (float)((xv[i] - 3) / sd * gamma[i / 2] + beta[i / 2]);
  for (int i = 4; i < 8; ++i) want[i] = beta[(i - 4) / 2]; /* zero variance: (x - mean) is 0 */
  assert_values(y, want, 8, 1e-5);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_model_free(m);
}

/* Its argument errors, from a tower. */
static tpt_status *ln_axes_errors(ctx *c, tpt_tower *tw, const tpt_tensor *x, tpt_tensor **y) {
  const tpt_code BAD = TPT_ERR_INVALID_ARGUMENT;
  tpt_tensor *out = NULL;
  const int64_t bad[] = {1, 4}, twice[] = {1, -3}, ok_axes[] = {1, 2, 3};
  EXPECT(c, tpt_layer_layer_norm_axes(&out, tw, "ln", x, bad, 2, 1, 1e-5), BAD, "axes[1] is 4 but x has 4 dimensions [");
  EXPECT(c, tpt_layer_layer_norm_axes(&out, tw, "ln", x, twice, 2, 1, 1e-5), BAD, "axis 1 is given twice");
  EXPECT(c, tpt_layer_layer_norm_axes(&out, tw, "ln", x, ok_axes, 0, 1, 1e-5), BAD, "axes is empty");
  EXPECT(c, tpt_layer_layer_norm_axes(&out, tw, "ln", x, NULL, 3, 1, 1e-5), BAD, "argument 'axes' is NULL");
  EXPECT(c, tpt_layer_layer_norm_axes(&out, tw, "ln", x, ok_axes, 3, 7, 1e-5), BAD, "channel_axis is 7");
  EXPECT(c, tpt_layer_layer_norm_axes(&out, tw, "ln", x, ok_axes, 3, 1, 0), BAD, "eps must be > 0");
  return tpt_layer_layer_norm_axes(y, tw, "ln", x, ok_axes, 3, -3, 1e-5);
}

static void test_layer_norm_axes_errors(void **state) {
  (void)state;
  ctx c = layer_ctx(LN_AXES, "ln", 0);
  c.body = ln_axes_errors;
  const int64_t sx[] = {-1, 2, 1, 2};
  tpt_model *m = harness(&c, sx, 4);
  build(m, &c);
  tpt_model_free(m);
}

/* dropout after an fc layer (something to train) */
static tpt_status *fc_dropout(ctx *c, tpt_tower *tw, const tpt_tensor *x, tpt_tensor **y) {
  tpt_tensor *h = NULL;
  tpt_status *st = tpt_layer_fc(&h, tw, "fc", x, 64, &c->opts);
  if (!st) st = tpt_layer_dropout(y, tw, h, c->a);
  tpt_tensor_free(h);
  return st;
}

static void test_dropout(void **state) {
  (void)state;
  ctx c = layer_ctx(DROPOUT, "", 0);
  c.body = fc_dropout;
  c.a = 0.5;
  c.opts.use_bias = 0;
  c.opts.kernel_init = TPT_INIT_ZEROS;
  const int64_t sx[] = {-1, 1}, sw[] = {64, 1};
  tpt_model *m = harness(&c, sx, 2);
  build(m, &c);
  float w[64];
  for (int i = 0; i < 64; ++i) w[i] = (float)(i + 1);
  set_var(m, "fc/W", w, sw, 2);
  /* inference: the identity */
  const int64_t s[] = {1, 1};
  tpt_tensor *x = f32((const float[]){1}, s, 2), *y = infer(m, x);
  assert_values(y, w, 64, 0);
  tpt_tensor_free(y);
  /* training: each element dropped (0) or kept and scaled by 1 / (1 - rate) */
  ok(tpt_manual_seed(3));
  train(m, x, 1, 1, 0.0, &c);
  assert_int_equal(c.got_n, 64);
  int dropped = 0;
  for (int i = 0; i < 64; ++i) {
    if (c.got[i] == 0)
      dropped++;
    else if (fabsf(c.got[i] - 2 * w[i]) > 1e-4f)
      fail_msg("element %d is %g, want 0 or %g", i, (double)c.got[i], 2.0 * w[i]);
  }
  assert_true(dropped > 8 && dropped < 56);
  tpt_tensor_free(x);
  tpt_model_free(m);
}

/* ------------------------------------------------------------------ activations and shapes */

static void test_activations(void **state) {
  (void)state;
  const int64_t s[] = {2, 2};
  tpt_tensor *x = f32((const float[]){-2, 0, 1, 3}, s, 2), *y = NULL;
  struct {
    tpt_activation act;
    float want[4];
  } cases[] = {
      {TPT_ACT_NONE, {-2, 0, 1, 3}},
      {TPT_ACT_RELU, {0, 0, 1, 3}},
      {TPT_ACT_LEAKY_RELU, {-0.2f, 0, 1, 3}},
      {TPT_ACT_SIGMOID, {(float)(1 / (1 + exp(2.0))), 0.5f, (float)(1 / (1 + exp(-1.0))), (float)(1 / (1 + exp(-3.0)))}},
      {TPT_ACT_TANH, {(float)tanh(-2.0), 0, (float)tanh(1.0), (float)tanh(3.0)}},
      {TPT_ACT_GELU, {(float)(-2 * 0.5 * (1 + erf(-2 / sqrt(2.0)))), 0, (float)(0.5 * (1 + erf(1 / sqrt(2.0)))),
                      (float)(3 * 0.5 * (1 + erf(3 / sqrt(2.0))))}},
      {TPT_ACT_SOFTMAX, {(float)(exp(-2.0) / (exp(-2.0) + 1)), (float)(1 / (exp(-2.0) + 1)),
                         (float)(exp(1.0) / (exp(1.0) + exp(3.0))), (float)(exp(3.0) / (exp(1.0) + exp(3.0)))}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    ok(tpt_layer_activation(&y, x, cases[i].act, 0.1));
    assert_shape(y, 2, s);
    assert_values(y, cases[i].want, 4, 1e-5);
    tpt_tensor_free(y);
  }
  expect_code(tpt_layer_activation(&y, x, (tpt_activation)42, 0.1), TPT_ERR_INVALID_ARGUMENT,
              "activation 42 is not a tpt_activation");
  assert_null(y);
  tpt_tensor *v = f32((const float[]){1, 2}, s, 1);
  expect_code(tpt_layer_activation(&y, v, TPT_ACT_SOFTMAX, 0), TPT_ERR_INVALID_ARGUMENT, "dimension 1");
  tpt_tensor_free(v);
  tpt_tensor_free(x);
}

static void test_flatten_and_concat(void **state) {
  (void)state;
  const int64_t s[] = {2, 3, 4}, f[] = {2, 12};
  tpt_tensor *x = iota(s, 3, 1), *y = NULL;
  ok(tpt_layer_flatten(&y, x));
  assert_shape(y, 2, f);
  tpt_tensor_free(y);
  tpt_tensor_free(x);
  const int64_t s1[] = {3}, f1[] = {3, 1};
  x = iota(s1, 1, 1);
  ok(tpt_layer_flatten(&y, x));
  assert_shape(y, 2, f1);
  tpt_tensor_free(y);
  tpt_tensor_free(x);
  float one = 1;
  x = f32(&one, NULL, 0);
  expect_code(tpt_layer_flatten(&y, x), TPT_ERR_INVALID_ARGUMENT, "0-d");
  tpt_tensor_free(x);

  const int64_t sa[] = {2, 2}, sb[] = {2, 1}, sc[] = {3, 2};
  tpt_tensor *a = f32((const float[]){1, 2, 3, 4}, sa, 2), *b = f32((const float[]){5, 6}, sb, 2),
             *c = iota(sc, 2, 1);
  const tpt_tensor *ab[] = {a, b};
  ok(tpt_layer_concat(&y, ab, 2, 1));
  const int64_t sab[] = {2, 3};
  assert_shape(y, 2, sab);
  assert_values(y, (const float[]){1, 2, 5, 3, 4, 6}, 6, 0);
  tpt_tensor_free(y);
  ok(tpt_layer_concat(&y, ab, 2, -1));
  assert_shape(y, 2, sab);
  tpt_tensor_free(y);
  const tpt_tensor *ac[] = {a, c};
  ok(tpt_layer_concat(&y, ac, 2, 0));
  const int64_t sac[] = {5, 2};
  assert_shape(y, 2, sac);
  tpt_tensor_free(y);
  expect_code(tpt_layer_concat(&y, ab, 2, 0), TPT_ERR_INVALID_ARGUMENT, "only dimension 0 may differ");
  expect_code(tpt_layer_concat(&y, ab, 2, 2), TPT_ERR_INVALID_ARGUMENT, "dim 2 is out of range");
  expect_code(tpt_layer_concat(&y, ab, 0, 0), TPT_ERR_INVALID_ARGUMENT, "n is 0");
  expect_code(tpt_layer_concat(&y, NULL, 2, 0), TPT_ERR_INVALID_ARGUMENT, "argument 'xs' is NULL");
  const tpt_tensor *anull[] = {a, NULL};
  expect_code(tpt_layer_concat(&y, anull, 2, 0), TPT_ERR_INVALID_ARGUMENT, "argument 'xs[1]' is NULL");
  expect_code(tpt_layer_concat(NULL, ab, 2, 0), TPT_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
  tpt_tensor_free(a);
  tpt_tensor_free(b);
  tpt_tensor_free(c);
}

/* ------------------------------------------------------------------ losses and metrics */

static void test_losses(void **state) {
  (void)state;
  const int64_t s23[] = {2, 3}, s2[] = {2}, s3[] = {3};
  tpt_tensor *logits = f32((const float[]){1, 2, 3, 1, 1, 1}, s23, 2), *labels = i64((const int64_t[]){2, 0}, s2, 1),
             *y = NULL;
  /* log(1 + e^-1 + e^-2) and log 3, averaged */
  ok(tpt_loss_softmax_cross_entropy(&y, logits, labels));
  size_t nd = 9;
  ok(tpt_tensor_ndim(&nd, y));
  assert_int_equal(nd, 0);
  assert_float_equal(scalar(y), (log(1 + exp(-1.0) + exp(-2.0)) + log(3.0)) / 2, 1e-6);
  tpt_tensor_free(y);

  tpt_tensor *z = f32((const float[]){0, 2}, s2, 1), *t = f32((const float[]){1, 0}, s2, 1);
  ok(tpt_loss_sigmoid_cross_entropy(&y, z, t));
  assert_float_equal(scalar(y), (log(2.0) + 2 + log(1 + exp(-2.0))) / 2, 1e-6);
  tpt_tensor_free(y);
  /* integer targets are taken as numbers */
  tpt_tensor *ti = i64((const int64_t[]){1, 0}, s2, 1);
  ok(tpt_loss_sigmoid_cross_entropy(&y, z, ti));
  assert_float_equal(scalar(y), (log(2.0) + 2 + log(1 + exp(-2.0))) / 2, 1e-6);
  tpt_tensor_free(y);
  tpt_tensor_free(ti);

  tpt_tensor *p = f32((const float[]){1, 2, 3}, s3, 1), *q = f32((const float[]){1, 0, 0}, s3, 1);
  ok(tpt_loss_mse(&y, p, q));
  assert_float_equal(scalar(y), 13.0 / 3, 1e-6);
  tpt_tensor_free(y);
  ok(tpt_loss_l1(&y, p, q));
  assert_float_equal(scalar(y), 5.0 / 3, 1e-6);
  tpt_tensor_free(y);

  /* bad input */
  tpt_tensor *l32 = NULL, *wide = i64((const int64_t[]){2, 0}, (const int64_t[]){2, 1}, 2),
             *three = i64((const int64_t[]){0, 1, 2}, s3, 1), *out_of_range = i64((const int64_t[]){3, 0}, s2, 1);
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_I32;
  ok(tpt_tensor_from_data(&l32, (const int32_t[]){2, 0}, 2 * sizeof(int32_t), s2, 1, &o));
  expect_code(tpt_loss_softmax_cross_entropy(&y, logits, l32), TPT_ERR_INVALID_ARGUMENT,
              "labels must be i64 class indices, got i32 [2]");
  assert_null(y);
  expect_code(tpt_loss_softmax_cross_entropy(&y, logits, z), TPT_ERR_INVALID_ARGUMENT, "labels must be i64");
  expect_code(tpt_loss_softmax_cross_entropy(&y, logits, wide), TPT_ERR_INVALID_ARGUMENT,
              "labels must be [N] = [2] for logits [2, 3], got [2, 1]");
  expect_code(tpt_loss_softmax_cross_entropy(&y, logits, three), TPT_ERR_INVALID_ARGUMENT, "got [3]");
  expect_code(tpt_loss_softmax_cross_entropy(&y, logits, out_of_range), TPT_ERR_INVALID_ARGUMENT, "[0, 3), got 3");
  expect_code(tpt_loss_softmax_cross_entropy(&y, p, three), TPT_ERR_INVALID_ARGUMENT, "logits must be [N, K], got [3]");
  expect_code(tpt_loss_softmax_cross_entropy(&y, labels, labels), TPT_ERR_INVALID_ARGUMENT,
              "logits must be floating point");
  expect_code(tpt_loss_mse(&y, p, z), TPT_ERR_INVALID_ARGUMENT, "target must have the shape of prediction [3], got [2]");
  expect_code(tpt_loss_l1(&y, p, logits), TPT_ERR_INVALID_ARGUMENT, "l1: target must have the shape");
  expect_code(tpt_loss_sigmoid_cross_entropy(&y, z, p), TPT_ERR_INVALID_ARGUMENT, "targets must have the shape");
  expect_code(tpt_metric_accuracy(&y, logits, l32), TPT_ERR_INVALID_ARGUMENT, "accuracy: labels must be i64");
  tpt_tensor_free(l32);
  tpt_tensor_free(wide);
  tpt_tensor_free(three);
  tpt_tensor_free(out_of_range);
  tpt_tensor_free(p);
  tpt_tensor_free(q);
  tpt_tensor_free(z);
  tpt_tensor_free(t);
  tpt_tensor_free(logits);
  tpt_tensor_free(labels);
}

static void test_metrics(void **state) {
  (void)state;
  const int64_t s32[] = {3, 2}, s3[] = {3};
  tpt_tensor *logits = f32((const float[]){0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}, s32, 2),
             *labels = i64((const int64_t[]){1, 1, 1}, s3, 1), *y = NULL;
  ok(tpt_metric_accuracy(&y, logits, labels));
  tpt_dtype dt;
  ok(tpt_tensor_dtype(&dt, y));
  assert_int_equal(dt, TPT_DTYPE_F32);
  assert_float_equal(scalar(y), 2.0 / 3, 1e-6);
  tpt_tensor_free(y);
  ok(tpt_metric_wrong(&y, logits, labels, 1));
  assert_shape(y, 1, s3);
  assert_values(y, (const float[]){0, 1, 0}, 3, 0);
  tpt_tensor_free(y);
  ok(tpt_metric_wrong(&y, logits, labels, 2));
  assert_values(y, (const float[]){0, 0, 0}, 3, 0);
  tpt_tensor_free(y);
  tpt_tensor_free(logits);
  tpt_tensor_free(labels);

  /* top-2 of 4 classes; ties at the boundary count in (TensorFlow's in_top_k);
   * a row with a non-finite logit is wrong */
  const int64_t s44[] = {4, 4}, s4[] = {4};
  logits = f32((const float[]){4, 3, 2, 1, /**/ 4, 3, 2, 1, /**/ 1, 2, 2, 2, /**/ 1, 5, 0, NAN}, s44, 2);
  labels = i64((const int64_t[]){1, 2, 1, 1}, s4, 1);
  ok(tpt_metric_wrong(&y, logits, labels, 2));
  assert_values(y, (const float[]){0, 1, 0, 1}, 4, 0);
  tpt_tensor_free(y);
  expect_code(tpt_metric_wrong(&y, logits, labels, 0), TPT_ERR_INVALID_ARGUMENT, "k must be >= 1, got 0");
  tpt_tensor_free(logits);
  tpt_tensor_free(labels);
}

/* ------------------------------------------------------------------ regularisation */

static tpt_status *fc_and_l2(ctx *c, tpt_tower *tw, const tpt_tensor *x, tpt_tensor **y) {
  tpt_tensor *h = NULL, *h2 = NULL, *none = NULL;
  tpt_status *st = NULL;
  if ((st = tpt_layer_fc(&h, tw, "fc1", x, 2, NULL))) goto done;
  if ((st = tpt_layer_batch_norm(&h2, tw, "bn", h, 0.9, 1e-5))) goto done;
  if ((st = tpt_regularize_l2(&none, tw, "^nothing$", 1.0))) goto done;
  double zero = -1;
  if ((st = tpt_tensor_item(&zero, none))) goto done;
  if (zero != 0) record(c, __LINE__, "a pattern that matches nothing gives %g", zero);
  tpt_tensor_free(none);
  none = NULL;
  EXPECT(c, tpt_regularize_l2(&none, tw, "(", 1.0), TPT_ERR_INVALID_ARGUMENT, "pattern '(' is not a regular expression");
  EXPECT(c, tpt_regularize_l2(&none, tw, "W", INFINITY), TPT_ERR_INVALID_ARGUMENT, "weight must be finite");
  st = tpt_regularize_l2(y, tw, c->name, c->a);
done:
  tpt_tensor_free(h);
  tpt_tensor_free(h2);
  tpt_tensor_free(none);
  return st;
}

static void test_regularize_l2(void **state) {
  (void)state;
  ctx c = layer_ctx(FC, "/W$", 0);
  c.body = fc_and_l2;
  c.a = 0.5;
  const int64_t sx[] = {-1, 2}, sw[] = {2, 2}, sb[] = {2};
  tpt_model *m = harness(&c, sx, 2);
  build(m, &c);
  set_var(m, "fc1/W", (const float[]){1, 2, 3, 4}, sw, 2);
  set_var(m, "fc1/b", (const float[]){5, 6}, sb, 1);
  const int64_t s[] = {2, 2};
  tpt_tensor *x = f32((const float[]){1, 2, 3, 4}, s, 2), *y = infer(m, x);
  assert_float_equal(scalar(y), 0.5 * 30, 1e-5);
  tpt_tensor_free(y);
  /* "b" (searched) matches the trainable fc1/b (25 + 36), bn/gamma (1 + 1) and
   * bn/beta (0), not the model-only bn/mean/EMA and bn/variance/EMA (1 + 1) */
  c.name = "b";
  c.a = 2;
  y = infer(m, x);
  assert_float_equal(scalar(y), 2 * (25 + 36 + 1 + 1), 1e-4);
  tpt_tensor_free(y);
  /* gradients flow: the cost 0.5 |W|^2 and SGD 0.1 shrink W by 0.9 per step */
  c.name = "fc1/W";
  c.a = 0.5;
  train(m, x, 2, 1, 0.1, &c);
  var_values(m, "fc1/W", (const float[]){0.9f, 1.8f, 2.7f, 3.6f}, 4, 1e-6);
  var_values(m, "fc1/b", (const float[]){5, 6}, 2, 0);
  tpt_tensor_free(x);
  tpt_model_free(m);
}

/* ------------------------------------------------------------------ bad input inside a tower */

static tpt_status *bad_input(ctx *c, tpt_tower *tw, const tpt_tensor *x, tpt_tensor **y) {
  (void)y;
  tpt_tensor *out = NULL;
  const int64_t s2[] = {3, 4};
  tpt_tensor *flat = iota(s2, 2, 1);
  tpt_layer_options o = TPT_LAYER_OPTIONS_INIT;
  const tpt_code BAD = TPT_ERR_INVALID_ARGUMENT;

  /* NULL for every pointer */
  EXPECT(c, tpt_layer_fc(NULL, tw, "f", x, 2, NULL), BAD, "tpt_layer_fc: argument 'out' is NULL");
  EXPECT(c, tpt_layer_fc(&out, NULL, "f", x, 2, NULL), BAD, "argument 'tower' is NULL");
  EXPECT(c, tpt_layer_fc(&out, tw, NULL, x, 2, NULL), BAD, "argument 'name' is NULL");
  EXPECT(c, tpt_layer_fc(&out, tw, "", x, 2, NULL), BAD, "argument 'name' is empty");
  EXPECT(c, tpt_layer_fc(&out, tw, "f", NULL, 2, NULL), BAD, "argument 'x' is NULL");
  EXPECT(c, tpt_layer_conv2d(NULL, tw, "c", x, 2, NULL), BAD, "tpt_layer_conv2d: argument 'out' is NULL");
  EXPECT(c, tpt_layer_conv2d(&out, NULL, "c", x, 2, NULL), BAD, "argument 'tower' is NULL");
  EXPECT(c, tpt_layer_conv2d(&out, tw, NULL, x, 2, NULL), BAD, "argument 'name' is NULL");
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", NULL, 2, NULL), BAD, "argument 'x' is NULL");
  EXPECT(c, tpt_layer_conv2d_transpose(NULL, tw, "d", x, 2, NULL), BAD, "argument 'out' is NULL");
  EXPECT(c, tpt_layer_conv2d_transpose(&out, NULL, "d", x, 2, NULL), BAD, "argument 'tower' is NULL");
  EXPECT(c, tpt_layer_conv2d_transpose(&out, tw, NULL, x, 2, NULL), BAD, "argument 'name' is NULL");
  EXPECT(c, tpt_layer_conv2d_transpose(&out, tw, "d", NULL, 2, NULL), BAD, "argument 'x' is NULL");
  EXPECT(c, tpt_layer_batch_norm(NULL, tw, "bn", x, 0.9, 1e-5), BAD, "argument 'out' is NULL");
  EXPECT(c, tpt_layer_batch_norm(&out, NULL, "bn", x, 0.9, 1e-5), BAD, "argument 'tower' is NULL");
  EXPECT(c, tpt_layer_batch_norm(&out, tw, NULL, x, 0.9, 1e-5), BAD, "argument 'name' is NULL");
  EXPECT(c, tpt_layer_batch_norm(&out, tw, "bn", NULL, 0.9, 1e-5), BAD, "argument 'x' is NULL");
  EXPECT(c, tpt_layer_layer_norm(NULL, tw, "ln", x, 1e-5), BAD, "argument 'out' is NULL");
  EXPECT(c, tpt_layer_layer_norm(&out, NULL, "ln", x, 1e-5), BAD, "argument 'tower' is NULL");
  EXPECT(c, tpt_layer_layer_norm(&out, tw, NULL, x, 1e-5), BAD, "argument 'name' is NULL");
  EXPECT(c, tpt_layer_layer_norm(&out, tw, "ln", NULL, 1e-5), BAD, "argument 'x' is NULL");
  EXPECT(c, tpt_layer_dropout(NULL, tw, x, 0.5), BAD, "argument 'out' is NULL");
  EXPECT(c, tpt_layer_dropout(&out, NULL, x, 0.5), BAD, "argument 'tower' is NULL");
  EXPECT(c, tpt_layer_dropout(&out, tw, NULL, 0.5), BAD, "argument 'x' is NULL");
  EXPECT(c, tpt_regularize_l2(NULL, tw, "W", 1), BAD, "argument 'out' is NULL");
  EXPECT(c, tpt_regularize_l2(&out, NULL, "W", 1), BAD, "argument 'tower' is NULL");
  EXPECT(c, tpt_regularize_l2(&out, tw, NULL, 1), BAD, "tpt_regularize_l2: argument 'pattern' is NULL");

  /* options */
  o.version = 0;
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", x, 2, &o), BAD, "options->version is 0 (initialise with TPT_LAYER_OPTIONS_INIT)");
  o.version = TPT_LAYER_OPTIONS_VERSION + 1;
  EXPECT(c, tpt_layer_fc(&out, tw, "f", x, 2, &o), BAD, "TPT_LAYER_OPTIONS_INIT");
  tpt_layer_options k0 = TPT_LAYER_OPTIONS_INIT;
  k0.kernel[1] = 0;
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", x, 2, &k0), BAD, "options->kernel[1] is 0 (must be >= 1)");
  tpt_layer_options s0 = TPT_LAYER_OPTIONS_INIT;
  s0.stride[0] = -1;
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", x, 2, &s0), BAD, "options->stride[0] is -1");
  tpt_layer_options d0 = TPT_LAYER_OPTIONS_INIT;
  d0.dilation[0] = 0;
  EXPECT(c, tpt_layer_conv2d_transpose(&out, tw, "d", x, 2, &d0), BAD, "options->dilation[0] is 0");
  tpt_layer_options g0 = TPT_LAYER_OPTIONS_INIT;
  g0.groups = 0;
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", x, 2, &g0), BAD, "options->groups is 0");
  g0.groups = 3;
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", x, 2, &g0), BAD, "groups 3 must divide the input channels (2)");
  tpt_layer_options p0 = TPT_LAYER_OPTIONS_INIT;
  p0.padding = (tpt_padding)7;
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", x, 2, &p0), BAD, "options->padding 7 is not a tpt_padding");
  tpt_layer_options a0 = TPT_LAYER_OPTIONS_INIT;
  a0.activation = (tpt_activation)9;
  EXPECT(c, tpt_layer_fc(&out, tw, "f", x, 2, &a0), BAD, "options->activation 9 is not a tpt_activation");
  tpt_layer_options i0 = TPT_LAYER_OPTIONS_INIT;
  i0.kernel_init = (tpt_init)0;
  EXPECT(c, tpt_layer_fc(&out, tw, "f", x, 2, &i0), BAD, "options->kernel_init 0 is not a tpt_init");
  i0.kernel_init = TPT_INIT_HE_NORMAL;
  i0.bias_init = (tpt_init)10;
  EXPECT(c, tpt_layer_fc(&out, tw, "f", x, 2, &i0), BAD, "options->bias_init 10 is not a tpt_init");
  EXPECT(c, tpt_layer_fc(&out, tw, "f", x, 0, NULL), BAD, "units is 0 (must be >= 1)");
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", x, -2, NULL), BAD, "filters is -2 (must be >= 1)");
  EXPECT(c, tpt_layer_conv2d_transpose(&out, tw, "d", x, 0, NULL), BAD, "filters is 0");
  EXPECT(c, tpt_layer_batch_norm(&out, tw, "bn", x, 1.5, 1e-5), BAD, "momentum must be in [0, 1], got 1.5");
  EXPECT(c, tpt_layer_batch_norm(&out, tw, "bn", x, -0.1, 1e-5), BAD, "momentum must be in [0, 1]");
  EXPECT(c, tpt_layer_batch_norm(&out, tw, "bn", x, 0.9, 0), BAD, "eps must be > 0, got 0");
  EXPECT(c, tpt_layer_layer_norm(&out, tw, "ln", x, -1), BAD, "eps must be > 0");
  EXPECT(c, tpt_layer_dropout(&out, tw, x, 1.0), BAD, "rate must be in [0, 1), got 1");
  EXPECT(c, tpt_layer_dropout(&out, tw, x, -0.5), BAD, "rate must be in [0, 1)");

  /* ranks */
  EXPECT(c, tpt_layer_conv2d(&out, tw, "conv1", flat, 2, NULL), BAD,
         "tpt_layer_conv2d: conv2d 'conv1': x must be [N, C, H, W], got [3, 4]");
  EXPECT(c, tpt_layer_conv2d_transpose(&out, tw, "up", flat, 2, NULL), BAD,
         "conv2d_transpose 'up': x must be [N, C, H, W], got [3, 4]");
  tpt_layer_options valid = TPT_LAYER_OPTIONS_INIT;
  valid.padding = TPT_PADDING_VALID;
  valid.kernel[0] = 5;
  EXPECT(c, tpt_layer_conv2d(&out, tw, "c", x, 2, &valid), BAD, "is smaller than the kernel 5x3");
  tpt_tensor *v1 = iota((const int64_t[]){4}, 1, 1);
  EXPECT(c, tpt_layer_fc(&out, tw, "f", v1, 2, NULL), BAD, "fc 'f': x must be [N, in]");
  EXPECT(c, tpt_layer_batch_norm(&out, tw, "bn", v1, 0.9, 1e-5), BAD, "batch_norm 'bn': x must be [N, C] or [N, C, H, W], got [4]");
  tpt_tensor_free(v1);
  tpt_tensor *ints = NULL;
  tpt_tensor_options io = TPT_TENSOR_OPTIONS_INIT;
  io.dtype = TPT_DTYPE_I64;
  if (!tpt_tensor_from_data(&ints, (const int64_t[]){1, 2, 3, 4}, 4 * sizeof(int64_t), (const int64_t[]){2, 2}, 2, &io)) {
    EXPECT(c, tpt_layer_fc(&out, tw, "f", ints, 2, NULL), BAD, "fc 'f': x must be floating point, got i64 [2, 2]");
    tpt_tensor_free(ints);
  }
  /* a name that is not a scope */
  EXPECT(c, tpt_layer_fc(&out, tw, "a/b", flat, 2, NULL), BAD, "scope 'a/b'");

  /* the scope is popped when a layer fails inside it: "f" is used twice */
  tpt_tensor *h = NULL, *v = NULL;
  tpt_status *st = tpt_layer_fc(&h, tw, "f", flat, 2, NULL);
  if (st) {
    tpt_tensor_free(flat);
    return st;
  }
  EXPECT(c, tpt_layer_fc(&out, tw, "f", flat, 2, NULL), BAD, "variable 'f/W' is used twice");
  st = tpt_tower_variable(&v, tw, "after", (const int64_t[]){1}, 1, NULL);
  /* a reuse scope (auto_reuse_variable_scope): a net applied twice shares
   * its variables, and gives the same result on the same input */
  tpt_tensor *r1 = NULL, *r2 = NULL;
  if (!st) st = tpt_tower_push_reuse_scope(tw, "r");
  if (!st) st = tpt_layer_fc(&r1, tw, "g", flat, 2, NULL);
  if (!st) st = tpt_layer_fc(&r2, tw, "g", flat, 2, NULL);
  if (!st) st = tpt_tower_pop_scope(tw);
  float a1[6] = {0}, a2[6] = {1};
  if (!st) st = tpt_tensor_copy_to(a1, sizeof a1, r1);
  if (!st) st = tpt_tensor_copy_to(a2, sizeof a2, r2);
  if (!st && memcmp(a1, a2, sizeof a1) != 0) record(c, __LINE__, "the reuse scope's two applications differ");
  /* closed: a third use of r/g is an error again */
  if (!st) st = tpt_tower_push_scope(tw, "r");
  if (!st) EXPECT(c, tpt_layer_fc(&out, tw, "g", flat, 2, NULL), BAD, "variable 'r/g/W' is used twice");
  if (!st) st = tpt_tower_pop_scope(tw);
  tpt_tensor_free(r1);
  tpt_tensor_free(r2);
  tpt_tensor_free(h);
  tpt_tensor_free(v);
  tpt_tensor_free(flat);
  if (out) record(c, __LINE__, "a failed call left *out set");
  return st;
}

static void test_bad_input_in_tower(void **state) {
  (void)state;
  ctx c = layer_ctx(FC, "", 0);
  c.body = bad_input;
  const int64_t sx[] = {-1, 2, 4, 3};
  tpt_model *m = harness(&c, sx, 4);
  build(m, &c);
  names_are(m, "f/W\nf/b\nafter\nr/g/W\nr/g/b\n");
  tpt_model_free(m);
}

static void test_bad_input_without_tower(void **state) {
  (void)state;
  const int64_t s[] = {1, 1, 3, 3}, s2[] = {3, 3}, sl[] = {3};
  tpt_tensor *x = iota(s, 4, 1), *flat = iota(s2, 2, 1), *labels = i64((const int64_t[]){0, 1, 2}, sl, 1),
             *y = (tpt_tensor *)0x1;
  const tpt_code BAD = TPT_ERR_INVALID_ARGUMENT;
  expect_code(tpt_layer_max_pool(NULL, x, 2, 2, TPT_PADDING_SAME), BAD, "tpt_layer_max_pool: argument 'out' is NULL");
  expect_code(tpt_layer_max_pool(&y, NULL, 2, 2, TPT_PADDING_SAME), BAD, "argument 'x' is NULL");
  assert_null(y);
  expect_code(tpt_layer_avg_pool(NULL, x, 2, 2, TPT_PADDING_SAME), BAD, "argument 'out' is NULL");
  expect_code(tpt_layer_avg_pool(&y, NULL, 2, 2, TPT_PADDING_SAME), BAD, "argument 'x' is NULL");
  expect_code(tpt_layer_global_avg_pool(NULL, x), BAD, "argument 'out' is NULL");
  expect_code(tpt_layer_global_avg_pool(&y, NULL), BAD, "argument 'x' is NULL");
  expect_code(tpt_layer_activation(NULL, x, TPT_ACT_RELU, 0), BAD, "argument 'out' is NULL");
  expect_code(tpt_layer_activation(&y, NULL, TPT_ACT_RELU, 0), BAD, "argument 'x' is NULL");
  expect_code(tpt_layer_flatten(NULL, x), BAD, "argument 'out' is NULL");
  expect_code(tpt_layer_flatten(&y, NULL), BAD, "argument 'x' is NULL");
  expect_code(tpt_loss_softmax_cross_entropy(NULL, flat, labels), BAD, "argument 'out' is NULL");
  expect_code(tpt_loss_softmax_cross_entropy(&y, NULL, labels), BAD, "argument 'logits' is NULL");
  expect_code(tpt_loss_softmax_cross_entropy(&y, flat, NULL), BAD, "argument 'labels' is NULL");
  expect_code(tpt_loss_sigmoid_cross_entropy(NULL, flat, flat), BAD, "argument 'out' is NULL");
  expect_code(tpt_loss_sigmoid_cross_entropy(&y, NULL, flat), BAD, "argument 'logits' is NULL");
  expect_code(tpt_loss_sigmoid_cross_entropy(&y, flat, NULL), BAD, "argument 'targets' is NULL");
  expect_code(tpt_loss_mse(NULL, flat, flat), BAD, "argument 'out' is NULL");
  expect_code(tpt_loss_mse(&y, NULL, flat), BAD, "argument 'prediction' is NULL");
  expect_code(tpt_loss_mse(&y, flat, NULL), BAD, "argument 'target' is NULL");
  expect_code(tpt_loss_l1(NULL, flat, flat), BAD, "argument 'out' is NULL");
  expect_code(tpt_loss_l1(&y, NULL, flat), BAD, "argument 'prediction' is NULL");
  expect_code(tpt_loss_l1(&y, flat, NULL), BAD, "argument 'target' is NULL");
  expect_code(tpt_metric_accuracy(NULL, flat, labels), BAD, "argument 'out' is NULL");
  expect_code(tpt_metric_accuracy(&y, NULL, labels), BAD, "argument 'logits' is NULL");
  expect_code(tpt_metric_accuracy(&y, flat, NULL), BAD, "argument 'labels' is NULL");
  expect_code(tpt_metric_wrong(NULL, flat, labels, 1), BAD, "argument 'out' is NULL");
  expect_code(tpt_metric_wrong(&y, NULL, labels, 1), BAD, "argument 'logits' is NULL");
  expect_code(tpt_metric_wrong(&y, flat, NULL, 1), BAD, "argument 'labels' is NULL");
  /* ranks, ranges, enums */
  expect_code(tpt_layer_max_pool(&y, flat, 2, 2, TPT_PADDING_SAME), BAD, "max_pool: x must be [N, C, H, W], got [3, 3]");
  expect_code(tpt_layer_avg_pool(&y, x, 0, 1, TPT_PADDING_SAME), BAD, "avg_pool: kernel must be >= 1, got 0");
  expect_code(tpt_layer_avg_pool(&y, x, 2, 0, TPT_PADDING_SAME), BAD, "stride must be >= 1, got 0");
  expect_code(tpt_layer_max_pool(&y, x, 2, 2, (tpt_padding)3), BAD, "padding 3 is not a tpt_padding");
  expect_code(tpt_layer_max_pool(&y, x, 4, 1, TPT_PADDING_VALID), BAD, "smaller than the kernel 4x4");
  expect_code(tpt_layer_global_avg_pool(&y, flat), BAD, "global_avg_pool: x must be [N, C, H, W]");
  expect_code(tpt_layer_activation(&y, x, TPT_ACT_LEAKY_RELU, NAN), BAD, "alpha must be finite");
  assert_null(y);
  tpt_tensor_free(x);
  tpt_tensor_free(flat);
  tpt_tensor_free(labels);
}

/* tpt_model_variable_list of a model not built yet (no variables: NULL and
 * 0), its NULL arguments, and tpt_strings_free(NULL). */
static void test_variable_list_edges(void **state) {
  (void)state;
  ctx c = {0};
  const int64_t shape[] = {-1, 3};
  tpt_model *m = harness(&c, shape, 2);
  char **list = (char **)1;
  size_t n = 7;
  ok(tpt_model_variable_list(&list, &n, m));
  assert_null(list);
  assert_int_equal(n, 0);
  size_t n2 = 0;
  expect_code(tpt_model_variable_list(NULL, &n2, m), TPT_ERR_INVALID_ARGUMENT, "names");
  expect_code(tpt_model_variable_list(&list, NULL, m), TPT_ERR_INVALID_ARGUMENT, "count");
  expect_code(tpt_model_variable_list(&list, &n2, NULL), TPT_ERR_INVALID_ARGUMENT, "model");
  tpt_strings_free(NULL, 3);
  tpt_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fc_values_and_variables),
      cmocka_unit_test(test_variable_list_edges),
      cmocka_unit_test(test_fc_flattens_and_no_bias),
      cmocka_unit_test(test_conv2d_shapes),
      cmocka_unit_test(test_conv2d_variables),
      cmocka_unit_test(test_conv2d_values),
      cmocka_unit_test(test_conv2d_transpose),
      cmocka_unit_test(test_pool_values),
      cmocka_unit_test(test_pool_shapes),
      cmocka_unit_test(test_batch_norm_variables_and_build),
      cmocka_unit_test(test_batch_norm_training_and_ema),
      cmocka_unit_test(test_batch_norm_inference_values),
      cmocka_unit_test(test_layer_norm),
      cmocka_unit_test(test_layer_norm_axes),
      cmocka_unit_test(test_layer_norm_axes_errors),
      cmocka_unit_test(test_dropout),
      cmocka_unit_test(test_activations),
      cmocka_unit_test(test_flatten_and_concat),
      cmocka_unit_test(test_losses),
      cmocka_unit_test(test_metrics),
      cmocka_unit_test(test_regularize_l2),
      cmocka_unit_test(test_bad_input_in_tower),
      cmocka_unit_test(test_bad_input_without_tower),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
