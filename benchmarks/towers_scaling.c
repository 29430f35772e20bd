/* Benchmark towers-scaling: a CNN where compute dominates, trained at the
 * same total batch three ways on a 2-core machine:
 *   1 tower x 2 intra-op threads (LibTorch's own parallelism),
 *   1 tower x 1 thread,
 *   2 replicated CPU towers x 1 thread each, the gradients' buckets reduced
 *   during the backward passes (overlap, the default) and after them,
 *   2 parameter-server towers x 1 thread,
 *   2 replicated towers x 1 thread with OpenBLAS's pthread pool at 2 threads
 *   (TPT_BLAS_POOL=keep and the pool set by hand: it serves both towers, as
 *   it did before tptrain kept it at one thread; where the BLAS has no such
 *   pool, an OpenMP OpenBLAS, the same as the replicated line),
 *   2 independent trainers x 1 thread on threads of this process, each with
 *   a model of its own and half the batch, at once: the towers' work
 *   without the step's synchronisation (nothing shared, nothing waited
 *   for), so what the two cores give it at that moment; images/s over the
 *   longer of the two.
 * Rounds alternate the configurations; each prints images/s, the median of
 * the rounds. The data is DummyConstantInput (zeros), so only the towers are
 * measured.
 *
 *   bench_towers_scaling [ROUNDS] [STEPS] [BATCH] [BUCKET_BYTES] [ONLY]   (defaults 5 12 64 0 -1)
 *
 * BUCKET_BYTES is the towers' bucket_bytes (0: the library's default). ONLY
 * (0-6, in the order above) runs that configuration alone, for a profiler;
 * the summary lines then say nothing of the others.
 *
 * The last line is `towers-scaling ratio=R goal=0.95`, R = images/s of 2
 * towers x 1 thread / images/s of 1 tower x 2 threads. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tptrain_util.h"

/* Sizes OpenBLAS's pthread pool, where the process has one. */
static void set_blas_pool(int n) {
  void *set = dlsym(RTLD_DEFAULT, "openblas_set_num_threads"), *parallel = dlsym(RTLD_DEFAULT, "openblas_get_parallel");
  if (!set || !parallel) return;
  int (*parallel_fn)(void);
  void (*set_fn)(int);
  memcpy(&parallel_fn, &parallel, sizeof parallel_fn);
  memcpy(&set_fn, &set, sizeof set_fn);
  if (parallel_fn() == 1) set_fn(n);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* conv 5x5 32 -> pool 2 -> conv 3x3 64 -> pool 2 -> fc 10: most of the time
 * is in the convolutions. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_layer_options conv = TPT_LAYER_OPTIONS_INIT, conv5;
  conv.activation = TPT_ACT_RELU;
  conv5 = conv;
  conv5.kernel[0] = conv5.kernel[1] = 5;
  tpt_tensor *x, *logits, *cost;
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv0", in[0], 32, &conv5));
  TPT_RETURN_IF_ERROR(tpt_layer_max_pool(&x, x, 2, 2, TPT_PADDING_VALID));
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv1", x, 64, &conv));
  TPT_RETURN_IF_ERROR(tpt_layer_max_pool(&x, x, 2, 2, TPT_PADDING_VALID));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc", x, 10, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, in[1]));
  return tpt_tower_set_cost(tw, cost);
}

static tpt_model *model(void) {
  const int64_t sx[] = {-1, 1, 28, 28}, sy[] = {-1};
  tpt_input_spec spec[] = {{"image", TPT_DTYPE_F32, sx, 4}, {"label", TPT_DTYPE_I64, sy, 1}};
  tpt_model *m = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&m, spec, 2, tower, NULL, NULL));
  tpt_optimizer *o = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&o, "sgd"));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(m, o));
  tpt_optimizer_free(o);
  return m;
}

/* Seconds for `steps` steps (after one warm-up epoch of 2 steps). */
static size_t bucket_bytes = 0;

static double run(tpt_model *m, int32_t towers, tpt_strategy strategy, int overlap, int64_t batch, int64_t steps) {
  double took = 0;
  for (int pass = 0; pass < 2; ++pass) {
    tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
    o.max_epoch = 1;
    o.steps_per_epoch = pass == 0 ? 2 : steps;
    o.console = 0;
    o.progress = TPT_PROGRESS_OFF;
    o.default_callbacks = 0;
    o.default_monitors = 0;
    tpt_trainer *t = NULL;
    TPT_CHECK_OR_DIE(tpt_trainer_new(&t, &o));
    tpt_input *in = NULL;
    TPT_CHECK_OR_DIE(tpt_input_dummy(&in, batch / towers));
    tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT;
    to.strategy = strategy;
    to.n_towers = towers;
    to.intra_op_threads = 1;
    to.overlap = overlap;
    to.bucket_bytes = bucket_bytes;
    TPT_CHECK_OR_DIE(tpt_trainer_set_towers(t, m, in, &to));
    double start = now_s();
    TPT_CHECK_OR_DIE(tpt_trainer_run(t));
    took = now_s() - start;
    tpt_trainer_free(t);
  }
  return took;
}

/* One of the independent trainers: its own model, one thread. */
struct lone {
  tpt_model *m;
  int64_t batch, steps;
  double took;
};

