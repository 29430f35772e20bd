/* The misuse suite: every case runs in a forked child under a time limit,
 * so a crash, an abort or a hang is one failed case, not a dead suite.
 *
 *   - the null cases, generated from include/tptrain.h (gen_null_calls.py):
 *     each pointer parameter of each exported function NULL in turn;
 *   - the class cases (misuse_classes.c): frees from inside callbacks,
 *     re-entrant calls, forged and fuzzed states, out-of-range numbers,
 *     pathological parser input, error-path promises.
 *
 * Output is TAP; the last line gives the counts. A case passes when its
 * child exits 0: no signal, no sanitizer report, no timeout, and the call
 * under test failed with a message where it had to. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "misuse_common.h"
#include "misuse_classes.h"

/* ---- helpers the cases use */

int expect_error(tpt_status *st) {
  if (st == NULL) return MISUSE_SUCCEEDED;
  tpt_code c = tpt_status_code(st);
  if (c == TPT_OK || c == TPT_STOP) return MISUSE_BAD_CODE;
  const char *m = tpt_status_message(st);
  if (m == NULL || m[0] == '\0') return MISUSE_NO_MESSAGE;
  return 0;
}

void *junk(void) {
  static _Alignas(64) unsigned char buf[1 << 16];
  return buf;
}

const char *const *strings(void) {
  static const char *s[] = {"x", "x", "x", "x"};
  return s;
}

const int64_t *dims(void) {
  static const int64_t d[] = {2, 2, 2, 2};
  return d;
}

const void *const *one_of(const void *h) {
  static const void *slots[4];
  slots[0] = slots[1] = slots[2] = slots[3] = h;
  return slots;
}

static void must(tpt_status *st, const char *what) {
  if (st) {
    fprintf(stderr, "misuse: making %s failed: %s\n", what, tpt_status_message(st));
    _exit(3);
  }
}

tpt_tensor *mk_tensor(void) {
  const float v[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[] = {2, 3};
  tpt_tensor *t = NULL;
  must(tpt_tensor_from_data(&t, v, sizeof v, shape, 2, NULL), "a tensor");
  return t;
}

tpt_datapoint *mk_datapoint(void) {
  tpt_datapoint *dp = NULL;
  must(tpt_datapoint_new(&dp), "a datapoint");
  must(tpt_datapoint_set(dp, 0, mk_tensor()), "a datapoint's component");
  return dp;
}

tpt_dataflow *mk_dataflow(void) {
  const tpt_tensor *t[] = {mk_tensor()};
  tpt_dataflow *df = NULL;
  must(tpt_dataflow_from_tensors(&df, t, 1, 0), "a dataflow");
  return df;
}

tpt_trainer *mk_trainer(void) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  tpt_trainer *t = NULL;
  must(tpt_trainer_new(&t, &o), "a trainer");
  return t;
}

static tpt_status *fc_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_tensor *y = NULL;
  tpt_status *st = tpt_layer_fc(&y, tw, "fc", in[0], 2, NULL);
  if (st) return st;
  return tpt_tower_set_output(tw, "y", y);
}

tpt_model *mk_model(void) {
  const int64_t shape[] = {-1, 3};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}};
  tpt_model *m = NULL;
  must(tpt_model_new(&m, spec, 1, fc_tower, NULL, NULL), "a model");
  must(tpt_model_build(m), "a model's variables");
  return m;
}

tpt_optimizer *mk_optimizer(void) {
  tpt_optimizer *o = NULL;
  must(tpt_optimizer_new(&o, "sgd"), "an optimizer");
  return o;
}

tpt_input *mk_input(void) {
  tpt_input *in = NULL;
  must(tpt_input_dummy(&in, 2), "an input");
  return in;
}

static tpt_status *nothing(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)t, (void)e, (void)r, (void)ud;
  return NULL;
}

tpt_callback *mk_callback(void) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER_STEP;
  d.fn = nothing;
  tpt_callback *cb = NULL;
  must(tpt_callback_new(&cb, &d), "a callback");
  return cb;
}

tpt_status *mk_status(void) { return tpt_status_new(TPT_ERR_INTERNAL, "made"); }

tpt_trainer_options mk_quiet_options(int64_t steps_per_epoch) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 3;
  o.steps_per_epoch = steps_per_epoch;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.default_callbacks = 0;
  o.default_monitors = 0;
  return o;
}

tpt_trainer *mk_quiet_trainer(int64_t steps_per_epoch) {
  tpt_trainer_options o = mk_quiet_options(steps_per_epoch);
  tpt_trainer *t = NULL;
  must(tpt_trainer_new(&t, &o), "a quiet trainer");
  return t;
}

tpt_model *mk_model_with(tpt_tower_fn fn) {
  const int64_t shape[] = {-1, 3};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}};
  tpt_model *m = NULL;
  must(tpt_model_new(&m, spec, 1, fn, NULL, NULL), "a model");
  tpt_optimizer *opt = mk_optimizer();
  must(tpt_model_set_optimizer(m, opt), "a model's optimizer");
  tpt_optimizer_free(opt);
  return m;
}

