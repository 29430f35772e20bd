/* Writing a trainer (issue 16) through the C API: train ops and the GAN
 * trainers, on a toy GAN (a linear generator "gen/" and a linear
 * discriminator "discrim/", least-squares losses "g_loss" and "d_loss"):
 *   - GANTrainer: every run_step is one hooked run that updates both nets;
 *   - SeparateGANTrainer: the exact order of D and G runs for d_period 3 and
 *     g_period 2, with global_step moving on inside a run_step;
 *   - each train op's optimizer changes only its own variables;
 *   - hooked and raw runs: only hooked ones advance global_step and call
 *     BEFORE_RUN / AFTER_RUN;
 *   - a run resumed from a checkpoint (momentum slots of both train ops'
 *     optimizers) ends bit-identical to an uninterrupted one;
 *   - errors name the op, the option or the missing output. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_common.h"

#define TPT_RETURN_IF_ERROR(call) \
  do {                            \
    tpt_status *st_ = (call);     \
    if (st_) return st_;          \
  } while (0)

enum { ROWS = 64, BATCH = 8 };

static int with_g_loss = 1; /* the tower publishes g_loss */
/* Loss scaling (new_trainer's, when set): the hooked run whose d_loss, and
 * the one whose g_loss, is multiplied by 1e36 (its scaled gradients overflow). */
static int scaled_trainer, overflow_d_at = -1, overflow_g_at = -1;
static int current_run = -1; /* the hooked run going on (set at BEFORE_RUN) */

/* real, z: [B, 2]; ones, zeros: [B, 1] */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  const int64_t s22[] = {2, 2}, s2[] = {2}, s21[] = {2, 1}, s1[] = {1};
  tpt_tensor *gw, *gb, *dw, *db, *fake, *d_real, *d_fake, *l_real, *l_fake, *d_loss, *g_loss;
  TPT_RETURN_IF_ERROR(tpt_tower_variable(&gw, tw, "gen/w", s22, 2, NULL));
  TPT_RETURN_IF_ERROR(tpt_tower_variable(&gb, tw, "gen/b", s2, 1, NULL));
  TPT_RETURN_IF_ERROR(tpt_tower_variable(&dw, tw, "discrim/w", s21, 2, NULL));
  TPT_RETURN_IF_ERROR(tpt_tower_variable(&db, tw, "discrim/b", s1, 1, NULL));
  TPT_RETURN_IF_ERROR(tpt_tensor_matmul(&fake, in[1], gw));
  TPT_RETURN_IF_ERROR(tpt_op_add(&fake, fake, gb));
  TPT_RETURN_IF_ERROR(tpt_tensor_matmul(&d_real, in[0], dw));
  TPT_RETURN_IF_ERROR(tpt_op_add(&d_real, d_real, db));
  TPT_RETURN_IF_ERROR(tpt_tensor_matmul(&d_fake, fake, dw));
  TPT_RETURN_IF_ERROR(tpt_op_add(&d_fake, d_fake, db));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&l_real, d_real, in[2]));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&l_fake, d_fake, in[3]));
  TPT_RETURN_IF_ERROR(tpt_op_add(&d_loss, l_real, l_fake));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&g_loss, d_fake, in[2]));
  if (current_run >= 0 && current_run == overflow_d_at) TPT_RETURN_IF_ERROR(tpt_op_mul_scalar(&d_loss, d_loss, 1e36));
  if (current_run >= 0 && current_run == overflow_g_at) TPT_RETURN_IF_ERROR(tpt_op_mul_scalar(&g_loss, g_loss, 1e36));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "d_loss", d_loss));
  if (with_g_loss) TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "g_loss", g_loss));
  return NULL;
}

