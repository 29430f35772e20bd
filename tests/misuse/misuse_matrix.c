/* The misuse suite's matrix (issue 12): what a trainer's own run may do to
 * that trainer, from every kind of call the run makes into host code.
 *
 *   sites:   each event callback, run_step, a hooked step's function, an
 *            enable_if predicate, a feed function, the tower function, the
 *            config's init hook, the source of the config's dataflow (on the
 *            queue input's thread), and a thread of the host's own;
 *   actions: tpt_trainer_free (deferred: the run stops with reason
 *            "tpt_trainer_free" and tpt_trainer_run releases the trainer as
 *            it returns), tpt_trainer_run (TPT_ERR_STATE: running already),
 *            tpt_trainer_hooked_step (TPT_ERR_STATE: only inside run_step, on
 *            the training thread, not nested).
 *
 * Each cell is one case of misuse_main.c (a forked child under a time
 * limit); docs/ownership.md states the rules. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "misuse_classes.h"
#include "misuse_common.h"

typedef enum {
  S_SETUP, S_BEFORE_TRAIN, S_BEFORE_EPOCH, S_BEFORE_RUN, S_AFTER_RUN, S_TRIGGER_STEP, S_AFTER_EPOCH,
  S_TRIGGER_EPOCH, S_AFTER_TRAIN,          /* event callbacks */
  S_RUN_STEP, S_STEP, S_PREDICATE,         /* the loop harness */
  S_FEED, S_TOWER, S_INIT,                 /* the model harness */
  S_QUEUE_SOURCE,                          /* the dataflow harness: the queue input's thread */
  S_HOST_THREAD,                           /* a thread of the host's, during the run */
} site;

typedef enum { A_FREE, A_RUN, A_HOOKED } action;

static const uint32_t site_event[] = {
    TPT_EVENT_SETUP,     TPT_EVENT_BEFORE_TRAIN, TPT_EVENT_BEFORE_EPOCH,  TPT_EVENT_BEFORE_RUN, TPT_EVENT_AFTER_RUN,
    TPT_EVENT_TRIGGER_STEP, TPT_EVENT_AFTER_EPOCH, TPT_EVENT_TRIGGER_EPOCH, TPT_EVENT_AFTER_TRAIN,
};

static struct {
  site site;
  action action;
  tpt_trainer *trainer;
  int done;             /* the action ran (once) */
  int action_ok;        /* the action's status was the promised one */
  char reason[64];      /* the stop reason after_train saw */
  int after_train;      /* after_train ran */
  int destroyed;        /* the callback's user_data was destroyed */
  int steps_after_free; /* run_steps that started after the free */
  pthread_t thread;     /* S_HOST_THREAD */
} m;

/* The action, once, from whatever site is running. */
static void act(void) {
  if (m.done) return;
  m.done = 1;
  switch (m.action) {
    case A_FREE:
      tpt_trainer_free(m.trainer);
      tpt_trainer_free(m.trainer); /* twice: still deferred, a no-op */
      m.action_ok = 1;
      break;
    case A_RUN:
      m.action_ok = is_error(tpt_trainer_run(m.trainer), TPT_ERR_STATE, "the trainer is running already");
      break;
    case A_HOOKED:
      m.action_ok = is_error(tpt_trainer_hooked_step(m.trainer, NULL, NULL), TPT_ERR_STATE, "hooked step");
      break;
  }
}

static void *host_thread(void *arg) {
  (void)arg;
  act();
  return NULL;
}

static tpt_status *cb_fn(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)t, (void)r, (void)ud;
  if (ev == TPT_EVENT_AFTER_TRAIN) {
    const char *reason = NULL;
    tpt_status *st = tpt_trainer_stop_reason(&reason, t);
    if (st) tpt_status_free(st);
    snprintf(m.reason, sizeof m.reason, "%s", reason ? reason : "(none)");
    ++m.after_train;
  }
  if (m.site <= S_AFTER_TRAIN && (uint32_t)ev == site_event[m.site]) act();
  return NULL;
}

static void cb_destroy(void *ud) {
  (void)ud;
  ++m.destroyed;
}

static int32_t predicate(tpt_trainer *t, void *ud) {
  (void)t, (void)ud;
  if (m.site == S_PREDICATE) act();
  return 1;
}

static tpt_status *step(tpt_trainer *t, void *ud) {
  (void)t, (void)ud;
  if (m.site == S_STEP) act();
  return NULL;
}

