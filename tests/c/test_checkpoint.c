/* Checkpoints through the C API (issue 13): ModelSaver's files and rotation,
 * MinSaver/MaxSaver, exact resume of a run stopped mid-epoch (variables
 * equal to an uninterrupted run's, bit for bit), callbacks' own state, and
 * every way a restore can go wrong: a missing variable, a shape mismatch, a
 * truncated or corrupted file, another model's checkpoint. Each error names
 * the variables or the file and changes nothing in the model. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_common.h"

/* ---- a small model and its training */

static int64_t width = 3; /* the first layer's units; another width is another model */
static double learning_rate; /* SGD's, where not 0 (wide layers need a small one) */
static int overflow_now;   /* this step's cost is multiplied by 1e36: its scaled gradients overflow */

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_tensor *h = NULL, *y = NULL, *cost = NULL;
  tpt_status *st = tpt_layer_fc(&h, tw, "fc0", in[0], width, NULL);
  if (!st) st = tpt_layer_dropout(&h, tw, h, 0.25);
  if (!st) st = tpt_layer_fc(&y, tw, "fc1", h, 1, NULL);
  if (!st) st = tpt_loss_mse(&cost, y, in[1]);
  if (!st && overflow_now) st = tpt_op_mul_scalar(&cost, cost, 1e36);
  if (!st) st = tpt_tower_set_cost(tw, cost);
  if (!st) st = tpt_tower_set_output(tw, "y", y);
  return st;
}

static tpt_model *model_of(int64_t w) {
  width = w;
  const int64_t xs[] = {-1, 4}, ys[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, xs, 2}, {"y", TPT_DTYPE_F32, ys, 2}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 2, tower, NULL, NULL));
  tpt_optimizer *o = NULL;
  ok(tpt_optimizer_new(&o, "sgd"));
  ok(tpt_optimizer_set(o, "momentum", 0.9));
  if (learning_rate > 0) ok(tpt_optimizer_set(o, "learning_rate", learning_rate));
  ok(tpt_model_set_optimizer(m, o));
  tpt_optimizer_free(o);
  return m;
}

static tpt_dataflow *data(void) {
  float x[40 * 4], y[40];
  for (int i = 0; i < 40; ++i) {
    for (int j = 0; j < 4; ++j) x[i * 4 + j] = (float)((i * 3 + j * 5) % 11) / 11.0f;
    y[i] = (float)(i % 7) / 7.0f;
  }
  const int64_t xs[] = {40, 4}, ys[] = {40, 1};
  tpt_tensor *tx = NULL, *ty = NULL;
  ok(tpt_tensor_from_data(&tx, x, sizeof x, xs, 2, NULL));
  ok(tpt_tensor_from_data(&ty, y, sizeof y, ys, 2, NULL));
  const tpt_tensor *cols[] = {tx, ty};
  tpt_dataflow *rows = NULL, *batches = NULL;
  ok(tpt_dataflow_from_tensors(&rows, cols, 2, 1));
  ok(tpt_dataflow_batch(&batches, rows, 4, 1));
  ok(tpt_dataflow_set_seed(batches, 11));
  tpt_dataflow_free(rows);
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  return batches;
}

static tpt_trainer *new_trainer(void) {
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, NULL));
  return t;
}

static char dir[256];
static void fresh_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/tpt-ckpt-cXXXXXX");
  assert_non_null(mkdtemp(dir));
}

static char *path_in(const char *name) {
  static char p[2][512];
  static int k;
  k ^= 1;
  snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
  return p[k];
}

static int stop_at = -1;
static double val_by_epoch[8];
static int scaling;               /* train(): loss scaling on, growth_interval 3 */
static int64_t overflow_steps[4]; /* with it: the global steps whose cost overflows (-1: none) */
static double scale_after[32];    /* the step output "loss_scale" after each global step */
static tpt_status *events(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)r, (void)ud;
  int64_t gs = 0, ep = 0;
  tpt_status *st = tpt_trainer_global_step(&gs, t);
  if (!st) st = tpt_trainer_epoch_num(&ep, t);
  if (st) return st;
  if (ev == TPT_EVENT_BEFORE_RUN) {
    overflow_now = 0;
    for (int i = 0; i < 4; ++i) overflow_now |= scaling && overflow_steps[i] == gs;
    return NULL;
  }
  if (ev == TPT_EVENT_AFTER_RUN) {
    overflow_now = 0;
    return scaling && gs < 32 ? tpt_trainer_output_scalar(&scale_after[gs], t, "loss_scale") : NULL;
  }
  if (ev == TPT_EVENT_TRIGGER_STEP && gs == stop_at) return tpt_trainer_request_stop(t);
  if (ev == TPT_EVENT_TRIGGER_EPOCH && ep < 8) return tpt_trainer_put_scalar(t, "val", val_by_epoch[ep]);
  return NULL;
}

/* A run of `epochs` x 5 steps with `saver` (taken; may be NULL) in `dir`;
 * returns the trainer, run, not freed. */
static tpt_precision train_precision = TPT_PRECISION_FP32; /* of every run of train() */

static tpt_trainer *train(tpt_model *m, int64_t epochs, tpt_callback *saver, tpt_callback *best, const char *resume,
                          tpt_status **run_status) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.precision = train_precision;
  if (scaling) {
    o.loss_scaling.mode = TPT_LOSS_SCALING_ON;
    o.loss_scaling.growth_interval = 3;
  }
  o.max_epoch = epochs;
  o.steps_per_epoch = 5;
  o.logdir = dir;
  o.logdir_action = TPT_LOGDIR_KEEP;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER_STEP | TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_BEFORE_RUN | TPT_EVENT_AFTER_RUN;
  d.fn = events;
  d.chief_only = 0;
  d.name = "events";
  tpt_callback *cbs[3] = {NULL, NULL, NULL};
  ok(tpt_callback_new(&cbs[0], &d));
  size_t n = 1;
  if (saver) cbs[n++] = saver;
  if (best) cbs[n++] = best;
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = m;
  c.dataflow = data();
  c.callbacks = cbs;
  c.n_callbacks = n;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_from_config(&t, &c));
  tpt_dataflow_free(c.dataflow);
  if (resume) ok(tpt_trainer_resume(t, resume));
  tpt_status *st = tpt_trainer_run(t);
  if (run_status) *run_status = st;
  else ok(st);
  return t;
}

static tpt_callback *saver_every(int64_t k, int32_t keep, double hours) {
  tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
  so.every_k_steps = k;
  so.max_to_keep = keep;
  so.keep_every_n_hours = hours;
  tpt_callback *s = NULL;
  ok(tpt_callback_model_saver(&s, &so));
  return s;
}

