/* Two moons, as a new user coming from PyTorch Lightning writes it (issue
 * 34's program): a 2-32-2 MLP on 2 replicated towers, validation accuracy
 * each epoch, a learning-rate schedule, early stopping, checkpoints with the
 * best kept and auto-resume, a logging callback, and a prediction on 5
 * points from the best checkpoint. Run it twice: the second run trains
 * nothing (the first one stopped early) and predicts the same.
 * (The Rust and Go twins: examples/rust/src/bin/two_moons.rs, examples/go/two_moons.)
 *
 *   build/examples/two_moons [LOGDIR]   (default train_log/two_moons) */
#include <math.h>
#include <stdio.h>

#include "tptrain_util.h"

enum { TRAIN = 1000, VAL = 200 };

/* n points of sklearn's make_moons (noise 0.1) and their labels, as a dataflow of batches. */
static tpt_dataflow *moons(int n, uint64_t seed, int64_t batch, int shuffle) {
  float xs[2 * TRAIN];
  int64_t ys[TRAIN];
  for (int i = 0; i < n; ++i) {
    float u[3];
    for (int k = 0; k < 3; ++k) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      u[k] = (float)(seed >> 40) / 16777216.0f;
    }
    float t = 3.14159265f * u[0], x = cosf(t), y = sinf(t);
    ys[i] = i % 2;
    if (ys[i]) x = 1 - x, y = 0.5f - y;
    xs[2 * i] = x + 0.2f * (u[1] - 0.5f);
    xs[2 * i + 1] = y + 0.2f * (u[2] - 0.5f);
  }
  const int64_t sx[] = {n, 2}, sy[] = {n};
  tpt_tensor_options i64 = TPT_TENSOR_OPTIONS_INIT;
  i64.dtype = TPT_DTYPE_I64;
  tpt_tensor *cols[2];
  TPT_CHECK_OR_DIE(tpt_tensor_from_data(&cols[0], xs, sizeof(float) * 2 * (size_t)n, sx, 2, NULL));
  TPT_CHECK_OR_DIE(tpt_tensor_from_data(&cols[1], ys, sizeof(int64_t) * (size_t)n, sy, 1, &i64));
  tpt_dataflow *rows, *batches;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&rows, (const tpt_tensor *const *)cols, 2, shuffle));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batches, rows, batch, !shuffle)); /* validation keeps the remainder */
  tpt_dataflow_free(rows);
  tpt_tensor_free(cols[0]);
  tpt_tensor_free(cols[1]);
  return batches;
}

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *hidden, *logits, *accuracy, *cost; /* the call's tensors go when it returns */
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&hidden, tw, "fc0", in[0], 32, &relu));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc1", hidden, 2, NULL));
  TPT_RETURN_IF_ERROR(tpt_metric_accuracy(&accuracy, logits, in[1]));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, in[1]));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "logits", logits));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "accuracy", accuracy));
  return tpt_tower_set_cost(tw, cost);
}

/* The logging callback: the validation accuracy after each epoch. */
static tpt_status *log_epoch(tpt_trainer *t, tpt_event event, const tpt_record *record, void *user_data) {
  (void)event, (void)record, (void)user_data;
  double acc = 0;
  int64_t epoch = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_scalar_latest(&acc, NULL, t, "validation_accuracy"));
  TPT_RETURN_IF_ERROR(tpt_trainer_epoch_num(&epoch, t));
  printf("epoch %lld: validation accuracy %.3f\n", (long long)epoch, acc);
  return NULL;
}