static tpt_model *new_model(int momentum) {
  const int64_t s2[] = {-1, 2}, s1[] = {-1, 1};
  tpt_input_spec spec[] = {{"real", TPT_DTYPE_F32, s2, 2}, {"z", TPT_DTYPE_F32, s2, 2},
                           {"ones", TPT_DTYPE_F32, s1, 2}, {"zeros", TPT_DTYPE_F32, s1, 2}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 4, tower, NULL, NULL));
  tpt_optimizer *o = NULL;
  ok(tpt_optimizer_new(&o, "sgd"));
  ok(tpt_optimizer_set(o, "learning_rate", 0.05));
  if (momentum) ok(tpt_optimizer_set(o, "momentum", 0.9));
  ok(tpt_model_set_optimizer(m, o));
  tpt_optimizer_free(o);
  return m;
}

static tpt_input *new_input_of(int64_t batch) {
  static float real[ROWS * 2], z[ROWS * 2], ones[ROWS], zeros[ROWS];
  for (int i = 0; i < ROWS; ++i) {
    real[2 * i] = 1.0f + 0.01f * (float)i, real[2 * i + 1] = -0.5f + 0.02f * (float)(i % 7);
    z[2 * i] = (float)((i * 37) % 11) / 11.0f - 0.5f, z[2 * i + 1] = (float)((i * 53) % 13) / 13.0f - 0.5f;
    ones[i] = 1, zeros[i] = 0;
  }
  const int64_t s2[] = {ROWS, 2}, s1[] = {ROWS, 1};
  tpt_tensor *t[4] = {NULL};
  ok(tpt_tensor_from_data(&t[0], real, sizeof real, s2, 2, NULL));
  ok(tpt_tensor_from_data(&t[1], z, sizeof z, s2, 2, NULL));
  ok(tpt_tensor_from_data(&t[2], ones, sizeof ones, s1, 2, NULL));
  ok(tpt_tensor_from_data(&t[3], zeros, sizeof zeros, s1, 2, NULL));
  tpt_input *in = NULL;
  ok(tpt_input_from_tensors(&in, (const tpt_tensor *const *)t, 4, batch, 0, 0));
  for (int i = 0; i < 4; ++i) tpt_tensor_free(t[i]);
  return in;
}

static tpt_input *new_input(void) { return new_input_of(BATCH); }

static double sum_of(tpt_model *m, const char *name) {
  tpt_tensor *v = NULL;
  ok(tpt_model_variable(&v, m, name));
  int64_t n = 0;
  ok(tpt_tensor_numel(&n, v));
  float buf[4];
  ok(tpt_tensor_copy_to(buf, (size_t)n * sizeof(float), v));
  tpt_tensor_free(v);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += buf[i];
  return s;
}

/* After every hooked run: which of the two nets changed ('G', 'D', 'B'oth, '-'). */
typedef struct {
  tpt_model *model;
  double g, d;
  char runs[64];
  int n_runs, before_runs;
} watch;

static tpt_status *on_run(tpt_trainer *t, tpt_event e, const tpt_record *r, void *p) {
  (void)t, (void)r;
  watch *w = p;
  if (e == TPT_EVENT_BEFORE_RUN) {
    current_run = w->before_runs++;
    return NULL;
  }
  current_run = -1;
  const double g = sum_of(w->model, "gen/w"), d = sum_of(w->model, "discrim/w");
  const int gc = g != w->g, dc = d != w->d;
  if (w->n_runs < 63) w->runs[w->n_runs++] = gc && dc ? 'B' : gc ? 'G' : dc ? 'D' : '-';
  w->g = g, w->d = d;
  return NULL;
}

static tpt_status *on_before_train(tpt_trainer *t, tpt_event e, const tpt_record *r, void *p) {
  (void)t, (void)e, (void)r;
  watch *w = p;
  w->g = sum_of(w->model, "gen/w"), w->d = sum_of(w->model, "discrim/w");
  return NULL;
}

static void add_watch(tpt_trainer *t, watch *w) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_RUN | TPT_EVENT_AFTER_RUN;
  d.fn = on_run;
  d.user_data = w;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
  d = (tpt_callback_desc)TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_TRAIN;
  d.fn = on_before_train;
  d.user_data = w;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
}

static tpt_trainer *new_trainer(int64_t steps, const char *logdir) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 1;
  o.steps_per_epoch = steps;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.logdir = logdir;
  o.logdir_action = TPT_LOGDIR_KEEP;
  if (scaled_trainer) o.loss_scaling.mode = TPT_LOSS_SCALING_ON;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  return t;
}

