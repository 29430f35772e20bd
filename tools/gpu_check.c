/* The GPU check (issue 30): what tptrain does on a CUDA device, each result
 * against an independent one, and a table last. scripts/gpu-check builds and
 * runs it; `scripts/gpu-check --cpu` runs it here on the CPU build, so the
 * program is tested without a GPU (there the "device" is the CPU and the
 * checks that need CUDA or NCCL say so in the table).
 *
 *   gpu_check [--device DEV] [--workdir DIR]   DEV: "cuda:0" (default) or "cpu"
 *   gpu_check --speed [--device DEV] [--batch B] [--steps K] [--repeats R]
 *
 * Checks, with TF32 off and deterministic kernels (tpt_set_float32_precision,
 * tpt_set_determinism: WARN, so that an operator without a deterministic
 * kernel on CUDA is named on stderr instead of failing the run):
 *   device = cpu      a CNN trained 20 steps (Adam) by one tower on DEV (the
 *                     mirror path on CUDA) against the same training on the
 *                     CPU: ||dev - cpu|| / ||cpu|| over every variable < 1e-4
 *   towers = concat   2 replicated towers on DEV with batch B against 1 tower
 *                     on the CPU with batch 2B (SGD, 10 steps): < 1e-5
 *   resume exact      2 epochs on DEV with dropout, against 1 epoch, a
 *                     checkpoint, and a new trainer resuming it for the
 *                     second: every variable bit-identical
 *   killed, resumed   the same 2 epochs in a child process that checkpoints
 *                     every 3 steps and SIGKILLs itself after step 11, then
 *                     a new trainer resuming its directory: bit-identical to
 *                     the uninterrupted run
 *   staging           ms per step with tpt_input_staging(DEV) and without
 *                     (measured, not asserted; a pass-through on the CPU)
 *   1-rank job        a distributed job of one rank with its tower on DEV
 *                     (NCCL's all-reduce on CUDA, a communicator of one rank;
 *                     Gloo's on the CPU) against
 *                     1 tower alone on the CPU (SGD, 10 steps): < 1e-5
 *   GAN towers        the GAN trainer (MultiGPUGANTrainer) with 2 towers on
 *                     DEV, batch B, against the GAN trainer with 1 tower on
 *                     the CPU, batch 2B (10 steps of g_op and d_op): < 1e-5
 * Exit 0 when every check that ran passed.
 *
 * --speed: a ResNet-18-sized CNN (the CIFAR form: 3x3 stem, 4 stages of 2
 * basic blocks, 64-512 channels, 11.2M variables) on random 3x32x32 images,
 * batch B (256), SGD with momentum, one tower on DEV, LibTorch's default
 * precision: a warm-up epoch, then R (5) epochs of K (20) steps, each timed
 * from BEFORE_EPOCH to AFTER_EPOCH (a step on a CUDA tower ends with its
 * gradients copied to the CPU, so the device is synchronised); prints the
 * median ms/step and images/s. benchmarks/run all --device (benchmarks/
 * resnet18.py is PyTorch's side) runs it against PyTorch on the same card. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "tptrain_util.h"

enum { S = 12, ROWS = 512, CLASSES = 10, MAX_ROWS = 16 };

static const char *device = "cuda:0";
static const char *workdir = "gpu_check_work";
static int with_dropout;
static int gan; /* the model and input of new_model / new_input: the GAN's */

/* ---- the table */

static char rows[MAX_ROWS][3][160];
static int n_rows, failures;

static void row(const char *check, const char *result, const char *verdict) {
  if (n_rows == MAX_ROWS) return;
  snprintf(rows[n_rows][0], sizeof rows[0][0], "%s", check);
  snprintf(rows[n_rows][1], sizeof rows[0][1], "%s", result);
  snprintf(rows[n_rows][2], sizeof rows[0][2], "%s", verdict);
  ++n_rows;
  if (!strcmp(verdict, "FAIL")) ++failures;
}

/* A failed call fails its check with the library's message. */
#define CHECK_CALL(name, call)                                               \
  do {                                                                       \
    tpt_status *st_ = (call);                                                \
    if (st_) {                                                               \
      char why_[160];                                                        \
      snprintf(why_, sizeof why_, "error: %s", tpt_status_message(st_));    \
      tpt_status_free(st_);                                                  \
      row(name, why_, "FAIL");                                               \
      goto done;                                                             \
    }                                                                        \
  } while (0)