int main(int argc, char **argv) {
  const char *logdir = argc > 1 ? argv[1] : "train_log/two_moons";
  TPT_CHECK_OR_DIE(tpt_manual_seed(0));
  const int64_t sx[] = {-1, 2}, sy[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"label", TPT_DTYPE_I64, sy, 1}};
  tpt_model *model;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *adam;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&adam, "adam"));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, adam));
  tpt_dataflow *train = moons(TRAIN, 1, 32, 1), *val = moons(VAL, 2, 100, 0);

  tpt_callback *cbs[6];
  const char *outputs[] = {"accuracy"};
  TPT_CHECK_OR_DIE(tpt_inference_runner_new(&cbs[0], model, val, outputs, 1)); /* validation_accuracy */
  const tpt_schedule_point lr[] = {{0, 0.01}, {10, 0.003}};
  TPT_CHECK_OR_DIE(tpt_callback_scheduled_hyperparam(&cbs[1], adam, "learning_rate", lr, 2, 0));
  tpt_early_stopping_options early = TPT_EARLY_STOPPING_OPTIONS_INIT;
  early.maximize = 1;
  TPT_CHECK_OR_DIE(tpt_callback_early_stopping(&cbs[2], "validation_accuracy", &early));
  TPT_CHECK_OR_DIE(tpt_callback_model_saver(&cbs[3], NULL));
  TPT_CHECK_OR_DIE(tpt_callback_max_saver(&cbs[4], "validation_accuracy", NULL, NULL));
  tpt_callback_desc logger = TPT_CALLBACK_DESC_INIT;
  logger.name = "logger";
  logger.events = TPT_EVENT_TRIGGER_EPOCH;
  logger.fn = log_epoch;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cbs[5], &logger));

  tpt_trainer_options options = TPT_TRAINER_OPTIONS_INIT;
  options.max_epoch = 30;
  options.logdir = logdir;
  options.auto_resume = 1;
  tpt_towers_options towers = TPT_TOWERS_OPTIONS_INIT; /* replicated */
  towers.n_towers = 2;
  tpt_train_config config = TPT_TRAIN_CONFIG_INIT;
  config.options = &options;
  config.model = model;
  config.dataflow = train;
  config.towers = &towers;
  config.callbacks = cbs;
  config.n_callbacks = 6;
  tpt_trainer *trainer;
  TPT_CHECK_OR_DIE(tpt_trainer_from_config(&trainer, &config));
  TPT_CHECK_OR_DIE(tpt_trainer_run(trainer));
  const char *reason, *best;
  int64_t epoch;
  TPT_CHECK_OR_DIE(tpt_trainer_stop_reason(&reason, trainer));
  TPT_CHECK_OR_DIE(tpt_trainer_epoch_num(&epoch, trainer));
  if (reason) printf("stopped after epoch %lld: %s\n", (long long)epoch, reason);
  else printf("finished %lld epochs\n", (long long)epoch);

  TPT_CHECK_OR_DIE(tpt_trainer_best_checkpoint(&best, trainer, "validation_accuracy"));
  const char *inputs[] = {"x"}, *names[] = {"logits"};
  tpt_predictor_options po = TPT_PREDICTOR_OPTIONS_INIT;
  po.input_names = inputs;
  po.n_input_names = 1;
  po.checkpoint = best;
  tpt_predictor *predictor;
  TPT_CHECK_OR_DIE(tpt_predictor_new(&predictor, model, names, 1, &po));
  const float pts[] = {-1, 0.2f, 0, 1, 1, -0.5f, 2, 0.5f, 0.5f, 0.25f};
  const int64_t shape[] = {5, 2};
  tpt_tensor *points, *logits;
  TPT_CHECK_OR_DIE(tpt_tensor_from_data(&points, pts, sizeof pts, shape, 2, NULL));
  TPT_CHECK_OR_DIE(tpt_predictor_run(&logits, predictor, (const tpt_tensor *const *)&points, 1));
  float l[10];
  TPT_CHECK_OR_DIE(tpt_tensor_copy_to(l, sizeof l, logits));
  printf("predicted classes from %s: [", best);
  for (int i = 0; i < 5; ++i) printf("%s%d", i ? ", " : "", l[2 * i + 1] > l[2 * i]);
  printf("]\n");

  tpt_tensor_free(points);
  tpt_tensor_free(logits);
  tpt_predictor_free(predictor);
  tpt_trainer_free(trainer);
  tpt_dataflow_free(train);
  tpt_dataflow_free(val);
  tpt_optimizer_free(adam);
  tpt_model_free(model);
  return 0;
}
