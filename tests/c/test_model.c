/* Models from C: the tower function, tensorpack's variable rules, scopes,
 * initializers, the optimizer's hyper-parameters, inputs, inference, and
 * the errors of bad input (signature mismatch, NaN cost, failing or
 * cost-less tower functions); TorchScript models, loaded or compiled from
 * source. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_common.h"
#include "cost_log.h"

static tpt_status *op1(tpt_tensor **out, const char *op, const tpt_arg *args, size_t nargs) {
  size_t n = 0;
  return tpt_op_call(out, 1, &n, op, NULL, args, nargs);
}

/* What the tower function of a test does. */
typedef enum { PLAIN, NEW_VAR_LATER, SHAPE_MISMATCH, DTYPE_MISMATCH, NAME_TWICE, NO_COST, FAILS, NAN_COST,
               SCOPES } behaviour;
typedef struct {
  behaviour how;
  int calls, builds, inference_calls;
  int destroyed;
  char last_name[32];
} tower_state;

/* cost = mean((x @ W^T + b - y)^2) with W [1, 3], b [1] */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n_in, void *ud) {
  tower_state *s = ud;
  assert_int_equal(n_in, 2);
  int32_t building = 0, training = 0, can_create = 0;
  ok(tpt_tower_is_building(&building, tw));
  ok(tpt_tower_is_training(&training, tw));
  ok(tpt_tower_can_create_variables(&can_create, tw));
  assert_int_equal(building, can_create);
  ok(tpt_tower_name(s->last_name, sizeof s->last_name, tw));
  s->calls++;
  s->builds += building;
  s->inference_calls += !training;
  if (s->how == FAILS && !building) return tpt_status_new(TPT_ERR_IO, "the tower could not read its lookup table");
  const int64_t sw[] = {1, 3}, sb[] = {1};
  tpt_tensor *w = NULL, *b = NULL, *p = NULL, *cost = NULL;
  tpt_status *st = NULL;
  if (s->how == SCOPES) {
    ok(tpt_tower_push_scope(tw, "fc"));
    ok(tpt_tower_push_scope(tw, "inner"));
  }
  if ((st = tpt_tower_variable(&w, tw, "W", sw, 2, NULL))) goto done;
  if (s->how == SCOPES) ok(tpt_tower_pop_scope(tw));
  tpt_variable_options bo = TPT_VARIABLE_OPTIONS_INIT;
  bo.init = TPT_INIT_CONSTANT;
  bo.a = 0.5;
  if ((st = tpt_tower_variable(&b, tw, "b", sb, 1, &bo))) goto done;
  if (s->how == SCOPES) ok(tpt_tower_pop_scope(tw));
  if (!building && s->how == NEW_VAR_LATER) {
    tpt_tensor *extra = NULL;
    if ((st = tpt_tower_variable(&extra, tw, "late", sb, 1, NULL))) goto done;
  }
  if (!building && s->how == SHAPE_MISMATCH) {
    const int64_t other[] = {3, 1};
    tpt_tensor *w2 = NULL;
    st = tpt_tower_variable(&w2, tw, "W2", other, 2, NULL);
    goto done;
  }
  if (s->how == NAME_TWICE) {
    tpt_tensor *again = NULL;
    if ((st = tpt_tower_variable(&again, tw, "b", sb, 1, &bo))) goto done;
  }
  {
    tpt_arg l[] = {T(in[0]), T(w), T(b)};
    if ((st = op1(&p, "aten::linear", l, 3))) goto done;
    tpt_arg m[] = {T(p), T(in[1])};
    if ((st = op1(&cost, "aten::mse_loss", m, 2))) goto done;
    if (s->how == NAN_COST && !building) {
      tpt_tensor *nan = NULL;
      float v = NAN;
      ok(tpt_tensor_from_data(&nan, &v, sizeof v, NULL, 0, NULL));
      tpt_arg a[] = {T(cost), T(nan)};
      tpt_tensor *bad = NULL;
      ok(op1(&bad, "aten::add", a, 2));
      tpt_tensor_free(nan);
      tpt_tensor_free(cost);
      cost = bad;
    }
    if (s->how != NO_COST && (st = tpt_tower_set_cost(tw, cost))) goto done;
    st = tpt_tower_set_output(tw, "prediction", p);
  }
done:
  tpt_tensor_free(w);
  tpt_tensor_free(b);
  tpt_tensor_free(p);
  tpt_tensor_free(cost);
  return st;
}

static void destroy_state(void *ud) { ((tower_state *)ud)->destroyed++; }

static tpt_model *make_model(tower_state *s) {
  const int64_t sx[] = {-1, 3}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 2, tower, s, destroy_state));
  return m;
}

/* 64 rows of y = x . (1, -2, 3) + 1, x uniform in [-1, 1) (an LCG) */
static tpt_input *make_input(int64_t batch, int64_t rows) {
  float x[64 * 3], y[64];
  uint32_t r = 12345;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < 3; ++j) {
      r = r * 1664525u + 1013904223u;
      x[i * 3 + j] = (float)(r >> 8) / 8388608.0f - 1.0f;
    }
    y[i] = x[i * 3] - 2 * x[i * 3 + 1] + 3 * x[i * 3 + 2] + 1;
  }
  const int64_t sx[] = {rows, 3}, sy[] = {rows, 1};
  tpt_tensor *tx = NULL, *ty = NULL;
  ok(tpt_tensor_from_data(&tx, x, (size_t)rows * 3 * sizeof(float), sx, 2, NULL));
  ok(tpt_tensor_from_data(&ty, y, (size_t)rows * sizeof(float), sy, 2, NULL));
  const tpt_tensor *both[] = {tx, ty};
  tpt_input *in = NULL;
  ok(tpt_input_from_tensors(&in, both, 2, batch, 1, 42));
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  return in;
}

static tpt_trainer *make_trainer(int64_t steps, int64_t epochs) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = steps;
  o.max_epoch = epochs;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  return t;
}

static tpt_status *train(tower_state *s, const char *optimizer, int64_t steps, int64_t epochs, tpt_model **keep) {
  tpt_model *m = make_model(s);
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, optimizer));
  ok(tpt_optimizer_set(opt, "learning_rate", 0.1));
  ok(tpt_model_set_optimizer(m, opt));
  tpt_optimizer_free(opt);
  tpt_trainer *t = make_trainer(steps, epochs);
  ok(tpt_trainer_set_model(t, m, make_input(16, 64)));
  tpt_status *st = tpt_trainer_run(t);
  tpt_trainer_free(t);
  if (keep)
    *keep = m;
  else
    tpt_model_free(m);
  return st;
}

static void test_trains_and_reuses_variables(void **state) {
  (void)state;
  tower_state s = {PLAIN, 0, 0, 0, 0, ""};
  tpt_model *m = NULL;
  ok(train(&s, "sgd", 50, 4, &m));
  assert_int_equal(s.builds, 1);   /* one build call */
  assert_int_equal(s.calls, 1 + 200); /* then one call per step */
  assert_string_equal(s.last_name, "tower0");
  char names[64];
  size_t needed = 0;
  ok(tpt_model_variable_names(names, sizeof names, &needed, m));
  assert_string_equal(names, "W\nb\n");
  assert_int_equal(needed, 5);
  expect_code(tpt_model_variable_names(names, 3, &needed, m), TPT_ERR_INVALID_ARGUMENT, "5 bytes are needed");
  /* learned y = x . (1, -2, 3) + 1 */
  tpt_tensor *w = NULL, *b = NULL;
  ok(tpt_model_variable(&w, m, "W"));
  ok(tpt_model_variable(&b, m, "b"));
  float wv[3], bv;
  ok(tpt_tensor_copy_to(wv, sizeof wv, w));
  ok(tpt_tensor_copy_to(&bv, sizeof bv, b));
  assert_true(fabsf(wv[0] - 1) < 0.05f && fabsf(wv[1] + 2) < 0.05f && fabsf(wv[2] - 3) < 0.05f);
  assert_true(fabsf(bv - 1) < 0.05f);
  tpt_tensor *absent = NULL;
  expect_code(tpt_model_variable(&absent, m, "nope"), TPT_ERR_NOT_FOUND, "no variable 'nope'");
  assert_null(absent);
  tpt_tensor_free(w);
  tpt_tensor_free(b);

  /* inference reuses the variables, creates none, publishes outputs */
  const float x[] = {1, 1, 1, 0, 0, 0};
  const float y[] = {0, 0};
  const int64_t sx[] = {2, 3}, sy[] = {2, 1};
  tpt_tensor *tx = NULL, *ty = NULL, *outs[2] = {NULL, NULL};
  ok(tpt_tensor_from_data(&tx, x, sizeof x, sx, 2, NULL));
  ok(tpt_tensor_from_data(&ty, y, sizeof y, sy, 2, NULL));
  const tpt_tensor *ins[] = {tx, ty};
  const char *want[] = {"prediction", "cost"};
  ok(tpt_model_infer(outs, m, ins, 2, want, 2));
  assert_string_equal(s.last_name, "InferenceTower");
  assert_int_equal(s.inference_calls, 1);
  float pred[2];
  ok(tpt_tensor_copy_to(pred, sizeof pred, outs[0]));
  assert_true(fabsf(pred[0] - 3) < 0.1f && fabsf(pred[1] - 1) < 0.1f);
  tpt_tensor_free(outs[0]);
  tpt_tensor_free(outs[1]);
  const char *missing[] = {"logits"};
  expect_code(tpt_model_infer(outs, m, ins, 2, missing, 1), TPT_ERR_NOT_FOUND, "no output 'logits'");
  /* a batch that does not fit the signature */
  const tpt_tensor *wrong[] = {ty, tx};
  expect_code(tpt_model_infer(outs, m, wrong, 2, want, 1), TPT_ERR_INVALID_ARGUMENT,
              "input 'x' is Float [2, 1] but the signature says Float [-1, 3]");
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  tpt_model_free(m);
  assert_int_equal(s.destroyed, 1);
}

