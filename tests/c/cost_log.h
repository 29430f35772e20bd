/* The cost of every step, as a user records it: a callback that reads the
 * step's "cost" output after each step (the monitors get only its moving
 * average, once per epoch). */
#ifndef TPT_TEST_COST_LOG_H
#define TPT_TEST_COST_LOG_H

#include <stdlib.h>

#include "tptrain.h"

typedef struct {
  double *values;
  size_t count, capacity;
  const char *output; /* the scalar output recorded; NULL: "cost" */
} cost_log;

static inline tpt_status *cost_log_after_run(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *p) {
  (void)ev, (void)r;
  cost_log *log = p;
  double v = 0;
  tpt_status *st = tpt_trainer_output_scalar(&v, t, log->output ? log->output : "cost");
  if (st) return st;
  if (log->count == log->capacity) {
    size_t cap = log->capacity ? 2 * log->capacity : 64;
    double *grown = realloc(log->values, cap * sizeof *grown);
    if (!grown) return tpt_status_new(TPT_ERR_INTERNAL, "cost_log: out of memory");
    log->values = grown;
    log->capacity = cap;
  }
  log->values[log->count++] = v;
  return NULL;
}

/* Adds the recording callback to `t`; `log` (zeroed) must outlive the run.
 * Free log->values when done. */
static inline tpt_status *cost_log_attach(tpt_trainer *t, cost_log *log) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_AFTER_RUN;
  d.name = "cost_log";
  d.fn = cost_log_after_run;
  d.user_data = log;
  tpt_callback *cb = NULL;
  tpt_status *st = tpt_callback_new(&cb, &d);
  if (st) return st;
  return tpt_trainer_add_callback(t, cb);
}

#endif
