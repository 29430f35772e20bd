/* The DataFlow library from C: sources (tensors, callbacks, files, IDX and
 * MNIST, fake data), combinators (batch, map, parallel map, prefetch, local
 * shuffle, cache, repeat, fixed size, concat, join, select), image
 * augmentation, seeds and saved random state, the one-consumer rule, NULL
 * and foreign arguments, and the dataflow inputs of the simple trainer
 * (queue, feed, staging, dummy), their threads, and the inference runner.
 *
 * Callbacks that may run on the library's threads (parallel map, prefetch,
 * the queue input) never use cmocka's assertions: they report through their
 * return status or counters read after the threads are joined. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "test_common.h"

/* ------------------------------------------------------------------ helpers */

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static tpt_tensor *make_tensor(tpt_dtype dtype, const void *data, const int64_t *shape, size_t ndim) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = dtype;
  tpt_tensor *t = NULL;
  ok(tpt_tensor_from_data(&t, data, n * tpt_dtype_size(dtype), shape, ndim, &o));
  return t;
}

/* [n] i64: offset, offset + 1, ... */
static tpt_tensor *range_tensor(int64_t n, int64_t offset) {
  int64_t *v = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; ++i) v[i] = offset + i;
  const int64_t shape[] = {n};
  tpt_tensor *t = make_tensor(TPT_DTYPE_I64, v, shape, 1);
  free(v);
  return t;
}

/* Datapoints (offset + i) for i in [0, n), an i64 scalar each. */
static tpt_dataflow *range_df(int64_t n, int64_t offset, int32_t shuffle) {
  tpt_tensor *t = range_tensor(n, offset);
  const tpt_tensor *ts[] = {t};
  tpt_dataflow *df = NULL;
  ok(tpt_dataflow_from_tensors(&df, ts, 1, shuffle));
  tpt_tensor_free(t);
  return df;
}

/* Callback-safe helpers: they report through the status. */
static tpt_status *value_of(double *out, const tpt_datapoint *dp, size_t i) {
  tpt_tensor *t = NULL;
  tpt_status *st = tpt_datapoint_get(&t, dp, i);
  if (st) return st;
  st = tpt_tensor_item(out, t);
  tpt_tensor_free(t);
  return st;
}

static tpt_status *new_i64(tpt_tensor **out, int64_t v) {
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_I64;
  return tpt_tensor_from_data(out, &v, sizeof v, NULL, 0, &o);
}

static tpt_status *set_i64(tpt_datapoint *dp, size_t i, int64_t v) {
  tpt_tensor *t = NULL;
  tpt_status *st = new_i64(&t, v);
  if (st) return st;
  st = tpt_datapoint_set(dp, i, t);
  tpt_tensor_free(t);
  return st;
}

/* Test-thread helpers (they assert). */
static double comp(const tpt_datapoint *dp, size_t i) {
  double v = 0;
  ok(value_of(&v, dp, i));
  return v;
}

static void expect_comp(const tpt_datapoint *dp, size_t i, tpt_dtype dtype, const int64_t *shape, size_t ndim) {
  tpt_tensor *t = NULL;
  ok(tpt_datapoint_get(&t, dp, i));
  tpt_dtype d;
  size_t nd = 99;
  int64_t dims[8] = {0};
  ok(tpt_tensor_dtype(&d, t));
  ok(tpt_tensor_ndim(&nd, t));
  if (d != dtype) fail_msg("component %zu has dtype %d, want %d", i, (int)d, (int)dtype);
  if (nd != ndim) fail_msg("component %zu has %zu dimensions, want %zu", i, nd, ndim);
  ok(tpt_tensor_shape(dims, 8, t));
  for (size_t k = 0; k < ndim; ++k)
    if (dims[k] != shape[k])
      fail_msg("component %zu: dimension %zu is %lld, want %lld", i, k, (long long)dims[k], (long long)shape[k]);
  tpt_tensor_free(t);
}

static void comp_bytes(void *dst, size_t nbytes, const tpt_datapoint *dp, size_t i) {
  tpt_tensor *t = NULL;
  ok(tpt_datapoint_get(&t, dp, i));
  ok(tpt_tensor_copy_to(dst, nbytes, t));
  tpt_tensor_free(t);
}

/* 1 for a datapoint, 0 for TPT_STOP (the datapoint is then empty). */
static int next_dp(tpt_dataflow *df, tpt_datapoint *dp) {
  tpt_status *st = tpt_dataflow_next(df, dp);
  if (!st) return 1;
  if (tpt_status_code(st) == TPT_STOP) {
    tpt_status_free(st);
    assert_int_equal(tpt_datapoint_size(dp), 0);
    return 0;
  }
  fail_msg("tpt_dataflow_next: %s: %s", tpt_code_name(tpt_status_code(st)), tpt_status_message(st));
  return -1;
}

/* One pass of component 0 (as integers) into out[0..cap); its length. */
static size_t read_pass(tpt_dataflow *df, int64_t *out, size_t cap) {
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  size_t n = 0;
  while (next_dp(df, dp)) {
    if (n == cap) fail_msg("the pass is longer than %zu", cap);
    out[n++] = (int64_t)comp(dp, 0);
  }
  tpt_datapoint_free(dp);
  return n;
}

/* Exactly n datapoints of component 0; TPT_STOP among them fails. */
static void read_n(tpt_dataflow *df, int64_t *out, size_t n) {
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (size_t i = 0; i < n; ++i) {
    if (!next_dp(df, dp)) fail_msg("TPT_STOP after %zu datapoints, %zu expected", i, n);
    out[i] = (int64_t)comp(dp, 0);
  }
  tpt_datapoint_free(dp);
}

static void expect_seq(const int64_t *got, size_t n_got, const int64_t *want, size_t n_want) {
  if (n_got != n_want) fail_msg("%zu datapoints, want %zu", n_got, n_want);
  for (size_t i = 0; i < n_want; ++i)
    if (got[i] != want[i]) fail_msg("datapoint %zu is %lld, want %lld", i, (long long)got[i], (long long)want[i]);
}

static void expect_range(const int64_t *got, size_t n_got, int64_t n, int64_t offset) {
  if ((int64_t)n_got != n) fail_msg("%zu datapoints, want %lld", n_got, (long long)n);
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != offset + i)
      fail_msg("datapoint %lld is %lld, want %lld", (long long)i, (long long)got[i], (long long)(offset + i));
}

/* Each of offset .. offset + n - 1 exactly once. */
static int is_permutation(const int64_t *v, size_t n_v, int64_t n, int64_t offset) {
  if ((int64_t)n_v != n) return 0;
  char *seen = calloc((size_t)n + 1, 1);
  int good = 1;
  for (size_t i = 0; i < n_v && good; ++i) {
    int64_t k = v[i] - offset;
    if (k < 0 || k >= n || seen[k]) good = 0;
    else seen[k] = 1;
  }
  free(seen);
  return good;
}

static int same_seq(const int64_t *a, const int64_t *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static int64_t df_size(const tpt_dataflow *df) {
  int64_t n = -2;
  ok(tpt_dataflow_size(&n, df));
  return n;
}

/* ------------------------------------------------------------------ a C source */

/* Datapoints 0 .. n-1 (i64 scalars), then TPT_STOP; the next call starts
 * over. Counts its calls (read after the dataflow's threads are joined). */
typedef struct {
  int64_t n, pos;
  int64_t fail_at;  /* returns TPT_ERR_IO "source broke at <i>" there (-1: never) */
  int64_t empty_at; /* returns success without a component there (-1: never) */
  int shapes;       /* component 0: f32 zeros of shape [2 + i % 2] instead */
  int fail_reset;
  int next_calls, reset_calls, size_calls, destroyed;
  uint64_t last_seed;
} src_state;

static void src_init(src_state *s, int64_t n) {
  memset(s, 0, sizeof *s);
  s->n = n;
  s->fail_at = -1;
  s->empty_at = -1;
}

static tpt_status *src_next(tpt_datapoint *dp, void *ud) {
  src_state *s = ud;
  s->next_calls++;
  if (s->pos >= s->n) {
    s->pos = 0;
    return tpt_status_new(TPT_STOP, "end of the source's pass");
  }
  int64_t i = s->pos++;
  if (i == s->fail_at) {
    char msg[64];
    snprintf(msg, sizeof msg, "source broke at %lld", (long long)i);
    return tpt_status_new(TPT_ERR_IO, msg);
  }
  if (i == s->empty_at) return NULL;
  if (s->shapes) {
    float z[3] = {0, 0, 0};
    const int64_t shape[] = {2 + i % 2};
    tpt_tensor *t = NULL;
    tpt_status *st = tpt_tensor_from_data(&t, z, (size_t)shape[0] * sizeof(float), shape, 1, NULL);
    if (!st) st = tpt_datapoint_set(dp, 0, t);
    tpt_tensor_free(t);
    return st;
  }
  return set_i64(dp, 0, i);
}

static tpt_status *src_reset(uint64_t seed, void *ud) {
  src_state *s = ud;
  s->reset_calls++;
  s->last_seed = seed;
  s->pos = 0;
  if (s->fail_reset) return tpt_status_new(TPT_ERR_STATE, "the source cannot rewind");
  return NULL;
}

static int64_t src_size(void *ud) {
  src_state *s = ud;
  s->size_calls++;
  return s->n;
}

static void src_destroy(void *ud) { ((src_state *)ud)->destroyed++; }

static tpt_dataflow *src_df(src_state *s) {
  tpt_dataflow_callbacks cb = TPT_DATAFLOW_CALLBACKS_INIT;
  cb.next = src_next;
  cb.reset = src_reset;
  cb.size = src_size;
  tpt_dataflow *df = NULL;
  ok(tpt_dataflow_from_callbacks(&df, &cb, s, src_destroy));
  return df;
}

/* ================================================================== 1. from_tensors */

static void test_from_tensors_in_order(void **state) {
  (void)state;
  const int64_t xv[5] = {10, 11, 12, 13, 14};
  float yv[10];
  for (int i = 0; i < 10; ++i) yv[i] = 0.5f * (float)i;
  const int64_t sx[] = {5}, sy[] = {5, 2};
  tpt_tensor *x = make_tensor(TPT_DTYPE_I64, xv, sx, 1), *y = make_tensor(TPT_DTYPE_F32, yv, sy, 2);
  const tpt_tensor *ts[] = {x, y};
  tpt_dataflow *df = NULL;
  ok(tpt_dataflow_from_tensors(&df, ts, 2, 0));
  tpt_tensor_free(x); /* shared by the dataflow */
  tpt_tensor_free(y);
  assert_int_equal(df_size(df), 5);
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  const int64_t s2[] = {2};
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0; i < 5; ++i) {
      assert_int_equal(next_dp(df, dp), 1);
      assert_int_equal(tpt_datapoint_size(dp), 2);
      expect_comp(dp, 0, TPT_DTYPE_I64, NULL, 0);
      assert_int_equal((int64_t)comp(dp, 0), 10 + i);
      expect_comp(dp, 1, TPT_DTYPE_F32, s2, 1);
      float row[2];
      comp_bytes(row, sizeof row, dp, 1);
      assert_true(row[0] == yv[2 * i] && row[1] == yv[2 * i + 1]);
    }
    assert_int_equal(next_dp(df, dp), 0); /* TPT_STOP once, then a new pass */
  }
  /* a reset starts the pass over */
  assert_int_equal(next_dp(df, dp), 1);
  assert_int_equal(next_dp(df, dp), 1);
  ok(tpt_dataflow_reset_state(df));
  assert_int_equal(next_dp(df, dp), 1);
  assert_int_equal((int64_t)comp(dp, 0), 10);
  tpt_datapoint_free(dp);
  tpt_dataflow_free(df);

  /* bad tensors */
  tpt_dataflow *bad = NULL;
  tpt_tensor *r5 = range_tensor(5, 0), *r4 = range_tensor(4, 0), *sc = NULL;
  ok(new_i64(&sc, 3));
  const tpt_tensor *rows[] = {r5, r4};
  expect_code2(tpt_dataflow_from_tensors(&bad, rows, 2, 0),
               TPT_ERR_INVALID_ARGUMENT, "tensors[1] has 4 rows", "tensors[0] has 5");
  const tpt_tensor *scalar[] = {sc};
  expect_code(tpt_dataflow_from_tensors(&bad, scalar, 1, 0), TPT_ERR_INVALID_ARGUMENT, "at least one dimension");
  expect_code(tpt_dataflow_from_tensors(&bad, rows, 0, 0), TPT_ERR_INVALID_ARGUMENT, "n_tensors is 0");
  assert_null(bad);
  tpt_tensor_free(r5);
  tpt_tensor_free(r4);
  tpt_tensor_free(sc);
}

static void two_passes(int64_t seed, int use_seed, int64_t *p1, int64_t *p2) {
  tpt_dataflow *df = range_df(20, 0, 1);
  if (use_seed) ok(tpt_dataflow_set_seed(df, (uint64_t)seed));
  assert_int_equal(read_pass(df, p1, 20), 20);
  assert_int_equal(read_pass(df, p2, 20), 20);
  tpt_dataflow_free(df);
}

static void test_from_tensors_shuffle(void **state) {
  (void)state;
  int64_t a1[20], a2[20], b1[20], b2[20], c1[20], c2[20], ident[20];
  for (int i = 0; i < 20; ++i) ident[i] = i;
  two_passes(7, 1, a1, a2);
  assert_true(is_permutation(a1, 20, 20, 0));
  assert_true(is_permutation(a2, 20, 20, 0));
  assert_false(same_seq(a1, a2, 20)); /* reshuffled every pass */
  assert_false(same_seq(a1, ident, 20));
  two_passes(7, 1, b1, b2); /* the same seed: the same orders */
  assert_true(same_seq(a1, b1, 20) && same_seq(a2, b2, 20));
  two_passes(8, 1, c1, c2);
  assert_false(same_seq(a1, c1, 20));

  /* a reset reseeds: the first order again */
  tpt_dataflow *df = range_df(20, 0, 1);
  ok(tpt_dataflow_set_seed(df, 7));
  int64_t r[20];
  read_n(df, r, 5);
  ok(tpt_dataflow_reset_state(df));
  assert_int_equal(read_pass(df, r, 20), 20);
  assert_true(same_seq(r, a1, 20));
  tpt_dataflow_free(df);

  /* without a seed: LibTorch's default generator (tpt_manual_seed) */
  ok(tpt_manual_seed(123));
  two_passes(0, 0, a1, a2);
  ok(tpt_manual_seed(123));
  two_passes(0, 0, b1, b2);
  assert_true(same_seq(a1, b1, 20) && same_seq(a2, b2, 20));
  ok(tpt_manual_seed(321));
  two_passes(0, 0, c1, c2);
  assert_false(same_seq(a1, c1, 20));
  ok(tpt_manual_seed(42));
}

/* ================================================================== 2. batch */

static void test_batch(void **state) {
  (void)state;
  float yv[30];
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 3; ++j) yv[i * 3 + j] = (float)(i * 10 + j);
  const int64_t sy[] = {10, 3};
  tpt_tensor *x = range_tensor(10, 0), *y = make_tensor(TPT_DTYPE_F32, yv, sy, 2);
  const tpt_tensor *ts[] = {x, y};
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int remainder = 0; remainder <= 1; ++remainder) {
    tpt_dataflow *src = NULL, *b = NULL;
    ok(tpt_dataflow_from_tensors(&src, ts, 2, 0));
    ok(tpt_dataflow_batch(&b, src, 4, remainder));
    tpt_dataflow_free(src);
    assert_int_equal(df_size(b), remainder ? 3 : 2);
    for (int pass = 0; pass < 2; ++pass) {
      for (int k = 0; k < (remainder ? 3 : 2); ++k) {
        const int64_t rows = k == 2 ? 2 : 4;
        assert_int_equal(next_dp(b, dp), 1);
        assert_int_equal(tpt_datapoint_size(dp), 2);
        const int64_t s0[] = {rows}, s1[] = {rows, 3};
        expect_comp(dp, 0, TPT_DTYPE_I64, s0, 1);
        expect_comp(dp, 1, TPT_DTYPE_F32, s1, 2);
        int64_t xs[4];
        float ys[12];
        comp_bytes(xs, (size_t)rows * sizeof(int64_t), dp, 0);
        comp_bytes(ys, (size_t)rows * 3 * sizeof(float), dp, 1);
        for (int64_t r = 0; r < rows; ++r) {
          assert_int_equal(xs[r], 4 * k + r);
          for (int j = 0; j < 3; ++j) assert_true(ys[r * 3 + j] == (float)((4 * k + r) * 10 + j));
        }
      }
      assert_int_equal(next_dp(b, dp), 0);
    }
    tpt_dataflow_free(b);
  }

  /* batch_size == size; larger without remainder is an error that leaves the input free */
  tpt_dataflow *src = NULL, *b = NULL;
  ok(tpt_dataflow_from_tensors(&src, ts, 2, 0));
  expect_code(tpt_dataflow_batch(&b, src, 11, 0), TPT_ERR_INVALID_ARGUMENT,
              "batch_size 11 is larger than the 10 datapoints of a pass");
  assert_null(b);
  expect_code(tpt_dataflow_batch(&b, src, 0, 0), TPT_ERR_INVALID_ARGUMENT, "batch_size must be >= 1, got 0");
  expect_code(tpt_dataflow_batch(&b, src, -3, 1), TPT_ERR_INVALID_ARGUMENT, "batch_size must be >= 1, got -3");
  ok(tpt_dataflow_batch(&b, src, 11, 1)); /* remainder: one short batch of 10 */
  assert_int_equal(df_size(b), 1);
  assert_int_equal(next_dp(b, dp), 1);
  const int64_t s10[] = {10};
  expect_comp(dp, 0, TPT_DTYPE_I64, s10, 1);
  assert_int_equal(next_dp(b, dp), 0);
  tpt_dataflow_free(b);
  tpt_dataflow_free(src);
  ok(tpt_dataflow_from_tensors(&src, ts, 2, 0));
  ok(tpt_dataflow_batch(&b, src, 10, 0));
  tpt_dataflow_free(src);
  assert_int_equal(df_size(b), 1);
  assert_int_equal(next_dp(b, dp), 1);
  assert_int_equal(next_dp(b, dp), 0);
  tpt_dataflow_free(b);
  tpt_tensor_free(x);
  tpt_tensor_free(y);

  /* components whose shapes differ: an error naming both shapes */
  src_state s;
  src_init(&s, 4);
  s.shapes = 1;
  src = src_df(&s);
  ok(tpt_dataflow_batch(&b, src, 2, 0));
  tpt_dataflow_free(src);
  assert_int_equal(df_size(b), 2);
  expect_code2(tpt_dataflow_next(b, dp), TPT_ERR_INVALID_ARGUMENT, "of shape [3]", "the first has [2]");
  tpt_dataflow_free(b);
  assert_int_equal(s.destroyed, 1);
  tpt_datapoint_free(dp);
}

/* ================================================================== 3. map, map_component, datapoints */

static void test_datapoint(void **state) {
  (void)state;
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  assert_int_equal(tpt_datapoint_size(dp), 0);
  tpt_tensor *a = NULL, *b = NULL, *got = NULL;
  ok(new_i64(&a, 1));
  ok(new_i64(&b, 2));
  ok(tpt_datapoint_set(dp, 0, a)); /* appends */
  ok(tpt_datapoint_set(dp, 1, a));
  ok(tpt_datapoint_set(dp, 0, b)); /* replaces */
  assert_int_equal(tpt_datapoint_size(dp), 2);
  expect_code(tpt_datapoint_set(dp, 3, a), TPT_ERR_INVALID_ARGUMENT, "index 3 is past the end");
  assert_int_equal((int64_t)comp(dp, 0), 2);
  assert_int_equal((int64_t)comp(dp, 1), 1);
  expect_code(tpt_datapoint_get(&got, dp, 2), TPT_ERR_NOT_FOUND, "index 2 is out of range");
  assert_null(got);
  ok(tpt_datapoint_truncate(dp, 5)); /* no-op */
  assert_int_equal(tpt_datapoint_size(dp), 2);
  ok(tpt_datapoint_truncate(dp, 1));
  assert_int_equal(tpt_datapoint_size(dp), 1);
  ok(tpt_datapoint_truncate(dp, 0));
  assert_int_equal(tpt_datapoint_size(dp), 0);
  tpt_tensor_free(a);
  tpt_tensor_free(b);
  tpt_datapoint_free(dp);
  tpt_datapoint_free(NULL);
  assert_int_equal(tpt_datapoint_size(NULL), 0);
}

typedef struct {
  int calls, destroyed;
  int64_t fail_at;
} map_state;

static void map_destroy(void *ud) { ((map_state *)ud)->destroyed++; }

/* (v) -> (10 v, 10 v); odd values dropped; fail_at fails. */
static tpt_status *times10_drop_odd(tpt_datapoint *dp, void *ud) {
  map_state *m = ud;
  m->calls++;
  double v = 0;
  tpt_status *st = value_of(&v, dp, 0);
  if (st) return st;
  if ((int64_t)v == m->fail_at) return tpt_status_new(TPT_ERR_CALLBACK, "the map refused 3");
  if ((int64_t)v % 2) return tpt_datapoint_truncate(dp, 0);
  st = set_i64(dp, 0, 10 * (int64_t)v);
  if (!st) st = set_i64(dp, 1, 10 * (int64_t)v);
  return st;
}