static void test_variable_rules(void **state) {
  (void)state;
  tower_state s = {NEW_VAR_LATER, 0, 0, 0, 0, ""};
  expect_code(train(&s, "sgd", 3, 1, NULL), TPT_ERR_INVALID_ARGUMENT,
              "variable 'late' does not exist: variables are created by the first call of the first training tower");
  s = (tower_state){SHAPE_MISMATCH, 0, 0, 0, 0, ""};
  /* W2 does not exist either: creation outside the build call */
  expect_code(train(&s, "sgd", 3, 1, NULL), TPT_ERR_INVALID_ARGUMENT, "'W2' does not exist");
  s = (tower_state){NAME_TWICE, 0, 0, 0, 0, ""};
  expect_code(train(&s, "sgd", 3, 1, NULL), TPT_ERR_INVALID_ARGUMENT, "variable 'b' is used twice in one call");
  assert_int_equal(s.destroyed, 1);
  s = (tower_state){SCOPES, 0, 0, 0, 0, ""};
  tpt_model *m = NULL;
  ok(train(&s, "adam", 3, 1, &m));
  char names[64];
  ok(tpt_model_variable_names(names, sizeof names, NULL, m));
  assert_string_equal(names, "fc/inner/W\nfc/b\n");
  tpt_model_free(m);
}

/* Reusing a variable with another shape or dtype, seen directly. */
static int mismatch_calls;
static tpt_status *mismatch_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n_in, void *ud) {
  (void)in;
  (void)n_in;
  (void)ud;
  int32_t building = 0;
  ok(tpt_tower_is_building(&building, tw));
  const int64_t s3[] = {3}, s4[] = {4};
  tpt_tensor *v = NULL;
  if (building) {
    ok(tpt_tower_variable(&v, tw, "v", s3, 1, NULL));
    tpt_tensor_free(v);
    return NULL;
  }
  mismatch_calls++;
  expect_code(tpt_tower_variable(&v, tw, "v", s4, 1, NULL), TPT_ERR_INVALID_ARGUMENT,
              "variable 'v' exists with shape [3], asked for shape [4]");
  tpt_variable_options o = TPT_VARIABLE_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_F64;
  expect_code(tpt_tower_variable(&v, tw, "v", s3, 1, &o), TPT_ERR_INVALID_ARGUMENT,
              "variable 'v' exists with dtype Float, asked for Double");
  o = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_I64;
  expect_code(tpt_tower_variable(&v, tw, "ints", s3, 1, &o), TPT_ERR_INVALID_ARGUMENT, "does not exist");
  expect_code(tpt_tower_pop_scope(tw), TPT_ERR_STATE, "pop_scope without a scope");
  expect_code(tpt_tower_push_scope(tw, "a/b"), TPT_ERR_INVALID_ARGUMENT, "without '/'");
  return NULL;
}

static void test_reuse_mismatch_and_infer_only(void **state) {
  (void)state;
  const int64_t sx[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 1}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 1, mismatch_tower, NULL, NULL));
  const float x[] = {1, 2};
  const int64_t s2[] = {2};
  tpt_tensor *tx = NULL;
  ok(tpt_tensor_from_data(&tx, x, sizeof x, s2, 1, NULL));
  const tpt_tensor *ins[] = {tx};
  mismatch_calls = 0;
  ok(tpt_model_infer(NULL, m, ins, 1, NULL, 0)); /* builds first, then infers */
  assert_int_equal(mismatch_calls, 1);
  tpt_tensor_free(tx);
  tpt_model_free(m);
}

static void test_initializers(void **state) {
  (void)state;
  /* built through the C API; statistics checked here */
  tpt_trainer *unused = NULL;
  (void)unused;
  ok(tpt_manual_seed(123));
  tower_state s = {PLAIN, 0, 0, 0, 0, ""};
  tpt_model *m = make_model(&s);
  ok(tpt_model_build(m));
  ok(tpt_model_build(m)); /* once */
  assert_int_equal(s.builds, 1);
  tpt_tensor *w = NULL, *b = NULL;
  ok(tpt_model_variable(&w, m, "W"));
  ok(tpt_model_variable(&b, m, "b"));
  float wv[3], bv;
  ok(tpt_tensor_copy_to(wv, sizeof wv, w));
  ok(tpt_tensor_copy_to(&bv, sizeof bv, b));
  /* glorot uniform for [1, 3]: fan_in 3, fan_out 1, bound sqrt(6 / 4) */
  for (int i = 0; i < 3; ++i) assert_true(fabsf(wv[i]) <= sqrtf(6.0f / 4.0f));
  assert_true(bv == 0.5f); /* constant */
  /* set_variable copies, and checks the shape */
  const float nw[] = {9, 8, 7};
  const int64_t s13[] = {1, 3}, s3[] = {3};
  tpt_tensor *v = NULL, *bad = NULL;
  ok(tpt_tensor_from_data(&v, nw, sizeof nw, s13, 2, NULL));
  ok(tpt_model_set_variable(m, "W", v));
  ok(tpt_tensor_copy_to(wv, sizeof wv, w)); /* the handle sees the variable itself */
  assert_true(wv[0] == 9 && wv[2] == 7);
  ok(tpt_tensor_from_data(&bad, nw, sizeof nw, s3, 1, NULL));
  expect_code(tpt_model_set_variable(m, "W", bad), TPT_ERR_INVALID_ARGUMENT, "has shape [1, 3], the value [3]");
  expect_code(tpt_model_set_variable(m, "X", bad), TPT_ERR_NOT_FOUND, "no variable 'X'");
  tpt_tensor_free(v);
  tpt_tensor_free(bad);
  tpt_tensor_free(w);
  tpt_tensor_free(b);
  tpt_model_free(m);
}

static void test_bad_steps_fail_cleanly(void **state) {
  (void)state;
  tower_state s = {NO_COST, 0, 0, 0, 0, ""};
  expect_code(train(&s, "sgd", 3, 1, NULL), TPT_ERR_STATE, "did not set a cost");
  s = (tower_state){FAILS, 0, 0, 0, 0, ""};
  tpt_status *st = train(&s, "sgd", 3, 1, NULL);
  assert_int_equal(tpt_status_code(st), TPT_ERR_IO);
  assert_string_equal(tpt_status_message(st), "the tower could not read its lookup table"); /* unchanged */
  tpt_status_free(st);
  s = (tower_state){NAN_COST, 0, 0, 0, 0, ""};
  expect_code(train(&s, "adam", 3, 1, NULL), TPT_ERR_BACKEND, "the cost is nan at global_step 0");
  assert_int_equal(s.destroyed, 1);
  /* no optimizer */
  s = (tower_state){PLAIN, 0, 0, 0, 0, ""};
  tpt_model *m = make_model(&s);
  tpt_trainer *t = make_trainer(2, 1);
  ok(tpt_trainer_set_model(t, m, make_input(16, 64)));
  expect_code(tpt_trainer_run(t), TPT_ERR_STATE, "no optimizer");
  tpt_trainer_free(t);
  tpt_model_free(m);
}

/* A feed input: batches from a C callback; TPT_STOP ends the data. */
typedef struct {
  int served, limit, bad_shape, destroyed;
} feed_state;

static tpt_status *feed(tpt_tensor **batch, size_t n, void *ud) {
  feed_state *f = ud;
  assert_int_equal(n, 2);
  if (f->served == f->limit) return tpt_status_new(TPT_STOP, "end of data");
  f->served++;
  float x[4 * 3] = {0}, y[4] = {1, 1, 1, 1};
  const int64_t sx[] = {4, f->bad_shape ? 2 : 3}, sy[] = {4, 1};
  tpt_status *st = tpt_tensor_from_data(&batch[0], x, (size_t)(sx[1] * 4) * sizeof(float), sx, 2, NULL);
  if (!st) st = tpt_tensor_from_data(&batch[1], y, sizeof y, sy, 2, NULL);
  return st;
}

static void destroy_feed(void *ud) { ((feed_state *)ud)->destroyed++; }

/* The cost reaches the monitors as tensorpack's add_moving_summary does: a
 * zero-debiased moving average (decay 0.95) put by MergeAllSummaries after
 * each epoch's last step (callbacks/summary.py, MergeAllSummaries_RunWithOp.
 * _need_run @1547a54e lines 101-106; tfutils/summary.py lines 198-264), or every summary_period steps. Checked
 * against a hand computation over each step's cost output. */
static double debiased(const double *x, size_t n, double decay) {
  double biased = 0;
  for (size_t i = 0; i < n; ++i) biased = decay * biased + (1 - decay) * x[i];
  return biased / (1 - pow(decay, (double)n));
}

