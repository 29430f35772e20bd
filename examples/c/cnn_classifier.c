/* A small CNN classifier on synthetic images, trained by tptrain.
 *
 * 1x12x12 images of three classes: a bright 4x4 square in the top-left, the
 * bottom-right, or the centre, at a jittered position, on noise. The tower:
 * conv2d 8 (3x3 SAME) -> batch norm -> ReLU -> max pool 2 -> conv2d 16 ->
 * batch norm -> ReLU -> global average pool -> fc 3; softmax cross-entropy;
 * the accuracy and the wrong vector are published as outputs. SGD with
 * momentum, halved learning rate each epoch (a schedule callback).
 * Test accuracy comes from an inference pass on 600 held-out images.
 *
 *   build/examples/cnn_classifier [LOGDIR]   (default train_log/cnn_classifier) */
#include <stdio.h>
#include <stdlib.h>

#include "tptrain_util.h"

enum { S = 12, TRAIN = 3000, TEST = 600, CLASSES = 3 };

static tpt_status *tower(tpt_tower *tower, const tpt_tensor *const *inputs, size_t n, void *user_data) {
  (void)n;
  (void)user_data;
  tpt_layer_options conv = TPT_LAYER_OPTIONS_INIT; /* 3x3, SAME, He init */
  conv.use_bias = 0;                               /* batch norm follows */
  tpt_tensor *x, *logits, *cost, *acc, *wrong; /* the call's tensors go when it returns */
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tower, "conv1", inputs[0], 8, &conv));
  TPT_RETURN_IF_ERROR(tpt_layer_batch_norm(&x, tower, "bn1", x, 0.9, 1e-5));
  TPT_RETURN_IF_ERROR(tpt_layer_activation(&x, x, TPT_ACT_RELU, 0));
  TPT_RETURN_IF_ERROR(tpt_layer_max_pool(&x, x, 2, 2, TPT_PADDING_VALID));
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tower, "conv2", x, 16, &conv));
  TPT_RETURN_IF_ERROR(tpt_layer_batch_norm(&x, tower, "bn2", x, 0.9, 1e-5));
  TPT_RETURN_IF_ERROR(tpt_layer_activation(&x, x, TPT_ACT_RELU, 0));
  TPT_RETURN_IF_ERROR(tpt_layer_global_avg_pool(&x, x));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tower, "fc", x, CLASSES, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, inputs[1]));
  TPT_RETURN_IF_ERROR(tpt_metric_accuracy(&acc, logits, inputs[1]));
  TPT_RETURN_IF_ERROR(tpt_metric_wrong(&wrong, logits, inputs[1], 1));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tower, "accuracy", acc));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tower, "wrong", wrong));
  return tpt_tower_set_cost(tower, cost);
}

static uint32_t rng = 99;
static float uniform01(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)(rng >> 8) / 16777216.0f;
}

static void make_images(float *img, int64_t *label, int n) {
  const int corner[CLASSES][2] = {{1, 1}, {7, 7}, {4, 4}};
  for (int i = 0; i < n; ++i) {
    int c = i % CLASSES;
    label[i] = c;
    float *im = img + (size_t)i * S * S;
    for (int p = 0; p < S * S; ++p) im[p] = uniform01() * 0.6f;
    int r0 = corner[c][0] + (int)(uniform01() * 3) - 1, c0 = corner[c][1] + (int)(uniform01() * 3) - 1;
    for (int r = 0; r < 4; ++r)
      for (int q = 0; q < 4; ++q) im[(r0 + r) * S + c0 + q] += 0.8f;
  }
}

/* After each epoch: halve the learning rate (a schedule). */
static tpt_status *schedule(tpt_trainer *trainer, tpt_event event, const tpt_record *record, void *user_data) {
  (void)event;
  (void)record;
  double lr = 0;
  TPT_RETURN_IF_ERROR(tpt_optimizer_get(&lr, user_data, "learning_rate"));
  TPT_RETURN_IF_ERROR(tpt_optimizer_set(user_data, "learning_rate", lr / 2));
  return tpt_trainer_put_scalar(trainer, "learning_rate", lr / 2);
}

int main(int argc, char **argv) {
  static float train_x[TRAIN * S * S], test_x[TEST * S * S];
  static int64_t train_y[TRAIN], test_y[TEST];
  make_images(train_x, train_y, TRAIN);
  make_images(test_x, test_y, TEST);
  TPT_CHECK_OR_DIE(tpt_manual_seed(1));

  const int64_t sx[] = {-1, 1, S, S}, sy[] = {-1};
  tpt_input_spec spec[] = {{"image", TPT_DTYPE_F32, sx, 4}, {"label", TPT_DTYPE_I64, sy, 1}};
  tpt_model *model = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *sgd = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&sgd, "sgd"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(sgd, "learning_rate", 0.1));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(sgd, "momentum", 0.9));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, sgd));

  const int64_t dx[] = {TRAIN, 1, S, S}, dy[] = {TRAIN}, tx_shape[] = {TEST, 1, S, S}, ty_shape[] = {TEST};
  tpt_tensor *x = NULL, *y = NULL, *tx = NULL, *ty = NULL;
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&x, train_x, dx, 4));
  TPT_CHECK_OR_DIE(tptu_tensor_new(&y, TPT_DTYPE_I64, train_y, dy, 1));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&tx, test_x, tx_shape, 4));
  TPT_CHECK_OR_DIE(tptu_tensor_new(&ty, TPT_DTYPE_I64, test_y, ty_shape, 1));
  const tpt_tensor *data[] = {x, y};
  tpt_input *input = NULL;
  TPT_CHECK_OR_DIE(tpt_input_from_tensors(&input, data, 2, 50, 1, 3));

  tpt_callback_desc desc = TPT_CALLBACK_DESC_INIT;
  desc.name = "lr_schedule";
  desc.events = TPT_EVENT_TRIGGER;
  desc.fn = schedule;
  desc.user_data = sgd;
  tpt_callback *cb = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &desc));

  tpt_trainer_options opts = TPT_TRAINER_OPTIONS_INIT;
  opts.max_epoch = 4;
  opts.logdir = argc > 1 ? argv[1] : "train_log/cnn_classifier";
  opts.logdir_action = TPT_LOGDIR_DELETE;
  tpt_train_config config = TPT_TRAIN_CONFIG_INIT;
  config.options = &opts;
  config.model = model;
  config.input = input;
  config.callbacks = &cb;
  config.n_callbacks = 1;
  TPT_CHECK_OR_DIE(tpt_launch_train(&config));

  const tpt_tensor *test[] = {tx, ty};
  const char *names[] = {"accuracy"};
  tpt_tensor *acc = NULL;
  double accuracy = 0;
  TPT_CHECK_OR_DIE(tpt_model_infer(&acc, model, test, 2, names, 1));
  TPT_CHECK_OR_DIE(tpt_tensor_item(&accuracy, acc));
  printf("test accuracy: %.2f %% on %d held-out images\n", 100 * accuracy, TEST);

  tpt_tensor_free(acc);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  tpt_optimizer_free(sgd);
  tpt_model_free(model);
  return accuracy >= 0.9 ? 0 : 1;
}
