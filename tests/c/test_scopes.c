/* Tensor scopes: the tensors a tower function or a callback makes belong to
 * that call and go when it returns. Counted with tpt_tensor_live_handles;
 * the sanitizer runs (ASan/LSan) see any handle freed twice or leaked.
 * Also the scalar history's window. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "test_common.h"

/* What the tower does besides making its tensors (and freeing none). */
typedef enum { MAKE, FREE_SOME, FREE_INPUT, KEEP, EXPIRE, OFF, BAD_MODE } how;
typedef struct {
  how how;
  int64_t inside;       /* live handles seen at the end of the last call */
  tpt_tensor *stash;    /* a tensor taken out of the call */
  int calls;
} tower_ud;

/* A two-layer MLP with a cross-entropy cost and an accuracy output: twelve
 * tensors a call, none freed. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *p) {
  (void)n;
  tower_ud *u = p;
  __atomic_fetch_add(&u->calls, 1, __ATOMIC_RELAXED); /* towers may run on several threads */
  if (u->how == EXPIRE) ok(tpt_tensor_scope_set_mode(TPT_SCOPE_EXPIRE));
  if (u->how == OFF) ok(tpt_tensor_scope_set_mode(TPT_SCOPE_OFF));
  if (u->how == BAD_MODE) {
    expect_code(tpt_tensor_scope_set_mode((tpt_scope_mode)7), TPT_ERR_INVALID_ARGUMENT, "mode 7 is not a tpt_scope_mode");
  }
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *h, *d, *logits, *cost, *acc, *copy, *flat;
  tpt_status *st;
  if ((st = tpt_layer_fc(&h, tw, "fc0", in[0], 16, &relu))) return st;
  if ((st = tpt_layer_dropout(&d, tw, h, 0.1))) return st;
  if ((st = tpt_layer_fc(&logits, tw, "fc1", d, 3, NULL))) return st;
  if ((st = tpt_loss_softmax_cross_entropy(&cost, logits, in[1]))) return st;
  if ((st = tpt_metric_accuracy(&acc, logits, in[1]))) return st;
  if ((st = tpt_tensor_to(&copy, logits, NULL, TPT_DTYPE_F64))) return st;
  if ((st = tpt_layer_flatten(&flat, copy))) return st;
  tpt_tensor *outs[2];
  size_t n_out = 0;
  tpt_arg a[] = {T(logits), T(logits)};
  if ((st = tpt_op_call(outs, 2, &n_out, "aten::add", NULL, a, 2))) return st;
  if ((st = tpt_tower_set_cost(tw, cost))) return st;
  if ((st = tpt_tower_set_output(tw, "accuracy", acc))) return st;
  if (u->how == FREE_SOME) {
    tpt_tensor_free(h);
    tpt_tensor_free(cost);  /* after set_cost: the tower keeps its own reference */
    tpt_tensor_free(h);     /* twice: the handle waits for the scope, free stays a no-op */
    expect_code(tpt_tensor_numel(&(int64_t){0}, h), TPT_ERR_INVALID_ARGUMENT, "was freed");
  }
  if (u->how == FREE_INPUT) {
    tpt_tensor_free((tpt_tensor *)in[0]);  /* lent by the library: a no-op */
    int64_t numel = 0;
    ok(tpt_tensor_numel(&numel, in[0]));
    assert_true(numel > 0);
  }
  if (u->how == KEEP && !u->stash) ok(tpt_tensor_keep(&u->stash, logits));
  if ((u->how == EXPIRE || u->how == OFF) && !u->stash) u->stash = logits;
  if (u->how == OFF || u->how == EXPIRE) { /* free all but the stash (OFF: they are this code's own) */
    tpt_tensor *mine[] = {h, d, cost, acc, copy, flat, outs[0]};
    for (size_t i = 0; i < sizeof mine / sizeof *mine; ++i) tpt_tensor_free(mine[i]);
  }
  __atomic_store_n(&u->inside, tpt_tensor_live_handles(), __ATOMIC_RELAXED);
  return NULL;
}

static tpt_model *make_model(tower_ud *u) {
  const int64_t sx[] = {-1, 4}, sy[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_I64, sy, 1}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 2, tower, u, NULL));
  tpt_optimizer *opt = NULL;
  ok(tpt_optimizer_new(&opt, "sgd"));
  ok(tpt_model_set_optimizer(m, opt));
  tpt_optimizer_free(opt);
  return m;
}