static int count_of(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) ++n;
  return n;
}

static void test_moving_summaries(void **state) {
  (void)state;
  char dir[] = "/tmp/tpt_summaries_XXXXXX";
  assert_non_null(mkdtemp(dir));
  const int64_t periods[] = {0, 250};
  for (int k = 0; k < 2; ++k) {
    tower_state s = {PLAIN, 0, 0, 0, 0, ""};
    tpt_model *m = make_model(&s);
    tpt_optimizer *opt = NULL;
    ok(tpt_optimizer_new(&opt, "sgd"));
    ok(tpt_optimizer_set(opt, "learning_rate", 0.01));
    ok(tpt_model_set_optimizer(m, opt));
    tpt_optimizer_free(opt);
    char logdir[64];
    snprintf(logdir, sizeof logdir, "%s/run%d", dir, k);
    tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
    o.steps_per_epoch = 1000;
    o.max_epoch = 3;
    o.console = 0;
    o.progress = TPT_PROGRESS_OFF;
    o.logdir = logdir;
    o.summary_period = periods[k];
    tpt_trainer *t = NULL;
    ok(tpt_trainer_new(&t, &o));
    ok(tpt_trainer_set_model(t, m, make_input(16, 64)));
    cost_log seen = {0};
    ok(cost_log_attach(t, &seen));
    ok(tpt_trainer_run(t));
    assert_int_equal(seen.count, 3000);
    const size_t per_epoch = periods[k] ? 4 : 1;
    int64_t steps[12];
    double values[12];
    size_t n = 0;
    ok(tpt_trainer_scalar_history(&n, steps, values, 12, t, "cost"));
    assert_int_equal(n, 3 * per_epoch);
    for (size_t i = 0; i < n; ++i) {
      const size_t upto = (i + 1) * (3000 / n); /* steps seen when it was put */
      assert_int_equal(steps[i], (int64_t)upto);
      const double want = debiased(seen.values, upto, 0.95);
      if (fabs(values[i] - want) > 1e-12 * fabs(want))
        fail_msg("summary %zu: %.17g, by hand %.17g", i, values[i], want);
    }
    /* a one-element output would be summarised too; "prediction" is not one */
    expect_code(tpt_trainer_scalar_latest(&(double){0}, NULL, t, "prediction"), TPT_ERR_NOT_FOUND, NULL);
    tpt_trainer_free(t);
    tpt_model_free(m);
    free(seen.values);
    /* stats.json: an entry per put, not one per step */
    char path[96];
    snprintf(path, sizeof path, "%s/stats.json", logdir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char text[16384];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    assert_int_equal(count_of(text, "\"cost\""), (int)(3 * per_epoch));
    assert_int_equal(count_of(text, "\"global_step\""), (int)(3 * per_epoch));
    unlink(path);
    snprintf(path, sizeof path, "%s/log.log", logdir);
    unlink(path);
    rmdir(logdir);
  }
  rmdir(dir);
}

static void test_feed_input(void **state) {
  (void)state;
  feed_state f = {0, 5, 0, 0};
  tower_state s = {PLAIN, 0, 0, 0, 0, ""};
  tpt_model *m = make_model(&s);
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, "rmsprop"));
  ok(tpt_model_set_optimizer(m, opt));
  tpt_optimizer_free(opt);
  tpt_input *in = NULL;
  ok(tpt_input_from_feed(&in, feed, &f, destroy_feed));
  tpt_trainer *t = make_trainer(100, 1);
  ok(tpt_trainer_set_model(t, m, in));
  cost_log seen = {0};
  ok(cost_log_attach(t, &seen));
  ok(tpt_trainer_run(t));
  const char *reason = NULL;
  ok(tpt_trainer_stop_reason(&reason, t));
  assert_string_equal(reason, "end of data");
  int64_t g = 0;
  ok(tpt_trainer_global_step(&g, t));
  assert_int_equal(g, 5);
  /* the run ended mid-epoch: after_train put the moving average once more
   * (tensorpack would have dropped it) */
  double cost = 0;
  int64_t at = 0;
  ok(tpt_trainer_scalar_latest(&cost, &at, t, "cost"));
  assert_int_equal(at, 5);
  assert_int_equal(seen.count, 5);
  assert_true(fabs(cost - debiased(seen.values, 5, 0.95)) <= 1e-12 * fabs(cost));
  free(seen.values);
  tpt_trainer_free(t);
  assert_int_equal(f.destroyed, 1);

  /* a feed batch of the wrong shape: a clear error */
  feed_state bad = {0, 5, 1, 0};
  ok(tpt_input_from_feed(&in, feed, &bad, destroy_feed));
  t = make_trainer(100, 1);
  ok(tpt_trainer_set_model(t, m, in));
  expect_code(tpt_trainer_run(t), TPT_ERR_INVALID_ARGUMENT, "input 'x' is Float [4, 2] but the signature says Float [-1, 3]");
  tpt_trainer_free(t);
  assert_int_equal(bad.destroyed, 1);
  tpt_model_free(m);
}

/* Hyper-parameters by name, and a schedule changing the learning rate. */
static tpt_status *halve_lr(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)t;
  (void)e;
  (void)r;
  double lr = 0;
  tpt_status *st = tpt_optimizer_get(&lr, ud, "learning_rate");
  return st ? st : tpt_optimizer_set(ud, "learning_rate", lr / 2);
}

/* The same schedule, reaching the optimizer through the trainer: no user_data. */
static tpt_status *halve_lr_of_trainer(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)e, (void)r, (void)ud;
  tpt_optimizer *o = NULL;
  tpt_status *st = tpt_trainer_optimizer(&o, t); /* a new handle: ours to free */
  if (st) return st;
  double lr = 0;
  st = tpt_optimizer_get(&lr, o, "learning_rate");
  if (!st) st = tpt_optimizer_set(o, "learning_rate", lr / 2);
  tpt_optimizer_free(o);
  return st;
}

static void test_callback_reaches_model_and_optimizer(void **state) {
  (void)state;
  tower_state s = {PLAIN, 0, 0, 0, 0, ""};
  tpt_model *m = make_model(&s);
  tpt_trainer *t = make_trainer(4, 3);
  tpt_model *got = (tpt_model *)1;
  tpt_optimizer *o = (tpt_optimizer *)1;
  expect_code(tpt_trainer_model(&got, t), TPT_ERR_NOT_FOUND, "the trainer has no model");
  assert_null(got);
  expect_code(tpt_trainer_optimizer(&o, t), TPT_ERR_NOT_FOUND, "the trainer has no model");
  assert_null(o);
  ok(tpt_trainer_set_model(t, m, make_input(16, 64)));
  expect_code(tpt_trainer_optimizer(&o, t), TPT_ERR_NOT_FOUND, "no optimizer");
  ok(tpt_optimizer_new(&o, "sgd"));
  ok(tpt_optimizer_set(o, "learning_rate", 0.08));
  ok(tpt_model_set_optimizer(m, o));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER;
  d.fn = halve_lr_of_trainer;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
  ok(tpt_trainer_run(t));
  double lr = 0;
  ok(tpt_optimizer_get(&lr, o, "learning_rate"));
  assert_true(fabs(lr - 0.01) < 1e-12); /* halved after each of 3 epochs */
  /* the model handle: the same model */
  ok(tpt_trainer_model(&got, t));
  char names[64];
  ok(tpt_model_variable_names(names, sizeof names, NULL, got));
  assert_non_null(strstr(names, "W"));
  tpt_model_free(got);
  EXPECT_NULL_ARG(tpt_trainer_model(NULL, t), "tpt_trainer_model", "out");
  tpt_optimizer *scratch = NULL;
  EXPECT_NULL_ARG(tpt_trainer_optimizer(&scratch, NULL), "tpt_trainer_optimizer", "trainer");
  assert_null(scratch);
  tpt_trainer_free(t);
  tpt_optimizer_free(o);
  tpt_model_free(m);
}

