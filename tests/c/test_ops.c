/* tpt_op_call and tpt_op_schemas from C11, seen only through tptrain.h: a table
 * of common ATen operators with hand-computed results, and the errors. Run with
 * CMOCKA_MESSAGE_OUTPUT=TAP (meson test does). */
#include <math.h>

#include "test_common.h"

/* ---------------------------------------------------------------- helpers */

/* Argument constructors. */
static tpt_arg I(int64_t v) {
  tpt_arg a = {TPT_ARG_INT, NULL, NULL, v, 0.0, NULL, 0};
  return a;
}
static tpt_arg D(double v) {
  tpt_arg a = {TPT_ARG_DOUBLE, NULL, NULL, 0, v, NULL, 0};
  return a;
}
static tpt_arg B(int v) {
  tpt_arg a = {TPT_ARG_BOOL, NULL, NULL, v, 0.0, NULL, 0};
  return a;
}
static tpt_arg NONE(void) {
  tpt_arg a = {TPT_ARG_NONE, NULL, NULL, 0, 0.0, NULL, 0};
  return a;
}
static tpt_arg S(const char *s) {
  tpt_arg a = {TPT_ARG_STRING, NULL, NULL, 0, 0.0, s, 0};
  return a;
}
static tpt_arg DT(tpt_dtype d) {
  tpt_arg a = {TPT_ARG_DTYPE, NULL, NULL, (int64_t)d, 0.0, NULL, 0};
  return a;
}
static tpt_arg IL_(const int64_t *v, size_t n) {
  tpt_arg a = {TPT_ARG_INT_LIST, NULL, NULL, 0, 0.0, v, n};
  return a;
}
static tpt_arg TL_(const tpt_tensor *const *v, size_t n) {
  tpt_arg a = {TPT_ARG_TENSOR_LIST, NULL, NULL, 0, 0.0, v, n};
  return a;
}
static tpt_arg KW(const char *name, tpt_arg a) {
  a.name = name;
  return a;
}

#define COUNT(type, ...) (sizeof((type[]){__VA_ARGS__}) / sizeof(type))
#define IL(...) IL_((const int64_t[]){__VA_ARGS__}, COUNT(const int64_t, __VA_ARGS__))
#define TL(...) TL_((const tpt_tensor *const[]){__VA_ARGS__}, COUNT(const tpt_tensor *const, __VA_ARGS__))
#define ARGS(...) (const tpt_arg[]){__VA_ARGS__}, COUNT(const tpt_arg, __VA_ARGS__)
#define NOARGS NULL, 0
#define SHAPE(...) (const int64_t[]){__VA_ARGS__}, COUNT(const int64_t, __VA_ARGS__)
#define SCALAR NULL, 0 /* the shape of a 0-d tensor */
#define VALS(...) (const double[]){__VA_ARGS__}, COUNT(const double, __VA_ARGS__)
#define NOVALS NULL, 0

/* Tensors made by a test, freed by free_all() at its end. */
static tpt_tensor *pool[128];
static size_t npool;

static tpt_tensor *keep(tpt_tensor *t) {
  assert_true(npool < sizeof pool / sizeof pool[0]);
  pool[npool++] = t;
  return t;
}

static void free_all(void) {
  for (size_t i = 0; i < npool; ++i) tpt_tensor_free(pool[i]);
  npool = 0;
}

/* A tensor of `dtype` (F32, F64, I64 or BOOL) holding `vals`. */
static tpt_tensor *mk(tpt_dtype dtype, const int64_t *shape, size_t ndim, const double *vals, size_t n) {
  unsigned char buf[8 * 64];
  size_t elem = tpt_dtype_size(dtype);
  assert_true(n <= 64);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == TPT_DTYPE_F32) {
      float f = (float)vals[i];
      memcpy(buf + i * elem, &f, elem);
    } else if (dtype == TPT_DTYPE_F64) {
      memcpy(buf + i * elem, &vals[i], elem);
    } else if (dtype == TPT_DTYPE_I64) {
      int64_t v = (int64_t)vals[i];
      memcpy(buf + i * elem, &v, elem);
    } else {
      buf[i] = vals[i] != 0;
    }
  }
  tpt_tensor_options opts = TPT_TENSOR_OPTIONS_INIT;
  opts.dtype = dtype;
  tpt_tensor *t = NULL;
  ok(tpt_tensor_from_data(&t, buf, n * elem, shape, ndim, &opts));
  return keep(t);
}

#define F32(shape, vals) mk(TPT_DTYPE_F32, shape, vals)
#define I64(shape, vals) mk(TPT_DTYPE_I64, shape, vals)
#define BOOL(shape, vals) mk(TPT_DTYPE_BOOL, shape, vals)

/* An f32 tensor of `shape` holding 1, 2, 3, ... */
static tpt_tensor *iota(const int64_t *shape, size_t ndim) {
  double vals[64];
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  assert_true(n <= 64);
  for (size_t i = 0; i < n; ++i) vals[i] = (double)(i + 1);
  return mk(TPT_DTYPE_F32, shape, ndim, vals, n);
}

/* Copies the elements of `t` as doubles (through aten::_to_copy). */
static size_t values_f64(const tpt_tensor *t, double *out, size_t capacity) {
  tpt_tensor *o[1] = {NULL};
  size_t n = 0;
  tpt_arg args[] = {T(t), KW("dtype", DT(TPT_DTYPE_F64))};
  ok(tpt_op_call(o, 1, &n, "aten::_to_copy", NULL, args, 2));
  assert_int_equal(n, 1);
  int64_t numel = 0;
  ok(tpt_tensor_numel(&numel, o[0]));
  assert_true((size_t)numel <= capacity);
  ok(tpt_tensor_copy_to(out, (size_t)numel * sizeof(double), o[0]));
  tpt_tensor_free(o[0]);
  return (size_t)numel;
}

static int close_to(double got, double want) {
  if (isnan(want)) return isnan(got);
  return fabs(got - want) <= 1e-5 + 1e-4 * fabs(want);
}

/* Checks that a tensor has `shape` and (when `want` is not NULL) the values. */
static void check_tensor(const char *what, const tpt_tensor *t, const int64_t *shape, size_t ndim,
                         const double *want, size_t nwant) {
  size_t got_ndim = 99;
  int64_t dims[8];
  assert_non_null(t);
  ok(tpt_tensor_ndim(&got_ndim, t));
  if (got_ndim != ndim) fail_msg("%s: %zu dimensions, want %zu", what, got_ndim, ndim);
  ok(tpt_tensor_shape(dims, 8, t));
  for (size_t i = 0; i < ndim; ++i)
    if (dims[i] != shape[i])
      fail_msg("%s: dimension %zu is %lld, want %lld", what, i, (long long)dims[i], (long long)shape[i]);
  if (!want) return;
  double got[64];
  size_t n = values_f64(t, got, 64);
  if (n != nwant) fail_msg("%s: %zu elements, want %zu", what, n, nwant);
  for (size_t i = 0; i < n; ++i)
    if (!close_to(got[i], want[i])) fail_msg("%s: element %zu is %.9g, want %.9g", what, i, got[i], want[i]);
}

/* Distinct operators that went through check_op, over all tests. */
static const char *ops_seen[256];
static size_t n_ops_seen, n_value_checks;

static void note_op(const char *op, int with_values) {
  if (with_values) ++n_value_checks;
  if (!strstr(op, "::") || strchr(op, '.')) return; /* "add", "aten::add.Scalar": counted as aten::add */
  for (size_t i = 0; i < n_ops_seen; ++i)
    if (strcmp(ops_seen[i], op) == 0) return;
  if (n_ops_seen < 256) ops_seen[n_ops_seen++] = op;
}

/* Calls `op`; checks the number of outputs and the shape (and values, if
 * `want` is not NULL) of output 0; frees the outputs. */