/* Component function: odd -> dropped (NULL), even -> -v. */
static tpt_status *negate_drop_odd(tpt_tensor **out, const tpt_tensor *value, void *ud) {
  map_state *m = ud;
  m->calls++;
  double v = 0;
  tpt_status *st = tpt_tensor_item(&v, value);
  if (st) return st;
  if ((int64_t)v == m->fail_at) return tpt_status_new(TPT_ERR_IO, "component function failed");
  if ((int64_t)v % 2) {
    *out = NULL;
    return NULL;
  }
  return new_i64(out, -(int64_t)v);
}

static tpt_status *stop_map(tpt_datapoint *dp, void *ud) {
  (void)dp;
  (void)ud;
  return tpt_status_new(TPT_STOP, "no more");
}

static void test_map(void **state) {
  (void)state;
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  map_state m = {0, 0, -1};
  tpt_dataflow *src = range_df(7, 0, 0), *df = NULL;
  ok(tpt_dataflow_map(&df, src, times10_drop_odd, &m, map_destroy));
  tpt_dataflow_free(src);
  assert_int_equal(df_size(df), 7); /* the input's (drops are not known ahead) */
  for (int pass = 0; pass < 2; ++pass) {
    for (int k = 0; k < 4; ++k) {
      assert_int_equal(next_dp(df, dp), 1);
      assert_int_equal(tpt_datapoint_size(dp), 2);
      assert_int_equal((int64_t)comp(dp, 0), 20 * k);
      assert_int_equal((int64_t)comp(dp, 1), 20 * k);
    }
    assert_int_equal(next_dp(df, dp), 0);
  }
  assert_int_equal(m.calls, 14);
  assert_int_equal(m.destroyed, 0);
  tpt_dataflow_free(df);
  assert_int_equal(m.destroyed, 1);

  /* an error of the callback: its code and message */
  map_state e = {0, 0, 3};
  src = range_df(7, 0, 0);
  ok(tpt_dataflow_map(&df, src, times10_drop_odd, &e, map_destroy));
  tpt_dataflow_free(src);
  assert_int_equal(next_dp(df, dp), 1);
  assert_int_equal(next_dp(df, dp), 1); /* 1 dropped, 2 */
  assert_int_equal((int64_t)comp(dp, 0), 20);
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_CALLBACK, "the map refused 3");
  tpt_dataflow_free(df);
  assert_int_equal(e.destroyed, 1);

  /* TPT_STOP from a map callback would split a pass: an error */
  src = range_df(3, 0, 0);
  ok(tpt_dataflow_map(&df, src, stop_map, NULL, NULL));
  tpt_dataflow_free(src);
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_CALLBACK,
              "a map callback returned TPT_STOP (\"no more\"); only a source's next callback ends a pass");
  tpt_dataflow_free(df);

  /* map_component: replaces one component, NULL drops */
  tpt_tensor *a = range_tensor(6, 0), *b = range_tensor(6, 1000);
  const tpt_tensor *ts[] = {a, b};
  map_state c = {0, 0, -1};
  ok(tpt_dataflow_from_tensors(&src, ts, 2, 0));
  ok(tpt_dataflow_map_component(&df, src, 0, negate_drop_odd, &c, map_destroy));
  tpt_dataflow_free(src);
  for (int k = 0; k < 3; ++k) {
    assert_int_equal(next_dp(df, dp), 1);
    assert_int_equal(tpt_datapoint_size(dp), 2);
    assert_int_equal((int64_t)comp(dp, 0), -2 * k);
    assert_int_equal((int64_t)comp(dp, 1), 1000 + 2 * k);
  }
  assert_int_equal(next_dp(df, dp), 0);
  assert_int_equal(c.calls, 6);
  tpt_dataflow_free(df);
  assert_int_equal(c.destroyed, 1);
  /* its error, and an index out of range */
  map_state ce = {0, 0, 2};
  ok(tpt_dataflow_from_tensors(&src, ts, 2, 0));
  ok(tpt_dataflow_map_component(&df, src, 0, negate_drop_odd, &ce, map_destroy));
  tpt_dataflow_free(src);
  assert_int_equal(next_dp(df, dp), 1);
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_IO, "component function failed");
  tpt_dataflow_free(df);
  map_state ci = {0, 0, -1};
  ok(tpt_dataflow_from_tensors(&src, ts, 2, 0));
  ok(tpt_dataflow_map_component(&df, src, 2, negate_drop_odd, &ci, map_destroy));
  tpt_dataflow_free(src);
  expect_code2(tpt_dataflow_next(df, dp), TPT_ERR_INVALID_ARGUMENT, "component 2 asked for", "the datapoint has 2");
  tpt_dataflow_free(df);
  assert_int_equal(ci.calls, 0);
  assert_int_equal(ci.destroyed + ce.destroyed, 2);
  tpt_tensor_free(a);
  tpt_tensor_free(b);
  tpt_datapoint_free(dp);
}

/* ================================================================== 4. parallel_map */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t main_thread;
  pthread_t seen[16];
  int n_seen;
  int calls, on_main, inside, max_inside, want_overlap;
  int64_t fail_at;
  int drop_odd, destroyed;
  tpt_trainer *stop_trainer; /* tpt_trainer_request_stop after stop_after calls */
  int stop_after;
} pm_state;

static void pm_init(pm_state *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->main_thread = pthread_self();
  s->fail_at = -1;
}

static void pm_fini(pm_state *s) {
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
}

static void pm_destroy(void *ud) {
  pm_state *s = ud;
  pthread_mutex_lock(&s->mu);
  s->destroyed++;
  pthread_mutex_unlock(&s->mu);
}

/* (v) -> (v, 2 v), recording the threads; jitter reorders the workers. */
static tpt_status *pm_fn(tpt_datapoint *dp, void *ud) {
  pm_state *s = ud;
  double v = 0;
  tpt_status *st = value_of(&v, dp, 0);
  if (st) return st;
  const int64_t i = (int64_t)v;
  int stop_now = 0;
  pthread_mutex_lock(&s->mu);
  s->calls++;
  if (s->stop_trainer && s->calls == s->stop_after) stop_now = 1;
  if (pthread_equal(pthread_self(), s->main_thread)) s->on_main++;
  int known = 0;
  for (int k = 0; k < s->n_seen; ++k) known |= pthread_equal(s->seen[k], pthread_self());
  if (!known && s->n_seen < 16) s->seen[s->n_seen++] = pthread_self();
  s->inside++;
  if (s->inside > s->max_inside) s->max_inside = s->inside;
  pthread_cond_broadcast(&s->cv);
  if (s->want_overlap && s->max_inside < 2) { /* wait (a while) for a second worker to come in */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (s->max_inside < 2)
      if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0) break;
  }
  s->inside--;
  pthread_mutex_unlock(&s->mu);
  if (stop_now) tpt_status_free(tpt_trainer_request_stop(s->stop_trainer));
  sleep_us((long)((i * 7) % 5) * 40);
  if (i == s->fail_at) {
    char msg[64];
    snprintf(msg, sizeof msg, "worker failed on %lld", (long long)i);
    return tpt_status_new(TPT_ERR_IO, msg);
  }
  if (s->drop_odd && (i & 1)) return tpt_datapoint_truncate(dp, 0);
  return set_i64(dp, 1, 2 * i);
}

static tpt_dataflow *pm_df(tpt_dataflow *src, pm_state *s, int32_t threads, int32_t buffer, int32_t ordered, int32_t strict) {
  tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
  o.n_threads = threads;
  o.buffer_size = buffer;
  o.ordered = ordered;
  o.strict = strict;
  tpt_dataflow *df = NULL;
  ok(tpt_dataflow_parallel_map(&df, src, pm_fn, s, pm_destroy, &o));
  return df;
}

/* ---- tpt_datapoint_seed: map functions get a seed per datapoint */

/* Appends the datapoint's seed as component 1 (an i64). */
static tpt_status *append_seed(tpt_datapoint *dp, void *ud) {
  (void)ud;
  uint64_t seed = 0;
  tpt_status *st = tpt_datapoint_seed(&seed, dp);
  if (!st) st = set_i64(dp, 1, (int64_t)seed);
  return st;
}

/* range_df(n) mapped by append_seed, in-thread (threads 0) or by a strict
 * parallel map, seeded with `seed`. */
static tpt_dataflow *seeding(int64_t n, int32_t threads, uint64_t seed) {
  tpt_dataflow *src = range_df(n, 0, 0), *df = NULL;
  if (threads == 0) {
    ok(tpt_dataflow_map(&df, src, append_seed, NULL, NULL));
  } else {
    tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
    o.n_threads = threads;
    o.strict = 1; /* unordered: the test files each seed by its datapoint */
    ok(tpt_dataflow_parallel_map(&df, src, append_seed, NULL, NULL, &o));
  }
  tpt_dataflow_free(src);
  ok(tpt_dataflow_set_seed(df, seed));
  return df;
}

/* Reads `k` datapoints of df: seeds[value] = the seed it carried. */
static void read_seeds(tpt_dataflow *df, int k, uint64_t *seeds) {
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int i = 0; i < k; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    tpt_tensor *t = NULL;
    int64_t s = 0;
    ok(tpt_datapoint_get(&t, dp, 1));
    ok(tpt_tensor_copy_to(&s, sizeof s, t));
    tpt_tensor_free(t);
    seeds[(int)comp(dp, 0)] = (uint64_t)s;
  }
  tpt_datapoint_free(dp);
}

/* One whole pass of seeding(n, threads, seed) into seeds. */
static void pass_seeds(int64_t n, int32_t threads, uint64_t seed, uint64_t *seeds) {
  tpt_dataflow *df = seeding(n, threads, seed);
  read_seeds(df, (int)n, seeds);
  tpt_dataflow_free(df);
}

/* The seeds are drawn in input order from the map's seeded generator: the
 * same for the same seed (different for another, and all different within
 * a pass), whatever the worker threads; a pipeline restored from a state
 * taken mid-pass carries on with the uninterrupted run's seeds; outside a
 * map function there is none. */
static void test_map_seeds(void **state) {
  (void)state;
  enum { N = 24 };
  uint64_t a[N], b[N], other[N], one[N], three[N];
  pass_seeds(N, 0, 7, a);
  pass_seeds(N, 0, 7, b);
  assert_memory_equal(a, b, sizeof a);
  pass_seeds(N, 0, 8, other);
  int same = 0;
  for (int i = 0; i < N; ++i) {
    same += a[i] == other[i];
    for (int j = 0; j < i; ++j) assert_true(a[i] != a[j]);
  }
  assert_int_equal(same, 0);
  /* parallel maps: 1 and 3 workers give each datapoint the same seed */
  pass_seeds(N, 1, 7, one);
  pass_seeds(N, 3, 7, three);
  assert_memory_equal(one, three, sizeof one);
  /* a resume mid-pass: the state after 9 datapoints, restored elsewhere */
  tpt_dataflow *df = seeding(N, 0, 7);
  uint64_t first[N], rest[N];
  memset(rest, 0, sizeof rest);
  read_seeds(df, 9, first);
  tpt_tensor *st = NULL;
  ok(tpt_dataflow_get_state(&st, df));
  tpt_dataflow_free(df);
  df = seeding(N, 0, 99); /* the state's seed wins */
  ok(tpt_dataflow_set_state(df, st));
  tpt_tensor_free(st);
  read_seeds(df, N - 9, rest);
  tpt_dataflow_free(df);
  for (int i = 9; i < N; ++i) assert_true(rest[i] == a[i]);
  /* no map: no seed */
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  uint64_t seed = 1;
  expect_code(tpt_datapoint_seed(&seed, dp), TPT_ERR_STATE, "only the datapoint a map function");
  assert_true(seed == 0);
  tpt_datapoint_free(dp);
  EXPECT_NULL_ARG(tpt_datapoint_seed(&seed, NULL), "tpt_datapoint_seed", "dp");
}

static void test_parallel_map_strict(void **state) {
  (void)state;
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  /* strict + ordered: every datapoint once per pass, in order */
  pm_state s;
  pm_init(&s);
  s.want_overlap = 1;
  tpt_dataflow *src = range_df(30, 0, 0);
  tpt_dataflow *df = pm_df(src, &s, 3, 8, 1, 1);
  tpt_dataflow_free(src);
  assert_int_equal(df_size(df), 30);
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0; i < 30; ++i) {
      assert_int_equal(next_dp(df, dp), 1);
      assert_int_equal((int64_t)comp(dp, 0), i);
      assert_int_equal((int64_t)comp(dp, 1), 2 * i);
    }
    assert_int_equal(next_dp(df, dp), 0);
  }
  tpt_dataflow_free(df); /* joins the workers */
  assert_int_equal(s.destroyed, 1);
  assert_int_equal(s.calls, 90);
  assert_int_equal(s.on_main, 0); /* the map ran on other threads ... */
  assert_true(s.n_seen >= 1 && s.n_seen <= 3);
  assert_true(s.max_inside >= 2); /* ... several at once */
  pm_fini(&s);

  /* strict, unordered: the input's multiset per pass */
  pm_init(&s);
  src = range_df(30, 0, 0);
  df = pm_df(src, &s, 3, 5, 0, 1);
  tpt_dataflow_free(src);
  for (int pass = 0; pass < 3; ++pass) {
    int64_t v[40];
    size_t n = read_pass(df, v, 40);
    assert_true(is_permutation(v, n, 30, 0));
  }
  tpt_dataflow_free(df);
  assert_int_equal(s.calls, 90);
  assert_int_equal(s.on_main, 0);
  pm_fini(&s);

  /* an error in a worker reaches next with its code and message */
  pm_init(&s);
  s.fail_at = 13;
  src = range_df(30, 0, 0);
  df = pm_df(src, &s, 2, 6, 1, 1);
  tpt_dataflow_free(src);
  for (int i = 0; i < 13; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    assert_int_equal((int64_t)comp(dp, 0), i);
  }
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_IO, "worker failed on 13");
  tpt_dataflow_free(df);
  assert_int_equal(s.destroyed, 1);
  pm_fini(&s);

  /* strict: a drop is an error */
  pm_init(&s);
  s.drop_odd = 1;
  src = range_df(30, 0, 0);
  df = pm_df(src, &s, 2, 6, 1, 1);
  tpt_dataflow_free(src);
  assert_int_equal(next_dp(df, dp), 1);
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_CALLBACK, "dropped a datapoint");
  tpt_dataflow_free(df);
  pm_fini(&s);

  /* bad options; the input stays free after each failure */
  pm_init(&s);
  src = range_df(3, 0, 0);
  tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
  o.n_threads = 0;
  expect_code(tpt_dataflow_parallel_map(&df, src, pm_fn, NULL, NULL, &o),
              TPT_ERR_INVALID_ARGUMENT, "n_threads must be >= 1, got 0");
  o.n_threads = 2;
  o.buffer_size = 0;
  expect_code(tpt_dataflow_parallel_map(&df, src, pm_fn, NULL, NULL, &o),
              TPT_ERR_INVALID_ARGUMENT, "buffer_size must be >= 1, got 0");
  o.buffer_size = 10;
  o.version = 0;
  expect_code(tpt_dataflow_parallel_map(&df, src, pm_fn, &s, pm_destroy, &o),
              TPT_ERR_INVALID_ARGUMENT, "TPT_PARALLEL_MAP_OPTIONS_INIT");
  assert_int_equal(s.destroyed, 1); /* user_data is taken, also on failure */
  assert_null(df);
  ok(tpt_dataflow_parallel_map(&df, src, pm_fn, NULL, NULL, NULL)); /* NULL options: the defaults */
  tpt_dataflow_free(df);
  tpt_dataflow_free(src);
  pm_fini(&s);
  tpt_datapoint_free(dp);
}

static void test_parallel_map_not_strict(void **state) {
  (void)state;
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  /* ordered, not strict: the input repeats forever, in order, no TPT_STOP */
  pm_state s;
  pm_init(&s);
  tpt_dataflow *src = range_df(30, 0, 0);
  tpt_dataflow *df = pm_df(src, &s, 2, 7, 1, 0);
  tpt_dataflow_free(src);
  for (int i = 0; i < 100; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    assert_int_equal((int64_t)comp(dp, 0), i % 30);
    assert_int_equal((int64_t)comp(dp, 1), 2 * (i % 30));
  }
  tpt_dataflow_free(df); /* with work in flight */
  assert_int_equal(s.destroyed, 1);
  assert_int_equal(s.on_main, 0);
  pm_fini(&s);

  /* the defaults (2 threads, buffer 200, unordered, not strict) */
  pm_init(&s);
  src = range_df(30, 0, 0);
  tpt_dataflow *d2 = NULL;
  ok(tpt_dataflow_parallel_map(&d2, src, pm_fn, &s, pm_destroy, NULL));
  tpt_dataflow_free(src);
  int count[30] = {0};
  for (int i = 0; i < 100; ++i) {
    assert_int_equal(next_dp(d2, dp), 1);
    const int64_t v = (int64_t)comp(dp, 0);
    assert_true(v >= 0 && v < 30);
    assert_int_equal((int64_t)comp(dp, 1), 2 * v);
    count[v]++;
  }
  int distinct = 0;
  for (int v = 0; v < 30; ++v) distinct += count[v] > 0;
  assert_true(distinct >= 10);
  tpt_dataflow_free(d2);
  pm_fini(&s);

  /* not strict: drops are skipped */
  pm_init(&s);
  s.drop_odd = 1;
  src = range_df(10, 0, 0);
  df = pm_df(src, &s, 3, 4, 1, 0);
  tpt_dataflow_free(src);
  for (int i = 0; i < 20; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    assert_int_equal((int64_t)comp(dp, 0), (2 * i) % 10);
  }
  tpt_dataflow_free(df);
  pm_fini(&s);

  /* a reset in the middle starts over (threads joined and restarted) */
  pm_init(&s);
  src = range_df(10, 0, 0);
  df = pm_df(src, &s, 2, 4, 1, 1);
  tpt_dataflow_free(src);
  int64_t v[10];
  read_n(df, v, 4);
  ok(tpt_dataflow_reset_state(df));
  assert_int_equal(read_pass(df, v, 10), 10);
  expect_range(v, 10, 10, 0);
  tpt_dataflow_free(df);
  pm_fini(&s);
  tpt_datapoint_free(dp);
}

/* ================================================================== 5. prefetch */

static tpt_status *identity(tpt_datapoint *dp, void *ud) {
  (void)dp;
  (void)ud;
  return NULL;
}

static void test_prefetch(void **state) {
  (void)state;
  tpt_dataflow *src = range_df(7, 0, 0), *df = NULL;
  ok(tpt_dataflow_prefetch(&df, src, 3));
  tpt_dataflow_free(src);
  assert_int_equal(df_size(df), 7);
  for (int pass = 0; pass < 4; ++pass) { /* passes kept apart */
    int64_t v[10];
    size_t n = read_pass(df, v, 10);
    expect_range(v, n, 7, 0);
  }
  tpt_dataflow_free(df);

  /* the same sequence as its input: a shuffled source seeded alike (the
   * source is the second part of both pipelines, so it gets the same stream) */
  int64_t a[2][20], b[2][20];
  src = range_df(20, 0, 1);
  ok(tpt_dataflow_prefetch(&df, src, 2));
  tpt_dataflow_free(src);
  ok(tpt_dataflow_set_seed(df, 5));
  for (int p = 0; p < 2; ++p) assert_int_equal(read_pass(df, a[p], 20), 20);
  tpt_dataflow_free(df);
  src = range_df(20, 0, 1);
  ok(tpt_dataflow_map(&df, src, identity, NULL, NULL));
  tpt_dataflow_free(src);
  ok(tpt_dataflow_set_seed(df, 5));
  for (int p = 0; p < 2; ++p) assert_int_equal(read_pass(df, b[p], 20), 20);
  tpt_dataflow_free(df);
  assert_true(is_permutation(a[0], 20, 20, 0) && is_permutation(a[1], 20, 20, 0));
  assert_false(same_seq(a[0], a[1], 20));
  assert_true(same_seq(a[0], b[0], 20) && same_seq(a[1], b[1], 20));

  /* an error of the input reaches the consumer, after what came before it */
  src_state s;
  src_init(&s, 6);
  s.fail_at = 3;
  src = src_df(&s);
  ok(tpt_dataflow_prefetch(&df, src, 2));
  tpt_dataflow_free(src);
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int i = 0; i < 3; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    assert_int_equal((int64_t)comp(dp, 0), i);
  }
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_IO, "source broke at 3");
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_IO, "source broke at 3"); /* until a reset */
  ok(tpt_dataflow_reset_state(df));
  assert_int_equal(next_dp(df, dp), 1);
  assert_int_equal((int64_t)comp(dp, 0), 0);
  tpt_dataflow_free(df);
  assert_int_equal(s.destroyed, 1);

  src = range_df(3, 0, 0);
  expect_code(tpt_dataflow_prefetch(&df, src, 0), TPT_ERR_INVALID_ARGUMENT, "capacity must be >= 1, got 0");
  ok(tpt_dataflow_prefetch(&df, src, 1));
  tpt_dataflow_free(src);
  tpt_dataflow_free(df);
  tpt_datapoint_free(dp);
}

