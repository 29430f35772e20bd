/* Fashion-MNIST with tensorpack's mnist-convnet recipe, trained by tptrain.
 *
 * Data: Debian's dataset-fashion-mnist (IDX files under
 * /usr/share/datasets/fashion-mnist). The training dataflow reads the 60,000
 * images in a new order each epoch, normalises them to [-1, 1] and batches
 * them by 128; the trainer wraps it in a queue input, so a background thread
 * prepares batches while the model trains. After each epoch an inference
 * runner measures accuracy and cost on the 10,000 test images
 * (validation_accuracy and validation_cost in stats.json and TensorBoard's
 * event file), a ModelSaver checkpoints the whole training (also every 200
 * steps) and a MaxSaver keeps the best one as max-validation_accuracy.
 * Run it again on the same LOGDIR and it goes on exactly where the last run
 * stopped (killed mid-epoch included).
 *
 * --towers N trains data-parallel on N replicated CPU towers, tensorpack's
 * SyncMultiGPUTrainerReplicated(N): one field of the train config
 * (docs/towers.md). Each tower takes its own batch of 128, so a step trains
 * on 128 x N images and an epoch has N times fewer steps. The towers' dropout
 * draws from one generator in whatever order they reach it, so such a run
 * (and its resume) is not bit-reproducible.
 *
 * --dist makes this process one rank of a distributed job (tensorpack's
 * HorovodTrainer; docs/distributed.md): start it with the launcher,
 *   tptrain-run -n 2 build/examples/fashion_mnist --dist
 * (or torchrun, or anything that sets torchrun's variables). Each rank takes
 * every other batch, the gradients are averaged over the ranks, and rank 0
 * alone writes the log directory, validates and checkpoints.
 *
 * --bf16 trains in mixed precision (one field of the trainer options,
 * docs/precision.md): the tower function runs under autocast to bfloat16, the
 * variables, gradients and Adam's state stay float32.
 *
 * --device D trains on device D ("cuda:0"; docs/gpu.md): every tower (one
 * without --towers) computes there, on a copy of the variables, which stay
 * on the CPU with Adam's update (docs/towers.md).
 *
 * The tower: conv 5x5 32 -> max pool 2 -> conv 3x3 32 -> conv 3x3 32 ->
 * max pool 2 -> conv 3x3 32 -> fc 512 -> dropout 0.5 -> fc 10, ReLU after
 * each conv and fc0; softmax cross-entropy (the validation "cost").
 * Adam at 1e-3, times 0.6 after each epoch from the second on
 * (ScheduledHyperParamSetter).
 *
 *   build/examples/fashion_mnist [--towers N] [--device D] [--dist] [--bf16] [LOGDIR] [DATA_DIR] [EPOCHS]
 *     (defaults: no towers, train_log/fashion_mnist,
 *      /usr/share/datasets/fashion-mnist, 5; --help says more)
 *
 * Exits 0 when the final test accuracy is at least 90 %. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tptrain_util.h"

enum { BATCH = 128, CLASSES = 10 };

/* The tower function: one line per layer. Its tensors belong to the call and
 * go when it returns, so it frees nothing; TPT_RETURN_IF_ERROR passes an
 * error up. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_layer_options conv = TPT_LAYER_OPTIONS_INIT, conv5, fc = TPT_LAYER_OPTIONS_INIT; /* SAME, He init */
  conv.activation = fc.activation = TPT_ACT_RELU;
  conv5 = conv;
  conv5.kernel[0] = conv5.kernel[1] = 5;
  tpt_tensor *x, *logits, *cost, *acc;
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv0", in[0], 32, &conv5));
  TPT_RETURN_IF_ERROR(tpt_layer_max_pool(&x, x, 2, 2, TPT_PADDING_VALID));
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv1", x, 32, &conv));
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv2", x, 32, &conv));
  TPT_RETURN_IF_ERROR(tpt_layer_max_pool(&x, x, 2, 2, TPT_PADDING_VALID));
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv3", x, 32, &conv));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&x, tw, "fc0", x, 512, &fc)); /* flattens [N, C, H, W] */
  TPT_RETURN_IF_ERROR(tpt_layer_dropout(&x, tw, x, 0.5));
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&logits, tw, "fc1", x, CLASSES, NULL));
  TPT_RETURN_IF_ERROR(tpt_loss_softmax_cross_entropy(&cost, logits, in[1]));
  TPT_RETURN_IF_ERROR(tpt_metric_accuracy(&acc, logits, in[1]));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "accuracy", acc));
  return tpt_tower_set_cost(tw, cost);
}