/* ---- the model: conv 8 3x3 -> ReLU -> max pool 2 -> [dropout] -> fc 10 */

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n;
  (void)ud;
  tpt_tensor *x, *logits, *cost;
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv", in[0], 8, NULL));
  TPT_RETURN_IF_ERROR(tpt_layer_activation(&x, x, TPT_ACT_RELU, 0));
  TPT_RETURN_IF_ERROR(tpt_layer_max_pool(&x, x, 2, 2, TPT_PADDING_VALID));
  if (with_dropout) TPT_RETURN_IF_ERROR(tpt_layer_dropout(&x, tw, x, 0.3));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc", x, CLASSES, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

/* ---- the GAN: G z [N, GZ] -> fc 32 ReLU -> fc S*S; D x [N, S*S] -> fc 32
 * ReLU -> fc 1 (a logit), applied to the real rows and to G's under a reuse
 * scope; tensorpack's GANModelDesc losses (no batch norm, so that towers
 * equal one tower on the concatenated batch). Inputs: real [N, S*S], z, ones
 * [N, 1], zeros [N, 1]. */

enum { GZ = 8, GH = 32 };

static tpt_status *mlp(tpt_tensor **out, tpt_tower *tw, const char *scope, int reuse, const tpt_tensor *x,
                       int64_t units) {
  TPT_RETURN_IF_ERROR(reuse ? tpt_tower_push_reuse_scope(tw, scope) : tpt_tower_push_scope(tw, scope));
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *h = NULL;
  tpt_status *st = tpt_layer_fc(&h, tw, "fc0", x, GH, &relu);
  if (!st) st = tpt_layer_fc(out, tw, "fc1", h, units, NULL);
  tpt_status *popped = tpt_tower_pop_scope(tw);
  if (st) tpt_status_free(popped);
  return st ? st : popped;
}

static tpt_status *gan_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n;
  (void)ud;
  tpt_tensor *fake, *d_real, *d_fake, *a, *b, *d_loss, *g_loss;
  TPT_RETURN_IF_ERROR(mlp(&fake, tw, "gen", 0, in[1], S * S));
  TPT_RETURN_IF_ERROR(mlp(&d_real, tw, "discrim", 1, in[0], 1));
  TPT_RETURN_IF_ERROR(mlp(&d_fake, tw, "discrim", 1, fake, 1));
  TPT_RETURN_IF_ERROR(tpt_loss_sigmoid_cross_entropy(&a, d_real, in[2]));
  TPT_RETURN_IF_ERROR(tpt_loss_sigmoid_cross_entropy(&b, d_fake, in[3]));
  TPT_RETURN_IF_ERROR(tpt_op_add(&d_loss, a, b));
  TPT_RETURN_IF_ERROR(tpt_op_mul_scalar(&d_loss, d_loss, 0.5));
  TPT_RETURN_IF_ERROR(tpt_loss_sigmoid_cross_entropy(&g_loss, d_fake, in[2]));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "d_loss", d_loss));
  return tpt_tower_set_output(tw, "g_loss", g_loss);
}

static float images[ROWS * S * S], noise[ROWS * GZ], ones[ROWS], zeros[ROWS];
static int64_t labels[ROWS];

