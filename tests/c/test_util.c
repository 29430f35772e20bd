/* bindings/c/tptrain_util.h: the macros and helpers behave as documented. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tptrain_util.h"

static int cleanup_ran;

static tpt_status *uses_try(const int64_t *shape, tpt_tensor **out) {
  tpt_status *st = NULL;
  tpt_tensor *a = NULL;
  const float x[] = {1, 2, 3, 4};
  cleanup_ran = 0;
  TPT_TRY(st, tptu_tensor_f32(&a, x, shape, 2), done);
  TPT_TRY(st, tpt_tensor_matmul(out, a, a), done);
done:
  cleanup_ran = 1;
  tpt_tensor_free(a);
  return st;
}

static tpt_status *uses_return_if_error(int threads) {
  TPT_RETURN_IF_ERROR(tpt_set_num_threads(threads));
  return tpt_status_new(TPT_ERR_CALLBACK, "reached the end");
}

static void test_try_success_and_failure(void **state) {
  (void)state;
  const int64_t square[] = {2, 2}, bad[] = {1, 4};
  tpt_tensor *out = NULL;
  assert_null(uses_try(square, &out));
  assert_int_equal(cleanup_ran, 1);
  float v[4];
  assert_null(tpt_tensor_copy_to(v, sizeof v, out));
  assert_true(v[0] == 7 && v[1] == 10 && v[2] == 15 && v[3] == 22);
  tpt_tensor_free(out);
  out = NULL;
  tpt_status *st = uses_try(bad, &out); /* [1,4] x [1,4] cannot be multiplied */
  assert_int_equal(cleanup_ran, 1);
  assert_int_equal(tpt_status_code(st), TPT_ERR_BACKEND);
  assert_null(out);
  tpt_status_free(st);
}

static void test_return_if_error(void **state) {
  (void)state;
  int before = 1;
  assert_null(tpt_get_num_threads(&before));
  tpt_status *st = uses_return_if_error(0);
  assert_int_equal(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
  tpt_status_free(st);
  st = uses_return_if_error(before);
  assert_int_equal(tpt_status_code(st), TPT_ERR_CALLBACK);
  tpt_status_free(st);
}

static void test_take_status(void **state) {
  (void)state;
  char buf[8];
  assert_int_equal(tptu_take_status(tpt_status_new(TPT_ERR_IO, "0123456789"), buf, sizeof buf), TPT_ERR_IO);
  assert_string_equal(buf, "0123456");
  assert_int_equal(tptu_take_status(NULL, buf, sizeof buf), TPT_OK);
  assert_string_equal(buf, "");
}

static void test_tensor_new_and_read(void **state) {
  (void)state;
  const int32_t data[] = {5, -6, 7};
  const int64_t shape[] = {3};
  tpt_tensor *t = NULL;
  assert_null(tptu_tensor_new(&t, TPT_DTYPE_I32, data, shape, 1));
  void *back = NULL;
  int64_t n = 0;
  assert_null(tptu_tensor_read(&back, &n, t));
  assert_int_equal(n, 3);
  assert_memory_equal(back, data, sizeof data);
  free(back);
  tpt_status *st = tptu_tensor_print(stdout, "i32", t);
  assert_int_equal(tpt_status_code(st), TPT_ERR_UNSUPPORTED);
  tpt_status_free(st);
  st = tptu_tensor_read(NULL, &n, t);
  assert_int_equal(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
  tpt_status_free(st);
  tpt_tensor_free(t);
  assert_int_equal(tptu_shape_numel(shape, 1), 3);
  const int64_t neg[] = {2, -1};
  assert_int_equal(tptu_shape_numel(neg, 2), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_try_success_and_failure),
      cmocka_unit_test(test_return_if_error),
      cmocka_unit_test(test_take_status),
      cmocka_unit_test(test_tensor_new_and_read),
  };
  return cmocka_run_group_tests_name("c_util", tests, NULL, NULL);
}
