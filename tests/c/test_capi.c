/* The C API from C11, seen only through tptrain.h. Run with
 * CMOCKA_MESSAGE_OUTPUT=TAP (meson test does). */

#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <stdlib.h>

#include "test_common.h"

static tpt_tensor *make_f32(const float *data, const int64_t *shape, size_t ndim) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  tpt_tensor *t = NULL;
  ok(tpt_tensor_from_data(&t, data, n * sizeof(float), shape, ndim, NULL));
  assert_non_null(t);
  return t;
}

/* ---------------------------------------------------------------- versions */

static void test_version_matches_header(void **state) {
  (void)state;
  assert_int_equal(tpt_version(), TPT_VERSION_NUMBER);
  assert_string_equal(tpt_version_string(), TPT_VERSION_STRING);
  assert_int_equal(tpt_abi_version(), TPT_ABI_VERSION);
  char buf[32];
  snprintf(buf, sizeof buf, "%d.%d.%d", TPT_VERSION_MAJOR, TPT_VERSION_MINOR, TPT_VERSION_PATCH);
  assert_string_equal(tpt_version_string(), buf);
}

/* ---------------------------------------------------------------- status */

static void test_status_null_is_success(void **state) {
  (void)state;
  assert_int_equal(tpt_status_code(NULL), TPT_OK);
  assert_string_equal(tpt_status_message(NULL), "");
  tpt_status_free(NULL);
  assert_null(tpt_status_new(TPT_OK, "not an error"));
}

static void test_status_new_copies_message(void **state) {
  (void)state;
  char msg[] = "disk on fire";
  tpt_status *st = tpt_status_new(TPT_ERR_IO, msg);
  msg[0] = 'X';
  assert_int_equal(tpt_status_code(st), TPT_ERR_IO);
  assert_string_equal(tpt_status_message(st), "disk on fire");
  tpt_status_free(st);
  st = tpt_status_new(TPT_ERR_CALLBACK, NULL);
  assert_string_equal(tpt_status_message(st), "");
  tpt_status_free(st);
}

static void test_code_names(void **state) {
  (void)state;
  assert_string_equal(tpt_code_name(TPT_OK), "TPT_OK");
  assert_string_equal(tpt_code_name(TPT_ERR_BACKEND), "TPT_ERR_BACKEND");
  assert_string_equal(tpt_code_name(TPT_ERR_UNSUPPORTED), "TPT_ERR_UNSUPPORTED");
  assert_string_equal(tpt_code_name((tpt_code)12345), "TPT_UNKNOWN_CODE");
}

/* ---------------------------------------------------------------- runtime */

static void test_build_info_and_features(void **state) {
  (void)state;
  const char *info = tpt_build_info();
  assert_non_null(info);
  assert_non_null(strstr(info, "tptrain " TPT_VERSION_STRING));
  assert_non_null(strstr(info, "LibTorch "));
  assert_ptr_equal(info, tpt_build_info()); /* static, built once */
  assert_true(tpt_has_feature(TPT_FEATURE_GLOO) == 0 || tpt_has_feature(TPT_FEATURE_GLOO) == 1);
  assert_int_equal(tpt_has_feature(TPT_FEATURE_GLOO), strstr(info, "c10d Gloo: yes") != NULL);
  assert_int_equal(tpt_has_feature(TPT_FEATURE_CUDA), strstr(info, "CUDA devices: yes") != NULL);
  (void)tpt_has_feature(TPT_FEATURE_NCCL);
  assert_int_equal(tpt_has_feature((tpt_feature)777), 0);
}

static void test_threads(void **state) {
  (void)state;
  int before = 0, now = 0;
  ok(tpt_get_num_threads(&before));
  assert_true(before >= 1);
  ok(tpt_set_num_threads(1));
  ok(tpt_get_num_threads(&now));
  assert_int_equal(now, 1);
  expect_code2(tpt_set_num_threads(0), TPT_ERR_INVALID_ARGUMENT, "tpt_set_num_threads: ",
                "num_threads must be >= 1, got 0");
  expect_code2(tpt_set_num_threads(-3), TPT_ERR_INVALID_ARGUMENT, "got -3", NULL);
  EXPECT_NULL_ARG(tpt_get_num_threads(NULL), "tpt_get_num_threads", "out");
  ok(tpt_set_num_threads(before));
}

