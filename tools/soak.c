/* A long run, as a user writes it: a tiny MLP fed by a queue (a dataflow in
 * the TrainConfig), an inference runner each epoch, a log directory. After
 * each epoch it prints the steps per second, the resident memory, the size of
 * stats.json, the threads and the open file descriptors; at the end it checks
 * that the run stayed flat. Not part of the test command (a few minutes).
 *
 *   build/tools/soak [STEPS [STEPS_PER_EPOCH [LOGDIR]]]
 *       (default 200000 steps, 2000 per epoch, a temporary log directory)
 *
 * Exit status 0 when, after the first 10,000 steps, memory grew by less than
 * 20 KB per 1,000 steps, the last 10 epochs ran at >= 0.95 of the first 10
 * epochs' steps/s (after the first), and threads and descriptors stayed put. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tptrain_util.h"

enum { ROWS = 2048, VAL = 256, IN = 8, MAX_EPOCHS = 10000 };

typedef struct {
  double t, rate;
  long rss_kb, stats_bytes, threads, fds;
  int64_t step;
} sample;

typedef struct {
  const char *logdir;
  double last_t;
  int64_t last_step;
  int n;
  sample s[MAX_EPOCHS];
} soak;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long status_field(const char *name) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t len = strlen(name);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, name, len) && line[len] == ':') v = atol(line + len + 1);
  fclose(f);
  return v;
}

static long open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  long n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1; /* the DIR's own */
}

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *h, *pred, *cost;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&h, tw, "fc1", in[0], 32, &relu));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&pred, tw, "out", h, 1, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_mse(&cost, pred, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

static tpt_status *measure(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r;
  soak *s = ud;
  if (s->n == MAX_EPOCHS) return NULL;
  sample *m = &s->s[s->n++];
  TPT_RETURN_IF_ERROR(tpt_trainer_global_step(&m->step, t));
  m->t = now();
  m->rate = (double)(m->step - s->last_step) / (m->t - s->last_t);
  s->last_t = m->t;
  s->last_step = m->step;
  m->rss_kb = status_field("VmRSS");
  m->threads = status_field("Threads");
  m->fds = open_fds();
  char path[4096];
  snprintf(path, sizeof path, "%s/stats.json", s->logdir);
  struct stat st;
  m->stats_bytes = stat(path, &st) == 0 ? (long)st.st_size : -1;
  printf("epoch %4d  step %7lld  %8.0f steps/s  rss %7ld KB  stats.json %8ld B  threads %3ld  fds %3ld\n", s->n,
         (long long)m->step, m->rate, m->rss_kb, m->stats_bytes, m->threads, m->fds);
  fflush(stdout);
  return NULL;
}

static void make_data(float *x, float *y, int rows, uint32_t seed) {
  for (int i = 0; i < rows; ++i) {
    float sum = 0;
    for (int j = 0; j < IN; ++j) {
      seed = seed * 1664525u + 1013904223u;
      x[i * IN + j] = (float)(seed >> 8) / 8388608.0f - 1.0f;
      sum += x[i * IN + j] * (float)(j + 1);
    }
    y[i] = sum / IN;
  }
}

int main(int argc, char **argv) {
  const long steps = argc > 1 ? atol(argv[1]) : 200000;
  const long per_epoch = argc > 2 ? atol(argv[2]) : 2000;
  if (steps <= 0 || per_epoch <= 0 || steps % per_epoch || steps / per_epoch > MAX_EPOCHS) {
    fprintf(stderr, "usage: soak [STEPS [STEPS_PER_EPOCH [LOGDIR]]] (STEPS a multiple of STEPS_PER_EPOCH)\n");
    return 2;
  }
  char tmp[] = "/tmp/tptrain_soak_XXXXXX";
  const char *logdir = argc > 3 ? argv[3] : mkdtemp(tmp);
  static float x[ROWS * IN], y[ROWS], vx[VAL * IN], vy[VAL];
  make_data(x, y, ROWS, 1);
  make_data(vx, vy, VAL, 2);
  TPT_CHECK_OR_DIE(tpt_manual_seed(0));

  const int64_t sx[] = {-1, IN}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *model = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *opt = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&opt, "adam"));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, opt));

  const int64_t dx[] = {ROWS, IN}, dy[] = {ROWS, 1}, vdx[] = {VAL, IN}, vdy[] = {VAL, 1};
  tpt_tensor *tx = NULL, *ty = NULL, *tvx = NULL, *tvy = NULL;
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&tx, x, dx, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&ty, y, dy, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&tvx, vx, vdx, 2));
  TPT_CHECK_OR_DIE(tptu_tensor_f32(&tvy, vy, vdy, 2));
  const tpt_tensor *train[] = {tx, ty}, *val[] = {tvx, tvy};
  tpt_dataflow *rows = NULL, *batches = NULL, *vrows = NULL, *vbatches = NULL;
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&rows, train, 2, 1));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batches, rows, 32, 0));
  TPT_CHECK_OR_DIE(tpt_dataflow_from_tensors(&vrows, val, 2, 0));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&vbatches, vrows, 64, 1));

  static soak s;
  s.logdir = logdir;
  s.last_t = now();
  tpt_callback *cbs[2] = {NULL, NULL};
  const char *outs[] = {"cost"};
  TPT_CHECK_OR_DIE(tpt_inference_runner_new(&cbs[0], model, vbatches, outs, 1));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.name = "soak";
  d.events = TPT_EVENT_TRIGGER_EPOCH;
  d.fn = measure;
  d.user_data = &s;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cbs[1], &d));

  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = per_epoch;
  o.max_epoch = steps / per_epoch;
  o.logdir = logdir;
  o.logdir_action = TPT_LOGDIR_DELETE;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_train_config config = TPT_TRAIN_CONFIG_INIT;
  config.options = &o;
  config.model = model;
  config.dataflow = batches;
  config.callbacks = cbs;
  config.n_callbacks = 2;
  printf("soak: %ld steps, %ld per epoch, log directory %s\n", steps, per_epoch, logdir);
  TPT_CHECK_OR_DIE(tpt_launch_train(&config));

  /* the verdict */
  int bad = 0;
  int from = 0; /* the first epoch that ends at or after 10,000 steps */
  while (from < s.n - 1 && s.s[from].step < 10000) ++from;
  const sample *a = &s.s[from], *z = &s.s[s.n - 1];
  double growth = z->step > a->step ? (double)(z->rss_kb - a->rss_kb) / ((double)(z->step - a->step) / 1000) : 0;
  printf("memory: %+.2f KB per 1,000 steps after step %lld (limit 20)\n", growth, (long long)a->step);
  bad |= growth >= 20;
  if (s.n >= 21) {
    double first = 0, last = 0;
    for (int i = 1; i <= 10; ++i) first += s.s[i].rate;
    for (int i = s.n - 10; i < s.n; ++i) last += s.s[i].rate;
    printf("steps/s: last 10 epochs %.0f, epochs 2-11 %.0f, ratio %.3f (at least 0.95)\n", last / 10, first / 10,
           last / first);
    bad |= last / first < 0.95;
  }
  for (int i = 2; i < s.n; ++i)
    if (s.s[i].threads != s.s[1].threads || s.s[i].fds != s.s[1].fds) {
      printf("threads or descriptors changed at epoch %d: %ld/%ld, epoch 2 had %ld/%ld\n", i + 1, s.s[i].threads,
             s.s[i].fds, s.s[1].threads, s.s[1].fds);
      bad = 1;
      break;
    }
  printf("stats.json: %ld bytes\n%s\n", z->stats_bytes, bad ? "FAIL" : "PASS");
  tpt_dataflow_free(batches);
  tpt_dataflow_free(vbatches);
  tpt_dataflow_free(rows);
  tpt_dataflow_free(vrows);
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  tpt_tensor_free(tvx);
  tpt_tensor_free(tvy);
  tpt_optimizer_free(opt);
  tpt_model_free(model);
  return bad;
}