/* Noise images (not zeros) and labels from a fixed LCG. */
static void make_data(void) {
  uint32_t r = 12345;
  for (size_t i = 0; i < sizeof images / sizeof images[0]; ++i) {
    r = r * 1664525u + 1013904223u;
    images[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
  }
  for (int i = 0; i < ROWS; ++i) {
    r = r * 1664525u + 1013904223u;
    labels[i] = (int64_t)((r >> 8) % CLASSES);
    ones[i] = 1;
  }
  for (size_t i = 0; i < sizeof noise / sizeof noise[0]; ++i) {
    r = r * 1664525u + 1013904223u;
    noise[i] = (float)(r >> 8) / 8388608.0f - 1.0f;
  }
}

static tpt_status *new_model(tpt_model **out, const char *optimizer, double lr) {
  const int64_t sx[] = {-1, 1, S, S}, sy[] = {-1}, sr[] = {-1, S * S}, sz[] = {-1, GZ}, s1[] = {-1, 1};
  tpt_input_spec spec[] = {{"image", TPT_DTYPE_F32, sx, 4}, {"label", TPT_DTYPE_I64, sy, 1}};
  tpt_input_spec gan_spec[] = {{"real", TPT_DTYPE_F32, sr, 2}, {"z", TPT_DTYPE_F32, sz, 2},
                               {"ones", TPT_DTYPE_F32, s1, 2}, {"zeros", TPT_DTYPE_F32, s1, 2}};
  TPT_RETURN_IF_ERROR(tpt_manual_seed(1));  /* the same initial variables every time */
  TPT_RETURN_IF_ERROR(gan ? tpt_model_new(out, gan_spec, 4, gan_tower, NULL, NULL)
                          : tpt_model_new(out, spec, 2, tower, NULL, NULL));
  tpt_optimizer *opt = NULL;
  TPT_RETURN_IF_ERROR(tpt_optimizer_new(&opt, optimizer));
  tpt_status *st = tpt_optimizer_set(opt, "learning_rate", lr);
  if (!st) st = tpt_model_set_optimizer(*out, opt);
  tpt_optimizer_free(opt);
  return st;
}

static tpt_status *new_input(tpt_input **out, int64_t batch, const char *staging) {
  const int64_t dx[] = {ROWS, 1, S, S}, dy[] = {ROWS}, dr[] = {ROWS, S * S}, dz[] = {ROWS, GZ}, d1[] = {ROWS, 1};
  tpt_tensor *t[4] = {NULL, NULL, NULL, NULL};
  size_t n = gan ? 4 : 2;
  tpt_status *st = gan ? tptu_tensor_f32(&t[0], images, dr, 2) : tptu_tensor_f32(&t[0], images, dx, 4);
  if (!st) st = gan ? tptu_tensor_f32(&t[1], noise, dz, 2) : tptu_tensor_new(&t[1], TPT_DTYPE_I64, labels, dy, 1);
  if (!st && gan) st = tptu_tensor_f32(&t[2], ones, d1, 2);
  if (!st && gan) st = tptu_tensor_f32(&t[3], zeros, d1, 2);
  if (!st) st = tpt_input_from_tensors(out, (const tpt_tensor *const *)t, n, batch, /*shuffle=*/0, 0);
  if (!st && staging) st = tpt_input_staging(out, *out, staging);
  for (size_t i = 0; i < 4; ++i) tpt_tensor_free(t[i]);
  return st;
}

/* Trains `model` for epochs x steps on `towers` towers of `dev` (0 towers:
 * the simple trainer on the CPU). */
typedef struct run_spec {
  int towers;
  const char *dev;
  int64_t batch, steps, epochs;
  const char *logdir;    /* NULL: none */
  int save;              /* ModelSaver every epoch, auto_resume */
  const char *staging;   /* NULL: no StagingInput */
  int distributed;       /* nonzero: a job of one rank (NCCL with CUDA towers, else Gloo) */
  int64_t save_every;    /* with save: also every this many steps */
  int64_t kill_at;       /* nonzero: SIGKILL itself after the step that reaches this global step */
} run_spec;

/* Dies as a preempted job does: SIGKILL, no chance to save. */
static tpt_status *kill_at(tpt_trainer *trainer, tpt_event event, const tpt_record *record, void *ud) {
  (void)event;
  (void)record;
  int64_t step = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_global_step(&step, trainer));
  if (step >= *(const int64_t *)ud) {
    fflush(NULL);
    raise(SIGKILL);
  }
  return NULL;
}

static tpt_status *train(tpt_model *model, const run_spec *r) {
  tpt_input *input = NULL;
  TPT_RETURN_IF_ERROR(new_input(&input, r->batch, r->staging));
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = r->epochs;
  o.steps_per_epoch = r->steps;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.logdir = r->logdir;
  o.logdir_action = TPT_LOGDIR_KEEP;
  o.auto_resume = r->save;
  tpt_towers_options t = TPT_TOWERS_OPTIONS_INIT;
  const char *devs[2] = {r->dev, r->dev};
  t.n_towers = r->towers;
  t.devices = devs;
  if (gan) { /* GANTrainer, or MultiGPUGANTrainer with towers */
    tpt_trainer *trainer = NULL;
    tpt_status *st = tpt_trainer_new(&trainer, &o);
    if (st) {
      tpt_input_free(input);
      return st;
    }
    tpt_gan_options g = TPT_GAN_OPTIONS_INIT;
    g.towers = r->towers > 0 ? &t : NULL;
    st = tpt_trainer_set_gan(trainer, model, input, &g); /* takes the input */
    if (!st) st = tpt_trainer_run(trainer);
    tpt_trainer_free(trainer);
    return st;
  }
  tpt_callback *cbs[2] = {NULL, NULL};
  size_t n_cbs = 0;
  tpt_status *st = NULL;
  if (r->save) {
    tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
    so.every_k_steps = r->save_every;
    st = tpt_callback_model_saver(&cbs[n_cbs], &so);
    n_cbs += !st;
  }
  if (!st && r->kill_at) {
    tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
    d.events = TPT_EVENT_AFTER_RUN;
    d.name = "kill";
    d.fn = kill_at;
    d.user_data = (void *)&r->kill_at;
    st = tpt_callback_new(&cbs[n_cbs], &d);
    n_cbs += !st;
  }
  if (st) {
    for (size_t i = 0; i < n_cbs; ++i) tpt_callback_free(cbs[i]);
    tpt_input_free(input);
    return st;
  }
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = model;
  c.input = input;
  c.towers = r->towers > 0 ? &t : NULL;
  tpt_distributed_options d = TPT_DISTRIBUTED_OPTIONS_INIT;
  d.world_size = 1;
  c.distributed = r->distributed ? &d : NULL;
  c.callbacks = cbs;
  c.n_callbacks = n_cbs;
  return tpt_launch_train(&c);
}

