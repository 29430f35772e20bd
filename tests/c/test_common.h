/* What every cmocka suite of the C API uses: cmocka itself, tptrain.h, and
 * the checks of a returned status. Functions are static inline so that a
 * suite that does not use one gets no unused-function warning. */
#ifndef TPT_TEST_COMMON_H
#define TPT_TEST_COMMON_H

#include <dirent.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include <cmocka.h>

#include "tptrain.h"

/* The size of OpenBLAS's own thread pool (its pthread build, Debian's
 * libopenblas0-pthread, under LibTorch's BLAS), read from OpenBLAS itself;
 * 0 when the process has no such pool (no OpenBLAS, or an OpenMP one). */
static inline int test_blas_pool(void) {
  void *self = dlopen(NULL, RTLD_LAZY), *get = NULL, *parallel = NULL;
  if (self) {
    get = dlsym(self, "openblas_get_num_threads");
    parallel = dlsym(self, "openblas_get_parallel");
    dlclose(self);
  }
  if (!get || !parallel) return 0;
  int (*get_fn)(void), (*parallel_fn)(void);
  memcpy(&get_fn, &get, sizeof get_fn); /* ISO C has no cast from void * to a function pointer */
  memcpy(&parallel_fn, &parallel, sizeof parallel_fn);
  return parallel_fn() == 1 ? get_fn() : 0;
}

/* Sizes OpenBLAS's own pool behind tptrain's back (as another library in
 * the process might); nothing where test_blas_pool() is 0. */
static inline void test_set_blas_pool(int n) {
  void *self = dlopen(NULL, RTLD_LAZY), *set = NULL;
  if (self) {
    set = dlsym(self, "openblas_set_num_threads");
    dlclose(self);
  }
  if (!set || test_blas_pool() == 0) return;
  void (*set_fn)(int);
  memcpy(&set_fn, &set, sizeof set_fn);
  set_fn(n);
}

/* Fails the test unless `st` is NULL (success). */
static inline void ok(tpt_status *st) {
  if (st) fail_msg("unexpected error %s: %s", tpt_code_name(tpt_status_code(st)), tpt_status_message(st));
}

/* Asserts that `st` failed with `code` and that its message contains
 * `fragment` (unless NULL); frees it. */
static inline void expect_code(tpt_status *st, tpt_code code, const char *fragment) {
  if (!st) fail_msg("expected %s (\"%s\"), got success", tpt_code_name(code), fragment ? fragment : "");
  if (tpt_status_code(st) != code)
    fail_msg("code %s, want %s: %s", tpt_code_name(tpt_status_code(st)), tpt_code_name(code), tpt_status_message(st));
  if (fragment && !strstr(tpt_status_message(st), fragment))
    fail_msg("message \"%s\" lacks \"%s\"", tpt_status_message(st), fragment);
  tpt_status_free(st);
}

/* Like expect_code, with two fragments. */
static inline void expect_code2(tpt_status *st, tpt_code code, const char *a, const char *b) {
  if (st && b && !strstr(tpt_status_message(st), b))
    fail_msg("message \"%s\" lacks \"%s\"", tpt_status_message(st), b);
  expect_code(st, code, a);
}

/* A NULL argument's error: "fn: argument 'arg' is NULL". */
#define EXPECT_NULL_ARG(call, fn, arg) expect_code((call), TPT_ERR_INVALID_ARGUMENT, fn ": argument '" arg "' is NULL")

/* The text of file `path` (a log), NUL-terminated, into buf (at most
 * size - 1 bytes of it). */
static inline void read_text(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("cannot open %s", path);
  const size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  buf[n] = '\0';
}

/* ---- threads: the tests that no thread is left behind.
 * The kernel lists a thread in /proc/self/task a moment after pthread_join
 * returned for it, so a count is only compared once it has settled. */

/* The number of threads of this process now (-1 where /proc is missing). */
static inline int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static inline void sleep_10ms(void) {
  const struct timespec ts = {0, 10 * 1000 * 1000};
  thrd_sleep(&ts, NULL);
}

/* A baseline: the count once it has read the same 5 times 10 ms apart
 * (threads that a finished run joined have gone from the list), or what it
 * is after 2 s. */
static inline int steady_thread_count(void) {
  int n = thread_count(), same = 0;
  for (int i = 0; i < 200 && same < 5; ++i) {
    sleep_10ms();
    const int m = thread_count();
    same = m == n ? same + 1 : 0;
    n = m;
  }
  return n;
}

/* The count once it has come down to `want`, or what it is after 2 s. */
static inline int settled_thread_count(int want) {
  int n = thread_count();
  for (int i = 0; i < 200 && n > want; ++i) {
    sleep_10ms();
    n = thread_count();
  }
  return n;
}

/* A tensor argument of tpt_op_call. */
static inline tpt_arg T(const tpt_tensor *t) {
  tpt_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TPT_ARG_TENSOR;
  a.tensor = t;
  return a;
}

#endif