static void check_op(const char *op, const char *overload, const tpt_arg *args, size_t nargs,
                     size_t n_out, const int64_t *shape, size_t ndim, const double *want, size_t nwant) {
  tpt_tensor *out[8];
  size_t n = 99;
  tpt_status *st = tpt_op_call(out, 8, &n, op, overload, args, nargs);
  if (st) fail_msg("%s: %s", op, tpt_status_message(st));
  if (n != n_out) fail_msg("%s: %zu outputs, want %zu", op, n, n_out);
  for (size_t i = n; i < 8; ++i) assert_null(out[i]);
  check_tensor(op, out[0], shape, ndim, want, nwant);
  for (size_t i = 0; i < n; ++i) tpt_tensor_free(out[i]);
  note_op(op, want != NULL);
}

/* Calls `op` expecting `n_out` outputs, which the caller frees. */
static void call_op(tpt_tensor **out, size_t n_out, const char *op, const char *overload,
                    const tpt_arg *args, size_t nargs) {
  size_t n = 99;
  tpt_status *st = tpt_op_call(out, n_out, &n, op, overload, args, nargs);
  if (st) fail_msg("%s: %s", op, tpt_status_message(st));
  if (n != n_out) fail_msg("%s: %zu outputs, want %zu", op, n, n_out);
  note_op(op, 1);
}

static tpt_dtype dtype_of(const tpt_tensor *t) {
  tpt_dtype d = (tpt_dtype)0;
  ok(tpt_tensor_dtype(&d, t));
  return d;
}

/* The fixture most tests use. */
static tpt_tensor *a, *b, *c, *z, *v, *x, *img, *w, *idx, *mask, *bat;

static void make_fixture(void) {
  a = F32(SHAPE(2, 2), VALS(1, 2, 3, 4));
  b = F32(SHAPE(2, 2), VALS(5, 6, 7, 8));
  c = F32(SHAPE(2, 2), VALS(-1, 2, -3, 4));
  z = F32(SHAPE(2, 3), VALS(0, 0, 0, 0, 0, 0));
  v = F32(SHAPE(5), VALS(3, 1, 4, 1, 5));
  x = iota(SHAPE(2, 3, 4));
  img = iota(SHAPE(1, 1, 4, 4));
  w = F32(SHAPE(1, 1, 2, 2), VALS(1, 1, 1, 1));
  idx = I64(SHAPE(2), VALS(1, 0));
  mask = BOOL(SHAPE(2, 2), VALS(1, 0, 0, 1));
  bat = F32(SHAPE(2, 2, 2), VALS(1, 2, 3, 4, 5, 6, 7, 8));
}

/* ---------------------------------------------------------------- the table */

static void test_elementwise(void **state) {
  (void)state;
  make_fixture();
  check_op("aten::add", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(6, 8, 10, 12));
  check_op("aten::add", NULL, ARGS(T(a), T(b), KW("alpha", I(2))), 1, SHAPE(2, 2), VALS(11, 14, 17, 20));
  check_op("aten::add", NULL, ARGS(T(a), D(1.5)), 1, SHAPE(2, 2), VALS(2.5, 3.5, 4.5, 5.5));
  check_op("add", NULL, ARGS(T(a), I(1)), 1, SHAPE(2, 2), VALS(2, 3, 4, 5)); /* bare name */
  check_op("aten::sub", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(-4, -4, -4, -4));
  check_op("aten::sub", NULL, ARGS(T(a), I(1)), 1, SHAPE(2, 2), VALS(0, 1, 2, 3));
  check_op("aten::mul", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(5, 12, 21, 32));
  check_op("aten::mul", NULL, ARGS(T(a), I(3)), 1, SHAPE(2, 2), VALS(3, 6, 9, 12));
  check_op("aten::div", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(0.2, 1.0 / 3, 3.0 / 7, 0.5));
  check_op("aten::div", NULL, ARGS(T(a), D(2.0)), 1, SHAPE(2, 2), VALS(0.5, 1, 1.5, 2));
  check_op("aten::div", NULL, ARGS(T(b), T(a), KW("rounding_mode", S("floor"))), 1, SHAPE(2, 2),
           VALS(5, 3, 2, 2));
  check_op("aten::relu", NULL, ARGS(T(c)), 1, SHAPE(2, 2), VALS(0, 2, 0, 4));
  check_op("aten::sigmoid", NULL, ARGS(T(z)), 1, SHAPE(2, 3), VALS(.5, .5, .5, .5, .5, .5));
  check_op("aten::tanh", NULL, ARGS(T(z)), 1, SHAPE(2, 3), VALS(0, 0, 0, 0, 0, 0));
  check_op("aten::gelu", NULL, ARGS(T(z)), 1, SHAPE(2, 3), VALS(0, 0, 0, 0, 0, 0));
  check_op("aten::gelu", NULL, ARGS(T(c), KW("approximate", S("tanh"))), 1, SHAPE(2, 2), NOVALS);
  check_op("aten::exp", NULL, ARGS(T(z)), 1, SHAPE(2, 3), VALS(1, 1, 1, 1, 1, 1));
  check_op("aten::log", NULL, ARGS(T(a)), 1, SHAPE(2, 2), VALS(0, log(2), log(3), log(4)));
  check_op("aten::sqrt", NULL, ARGS(T(a)), 1, SHAPE(2, 2), VALS(1, sqrt(2), sqrt(3), 2));
  check_op("aten::abs", NULL, ARGS(T(c)), 1, SHAPE(2, 2), VALS(1, 2, 3, 4));
  check_op("aten::neg", NULL, ARGS(T(a)), 1, SHAPE(2, 2), VALS(-1, -2, -3, -4));
  check_op("aten::pow", NULL, ARGS(T(a), I(2)), 1, SHAPE(2, 2), VALS(1, 4, 9, 16));
  check_op("aten::pow", NULL, ARGS(I(2), T(a)), 1, SHAPE(2, 2), VALS(2, 4, 8, 16));
  check_op("aten::pow", NULL, ARGS(T(a), T(a)), 1, SHAPE(2, 2), VALS(1, 4, 27, 256));
  check_op("aten::clamp", NULL, ARGS(T(a), KW("min", I(2)), KW("max", D(3))), 1, SHAPE(2, 2),
           VALS(2, 2, 3, 3));
  check_op("aten::clamp", NULL, ARGS(T(c), I(0)), 1, SHAPE(2, 2), VALS(0, 2, 0, 4));
  check_op("aten::leaky_relu", NULL, ARGS(T(c), D(0.1)), 1, SHAPE(2, 2), VALS(-0.1, 2, -0.3, 4));
  check_op("aten::hardtanh", NULL, ARGS(T(c)), 1, SHAPE(2, 2), VALS(-1, 1, -1, 1));
  check_op("aten::softmax", NULL, ARGS(T(z), I(1)), 1, SHAPE(2, 3),
           VALS(1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3));
  check_op("aten::log_softmax", NULL, ARGS(T(z), KW("dim", I(-1))), 1, SHAPE(2, 3),
           VALS(-log(3), -log(3), -log(3), -log(3), -log(3), -log(3)));
  check_op("aten::eq", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(0, 0, 0, 0));
  check_op("aten::eq", NULL, ARGS(T(a), I(2)), 1, SHAPE(2, 2), VALS(0, 1, 0, 0));
  check_op("aten::gt", NULL, ARGS(T(a), I(2)), 1, SHAPE(2, 2), VALS(0, 0, 1, 1));
  check_op("aten::lt", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(1, 1, 1, 1));
  check_op("aten::ne", NULL, ARGS(T(a), D(3)), 1, SHAPE(2, 2), VALS(1, 1, 0, 1));
  check_op("aten::where", NULL, ARGS(T(mask), T(a), T(b)), 1, SHAPE(2, 2), VALS(1, 6, 7, 4));
  check_op("aten::where", NULL, ARGS(T(mask), T(a), D(0)), 1, SHAPE(2, 2), VALS(1, 0, 0, 4));
  check_op("aten::masked_fill", NULL, ARGS(T(a), T(mask), D(0)), 1, SHAPE(2, 2), VALS(0, 2, 3, 0));
  check_op("aten::zeros_like", NULL, ARGS(T(a)), 1, SHAPE(2, 2), VALS(0, 0, 0, 0));
  check_op("aten::ones_like", NULL, ARGS(T(z)), 1, SHAPE(2, 3), VALS(1, 1, 1, 1, 1, 1));
  check_op("aten::full_like", NULL, ARGS(T(a), I(7)), 1, SHAPE(2, 2), VALS(7, 7, 7, 7));
  check_op("aten::dropout", NULL, ARGS(T(a), D(0.5), B(0)), 1, SHAPE(2, 2), VALS(1, 2, 3, 4));
  check_op("aten::mm", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(19, 22, 43, 50));
  check_op("aten::matmul", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(19, 22, 43, 50));
  check_op("aten::matmul", NULL, ARGS(T(bat), T(a)), 1, SHAPE(2, 2, 2), NOVALS);
  check_op("aten::bmm", NULL, ARGS(T(bat), T(bat)), 1, SHAPE(2, 2, 2), VALS(7, 10, 15, 22, 67, 78, 91, 106));
  check_op("aten::addmm", NULL, ARGS(T(a), T(a), T(b)), 1, SHAPE(2, 2), VALS(20, 24, 46, 54));
  check_op("aten::linear", NULL, ARGS(T(a), T(b)), 1, SHAPE(2, 2), VALS(17, 23, 39, 53));
  tpt_tensor *bias = F32(SHAPE(2), VALS(1, 1));
  check_op("aten::linear", NULL, ARGS(T(a), T(b), T(bias)), 1, SHAPE(2, 2), VALS(18, 24, 40, 54));
  free_all();
}

