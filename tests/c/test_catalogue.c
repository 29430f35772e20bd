/* The callback catalogue and inference through the C API (issue 13):
 * inferencers (ScalarStats, ClassificationError, the host's own) on a
 * runner triggered per epoch and every k steps; HyperParamSetterWithFunc,
 * StatMonitorParamSetter, HumanHyperParamSetter; early stopping;
 * TerminateOnNaN with the ModelSaver keeping the last good checkpoint;
 * ThroughputTracker; the step watchdog; HostMemoryTracker; put_image and the
 * TensorBoard writer; and the errors of each.
 *
 * `test_catalogue tensorboard DIR` trains a little into DIR and exits, and
 * `test_catalogue tensorboard-resume DIR` trains and resumes there:
 * tests/py/test_tensorboard.py reads the event files with its own reader. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_common.h"

/* ---- a 3-class classifier of 4 features */

static int inference_towers_seen[8]; /* the data-parallel runner's towers that ran: 1 + the BLAS's pool size */

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_tensor *logits = NULL, *cost = NULL, *wrong = NULL;
  tpt_status *st = tpt_layer_fc(&logits, tw, "fc", in[0], 3, NULL);
  if (!st) st = tpt_loss_softmax_cross_entropy(&cost, logits, in[1]);
  if (!st) st = tpt_metric_wrong(&wrong, logits, in[1], 1);
  if (!st) st = tpt_tower_set_cost(tw, cost);
  if (!st) st = tpt_tower_set_output(tw, "wrong", wrong);
  if (!st) st = tpt_tower_set_output(tw, "logits", logits);
  char name[32] = "";
  if (!st) st = tpt_tower_name(name, sizeof name, tw);
  if (!st && strncmp(name, "InferenceTower", 14) == 0 && name[14] >= '0' && name[14] <= '7' && name[15] == '\0')
    inference_towers_seen[name[14] - '0'] = 1 + test_blas_pool(); /* each tower writes its own slot */
  return st;
}

static tpt_optimizer *opt; /* the model's, for the setters */

static tpt_model *new_model(void) {
  const int64_t xs[] = {-1, 4}, ys[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, xs, 2}, {"label", TPT_DTYPE_I64, ys, 1}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 2, tower, NULL, NULL));
  ok(tpt_optimizer_new(&opt, "sgd"));
  ok(tpt_optimizer_set(opt, "learning_rate", 0.1));
  ok(tpt_model_set_optimizer(m, opt));
  return m;
}

enum { ROWS = 10 };
static float xs_data[ROWS * 4];
static int64_t labels[ROWS];

/* ROWS rows in batches of 4 (the last one of 2), in order. `nan_row`
 * (>= 0) gets a NaN feature. */
static tpt_dataflow *rows_df(int nan_row, int64_t batch) {
  for (int i = 0; i < ROWS; ++i) {
    for (int j = 0; j < 4; ++j) xs_data[i * 4 + j] = (float)((i * 7 + j * 3) % 5) - 2.0f;
    labels[i] = i % 3;
  }
  if (nan_row >= 0) xs_data[nan_row * 4] = NAN;
  const int64_t xshape[] = {ROWS, 4}, yshape[] = {ROWS};
  tpt_tensor_options lo = TPT_TENSOR_OPTIONS_INIT;
  lo.dtype = TPT_DTYPE_I64;
  tpt_tensor *tx = NULL, *ty = NULL;
  ok(tpt_tensor_from_data(&tx, xs_data, sizeof xs_data, xshape, 2, NULL));
  ok(tpt_tensor_from_data(&ty, labels, sizeof labels, yshape, 1, &lo));
  const tpt_tensor *cols[] = {tx, ty};
  tpt_dataflow *rows = NULL, *b = NULL;
  ok(tpt_dataflow_from_tensors(&rows, cols, 2, 0));
  ok(tpt_dataflow_batch(&b, rows, batch, 1));
  tpt_dataflow_free(rows);
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  return b;
}

static char dir[256];
static void fresh_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/tpt-catalogue-XXXXXX");
  assert_non_null(mkdtemp(dir));
}
static char *path_in(const char *name) {
  static char p[2][512];
  static int k;
  k ^= 1;
  snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
  return p[k];
}
static void remove_dir(void) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') unlink(path_in(e->d_name));
  closedir(d);
  rmdir(dir);
}

/* A trainer of `m` on ROWS rows in batches of 4 (3 steps per epoch), in
 * `dir` when with_dir, quiet. */
static tpt_trainer *trainer_of(tpt_model *m, int64_t epochs, int with_dir, int nan_row) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = epochs;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  if (with_dir) {
    o.logdir = dir;
    o.logdir_action = TPT_LOGDIR_KEEP;
  }
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = m;
  c.dataflow = rows_df(nan_row, 4);
  tpt_trainer *t = NULL;
  ok(tpt_trainer_from_config(&t, &c));
  tpt_dataflow_free(c.dataflow);
  return t;
}

static double latest(tpt_trainer *t, const char *name) {
  double v = NAN;
  ok(tpt_trainer_scalar_latest(&v, NULL, t, name));
  return v;
}
static size_t history_len(tpt_trainer *t, const char *name) {
  size_t n = 0;
  tpt_status *st = tpt_trainer_scalar_history(&n, NULL, NULL, 0, t, name);
  if (st && tpt_status_code(st) == TPT_ERR_NOT_FOUND) {
    tpt_status_free(st);
    return 0;
  }
  ok(st);
  return n;
}

/* A callback from a function (not chief-only). */
static tpt_callback *cb_of(uint32_t events, tpt_callback_fn fn, void *ud) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = events;
  d.fn = fn;
  d.user_data = ud;
  d.chief_only = 0;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  return cb;
}