/* What each setting does to LibTorch's flags is checked in gtest-cpp
 * (Runtime.DeterminismAndPrecisionReachLibTorch); here the C surface. */
static void test_determinism_and_precision(void **state) {
  (void)state;
  const char *before = getenv("CUBLAS_WORKSPACE_CONFIG");
  char saved[64] = "";
  if (before) snprintf(saved, sizeof saved, "%s", before);
  unsetenv("CUBLAS_WORKSPACE_CONFIG");
  ok(tpt_set_determinism(TPT_DETERMINISM_DEFAULT));
  assert_null(getenv("CUBLAS_WORKSPACE_CONFIG"));
  ok(tpt_set_determinism(TPT_DETERMINISM_ON));
  assert_non_null(getenv("CUBLAS_WORKSPACE_CONFIG"));
  assert_string_equal(getenv("CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
  setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 1); /* the user's own value stays */
  ok(tpt_set_determinism(TPT_DETERMINISM_WARN));
  assert_string_equal(getenv("CUBLAS_WORKSPACE_CONFIG"), ":16:8");
  ok(tpt_set_determinism(TPT_DETERMINISM_DEFAULT));

  /* ON: an operator without a deterministic kernel fails with LibTorch's
   * reason (put with accumulate=False has none, on the CPU too); DEFAULT runs it. */
  const float zeros[4] = {0}, values[2] = {1, 2};
  const int64_t where[2] = {1, 1}, s4[] = {4}, s2[] = {2};
  tpt_tensor_options i64 = TPT_TENSOR_OPTIONS_INIT;
  i64.dtype = TPT_DTYPE_I64;
  tpt_tensor *x = NULL, *index = NULL, *source = NULL, *out = NULL;
  ok(tpt_tensor_from_data(&x, zeros, sizeof zeros, s4, 1, NULL));
  ok(tpt_tensor_from_data(&index, where, sizeof where, s2, 1, &i64));
  ok(tpt_tensor_from_data(&source, values, sizeof values, s2, 1, NULL));
  tpt_arg args[3];
  memset(args, 0, sizeof args);
  args[0].kind = args[1].kind = args[2].kind = TPT_ARG_TENSOR;
  args[0].tensor = x;
  args[1].tensor = index;
  args[2].tensor = source;
  size_t n = 0;
  ok(tpt_set_determinism(TPT_DETERMINISM_ON));
  expect_code2(tpt_op_call(&out, 1, &n, "aten::put", NULL, args, 3), TPT_ERR_BACKEND,
               "does not have a deterministic implementation", NULL);
  ok(tpt_set_determinism(TPT_DETERMINISM_DEFAULT));
  ok(tpt_op_call(&out, 1, &n, "aten::put", NULL, args, 3));
  assert_int_equal(n, 1);
  tpt_tensor_free(out);
  tpt_tensor_free(x);
  tpt_tensor_free(index);
  tpt_tensor_free(source);

  expect_code2(tpt_set_determinism((tpt_determinism)3), TPT_ERR_INVALID_ARGUMENT, "tpt_set_determinism: ",
               "mode must be TPT_DETERMINISM_DEFAULT, TPT_DETERMINISM_WARN or TPT_DETERMINISM_ON, got 3");
  expect_code2(tpt_set_determinism((tpt_determinism)-1), TPT_ERR_INVALID_ARGUMENT, "got -1", NULL);
  ok(tpt_set_float32_precision(TPT_FLOAT32_IEEE));
  ok(tpt_set_float32_precision(TPT_FLOAT32_TF32));
  ok(tpt_set_float32_precision(TPT_FLOAT32_DEFAULT));
  expect_code2(tpt_set_float32_precision((tpt_float32_precision)7), TPT_ERR_INVALID_ARGUMENT,
               "tpt_set_float32_precision: ", "got 7");
  if (before) setenv("CUBLAS_WORKSPACE_CONFIG", saved, 1);
  else unsetenv("CUBLAS_WORKSPACE_CONFIG");
}

/* ---------------------------------------------------------------- tensors */

static void test_round_trip_every_dtype(void **state) {
  (void)state;
  const tpt_dtype all[] = {TPT_DTYPE_F32, TPT_DTYPE_F64, TPT_DTYPE_F16, TPT_DTYPE_BF16,
                           TPT_DTYPE_I64, TPT_DTYPE_I32, TPT_DTYPE_U8,  TPT_DTYPE_BOOL};
  const size_t sizes[] = {4, 8, 2, 2, 8, 4, 1, 1};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; ++k) {
    assert_int_equal(tpt_dtype_size(all[k]), sizes[k]);
    unsigned char in[6 * 8], out[6 * 8];
    size_t nbytes = 6 * sizes[k];
    for (size_t i = 0; i < nbytes; ++i) in[i] = (unsigned char)(all[k] == TPT_DTYPE_BOOL ? (i & 1) : (i * 37 + 11) % 251);
    const int64_t shape[] = {2, 3};
    tpt_tensor_options opts = TPT_TENSOR_OPTIONS_INIT;
    opts.dtype = all[k];
    tpt_tensor *t = NULL;
    ok(tpt_tensor_from_data(&t, in, nbytes, shape, 2, &opts));
    tpt_dtype dt;
    ok(tpt_tensor_dtype(&dt, t));
    assert_int_equal(dt, all[k]);
    size_t ndim = 0;
    ok(tpt_tensor_ndim(&ndim, t));
    assert_int_equal(ndim, 2);
    int64_t dims[2] = {0, 0}, numel = 0;
    ok(tpt_tensor_shape(dims, 2, t));
    assert_int_equal(dims[0], 2);
    assert_int_equal(dims[1], 3);
    ok(tpt_tensor_numel(&numel, t));
    assert_int_equal(numel, 6);
    memset(out, 0xEE, sizeof out);
    ok(tpt_tensor_copy_to(out, nbytes, t));
    assert_memory_equal(in, out, nbytes);
    tpt_tensor_free(t);
  }
  assert_int_equal(tpt_dtype_size((tpt_dtype)0), 0);
}