/* tpt_op_add ... tpt_op_div_scalar: values by hand, broadcasting, type
 * promotion, and the error for shapes that do not broadcast. */
static void test_arithmetic_functions(void **state) {
  (void)state;
  tpt_tensor *x = F32(SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6)), *row = F32(SHAPE(3), VALS(10, 20, 40));
  tpt_tensor *col = F32(SHAPE(2, 1), VALS(2, 4)), *ints = I64(SHAPE(3), VALS(1, 2, 3));
  tpt_tensor *o = NULL;
  ok(tpt_op_add(&o, x, row));
  check_tensor("add", keep(o), SHAPE(2, 3), VALS(11, 22, 43, 14, 25, 46));
  ok(tpt_op_sub(&o, x, col));
  check_tensor("sub", keep(o), SHAPE(2, 3), VALS(-1, 0, 1, 0, 1, 2));
  ok(tpt_op_mul(&o, col, row));
  check_tensor("mul (outer)", keep(o), SHAPE(2, 3), VALS(20, 40, 80, 40, 80, 160));
  ok(tpt_op_div(&o, x, col));
  check_tensor("div", keep(o), SHAPE(2, 3), VALS(0.5, 1, 1.5, 1, 1.25, 1.5));
  ok(tpt_op_add_scalar(&o, x, 0.5));
  check_tensor("add_scalar", keep(o), SHAPE(2, 3), VALS(1.5, 2.5, 3.5, 4.5, 5.5, 6.5));
  ok(tpt_op_sub_scalar(&o, row, 10));
  check_tensor("sub_scalar", keep(o), SHAPE(3), VALS(0, 10, 30));
  ok(tpt_op_mul_scalar(&o, row, -0.5));
  check_tensor("mul_scalar", keep(o), SHAPE(3), VALS(-5, -10, -20));
  ok(tpt_op_div_scalar(&o, ints, 2)); /* true division: integers give floats */
  keep(o);
  tpt_dtype dt = TPT_DTYPE_I64;
  ok(tpt_tensor_dtype(&dt, o));
  assert_int_equal(dt, TPT_DTYPE_F32);
  check_tensor("div_scalar", o, SHAPE(3), VALS(0.5, 1, 1.5));
  ok(tpt_op_add(&o, ints, ints)); /* integers stay integers */
  keep(o);
  ok(tpt_tensor_dtype(&dt, o));
  assert_int_equal(dt, TPT_DTYPE_I64);
  ok(tpt_op_mul(&o, x, x)); /* the same tensor twice */
  check_tensor("x * x", keep(o), SHAPE(2, 3), VALS(1, 4, 9, 16, 25, 36));

  tpt_tensor *four = F32(SHAPE(4), VALS(1, 2, 3, 4));
  o = (tpt_tensor *)1;
  expect_code(tpt_op_add(&o, x, four), TPT_ERR_INVALID_ARGUMENT,
              "tpt_op_add: a is [2, 3] and b is [4]: the shapes do not broadcast");
  assert_null(o);
  EXPECT_NULL_ARG(tpt_op_mul(&o, NULL, x), "tpt_op_mul", "a");
  EXPECT_NULL_ARG(tpt_op_div(&o, x, NULL), "tpt_op_div", "b");
  EXPECT_NULL_ARG(tpt_op_sub_scalar(NULL, x, 1), "tpt_op_sub_scalar", "out");
  free_all();
}

/* tpt_op_eq ... tpt_op_le_scalar and tpt_op_where: bool results by hand,
 * broadcasting, a where over them, the errors; and TPT_ARG_INIT. */
static void test_comparison_functions(void **state) {
  (void)state;
  tpt_tensor *x = F32(SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6)), *row = F32(SHAPE(3), VALS(2, 2, 5));
  tpt_tensor *o = NULL;
  tpt_dtype dt = TPT_DTYPE_F32;
  ok(tpt_op_eq(&o, x, row));
  keep(o);
  ok(tpt_tensor_dtype(&dt, o));
  assert_int_equal(dt, TPT_DTYPE_BOOL);
  check_tensor("eq", o, SHAPE(2, 3), VALS(0, 1, 0, 0, 0, 0));
  ok(tpt_op_gt(&o, x, row));
  check_tensor("gt", keep(o), SHAPE(2, 3), VALS(0, 0, 0, 1, 1, 1));
  ok(tpt_op_ge(&o, x, row));
  check_tensor("ge", keep(o), SHAPE(2, 3), VALS(0, 1, 0, 1, 1, 1));
  ok(tpt_op_lt(&o, x, row));
  check_tensor("lt", keep(o), SHAPE(2, 3), VALS(1, 0, 1, 0, 0, 0));
  ok(tpt_op_le(&o, x, row));
  check_tensor("le", keep(o), SHAPE(2, 3), VALS(1, 1, 1, 0, 0, 0));
  ok(tpt_op_eq_scalar(&o, x, 3));
  check_tensor("eq_scalar", keep(o), SHAPE(2, 3), VALS(0, 0, 1, 0, 0, 0));
  ok(tpt_op_gt_scalar(&o, x, 3));
  check_tensor("gt_scalar", keep(o), SHAPE(2, 3), VALS(0, 0, 0, 1, 1, 1));
  ok(tpt_op_ge_scalar(&o, x, 3));
  check_tensor("ge_scalar", keep(o), SHAPE(2, 3), VALS(0, 0, 1, 1, 1, 1));
  ok(tpt_op_lt_scalar(&o, x, 3));
  check_tensor("lt_scalar", keep(o), SHAPE(2, 3), VALS(1, 1, 0, 0, 0, 0));
  ok(tpt_op_le_scalar(&o, x, 3));
  tpt_tensor *le3 = keep(o);
  check_tensor("le_scalar", le3, SHAPE(2, 3), VALS(1, 1, 1, 0, 0, 0));
  /* where: x where x <= 3, else the row (broadcast), as torch.where */
  ok(tpt_op_where(&o, le3, x, row));
  check_tensor("where", keep(o), SHAPE(2, 3), VALS(1, 2, 3, 2, 2, 5));
  tpt_tensor *four = F32(SHAPE(4), VALS(1, 2, 3, 4));
  o = (tpt_tensor *)1;
  expect_code(tpt_op_ge(&o, x, four), TPT_ERR_INVALID_ARGUMENT,
              "tpt_op_ge: a is [2, 3] and b is [4]: the shapes do not broadcast");
  assert_null(o);
  expect_code(tpt_op_where(&o, x, x, row), TPT_ERR_INVALID_ARGUMENT,
              "cond is a Float tensor; where takes a bool one");
  expect_code(tpt_op_where(&o, le3, four, x), TPT_ERR_INVALID_ARGUMENT,
              "tpt_op_where: cond is [2, 3] and a is [4]: the shapes do not broadcast");
  EXPECT_NULL_ARG(tpt_op_where(&o, NULL, x, x), "tpt_op_where", "cond");
  EXPECT_NULL_ARG(tpt_op_lt(&o, x, NULL), "tpt_op_lt", "b");
  /* TPT_ARG_INIT: a positional None, every field zero */
  tpt_arg a = TPT_ARG_INIT;
  assert_true(a.kind == TPT_ARG_NONE && !a.name && !a.tensor && a.i == 0 && a.d == 0 && !a.list && a.len == 0);
  free_all();
}

