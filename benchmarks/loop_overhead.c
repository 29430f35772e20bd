/* Benchmark loop-overhead (C part): nanoseconds per step of the trainer loop
 * itself: default callbacks (console off), a run_step that runs one hooked
 * step around an empty step. Baseline: a bare for-loop calling the same kind
 * of run_step through a function pointer (which calls the empty step through
 * a function pointer). Last line: "c: tptrain X ns/step, bare loop Y ns/step". */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tptrain.h"

static volatile long sink;

static tpt_status *empty_step(tpt_trainer *t, void *ud) {
  (void)t;
  sink += (long)(size_t)ud;
  return NULL;
}

static tpt_status *run_step(tpt_trainer *t, void *ud) { return tpt_trainer_hooked_step(t, empty_step, ud); }

typedef tpt_status *(*step_fn)(tpt_trainer *, void *);
static tpt_status *bare_run_step(tpt_trainer *t, void *ud) {
  step_fn volatile f = empty_step; /* an indirect call, as in the trainer */
  return f(t, ud);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check(tpt_status *st) {
  if (st) {
    fprintf(stderr, "%s\n", tpt_status_message(st));
    exit(1);
  }
}

int main(int argc, char **argv) {
  long steps = argc > 1 ? atol(argv[1]) : 200000;
  const int epochs = 5, repeats = 5;
  double best_tpt = 1e30, best_bare = 1e30;
  for (int r = 0; r < repeats; ++r) {
    tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
    o.steps_per_epoch = steps;
    o.max_epoch = epochs;
    o.console = 0;
    tpt_trainer *t = NULL;
    check(tpt_trainer_new(&t, &o));
    check(tpt_trainer_set_run_step(t, run_step, (void *)1, NULL));
    double t0 = now_s();
    check(tpt_trainer_run(t));
    double dt = (now_s() - t0) / (double)(steps * epochs) * 1e9;
    tpt_trainer_free(t);
    if (dt < best_tpt) best_tpt = dt;

    step_fn volatile f = bare_run_step;
    t0 = now_s();
    for (long i = 0; i < steps * epochs; ++i) check(f(NULL, (void *)1));
    dt = (now_s() - t0) / (double)(steps * epochs) * 1e9;
    if (dt < best_bare) best_bare = dt;
  }
  printf("c: tptrain %.1f ns/step, bare loop %.1f ns/step\n", best_tpt, best_bare);
  return 0;
}