/* ---- inferencers */

/* The host's inferencer: counts rows and wrong rows from the logits it gets
 * and the labels it knows (rows come in order), independently of the
 * library's wrong output. */
struct counter {
  int befores, batches, afters;
  int64_t rows, wrong;
  int fail_at; /* a batch whose on_outputs fails, or -1 */
  int destroyed;
};
static tpt_status *c_before(void *ud) {
  struct counter *c = ud;
  c->befores++;
  c->rows = c->wrong = 0;
  c->batches = 0;
  return NULL;
}
static tpt_status *c_on(const tpt_tensor *const *outs, size_t n, int64_t rows, void *ud) {
  struct counter *c = ud;
  if (n != 1) return tpt_status_new(TPT_ERR_CALLBACK, "want one output");
  if (c->batches == c->fail_at) {
    c->batches++;
    return tpt_status_new(TPT_ERR_CALLBACK, "the counter refuses this batch");
  }
  float logits[4 * 3];
  if (rows > 4) return tpt_status_new(TPT_ERR_CALLBACK, "batch too large");
  tpt_status *st = tpt_tensor_copy_to(logits, (size_t)rows * 3 * sizeof(float), outs[0]);
  if (st) return st;
  for (int64_t r = 0; r < rows; ++r) {
    int best = 0;
    for (int k = 1; k < 3; ++k)
      if (logits[r * 3 + k] > logits[r * 3 + best]) best = k;
    if (best != labels[c->rows + r]) c->wrong++;
  }
  c->rows += rows;
  c->batches++;
  return NULL;
}
static tpt_status *c_after(tpt_trainer *t, void *ud) {
  struct counter *c = ud;
  c->afters++;
  tpt_status *st = tpt_trainer_put_scalar(t, "host_rows", (double)c->rows);
  if (!st) st = tpt_trainer_put_scalar(t, "host_error", (double)c->wrong / (double)c->rows);
  return st;
}
static void c_destroy(void *ud) { ((struct counter *)ud)->destroyed++; }

static tpt_inferencer *host_inferencer(struct counter *c) {
  static const char *outs[] = {"logits"};
  tpt_inferencer_desc d = TPT_INFERENCER_DESC_INIT;
  d.name = "counter";
  d.outputs = outs;
  d.n_outputs = 1;
  d.before = c_before;
  d.on_outputs = c_on;
  d.after = c_after;
  d.user_data = c;
  d.destroy = c_destroy;
  tpt_inferencer *inf = NULL;
  ok(tpt_inferencer_new(&inf, &d));
  return inf;
}

static tpt_callback *runner_of(tpt_model *m, struct counter *c) {
  static const char *stats[] = {"cost", "wrong"};
  tpt_inferencer *infs[3] = {NULL, NULL, NULL};
  ok(tpt_inferencer_scalar_stats(&infs[0], stats, 2, NULL));
  ok(tpt_inferencer_classification_error(&infs[1], NULL, NULL));
  infs[2] = host_inferencer(c);
  tpt_dataflow *val = rows_df(-1, 4);
  tpt_callback *r = NULL;
  ok(tpt_inference_runner(&r, m, val, infs, 3));
  tpt_dataflow_free(val);
  return r;
}

/* ClassificationError is the wrong rows over all rows (10, in batches of
 * 4, 4, 2), equal to the host's own count from the logits; ScalarStats of a
 * per-row output is its mean over rows; the host inferencer's three calls
 * come in order. */
