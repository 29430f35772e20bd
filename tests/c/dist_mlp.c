/* Trains the parity MLP (tests/c/parity_mlp.c's data and model) as one rank
 * of a distributed job, or alone, for tests/py/test_distributed.py, which
 * compares the ranks with one process fed the concatenated batches and with
 * PyTorch DDP, kills ranks and restarts jobs.
 *
 *   dist_mlp DIR OUT STEPS BATCH [--dist] [--towers N] [--timeout-ms MS]
 *            [--logdir D [--save-every K]] [--die-at STEP --die-rank R]
 *            [--unset-on-others] [--average-scalars] [--sleep-us N] [--loss-scaling]
 *
 * DIR holds x.bin, y.bin, w1.bin ... and dims.txt (parity_mlp's layout).
 * SGD (lr 0.05, momentum 0.9), STEPS steps in one epoch, batches of BATCH
 * rows in order. --dist joins the job from torchrun's variables. Rank 0 sets
 * the initial values from DIR; with --unset-on-others the other ranks keep
 * their own random ones (the broadcast must fix them). --logdir with
 * --save-every K keeps checkpoints every K steps and auto-resumes.
 * --die-at kills rank R (SIGKILL) after that step. --sleep-us sleeps after
 * each step (a job slow enough to be signalled mid-run). --loss-scaling turns
 * dynamic loss scaling on (growth_interval 3; TPT_PARITY_OVERFLOW names the
 * steps whose cost overflows in this process) and writes the scale after
 * each step to OUT/r<rank>_scales.bin. Every rank writes OUT/r<rank>_w1.out
 * ... and OUT/r<rank>_costs.bin (its cost per step). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <time.h>

#include "parity_mlp_tower.h"

static long die_at = -1, sleep_us = 0;
static int die_rank = -1;
static int32_t my_rank = 0;

typedef struct {
  cost_log costs;
  cost_log scales; /* with --loss-scaling */
} run_log;