static void test_optimizer_hyperparameters(void **state) {
  (void)state;
  tpt_optimizer *o = NULL;
  expect_code(tpt_optimizer_new(&o, "lion"), TPT_ERR_INVALID_ARGUMENT, "unknown optimizer kind 'lion'");
  const char *kinds[] = {"sgd", "adam", "adamw", "rmsprop", "adagrad"};
  const double lr[] = {0.01, 0.001, 0.001, 0.01, 0.01};
  for (int k = 0; k < 5; ++k) {
    ok(tpt_optimizer_new(&o, kinds[k]));
    double v = 0;
    ok(tpt_optimizer_get(&v, o, "learning_rate"));
    assert_true(v == lr[k]);
    ok(tpt_optimizer_get(&v, o, "accumulate_steps"));
    assert_true(v == 1);
    expect_code(tpt_optimizer_set(o, "learnin_rate", 1), TPT_ERR_INVALID_ARGUMENT, "has no hyper-parameter 'learnin_rate'");
    expect_code(tpt_optimizer_set(o, "learning_rate", -1), TPT_ERR_INVALID_ARGUMENT, "must be >= 0");
    expect_code(tpt_optimizer_set(o, "accumulate_steps", 1.5), TPT_ERR_INVALID_ARGUMENT, "integer >= 1");
    expect_code(tpt_optimizer_scale_gradients(o, "([", 2), TPT_ERR_INVALID_ARGUMENT, "not a regular expression");
    tpt_optimizer_free(o);
  }
  /* a schedule: halve the learning rate after every epoch */
  tower_state s = {PLAIN, 0, 0, 0, 0, ""};
  tpt_model *m = make_model(&s);
  ok(tpt_optimizer_new(&o, "sgd"));
  ok(tpt_optimizer_set(o, "learning_rate", 0.08));
  ok(tpt_optimizer_set(o, "clip_global_norm", 1.0));
  ok(tpt_optimizer_set(o, "accumulate_steps", 2));
  ok(tpt_optimizer_scale_gradients(o, "^b$", 0.5));
  ok(tpt_model_set_optimizer(m, o));
  tpt_trainer *t = make_trainer(8, 3);
  ok(tpt_trainer_set_model(t, m, make_input(16, 64)));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER;
  d.fn = halve_lr;
  d.user_data = o;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
  ok(tpt_trainer_run(t));
  double v = 0;
  ok(tpt_optimizer_get(&v, o, "learning_rate"));
  assert_true(fabs(v - 0.01) < 1e-12);
  size_t n = 0;
  ok(tpt_trainer_scalar_history(&n, NULL, NULL, 0, t, "cost"));
  assert_int_equal(n, 3); /* the moving average of the cost, once per epoch */
  tpt_trainer_free(t);
  tpt_optimizer_free(o);
  tpt_model_free(m);
}

static void test_input_validation(void **state) {
  (void)state;
  tpt_input *in = NULL;
  const float x[] = {1, 2, 3};
  const int64_t s3[] = {3}, s2[] = {2};
  tpt_tensor *a = NULL, *b = NULL;
  ok(tpt_tensor_from_data(&a, x, sizeof x, s3, 1, NULL));
  ok(tpt_tensor_from_data(&b, x, 2 * sizeof(float), s2, 1, NULL));
  const tpt_tensor *ab[] = {a, b};
  expect_code(tpt_input_from_tensors(&in, ab, 2, 1, 0, 0), TPT_ERR_INVALID_ARGUMENT, "tensors[1] has 2 rows");
  expect_code(tpt_input_from_tensors(&in, ab, 1, 4, 0, 0), TPT_ERR_INVALID_ARGUMENT, "batch_size 4 is larger");
  expect_code(tpt_input_from_tensors(&in, ab, 1, 0, 0, 0), TPT_ERR_INVALID_ARGUMENT, "batch_size must be >= 1");
  expect_code(tpt_input_from_tensors(&in, ab, 0, 1, 0, 0), TPT_ERR_INVALID_ARGUMENT, "n_tensors is 0");
  tpt_tensor_free(a);
  tpt_tensor_free(b);
  const int64_t bad_shape[] = {-1, 0};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, bad_shape, 2}};
  tpt_model *m = NULL;
  expect_code(tpt_model_new(&m, spec, 1, tower, NULL, NULL), TPT_ERR_INVALID_ARGUMENT, "dimensions are >= 1 or -1");
  tpt_input_spec twice[] = {{"x", TPT_DTYPE_F32, s3, 1}, {"x", TPT_DTYPE_F32, s3, 1}};
  expect_code(tpt_model_new(&m, twice, 2, tower, NULL, NULL), TPT_ERR_INVALID_ARGUMENT, "is used twice");
  feed_state f = {0, 0, 0, 0};
  expect_code(tpt_model_new(&m, twice, 2, NULL, &f, destroy_feed), TPT_ERR_INVALID_ARGUMENT, "'tower_fn'");
  assert_int_equal(f.destroyed, 1);
  /* set_model takes the input even when it fails */
  ok(tpt_input_from_feed(&in, feed, &f, destroy_feed));
  expect_code(tpt_trainer_set_model(NULL, NULL, in), TPT_ERR_INVALID_ARGUMENT, "'trainer'");
  assert_int_equal(f.destroyed, 2);
}

/* TrainConfig + launch: the init hook runs once after the build call and
 * before BEFORE_TRAIN; callbacks and monitors are registered; everything
 * handed over is taken, also when the config is bad. */
typedef struct {
  int init_calls, before_train_seen_b7, destroyed;
  tpt_model *model;
} config_state;

static tpt_status *init_hook(tpt_model *m, void *ud) {
  config_state *c = ud;
  c->init_calls++;
  const float seven = 7;
  const int64_t s1[] = {1};
  tpt_tensor *v = NULL;
  tpt_status *st = tpt_tensor_from_data(&v, &seven, sizeof seven, s1, 1, NULL);
  if (!st) st = tpt_model_set_variable(m, "b", v);
  tpt_tensor_free(v);
  return st;
}

static tpt_status *check_b(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  config_state *c = ud;
  (void)t;
  (void)e;
  (void)r;
  tpt_tensor *b = NULL;
  tpt_status *st = tpt_model_variable(&b, c->model, "b");
  float v = 0;
  if (!st) st = tpt_tensor_copy_to(&v, sizeof v, b);
  tpt_tensor_free(b);
  c->before_train_seen_b7 += v == 7.0f;
  return st;
}

static void destroy_config_state(void *ud) { ((config_state *)ud)->destroyed++; }

static void test_train_config_and_launch(void **state) {
  (void)state;
  tower_state s = {PLAIN, 0, 0, 0, 0, ""};
  config_state c = {0, 0, 0, NULL};
  c.model = make_model(&s);
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, "adam"));
  ok(tpt_model_set_optimizer(c.model, opt));
  tpt_optimizer_free(opt);
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_TRAIN;
  d.fn = check_b;
  d.user_data = &c;
  d.destroy = destroy_config_state;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT; /* steps_per_epoch from the input: 64 / 16 = 4 */
  o.max_epoch = 2;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config cfg = TPT_TRAIN_CONFIG_INIT;
  cfg.options = &o;
  cfg.model = c.model;
  cfg.input = make_input(16, 64);
  cfg.callbacks = &cb;
  cfg.n_callbacks = 1;
  cfg.init = init_hook;
  cfg.init_user_data = &c;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_from_config(&t, &cfg));
  ok(tpt_trainer_run(t));
  int64_t g = 0;
  ok(tpt_trainer_global_step(&g, t));
  assert_int_equal(g, 8);
  tpt_trainer_free(t);
  assert_int_equal(c.init_calls, 1);
  assert_int_equal(c.before_train_seen_b7, 1);
  assert_int_equal(c.destroyed, 1);

  /* launch: the same in one call */
  cfg.input = make_input(16, 64);
  cfg.callbacks = NULL;
  cfg.n_callbacks = 0;
  ok(tpt_launch_train(&cfg));
  assert_int_equal(c.init_calls, 2);

  /* a dataflow with input_options: a queue of 3 batches that does not
   * repeat ends the run at the end of the first pass, in epoch 1 of 2 */
  {
    float x[64 * 3], y[64];
    for (int i = 0; i < 64; ++i) {
      for (int j = 0; j < 3; ++j) x[i * 3 + j] = (float)((i * 7 + j) % 5) - 2.0f;
      y[i] = x[i * 3];
    }
    const int64_t sx[] = {64, 3}, sy[] = {64, 1};
    tpt_tensor *tx = NULL, *ty = NULL;
    ok(tpt_tensor_from_data(&tx, x, sizeof x, sx, 2, NULL));
    ok(tpt_tensor_from_data(&ty, y, sizeof y, sy, 2, NULL));
    const tpt_tensor *both[] = {tx, ty};
    tpt_dataflow *rows = NULL, *batches = NULL;
    ok(tpt_dataflow_from_tensors(&rows, both, 2, 0));
    ok(tpt_dataflow_batch(&batches, rows, 16, 0));
    tpt_input_options io = TPT_INPUT_OPTIONS_INIT;
    io.capacity = 3;
    io.repeat = 0;
    tpt_train_config dcfg = TPT_TRAIN_CONFIG_INIT;
    dcfg.options = &o;
    dcfg.model = c.model;
    dcfg.dataflow = batches;
    dcfg.input_options = &io;
    ok(tpt_trainer_from_config(&t, &dcfg));
    ok(tpt_trainer_run(t));
    const char *why = NULL;
    ok(tpt_trainer_stop_reason(&why, t));
    assert_non_null(why);
    assert_non_null(strstr(why, "the input does not repeat"));
    ok(tpt_trainer_global_step(&g, t));
    assert_int_equal(g, 4); /* one pass of 64 / 16 */
    tpt_trainer_free(t);
    io.capacity = 0;
    expect_code(tpt_trainer_from_config(&t, &dcfg), TPT_ERR_INVALID_ARGUMENT, "config->input_options->capacity must be >= 1, got 0");
    io.capacity = 3;
    io.kind = (tpt_input_kind)9;
    expect_code(tpt_trainer_from_config(&t, &dcfg), TPT_ERR_INVALID_ARGUMENT, "config->input_options->kind 9");
    io.kind = TPT_INPUT_QUEUE;
    dcfg.dataflow = NULL;
    dcfg.input = make_input(16, 64); /* input_options shape the dataflow's input only */
    expect_code(tpt_trainer_from_config(&t, &dcfg), TPT_ERR_INVALID_ARGUMENT, "config->input_options is set with config->input");
    dcfg.version = 4; /* before input_options: the field is not read */
    dcfg.input = make_input(16, 64);
    ok(tpt_trainer_from_config(&t, &dcfg));
    tpt_trainer_free(t);
    tpt_dataflow_free(rows);
    tpt_dataflow_free(batches);
    tpt_tensor_free(tx);
    tpt_tensor_free(ty);
  }

  /* a bad config: everything handed over is still taken */
  feed_state f = {0, 1, 0, 0};
  ok(tpt_callback_new(&cb, &d));
  tpt_train_config bad = TPT_TRAIN_CONFIG_INIT;
  ok(tpt_input_from_feed(&bad.input, feed, &f, destroy_feed));
  bad.callbacks = &cb;
  bad.n_callbacks = 1;
  expect_code(tpt_launch_train(&bad), TPT_ERR_INVALID_ARGUMENT, "argument 'config->model' is NULL");
  assert_int_equal(f.destroyed, 1);
  assert_int_equal(c.destroyed, 2);
  bad.version = 0;
  expect_code(tpt_trainer_from_config(&t, &bad), TPT_ERR_INVALID_ARGUMENT, "TPT_TRAIN_CONFIG_INIT");
  cfg.input = NULL; /* taken by the launch above */
  expect_code(tpt_trainer_from_config(NULL, &cfg), TPT_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
  expect_code(tpt_launch_train(NULL), TPT_ERR_INVALID_ARGUMENT, "argument 'config' is NULL");
  tpt_model_free(c.model);
}

