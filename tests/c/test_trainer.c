/* The trainer loop from C: exact event sequences and counters, STOP and
 * ERROR from every point, destroy exactly once, request_stop from another
 * thread, scheduling wrappers, step outputs, scalars and monitors. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "test_common.h"

/* ------------------------------------------------------------ helpers */

/* One observed event. */
typedef struct {
  char who;
  tpt_event event;
  int64_t epoch, local, global;
} ev;

#define MAX_EV 4096
static ev seen[MAX_EV];
static int n_seen;

static void note(tpt_trainer *t, char who, tpt_event e) {
  assert_true(n_seen < MAX_EV);
  ev *x = &seen[n_seen++];
  x->who = who;
  x->event = e;
  ok(tpt_trainer_epoch_num(&x->epoch, t));
  ok(tpt_trainer_local_step(&x->local, t));
  ok(tpt_trainer_global_step(&x->global, t));
}

/* Per-callback behaviour: which event (if any) returns which status. */
typedef struct {
  char who;
  tpt_event fail_at; /* 0: never */
  tpt_code fail_code;
  int64_t fail_epoch, fail_local; /* -99: any */
  int destroyed;
  int after_train;
} cb_state;

static tpt_status *recording_cb(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  cb_state *s = ud;
  (void)r;
  if (e != TPT_EVENT_RECORD) note(t, s->who, e);
  if (e == TPT_EVENT_AFTER_TRAIN) s->after_train++;
  if (s->fail_at == e) {
    int64_t ep, ls;
    ok(tpt_trainer_epoch_num(&ep, t));
    ok(tpt_trainer_local_step(&ls, t));
    if ((s->fail_epoch == -99 || s->fail_epoch == ep) && (s->fail_local == -99 || s->fail_local == ls)) {
      char msg[64];
      snprintf(msg, sizeof msg, "%c fails at %d", s->who, (int)e);
      return tpt_status_new(s->fail_code, msg);
    }
  }
  return NULL;
}

static void count_destroy(void *ud) { ((cb_state *)ud)->destroyed++; }

static tpt_callback *make_cb(cb_state *s, uint32_t events, int chief_only) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = events;
  d.name = "recorder";
  d.chief_only = chief_only;
  d.fn = recording_cb;
  d.user_data = s;
  d.destroy = count_destroy;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  return cb;
}

/* run_step: calls the hooked step `hooks` times; can fail or stop at a point. */
typedef struct {
  int hooks;          /* per run_step; -1: local_step % 3 */
  int64_t stop_at_global; /* return TPT_STOP from run_step when global_step reaches it; -1 never */
  int64_t fail_at_global; /* return an error from the step fn at this global_step; -1 never */
  int destroyed;
  int steps;
} run_state;

static tpt_status *step_fn(tpt_trainer *t, void *ud) {
  run_state *s = ud;
  int64_t g;
  ok(tpt_trainer_global_step(&g, t));
  note(t, 'S', 0);
  if (g == s->fail_at_global) return tpt_status_new(TPT_ERR_INVALID_ARGUMENT, "step failed");
  return NULL;
}

static tpt_status *run_step(tpt_trainer *t, void *ud) {
  run_state *s = ud;
  int64_t ls, g;
  ok(tpt_trainer_local_step(&ls, t));
  note(t, 'R', 0);
  s->steps++;
  int n = s->hooks >= 0 ? s->hooks : (int)(ls % 3);
  for (int i = 0; i < n; ++i) {
    tpt_status *st = tpt_trainer_hooked_step(t, step_fn, s);
    if (st) return st;
  }
  ok(tpt_trainer_global_step(&g, t));
  if (s->stop_at_global >= 0 && g >= s->stop_at_global) return tpt_status_new(TPT_STOP, "run_step says stop");
  return NULL;
}

static void count_run_destroy(void *ud) { ((run_state *)ud)->destroyed++; }

static tpt_trainer *make_trainer(int64_t start, int64_t max, int64_t spe) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.starting_epoch = start;
  o.max_epoch = max;
  o.steps_per_epoch = spe;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.default_callbacks = 0;
  o.default_monitors = 0;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  return t;
}

/* The reference: tensorpack's loop written out by hand for one callback 'A'
 * subscribed to every lifecycle event, a TRIGGER-only callback 'B', run_step
 * 'R' and step 'S'. Returns the number of events. */
static int expected_sequence(ev *out, int64_t start, int64_t max, int64_t spe, int hooks) {
  int n = 0;
  int64_t g = 0, local = -1;
#define PUT(w, e, ep) (out[n++] = (ev){(w), (e), (ep), local, g})
  PUT('A', TPT_EVENT_SETUP, start - 1);
  PUT('A', TPT_EVENT_BEFORE_TRAIN, start - 1);
  for (int64_t epoch = start; epoch <= max; ++epoch) {
    PUT('A', TPT_EVENT_BEFORE_EPOCH, epoch);
    for (int64_t k = 0; k < spe; ++k) { /* like Python's for-in: local only set when a step runs */
      local = k;
      PUT('R', 0, epoch);
      int h = hooks >= 0 ? hooks : (int)(local % 3);
      for (int i = 0; i < h; ++i) {
        PUT('A', TPT_EVENT_BEFORE_RUN, epoch);
        PUT('S', 0, epoch);
        ++g; /* the step counter runs before user callbacks' after_run */
        PUT('A', TPT_EVENT_AFTER_RUN, epoch);
      }
      PUT('A', TPT_EVENT_TRIGGER_STEP, epoch);
    }
    PUT('A', TPT_EVENT_AFTER_EPOCH, epoch);
    PUT('A', TPT_EVENT_TRIGGER_EPOCH, epoch);
    PUT('B', TPT_EVENT_TRIGGER, epoch);
  }
  PUT('A', TPT_EVENT_AFTER_TRAIN, max);
#undef PUT
  return n;
}

static void compare(const ev *want, int n_want) {
  for (int i = 0; i < n_want && i < n_seen; ++i) {
    const ev *a = &seen[i], *b = &want[i];
    if (a->who != b->who || a->event != b->event || a->epoch != b->epoch || a->local != b->local ||
        a->global != b->global)
      fail_msg("event %d: got %c/%d epoch %lld local %lld global %lld, want %c/%d epoch %lld local %lld global %lld", i,
               a->who, (int)a->event, (long long)a->epoch, (long long)a->local, (long long)a->global, b->who,
               (int)b->event, (long long)b->epoch, (long long)b->local, (long long)b->global);
  }
  assert_int_equal(n_seen, n_want);
}

static const uint32_t kLifecycle = TPT_EVENT_SETUP | TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_BEFORE_EPOCH |
                                   TPT_EVENT_BEFORE_RUN | TPT_EVENT_AFTER_RUN | TPT_EVENT_TRIGGER_STEP |
                                   TPT_EVENT_AFTER_EPOCH | TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_AFTER_TRAIN;

static void run_sequence(int64_t start, int64_t max, int64_t spe, int hooks) {
  static ev want[MAX_EV];
  n_seen = 0;
  cb_state a = {'A', 0, 0, 0, 0, 0, 0}, b = {'B', 0, 0, 0, 0, 0, 0};
  run_state rs = {hooks, -1, -1, 0, 0};
  tpt_trainer *t = make_trainer(start, max, spe);
  ok(tpt_trainer_set_run_step(t, run_step, &rs, count_run_destroy));
  ok(tpt_trainer_add_callback(t, make_cb(&a, kLifecycle, 1)));
  ok(tpt_trainer_add_callback(t, make_cb(&b, TPT_EVENT_TRIGGER, 1)));
  int64_t e0, l0, g0;
  ok(tpt_trainer_epoch_num(&e0, t));
  ok(tpt_trainer_local_step(&l0, t));
  ok(tpt_trainer_global_step(&g0, t));
  assert_int_equal(e0, start - 1); /* before training */
  assert_int_equal(l0, -1);
  assert_int_equal(g0, 0);
  ok(tpt_trainer_run(t));
  const char *reason = (const char *)1;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_null(reason);
  compare(want, expected_sequence(want, start, max, spe, hooks));
  tpt_trainer_free(t);
  assert_int_equal(a.destroyed, 1);
  assert_int_equal(b.destroyed, 1);
  assert_int_equal(rs.destroyed, 1);
}

