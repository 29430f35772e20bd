/* The data-parallel equivalence matrix (issue 27). One small convolutional
 * model with what real models have (a strided VALID and a SAME convolution,
 * LayerNorm over C x H x W, an L2 term from tpt_regularize_l2 added to the
 * cost, AdamW with weight decay, global-norm clipping, a step-based
 * learning-rate schedule), trained for 2 epochs of 12 steps by:
 *   - the simple trainer on batches of 2B rows: the reference;
 *   - 2 replicated towers, 2 parameter-server towers (B rows each);
 *   - the async strategy with one tower (2B rows);
 *   - a distributed job of 2 ranks (this program started again as each
 *     rank, one replicated tower of B rows each, over Gloo on loopback);
 * each with its initial values set three ways: by the config's init hook
 * (tensorpack's session_init), by tpt_model_restore from a checkpoint in a
 * BEFORE_TRAIN callback, the init hook with the step made of two train ops
 * (tpt_trainer_set_train_ops; the async strategy refuses train ops), and the
 * init hook with fc/b set through the model after step 5 (the replicas must
 * follow).
 * Every variable, and every step's loss, must be within 1e-5 (relative to
 * the largest value) of the reference; the towers and ranks report the loss
 * averaged over them (average_scalars), the loss of the concatenated batch.
 *
 * With a dropout layer (drawn by each tower from its own generator), for each
 * strategy: two runs are bit-identical (also with the dropout called by name
 * through tpt_op_call), and a run killed with SIGKILL after
 * step 13 (in child processes: this program started again) and resumed from
 * its latest checkpoint (every 5 steps), by a program that seeds LibTorch
 * differently (the towers' seed must come from the checkpoint), runs the 14
 * steps left and ends bit-identical to the uninterrupted one.
 *
 *   test_equivalence                 every test (TAP)
 *   test_equivalence --no-dist       without the distributed cases (TSan)
 *   test_equivalence --dropout-only  the dropout cases only
 *   test_equivalence --rank R --port P --variant V --out FILE [--logdir D --fail-at S]
 *                    [--restore FILE] [--timeout-ms MS] [--strategy S --kill 0|1]
 *                                    one rank of a job, or (--strategy) one run of
 *                                    another strategy in a process of its own (used by
 *                                    the tests; --kill: SIGKILL after step S) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_common.h"
#include "free_port.h"

extern char **environ;

#define TPT_RETURN_IF_ERROR(call) \
  do {                            \
    tpt_status *st_ = (call);     \
    if (st_) return st_;          \
  } while (0)

enum { SIDE = 9, CLASSES = 4, B = 8, STEPS_PER_EPOCH = 12, EPOCHS = 2, ROWS = STEPS_PER_EPOCH * 2 * B };
enum { MAX_VALUES = 4096, MAX_STEPS = 64 };

typedef enum { S_SIMPLE, S_REPLICATED, S_PS, S_ASYNC1, S_DIST } strategy;
static const char *strategy_name[] = {"simple", "replicated x2", "parameter server x2", "async x1", "2 ranks"};

typedef enum { V_INIT, V_RESTORE, V_TRAIN_OPS, V_MIDRUN, V_DROPOUT, V_OP_DROPOUT } variant;
static const char *variant_name[] = {"init hook",      "restore in BEFORE_TRAIN", "train ops",
                                     "set at step 5",  "dropout",                 "dropout by tpt_op_call"};

static const char *self_path;
static char restore_path[512];  /* the checkpoint V_RESTORE restores */
static char tmp_root[256];

static uint64_t seed = 11; /* tpt_manual_seed before each run (a resumed run takes another) */

static float xs[ROWS * SIDE * SIDE];
static int64_t ys[ROWS];

/* ------------------------------------------------------------------ model */

typedef struct {
  double dropout;
  int by_op; /* the dropout through tpt_op_call("dropout") rather than the layer */
} model_conf;