static void test_scalar_and_empty_tensors(void **state) {
  (void)state;
  float v = 2.5f, back = 0;
  tpt_tensor *s = NULL;
  ok(tpt_tensor_from_data(&s, &v, sizeof v, NULL, 0, NULL));
  size_t ndim = 99;
  ok(tpt_tensor_ndim(&ndim, s));
  assert_int_equal(ndim, 0);
  ok(tpt_tensor_shape(NULL, 0, s));
  ok(tpt_tensor_copy_to(&back, sizeof back, s));
  assert_true(back == 2.5f);
  tpt_tensor_free(s);

  const int64_t zero[] = {0, 4};
  tpt_tensor *e = NULL;
  ok(tpt_tensor_from_data(&e, NULL, 0, zero, 2, NULL));
  int64_t n = -1;
  ok(tpt_tensor_numel(&n, e));
  assert_int_equal(n, 0);
  ok(tpt_tensor_copy_to(NULL, 0, e));
  tpt_tensor_free(e);
}

static void test_matmul_values(void **state) {
  (void)state;
  const float a[] = {1, 2, 3, 4, 5, 6};   /* 2x3 */
  const float b[] = {7, 8, 9, 10, 11, 12}; /* 3x2 */
  const int64_t sa[] = {2, 3}, sb[] = {3, 2};
  tpt_tensor *ta = make_f32(a, sa, 2), *tb = make_f32(b, sb, 2), *c = NULL;
  ok(tpt_tensor_matmul(&c, ta, tb));
  float got[4];
  ok(tpt_tensor_copy_to(got, sizeof got, c));
  /* computed by hand */
  const float want[4] = {58, 64, 139, 154};
  for (int i = 0; i < 4; ++i) assert_true(got[i] == want[i]);
  tpt_tensor_free(c);
  tpt_tensor_free(ta);
  tpt_tensor_free(tb);
}

static void test_reshape(void **state) {
  (void)state;
  const float a[] = {1, 2, 3, 4, 5, 6};
  const int64_t s23[] = {2, 3}, s3x[] = {3, -1};
  tpt_tensor *t = make_f32(a, s23, 2), *r = NULL;
  ok(tpt_tensor_reshape(&r, t, s3x, 2));
  int64_t dims[2];
  ok(tpt_tensor_shape(dims, 2, r));
  assert_int_equal(dims[0], 3);
  assert_int_equal(dims[1], 2);
  tpt_tensor_free(r);
  tpt_tensor_free(t);
}