/* ------------------------------------------------------------ sequences */

static void test_sequence_hooks_0(void **s) { (void)s; run_sequence(3, 5, 4, 0); }
static void test_sequence_hooks_1(void **s) { (void)s; run_sequence(3, 5, 4, 1); }
static void test_sequence_hooks_2(void **s) { (void)s; run_sequence(3, 5, 4, 2); }
static void test_sequence_hooks_mixed(void **s) { (void)s; run_sequence(3, 5, 4, -1); }
static void test_sequence_zero_steps(void **s) { (void)s; run_sequence(3, 5, 0, 1); }
static void test_sequence_no_epochs(void **s) { (void)s; run_sequence(6, 5, 4, 1); }

/* ------------------------------------------------------------ STOP */

static int count_events(char who, tpt_event e) {
  int n = 0;
  for (int i = 0; i < n_seen; ++i) n += seen[i].who == who && seen[i].event == e;
  return n;
}

static const ev *last_event(char who, tpt_event e) {
  const ev *found = NULL;
  for (int i = 0; i < n_seen; ++i)
    if (seen[i].who == who && seen[i].event == e) found = &seen[i];
  return found;
}

static void test_stop_from_before_epoch(void **state) {
  (void)state;
  n_seen = 0;
  cb_state a = {'A', TPT_EVENT_BEFORE_EPOCH, TPT_STOP, 4, -99, 0, 0};
  cb_state b = {'B', 0, 0, 0, 0, 0, 0};
  run_state rs = {1, -1, -1, 0, 0};
  tpt_trainer *t = make_trainer(3, 5, 4);
  ok(tpt_trainer_set_run_step(t, run_step, &rs, count_run_destroy));
  ok(tpt_trainer_add_callback(t, make_cb(&a, kLifecycle, 1)));
  ok(tpt_trainer_add_callback(t, make_cb(&b, kLifecycle, 1)));
  ok(tpt_trainer_run(t));
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_string_equal(reason, "A fails at 4");
  /* epoch 3 ran fully; epoch 4 stopped inside A's before_epoch: B never saw it */
  assert_int_equal(count_events('A', TPT_EVENT_BEFORE_EPOCH), 2);
  assert_int_equal(count_events('B', TPT_EVENT_BEFORE_EPOCH), 1);
  assert_int_equal(rs.steps, 4);
  assert_int_equal(count_events('A', TPT_EVENT_AFTER_EPOCH), 1);
  assert_int_equal(a.after_train, 1);
  assert_int_equal(b.after_train, 1);
  int64_t e, g;
  ok(tpt_trainer_epoch_num(&e, t));
  ok(tpt_trainer_global_step(&g, t));
  assert_int_equal(e, 4);
  assert_int_equal(g, 4);
  tpt_trainer_free(t);
  assert_int_equal(a.destroyed + b.destroyed + rs.destroyed, 3);
}

/* A stop requested during an epoch's last step, against the trace of
 * tensorpack's Trainer.main_loop (tensorpack/train/base.py at 1547a54e,
 * lines 271-286): should_stop() is asked only inside the step loop (line
 * 277), so the epoch ends normally (trigger_step 280, after_epoch 281,
 * trigger_epoch 286), the next epoch starts (epoch_num set by the for of
 * line 271, "Start Epoch" 273, before_epoch 274 with local_step still at the
 * old epoch's last), local_step becomes 0 (line 276) and main_loop returns
 * before run_step (278); after_train runs in the finally (297). */
static tpt_status *stop_at_4(tpt_trainer *t, void *ud) {
  (void)ud;
  int64_t g;
  ok(tpt_trainer_global_step(&g, t));
  note(t, 'S', 0);
  if (g == 3) ok(tpt_trainer_request_stop(t)); /* the 4th step: global_step 3 before it advances */
  return NULL;
}
static tpt_status *run_step_stop_at_4(tpt_trainer *t, void *ud) {
  (void)ud;
  note(t, 'R', 0);
  return tpt_trainer_hooked_step(t, stop_at_4, NULL);
}

static void test_stop_requested_in_last_step_matches_tensorpack(void **state) {
  (void)state;
  n_seen = 0;
  cb_state a = {'A', 0, 0, 0, 0, 0, 0};
  tpt_trainer *t = make_trainer(1, 3, 4);
  ok(tpt_trainer_set_run_step(t, run_step_stop_at_4, NULL, NULL));
  ok(tpt_trainer_add_callback(t, make_cb(&a, kLifecycle, 1)));
  ok(tpt_trainer_run(t));
  /* the expected tail, (who, event, epoch_num, local_step, global_step) */
  const ev want[] = {
      {'R', 0, 1, 3, 3},
      {'S', 0, 1, 3, 3},
      {'A', TPT_EVENT_TRIGGER_STEP, 1, 3, 4},
      {'A', TPT_EVENT_AFTER_EPOCH, 1, 3, 4},
      {'A', TPT_EVENT_TRIGGER_EPOCH, 1, 3, 4},
      {'A', TPT_EVENT_BEFORE_EPOCH, 2, 3, 4},
      {'A', TPT_EVENT_AFTER_TRAIN, 2, 0, 4},
  };
  const int n = (int)(sizeof want / sizeof *want);
  int start = -1;
  for (int i = 0; i < n_seen; ++i)
    if (seen[i].who == 'R' && seen[i].local == 3 && seen[i].epoch == 1) start = i;
  assert_true(start >= 0);
  int k = 0;
  for (int i = start; i < n_seen; ++i) {
    if (seen[i].who == 'A' && (seen[i].event == TPT_EVENT_BEFORE_RUN || seen[i].event == TPT_EVENT_AFTER_RUN)) continue;
    assert_true(k < n);
    if (seen[i].who != want[k].who || seen[i].event != want[k].event || seen[i].epoch != want[k].epoch ||
        seen[i].local != want[k].local || seen[i].global != want[k].global)
      fail_msg("event %d: got (%c, %d, %lld, %lld, %lld), want (%c, %d, %lld, %lld, %lld)", k, seen[i].who,
               (int)seen[i].event, (long long)seen[i].epoch, (long long)seen[i].local, (long long)seen[i].global,
               want[k].who, (int)want[k].event, (long long)want[k].epoch, (long long)want[k].local,
               (long long)want[k].global);
    ++k;
  }
  assert_int_equal(k, n);
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_string_equal(reason, "tpt_trainer_request_stop");
  tpt_trainer_free(t);
}

static void test_stop_from_trigger_step(void **state) {
  (void)state;
  n_seen = 0;
  cb_state a = {'A', TPT_EVENT_TRIGGER_STEP, TPT_STOP, 3, 2, 0, 0};
  cb_state b = {'B', 0, 0, 0, 0, 0, 0};
  run_state rs = {2, -1, -1, 0, 0};
  tpt_trainer *t = make_trainer(3, 5, 4);
  ok(tpt_trainer_set_run_step(t, run_step, &rs, count_run_destroy));
  ok(tpt_trainer_add_callback(t, make_cb(&a, kLifecycle, 1)));
  ok(tpt_trainer_add_callback(t, make_cb(&b, kLifecycle, 1)));
  ok(tpt_trainer_run(t));
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_string_equal(reason, "A fails at 32");
  assert_int_equal(rs.steps, 3);
  assert_int_equal(count_events('A', TPT_EVENT_TRIGGER_STEP), 3);
  assert_int_equal(count_events('B', TPT_EVENT_TRIGGER_STEP), 3); /* A's stop waits for the step's other callbacks */
  assert_int_equal(count_events('A', TPT_EVENT_AFTER_EPOCH), 0);
  int64_t g;
  ok(tpt_trainer_global_step(&g, t));
  assert_int_equal(g, 6);
  assert_int_equal(a.after_train + b.after_train, 2);
  tpt_trainer_free(t);
}

