/* A training that checkpoints and resumes, for the kill-and-resume test
 * (tests/py/test_resume.py) and the longer soak (scripts/resume-soak).
 *
 *   resume_child train LOGDIR FINAL [--sleep-us N] [--stop-at N] [--every K] [--workers N] [--say-steps 1]
 *       Trains an MLP with dropout (Adam, 4 epochs x 10 steps) on a shuffled,
 *       batched dataflow read by the queue input (a parallel map in it with
 *       --workers), with ModelSaver every K steps (default 3) and a callback
 *       with state of its own. With auto_resume it goes on from LOGDIR's
 *       latest checkpoint. At the end of a run that was not stopped it writes
 *       the whole final state (tpt_trainer_save_checkpoint) to FINAL.
 *       --stop-at N stops (gracefully) at global step N. --say-steps 1 prints
 *       "sleeping after step <global_step>" before each step's sleep.
 *   resume_child check FILE...
 *       Reads each FILE as a checkpoint (tpt_trainer_resume); exit 0 when all are readable.
 *   resume_child restore PATH OUT
 *       Builds the model, restores its variables from PATH (tpt_model_restore)
 *       and writes them out as the checkpoint OUT.
 *
 * Prints "started" at before_train, "resumed_from=<global_step>" when it
 * resumed, and "done" at the end. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tptrain_util.h"

#define CHECK(call)                                                   \
  do {                                                                \
    tpt_status *st_ = (call);                                         \
    if (st_) {                                                        \
      fprintf(stderr, "%s: %s\n", #call, tpt_status_message(st_));   \
      exit(2);                                                        \
    }                                                                 \
  } while (0)

static long sleep_us;
static int say_steps;
static long long stop_at = -1;

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *x = NULL, *logits = NULL, *cost = NULL;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&x, tw, "fc0", in[0], 16, &relu));
  TPT_RETURN_IF_ERROR(tpt_layer_dropout(&x, tw, x, 0.3));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc1", x, 4, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

static tpt_status *square(tpt_datapoint *dp, void *ud) {
  (void)dp, (void)ud;
  return NULL;
}

/* A callback with state: how many steps it saw, across resumes. */
static long long seen;
static tpt_status *counter(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)r, (void)ud;
  if (ev == TPT_EVENT_BEFORE_TRAIN) {
    int64_t gs = 0;
    CHECK(tpt_trainer_global_step(&gs, t));
    if (gs > 0) printf("resumed_from=%lld seen=%lld\n", (long long)gs, seen);
    printf("started\n");
    fflush(stdout);
  }
  if (ev == TPT_EVENT_TRIGGER_STEP) {
    ++seen;
    int64_t gs = 0;
    CHECK(tpt_trainer_global_step(&gs, t));
    if (gs == stop_at) CHECK(tpt_trainer_request_stop(t));
    if (say_steps) {
      printf("sleeping after step %lld\n", (long long)gs);
      fflush(stdout);
    }
    if (sleep_us > 0) {
      struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
      while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      } /* a handled signal does not cut the step short */
    }
  }
  return NULL;
}
static tpt_status *counter_save(tpt_tensor **out, void *ud) {
  (void)ud;
  const int64_t shape[] = {1};
  int64_t v = (int64_t)seen;
  tpt_tensor_options i64 = TPT_TENSOR_OPTIONS_INIT;
  i64.dtype = TPT_DTYPE_I64;
  return tpt_tensor_from_data(out, &v, sizeof v, shape, 1, &i64);
}
static tpt_status *counter_restore(const tpt_tensor *state, void *ud) {
  (void)ud;
  int64_t v = 0;
  TPT_RETURN_IF_ERROR(tpt_tensor_copy_to(&v, sizeof v, state));
  seen = v;
  return NULL;
}

static const char *final_path;
static tpt_status *at_end(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)r, (void)ud;
  const char *reason = NULL;
  TPT_RETURN_IF_ERROR(tpt_trainer_stop_reason(&reason, t));
  if (ev == TPT_EVENT_AFTER_TRAIN && reason == NULL) TPT_RETURN_IF_ERROR(tpt_trainer_save_checkpoint(t, final_path));
  return NULL;
}

static tpt_callback *callback(uint32_t events, tpt_callback_fn fn, const char *name, int with_state) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = events;
  d.fn = fn;
  d.name = name;
  d.chief_only = 0;
  if (with_state) d.save = counter_save, d.restore = counter_restore;
  tpt_callback *cb = NULL;
  CHECK(tpt_callback_new(&cb, &d));
  return cb;
}

static tpt_model *make_model(void) {
  const int64_t in_shape[] = {-1, 8}, label_shape[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, in_shape, 2}, {"label", TPT_DTYPE_I64, label_shape, 1}};
  tpt_model *model = NULL;
  CHECK(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *opt = NULL;
  CHECK(tpt_optimizer_new(&opt, "adam"));
  CHECK(tpt_optimizer_set(opt, "learning_rate", 0.01));
  CHECK(tpt_model_set_optimizer(model, opt));
  tpt_optimizer_free(opt);
  return model;
}