/* Every variable of `model`, as float32, concatenated; *n receives the count. */
static tpt_status *variables(float **out, size_t *n, const tpt_model *model) {
  char **names = NULL;
  size_t count = 0;
  TPT_RETURN_IF_ERROR(tpt_model_variable_list(&names, &count, model));
  float *all = NULL;
  size_t total = 0;
  tpt_status *st = NULL;
  for (size_t i = 0; i < count && !st; ++i) {
    tpt_tensor *v = NULL;
    int64_t numel = 0;
    st = tpt_model_variable(&v, model, names[i]);
    if (!st) st = tpt_tensor_numel(&numel, v);
    if (!st) {
      float *grown = realloc(all, (total + (size_t)numel) * sizeof *all);
      if (!grown) {
        tpt_tensor_free(v);
        break;
      }
      all = grown;
      st = tpt_tensor_copy_to(all + total, (size_t)numel * sizeof *all, v);
      total += (size_t)numel;
    }
    tpt_tensor_free(v);
  }
  tpt_strings_free(names, count);
  if (st) {
    free(all);
    return st;
  }
  *out = all;
  *n = total;
  return NULL;
}

/* ||a - b|| / ||b||, or -1 when the sizes differ or b is all zeros. */
static double rel_error(const float *a, const float *b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    r += (double)b[i] * b[i];
  }
  return r > 0 ? sqrt(d / r) : -1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the checks */

/* Trains one model as `run` and one as `ref` (the same initial variables,
 * data and optimizer) and compares every variable: ||run - ref|| / ||ref||
 * under `tolerance` (never on all zeros). */
static void compare_runs(const char *name, const char *optimizer, double lr, run_spec run, run_spec ref,
                         double tolerance) {
  tpt_model *m = NULL, *r = NULL;
  float *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  CHECK_CALL(name, new_model(&m, optimizer, lr));
  CHECK_CALL(name, train(m, &run));
  CHECK_CALL(name, new_model(&r, optimizer, lr));
  CHECK_CALL(name, train(r, &ref));
  CHECK_CALL(name, variables(&a, &na, m));
  CHECK_CALL(name, variables(&b, &nb, r));
  {
    double e = na == nb ? rel_error(a, b, na) : -1;
    char result[160];
    snprintf(result, sizeof result, "rel. error %.3g over %zu values", e, na);
    row(name, result, e >= 0 && e < tolerance ? "ok" : "FAIL");
  }
done:
  free(a);
  free(b);
  tpt_model_free(m);
  tpt_model_free(r);
}

/* One tower on the device (the mirror path on CUDA) against the CPU. */
static void check_device_equals_cpu(void) {
  run_spec on_dev = {1, device, 32, 20, 1, NULL, 0, NULL, 0, 0, 0}, on_cpu = {0, "cpu", 32, 20, 1, NULL, 0, NULL, 0, 0, 0};
  compare_runs("device = cpu (20 Adam steps)", "adam", 1e-3, on_dev, on_cpu, 1e-4);
}

/* 2 replicated towers with batch B against 1 tower with batch 2B: the towers
 * take consecutive batches of the unshuffled input, 2B rows a step. */
static void check_towers_equal_concat(void) {
  run_spec towers = {2, device, 16, 10, 1, NULL, 0, NULL, 0, 0, 0}, concat = {0, "cpu", 32, 10, 1, NULL, 0, NULL, 0, 0, 0};
  compare_runs("2 towers = 1 tower, batch x2", "sgd", 0.1, towers, concat, 1e-5);
}

/* A distributed job of one rank (NCCL's all-reduce with CUDA towers, Gloo's
 * on the CPU) against one tower alone. */
