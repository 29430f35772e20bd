/* docs/models.md, "The tower function": a model, its optimizer, a trainer
 * fed by a dataflow, a learning-rate schedule and inference. The part between
 * the [doc] markers is shown in the page (checked by the doc-snippets test);
 * the whole program is built and run by the examples test. */
#include <stdio.h>

#include "tptrain_util.h"

enum { ROWS = 256 };

// [doc]
/* The model for one step: its tensors belong to the call, nothing to free. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *h, *logits, *cost, *acc;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&h, tw, "fc1", in[0], 32, &relu)); /* fc1/W, fc1/b */
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc2", h, 2, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, in[1]));
  TPT_RETURN_IF_ERROR(tpt_metric_accuracy(&acc, logits, in[1]));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "accuracy", acc)); /* a moving summary */
  return tpt_tower_set_cost(tw, cost);
}

/* After each epoch: the learning rate times 0.5, the optimizer reached
 * through the trainer. */
static tpt_status *decay(tpt_trainer *t, tpt_event event, const tpt_record *record, void *user_data) {
  (void)event, (void)record, (void)user_data;
  tpt_optimizer *opt = NULL;
  TPT_RETURN_IF_ERROR(tpt_trainer_optimizer(&opt, t));
  double lr = 0;
  tpt_status *st = tpt_optimizer_get(&lr, opt, "learning_rate");
  if (!st) st = tpt_optimizer_set(opt, "learning_rate", lr * 0.5);
  tpt_optimizer_free(opt);
  return st;
}

static int train(const tpt_tensor *x, const tpt_tensor *y) {
  const int64_t sx[] = {-1, 2}, sy[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"label", TPT_DTYPE_I64, sy, 1}};
  tpt_model *model = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *adam = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&adam, "adam"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(adam, "learning_rate", 0.01));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, adam));

  const tpt_tensor *columns[] = {x, y};
  tpt_dataflow *rows = NULL, *batches = NULL;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&rows, columns, 2, /*shuffle=*/1));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batches, rows, 32, /*remainder=*/0));

  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.name = "lr_decay";
  d.events = TPT_EVENT_TRIGGER;
  d.fn = decay;
  tpt_callback *cb = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &d));

  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT; /* steps_per_epoch: the dataflow's size */
  o.max_epoch = 5;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;     /* tensorpack's TrainConfig */
  cfg.options = &o;
  cfg.model = model;
  cfg.dataflow = batches;                           /* wrapped in a queue input */
  cfg.callbacks = &cb;
  cfg.n_callbacks = 1;
  TPT_CHECK_OR_DIE(tpt_launch_train(&cfg));         /* launch_train_with_config */

  const char *names[] = {"accuracy"};
  const tpt_tensor *inputs[] = {x, y};
  tpt_tensor *acc = NULL;
  TPT_CHECK_OR_DIE(tpt_model_infer(&acc, model, inputs, 2, names, 1)); /* an inference tower */
  double a = 0;
  TPT_CHECK_OR_DIE(tpt_tensor_item(&a, acc));
  printf("training accuracy %.3f\n", a);
  tpt_tensor_free(acc);
  tpt_dataflow_free(rows);
  tpt_dataflow_free(batches);
  tpt_optimizer_free(adam);
  tpt_model_free(model);
  return a > 0.9 ? 0 : 1;
}
// [/doc]

/* Two classes: which side of the line x0 = x1 a point lies on. */
int main(void) {
  float xv[ROWS * 2];
  int64_t yv[ROWS];
  uint32_t r = 7;
  for (int i = 0; i < ROWS; ++i) {
    for (int j = 0; j < 2; ++j) {
      r = r * 1664525u + 1013904223u;
      xv[i * 2 + j] = (float)(r >> 8) / 8388608.0f - 1.0f;
    }
    yv[i] = xv[i * 2] > xv[i * 2 + 1];
  }
  TPT_CHECK_OR_DIE(tpt_manual_seed(0));
  const int64_t sx[] = {ROWS, 2}, sy[] = {ROWS};
  tpt_tensor *x = NULL, *y = NULL;
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&x, xv, sx, 2));
  tpt_tensor_options io = TPT_TENSOR_OPTIONS_INIT;
  io.dtype = TPT_DTYPE_I64;
  TPT_CHECK_OR_DIE(tpt_tensor_from_data(&y, yv, sizeof yv, sy, 1, &io));
  int rc = train(x, y);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return rc;
}
