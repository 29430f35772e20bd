/* A training that is not gradient based: estimate pi by Monte Carlo.
 *
 * "Training is running something again and again": each step draws 10,000
 * points in the unit square (a deterministic xorshift64* generator), refines
 * the running estimate of pi and its standard error, and puts both as
 * scalars (they land in stats.json and the per-epoch printout). A callback
 * logs the estimate after each epoch; run_step stops training once the
 * standard error falls below 0.0005.
 *
 *   build/examples/monte_carlo [LOGDIR]      (default train_log/monte_carlo) */
#include <math.h>
#include <stdio.h>

#include "tptrain_util.h"

typedef struct {
  uint64_t rng;
  uint64_t inside, total;
  double estimate, std_error;
} mc_state;

static uint64_t xorshift64star(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static double uniform(uint64_t *s) { return (double)(xorshift64star(s) >> 11) * (1.0 / 9007199254740992.0); }

/* One hooked step: the work whose outputs callbacks may read. */
static tpt_status *sample(tpt_trainer *trainer, void *user_data) {
  mc_state *mc = user_data;
  for (int i = 0; i < 10000; ++i) {
    double x = uniform(&mc->rng), y = uniform(&mc->rng);
    mc->inside += x * x + y * y <= 1.0;
  }
  mc->total += 10000;
  double p = (double)mc->inside / (double)mc->total;
  mc->estimate = 4.0 * p;
  mc->std_error = 4.0 * sqrt(p * (1.0 - p) / (double)mc->total);
  TPT_RETURN_IF_ERROR(tpt_trainer_set_output_scalar(trainer, "pi_estimate", mc->estimate));
  return NULL;
}

static tpt_status *run_step(tpt_trainer *trainer, void *user_data) {
  mc_state *mc = user_data;
  TPT_RETURN_IF_ERROR(tpt_trainer_hooked_step(trainer, sample, mc));
  TPT_RETURN_IF_ERROR(tpt_trainer_put_scalar(trainer, "pi_estimate", mc->estimate));
  TPT_RETURN_IF_ERROR(tpt_trainer_put_scalar(trainer, "std_error", mc->std_error));
  if (mc->std_error < 0.0005) {
    char reason[96];
    snprintf(reason, sizeof reason, "converged: standard error %.6f < 0.0005", mc->std_error);
    return tpt_status_new(TPT_STOP, reason);
  }
  return NULL;
}

static tpt_status *report(tpt_trainer *trainer, tpt_event event, const tpt_record *record, void *user_data) {
  mc_state *mc = user_data;
  (void)event;
  (void)record;
  char line[128];
  snprintf(line, sizeof line, "pi ~ %.6f +- %.6f after %llu points", mc->estimate, mc->std_error,
           (unsigned long long)mc->total);
  return tpt_trainer_log(trainer, line);
}

int main(int argc, char **argv) {
  mc_state mc = {0x9E3779B97F4A7C15ULL, 0, 0, 0, 0};

  tpt_trainer_options opts = TPT_TRAINER_OPTIONS_INIT;
  opts.steps_per_epoch = 50;
  opts.max_epoch = 100;
  opts.logdir = argc > 1 ? argv[1] : "train_log/monte_carlo";
  opts.logdir_action = TPT_LOGDIR_DELETE;
  tpt_trainer *trainer = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_new(&trainer, &opts));
  TPT_CHECK_OR_DIE(tpt_trainer_set_run_step(trainer, run_step, &mc, NULL));

  tpt_callback_desc desc = TPT_CALLBACK_DESC_INIT;
  desc.name = "report";
  desc.events = TPT_EVENT_TRIGGER; /* after each epoch */
  desc.fn = report;
  desc.user_data = &mc;
  tpt_callback *cb = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &desc));
  TPT_CHECK_OR_DIE(tpt_trainer_add_callback(trainer, cb));

  TPT_CHECK_OR_DIE(tpt_trainer_run(trainer));

  const char *reason = NULL, *logdir = NULL;
  int64_t steps = 0;
  TPT_CHECK_OR_DIE(tpt_trainer_stop_reason(&reason, trainer));
  TPT_CHECK_OR_DIE(tpt_trainer_global_step(&steps, trainer));
  TPT_CHECK_OR_DIE(tpt_trainer_logdir(&logdir, trainer));
  printf("pi ~ %.6f (error %.2e) after %lld steps; stopped: %s; stats in %s/stats.json\n", mc.estimate,
         fabs(mc.estimate - 3.14159265358979), (long long)steps, reason ? reason : "no (ran to max_epoch)", logdir);
  tpt_trainer_free(trainer);
  return reason ? 0 : 1;
}
