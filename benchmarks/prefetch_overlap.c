/* Benchmark prefetch-overlap: a dataflow whose every batch costs D ms of CPU
 * work and a training step that costs C ms (a tower function that spins, one
 * intra-op thread), trained through a TrainConfig given the dataflow (the
 * default: a queue input, whose thread prepares batches while the step
 * runs) and through a feed input (the naive way: the training thread makes
 * each batch, then trains on it). With prefetching the step should take
 * max(C, D); fed naively, C + D.
 *
 *   bench_prefetch_overlap [C_MS] [D_MS] [STEPS]   (defaults 20 15 100)
 *
 * The last line is `prefetch-overlap ratio=R goal=0.95`, R = max(C, D) /
 * (measured ms per step with the default prefetch). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tptrain_util.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Busy work (not a sleep: both sides need a core). */
static volatile double sink;
static void spin(double ms) {
  const double end = now_ms() + ms;
  double x = 1;
  while (now_ms() < end)
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  sink = x;
}

typedef struct {
  double cost_ms;
} work;

static tpt_status *next_batch(tpt_datapoint *dp, void *user_data) {
  spin(((work *)user_data)->cost_ms);
  const float x[4] = {1, 2, 3, 4};
  const int64_t shape[] = {4, 1};
  tpt_tensor *t = NULL;
  TPT_RETURN_IF_ERROR(tptu_tensor_f32(&t, x, shape, 2));
  tpt_status *st = tpt_datapoint_set(dp, 0, t);
  tpt_tensor_free(t);
  return st;
}

static tpt_status *tower(tpt_tower *tower, const tpt_tensor *const *inputs, size_t n, void *user_data) {
  (void)n;
  int32_t building = 0;
  TPT_RETURN_IF_ERROR(tpt_tower_is_building(&building, tower));
  if (!building) spin(((work *)user_data)->cost_ms);
  tpt_tensor *y = NULL, *cost = NULL;
  tpt_status *st = tpt_layer_fc(&y, tower, "fc", inputs[0], 1, NULL);
  if (!st) st = tpt_loss_mse(&cost, y, inputs[0]);
  if (!st) st = tpt_tower_set_cost(tower, cost);
  tpt_tensor_free(y);
  tpt_tensor_free(cost);
  return st;
}

/* The time from the end of warm-up step `warmup` to the end of training. */
typedef struct {
  int64_t warmup;
  double start, end;
} timing;

static tpt_status *clock_cb(tpt_trainer *trainer, tpt_event event, const tpt_record *record, void *user_data) {
  (void)record;
  timing *t = user_data;
  int64_t step = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_global_step(&step, trainer));
  if (event == TPT_EVENT_AFTER_RUN && step == t->warmup - 1) t->start = now_ms();
  if (event == TPT_EVENT_AFTER_TRAIN) t->end = now_ms();
  return NULL;
}

/* ms per step over `steps` steps after 5 warm-up steps, fed by `kind`. */
static double run(tpt_input_kind kind, work *step, work *data, int64_t steps) {
  tpt_dataflow_callbacks cb = TPT_DATAFLOW_CALLBACKS_INIT;
  cb.next = next_batch;
  tpt_dataflow *df = NULL;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_callbacks(&df, &cb, data, NULL));
  const int64_t sx[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}};
  tpt_model *model = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 1, tower, step, NULL));
  tpt_optimizer *sgd = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&sgd, "sgd"));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, sgd));

  timing t = {5, 0, 0};
  tpt_callback_desc desc = TPT_CALLBACK_DESC_INIT;
  desc.name = "bench_clock";
  desc.events = TPT_EVENT_AFTER_RUN | TPT_EVENT_AFTER_TRAIN;
  desc.fn = clock_cb;
  desc.user_data = &t;
  tpt_callback *clock = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&clock, &desc));

  tpt_trainer_options opts = TPT_TRAINER_OPTIONS_INIT;
  opts.steps_per_epoch = t.warmup + steps;
  opts.max_epoch = 1;
  opts.default_callbacks = 0;
  tpt_train_config config = TPT_TRAIN_CONFIG_INIT;
  config.options = &opts;
  config.model = model;
  config.callbacks = &clock;
  config.n_callbacks = 1;
  if (kind == TPT_INPUT_QUEUE) {
    config.dataflow = df; /* the default: what a TrainConfig does with a dataflow */
  } else {
    tpt_input_options io = TPT_INPUT_OPTIONS_INIT;
    io.kind = kind;
    TPT_CHECK_OR_DIE(tpt_input_from_dataflow(&config.input, df, &io));
  }
  TPT_CHECK_OR_DIE(tpt_launch_train(&config));
  tpt_optimizer_free(sgd);
  tpt_model_free(model);
  tpt_dataflow_free(df);
  return (t.end - t.start) / (double)steps;
}

int main(int argc, char **argv) {
  work step = {argc > 1 ? atof(argv[1]) : 20}, data = {argc > 2 ? atof(argv[2]) : 15};
  const int64_t steps = argc > 3 ? atoll(argv[3]) : 100;
  TPT_CHECK_OR_DIE(tpt_set_num_threads(1));
  const double best = step.cost_ms > data.cost_ms ? step.cost_ms : data.cost_ms;
  const double naive = run(TPT_INPUT_FEED, &step, &data, steps);
  const double prefetch = run(TPT_INPUT_QUEUE, &step, &data, steps);
  printf("step C = %.1f ms, dataflow D = %.1f ms per batch, %lld steps\n", step.cost_ms, data.cost_ms,
         (long long)steps);
  printf("naive feed (FeedInput):        %.2f ms/step (C + D = %.1f)\n", naive, step.cost_ms + data.cost_ms);
  printf("default prefetch (QueueInput): %.2f ms/step (max(C, D) = %.1f)\n", prefetch, best);
  printf("naive / prefetch: %.2fx\n", naive / prefetch);
  printf("baseline for the last line: max(C, D), perfect overlap\n");
  printf("prefetch-overlap ratio=%.3f goal=0.95\n", best / prefetch);
  return 0;
}