static void test_stop_from_run_step(void **state) {
  (void)state;
  n_seen = 0;
  cb_state a = {'A', 0, 0, 0, 0, 0, 0};
  run_state rs = {1, 6, -1, 0, 0};
  tpt_trainer *t = make_trainer(3, 5, 4);
  ok(tpt_trainer_set_run_step(t, run_step, &rs, count_run_destroy));
  ok(tpt_trainer_add_callback(t, make_cb(&a, kLifecycle, 1)));
  ok(tpt_trainer_run(t));
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_string_equal(reason, "run_step says stop");
  assert_int_equal(rs.steps, 6);
  /* the stopping run_step's trigger_step does not run */
  assert_int_equal(count_events('A', TPT_EVENT_TRIGGER_STEP), 5);
  const ev *at = last_event('A', TPT_EVENT_AFTER_TRAIN);
  assert_non_null(at);
  assert_int_equal(at->epoch, 4);
  assert_int_equal(at->local, 1);
  assert_int_equal(at->global, 6);
  tpt_trainer_free(t);
}

/* A STOP returned by a callback's after_run inside a run_step that ignores
 * the hooked step's status still stops training. */
static tpt_status *careless_run_step(tpt_trainer *t, void *ud) {
  (void)ud;
  tpt_status_free(tpt_trainer_hooked_step(t, NULL, NULL));
  return NULL;
}

static void test_stop_swallowed_by_run_step_still_stops(void **state) {
  (void)state;
  n_seen = 0;
  cb_state a = {'A', TPT_EVENT_AFTER_RUN, TPT_STOP, 3, 1, 0, 0};
  tpt_trainer *t = make_trainer(3, 5, 4);
  ok(tpt_trainer_set_run_step(t, careless_run_step, NULL, NULL));
  ok(tpt_trainer_add_callback(t, make_cb(&a, kLifecycle, 1)));
  ok(tpt_trainer_run(t));
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_string_equal(reason, "A fails at 16");
  assert_int_equal(count_events('A', TPT_EVENT_AFTER_RUN), 2);
  assert_int_equal(count_events('A', TPT_EVENT_TRIGGER_STEP), 1);
  tpt_trainer_free(t);
}

/* ------------------------------------------------------------ ERROR everywhere */

static void error_at(tpt_event e, uint32_t mask) {
  n_seen = 0;
  cb_state a = {'A', e, TPT_ERR_IO, -99, -99, 0, 0};
  if (e != TPT_EVENT_SETUP && e != TPT_EVENT_BEFORE_TRAIN && e != TPT_EVENT_AFTER_TRAIN) {
    a.fail_epoch = 4;
    if (e == TPT_EVENT_BEFORE_RUN || e == TPT_EVENT_AFTER_RUN || e == TPT_EVENT_TRIGGER_STEP) a.fail_local = 1;
  }
  cb_state b = {'B', 0, 0, 0, 0, 0, 0};
  run_state rs = {1, -1, -1, 0, 0};
  tpt_trainer *t = make_trainer(3, 5, 4);
  ok(tpt_trainer_set_run_step(t, run_step, &rs, count_run_destroy));
  ok(tpt_trainer_add_callback(t, make_cb(&a, mask, 1)));
  ok(tpt_trainer_add_callback(t, make_cb(&b, kLifecycle, 1)));
  tpt_status *st = tpt_trainer_run(t);
  char want[64];
  snprintf(want, sizeof want, "A fails at %d", (int)e);
  assert_non_null(st);
  assert_int_equal(tpt_status_code(st), TPT_ERR_IO);
  assert_string_equal(tpt_status_message(st), want); /* unchanged */
  tpt_status_free(st);
  assert_int_equal(a.after_train, 1);
  assert_int_equal(b.after_train, 1);
  const char *reason = (const char *)1;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_null(reason);
  tpt_trainer_free(t);
  assert_int_equal(a.destroyed, 1);
  assert_int_equal(b.destroyed, 1);
  assert_int_equal(rs.destroyed, 1);
}

static void test_error_from_every_lifecycle_point(void **state) {
  (void)state;
  const tpt_event points[] = {TPT_EVENT_SETUP,        TPT_EVENT_BEFORE_TRAIN, TPT_EVENT_BEFORE_EPOCH,
                              TPT_EVENT_BEFORE_RUN,   TPT_EVENT_AFTER_RUN,    TPT_EVENT_TRIGGER_STEP,
                              TPT_EVENT_AFTER_EPOCH,  TPT_EVENT_TRIGGER_EPOCH, TPT_EVENT_AFTER_TRAIN};
  for (size_t i = 0; i < sizeof points / sizeof points[0]; ++i) error_at(points[i], kLifecycle);
  /* TRIGGER, delivered at trigger_epoch to a callback without TRIGGER_EPOCH */
  error_at(TPT_EVENT_TRIGGER, (kLifecycle & ~(uint32_t)TPT_EVENT_TRIGGER_EPOCH) | TPT_EVENT_TRIGGER);
}

static void test_error_from_step_and_run_step(void **state) {
  (void)state;
  n_seen = 0;
  cb_state a = {'A', 0, 0, 0, 0, 0, 0};
  run_state rs = {1, -1, 5, 0, 0};
  tpt_trainer *t = make_trainer(3, 5, 4);
  ok(tpt_trainer_set_run_step(t, run_step, &rs, count_run_destroy));
  ok(tpt_trainer_add_callback(t, make_cb(&a, kLifecycle, 1)));
  tpt_status *st = tpt_trainer_run(t);
  assert_int_equal(tpt_status_code(st), TPT_ERR_INVALID_ARGUMENT);
  assert_string_equal(tpt_status_message(st), "step failed");
  tpt_status_free(st);
  assert_int_equal(a.after_train, 1);
  /* the failing step's after_run did not run */
  assert_int_equal(count_events('A', TPT_EVENT_AFTER_RUN), 5);
  tpt_trainer_free(t);
}

/* ------------------------------------------------------------ destroy exactly once */