static void make_batch(tpt_tensor **x, tpt_tensor **y) {
  float xs[8 * 4];
  int64_t ys[8];
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) xs[i * 4 + j] = (float)((i * 7 + j * 3) % 5) - 2.0f;
    ys[i] = i % 3;
  }
  const int64_t sx[] = {8, 4}, sy[] = {8};
  tpt_tensor_options i64 = TPT_TENSOR_OPTIONS_INIT;
  i64.dtype = TPT_DTYPE_I64;
  ok(tpt_tensor_from_data(x, xs, sizeof xs, sx, 2, NULL));
  ok(tpt_tensor_from_data(y, ys, sizeof ys, sy, 1, &i64));
}

static tpt_input *make_input(void) {
  tpt_tensor *x, *y;
  make_batch(&x, &y);
  const tpt_tensor *both[] = {x, y};
  tpt_input *in = NULL;
  ok(tpt_input_from_tensors(&in, both, 2, 4, 1, 7));
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return in;
}

static tpt_trainer *make_trainer(int64_t steps) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = steps;
  o.max_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.default_monitors = 0;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  return t;
}

/* 10,000 training towers that free nothing leave no handle behind. */
static void test_ten_thousand_towers_no_growth(void **state) {
  (void)state;
  int64_t before = tpt_tensor_live_handles();
  tower_ud u = {MAKE, 0, NULL, 0};
  tpt_model *m = make_model(&u);
  tpt_trainer *t = make_trainer(10000);
  ok(tpt_trainer_set_model(t, m, make_input()));
  ok(tpt_trainer_run(t));
  assert_int_equal(u.calls, 10001); /* the build call, then one per step */
  assert_true(u.inside >= before + 8); /* the call's eight tensors were alive inside it */
  /* the one-element output is a moving summary, put once (the epoch's end) */
  size_t n = 0;
  ok(tpt_trainer_scalar_history(&n, NULL, NULL, 0, t, "accuracy"));
  assert_int_equal(n, 1);
  tpt_trainer_free(t);
  tpt_model_free(m);
  assert_int_equal(tpt_tensor_live_handles(), before);
}

/* Inference towers too, and the outputs of infer belong to the caller. */
static void test_infer_scopes(void **state) {
  (void)state;
  tower_ud u = {MAKE, 0, NULL, 0};
  tpt_model *m = make_model(&u);
  ok(tpt_model_build(m));
  tpt_tensor *x, *y;
  make_batch(&x, &y);
  int64_t before = tpt_tensor_live_handles();
  const tpt_tensor *in[] = {x, y};
  const char *names[] = {"accuracy", "cost"};
  for (int i = 0; i < 1000; ++i) {
    tpt_tensor *outs[2] = {NULL, NULL};
    ok(tpt_model_infer(outs, m, in, 2, names, 2));
    assert_int_equal(tpt_tensor_live_handles(), before + 2);
    tpt_tensor_free(outs[0]);
    tpt_tensor_free(outs[1]);
  }
  assert_int_equal(tpt_tensor_live_handles(), before);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  tpt_model_free(m);
}

/* Freeing inside the call is allowed (once or twice), freeing a lent input
 * is a no-op, and nothing is freed twice (ASan). */
static void test_free_inside_is_allowed(void **state) {
  (void)state;
  int64_t before = tpt_tensor_live_handles();
  for (how h = FREE_SOME; h <= FREE_INPUT; ++h) {
    tower_ud u = {h, 0, NULL, 0};
    tpt_model *m = make_model(&u);
    tpt_trainer *t = make_trainer(20);
    ok(tpt_trainer_set_model(t, m, make_input()));
    ok(tpt_trainer_run(t));
    tpt_trainer_free(t);
    tpt_model_free(m);
    assert_int_equal(tpt_tensor_live_handles(), before);
  }
}

/* tpt_tensor_keep: a tensor that outlives its call, detached from the graph. */
static void test_keep(void **state) {
  (void)state;
  int64_t before = tpt_tensor_live_handles();
  tower_ud u = {KEEP, 0, NULL, 0};
  tpt_model *m = make_model(&u);
  tpt_trainer *t = make_trainer(5);
  ok(tpt_trainer_set_model(t, m, make_input()));
  ok(tpt_trainer_run(t));
  tpt_trainer_free(t);
  tpt_model_free(m);
  assert_non_null(u.stash);
  assert_int_equal(tpt_tensor_live_handles(), before + 1);
  int64_t dims[2];
  ok(tpt_tensor_shape(dims, 2, u.stash));
  assert_int_equal(dims[1], 3);
  tpt_tensor_free(u.stash);
  assert_int_equal(tpt_tensor_live_handles(), before);
  EXPECT_NULL_ARG(tpt_tensor_keep(NULL, NULL), "tpt_tensor_keep", "out");
  tpt_tensor *k = (tpt_tensor *)1;
  EXPECT_NULL_ARG(tpt_tensor_keep(&k, NULL), "tpt_tensor_keep", "tensor");
  assert_null(k);
}