tpt_status *cost_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_tensor *y = NULL, *square = NULL, *mean = NULL;
  tpt_status *st = tpt_layer_fc(&y, tw, "fc", in[0], 1, NULL);
  if (!st) st = tpt_op_mul(&square, y, y);
  if (!st) {
    tpt_arg a[] = {{0}};
    a[0].kind = TPT_ARG_TENSOR;
    a[0].tensor = square;
    size_t n_out = 0;
    st = tpt_op_call(&mean, 1, &n_out, "aten::mean", NULL, a, 1);
  }
  if (!st) st = tpt_tower_set_cost(tw, mean);
  return st;
}

int is_error(tpt_status *st, tpt_code code, const char *fragment) {
  if (!st) {
    fprintf(stderr, "expected %s (\"%s\"), got success\n", tpt_code_name(code), fragment);
    return 0;
  }
  int ok = tpt_status_code(st) == code && strstr(tpt_status_message(st), fragment) != NULL;
  if (!ok)
    fprintf(stderr, "got %s \"%s\", want %s with \"%s\"\n", tpt_code_name(tpt_status_code(st)),
            tpt_status_message(st), tpt_code_name(code), fragment);
  tpt_status_free(st);
  return ok;
}

/* ---- the runner */

static const char *verdict(int status, int limit) {
  static char buf[96];
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM) snprintf(buf, sizeof buf, "hang (no answer in %d s)", limit);
    else snprintf(buf, sizeof buf, "crash (signal %d, %s)", sig, strsignal(sig));
    return buf;
  }
  switch (WEXITSTATUS(status)) {
    case 0: return NULL;
    case MISUSE_SUCCEEDED: return "returned success on misuse";
    case MISUSE_NO_MESSAGE: return "error without a message";
    case MISUSE_BAD_CODE: return "a status with code OK or STOP";
    case MISUSE_OUT_DANGLING: return "failed but left *out as it was (not NULL)";
    case 3: return "could not make the handles the case needs";
    default: snprintf(buf, sizeof buf, "exit status %d (a sanitizer report or a failed check: see stderr)", WEXITSTATUS(status)); return buf;
  }
}

static int run_case(const char *label, int (*fn)(void), int limit, int number) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    printf("not ok %d - %s # fork failed: %s\n", number, label, strerror(errno));
    return 0;
  }
  if (pid == 0) {
    alarm((unsigned)limit);
    int rc = fn();
    fflush(stdout);
    fflush(stderr);
    _exit(rc);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  const char *why = verdict(status, limit);
  if (why) printf("not ok %d - %s # %s\n", number, label, why);
  else printf("ok %d - %s\n", number, label);
  return why == NULL;
}

int main(int argc, char **argv) {
  /* misuse_tests [null|classes] [FILTER]: a group and a substring of labels */
  const char *group = argc > 1 ? argv[1] : "all";
  const char *filter = argc > 2 ? argv[2] : NULL;
  int want_null = !strcmp(group, "all") || !strcmp(group, "null");
  int want_classes = !strcmp(group, "all") || !strcmp(group, "classes");
  size_t total = 0;
  if (want_null)
    for (size_t i = 0; i < n_null_cases; ++i) total += !filter || strstr(null_cases[i].label, filter);
  const struct {
    const class_case *cases;
    size_t n;
  } tables[] = {{class_cases, n_class_cases}, {matrix_cases, n_matrix_cases}, {thread_cases, n_thread_cases}};
  if (want_classes)
    for (size_t k = 0; k < sizeof tables / sizeof tables[0]; ++k)
      for (size_t i = 0; i < tables[k].n; ++i) total += !filter || strstr(tables[k].cases[i].label, filter);
  printf("1..%zu\n", total);
  int n = 0, passed = 0, null_passed = 0, null_run = 0;
  if (want_null)
    for (size_t i = 0; i < n_null_cases; ++i) {
      if (filter && !strstr(null_cases[i].label, filter)) continue;
      int ok = run_case(null_cases[i].label, null_cases[i].run, 30, ++n);
      passed += ok, null_passed += ok, ++null_run;
    }
  if (want_classes)
    for (size_t k = 0; k < sizeof tables / sizeof tables[0]; ++k)
      for (size_t i = 0; i < tables[k].n; ++i) {
        const class_case *c = &tables[k].cases[i];
        if (filter && !strstr(c->label, filter)) continue;
        passed += run_case(c->label, c->run, c->limit, ++n);
      }
  printf("# misuse: %d of %d cases passed (null arguments: %d of %d; classes: %d of %d)\n", passed, n, null_passed,
         null_run, passed - null_passed, n - null_run);
  return passed == n ? 0 : 1;
}