/* Restores the model's variables from PATH (tpt_model_restore), then writes
 * them out as a checkpoint (a run of no steps that saves at after_train). */
static int restore(const char *path, const char *out) {
  tpt_model *model = make_model();
  CHECK(tpt_model_build(model));
  size_t n = 0;
  tpt_status *st = tpt_model_restore(&n, model, path, NULL);
  if (st) {
    fprintf(stderr, "%s\n", tpt_status_message(st));
    return 1;
  }
  final_path = out;
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 0;
  o.steps_per_epoch = 0;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *t = NULL;
  tpt_input *in = NULL;
  CHECK(tpt_trainer_new(&t, &o));
  CHECK(tpt_input_dummy(&in, 2));
  CHECK(tpt_trainer_set_model(t, model, in));
  CHECK(tpt_trainer_add_callback(t, callback(TPT_EVENT_AFTER_TRAIN, at_end, "final", 0)));
  CHECK(tpt_trainer_run(t));
  printf("restored=%zu\n", n);
  tpt_trainer_free(t);
  tpt_model_free(model);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "check")) {
    for (int i = 2; i < argc; ++i) {
      tpt_trainer *t = NULL;
      CHECK(tpt_trainer_new(&t, NULL));
      tpt_status *st = tpt_trainer_resume(t, argv[i]);
      if (st) {
        fprintf(stderr, "unreadable: %s\n", tpt_status_message(st));
        return 1;
      }
      tpt_trainer_free(t);
    }
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "restore")) return restore(argv[2], argv[3]);
  if (argc < 4 || strcmp(argv[1], "train")) {
    fprintf(stderr, "usage: resume_child train LOGDIR FINAL [flags] | resume_child check FILE\n");
    return 2;
  }
  long long every = 3;
  int workers = 0;
  for (int i = 4; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--sleep-us")) sleep_us = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--stop-at")) stop_at = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--every")) every = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--workers")) workers = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--say-steps")) say_steps = atoi(argv[i + 1]);
  }
  final_path = argv[3];
  CHECK(tpt_manual_seed(7));

  /* 96 rows of 8 features, 4 classes, from a fixed formula */
  enum { ROWS = 96, FEATURES = 8 };
  static float xs[ROWS * FEATURES];
  static int64_t ys[ROWS];
  for (int i = 0; i < ROWS; ++i) {
    for (int j = 0; j < FEATURES; ++j) xs[i * FEATURES + j] = (float)((i * 7 + j * 13) % 17) / 17.0f - 0.5f;
    ys[i] = (i * 5) % 4;
  }
  const int64_t xshape[] = {ROWS, FEATURES}, yshape[] = {ROWS};
  tpt_tensor *x = NULL, *y = NULL;
  tpt_tensor_options i64 = TPT_TENSOR_OPTIONS_INIT;
  i64.dtype = TPT_DTYPE_I64;
  CHECK(tpt_tensor_from_data(&x, xs, sizeof xs, xshape, 2, NULL));
  CHECK(tpt_tensor_from_data(&y, ys, sizeof ys, yshape, 1, &i64));
  const tpt_tensor *cols[] = {x, y};
  tpt_dataflow *rows = NULL, *mapped = NULL, *batches = NULL;
  CHECK(tpt_dataflow_from_tensors(&rows, cols, 2, 1));
  if (workers > 0) {
    tpt_parallel_map_options po = TPT_PARALLEL_MAP_OPTIONS_INIT;
    po.n_threads = workers;
    po.ordered = 1;
    po.strict = 1;
    CHECK(tpt_dataflow_parallel_map(&mapped, rows, square, NULL, NULL, &po));
  }
  CHECK(tpt_dataflow_batch(&batches, mapped ? mapped : rows, 8, 1));
  CHECK(tpt_dataflow_set_seed(batches, 3));

  tpt_model *model = make_model();

  tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
  so.every_k_steps = every;
  so.max_to_keep = 3;
  tpt_callback *saver = NULL;
  CHECK(tpt_callback_model_saver(&saver, &so));
  tpt_callback *cbs[] = {callback(TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER_STEP, counter, "counter", 1), saver,
                         callback(TPT_EVENT_AFTER_TRAIN, at_end, "final", 0)};

  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.logdir = argv[2];
  o.logdir_action = TPT_LOGDIR_KEEP;
  o.auto_resume = 1;
  o.max_epoch = 4;
  o.steps_per_epoch = 10;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = model;
  c.dataflow = batches;
  c.callbacks = cbs;
  c.n_callbacks = 3;
  tpt_trainer *t = NULL;
  CHECK(tpt_trainer_from_config(&t, &c));
  CHECK(tpt_trainer_run(t));
  int64_t gs = 0;
  CHECK(tpt_trainer_global_step(&gs, t));
  printf("seen=%lld global_step=%lld\ndone\n", seen, (long long)gs);
  tpt_trainer_free(t);
  tpt_model_free(model);
  tpt_dataflow_free(rows);
  tpt_dataflow_free(mapped);
  tpt_dataflow_free(batches);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return 0;
}