/* TPT_SCOPE_EXPIRE (garbage-collected bindings): after the call the handle
 * is released but stays until freed, and using it is a clear error. */
static void test_expire_mode(void **state) {
  (void)state;
  int64_t before = tpt_tensor_live_handles();
  tower_ud u = {EXPIRE, 0, NULL, 0};
  tpt_model *m = make_model(&u);
  ok(tpt_model_build(m));
  assert_non_null(u.stash);
  int64_t numel = 0;
  expect_code2(tpt_tensor_numel(&numel, u.stash), TPT_ERR_INVALID_ARGUMENT, "was released when the tower function",
               "tpt_tensor_keep");
  /* the call's handles: those freed in it went at its end, the stash waits for its owner */
  assert_int_equal(tpt_tensor_live_handles(), before + 1);
  tpt_tensor_free(u.stash);
  assert_int_equal(tpt_tensor_live_handles(), before);
  tpt_model_free(m);
}

/* TPT_SCOPE_OFF (bindings with destructors): the call's tensors are the caller's. */
static void test_off_mode(void **state) {
  (void)state;
  int64_t before = tpt_tensor_live_handles();
  tower_ud u = {OFF, 0, NULL, 0};
  tpt_model *m = make_model(&u);
  ok(tpt_model_build(m));
  assert_non_null(u.stash);
  int64_t numel = 0;
  ok(tpt_tensor_numel(&numel, u.stash));
  assert_true(numel > 0 && numel % 3 == 0);
  assert_int_equal(tpt_tensor_live_handles(), before + 1); /* the tower freed the rest itself */
  tpt_model_free(m);
  tpt_tensor_free(u.stash);
  assert_int_equal(tpt_tensor_live_handles(), before);
}

static void test_bad_mode(void **state) {
  (void)state;
  tower_ud u = {BAD_MODE, 0, NULL, 0};
  tpt_model *m = make_model(&u);
  ok(tpt_model_build(m));
  tpt_model_free(m);
  /* outside any call: no scope, nothing to set */
  ok(tpt_tensor_scope_set_mode(TPT_SCOPE_EXPIRE));
  expect_code(tpt_tensor_scope_set_mode((tpt_scope_mode)3), TPT_ERR_INVALID_ARGUMENT, "mode 3 is not a tpt_scope_mode");
  /* and a tensor made outside any call belongs to the caller */
  int64_t before = tpt_tensor_live_handles();
  float v = 1;
  tpt_tensor *x = NULL;
  ok(tpt_tensor_from_data(&x, &v, sizeof v, NULL, 0, NULL));
  assert_int_equal(tpt_tensor_live_handles(), before + 1);
  tpt_tensor_free(x);
  assert_int_equal(tpt_tensor_live_handles(), before);
}

/* ---- callbacks: outputs, infer inside a callback, run_step */

typedef struct {
  tpt_model *model;
  int64_t after_outputs;
  int64_t base;
  int checked;
} cb_ud;

static tpt_status *reader(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *p) {
  (void)r;
  cb_ud *u = p;
  if (ev == TPT_EVENT_BEFORE_TRAIN) {
    u->base = tpt_tensor_live_handles();
    return NULL;
  }
  if (ev == TPT_EVENT_AFTER_RUN) {
    tpt_tensor *acc = NULL, *share = NULL;
    ok(tpt_trainer_output(&acc, t, "accuracy"));
    ok(tpt_tensor_share(&share, acc));
    u->after_outputs = tpt_tensor_live_handles();
    return NULL;
  }
  if (ev == TPT_EVENT_TRIGGER_EPOCH) {
    /* infer inside a callback: its outputs live until this callback returns */
    tpt_tensor *x, *y;
    make_batch(&x, &y);
    const tpt_tensor *in[] = {x, y};
    const char *names[] = {"accuracy"};
    tpt_tensor *acc = NULL;
    ok(tpt_model_infer(&acc, u->model, in, 2, names, 1));
    double v = -1;
    ok(tpt_tensor_item(&v, acc));
    assert_true(v >= 0 && v <= 1);
    u->checked++;
  }
  return NULL;
}

static void test_callback_scopes(void **state) {
  (void)state;
  int64_t before = tpt_tensor_live_handles();
  tower_ud tu = {MAKE, 0, NULL, 0};
  tpt_model *m = make_model(&tu);
  tpt_trainer *t = make_trainer(200);
  ok(tpt_trainer_set_model(t, m, make_input()));
  cb_ud u = {m, 0, 0, 0};
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_AFTER_RUN | TPT_EVENT_TRIGGER_EPOCH;
  d.fn = reader;
  d.user_data = &u;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
  ok(tpt_trainer_run(t));
  assert_int_equal(u.checked, 1);
  assert_int_equal(u.after_outputs, u.base + 2); /* the two handles, inside the callback only */
  tpt_trainer_free(t);
  tpt_model_free(m);
  assert_int_equal(tpt_tensor_live_handles(), before);
}