/* Images normalised to [-1, 1], batched; shuffled each epoch for training. */
static tpt_dataflow *pipeline(const char *dir, const char *split, int train) {
  tpt_dataflow *raw = NULL, *norm = NULL, *batched = NULL;
  TPT_CHECK_OR_DIE(tpt_dataflow_mnist(&raw, dir, split, train));
  const double mean = 0.5, std = 0.5;
  tpt_augmentor a = TPT_AUGMENTOR_INIT;
  a.kind = TPT_AUGMENT_NORMALIZE;
  a.mean = &mean, a.std = &std, a.n_channels = 1;
  TPT_CHECK_OR_DIE(tpt_dataflow_augment(&norm, raw, 0, &a, 1, 0));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batched, norm, BATCH, !train));
  tpt_dataflow_free(raw);
  tpt_dataflow_free(norm);
  return batched;
}

static const char usage[] =
    "usage: fashion_mnist [--towers N] [--device D] [--dist] [--bf16] [LOGDIR] [DATA_DIR] [EPOCHS]\n"
    "  LOGDIR      the log directory (default train_log/fashion_mnist); one that\n"
    "              holds checkpoints goes on from the latest\n"
    "  DATA_DIR    the IDX files (default /usr/share/datasets/fashion-mnist)\n"
    "  EPOCHS      the epochs to train (default 5)\n"
    "  --towers N  train on N replicated CPU towers, 1 to 256 (tensorpack's\n"
    "              SyncMultiGPUTrainerReplicated(N)). Each tower takes its own\n"
    "              batch of 128: a step trains on 128 x N images, an epoch has N\n"
    "              times fewer steps. Default: no towers, the simple trainer (a\n"
    "              batch of 128 per step)\n"
    "  --device D  train on device D (\"cuda:0\"; default the CPU): every tower\n"
    "              (one without --towers) computes there, on a copy of the\n"
    "              variables, which stay on the CPU with Adam's update\n"
    "  --dist      this process is one rank of a distributed job started by\n"
    "              tptrain-run -n N (or torchrun): each rank takes every N-th\n"
    "              batch, rank 0 alone writes LOGDIR\n"
    "  --bf16      mixed precision: the network's convolutions and matmuls in\n"
    "              bfloat16 (autocast), variables and updates in float32; several\n"
    "              times faster on a CPU with AVX-512 BF16 or AMX\n"
    "  -h, --help  this text\n";

/* --towers' value: a whole number from 1 to 256, else 0. */
static int parse_towers(const char *s) {
  int n = 0;
  for (const char *c = s; *c; ++c) {
    if (*c < '0' || *c > '9' || n > 256) return 0;
    n = n * 10 + (*c - '0');
  }
  return n <= 256 ? n : 0;
}

/* A bad command line: what is wrong, then the usage; exit status 2. */
static int usage_error(const char *what, const char *arg) {
  fprintf(stderr, "fashion_mnist: %s%s%s%s\n%s", what, arg ? " '" : "", arg ? arg : "", arg ? "'" : "", usage);
  return 2;
}

