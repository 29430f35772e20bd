/* Tensors that share memory with the host or other frameworks: from_blob
 * with a deleter, share, to, item, device, and DLPack both ways. Besides
 * tptrain.h this includes dlpack.h (the one LibTorch ships), as a DLPack
 * consumer would. */
#include <stdlib.h>

#include <ATen/dlpack.h>

#include "test_common.h"

static int deleted;
static void *deleted_ptr;
static void count_delete(void *data, void *ctx) {
  deleted++;
  deleted_ptr = data;
  assert_ptr_equal(ctx, &deleted);
}

static void test_from_blob_shares_memory_and_deletes_once(void **state) {
  (void)state;
  float host[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[] = {2, 3};
  tpt_tensor *t = NULL, *t2 = NULL, *v = NULL;
  deleted = 0;
  ok(tpt_tensor_from_blob(&t, host, shape, 2, NULL, count_delete, &deleted));
  host[4] = 50; /* no copy: the tensor sees it */
  float back[6];
  ok(tpt_tensor_copy_to(back, sizeof back, t));
  assert_true(back[4] == 50);
  ok(tpt_tensor_share(&t2, t));
  const int64_t flat[] = {6};
  ok(tpt_tensor_reshape(&v, t, flat, 1)); /* a view keeps the storage alive too */
  tpt_tensor_free(t);
  tpt_tensor_free(t2);
  assert_int_equal(deleted, 0);
  tpt_tensor_free(v);
  assert_int_equal(deleted, 1);
  assert_ptr_equal(deleted_ptr, host);

  /* failure: the deleter runs at once */
  deleted = 0;
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.device = "cuda:0";
  expect_code(tpt_tensor_from_blob(&t, host, shape, 2, &o, count_delete, &deleted), TPT_ERR_INVALID_ARGUMENT,
              "must be \"cpu\"");
  assert_int_equal(deleted, 1);
  expect_code(tpt_tensor_from_blob(NULL, host, shape, 2, NULL, count_delete, &deleted), TPT_ERR_INVALID_ARGUMENT,
              "argument 'out' is NULL");
  assert_int_equal(deleted, 2);
  expect_code(tpt_tensor_from_blob(&t, NULL, shape, 2, NULL, count_delete, &deleted), TPT_ERR_INVALID_ARGUMENT,
              "argument 'data' is NULL");
  assert_int_equal(deleted, 3);
  /* no deleter: the caller keeps the memory */
  ok(tpt_tensor_from_blob(&t, host, shape, 2, NULL, NULL, NULL));
  tpt_tensor_free(t);
}

static void test_to_item_device(void **state) {
  (void)state;
  const float x[] = {1.5f, -2.25f};
  const int64_t shape[] = {2};
  tpt_tensor *t = NULL, *d = NULL, *one = NULL;
  ok(tpt_tensor_from_data(&t, x, sizeof x, shape, 1, NULL));
  ok(tpt_tensor_to(&d, t, NULL, TPT_DTYPE_F64));
  tpt_dtype dt;
  ok(tpt_tensor_dtype(&dt, d));
  assert_int_equal(dt, TPT_DTYPE_F64);
  double back[2];
  ok(tpt_tensor_copy_to(back, sizeof back, d));
  assert_true(back[0] == 1.5 && back[1] == -2.25);
  char dev[16];
  ok(tpt_tensor_device(dev, sizeof dev, d));
  assert_string_equal(dev, "cpu");
  expect_code(tpt_tensor_device(dev, 3, d), TPT_ERR_INVALID_ARGUMENT, "needs 4 bytes");
  tpt_tensor *c = NULL;
  ok(tpt_tensor_to(&c, t, "cpu", 0)); /* a copy: a new tensor */
  tpt_tensor_free(c);
  expect_code(tpt_tensor_to(&c, t, "gpu", 0), TPT_ERR_BACKEND, "gpu");
  expect_code(tpt_tensor_to(&c, t, NULL, (tpt_dtype)42), TPT_ERR_INVALID_ARGUMENT, "dtype 42");
  double v = 0;
  expect_code(tpt_tensor_item(&v, t), TPT_ERR_INVALID_ARGUMENT, "2 elements");
  const int64_t s1[] = {1};
  ok(tpt_tensor_from_data(&one, x + 1, sizeof(float), s1, 1, NULL));
  ok(tpt_tensor_item(&v, one));
  assert_true(v == -2.25);
  tpt_tensor_free(one);
  tpt_tensor_free(d);
  tpt_tensor_free(t);
}

static void test_dlpack_round_trip(void **state) {
  (void)state;
  const int32_t x[] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[] = {3, 2};
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_I32;
  tpt_tensor *t = NULL, *back = NULL;
  ok(tpt_tensor_from_data(&t, x, sizeof x, shape, 2, &o));
  struct DLManagedTensor *m = NULL;
  ok(tpt_tensor_to_dlpack(&m, t));
  assert_non_null(m);
  DLTensor *dl = &m->dl_tensor;
  assert_int_equal(dl->ndim, 2);
  assert_int_equal(dl->shape[0], 3);
  assert_int_equal(dl->shape[1], 2);
  assert_int_equal(dl->dtype.code, kDLInt);
  assert_int_equal(dl->dtype.bits, 32);
  assert_int_equal(dl->device.device_type, kDLCPU);
  assert_int_equal(((int32_t *)dl->data)[5], 6);
  void *data = dl->data;
  ok(tpt_tensor_from_dlpack(&back, m)); /* takes m: no copy */
  tpt_tensor_free(t);
  int32_t y[6];
  ok(tpt_tensor_copy_to(y, sizeof y, back));
  assert_memory_equal(x, y, sizeof x);
  struct DLManagedTensor *m2 = NULL;
  ok(tpt_tensor_to_dlpack(&m2, back));
  assert_ptr_equal(m2->dl_tensor.data, data); /* same memory all along */
  m2->deleter(m2); /* the consumer's duty */
  tpt_tensor_free(back);
}

static int dl_deleted;
static void dl_delete(struct DLManagedTensor *self) {
  dl_deleted++;
  free((void *)self->dl_tensor.shape); /* const int64_t * in newer DLPack headers */
  free(self->dl_tensor.data);
  free(self);
}

static DLManagedTensor *make_dl(uint8_t code, uint8_t bits) {
  DLManagedTensor *m = calloc(1, sizeof *m);
  m->dl_tensor.data = calloc(4, sizeof(double));
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = 1;
  m->dl_tensor.dtype.code = code;
  m->dl_tensor.dtype.bits = bits;
  m->dl_tensor.dtype.lanes = 1;
  int64_t *shape = calloc(1, sizeof(int64_t));
  shape[0] = 4;
  m->dl_tensor.shape = shape;
  m->deleter = dl_delete;
  return m;
}

static void test_dlpack_from_a_foreign_producer(void **state) {
  (void)state;
  dl_deleted = 0;
  DLManagedTensor *m = make_dl(kDLFloat, 64);
  ((double *)m->dl_tensor.data)[2] = 7.5;
  tpt_tensor *t = NULL;
  ok(tpt_tensor_from_dlpack(&t, m));
  double v[4];
  ok(tpt_tensor_copy_to(v, sizeof v, t));
  assert_true(v[2] == 7.5);
  assert_int_equal(dl_deleted, 0);
  tpt_tensor_free(t);
  assert_int_equal(dl_deleted, 1);
  /* a dtype LibTorch cannot take: an error, and the producer's deleter still runs */
  expect_code(tpt_tensor_from_dlpack(&t, make_dl(kDLFloat, 24)), TPT_ERR_BACKEND, "tpt_tensor_from_dlpack: ");
  assert_int_equal(dl_deleted, 2);
  assert_null(t);
  expect_code(tpt_tensor_from_dlpack(NULL, make_dl(kDLFloat, 64)), TPT_ERR_INVALID_ARGUMENT, "'out'");
  assert_int_equal(dl_deleted, 3);
}

static void test_null_arguments(void **state) {
  (void)state;
  const float x = 1;
  tpt_tensor *t = NULL, *o = NULL;
  ok(tpt_tensor_from_data(&t, &x, sizeof x, NULL, 0, NULL));
  char buf[8];
  double d;
  struct DLManagedTensor *m = NULL;
  expect_code(tpt_tensor_share(NULL, t), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_share: argument 'out' is NULL");
  expect_code(tpt_tensor_share(&o, NULL), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_share: argument 'tensor' is NULL");
  expect_code(tpt_tensor_device(NULL, 8, t), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_device: argument 'buf' is NULL");
  expect_code(tpt_tensor_device(buf, 8, NULL), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_device: argument 'tensor' is NULL");
  expect_code(tpt_tensor_to(NULL, t, NULL, 0), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_to: argument 'out' is NULL");
  expect_code(tpt_tensor_to(&o, NULL, NULL, 0), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_to: argument 'tensor' is NULL");
  expect_code(tpt_tensor_item(NULL, t), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_item: argument 'out' is NULL");
  expect_code(tpt_tensor_item(&d, NULL), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_item: argument 'tensor' is NULL");
  expect_code(tpt_tensor_to_dlpack(NULL, t), TPT_ERR_INVALID_ARGUMENT, "tpt_tensor_to_dlpack: argument 'out' is NULL");
  expect_code(tpt_tensor_to_dlpack(&m, NULL), TPT_ERR_INVALID_ARGUMENT,
              "tpt_tensor_to_dlpack: argument 'tensor' is NULL");
  expect_code(tpt_tensor_from_dlpack(&o, NULL), TPT_ERR_INVALID_ARGUMENT,
              "tpt_tensor_from_dlpack: argument 'src' is NULL");
  const int64_t s[] = {1};
  expect_code(tpt_tensor_from_blob(&o, NULL, NULL, 1, NULL, NULL, NULL), TPT_ERR_INVALID_ARGUMENT,
              "tpt_tensor_from_blob: argument 'shape' is NULL");
  (void)s;
  tpt_tensor_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_from_blob_shares_memory_and_deletes_once),
      cmocka_unit_test(test_to_item_device),
      cmocka_unit_test(test_dlpack_round_trip),
      cmocka_unit_test(test_dlpack_from_a_foreign_producer),
      cmocka_unit_test(test_null_arguments),
  };
  return cmocka_run_group_tests_name("tensor_interop", tests, NULL, NULL);
}