static void gan_trainer_updates_both_nets_every_step(void **state) {
  (void)state;
  ok(tpt_manual_seed(1));
  tpt_model *m = new_model(0);
  tpt_trainer *t = new_trainer(6, NULL);
  ok(tpt_trainer_set_gan(t, m, new_input(), NULL));
  watch w = {.model = m};
  add_watch(t, &w);
  ok(tpt_trainer_run(t));
  int64_t gs = 0;
  ok(tpt_trainer_global_step(&gs, t));
  assert_int_equal(gs, 6);
  assert_int_equal(w.before_runs, 6);
  w.runs[w.n_runs] = '\0';
  assert_string_equal(w.runs, "BBBBBB");
  /* both losses reach the monitors (moving summaries, put at the epoch's end) */
  double v = 0;
  int64_t step = 0;
  ok(tpt_trainer_scalar_latest(&v, &step, t, "g_loss"));
  assert_int_equal(step, 6);
  ok(tpt_trainer_scalar_latest(&v, &step, t, "d_loss"));
  assert_true(v > 0);
  tpt_trainer_free(t);
  tpt_model_free(m);
}

/* tensorpack's SeparateGANTrainer.run_step, simulated. */
static int expected_runs(char *out, int run_steps, int64_t dp, int64_t gp) {
  int64_t gs = 0;
  int n = 0;
  for (int s = 0; s < run_steps; ++s) {
    if (gs % dp == 0) out[n++] = 'D', ++gs;
    if (gs % gp == 0) out[n++] = 'G', ++gs;
  }
  out[n] = '\0';
  return (int)gs;
}

static void separate_gan_trainer_follows_the_periods(void **state) {
  (void)state;
  const int64_t periods[2][2] = {{3, 1}, {1, 2}};
  for (int c = 0; c < 2; ++c) {
    ok(tpt_manual_seed(1));
    tpt_model *m = new_model(0);
    tpt_trainer *t = new_trainer(7, NULL);
    tpt_gan_options o = TPT_GAN_OPTIONS_INIT;
    o.separate = 1;
    o.d_period = periods[c][0];
    o.g_period = periods[c][1];
    ok(tpt_trainer_set_gan(t, m, new_input(), &o));
    watch w = {.model = m};
    add_watch(t, &w);
    ok(tpt_trainer_run(t));
    char want[64];
    const int gs_want = expected_runs(want, 7, o.d_period, o.g_period);
    w.runs[w.n_runs] = '\0';
    assert_string_equal(w.runs, want);
    int64_t gs = 0;
    ok(tpt_trainer_global_step(&gs, t));
    assert_int_equal(gs, gs_want);
    assert_int_equal(w.before_runs, gs_want);
    tpt_trainer_free(t);
    tpt_model_free(m);
  }
}

/* A run_step of our own: D raw, then G hooked. */
static tpt_status *raw_d_hooked_g(tpt_trainer *t, void *ud) {
  (void)ud;
  const char *d[] = {"d_op"}, *g[] = {"g_op"};
  TPT_RETURN_IF_ERROR(tpt_trainer_run_train_ops(t, d, 1, 0));
  return tpt_trainer_run_train_ops(t, g, 1, 1);
}

static tpt_status *only_d(tpt_trainer *t, void *ud) {
  (void)ud;
  const char *d[] = {"d_op"};
  return tpt_trainer_run_train_ops(t, d, 1, 1);
}

