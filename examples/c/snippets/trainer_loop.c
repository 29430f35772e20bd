/* docs/trainer.md, "The loop": run_step, a hooked step, a callback, a stop.
 * The part between the [doc] markers is shown in the page (checked by the
 * doc-snippets test); the whole program is built and run by the examples test. */
#include <stdio.h>

#include "tptrain_util.h"

// [doc]
typedef struct {
  double total;
} state;

/* The work of one step; callbacks' BEFORE_RUN and AFTER_RUN run around it. */
static tpt_status *step(tpt_trainer *t, void *user_data) {
  state *s = user_data;
  s->total += 1;
  return tpt_trainer_set_output_scalar(t, "total", s->total);
}

/* The body of the loop, called steps_per_epoch times per epoch. */
static tpt_status *run_step(tpt_trainer *t, void *user_data) {
  state *s = user_data;
  TPT_RETURN_IF_ERROR(tpt_trainer_hooked_step(t, step, s));
  if (s->total >= 250) return tpt_status_new(TPT_STOP, "enough"); /* a graceful stop */
  return NULL;
}

/* After each epoch: a scalar for the monitors (stats.json, the printer). */
static tpt_status *report(tpt_trainer *t, tpt_event event, const tpt_record *record, void *user_data) {
  (void)event, (void)record;
  const state *s = user_data;
  return tpt_trainer_put_scalar(t, "total", s->total);
}

int main(void) {
  state s = {0};
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 10;         /* inclusive */
  o.steps_per_epoch = 100;  /* 0 runs the callbacks only */
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *t = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_new(&t, &o));
  TPT_CHECK_OR_DIE(tpt_trainer_set_run_step(t, run_step, &s, NULL));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.name = "report";
  d.events = TPT_EVENT_TRIGGER; /* after each epoch */
  d.fn = report;
  d.user_data = &s;
  tpt_callback *cb = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &d));
  TPT_CHECK_OR_DIE(tpt_trainer_add_callback(t, cb)); /* the trainer takes it */
  TPT_CHECK_OR_DIE(tpt_trainer_run(t));
  const char *reason = NULL;
  int64_t steps = 0;
  TPT_CHECK_OR_DIE(tpt_trainer_stop_reason(&reason, t));
  TPT_CHECK_OR_DIE(tpt_trainer_global_step(&steps, t));
  printf("stopped after %lld steps: %s\n", (long long)steps, reason);
  tpt_trainer_free(t);
  return 0;
}
// [/doc]