/* ================================================================== 6. the other combinators */

static int64_t count_in(const int64_t *v, size_t n, int64_t x) {
  int64_t c = 0;
  for (size_t i = 0; i < n; ++i) c += v[i] == x;
  return c;
}

static void test_local_shuffle(void **state) {
  (void)state;
  enum { N = 6, R = 2, B = 4, K = 60 };
  tpt_dataflow *src = range_df(N, 0, 0), *df = NULL;
  ok(tpt_dataflow_local_shuffle(&df, src, B, R));
  tpt_dataflow_free(src);
  assert_int_equal(df_size(df), N * R);
  ok(tpt_dataflow_set_seed(df, 3));
  int64_t out[K];
  read_n(df, out, K); /* infinite: no TPT_STOP */
  /* Output k comes from the buffer: of the first P(k) = ceil((B + k) / R)
   * input datapoints (i mod N), each read R times, all but the R P(k) - k - 1
   * still in the buffer have been given. */
  int64_t child[K];
  for (int j = 0; j < K; ++j) child[j] = j % N;
  for (int k = 0; k < K; ++k) {
    const int p = (B + k + R - 1) / R;
    const int left = R * p - (k + 1);
    for (int64_t x = 0; x < N; ++x) {
      const int64_t have = count_in(out, (size_t)k + 1, x), pulled = R * count_in(child, (size_t)p, x);
      if (have > pulled || have < pulled - left)
        fail_msg("after %d outputs value %lld was given %lld times, %lld read (%d in the buffer)", k + 1, (long long)x,
                 (long long)have, (long long)pulled, left);
    }
  }
  int64_t in_order[12] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
  assert_false(same_seq(out, in_order, 12));
  /* seeded: the same sequence again after a reset */
  int64_t again[K];
  ok(tpt_dataflow_reset_state(df));
  read_n(df, again, K);
  assert_true(same_seq(out, again, K));
  tpt_dataflow_free(df);

  /* buffer 1, no reuse: the input in order, pass after pass */
  src = range_df(N, 0, 0);
  ok(tpt_dataflow_local_shuffle(&df, src, 1, 1));
  tpt_dataflow_free(src);
  read_n(df, out, 20);
  for (int k = 0; k < 20; ++k) assert_int_equal(out[k], k % N);
  tpt_dataflow_free(df);

  src = range_df(N, 0, 0);
  expect_code(tpt_dataflow_local_shuffle(&df, src, 0, 1), TPT_ERR_INVALID_ARGUMENT, "buffer_size must be >= 1, got 0");
  expect_code(tpt_dataflow_local_shuffle(&df, src, 4, 0), TPT_ERR_INVALID_ARGUMENT, "n_reuse must be >= 1, got 0");
  ok(tpt_dataflow_local_shuffle(&df, src, 4, 1));
  tpt_dataflow_free(df);
  tpt_dataflow_free(src);
}

static void test_cache(void **state) {
  (void)state;
  for (int shuffle = 0; shuffle <= 1; ++shuffle) {
    src_state s;
    src_init(&s, 20);
    tpt_dataflow *src = src_df(&s), *df = NULL;
    ok(tpt_dataflow_cache(&df, src, shuffle));
    tpt_dataflow_free(src);
    ok(tpt_dataflow_set_seed(df, 9));
    assert_int_equal(df_size(df), 20);
    int64_t p[4][25];
    size_t n = read_pass(df, p[0], 25);
    expect_range(p[0], n, 20, 0); /* the first pass: in order */
    for (int k = 1; k < 4; ++k) {
      n = read_pass(df, p[k], 25);
      assert_true(is_permutation(p[k], n, 20, 0));
    }
    assert_int_equal(s.next_calls, 21); /* the source was read once */
    if (shuffle) {
      assert_false(same_seq(p[1], p[2], 20));
      assert_false(same_seq(p[2], p[3], 20));
      assert_false(same_seq(p[0], p[1], 20));
    } else {
      for (int k = 1; k < 4; ++k) expect_range(p[k], 20, 20, 0);
    }
    /* a reset reads the source again */
    ok(tpt_dataflow_reset_state(df));
    n = read_pass(df, p[0], 25);
    expect_range(p[0], n, 20, 0);
    assert_int_equal(s.next_calls, 42);
    tpt_dataflow_free(df);
    assert_int_equal(s.destroyed, 1);
  }
}

static void test_repeat_fixed_size(void **state) {
  (void)state;
  tpt_dataflow *src = range_df(4, 0, 0), *df = NULL;
  ok(tpt_dataflow_repeat(&df, src, 3));
  tpt_dataflow_free(src);
  assert_int_equal(df_size(df), 12);
  for (int pass = 0; pass < 2; ++pass) {
    int64_t v[20];
    size_t n = read_pass(df, v, 20);
    assert_int_equal(n, 12);
    for (int i = 0; i < 12; ++i) assert_int_equal(v[i], i % 4);
  }
  tpt_dataflow_free(df);

  src = range_df(4, 0, 0);
  ok(tpt_dataflow_repeat(&df, src, -1));
  tpt_dataflow_free(src);
  assert_int_equal(df_size(df), -1);
  int64_t v[50];
  read_n(df, v, 50);
  for (int i = 0; i < 50; ++i) assert_int_equal(v[i], i % 4);
  tpt_dataflow_free(df);

  src = range_df(4, 0, 0);
  expect_code(tpt_dataflow_repeat(&df, src, 0), TPT_ERR_INVALID_ARGUMENT, "n must be >= 1 or -1");
  expect_code(tpt_dataflow_repeat(&df, src, -2), TPT_ERR_INVALID_ARGUMENT, "got -2");
  expect_code(tpt_dataflow_fixed_size(&df, src, 0, 1), TPT_ERR_INVALID_ARGUMENT, "size must be >= 1, got 0");
  tpt_dataflow_free(src);

  /* fixed_size: keep_state goes on where the last pass stopped */
  const int64_t keep5[3][5] = {{0, 1, 2, 3, 0}, {1, 2, 3, 0, 1}, {2, 3, 0, 1, 2}};
  const int64_t restart5[5] = {0, 1, 2, 3, 0};
  const int64_t keep2[3][2] = {{0, 1}, {2, 3}, {0, 1}};
  const int64_t restart2[2] = {0, 1};
  for (int keep = 0; keep <= 1; ++keep) {
    for (int sz = 2; sz <= 5; sz += 3) {
      src = range_df(4, 0, 0);
      ok(tpt_dataflow_fixed_size(&df, src, sz, keep));
      tpt_dataflow_free(src);
      assert_int_equal(df_size(df), sz);
      for (int pass = 0; pass < 3; ++pass) {
        int64_t got[8];
        size_t n = read_pass(df, got, 8);
        const int64_t *want = sz == 5 ? (keep ? keep5[pass] : restart5) : (keep ? keep2[pass] : restart2);
        expect_seq(got, n, want, (size_t)sz);
      }
      tpt_dataflow_free(df);
    }
  }
  /* the same over a prefetching input (a restart joins and restarts its thread) */
  for (int keep = 0; keep <= 1; ++keep) {
    tpt_dataflow *pf = NULL;
    src = range_df(4, 0, 0);
    ok(tpt_dataflow_prefetch(&pf, src, 2));
    ok(tpt_dataflow_fixed_size(&df, pf, 5, keep));
    tpt_dataflow_free(src);
    tpt_dataflow_free(pf);
    for (int pass = 0; pass < 3; ++pass) {
      int64_t got[8];
      size_t n = read_pass(df, got, 8);
      expect_seq(got, n, keep ? keep5[pass] : restart5, 5);
    }
    tpt_dataflow_free(df);
  }
}

/* shard: every count-th datapoint from the index-th; the shards of one
 * shuffled source partition its passes, a partial last group is dropped,
 * and every shard's state is the same (one state restores any shard). */
static void test_shard(void **state) {
  (void)state;
  tpt_dataflow *src = range_df(10, 0, 0), *df = NULL;
  expect_code(tpt_dataflow_shard(&df, src, 3, 3), TPT_ERR_INVALID_ARGUMENT, "index must be from 0 to count - 1 (2), got 3");
  expect_code(tpt_dataflow_shard(&df, src, 0, 0), TPT_ERR_INVALID_ARGUMENT, "count must be from 1 to 2^20, got 0");
  expect_code(tpt_dataflow_shard(&df, src, -1, 2), TPT_ERR_INVALID_ARGUMENT, "got -1");
  for (int64_t index = 0; index < 3; ++index) {
    ok(tpt_dataflow_shard(&df, src, index, 3));
    assert_int_equal(df_size(df), 3);
    for (int pass = 0; pass < 2; ++pass) {
      int64_t got[8];
      size_t n = read_pass(df, got, 8);
      const int64_t want[3] = {index, index + 3, index + 6}; /* 9 is a partial group: dropped */
      expect_seq(got, n, want, 3);
    }
    tpt_dataflow_free(df); /* releases src for the next shard */
  }
  tpt_dataflow_free(src);

  /* shuffled sources with the same seed: the shards partition every pass */
  int64_t seen[2][12];
  tpt_dataflow *shards[2] = {NULL, NULL}, *srcs[2] = {NULL, NULL};
  for (int k = 0; k < 2; ++k) {
    srcs[k] = range_df(12, 0, 1);
    ok(tpt_dataflow_set_seed(srcs[k], 42));
    ok(tpt_dataflow_shard(&shards[k], srcs[k], k, 2));
  }
  for (int pass = 0; pass < 2; ++pass) {
    int count[12] = {0};
    for (int k = 0; k < 2; ++k) {
      size_t n = read_pass(shards[k], seen[k], 12);
      assert_int_equal(n, 6);
      for (size_t i = 0; i < n; ++i) count[seen[k][i]]++;
    }
    for (int v = 0; v < 12; ++v) assert_int_equal(count[v], 1);
  }
  /* mid-pass: shard 0's state, given to shard 1, continues shard 1's sequence */
  int64_t a[2], b[4];
  read_n(shards[0], a, 2);
  read_n(shards[1], b, 4);
  tpt_tensor *st = NULL;
  ok(tpt_dataflow_get_state(&st, shards[0]));
  tpt_dataflow *again_src = range_df(12, 0, 1), *again = NULL;
  ok(tpt_dataflow_shard(&again, again_src, 1, 2));
  ok(tpt_dataflow_set_state(again, st));
  int64_t c[2];
  read_n(again, c, 2);
  assert_int_equal(c[0], b[2]);
  assert_int_equal(c[1], b[3]);
  tpt_tensor_free(st);
  tpt_dataflow_free(again);
  tpt_dataflow_free(again_src);
  for (int k = 0; k < 2; ++k) {
    tpt_dataflow_free(shards[k]);
    tpt_dataflow_free(srcs[k]);
  }
}

static void test_concat_join_select(void **state) {
  (void)state;
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  tpt_dataflow *a = range_df(3, 0, 0), *b = range_df(2, 100, 0), *df = NULL;
  tpt_dataflow *two[] = {a, b};
  ok(tpt_dataflow_concat(&df, two, 2));
  tpt_dataflow_free(a);
  tpt_dataflow_free(b);
  assert_int_equal(df_size(df), 5);
  const int64_t cat[] = {0, 1, 2, 100, 101};
  for (int pass = 0; pass < 2; ++pass) {
    int64_t v[8];
    size_t n = read_pass(df, v, 8);
    expect_seq(v, n, cat, 5);
  }
  tpt_dataflow_free(df);

  /* join: side by side, the pass ends with the shortest */
  a = range_df(3, 0, 0);
  b = range_df(5, 10, 0);
  tpt_dataflow *c = range_df(4, 20, 0);
  tpt_dataflow *three[] = {a, b, c};
  ok(tpt_dataflow_join(&df, three, 3));
  tpt_dataflow_free(a);
  tpt_dataflow_free(b);
  tpt_dataflow_free(c);
  assert_int_equal(df_size(df), 3);
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0; i < 3; ++i) {
      assert_int_equal(next_dp(df, dp), 1);
      assert_int_equal(tpt_datapoint_size(dp), 3);
      assert_int_equal((int64_t)comp(dp, 0), i);
      assert_int_equal((int64_t)comp(dp, 1), 10 + i); /* the longer ones start over with the pass */
      assert_int_equal((int64_t)comp(dp, 2), 20 + i);
    }
    assert_int_equal(next_dp(df, dp), 0);
  }
  tpt_dataflow_free(df);
  /* join with threads below: the longer input is restarted with the pass */
  a = range_df(2, 0, 0);
  b = range_df(5, 10, 0);
  tpt_dataflow *pb = NULL;
  ok(tpt_dataflow_prefetch(&pb, b, 3));
  tpt_dataflow *ap[] = {pb, a};
  ok(tpt_dataflow_join(&df, ap, 2));
  tpt_dataflow_free(a);
  tpt_dataflow_free(b);
  tpt_dataflow_free(pb);
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0; i < 2; ++i) {
      assert_int_equal(next_dp(df, dp), 1);
      assert_int_equal((int64_t)comp(dp, 0), 10 + i);
      assert_int_equal((int64_t)comp(dp, 1), i);
    }
    assert_int_equal(next_dp(df, dp), 0);
  }
  tpt_dataflow_free(df);

  /* the same dataflow twice, and empty lists */
  a = range_df(3, 0, 0);
  tpt_dataflow *twice[] = {a, a};
  expect_code(tpt_dataflow_concat(&df, twice, 2), TPT_ERR_INVALID_ARGUMENT, "dfs[0] and dfs[1] are the same dataflow");
  expect_code(tpt_dataflow_join(&df, twice, 2), TPT_ERR_INVALID_ARGUMENT, "are the same dataflow");
  expect_code(tpt_dataflow_concat(&df, twice, 0), TPT_ERR_INVALID_ARGUMENT, "n is 0");
  /* one of them already read elsewhere: the other is left free */
  b = range_df(2, 0, 0);
  tpt_dataflow *bb = NULL;
  ok(tpt_dataflow_repeat(&bb, b, 2));
  tpt_dataflow *ab[] = {a, b};
  expect_code(tpt_dataflow_concat(&df, ab, 2), TPT_ERR_INVALID_ARGUMENT, "already read by RepeatedData");
  int64_t v[4];
  assert_int_equal(read_pass(a, v, 4), 3);
  tpt_dataflow_free(bb);
  tpt_dataflow_free(b);
  tpt_dataflow_free(a);

  /* select: reorder and repeat components */
  tpt_tensor *x = range_tensor(4, 0), *y = range_tensor(4, 50);
  const tpt_tensor *ts[] = {x, y};
  tpt_dataflow *src = NULL;
  ok(tpt_dataflow_from_tensors(&src, ts, 2, 0));
  const size_t idx[] = {1, 0, 1};
  ok(tpt_dataflow_select(&df, src, idx, 3));
  tpt_dataflow_free(src);
  assert_int_equal(df_size(df), 4);
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    assert_int_equal(tpt_datapoint_size(dp), 3);
    assert_int_equal((int64_t)comp(dp, 0), 50 + i);
    assert_int_equal((int64_t)comp(dp, 1), i);
    assert_int_equal((int64_t)comp(dp, 2), 50 + i);
  }
  assert_int_equal(next_dp(df, dp), 0);
  tpt_dataflow_free(df);
  ok(tpt_dataflow_from_tensors(&src, ts, 2, 0));
  const size_t far[] = {0, 2};
  ok(tpt_dataflow_select(&df, src, far, 2));
  expect_code2(tpt_dataflow_next(df, dp), TPT_ERR_INVALID_ARGUMENT, "component 2 asked for", "the datapoint has 2");
  tpt_dataflow_free(df);
  tpt_dataflow *d2 = NULL;
  expect_code(tpt_dataflow_select(&d2, src, far, 0), TPT_ERR_INVALID_ARGUMENT, "no component indices given");
  tpt_dataflow_free(src);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_datapoint_free(dp);
}

/* ================================================================== 7. augment */

static tpt_dataflow *image_df(tpt_dtype dtype, const void *data, const int64_t *shape, size_t ndim) {
  tpt_tensor *t = make_tensor(dtype, data, shape, ndim);
  const tpt_tensor *ts[] = {t};
  tpt_dataflow *df = NULL;
  ok(tpt_dataflow_from_tensors(&df, ts, 1, 0));
  tpt_tensor_free(t);
  return df;
}

static tpt_augmentor augmentor(tpt_augment_kind kind) {
  tpt_augmentor a = TPT_AUGMENTOR_INIT;
  a.kind = kind;
  a.probability = 0; /* each test sets what it flips */
  return a;
}