static void test_destroy_exactly_once(void **state) {
  (void)state;
  cb_state s[12];
  memset(s, 0, sizeof s);
  tpt_callback *cb = NULL;
  /* 1. invalid description: destroyed at once */
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.user_data = &s[0];
  d.destroy = count_destroy;
  expect_code(tpt_callback_new(&cb, &d), TPT_ERR_INVALID_ARGUMENT, "desc->fn");
  assert_null(cb);
  assert_int_equal(s[0].destroyed, 1);
  d.fn = recording_cb;
  d.version = 77;
  d.user_data = &s[1];
  expect_code(tpt_callback_new(&cb, &d), TPT_ERR_INVALID_ARGUMENT, "TPT_CALLBACK_DESC_INIT");
  assert_int_equal(s[1].destroyed, 1);
  d.version = TPT_CALLBACK_DESC_VERSION;
  d.events = 1u << 20;
  d.user_data = &s[2];
  expect_code(tpt_callback_new(&cb, &d), TPT_ERR_INVALID_ARGUMENT, "desc->events");
  assert_int_equal(s[2].destroyed, 1);
  d.user_data = &s[11];
  expect_code(tpt_callback_new(NULL, &d), TPT_ERR_INVALID_ARGUMENT, "'out'");
  assert_int_equal(s[11].destroyed, 1);

  /* 2. registration fails: NULL trainer */
  expect_code(tpt_trainer_add_callback(NULL, make_cb(&s[3], kLifecycle, 1)), TPT_ERR_INVALID_ARGUMENT, "'trainer'");
  assert_int_equal(s[3].destroyed, 1);
  expect_code(tpt_trainer_add_monitor(NULL, make_cb(&s[4], TPT_EVENT_RECORD, 0)), TPT_ERR_INVALID_ARGUMENT,
              "'trainer'");
  assert_int_equal(s[4].destroyed, 1);

  /* 3. wrappers consume inner even when they fail */
  expect_code(tpt_callback_periodic_trigger(&cb, make_cb(&s[5], TPT_EVENT_TRIGGER, 1), 0, 0, 0),
              TPT_ERR_INVALID_ARGUMENT, "every_k_steps or every_k_epochs");
  assert_int_equal(s[5].destroyed, 1);
  expect_code(tpt_callback_periodic(&cb, make_cb(&s[6], TPT_EVENT_TRIGGER, 1), -1, 0), TPT_ERR_INVALID_ARGUMENT,
              "every_k_steps must be >= 0");
  assert_int_equal(s[6].destroyed, 1);
  expect_code(tpt_callback_enable_if(&cb, make_cb(&s[7], TPT_EVENT_TRIGGER, 1), NULL, &s[8], count_destroy),
              TPT_ERR_INVALID_ARGUMENT, "'predicate'");
  assert_int_equal(s[7].destroyed, 1);
  assert_int_equal(s[8].destroyed, 1);

  /* 4. frozen list: adding after run fails and destroys */
  tpt_trainer *t = make_trainer(1, 1, 0);
  ok(tpt_trainer_run(t));
  expect_code(tpt_trainer_add_callback(t, make_cb(&s[9], kLifecycle, 1)), TPT_ERR_STATE, "frozen");
  assert_int_equal(s[9].destroyed, 1);
  expect_code(tpt_trainer_run(t), TPT_ERR_STATE, "runs once");
  tpt_trainer_free(t);

  /* 5. chief-only callback on a non-chief trainer is dropped and destroyed */
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.is_chief = 0;
  o.console = 0;
  o.steps_per_epoch = 0;
  o.max_epoch = 2;
  ok(tpt_trainer_new(&t, &o));
  cb_state kept = {0};
  ok(tpt_trainer_add_callback(t, make_cb(&s[10], kLifecycle, 1)));
  assert_int_equal(s[10].destroyed, 1);
  ok(tpt_trainer_add_callback(t, make_cb(&kept, TPT_EVENT_AFTER_TRAIN, 0)));
  ok(tpt_trainer_run(t));
  assert_int_equal(kept.after_train, 1);
  assert_int_equal(s[10].after_train, 0);
  tpt_trainer_free(t);
  assert_int_equal(kept.destroyed, 1);

  /* 6. run_step: replaced (old destroyed), failing set (destroyed), free */
  run_state r1 = {0}, r2 = {0}, r3 = {0};
  t = make_trainer(1, 1, 1);
  ok(tpt_trainer_set_run_step(t, run_step, &r1, count_run_destroy));
  ok(tpt_trainer_set_run_step(t, run_step, &r2, count_run_destroy));
  assert_int_equal(r1.destroyed, 1);
  expect_code(tpt_trainer_set_run_step(NULL, run_step, &r3, count_run_destroy), TPT_ERR_INVALID_ARGUMENT,
              "'trainer'");
  assert_int_equal(r3.destroyed, 1);
  expect_code(tpt_trainer_set_run_step(t, NULL, &r3, count_run_destroy), TPT_ERR_INVALID_ARGUMENT, "'run_step'");
  assert_int_equal(r3.destroyed, 2);
  tpt_trainer_free(t);
  assert_int_equal(r2.destroyed, 1);
  assert_int_equal(r1.destroyed, 1);

  /* 7. a callback never given away is destroyed by tpt_callback_free */
  cb_state lone = {0};
  tpt_callback_free(make_cb(&lone, kLifecycle, 1));
  assert_int_equal(lone.destroyed, 1);
  tpt_callback_free(NULL);
  tpt_trainer_free(NULL);
  for (int i = 0; i < 12; ++i) assert_int_equal(s[i].destroyed, 1);
}

/* ------------------------------------------------------------ request_stop from another thread */

static tpt_status *slow_run_step(tpt_trainer *t, void *ud) {
  (void)ud;
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
  return tpt_trainer_hooked_step(t, NULL, NULL);
}

static void *stopper(void *arg) {
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  ok(tpt_trainer_request_stop(arg));
  return NULL;
}

static void test_request_stop_from_another_thread(void **state) {
  (void)state;
  cb_state a = {0};
  tpt_trainer *t = make_trainer(1, 1000000, 1000);
  ok(tpt_trainer_set_run_step(t, slow_run_step, NULL, NULL));
  ok(tpt_trainer_add_callback(t, make_cb(&a, TPT_EVENT_AFTER_TRAIN, 1)));
  n_seen = 0;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, stopper, t), 0);
  ok(tpt_trainer_run(t));
  pthread_join(th, NULL);
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_string_equal(reason, "tpt_trainer_request_stop");
  assert_int_equal(a.after_train, 1);
  int64_t g;
  ok(tpt_trainer_global_step(&g, t));
  assert_true(g > 0 && g < 1000000);
  tpt_trainer_free(t);
}

static void *stopper_because(void *arg) {
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  ok(tpt_trainer_request_stop_because(arg, "preempted by the scheduler"));
  ok(tpt_trainer_request_stop_because(arg, "a second reason")); /* the first request wins */
  return NULL;
}

/* tpt_trainer_request_stop_because: the reason given is the run's stop
 * reason (and the log's); an empty or NULL reason is refused. */
static void test_request_stop_because(void **state) {
  (void)state;
  tpt_trainer *t = make_trainer(1, 1000000, 1000);
  ok(tpt_trainer_set_run_step(t, slow_run_step, NULL, NULL));
  expect_code(tpt_trainer_request_stop_because(t, ""), TPT_ERR_INVALID_ARGUMENT, "argument 'reason' is empty");
  EXPECT_NULL_ARG(tpt_trainer_request_stop_because(t, NULL), "tpt_trainer_request_stop_because", "reason");
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, stopper_because, t), 0);
  ok(tpt_trainer_run(t));
  pthread_join(th, NULL);
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_string_equal(reason, "preempted by the scheduler");
  tpt_trainer_free(t);
}

/* ------------------------------------------------------------ stop on signals */

/* A trainer with stop_on_signals = `mode` whose callback, at global step 3,
 * records SIGTERM's disposition and does `act`: raise SIGTERM or SIGINT to
 * the process, or call tpt_trainer_signal_stop as a host's handler would. */
typedef enum { ACT_NONE, ACT_RAISE_TERM, ACT_RAISE_INT, ACT_SIGNAL_STOP } sig_act;
static sig_act g_act;
static int g_handler_was_ours;

static tpt_status *signal_at_3(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  int64_t g = 0;
  ok(tpt_trainer_global_step(&g, t));
  if (g != 3) return NULL;
  struct sigaction cur;
  sigaction(SIGTERM, NULL, &cur);
  g_handler_was_ours = cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN;
  if (g_act == ACT_RAISE_TERM) raise(SIGTERM);
  if (g_act == ACT_RAISE_INT) raise(SIGINT);
  if (g_act == ACT_SIGNAL_STOP) tpt_trainer_signal_stop(t, SIGUSR1);
  return NULL;
}

static const char *run_with_signal(int32_t mode, sig_act act, int64_t *global_step) {
  static char reason_copy[64];
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 3;
  o.steps_per_epoch = 5;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.default_callbacks = 0;
  o.default_monitors = 0;
  o.stop_on_signals = mode;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_set_run_step(t, slow_run_step, NULL, NULL));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER_STEP;
  d.fn = signal_at_3;
  d.chief_only = 0;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
  g_act = act;
  g_handler_was_ours = -1;
  ok(tpt_trainer_run(t));
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  snprintf(reason_copy, sizeof reason_copy, "%s", reason ? reason : "(none)");
  ok(tpt_trainer_global_step(global_step, t));
  tpt_trainer_free(t);
  return reason_copy;
}

static void test_stop_on_signals(void **state) {
  (void)state;
  int64_t g = 0;
  unsetenv("TPTRAIN_STOP_ON_SIGNALS");
  /* on: SIGTERM at global step 3 stops before the 4th step, gracefully */
  assert_string_equal(run_with_signal(1, ACT_RAISE_TERM, &g), "SIGTERM");
  assert_int_equal(g, 3);
  assert_int_equal(g_handler_was_ours, 1);
  assert_string_equal(run_with_signal(1, ACT_RAISE_INT, &g), "SIGINT");
  assert_int_equal(g, 3);
  /* after a run the dispositions are what they were */
  struct sigaction cur;
  sigaction(SIGTERM, NULL, &cur);
  assert_true(cur.sa_handler == SIG_DFL);
  sigaction(SIGINT, NULL, &cur);
  assert_true(cur.sa_handler == SIG_DFL);
  /* a host's own handler calls tpt_trainer_signal_stop: the same stop */
  assert_string_equal(run_with_signal(-1, ACT_SIGNAL_STOP, &g), "SIGUSR1");
  assert_int_equal(g, 3);
  assert_int_equal(g_handler_was_ours, 0); /* -1: nothing installed */
  /* 0 follows the environment */
  assert_string_equal(run_with_signal(0, ACT_NONE, &g), "(none)");
  assert_int_equal(g_handler_was_ours, 0);
  setenv("TPTRAIN_STOP_ON_SIGNALS", "1", 1);
  assert_string_equal(run_with_signal(0, ACT_RAISE_TERM, &g), "SIGTERM");
  assert_int_equal(g, 3);
  assert_string_equal(run_with_signal(-1, ACT_NONE, &g), "(none)");
  assert_int_equal(g_handler_was_ours, 0);
  unsetenv("TPTRAIN_STOP_ON_SIGNALS");
  /* a handle that is not live is ignored; out-of-range modes are refused */
  tpt_trainer_signal_stop(NULL, SIGTERM);
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.stop_on_signals = 2;
  tpt_trainer *t = NULL;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "stop_on_signals");
  assert_null(t);
}