static void check_one_rank_job(void) {
  run_spec rank = {1, device, 32, 10, 1, NULL, 0, NULL, 1, 0, 0}, alone = {0, "cpu", 32, 10, 1, NULL, 0, NULL, 0, 0, 0};
  compare_runs("a job of 1 rank (NCCL on CUDA)", "sgd", 0.1, rank, alone, 1e-5);
}

/* The GAN trainer with 2 towers on the device against the GAN trainer with
 * one tower on the CPU and the concatenated batch: each op minimises its cost
 * averaged over the towers, which is the cost of the concatenated batch. */
static void check_gan_towers(void) {
  run_spec towers = {2, device, 16, 10, 1, NULL, 0, NULL, 0, 0, 0}, concat = {0, "cpu", 32, 10, 1, NULL, 0, NULL, 0, 0, 0};
  gan = 1;
  compare_runs("GAN trainer: 2 towers = 1, batch x2", "sgd", 0.05, towers, concat, 1e-5);
  gan = 0;
}

static void check_resume_exact(void) {
  const char *name = "resume exact (dropout)";
  tpt_model *whole = NULL, *first = NULL, *second = NULL;
  float *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  char dir_whole[512], dir_split[512];
  snprintf(dir_whole, sizeof dir_whole, "%s/resume-whole", workdir);
  snprintf(dir_split, sizeof dir_split, "%s/resume-split", workdir);
  with_dropout = 1;
  run_spec both = {1, device, 32, 8, 2, dir_whole, 1, NULL, 0, 0, 0};
  run_spec half = {1, device, 32, 8, 1, dir_split, 1, NULL, 0, 0, 0};
  run_spec rest = {1, device, 32, 8, 2, dir_split, 1, NULL, 0, 0, 0};
  CHECK_CALL(name, new_model(&whole, "adam", 1e-3));
  CHECK_CALL(name, train(whole, &both));
  CHECK_CALL(name, new_model(&first, "adam", 1e-3));
  CHECK_CALL(name, train(first, &half));
  CHECK_CALL(name, new_model(&second, "adam", 1e-3));
  CHECK_CALL(name, tpt_manual_seed(999));  /* the checkpoint's random state must win */
  CHECK_CALL(name, train(second, &rest));
  CHECK_CALL(name, variables(&a, &na, second));
  CHECK_CALL(name, variables(&b, &nb, whole));
  {
    size_t differ = 0;
    for (size_t i = 0; na == nb && i < na; ++i) differ += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
    /* for scripts/gpu-check's reading of the checkpoint with torch.load */
    char path[600];
    snprintf(path, sizeof path, "%s/resume-whole.f32", workdir);
    FILE *f = fopen(path, "wb");
    if (f) {
      fwrite(b, sizeof *b, nb, f);
      fclose(f);
    }
    double e = na == nb ? rel_error(a, b, na) : -1;
    char result[160];
    snprintf(result, sizeof result, "%zu of %zu values differ (rel. error %.3g)", differ, na, e);
    row(name, result, na == nb && differ == 0 && e >= 0 ? "ok" : "FAIL");
  }
done:
  with_dropout = 0;
  free(a);
  free(b);
  tpt_model_free(whole);
  tpt_model_free(first);
  tpt_model_free(second);
}

/* A run SIGKILLed mid-epoch (a child process: checkpoints every 3 steps, killed
 * after step 11, in the second epoch), resumed by a new trainer from its last
 * checkpoint to the end of epoch 2, against the uninterrupted run of
 * check_resume_exact (its variables in resume-whole.f32): bit for bit. */
static const run_spec killed_run = {1, NULL, 32, 8, 2, NULL, 1, NULL, 0, 3, 11};