static void variable(float *out, size_t n, tpt_model *m, const char *name) {
  tpt_tensor *v = NULL;
  ok(tpt_model_variable(&v, m, name));
  ok(tpt_tensor_copy_to(out, n * sizeof *out, v));
  tpt_tensor_free(v);
}

/* An optimizer slot's values (tpt_model_optimizer_slot). */
static void slot_values(float *out, size_t n, tpt_model *m, const char *var, const char *slot) {
  tpt_tensor *v = NULL;
  ok(tpt_model_optimizer_slot(&v, m, var, slot));
  ok(tpt_tensor_copy_to(out, n * sizeof *out, v));
  tpt_tensor_free(v);
}

static int exists(const char *name) {
  struct stat s;
  return stat(path_in(name), &s) == 0;
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

/* ---- tests */

/* Runs 3 epochs uninterrupted, then stopped at step 8 and resumed from the
 * checkpoint of step 6, in `precision`, with `units` in the first layer:
 * both end bit for bit equal (`w`: the final fc0/W, 4 x units). */
static void resume_equals_uninterrupted(tpt_precision precision, int64_t units, float *w) {
  train_precision = precision;
  fresh_dir();
  const size_t n = (size_t)(4 * units);
  float *wb = malloc(n * sizeof *wb), *mb = malloc(n * sizeof *mb), *mc = malloc(n * sizeof *mc);
  assert_true(wb && mb && mc);
  ok(tpt_manual_seed(5));
  tpt_model *a = model_of(units);
  tpt_trainer *ta = train(a, 3, NULL, NULL, NULL, NULL);
  const char *from = "?";
  ok(tpt_trainer_resumed_from(&from, ta));
  assert_null(from); /* started afresh */
  variable(w, n, a, "fc0/W");
  slot_values(mb, n, a, "fc0/W", "momentum_buffer");
  tpt_trainer_free(ta);
  tpt_model_free(a);

  ok(tpt_manual_seed(5));
  tpt_model *b = model_of(units);
  stop_at = 8; /* interrupted mid epoch 2: the saver saved at step 6, and at the stop (8) */
  tpt_trainer_free(train(b, 3, saver_every(3, 10, 0), NULL, NULL, NULL));
  stop_at = -1;
  tpt_model_free(b);
  assert_true(exists("model-6") && exists("model-8") && exists("checkpoint"));

  ok(tpt_manual_seed(99)); /* the resume restores the random state, whatever it is now */
  tpt_model *c = model_of(units);
  tpt_trainer *tc = train(c, 3, NULL, NULL, dir, NULL);
  int64_t gs = 0;
  ok(tpt_trainer_global_step(&gs, tc));
  assert_int_equal(gs, 15);
  ok(tpt_trainer_resumed_from(&from, tc)); /* the directory, resolved to its latest checkpoint */
  assert_non_null(from);
  assert_string_equal(from, path_in("model-8"));
  variable(wb, n, c, "fc0/W");
  assert_memory_equal(w, wb, n * sizeof *wb); /* bit for bit */
  slot_values(mc, n, c, "fc0/W", "momentum_buffer"); /* the optimizer's state too */
  assert_memory_equal(mb, mc, n * sizeof *mc);
  tpt_trainer_free(tc);
  tpt_model_free(c);
  remove_dir();
  free(wb), free(mb), free(mc);
  train_precision = TPT_PRECISION_FP32;
  width = 3;
}

static void resume_mid_epoch_equals_uninterrupted(void **state) {
  (void)state;
  float w[12];
  resume_equals_uninterrupted(TPT_PRECISION_FP32, 3, w);
}

/* The same in bf16-mixed precision (the variables and the optimizer state
 * stay float32, so the checkpoint is the same kind of file), which trains to
 * other values than float32 does. */
static void resume_mid_epoch_equals_uninterrupted_bf16(void **state) {
  (void)state;
  float w32[12], w16[12];
  resume_equals_uninterrupted(TPT_PRECISION_FP32, 3, w32);
  resume_equals_uninterrupted(TPT_PRECISION_BF16_MIXED, 3, w16);
  assert_memory_not_equal(w32, w16, sizeof w16);
}

/* The same with a first layer of 20,000 units: fc0/W and its momentum are
 * 320 KB each, records the writer hands over in pieces of their own; the
 * resume reads the file back, checking its hash, and ends bit for bit equal. */
static void resume_of_large_tensors_equals_uninterrupted(void **state) {
  (void)state;
  float *w = malloc(4 * 20000 * sizeof *w);
  assert_non_null(w);
  learning_rate = 1e-5;
  resume_equals_uninterrupted(TPT_PRECISION_FP32, 20000, w);
  learning_rate = 0;
  free(w);
}

/* With dynamic loss scaling (growth_interval 3) and the gradients of
 * global steps 0, 1 and 9 overflowing: the resumed run skips step 9's update
 * as the uninterrupted one does and ends bit for bit equal, and its scale
 * goes on from the checkpoint's (32768, one good step towards growth; not
 * init_scale's 65536) at every step, as GradScaler's rules give. */
static void resume_with_loss_scaling_equals_uninterrupted(void **state) {
  (void)state;
  scaling = 1;
  const int64_t overflows[4] = {0, 1, 9, -1};
  memcpy(overflow_steps, overflows, sizeof overflows);
  float w[12];
  resume_equals_uninterrupted(TPT_PRECISION_FP32, 3, w);
  /* the resumed run's scales (steps 6..14) over the uninterrupted run's */
  const double expected[15] = {32768, 16384, 16384, 16384, 32768, 32768, 32768, 65536,
                               65536, 32768, 32768, 32768, 65536, 65536, 65536};
  for (int s = 0; s < 15; ++s)
    if (scale_after[s + 1] != expected[s])
      fail_msg("the loss scale after step %d is %g, GradScaler's rules give %g", s, scale_after[s + 1], expected[s]);
  /* the skipped updates took effect: without overflows the run ends elsewhere */
  memset(overflow_steps, 0xff, sizeof overflow_steps);
  float plain[12];
  resume_equals_uninterrupted(TPT_PRECISION_FP32, 3, plain);
  assert_memory_not_equal(w, plain, sizeof w);
  scaling = 0;
}

/* auto_resume on the log directory a run killed before its first
 * checkpoint left (its log.log, no checkpoint index): with the default
 * logdir_action (REFUSE) the run starts from the beginning in it, keeps what
 * is there and says so; without auto_resume the directory is refused. */
static tpt_status *run_in_dir(int auto_resume, int64_t *global_step, const char **resumed_from) {
  tpt_model *m = model_of(3);
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 1;
  o.steps_per_epoch = 5;
  o.logdir = dir;
  o.auto_resume = auto_resume;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = m;
  c.dataflow = data();
  tpt_trainer *t = NULL;
  ok(tpt_trainer_from_config(&t, &c));
  tpt_dataflow_free(c.dataflow);
  tpt_status *st = tpt_trainer_run(t);
  ok(tpt_trainer_global_step(global_step, t));
  ok(tpt_trainer_resumed_from(resumed_from, t));
  tpt_trainer_free(t);
  tpt_model_free(m);
  return st;
}

static void auto_resume_without_a_checkpoint_starts_afresh(void **state) {
  (void)state;
  fresh_dir();
  FILE *f = fopen(path_in("log.log"), "w");
  assert_non_null(f);
  fputs("a killed run's line\n", f);
  fclose(f);
  int64_t gs = -1;
  const char *from = "?";
  tpt_status *refused = run_in_dir(0, &gs, &from);
  assert_non_null(refused); /* TPT_LOGDIR_REFUSE: not empty */
  tpt_status_free(refused);
  ok(run_in_dir(1, &gs, &from));
  assert_int_equal(gs, 5);
  assert_null(from);
  char text[8192];
  read_text(path_in("log.log"), text, sizeof text);
  assert_null(strstr(text, "a killed run's line")); /* moved aside, as tensorpack's logger does */
  assert_non_null(strstr(text, "Auto-resume: no checkpoint in"));
  assert_non_null(strstr(text, "Training with the simple trainer: one tower, on cpu"));
  int backups = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (strncmp(e->d_name, "log.log.", 8) == 0) {
      read_text(path_in(e->d_name), text, sizeof text);
      backups += strstr(text, "a killed run's line") != NULL;
    }
  if (d) closedir(d);
  assert_int_equal(backups, 1);
  remove_dir();
}

/* tpt_model_optimizer_slot: SGD with momentum keeps momentum_buffer (= the
 * first gradient after one update: buffer = g), Adam its moments and step;
 * what is not there is TPT_ERR_NOT_FOUND naming what is. */
static void optimizer_slots(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *m = model_of(3);
  tpt_tensor *v = NULL;
  expect_code(tpt_model_optimizer_slot(&v, m, "fc0/W", "momentum_buffer"), TPT_ERR_NOT_FOUND,
              "no trainable variable 'fc0/W' (the model is not built yet)");
  ok(tpt_model_build(m));
  expect_code(tpt_model_optimizer_slot(&v, m, "fc0/W", "momentum_buffer"), TPT_ERR_NOT_FOUND,
              "the sgd optimizer keeps no 'momentum_buffer' for 'fc0/W' (it has not updated it yet)");
  tpt_trainer_free(train(m, 1, NULL, NULL, NULL, NULL));
  float buf[12];
  slot_values(buf, 12, m, "fc0/W", "momentum_buffer");
  double norm = 0;
  for (int i = 0; i < 12; ++i) norm += fabs(buf[i]);
  assert_true(norm > 0);
  expect_code(tpt_model_optimizer_slot(&v, m, "fc0/W", "step"), TPT_ERR_NOT_FOUND, "it keeps: momentum_buffer");
  expect_code(tpt_model_optimizer_slot(&v, m, "fc9/W", "momentum_buffer"), TPT_ERR_NOT_FOUND,
              "no trainable variable 'fc9/W'; the trainable ones: fc0/W, fc0/b, fc1/W, fc1/b");
  tpt_model_free(m);
  /* Adam: the step count after 5 updates, and its moments */
  m = model_of(3);
  tpt_optimizer *o = NULL;
  ok(tpt_optimizer_new(&o, "adam"));
  ok(tpt_model_set_optimizer(m, o));
  tpt_optimizer_free(o);
  tpt_trainer_free(train(m, 1, NULL, NULL, NULL, NULL));
  ok(tpt_model_optimizer_slot(&v, m, "fc1/b", "step"));
  int64_t step = 0;
  ok(tpt_tensor_copy_to(&step, sizeof step, v));
  tpt_tensor_free(v);
  assert_int_equal(step, 5);
  slot_values(buf, 1, m, "fc1/b", "exp_avg_sq");
  assert_true(buf[0] > 0);
  EXPECT_NULL_ARG(tpt_model_optimizer_slot(&v, m, NULL, "step"), "tpt_model_optimizer_slot", "variable");
  tpt_model_free(m);
  remove_dir();
}

static void saver_rotates_and_keeps_hourly(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *m = model_of(3);
  tpt_trainer_free(train(m, 2, saver_every(2, 2, 0), NULL, NULL, NULL));
  /* saves at 2, 4, 5 (epoch end), 6, 8, 10: the last two stay */
  assert_false(exists("model-2") || exists("model-4") || exists("model-6"));
  assert_true(exists("model-8") && exists("model-10"));
  tpt_model_free(m);
  remove_dir();

  fresh_dir(); /* keep_every_n_hours tiny: every checkpoint leaving the list is kept */
  m = model_of(3);
  tpt_trainer_free(train(m, 1, saver_every(1, 1, 1e-12), NULL, NULL, NULL));
  for (int k = 1; k <= 5; ++k) {
    char name[32];
    snprintf(name, sizeof name, "model-%d", k);
    assert_true(exists(name));
  }
  tpt_model_free(m);
  remove_dir();
}

/* The global step of a checkpoint: resume a run that has no epochs left. */
static int64_t step_of(const char *path) {
  tpt_model *m = model_of(3);
  tpt_trainer *t = train(m, 0, NULL, NULL, path, NULL);
  int64_t gs = 0;
  ok(tpt_trainer_global_step(&gs, t));
  tpt_trainer_free(t);
  tpt_model_free(m);
  return gs;
}

static void min_and_max_savers(void **state) {
  (void)state;
  fresh_dir();
  double vals[] = {0, 3, 1, 2, 5};
  memcpy(val_by_epoch, vals, sizeof vals);
  tpt_model *m = model_of(3);
  tpt_callback *mn = NULL, *mx = NULL;
  ok(tpt_callback_min_saver(&mn, "val", NULL, NULL));
  ok(tpt_callback_max_saver(&mx, "val", "best", NULL));
  tpt_callback *saver = saver_every(0, 10, 0);
  /* two best savers: add the second as a plain user callback after the first */
  tpt_trainer *t = train(m, 4, saver, mn, NULL, NULL);
  assert_int_equal(step_of(path_in("min-val")), 10); /* epoch 2 (val 1) */
  const char *best = NULL;
  ok(tpt_trainer_best_checkpoint(&best, t, "val")); /* the getter: Lightning's best_model_path */
  assert_non_null(best);
  assert_string_equal(best, path_in("min-val"));
  expect_code(tpt_trainer_best_checkpoint(&best, t, "loss"), TPT_ERR_NOT_FOUND,
              "no MinSaver or MaxSaver of 'loss'; it has them of: val");
  assert_null(best);
  tpt_trainer_free(t);
  remove_dir();
  fresh_dir();
  tpt_trainer_free(train(m, 4, saver_every(0, 10, 0), mx, NULL, NULL));
  assert_int_equal(step_of(path_in("best")), 20); /* epoch 4 (val 5) */
  tpt_model_free(m);
  remove_dir();
  expect_code(tpt_callback_min_saver(&mn, "", NULL, NULL), TPT_ERR_INVALID_ARGUMENT, "stat");
  expect_code(tpt_callback_max_saver(&mx, "val", "a/b", NULL), TPT_ERR_INVALID_ARGUMENT, "a/b");
}

/* ---- how a run ends: recorded in checkpoints, kept by auto_resume */

static char end_reason[512]; /* the last ending_run's stop reason ("" when none) */
static char end_from[512];   /* and the checkpoint it resumed from ("" when none) */

/* One run of `epochs` x 5 steps in `dir` with auto_resume (and
 * continue_stopped), the callbacks in `cbs` (taken) after `events` (which
 * puts "val" from val_by_epoch at each epoch's end, or after them when
 * events_last); the run's global step in *gs; returns the run's status. */
static tpt_status *ending_run(tpt_model *m, int64_t epochs, int continue_stopped, tpt_callback **cbs, size_t n,
                              int events_last, int64_t *gs) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = epochs;
  o.steps_per_epoch = 5;
  o.logdir = dir;
  o.auto_resume = 1;
  o.continue_stopped = continue_stopped;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER_STEP | TPT_EVENT_TRIGGER_EPOCH;
  d.fn = events;
  d.chief_only = 0;
  d.name = "events";
  tpt_callback *all[8];
  size_t k = 0;
  if (!events_last) ok(tpt_callback_new(&all[k++], &d));
  for (size_t i = 0; i < n; ++i) all[k++] = cbs[i];
  if (events_last) ok(tpt_callback_new(&all[k++], &d));
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = m;
  c.dataflow = data();
  c.callbacks = all;
  c.n_callbacks = k;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_from_config(&t, &c));
  tpt_dataflow_free(c.dataflow);
  tpt_status *st = tpt_trainer_run(t);
  ok(tpt_trainer_global_step(gs, t));
  const char *why = NULL, *from = NULL;
  ok(tpt_trainer_stop_reason(&why, t));
  ok(tpt_trainer_resumed_from(&from, t));
  snprintf(end_reason, sizeof end_reason, "%s", why ? why : "");
  snprintf(end_from, sizeof end_from, "%s", from ? from : "");
  tpt_trainer_free(t);
  return st;
}