static void test_augment_values(void **state) {
  (void)state;
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  /* TO_FLOAT then NORMALIZE (one channel for all) */
  uint8_t img[2 * 16];
  for (int i = 0; i < 32; ++i) img[i] = (uint8_t)(i * 8);
  const int64_t s_u8[] = {2, 1, 4, 4}, s_one[] = {1, 4, 4};
  tpt_dataflow *src = image_df(TPT_DTYPE_U8, img, s_u8, 4), *df = NULL;
  const double mean[] = {0.5}, stdv[] = {0.25};
  tpt_augmentor aug[2] = {augmentor(TPT_AUGMENT_TO_FLOAT), augmentor(TPT_AUGMENT_NORMALIZE)};
  aug[0].scale = 1.0 / 255;
  aug[1].mean = mean;
  aug[1].std = stdv;
  aug[1].n_channels = 1;
  ok(tpt_dataflow_augment(&df, src, 0, aug, 2, 0));
  tpt_dataflow_free(src);
  for (int k = 0; k < 2; ++k) {
    assert_int_equal(next_dp(df, dp), 1);
    expect_comp(dp, 0, TPT_DTYPE_F32, s_one, 3);
    float got[16];
    comp_bytes(got, sizeof got, dp, 0);
    for (int i = 0; i < 16; ++i) {
      const double want = ((double)img[k * 16 + i] / 255 - 0.5) / 0.25;
      if (fabs(got[i] - want) > 1e-5) fail_msg("pixel %d: %g, want %g", i, got[i], want);
    }
  }
  assert_int_equal(next_dp(df, dp), 0);
  tpt_dataflow_free(df);

  /* NORMALIZE per channel; and of an integer image (computed in f32) */
  float rgb[12];
  for (int i = 0; i < 12; ++i) rgb[i] = (float)(i + 1);
  const int64_t s_rgb[] = {1, 3, 2, 2}, s_3[] = {3, 2, 2};
  const double m3[] = {1, 2, 3}, sd3[] = {1, 2, 4};
  tpt_augmentor norm = augmentor(TPT_AUGMENT_NORMALIZE);
  norm.mean = m3;
  norm.std = sd3;
  norm.n_channels = 3;
  src = image_df(TPT_DTYPE_F32, rgb, s_rgb, 4);
  ok(tpt_dataflow_augment(&df, src, 0, &norm, 1, 0));
  tpt_dataflow_free(src);
  assert_int_equal(next_dp(df, dp), 1);
  expect_comp(dp, 0, TPT_DTYPE_F32, s_3, 3);
  float got[16];
  comp_bytes(got, 12 * sizeof(float), dp, 0);
  for (int i = 0; i < 12; ++i) assert_true(fabs(got[i] - (rgb[i] - m3[i / 4]) / sd3[i / 4]) < 1e-6);
  tpt_dataflow_free(df);
  /* three channels for a one-channel image: an error */
  src = image_df(TPT_DTYPE_U8, img, s_u8, 4);
  ok(tpt_dataflow_augment(&df, src, 0, &norm, 1, 0));
  tpt_dataflow_free(src);
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_INVALID_ARGUMENT, "3 channels given, the image is [1, 4, 4]");
  tpt_dataflow_free(df);
  const double m10[] = {10}, sd2[] = {2};
  norm.mean = m10;
  norm.std = sd2;
  norm.n_channels = 1;
  src = image_df(TPT_DTYPE_U8, img, s_u8, 4);
  ok(tpt_dataflow_augment(&df, src, 0, &norm, 1, 0));
  tpt_dataflow_free(src);
  assert_int_equal(next_dp(df, dp), 1);
  expect_comp(dp, 0, TPT_DTYPE_F32, s_one, 3);
  comp_bytes(got, sizeof got, dp, 0);
  for (int i = 0; i < 16; ++i) assert_true(fabs(got[i] - (img[i] - 10.0) / 2) < 1e-6);
  tpt_dataflow_free(df);

  /* FLIP: probability 1 flips (last dimension), 0 keeps */
  const float row[6] = {1, 2, 3, 4, 5, 6};
  const int64_t s_f[] = {1, 2, 3}, s_f1[] = {2, 3};
  for (int p = 0; p <= 1; ++p) {
    tpt_augmentor flip = augmentor(TPT_AUGMENT_FLIP);
    flip.probability = p;
    src = image_df(TPT_DTYPE_F32, row, s_f, 3);
    ok(tpt_dataflow_augment(&df, src, 0, &flip, 1, 0));
    tpt_dataflow_free(src);
    for (int pass = 0; pass < 5; ++pass) {
      assert_int_equal(next_dp(df, dp), 1);
      expect_comp(dp, 0, TPT_DTYPE_F32, s_f1, 2);
      float f[6];
      comp_bytes(f, sizeof f, dp, 0);
      const float flipped[6] = {3, 2, 1, 6, 5, 4};
      assert_memory_equal(f, p ? flipped : row, sizeof f);
      assert_int_equal(next_dp(df, dp), 0);
    }
    tpt_dataflow_free(df);
  }

  /* RANDOM_CROP with padding: the shape asked for, a window of the padded image */
  float pic[16];
  for (int i = 0; i < 16; ++i) pic[i] = (float)(i + 1);
  float padded[6][6] = {{0}};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) padded[r + 1][c + 1] = pic[r * 4 + c];
  const int64_t s_pic[] = {1, 1, 4, 4};
  tpt_augmentor crop = augmentor(TPT_AUGMENT_RANDOM_CROP);
  crop.height = 3;
  crop.width = 4;
  crop.padding = 1;
  src = image_df(TPT_DTYPE_F32, pic, s_pic, 4);
  ok(tpt_dataflow_augment(&df, src, 0, &crop, 1, 0));
  tpt_dataflow_free(src);
  ok(tpt_dataflow_set_seed(df, 17));
  int windows[4][3] = {{0}};
  const int64_t s_crop[] = {1, 3, 4};
  for (int pass = 0; pass < 40; ++pass) {
    assert_int_equal(next_dp(df, dp), 1);
    expect_comp(dp, 0, TPT_DTYPE_F32, s_crop, 3);
    float w[12];
    comp_bytes(w, sizeof w, dp, 0);
    int found = 0;
    for (int top = 0; top <= 3 && !found; ++top)
      for (int left = 0; left <= 2 && !found; ++left) {
        int match = 1;
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 4; ++c) match &= w[r * 4 + c] == padded[top + r][left + c];
        if (match) {
          found = 1;
          windows[top][left]++;
        }
      }
    if (!found) fail_msg("crop %d is not a window of the padded image", pass);
    assert_int_equal(next_dp(df, dp), 0);
  }
  int distinct = 0;
  for (int t = 0; t < 4; ++t)
    for (int l = 0; l < 3; ++l) distinct += windows[t][l] > 0;
  assert_true(distinct >= 4); /* 12 windows, 40 draws */
  tpt_dataflow_free(df);
  crop.height = 7;
  src = image_df(TPT_DTYPE_F32, pic, s_pic, 4);
  ok(tpt_dataflow_augment(&df, src, 0, &crop, 1, 0));
  tpt_dataflow_free(src);
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_INVALID_ARGUMENT, "7x4 does not fit the (padded) image [1, 6, 6]");
  tpt_dataflow_free(df);

  /* bad augmentors */
  src = image_df(TPT_DTYPE_F32, pic, s_pic, 4);
  tpt_augmentor bad = augmentor(TPT_AUGMENT_FLIP);
  bad.probability = 2;
  expect_code(tpt_dataflow_augment(&df, src, 0, &bad, 1, 0),
              TPT_ERR_INVALID_ARGUMENT, "augmentors[0]: FLIP needs a probability in [0, 1]");
  bad = augmentor((tpt_augment_kind)99);
  expect_code(tpt_dataflow_augment(&df, src, 0, &bad, 1, 0), TPT_ERR_INVALID_ARGUMENT, "unknown kind 99");
  bad = augmentor(TPT_AUGMENT_NORMALIZE);
  expect_code(tpt_dataflow_augment(&df, src, 0, &bad, 1, 0), TPT_ERR_INVALID_ARGUMENT, "augmentors[0].n_channels is 0");
  bad = augmentor(TPT_AUGMENT_RANDOM_CROP);
  expect_code(tpt_dataflow_augment(&df, src, 0, &bad, 1, 0), TPT_ERR_INVALID_ARGUMENT, "RANDOM_CROP needs height, width >= 1");
  /* the struct's version: the unversioned one (0) and an unknown one are refused */
  bad = augmentor(TPT_AUGMENT_FLIP);
  bad.version = 0;
  expect_code2(tpt_dataflow_augment(&df, src, 0, &bad, 1, 0), TPT_ERR_INVALID_ARGUMENT,
               "augmentors[0].version is 0 (an unversioned struct)", "TPT_AUGMENTOR_INIT");
  tpt_augmentor two[2] = {augmentor(TPT_AUGMENT_FLIP), augmentor(TPT_AUGMENT_FLIP)};
  two[1].version = 7;
  expect_code(tpt_dataflow_augment(&df, src, 0, two, 2, 0), TPT_ERR_INVALID_ARGUMENT, "augmentors[1].version is 7");
  tpt_augmentor defaults = TPT_AUGMENTOR_INIT;
  assert_true(defaults.version == TPT_AUGMENTOR_VERSION && defaults.kind == TPT_AUGMENT_TO_FLOAT &&
              defaults.scale == 1.0 && defaults.probability == 0.5);
  expect_code(tpt_dataflow_augment(&df, src, 0, &crop, 0, 0), TPT_ERR_INVALID_ARGUMENT, "no augmentors given");
  expect_code(tpt_dataflow_augment(&df, src, 0, &crop, 1, -1), TPT_ERR_INVALID_ARGUMENT, "n_threads must be >= 0, got -1");
  ok(tpt_dataflow_augment(&df, src, 3, &crop, 1, 0)); /* a component that is not there */
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_INVALID_ARGUMENT, "component 3 asked for");
  tpt_dataflow_free(df);
  tpt_dataflow_free(src);
  tpt_datapoint_free(dp);
}

/* 20 images [1, 5, 5] of an LCG, augmented (crop with padding, flip) by
 * n_threads; component 0 of two passes into out[2][20][9]. */
static void augmented(int32_t n_threads, float out[2][20][9]) {
  static float pics[20 * 25];
  uint32_t r = 99;
  for (int i = 0; i < 20 * 25; ++i) {
    r = r * 1664525u + 1013904223u;
    pics[i] = (float)(r >> 8) / 16777216.0f;
  }
  const int64_t shape[] = {20, 1, 5, 5};
  tpt_dataflow *src = image_df(TPT_DTYPE_F32, pics, shape, 4), *df = NULL;
  tpt_augmentor aug[2] = {augmentor(TPT_AUGMENT_RANDOM_CROP), augmentor(TPT_AUGMENT_FLIP)};
  aug[0].height = aug[0].width = 3;
  aug[0].padding = 1;
  aug[1].probability = 0.5;
  ok(tpt_dataflow_augment(&df, src, 0, aug, 2, n_threads));
  tpt_dataflow_free(src);
  ok(tpt_dataflow_set_seed(df, 99));
  assert_int_equal(df_size(df), 20);
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < 20; ++i) {
      assert_int_equal(next_dp(df, dp), 1);
      comp_bytes(out[pass][i], sizeof out[pass][i], dp, 0);
    }
    assert_int_equal(next_dp(df, dp), 0);
  }
  tpt_datapoint_free(dp);
  tpt_dataflow_free(df);
}

static void test_augment_threads(void **state) {
  (void)state;
  static float a[2][20][9], b[2][20][9], c[2][20][9];
  augmented(0, a);
  augmented(3, b);
  augmented(1, c);
  assert_memory_equal(a, b, sizeof a); /* the same, whatever the threads */
  assert_memory_equal(a, c, sizeof a);
  assert_true(memcmp(a[0], a[1], sizeof a[0]) != 0); /* new randomness every pass */
}

/* ================================================================== 8. IDX and MNIST */

static char tmpdir[64];

static void make_tmpdir(void) {
  strcpy(tmpdir, "/tmp/tpt_dataflow_XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
}

static void tmp_path(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", tmpdir, name); }

static void write_file(const char *path, const unsigned char *b, size_t n, int gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(gzwrite(f, b, (unsigned)n), (int)n);
    assert_int_equal(gzclose(f), Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
  }
}

static long file_size(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (long)st.st_size;
}

/* An IDX file in memory: magic 0 0 type rank, big-endian dims, then
 * `elem`-byte elements given as host values (written big-endian). */
static size_t idx_bytes(unsigned char *out, unsigned char type, const uint32_t *dims, int rank, const void *host,
                        size_t elem) {
  size_t n = 0, count = 1;
  out[n++] = 0;
  out[n++] = 0;
  out[n++] = type;
  out[n++] = (unsigned char)rank;
  for (int i = 0; i < rank; ++i) {
    for (int k = 3; k >= 0; --k) out[n++] = (unsigned char)(dims[i] >> (8 * k));
    count *= dims[i];
  }
  const unsigned char *h = host;
  for (size_t i = 0; i < count; ++i) {
    uint64_t v = 0;
    memcpy(&v, h + i * elem, elem); /* little-endian host */
    for (int k = (int)elem - 1; k >= 0; --k) out[n++] = (unsigned char)(v >> (8 * k));
  }
  return n;
}

static void test_idx(void **state) {
  (void)state;
  make_tmpdir();
  unsigned char buf[512];
  char img[128], img_gz[128], lbl[128], lbl_gz[128], i32p[128], f32p[128], tmp[128];
  tmp_path(img, sizeof img, "images-idx3-ubyte");
  tmp_path(img_gz, sizeof img_gz, "images-idx3-ubyte.gz");
  tmp_path(lbl, sizeof lbl, "labels-idx1-ubyte");
  tmp_path(lbl_gz, sizeof lbl_gz, "labels-idx1-ubyte.gz");
  tmp_path(i32p, sizeof i32p, "ints-idx2");
  tmp_path(f32p, sizeof f32p, "floats-idx2.gz");
  uint8_t pixels[12];
  for (int i = 0; i < 12; ++i) pixels[i] = (uint8_t)(i + 1);
  const uint32_t d_img[] = {3, 2, 2}, d_lbl[] = {3};
  const uint8_t labels[] = {7, 8, 9};
  const size_t n_img = idx_bytes(buf, 0x08, d_img, 3, pixels, 1);
  write_file(img, buf, n_img, 0);
  write_file(img_gz, buf, n_img, 1);
  size_t n_lbl = idx_bytes(buf, 0x08, d_lbl, 1, labels, 1);
  write_file(lbl, buf, n_lbl, 0);
  write_file(lbl_gz, buf, n_lbl, 1);
  const int32_t ints[6] = {1, -2, 0x01020304, 2147483647, -2147483647 - 1, 7};
  const uint32_t d_i32[] = {3, 2};
  write_file(i32p, buf, idx_bytes(buf, 0x0C, d_i32, 2, ints, 4), 0);
  const float floats[4] = {1.5f, -2.25f, 3.0e-3f, 1e10f};
  const uint32_t d_f32[] = {2, 2};
  write_file(f32p, buf, idx_bytes(buf, 0x0D, d_f32, 2, floats, 4), 1);

  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int gz = 0; gz <= 1; ++gz) {
    const char *paths[] = {gz ? img_gz : img, gz ? lbl_gz : lbl};
    tpt_dataflow *df = NULL;
    ok(tpt_dataflow_from_idx(&df, paths, 2, 0));
    assert_int_equal(df_size(df), 3);
    const int64_t s22[] = {2, 2};
    for (int i = 0; i < 3; ++i) {
      assert_int_equal(next_dp(df, dp), 1);
      assert_int_equal(tpt_datapoint_size(dp), 2);
      expect_comp(dp, 0, TPT_DTYPE_U8, s22, 2);
      expect_comp(dp, 1, TPT_DTYPE_U8, NULL, 0);
      uint8_t px[4];
      comp_bytes(px, sizeof px, dp, 0);
      assert_memory_equal(px, pixels + 4 * i, 4);
      assert_int_equal((int)comp(dp, 1), labels[i]);
    }
    assert_int_equal(next_dp(df, dp), 0);
    tpt_dataflow_free(df);
  }
  /* big-endian elements: i32 (raw) and f32 (gzip) */
  const char *ip[] = {i32p}, *fp[] = {f32p};
  tpt_dataflow *df = NULL;
  ok(tpt_dataflow_from_idx(&df, ip, 1, 0));
  const int64_t s2[] = {2};
  for (int i = 0; i < 3; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    expect_comp(dp, 0, TPT_DTYPE_I32, s2, 1);
    int32_t v[2];
    comp_bytes(v, sizeof v, dp, 0);
    assert_int_equal(v[0], ints[2 * i]);
    assert_int_equal(v[1], ints[2 * i + 1]);
  }
  tpt_dataflow_free(df);
  ok(tpt_dataflow_from_idx(&df, fp, 1, 0));
  for (int i = 0; i < 2; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    expect_comp(dp, 0, TPT_DTYPE_F32, s2, 1);
    float v[2];
    comp_bytes(v, sizeof v, dp, 0);
    assert_memory_equal(v, floats + 2 * i, sizeof v);
  }
  tpt_dataflow_free(df);
  /* shuffled: a permutation of the rows */
  const char *lp[] = {lbl};
  ok(tpt_dataflow_from_idx(&df, lp, 1, 1));
  int64_t got[4];
  size_t n = read_pass(df, got, 4);
  for (size_t i = 0; i < n; ++i) got[i] -= 7;
  assert_true(is_permutation(got, n, 3, 0));
  tpt_dataflow_free(df);

  /* broken files: errors naming the file */
  const char *one[] = {tmp};
  tmp_path(tmp, sizeof tmp, "truncated");
  n_lbl = idx_bytes(buf, 0x08, d_img, 3, pixels, 1);
  write_file(tmp, buf, n_lbl - 1, 0);
  expect_code2(tpt_dataflow_from_idx(&df, one, 1, 0),
               TPT_ERR_IO, tmp, "is truncated: the header promises 12 bytes of data, the file has 11");
  write_file(tmp, buf, 6, 0);
  expect_code2(tpt_dataflow_from_idx(&df, one, 1, 0), TPT_ERR_IO, tmp, "truncated inside its header");
  tmp_path(tmp, sizeof tmp, "extra");
  buf[n_lbl] = 0xAB;
  write_file(tmp, buf, n_lbl + 1, 0);
  expect_code2(tpt_dataflow_from_idx(&df, one, 1, 0), TPT_ERR_IO, tmp, "has the wrong size: 1 bytes more");
  tmp_path(tmp, sizeof tmp, "magic");
  buf[0] = 1;
  write_file(tmp, buf, n_lbl, 0);
  expect_code2(tpt_dataflow_from_idx(&df, one, 1, 0), TPT_ERR_IO, tmp, "wrong magic");
  buf[0] = 0;
  buf[2] = 0x0A;
  write_file(tmp, buf, n_lbl, 0);
  expect_code2(tpt_dataflow_from_idx(&df, one, 1, 0), TPT_ERR_IO, tmp, "unknown element type 0x0A");
  tmp_path(tmp, sizeof tmp, "missing");
  expect_code2(tpt_dataflow_from_idx(&df, one, 1, 0), TPT_ERR_IO, tmp, "cannot open");
  /* gzip cut short */
  tmp_path(tmp, sizeof tmp, "cut.gz");
  {
    static unsigned char big[4 + 12 + 3000];
    static unsigned char pix[3000];
    for (int i = 0; i < 3000; ++i) pix[i] = (unsigned char)((i * 7919) % 251);
    const uint32_t d_big[] = {30, 10, 10};
    const size_t nb = idx_bytes(big, 0x08, d_big, 3, pix, 1);
    write_file(tmp, big, nb, 1);
    const long full = file_size(tmp);
    FILE *f = fopen(tmp, "rb");
    assert_non_null(f);
    size_t got_bytes = fread(big, 1, sizeof big, f);
    fclose(f);
    assert_int_equal((long)got_bytes, full);
    write_file(tmp, big, (size_t)full / 2, 0);
    expect_code(tpt_dataflow_from_idx(&df, one, 1, 0), TPT_ERR_IO, tmp);
  }
  /* row counts that differ */
  tmp_path(tmp, sizeof tmp, "two-labels");
  const uint32_t d2[] = {2};
  write_file(tmp, buf, idx_bytes(buf, 0x08, d2, 1, labels, 1), 0);
  const char *mixed[] = {img, tmp};
  expect_code2(tpt_dataflow_from_idx(&df, mixed, 2, 0), TPT_ERR_INVALID_ARGUMENT, tmp, "has 2 rows");
  expect_code(tpt_dataflow_from_idx(&df, mixed, 0, 0), TPT_ERR_INVALID_ARGUMENT, "n_paths is 0");
  assert_null(df);
  tpt_datapoint_free(dp);

  /* clean up */
  const char *names[] = {"images-idx3-ubyte", "images-idx3-ubyte.gz", "labels-idx1-ubyte", "labels-idx1-ubyte.gz",
                         "ints-idx2", "floats-idx2.gz", "truncated", "extra", "magic", "cut.gz", "two-labels"};
  for (size_t i = 0; i < sizeof names / sizeof *names; ++i) {
    tmp_path(tmp, sizeof tmp, names[i]);
    unlink(tmp);
  }
  rmdir(tmpdir);
}

static void test_mnist(void **state) {
  (void)state;
  const char *dir = "/usr/share/datasets/fashion-mnist";
  tpt_dataflow *df = NULL;
  expect_code(tpt_dataflow_mnist(&df, dir, "validation", 0), TPT_ERR_INVALID_ARGUMENT,
              "split must be \"train\" or \"test\", got \"validation\"");
  expect_code(tpt_dataflow_mnist(&df, "/nonexistent/mnist", "test", 0), TPT_ERR_IO, "/nonexistent/mnist/t10k-images-idx3-ubyte");
  DIR *d = opendir(dir);
  if (!d) {
    skip();
    return;
  }
  closedir(d);
  const char *splits[] = {"train", "test"};
  const int64_t sizes[] = {60000, 10000};
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  const int64_t s_img[] = {1, 28, 28};
  for (int k = 0; k < 2; ++k) {
    ok(tpt_dataflow_mnist(&df, dir, splits[k], 0));
    assert_int_equal(df_size(df), sizes[k]);
    int classes[10] = {0};
    float maxv = 0;
    for (int i = 0; i < 200; ++i) {
      assert_int_equal(next_dp(df, dp), 1);
      assert_int_equal(tpt_datapoint_size(dp), 2);
      expect_comp(dp, 0, TPT_DTYPE_F32, s_img, 3);
      expect_comp(dp, 1, TPT_DTYPE_I64, NULL, 0);
      static float px[28 * 28];
      comp_bytes(px, sizeof px, dp, 0);
      for (int p = 0; p < 28 * 28; ++p) {
        assert_true(px[p] >= 0 && px[p] <= 1);
        if (px[p] > maxv) maxv = px[p];
      }
      const double label = comp(dp, 1);
      assert_true(label >= 0 && label <= 9 && label == floor(label));
      classes[(int)label]++;
    }
    assert_true(maxv > 0.9f);
    int distinct = 0;
    for (int c = 0; c < 10; ++c) distinct += classes[c] > 0;
    assert_int_equal(distinct, 10);
    tpt_dataflow_free(df);
  }
  tpt_datapoint_free(dp);
}

/* ================================================================== 9. callbacks, files, fake */

static void test_from_callbacks(void **state) {
  (void)state;
  src_state s;
  src_init(&s, 4);
  tpt_dataflow *df = src_df(&s);
  assert_int_equal(df_size(df), 4);
  assert_true(s.size_calls >= 1);
  assert_int_equal(s.reset_calls, 0);
  int64_t v[8];
  size_t n = read_pass(df, v, 8);
  expect_range(v, n, 4, 0);
  assert_int_equal(s.reset_calls, 1); /* the first next resets */
  assert_int_equal(s.next_calls, 5);  /* 4 datapoints and TPT_STOP */
  const uint64_t first = s.last_seed;
  n = read_pass(df, v, 8);
  expect_range(v, n, 4, 0);
  assert_int_equal(s.reset_calls, 1);
  ok(tpt_dataflow_reset_state(df));
  assert_int_equal(s.reset_calls, 2);
  assert_true(s.last_seed == first); /* no seed: the default generator's, unchanged */
  ok(tpt_dataflow_set_seed(df, 5));
  ok(tpt_dataflow_reset_state(df));
  const uint64_t s5 = s.last_seed;
  ok(tpt_dataflow_set_seed(df, 6));
  ok(tpt_dataflow_reset_state(df));
  assert_true(s.last_seed != s5);
  ok(tpt_dataflow_set_seed(df, 5));
  ok(tpt_dataflow_reset_state(df));
  assert_true(s.last_seed == s5);
  assert_int_equal(s.reset_calls, 5);
  /* a failing reset */
  s.fail_reset = 1;
  expect_code(tpt_dataflow_reset_state(df), TPT_ERR_STATE, "the source cannot rewind");
  s.fail_reset = 0;
  tpt_dataflow_free(df);
  assert_int_equal(s.destroyed, 1);

  /* an error from next ends the pass with it; a datapoint without components is an error */
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  src_init(&s, 4);
  s.fail_at = 2;
  df = src_df(&s);
  assert_int_equal(next_dp(df, dp), 1);
  assert_int_equal(next_dp(df, dp), 1);
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_IO, "source broke at 2");
  tpt_dataflow_free(df);
  src_init(&s, 4);
  s.empty_at = 1;
  df = src_df(&s);
  assert_int_equal(next_dp(df, dp), 1);
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_CALLBACK, "returned no component");
  tpt_dataflow_free(df);

  /* without reset and size */
  src_init(&s, 3);
  tpt_dataflow_callbacks cb = TPT_DATAFLOW_CALLBACKS_INIT;
  cb.next = src_next;
  ok(tpt_dataflow_from_callbacks(&df, &cb, &s, src_destroy));
  assert_int_equal(df_size(df), -1);
  n = read_pass(df, v, 8);
  expect_range(v, n, 3, 0);
  tpt_dataflow_free(df);
  assert_int_equal(s.destroyed, 1);
  /* size -1: unknown */
  src_init(&s, 3);
  cb.size = src_size;
  s.n = -1; /* next then stops at once */
  ok(tpt_dataflow_from_callbacks(&df, &cb, &s, src_destroy));
  assert_int_equal(df_size(df), -1);
  tpt_dataflow_free(df);

  /* destroy exactly once, also when creation fails */
  src_init(&s, 3);
  tpt_dataflow_callbacks none = TPT_DATAFLOW_CALLBACKS_INIT;
  expect_code(tpt_dataflow_from_callbacks(&df, &none, &s, src_destroy), TPT_ERR_INVALID_ARGUMENT,
              "argument 'callbacks->next' is NULL");
  assert_int_equal(s.destroyed, 1);
  cb.version = 0;
  expect_code(tpt_dataflow_from_callbacks(&df, &cb, &s, src_destroy), TPT_ERR_INVALID_ARGUMENT, "TPT_DATAFLOW_CALLBACKS_INIT");
  assert_int_equal(s.destroyed, 2);
  cb.version = TPT_DATAFLOW_CALLBACKS_VERSION;
  expect_code(tpt_dataflow_from_callbacks(NULL, &cb, &s, src_destroy), TPT_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
  assert_int_equal(s.destroyed, 3);
  expect_code(tpt_dataflow_from_callbacks(&df, NULL, &s, src_destroy), TPT_ERR_INVALID_ARGUMENT, "argument 'callbacks' is NULL");
  assert_int_equal(s.destroyed, 4);
  assert_null(df);
  tpt_datapoint_free(dp);
}