static void check_killed_resume(const char *self) {
  const char *name = "killed mid-epoch, resumed (dropout)";
  tpt_model *m = NULL;
  float *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/resume-killed", workdir);
  char *args[] = {"gpu_check", "--killed-child", dir, "--device", (char *)device, NULL};
  extern char **environ;
  pid_t pid;
  int ws = 0;
  if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0 || waitpid(pid, &ws, 0) != pid) {
    row(name, "could not run the child", "FAIL");
    return;
  }
  if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGKILL) {
    char why[160];
    snprintf(why, sizeof why, "the child was not killed (exit status %d)", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    row(name, why, "FAIL");
    return;
  }
  snprintf(path, sizeof path, "%s/resume-whole.f32", workdir);
  FILE *f = fopen(path, "rb");
  if (f) {
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = size > 0 ? malloc((size_t)size) : NULL;
    nb = b ? fread(b, sizeof *b, (size_t)size / sizeof *b, f) : 0;
    fclose(f);
  }
  if (!nb) {
    row(name, "no resume-whole.f32 (the resume check failed)", "FAIL");
    goto done;
  }
  with_dropout = 1;
  run_spec rest = killed_run;
  rest.dev = device;
  rest.logdir = dir;
  rest.kill_at = 0;
  CHECK_CALL(name, new_model(&m, "adam", 1e-3));
  CHECK_CALL(name, tpt_manual_seed(999)); /* the checkpoint's random state must win */
  CHECK_CALL(name, train(m, &rest));
  CHECK_CALL(name, variables(&a, &na, m));
  {
    size_t differ = 0;
    for (size_t i = 0; na == nb && i < na; ++i) differ += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
    char result[160];
    snprintf(result, sizeof result, "%zu of %zu values differ from the uninterrupted run", differ, na);
    row(name, result, na == nb && differ == 0 ? "ok" : "FAIL");
  }
done:
  with_dropout = 0;
  free(a);
  free(b);
  tpt_model_free(m);
}

/* The child of check_killed_resume: trains until it kills itself. */
static int killed_child(const char *dir) {
  with_dropout = 1;
  run_spec r = killed_run;
  r.dev = device;
  r.logdir = dir;
  tpt_model *m = NULL;
  TPT_CHECK_OR_DIE(new_model(&m, "adam", 1e-3));
  TPT_CHECK_OR_DIE(train(m, &r));
  fprintf(stderr, "gpu_check --killed-child: trained to the end, not killed at step %lld\n", (long long)r.kill_at);
  tpt_model_free(m);
  return 3;
}

static void check_staging(void) {
  const char *name = "StagingInput overlap";
  tpt_model *m = NULL;
  double plain = 0, staged = 0;
  /* alternating, 3 rounds each, 60 steps (the first round warms up) */
  for (int round = 0; round < 3; ++round) {
    for (int side = 0; side < 2; ++side) {
      run_spec r = {1, device, 64, 60, 1, NULL, 0, side ? device : NULL, 0, 0, 0};
      CHECK_CALL(name, new_model(&m, "sgd", 0.01));
      double t0 = now_s();
      CHECK_CALL(name, train(m, &r));
      double t = (now_s() - t0) / 60 * 1e3;
      tpt_model_free(m);
      m = NULL;
      if (round == 0) continue;
      if (side) staged += t / 2;
      else plain += t / 2;
    }
  }
  {
    char result[160];
    snprintf(result, sizeof result, "%.3f ms/step staged, %.3f plain (%.2fx)", staged, plain,
             staged > 0 ? plain / staged : 0);
    row(name, result, "measured");
  }
done:
  tpt_model_free(m);
}

/* ---- --speed: a ResNet-18-sized CNN */

enum { RS = 32, RCLASSES = 10 };

/* conv 3x3 (stride) -> BN [-> ReLU]; SAME padding, no bias (BN's beta is it) */
static tpt_status *conv_bn(tpt_tensor **out, tpt_tower *tw, const char *name, const tpt_tensor *x, int64_t filters,
                           int64_t kernel, int64_t stride, int relu) {
  char bn[64];
  tpt_layer_options o = TPT_LAYER_OPTIONS_INIT;
  o.use_bias = 0;
  o.kernel[0] = o.kernel[1] = kernel;
  o.stride[0] = o.stride[1] = stride;
  tpt_tensor *y;
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&y, tw, name, x, filters, &o));
  snprintf(bn, sizeof bn, "%s_bn", name);
  TPT_RETURN_IF_ERROR(tpt_layer_batch_norm(&y, tw, bn, y, 0.9, 1e-5));
  if (relu) TPT_RETURN_IF_ERROR(tpt_layer_activation(&y, y, TPT_ACT_RELU, 0));
  *out = y;
  return NULL;
}

/* ResNet's basic block, under the scope `name`: two 3x3 convs, and a 1x1
 * conv on the shortcut when the shape changes. */
static tpt_status *block_layers(tpt_tensor **out, tpt_tower *tw, const tpt_tensor *x, int64_t in_filters,
                                int64_t filters, int64_t stride) {
  tpt_tensor *y, *projected, *sum;
  const tpt_tensor *shortcut = x;
  TPT_RETURN_IF_ERROR(conv_bn(&y, tw, "conv1", x, filters, 3, stride, 1));
  TPT_RETURN_IF_ERROR(conv_bn(&y, tw, "conv2", y, filters, 3, 1, 0));
  if (stride != 1 || in_filters != filters) {
    TPT_RETURN_IF_ERROR(conv_bn(&projected, tw, "shortcut", x, filters, 1, stride, 0));
    shortcut = projected;
  }
  TPT_RETURN_IF_ERROR(tpt_op_add(&sum, y, shortcut));
  return tpt_layer_activation(out, sum, TPT_ACT_RELU, 0);
}