static tpt_status *tower_fn(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n;
  const model_conf *conf = ud;
  tpt_layer_options c1 = TPT_LAYER_OPTIONS_INIT, c2 = TPT_LAYER_OPTIONS_INIT, fc = TPT_LAYER_OPTIONS_INIT;
  c1.stride[0] = c1.stride[1] = 2;
  c1.padding = TPT_PADDING_VALID; /* 9x9 -> 4x4 */
  c2.activation = TPT_ACT_RELU;   /* SAME: 4x4 */
  tpt_tensor *h1 = NULL, *h2 = NULL, *h3 = NULL, *h4 = NULL, *logits = NULL, *ce = NULL, *l2 = NULL;
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&h1, tw, "conv1", in[0], 4, &c1));
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&h2, tw, "conv2", h1, 4, &c2));
  const int64_t axes[] = {1, 2, 3};
  TPT_RETURN_IF_ERROR(tpt_layer_layer_norm_axes(&h3, tw, "conv_ln", h2, axes, 3, 1, 1e-5));
  if (conf->dropout > 0 && conf->by_op) {
    int32_t training = 0, building = 0;
    TPT_RETURN_IF_ERROR(tpt_tower_is_training(&training, tw));
    TPT_RETURN_IF_ERROR(tpt_tower_is_building(&building, tw));
    tpt_arg a[3];
    memset(a, 0, sizeof a);
    a[0] = T(h3);
    a[1].kind = TPT_ARG_DOUBLE;
    a[1].d = conf->dropout;
    a[2].kind = TPT_ARG_BOOL;
    a[2].i = training && !building;
    size_t got = 0;
    TPT_RETURN_IF_ERROR(tpt_op_call(&h4, 1, &got, "dropout", NULL, a, 3));
  } else if (conf->dropout > 0) {
    TPT_RETURN_IF_ERROR(tpt_layer_dropout(&h4, tw, h3, conf->dropout));
  } else {
    h4 = h3;
  }
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc", h4, CLASSES, &fc));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&ce, logits, in[1]));
  TPT_RETURN_IF_ERROR(tpt_regularize_l2(&l2, tw, "/W$", 2e-3));
  tpt_arg args[] = {T(ce), T(l2)};
  tpt_tensor *cost = NULL;
  size_t got = 0;
  TPT_RETURN_IF_ERROR(tpt_op_call(&cost, 1, &got, "add", "Tensor", args, 2));
  return tpt_tower_set_cost(tw, cost);
}

static model_conf confs[] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0.3, 0}, {0.3, 1}};

/* The model and (a handle of) its optimizer, for the schedule. */
static tpt_model *new_model(variant v, tpt_optimizer **opt) {
  const int64_t xshape[] = {-1, 1, SIDE, SIDE}, yshape[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, xshape, 4}, {"y", TPT_DTYPE_I64, yshape, 1}};
  tpt_model *m = NULL;
  ok(tpt_model_new(&m, spec, 2, tower_fn, &confs[v], NULL));
  tpt_optimizer *o = NULL;
  ok(tpt_optimizer_new(&o, "adamw"));
  ok(tpt_optimizer_set(o, "learning_rate", 0.01));
  ok(tpt_optimizer_set(o, "weight_decay", 0.05));
  ok(tpt_optimizer_set(o, "clip_global_norm", 0.5));
  ok(tpt_model_set_optimizer(m, o));
  *opt = o;
  if (v == V_TRAIN_OPS) {
    tpt_train_op body = TPT_TRAIN_OP_INIT, head = TPT_TRAIN_OP_INIT;
    body.name = "body";
    body.scope = "conv";
    head.name = "head";
    head.scope = "fc";
    ok(tpt_model_add_train_op(m, &body));
    ok(tpt_model_add_train_op(m, &head));
  }
  return m;
}