static tpt_callback *early_stop_of(const char *stat) {
  tpt_early_stopping_options eo = TPT_EARLY_STOPPING_OPTIONS_INIT;
  eo.patience = 2;
  eo.maximize = 1;
  tpt_callback *e = NULL;
  ok(tpt_callback_early_stopping(&e, stat, &eo));
  return e;
}

static tpt_callback *max_saver_of(const char *stat) {
  tpt_callback *b = NULL;
  ok(tpt_callback_max_saver(&b, stat, NULL, NULL));
  return b;
}

/* EarlyStopping, a ModelSaver (each epoch) and a MaxSaver, in `order` 0
 * (the producer of "val", the saver, the best saver, EarlyStopping) or 1
 * (all of them the other way round). */
static tpt_status *stopping_run(tpt_model *m, int64_t epochs, int order, int continue_stopped, int64_t *gs) {
  tpt_callback *cbs[3];
  if (order == 0) {
    cbs[0] = saver_every(0, 0, 0), cbs[1] = max_saver_of("val"), cbs[2] = early_stop_of("val");
  } else {
    cbs[0] = early_stop_of("val"), cbs[1] = max_saver_of("val"), cbs[2] = saver_every(0, 0, 0);
  }
  return ending_run(m, epochs, continue_stopped, cbs, 3, order == 1, gs);
}