typedef struct {
  pthread_mutex_t mu;
  const char *const *paths;
  int calls, wrong, destroyed;
  int64_t fail_index;
} files_state;

static tpt_status *decode(tpt_datapoint *dp, const char *path, size_t index, void *ud) {
  files_state *s = ud;
  pthread_mutex_lock(&s->mu);
  s->calls++;
  if (strcmp(path, s->paths[index]) != 0 || tpt_datapoint_size(dp) != 0) s->wrong++;
  pthread_mutex_unlock(&s->mu);
  sleep_us((long)(index % 3) * 100);
  if ((int64_t)index == s->fail_index) {
    char msg[128];
    snprintf(msg, sizeof msg, "cannot decode %s", path);
    return tpt_status_new(TPT_ERR_IO, msg);
  }
  tpt_status *st = set_i64(dp, 0, (int64_t)index);
  if (!st) st = set_i64(dp, 1, (int64_t)strlen(path));
  return st;
}

static void files_destroy(void *ud) { ((files_state *)ud)->destroyed++; }

static void test_from_files(void **state) {
  (void)state;
  const char *const paths[] = {"img/a.png", "img/bb.png", "img/ccc.png", "img/d.png", "img/eeeee.png", "f.png", "gg.png"};
  char copy[7][32];
  const char *given[7];
  int64_t order[2][2][7];
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int shuffle = 0; shuffle <= 1; ++shuffle) {
    for (int t = 0; t <= 1; ++t) {
      for (int i = 0; i < 7; ++i) {
        strcpy(copy[i], paths[i]);
        given[i] = copy[i];
      }
      files_state s;
      memset(&s, 0, sizeof s);
      pthread_mutex_init(&s.mu, NULL);
      s.paths = paths;
      s.fail_index = -1;
      tpt_dataflow *df = NULL;
      ok(tpt_dataflow_from_files(&df, given, 7, shuffle, t ? 2 : 0, decode, &s, files_destroy));
      memset(copy, 'x', sizeof copy); /* the paths were copied */
      ok(tpt_dataflow_set_seed(df, 21));
      assert_int_equal(df_size(df), 7);
      for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < 7; ++i) {
          assert_int_equal(next_dp(df, dp), 1);
          assert_int_equal(tpt_datapoint_size(dp), 2);
          const int64_t index = (int64_t)comp(dp, 0);
          assert_true(index >= 0 && index < 7);
          assert_int_equal((int64_t)comp(dp, 1), (int64_t)strlen(paths[index]));
          if (pass == 0) order[shuffle][t][i] = index;
        }
        assert_int_equal(next_dp(df, dp), 0);
      }
      tpt_dataflow_free(df);
      assert_int_equal(s.calls, 14);
      assert_int_equal(s.wrong, 0);
      assert_int_equal(s.destroyed, 1);
      pthread_mutex_destroy(&s.mu);
    }
    assert_true(is_permutation(order[shuffle][0], 7, 7, 0));
    assert_true(same_seq(order[shuffle][0], order[shuffle][1], 7)); /* 0 and 2 threads agree */
  }
  expect_range(order[0][0], 7, 7, 0);
  int64_t ident[7] = {0, 1, 2, 3, 4, 5, 6};
  assert_false(same_seq(order[1][0], ident, 7));

  /* a decode error, with and without threads */
  for (int t = 0; t <= 1; ++t) {
    files_state s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    s.paths = paths;
    s.fail_index = 3;
    tpt_dataflow *df = NULL;
    ok(tpt_dataflow_from_files(&df, paths, 7, 0, t ? 2 : 0, decode, &s, files_destroy));
    for (int i = 0; i < 3; ++i) assert_int_equal(next_dp(df, dp), 1);
    expect_code(tpt_dataflow_next(df, dp), TPT_ERR_IO, "cannot decode img/d.png");
    tpt_dataflow_free(df);
    assert_int_equal(s.destroyed, 1);
    /* bad arguments: user_data is taken */
    expect_code(tpt_dataflow_from_files(&df, paths, 7, 0, -1, decode, &s, files_destroy), TPT_ERR_INVALID_ARGUMENT,
                "n_threads must be >= 0, got -1");
    assert_int_equal(s.destroyed, 2);
    const char *holes[] = {"a", NULL};
    expect_code(tpt_dataflow_from_files(&df, holes, 2, 0, 0, decode, &s, files_destroy), TPT_ERR_INVALID_ARGUMENT,
                "argument 'paths[1]' is NULL");
    assert_int_equal(s.destroyed, 3);
    pthread_mutex_destroy(&s.mu);
  }
  tpt_datapoint_free(dp);
}

static void test_fake(void **state) {
  (void)state;
  const int64_t s23[] = {2, 3}, s4[] = {4};
  tpt_input_spec comps[] = {{"image", TPT_DTYPE_F32, s23, 2}, {"label", TPT_DTYPE_I64, NULL, 0}, {"bytes", TPT_DTYPE_U8, s4, 1}};
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int random = 0; random <= 1; ++random) {
    tpt_dataflow *df = NULL;
    ok(tpt_dataflow_fake(&df, comps, 3, 5, random, 2.0, 5.0));
    assert_int_equal(df_size(df), 5);
    float first[6] = {0};
    int64_t first_label = 0;
    int differ = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < 5; ++i) {
        assert_int_equal(next_dp(df, dp), 1);
        assert_int_equal(tpt_datapoint_size(dp), 3);
        expect_comp(dp, 0, TPT_DTYPE_F32, s23, 2);
        expect_comp(dp, 1, TPT_DTYPE_I64, NULL, 0);
        expect_comp(dp, 2, TPT_DTYPE_U8, s4, 1);
        float f[6];
        uint8_t b[4];
        comp_bytes(f, sizeof f, dp, 0);
        comp_bytes(b, sizeof b, dp, 2);
        const int64_t label = (int64_t)comp(dp, 1);
        for (int k = 0; k < 6; ++k) assert_true(f[k] >= 2.0f && f[k] < 5.0f);
        for (int k = 0; k < 4; ++k) assert_true(b[k] >= 2 && b[k] <= 4);
        assert_true(label >= 2 && label <= 4);
        if (pass == 0 && i == 0) {
          memcpy(first, f, sizeof f);
          first_label = label;
        } else {
          differ |= memcmp(first, f, sizeof f) != 0 || label != first_label;
        }
      }
      assert_int_equal(next_dp(df, dp), 0);
    }
    assert_int_equal(differ, random); /* random: new data; else one constant datapoint */
    tpt_dataflow_free(df);
  }
  tpt_dataflow *df = NULL;
  expect_code(tpt_dataflow_fake(&df, comps, 3, 0, 1, 0, 1), TPT_ERR_INVALID_ARGUMENT, "size must be >= 1, got 0");
  expect_code(tpt_dataflow_fake(&df, comps, 3, 5, 1, 1, 1), TPT_ERR_INVALID_ARGUMENT, "low must be < high");
  expect_code(tpt_dataflow_fake(&df, comps, 0, 5, 1, 0, 1), TPT_ERR_INVALID_ARGUMENT, "no components given");
  const int64_t free_dim[] = {-1, 3};
  tpt_input_spec bad[] = {{"x", TPT_DTYPE_F32, free_dim, 2}};
  expect_code(tpt_dataflow_fake(&df, bad, 1, 5, 1, 0, 1), TPT_ERR_INVALID_ARGUMENT, "components[0] has a free dimension (-1)");
  bad[0].shape = s23;
  bad[0].dtype = (tpt_dtype)77;
  expect_code(tpt_dataflow_fake(&df, bad, 1, 5, 1, 0, 1), TPT_ERR_INVALID_ARGUMENT, "components[0].dtype is not a tpt_dtype");
  bad[0].dtype = TPT_DTYPE_F32;
  bad[0].shape = NULL;
  EXPECT_NULL_ARG(tpt_dataflow_fake(&df, bad, 1, 5, 1, 0, 1), "tpt_dataflow_fake", "components[0].shape");
  assert_null(df);
  tpt_datapoint_free(dp);
}

/* ================================================================== 10. state */

enum { ST_N = 16, ST_K = 40 };

/* (image f32 [1, 6, 6], label) rows, shuffled -> local shuffle -> augment. */
static tpt_dataflow *state_pipeline(int32_t n_threads) {
  static float pics[ST_N * 36];
  uint32_t r = 5;
  for (int i = 0; i < ST_N * 36; ++i) {
    r = r * 1664525u + 1013904223u;
    pics[i] = (float)(r >> 8) / 16777216.0f;
  }
  const int64_t shape[] = {ST_N, 1, 6, 6};
  tpt_tensor *img = make_tensor(TPT_DTYPE_F32, pics, shape, 4), *lbl = range_tensor(ST_N, 0);
  const tpt_tensor *ts[] = {lbl, img};
  tpt_dataflow *src = NULL, *ls = NULL, *aug = NULL;
  ok(tpt_dataflow_from_tensors(&src, ts, 2, 1));
  tpt_tensor_free(img);
  tpt_tensor_free(lbl);
  ok(tpt_dataflow_local_shuffle(&ls, src, 5, 2));
  tpt_augmentor a[2] = {augmentor(TPT_AUGMENT_RANDOM_CROP), augmentor(TPT_AUGMENT_FLIP)};
  a[0].height = a[0].width = 4;
  a[0].padding = 1;
  a[1].probability = 0.5;
  ok(tpt_dataflow_augment(&aug, ls, 1, a, 2, n_threads));
  tpt_dataflow_free(src);
  tpt_dataflow_free(ls);
  return aug;
}

typedef struct {
  int64_t label[ST_K];
  float image[ST_K][16];
} stream;

static void read_stream(tpt_dataflow *df, stream *out) {
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int i = 0; i < ST_K; ++i) {
    assert_int_equal(next_dp(df, dp), 1);
    out->label[i] = (int64_t)comp(dp, 0);
    comp_bytes(out->image[i], sizeof out->image[i], dp, 1);
  }
  tpt_datapoint_free(dp);
}

static int same_stream(const stream *a, const stream *b) { return memcmp(a, b, sizeof *a) == 0; }

static void test_state(void **state) {
  (void)state;
  static stream a[2], a2, a3, c, c2;
  for (int th = 0; th <= 1; ++th) {
    tpt_dataflow *p = state_pipeline(th ? 2 : 0);
    ok(tpt_dataflow_set_seed(p, 11));
    ok(tpt_dataflow_reset_state(p));
    tpt_tensor *s = NULL;
    ok(tpt_dataflow_get_state(&s, p));
    tpt_dtype dt;
    ok(tpt_tensor_dtype(&dt, s));
    assert_int_equal(dt, TPT_DTYPE_U8);
    read_stream(p, &a[th]);
    ok(tpt_dataflow_set_state(p, s));
    ok(tpt_dataflow_reset_state(p));
    read_stream(p, &a2);
    assert_true(same_stream(&a[th], &a2)); /* restored: the same data */
    ok(tpt_dataflow_reset_state(p));
    read_stream(p, &a3);
    assert_true(same_stream(&a[th], &a3)); /* a plain reset reseeds: the same too */

    /* a later state, carried to another pipeline of the same shape */
    tpt_tensor *later = NULL;
    ok(tpt_dataflow_get_state(&later, p));
    tpt_dataflow *q = state_pipeline(th ? 2 : 0);
    ok(tpt_dataflow_set_seed(q, 999));
    ok(tpt_dataflow_set_state(q, later));
    ok(tpt_dataflow_reset_state(q));
    read_stream(q, &c);
    ok(tpt_dataflow_set_state(p, later));
    ok(tpt_dataflow_reset_state(p));
    read_stream(p, &c2);
    assert_true(same_stream(&c, &c2));
    assert_false(same_stream(&c, &a[th]));
    int64_t labels[ST_K];
    for (int i = 0; i < ST_K; ++i) labels[i] = c.label[i];
    assert_false(same_seq(labels, a[th].label, ST_K));

    /* states that do not fit */
    tpt_dataflow *other = range_df(4, 0, 1), *ob = NULL;
    ok(tpt_dataflow_batch(&ob, other, 2, 0));
    tpt_tensor *os = NULL;
    ok(tpt_dataflow_get_state(&os, ob));
    expect_code(tpt_dataflow_set_state(p, os), TPT_ERR_INVALID_ARGUMENT, "not a state of this dataflow");
    expect_code(tpt_dataflow_set_state(ob, s), TPT_ERR_INVALID_ARGUMENT, "not a state of this dataflow");
    /* an inner dataflow's state belongs to its consumer's */
    tpt_tensor *inner_state = NULL;
    expect_code(tpt_dataflow_get_state(&inner_state, other), TPT_ERR_INVALID_ARGUMENT,
                "is read by another dataflow or an input; take the state of that one");
    assert_null(inner_state);
    expect_code(tpt_dataflow_set_state(other, os), TPT_ERR_INVALID_ARGUMENT, "set the state of that one");
    tpt_tensor *f = NULL;
    ok(tpt_tensor_to(&f, s, NULL, TPT_DTYPE_F32));
    expect_code(tpt_dataflow_set_state(p, f), TPT_ERR_INVALID_ARGUMENT, "state must be a 1-d u8 tensor");
    int64_t nbytes = 0;
    ok(tpt_tensor_numel(&nbytes, s));
    unsigned char *raw = malloc((size_t)nbytes);
    ok(tpt_tensor_copy_to(raw, (size_t)nbytes, s));
    const int64_t cut[] = {nbytes - 8};
    tpt_tensor *shortened = make_tensor(TPT_DTYPE_U8, raw, cut, 1);
    expect_code(tpt_dataflow_set_state(p, shortened), TPT_ERR_INVALID_ARGUMENT, "not a state of this dataflow: it is truncated");
    raw[0] = 'X';
    const int64_t whole[] = {nbytes};
    tpt_tensor *tagless = make_tensor(TPT_DTYPE_U8, raw, whole, 1);
    expect_code(tpt_dataflow_set_state(p, tagless), TPT_ERR_INVALID_ARGUMENT, "tag");
    free(raw);
    /* a failed set_state changes nothing: still the seeded stream */
    ok(tpt_dataflow_reset_state(p));
    read_stream(p, &a2);
    assert_true(same_stream(&a[th], &a2));
    tpt_tensor_free(shortened);
    tpt_tensor_free(tagless);
    tpt_tensor_free(f);
    tpt_tensor_free(os);
    tpt_tensor_free(s);
    tpt_tensor_free(later);
    tpt_dataflow_free(other);
    tpt_dataflow_free(ob);
    tpt_dataflow_free(q);
    tpt_dataflow_free(p);
  }
  assert_true(same_stream(&a[0], &a[1])); /* the threads do not change the data */
}

/* ================================================================== 11. one consumer */

/* ---- mid-pass state: the datapoint after the last one given, threads or not */

/* A datapoint as one number: FNV-1a over its components as f64; 0 is TPT_STOP. */
static uint64_t dp_hash(tpt_dataflow *df, tpt_datapoint *dp) {
  if (!next_dp(df, dp)) return 0;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < tpt_datapoint_size(dp); ++i) {
    tpt_tensor *t = NULL, *d = NULL;
    ok(tpt_datapoint_get(&t, dp, i));
    ok(tpt_tensor_to(&d, t, NULL, TPT_DTYPE_F64));
    int64_t n = 0;
    ok(tpt_tensor_numel(&n, d));
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    ok(tpt_tensor_copy_to(v, sizeof(double) * (size_t)n, d));
    const unsigned char *b = (const unsigned char *)v;
    for (size_t k = 0; k < sizeof(double) * (size_t)n; ++k) h = (h ^ b[k]) * 0x100000001b3ull;
    h = (h ^ i) * 0x100000001b3ull;
    free(v);
    tpt_tensor_free(t);
    tpt_tensor_free(d);
  }
  return h | 1;
}

static void read_events(tpt_dataflow *df, uint64_t *out, int n) {
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  for (int i = 0; i < n; ++i) out[i] = dp_hash(df, dp);
  tpt_datapoint_free(dp);
}

static tpt_status *twice(tpt_datapoint *dp, void *ud) {
  (void)ud;
  double v = 0;
  tpt_status *st = value_of(&v, dp, 0);
  return st ? st : set_i64(dp, 0, 2 * (int64_t)v);
}

/* Pipelines whose every part can resume mid-pass. */
static tpt_dataflow *resumable(int which) {
  tpt_dataflow *out = NULL, *a = NULL, *b = NULL;
  switch (which) {
    case 0: /* shuffled rows, batches with a remainder */
      a = range_df(23, 0, 1);
      ok(tpt_dataflow_batch(&out, a, 4, 1));
      break;
    case 1: { /* images: augment on 2 threads, batch, prefetch */
      float pics[12 * 16];
      for (int i = 0; i < 12 * 16; ++i) pics[i] = (float)((i * 37) % 101) / 100.0f;
      const int64_t shape[] = {12, 1, 4, 4};
      tpt_tensor *img = make_tensor(TPT_DTYPE_F32, pics, shape, 4), *lbl = range_tensor(12, 0);
      const tpt_tensor *ts[] = {lbl, img};
      tpt_dataflow *src = NULL;
      ok(tpt_dataflow_from_tensors(&src, ts, 2, 1));
      tpt_tensor_free(img);
      tpt_tensor_free(lbl);
      tpt_augmentor aug[2] = {augmentor(TPT_AUGMENT_RANDOM_CROP), augmentor(TPT_AUGMENT_FLIP)};
      aug[0].height = aug[0].width = 3;
      aug[0].padding = 1;
      aug[1].probability = 0.5;
      ok(tpt_dataflow_augment(&a, src, 1, aug, 2, 2));
      tpt_dataflow_free(src);
      ok(tpt_dataflow_batch(&b, a, 5, 1));
      ok(tpt_dataflow_prefetch(&out, b, 4));
      break;
    }
    case 2: /* repeat, fixed size going on where it stopped, prefetch */
      a = range_df(7, 0, 1);
      ok(tpt_dataflow_repeat(&b, a, 2));
      tpt_dataflow_free(a);
      ok(tpt_dataflow_fixed_size(&a, b, 9, 1));
      ok(tpt_dataflow_prefetch(&out, a, 3));
      break;
    case 3: { /* concat of shuffled and in-order rows, joined with random fake data */
      tpt_dataflow *parts[2] = {range_df(5, 0, 1), range_df(4, 100, 0)}, *fk = NULL;
      ok(tpt_dataflow_concat(&a, parts, 2));
      tpt_dataflow_free(parts[0]);
      tpt_dataflow_free(parts[1]);
      const int64_t fs[] = {2};
      tpt_input_spec spec[] = {{"f", TPT_DTYPE_F32, fs, 1}};
      ok(tpt_dataflow_fake(&fk, spec, 1, 13, 1, 0.0, 1.0));
      tpt_dataflow *both[2] = {a, fk};
      ok(tpt_dataflow_join(&out, both, 2));
      tpt_dataflow_free(fk);
      break;
    }
    case 4: /* a shuffled cache of shuffled rows, in batches */
      a = range_df(11, 0, 1);
      ok(tpt_dataflow_cache(&b, a, 1));
      ok(tpt_dataflow_batch(&out, b, 2, 1));
      break;
    default: { /* a user map on 3 threads in order (strict), prefetched */
      a = range_df(19, 0, 1);
      tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
      o.n_threads = 3;
      o.buffer_size = 6;
      o.ordered = 1;
      o.strict = 1;
      ok(tpt_dataflow_parallel_map(&b, a, twice, NULL, NULL, &o));
      ok(tpt_dataflow_prefetch(&out, b, 2));
      break;
    }
  }
  tpt_dataflow_free(a);
  tpt_dataflow_free(b);
  return out;
}