static tpt_status *run_step(tpt_trainer *t, void *ud) {
  (void)ud;
  if (m.done && m.action == A_FREE) ++m.steps_after_free;
  if (m.site == S_RUN_STEP) act();
  if (m.site == S_HOST_THREAD && !m.done) {
    /* the host's thread acts while the run waits in run_step, where a
       hooked step would be allowed on the training thread */
    if (pthread_create(&m.thread, NULL, host_thread, NULL) != 0) return tpt_status_new(TPT_ERR_INTERNAL, "thread");
    pthread_join(m.thread, NULL);
  }
  return tpt_trainer_hooked_step(t, step, NULL);
}

static tpt_status *feed(tpt_tensor **batch, size_t n, void *ud) {
  (void)n, (void)ud;
  if (m.done && m.action == A_FREE) ++m.steps_after_free;
  if (m.site == S_FEED) act();
  batch[0] = mk_tensor();
  return NULL;
}

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  if (m.site == S_TOWER) act(); /* the first tower call is the build, at SETUP */
  return cost_tower(tw, in, n, ud);
}

static tpt_status *init(tpt_model *model, void *ud) {
  (void)model, (void)ud;
  if (m.site == S_INIT) act();
  return NULL;
}

static tpt_status *source_next(tpt_datapoint *dp, void *ud) {
  (void)ud;
  if (m.site == S_QUEUE_SOURCE) act();
  return tpt_datapoint_set(dp, 0, mk_tensor());
}

/* Every event, through an enable_if predicate. */
static tpt_callback *watcher(void) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_ALL;
  d.fn = cb_fn;
  d.destroy = cb_destroy;
  d.name = "matrix";
  tpt_callback *cb = NULL, *wrapped = NULL;
  if (tpt_callback_new(&cb, &d) || tpt_callback_enable_if(&wrapped, cb, predicate, NULL, NULL)) return NULL;
  return wrapped;
}

/* 3 epochs x 2 steps, each run_step one hooked step. */
static tpt_status *run_loop(void) {
  m.trainer = mk_quiet_trainer(2);
  tpt_callback *cb = watcher();
  if (!m.trainer || !cb) return tpt_status_new(TPT_ERR_INTERNAL, "harness");
  tpt_status *st = tpt_trainer_add_callback(m.trainer, cb);
  if (!st) st = tpt_trainer_set_run_step(m.trainer, run_step, NULL, NULL);
  return st ? st : tpt_trainer_run(m.trainer);
}

/* A model trained by a config: a feed input, or a dataflow the trainer wraps
 * in a queue input (its source runs on the queue's thread). */
static tpt_status *run_config(int with_dataflow) {
  tpt_trainer_options o = mk_quiet_options(2);
  tpt_callback *cbs[] = {watcher()};
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = mk_model_with(tower);
  c.callbacks = cbs;
  c.n_callbacks = 1;
  c.init = init;
  if (with_dataflow) {
    tpt_dataflow_callbacks src = TPT_DATAFLOW_CALLBACKS_INIT;
    src.next = source_next;
    tpt_status *st = tpt_dataflow_from_callbacks(&c.dataflow, &src, NULL, NULL);
    if (st) return st;
  } else {
    tpt_status *st = tpt_input_from_feed(&c.input, feed, NULL, NULL);
    if (st) return st;
  }
  if (!cbs[0] || !c.model) return tpt_status_new(TPT_ERR_INTERNAL, "harness");
  tpt_status *st = tpt_trainer_from_config(&m.trainer, &c);
  tpt_model_free(c.model);
  if (c.dataflow) tpt_dataflow_free(c.dataflow);
  return st ? st : tpt_trainer_run(m.trainer);
}

static int cell(site s, action a) {
  m.site = s;
  m.action = a;
  tpt_status *st = s == S_FEED || s == S_TOWER || s == S_INIT ? run_config(0)
                   : s == S_QUEUE_SOURCE                     ? run_config(1)
                                                             : run_loop();
  if (st) fprintf(stderr, "run: %s\n", tpt_status_message(st));
  CHECK(st == NULL); /* the run itself succeeds: the misuse is answered, not propagated */
  CHECK(m.done);
  CHECK(m.action_ok);
  CHECK(m.after_train == 1);
  if (a == A_FREE) {
    if (s == S_AFTER_TRAIN) CHECK(strcmp(m.reason, "(none)") == 0); /* too late to stop anything */
    else CHECK(strcmp(m.reason, "tpt_trainer_free") == 0);
    CHECK(m.steps_after_free <= 1);
    CHECK(m.destroyed == 1); /* released by tpt_trainer_run as it returned */
    return 0;
  }
  /* the run went on to the end, counting one step per run_step */
  int64_t gs = 0;
  CHECK(tpt_trainer_global_step(&gs, m.trainer) == NULL);
  CHECK(gs == 6);
  CHECK(strcmp(m.reason, "(none)") == 0);
  tpt_trainer_free(m.trainer);
  CHECK(m.destroyed == 1);
  return 0;
}