static int64_t latest_step(void) {
  char text[4096];
  read_text(path_in("checkpoint"), text, sizeof text);
  const char *p = strstr(text, "model-");
  return p ? strtoll(p + 6, NULL, 10) : -1;
}

static char *file_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc(*n ? *n : 1);
  assert_int_equal(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}

/* Issue 34's rerun: EarlyStopping stops at epoch 4 of 6; the epoch is saved
 * and its checkpoint records the stop whatever the callbacks' order (both
 * orders train the same variables and keep the same files); a rerun with
 * auto_resume trains nothing, writes nothing and gives the same stop
 * reason; continue_stopped trains on; a finished run's rerun trains nothing
 * until max_epoch is raised. */
static void a_stopped_run_stays_stopped(void **state) {
  (void)state;
  const double vals[8] = {0, 0.5, 0.7, 0.6, 0.65, 0.9, 0.9, 0.9}; /* best 0.7 at epoch 2; stops after epoch 4 */
  memcpy(val_by_epoch, vals, sizeof vals);
  float w_first[12];
  for (int order = 0; order < 2; ++order) {
    fresh_dir();
    ok(tpt_manual_seed(5));
    tpt_model *m = model_of(3);
    int64_t gs = 0;
    ok(stopping_run(m, 6, order, 0, &gs));
    assert_int_equal(gs, 20);
    assert_non_null(strstr(end_reason, "EarlyStopping: val has not risen above its best, 0.7 at global_step 10"));
    assert_int_equal(latest_step(), 20); /* the stopping epoch was saved */
    assert_int_equal(step_of(path_in("max-val")), 10);
    float w[12];
    variable(w, 12, m, "fc0/W");
    if (order == 0) memcpy(w_first, w, sizeof w);
    else assert_memory_equal(w, w_first, sizeof w); /* the order of the callbacks changes nothing */
    size_t n = 0, n2 = 0;
    char *saved = file_bytes(path_in("model-20"), &n);
    tpt_model_free(m);

    /* the rerun: nothing trained, the same reason, nothing written */
    m = model_of(3);
    ok(stopping_run(m, 6, order, 0, &gs));
    assert_int_equal(gs, 20);
    assert_non_null(strstr(end_reason, "EarlyStopping: val has not risen above its best, 0.7 at global_step 10"));
    assert_string_equal(end_from, path_in("model-20"));
    char text[16384];
    read_text(path_in("log.log"), text, sizeof text);
    assert_non_null(strstr(text, "Auto-resume: the run was stopped at epoch 4 (global_step 20) by EarlyStopping(val): EarlyStopping: val has not"));
    assert_non_null(strstr(text, "it stays stopped (set continue_stopped to train on)"));
    assert_int_equal(latest_step(), 20);
    char *again = file_bytes(path_in("model-20"), &n2);
    assert_int_equal(n2, n);
    assert_memory_equal(again, saved, n);
    free(again);
    free(saved);
    variable(w, 12, m, "fc0/W");
    assert_memory_equal(w, w_first, sizeof w); /* the checkpoint's variables, untrained */
    tpt_model_free(m);

    /* continue_stopped: epoch 5 improves (0.9), epoch 6 does not; max_epoch ends it */
    m = model_of(3);
    ok(stopping_run(m, 6, order, 1, &gs));
    assert_int_equal(gs, 30);
    assert_string_equal(end_reason, "");
    assert_int_equal(step_of(path_in("max-val")), 25);
    tpt_model_free(m);
    /* finished: nothing left; raised max_epoch: epoch 7 is the second without improvement */
    m = model_of(3);
    ok(stopping_run(m, 6, order, 0, &gs));
    assert_int_equal(gs, 30);
    read_text(path_in("log.log"), text, sizeof text);
    assert_non_null(strstr(text, "The checkpoint's run finished at epoch 6 (global_step 30)"));
    assert_non_null(strstr(text, "there is nothing left to train (raise max_epoch to train more)"));
    tpt_model_free(m);
    m = model_of(3);
    ok(stopping_run(m, 8, order, 0, &gs));
    assert_int_equal(gs, 35);
    assert_non_null(strstr(end_reason, "EarlyStopping: val has not risen above its best, 0.9 at global_step 25"));
    tpt_model_free(m);
    remove_dir();
  }
}