static void test_reductions(void **state) {
  (void)state;
  make_fixture();
  check_op("aten::sum", NULL, ARGS(T(a)), 1, SCALAR, VALS(10));
  check_op("aten::sum", NULL, ARGS(T(a), KW("dim", IL(1))), 1, SHAPE(2), VALS(3, 7));
  check_op("aten::sum", NULL, ARGS(T(a), I(0), B(1)), 1, SHAPE(1, 2), VALS(4, 6)); /* int -> int[1] */
  check_op("aten::mean", NULL, ARGS(T(a)), 1, SCALAR, VALS(2.5));
  check_op("aten::mean", NULL, ARGS(T(a), IL(0)), 1, SHAPE(2), VALS(2, 3));
  check_op("aten::max", NULL, ARGS(T(a)), 1, SCALAR, VALS(4));
  check_op("aten::min", NULL, ARGS(T(a)), 1, SCALAR, VALS(1));
  check_op("aten::argmax", NULL, ARGS(T(a)), 1, SCALAR, VALS(3));
  check_op("aten::argmax", NULL, ARGS(T(a), I(1)), 1, SHAPE(2), VALS(1, 1));
  check_op("aten::argmin", NULL, ARGS(T(a)), 1, SCALAR, VALS(0));
  check_op("aten::norm", NULL, ARGS(T(a)), 1, SCALAR, VALS(sqrt(30)));
  check_op("aten::std", NULL, ARGS(T(a)), 1, SCALAR, VALS(sqrt(5.0 / 3)));
  check_op("aten::std", NULL, ARGS(T(a), I(1)), 1, SHAPE(2), VALS(sqrt(0.5), sqrt(0.5))); /* dim */
  check_op("aten::var", NULL, ARGS(T(a)), 1, SCALAR, VALS(5.0 / 3));
  check_op("aten::var", NULL, ARGS(T(a), KW("dim", IL(0)), KW("unbiased", B(0))), 1, SHAPE(2), VALS(1, 1));
  check_op("aten::cumsum", NULL, ARGS(T(a), I(1)), 1, SHAPE(2, 2), VALS(1, 3, 3, 7));
  check_op("aten::sort", NULL, ARGS(T(v)), 2, SHAPE(5), VALS(1, 1, 3, 4, 5));
  check_op("aten::sort", NULL, ARGS(T(v), KW("descending", B(1))), 2, SHAPE(5), VALS(5, 4, 3, 1, 1));

  /* two outputs: values and indices */
  tpt_tensor *out[2] = {NULL, NULL};
  call_op(out, 2, "aten::max", NULL, ARGS(T(a), I(1)));
  check_tensor("max.dim values", out[0], SHAPE(2), VALS(2, 4));
  check_tensor("max.dim indices", out[1], SHAPE(2), VALS(1, 1));
  assert_int_equal(dtype_of(out[1]), TPT_DTYPE_I64);
  tpt_tensor_free(out[0]);
  tpt_tensor_free(out[1]);
  call_op(out, 2, "aten::min", NULL, ARGS(T(a), KW("dim", I(0)), KW("keepdim", B(1))));
  check_tensor("min.dim values", out[0], SHAPE(1, 2), VALS(1, 2));
  check_tensor("min.dim indices", out[1], SHAPE(1, 2), VALS(0, 0));
  tpt_tensor_free(out[0]);
  tpt_tensor_free(out[1]);
  call_op(out, 2, "aten::topk", NULL, ARGS(T(v), I(2)));
  check_tensor("topk values", out[0], SHAPE(2), VALS(5, 4));
  check_tensor("topk indices", out[1], SHAPE(2), VALS(4, 2));
  tpt_tensor_free(out[0]);
  tpt_tensor_free(out[1]);
  free_all();
}

static void test_shapes_and_indexing(void **state) {
  (void)state;
  make_fixture();
  check_op("aten::reshape", NULL, ARGS(T(x), IL(6, -1)), 1, SHAPE(6, 4), NOVALS);
  check_op("aten::view", NULL, ARGS(T(x), IL(4, 6)), 1, SHAPE(4, 6), NOVALS);
  check_op("aten::view", NULL, ARGS(T(a), DT(TPT_DTYPE_I32)), 1, SHAPE(2, 2), NOVALS); /* view.dtype */
  check_op("aten::transpose", NULL, ARGS(T(a), I(0), I(1)), 1, SHAPE(2, 2), VALS(1, 3, 2, 4));
  check_op("aten::t", NULL, ARGS(T(a)), 1, SHAPE(2, 2), VALS(1, 3, 2, 4));
  check_op("aten::permute", NULL, ARGS(T(x), IL(2, 0, 1)), 1, SHAPE(4, 2, 3), NOVALS);
  check_op("aten::flatten", NULL, ARGS(T(x)), 1, SHAPE(24), NOVALS);
  check_op("aten::flatten", NULL, ARGS(T(x), I(1)), 1, SHAPE(2, 12), NOVALS);
  check_op("aten::unsqueeze", NULL, ARGS(T(a), I(0)), 1, SHAPE(1, 2, 2), VALS(1, 2, 3, 4));
  check_op("aten::squeeze", NULL, ARGS(T(img)), 1, SHAPE(4, 4), NOVALS);
  check_op("aten::squeeze", NULL, ARGS(T(img), I(1)), 1, SHAPE(1, 4, 4), NOVALS);
  check_op("aten::cat", NULL, ARGS(TL(a, b)), 1, SHAPE(4, 2), VALS(1, 2, 3, 4, 5, 6, 7, 8));
  check_op("aten::cat", NULL, ARGS(TL(a, b), I(1)), 1, SHAPE(2, 4), VALS(1, 2, 5, 6, 3, 4, 7, 8));
  check_op("aten::stack", NULL, ARGS(TL(a, b)), 1, SHAPE(2, 2, 2), VALS(1, 2, 3, 4, 5, 6, 7, 8));
  check_op("aten::narrow", NULL, ARGS(T(a), I(1), I(1), I(1)), 1, SHAPE(2, 1), VALS(2, 4));
  check_op("aten::slice", NULL, ARGS(T(a), I(1), I(0), I(1)), 1, SHAPE(2, 1), VALS(1, 3));
  check_op("aten::slice", NULL, ARGS(T(x), KW("dim", I(2)), KW("step", I(2))), 1, SHAPE(2, 3, 2), NOVALS);
  check_op("aten::select", NULL, ARGS(T(a), I(0), I(1)), 1, SHAPE(2), VALS(3, 4));
  check_op("aten::index_select", NULL, ARGS(T(a), I(0), T(idx)), 1, SHAPE(2, 2), VALS(3, 4, 1, 2));
  tpt_tensor *gidx = I64(SHAPE(2, 2), VALS(0, 0, 1, 0));
  check_op("aten::gather", NULL, ARGS(T(a), I(1), T(gidx)), 1, SHAPE(2, 2), VALS(1, 1, 4, 3));
  check_op("aten::index", NULL, ARGS(T(a), TL(idx)), 1, SHAPE(2, 2), VALS(3, 4, 1, 2));
  check_op("aten::index", NULL, ARGS(T(a), TL(NULL, idx)), 1, SHAPE(2, 2), VALS(2, 1, 4, 3));
  check_op("aten::repeat", NULL, ARGS(T(a), IL(1, 2)), 1, SHAPE(2, 4), VALS(1, 2, 1, 2, 3, 4, 3, 4));
  check_op("aten::expand", NULL, ARGS(T(v), IL(2, 5)), 1, SHAPE(2, 5), NOVALS);
  check_op("aten::contiguous", NULL, ARGS(T(a)), 1, SHAPE(2, 2), VALS(1, 2, 3, 4));
  check_op("aten::clone", NULL, ARGS(T(a)), 1, SHAPE(2, 2), VALS(1, 2, 3, 4));

  /* list outputs */
  tpt_tensor *out[3] = {NULL, NULL, NULL};
  call_op(out, 3, "aten::split", NULL, ARGS(T(v), I(2)));
  check_tensor("split 0", out[0], SHAPE(2), VALS(3, 1));
  check_tensor("split 1", out[1], SHAPE(2), VALS(4, 1));
  check_tensor("split 2", out[2], SHAPE(1), VALS(5));
  for (int i = 0; i < 3; ++i) tpt_tensor_free(out[i]);
  call_op(out, 2, "aten::split", NULL, ARGS(T(v), IL(2, 3))); /* split.sizes */
  check_tensor("split.sizes 1", out[1], SHAPE(3), VALS(4, 1, 5));
  for (int i = 0; i < 2; ++i) tpt_tensor_free(out[i]);
  call_op(out, 2, "aten::chunk", NULL, ARGS(T(x), I(2), I(2)));
  check_tensor("chunk 0", out[0], SHAPE(2, 3, 2), NOVALS);
  check_tensor("chunk 1", out[1], SHAPE(2, 3, 2), NOVALS);
  for (int i = 0; i < 2; ++i) tpt_tensor_free(out[i]);
  call_op(out, 2, "aten::unbind", NULL, ARGS(T(a)));
  check_tensor("unbind 1", out[1], SHAPE(2), VALS(3, 4));
  for (int i = 0; i < 2; ++i) tpt_tensor_free(out[i]);
  free_all();
}

