/* An MLP regression on synthetic data, trained by tptrain's simple trainer.
 *
 * y = sin(3 x0) + x1 * x2 + noise, x in [-1, 1]^3; a tower function with two
 * hidden fully-connected layers (ReLU) and an MSE cost; Adam; 10 epochs over
 * 4,096 rows in batches of 64; the held-out cost is measured by an inference
 * pass after each epoch (a callback), and put as the scalar "val_cost".
 *
 *   build/examples/mlp_regression [LOGDIR]   (default train_log/mlp_regression) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tptrain_util.h"

enum { ROWS = 4096, VAL = 512, IN = 3 };

static tpt_status *tower(tpt_tower *tower, const tpt_tensor *const *inputs, size_t n, void *user_data) {
  (void)n;
  (void)user_data;
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *h, *pred, *cost; /* the call's tensors go when it returns: nothing to free */
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&h, tower, "fc1", inputs[0], 64, &relu));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&h, tower, "fc2", h, 64, &relu));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&pred, tower, "out", h, 1, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&cost, pred, inputs[1]));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tower, "prediction", pred));
  return tpt_tower_set_cost(tower, cost);
}

typedef struct {
  tpt_model *model;
  tpt_tensor *x, *y;
  double last;
} validation;

/* After each epoch: the cost on held-out rows, through an inference tower. */
static tpt_status *validate(tpt_trainer *trainer, tpt_event event, const tpt_record *record, void *user_data) {
  (void)event;
  (void)record;
  validation *v = user_data;
  const tpt_tensor *inputs[] = {v->x, v->y};
  const char *names[] = {"cost"};
  tpt_tensor *cost = NULL;
  TPT_RETURN_IF_ERROR(tpt_model_infer(&cost, v->model, inputs, 2, names, 1)); /* the callback's: freed for us */
  TPT_RETURN_IF_ERROR(tpt_tensor_item(&v->last, cost));
  return tpt_trainer_put_scalar(trainer, "val_cost", v->last);
}

static void make_data(float *x, float *y, int rows, uint32_t seed) {
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < IN; ++j) {
      seed = seed * 1664525u + 1013904223u;
      x[i * IN + j] = (float)(seed >> 8) / 8388608.0f - 1.0f;
    }
    seed = seed * 1664525u + 1013904223u;
    float noise = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 0.05f;
    y[i] = sinf(3 * x[i * IN]) + x[i * IN + 1] * x[i * IN + 2] + noise;
  }
}

int main(int argc, char **argv) {
  static float x[ROWS * IN], y[ROWS], vx[VAL * IN], vy[VAL];
  make_data(x, y, ROWS, 1);
  make_data(vx, vy, VAL, 2);
  TPT_CHECK_OR_DIE(tpt_manual_seed(0));

  const int64_t sx[] = {-1, IN}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *model = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *adam = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&adam, "adam"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(adam, "learning_rate", 3e-3));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, adam));

  const int64_t dx[] = {ROWS, IN}, dy[] = {ROWS, 1}, vdx[] = {VAL, IN}, vdy[] = {VAL, 1};
  tpt_tensor *tx = NULL, *ty = NULL;
  validation val = {model, NULL, NULL, 0};
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&tx, x, dx, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&ty, y, dy, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&val.x, vx, vdx, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&val.y, vy, vdy, 2));
  const tpt_tensor *data[] = {tx, ty};
  tpt_input *input = NULL;
  TPT_CHECK_OR_DIE(tpt_input_from_tensors(&input, data, 2, 64, 1, 7));

  tpt_callback_desc desc = TPT_CALLBACK_DESC_INIT;
  desc.name = "validation";
  desc.events = TPT_EVENT_TRIGGER;
  desc.fn = validate;
  desc.user_data = &val;
  tpt_callback *cb = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &desc));

  tpt_trainer_options opts = TPT_TRAINER_OPTIONS_INIT; /* steps_per_epoch: 4096 / 64 */
  opts.max_epoch = 10;
  opts.logdir = argc > 1 ? argv[1] : "train_log/mlp_regression";
  opts.logdir_action = TPT_LOGDIR_DELETE;
  tpt_train_config config = TPT_TRAIN_CONFIG_INIT;
  config.options = &opts;
  config.model = model;
  config.input = input;
  config.callbacks = &cb;
  config.n_callbacks = 1;
  TPT_CHECK_OR_DIE(tpt_launch_train(&config));

  printf("held-out MSE after 10 epochs: %.4f (noise variance %.5f)\n", val.last, 0.05 * 0.05 / 12);
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  tpt_tensor_free(val.x);
  tpt_tensor_free(val.y);
  tpt_optimizer_free(adam);
  tpt_model_free(model);
  return val.last < 0.02 ? 0 : 1;
}