static void hooked_and_raw_runs_and_each_op_its_variables(void **state) {
  (void)state;
  /* raw D + hooked G: one global step per run_step; both nets move, but a
   * hooked run sees only G's change (D changed before it, raw) */
  ok(tpt_manual_seed(1));
  tpt_model *m = new_model(0);
  tpt_train_op op = TPT_TRAIN_OP_INIT;
  op.name = "g_op", op.cost = "g_loss", op.scope = "gen/";
  ok(tpt_model_add_train_op(m, &op));
  op.name = "d_op", op.cost = "d_loss", op.scope = "discrim/";
  ok(tpt_model_add_train_op(m, &op));
  tpt_trainer *t = new_trainer(5, NULL);
  ok(tpt_trainer_set_model(t, m, new_input()));
  ok(tpt_trainer_set_run_step(t, raw_d_hooked_g, NULL, NULL));
  watch w = {.model = m};
  add_watch(t, &w);
  ok(tpt_trainer_run(t));
  int64_t gs = 0;
  ok(tpt_trainer_global_step(&gs, t));
  assert_int_equal(gs, 5);
  assert_int_equal(w.before_runs, 5);
  w.runs[w.n_runs] = '\0';
  assert_string_equal(w.runs, "BBBBB"); /* D's raw change shows at the next hooked run's end */
  tpt_trainer_free(t);

  /* only D: G's variables never change */
  const double g0 = sum_of(m, "gen/w"), gb0 = sum_of(m, "gen/b");
  t = new_trainer(4, NULL);
  ok(tpt_trainer_set_model(t, m, new_input()));
  ok(tpt_trainer_set_run_step(t, only_d, NULL, NULL));
  watch w2 = {.model = m};
  add_watch(t, &w2);
  ok(tpt_trainer_run(t));
  w2.runs[w2.n_runs] = '\0';
  assert_string_equal(w2.runs, "DDDD");
  assert_true(sum_of(m, "gen/w") == g0 && sum_of(m, "gen/b") == gb0);
  tpt_trainer_free(t);
  tpt_model_free(m);
}

/* Trains `steps` GAN steps (momentum SGD), saving every 3 steps in `dir`;
 * with `resume` it resumes from model-<resume> in dir first. Returns the
 * variables' sums. */
static void gan_run(const char *dir, int64_t steps, int64_t resume, double out[4], int n_towers) {
  ok(tpt_manual_seed(2));
  tpt_model *m = new_model(1);
  tpt_trainer *t = new_trainer(steps, dir);
  tpt_gan_options g = TPT_GAN_OPTIONS_INIT;
  tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT;
  to.n_towers = n_towers;
  if (n_towers) g.towers = &to;
  ok(tpt_trainer_set_gan(t, m, new_input(), &g));
  tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
  so.every_k_steps = 3;
  so.max_to_keep = 0;
  tpt_callback *saver = NULL;
  ok(tpt_callback_model_saver(&saver, &so));
  ok(tpt_trainer_add_callback(t, saver));
  if (resume) {
    char path[512];
    snprintf(path, sizeof path, "%s/model-%lld", dir, (long long)resume);
    ok(tpt_trainer_resume(t, path));
  }
  ok(tpt_trainer_run(t));
  const char *names[] = {"gen/w", "gen/b", "discrim/w", "discrim/b"};
  for (int i = 0; i < 4; ++i) out[i] = sum_of(m, names[i]);
  tpt_trainer_free(t);
  tpt_model_free(m);
}