/* The ends the savers did not see: a finished run whose last epoch had no
 * save, and a run stopped from outside mid-epoch, are saved at their end;
 * the first rerun trains nothing, the second goes on where it stopped. */
static void run_ends_are_saved(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *m = model_of(3);
  tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
  so.every_k_epochs = 2;
  tpt_callback *s = NULL;
  ok(tpt_callback_model_saver(&s, &so));
  int64_t gs = 0;
  ok(ending_run(m, 3, 0, &s, 1, 0, &gs));
  assert_int_equal(gs, 15);
  assert_int_equal(latest_step(), 15); /* epoch 2's, then the end's */
  ok(tpt_callback_model_saver(&s, &so));
  ok(ending_run(m, 3, 0, &s, 1, 0, &gs));
  assert_int_equal(gs, 15);
  assert_string_equal(end_from, path_in("model-15"));
  tpt_model_free(m);
  remove_dir();

  fresh_dir();
  m = model_of(3);
  stop_at = 7; /* a stop request mid-epoch 2: interrupted */
  ok(tpt_callback_model_saver(&s, &so));
  ok(ending_run(m, 3, 0, &s, 1, 0, &gs));
  stop_at = -1;
  assert_int_equal(gs, 7);
  assert_string_equal(end_reason, "tpt_trainer_request_stop");
  assert_int_equal(latest_step(), 7);
  ok(tpt_callback_model_saver(&s, &so));
  ok(ending_run(m, 3, 0, &s, 1, 0, &gs));
  assert_int_equal(gs, 15); /* went on from step 7 */
  assert_string_equal(end_from, path_in("model-7"));
  char text[16384];
  read_text(path_in("log.log"), text, sizeof text);
  assert_non_null(strstr(text, "The checkpoint's run was interrupted at epoch 2 (global_step 7): tpt_trainer_request_stop"));
  tpt_model_free(m);
  remove_dir();
}

/* A watched scalar nobody puts: the run fails at the first epoch's end,
 * naming the scalars there are, the closest first. */