enum { RS_PIPELINES = 6, RS_AFTER = 30 };

/* For each pipeline and several cuts (at the start, mid-pass, at a pass's
 * end, in a later pass): the state after k datapoints (and TPT_STOPs),
 * restored into a new pipeline with another seed, gives the same next
 * RS_AFTER datapoints as the pipeline that went on. */
static void test_state_mid_pass(void **state) {
  (void)state;
  const int cuts[] = {0, 1, 3, 6, 7, 13, 26};
  for (int which = 0; which < RS_PIPELINES; ++which) {
    int differs = 0;
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; ++c) {
      tpt_dataflow *p = resumable(which), *q = resumable(which), *r = resumable(which);
      ok(tpt_dataflow_set_seed(p, 7));
      ok(tpt_dataflow_reset_state(p));
      uint64_t skip[32], want[RS_AFTER], got[RS_AFTER], other[RS_AFTER];
      read_events(p, skip, cuts[c]);
      tpt_tensor *s = NULL;
      ok(tpt_dataflow_get_state(&s, p));
      read_events(p, want, RS_AFTER);
      ok(tpt_dataflow_set_seed(q, 12345));
      ok(tpt_dataflow_set_state(q, s));
      ok(tpt_dataflow_reset_state(q));
      read_events(q, got, RS_AFTER);
      for (int i = 0; i < RS_AFTER; ++i)
        if (got[i] != want[i])
          fail_msg("pipeline %d, cut after %d: event %d differs after the restore (%s)", which, cuts[c], i,
                   got[i] == 0 ? "STOP, want a datapoint" : want[i] == 0 ? "a datapoint, want STOP" : "values");
      /* the same state again, into the pipeline that made it (threads running) */
      ok(tpt_dataflow_set_state(p, s));
      ok(tpt_dataflow_reset_state(p));
      read_events(p, got, RS_AFTER);
      assert_memory_equal(got, want, sizeof want);
      /* without the state, another seed gives other data */
      ok(tpt_dataflow_set_seed(r, 12345));
      ok(tpt_dataflow_reset_state(r));
      read_events(r, skip, cuts[c]);
      read_events(r, other, RS_AFTER);
      differs += memcmp(other, want, sizeof want) != 0;
      tpt_tensor_free(s);
      tpt_dataflow_free(p);
      tpt_dataflow_free(q);
      tpt_dataflow_free(r);
    }
    if (differs == 0) fail_msg("pipeline %d: the seed changes nothing, so the test proves nothing", which);
  }
}

/* ---- a C source with a position (callbacks version 2) */

enum { PS_N = 10 };

/* Rows 0..PS_N-1 in an order drawn each pass from an LCG seeded by reset;
 * its state is (started, pos, the LCG before the pass's order, the LCG). */
typedef struct {
  uint64_t rng, pass_rng;
  int64_t pos, order[PS_N];
  int started;
  /* save fails (or gives an f32 tensor) from its n-th call on; 0: never.
   * Set before the reset that starts the threads that call it. */
  int fail_save_from, bad_save_from, fail_restore, saves, restores;
} pos_src;

static uint64_t lcg(uint64_t *x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return *x >> 33;
}

static void pos_order(pos_src *s) {
  for (int64_t i = 0; i < PS_N; ++i) s->order[i] = i;
  for (int64_t i = PS_N - 1; i > 0; --i) {
    int64_t j = (int64_t)(lcg(&s->rng) % (uint64_t)(i + 1)), t = s->order[i];
    s->order[i] = s->order[j];
    s->order[j] = t;
  }
}

static tpt_status *pos_next(tpt_datapoint *dp, void *ud) {
  pos_src *s = ud;
  if (!s->started) {
    s->pass_rng = s->rng;
    pos_order(s);
    s->pos = 0;
    s->started = 1;
  }
  if (s->pos == PS_N) {
    s->started = 0;
    return tpt_status_new(TPT_STOP, "end of pass");
  }
  return set_i64(dp, 0, s->order[s->pos++]);
}

static tpt_status *pos_reset(uint64_t seed, void *ud) {
  pos_src *s = ud;
  s->rng = seed;
  s->started = 0;
  return NULL;
}

static tpt_status *pos_save(tpt_tensor **out, void *ud) {
  pos_src *s = ud;
  s->saves++;
  if (s->fail_save_from && s->saves >= s->fail_save_from)
    return tpt_status_new(TPT_ERR_IO, "the source's position is on a disk that went away");
  uint64_t w[4] = {(uint64_t)s->started, (uint64_t)s->pos, s->pass_rng, s->rng};
  const int64_t shape[] = {sizeof w};
  if (s->bad_save_from && s->saves >= s->bad_save_from) {
    const int64_t fshape[] = {4};
    float f[4] = {0, 0, 0, 0};
    return tpt_tensor_from_data(out, f, sizeof f, fshape, 1, NULL);
  }
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_U8;
  return tpt_tensor_from_data(out, w, sizeof w, shape, 1, &o);
}

static tpt_status *pos_restore(const tpt_tensor *state, void *ud) {
  pos_src *s = ud;
  s->restores++;
  if (s->fail_restore) return tpt_status_new(TPT_ERR_STATE, "the source refuses to go back");
  uint64_t w[4];
  tpt_status *st = tpt_tensor_copy_to(w, sizeof w, state);
  if (st) return st;
  s->started = (int)w[0];
  s->pos = (int64_t)w[1];
  if (s->started) { /* the pass's order again, from the generator it was drawn from */
    s->rng = w[2];
    pos_order(s);
    s->pass_rng = w[2];
  }
  s->rng = w[3];
  return NULL;
}

static tpt_dataflow *pos_df(pos_src *s, int stateful, int how) {
  memset(s, 0, sizeof *s);
  tpt_dataflow_callbacks cb = TPT_DATAFLOW_CALLBACKS_INIT;
  cb.next = pos_next;
  cb.reset = pos_reset;
  if (stateful) {
    cb.save = pos_save;
    cb.restore = pos_restore;
  }
  tpt_dataflow *src = NULL, *a = NULL, *out = NULL;
  ok(tpt_dataflow_from_callbacks(&src, &cb, s, NULL));
  if (how == 0) { /* read ahead by prefetch, then batched */
    ok(tpt_dataflow_prefetch(&a, src, 3));
    ok(tpt_dataflow_batch(&out, a, 3, 1));
  } else { /* read ahead by an ordered parallel map, prefetched */
    tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
    o.ordered = 1;
    o.strict = 1;
    o.buffer_size = 4;
    ok(tpt_dataflow_parallel_map(&a, src, twice, NULL, NULL, &o));
    ok(tpt_dataflow_prefetch(&out, a, 2));
  }
  tpt_dataflow_free(src);
  tpt_dataflow_free(a);
  return out;
}

static tpt_status *must_not_run(tpt_tensor **out, void *ud) {
  (void)out;
  (void)ud;
  fail_msg("a version 1 source's save field was read");
  return NULL;
}

/* A C source with save and restore resumes mid-pass behind threads that read
 * ahead; the callbacks' errors and misuse are clear errors. */
static void test_source_position(void **state) {
  (void)state;
  const int cuts[] = {0, 2, 4, 5, 9};
  for (int how = 0; how < 2; ++how) {
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; ++c) {
      pos_src sa, sb;
      tpt_dataflow *a = pos_df(&sa, 1, how), *b = pos_df(&sb, 1, how);
      ok(tpt_dataflow_set_seed(a, 7));
      ok(tpt_dataflow_reset_state(a));
      uint64_t skip[16], want[20], got[20];
      read_events(a, skip, cuts[c]);
      tpt_tensor *st = NULL;
      ok(tpt_dataflow_get_state(&st, a));
      read_events(a, want, 20);
      ok(tpt_dataflow_set_seed(b, 99));
      ok(tpt_dataflow_set_state(b, st));
      ok(tpt_dataflow_reset_state(b));
      assert_int_equal(sb.restores, 1);
      read_events(b, got, 20);
      if (memcmp(got, want, sizeof want) != 0) fail_msg("pipeline %d, cut %d: the restored source does not go on", how, cuts[c]);
      /* a source without restore refuses a state with a position */
      pos_src sc;
      tpt_dataflow *plain = pos_df(&sc, 0, how);
      expect_code(tpt_dataflow_set_state(plain, st), TPT_ERR_INVALID_ARGUMENT, "cannot restore one");
      tpt_dataflow_free(plain);
      tpt_tensor_free(st);
      tpt_dataflow_free(a);
      tpt_dataflow_free(b);
    }
  }
  /* errors of save through iteration behind prefetch: its thread saves after
   * each datapoint (the first save is the reset's, on this thread) */
  pos_src s;
  tpt_dataflow *df = pos_df(&s, 1, 0);
  tpt_tensor *st = NULL;
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  s.fail_save_from = 2;
  ok(tpt_dataflow_reset_state(df));
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_IO, "went away");
  s.fail_save_from = 0;
  s.saves = 0;
  s.bad_save_from = 2;
  ok(tpt_dataflow_reset_state(df));
  expect_code(tpt_dataflow_next(df, dp), TPT_ERR_CALLBACK, "must give a 1-d u8 tensor");
  s.bad_save_from = 0;
  s.fail_save_from = 1; /* and at the reset itself: prefetch saves when its thread starts */
  expect_code(tpt_dataflow_reset_state(df), TPT_ERR_IO, "went away");
  s.fail_save_from = 0;
  ok(tpt_dataflow_reset_state(df));
  assert_int_equal(next_dp(df, dp), 1);
  ok(tpt_dataflow_get_state(&st, df));
  s.fail_restore = 1;
  ok(tpt_dataflow_set_state(df, st));
  expect_code(tpt_dataflow_reset_state(df), TPT_ERR_STATE, "refuses to go back");
  s.fail_restore = 0;
  tpt_tensor_free(st);
  tpt_datapoint_free(dp);
  tpt_dataflow_free(df);
  /* a direct source: get_state calls save; save's error comes back from it */
  tpt_dataflow_callbacks cb = TPT_DATAFLOW_CALLBACKS_INIT;
  cb.next = pos_next;
  cb.reset = pos_reset;
  cb.save = pos_save;
  cb.restore = pos_restore;
  memset(&s, 0, sizeof s);
  ok(tpt_dataflow_from_callbacks(&df, &cb, &s, NULL));
  ok(tpt_dataflow_reset_state(df));
  s.fail_save_from = 1;
  expect_code(tpt_dataflow_get_state(&st, df), TPT_ERR_IO, "went away");
  assert_null(st);
  tpt_dataflow_free(df);
  /* save without restore */
  cb.restore = NULL;
  expect_code(tpt_dataflow_from_callbacks(&df, &cb, &s, NULL), TPT_ERR_INVALID_ARGUMENT, "come together");
  /* version 1: the new fields are not read */
  cb.version = 1;
  cb.save = must_not_run;
  cb.restore = NULL;
  ok(tpt_dataflow_from_callbacks(&df, &cb, &s, NULL));
  ok(tpt_dataflow_reset_state(df));
  ok(tpt_dataflow_get_state(&st, df));
  tpt_tensor_free(st);
  tpt_dataflow_free(df);
}

static void test_one_consumer(void **state) {
  (void)state;
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  tpt_dataflow *src = range_df(6, 0, 0), *b = NULL, *b2 = NULL, *r = NULL;
  ok(tpt_dataflow_batch(&b, src, 2, 0));
  expect_code(tpt_dataflow_next(src, dp), TPT_ERR_INVALID_ARGUMENT, "is read by another dataflow or an input");
  expect_code(tpt_dataflow_reset_state(src), TPT_ERR_INVALID_ARGUMENT, "a dataflow has one consumer");
  expect_code(tpt_dataflow_batch(&b2, src, 3, 0), TPT_ERR_INVALID_ARGUMENT, "is already read by BatchData");
  expect_code(tpt_dataflow_repeat(&r, src, 2), TPT_ERR_INVALID_ARGUMENT, "is already read by BatchData");
  tpt_input *in = NULL;
  expect_code(tpt_input_from_dataflow(&in, src, NULL), TPT_ERR_INVALID_ARGUMENT, "is already read by BatchData");
  assert_null(b2);
  assert_null(in);
  /* what may still be asked of it: its size, not its state (its consumer's
   * thread may be iterating it; the consumer's state holds it) */
  assert_int_equal(df_size(src), 6);
  tpt_tensor *st = NULL;
  expect_code(tpt_dataflow_get_state(&st, src), TPT_ERR_INVALID_ARGUMENT, "take the state of that one");
  /* the consumer works; once it is gone, another may read the input */
  int64_t v[6];
  int batches = 0;
  while (next_dp(b, dp)) batches++;
  assert_int_equal(batches, 3);
  tpt_dataflow_free(b);
  size_t n = read_pass(src, v, 6);
  expect_range(v, n, 6, 0);
  ok(tpt_dataflow_repeat(&r, src, 2));
  expect_code(tpt_dataflow_next(src, dp), TPT_ERR_INVALID_ARGUMENT, "is read by another dataflow or an input");
  tpt_dataflow_free(r);

  /* inputs and inference runners are consumers too */
  ok(tpt_input_from_dataflow(&in, src, NULL));
  expect_code(tpt_dataflow_next(src, dp), TPT_ERR_INVALID_ARGUMENT, "is read by another dataflow or an input");
  expect_code(tpt_dataflow_batch(&b2, src, 2, 0), TPT_ERR_INVALID_ARGUMENT, "is already read by QueueInput");
  tpt_input *in2 = NULL;
  tpt_input_options fo = TPT_INPUT_OPTIONS_INIT;
  fo.kind = TPT_INPUT_FEED;
  expect_code(tpt_input_from_dataflow(&in2, src, &fo), TPT_ERR_INVALID_ARGUMENT, "is already read by QueueInput");
  tpt_input_free(in);
  ok(tpt_input_from_dataflow(&in2, src, &fo));
  expect_code(tpt_input_from_dataflow(&in, src, NULL), TPT_ERR_INVALID_ARGUMENT, "is already read by FeedInput");
  tpt_input_free(in2);
  /* bad input options leave it free */
  tpt_input_options bad = TPT_INPUT_OPTIONS_INIT;
  bad.capacity = 0;
  expect_code(tpt_input_from_dataflow(&in, src, &bad), TPT_ERR_INVALID_ARGUMENT, "capacity must be >= 1, got 0");
  bad = fo;
  bad.kind = (tpt_input_kind)7;
  expect_code(tpt_input_from_dataflow(&in, src, &bad), TPT_ERR_INVALID_ARGUMENT, "options->kind 7 is not a tpt_input_kind");
  bad.version = 0;
  expect_code(tpt_input_from_dataflow(&in, src, &bad), TPT_ERR_INVALID_ARGUMENT, "TPT_INPUT_OPTIONS_INIT");
  n = read_pass(src, v, 6);
  expect_range(v, n, 6, 0);

  /* a dataflow made from itself cannot happen, but a chain shares nothing */
  ok(tpt_dataflow_batch(&b, src, 3, 0));
  ok(tpt_dataflow_repeat(&r, b, 2));
  expect_code(tpt_dataflow_next(b, dp), TPT_ERR_INVALID_ARGUMENT, "is read by another dataflow or an input");
  tpt_dataflow_free(b);
  tpt_dataflow_free(src);
  assert_int_equal(df_size(r), 4);
  assert_int_equal(next_dp(r, dp), 1); /* the chain lives on through the outer handle */
  tpt_dataflow_free(r);
  tpt_datapoint_free(dp);
}

/* ================================================================== 12. NULL and foreign arguments */

static tpt_status *feed_stop(tpt_tensor **batch, size_t n, void *ud) {
  (void)batch;
  (void)n;
  (void)ud;
  return tpt_status_new(TPT_STOP, "no data");
}

static void count_destroy(void *ud) { (*(int *)ud)++; }

/* A model for the argument checks (never trained). */
static tpt_status *null_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)tw;
  (void)in;
  (void)n;
  (void)ud;
  return NULL;
}