static void make_data(void) {
  for (int i = 0; i < ROWS; ++i) {
    double s = 0;
    for (int j = 0; j < SIDE * SIDE; ++j) {
      float v = (float)sin(0.37 * i + 0.91 * j + 0.05 * i * j);
      xs[i * SIDE * SIDE + j] = v;
      s += v * ((j % 3) - 1);
    }
    ys[i] = (int64_t)((i * 7 + (s > 0 ? 1 : 0) + (s > 2 ? 1 : 0)) % CLASSES);
  }
}

static tpt_dataflow *data(int64_t batch) {
  const int64_t xshape[] = {ROWS, 1, SIDE, SIDE}, yshape[] = {ROWS};
  tpt_tensor *tx = NULL, *ty = NULL;
  ok(tpt_tensor_from_data(&tx, xs, sizeof xs, xshape, 4, NULL));
  tpt_tensor_options io = TPT_TENSOR_OPTIONS_INIT;
  io.dtype = TPT_DTYPE_I64;
  ok(tpt_tensor_from_data(&ty, ys, sizeof ys, yshape, 1, &io));
  const tpt_tensor *cols[] = {tx, ty};
  tpt_dataflow *rows = NULL, *b = NULL;
  ok(tpt_dataflow_from_tensors(&rows, cols, 2, 0));
  ok(tpt_dataflow_batch(&b, rows, batch, 0));
  tpt_dataflow_free(rows);
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  return b;
}

/* Every variable's values, in the model's order, as floats. */
static size_t dump(float *out, size_t cap, tpt_model *m) {
  char names[4096];
  ok(tpt_model_variable_names(names, sizeof names, NULL, m));
  size_t n = 0;
  for (char *name = names, *end; *name; name = end + 1) {
    end = strchr(name, '\n');
    *end = 0;
    tpt_tensor *v = NULL;
    ok(tpt_model_variable(&v, m, name));
    int64_t numel = 0;
    ok(tpt_tensor_numel(&numel, v));
    if (n + (size_t)numel > cap) fail_msg("more than %zu values", cap);
    ok(tpt_tensor_copy_to(out + n, (size_t)numel * sizeof(float), v));
    n += (size_t)numel;
    tpt_tensor_free(v);
  }
  return n;
}

/* Deterministic values unlike the build's random ones, for the init hook. */
static tpt_status *init_hook(tpt_model *m, void *ud) {
  (void)ud;
  char names[4096];
  TPT_RETURN_IF_ERROR(tpt_model_variable_names(names, sizeof names, NULL, m));
  int k = 0;
  for (char *name = names, *end; *name; name = end + 1, ++k) {
    end = strchr(name, '\n');
    *end = 0;
    tpt_tensor *v = NULL, *nv = NULL;
    TPT_RETURN_IF_ERROR(tpt_model_variable(&v, m, name));
    int64_t shape[8], numel = 0;
    size_t nd = 0;
    TPT_RETURN_IF_ERROR(tpt_tensor_numel(&numel, v));
    TPT_RETURN_IF_ERROR(tpt_tensor_ndim(&nd, v));
    TPT_RETURN_IF_ERROR(tpt_tensor_shape(shape, 8, v));
    float vals[MAX_VALUES];
    const int gamma = strstr(name, "gamma") != NULL;
    for (int64_t i = 0; i < numel; ++i) vals[i] = (float)((gamma ? 1.0 : 0.0) + 0.4 * sin(1.7 * (double)i + 0.9 * k));
    TPT_RETURN_IF_ERROR(tpt_tensor_from_data(&nv, vals, (size_t)numel * sizeof(float), shape, nd, NULL));
    tpt_status *st = tpt_model_set_variable(m, name, nv);
    tpt_tensor_free(v);
    tpt_tensor_free(nv);
    if (st) return st;
  }
  return NULL;
}

/* The restore variant's BEFORE_TRAIN callback: pre-trained weights. */
static tpt_status *restore_cb(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  tpt_model *m = NULL;
  TPT_RETURN_IF_ERROR(tpt_trainer_model(&m, t));
  tpt_status *st = tpt_model_restore(NULL, m, restore_path, NULL);
  tpt_model_free(m);
  return st;
}

