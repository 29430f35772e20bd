/* docs/towers.md: a model trained on 2 replicated CPU towers
 * (tensorpack's SyncMultiGPUTrainerReplicated). The part between the [doc]
 * markers is shown in the page (checked by the doc-snippets test); the whole
 * program is built and run by the examples test. */
#include <stdio.h>

#include "tptrain_util.h"

enum { ROWS = 256 };

// [doc]
/* y = w x + b. Both towers call it at once, each on a thread and a batch of
 * its own (tpt_tower_index says which), so it keeps no state. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_tensor *y, *cost;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&y, tw, "fc", in[0], 1, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&cost, y, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

static double variable(tpt_model *model, const char *name) {
  tpt_tensor *v = NULL;
  double value = 0;
  TPT_CHECK_OR_DIE(tpt_model_variable(&v, model, name)); /* tower 0's: the model's own */
  TPT_CHECK_OR_DIE(tpt_tensor_item(&value, v));
  tpt_tensor_free(v);
  return value;
}

static void train(tpt_dataflow *batches) {
  const int64_t shape[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}, {"y", TPT_DTYPE_F32, shape, 2}};
  tpt_model *model = NULL;
  tpt_optimizer *sgd = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&sgd, "sgd"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(sgd, "learning_rate", 0.3));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, sgd));

  tpt_towers_options towers = TPT_TOWERS_OPTIONS_INIT;
  towers.strategy = TPT_STRATEGY_REPLICATED; /* the default */
  towers.n_towers = 2;                       /* devices NULL: both on the CPU */
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT; /* steps_per_epoch: batches / towers */
  o.max_epoch = 5;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = model;
  cfg.dataflow = batches;
  cfg.towers = &towers; /* NULL: the simple trainer */
  tpt_trainer *t = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_from_config(&t, &cfg));
  TPT_CHECK_OR_DIE(tpt_trainer_run(t));
  int64_t steps = 0;
  TPT_CHECK_OR_DIE(tpt_trainer_global_step(&steps, t));
  printf("%lld steps of 2 towers: y = %.2f x + %.2f\n", (long long)steps, variable(model, "fc/W"),
         variable(model, "fc/b"));
  tpt_trainer_free(t);
  tpt_optimizer_free(sgd);
  tpt_model_free(model);
}
// [/doc]

/* Rows of y = 3 x + 2, x spread evenly over [-1, 1), in batches of 16: 16
 * batches a pass, 8 steps of 2 towers. */
int main(void) {
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
  const tpt_tensor *columns[] = {x, y};
  tpt_dataflow *rows, *batches;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&rows, columns, 2, /*shuffle=*/1));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batches, rows, 16, 0));
  train(batches);
  tpt_dataflow_free(rows);
  tpt_dataflow_free(batches);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return 0;
}