static void test_null_arguments(void **state) {
  (void)state;
  tpt_dataflow *df = NULL, *src = range_df(4, 0, 0);
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  tpt_tensor *t = NULL, *val = NULL;
  ok(new_i64(&val, 1));
  int64_t n = 0;
  EXPECT_NULL_ARG(tpt_datapoint_new(NULL), "tpt_datapoint_new", "out");
  EXPECT_NULL_ARG(tpt_datapoint_get(NULL, dp, 0), "tpt_datapoint_get", "out");
  EXPECT_NULL_ARG(tpt_datapoint_get(&t, NULL, 0), "tpt_datapoint_get", "dp");
  EXPECT_NULL_ARG(tpt_datapoint_set(NULL, 0, val), "tpt_datapoint_set", "dp");
  EXPECT_NULL_ARG(tpt_datapoint_set(dp, 0, NULL), "tpt_datapoint_set", "value");
  EXPECT_NULL_ARG(tpt_datapoint_truncate(NULL, 0), "tpt_datapoint_truncate", "dp");

  tpt_dataflow_callbacks cb = TPT_DATAFLOW_CALLBACKS_INIT;
  cb.next = src_next;
  EXPECT_NULL_ARG(tpt_dataflow_from_callbacks(NULL, &cb, NULL, NULL), "tpt_dataflow_from_callbacks", "out");
  EXPECT_NULL_ARG(tpt_dataflow_from_callbacks(&df, NULL, NULL, NULL), "tpt_dataflow_from_callbacks", "callbacks");
  cb.next = NULL;
  EXPECT_NULL_ARG(tpt_dataflow_from_callbacks(&df, &cb, NULL, NULL), "tpt_dataflow_from_callbacks", "callbacks->next");
  const tpt_tensor *ts[] = {val}, *holes[] = {NULL};
  EXPECT_NULL_ARG(tpt_dataflow_from_tensors(NULL, ts, 1, 0), "tpt_dataflow_from_tensors", "out");
  EXPECT_NULL_ARG(tpt_dataflow_from_tensors(&df, NULL, 1, 0), "tpt_dataflow_from_tensors", "tensors");
  EXPECT_NULL_ARG(tpt_dataflow_from_tensors(&df, holes, 1, 0), "tpt_dataflow_from_tensors", "tensors[0]");
  const char *paths[] = {"a", "b"}, *no_paths[] = {"a", NULL};
  EXPECT_NULL_ARG(tpt_dataflow_from_idx(NULL, paths, 1, 0), "tpt_dataflow_from_idx", "out");
  EXPECT_NULL_ARG(tpt_dataflow_from_idx(&df, NULL, 1, 0), "tpt_dataflow_from_idx", "paths");
  EXPECT_NULL_ARG(tpt_dataflow_from_idx(&df, no_paths, 2, 0), "tpt_dataflow_from_idx", "paths[1]");
  EXPECT_NULL_ARG(tpt_dataflow_mnist(NULL, "/d", "train", 0), "tpt_dataflow_mnist", "out");
  EXPECT_NULL_ARG(tpt_dataflow_mnist(&df, NULL, "train", 0), "tpt_dataflow_mnist", "dir");
  EXPECT_NULL_ARG(tpt_dataflow_mnist(&df, "/d", NULL, 0), "tpt_dataflow_mnist", "split");
  EXPECT_NULL_ARG(tpt_dataflow_from_files(NULL, paths, 2, 0, 0, decode, NULL, NULL), "tpt_dataflow_from_files", "out");
  EXPECT_NULL_ARG(tpt_dataflow_from_files(&df, NULL, 2, 0, 0, decode, NULL, NULL), "tpt_dataflow_from_files", "paths");
  EXPECT_NULL_ARG(tpt_dataflow_from_files(&df, paths, 2, 0, 0, NULL, NULL, NULL), "tpt_dataflow_from_files", "decode");
  const int64_t s1[] = {1};
  tpt_input_spec comps[] = {{"x", TPT_DTYPE_F32, s1, 1}};
  EXPECT_NULL_ARG(tpt_dataflow_fake(NULL, comps, 1, 1, 1, 0, 1), "tpt_dataflow_fake", "out");
  EXPECT_NULL_ARG(tpt_dataflow_fake(&df, NULL, 1, 1, 1, 0, 1), "tpt_dataflow_fake", "components");

  EXPECT_NULL_ARG(tpt_dataflow_batch(NULL, src, 2, 0), "tpt_dataflow_batch", "out");
  EXPECT_NULL_ARG(tpt_dataflow_batch(&df, NULL, 2, 0), "tpt_dataflow_batch", "df");
  EXPECT_NULL_ARG(tpt_dataflow_map(NULL, src, identity, NULL, NULL), "tpt_dataflow_map", "out");
  EXPECT_NULL_ARG(tpt_dataflow_map(&df, NULL, identity, NULL, NULL), "tpt_dataflow_map", "df");
  EXPECT_NULL_ARG(tpt_dataflow_map(&df, src, NULL, NULL, NULL), "tpt_dataflow_map", "fn");
  EXPECT_NULL_ARG(tpt_dataflow_map_component(NULL, src, 0, negate_drop_odd, NULL, NULL), "tpt_dataflow_map_component", "out");
  EXPECT_NULL_ARG(tpt_dataflow_map_component(&df, NULL, 0, negate_drop_odd, NULL, NULL), "tpt_dataflow_map_component", "df");
  EXPECT_NULL_ARG(tpt_dataflow_map_component(&df, src, 0, NULL, NULL, NULL), "tpt_dataflow_map_component", "fn");
  EXPECT_NULL_ARG(tpt_dataflow_parallel_map(NULL, src, identity, NULL, NULL, NULL), "tpt_dataflow_parallel_map", "out");
  EXPECT_NULL_ARG(tpt_dataflow_parallel_map(&df, NULL, identity, NULL, NULL, NULL), "tpt_dataflow_parallel_map", "df");
  EXPECT_NULL_ARG(tpt_dataflow_parallel_map(&df, src, NULL, NULL, NULL, NULL), "tpt_dataflow_parallel_map", "fn");
  EXPECT_NULL_ARG(tpt_dataflow_prefetch(NULL, src, 2), "tpt_dataflow_prefetch", "out");
  EXPECT_NULL_ARG(tpt_dataflow_prefetch(&df, NULL, 2), "tpt_dataflow_prefetch", "df");
  EXPECT_NULL_ARG(tpt_dataflow_local_shuffle(NULL, src, 2, 1), "tpt_dataflow_local_shuffle", "out");
  EXPECT_NULL_ARG(tpt_dataflow_local_shuffle(&df, NULL, 2, 1), "tpt_dataflow_local_shuffle", "df");
  EXPECT_NULL_ARG(tpt_dataflow_cache(NULL, src, 0), "tpt_dataflow_cache", "out");
  EXPECT_NULL_ARG(tpt_dataflow_cache(&df, NULL, 0), "tpt_dataflow_cache", "df");
  EXPECT_NULL_ARG(tpt_dataflow_repeat(NULL, src, 2), "tpt_dataflow_repeat", "out");
  EXPECT_NULL_ARG(tpt_dataflow_repeat(&df, NULL, 2), "tpt_dataflow_repeat", "df");
  EXPECT_NULL_ARG(tpt_dataflow_fixed_size(NULL, src, 2, 0), "tpt_dataflow_fixed_size", "out");
  EXPECT_NULL_ARG(tpt_dataflow_fixed_size(&df, NULL, 2, 0), "tpt_dataflow_fixed_size", "df");
  EXPECT_NULL_ARG(tpt_dataflow_shard(NULL, src, 0, 2), "tpt_dataflow_shard", "out");
  EXPECT_NULL_ARG(tpt_dataflow_shard(&df, NULL, 0, 2), "tpt_dataflow_shard", "df");
  tpt_dataflow *other = range_df(2, 0, 0);
  tpt_dataflow *pair[] = {src, other}, *gap[] = {src, NULL};
  EXPECT_NULL_ARG(tpt_dataflow_concat(NULL, pair, 2), "tpt_dataflow_concat", "out");
  EXPECT_NULL_ARG(tpt_dataflow_concat(&df, NULL, 2), "tpt_dataflow_concat", "dfs");
  EXPECT_NULL_ARG(tpt_dataflow_concat(&df, gap, 2), "tpt_dataflow_concat", "dfs[1]");
  EXPECT_NULL_ARG(tpt_dataflow_join(NULL, pair, 2), "tpt_dataflow_join", "out");
  EXPECT_NULL_ARG(tpt_dataflow_join(&df, NULL, 2), "tpt_dataflow_join", "dfs");
  EXPECT_NULL_ARG(tpt_dataflow_join(&df, gap, 2), "tpt_dataflow_join", "dfs[1]");
  const size_t idx[] = {0};
  EXPECT_NULL_ARG(tpt_dataflow_select(NULL, src, idx, 1), "tpt_dataflow_select", "out");
  EXPECT_NULL_ARG(tpt_dataflow_select(&df, NULL, idx, 1), "tpt_dataflow_select", "df");
  EXPECT_NULL_ARG(tpt_dataflow_select(&df, src, NULL, 1), "tpt_dataflow_select", "indices");
  tpt_augmentor flip = augmentor(TPT_AUGMENT_FLIP), norm = augmentor(TPT_AUGMENT_NORMALIZE);
  const double one[] = {1};
  norm.n_channels = 1;
  norm.std = one;
  EXPECT_NULL_ARG(tpt_dataflow_augment(NULL, src, 0, &flip, 1, 0), "tpt_dataflow_augment", "out");
  EXPECT_NULL_ARG(tpt_dataflow_augment(&df, NULL, 0, &flip, 1, 0), "tpt_dataflow_augment", "df");
  EXPECT_NULL_ARG(tpt_dataflow_augment(&df, src, 0, NULL, 1, 0), "tpt_dataflow_augment", "augmentors");
  EXPECT_NULL_ARG(tpt_dataflow_augment(&df, src, 0, &norm, 1, 0), "tpt_dataflow_augment", "augmentors[0].mean");
  norm.mean = one;
  norm.std = NULL;
  EXPECT_NULL_ARG(tpt_dataflow_augment(&df, src, 0, &norm, 1, 0), "tpt_dataflow_augment", "augmentors[0].std");

  EXPECT_NULL_ARG(tpt_dataflow_reset_state(NULL), "tpt_dataflow_reset_state", "df");
  EXPECT_NULL_ARG(tpt_dataflow_next(NULL, dp), "tpt_dataflow_next", "df");
  EXPECT_NULL_ARG(tpt_dataflow_next(src, NULL), "tpt_dataflow_next", "dp");
  EXPECT_NULL_ARG(tpt_dataflow_size(NULL, src), "tpt_dataflow_size", "out");
  EXPECT_NULL_ARG(tpt_dataflow_size(&n, NULL), "tpt_dataflow_size", "df");
  EXPECT_NULL_ARG(tpt_dataflow_set_seed(NULL, 1), "tpt_dataflow_set_seed", "df");
  EXPECT_NULL_ARG(tpt_dataflow_get_state(NULL, src), "tpt_dataflow_get_state", "out");
  EXPECT_NULL_ARG(tpt_dataflow_get_state(&t, NULL), "tpt_dataflow_get_state", "df");
  EXPECT_NULL_ARG(tpt_dataflow_set_state(NULL, val), "tpt_dataflow_set_state", "df");
  EXPECT_NULL_ARG(tpt_dataflow_set_state(src, NULL), "tpt_dataflow_set_state", "state");

  tpt_input *in = NULL, *inner = NULL;
  EXPECT_NULL_ARG(tpt_input_from_dataflow(NULL, src, NULL), "tpt_input_from_dataflow", "out");
  EXPECT_NULL_ARG(tpt_input_from_dataflow(&in, NULL, NULL), "tpt_input_from_dataflow", "df");
  int destroyed = 0;
  ok(tpt_input_from_feed(&inner, feed_stop, &destroyed, count_destroy));
  EXPECT_NULL_ARG(tpt_input_staging(NULL, inner, NULL), "tpt_input_staging", "out");
  assert_int_equal(destroyed, 1); /* taken, also on failure */
  EXPECT_NULL_ARG(tpt_input_staging(&in, NULL, NULL), "tpt_input_staging", "input");
  EXPECT_NULL_ARG(tpt_input_dummy(NULL, 4), "tpt_input_dummy", "out");
  const int64_t sx[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 1, null_tower, NULL, NULL));
  tpt_callback *cbk = NULL;
  const char *outs[] = {"cost"}, *no_outs[] = {NULL}, *empty_outs[] = {""};
  EXPECT_NULL_ARG(tpt_inference_runner_new(NULL, m, src, outs, 1), "tpt_inference_runner_new", "out");
  EXPECT_NULL_ARG(tpt_inference_runner_new(&cbk, NULL, src, outs, 1), "tpt_inference_runner_new", "model");
  EXPECT_NULL_ARG(tpt_inference_runner_new(&cbk, m, NULL, outs, 1), "tpt_inference_runner_new", "df");
  EXPECT_NULL_ARG(tpt_inference_runner_new(&cbk, m, src, NULL, 1), "tpt_inference_runner_new", "outputs");
  EXPECT_NULL_ARG(tpt_inference_runner_new(&cbk, m, src, no_outs, 1), "tpt_inference_runner_new", "outputs[0]");
  expect_code(tpt_inference_runner_new(&cbk, m, src, empty_outs, 1), TPT_ERR_INVALID_ARGUMENT, "argument 'outputs[0]' is empty");
  expect_code(tpt_inference_runner_new(&cbk, m, src, outs, 0), TPT_ERR_INVALID_ARGUMENT, "n_outputs is 0");
  assert_null(cbk);
  assert_null(in);
  assert_null(df);
  assert_null(t);

  /* foreign handles */
  tpt_dataflow *foreign_df = (tpt_dataflow *)(void *)val;
  tpt_datapoint *foreign_dp = (tpt_datapoint *)(void *)val;
  expect_code(tpt_dataflow_next(foreign_df, dp), TPT_ERR_INVALID_ARGUMENT, "argument 'df' is not a live tpt_dataflow");
  expect_code(tpt_dataflow_next(src, foreign_dp), TPT_ERR_INVALID_ARGUMENT, "argument 'dp' is not a live tpt_datapoint");
  expect_code(tpt_dataflow_batch(&df, (tpt_dataflow *)(void *)dp, 2, 0),
              TPT_ERR_INVALID_ARGUMENT, "argument 'df' is not a live tpt_dataflow");
  tpt_dataflow *foreign_list[] = {src, foreign_df};
  expect_code(tpt_dataflow_concat(&df, foreign_list, 2),
              TPT_ERR_INVALID_ARGUMENT, "argument 'dfs[1]' is not a live tpt_dataflow");
  expect_code(tpt_datapoint_get(&t, (tpt_datapoint *)(void *)src, 0),
              TPT_ERR_INVALID_ARGUMENT, "argument 'dp' is not a live tpt_datapoint");
  expect_code(tpt_datapoint_set(dp, 0, (tpt_tensor *)(void *)src),
              TPT_ERR_INVALID_ARGUMENT, "argument 'value' is not a live tpt_tensor");
  expect_code(tpt_dataflow_set_state(src, (tpt_tensor *)(void *)dp),
              TPT_ERR_INVALID_ARGUMENT, "argument 'state' is not a live tpt_tensor");
  expect_code(tpt_input_staging(&in, (tpt_input *)(void *)src, NULL),
              TPT_ERR_INVALID_ARGUMENT, "argument 'input' is not a live tpt_input");
  expect_code(tpt_inference_runner_new(&cbk, (tpt_model *)(void *)src, src, outs, 1),
              TPT_ERR_INVALID_ARGUMENT, "argument 'model' is not a live tpt_model");
  assert_int_equal(tpt_datapoint_size(foreign_dp), 0);
  /* nothing above claimed src */
  int64_t v[4];
  size_t got = read_pass(src, v, 4);
  expect_range(v, got, 4, 0);
  tpt_dataflow_free(NULL);
  tpt_datapoint_free(NULL);
  tpt_input_free(NULL);
  tpt_model_free(m);
  tpt_dataflow_free(other);
  tpt_dataflow_free(src);
  tpt_tensor_free(val);
  tpt_datapoint_free(dp);
}

/* ================================================================== 13. training */

static tpt_status *op1(tpt_tensor **out, const char *op, const tpt_arg *args, size_t nargs) {
  size_t n = 0;
  return tpt_op_call(out, 1, &n, op, NULL, args, nargs);
}

typedef struct {
  int64_t rows;   /* of the last training batch */
  double abs_sum; /* sum of |x| and |y| over it */
  int steps, destroyed;
} lin_state;

static tpt_status *abs_sum(double *out, const tpt_tensor *t) {
  tpt_tensor *a = NULL, *s = NULL;
  tpt_arg x[] = {T(t)};
  tpt_status *st = op1(&a, "aten::abs", x, 1);
  if (!st) {
    tpt_arg y[] = {T(a)};
    st = op1(&s, "aten::sum", y, 1);
  }
  if (!st) st = tpt_tensor_item(out, s);
  tpt_tensor_free(a);
  tpt_tensor_free(s);
  return st;
}

/* Linear regression: prediction = fc(x), cost = mse, output "sq_err" per row. */
static tpt_status *lin_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n_in, void *ud) {
  lin_state *s = ud;
  if (n_in != 2) return tpt_status_new(TPT_ERR_INTERNAL, "two inputs expected");
  int32_t training = 0, building = 0;
  tpt_status *st = tpt_tower_is_training(&training, tw);
  if (!st) st = tpt_tower_is_building(&building, tw);
  if (!st && training && !building) {
    int64_t dims[2] = {0, 0};
    double ax = 0, ay = 0;
    st = tpt_tensor_shape(dims, 2, in[0]);
    if (!st) st = abs_sum(&ax, in[0]);
    if (!st) st = abs_sum(&ay, in[1]);
    if (!st) {
      s->rows = dims[0];
      s->abs_sum = ax + ay;
      s->steps++;
    }
  }
  tpt_tensor *p = NULL, *cost = NULL, *diff = NULL, *sq = NULL;
  if (!st) st = tpt_layer_fc(&p, tw, "fc", in[0], 1, NULL);
  if (!st) st = tpt_loss_mse(&cost, p, in[1]);
  if (!st) st = tpt_tower_set_cost(tw, cost);
  if (!st) {
    tpt_arg a[] = {T(p), T(in[1])};
    st = op1(&diff, "aten::sub", a, 2);
  }
  if (!st) {
    tpt_arg a[] = {T(diff), T(diff)};
    st = op1(&sq, "aten::mul", a, 2);
  }
  if (!st) st = tpt_tower_set_output(tw, "sq_err", sq);
  tpt_tensor_free(p);
  tpt_tensor_free(cost);
  tpt_tensor_free(diff);
  tpt_tensor_free(sq);
  return st;
}

static void lin_destroy(void *ud) { ((lin_state *)ud)->destroyed++; }

static tpt_model *lin_model(lin_state *s) {
  memset(s, 0, sizeof *s);
  const int64_t sx[] = {-1, 3}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 2, lin_tower, s, lin_destroy));
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, "sgd"));
  ok(tpt_optimizer_set(opt, "learning_rate", 0.1));
  ok(tpt_model_set_optimizer(m, opt));
  tpt_optimizer_free(opt);
  return m;
}

enum { ROWS = 64, VROWS = 20 };

/* rows of y = x . (1, -2, 3) + 1, x uniform in [-1, 1) (an LCG from seed) */
static void linear_tensors(tpt_tensor **x, tpt_tensor **y, int rows, uint32_t seed) {
  float xv[ROWS * 3], yv[ROWS];
  uint32_t r = seed;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < 3; ++j) {
      r = r * 1664525u + 1013904223u;
      xv[i * 3 + j] = (float)(r >> 8) / 8388608.0f - 1.0f;
    }
    yv[i] = xv[i * 3] - 2 * xv[i * 3 + 1] + 3 * xv[i * 3 + 2] + 1;
  }
  const int64_t sx[] = {rows, 3}, sy[] = {rows, 1};
  *x = make_tensor(TPT_DTYPE_F32, xv, sx, 2);
  *y = make_tensor(TPT_DTYPE_F32, yv, sy, 2);
}

static tpt_dataflow *linear_rows(int rows, uint32_t seed, int32_t shuffle) {
  tpt_tensor *x = NULL, *y = NULL;
  linear_tensors(&x, &y, rows, seed);
  const tpt_tensor *ts[] = {x, y};
  tpt_dataflow *df = NULL;
  ok(tpt_dataflow_from_tensors(&df, ts, 2, shuffle));
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return df;
}

static tpt_dataflow *batched(tpt_dataflow *rows, int64_t batch, int32_t remainder) {
  tpt_dataflow *b = NULL;
  ok(tpt_dataflow_batch(&b, rows, batch, remainder));
  tpt_dataflow_free(rows);
  return b;
}

/* The model's cost on the whole set, by tpt_model_infer. */
static double full_cost(tpt_model *m, int rows, uint32_t seed) {
  tpt_tensor *x = NULL, *y = NULL, *out = NULL;
  linear_tensors(&x, &y, rows, seed);
  const tpt_tensor *ins[] = {x, y};
  const char *names[] = {"cost"};
  ok(tpt_model_infer(&out, m, ins, 2, names, 1));
  double c = 0;
  ok(tpt_tensor_item(&c, out));
  tpt_tensor_free(out);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return c;
}

static tpt_trainer_options quiet(int64_t epochs, int64_t steps) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = epochs;
  o.steps_per_epoch = steps;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  return o;
}

static int64_t global_step(const tpt_trainer *t) {
  int64_t g = -1;
  ok(tpt_trainer_global_step(&g, t));
  return g;
}

static void expect_reason(const tpt_trainer *t, const char *fragment) {
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  if (!reason || !strstr(reason, fragment)) fail_msg("stop reason \"%s\" lacks \"%s\"", reason ? reason : "(none)", fragment);
}

static void test_train_queue_and_feed(void **state) {
  (void)state;
  /* TrainConfig.dataflow: a queue input */
  lin_state s;
  tpt_model *m = lin_model(&s);
  const double before = full_cost(m, ROWS, 1);
  tpt_trainer_options o = quiet(10, -1); /* steps_per_epoch: the dataflow's size, 4 */
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = m;
  cfg.dataflow = batched(linear_rows(ROWS, 1, 1), 16, 0);
  tpt_trainer *t = NULL;
  ok(tpt_trainer_from_config(&t, &cfg));
  tpt_dataflow_free(cfg.dataflow); /* the trainer keeps a reference */
  ok(tpt_trainer_run(t));
  assert_int_equal(global_step(t), 40);
  double q = -1;
  int64_t qs = -1;
  ok(tpt_trainer_scalar_latest(&q, &qs, t, "QueueInput/queue_size"));
  assert_true(q >= 0 && q <= 50);
  assert_int_equal(qs, 40);
  size_t count = 0;
  ok(tpt_trainer_scalar_history(&count, NULL, NULL, 0, t, "QueueInput/queue_size"));
  assert_int_equal(count, 10); /* a moving average (decay 0.5), put after each epoch's last step */
  tpt_trainer_free(t);
  const double after = full_cost(m, ROWS, 1);
  if (!(after < before / 4)) fail_msg("the cost went from %g to %g", before, after);
  assert_int_equal(s.rows, 16);
  assert_int_equal(s.steps, 40);
  tpt_model_free(m);
  assert_int_equal(s.destroyed, 1);

  /* TPT_INPUT_FEED: the training thread reads the dataflow */
  m = lin_model(&s);
  const double before2 = full_cost(m, ROWS, 1);
  tpt_dataflow *df = batched(linear_rows(ROWS, 1, 1), 16, 0);
  tpt_input_options io = TPT_INPUT_OPTIONS_INIT;
  io.kind = TPT_INPUT_FEED;
  tpt_input *in = NULL;
  ok(tpt_input_from_dataflow(&in, df, &io));
  tpt_dataflow_free(df);
  o = quiet(10, -1);
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_set_model(t, m, in));
  ok(tpt_trainer_run(t));
  assert_int_equal(global_step(t), 40);
  expect_code(tpt_trainer_scalar_latest(&q, NULL, t, "QueueInput/queue_size"), TPT_ERR_NOT_FOUND, NULL);
  tpt_trainer_free(t);
  const double after2 = full_cost(m, ROWS, 1);
  if (!(after2 < before2 / 4)) fail_msg("the cost went from %g to %g", before2, after2);
  tpt_model_free(m);
}

/* A config fed by a source made from a function: with a size, the trainer
 * takes steps_per_epoch from it; without one (and without the option), the
 * config is refused when it is built, naming the option. */
typedef struct {
  tpt_tensor *x, *y;
  int pos, passes;
} batch_src;

static tpt_status *batch_next(tpt_datapoint *dp, void *ud) {
  batch_src *b = ud;
  if (b->pos == 4) { /* the end of a pass: the next call starts another */
    b->pos = 0;
    b->passes++;
    return tpt_status_new(TPT_STOP, "end of pass");
  }
  b->pos++;
  tpt_status *st = tpt_datapoint_set(dp, 0, b->x);
  return st ? st : tpt_datapoint_set(dp, 1, b->y);
}