/* A run started as a child process (--kill) is killed with SIGKILL after
 * global step *ud, between two checkpoints; one in this process fails
 * there instead. */
static int kill_at_fail = 0;

static tpt_status *fail_cb(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r;
  int64_t step = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_global_step(&step, t));
  if (step != *(const int64_t *)ud) return NULL;
  if (kill_at_fail) raise(SIGKILL);
  return tpt_status_new(TPT_ERR_CALLBACK, "crash after step 13");
}

/* The set-at-step-5 variant: after global step 5, every rank sets fc/b
 * through the model (tpt_model_set_variable, between two steps); the
 * replicas must follow before the next step. */
static tpt_status *midrun_cb(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  int64_t step = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_global_step(&step, t));
  if (step != 5) return NULL;
  tpt_model *m = NULL;
  TPT_RETURN_IF_ERROR(tpt_trainer_model(&m, t));
  const float b[CLASSES] = {0.5f, -0.25f, 0.125f, -0.5f};
  const int64_t shape[] = {CLASSES};
  tpt_tensor *v = NULL;
  tpt_status *st = tpt_tensor_from_data(&v, b, sizeof b, shape, 1, NULL);
  if (!st) st = tpt_model_set_variable(m, "fc/b", v);
  tpt_tensor_free(v);
  tpt_model_free(m);
  return st;
}

/* Saves the trainer's checkpoint to *ud at AFTER_TRAIN. */
static tpt_status *save_cb(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r;
  return tpt_trainer_save_checkpoint(t, (const char *)ud);
}

static tpt_callback *callback(tpt_callback_fn fn, uint32_t events, void *ud, int chief_only, const char *name) {
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = events;
  d.fn = fn;
  d.user_data = ud;
  d.chief_only = chief_only;
  d.name = name;
  tpt_callback *cb = NULL;
  ok(tpt_callback_new(&cb, &d));
  return cb;
}

typedef struct {
  double values[MAX_STEPS];
  size_t count;
} costs;

/* After every step: the step's cost (the towers' and ranks' mean: the
 * strategies report it with average_scalars, so that it is the cost of the
 * concatenated batch). */
static tpt_status *cost_cb(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r;
  costs *c = ud;
  double v = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_output_scalar(&v, t, "cost"));
  if (c->count < MAX_STEPS) c->values[c->count++] = v;
  return NULL;
}

typedef struct {
  costs *costs;            /* each step's cost, when not NULL */
  int rank, port;          /* S_DIST */
  int64_t timeout_ms;      /* S_DIST: 0: 60 s */
  const char *logdir;      /* checkpoints every 5 steps, auto-resume */
  int64_t fail_at;         /* > 0: fail after this step */
  int64_t steps;           /* 0: EPOCHS x STEPS_PER_EPOCH */
  const char *save_to;     /* a checkpoint at AFTER_TRAIN */
} run_opts;