static void misspelt_watched_names_fail(void **state) {
  (void)state;
  const double vals[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  memcpy(val_by_epoch, vals, sizeof vals);
  const char *who[] = {"EarlyStopping(vall)", "MaxSaver"};
  for (int i = 0; i < 2; ++i) {
    fresh_dir();
    tpt_model *m = model_of(3);
    tpt_callback *cbs[2] = {saver_every(0, 0, 0), i == 0 ? early_stop_of("vall") : max_saver_of("vall")};
    int64_t gs = 0;
    tpt_status *st = ending_run(m, 3, 0, cbs, 2, 0, &gs);
    expect_code2(st, TPT_ERR_NOT_FOUND, who[i],
                 "no callback or monitor has put the scalar 'vall' by the end of epoch 1; the scalars put are: val, ");
    assert_int_equal(gs, 5);
    tpt_model_free(m);
    remove_dir();
  }
}

/* ---- predictors */

/* A tensor of the rows 0..n of data()'s x (the first n) or y. */
static tpt_tensor *rows_of(int which, int n) {
  float x[40 * 4], y[40];
  for (int i = 0; i < 40; ++i) {
    for (int j = 0; j < 4; ++j) x[i * 4 + j] = (float)((i * 3 + j * 5) % 11) / 11.0f;
    y[i] = (float)(i % 7) / 7.0f;
  }
  const int64_t xs[] = {n, 4}, ys[] = {n, 1};
  tpt_tensor *t = NULL;
  if (which == 0) ok(tpt_tensor_from_data(&t, x, (size_t)n * 4 * sizeof(float), xs, 2, NULL));
  else ok(tpt_tensor_from_data(&t, y, (size_t)n * sizeof(float), ys, 2, NULL));
  return t;
}

/* A predictor of x alone from the MaxSaver's file, made on an unbuilt
 * model in one call, equals tpt_model_restore + tpt_model_infer with the
 * labels (the independent path), and is not the final model's; it keeps
 * its model alive; its errors name what is wrong. */
static void predictor_from_the_best_checkpoint(void **state) {
  (void)state;
  fresh_dir();
  double vals[] = {0, 3, 1, 2, 1}; /* the best: epoch 1 (step 5) */
  memcpy(val_by_epoch, vals, sizeof vals);
  tpt_model *trained = model_of(3);
  tpt_callback *mx = NULL;
  ok(tpt_callback_max_saver(&mx, "val", NULL, NULL));
  tpt_trainer_free(train(trained, 4, saver_every(0, 10, 0), mx, NULL, NULL));
  assert_int_equal(step_of(path_in("max-val")), 5);

  tpt_tensor *x = rows_of(0, 6), *y = rows_of(1, 6);
  const tpt_tensor *both[] = {x, y};
  const char *out_names[] = {"y"};
  tpt_model *ref = model_of(3);
  ok(tpt_model_restore(NULL, ref, path_in("max-val"), NULL));
  tpt_tensor *want = NULL, *final = NULL, *got = NULL;
  ok(tpt_model_infer(&want, ref, both, 2, out_names, 1));
  ok(tpt_model_infer(&final, trained, both, 2, out_names, 1));

  tpt_model *m = model_of(3); /* not built */
  const char *inputs[] = {"x"};
  tpt_predictor_options po = TPT_PREDICTOR_OPTIONS_INIT;
  po.input_names = inputs;
  po.n_input_names = 1;
  po.checkpoint = path_in("max-val");
  tpt_predictor *p = NULL;
  ok(tpt_predictor_new(&p, m, out_names, 1, &po));
  tpt_model_free(m); /* the predictor keeps it */
  ok(tpt_predictor_run(&got, p, (const tpt_tensor *const *)&x, 1));
  float a[6], b[6], c[6];
  ok(tpt_tensor_copy_to(a, sizeof a, got));
  ok(tpt_tensor_copy_to(b, sizeof b, want));
  ok(tpt_tensor_copy_to(c, sizeof c, final));
  assert_memory_equal(a, b, sizeof a);
  double diff = 0;
  for (int i = 0; i < 6; ++i) diff += fabs(a[i] - c[i]);
  assert_true(diff > 1e-4); /* the best checkpoint, not the last */
  tpt_tensor_free(got);

  /* errors */
  expect_code(tpt_predictor_run(&got, p, both, 2), TPT_ERR_INVALID_ARGUMENT, "n_inputs is 2; the predictor takes 1 (x)");
  EXPECT_NULL_ARG(tpt_predictor_run(&got, NULL, both, 1), "tpt_predictor_run", "predictor");
  tpt_predictor_free(p);
  tpt_predictor_free(NULL);
  const char *bad_in[] = {"x", "z"}, *twice[] = {"x", "x"}, *bad_out[] = {"nope"};
  po.checkpoint = NULL;
  po.input_names = bad_in;
  po.n_input_names = 2;
  expect_code(tpt_predictor_new(&p, ref, out_names, 1, &po), TPT_ERR_INVALID_ARGUMENT,
              "the model has no input 'z'; its inputs: x, y");
  po.input_names = twice;
  expect_code(tpt_predictor_new(&p, ref, out_names, 1, &po), TPT_ERR_INVALID_ARGUMENT, "names 'x' twice");
  expect_code(tpt_predictor_new(&p, ref, out_names, 0, NULL), TPT_ERR_INVALID_ARGUMENT, "n_outputs is 0");
  po.n_input_names = 1;
  po.checkpoint = path_in("no-such-file");
  expect_code(tpt_predictor_new(&p, ref, out_names, 1, &po), TPT_ERR_IO, "no-such-file");
  assert_null(p);
  ok(tpt_predictor_new(&p, ref, bad_out, 1, NULL)); /* all inputs; the output is checked at run */
  expect_code(tpt_predictor_run(&got, p, both, 2), TPT_ERR_NOT_FOUND, "published no output 'nope'");
  tpt_predictor_free(p);
  /* an input left out must have a known shape past the batch */
  const int64_t xs[] = {-1, 4}, ys[] = {-1, -1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, xs, 2}, {"y", TPT_DTYPE_F32, ys, 2}};
  tpt_model *free_y = NULL;
  ok(tpt_model_new(&free_y, spec, 2, tower, NULL, NULL));
  po.checkpoint = NULL;
  expect_code(tpt_predictor_new(&p, free_y, out_names, 1, &po), TPT_ERR_INVALID_ARGUMENT,
              "the input 'y', which the predictor is not given, has an unknown dimension 1");
  tpt_model_free(free_y);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_tensor_free(want);
  tpt_tensor_free(final);
  tpt_model_free(ref);
  tpt_model_free(trained);
  remove_dir();
}

/* ---- restores that must fail and change nothing */

static tpt_model *built(int64_t w) {
  tpt_model *m = model_of(w);
  ok(tpt_model_build(m));
  return m;
}