static void test_nn(void **state) {
  (void)state;
  make_fixture();
  check_op("aten::conv2d", NULL, ARGS(T(img), T(w)), 1, SHAPE(1, 1, 3, 3),
           VALS(14, 18, 22, 30, 34, 38, 46, 50, 54));
  check_op("aten::conv2d", NULL, ARGS(T(img), T(w), NONE(), I(2)), 1, SHAPE(1, 1, 2, 2), VALS(14, 22, 46, 54));
  check_op("aten::conv2d", NULL, ARGS(T(img), T(w), KW("padding", S("same"))), 1, SHAPE(1, 1, 4, 4), NOVALS);
  check_op("aten::max_pool2d", NULL, ARGS(T(img), I(2)), 1, SHAPE(1, 1, 2, 2), VALS(6, 8, 14, 16));
  check_op("aten::avg_pool2d", NULL, ARGS(T(img), IL(2, 2)), 1, SHAPE(1, 1, 2, 2), VALS(3.5, 5.5, 11.5, 13.5));
  check_op("aten::adaptive_avg_pool2d", NULL, ARGS(T(img), IL(1, 1)), 1, SHAPE(1, 1, 1, 1), VALS(8.5));
  tpt_tensor *rm = F32(SHAPE(1), VALS(0)), *rv = F32(SHAPE(1), VALS(1));
  double bn[16];
  for (int i = 0; i < 16; ++i) bn[i] = (i + 1) / sqrt(1 + 1e-5);
  check_op("aten::batch_norm", NULL,
           ARGS(T(img), NONE(), NONE(), T(rm), T(rv), B(0), D(0.1), D(1e-5), B(0)), 1,
           SHAPE(1, 1, 4, 4), bn, 16);
  check_op("aten::layer_norm", NULL, ARGS(T(a), IL(2)), 1, SHAPE(2, 2),
           VALS(-0.99998, 0.99998, -0.99998, 0.99998));
  check_op("aten::embedding", NULL, ARGS(T(a), T(idx)), 1, SHAPE(2, 2), VALS(3, 4, 1, 2));
  check_op("aten::cross_entropy_loss", NULL, ARGS(T(z), T(idx)), 1, SCALAR, VALS(log(3)));
  check_op("aten::nll_loss", NULL, ARGS(T(a), T(idx)), 1, SCALAR, VALS(-2.5));
  check_op("aten::mse_loss", NULL, ARGS(T(a), T(b)), 1, SCALAR, VALS(16));
  check_op("aten::mse_loss", NULL, ARGS(T(a), T(b), KW("reduction", I(0))), 1, SHAPE(2, 2), VALS(16, 16, 16, 16));
  check_op("aten::l1_loss", NULL, ARGS(T(a), T(b)), 1, SCALAR, VALS(4));
  tpt_tensor *ones = F32(SHAPE(2, 3), VALS(1, 1, 1, 1, 1, 1));
  check_op("aten::binary_cross_entropy_with_logits", NULL, ARGS(T(z), T(ones)), 1, SCALAR, VALS(log(2)));
  free_all();
}

/* Runs `op` with `one` (ints where the schema wants int[N]) and with `list`
 * (the same as int lists): the results are equal. */
static void same_as_lists(const char *op, const tpt_arg *one, size_t n_one, const tpt_arg *list, size_t n_list) {
  tpt_tensor *p = NULL, *q = NULL;
  size_t n = 0;
  ok(tpt_op_call(&p, 1, &n, op, NULL, one, n_one));
  assert_int_equal(n, 1);
  ok(tpt_op_call(&q, 1, &n, op, NULL, list, n_list));
  size_t dp = 0, dq = 0;
  int64_t sp[8], sq[8];
  ok(tpt_tensor_ndim(&dp, p));
  ok(tpt_tensor_ndim(&dq, q));
  assert_int_equal(dp, dq);
  ok(tpt_tensor_shape(sp, 8, p));
  ok(tpt_tensor_shape(sq, 8, q));
  assert_memory_equal(sp, sq, dp * sizeof(int64_t));
  double vp[64], vq[64];
  size_t np = values_f64(p, vp, 64), nq = values_f64(q, vq, 64);
  assert_int_equal(np, nq);
  assert_memory_equal(vp, vq, np * sizeof(double));
  tpt_tensor_free(p);
  tpt_tensor_free(q);
}

/* Python's int packing: one int where the schema wants int[N] (a fixed N,
 * as `int[2] stride`) is repeated N times, as PyTorch does for stride=2;
 * positional or by keyword. An int[] without N takes no single int. */