/* One training of variant v by strategy s; the final variables into out. */
static tpt_status *train(float *out, size_t *n_out, strategy s, variant v, const run_opts *ro) {
  ok(tpt_manual_seed(seed));
  tpt_optimizer *opt = NULL;
  tpt_model *m = new_model(v, &opt);
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = EPOCHS;
  o.steps_per_epoch = STEPS_PER_EPOCH;
  if (ro->steps) o.max_epoch = 1, o.steps_per_epoch = ro->steps;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.default_monitors = 0;
  o.default_callbacks = 0;
  if (ro->logdir && (s != S_DIST || ro->rank == 0)) {
    o.logdir = ro->logdir;
    o.logdir_action = TPT_LOGDIR_KEEP;
    o.auto_resume = 1;
  }
  tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT;
  tpt_distributed_options dist = TPT_DISTRIBUTED_OPTIONS_INIT;
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = m;
  int64_t batch = 2 * B;
  switch (s) {
    case S_SIMPLE: break;
    case S_REPLICATED:
    case S_PS:
      to.strategy = s == S_REPLICATED ? TPT_STRATEGY_REPLICATED : TPT_STRATEGY_PARAMETER_SERVER;
      to.n_towers = 2;
      to.average_scalars = 1;
      batch = B;
      c.towers = &to;
      break;
    case S_ASYNC1:
      to.strategy = TPT_STRATEGY_ASYNC;
      to.n_towers = 1;
      c.towers = &to;
      break;
    case S_DIST:
      dist.master_addr = "127.0.0.1";
      dist.master_port = ro->port;
      dist.world_size = 2;
      dist.rank = ro->rank;
      dist.local_rank = ro->rank;
      dist.timeout_ms = ro->timeout_ms ? ro->timeout_ms : 60000;
      dist.average_scalars = 1;
      batch = B;
      c.distributed = &dist;
      break;
  }
  c.dataflow = data(batch);
  if (v != V_RESTORE) c.init = init_hook;
  const tpt_schedule_point points[] = {{0, 0.01}, {9, 0.004}};
  tpt_callback *cbs[6];
  size_t ncb = 0;
  ok(tpt_callback_scheduled_hyperparam(&cbs[ncb++], opt, "learning_rate", points, 2, TPT_SCHEDULE_STEP_BASED));
  tpt_optimizer_free(opt);
  if (v == V_RESTORE) cbs[ncb++] = callback(restore_cb, TPT_EVENT_BEFORE_TRAIN, NULL, 1, "restore");
  if (v == V_MIDRUN) cbs[ncb++] = callback(midrun_cb, TPT_EVENT_TRIGGER_STEP, NULL, 0, "set fc/b");
  if (ro->fail_at > 0) cbs[ncb++] = callback(fail_cb, TPT_EVENT_AFTER_RUN, (void *)&ro->fail_at, 0, "crash");
  if (ro->save_to) cbs[ncb++] = callback(save_cb, TPT_EVENT_AFTER_TRAIN, (void *)ro->save_to, 1, "save");
  if (ro->costs) cbs[ncb++] = callback(cost_cb, TPT_EVENT_AFTER_RUN, ro->costs, 0, "costs");
  c.callbacks = cbs;
  c.n_callbacks = ncb;
  tpt_trainer *t = NULL;
  tpt_status *st = tpt_trainer_from_config(&t, &c);
  tpt_dataflow_free(c.dataflow);
  if (!st && ro->logdir && (s != S_DIST || ro->rank == 0)) {
    tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
    so.every_k_steps = 5;
    so.every_k_epochs = 0;
    so.max_to_keep = 0;
    tpt_callback *saver = NULL;
    ok(tpt_callback_model_saver(&saver, &so));
    ok(tpt_trainer_add_callback(t, saver));
  }
  if (!st && v == V_TRAIN_OPS) {
    const char *ops[] = {"body", "head"};
    st = tpt_trainer_set_train_ops(t, ops, 2);
  }
  if (!st) st = tpt_trainer_run(t);
  tpt_trainer_free(t);
  if (out) *n_out = dump(out, MAX_VALUES, m);
  tpt_model_free(m);
  return st;
}

/* ------------------------------------------------------------------ 2 ranks */

/* Runs a job of 2 ranks of this program; rank 0's variables into out. */
/* Runs strategy s in child processes of this program (two ranks for
 * S_DIST, else one); rank 0's variables into out and its costs into c.
 * With kill_at > 0 every child kills itself (SIGKILL) after that step. */