static void write_file(const char *p, const void *b, size_t n) {
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

static size_t read_file(const char *p, unsigned char **out) {
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc((size_t)n);
  assert_int_equal(fread(*out, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return (size_t)n;
}

static void failed_restores_change_nothing(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *src = model_of(3);
  tpt_trainer_free(train(src, 1, saver_every(0, 10, 0), NULL, NULL, NULL));
  tpt_model_free(src);
  const char *good = path_in("model-5");

  tpt_model *m = built(3);
  float before[12], after[12];
  variable(before, 12, m, "fc0/W");
  size_t n = 0;
  ok(tpt_model_restore(&n, m, good, NULL)); /* all four variables */
  assert_int_equal(n, 4);
  variable(after, 12, m, "fc0/W");
  assert_memory_not_equal(before, after, sizeof before);
  /* a model not built yet is built by the restore, then restored */
  tpt_model *fresh = model_of(3);
  float restored[12];
  ok(tpt_model_restore(&n, fresh, good, NULL));
  assert_int_equal(n, 4);
  variable(restored, 12, fresh, "fc0/W");
  assert_memory_equal(restored, after, sizeof after);
  tpt_model_free(fresh);

  /* another model's checkpoint: fc0 has 5 units there */
  tpt_model *other = built(5);
  float o_before[20], o_after[20];
  variable(o_before, 20, other, "fc0/W");
  expect_code2(tpt_model_restore(NULL, other, good, NULL), TPT_ERR_INVALID_ARGUMENT, "shapes differ: fc0/W",
               "nothing was changed");
  variable(o_after, 20, other, "fc0/W");
  assert_memory_equal(o_before, o_after, sizeof o_before);
  tpt_model *other2 = built(5);
  tpt_restore_options ro = TPT_RESTORE_OPTIONS_INIT;
  ro.ignore_shape_mismatch = 1; /* the rest: fc1/b only (fc1/W is [1, 5] vs [1, 3]) */
  ok(tpt_model_restore(&n, other2, good, &ro));
  assert_int_equal(n, 1);
  tpt_model_free(other2);

  /* a missing variable (looked up under a prefix that the file lacks) */
  variable(before, 12, m, "fc0/W");
  ro = (tpt_restore_options)TPT_RESTORE_OPTIONS_INIT;
  ro.prefix = "tower1/";
  expect_code2(tpt_model_restore(NULL, m, good, &ro), TPT_ERR_INVALID_ARGUMENT, "missing from the file: fc0/W (as 'tower1/fc0/W')",
               "fc1/b");
  variable(after, 12, m, "fc0/W");
  assert_memory_equal(before, after, sizeof before);
  /* a name map finds them */
  const char *map[] = {"fc0/W", "fc0/W", "fc0/b", "fc0/b"};
  ro.prefix = NULL;
  ro.name_map = map;
  ro.n_name_map = 2;
  ok(tpt_model_restore(&n, m, good, &ro));
  ro.ignore_unexpected = 0; /* the file's fc1 tensors match nothing under this map when fc1 is missing */
  ro.ignore_missing = 0;

  /* truncated and corrupted files */
  unsigned char *bytes = NULL;
  size_t size = read_file(good, &bytes);
  write_file(path_in("truncated"), bytes, size / 2);
  expect_code(tpt_model_restore(NULL, m, path_in("truncated"), NULL), TPT_ERR_INVALID_ARGUMENT, "truncated");
  tpt_trainer *t = new_trainer();
  expect_code(tpt_trainer_resume(t, path_in("truncated")), TPT_ERR_INVALID_ARGUMENT, "truncated");
  tpt_trainer_free(t);
  for (size_t i = 0; i < 64; ++i) bytes[size / 3 + i] ^= 0x5a;
  write_file(path_in("corrupted"), bytes, size);
  tpt_status *st = tpt_model_restore(NULL, m, path_in("corrupted"), NULL);
  assert_non_null(st);
  assert_non_null(strstr(tpt_status_message(st), "corrupted"));
  tpt_status_free(st);
  free(bytes);
  variable(after, 12, m, "fc0/W");
  assert_memory_equal(before, after, sizeof before);

  expect_code(tpt_model_restore(NULL, m, path_in("nothing-here"), NULL), TPT_ERR_IO, "nothing-here");
  tpt_model *unbuilt = model_of(3); /* built by the restore, then restored */
  ok(tpt_model_restore(NULL, unbuilt, path_in("model-5"), NULL));
  tpt_model_free(unbuilt);
  tpt_model_free(other);
  tpt_model_free(m);
  remove_dir();
}

static tpt_status *saves_in_run_step(tpt_trainer *t, void *ud) {
  (void)ud;
  expect_code(tpt_trainer_save_checkpoint(t, path_in("inside")), TPT_ERR_STATE, "not inside run_step");
  return tpt_trainer_hooked_step(t, NULL, NULL);
}

/* A resume from another model's checkpoint fails the run at SETUP, naming
 * the variables; one from a file that is not there fails at once. */
static void resume_errors(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *src = model_of(3);
  tpt_trainer_free(train(src, 1, saver_every(0, 10, 0), NULL, NULL, NULL));
  tpt_model_free(src);
  tpt_model *other = model_of(5);
  tpt_status *st = NULL;
  tpt_trainer_free(train(other, 2, NULL, NULL, dir, &st));
  expect_code2(st, TPT_ERR_INVALID_ARGUMENT, "the checkpoint is not of this model", "fc0/W");
  tpt_model_free(other);

  /* a trainer without a model: counters and random state only, and a warning says so */
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 2;
  o.steps_per_epoch = 1;
  o.logdir = dir;
  o.logdir_action = TPT_LOGDIR_KEEP;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *bare = NULL;
  ok(tpt_trainer_new(&bare, &o));
  ok(tpt_trainer_set_run_step(bare, saves_in_run_step, NULL, NULL));
  ok(tpt_trainer_resume(bare, dir));
  ok(tpt_trainer_run(bare));
  int64_t gs = 0;
  ok(tpt_trainer_global_step(&gs, bare));
  assert_int_equal(gs, 6); /* 5 from the checkpoint, then epoch 2's one step */
  tpt_trainer_free(bare);
  char log[16384];
  read_text(path_in("log.log"), log, sizeof log);
  assert_non_null(strstr(log, "this trainer has no model"));

  tpt_trainer *t = new_trainer();
  expect_code(tpt_trainer_resume(t, path_in("model-77")), TPT_ERR_IO, "model-77");
  expect_code(tpt_trainer_resume(t, "/"), TPT_ERR_NOT_FOUND, "no checkpoint in /");
  expect_code(tpt_trainer_resume(t, ""), TPT_ERR_INVALID_ARGUMENT, "path");
  expect_code(tpt_trainer_save_checkpoint(t, path_in("x")), TPT_ERR_STATE, "not running");
  tpt_trainer_free(t);
  remove_dir();
}

static void options_and_placement(void **state) {
  (void)state;
  tpt_callback *cb = NULL;
  tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
  so.max_to_keep = -1;
  expect_code(tpt_callback_model_saver(&cb, &so), TPT_ERR_INVALID_ARGUMENT, "options->max_to_keep must be >= 0");
  so = (tpt_model_saver_options)TPT_MODEL_SAVER_OPTIONS_INIT;
  so.every_k_epochs = 0;
  expect_code(tpt_callback_model_saver(&cb, &so), TPT_ERR_INVALID_ARGUMENT, "never save");
  so.every_k_epochs = 1;
  so.keep_every_n_hours = -1;
  expect_code(tpt_callback_model_saver(&cb, &so), TPT_ERR_INVALID_ARGUMENT, "keep_every_n_hours");
  so.version = 99;
  expect_code(tpt_callback_model_saver(&cb, &so), TPT_ERR_INVALID_ARGUMENT, "TPT_MODEL_SAVER_OPTIONS_INIT");

  /* no log directory and no dir: the run says so */
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 1;
  o.steps_per_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_callback_model_saver(&cb, NULL));
  ok(tpt_trainer_add_callback(t, cb));
  ok(tpt_trainer_set_run_step(t, saves_in_run_step, NULL, NULL));
  expect_code(tpt_trainer_run(t), TPT_ERR_STATE, "ModelSaver needs a directory");
  tpt_trainer_free(t);

  fresh_dir();
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_set_run_step(t, saves_in_run_step, NULL, NULL));
  ok(tpt_trainer_run(t));
  tpt_trainer_free(t);
  assert_false(exists("inside"));
  remove_dir();

  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER;
  d.fn = events;
  d.save = (tpt_status * (*)(tpt_tensor **, void *))1; /* without restore */
  expect_code(tpt_callback_new(&cb, &d), TPT_ERR_INVALID_ARGUMENT, "save and desc->restore go together");
}

/* ---- ScheduledHyperParamSetter */

static double lr_at[64]; /* by global step, read at each trigger_step (after the setters) */
static double lr_before_epoch[8];
static tpt_status *read_lr(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)r, (void)ud;
  tpt_optimizer *o = NULL;
  double lr = 0;
  int64_t gs = 0, ep = 0;
  tpt_status *st = tpt_trainer_optimizer(&o, t);
  if (!st) st = tpt_optimizer_get(&lr, o, "momentum");
  tpt_optimizer_free(o);
  if (!st) st = tpt_trainer_global_step(&gs, t);
  if (!st) st = tpt_trainer_epoch_num(&ep, t);
  if (st) return st;
  if (ev == TPT_EVENT_TRIGGER_STEP && gs < 64) lr_at[gs] = lr;
  if (ev == TPT_EVENT_BEFORE_EPOCH && ep < 8) lr_before_epoch[ep] = lr;
  return NULL;
}

