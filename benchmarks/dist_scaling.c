/* Benchmark dist-scaling, one process of it (benchmarks/dist_scaling.sh
 * starts them): towers-scaling's CNN (compute dominates) trained on zeros
 * (DummyConstantInput) with one intra-op thread, alone or as one rank of a
 * job started by tools/tptrain-run (torchrun's variables: then it joins the
 * job and each rank takes its own batch of BATCH).
 *
 *   bench_dist_scaling STEPS BATCH [overlap|no-overlap] [THREADS]
 *
 * THREADS: LibTorch's intra-op threads (default 1).
 *
 * Rank 0 (or the lone process) prints `images/s X`: the job's images per
 * second over STEPS steps after 10 warm-up steps. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tptrain_util.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* conv 5x5 32 -> pool 2 -> conv 3x3 64 -> pool 2 -> fc 10, as towers-scaling */
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

static double started = 0;
static const int64_t warmup = 10;

static tpt_status *clock_start(tpt_trainer *t, tpt_event e, const tpt_record *r, void *ud) {
  (void)e, (void)r, (void)ud;
  int64_t step = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_global_step(&step, t));
  if (step == warmup) started = now_s();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_dist_scaling STEPS BATCH [overlap|no-overlap] [THREADS]\n");
    return 2;
  }
  const int64_t steps = atoll(argv[1]), batch = atoll(argv[2]);
  const int overlap = !(argc > 3 && !strcmp(argv[3], "no-overlap"));
  const int threads = argc > 4 ? atoi(argv[4]) : 1;
  TPT_CHECK_OR_DIE(tpt_set_num_threads(threads));
  TPT_CHECK_OR_DIE(tpt_manual_seed(1));
  const int64_t sx[] = {-1, 1, 28, 28}, sy[] = {-1};
  tpt_input_spec spec[] = {{"image", TPT_DTYPE_F32, sx, 4}, {"label", TPT_DTYPE_I64, sy, 1}};
  tpt_model *m = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&m, spec, 2, tower, NULL, NULL));
  tpt_optimizer *o = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&o, "sgd"));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(m, o));
  tpt_optimizer_free(o);

  tpt_trainer_options opts = TPT_TRAINER_OPTIONS_INIT;
  opts.max_epoch = 1;
  opts.steps_per_epoch = warmup + steps;
  opts.console = 0;
  opts.progress = TPT_PROGRESS_OFF;
  opts.default_callbacks = 0;
  opts.default_monitors = 0;
  tpt_trainer *t = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_new(&t, &opts));
  const char *world_env = getenv("WORLD_SIZE");
  if (world_env && *world_env) TPT_CHECK_OR_DIE(tpt_trainer_set_distributed(t, NULL));
  int32_t rank = 0, world = 1;
  TPT_CHECK_OR_DIE(tpt_trainer_rank(&rank, &world, t));
  tpt_input *in = NULL;
  TPT_CHECK_OR_DIE(tpt_input_dummy(&in, batch));
  tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT;
  to.n_towers = 1;
  to.intra_op_threads = threads;
  to.overlap = overlap;
  TPT_CHECK_OR_DIE(tpt_trainer_set_towers(t, m, in, &to));
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_AFTER_RUN;
  d.chief_only = 0;
  d.fn = clock_start;
  tpt_callback *cb = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &d));
  TPT_CHECK_OR_DIE(tpt_trainer_add_callback(t, cb));
  TPT_CHECK_OR_DIE(tpt_trainer_run(t));
  const double took = now_s() - started;
  if (rank == 0) printf("images/s %.1f\n", (double)(steps * batch * world) / took);
  tpt_trainer_free(t);
  tpt_model_free(m);
  return 0;
}