static void train_children(float *out, size_t *n_out, costs *c, strategy s, variant v, const char *logdir,
                           int64_t kill_at) {
  const int port = free_port(), n = s == S_DIST ? 2 : 1;
  char outs[2][512];
  pid_t pids[2];
  for (int r = 0; r < n; ++r) {
    snprintf(outs[r], sizeof outs[r], "%s/rank%d-%d.bin", tmp_root, r, port);
    char rank[16], ports[16], var[16], fail[32], strat[16], seeds[32];
    snprintf(rank, sizeof rank, "%d", r);
    snprintf(ports, sizeof ports, "%d", port);
    snprintf(var, sizeof var, "%d", (int)v);
    snprintf(fail, sizeof fail, "%lld", (long long)kill_at);
    snprintf(strat, sizeof strat, "%d", (int)s);
    snprintf(seeds, sizeof seeds, "%llu", (unsigned long long)seed);
    char *argv[] = {(char *)self_path, "--rank", rank, "--port", ports, "--variant", var, "--out", outs[r],
                    "--logdir", (char *)(logdir ? logdir : "-"), "--fail-at", fail, "--restore", restore_path,
                    "--strategy", strat, "--kill", kill_at > 0 ? "1" : "0", "--seed", seeds, NULL};
    if (posix_spawn(&pids[r], self_path, NULL, NULL, argv, environ) != 0) fail_msg("posix_spawn %s", self_path);
  }
  for (int r = 0; r < n; ++r) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) != pids[r]) fail_msg("waitpid");
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (kill_at > 0 ? code != 128 + SIGKILL : code != 0)
      fail_msg("%s, child %d (%s) exited with %d", strategy_name[s], r, variant_name[v], code);
  }
  if (kill_at > 0) return;
  FILE *f = fopen(outs[0], "rb");
  if (!f) fail_msg("rank 0 wrote no %s", outs[0]);
  *n_out = fread(out, sizeof(float), MAX_VALUES, f);
  fclose(f);
  char path[1100];
  snprintf(path, sizeof path, "%s.costs", outs[0]);
  if (c) {
    f = fopen(path, "rb");
    if (!f) fail_msg("rank 0 wrote no %s", path);
    c->count = fread(c->values, sizeof(double), MAX_STEPS, f);
    fclose(f);
  }
  for (int r = 0; r < 2; ++r) {
    unlink(outs[r]);
    snprintf(path, sizeof path, "%s.costs", outs[r]);
    unlink(path);
  }
}

static int rank_main(int argc, char **argv) {
  run_opts ro = {0};
  const char *out = NULL;
  int v = 0, s = S_DIST;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--rank")) ro.rank = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--port")) ro.port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--variant")) v = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
    else if (!strcmp(argv[i], "--logdir")) ro.logdir = strcmp(argv[i + 1], "-") ? argv[i + 1] : NULL;
    else if (!strcmp(argv[i], "--fail-at")) ro.fail_at = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--restore")) snprintf(restore_path, sizeof restore_path, "%s", argv[i + 1]);
    else if (!strcmp(argv[i], "--timeout-ms")) ro.timeout_ms = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--strategy")) s = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--kill")) kill_at_fail = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
  }
  make_data();
  static float values[MAX_VALUES];
  static costs steps;
  ro.costs = &steps;
  size_t n = 0;
  tpt_status *st = train(values, &n, (strategy)s, (variant)v, &ro);
  if (st) {
    const int expected = ro.fail_at > 0 && strstr(tpt_status_message(st), "crash after step");
    if (!expected) fprintf(stderr, "rank %d: %s\n", ro.rank, tpt_status_message(st));
    tpt_status_free(st);
    return expected ? 3 : 1;
  }
  FILE *f = fopen(out, "wb");
  if (!f || fwrite(values, sizeof(float), n, f) != n) return 2;
  fclose(f);
  char path[1100];
  snprintf(path, sizeof path, "%s.costs", out);
  f = fopen(path, "wb");
  if (!f || fwrite(steps.values, sizeof(double), steps.count, f) != steps.count) return 2;
  fclose(f);
  return 0;
}

/* ------------------------------------------------------------------ tests */