static tpt_status *basic_block(tpt_tensor **out, tpt_tower *tw, const char *name, const tpt_tensor *x,
                               int64_t in_filters, int64_t filters, int64_t stride) {
  TPT_RETURN_IF_ERROR(tpt_tower_push_scope(tw, name));
  tpt_status *st = block_layers(out, tw, x, in_filters, filters, stride);
  tpt_status *popped = tpt_tower_pop_scope(tw);
  if (st) tpt_status_free(popped);
  return st ? st : popped;
}

static tpt_status *resnet_tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n;
  (void)ud;
  static const int64_t widths[4] = {64, 128, 256, 512};
  tpt_tensor *x, *logits, *cost;
  TPT_RETURN_IF_ERROR(conv_bn(&x, tw, "stem", in[0], 64, 3, 1, 1));
  int64_t in_filters = 64;
  for (int stage = 0; stage < 4; ++stage)
    for (int block = 0; block < 2; ++block) {
      char name[32];
      snprintf(name, sizeof name, "stage%d_block%d", stage + 1, block + 1);
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      TPT_RETURN_IF_ERROR(basic_block(&x, tw, name, x, in_filters, widths[stage], stride));
      in_filters = widths[stage];
    }
  TPT_RETURN_IF_ERROR(tpt_layer_global_avg_pool(&x, x));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc", x, RCLASSES, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

typedef struct epoch_clock {
  double started, seconds[64];
  int n;
} epoch_clock;

static tpt_status *time_epochs(tpt_trainer *trainer, tpt_event event, const tpt_record *record, void *ud) {
  (void)trainer;
  (void)record;
  epoch_clock *c = ud;
  if (event == TPT_EVENT_BEFORE_EPOCH) c->started = now_s();
  else if (c->n < 64) c->seconds[c->n++] = now_s() - c->started;
  return NULL;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A warm-up epoch and `repeats` timed ones of `steps` steps; prints the
 * median ms/step and images/s, and each epoch's. */
static int speed(int64_t batch, int64_t steps, int repeats) {
  const int64_t rows = batch * 4, shape_x[] = {rows, 3, RS, RS}, shape_y[] = {rows};
  float *x = malloc((size_t)rows * 3 * RS * RS * sizeof *x);
  int64_t *y = malloc((size_t)rows * sizeof *y);
  epoch_clock *clock = calloc(1, sizeof *clock);
  if (!x || !y || !clock) return 1;
  uint32_t r = 777;
  for (int64_t i = 0; i < rows * 3 * RS * RS; ++i) {
    r = r * 1664525u + 1013904223u;
    x[i] = (float)(r >> 8) / 8388608.0f - 1.0f;
  }
  for (int64_t i = 0; i < rows; ++i) {
    r = r * 1664525u + 1013904223u;
    y[i] = (int64_t)((r >> 8) % RCLASSES);
  }
  const int64_t sx[] = {-1, 3, RS, RS}, sy[] = {-1};
  tpt_input_spec spec[] = {{"image", TPT_DTYPE_F32, sx, 4}, {"label", TPT_DTYPE_I64, sy, 1}};
  tpt_model *model = NULL;
  tpt_optimizer *sgd = NULL;
  tpt_tensor *tx = NULL, *ty = NULL;
  tpt_input *input = NULL;
  tpt_callback *cb = NULL;
  tpt_trainer *trainer = NULL;
  TPT_CHECK_OR_DIE(tpt_manual_seed(1));
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, resnet_tower, NULL, NULL));
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&sgd, "sgd"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(sgd, "learning_rate", 0.01));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(sgd, "momentum", 0.9));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, sgd));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&tx, x, shape_x, 4));
  TPT_CHECK_OR_DIE(tptu_tensor_new(&ty, TPT_DTYPE_I64, y, shape_y, 1));
  const tpt_tensor *data[] = {tx, ty};
  TPT_CHECK_OR_DIE(tpt_input_from_tensors(&input, data, 2, batch, /*shuffle=*/0, 0));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_BEFORE_EPOCH | TPT_EVENT_AFTER_EPOCH;
  d.name = "epoch clock";
  d.fn = time_epochs;
  d.user_data = clock;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &d));
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 1 + repeats;
  o.steps_per_epoch = steps;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_towers_options t = TPT_TOWERS_OPTIONS_INIT;
  const char *devs[1] = {device};
  t.n_towers = 1;
  t.devices = devs;
  tpt_train_config c = TPT_TRAIN_CONFIG_INIT;
  c.options = &o;
  c.model = model;
  c.input = input;
  c.towers = &t;
  c.callbacks = &cb;
  c.n_callbacks = 1;
  TPT_CHECK_OR_DIE(tpt_trainer_from_config(&trainer, &c));
  TPT_CHECK_OR_DIE(tpt_trainer_run(trainer));
  float *values = NULL;
  size_t n_values = 0;
  TPT_CHECK_OR_DIE(variables(&values, &n_values, model));
  free(values);
  printf("gpu_check --speed: %zu values in its variables (batch norm's moving averages included)\n", n_values);
  double ms[64];
  int n = 0;
  printf("resnet18 on %s, batch %lld, %lld steps an epoch; ms/step of each epoch (the first warms up):", device,
         (long long)batch, (long long)steps);
  for (int i = 0; i < clock->n; ++i) {
    printf(" %.2f", 1e3 * clock->seconds[i] / (double)steps);
    if (i > 0) ms[n++] = 1e3 * clock->seconds[i] / (double)steps;
  }
  printf("\n");
  qsort(ms, (size_t)n, sizeof ms[0], by_value);
  const double median = n ? (n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2) : 0;
  printf("resnet18 ms/step: %.3f (median of %d epochs), images/s: %.1f\n", median, n,
         median > 0 ? 1e3 * (double)batch / median : 0);
  tpt_trainer_free(trainer);
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  tpt_optimizer_free(sgd);
  tpt_model_free(model);
  free(clock);
  free(x);
  free(y);
  return n == repeats ? 0 : 1;
}