static void test_one_int_fills_int_n(void **state) {
  (void)state;
  make_fixture();
  tpt_tensor *im = iota(SHAPE(1, 1, 6, 6)), *k = iota(SHAPE(1, 1, 2, 2));
  /* max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, ...) */
  same_as_lists("aten::max_pool2d", ARGS(T(im), I(2)), ARGS(T(im), IL(2, 2)));
  same_as_lists("aten::max_pool2d", ARGS(T(im), I(3), I(2), I(1)), ARGS(T(im), IL(3, 3), IL(2, 2), IL(1, 1)));
  same_as_lists("aten::max_pool2d", ARGS(T(im), KW("kernel_size", I(3)), KW("stride", I(2)), KW("padding", I(1))),
                ARGS(T(im), IL(3, 3), IL(2, 2), IL(1, 1)));
  same_as_lists("aten::max_pool2d", ARGS(T(im), IL(3, 2), KW("dilation", I(2))),
                ARGS(T(im), IL(3, 2), KW("dilation", IL(2, 2))));
  /* windows of 3 with stride 2 and padding 1: the maximum is each window's last row and column */
  check_op("aten::max_pool2d", NULL, ARGS(T(im), I(3), KW("stride", I(2)), KW("padding", I(1))), 1,
           SHAPE(1, 1, 3, 3), VALS(8, 10, 12, 20, 22, 24, 32, 34, 36));
  same_as_lists("aten::avg_pool2d", ARGS(T(im), I(2), I(1)), ARGS(T(im), IL(2, 2), IL(1, 1)));
  /* conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, ...) */
  same_as_lists("aten::conv2d", ARGS(T(im), T(k), NONE(), I(2), I(1), I(2)),
                ARGS(T(im), T(k), NONE(), IL(2, 2), IL(1, 1), IL(2, 2)));
  same_as_lists("aten::conv2d", ARGS(T(im), T(k), KW("padding", I(1))), ARGS(T(im), T(k), KW("padding", IL(1, 1))));
  /* int[1] (sum's dim) too */
  same_as_lists("aten::sum", ARGS(T(im), I(3)), ARGS(T(im), IL(3)));

  /* permute(Tensor self, int[] dims): no fixed length, no packing */
  tpt_tensor *out[1] = {NULL};
  size_t n = 0;
  expect_code2(tpt_op_call(out, 1, &n, "aten::permute", NULL, ARGS(T(a), I(0))), TPT_ERR_INVALID_ARGUMENT,
                "argument 'dims' (args[1]) wants int[], got int", NULL);
  /* only an int is packed: not a double, not a bool */
  expect_code2(tpt_op_call(out, 1, &n, "aten::max_pool2d", NULL, ARGS(T(im), D(2.0))), TPT_ERR_INVALID_ARGUMENT,
                "argument 'kernel_size' (args[1]) wants int[], got double", NULL);
  expect_code2(tpt_op_call(out, 1, &n, "aten::max_pool2d", NULL, ARGS(T(im), B(1))), TPT_ERR_INVALID_ARGUMENT,
                "argument 'kernel_size' (args[1]) wants int[], got bool", NULL);
  assert_null(out[0]);
  free_all();
}

static void test_dtypes_and_numbers(void **state) {
  (void)state;
  make_fixture();
  tpt_tensor *out[1] = {NULL};
  call_op(out, 1, "aten::_to_copy", NULL, ARGS(T(a), KW("dtype", DT(TPT_DTYPE_I64))));
  assert_int_equal(dtype_of(out[0]), TPT_DTYPE_I64);
  check_tensor("_to_copy", out[0], SHAPE(2, 2), VALS(1, 2, 3, 4));
  tpt_tensor_free(out[0]);
  call_op(out, 1, "aten::to", NULL, ARGS(T(a), DT(TPT_DTYPE_F64)));
  assert_int_equal(dtype_of(out[0]), TPT_DTYPE_F64);
  tpt_tensor_free(out[0]);
  call_op(out, 1, "aten::to", NULL, ARGS(T(a), KW("dtype", DT(TPT_DTYPE_BF16))));
  assert_int_equal(dtype_of(out[0]), TPT_DTYPE_BF16);
  tpt_tensor_free(out[0]);
  call_op(out, 1, "aten::sum", NULL, ARGS(T(a), KW("dtype", DT(TPT_DTYPE_F64))));
  assert_int_equal(dtype_of(out[0]), TPT_DTYPE_F64);
  tpt_tensor_free(out[0]);

  /* numbers and bools come back as 0-d tensors */
  call_op(out, 1, "aten::size", "int", ARGS(T(x), I(2)));
  assert_int_equal(dtype_of(out[0]), TPT_DTYPE_I64);
  check_tensor("size.int", out[0], SCALAR, VALS(4));
  tpt_tensor_free(out[0]);
  call_op(out, 1, "aten::is_floating_point", NULL, ARGS(T(a)));
  assert_int_equal(dtype_of(out[0]), TPT_DTYPE_BOOL);
  check_tensor("is_floating_point", out[0], SCALAR, VALS(1));
  tpt_tensor_free(out[0]);
  tpt_tensor *half = F32(SCALAR, VALS(0.5));
  call_op(out, 1, "aten::item", NULL, ARGS(T(half)));
  assert_int_equal(dtype_of(out[0]), TPT_DTYPE_F64);
  check_tensor("item", out[0], SCALAR, VALS(0.5));
  tpt_tensor_free(out[0]);
  tpt_tensor *two[2] = {NULL, NULL};
  call_op(two, 2, "aten::_choose_qparams_per_tensor", NULL, ARGS(T(a)));
  assert_int_equal(dtype_of(two[0]), TPT_DTYPE_F64); /* (float scale, int zero_point) */
  assert_int_equal(dtype_of(two[1]), TPT_DTYPE_I64);
  check_tensor("scale", two[0], SCALAR, NOVALS);
  tpt_tensor_free(two[0]);
  tpt_tensor_free(two[1]);
  /* results that are not tensors, numbers or bools: LibTorch 1.13's aten
   * has one (an int[]); 2.x's has none usable on the CPU, and the gtest
   * OpsCall.ResultsThatAreNotTensorsAreRefused registers its own */
  char schema[512];
  tpt_status *has = tpt_op_schemas(schema, sizeof schema, NULL, "aten::_nested_tensor_offsets");
  if (!has) {
    tpt_tensor *nested[1] = {NULL};
    call_op(nested, 1, "aten::_nested_tensor_from_tensor_list", NULL, ARGS(TL(a, b)));
    size_t n = 9;
    expect_code2(tpt_op_call(out, 1, &n, "aten::_nested_tensor_offsets", NULL, ARGS(T(nested[0]))),
                  TPT_ERR_UNSUPPORTED, "aten::_nested_tensor_offsets returned int[]",
                  "cannot give as tensors");
    assert_null(out[0]);
    tpt_tensor_free(nested[0]);
  } else {
    assert_int_equal(tpt_status_code(has), TPT_ERR_NOT_FOUND);
    tpt_status_free(has);
  }
  /* a ScalarType result is the tpt_dtype number */
  call_op(out, 1, "aten::result_type", "Tensor", ARGS(T(a), T(idx)));
  check_tensor("result_type", out[0], SCALAR, VALS(TPT_DTYPE_F32));
  tpt_tensor_free(out[0]);
  free_all();
}

static void test_undefined_results_are_null(void **state) {
  (void)state;
  make_fixture();
  /* output_mask [1, 0, 0] (a bool[3] from an int list): only grad_input is computed */
  tpt_tensor *grad = F32(SHAPE(1, 1, 3, 3), VALS(1, 1, 1, 1, 1, 1, 1, 1, 1));
  tpt_tensor *out[3] = {NULL, NULL, NULL};
  call_op(out, 3, "aten::convolution_backward", NULL,
          ARGS(T(grad), T(img), T(w), NONE(), IL(1, 1), IL(0, 0), IL(1, 1), B(0), IL(0, 0), I(1),
               IL(1, 0, 0)));
  check_tensor("grad_input", out[0], SHAPE(1, 1, 4, 4),
               VALS(1, 2, 2, 1, 2, 4, 4, 2, 2, 4, 4, 2, 1, 2, 2, 1));
  assert_null(out[1]);
  assert_null(out[2]);
  tpt_tensor_free(out[0]);
  free_all();
}