/* ------------------------------------------------------------ wrappers */

static tpt_status *one_hook(tpt_trainer *t, void *ud) {
  (void)ud;
  return tpt_trainer_hooked_step(t, NULL, NULL);
}

static int32_t odd_epoch(tpt_trainer *t, void *ud) {
  int64_t e;
  (void)ud;
  ok(tpt_trainer_epoch_num(&e, t));
  return (int32_t)(e % 2);
}

static int32_t failing_predicate(tpt_trainer *t, void *ud) {
  (void)t;
  (void)ud;
  return -1;
}

static void test_wrappers(void **state) {
  (void)state;
  n_seen = 0;
  cb_state p = {'P', 0, 0, 0, 0, 0, 0}, q = {'Q', 0, 0, 0, 0, 0, 0}, c = {'C', 0, 0, 0, 0, 0, 0},
           e = {'E', 0, 0, 0, 0, 0, 0}, f2 = {'F', 0, 0, 0, 0, 0, 0}, pd = {0};
  tpt_trainer *t = make_trainer(1, 4, 5); /* global steps 1..20 */
  ok(tpt_trainer_set_run_step(t, one_hook, NULL, NULL));
  tpt_callback *cb = NULL;
  /* P: trigger every 3 steps and before training */
  ok(tpt_callback_periodic_trigger(&cb, make_cb(&p, TPT_EVENT_TRIGGER | TPT_EVENT_TRIGGER_EPOCH, 1), 3, 0, 1));
  ok(tpt_trainer_add_callback(t, cb));
  /* Q: trigger every 2 epochs (its own trigger_epoch is replaced) */
  ok(tpt_callback_periodic_trigger(&cb, make_cb(&q, TPT_EVENT_TRIGGER | TPT_EVENT_TRIGGER_EPOCH, 1), 0, 2, 0));
  ok(tpt_trainer_add_callback(t, cb));
  /* C: trigger_step and after_run only when global_step % 4 == 0 */
  ok(tpt_callback_periodic(&cb, make_cb(&c, TPT_EVENT_TRIGGER_STEP | TPT_EVENT_AFTER_RUN, 1), 4, 0));
  ok(tpt_trainer_add_callback(t, cb));
  /* E: before/after epoch only in odd epochs; after_train always */
  ok(tpt_callback_enable_if(&cb, make_cb(&e, TPT_EVENT_BEFORE_EPOCH | TPT_EVENT_AFTER_EPOCH | TPT_EVENT_AFTER_TRAIN, 1),
                            odd_epoch, &pd, count_destroy));
  ok(tpt_trainer_add_callback(t, cb));
  /* F: TRIGGER only (its default trigger_epoch), gated to every 2nd epoch */
  ok(tpt_callback_periodic(&cb, make_cb(&f2, TPT_EVENT_TRIGGER, 1), 0, 2));
  ok(tpt_trainer_add_callback(t, cb));
  ok(tpt_trainer_run(t));

  int trig_f = 0;
  int trig_p = 0, trig_q = 0, c_steps = 0, c_runs = 0, e_epochs = 0, e_after = 0;
  for (int i = 0; i < n_seen; ++i) {
    ev *x = &seen[i];
    if (x->who == 'P') {
      assert_int_equal(x->event, TPT_EVENT_TRIGGER); /* never its trigger_epoch */
      assert_true(x->global % 3 == 0);
      trig_p++;
    } else if (x->who == 'Q') {
      assert_int_equal(x->event, TPT_EVENT_TRIGGER);
      assert_true(x->epoch % 2 == 0);
      trig_q++;
    } else if (x->who == 'C') {
      /* after_run: decided in before_run, when global_step was one less */
      if (x->event == TPT_EVENT_AFTER_RUN) {
        assert_true((x->global - 1) % 4 == 0);
        c_runs++;
      } else {
        assert_true(x->global % 4 == 0);
        c_steps++;
      }
    } else if (x->who == 'F') {
      assert_int_equal(x->event, TPT_EVENT_TRIGGER);
      assert_true(x->epoch % 2 == 0);
      trig_f++;
    } else if (x->who == 'E') {
      if (x->event == TPT_EVENT_AFTER_TRAIN) {
        e_after++;
      } else {
        assert_true(x->epoch % 2 == 1);
        e_epochs++;
      }
    }
  }
  assert_int_equal(trig_p, 1 + 6); /* before_train + steps 3,6,...,18 */
  assert_int_equal(trig_q, 2);     /* epochs 2, 4 */
  assert_int_equal(c_steps, 5);    /* 4, 8, 12, 16, 20 */
  assert_int_equal(c_runs, 5);     /* before_run at 0, 4, 8, 12, 16 */
  assert_int_equal(e_epochs, 4);   /* before+after in epochs 1 and 3 */
  assert_int_equal(e_after, 1);
  assert_int_equal(trig_f, 2); /* epochs 2 and 4 */
  tpt_trainer_free(t);
  assert_int_equal(p.destroyed + q.destroyed + c.destroyed + e.destroyed + f2.destroyed + pd.destroyed, 6);

  /* a failing predicate fails training with TPT_ERR_CALLBACK */
  cb_state f = {0};
  t = make_trainer(1, 2, 2);
  ok(tpt_trainer_set_run_step(t, one_hook, NULL, NULL));
  ok(tpt_callback_enable_if(&cb, make_cb(&f, TPT_EVENT_BEFORE_EPOCH | TPT_EVENT_AFTER_TRAIN, 1), failing_predicate,
                            NULL, NULL));
  ok(tpt_trainer_add_callback(t, cb));
  expect_code(tpt_trainer_run(t), TPT_ERR_CALLBACK, "the predicate of 'recorder' failed");
  assert_int_equal(f.after_train, 1);
  tpt_trainer_free(t);
}

/* ------------------------------------------------------------ outputs */

static tpt_status *publishing_step(tpt_trainer *t, void *ud) {
  int64_t g;
  (void)ud;
  ok(tpt_trainer_global_step(&g, t));
  ok(tpt_trainer_set_output_scalar(t, "loss", 1.0 / (double)(g + 1)));
  const float v[3] = {(float)g, 1, 2};
  const int64_t shape[] = {3};
  tpt_tensor *x = NULL;
  ok(tpt_tensor_from_data(&x, v, sizeof v, shape, 1, NULL));
  ok(tpt_trainer_set_output(t, "logits", x));
  tpt_tensor_free(x); /* the trainer keeps its own reference */
  return NULL;
}

static tpt_status *publishing_run_step(tpt_trainer *t, void *ud) { return tpt_trainer_hooked_step(t, publishing_step, ud); }

static int outputs_checked;