static void inferencers_per_epoch(void **state) {
  (void)state;
  tpt_model *m = new_model();
  struct counter c = {0, 0, 0, 0, 0, -1, 0};
  tpt_trainer *t = trainer_of(m, 2, 0, -1);
  ok(tpt_trainer_add_callback(t, runner_of(m, &c)));
  ok(tpt_trainer_run(t));
  assert_int_equal(c.befores, 2);
  assert_int_equal(c.afters, 2);
  assert_int_equal(c.batches, 3);
  assert_int_equal(c.rows, ROWS);
  assert_true(latest(t, "host_rows") == ROWS);
  assert_true(fabs(latest(t, "validation_error") - latest(t, "host_error")) < 1e-12);
  assert_true(fabs(latest(t, "validation_wrong") - latest(t, "host_error")) < 1e-12);
  double cost = latest(t, "validation_cost");
  assert_true(cost > 0 && isfinite(cost));
  assert_int_equal(history_len(t, "validation_error"), 2);
  tpt_trainer_free(t);
  assert_int_equal(c.destroyed, 1);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

/* On a PeriodicTrigger every 2 steps (6 steps in 2 epochs) and not per
 * epoch: 3 passes. */
static void inferencers_on_periodic_trigger(void **state) {
  (void)state;
  tpt_model *m = new_model();
  struct counter c = {0, 0, 0, 0, 0, -1, 0};
  tpt_trainer *t = trainer_of(m, 2, 0, -1);
  tpt_callback *every2 = NULL;
  ok(tpt_callback_periodic_trigger(&every2, runner_of(m, &c), 2, 0, 0));
  ok(tpt_trainer_add_callback(t, every2));
  ok(tpt_trainer_run(t));
  assert_int_equal(c.afters, 3);
  assert_int_equal(history_len(t, "validation_error"), 3);
  tpt_trainer_free(t);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

/* tensorpack's DataParallelInferenceRunner with 3 towers: the batches of a
 * pass (4, 4, 2 rows) are inferred at once on InferenceTower0..2 and reach
 * the inferencers in order, so every result is the single runner's. While
 * they run, OpenBLAS's own pool (where there is one) has one thread. */
static void data_parallel_runner(void **state) {
  (void)state;
  tpt_model *m = new_model();
  struct counter c1 = {0, 0, 0, 0, 0, -1, 0}, c3 = {0, 0, 0, 0, 0, -1, 0};
  tpt_trainer *t = trainer_of(m, 1, 0, -1);
  ok(tpt_trainer_add_callback(t, runner_of(m, &c1)));
  ok(tpt_trainer_run(t)); /* one epoch of training: weights that are not the initial ones */
  tpt_trainer_free(t);
  /* the same model, not trained further: a runner of 3 towers on a fresh trainer of 0 steps */
  static const char *stats[] = {"cost", "wrong"};
  tpt_inferencer *infs[3] = {NULL, NULL, NULL};
  ok(tpt_inferencer_scalar_stats(&infs[0], stats, 2, NULL));
  ok(tpt_inferencer_classification_error(&infs[1], NULL, NULL));
  infs[2] = host_inferencer(&c3);
  tpt_dataflow *val = rows_df(-1, 4);
  tpt_callback *r = NULL;
  ok(tpt_inference_runner_data_parallel(&r, m, val, infs, 3, 3));
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 1;
  o.steps_per_epoch = 0; /* callbacks only: the runner triggers after the epoch */
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_add_callback(t, r));
  memset(inference_towers_seen, 0, sizeof inference_towers_seen);
  const int pool = test_blas_pool();
  ok(tpt_trainer_run(t));
  assert_int_equal(test_blas_pool(), pool);
  assert_int_equal(c3.batches, 3);
  assert_int_equal(c3.rows, ROWS);
  assert_true(inference_towers_seen[0] && inference_towers_seen[1] && inference_towers_seen[2]);
  assert_false(inference_towers_seen[3]);
  if (test_blas_pool() > 0)
    for (int k = 0; k < 3; ++k) assert_int_equal(inference_towers_seen[k], 2);
  /* a single runner on the same weights gives the same numbers */
  double err3 = latest(t, "validation_error"), cost3 = latest(t, "validation_cost");
  assert_true(fabs(latest(t, "host_error") - err3) < 1e-12);
  tpt_trainer_free(t);
  struct counter c1b = {0, 0, 0, 0, 0, -1, 0};
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_add_callback(t, runner_of(m, &c1b)));
  ok(tpt_trainer_run(t));
  assert_true(latest(t, "validation_error") == err3);
  assert_true(latest(t, "validation_cost") == cost3);
  tpt_trainer_free(t);
  expect_code(tpt_inference_runner_data_parallel(&r, m, val, NULL, 0, 2), TPT_ERR_INVALID_ARGUMENT, "n_inferencers is 0");
  ok(tpt_inferencer_scalar_stats(&infs[0], stats, 1, NULL));
  expect_code(tpt_inference_runner_data_parallel(&r, m, val, infs, 1, 0), TPT_ERR_INVALID_ARGUMENT, "n_towers is 0");
  tpt_dataflow_free(val);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

/* A host inferencer's error fails training with its message and the
 * batch's number; every handle is released. */
static void inferencer_errors(void **state) {
  (void)state;
  tpt_model *m = new_model();
  struct counter c = {0, 0, 0, 0, 0, 1, 0};
  tpt_trainer *t = trainer_of(m, 2, 0, -1);
  ok(tpt_trainer_add_callback(t, runner_of(m, &c)));
  expect_code2(tpt_trainer_run(t), TPT_ERR_CALLBACK, "the counter refuses this batch", NULL);
  tpt_trainer_free(t);
  assert_int_equal(c.destroyed, 1);

  /* argument errors; the inferencers given to a failed runner are freed */
  tpt_inferencer *inf = NULL;
  tpt_callback *r = NULL;
  static const char *none[] = {"x"};
  expect_code(tpt_inferencer_scalar_stats(&inf, none, 0, NULL), TPT_ERR_INVALID_ARGUMENT, "n_outputs is 0");
  assert_null(inf);
  tpt_inferencer_desc d = TPT_INFERENCER_DESC_INIT;
  struct counter c2 = {0, 0, 0, 0, 0, -1, 0};
  d.user_data = &c2;
  d.destroy = c_destroy;
  expect_code(tpt_inferencer_new(&inf, &d), TPT_ERR_INVALID_ARGUMENT, "desc->on_outputs");
  assert_int_equal(c2.destroyed, 1);
  tpt_dataflow *val = rows_df(-1, 4);
  expect_code(tpt_inference_runner(&r, m, val, NULL, 0), TPT_ERR_INVALID_ARGUMENT, "n_inferencers is 0");
  tpt_inferencer *infs[2] = {host_inferencer(&c2), NULL};
  expect_code(tpt_inference_runner(&r, m, val, infs, 2), TPT_ERR_INVALID_ARGUMENT, "inferencers[1]' is NULL");
  assert_int_equal(c2.destroyed, 2); /* infs[0] was taken and freed */
  assert_null(r);
  /* an output the tower does not have: the run fails naming it */
  static const char *missing[] = {"no_such_output"};
  ok(tpt_inferencer_scalar_stats(&inf, missing, 1, "val"));
  ok(tpt_inference_runner(&r, m, val, &inf, 1));
  t = trainer_of(m, 1, 0, -1);
  ok(tpt_trainer_add_callback(t, r));
  expect_code2(tpt_trainer_run(t), TPT_ERR_NOT_FOUND, "no_such_output", "InferenceRunner: batch 0");
  tpt_trainer_free(t);
  tpt_inferencer_free(NULL);
  tpt_dataflow_free(val);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

/* ---- hyper-parameter setters */

static double lr_seen[16]; /* by epoch, read in BEFORE_EPOCH */
static tpt_status *read_lr(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  int64_t ep = 0;
  tpt_status *st = tpt_trainer_epoch_num(&ep, t);
  if (st) return st;
  if (ep < 16) st = tpt_optimizer_get(&lr_seen[ep], opt, "learning_rate");
  return st;
}

static tpt_status *lr_func(double *value, int64_t epoch, double current, void *ud) {
  (void)current;
  int *calls = ud;
  ++*calls;
  if (epoch == 3) return tpt_status_new(TPT_ERR_CALLBACK, "no value for epoch 3");
  *value = 0.5 / (double)(epoch + 1);
  return NULL;
}

static void hyperparam_func(void **state) {
  (void)state;
  tpt_model *m = new_model();
  int calls = 0;
  tpt_callback *f = NULL;
  ok(tpt_callback_hyperparam_func(&f, opt, "learning_rate", lr_func, &calls, NULL));
  tpt_trainer *t = trainer_of(m, 3, 0, -1);
  ok(tpt_trainer_add_callback(t, f));
  ok(tpt_trainer_add_callback(t, cb_of(TPT_EVENT_BEFORE_EPOCH, read_lr, NULL)));
  /* BEFORE_TRAIN (epoch 0), after epochs 1 and 2, then epoch 3's fails */
  expect_code(tpt_trainer_run(t), TPT_ERR_CALLBACK, "no value for epoch 3");
  assert_int_equal(calls, 4);
  assert_true(lr_seen[1] == 0.5);
  assert_true(lr_seen[2] == 0.25);
  assert_true(fabs(lr_seen[3] - 0.5 / 3) < 1e-15);
  tpt_trainer_free(t);
  expect_code(tpt_callback_hyperparam_func(&f, opt, "no_such_param", lr_func, &calls, NULL),
              TPT_ERR_INVALID_ARGUMENT, "no_such_param");
  EXPECT_NULL_ARG(tpt_callback_hyperparam_func(&f, opt, "learning_rate", NULL, NULL, NULL),
                  "tpt_callback_hyperparam_func", "fn");
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

/* A stat by epoch, put at TRIGGER_EPOCH before the setters run. */
static const double *stat_values;
static tpt_status *put_stat(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  int64_t ep = 0;
  tpt_status *st = tpt_trainer_epoch_num(&ep, t);
  if (!st) st = tpt_trainer_put_scalar(t, "val", stat_values[ep]);
  return st;
}

/* tensorpack's rule, last_k 3, threshold 0.01: a window whose first value
 * was not beaten by more than 0.01 halves the rate and empties the window. */
static void stat_monitor(void **state) {
  (void)state;
  static const double v[] = {0, 1.0, 0.9, 0.895, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8};
  stat_values = v;
  tpt_model *m = new_model();
  tpt_stat_monitor_options so = TPT_STAT_MONITOR_OPTIONS_INIT;
  so.last_k = 3;
  so.threshold = 0.01;
  so.factor = 0.5;
  so.limit = 0.03;
  tpt_callback *s = NULL;
  ok(tpt_callback_stat_monitor_param(&s, opt, "learning_rate", "val", &so));
  tpt_trainer *t = trainer_of(m, 10, 0, -1);
  ok(tpt_trainer_add_callback(t, cb_of(TPT_EVENT_TRIGGER_EPOCH, put_stat, NULL)));
  ok(tpt_trainer_add_callback(t, s));
  ok(tpt_trainer_add_callback(t, cb_of(TPT_EVENT_BEFORE_EPOCH, read_lr, NULL)));
  ok(tpt_trainer_run(t));
  /* windows: [1, .9, .895] beaten; [.9, .895, .9] after epoch 4: not beaten
   * by > .01 -> 0.05, emptied; [.8 .8 .8] after epoch 7 -> 0.03 (the
   * limit), emptied; after epoch 10 -> stays at the limit */
  assert_true(lr_seen[4] == 0.1);
  assert_true(lr_seen[5] == 0.05);
  assert_true(lr_seen[7] == 0.05);
  assert_true(lr_seen[8] == 0.03);
  assert_true(lr_seen[10] == 0.03);
  tpt_trainer_free(t);
  so.last_k = 1;
  expect_code(tpt_callback_stat_monitor_param(&s, opt, "learning_rate", "val", &so), TPT_ERR_INVALID_ARGUMENT,
              "options.last_k");
  so.last_k = 3;
  so.factor = 0;
  expect_code(tpt_callback_stat_monitor_param(&s, opt, "learning_rate", "val", &so), TPT_ERR_INVALID_ARGUMENT,
              "options.factor");
  assert_null(s);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static tpt_status *edit_hyper(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  int64_t ep = 0;
  tpt_status *st = tpt_trainer_epoch_num(&ep, t);
  if (st) return st;
  if (ep == 1) write_text(path_in("hyper.txt"), "momentum:0.9\nnot a line\nlearning_rate: 0.02\n");
  if (ep == 2) write_text(path_in("hyper.txt"), "learning_rate:abc\n");
  if (ep == 3) unlink(path_in("hyper.txt"));
  return NULL;
}

/* hyper.txt in the log directory, read in BEFORE_TRAIN and after each
 * epoch; bad lines and a missing file change nothing. */
static void human_hyperparam(void **state) {
  (void)state;
  fresh_dir();
  write_text(path_in("hyper.txt"), "learning_rate:0.07\n");
  tpt_model *m = new_model();
  tpt_callback *h = NULL;
  ok(tpt_callback_human_hyperparam(&h, opt, "learning_rate", NULL));
  tpt_trainer *t = trainer_of(m, 4, 1, -1);
  ok(tpt_trainer_add_callback(t, cb_of(TPT_EVENT_TRIGGER_EPOCH, edit_hyper, NULL)));
  ok(tpt_trainer_add_callback(t, h));
  ok(tpt_trainer_add_callback(t, cb_of(TPT_EVENT_BEFORE_EPOCH, read_lr, NULL)));
  ok(tpt_trainer_run(t));
  assert_true(lr_seen[1] == 0.07);
  assert_true(lr_seen[2] == 0.02);
  assert_true(lr_seen[3] == 0.02);
  assert_true(lr_seen[4] == 0.02);
  tpt_trainer_free(t);
  /* a relative file without a log directory */
  ok(tpt_callback_human_hyperparam(&h, opt, "learning_rate", "hyper.txt"));
  t = trainer_of(m, 1, 0, -1);
  ok(tpt_trainer_add_callback(t, h));
  expect_code(tpt_trainer_run(t), TPT_ERR_STATE, "relative to the log directory");
  tpt_trainer_free(t);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
  remove_dir();
}

/* ---- stopping */

static void early_stopping(void **state) {
  (void)state;
  static const double v[] = {0, 1.0, 0.5, 0.6, 0.55, 0.7, 0.1, 0.1};
  stat_values = v;
  tpt_model *m = new_model();
  tpt_early_stopping_options eo = TPT_EARLY_STOPPING_OPTIONS_INIT;
  eo.patience = 3;
  tpt_callback *e = NULL;
  ok(tpt_callback_early_stopping(&e, "val", &eo));
  tpt_trainer *t = trainer_of(m, 7, 0, -1);
  ok(tpt_trainer_add_callback(t, cb_of(TPT_EVENT_TRIGGER_EPOCH, put_stat, NULL)));
  ok(tpt_trainer_add_callback(t, e));
  ok(tpt_trainer_run(t));
  int64_t ep = 0;
  ok(tpt_trainer_epoch_num(&ep, t));
  assert_int_equal(ep, 5);
  const char *why = NULL;
  ok(tpt_trainer_stop_reason(&why, t));
  assert_non_null(strstr(why, "EarlyStopping: val has not fallen below its best, 0.5 at global_step 6"));
  tpt_trainer_free(t);
  eo.patience = 0;
  expect_code(tpt_callback_early_stopping(&e, "val", &eo), TPT_ERR_INVALID_ARGUMENT, "options.patience");
  eo.patience = 1;
  eo.min_delta = -1;
  expect_code(tpt_callback_early_stopping(&e, "val", &eo), TPT_ERR_INVALID_ARGUMENT, "options.min_delta");
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

static int64_t latest_checkpoint_step(void) {
  FILE *f = fopen(path_in("checkpoint"), "r");
  if (!f) return -1;
  char line[256];
  int64_t step = -1;
  if (fgets(line, sizeof line, f)) {
    const char *p = strstr(line, "model-");
    if (p) step = strtoll(p + 6, NULL, 10);
  }
  fclose(f);
  return step;
}

static tpt_callback *saver_every_step(void) {
  tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
  so.every_k_steps = 1;
  so.max_to_keep = 0;
  tpt_callback *s = NULL;
  ok(tpt_callback_model_saver(&s, &so));
  return s;
}

/* Row 5 is NaN: the step to global_step 2 (rows 4-7) has a NaN cost. With
 * the optimizer's check_numerics off (its default fails that step before
 * the update), TerminateOnNaN stops there, before that step's checkpoint;
 * without it the ModelSaver refuses the non-finite variables and keeps
 * model-1 latest. */
static void terminate_on_nan(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *m = new_model();
  ok(tpt_optimizer_set(opt, "check_numerics", 0));
  tpt_callback *nan_cb = NULL;
  ok(tpt_callback_terminate_on_nan(&nan_cb, NULL, 0));
  tpt_trainer *t = trainer_of(m, 3, 1, 5);
  ok(tpt_trainer_add_callback(t, saver_every_step()));
  ok(tpt_trainer_add_callback(t, nan_cb));
  ok(tpt_trainer_run(t));
  const char *why = NULL;
  ok(tpt_trainer_stop_reason(&why, t));
  assert_non_null(strstr(why, "TerminateOnNaN: the output cost is nan at global_step 2"));
  assert_int_equal(latest_checkpoint_step(), 1);
  tpt_trainer_free(t);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
  remove_dir();

  fresh_dir();
  m = new_model();
  ok(tpt_optimizer_set(opt, "check_numerics", 0));
  t = trainer_of(m, 1, 1, 5);
  ok(tpt_trainer_add_callback(t, saver_every_step()));
  ok(tpt_trainer_run(t));
  assert_int_equal(latest_checkpoint_step(), 1);
  struct stat sb;
  assert_int_equal(stat(path_in("model-2"), &sb), -1);
  tpt_trainer_free(t);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
  remove_dir();
}

/* ---- profiling */

static void throughput_and_memory(void **state) {
  (void)state;
  tpt_model *m = new_model();
  tpt_callback *tp = NULL, *steps = NULL, *mem = NULL;
  ok(tpt_callback_throughput(&tp, 4));
  ok(tpt_callback_throughput(&steps, 0));
  ok(tpt_callback_host_memory(&mem));
  tpt_trainer *t = trainer_of(m, 2, 0, -1);
  ok(tpt_trainer_add_callback(t, tp));
  ok(tpt_trainer_add_callback(t, steps));
  ok(tpt_trainer_add_callback(t, mem));
  ok(tpt_trainer_run(t));
  assert_int_equal(history_len(t, "Throughput (samples/sec)"), 2);
  assert_true(fabs(latest(t, "Throughput (samples/sec)") / latest(t, "Throughput (steps/sec)") - 4) < 0.5);
  assert_true(latest(t, "HostFreeMemory (GB)") > 0.01);
  assert_true(latest(t, "HostResidentMemory (MB)") > 1);
  tpt_trainer_free(t);
  expect_code(tpt_callback_throughput(&tp, -1), TPT_ERR_INVALID_ARGUMENT, "samples_per_step");
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

static tpt_status *slow_step3(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  int64_t gs = 0;
  tpt_status *st = tpt_trainer_global_step(&gs, t);
  if (st) return st;
  if (gs == 2) { /* BEFORE_RUN of the step to global_step 3 */
    struct timespec ts = {0, 400 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void step_watchdog(void **state) {
  (void)state;
  tpt_model *m = new_model();
  tpt_callback *w = NULL;
  ok(tpt_callback_step_watchdog(&w, 0.1));
  tpt_trainer *t = trainer_of(m, 3, 0, -1);
  ok(tpt_trainer_add_callback(t, w));
  ok(tpt_trainer_add_callback(t, cb_of(TPT_EVENT_BEFORE_RUN, slow_step3, NULL)));
  expect_code2(tpt_trainer_run(t), TPT_ERR_TIMEOUT, "StepWatchdog: the step to global_step 3 took", "timeout of 0.1 s");
  int64_t gs = 0;
  ok(tpt_trainer_global_step(&gs, t));
  assert_int_equal(gs, 3);
  tpt_trainer_free(t);
  /* fast steps: no error */
  ok(tpt_callback_step_watchdog(&w, 30));
  t = trainer_of(m, 2, 0, -1);
  ok(tpt_trainer_add_callback(t, w));
  ok(tpt_trainer_run(t));
  tpt_trainer_free(t);
  expect_code(tpt_callback_step_watchdog(&w, 0), TPT_ERR_INVALID_ARGUMENT, "timeout_seconds");
  expect_code(tpt_callback_step_watchdog(&w, NAN), TPT_ERR_INVALID_ARGUMENT, "timeout_seconds");
  assert_string_equal(tpt_code_name(TPT_ERR_TIMEOUT), "TPT_ERR_TIMEOUT");
  tpt_optimizer_free(opt);
  tpt_model_free(m);
}

/* ---- images and TensorBoard */

static tpt_status *put_images(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  int64_t ep = 0;
  tpt_status *st = tpt_trainer_epoch_num(&ep, t);
  if (st) return st;
  /* one 2 x 3 RGB image of bytes (value = 10 * y + x + 40 * channel + epoch) */
  uint8_t rgb[2 * 3 * 3];
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (int c = 0; c < 3; ++c) rgb[(y * 3 + x) * 3 + c] = (uint8_t)(10 * y + x + 40 * c + ep);
  const int64_t s1[] = {2, 3, 3};
  tpt_tensor_options u8 = TPT_TENSOR_OPTIONS_INIT;
  u8.dtype = TPT_DTYPE_U8;
  tpt_tensor *img = NULL, *grey = NULL;
  st = tpt_tensor_from_data(&img, rgb, sizeof rgb, s1, 3, &u8);
  if (!st) st = tpt_trainer_put_image(t, "rgb", img);
  /* two 2 x 2 grey float images, 300 and -5 clamped */
  float g[2 * 2 * 2] = {0, 63.6f, 127.4f, 255, 300, -5, 1, 2};
  const int64_t s2[] = {2, 2, 2, 1};
  if (!st) st = tpt_tensor_from_data(&grey, g, sizeof g, s2, 4, NULL);
  if (!st) st = tpt_trainer_put_image(t, "grey", grey);
  return st;
}

/* tpt_image_grid (torchvision's make_grid) and tpt_image_write_png. */
static void image_grid_and_png(void **state) {
  (void)state;
  /* three 1 x 2 x 2 images of values 0..11, drawn with the range [0, 11] */
  float v[12];
  for (int i = 0; i < 12; ++i) v[i] = (float)i;
  const int64_t s[] = {3, 1, 2, 2};
  tpt_tensor *imgs = NULL, *grid = NULL;
  ok(tpt_tensor_from_data(&imgs, v, sizeof v, s, 4, NULL));
  tpt_image_grid_options o = TPT_IMAGE_GRID_OPTIONS_INIT;
  o.columns = 2, o.padding = 1, o.low = 0, o.high = 11, o.pad_value = 7;
  ok(tpt_image_grid(&grid, imgs, &o));
  /* 2 rows x 2 columns of 2 x 2 with padding 1: 7 x 7 x 1 */
  int64_t shape[3] = {0};
  ok(tpt_tensor_shape(shape, 3, grid));
  assert_int_equal(shape[0], 7);
  assert_int_equal(shape[1], 7);
  assert_int_equal(shape[2], 1);
  tpt_dtype dt;
  ok(tpt_tensor_dtype(&dt, grid));
  assert_int_equal(dt, TPT_DTYPE_U8);
  uint8_t px[49];
  ok(tpt_tensor_copy_to(px, sizeof px, grid));
  assert_int_equal(px[0], 7);                                  /* padding */
  assert_int_equal(px[1 * 7 + 1], 0);                          /* image 0, (0, 0) */
  assert_int_equal(px[2 * 7 + 2], (int)(3 * 255.0 / 11 + 0.5)); /* image 0, (1, 1) */
  assert_int_equal(px[1 * 7 + 4], (int)(4 * 255.0 / 11 + 0.5)); /* image 1, (0, 0) */
  assert_int_equal(px[5 * 7 + 2], 255);                        /* image 2, (1, 1): 11 */
  assert_int_equal(px[4 * 7 + 4], 7);                          /* no fourth image: padding */
  /* the images' own range by default; N x H x W too */
  const int64_t s3[] = {3, 2, 2};
  tpt_tensor *flat = NULL, *g2 = NULL;
  ok(tpt_tensor_reshape(&flat, imgs, s3, 3));
  ok(tpt_image_grid(&g2, flat, NULL));
  ok(tpt_tensor_shape(shape, 3, g2));
  assert_int_equal(shape[0], 2 + 2 + 2); /* one row of 3 (8 columns at most) */
  assert_int_equal(shape[1], 3 * 4 + 2);
  tpt_tensor_free(g2);
  g2 = NULL;

  char path[] = "/tmp/tpt_png_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  ok(tpt_image_write_png(grid, path));
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  unsigned char head[24];
  assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
  fclose(f);
  assert_memory_equal(head, "\x89PNG\r\n\x1a\n", 8);
  assert_memory_equal(head + 12, "IHDR", 4);
  assert_int_equal(head[19], 7); /* width */
  assert_int_equal(head[23], 7); /* height */
  remove(path);

  /* errors */
  expect_code(tpt_image_write_png(grid, "/nonexistent-dir/x.png"), TPT_ERR_IO, "/nonexistent-dir/x.png");
  expect_code(tpt_image_write_png(imgs, path), TPT_ERR_INVALID_ARGUMENT, "image has 4 dimensions");
  expect_code(tpt_image_write_png(grid, NULL), TPT_ERR_INVALID_ARGUMENT, "path");
  o.columns = 0;
  expect_code(tpt_image_grid(&g2, imgs, &o), TPT_ERR_INVALID_ARGUMENT, "options->columns is 0");
  o = (tpt_image_grid_options)TPT_IMAGE_GRID_OPTIONS_INIT;
  o.low = 2, o.high = 1;
  expect_code(tpt_image_grid(&g2, imgs, &o), TPT_ERR_INVALID_ARGUMENT, "low < high");
  o = (tpt_image_grid_options)TPT_IMAGE_GRID_OPTIONS_INIT;
  o.version = 9;
  expect_code(tpt_image_grid(&g2, imgs, &o), TPT_ERR_INVALID_ARGUMENT, "options->version is 9");
  tpt_tensor *two = NULL;
  ok(tpt_tensor_reshape(&two, flat, (const int64_t[]){1, 2, 3, 2}, 4));
  expect_code(tpt_image_grid(&g2, two, NULL), TPT_ERR_INVALID_ARGUMENT, "2 channels in dimension 1");
  expect_code(tpt_image_grid(NULL, imgs, NULL), TPT_ERR_INVALID_ARGUMENT, "out");
  /* NaN: an error, not an undefined conversion to bytes (with a range given too) */
  float nan_px[4] = {0, NAN, 1, 2};
  tpt_tensor *with_nan = NULL;
  ok(tpt_tensor_from_data(&with_nan, nan_px, sizeof nan_px, (const int64_t[]){1, 2, 2}, 3, NULL));
  o = (tpt_image_grid_options)TPT_IMAGE_GRID_OPTIONS_INIT;
  o.low = 0, o.high = 2;
  expect_code(tpt_image_grid(&g2, with_nan, &o), TPT_ERR_INVALID_ARGUMENT, "NaN or infinite");
  tpt_tensor *nan_img = NULL;
  ok(tpt_tensor_reshape(&nan_img, with_nan, (const int64_t[]){2, 2}, 2));
  expect_code(tpt_image_write_png(nan_img, path), TPT_ERR_INVALID_ARGUMENT, "NaN or infinite");
  tpt_tensor_free(nan_img);
  tpt_tensor_free(with_nan);
  tpt_tensor_free(two);
  tpt_tensor_free(g2);
  tpt_tensor_free(flat);
  tpt_tensor_free(grid);
  tpt_tensor_free(imgs);
}

/* `test_catalogue tensorboard DIR`: 2 epochs of 3 steps with images, the
 * scalars of a runner and the moving cost, into DIR. */
static int write_tensorboard(const char *where) {
  snprintf(dir, sizeof dir, "%s", where);
  tpt_model *m = new_model();
  struct counter c = {0, 0, 0, 0, 0, -1, 0};
  tpt_trainer *t = trainer_of(m, 2, 1, -1);
  tpt_status *st = tpt_trainer_add_callback(t, runner_of(m, &c));
  if (!st) st = tpt_trainer_add_callback(t, cb_of(TPT_EVENT_TRIGGER_EPOCH, put_images, NULL));
  if (!st) st = tpt_trainer_run(t);
  tpt_trainer_free(t);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
  if (st) {
    fprintf(stderr, "%s\n", tpt_status_message(st));
    tpt_status_free(st);
    return 1;
  }
  return 0;
}

/* `test_catalogue tensorboard-resume DIR`: 1 epoch with a ModelSaver, then a
 * second run with auto_resume to epoch 2: two event files, the second one
 * starting with SessionLog START at the step after the checkpoint's. */
static int write_tensorboard_resumed(const char *where) {
  snprintf(dir, sizeof dir, "%s", where);
  tpt_status *st = NULL;
  for (int run = 1; run <= 2 && !st; ++run) {
    tpt_model *m = new_model();
    tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
    o.max_epoch = run;
    o.console = 0;
    o.progress = TPT_PROGRESS_OFF;
    o.logdir = dir;
    o.logdir_action = TPT_LOGDIR_KEEP;
    o.auto_resume = 1;
    tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
    c.options = &o;
    c.model = m;
    c.dataflow = rows_df(-1, 4);
    tpt_callback *saver = NULL;
    st = tpt_callback_model_saver(&saver, NULL);
    c.callbacks = &saver;
    c.n_callbacks = 1;
    tpt_trainer *t = NULL;
    if (!st) st = tpt_trainer_from_config(&t, &c);
    if (!st) st = tpt_trainer_run(t);
    const char *from = NULL; /* auto_resume's checkpoint: none in run 1, run 1's last in run 2 */
    if (!st) st = tpt_trainer_resumed_from(&from, t);
    if (!st && (run == 1 ? from != NULL : !from || !strstr(from, "/model-")))
      st = tpt_status_new(TPT_ERR_INTERNAL, from ? from : "tpt_trainer_resumed_from gave NULL after auto-resume");
    tpt_trainer_free(t);
    tpt_dataflow_free(c.dataflow);
    tpt_optimizer_free(opt);
    tpt_model_free(m);
  }
  if (st) {
    fprintf(stderr, "%s\n", tpt_status_message(st));
    tpt_status_free(st);
    return 1;
  }
  return 0;
}

static int count_event_files(void) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0) ++n;
  if (d) closedir(d);
  return n;
}

static tpt_status *bad_images(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  const int64_t s[] = {2, 2, 3};
  int32_t i32[12] = {0};
  tpt_tensor_options o = TPT_TENSOR_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_I32;
  tpt_tensor *a = NULL;
  tpt_status *st = tpt_tensor_from_data(&a, i32, sizeof i32, s, 3, &o);
  if (st) return st;
  expect_code(tpt_trainer_put_image(t, "x", a), TPT_ERR_INVALID_ARGUMENT, "dtype");
  const int64_t s5[] = {1, 1, 2, 2, 2};
  float f[8] = {0};
  tpt_tensor *b = NULL, *c = NULL;
  st = tpt_tensor_from_data(&b, f, sizeof f, s5, 5, NULL);
  if (st) return st;
  expect_code(tpt_trainer_put_image(t, "x", b), TPT_ERR_INVALID_ARGUMENT, "5 dimensions");
  const int64_t s2[] = {2, 4};
  st = tpt_tensor_from_data(&c, f, sizeof f, s2, 2, NULL);
  if (st) return st;
  ok(tpt_trainer_put_image(t, "wide", c)); /* H x W: one grey image */
  const int64_t s3[] = {2, 2, 2};
  tpt_tensor *d = NULL;
  st = tpt_tensor_from_data(&d, f, sizeof f, s3, 3, NULL);
  if (st) return st;
  expect_code(tpt_trainer_put_image(t, "x", d), TPT_ERR_INVALID_ARGUMENT, "2 channels");
  return NULL;
}

/* The writer is on by default with a log directory (one file per run, a
 * second one for a second run in the same second), off without one; image
 * errors. The file's content is checked by tests/py/test_tensorboard.py. */
static void tensorboard_files(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *m = new_model();
  tpt_trainer *t = trainer_of(m, 1, 1, -1);
  ok(tpt_trainer_add_callback(t, cb_of(TPT_EVENT_TRIGGER_EPOCH, bad_images, NULL)));
  ok(tpt_trainer_run(t));
  tpt_trainer_free(t);
  assert_int_equal(count_event_files(), 1);
  t = trainer_of(m, 1, 1, -1);
  ok(tpt_trainer_run(t));
  tpt_trainer_free(t);
  assert_int_equal(count_event_files(), 2);
  /* an explicit monitor into another directory; outside training, images fail */
  char sub[300];
  snprintf(sub, sizeof sub, "%s/tb", dir);
  tpt_callback *tb = NULL;
  ok(tpt_monitor_tensorboard(&tb, sub));
  t = trainer_of(m, 1, 0, -1);
  ok(tpt_trainer_add_monitor(t, tb));
  ok(tpt_trainer_run(t));
  float f[4] = {0};
  const int64_t s[] = {2, 2};
  tpt_tensor *img = NULL;
  ok(tpt_tensor_from_data(&img, f, sizeof f, s, 2, NULL));
  expect_code(tpt_trainer_put_image(t, "late", img), TPT_ERR_STATE, "while training runs");
  tpt_tensor_free(img);
  tpt_trainer_free(t);
  DIR *d = opendir(sub);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') {
      ++n;
      char p[600];
      snprintf(p, sizeof p, "%s/%s", sub, e->d_name);
      unlink(p);
    }
  if (d) closedir(d);
  rmdir(sub);
  assert_int_equal(n, 1);
  tpt_optimizer_free(opt);
  tpt_model_free(m);
  remove_dir();
}

int main(int argc, char **argv) {
  ok(tpt_manual_seed(7));
  if (argc == 3 && strcmp(argv[1], "tensorboard") == 0) return write_tensorboard(argv[2]);
  if (argc == 3 && strcmp(argv[1], "tensorboard-resume") == 0) return write_tensorboard_resumed(argv[2]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(inferencers_per_epoch),
      cmocka_unit_test(inferencers_on_periodic_trigger),
      cmocka_unit_test(inferencer_errors),
      cmocka_unit_test(data_parallel_runner),
      cmocka_unit_test(hyperparam_func),
      cmocka_unit_test(stat_monitor),
      cmocka_unit_test(human_hyperparam),
      cmocka_unit_test(early_stopping),
      cmocka_unit_test(terminate_on_nan),
      cmocka_unit_test(throughput_and_memory),
      cmocka_unit_test(step_watchdog),
      cmocka_unit_test(tensorboard_files),
      cmocka_unit_test(image_grid_and_png),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