int main(int argc, char **argv) {
  /* The options go anywhere; the other arguments are LOGDIR DATA_DIR EPOCHS,
   * in that order (more are ignored). */
  const char *pos[3] = {NULL, NULL, NULL};
  int n_pos = 0, n_towers = 0; /* 0: no towers, the simple trainer */
  int dist = 0, bf16 = 0;
  const char *device = NULL; /* NULL: the CPU */
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *value;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(a, "--towers")) {
      if (++i == argc) return usage_error("--towers needs a value N", NULL);
      value = argv[i];
    } else if (!strncmp(a, "--towers=", 9)) {
      value = a + 9;
    } else if (!strcmp(a, "--device") || !strncmp(a, "--device=", 9)) {
      if (a[8] == '=') device = a + 9;
      else if (++i == argc) return usage_error("--device needs a device name D", NULL);
      else device = argv[i];
      if (!*device) return usage_error("--device needs a device name D", NULL);
      continue;
    } else if (!strcmp(a, "--dist")) {
      dist = 1;
      continue;
    } else if (!strcmp(a, "--bf16")) {
      bf16 = 1;
      continue;
    } else if (!strncmp(a, "--", 2)) {
      return usage_error("unknown option", a);
    } else {
      if (n_pos < 3) pos[n_pos++] = a;
      continue;
    }
    if (!(n_towers = parse_towers(value)))
      return usage_error("--towers wants a whole number from 1 to 256, not", value);
  }
  const char *logdir = n_pos > 0 ? pos[0] : "train_log/fashion_mnist";
  const char *dir = n_pos > 1 ? pos[1] : "/usr/share/datasets/fashion-mnist";
  const int64_t epochs = n_pos > 2 ? atoll(pos[2]) : 5;
  TPT_CHECK_OR_DIE(tpt_manual_seed(1));

  const int64_t sx[] = {-1, 1, 28, 28}, sy[] = {-1};
  tpt_input_spec spec[] = {{"image", TPT_DTYPE_F32, sx, 4}, {"label", TPT_DTYPE_I64, sy, 1}};
  tpt_model *model = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *adam = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&adam, "adam"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(adam, "learning_rate", 1e-3));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, adam));

  tpt_dataflow *train = pipeline(dir, "train", 1), *test = pipeline(dir, "test", 0);

  /* The learning rate: 1e-3, then times 0.6 after each epoch from the 2nd. */
  tpt_schedule_point lr[64] = {{0, 1e-3}};
  size_t n_lr = 1;
  for (int64_t e = 2; e <= epochs && n_lr < 64; ++e, ++n_lr) lr[n_lr] = (tpt_schedule_point){e, lr[n_lr - 1].value * 0.6};

  tpt_callback *cbs[4] = {NULL};
  const char *outputs[] = {"accuracy", "cost"};
  TPT_CHECK_OR_DIE(tpt_inference_runner_new(&cbs[0], model, test, outputs, 2));
  TPT_CHECK_OR_DIE(tpt_callback_scheduled_hyperparam(&cbs[1], adam, "learning_rate", lr, n_lr, 0));
  tpt_model_saver_options saver = TPT_MODEL_SAVER_OPTIONS_INIT;
  saver.every_k_steps = 200;
  TPT_CHECK_OR_DIE(tpt_callback_model_saver(&cbs[2], &saver));
  TPT_CHECK_OR_DIE(tpt_callback_max_saver(&cbs[3], "validation_accuracy", NULL, NULL));

  tpt_trainer_options opts = TPT_TRAINER_OPTIONS_INIT;
  opts.max_epoch = epochs;
  opts.logdir = logdir;
  opts.logdir_action = TPT_LOGDIR_DELETE; /* a run without checkpoints starts afresh */
  opts.auto_resume = 1;                   /* one with checkpoints goes on from the latest */
  opts.stop_on_signals = 1;               /* SIGTERM/Ctrl-C: stop at a step, save, resume later */
  if (bf16) opts.precision = TPT_PRECISION_BF16_MIXED; /* autocast; variables stay float32 */
  tpt_train_config config = TPT_TRAIN_CONFIG_INIT;
  config.options = &opts;
  config.model = model;
  config.dataflow = train; /* wrapped in a queue input */
  config.callbacks = cbs;
  config.n_callbacks = 4;
  tpt_towers_options towers = TPT_TOWERS_OPTIONS_INIT; /* replicated, every tower on the CPU */
  const char *devices[256];
  if (device && !n_towers) n_towers = 1; /* one tower on the device */
  for (int k = 0; device && k < n_towers; ++k) devices[k] = device;
  if (n_towers) { /* SyncMultiGPUTrainerReplicated(n_towers); without: SimpleTrainer */
    towers.n_towers = n_towers;
    towers.devices = device ? devices : NULL;
    config.towers = &towers;
    printf("training on %d replicated %s tower%s, a batch of %d each: %d images per step\n", n_towers,
           device ? device : "CPU", n_towers > 1 ? "s" : "", BATCH, n_towers * BATCH);
    fflush(stdout); /* before the trainer's own lines */
  }
  tpt_distributed_options distributed = TPT_DISTRIBUTED_OPTIONS_INIT; /* from tptrain-run's variables */
  if (dist) config.distributed = &distributed;
  tpt_trainer *trainer = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_from_config(&trainer, &config));
  TPT_CHECK_OR_DIE(tpt_trainer_run(trainer));
  int32_t rank = 0, world = 1;
  TPT_CHECK_OR_DIE(tpt_trainer_rank(&rank, &world, trainer));
  if (rank != 0) { /* the chief validates and reports */
    tpt_trainer_free(trainer);
    tpt_dataflow_free(train);
    tpt_dataflow_free(test);
    tpt_optimizer_free(adam);
    tpt_model_free(model);
    return 0;
  }

  double accuracy = 0;
  int64_t step = 0;
  tpt_status *st = tpt_trainer_scalar_latest(&accuracy, &step, trainer, "validation_accuracy");
  if (tpt_status_code(st) == TPT_ERR_NOT_FOUND) { /* resumed after the last epoch: nothing ran */
    tpt_status_free(st);
    printf("%s already holds a finished run of %lld epochs: nothing to train (give more EPOCHS, or another LOGDIR)\n",
           logdir, (long long)epochs);
    accuracy = 1;
  } else {
    TPT_CHECK_OR_DIE(st);
    printf("test accuracy: %.2f %% on the 10,000 Fashion-MNIST test images (step %lld)\n", 100 * accuracy,
           (long long)step);
  }

  tpt_trainer_free(trainer);
  tpt_dataflow_free(train);
  tpt_dataflow_free(test);
  tpt_optimizer_free(adam);
  tpt_model_free(model);
  return accuracy >= 0.9 ? 0 : 1;
}