static void test_torchscript_errors(void **state) {
  (void)state;
  const int64_t sx[] = {-1, 3};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}};
  tpt_model *m = NULL;
  expect_code(tpt_model_from_torchscript(&m, "/nonexistent/model.pt", spec, 1), TPT_ERR_IO,
              "cannot load the TorchScript module /nonexistent/model.pt");
  assert_null(m);
  /* a file that is not a TorchScript archive */
  char path[] = "/tmp/tpt_not_a_moduleXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "garbage", 7), 7);
  close(fd);
  expect_code(tpt_model_from_torchscript(&m, path, spec, 1), TPT_ERR_IO, "cannot load the TorchScript module");
  unlink(path);
  tower_state s = {PLAIN, 0, 0, 0, 0, ""};
  m = make_model(&s);
  expect_code(tpt_model_save_torchscript(m, "/tmp/x.pt"), TPT_ERR_UNSUPPORTED, "not made from TorchScript");
  expect_code(tpt_model_save_torchscript(m, NULL), TPT_ERR_INVALID_ARGUMENT, "argument 'path' is NULL");
  expect_code(tpt_model_save_torchscript(NULL, "/tmp/x.pt"), TPT_ERR_INVALID_ARGUMENT, "argument 'model' is NULL");
  tpt_model_free(m);
  expect_code(tpt_model_from_torchscript(NULL, "x", spec, 1), TPT_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
  expect_code(tpt_model_from_torchscript(&m, NULL, spec, 1), TPT_ERR_INVALID_ARGUMENT, "argument 'path' is NULL");
}

/* A two-layer MLP compiled from source, with a helper method, a buffer, and
 * an output that says which mode (train or eval) the module ran in. */
static const char *mlp_source =
    "def hidden(self, x):\n"
    "    return torch.relu(torch.matmul(x, self.W1.t()) + self.b1)\n"
    "\n"
    "def forward(self, x, y):\n"
    "    p = (torch.matmul(self.hidden(x), self.W2.t()) + self.b2) * self.scale\n"
    "    mode = torch.full([1], 1.0 if self.training else 0.0)\n"
    "    return torch.mean((p - y) * (p - y)), {\"prediction\": p, \"mode\": mode}\n";

static const int64_t mlp_w1[] = {8, 3}, mlp_b1[] = {8}, mlp_w2[] = {1, 8}, mlp_b2[] = {1};

static tpt_status *compile_mlp(tpt_model **out, const char *source) {
  static tpt_variable_options he, zeros, half, scale;
  he = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
  he.init = TPT_INIT_HE_NORMAL;
  zeros = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
  zeros.init = TPT_INIT_ZEROS;
  half = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
  half.init = TPT_INIT_CONSTANT;
  half.a = 0.5;
  scale = half;
  scale.a = 1;
  scale.trainable = 0;
  const int64_t one[] = {1};
  tpt_torchscript_param params[] = {{"W1", mlp_w1, 2, &he},
                                    {"b1", mlp_b1, 1, &zeros},
                                    {"W2", mlp_w2, 2, NULL}, /* glorot uniform */
                                    {"b2", mlp_b2, 1, &half},
                                    {"scale", one, 1, &scale}};
  const int64_t sx[] = {-1, 3}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  return tpt_model_from_torchscript_source(out, source, params, 5, spec, 2);
}

static void expect_shape(const tpt_model *m, const char *name, const int64_t *want, size_t ndim) {
  tpt_tensor *v = NULL;
  ok(tpt_model_variable(&v, m, name));
  size_t n = 0;
  int64_t dims[4];
  ok(tpt_tensor_ndim(&n, v));
  assert_int_equal(n, ndim);
  ok(tpt_tensor_shape(dims, 4, v));
  for (size_t i = 0; i < ndim; ++i) assert_int_equal(dims[i], want[i]);
  tpt_tensor_free(v);
}

/* The values of variable `name` (at most 64 floats). */
static size_t values_of(float *buf, const tpt_model *m, const char *name) {
  tpt_tensor *v = NULL;
  int64_t n = 0;
  ok(tpt_model_variable(&v, m, name));
  ok(tpt_tensor_numel(&n, v));
  assert_true(n <= 64);
  ok(tpt_tensor_copy_to(buf, (size_t)n * sizeof(float), v));
  tpt_tensor_free(v);
  return (size_t)n;
}

static void test_torchscript_source_trains_saves_loads(void **state) {
  (void)state;
  ok(tpt_manual_seed(7));
  tpt_model *m = NULL;
  ok(compile_mlp(&m, mlp_source));
  assert_non_null(m);
  char names[64];
  ok(tpt_model_variable_names(names, sizeof names, NULL, m)); /* no build call */
  assert_string_equal(names, "W1\nb1\nW2\nb2\nscale\n");
  expect_shape(m, "W1", mlp_w1, 2);
  expect_shape(m, "b1", mlp_b1, 1);
  expect_shape(m, "W2", mlp_w2, 2);
  expect_shape(m, "b2", mlp_b2, 1);
  float v[64];
  assert_int_equal(values_of(v, m, "b1"), 8);
  for (int i = 0; i < 8; ++i) assert_true(v[i] == 0); /* zeros */
  values_of(v, m, "b2");
  assert_true(v[0] == 0.5f); /* constant */
  values_of(v, m, "scale");
  assert_true(v[0] == 1.0f);
  values_of(v, m, "W2"); /* glorot uniform for [1, 8]: bound sqrt(6 / 9) */
  for (int i = 0; i < 8; ++i) assert_true(fabsf(v[i]) <= sqrtf(6.0f / 9.0f) && v[i] != 0);
  /* the same seed draws the same values */
  tpt_model *m2 = NULL;
  float w1[24], w1b[24];
  values_of(w1, m, "W1");
  ok(tpt_manual_seed(7));
  ok(compile_mlp(&m2, mlp_source));
  values_of(w1b, m2, "W1");
  assert_memory_equal(w1, w1b, sizeof w1);
  tpt_model_free(m2);

  /* training: the cost goes down, the buffer stays */
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, "adam"));
  ok(tpt_optimizer_set(opt, "learning_rate", 0.05));
  ok(tpt_model_set_optimizer(m, opt));
  tpt_optimizer_free(opt);
  tpt_trainer *t = make_trainer(20, 4);
  ok(tpt_trainer_set_model(t, m, make_input(16, 64)));
  cost_log seen = {0};
  ok(cost_log_attach(t, &seen));
  ok(tpt_trainer_run(t));
  assert_int_equal(seen.count, 80);
  const double *costs = seen.values;
  tpt_trainer_free(t);
  double first = (costs[0] + costs[1] + costs[2] + costs[3]) / 4, last = (costs[76] + costs[77] + costs[78] + costs[79]) / 4;
  if (!(last < 0.25 * first)) fail_msg("the cost went from %g to %g", first, last);
  free(seen.values);
  values_of(v, m, "scale");
  assert_true(v[0] == 1.0f);
  float trained[24];
  values_of(trained, m, "W1");
  assert_memory_not_equal(trained, w1, sizeof w1);

  /* saved and loaded again: the same values, the same predictions */
  char path[] = "/tmp/tpt_ts_sourceXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  ok(tpt_model_save_torchscript(m, path));
  const int64_t sx[] = {-1, 3}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *again = NULL;
  expect_code(tpt_model_from_torchscript(&again, path, spec, 1), TPT_ERR_INVALID_ARGUMENT,
              "forward(self, x, y) takes 2 inputs, the input signature has 1"); /* checked on load too */
  assert_null(again);
  ok(tpt_model_from_torchscript(&again, path, spec, 2));
  unlink(path);
  ok(tpt_model_variable_names(names, sizeof names, NULL, again));
  assert_string_equal(names, "W1\nb1\nW2\nb2\nscale\n");
  const char *vars[] = {"W1", "b1", "W2", "b2", "scale"};
  for (int i = 0; i < 5; ++i) {
    float a[64], b[64];
    size_t n = values_of(a, m, vars[i]);
    assert_int_equal(values_of(b, again, vars[i]), n);
    assert_memory_equal(a, b, n * sizeof(float));
  }
  const float x[] = {1, 0, 0, 0, 1, 0}, y[] = {2, -1};
  const int64_t s23[] = {2, 3}, s21[] = {2, 1};
  tpt_tensor *tx = NULL, *ty = NULL, *outs[3] = {NULL, NULL, NULL}, *outs2[3] = {NULL, NULL, NULL};
  ok(tpt_tensor_from_data(&tx, x, sizeof x, s23, 2, NULL));
  ok(tpt_tensor_from_data(&ty, y, sizeof y, s21, 2, NULL));
  const tpt_tensor *ins[] = {tx, ty};
  const char *want[] = {"prediction", "cost", "mode"};
  ok(tpt_model_infer(outs, m, ins, 2, want, 3));
  ok(tpt_model_infer(outs2, again, ins, 2, want, 3));
  float pa[2], pb[2], ca, cb, mode;
  ok(tpt_tensor_copy_to(pa, sizeof pa, outs[0]));
  ok(tpt_tensor_copy_to(pb, sizeof pb, outs2[0]));
  assert_memory_equal(pa, pb, sizeof pa);
  ok(tpt_tensor_copy_to(&ca, sizeof ca, outs[1]));
  ok(tpt_tensor_copy_to(&cb, sizeof cb, outs2[1]));
  assert_true(ca == cb && ca == ((pa[0] - 2) * (pa[0] - 2) + (pa[1] + 1) * (pa[1] + 1)) / 2);
  ok(tpt_tensor_copy_to(&mode, sizeof mode, outs[2]));
  assert_true(mode == 0); /* eval() in inference */
  for (int i = 0; i < 3; ++i) {
    tpt_tensor_free(outs[i]);
    tpt_tensor_free(outs2[i]);
  }
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  tpt_model_free(again);
  tpt_model_free(m);
}