static void *lone_trainer(void *arg) {
  struct lone *l = arg;
  TPT_CHECK_OR_DIE(tpt_set_num_threads(1)); /* this thread's OpenMP count */
  l->took = run(l->m, 1, TPT_STRATEGY_SIMPLE, 1, l->batch, l->steps);
  return NULL;
}

/* Seconds for both independent trainers' `steps` steps of batch / 2. */
static double run_independent(tpt_model *a, tpt_model *b, int64_t batch, int64_t steps) {
  struct lone l[2] = {{a, batch / 2, steps, 0}, {b, batch / 2, steps, 0}};
  pthread_t th[2];
  for (int k = 0; k < 2; ++k)
    if (pthread_create(&th[k], NULL, lone_trainer, &l[k]) != 0) {
      fprintf(stderr, "bench_towers_scaling: cannot start a thread\n");
      exit(1);
    }
  for (int k = 0; k < 2; ++k) pthread_join(th[k], NULL);
  return l[0].took > l[1].took ? l[0].took : l[1].took;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 5;
  const int64_t steps = argc > 2 ? atoll(argv[2]) : 12, batch = argc > 3 ? atoll(argv[3]) : 64;
  const long long bucket = argc > 4 ? atoll(argv[4]) : 0;
  const int only = argc > 5 ? atoi(argv[5]) : -1;
  if (rounds < 1 || rounds > 99 || steps < 1 || batch < 2 || batch % 2 || bucket < 0 || only < -1 || only > 6) {
    fprintf(stderr, "usage: bench_towers_scaling [ROUNDS] [STEPS] [BATCH (even)] [BUCKET_BYTES] [ONLY (0-6)]\n");
    return 2;
  }
  bucket_bytes = (size_t)bucket;
  TPT_CHECK_OR_DIE(tpt_manual_seed(1));
  tpt_model *m = model(), *lone_a = model(), *lone_b = model();
  enum { ONE_BY_TWO, ONE_BY_ONE, TWO_REPLICATED, TWO_NO_OVERLAP, TWO_PS, TWO_BLAS_KEPT, TWO_INDEPENDENT, N };
  const char *names[N] = {"1 tower x 2 threads",
                          "1 tower x 1 thread",
                          "2 replicated towers x 1 thread",
                          "  the same, overlap off",
                          "2 parameter-server towers x 1 thread",
                          "  replicated, the BLAS's pool at 2",
                          "2 independent trainers x 1 thread"};
  double ips[N][100];
  for (int r = 0; r < rounds; ++r) {
    for (int c = 0; c < N; ++c) {
      int k = (c + r) % N; /* alternate which goes first */
      if (only >= 0 && k != only) {
        ips[k][r] = 0;
        continue;
      }
      TPT_CHECK_OR_DIE(tpt_set_num_threads(k == ONE_BY_ONE ? 1 : 2));
      if (k == TWO_BLAS_KEPT) {
        setenv("TPT_BLAS_POOL", "keep", 1);
        set_blas_pool(2);
      }
      double s = k == TWO_INDEPENDENT                ? run_independent(lone_a, lone_b, batch, steps)
                 : k == ONE_BY_TWO || k == ONE_BY_ONE ? run(m, 1, TPT_STRATEGY_SIMPLE, 1, batch, steps)
                 : k == TWO_PS                      ? run(m, 2, TPT_STRATEGY_PARAMETER_SERVER, 1, batch, steps)
                                                    : run(m, 2, TPT_STRATEGY_REPLICATED, k != TWO_NO_OVERLAP, batch, steps);
      if (k == TWO_BLAS_KEPT) {
        unsetenv("TPT_BLAS_POOL");
        set_blas_pool(1);
      }
      ips[k][r] = (double)(steps * batch) / s;
    }
    printf("# round %d:", r + 1);
    for (int c = 0; c < N; ++c) printf(" %.0f", ips[c][r]);
    printf(" images/s\n");
  }
  double med[N];
  for (int c = 0; c < N; ++c) {
    qsort(ips[c], (size_t)rounds, sizeof(double), by_value);
    med[c] = ips[c][rounds / 2];
    printf("%-38s %8.0f images/s (min %.0f, max %.0f)\n", names[c], med[c], ips[c][0], ips[c][rounds - 1]);
  }
  printf("2 towers x 1 thread vs 1 tower x 1 thread: %.2fx (scaling efficiency %.2f)\n", med[TWO_REPLICATED] / med[ONE_BY_ONE],
         med[TWO_REPLICATED] / med[ONE_BY_ONE] / 2);
  printf("overlap on vs off (2 replicated towers): %.3fx\n", med[TWO_REPLICATED] / med[TWO_NO_OVERLAP]);
  printf("the BLAS's pool at one thread vs at two (2 replicated towers): %.3fx\n", med[TWO_REPLICATED] / med[TWO_BLAS_KEPT]);
  printf("2 independent trainers vs 1 tower x 1 thread: %.2fx (the two cores' ceiling for this work now)\n",
         med[TWO_INDEPENDENT] / med[ONE_BY_ONE]);
  printf("2 replicated towers vs 2 independent trainers: %.3f (what the step's synchronisation costs)\n",
         med[TWO_REPLICATED] / med[TWO_INDEPENDENT]);
  printf("towers-scaling ratio=%.3f goal=0.95\n", med[TWO_REPLICATED] / med[ONE_BY_TWO]);
  tpt_model_free(m);
  tpt_model_free(lone_a);
  tpt_model_free(lone_b);
  return 0;
}