static void test_in_place_and_out(void **state) {
  (void)state;
  make_fixture();
  tpt_tensor *d[1] = {NULL}, *out[1] = {NULL};
  call_op(d, 1, "aten::clone", NULL, ARGS(T(a)));
  keep(d[0]);
  /* in place, by op name: the result is the mutated input */
  call_op(out, 1, "aten::add_", "Tensor", ARGS(T(d[0]), T(b)));
  check_tensor("add_ result", out[0], SHAPE(2, 2), VALS(6, 8, 10, 12));
  check_tensor("add_ input", d[0], SHAPE(2, 2), VALS(6, 8, 10, 12));
  tpt_tensor_free(out[0]);
  call_op(out, 1, "aten::mul_", NULL, ARGS(T(d[0]), I(2)));
  check_tensor("mul_ input", d[0], SHAPE(2, 2), VALS(12, 16, 20, 24));
  tpt_tensor_free(out[0]);
  /* out variants are called only when named */
  expect_code2(tpt_op_call(out, 1, &(size_t){0}, "aten::add", NULL,
                            ARGS(T(a), T(b), KW("out", T(d[0])))),
                TPT_ERR_INVALID_ARGUMENT, "no argument named 'out'", "out variants not tried");
  call_op(out, 1, "aten::add", "out", ARGS(T(a), T(b), KW("out", T(d[0]))));
  check_tensor("add.out", d[0], SHAPE(2, 2), VALS(6, 8, 10, 12));
  tpt_tensor_free(out[0]);
  /* overload given inside the name */
  call_op(out, 1, "aten::add.Scalar", NULL, ARGS(T(a), I(1)));
  check_tensor("add.Scalar", out[0], SHAPE(2, 2), VALS(2, 3, 4, 5));
  tpt_tensor_free(out[0]);
  free_all();
}

static void test_table_is_large(void **state) {
  (void)state;
  print_message("# %zu distinct operators, %zu calls with checked values\n", n_ops_seen, n_value_checks);
  assert_true(n_ops_seen >= 60);
  assert_true(n_value_checks >= 15);
}

/* ---------------------------------------------------------------- errors */

static void test_unknown_operator(void **state) {
  (void)state;
  make_fixture();
  tpt_tensor *out[2] = {NULL, NULL};
  size_t n = 7;
  expect_code2(tpt_op_call(out, 2, &n, "aten::relux", NULL, ARGS(T(a))), TPT_ERR_INVALID_ARGUMENT,
                "tpt_op_call: unknown operator 'aten::relux'", "aten::relu");
  assert_int_equal(n, 0);
  assert_null(out[0]);
  expect_code2(tpt_op_call(out, 2, &n, "nosuchns::thing", NULL, NOARGS), TPT_ERR_INVALID_ARGUMENT,
                "unknown operator 'nosuchns::thing'", NULL);
  expect_code2(tpt_op_call(out, 2, &n, "", NULL, NOARGS), TPT_ERR_INVALID_ARGUMENT, "empty", NULL);
  expect_code2(tpt_op_call(out, 2, &n, "aten::add", "Nope", ARGS(T(a), T(b))), TPT_ERR_INVALID_ARGUMENT,
                "operator 'aten::add' has no overload 'Nope'", "'Tensor'");
  free_all();
}

