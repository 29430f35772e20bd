/* The misuse suite's thread-start failures (issue 12): when the system
 * refuses a thread (EAGAIN: a process or user thread limit), the dataflow or
 * input that needed it returns an error naming the thread, stops the
 * threads it did start, and works once threads can be started again.
 *
 * This executable defines pthread_create (exported to the shared objects it
 * loads, see tests/meson.build), so std::thread in libstdc++ calls this one.
 * It forwards to the next definition (libc's, or the sanitizer's
 * interceptor) unless a case has armed it, and then refuses only threads that
 * std::thread starts: LibTorch's OpenMP pool keeps its own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "misuse_classes.h"
#include "misuse_common.h"

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* -1: never refuse; k >= 0: let k more std::threads start, then refuse. */
static int g_allow = -1;
static int g_refused;

static int from_libstdcxx(void *caller) {
  Dl_info info;
  return dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "libstdc++") != NULL;
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
  static pthread_create_fn next;
  if (!next) next = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
  if (g_allow >= 0 && from_libstdcxx(__builtin_return_address(0))) {
    if (g_allow == 0) {
      ++g_refused;
      return EAGAIN;
    }
    --g_allow;
  }
  return next(thread, attr, start, arg);
}

static tpt_dataflow *rows_of(int64_t n) {
  float v[64];
  for (int i = 0; i < 64; ++i) v[i] = (float)i;
  const int64_t shape[] = {n, 1};
  tpt_tensor *t = NULL;
  tpt_dataflow *df = NULL;
  if (tpt_tensor_from_data(&t, v, (size_t)n * sizeof v[0], shape, 2, NULL)) return NULL;
  const tpt_tensor *ts[] = {t};
  if (tpt_dataflow_from_tensors(&df, ts, 1, 0)) return NULL;
  tpt_tensor_free(t);
  return df;
}

/* The sum of one pass's values (one float each); -1 on an error. */
static int pass_sum(tpt_dataflow *df, double *sum) {
  tpt_datapoint *dp = mk_datapoint();
  *sum = 0;
  for (;;) {
    tpt_status *st = tpt_dataflow_next(df, dp);
    if (st && tpt_status_code(st) == TPT_STOP) {
      tpt_status_free(st);
      break;
    }
    if (st) {
      fprintf(stderr, "next: %s\n", tpt_status_message(st));
      tpt_status_free(st);
      return -1;
    }
    tpt_tensor *x = NULL;
    float v = 0;
    if (tpt_datapoint_get(&x, dp, 0) || tpt_tensor_copy_to(&v, sizeof v, x)) return -1;
    tpt_tensor_free(x);
    *sum += v;
  }
  tpt_datapoint_free(dp);
  return 0;
}

static int prefetch_thread_refused(void) {
  tpt_dataflow *src = rows_of(10), *df = NULL;
  CHECK(src && tpt_dataflow_prefetch(&df, src, 4) == NULL);
  g_allow = 0;
  CHECK(is_error(tpt_dataflow_reset_state(df), TPT_ERR_INTERNAL, "cannot start the prefetch thread"));
  CHECK(g_refused == 1);
  g_allow = -1; /* threads again: the same dataflow works */
  CHECK(tpt_dataflow_reset_state(df) == NULL);
  double sum = 0;
  CHECK(pass_sum(df, &sum) == 0 && sum == 45);
  tpt_dataflow_free(df);
  tpt_dataflow_free(src);
  return 0;
}

static tpt_status *identity(tpt_datapoint *dp, void *ud) {
  (void)dp, (void)ud;
  return NULL;
}

static int parallel_map_worker_refused(void) {
  tpt_dataflow *src = rows_of(10), *df = NULL;
  tpt_parallel_map_options o = TPT_PARALLEL_MAP_OPTIONS_INIT;
  o.n_threads = 3;
  o.ordered = 1;
  o.strict = 1;
  CHECK(src && tpt_dataflow_parallel_map(&df, src, identity, NULL, NULL, &o) == NULL);
  g_allow = 1; /* the first worker starts, the second is refused */
  CHECK(is_error(tpt_dataflow_reset_state(df), TPT_ERR_INTERNAL,
                 "cannot start the parallel map's worker thread 2 of 3"));
  g_allow = -1;
  CHECK(tpt_dataflow_reset_state(df) == NULL);
  double sum = 0;
  CHECK(pass_sum(df, &sum) == 0 && sum == 45);
  tpt_dataflow_free(df);
  tpt_dataflow_free(src);
  return 0;
}

static int queue_input_thread_refused(void) {
  tpt_trainer_options o = mk_quiet_options(2);
  o.max_epoch = 1;
  tpt_dataflow *src = NULL;
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = mk_model_with(cost_tower);
  const tpt_tensor *ts[] = {mk_tensor()}; /* batches of [2, 3]: the tensor's rows, batched */
  tpt_dataflow *rows = NULL;
  CHECK(tpt_dataflow_from_tensors(&rows, ts, 1, 0) == NULL);
  CHECK(tpt_dataflow_batch(&src, rows, 2, 0) == NULL);
  c.dataflow = src;
  tpt_trainer *t = NULL;
  CHECK(tpt_trainer_from_config(&t, &c) == NULL);
  g_allow = 0;
  CHECK(is_error(tpt_trainer_run(t), TPT_ERR_INTERNAL, "cannot start the queue input's thread"));
  CHECK(g_refused >= 1);
  g_allow = -1;
  tpt_trainer_free(t); /* joins nothing that was not started */
  return 0;
}

const class_case thread_cases[] = {
    {"the prefetch thread cannot start: an error naming it, then the dataflow works", prefetch_thread_refused, 60},
    {"a parallel map's second worker cannot start: an error naming it, the first stopped", parallel_map_worker_refused,
     60},
    {"the queue input's thread cannot start: the run fails naming it", queue_input_thread_refused, 60},
};
const size_t n_thread_cases = sizeof thread_cases / sizeof thread_cases[0];