int main(int argc, char **argv) {
  int speed_run = 0, repeats = 5;
  const char *killed_dir = NULL;
  int64_t batch = 256, steps = 20;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!strcmp(argv[i], "--workdir") && i + 1 < argc) workdir = argv[++i];
    else if (!strcmp(argv[i], "--speed")) speed_run = 1;
    else if (!strcmp(argv[i], "--killed-child") && i + 1 < argc) killed_dir = argv[++i];
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: gpu_check [--device cuda:0|cpu] [--workdir DIR]\n"
                      "       gpu_check --speed [--device cuda:0|cpu] [--batch 256] [--steps 20] [--repeats 5]\n");
      return 2;
    }
  }
  if (batch < 1 || steps < 1 || repeats < 1 || repeats > 63) {
    fprintf(stderr, "gpu_check: --batch and --steps want >= 1, --repeats 1 to 63\n");
    return 2;
  }
  int cuda = tpt_has_feature(TPT_FEATURE_CUDA), nccl = tpt_has_feature(TPT_FEATURE_NCCL);
  if (strncmp(device, "cuda", 4) == 0 && !cuda) {
    fprintf(stderr, "gpu_check: %s asked for, but this LibTorch has no CUDA or sees no device\n", device);
    return 2;
  }
  if (speed_run) return speed(batch, steps, repeats); /* LibTorch's default precision, as PyTorch's side */

  /* Before any CUDA work: cuBLAS reads CUBLAS_WORKSPACE_CONFIG when it starts. */
  TPT_CHECK_OR_DIE(tpt_set_float32_precision(TPT_FLOAT32_IEEE));
  TPT_CHECK_OR_DIE(tpt_set_determinism(TPT_DETERMINISM_WARN));
  mkdir(workdir, 0755);
  make_data();
  if (killed_dir) return killed_child(killed_dir);
  const char *info = tpt_build_info();
  const char *eol = strchr(info, '\n');
  printf("gpu_check on %s; %.*s\n", device, eol ? (int)(eol - info) : (int)strlen(info), info);

  check_device_equals_cpu();
  check_towers_equal_concat();
  check_resume_exact();
  check_killed_resume("/proc/self/exe");
  check_staging();
  check_one_rank_job();
  check_gan_towers();
  if (!nccl) row("NCCL", "not built (no NCCL): the job above ran on Gloo", "-");

  printf("\n| check | result | verdict |\n|---|---|---|\n");
  for (int i = 0; i < n_rows; ++i) printf("| %s | %s | %s |\n", rows[i][0], rows[i][1], rows[i][2]);
  printf("\n%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