static double distance(const float *a, const float *b, size_t n) {
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < n; ++i) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    scale = fmax(scale, fabs((double)b[i]));
  }
  return diff / scale;
}

static int with_dist = 1;

static void run_case(float *out, size_t *n, costs *c, strategy s, variant v, const char *logdir, int64_t fail_at) {
  if (s == S_DIST) {
    train_children(out, n, c, s, v, logdir, fail_at);
    return;
  }
  run_opts ro = {0};
  ro.costs = c;
  ro.logdir = logdir;
  ro.fail_at = fail_at;
  tpt_status *st = train(out, n, s, v, &ro);
  if (fail_at > 0) {
    expect_code(st, TPT_ERR_CALLBACK, "crash after step");
    return;
  }
  ok(st);
}

/* The pre-trained weights the restore variant starts from: the reference
 * model after 5 steps from the init hook's values. */
static int make_restore_file(void **state) {
  (void)state;
  snprintf(restore_path, sizeof restore_path, "%s/pretrained", tmp_root);
  run_opts ro = {0};
  ro.steps = 5;
  ro.save_to = restore_path;
  ok(train(NULL, NULL, S_SIMPLE, V_INIT, &ro));
  return 0;
}

static void matrix(void **state) {
  (void)state;
  static float ref[MAX_VALUES], got[MAX_VALUES];
  static costs ref_costs, got_costs;
  const variant variants[] = {V_INIT, V_RESTORE, V_TRAIN_OPS, V_MIDRUN};
  const strategy strategies[] = {S_REPLICATED, S_PS, S_ASYNC1, S_DIST};
  int failures = 0;
  for (size_t vi = 0; vi < 4; ++vi) {
    const variant v = variants[vi];
    size_t nref = 0, n = 0;
    ref_costs.count = 0;
    run_case(ref, &nref, &ref_costs, S_SIMPLE, v, NULL, 0);
    assert_int_equal(ref_costs.count, EPOCHS * STEPS_PER_EPOCH);
    for (size_t si = 0; si < 4; ++si) {
      const strategy s = strategies[si];
      if (s == S_DIST && !with_dist) continue;
      if (s == S_ASYNC1 && v == V_TRAIN_OPS) { /* each tower would apply its own op updates: refused */
        run_opts ro = {0};
        expect_code(train(NULL, NULL, s, v, &ro), TPT_ERR_UNSUPPORTED, "does not run train ops");
        continue;
      }
      n = 0;
      got_costs.count = 0;
      run_case(got, &n, &got_costs, s, v, NULL, 0);
      assert_int_equal(n, nref);
      assert_int_equal(got_costs.count, ref_costs.count);
      const double d = distance(got, ref, n);
      double cd = 0, cs = 1e-12;
      for (size_t i = 0; i < ref_costs.count; ++i) {
        cd = fmax(cd, fabs(got_costs.values[i] - ref_costs.values[i]));
        cs = fmax(cs, fabs(ref_costs.values[i]));
      }
      cd /= cs;
      printf("# %-24s %-20s relative distance from the reference: parameters %.3g, losses %.3g\n", variant_name[v],
             strategy_name[s], d, cd);
      if (!(d <= 1e-5) || !(cd <= 1e-5)) {
        print_error("%s with %s: relative distance %g (parameters), %g (each step's loss) from the simple trainer on "
                    "the concatenated batches\n",
                    strategy_name[s], variant_name[v], d, cd);
        ++failures;
      }
    }
  }
  if (failures) fail_msg("%d cases of the matrix differ from the reference", failures);
}

/* With dropout: two runs of a strategy give the same bits, and a run that
 * crashed after step 13 and resumed from its step-10 checkpoint gives the
 * uninterrupted run's bits. */