static tpt_status *output_reader(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)e;
  (void)r;
  (void)ud;
  int64_t g;
  ok(tpt_trainer_global_step(&g, t));
  double loss = 0;
  ok(tpt_trainer_output_scalar(&loss, t, "loss"));
  assert_true(loss == 1.0 / (double)g); /* put when global_step was g - 1 */
  tpt_tensor *logits = NULL;
  ok(tpt_trainer_output(&logits, t, "logits"));
  float v[3];
  ok(tpt_tensor_copy_to(v, sizeof v, logits));
  assert_true(v[0] == (float)(g - 1) && v[2] == 2.0f);
  tpt_tensor_free(logits);
  tpt_tensor *as_tensor = NULL;
  ok(tpt_trainer_output(&as_tensor, t, "loss"));
  double back = 0;
  ok(tpt_tensor_copy_to(&back, sizeof back, as_tensor));
  assert_true(back == loss);
  tpt_tensor_free(as_tensor);
  expect_code(tpt_trainer_output_scalar(&loss, t, "logits"), TPT_ERR_INVALID_ARGUMENT, "3 elements");
  expect_code(tpt_trainer_output_scalar(&loss, t, "nope"), TPT_ERR_NOT_FOUND, "no output 'nope'");
  expect_code(tpt_trainer_set_output_scalar(t, "late", 1), TPT_ERR_STATE, "inside a hooked step");
  outputs_checked++;
  return NULL;
}

static void test_step_outputs(void **state) {
  (void)state;
  tpt_trainer *t = make_trainer(1, 2, 3);
  ok(tpt_trainer_set_run_step(t, publishing_run_step, NULL, NULL));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_AFTER_RUN;
  d.fn = output_reader;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
  double x;
  expect_code(tpt_trainer_output_scalar(&x, t, "loss"), TPT_ERR_NOT_FOUND, "no hooked step has run");
  expect_code(tpt_trainer_hooked_step(t, NULL, NULL), TPT_ERR_STATE, "can only run inside run_step");
  outputs_checked = 0;
  ok(tpt_trainer_run(t));
  assert_int_equal(outputs_checked, 6);
  tpt_trainer_free(t);
}

/* ------------------------------------------------------------ scalars and monitors */

typedef struct {
  int records;
  int64_t last_step;
  double sum;
  int trigger_epochs;
} mon_state;

static tpt_status *monitor_fn(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  mon_state *m = ud;
  (void)t;
  if (e == TPT_EVENT_RECORD) {
    assert_true(r->struct_size >= sizeof(tpt_record));
    assert_int_equal(r->kind, TPT_RECORD_SCALAR);
    assert_string_equal(r->name, "metric");
    assert_null(r->tensor);
    m->records++;
    m->last_step = r->global_step;
    m->sum += r->value;
  } else if (e == TPT_EVENT_TRIGGER_EPOCH) {
    m->trigger_epochs++;
  }
  return NULL;
}

static tpt_status *scalar_run_step(tpt_trainer *t, void *ud) {
  (void)ud;
  tpt_status *st = tpt_trainer_hooked_step(t, NULL, NULL);
  if (st) return st;
  int64_t g;
  ok(tpt_trainer_global_step(&g, t));
  return tpt_trainer_put_scalar(t, "metric", (double)g * 0.5);
}

static void test_scalars_and_monitors(void **state) {
  (void)state;
  mon_state m = {0};
  tpt_trainer *t = make_trainer(1, 3, 4);
  ok(tpt_trainer_set_run_step(t, scalar_run_step, NULL, NULL));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_RECORD | TPT_EVENT_TRIGGER_EPOCH;
  d.fn = monitor_fn;
  d.user_data = &m;
  d.chief_only = 0;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_monitor(t, cb));
  expect_code(tpt_trainer_put_scalar(t, "metric", 1), TPT_ERR_STATE, "while training runs");
  ok(tpt_trainer_run(t));
  assert_int_equal(m.records, 12);
  assert_int_equal(m.last_step, 12);
  assert_true(m.sum == 0.5 * (12 * 13 / 2));
  assert_int_equal(m.trigger_epochs, 3);
  double v = 0;
  int64_t step = 0;
  ok(tpt_trainer_scalar_latest(&v, &step, t, "metric"));
  assert_true(v == 6.0);
  assert_int_equal(step, 12);
  size_t n = 0;
  ok(tpt_trainer_scalar_history(&n, NULL, NULL, 0, t, "metric"));
  assert_int_equal(n, 12);
  int64_t steps[5];
  double values[5];
  ok(tpt_trainer_scalar_history(&n, steps, values, 5, t, "metric"));
  assert_int_equal(n, 12);
  for (int i = 0; i < 5; ++i) {
    assert_int_equal(steps[i], i + 1);
    assert_true(values[i] == 0.5 * (i + 1));
  }
  expect_code(tpt_trainer_scalar_latest(&v, NULL, t, "other"), TPT_ERR_NOT_FOUND, "no scalar 'other'");
  tpt_trainer_free(t);
}

/* ------------------------------------------------------------ global_step set by a restore */

static tpt_status *restore_cb(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)r;
  (void)ud;
  if (e == TPT_EVENT_BEFORE_TRAIN) return tpt_trainer_set_global_step(t, 100);
  if (e == TPT_EVENT_BEFORE_EPOCH) expect_code(tpt_trainer_set_global_step(t, 5), TPT_ERR_STATE, "before_train");
  return NULL;
}

static void test_set_global_step_in_before_train(void **state) {
  (void)state;
  tpt_trainer *t = make_trainer(1, 2, 3);
  ok(tpt_trainer_set_run_step(t, one_hook, NULL, NULL));
  expect_code(tpt_trainer_set_global_step(t, -1), TPT_ERR_INVALID_ARGUMENT, ">= 0");
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_BEFORE_EPOCH;
  d.fn = restore_cb;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
  ok(tpt_trainer_run(t));
  int64_t g;
  ok(tpt_trainer_global_step(&g, t));
  assert_int_equal(g, 106);
  tpt_trainer_free(t);
}

/* ------------------------------------------------------------ precision */

/* y ~ fc(x): records the dtype of the FC layer's output, as computed under
 * the trainer's precision (autocast), and of the cost. */
static tpt_dtype precision_fc_dtype = TPT_DTYPE_F64, precision_cost_dtype = TPT_DTYPE_F64;
/* In the inference runners' calls: fc's output (written by the data-parallel
 * runner's towers at once, so atomic), and the output "prediction" as the
 * inferencers receive it (on the trainer's thread). */
static _Atomic int precision_infer_fc_dtype = TPT_DTYPE_F64;
static tpt_dtype precision_inferencer_dtype[2];

static tpt_status *precision_on_outputs(const tpt_tensor *const *outputs, size_t n, int64_t rows, void *ud) {
  (void)n, (void)rows;
  return tpt_tensor_dtype(&precision_inferencer_dtype[(intptr_t)ud], outputs[0]);
}

/* An inferencer that records the dtype it gets in slot `slot`. */
static tpt_inferencer *precision_inferencer(intptr_t slot) {
  const char *outputs[] = {"prediction"};
  tpt_inferencer_desc d = TPT_INFERENCER_DESC_INIT;
  d.outputs = outputs;
  d.n_outputs = 1;
  d.on_outputs = precision_on_outputs;
  d.user_data = (void *)slot;
  tpt_inferencer *inf = NULL;
  ok(tpt_inferencer_new(&inf, &d));
  return inf;
}

static tpt_status *precision_tower(tpt_tower *tower, const tpt_tensor *const *inputs, size_t n, void *ud) {
  (void)n;
  (void)ud;
  tpt_layer_options lo = TPT_LAYER_OPTIONS_INIT;
  tpt_tensor *p = NULL, *cost = NULL;
  tpt_status *st = tpt_layer_fc(&p, tower, "fc", inputs[0], 1, &lo);
  if (!st) st = tpt_loss_mse(&cost, p, inputs[1]);
  int32_t building = 0, training = 0;
  if (!st) st = tpt_tower_is_building(&building, tower);
  if (!st) st = tpt_tower_is_training(&training, tower);
  if (!st && !building && training) st = tpt_tensor_dtype(&precision_fc_dtype, p);
  if (!st && !building && training) st = tpt_tensor_dtype(&precision_cost_dtype, cost);
  tpt_dtype infer_dtype = TPT_DTYPE_F64;
  if (!st && !training) st = tpt_tensor_dtype(&infer_dtype, p);
  if (!st && !training) atomic_store(&precision_infer_fc_dtype, (int)infer_dtype);
  if (!st) st = tpt_tower_set_output(tower, "prediction", p);
  if (!st) st = tpt_tower_set_cost(tower, cost);
  tpt_tensor_free(p);
  tpt_tensor_free(cost);
  return st;
}

