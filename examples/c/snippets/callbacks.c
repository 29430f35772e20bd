/* docs/callbacks.md: a trainer with validation (an InferenceRunner), a
 * learning-rate schedule and a callback of our own that stops training when
 * the validation cost is low enough. The part between the [doc] markers is
 * shown in the page (checked by the doc-snippets test); the whole program is
 * built and run by the examples test. */
#include <stdio.h>

#include "tptrain_util.h"

/* Rows of y = 3 x + 2 with n values of x spread evenly over [-1, 1). */
static void line(tpt_tensor **x, tpt_tensor **y, int n) {
  float xv[256], yv[256];
  for (int i = 0; i < n; ++i) {
    xv[i] = (float)(2 * i - n) / (float)n;
    yv[i] = 3 * xv[i] + 2;
  }
  const int64_t shape[] = {n, 1};
  TPT_CHECK_OR_DIE(tptu_tensor_f32(x, xv, shape, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(y, yv, shape, 2));
}

// [doc]
/* y = w x + b: one fully-connected unit, the mean squared error as the cost
 * (which is also the output "cost"). */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_tensor *y, *cost;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&y, tw, "fc", in[0], 1, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&cost, y, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

/* A callback of our own: after each epoch, after the InferenceRunner has put
 * validation_cost, a graceful stop once it is small enough. */
static tpt_status *good_enough(tpt_trainer *t, tpt_event event, const tpt_record *record, void *user_data) {
  (void)event, (void)record, (void)user_data;
  double cost = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_scalar_latest(&cost, NULL, t, "validation_cost"));
  return cost < 1e-4 ? tpt_status_new(TPT_STOP, "validation_cost < 1e-4") : NULL;
}

static void train(tpt_dataflow *batches, tpt_dataflow *validation) {
  const int64_t shape[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, shape, 2}, {"y", TPT_DTYPE_F32, shape, 2}};
  tpt_model *model = NULL;
  tpt_optimizer *sgd = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&sgd, "sgd"));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, sgd));

  const char *outputs[] = {"cost"};
  const tpt_schedule_point lr[] = {{0, 0.3}, {2, 0.1}}; /* from the start; after epoch 2 */
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.name = "good_enough";
  d.events = TPT_EVENT_TRIGGER;
  d.fn = good_enough;
  tpt_callback *cbs[3] = {NULL};
  TPT_CHECK_OR_DIE(tpt_inference_runner_new(&cbs[0], model, validation, outputs, 1));
  TPT_CHECK_OR_DIE(tpt_callback_scheduled_hyperparam(&cbs[1], sgd, "learning_rate", lr, 2, 0));
  TPT_CHECK_OR_DIE(tpt_callback_new(&cbs[2], &d)); /* after the runner: it reads its scalar */

  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 20;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = model;
  cfg.dataflow = batches;
  cfg.callbacks = cbs;
  cfg.n_callbacks = 3;
  tpt_trainer *t = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_from_config(&t, &cfg)); /* takes the callbacks */
  TPT_CHECK_OR_DIE(tpt_trainer_run(t));

  const char *reason = NULL;
  int64_t epoch = 0;
  double rate = 0;
  TPT_CHECK_OR_DIE(tpt_trainer_stop_reason(&reason, t));
  TPT_CHECK_OR_DIE(tpt_trainer_epoch_num(&epoch, t));
  TPT_CHECK_OR_DIE(tpt_optimizer_get(&rate, sgd, "learning_rate"));
  printf("stopped after epoch %lld (%s) at learning_rate %g\n", (long long)epoch, reason ? reason : "-", rate);
  tpt_trainer_free(t);
  tpt_optimizer_free(sgd);
  tpt_model_free(model);
}
// [/doc]

int main(void) {
  TPT_CHECK_OR_DIE(tpt_manual_seed(0));
  tpt_tensor *x, *y, *vx, *vy;
  line(&x, &y, 256);
  line(&vx, &vy, 64);
  const tpt_tensor *rows[] = {x, y}, *val_rows[] = {vx, vy};
  tpt_dataflow *df, *batches, *val, *val_batches;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&df, rows, 2, /*shuffle=*/1));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batches, df, 32, 0));
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&val, val_rows, 2, 0));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&val_batches, val, 32, 1));
  train(batches, val_batches);
  tpt_dataflow_free(df);
  tpt_dataflow_free(batches);
  tpt_dataflow_free(val);
  tpt_dataflow_free(val_batches);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_tensor_free(vx);
  tpt_tensor_free(vy);
  return 0;
}