static void test_arguments_that_fit_no_schema(void **state) {
  (void)state;
  make_fixture();
  tpt_tensor *out[2] = {NULL, NULL};
  size_t n = 7;
  /* wrong count */
  expect_code2(tpt_op_call(out, 2, &n, "aten::relu", NULL, ARGS(T(a), T(b))), TPT_ERR_INVALID_ARGUMENT,
                "aten::relu(Tensor self) -> Tensor", "takes 1 positional argument, got 2");
  expect_code2(tpt_op_call(out, 2, &n, "aten::mm", NULL, ARGS(T(a))), TPT_ERR_INVALID_ARGUMENT,
                "argument 'mat2' is missing", NULL);
  /* wrong kind: one line per schema tried */
  tpt_status *st = tpt_op_call(out, 2, &n, "aten::add", NULL, ARGS(S("x"), T(a)));
  assert_int_equal(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
  const char *m = tpt_status_message(st);
  assert_non_null(strstr(m, "no overload of aten::add takes (string, tensor)"));
  assert_non_null(strstr(m, "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor: "
                            "argument 'self' (args[0]) wants Tensor, got string"));
  assert_non_null(strstr(m, "aten::add.Scalar("));
  tpt_status_free(st);
  /* a tensor is not a Scalar */
  expect_code2(tpt_op_call(out, 2, &n, "aten::add", "Scalar", ARGS(T(a), T(b))), TPT_ERR_INVALID_ARGUMENT,
                "aten::add.Scalar does not take (tensor, tensor)", "wants Scalar, got tensor");
  /* keywords */
  expect_code2(tpt_op_call(out, 2, &n, "aten::add", NULL, ARGS(T(a), T(b), KW("beta", I(2)))),
                TPT_ERR_INVALID_ARGUMENT, "no argument named 'beta' (args[2])", NULL);
  expect_code2(tpt_op_call(out, 2, &n, "aten::add", NULL,
                            ARGS(T(a), T(b), KW("alpha", I(1)), KW("alpha", I(2)))),
                TPT_ERR_INVALID_ARGUMENT, "keyword argument 'alpha' is given twice (args[2] and args[3])", NULL);
  expect_code2(tpt_op_call(out, 2, &n, "aten::add", NULL, ARGS(T(a), T(b), KW("other", T(b)))),
                TPT_ERR_INVALID_ARGUMENT, "argument 'other' is given twice (args[1] and args[2])", NULL);
  expect_code2(tpt_op_call(out, 2, &n, "aten::add", NULL, ARGS(T(a), KW("other", T(b)), I(1))),
                TPT_ERR_INVALID_ARGUMENT, "args[2] is positional but follows keyword argument args[1]", NULL);
  /* kwarg-only arguments only by keyword */
  expect_code2(tpt_op_call(out, 2, &n, "aten::add", "Tensor", ARGS(T(a), T(b), I(2))),
                TPT_ERR_INVALID_ARGUMENT, "takes 2 positional arguments, got 3", NULL);
  /* a Tensor[] takes no NULL entries (a Tensor?[] does) */
  expect_code2(tpt_op_call(out, 2, &n, "aten::cat", NULL, ARGS(TL(a, NULL))), TPT_ERR_INVALID_ARGUMENT,
                "entry 1 is NULL; only Tensor?[] takes NULL entries", NULL);
  /* bool from an int: 0 or 1 only */
  expect_code2(tpt_op_call(out, 2, &n, "aten::dropout", NULL, ARGS(T(a), D(0.5), I(2))),
                TPT_ERR_INVALID_ARGUMENT, "must be 0 or 1, got 2", NULL);
  /* Layout, Device, Generator: only None */
  expect_code2(tpt_op_call(out, 2, &n, "aten::full_like", NULL, ARGS(T(a), I(1), KW("device", I(0)))),
                TPT_ERR_INVALID_ARGUMENT, "wants Device?, got int", "can only be left at its default");
  check_op("aten::full_like", NULL, ARGS(T(a), I(1), KW("device", NONE()), KW("layout", NONE())), 1,
           SHAPE(2, 2), NOVALS);
  assert_int_equal(n, 0);
  assert_null(out[0]);
  assert_null(out[1]);
  free_all();
}

static void test_bad_tpt_args(void **state) {
  (void)state;
  make_fixture();
  tpt_tensor *out[1] = {NULL};
  size_t n = 0;
  expect_code2(tpt_op_call(out, 1, &n, "aten::add", NULL, ARGS(T(a), T(NULL))), TPT_ERR_INVALID_ARGUMENT,
                "tpt_op_call: args[1].tensor is NULL", NULL);
  uint64_t fake[4] = {1, 2, 3, 4};
  expect_code2(tpt_op_call(out, 1, &n, "aten::relu", NULL, ARGS(T((const tpt_tensor *)(void *)fake))),
                TPT_ERR_INVALID_ARGUMENT, "args[0].tensor is not a live tpt_tensor", NULL);
  expect_code2(tpt_op_call(out, 1, &n, "aten::cat", NULL,
                            ARGS(TL_((const tpt_tensor *const[]){a, (const tpt_tensor *)(void *)fake}, 2))),
                TPT_ERR_INVALID_ARGUMENT, "args[0].list[1] is not a live tpt_tensor", NULL);
  tpt_arg bad = T(a);
  bad.kind = (tpt_arg_kind)42;
  expect_code2(tpt_op_call(out, 1, &n, "aten::relu", NULL, &bad, 1), TPT_ERR_INVALID_ARGUMENT,
                "args[0].kind is 42, not a tpt_arg_kind", NULL);
  expect_code2(tpt_op_call(out, 1, &n, "aten::sum", NULL, ARGS(T(a), IL_(NULL, 3))),
                TPT_ERR_INVALID_ARGUMENT, "args[1].list is NULL but args[1].len is 3", NULL);
  tpt_tensor *half = F32(SHAPE(1), VALS(0.5));
  check_op("aten::reshape", NULL, ARGS(T(half), IL_(NULL, 0)), 1, SCALAR, VALS(0.5)); /* an empty list */
  expect_code2(tpt_op_call(out, 1, &n, "aten::gelu", NULL, ARGS(T(a), KW("approximate", S(NULL)))),
                TPT_ERR_INVALID_ARGUMENT, "args[1].list (the string) is NULL", NULL);
  expect_code2(tpt_op_call(out, 1, &n, "aten::dropout", NULL, ARGS(T(a), D(0.5), B(2))),
                TPT_ERR_INVALID_ARGUMENT, "args[2].i is 2; a TPT_ARG_BOOL holds 0 or 1", NULL);
  expect_code2(tpt_op_call(out, 1, &n, "aten::to", NULL, ARGS(T(a), DT((tpt_dtype)99))),
                TPT_ERR_INVALID_ARGUMENT, "args[1].i is 99, not a tpt_dtype", NULL);
  /* an error raised by the operator itself */
  expect_code2(tpt_op_call(out, 1, &n, "aten::mm", NULL, ARGS(T(a), T(x))), TPT_ERR_BACKEND,
                "tpt_op_call: ", NULL);
  assert_null(out[0]);
  free_all();
}

static void test_capacity(void **state) {
  (void)state;
  make_fixture();
  tpt_tensor *out[3] = {NULL, NULL, NULL};
  size_t n = 0;
  /* known before running (two returns) */
  expect_code2(tpt_op_call(out, 1, &n, "aten::max", NULL, ARGS(T(a), I(1))), TPT_ERR_INVALID_ARGUMENT,
                "capacity is 1 but aten::max.dim returns at least 2 outputs", NULL);
  assert_int_equal(n, 2);
  assert_null(out[0]);
  /* known after running (a list): the outputs are released, not leaked */
  expect_code2(tpt_op_call(out, 2, &n, "aten::split", NULL, ARGS(T(v), I(2))), TPT_ERR_INVALID_ARGUMENT,
                "capacity is 2 but aten::split.Tensor returned 3 outputs", NULL);
  assert_int_equal(n, 3);
  assert_null(out[0]);
  assert_null(out[1]);
  expect_code2(tpt_op_call(NULL, 0, &n, "aten::relu", NULL, ARGS(T(a))), TPT_ERR_INVALID_ARGUMENT,
                "capacity is 0", NULL);
  assert_int_equal(n, 1);
  /* unused slots are set to NULL */
  out[2] = (tpt_tensor *)(void *)&n;
  ok(tpt_op_call(out, 3, &n, "aten::relu", NULL, ARGS(T(a))));
  assert_int_equal(n, 1);
  assert_non_null(out[0]);
  assert_null(out[1]);
  assert_null(out[2]);
  tpt_tensor_free(out[0]);
  /* an operator without results */
  tpt_tensor *d[1] = {NULL};
  call_op(d, 1, "aten::clone", NULL, ARGS(T(a)));
  keep(d[0]);
  ok(tpt_op_call(NULL, 0, &n, "aten::_foreach_add_", "Scalar", ARGS(TL(d[0]), D(1))));
  assert_int_equal(n, 0);
  check_tensor("_foreach_add_", d[0], SHAPE(2, 2), VALS(2, 3, 4, 5));
  free_all();
}

static void test_null_arguments(void **state) {
  (void)state;
  make_fixture();
  tpt_tensor *out[1] = {NULL};
  size_t n = 0;
  char buf[16];
  EXPECT_NULL_ARG(tpt_op_call(out, 1, NULL, "aten::relu", NULL, ARGS(T(a))), "tpt_op_call", "n_outputs");
  EXPECT_NULL_ARG(tpt_op_call(NULL, 1, &n, "aten::relu", NULL, ARGS(T(a))), "tpt_op_call", "outputs");
  EXPECT_NULL_ARG(tpt_op_call(out, 1, &n, NULL, NULL, ARGS(T(a))), "tpt_op_call", "op");
  EXPECT_NULL_ARG(tpt_op_call(out, 1, &n, "aten::relu", NULL, NULL, 1), "tpt_op_call", "args");
  EXPECT_NULL_ARG(tpt_op_schemas(NULL, 16, NULL, "aten::add"), "tpt_op_schemas", "buf");
  EXPECT_NULL_ARG(tpt_op_schemas(buf, sizeof buf, NULL, NULL), "tpt_op_schemas", "op");
  free_all();
}

static void test_schemas(void **state) {
  (void)state;
  char buf[8192];
  size_t needed = 0;
  ok(tpt_op_schemas(buf, sizeof buf, &needed, "aten::add"));
  assert_int_equal(needed, strlen(buf) + 1);
  size_t lines = 1;
  for (const char *p = buf; *p; ++p) lines += *p == '\n';
  assert_true(lines >= 4);
  assert_non_null(strstr(buf, "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"));
  assert_non_null(strstr(buf, "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"));
  assert_non_null(strstr(buf, "aten::add.out("));
  /* a bare name is aten's */
  char buf2[8192];
  ok(tpt_op_schemas(buf2, sizeof buf2, NULL, "add"));
  assert_string_equal(buf, buf2);
  /* one overload */
  ok(tpt_op_schemas(buf2, sizeof buf2, NULL, "aten::relu"));
  assert_string_equal(buf2, "aten::relu(Tensor self) -> Tensor\n"
                            "aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)");
  ok(tpt_op_schemas(buf2, sizeof buf2, NULL, "aten::relu.out"));
  assert_string_equal(buf2, "aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)");
  /* too small: *needed says how much */
  char small[8];
  size_t need2 = 0;
  expect_code2(tpt_op_schemas(small, sizeof small, &need2, "aten::add"), TPT_ERR_INVALID_ARGUMENT,
                "tpt_op_schemas: size is 8 but the schemas need", NULL);
  assert_int_equal(need2, needed);
  assert_string_equal(small, "");
  expect_code2(tpt_op_schemas(NULL, 0, &need2, "aten::add"), TPT_ERR_INVALID_ARGUMENT, "size is 0", NULL);
  assert_int_equal(need2, needed);
  /* unknown */
  expect_code2(tpt_op_schemas(buf, sizeof buf, &need2, "aten::conv2dd"), TPT_ERR_NOT_FOUND,
                "no operator 'aten::conv2dd'", "aten::conv2d");
  assert_int_equal(need2, 0);
  expect_code2(tpt_op_schemas(buf, sizeof buf, NULL, "aten::add.Nope"), TPT_ERR_NOT_FOUND, NULL, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_arithmetic_functions),
      cmocka_unit_test(test_comparison_functions),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_shapes_and_indexing),
      cmocka_unit_test(test_nn),
      cmocka_unit_test(test_one_int_fills_int_n),
      cmocka_unit_test(test_dtypes_and_numbers),
      cmocka_unit_test(test_undefined_results_are_null),
      cmocka_unit_test(test_in_place_and_out),
      cmocka_unit_test(test_table_is_large),
      cmocka_unit_test(test_unknown_operator),
      cmocka_unit_test(test_arguments_that_fit_no_schema),
      cmocka_unit_test(test_bad_tpt_args),
      cmocka_unit_test(test_capacity),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_schemas),
  };
  return cmocka_run_group_tests_name("ops", tests, NULL, NULL);
}
