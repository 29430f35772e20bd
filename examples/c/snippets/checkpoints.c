/* docs/checkpoints.md: a training that a ModelSaver checkpoints, stopped
 * after epoch 2, then started again on the same log directory: auto_resume
 * goes on exactly from the latest checkpoint. The part between the [doc]
 * markers is shown in the page (checked by the doc-snippets test); the whole
 * program is built and run by the examples test.
 *
 *   snippet_checkpoints [LOGDIR]   (default train_log/snippet_checkpoints) */
#include <stdio.h>

#include "tptrain_util.h"

enum { ROWS = 256 };

/* y = w x + b. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_tensor *y, *cost;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&y, tw, "fc", in[0], 1, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&cost, y, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

// [doc]
/* Before training (after a resume's restore): where this run starts. */
static tpt_status *starts_at(tpt_trainer *t, tpt_event event, const tpt_record *record, void *user_data) {
  (void)event, (void)record;
  return tpt_trainer_global_step(user_data, t);
}

/* One run of the program, as if started anew: its model, data and trainer. */
static void run(const char *logdir, const tpt_tensor *const xy[2], int64_t max_epoch, int first) {
  const int64_t shape[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}, {"y", TPT_DTYPE_F32, shape, 2}};
  tpt_model *model = NULL;
  tpt_optimizer *adam = NULL;
  tpt_dataflow *rows = NULL, *batches = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&adam, "adam"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(adam, "learning_rate", 0.1));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, adam));
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&rows, xy, 2, /*shuffle=*/1));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batches, rows, 32, 0));

  int64_t start = 0, end = 0;
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_TRAIN;
  d.fn = starts_at;
  d.user_data = &start;
  tpt_callback *cbs[2] = {NULL};
  TPT_CHECK_OR_DIE(tpt_callback_model_saver(&cbs[0], NULL)); /* after every epoch, into logdir */
  TPT_CHECK_OR_DIE(tpt_callback_new(&cbs[1], &d));

  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = max_epoch;
  o.progress = TPT_PROGRESS_OFF;
  o.logdir = logdir;
  o.logdir_action = first ? TPT_LOGDIR_DELETE : TPT_LOGDIR_KEEP; /* the first run starts afresh */
  o.auto_resume = !first; /* with checkpoints in logdir: go on from the latest */
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = model;
  cfg.dataflow = batches;
  cfg.callbacks = cbs;
  cfg.n_callbacks = 2;
  tpt_trainer *t = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_from_config(&t, &cfg));
  TPT_CHECK_OR_DIE(tpt_trainer_run(t));
  TPT_CHECK_OR_DIE(tpt_trainer_global_step(&end, t));
  printf("%s: global_step %lld to %lld\n", first ? "first run" : "resumed", (long long)start, (long long)end);
  tpt_trainer_free(t);
  tpt_dataflow_free(rows);
  tpt_dataflow_free(batches);
  tpt_optimizer_free(adam);
  tpt_model_free(model);
}
// [/doc]

/* Rows of y = 3 x + 2, x spread evenly over [-1, 1): 8 batches of 32 an
 * epoch. Two runs: to epoch 2, then on to epoch 4. */
int main(int argc, char **argv) {
  const char *logdir = argc > 1 ? argv[1] : "train_log/snippet_checkpoints";
  float xv[ROWS], yv[ROWS];
  for (int i = 0; i < ROWS; ++i) {
    xv[i] = (float)(2 * i - ROWS) / ROWS;
    yv[i] = 3 * xv[i] + 2;
  }
  TPT_CHECK_OR_DIE(tpt_manual_seed(0));
  const int64_t shape[] = {ROWS, 1};
  tpt_tensor *x, *y;
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&x, xv, shape, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&y, yv, shape, 2));
  const tpt_tensor *xy[] = {x, y};
  run(logdir, xy, 2, 1);
  run(logdir, xy, 4, 0);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return 0;
}