/* self.training is true in training towers and false in inference: the
 * cost says which (1 or 0). */
static void test_torchscript_source_train_mode(void **state) {
  (void)state;
  const char *src =
      "def forward(self, x):\n"
      "    c = torch.sum(x * self.w) * 0.0 + (1.0 if self.training else 0.0)\n"
      "    return c\n";
  const int64_t one[] = {1};
  tpt_torchscript_param p[] = {{"w", one, 1, NULL}};
  const int64_t sx[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 1}};
  tpt_model *m = NULL;
  ok(tpt_model_from_torchscript_source(&m, src, p, 1, spec, 1));
  const float xv[] = {1, 2, 3, 4};
  const int64_t s4[] = {4};
  tpt_tensor *x = NULL;
  ok(tpt_tensor_from_data(&x, xv, sizeof xv, s4, 1, NULL));
  const tpt_tensor *data[] = {x};
  tpt_input *in = NULL;
  ok(tpt_input_from_tensors(&in, data, 1, 2, 0, 0));
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, "sgd"));
  ok(tpt_model_set_optimizer(m, opt));
  tpt_optimizer_free(opt);
  tpt_trainer *t = make_trainer(2, 1);
  ok(tpt_trainer_set_model(t, m, in));
  cost_log seen = {0};
  ok(cost_log_attach(t, &seen));
  ok(tpt_trainer_run(t));
  assert_int_equal(seen.count, 2);
  assert_true(seen.values[0] == 1 && seen.values[1] == 1);
  free(seen.values);
  tpt_trainer_free(t);
  tpt_tensor *c = NULL;
  const char *names[] = {"cost"};
  ok(tpt_model_infer(&c, m, data, 1, names, 1));
  float cv = -1;
  ok(tpt_tensor_copy_to(&cv, sizeof cv, c));
  assert_true(cv == 0);
  tpt_tensor_free(c);
  tpt_tensor_free(x);
  tpt_model_free(m);
}

/* A module with one parameter (`name`, shape, options) that it does not use. */
static tpt_status *compile_one(tpt_model **m, const char *name, const int64_t *shape, size_t ndim,
                               const tpt_variable_options *o) {
  tpt_torchscript_param p[] = {{name, shape, ndim, o}};
  const int64_t sx[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 1}};
  return tpt_model_from_torchscript_source(m, "def forward(self, x):\n    return torch.sum(x)\n", p, 1, spec, 1);
}

static void test_torchscript_source_errors(void **state) {
  (void)state;
  const int64_t s2[] = {2}, s0[] = {0}, sneg[] = {2, -1};
  tpt_model *m = (tpt_model *)&m; /* overwritten with NULL on failure */
  const tpt_code BAD = TPT_ERR_INVALID_ARGUMENT;
  expect_code(compile_one(&m, NULL, s2, 1, NULL), BAD, "tpt_model_from_torchscript_source: params[0].name is NULL");
  assert_null(m);
  expect_code(compile_one(&m, "", s2, 1, NULL), BAD, "params[0].name '' is not a TorchScript identifier");
  expect_code(compile_one(&m, "1w", s2, 1, NULL), BAD, "params[0].name '1w' is not a TorchScript identifier");
  expect_code(compile_one(&m, "fc.w", s2, 1, NULL), BAD, "params[0].name 'fc.w' is not a TorchScript identifier");
  expect_code(compile_one(&m, "a b", s2, 1, NULL), BAD, "params[0].name 'a b' is not a TorchScript identifier");
  expect_code(compile_one(&m, "def", s2, 1, NULL), BAD, "params[0].name 'def' is a reserved word");
  expect_code(compile_one(&m, "training", s2, 1, NULL), BAD, "params[0].name 'training' is a reserved word");
  expect_code(compile_one(&m, "forward", s2, 1, NULL), BAD, "params[0].name 'forward' is a reserved word");
  expect_code(compile_one(&m, "w", s0, 1, NULL), BAD, "params[0].shape [0] ('w'): dimensions are >= 1");
  expect_code(compile_one(&m, "w", sneg, 2, NULL), BAD, "params[0].shape [2, -1] ('w'): dimensions are >= 1");
  expect_code(compile_one(&m, "w", NULL, 1, NULL), BAD, "params[0].shape is NULL");
  tpt_variable_options o = TPT_VARIABLE_OPTIONS_INIT;
  o.dtype = TPT_DTYPE_I64;
  expect_code(compile_one(&m, "w", s2, 1, &o), BAD, "params[0] ('w') is trainable and needs a floating dtype, got Long");
  o.trainable = 0; /* a model-only integer buffer is fine */
  o.init = TPT_INIT_ZEROS;
  ok(compile_one(&m, "w", s2, 1, &o));
  tpt_model_free(m);
  o = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
  o.version = 0;
  expect_code(compile_one(&m, "w", s2, 1, &o), BAD, "params[0].options->version is 0 (initialise with TPT_VARIABLE_OPTIONS_INIT)");
  o = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
  o.dtype = (tpt_dtype)99;
  expect_code(compile_one(&m, "w", s2, 1, &o), BAD, "params[0].options->dtype 99 is not a tpt_dtype");
  o = (tpt_variable_options)TPT_VARIABLE_OPTIONS_INIT;
  o.init = TPT_INIT_UNIFORM;
  o.a = 1;
  o.b = 1;
  expect_code(compile_one(&m, "w", s2, 1, &o), BAD, "params[0] ('w'): a uniform initializer needs a < b");
  o.init = (tpt_init)77;
  expect_code(compile_one(&m, "w", s2, 1, &o), BAD, "params[0] ('w'): init 77 is not a tpt_init");
  /* the second of two with the same name */
  tpt_torchscript_param twice[] = {{"w", s2, 1, NULL}, {"v", s2, 1, NULL}, {"w", s2, 1, NULL}};
  const int64_t sx[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 1}};
  const char *sum = "def forward(self, x):\n    return torch.sum(x)\n";
  expect_code(tpt_model_from_torchscript_source(&m, sum, twice, 3, spec, 1), BAD, "params[2].name 'w' is used twice");
  assert_null(m);

  /* compile errors carry the compiler's message */
  tpt_torchscript_param w[] = {{"w", s2, 1, NULL}};
  expect_code(tpt_model_from_torchscript_source(&m, "def forward(self, x):\n    return x +\n", w, 1, spec, 1), BAD,
              "tpt_model_from_torchscript_source: cannot compile the TorchScript source: ");
  assert_null(m);
  tpt_status *st = tpt_model_from_torchscript_source(&m, "def forward(self, x):\n    return x * self.nope\n", w, 1,
                                                     spec, 1);
  assert_non_null(st);
  assert_int_equal(tpt_status_code(st), BAD);
  assert_non_null(strstr(tpt_status_message(st), "cannot compile the TorchScript source"));
  assert_non_null(strstr(tpt_status_message(st), "nope")); /* the compiler names what it could not find */
  tpt_status_free(st);
  st = tpt_model_from_torchscript_source(&m, "def forward(self, x):\n    return torch.no_such_op(x)\n", w, 1, spec, 1);
  assert_non_null(st);
  assert_int_equal(tpt_status_code(st), BAD);
  assert_non_null(strstr(tpt_status_message(st), "no_such_op"));
  tpt_status_free(st);
  expect_code(tpt_model_from_torchscript_source(&m, "", w, 1, spec, 1), BAD,
              "the TorchScript source has no forward method");
  expect_code(tpt_model_from_torchscript_source(&m, "def helper(self, x):\n    return x\n", w, 1, spec, 1), BAD,
              "the TorchScript source has no forward method");
  /* forward's inputs against the signature */
  tpt_input_spec two[] = {{"x", TPT_DTYPE_F32, sx, 1}, {"y", TPT_DTYPE_F32, sx, 1}};
  expect_code(tpt_model_from_torchscript_source(&m, sum, w, 1, two, 2), BAD,
              "the TorchScript source: forward(self, x) takes 1 input, the input signature has 2");
  expect_code(tpt_model_from_torchscript_source(&m, sum, w, 1, NULL, 0), BAD,
              "forward(self, x) takes 1 input, the input signature has 0");
  const char *defaults = "def forward(self, x, y: Optional[Tensor] = None, z: int = 2):\n    return torch.sum(x)\n";
  tpt_input_spec four[] = {{"x", TPT_DTYPE_F32, sx, 1}, {"y", TPT_DTYPE_F32, sx, 1}, {"z", TPT_DTYPE_F32, sx, 1},
                           {"w", TPT_DTYPE_F32, sx, 1}};
  expect_code(tpt_model_from_torchscript_source(&m, defaults, NULL, 0, four, 0), BAD,
              "forward(self, x, y, z) takes 1 to 3 inputs, the input signature has 0");
  expect_code(tpt_model_from_torchscript_source(&m, defaults, NULL, 0, four, 4), BAD,
              "forward(self, x, y, z) takes 1 to 3 inputs, the input signature has 4");
  expect_code(tpt_model_from_torchscript_source(&m, defaults, NULL, 0, four, 3), BAD,
              "the TorchScript source: forward's argument 'z' is int; the inputs are tensors");
  ok(tpt_model_from_torchscript_source(&m, defaults, NULL, 0, four, 2)); /* Optional[Tensor] takes a tensor */
  tpt_model_free(m);
  ok(tpt_model_from_torchscript_source(&m, defaults, NULL, 0, four, 1)); /* the others take their defaults */
  tpt_model_free(m);
  /* a bad input signature, as for every model */
  tpt_input_spec unnamed[] = {{"", TPT_DTYPE_F32, sx, 1}};
  expect_code(tpt_model_from_torchscript_source(&m, sum, w, 1, unnamed, 1), BAD, "inputs[0].name is NULL or empty");
  /* no params at all: params may be NULL */
  ok(tpt_model_from_torchscript_source(&m, sum, NULL, 0, spec, 1));
  char names[8];
  ok(tpt_model_variable_names(names, sizeof names, NULL, m));
  assert_string_equal(names, "");
  tpt_model_free(m);
  /* what forward returns is checked when it runs */
  ok(tpt_model_from_torchscript_source(&m, "def forward(self, x):\n    return (x, x, x)\n", NULL, 0, spec, 1));
  const float xv[] = {1, 2};
  const int64_t sx2[] = {2};
  tpt_tensor *x = NULL;
  ok(tpt_tensor_from_data(&x, xv, sizeof xv, sx2, 1, NULL));
  const tpt_tensor *ins[] = {x};
  expect_code(tpt_model_infer(NULL, m, ins, 1, NULL, 0), BAD, "forward must return the cost or (cost, Dict[str, Tensor])");
  tpt_tensor_free(x);
  tpt_model_free(m);
}