static int64_t batch_size4(void *ud) {
  (void)ud;
  return 4;
}

static void test_config_steps_from_a_sized_source(void **state) {
  (void)state;
  batch_src b = {NULL, NULL, 0, 0};
  linear_tensors(&b.x, &b.y, 16, 3);
  for (int sized = 0; sized < 2; ++sized) {
    lin_state s;
    tpt_model *m = lin_model(&s);
    tpt_dataflow_callbacks cb = TPT_DATAFLOW_CALLBACKS_INIT;
    cb.next = batch_next;
    if (sized) cb.size = batch_size4;
    tpt_dataflow *df = NULL;
    ok(tpt_dataflow_from_callbacks(&df, &cb, &b, NULL));
    tpt_trainer_options o = quiet(3, -1);
    tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
    cfg.options = &o;
    cfg.model = m;
    cfg.dataflow = df;
    tpt_trainer *t = NULL;
    if (!sized) {
      expect_code2(tpt_trainer_from_config(&t, &cfg), TPT_ERR_INVALID_ARGUMENT,
                   "tpt_trainer_from_config: options->steps_per_epoch is not set and the input does not know its size",
                   "give the source a size");
      assert_null(t);
    } else {
      ok(tpt_trainer_from_config(&t, &cfg));
      ok(tpt_trainer_run(t));
      assert_int_equal(global_step(t), 12); /* 3 epochs of the source's 4 */
      tpt_trainer_free(t);
    }
    tpt_dataflow_free(df);
    tpt_model_free(m);
  }
  tpt_tensor_free(b.x);
  tpt_tensor_free(b.y);
}

static void test_train_end_of_data(void **state) {
  (void)state;
  const tpt_input_kind kinds[] = {TPT_INPUT_QUEUE, TPT_INPUT_FEED};
  for (int k = 0; k < 2; ++k) {
    /* repeat = 0: the end of the pass ends training gracefully */
    lin_state s;
    tpt_model *m = lin_model(&s);
    tpt_dataflow *df = batched(linear_rows(ROWS, 1, 1), 16, 0);
    tpt_input_options io = TPT_INPUT_OPTIONS_INIT;
    io.kind = kinds[k];
    io.repeat = 0;
    io.capacity = 2;
    tpt_input *in = NULL;
    ok(tpt_input_from_dataflow(&in, df, &io));
    tpt_dataflow_free(df);
    tpt_trainer_options o = quiet(3, 10);
    tpt_trainer *t = NULL;
    ok(tpt_trainer_new(&t, &o));
    ok(tpt_trainer_set_model(t, m, in));
    ok(tpt_trainer_run(t));
    assert_int_equal(global_step(t), 4); /* the batches of one pass */
    expect_reason(t, "end of data: the dataflow's pass ended");
    tpt_trainer_free(t);

    /* a pass without a batch ends it at once */
    src_state e;
    src_init(&e, 0);
    df = batched(src_df(&e), 2, 1);
    io.repeat = 1;
    ok(tpt_input_from_dataflow(&in, df, &io));
    tpt_dataflow_free(df);
    ok(tpt_trainer_new(&t, &o));
    ok(tpt_trainer_set_model(t, m, in));
    ok(tpt_trainer_run(t));
    assert_int_equal(global_step(t), 0);
    expect_reason(t, "yielded no batch");
    tpt_trainer_free(t);
    assert_int_equal(e.destroyed, 1);
    tpt_model_free(m);
  }
}

typedef struct {
  int calls, destroyed;
  int fail_at;
} fail_state;

static tpt_status *fail_at_call(tpt_datapoint *dp, void *ud) {
  (void)dp;
  fail_state *f = ud;
  if (++f->calls == f->fail_at) return tpt_status_new(TPT_ERR_IO, "sensor unplugged");
  return NULL;
}

static void fail_destroy(void *ud) { ((fail_state *)ud)->destroyed++; }

static void test_train_errors(void **state) {
  (void)state;
  const tpt_input_kind kinds[] = {TPT_INPUT_QUEUE, TPT_INPUT_FEED};
  for (int k = 0; k < 2; ++k) {
    /* a failing map callback ends training with its message */
    lin_state s;
    tpt_model *m = lin_model(&s);
    fail_state f = {0, 0, 20};
    tpt_dataflow *rows = linear_rows(ROWS, 1, 1), *mapped = NULL;
    ok(tpt_dataflow_map(&mapped, rows, fail_at_call, &f, fail_destroy));
    tpt_dataflow_free(rows);
    tpt_dataflow *df = batched(mapped, 4, 0);
    tpt_input_options io = TPT_INPUT_OPTIONS_INIT;
    io.kind = kinds[k];
    tpt_input *in = NULL;
    ok(tpt_input_from_dataflow(&in, df, &io));
    tpt_dataflow_free(df);
    tpt_trainer_options o = quiet(5, -1);
    tpt_trainer *t = NULL;
    ok(tpt_trainer_new(&t, &o));
    ok(tpt_trainer_set_model(t, m, in));
    expect_code(tpt_trainer_run(t), TPT_ERR_IO, "sensor unplugged");
    const int64_t g = global_step(t);
    assert_true(g <= 4); /* 19 datapoints make 4 batches at most */
    if (kinds[k] == TPT_INPUT_FEED) assert_int_equal(g, 4);
    tpt_trainer_free(t);
    assert_int_equal(f.destroyed, 1);
    assert_int_equal(f.calls, 20);
    tpt_model_free(m);
  }

  /* a config with both an input and a dataflow, or neither */
  lin_state s;
  tpt_model *m = lin_model(&s);
  tpt_dataflow *df = batched(linear_rows(ROWS, 1, 0), 16, 0);
  tpt_trainer_options o = quiet(1, -1);
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = m;
  cfg.dataflow = df;
  ok(tpt_input_dummy(&cfg.input, 4));
  tpt_trainer *t = NULL;
  expect_code(tpt_trainer_from_config(&t, &cfg), TPT_ERR_INVALID_ARGUMENT, "config->input and config->dataflow are both set");
  assert_null(t);
  cfg.input = NULL; /* taken */
  cfg.dataflow = NULL;
  expect_code(tpt_trainer_from_config(&t, &cfg), TPT_ERR_INVALID_ARGUMENT, "config->input and config->dataflow are both NULL");
  expect_code(tpt_launch_train(&cfg), TPT_ERR_INVALID_ARGUMENT, "both NULL");
  cfg.version = 1; /* version 1 has no dataflow field */
  cfg.dataflow = df;
  expect_code(tpt_trainer_from_config(&t, &cfg), TPT_ERR_INVALID_ARGUMENT, "both NULL");
  /* a config that fails after the dataflow was wrapped leaves it free */
  cfg.version = TPT_TRAIN_CONFIG_VERSION;
  tpt_trainer_options bad = quiet(1, -1);
  bad.starting_epoch = 0;
  cfg.options = &bad;
  tpt_status *st = tpt_trainer_from_config(&t, &cfg);
  assert_non_null(st);
  tpt_status_free(st);
  assert_null(t);
  /* none of the failures claimed the dataflow */
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  assert_int_equal(next_dp(df, dp), 1);
  tpt_datapoint_free(dp);
  cfg.options = &o;
  ok(tpt_launch_train(&cfg));
  tpt_dataflow_free(df);
  tpt_model_free(m);
}

/* ---- threads: none is left behind */

static tpt_status *counting_fn(tpt_datapoint *dp, void *ud) {
  (void)dp;
  pm_state *s = ud;
  pthread_mutex_lock(&s->mu);
  const int call = ++s->calls;
  if (pthread_equal(pthread_self(), s->main_thread)) s->on_main++;
  tpt_trainer *t = s->stop_trainer;
  pthread_mutex_unlock(&s->mu);
  if (t && call == s->stop_after) tpt_status_free(tpt_trainer_request_stop(t));
  if (call == s->fail_at) return tpt_status_new(TPT_ERR_IO, "sensor unplugged");
  return NULL;
}

typedef enum { END_NORMALLY, FAIL_IN_MAP, STOP_FROM_CALLBACK, REQUEST_STOP } ending;

static tpt_status *stop_at_3(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)e;
  (void)r;
  (void)ud;
  int64_t g = 0;
  tpt_status *st = tpt_trainer_global_step(&g, t);
  if (st) return st;
  return g >= 3 ? tpt_status_new(TPT_STOP, "enough at step 3") : NULL;
}

/* Trains through a queue input of rows -> parallel map -> batch -> prefetch
 * and checks, after the run and after the trainer is freed, that the thread
 * count is `baseline` (when >= 0). */
static void threaded_training(ending how, int baseline) {
  lin_state ls;
  tpt_model *m = lin_model(&ls);
  pm_state s;
  pm_init(&s);
  s.fail_at = how == FAIL_IN_MAP ? 100 : -1;
  const int strict = how == END_NORMALLY || how == FAIL_IN_MAP;
  tpt_dataflow *rows = linear_rows(ROWS, 1, 1), *mapped = NULL, *b = NULL, *pf = NULL;
  tpt_parallel_map_options po = TPT_PARALLEL_MAP_OPTIONS_INIT;
  po.n_threads = 3;
  po.buffer_size = 16;
  po.ordered = 1;
  po.strict = strict;
  ok(tpt_dataflow_parallel_map(&mapped, rows, counting_fn, &s, pm_destroy, &po));
  ok(tpt_dataflow_batch(&b, mapped, 8, 0));
  ok(tpt_dataflow_prefetch(&pf, b, 3));
  tpt_dataflow_free(rows);
  tpt_dataflow_free(mapped);
  tpt_dataflow_free(b);
  tpt_trainer_options o = quiet(how == END_NORMALLY ? 3 : 1000, 8);
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = m;
  cfg.dataflow = pf;
  tpt_callback *cb = NULL;
  if (how == STOP_FROM_CALLBACK) {
    tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
    d.events = TPT_EVENT_TRIGGER_STEP;
    d.fn = stop_at_3;
    ok(tpt_callback_new(&cb, &d));
    cfg.callbacks = &cb;
    cfg.n_callbacks = 1;
  }
  tpt_trainer *t = NULL;
  ok(tpt_trainer_from_config(&t, &cfg));
  tpt_dataflow_free(pf);
  if (how == REQUEST_STOP) {
    s.stop_trainer = t; /* before the workers start (at SETUP) */
    s.stop_after = 50;
  }
  tpt_status *st = tpt_trainer_run(t);
  switch (how) {
    case END_NORMALLY:
      ok(st);
      assert_int_equal(global_step(t), 24);
      break;
    case FAIL_IN_MAP:
      expect_code(st, TPT_ERR_IO, "sensor unplugged");
      assert_true(global_step(t) <= 99 / 8); /* the batches before the failing datapoint, at most */
      break;
    case STOP_FROM_CALLBACK:
      ok(st);
      assert_int_equal(global_step(t), 3);
      expect_reason(t, "enough at step 3");
      break;
    case REQUEST_STOP:
      ok(st);
      expect_reason(t, "tpt_trainer_request_stop");
      assert_true(global_step(t) < 8000);
      break;
  }
  if (baseline >= 0) assert_int_equal(settled_thread_count(baseline), baseline); /* joined at AFTER_TRAIN */
  tpt_trainer_free(t);
  if (baseline >= 0) assert_int_equal(settled_thread_count(baseline), baseline);
  pthread_mutex_lock(&s.mu);
  assert_int_equal(s.destroyed, 1);
  assert_int_equal(s.on_main, 0);
  if (how == END_NORMALLY) assert_true(s.calls >= 3 * ROWS);
  pthread_mutex_unlock(&s.mu);
  pm_fini(&s);
  tpt_model_free(m);
}

static void test_train_threads(void **state) {
  (void)state;
  threaded_training(END_NORMALLY, -1); /* warm-up: LibTorch's own pools exist after it */
  const int baseline = steady_thread_count();
  assert_true(baseline >= 1);
  threaded_training(END_NORMALLY, baseline);
  threaded_training(FAIL_IN_MAP, baseline);
  threaded_training(STOP_FROM_CALLBACK, baseline);
  threaded_training(REQUEST_STOP, baseline);
}

static void test_train_dummy_and_staging(void **state) {
  (void)state;
  /* dummy: zeros of the signature's shapes, free dimensions = batch_size */
  lin_state s;
  tpt_model *m = lin_model(&s);
  tpt_input *in = NULL;
  ok(tpt_input_dummy(&in, 8));
  tpt_trainer_options o = quiet(1, 3);
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_set_model(t, m, in));
  ok(tpt_trainer_run(t));
  assert_int_equal(global_step(t), 3);
  assert_int_equal(s.steps, 3);
  assert_int_equal(s.rows, 8);
  assert_true(s.abs_sum == 0);
  tpt_trainer_free(t);
  expect_code(tpt_input_dummy(&in, 0), TPT_ERR_INVALID_ARGUMENT, "batch_size must be >= 1, got 0");
  assert_null(in);
  tpt_model_free(m);

  /* staging on the CPU: the device NULL (the tower's) or "cpu" */
  const char *devices[] = {NULL, "cpu"};
  for (int k = 0; k < 2; ++k) {
    m = lin_model(&s);
    const double before = full_cost(m, ROWS, 1);
    tpt_dataflow *df = batched(linear_rows(ROWS, 1, 1), 16, 0);
    tpt_input *inner = NULL;
    ok(tpt_input_from_dataflow(&inner, df, NULL));
    tpt_dataflow_free(df);
    ok(tpt_input_staging(&in, inner, devices[k]));
    o = quiet(10, -1);
    ok(tpt_trainer_new(&t, &o));
    ok(tpt_trainer_set_model(t, m, in));
    ok(tpt_trainer_run(t));
    assert_int_equal(global_step(t), 40); /* its size is the inner input's */
    double q = -1;
    ok(tpt_trainer_scalar_latest(&q, NULL, t, "QueueInput/queue_size"));
    tpt_trainer_free(t);
    assert_true(full_cost(m, ROWS, 1) < before / 4);
    tpt_model_free(m);
  }
  /* a device that is none: an error; the inner input is taken */
  int destroyed = 0;
  tpt_input *inner = NULL;
  ok(tpt_input_from_feed(&inner, feed_stop, &destroyed, count_destroy));
  expect_code(tpt_input_staging(&in, inner, "nonsense"), TPT_ERR_INVALID_ARGUMENT, "device \"nonsense\" is not a device");
  assert_null(in);
  assert_int_equal(destroyed, 1);
  /* a device this LibTorch has no backend for (XLA: never in a plain build) */
  ok(tpt_input_from_feed(&inner, feed_stop, &destroyed, count_destroy));
  expect_code(tpt_input_staging(&in, inner, "xla:0"), TPT_ERR_UNSUPPORTED, "cannot use device \"xla:0\"");
  assert_null(in);
  assert_int_equal(destroyed, 2);
  tpt_dataflow *df = range_df(3, 0, 0);
  ok(tpt_input_from_dataflow(&inner, df, NULL));
  expect_code(tpt_input_staging(&in, inner, "nonsense"), TPT_ERR_INVALID_ARGUMENT, "nonsense");
  int64_t v[3];
  size_t n = read_pass(df, v, 3); /* the freed queue input let it go */
  expect_range(v, n, 3, 0);
  tpt_dataflow_free(df);
}

/* ================================================================== 14. inference runner */

static void test_inference_runner(void **state) {
  (void)state;
  lin_state s;
  tpt_model *m = lin_model(&s);
  tpt_dataflow *val = batched(linear_rows(VROWS, 2, 0), 8, 1); /* batches of 8, 8 and 4 rows */
  const char *outs[] = {"cost", "sq_err"};
  tpt_callback *cb = NULL;
  ok(tpt_inference_runner_new(&cb, m, val, outs, 2));
  tpt_datapoint *dp = NULL;
  ok(tpt_datapoint_new(&dp));
  expect_code(tpt_dataflow_next(val, dp), TPT_ERR_INVALID_ARGUMENT, "is read by another dataflow or an input");
  tpt_trainer_options o = quiet(2, -1);
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = m;
  cfg.dataflow = batched(linear_rows(ROWS, 1, 1), 16, 0);
  cfg.callbacks = &cb;
  cfg.n_callbacks = 1;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_from_config(&t, &cfg));
  tpt_dataflow_free(cfg.dataflow);
  ok(tpt_trainer_run(t));
  assert_int_equal(global_step(t), 8);
  size_t count = 0;
  int64_t steps[4];
  double values[4];
  ok(tpt_trainer_scalar_history(&count, steps, values, 4, t, "validation_cost"));
  assert_int_equal(count, 2); /* the end of each epoch */
  assert_int_equal(steps[0], 4);
  assert_int_equal(steps[1], 8);
  double vc = 0, vs = 0;
  ok(tpt_trainer_scalar_latest(&vc, NULL, t, "validation_cost"));
  ok(tpt_trainer_scalar_latest(&vs, NULL, t, "validation_sq_err"));

  /* the same, computed here over the whole held-out set */
  tpt_tensor *x = NULL, *y = NULL, *res[2] = {NULL, NULL};
  linear_tensors(&x, &y, VROWS, 2);
  const tpt_tensor *ins[] = {x, y};
  ok(tpt_model_infer(res, m, ins, 2, outs, 2));
  double cost = 0;
  ok(tpt_tensor_item(&cost, res[0]));
  float sq[VROWS];
  ok(tpt_tensor_copy_to(sq, sizeof sq, res[1]));
  double mean = 0;
  for (int i = 0; i < VROWS; ++i) mean += sq[i];
  mean /= VROWS;
  if (fabs(vc - cost) > 1e-6) fail_msg("validation_cost %.9g, the whole set's cost %.9g", vc, cost);
  if (fabs(vs - mean) > 1e-6) fail_msg("validation_sq_err %.9g, the mean over the set %.9g", vs, mean);
  assert_true(values[0] != values[1]); /* the model changed between the epochs */
  tpt_tensor_free(res[0]);
  tpt_tensor_free(res[1]);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_trainer_free(t);
  /* the runner is gone: the held-out set is free again */
  int64_t rows[3];
  for (int k = 0; k < 3; ++k) {
    assert_int_equal(next_dp(val, dp), 1);
    int64_t dims[2];
    tpt_tensor *xb = NULL;
    ok(tpt_datapoint_get(&xb, dp, 0));
    ok(tpt_tensor_shape(dims, 2, xb));
    tpt_tensor_free(xb);
    rows[k] = dims[0];
  }
  assert_int_equal(next_dp(val, dp), 0);
  assert_true(rows[0] == 8 && rows[1] == 8 && rows[2] == 4);

  /* an output the model does not publish fails training */
  const char *missing[] = {"logits"};
  ok(tpt_inference_runner_new(&cb, m, val, missing, 1));
  cfg.dataflow = batched(linear_rows(ROWS, 1, 1), 16, 0);
  cfg.callbacks = &cb;
  ok(tpt_trainer_from_config(&t, &cfg));
  tpt_dataflow_free(cfg.dataflow);
  expect_code(tpt_trainer_run(t), TPT_ERR_NOT_FOUND, "logits");
  tpt_trainer_free(t);
  tpt_datapoint_free(dp);
  tpt_dataflow_free(val);
  tpt_model_free(m);
  assert_int_equal(s.destroyed, 1);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "test_train_*" */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_from_tensors_in_order),
      cmocka_unit_test(test_from_tensors_shuffle),
      cmocka_unit_test(test_batch),
      cmocka_unit_test(test_datapoint),
      cmocka_unit_test(test_map),
      cmocka_unit_test(test_map_seeds),
      cmocka_unit_test(test_parallel_map_strict),
      cmocka_unit_test(test_parallel_map_not_strict),
      cmocka_unit_test(test_prefetch),
      cmocka_unit_test(test_local_shuffle),
      cmocka_unit_test(test_cache),
      cmocka_unit_test(test_repeat_fixed_size),
      cmocka_unit_test(test_shard),
      cmocka_unit_test(test_concat_join_select),
      cmocka_unit_test(test_augment_values),
      cmocka_unit_test(test_augment_threads),
      cmocka_unit_test(test_idx),
      cmocka_unit_test(test_mnist),
      cmocka_unit_test(test_from_callbacks),
      cmocka_unit_test(test_from_files),
      cmocka_unit_test(test_fake),
      cmocka_unit_test(test_state),
      cmocka_unit_test(test_state_mid_pass),
      cmocka_unit_test(test_source_position),
      cmocka_unit_test(test_one_consumer),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_train_queue_and_feed),
      cmocka_unit_test(test_config_steps_from_a_sized_source),
      cmocka_unit_test(test_train_end_of_data),
      cmocka_unit_test(test_train_errors),
      cmocka_unit_test(test_train_threads),
      cmocka_unit_test(test_train_dummy_and_staging),
      cmocka_unit_test(test_inference_runner),
  };
  return cmocka_run_group_tests_name("dataflow", tests, NULL, NULL);
}