static void dropout_reproducible_and_resumable(void **state) {
  (void)state;
  static float a[MAX_VALUES], b[MAX_VALUES], c[MAX_VALUES], simple[MAX_VALUES];
  static costs resumed;
  const strategy strategies[] = {S_REPLICATED, S_PS, S_ASYNC1, S_DIST};
  size_t ns = 0;
  run_case(simple, &ns, NULL, S_SIMPLE, V_DROPOUT, NULL, 0);
  int failures = 0;
  for (size_t si = 0; si < 4; ++si) {
    const strategy s = strategies[si];
    if (s == S_DIST && !with_dist) continue;
    size_t na = 0, nb = 0, nc = 0;
    run_case(a, &na, NULL, s, V_DROPOUT, NULL, 0);
    run_case(b, &nb, NULL, s, V_DROPOUT, NULL, 0);
    assert_int_equal(na, nb);
    if (memcmp(a, b, na * sizeof(float)) != 0) {
      print_error("%s with dropout: two runs differ by %g\n", strategy_name[s], distance(a, b, na));
      ++failures;
    }
    /* the same with the dropout called by name through tpt_op_call */
    run_case(b, &nb, NULL, s, V_OP_DROPOUT, NULL, 0);
    run_case(c, &nc, NULL, s, V_OP_DROPOUT, NULL, 0);
    if (memcmp(b, c, nb * sizeof(float)) != 0) {
      print_error("%s with tpt_op_call's dropout: two runs differ by %g\n", strategy_name[s], distance(b, c, nb));
      ++failures;
    }
    char logdir[512];
    snprintf(logdir, sizeof logdir, "%s/dropout-%d", tmp_root, (int)s);
    /* killed (SIGKILL) after step 13, in child processes; checkpoints at 5 and 10 */
    train_children(NULL, &nc, NULL, s, V_DROPOUT, logdir, 13);
    /* auto-resumes from step 10: 14 steps, whatever the seed the program sets */
    seed = 12;
    resumed.count = 0;
    run_case(c, &nc, &resumed, s, V_DROPOUT, logdir, 0);
    seed = 11;
    assert_int_equal(na, nc);
    if (resumed.count != EPOCHS * STEPS_PER_EPOCH - 10) {
      print_error("%s with dropout: the resumed run ran %zu steps, not %d (no resume?)\n", strategy_name[s],
                  resumed.count, EPOCHS * STEPS_PER_EPOCH - 10);
      ++failures;
    }
    if (memcmp(a, c, na * sizeof(float)) != 0) {
      print_error("%s with dropout: the resumed run differs from the uninterrupted one by %g\n", strategy_name[s],
                  distance(c, a, na));
      ++failures;
    }
    /* dropout is on: the towers' draws are not the simple trainer's */
    printf("# %-20s with dropout: %.3g from the simple trainer's run\n", strategy_name[s], distance(a, simple, na));
  }
  if (failures) fail_msg("%d dropout cases are not reproducible", failures);
}

static int cleanup(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
  return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  self_path = argv[0];
  /* one intra-op thread in this process and in its children alike: LibTorch
   * 2.x's reductions round differently with 1 and 2 threads, and a run
   * resumed here from a child's checkpoint must give the child's bits */
  ok(tpt_set_num_threads(1));
  if (argc > 1 && !strcmp(argv[1], "--rank")) return rank_main(argc, argv);
  int dropout_only = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--no-dist")) with_dist = 0;
    else if (!strcmp(argv[i], "--dropout-only")) dropout_only = 1;
  }
  snprintf(tmp_root, sizeof tmp_root, "/tmp/tpt-equivalence-XXXXXX");
  if (!mkdtemp(tmp_root)) return 2;
  make_data();
  const struct CMUnitTest all[] = {
      cmocka_unit_test(matrix),
      cmocka_unit_test(dropout_reproducible_and_resumable),
  };
  const struct CMUnitTest dropout[] = {
      cmocka_unit_test(dropout_reproducible_and_resumable),
  };
  if (dropout_only) return cmocka_run_group_tests(dropout, make_restore_file, cleanup);
  return cmocka_run_group_tests(all, make_restore_file, cleanup);
}