/* LibTorch's own errors come back as TPT_ERR_BACKEND statuses: c10::Error
 * (matmul's shape check, the device parser) and the std::runtime_error that
 * reshape's size inference throws. */
static void test_libtorch_errors_become_status(void **state) {
  (void)state;
  const float a[] = {1, 2, 3, 4, 5, 6};
  const int64_t s23[] = {2, 3}, s42[] = {4, 2};
  tpt_tensor *t = make_f32(a, s23, 2), *r = (tpt_tensor *)0x1;
  expect_code2(tpt_tensor_reshape(&r, t, s42, 2), TPT_ERR_BACKEND, "tpt_tensor_reshape: ",
                "shape '[4, 2]' is invalid for input of size 6");
  assert_null(r); /* out is cleared on failure */
  expect_code2(tpt_tensor_matmul(&r, t, t), TPT_ERR_BACKEND, "tpt_tensor_matmul: ", "cannot be multiplied");
  /* A malformed device string is rejected by LibTorch's parser. */
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.device = "gpu7";
  expect_code2(tpt_tensor_from_data(&r, a, sizeof a, s23, 2, &o), TPT_ERR_BACKEND,
                "tpt_tensor_from_data: ", "gpu7");
  if (!tpt_has_feature(TPT_FEATURE_CUDA)) {
    o.device = "cuda:0";
    tpt_status *st = tpt_tensor_from_data(&r, a, sizeof a, s23, 2, &o);
    assert_non_null(st);
    assert_int_equal(tpt_status_code(st), TPT_ERR_BACKEND);
    tpt_status_free(st);
  }
  tpt_tensor_free(t);
}

static void test_from_data_validation(void **state) {
  (void)state;
  const float a[] = {1, 2, 3, 4, 5, 6};
  const int64_t s23[] = {2, 3}, neg[] = {2, -3};
  tpt_tensor *t = NULL;
  expect_code2(tpt_tensor_from_data(&t, a, 5 * sizeof(float), s23, 2, NULL),
                TPT_ERR_INVALID_ARGUMENT, "nbytes is 20", "needs 6 x 4 bytes");
  expect_code2(tpt_tensor_from_data(&t, a, sizeof a, neg, 2, NULL), TPT_ERR_INVALID_ARGUMENT,
                "shape[1] is -3", NULL);
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.version = 0;
  expect_code2(tpt_tensor_from_data(&t, a, sizeof a, s23, 2, &o), TPT_ERR_INVALID_ARGUMENT,
                "options->version is 0", "TPT_TENSOR_OPTIONS_INIT");
  o.version = TPT_TENSOR_OPTIONS_VERSION + 1;
  expect_code2(tpt_tensor_from_data(&t, a, sizeof a, s23, 2, &o), TPT_ERR_INVALID_ARGUMENT,
                "options->version", NULL);
  o = (tpt_tensor_options)TPT_TENSOR_OPTIONS_INIT;
  o.dtype = (tpt_dtype)99;
  expect_code2(tpt_tensor_from_data(&t, a, sizeof a, s23, 2, &o), TPT_ERR_INVALID_ARGUMENT,
                "options->dtype 99 is not a tpt_dtype", NULL);
  o = (tpt_tensor_options)TPT_TENSOR_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_I32;
  o.requires_grad = 1;
  expect_code2(tpt_tensor_from_data(&t, a, sizeof a, s23, 2, &o), TPT_ERR_INVALID_ARGUMENT,
                "requires_grad needs a floating dtype", NULL);
  const int64_t huge[] = {INT64_MAX, INT64_MAX};
  expect_code2(tpt_tensor_from_data(&t, a, sizeof a, huge, 2, NULL), TPT_ERR_INVALID_ARGUMENT,
                "too many elements", NULL);
  assert_null(t);

  t = make_f32(a, s23, 2);
  float small[2];
  expect_code2(tpt_tensor_copy_to(small, sizeof small, t), TPT_ERR_INVALID_ARGUMENT,
                "nbytes is 8 but the tensor holds 24 bytes", NULL);
  int64_t dims[1];
  expect_code2(tpt_tensor_shape(dims, 1, t), TPT_ERR_INVALID_ARGUMENT,
                "capacity is 1 but the tensor has 2 dimensions", NULL);
  tpt_tensor_free(t);
}