/* Trains 4 steps of the model above with `precision`; returns the run's status. */
static tpt_status *precision_run(tpt_precision precision, uint32_t version) {
  float xs[32], ys[8];
  for (int i = 0; i < 32; ++i) xs[i] = (float)(i % 7) * 0.25f - 0.5f;
  for (int i = 0; i < 8; ++i) ys[i] = (float)i * 0.1f;
  const int64_t sx[] = {8, 4}, sy[] = {8, 1}, in_x[] = {-1, 4}, in_y[] = {-1, 1};
  tpt_tensor *x = NULL, *y = NULL;
  ok(tpt_tensor_from_data(&x, xs, sizeof xs, sx, 2, NULL));
  ok(tpt_tensor_from_data(&y, ys, sizeof ys, sy, 2, NULL));
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, in_x, 2}, {"y", TPT_DTYPE_F32, in_y, 2}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 2, precision_tower, NULL, NULL));
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, "sgd"));
  ok(tpt_model_set_optimizer(m, opt));
  tpt_optimizer_free(opt);
  const tpt_tensor *data[] = {x, y};
  tpt_input *in = NULL;
  ok(tpt_input_from_tensors(&in, data, 2, 2, 0, 0));
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.version = version;
  o.max_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.precision = precision;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_set_model(t, m, in));
  /* an inference runner and a data-parallel one (2 towers) on the same rows */
  for (int r = 0; r < 2; ++r) {
    tpt_dataflow *rows = NULL, *batches = NULL;
    ok(tpt_dataflow_from_tensors(&rows, data, 2, 0));
    ok(tpt_dataflow_batch(&batches, rows, 4, 0));
    tpt_dataflow_free(rows);
    tpt_inferencer *inf = precision_inferencer(r);
    tpt_callback *runner = NULL;
    if (r == 0) ok(tpt_inference_runner(&runner, m, batches, &inf, 1));
    else ok(tpt_inference_runner_data_parallel(&runner, m, batches, &inf, 1, 2));
    tpt_dataflow_free(batches);
    ok(tpt_trainer_add_callback(t, runner));
  }
  precision_fc_dtype = precision_cost_dtype = TPT_DTYPE_F64;
  atomic_store(&precision_infer_fc_dtype, (int)TPT_DTYPE_F64);
  precision_inferencer_dtype[0] = precision_inferencer_dtype[1] = TPT_DTYPE_F64;
  tpt_status *st = tpt_trainer_run(t);
  tpt_trainer_free(t);
  tpt_model_free(m);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return st;
}

static void test_precision(void **state) {
  (void)state;
  /* float32: the layer computes in float32 */
  ok(precision_run(TPT_PRECISION_FP32, TPT_TRAINER_OPTIONS_VERSION));
  assert_int_equal(precision_fc_dtype, TPT_DTYPE_F32);
  assert_int_equal(atomic_load(&precision_infer_fc_dtype), TPT_DTYPE_F32);
  assert_int_equal(precision_inferencer_dtype[1], TPT_DTYPE_F32);
  /* bf16-mixed: the linear layer in bfloat16 (autocast's lower-precision
   * list), the MSE loss in float32 (its float32 list) */
  ok(precision_run(TPT_PRECISION_BF16_MIXED, TPT_TRAINER_OPTIONS_VERSION));
  assert_int_equal(precision_fc_dtype, TPT_DTYPE_BF16);
  assert_int_equal(precision_cost_dtype, TPT_DTYPE_F32);
  /* the inference runners' towers too; their inferencers get float32 */
  assert_int_equal(atomic_load(&precision_infer_fc_dtype), TPT_DTYPE_BF16);
  assert_int_equal(precision_inferencer_dtype[0], TPT_DTYPE_F32);
  assert_int_equal(precision_inferencer_dtype[1], TPT_DTYPE_F32);
  /* a version 4 struct ends before precision: float32, whatever follows it */
  ok(precision_run(TPT_PRECISION_BF16_MIXED, 4));
  assert_int_equal(precision_fc_dtype, TPT_DTYPE_F32);
  /* fp16-mixed: refused when the run starts, naming what to use */
  expect_code(precision_run(TPT_PRECISION_FP16_MIXED, TPT_TRAINER_OPTIONS_VERSION), TPT_ERR_UNSUPPORTED,
              "a tower computes on the CPU, whose autocast is bfloat16: use precision bf16-mixed there");
  /* out of range */
  tpt_trainer *t = NULL;
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.precision = (tpt_precision)3;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "options->precision 3 is not a tpt_precision");
  assert_null(t);
}

/* Every field of tpt_loss_scaling out of its range, each refused with its name. */
static void test_loss_scaling_options(void **state) {
  (void)state;
  const double nan = NAN, inf = INFINITY;
  const struct {
    int mode;
    double init, growth, backoff;
    int64_t interval;
    const char *message;
  } cases[] = {
      {3, 65536, 2, 0.5, 2000, "options->loss_scaling.mode 3 is not a tpt_loss_scaling_mode"},
      {-1, 65536, 2, 0.5, 2000, "options->loss_scaling.mode -1 is not a tpt_loss_scaling_mode"},
      {1, 0, 2, 0.5, 2000, "options->loss_scaling.init_scale must be > 0 and a finite float32"},
      {1, nan, 2, 0.5, 2000, "options->loss_scaling.init_scale must be > 0 and a finite float32"},
      {1, inf, 2, 0.5, 2000, "options->loss_scaling.init_scale must be > 0 and a finite float32"},
      {1, 1e39, 2, 0.5, 2000, "options->loss_scaling.init_scale must be > 0 and a finite float32"},
      {1, 65536, 1, 0.5, 2000, "options->loss_scaling.growth_factor must be a finite number > 1"},
      {1, 65536, nan, 0.5, 2000, "options->loss_scaling.growth_factor must be a finite number > 1"},
      {1, 65536, inf, 0.5, 2000, "options->loss_scaling.growth_factor must be a finite number > 1"},
      {1, 65536, 2, 1, 2000, "options->loss_scaling.backoff_factor must be in (0, 1)"},
      {1, 65536, 2, 0, 2000, "options->loss_scaling.backoff_factor must be in (0, 1)"},
      {1, 65536, 2, nan, 2000, "options->loss_scaling.backoff_factor must be in (0, 1)"},
      {1, 65536, 2, 0.5, 0, "options->loss_scaling.growth_interval must be >= 1, got 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    tpt_trainer *t = NULL;
    tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
    o.loss_scaling.mode = (tpt_loss_scaling_mode)cases[i].mode;
    o.loss_scaling.init_scale = cases[i].init;
    o.loss_scaling.growth_factor = cases[i].growth;
    o.loss_scaling.backoff_factor = cases[i].backoff;
    o.loss_scaling.growth_interval = cases[i].interval;
    expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, cases[i].message);
    assert_null(t);
  }
  /* a version 5 struct ends before loss_scaling: the defaults, whatever follows */
  tpt_trainer *t = NULL;
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.version = 5;
  o.loss_scaling.growth_interval = -7;
  ok(tpt_trainer_new(&t, &o));
  tpt_trainer_free(t);
}

/* ------------------------------------------------------------ options and NULL arguments */

static void test_options_validation(void **state) {
  (void)state;
  tpt_trainer *t = NULL;
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.version = 0;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "TPT_TRAINER_OPTIONS_INIT");
  o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
  o.starting_epoch = 0;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "starting_epoch must be >= 1");
  o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = -2;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "steps_per_epoch");
  o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = -1;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "max_epoch");
  o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
  o.logdir_action = (tpt_logdir_action)9;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "logdir_action 9");
  o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
  o.progress = (tpt_progress)9;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "progress 9");
  o = (tpt_trainer_options)TPT_TRAINER_OPTIONS_INIT;
  o.logdir = "";
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "logdir is empty");
  assert_null(t);
  /* steps_per_epoch not set, and no run_step */
  ok(tpt_trainer_new(&t, NULL));
  expect_code(tpt_trainer_run(t), TPT_ERR_INVALID_ARGUMENT, "steps_per_epoch is not set");
  tpt_trainer_free(t);
  t = make_trainer(1, 1, 3);
  expect_code(tpt_trainer_run(t), TPT_ERR_STATE, "no run_step");
  tpt_trainer_free(t);
}

