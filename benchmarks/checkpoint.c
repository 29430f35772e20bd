/* Benchmark checkpoint: ms to save and to restore the whole training state
 * of an MLP (784-1024-1024-10, 1.86 M parameters, Adam: 3 tensors per
 * variable) through the C API. Prints "save-ms X" (tpt_trainer_save_checkpoint,
 * atomic: temporary file, fsync, rename, fsync of the directory), "read-ms X"
 * (tpt_trainer_resume: read, hash, zip and field checks) and "restore-ms X"
 * (tpt_model_restore of the variables), each the median of REPS.
 *
 *   bench_checkpoint DIR [REPS]      (benchmarks/run checkpoint compares with
 *                                     python3-torch's torch.save / torch.load) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tptrain_util.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *ud) {
  (void)n, (void)ud;
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *x = NULL, *logits = NULL, *cost = NULL;
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&x, tw, "fc0", in[0], 1024, &relu));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&x, tw, "fc1", x, 1024, &relu));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc2", x, 10, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

static char path[512];
static int reps = 10;
static double save_ms[64];

static tpt_status *save_at_end(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *ud) {
  (void)ev, (void)r, (void)ud;
  for (int i = 0; i < reps; ++i) {
    double t0 = now_ms();
    TPT_RETURN_IF_ERROR(tpt_trainer_save_checkpoint(t, path));
    save_ms[i] = now_ms() - t0;
  }
  return NULL;
}

/* Reads the file once, untimed, before each timed read: both sides of the
 * benchmark (benchmarks/checkpoint.py does the same) read from a warm page cache. */
static void warm(const char *file) {
  static char buf[1 << 20];
  FILE *f = fopen(file, "rb");
  if (!f) return;
  while (fread(buf, 1, sizeof buf, f) == sizeof buf) {
  }
  fclose(f);
}

static tpt_model *make_model(void) {
  const int64_t sx[] = {-1, 784}, sy[] = {-1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_I64, sy, 1}};
  tpt_model *m = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&m, spec, 2, tower, NULL, NULL));
  tpt_optimizer *adam = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&adam, "adam"));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(m, adam));
  tpt_optimizer_free(adam);
  return m;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_checkpoint DIR [REPS]\n");
    return 2;
  }
  snprintf(path, sizeof path, "%s/tptrain-checkpoint", argv[1]);
  if (argc > 2) reps = atoi(argv[2]);
  if (reps < 1 || reps > 64) reps = 10;
  TPT_CHECK_OR_DIE(tpt_set_num_threads(1));
  tpt_model *m = make_model();
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.max_epoch = 1;
  o.steps_per_epoch = 3; /* Adam's slots exist after the first update */
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.default_callbacks = 0;
  o.default_monitors = 0;
  tpt_trainer *t = NULL;
  tpt_input *in = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_new(&t, &o));
  TPT_CHECK_OR_DIE(tpt_input_dummy(&in, 32));
  TPT_CHECK_OR_DIE(tpt_trainer_set_model(t, m, in));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_AFTER_TRAIN;
  d.fn = save_at_end;
  tpt_callback *cb = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &d));
  TPT_CHECK_OR_DIE(tpt_trainer_add_callback(t, cb));
  TPT_CHECK_OR_DIE(tpt_trainer_run(t));
  tpt_trainer_free(t);

  double read_ms[64], restore_ms[64];
  tpt_model *fresh = make_model();
  TPT_CHECK_OR_DIE(tpt_model_build(fresh));
  for (int i = 0; i < reps; ++i) {
    tpt_trainer *r = NULL;
    TPT_CHECK_OR_DIE(tpt_trainer_new(&r, NULL));
    warm(path);
    double t0 = now_ms();
    TPT_CHECK_OR_DIE(tpt_trainer_resume(r, path));
    read_ms[i] = now_ms() - t0;
    tpt_trainer_free(r);
    warm(path);
    t0 = now_ms();
    TPT_CHECK_OR_DIE(tpt_model_restore(NULL, fresh, path, NULL));
    restore_ms[i] = now_ms() - t0;
  }
  FILE *f = fopen(path, "rb");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  printf("size-mb %.2f\n", size / 1048576.0);
  printf("save-ms %.2f\n", median(save_ms, reps));
  printf("read-ms %.2f\n", median(read_ms, reps));
  printf("restore-ms %.2f\n", median(restore_ms, reps));
  remove(path);
  tpt_model_free(m);
  tpt_model_free(fresh);
  return 0;
}