/* Every function given NULL where a pointer is required names the argument. */
static void test_null_arguments(void **state) {
  (void)state;
  const float a[] = {1, 2, 3, 4, 5, 6};
  const int64_t s23[] = {2, 3};
  tpt_tensor *t = make_f32(a, s23, 2), *r = NULL;
  size_t nd;
  int64_t n, dims[2];
  tpt_dtype dt;
  float buf[6];

  EXPECT_NULL_ARG(tpt_get_num_threads(NULL), "tpt_get_num_threads", "out");

  EXPECT_NULL_ARG(tpt_tensor_from_data(NULL, a, sizeof a, s23, 2, NULL), "tpt_tensor_from_data", "out");
  EXPECT_NULL_ARG(tpt_tensor_from_data(&r, NULL, sizeof a, s23, 2, NULL), "tpt_tensor_from_data", "data");
  EXPECT_NULL_ARG(tpt_tensor_from_data(&r, a, sizeof a, NULL, 2, NULL), "tpt_tensor_from_data", "shape");

  EXPECT_NULL_ARG(tpt_tensor_ndim(NULL, t), "tpt_tensor_ndim", "out");
  EXPECT_NULL_ARG(tpt_tensor_ndim(&nd, NULL), "tpt_tensor_ndim", "tensor");

  EXPECT_NULL_ARG(tpt_tensor_shape(dims, 2, NULL), "tpt_tensor_shape", "tensor");
  EXPECT_NULL_ARG(tpt_tensor_shape(NULL, 2, t), "tpt_tensor_shape", "dims");

  EXPECT_NULL_ARG(tpt_tensor_numel(NULL, t), "tpt_tensor_numel", "out");
  EXPECT_NULL_ARG(tpt_tensor_numel(&n, NULL), "tpt_tensor_numel", "tensor");

  EXPECT_NULL_ARG(tpt_tensor_dtype(NULL, t), "tpt_tensor_dtype", "out");
  EXPECT_NULL_ARG(tpt_tensor_dtype(&dt, NULL), "tpt_tensor_dtype", "tensor");

  EXPECT_NULL_ARG(tpt_tensor_copy_to(NULL, sizeof buf, t), "tpt_tensor_copy_to", "dst");
  EXPECT_NULL_ARG(tpt_tensor_copy_to(buf, sizeof buf, NULL), "tpt_tensor_copy_to", "tensor");

  EXPECT_NULL_ARG(tpt_tensor_reshape(NULL, t, s23, 2), "tpt_tensor_reshape", "out");
  EXPECT_NULL_ARG(tpt_tensor_reshape(&r, NULL, s23, 2), "tpt_tensor_reshape", "tensor");
  EXPECT_NULL_ARG(tpt_tensor_reshape(&r, t, NULL, 2), "tpt_tensor_reshape", "shape");

  EXPECT_NULL_ARG(tpt_tensor_matmul(NULL, t, t), "tpt_tensor_matmul", "out");
  EXPECT_NULL_ARG(tpt_tensor_matmul(&r, NULL, t), "tpt_tensor_matmul", "a");
  EXPECT_NULL_ARG(tpt_tensor_matmul(&r, t, NULL), "tpt_tensor_matmul", "b");

  /* NULL-safe frees and NULL-tolerant getters */
  tpt_tensor_free(NULL);
  tpt_status_free(NULL);
  assert_null(r);
  tpt_tensor_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_matches_header),
      cmocka_unit_test(test_status_null_is_success),
      cmocka_unit_test(test_status_new_copies_message),
      cmocka_unit_test(test_code_names),
      cmocka_unit_test(test_build_info_and_features),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_determinism_and_precision),
      cmocka_unit_test(test_round_trip_every_dtype),
      cmocka_unit_test(test_scalar_and_empty_tensors),
      cmocka_unit_test(test_matmul_values),
      cmocka_unit_test(test_reshape),
      cmocka_unit_test(test_libtorch_errors_become_status),
      cmocka_unit_test(test_from_data_validation),
      cmocka_unit_test(test_null_arguments),
  };
  return cmocka_run_group_tests_name("capi", tests, NULL, NULL);
}