#define CELLS(NAME, SITE)                                              \
  static int free_from_##NAME(void) { return cell(SITE, A_FREE); }     \
  static int run_from_##NAME(void) { return cell(SITE, A_RUN); }       \
  static int hooked_from_##NAME(void) { return cell(SITE, A_HOOKED); }
CELLS(setup, S_SETUP)
CELLS(before_train, S_BEFORE_TRAIN)
CELLS(before_epoch, S_BEFORE_EPOCH)
CELLS(before_run, S_BEFORE_RUN)
CELLS(after_run, S_AFTER_RUN)
CELLS(trigger_step, S_TRIGGER_STEP)
CELLS(after_epoch, S_AFTER_EPOCH)
CELLS(trigger_epoch, S_TRIGGER_EPOCH)
CELLS(after_train, S_AFTER_TRAIN)
CELLS(run_step, S_RUN_STEP)
CELLS(step, S_STEP)
CELLS(predicate, S_PREDICATE)
CELLS(feed, S_FEED)
CELLS(tower, S_TOWER)
CELLS(init, S_INIT)
CELLS(queue_source, S_QUEUE_SOURCE)
CELLS(host_thread, S_HOST_THREAD)

/* tpt_launch_train's trainer is the library's: a free from its callbacks is
 * a no-op and training goes on to the end. */
static tpt_status *launch_cb(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  m.trainer = t; /* known only here */
  if (ev == TPT_EVENT_TRIGGER_STEP) act();
  return cb_fn(t, ev, r, ud);
}

static int free_launch_trainer(void) {
  m.site = S_TRIGGER_STEP;
  m.action = A_FREE;
  tpt_trainer_options o = mk_quiet_options(2);
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER_STEP | TPT_EVENT_AFTER_TRAIN;
  d.fn = launch_cb;
  d.destroy = cb_destroy;
  tpt_callback *cb = NULL;
  CHECK(tpt_callback_new(&cb, &d) == NULL);
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = mk_model_with(cost_tower);
  CHECK(c.model != NULL);
  CHECK(tpt_input_from_feed(&c.input, feed, NULL, NULL) == NULL);
  c.callbacks = &cb;
  c.n_callbacks = 1;
  CHECK(tpt_launch_train(&c) == NULL);
  CHECK(m.done && m.after_train == 1);
  CHECK(strcmp(m.reason, "(none)") == 0); /* not stopped: ran to the end */
  CHECK(m.destroyed == 1);
  return 0;
}

#define ROW(NAME, WHERE)                                                                       \
  {"free the trainer from " WHERE " (deferred to the run's end)", free_from_##NAME, 60},       \
  {"tpt_trainer_run from " WHERE " (TPT_ERR_STATE)", run_from_##NAME, 60},                     \
  {"tpt_trainer_hooked_step from " WHERE " (TPT_ERR_STATE)", hooked_from_##NAME, 60}

const class_case matrix_cases[] = {
    ROW(setup, "a SETUP callback"),
    ROW(before_train, "a BEFORE_TRAIN callback"),
    ROW(before_epoch, "a BEFORE_EPOCH callback"),
    ROW(before_run, "a BEFORE_RUN callback"),
    ROW(after_run, "an AFTER_RUN callback"),
    ROW(trigger_step, "a TRIGGER_STEP callback"),
    ROW(after_epoch, "an AFTER_EPOCH callback"),
    ROW(trigger_epoch, "a TRIGGER_EPOCH callback"),
    ROW(after_train, "an AFTER_TRAIN callback"),
    {"free the trainer from run_step (deferred to the run's end)", free_from_run_step, 60},
    {"tpt_trainer_run from run_step (TPT_ERR_STATE)", run_from_run_step, 60},
    ROW(step, "a hooked step's function"),
    ROW(predicate, "an enable_if predicate"),
    ROW(feed, "a feed function"),
    ROW(tower, "the tower function"),
    ROW(init, "the config's init hook"),
    ROW(queue_source, "the config dataflow's source, on the queue input's thread"),
    ROW(host_thread, "another thread of the host's, mid-run"),
    {"free tpt_launch_train's trainer from a callback (a no-op)", free_launch_trainer, 60},
};
const size_t n_matrix_cases = sizeof matrix_cases / sizeof matrix_cases[0];