static void test_null_arguments(void **state) {
  (void)state;
  tpt_trainer *t = make_trainer(1, 1, 1);
  int64_t i64;
  double d;
  size_t n;
  const char *str;
  tpt_tensor *tensor = NULL;
  tpt_callback *cb = NULL;
  cb_state s = {0};
  EXPECT_NULL_ARG(tpt_trainer_new(NULL, NULL), "tpt_trainer_new", "out");
  EXPECT_NULL_ARG(tpt_trainer_set_run_step(NULL, run_step, NULL, NULL), "tpt_trainer_set_run_step", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_set_run_step(t, NULL, NULL, NULL), "tpt_trainer_set_run_step", "run_step");
  EXPECT_NULL_ARG(tpt_trainer_hooked_step(NULL, NULL, NULL), "tpt_trainer_hooked_step", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_run(NULL), "tpt_trainer_run", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_request_stop(NULL), "tpt_trainer_request_stop", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_stop_reason(NULL, t), "tpt_trainer_stop_reason", "out");
  EXPECT_NULL_ARG(tpt_trainer_stop_reason(&str, NULL), "tpt_trainer_stop_reason", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_epoch_num(NULL, t), "tpt_trainer_epoch_num", "out");
  EXPECT_NULL_ARG(tpt_trainer_epoch_num(&i64, NULL), "tpt_trainer_epoch_num", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_local_step(NULL, t), "tpt_trainer_local_step", "out");
  EXPECT_NULL_ARG(tpt_trainer_local_step(&i64, NULL), "tpt_trainer_local_step", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_global_step(NULL, t), "tpt_trainer_global_step", "out");
  EXPECT_NULL_ARG(tpt_trainer_global_step(&i64, NULL), "tpt_trainer_global_step", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_set_global_step(NULL, 1), "tpt_trainer_set_global_step", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_logdir(NULL, t), "tpt_trainer_logdir", "out");
  EXPECT_NULL_ARG(tpt_trainer_logdir(&str, NULL), "tpt_trainer_logdir", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_log(NULL, "x"), "tpt_trainer_log", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_log(t, NULL), "tpt_trainer_log", "message");
  EXPECT_NULL_ARG(tpt_trainer_set_output_scalar(NULL, "x", 1), "tpt_trainer_set_output_scalar", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_set_output_scalar(t, NULL, 1), "tpt_trainer_set_output_scalar", "name");
  EXPECT_NULL_ARG(tpt_trainer_set_output(NULL, "x", tensor), "tpt_trainer_set_output", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_set_output(t, NULL, tensor), "tpt_trainer_set_output", "name");
  EXPECT_NULL_ARG(tpt_trainer_set_output(t, "x", NULL), "tpt_trainer_set_output", "tensor");
  EXPECT_NULL_ARG(tpt_trainer_output_scalar(NULL, t, "x"), "tpt_trainer_output_scalar", "out");
  EXPECT_NULL_ARG(tpt_trainer_output_scalar(&d, NULL, "x"), "tpt_trainer_output_scalar", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_output_scalar(&d, t, NULL), "tpt_trainer_output_scalar", "name");
  EXPECT_NULL_ARG(tpt_trainer_output(NULL, t, "x"), "tpt_trainer_output", "out");
  EXPECT_NULL_ARG(tpt_trainer_output(&tensor, NULL, "x"), "tpt_trainer_output", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_output(&tensor, t, NULL), "tpt_trainer_output", "name");
  EXPECT_NULL_ARG(tpt_callback_new(NULL, NULL), "tpt_callback_new", "out");
  EXPECT_NULL_ARG(tpt_callback_new(&cb, NULL), "tpt_callback_new", "desc");
  EXPECT_NULL_ARG(tpt_callback_periodic_trigger(&cb, NULL, 1, 0, 0), "tpt_callback_periodic_trigger", "inner");
  EXPECT_NULL_ARG(tpt_callback_periodic_trigger(NULL, make_cb(&s, 0, 1), 1, 0, 0), "tpt_callback_periodic_trigger", "out");
  EXPECT_NULL_ARG(tpt_callback_enable_if(&cb, NULL, odd_epoch, NULL, NULL), "tpt_callback_enable_if", "inner");
  EXPECT_NULL_ARG(tpt_callback_enable_if(NULL, make_cb(&s, 0, 1), odd_epoch, NULL, NULL), "tpt_callback_enable_if", "out");
  EXPECT_NULL_ARG(tpt_callback_periodic(&cb, NULL, 1, 0), "tpt_callback_periodic", "inner");
  EXPECT_NULL_ARG(tpt_callback_periodic(NULL, make_cb(&s, 0, 1), 1, 0), "tpt_callback_periodic", "out");
  EXPECT_NULL_ARG(tpt_trainer_add_callback(t, NULL), "tpt_trainer_add_callback", "callback");
  EXPECT_NULL_ARG(tpt_trainer_add_monitor(t, NULL), "tpt_trainer_add_monitor", "monitor");
  EXPECT_NULL_ARG(tpt_trainer_put_scalar(NULL, "x", 1), "tpt_trainer_put_scalar", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_put_scalar(t, NULL, 1), "tpt_trainer_put_scalar", "name");
  EXPECT_NULL_ARG(tpt_trainer_scalar_latest(NULL, &i64, t, "x"), "tpt_trainer_scalar_latest", "value_out");
  EXPECT_NULL_ARG(tpt_trainer_scalar_latest(&d, &i64, NULL, "x"), "tpt_trainer_scalar_latest", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_scalar_latest(&d, &i64, t, NULL), "tpt_trainer_scalar_latest", "name");
  EXPECT_NULL_ARG(tpt_trainer_scalar_history(NULL, NULL, NULL, 0, t, "x"), "tpt_trainer_scalar_history", "count_out");
  EXPECT_NULL_ARG(tpt_trainer_scalar_history(&n, NULL, NULL, 0, NULL, "x"), "tpt_trainer_scalar_history", "trainer");
  EXPECT_NULL_ARG(tpt_trainer_scalar_history(&n, NULL, NULL, 0, t, NULL), "tpt_trainer_scalar_history", "name");
  assert_int_equal(s.destroyed, 3);
  /* a foreign pointer is not taken for a trainer */
  int64_t not_a_trainer[4] = {1, 2, 3, 4};
  expect_code(tpt_trainer_run((tpt_trainer *)not_a_trainer), TPT_ERR_INVALID_ARGUMENT, "not a live tpt_trainer");
  tpt_trainer_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sequence_hooks_0),
      cmocka_unit_test(test_sequence_hooks_1),
      cmocka_unit_test(test_sequence_hooks_2),
      cmocka_unit_test(test_sequence_hooks_mixed),
      cmocka_unit_test(test_sequence_zero_steps),
      cmocka_unit_test(test_sequence_no_epochs),
      cmocka_unit_test(test_stop_from_before_epoch),
      cmocka_unit_test(test_stop_from_trigger_step),
      cmocka_unit_test(test_stop_from_run_step),
      cmocka_unit_test(test_stop_swallowed_by_run_step_still_stops),
      cmocka_unit_test(test_error_from_every_lifecycle_point),
      cmocka_unit_test(test_error_from_step_and_run_step),
      cmocka_unit_test(test_destroy_exactly_once),
      cmocka_unit_test(test_request_stop_from_another_thread),
      cmocka_unit_test(test_stop_on_signals),
      cmocka_unit_test(test_stop_requested_in_last_step_matches_tensorpack),
      cmocka_unit_test(test_wrappers),
      cmocka_unit_test(test_step_outputs),
      cmocka_unit_test(test_scalars_and_monitors),
      cmocka_unit_test(test_set_global_step_in_before_train),
      cmocka_unit_test(test_options_validation),
      cmocka_unit_test(test_precision),
      cmocka_unit_test(test_loss_scaling_options),
      cmocka_unit_test(test_request_stop_because),
      cmocka_unit_test(test_null_arguments),
  };
  return cmocka_run_group_tests_name("trainer", tests, NULL, NULL);
}