static void resume_is_exact_with_both_optimizers(void **state) {
  (void)state;
  char dir[] = "/tmp/tpt_custom_trainer_XXXXXX";
  assert_non_null(mkdtemp(dir));
  for (int towers = 0; towers <= 2; towers += 2) { /* one tower; 2 replicated towers (every replica's slots) */
    double whole[4], resumed[4];
    gan_run(dir, 9, 0, whole, towers);
    gan_run(dir, 9, 3, resumed, towers); /* from step 3: both momentum slots must come back */
    for (int i = 0; i < 4; ++i) assert_true(whole[i] == resumed[i]);
  }
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Every variable of the model, in a fixed order, into v (9 floats). */
static void read_vars(tpt_model *m, float v[9]) {
  const char *names[] = {"gen/w", "gen/b", "discrim/w", "discrim/b"};
  const size_t sizes[] = {4, 2, 2, 1};
  size_t at = 0;
  for (int i = 0; i < 4; ++i) {
    tpt_tensor *t = NULL;
    ok(tpt_model_variable(&t, m, names[i]));
    ok(tpt_tensor_copy_to(v + at, sizes[i] * sizeof(float), t));
    tpt_tensor_free(t);
    at += sizes[i];
  }
}

/* tensorpack's MultiGPUGANTrainer: each op minimises its cost averaged over
 * the towers, so 2 towers of BATCH rows (replicated, or a parameter server)
 * train as one tower of 2 x BATCH rows: the same batches, concatenated. */
static void towers_gan_equals_one_tower_of_the_concatenated_batches(void **state) {
  (void)state;
  const int steps = 4; /* ROWS / (2 x BATCH): one pass, every row once */
  float want[9], got[9];
  for (int c = 0; c < 3; ++c) { /* one tower of 2B; replicated; parameter server */
    ok(tpt_manual_seed(3));
    tpt_model *m = new_model(1);
    tpt_trainer *t = new_trainer(steps, NULL);
    tpt_gan_options g = TPT_GAN_OPTIONS_INIT;
    tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT; /* 2 towers */
    to.strategy = c == 1 ? TPT_STRATEGY_REPLICATED : TPT_STRATEGY_PARAMETER_SERVER;
    if (c > 0) g.towers = &to;
    ok(tpt_trainer_set_gan(t, m, c == 0 ? new_input_of(2 * BATCH) : new_input(), &g));
    watch w = {.model = m};
    add_watch(t, &w);
    ok(tpt_trainer_run(t));
    int64_t gs = 0;
    ok(tpt_trainer_global_step(&gs, t));
    assert_int_equal(gs, steps);
    w.runs[w.n_runs] = '\0';
    assert_string_equal(w.runs, "BBBB");
    read_vars(m, c == 0 ? want : got);
    if (c > 0)
      for (int i = 0; i < 9; ++i) assert_true(fabs(got[i] - want[i]) <= 1e-5 * (1 + fabs(want[i])));
    tpt_trainer_free(t);
    tpt_model_free(m);
  }
  /* the async strategy does not run the GAN trainers */
  tpt_model *m = new_model(0);
  tpt_trainer *t = new_trainer(2, NULL);
  tpt_gan_options g = TPT_GAN_OPTIONS_INIT;
  tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT;
  to.strategy = TPT_STRATEGY_ASYNC;
  g.towers = &to;
  expect_code(tpt_trainer_set_gan(t, m, new_input(), &g), TPT_ERR_UNSUPPORTED, "not the async one");
  to.n_towers = 0;
  g.towers = &to;
  expect_code(tpt_trainer_set_gan(t, m, new_input(), &g), TPT_ERR_INVALID_ARGUMENT, "options->towers->n_towers is 0");
  /* a version 1 struct ends before towers: whatever follows it is not read */
  g.version = 1;
  g.towers = (const tpt_towers_options *)&to; /* n_towers 0: an error if it were read */
  ok(tpt_trainer_set_gan(t, m, new_input(), &g));
  tpt_trainer_free(t);
  /* train ops on async towers: refused when set */
  t = new_trainer(2, NULL);
  to = (tpt_towers_options)TPT_TOWERS_OPTIONS_INIT;
  to.strategy = TPT_STRATEGY_ASYNC;
  ok(tpt_trainer_set_towers(t, m, new_input(), &to));
  const char *d[] = {"d_op"};
  expect_code(tpt_trainer_set_train_ops(t, d, 1), TPT_ERR_UNSUPPORTED, "async towers");
  tpt_trainer_free(t);
  tpt_model_free(m);
}

/* Loss scaling with train ops: each op decides on its own gradients
 * (GradScaler's step per optimizer): d_loss overflowing at run 1 skips only
 * D's update, g_loss at run 3 only G's; the scale backs off at each (one
 * update of the scale per run). On one tower, 2 replicated towers and a
 * parameter server. */
static void loss_scaling_skips_each_op_on_its_own(void **state) {
  (void)state;
  scaled_trainer = 1, overflow_d_at = 1, overflow_g_at = 3;
  for (int c = 0; c < 3; ++c) {
    ok(tpt_manual_seed(3));
    tpt_model *m = new_model(1);
    tpt_trainer *t = new_trainer(5, NULL);
    tpt_gan_options g = TPT_GAN_OPTIONS_INIT;
    tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT; /* 2 towers */
    to.strategy = c == 1 ? TPT_STRATEGY_REPLICATED : TPT_STRATEGY_PARAMETER_SERVER;
    if (c > 0) g.towers = &to;
    ok(tpt_trainer_set_gan(t, m, new_input(), &g));
    watch w = {.model = m};
    add_watch(t, &w);
    ok(tpt_trainer_run(t));
    w.runs[w.n_runs] = '\0';
    assert_string_equal(w.runs, "BGBDB");
    double scale = 0, skipped = 0;
    ok(tpt_trainer_scalar_latest(&scale, NULL, t, "loss_scale"));
    ok(tpt_trainer_scalar_latest(&skipped, NULL, t, "skipped_updates"));
    assert_true(scale == 16384 && skipped == 2);
    tpt_trainer_free(t);
    tpt_model_free(m);
  }
  scaled_trainer = 0, overflow_d_at = overflow_g_at = -1;
}

/* tpt_trainer_set_train_ops: the default step becomes the named ops, no
 * run_step of our own; and an op's optimizer of its own follows a
 * hyper-parameter schedule. */
static void train_ops_replace_the_default_step(void **state) {
  (void)state;
  ok(tpt_manual_seed(1));
  tpt_model *m = new_model(0);
  tpt_trainer *t = new_trainer(5, NULL);
  const char *d[] = {"d_op"}, *gd[] = {"g_op", "d_op"}, *bad[] = {"d_op", "nope"};
  expect_code(tpt_trainer_set_train_ops(t, d, 1), TPT_ERR_STATE, "no model yet");
  tpt_train_op op = TPT_TRAIN_OP_INIT;
  op.name = "g_op", op.cost = "g_loss", op.scope = "gen/";
  ok(tpt_model_add_train_op(m, &op));
  tpt_optimizer *d_opt = NULL; /* D's own optimizer: its learning rate 0 from global step 2 */
  ok(tpt_optimizer_new(&d_opt, "sgd"));
  ok(tpt_optimizer_set(d_opt, "learning_rate", 0.05));
  op.name = "d_op", op.cost = "d_loss", op.scope = "discrim/", op.optimizer = d_opt;
  ok(tpt_model_add_train_op(m, &op));
  ok(tpt_trainer_set_model(t, m, new_input()));
  expect_code(tpt_trainer_set_train_ops(t, bad, 2), TPT_ERR_INVALID_ARGUMENT, "names[1] is 'nope', not a train op");
  expect_code(tpt_trainer_set_train_ops(t, d, 0), TPT_ERR_INVALID_ARGUMENT, "n is 0");
  expect_code(tpt_trainer_set_train_ops(t, NULL, 1), TPT_ERR_INVALID_ARGUMENT, "names");
  ok(tpt_trainer_set_train_ops(t, gd, 2));
  const tpt_schedule_point at2[] = {{2, 0.0}};
  tpt_callback *sched = NULL;
  ok(tpt_callback_scheduled_hyperparam(&sched, d_opt, "learning_rate", at2, 1, TPT_SCHEDULE_STEP_BASED));
  ok(tpt_trainer_add_callback(t, sched));
  watch w = {.model = m};
  add_watch(t, &w);
  ok(tpt_trainer_run(t));
  int64_t gs = 0;
  ok(tpt_trainer_global_step(&gs, t));
  assert_int_equal(gs, 5);
  assert_int_equal(w.before_runs, 5);
  w.runs[w.n_runs] = '\0';
  assert_string_equal(w.runs, "BBGGG"); /* D's learning rate is 0 after global step 2 */
  double lr = -1;
  ok(tpt_optimizer_get(&lr, d_opt, "learning_rate"));
  assert_true(lr == 0);
  expect_code(tpt_trainer_set_train_ops(t, d, 1), TPT_ERR_STATE, "already run");
  tpt_trainer_free(t);
  tpt_optimizer_free(d_opt);
  tpt_model_free(m);
}

static void errors_name_what_is_wrong(void **state) {
  (void)state;
  tpt_model *m = new_model(0);
  tpt_train_op op = TPT_TRAIN_OP_INIT;
  expect_code(tpt_model_add_train_op(m, &op), TPT_ERR_INVALID_ARGUMENT, "op->name");
  op.name = "a", op.cost = "d_loss", op.scope = "nothing/";
  ok(tpt_model_add_train_op(m, &op));
  expect_code(tpt_model_add_train_op(m, &op), TPT_ERR_INVALID_ARGUMENT, "a train op 'a' already");
  tpt_optimizer *mine = NULL;
  ok(tpt_optimizer_new(&mine, "adam"));
  op.name = "b", op.optimizer = mine;
  ok(tpt_model_add_train_op(m, &op));
  op.name = "c";
  expect_code(tpt_model_add_train_op(m, &op), TPT_ERR_INVALID_ARGUMENT, "train op 'b''s already");
  tpt_optimizer_free(mine);
  op.version = 7;
  expect_code(tpt_model_add_train_op(m, &op), TPT_ERR_INVALID_ARGUMENT, "op->version is 7");

  /* an op whose scope matches nothing fails when training starts */
  tpt_trainer *t = new_trainer(2, NULL);
  ok(tpt_trainer_set_model(t, m, new_input()));
  ok(tpt_trainer_set_run_step(t, only_d, NULL, NULL));
  expect_code(tpt_trainer_run(t), TPT_ERR_INVALID_ARGUMENT, "train op 'a': no trainable variable's name starts with 'nothing/'");
  tpt_trainer_free(t);
  tpt_model_free(m);

  /* an unknown op; outside run_step */
  m = new_model(0);
  t = new_trainer(2, NULL);
  ok(tpt_trainer_set_gan(t, m, new_input(), NULL));
  const char *d[] = {"d_op"};
  expect_code(tpt_trainer_run_train_ops(t, d, 1, 1), TPT_ERR_STATE, "inside run_step");
  ok(tpt_trainer_set_run_step(t, only_d, NULL, NULL));
  tpt_trainer_free(t);
  tpt_model_free(m);

  /* a missing output */
  with_g_loss = 0;
  m = new_model(0);
  t = new_trainer(2, NULL);
  ok(tpt_trainer_set_gan(t, m, new_input(), NULL));
  expect_code2(tpt_trainer_run(t), TPT_ERR_STATE, "train op 'g_op'", "did not set the output 'g_loss'");
  tpt_trainer_free(t);
  tpt_model_free(m);
  with_g_loss = 1;

  /* the GAN's options */
  m = new_model(0);
  t = new_trainer(2, NULL);
  tpt_gan_options o = TPT_GAN_OPTIONS_INIT;
  o.separate = 1, o.d_period = 2, o.g_period = 3;
  expect_code(tpt_trainer_set_gan(t, m, new_input(), &o), TPT_ERR_INVALID_ARGUMENT, "one of d_period and g_period must be 1");
  o.d_period = 0;
  expect_code(tpt_trainer_set_gan(t, m, new_input(), &o), TPT_ERR_INVALID_ARGUMENT, "at least 1");
  o = (tpt_gan_options)TPT_GAN_OPTIONS_INIT;
  o.g_op = o.d_op = "same";
  expect_code(tpt_trainer_set_gan(t, m, new_input(), &o), TPT_ERR_INVALID_ARGUMENT, "two different names");
  tpt_trainer_free(t);
  tpt_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gan_trainer_updates_both_nets_every_step),
      cmocka_unit_test(separate_gan_trainer_follows_the_periods),
      cmocka_unit_test(hooked_and_raw_runs_and_each_op_its_variables),
      cmocka_unit_test(resume_is_exact_with_both_optimizers),
      cmocka_unit_test(towers_gan_equals_one_tower_of_the_concatenated_batches),
      cmocka_unit_test(loss_scaling_skips_each_op_on_its_own),
      cmocka_unit_test(train_ops_replace_the_default_step),
      cmocka_unit_test(errors_name_what_is_wrong),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