/* ---- a tower function on several threads at once */

/* fc 4 -> 8 (relu), batch norm, dropout 0.5, fc 8 -> 2: no shared host state,
 * so it may run on several threads at once. */
static tpt_status *net_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n_in, void *ud) {
  (void)n_in;
  (void)ud;
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *h = NULL, *n = NULL, *d = NULL, *logits = NULL;
  tpt_status *st = tpt_layer_fc(&h, tw, "fc1", in[0], 8, &relu);
  if (!st) st = tpt_layer_batch_norm(&n, tw, "bn", h, 0.9, 1e-5);
  if (!st) st = tpt_layer_dropout(&d, tw, n, 0.5);
  if (!st) st = tpt_layer_fc(&logits, tw, "fc2", d, 2, NULL);
  if (!st) st = tpt_tower_set_output(tw, "logits", logits);
  tpt_tensor_free(h);
  tpt_tensor_free(n);
  tpt_tensor_free(d);
  tpt_tensor_free(logits);
  return st;
}

enum { kInferThreads = 4, kInferCalls = 40, kInferRows = 16 };

typedef struct {
  tpt_model *model;
  const tpt_predictor *predictor; /* set: the threads run it instead of tpt_model_infer */
  const tpt_tensor *x;
  float want[kInferRows * 2]; /* the single-threaded result */
  int have_want;
  int calls_ok, mismatches;
  char error[256];
} infer_job;

static void *infer_worker(void *arg) {
  infer_job *j = arg;
  const char *names[] = {"logits"};
  for (int i = 0; i < kInferCalls; ++i) {
    tpt_tensor *out = NULL;
    tpt_status *st = j->predictor ? tpt_predictor_run(&out, j->predictor, &j->x, 1)
                                  : tpt_model_infer(&out, j->model, &j->x, 1, names, 1);
    if (st) {
      snprintf(j->error, sizeof j->error, "%s", tpt_status_message(st));
      tpt_status_free(st);
      return NULL;
    }
    float got[kInferRows * 2];
    st = tpt_tensor_copy_to(got, sizeof got, out);
    tpt_tensor_free(out);
    if (st) {
      snprintf(j->error, sizeof j->error, "%s", tpt_status_message(st));
      tpt_status_free(st);
      return NULL;
    }
    if (j->have_want && memcmp(got, j->want, sizeof got) != 0) j->mismatches++;
    j->calls_ok++;
  }
  return NULL;
}

/* Inference from several threads at once on one model, starting before the
 * model is built (the build call runs once), gives what one thread gives;
 * batch norm's moving averages are not touched. Also run under
 * ThreadSanitizer (suite tsan). */
static void test_infer_from_threads(void **state) {
  (void)state;
  const int64_t sx[] = {-1, 4};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 1, net_tower, NULL, NULL));
  float xs[kInferThreads][kInferRows * 4];
  tpt_tensor *x[kInferThreads];
  const int64_t shape[] = {kInferRows, 4};
  for (int t = 0; t < kInferThreads; ++t) {
    for (int i = 0; i < kInferRows * 4; ++i) xs[t][i] = (float)((i * 7 + t * 13) % 11) / 5.0f - 1.0f;
    ok(tpt_tensor_from_data(&x[t], xs[t], sizeof xs[t], shape, 2, NULL));
  }
  /* Round 1: all threads start on the unbuilt model. */
  infer_job jobs[kInferThreads];
  pthread_t th[kInferThreads];
  memset(jobs, 0, sizeof jobs);
  for (int t = 0; t < kInferThreads; ++t) {
    jobs[t].model = m;
    jobs[t].x = x[t];
    assert_int_equal(pthread_create(&th[t], NULL, infer_worker, &jobs[t]), 0);
  }
  for (int t = 0; t < kInferThreads; ++t) assert_int_equal(pthread_join(th[t], NULL), 0);
  for (int t = 0; t < kInferThreads; ++t) {
    if (jobs[t].error[0]) fail_msg("thread %d: %s", t, jobs[t].error);
    assert_int_equal(jobs[t].calls_ok, kInferCalls);
  }
  char names[256];
  ok(tpt_model_variable_names(names, sizeof names, NULL, m));
  assert_string_equal(names, "fc1/W\nfc1/b\nbn/gamma\nbn/beta\nbn/mean/EMA\nbn/variance/EMA\nfc2/W\nfc2/b\n");
  /* Round 2: each thread checks every call against one thread's result. */
  const char *out_names[] = {"logits"};
  for (int t = 0; t < kInferThreads; ++t) {
    tpt_tensor *out = NULL;
    ok(tpt_model_infer(&out, m, (const tpt_tensor *const *)&x[t], 1, out_names, 1));
    ok(tpt_tensor_copy_to(jobs[t].want, sizeof jobs[t].want, out));
    tpt_tensor_free(out);
    jobs[t].have_want = 1;
    jobs[t].calls_ok = 0;
  }
  for (int t = 0; t < kInferThreads; ++t)
    assert_int_equal(pthread_create(&th[t], NULL, infer_worker, &jobs[t]), 0);
  for (int t = 0; t < kInferThreads; ++t) assert_int_equal(pthread_join(th[t], NULL), 0);
  for (int t = 0; t < kInferThreads; ++t) {
    if (jobs[t].error[0]) fail_msg("thread %d: %s", t, jobs[t].error);
    assert_int_equal(jobs[t].calls_ok, kInferCalls);
    assert_int_equal(jobs[t].mismatches, 0);
  }
  /* Round 3: a predictor (tensorpack's OfflinePredictor) from the same
   * threads gives the same results. */
  tpt_predictor *pred = NULL;
  ok(tpt_predictor_new(&pred, m, out_names, 1, NULL));
  for (int t = 0; t < kInferThreads; ++t) {
    jobs[t].predictor = pred;
    jobs[t].calls_ok = 0;
    assert_int_equal(pthread_create(&th[t], NULL, infer_worker, &jobs[t]), 0);
  }
  for (int t = 0; t < kInferThreads; ++t) assert_int_equal(pthread_join(th[t], NULL), 0);
  for (int t = 0; t < kInferThreads; ++t) {
    if (jobs[t].error[0]) fail_msg("predictor, thread %d: %s", t, jobs[t].error);
    assert_int_equal(jobs[t].calls_ok, kInferCalls);
    assert_int_equal(jobs[t].mismatches, 0);
  }
  tpt_predictor_free(pred);
  /* Inference leaves the moving averages at their initial values. */
  float mean[8], var[8];
  tpt_tensor *v = NULL;
  ok(tpt_model_variable(&v, m, "bn/mean/EMA"));
  ok(tpt_tensor_copy_to(mean, sizeof mean, v));
  tpt_tensor_free(v);
  ok(tpt_model_variable(&v, m, "bn/variance/EMA"));
  ok(tpt_tensor_copy_to(var, sizeof var, v));
  tpt_tensor_free(v);
  for (int i = 0; i < 8; ++i) {
    assert_true(mean[i] == 0.0f);
    assert_true(var[i] == 1.0f);
  }
  for (int t = 0; t < kInferThreads; ++t) tpt_tensor_free(x[t]);
  tpt_model_free(m);
}