static tpt_callback *scheduled(tpt_model *m, const tpt_schedule_point *pts, size_t n, uint32_t flags) {
  tpt_optimizer *o = NULL;
  tpt_callback *cb = NULL;
  ok(tpt_optimizer_new(&o, "sgd"));
  ok(tpt_optimizer_set(o, "momentum", 0.5));
  ok(tpt_model_set_optimizer(m, o));
  ok(tpt_callback_scheduled_hyperparam(&cb, o, "momentum", pts, n, flags));
  tpt_optimizer_free(o);
  return cb;
}

static tpt_callback *lr_reader(void) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER_STEP | TPT_EVENT_BEFORE_EPOCH;
  d.fn = read_lr;
  d.chief_only = 0;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  return cb;
}

/* tensorpack's rule: a point sets its value after that epoch completes;
 * epoch 0 means before the first. */
static void schedule_by_epoch(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *m = model_of(3);
  const tpt_schedule_point pts[] = {{3, 0.125}, {0, 0.25}, {1, 0.75}}; /* sorted by the library */
  tpt_callback *sched = scheduled(m, pts, 3, 0);
  tpt_trainer_free(train(m, 4, sched, lr_reader(), NULL, NULL));
  assert_true(lr_before_epoch[1] == 0.25);  /* point 0: in before_train */
  assert_true(lr_before_epoch[2] == 0.75);  /* point 1: after epoch 1 */
  assert_true(lr_before_epoch[3] == 0.75);  /* no point at 2: unchanged */
  assert_true(lr_before_epoch[4] == 0.125); /* point 3: after epoch 3 */
  tpt_model_free(m);
  remove_dir();
}

/* Linear interpolation by global step: at each trigger_step between points,
 * never after the last. */
static void schedule_by_step_linear(void **state) {
  (void)state;
  fresh_dir();
  tpt_model *m = model_of(3);
  const tpt_schedule_point pts[] = {{2, 0.8}, {10, 0.0}};
  tpt_callback *sched = scheduled(m, pts, 2, TPT_SCHEDULE_LINEAR | TPT_SCHEDULE_STEP_BASED);
  tpt_trainer_free(train(m, 3, sched, lr_reader(), NULL, NULL));
  assert_true(lr_at[1] == 0.5); /* before the first point: untouched */
  for (int gs = 2; gs <= 10; ++gs) assert_true(fabs(lr_at[gs] - 0.8 * (10 - gs) / 8.0) < 1e-12);
  assert_true(lr_at[15] == 0.0); /* after the last: as the last left it */
  tpt_model_free(m);
  remove_dir();
}

/* set_at_beginning: a run that starts at epoch 3 gets the value the
 * schedule gives there (a warning says so); without it, it keeps its own. */
static void schedule_set_at_beginning(void **state) {
  (void)state;
  fresh_dir();
  const tpt_schedule_point pts[] = {{1, 0.75}, {5, 0.125}};
  for (int flag = 0; flag < 2; ++flag) {
    tpt_model *m = model_of(3);
    tpt_callback *sched = scheduled(m, pts, 2, flag ? TPT_SCHEDULE_NOT_AT_BEGINNING : 0);
    tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
    o.starting_epoch = 3;
    o.max_epoch = 3;
    o.steps_per_epoch = 1;
    o.console = 0;
    o.progress = TPT_PROGRESS_OFF;
    tpt_trainer *t = NULL;
    tpt_input *in = NULL;
    ok(tpt_trainer_new(&t, &o));
    ok(tpt_input_dummy(&in, 2));
    ok(tpt_trainer_set_model(t, m, in));
    ok(tpt_trainer_add_callback(t, sched));
    ok(tpt_trainer_add_callback(t, lr_reader()));
    ok(tpt_trainer_run(t));
    assert_true(lr_before_epoch[3] == (flag ? 0.5 : 0.75));
    tpt_trainer_free(t);
    tpt_model_free(m);
  }
  tpt_callback *cb = NULL;
  tpt_optimizer *o = NULL;
  ok(tpt_optimizer_new(&o, "sgd"));
  expect_code(tpt_callback_scheduled_hyperparam(&cb, o, "lr", pts, 2, 0), TPT_ERR_INVALID_ARGUMENT, "learning_rate");
  expect_code(tpt_callback_scheduled_hyperparam(&cb, o, "momentum", pts, 0, 0), TPT_ERR_INVALID_ARGUMENT, "n_points");
  const tpt_schedule_point twice[] = {{1, 0.1}, {1, 0.2}};
  expect_code(tpt_callback_scheduled_hyperparam(&cb, o, "momentum", twice, 2, 0), TPT_ERR_INVALID_ARGUMENT,
              "two values at 1");
  const tpt_schedule_point nan_pt[] = {{1, NAN}};
  expect_code(tpt_callback_scheduled_hyperparam(&cb, o, "momentum", nan_pt, 1, 0), TPT_ERR_INVALID_ARGUMENT, "finite");
  expect_code(tpt_callback_scheduled_hyperparam(&cb, o, "momentum", pts, 2, 64), TPT_ERR_INVALID_ARGUMENT, "flags");
  tpt_optimizer_free(o);
  remove_dir();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(resume_mid_epoch_equals_uninterrupted),
      cmocka_unit_test(resume_mid_epoch_equals_uninterrupted_bf16),
      cmocka_unit_test(resume_of_large_tensors_equals_uninterrupted),
      cmocka_unit_test(resume_with_loss_scaling_equals_uninterrupted),
      cmocka_unit_test(auto_resume_without_a_checkpoint_starts_afresh),
      cmocka_unit_test(optimizer_slots),
      cmocka_unit_test(saver_rotates_and_keeps_hourly),
      cmocka_unit_test(min_and_max_savers),
      cmocka_unit_test(a_stopped_run_stays_stopped),
      cmocka_unit_test(run_ends_are_saved),
      cmocka_unit_test(misspelt_watched_names_fail),
      cmocka_unit_test(predictor_from_the_best_checkpoint),
      cmocka_unit_test(failed_restores_change_nothing),
      cmocka_unit_test(resume_errors),
      cmocka_unit_test(options_and_placement),
      cmocka_unit_test(schedule_by_epoch),
      cmocka_unit_test(schedule_by_step_linear),
      cmocka_unit_test(schedule_set_at_beginning),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