/* After every step: record the cost; die when told to. */
static tpt_status *after_step(tpt_trainer *t, tpt_event ev, const tpt_record *r, void *p) {
  int64_t step = 0;
  tpt_status *st = tpt_trainer_global_step(&step, t);
  if (st) return st;
  if (step == die_at && my_rank == die_rank) {
    fprintf(stderr, "dist_mlp: rank %d kills itself after step %ld\n", my_rank, die_at);
    fflush(stderr);
    raise(SIGKILL);
  }
  if (sleep_us > 0) {
    struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  run_log *log = p;
  if (log->scales.output && (st = cost_log_after_run(t, ev, r, &log->scales))) return st;
  return cost_log_after_run(t, ev, r, &log->costs);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: dist_mlp DIR OUT STEPS BATCH [options]\n");
    return 2;
  }
  const char *dir = argv[1], *out = argv[2], *logdir = NULL;
  long steps = atol(argv[3]), save_every = 0;
  int64_t batch = atoll(argv[4]), timeout_ms = 0;
  int dist = 0, towers = 1, unset_on_others = 0, average_scalars = 0, loss_scaling = 0;
  for (int i = 5; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--dist")) dist = 1;
    else if (!strcmp(a, "--unset-on-others")) unset_on_others = 1;
    else if (!strcmp(a, "--average-scalars")) average_scalars = 1;
    else if (!strcmp(a, "--loss-scaling")) loss_scaling = 1;
    else if (!strcmp(a, "--towers") && v) towers = atoi(v), ++i;
    else if (!strcmp(a, "--timeout-ms") && v) timeout_ms = atoll(v), ++i;
    else if (!strcmp(a, "--logdir") && v) logdir = v, ++i;
    else if (!strcmp(a, "--save-every") && v) save_every = atol(v), ++i;
    else if (!strcmp(a, "--die-at") && v) die_at = atol(v), ++i;
    else if (!strcmp(a, "--die-rank") && v) die_rank = atoi(v), ++i;
    else if (!strcmp(a, "--sleep-us") && v) sleep_us = atol(v), ++i;
    else {
      fprintf(stderr, "dist_mlp: unknown argument %s\n", a);
      return 2;
    }
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/dims.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f || fscanf(f, "%lld %lld %lld", (long long *)&N, (long long *)&D, (long long *)&H) != 3) return 3;
  fclose(f);
  CHECK(tpt_set_num_threads(1));

  const int64_t sx[] = {N, D}, sy[] = {N, 1}, sw1[] = {H, D}, sb1[] = {H}, sw2[] = {1, H}, sb2[] = {1};
  tpt_tensor *x = parity_load(dir, "x.bin", sx, 2, TPT_DTYPE_F32), *y = parity_load(dir, "y.bin", sy, 2, TPT_DTYPE_F32);
  const int64_t in_x[] = {-1, D}, in_y[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, in_x, 2}, {"y", TPT_DTYPE_F32, in_y, 2}};
  tpt_model *model = NULL;
  CHECK(tpt_model_new(&model, spec, 2, parity_mlp_tower, NULL, NULL));
  parity_set_optimizer(model, "sgd");

  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = steps;
  o.max_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  if (loss_scaling) {
    o.loss_scaling.mode = TPT_LOSS_SCALING_ON;
    o.loss_scaling.growth_interval = 3;
  }
  if (logdir) {
    o.logdir = logdir;
    o.logdir_action = TPT_LOGDIR_KEEP;
    o.auto_resume = 1;
  }
  tpt_trainer *trainer = NULL;
  CHECK(tpt_trainer_new(&trainer, &o));
  int32_t world = 1;
  if (dist) {
    tpt_distributed_options d = TPT_DISTRIBUTED_OPTIONS_INIT;
    d.timeout_ms = timeout_ms;
    d.average_scalars = average_scalars;
    CHECK(tpt_trainer_set_distributed(trainer, &d));
  }
  CHECK(tpt_trainer_rank(&my_rank, &world, trainer));
  if (dist) {
    printf("dist_mlp rank %d of %d joined\n", (int)my_rank, (int)world);
    fflush(stdout);
  }
  /* Rank 0's initial values (the others' may differ: rank 0's are broadcast). */
  CHECK(tpt_model_build(model));
  if (my_rank == 0 || !unset_on_others) {
    const char *names[] = {"fc1/W", "fc1/b", "fc2/W", "fc2/b"};
    const char *files[] = {"w1.bin", "b1.bin", "w2.bin", "b2.bin"};
    const int64_t *shapes[] = {sw1, sb1, sw2, sb2};
    const size_t ndims[] = {2, 1, 2, 1};
    for (int i = 0; i < 4; ++i) {
      tpt_tensor *init = parity_load(dir, files[i], shapes[i], ndims[i], TPT_DTYPE_F32);
      CHECK(tpt_model_set_variable(model, names[i], init));
      tpt_tensor_free(init);
    }
  }
  const tpt_tensor *data[] = {x, y};
  tpt_input *input = NULL;
  CHECK(tpt_input_from_tensors(&input, data, 2, batch, 0, 0));
  if (towers > 1) {
    tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT;
    to.n_towers = towers;
    CHECK(tpt_trainer_set_towers(trainer, model, input, &to));
  } else {
    CHECK(tpt_trainer_set_model(trainer, model, input));
  }
  if (logdir && save_every > 0) {
    tpt_callback *saver = NULL;
    tpt_model_saver_options so = TPT_MODEL_SAVER_OPTIONS_INIT;
    so.every_k_steps = save_every;
    CHECK(tpt_callback_model_saver(&saver, &so));
    CHECK(tpt_trainer_add_callback(trainer, saver));
  }
  run_log log = {{0}, {0}};
  if (loss_scaling) log.scales.output = "loss_scale";
  tpt_callback_desc cd = TPT_CALLBACK_DESC_INIT;
  cd.events = TPT_EVENT_AFTER_RUN;
  cd.name = "dist_mlp";
  cd.chief_only = 0;
  cd.fn = after_step;
  cd.user_data = &log;
  tpt_callback *cb = NULL;
  CHECK(tpt_callback_new(&cb, &cd));
  CHECK(tpt_trainer_add_callback(trainer, cb));
  tpt_status *st = tpt_trainer_run(trainer);
  if (st) {
    fprintf(stderr, "dist_mlp rank %d: %s (%s)\n", my_rank, tpt_status_message(st), tpt_code_name(tpt_status_code(st)));
    tpt_status_free(st);
    tpt_trainer_free(trainer);
    return 1;
  }
  char name[256];
  float *costs = malloc((log.costs.count + 1) * sizeof(float));
  for (size_t i = 0; i < log.costs.count; ++i) costs[i] = (float)log.costs.values[i];
  snprintf(name, sizeof name, "r%d_costs.bin", my_rank);
  parity_write(out, name, costs, log.costs.count * sizeof(float));
  free(costs);
  free(log.costs.values);
  if (loss_scaling) {
    float *scales = malloc((log.scales.count + 1) * sizeof(float));
    for (size_t i = 0; i < log.scales.count; ++i) scales[i] = (float)log.scales.values[i];
    snprintf(name, sizeof name, "r%d_scales.bin", my_rank);
    parity_write(out, name, scales, log.scales.count * sizeof(float));
    free(scales);
    free(log.scales.values);
  }
  const char *names[] = {"fc1/W", "fc1/b", "fc2/W", "fc2/b"};
  const char *outs[] = {"w1.out", "b1.out", "w2.out", "b2.out"};
  for (int i = 0; i < 4; ++i) {
    tpt_tensor *v = NULL;
    CHECK(tpt_model_variable(&v, model, names[i]));
    snprintf(name, sizeof name, "r%d_%s", my_rank, outs[i]);
    parity_save(out, name, v);
    tpt_tensor_free(v);
  }
  tpt_trainer_free(trainer);
  tpt_model_free(model);
  tpt_tensor_free(x);
  tpt_tensor_free(y);
  printf("dist_mlp rank %d of %d: %zu steps\n", my_rank, world, log.costs.count);
  return 0;
}