static void test_null_arguments(void **state) {
  (void)state;
  tower_state s = {PLAIN, 0, 0, 0, 0, ""};
  tpt_model *m = make_model(&s);
  tpt_optimizer *o = NULL, *o2 = NULL;
  tpt_tensor *t = NULL;
  int32_t i32;
  double d;
  char buf[16];
  EXPECT_NULL_ARG(tpt_model_new(NULL, NULL, 0, tower, NULL, NULL), "tpt_model_new", "out");
  EXPECT_NULL_ARG(tpt_model_build(NULL), "tpt_model_build", "model");
  EXPECT_NULL_ARG(tpt_model_variable(NULL, m, "W"), "tpt_model_variable", "out");
  EXPECT_NULL_ARG(tpt_model_variable(&t, NULL, "W"), "tpt_model_variable", "model");
  EXPECT_NULL_ARG(tpt_model_variable(&t, m, NULL), "tpt_model_variable", "name");
  EXPECT_NULL_ARG(tpt_model_set_variable(NULL, "W", t), "tpt_model_set_variable", "model");
  EXPECT_NULL_ARG(tpt_model_set_variable(m, NULL, t), "tpt_model_set_variable", "name");
  EXPECT_NULL_ARG(tpt_model_set_variable(m, "W", NULL), "tpt_model_set_variable", "value");
  EXPECT_NULL_ARG(tpt_model_variable_names(NULL, 8, NULL, m), "tpt_model_variable_names", "buf");
  EXPECT_NULL_ARG(tpt_model_variable_names(buf, 8, NULL, NULL), "tpt_model_variable_names", "model");
  EXPECT_NULL_ARG(tpt_model_infer(NULL, m, NULL, 0, NULL, 1), "tpt_model_infer", "outputs");
  EXPECT_NULL_ARG(tpt_model_infer(&t, NULL, NULL, 0, NULL, 0), "tpt_model_infer", "model");
  EXPECT_NULL_ARG(tpt_tower_is_training(&i32, NULL), "tpt_tower_is_training", "tower");
  EXPECT_NULL_ARG(tpt_tower_is_building(&i32, NULL), "tpt_tower_is_building", "tower");
  EXPECT_NULL_ARG(tpt_tower_index(&i32, NULL), "tpt_tower_index", "tower");
  EXPECT_NULL_ARG(tpt_tower_name(buf, 8, NULL), "tpt_tower_name", "tower");
  EXPECT_NULL_ARG(tpt_tower_device(buf, 8, NULL), "tpt_tower_device", "tower");
  EXPECT_NULL_ARG(tpt_tower_can_create_variables(&i32, NULL), "tpt_tower_can_create_variables", "tower");
  EXPECT_NULL_ARG(tpt_tower_set_cost(NULL, t), "tpt_tower_set_cost", "tower");
  EXPECT_NULL_ARG(tpt_tower_set_output(NULL, "x", t), "tpt_tower_set_output", "tower");
  EXPECT_NULL_ARG(tpt_tower_push_scope(NULL, "x"), "tpt_tower_push_scope", "tower");
  EXPECT_NULL_ARG(tpt_tower_pop_scope(NULL), "tpt_tower_pop_scope", "tower");
  EXPECT_NULL_ARG(tpt_tower_variable(&t, NULL, "x", NULL, 0, NULL), "tpt_tower_variable", "tower");
  EXPECT_NULL_ARG(tpt_tower_variable(NULL, NULL, "x", NULL, 0, NULL), "tpt_tower_variable", "out");
  EXPECT_NULL_ARG(tpt_optimizer_new(NULL, "sgd"), "tpt_optimizer_new", "out");
  EXPECT_NULL_ARG(tpt_optimizer_new(&o2, NULL), "tpt_optimizer_new", "kind");
  ok(tpt_optimizer_new(&o, "sgd"));
  EXPECT_NULL_ARG(tpt_optimizer_set(NULL, "momentum", 1), "tpt_optimizer_set", "optimizer");
  EXPECT_NULL_ARG(tpt_optimizer_set(o, NULL, 1), "tpt_optimizer_set", "name");
  EXPECT_NULL_ARG(tpt_optimizer_get(NULL, o, "momentum"), "tpt_optimizer_get", "out");
  EXPECT_NULL_ARG(tpt_optimizer_get(&d, NULL, "momentum"), "tpt_optimizer_get", "optimizer");
  EXPECT_NULL_ARG(tpt_optimizer_scale_gradients(NULL, "x", 1), "tpt_optimizer_scale_gradients", "optimizer");
  EXPECT_NULL_ARG(tpt_optimizer_scale_gradients(o, NULL, 1), "tpt_optimizer_scale_gradients", "pattern");
  EXPECT_NULL_ARG(tpt_model_set_optimizer(NULL, o), "tpt_model_set_optimizer", "model");
  EXPECT_NULL_ARG(tpt_model_set_optimizer(m, NULL), "tpt_model_set_optimizer", "optimizer");
  EXPECT_NULL_ARG(tpt_input_from_tensors(NULL, NULL, 1, 1, 0, 0), "tpt_input_from_tensors", "out");
  EXPECT_NULL_ARG(tpt_input_from_feed(NULL, feed, NULL, NULL), "tpt_input_from_feed", "out");
  EXPECT_NULL_ARG(tpt_input_from_feed((tpt_input **)&t, NULL, NULL, NULL), "tpt_input_from_feed", "feed");
  tpt_trainer *tr = make_trainer(1, 1);
  EXPECT_NULL_ARG(tpt_trainer_set_model(tr, NULL, NULL), "tpt_trainer_set_model", "model");
  EXPECT_NULL_ARG(tpt_trainer_set_model(tr, m, NULL), "tpt_trainer_set_model", "input");
  {
    const char *src = "def forward(self, x):\n    return torch.sum(x)\n";
    const int64_t s1[] = {1}, sx[] = {-1};
    tpt_torchscript_param p[] = {{"w", s1, 1, NULL}};
    tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 1}};
    tpt_model *ts = NULL;
    EXPECT_NULL_ARG(tpt_model_from_torchscript_source(NULL, src, p, 1, spec, 1), "tpt_model_from_torchscript_source", "out");
    EXPECT_NULL_ARG(tpt_model_from_torchscript_source(&ts, NULL, p, 1, spec, 1), "tpt_model_from_torchscript_source", "source");
    EXPECT_NULL_ARG(tpt_model_from_torchscript_source(&ts, src, NULL, 1, spec, 1), "tpt_model_from_torchscript_source", "params");
    EXPECT_NULL_ARG(tpt_model_from_torchscript_source(&ts, src, p, 1, NULL, 1), "tpt_model_from_torchscript_source", "inputs");
    assert_null(ts);
  }
  tpt_trainer_free(tr);
  tpt_input_free(NULL);
  tpt_model_free(NULL);
  tpt_optimizer_free(NULL);
  tpt_optimizer_free(o);
  tpt_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trains_and_reuses_variables),
      cmocka_unit_test(test_variable_rules),
      cmocka_unit_test(test_reuse_mismatch_and_infer_only),
      cmocka_unit_test(test_initializers),
      cmocka_unit_test(test_bad_steps_fail_cleanly),
      cmocka_unit_test(test_moving_summaries),
      cmocka_unit_test(test_feed_input),
      cmocka_unit_test(test_optimizer_hyperparameters),
      cmocka_unit_test(test_callback_reaches_model_and_optimizer),
      cmocka_unit_test(test_input_validation),
      cmocka_unit_test(test_train_config_and_launch),
      cmocka_unit_test(test_torchscript_errors),
      cmocka_unit_test(test_torchscript_source_trains_saves_loads),
      cmocka_unit_test(test_torchscript_source_train_mode),
      cmocka_unit_test(test_torchscript_source_errors),
      cmocka_unit_test(test_infer_from_threads),
      cmocka_unit_test(test_null_arguments),
  };
  return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