/* A run_step and its hooked step's function are scoped too. */
static tpt_status *step(tpt_trainer *t, void *p) {
  (void)t;
  (void)p;
  float v[4] = {1, 2, 3, 4};
  const int64_t s[] = {4};
  tpt_tensor *a = NULL, *b = NULL;
  ok(tpt_tensor_from_data(&a, v, sizeof v, s, 1, NULL));
  ok(tpt_tensor_reshape(&b, a, (const int64_t[]){2, 2}, 2));
  return tpt_trainer_set_output(t, "m", b);
}
static tpt_status *run_step(tpt_trainer *t, void *p) {
  (void)p;
  tpt_tensor *x = NULL;
  float v = 1;
  ok(tpt_tensor_from_data(&x, &v, sizeof v, NULL, 0, NULL));
  return tpt_trainer_hooked_step(t, step, NULL);
}

static void test_run_step_scopes(void **state) {
  (void)state;
  int64_t before = tpt_tensor_live_handles();
  tpt_trainer *t = make_trainer(500);
  ok(tpt_trainer_set_run_step(t, run_step, NULL, NULL));
  ok(tpt_trainer_run(t));
  tpt_trainer_free(t);
  assert_int_equal(tpt_tensor_live_handles(), before);
}

/* Towers on several threads at once: each thread's scope is its own. */
static void *infer_thread(void *p) {
  tpt_model *m = p;
  tpt_tensor *x, *y;
  make_batch(&x, &y);
  const tpt_tensor *in[] = {x, y};
  const char *names[] = {"accuracy"};
  for (int i = 0; i < 200; ++i) {
    tpt_tensor *acc = NULL;
    ok(tpt_model_infer(&acc, m, in, 2, names, 1));
    tpt_tensor_free(acc);
  }
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  tower_ud u = {MAKE, 0, NULL, 0};
  tpt_model *m = make_model(&u);
  ok(tpt_model_build(m));
  int64_t before = tpt_tensor_live_handles();
  pthread_t th[4];
  for (int i = 0; i < 4; ++i) assert_int_equal(pthread_create(&th[i], NULL, infer_thread, m), 0);
  for (int i = 0; i < 4; ++i) pthread_join(th[i], NULL);
  assert_int_equal(tpt_tensor_live_handles(), before);
  tpt_model_free(m);
}

/* ---- the scalar history keeps a window (a long run's memory stays flat) */

static tpt_status *put_each_step(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *p) {
  (void)ev, (void)r, (void)p;
  int64_t g = 0;
  ok(tpt_trainer_global_step(&g, t));
  return tpt_trainer_put_scalar(t, "g", (double)g);
}

static void test_history_window(void **state) {
  (void)state;
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = 10;
  o.max_epoch = 2;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.scalar_history = 3;
  tpt_trainer *t = NULL;
  ok(tpt_trainer_new(&t, &o));
  ok(tpt_trainer_set_run_step(t, run_step, NULL, NULL));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_TRIGGER_STEP;
  d.fn = put_each_step;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  ok(tpt_trainer_add_callback(t, cb));
  ok(tpt_trainer_run(t));
  size_t count = 0;
  int64_t steps[8];
  double values[8];
  ok(tpt_trainer_scalar_history(&count, steps, values, 8, t, "g"));
  assert_int_equal(count, 3); /* the latest 3 of 20 */
  assert_int_equal(steps[0], 18);
  assert_int_equal(steps[2], 20);
  assert_true(values[2] == 20.0);
  tpt_trainer_free(t);
  o.scalar_history = -2;
  expect_code(tpt_trainer_new(&t, &o), TPT_ERR_INVALID_ARGUMENT, "options->scalar_history must be >= 0");
  /* a version 1 struct still works (it ends before scalar_history) */
  o.version = 1;
  ok(tpt_trainer_new(&t, &o));
  tpt_trainer_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ten_thousand_towers_no_growth),
      cmocka_unit_test(test_infer_scopes),
      cmocka_unit_test(test_free_inside_is_allowed),
      cmocka_unit_test(test_keep),
      cmocka_unit_test(test_expire_mode),
      cmocka_unit_test(test_off_mode),
      cmocka_unit_test(test_bad_mode),
      cmocka_unit_test(test_callback_scopes),
      cmocka_unit_test(test_run_step_scopes),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_history_window),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
