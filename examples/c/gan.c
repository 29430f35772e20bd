/* A DCGAN on Fashion-MNIST with tensorpack's GANTrainer, trained by tptrain.
 *
 * Data: Debian's dataset-fashion-mnist (IDX files under
 * /usr/share/datasets/fashion-mnist): the 60,000 training images in a new
 * order each epoch, scaled to [-1, 1], each with a noise vector z drawn
 * uniformly from [-1, 1]^64 by the pipeline (seeded, and saved in
 * checkpoints like the rest of the pipeline), in batches of 64.
 *
 * The tower function builds tensorpack's GANModelDesc: a generator under
 * the variable scope "gen/" and a discriminator under "discrim/", and
 * publishes the outputs "g_loss" and "d_loss". tpt_trainer_set_gan makes
 * the two train ops from them (each with a copy of the model's Adam) and the
 * GANTrainer: every step updates the generator, then the discriminator,
 * from one forward pass.
 *
 *   generator:     z -> fc 7x7x128 -> BN, ReLU -> deconv 4x4/2 64 (14x14)
 *                  -> BN, ReLU -> deconv 4x4/2 1 (28x28) -> tanh
 *   discriminator: image -> conv 4x4/2 64 (14x14), leaky ReLU 0.2
 *                  -> conv 4x4/2 128 (7x7) -> BN, leaky ReLU -> fc 1 (a logit)
 *   weights initialised normal with std 0.05, biases zero
 *   d_loss = (sigmoid CE of D(real) against 1 + of D(G(z)) against 0) / 2
 *   g_loss = sigmoid CE of D(G(z)) against 1
 *   Adam, learning rate 2e-4, beta1 0.5 (tensorpack's DCGAN)
 *
 * After every epoch a callback draws 64 samples from the same fixed noise
 * (the generator as an inference tower: BatchNorm's moving averages), tiles
 * them into an 8 x 8 grid (tpt_image_grid), writes it as
 * LOGDIR/samples-epochN.png and puts it as the image "samples" (TensorBoard's
 * event file). A ModelSaver checkpoints both nets and both optimizers every
 * epoch; run it again on the same LOGDIR and it goes on where it stopped.
 *
 * --towers N trains on N replicated CPU towers (tensorpack's
 * MultiGPUGANTrainer: each tower its own batch of 64, each op's cost averaged
 * over the towers). --steps S makes an epoch S steps (default: one pass).
 *
 *   build/examples/gan [--towers N] [--steps S] [LOGDIR] [DATA_DIR] [EPOCHS]
 *     (defaults: train_log/gan, /usr/share/datasets/fashion-mnist, 2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tptrain_util.h"

enum { BATCH = 64, Z = 64, SAMPLES = 64, NF = 64 }; /* NF: the nets' width */

/* softplus(sign * x), averaged: the sigmoid cross-entropy of logits x
 * against the target 1 (sign -1) or 0 (sign +1). */
static tpt_status *sigmoid_ce(tpt_tensor **out, const tpt_tensor *logits, double sign) {
  tpt_tensor *x, *sp;
  size_t n = 0;
  TPT_RETURN_IF_ERROR(tpt_op_mul_scalar(&x, logits, sign));
  tpt_arg a = {TPT_ARG_TENSOR, NULL, x, 0, 0, NULL, 0};
  TPT_RETURN_IF_ERROR(tpt_op_call(&sp, 1, &n, "softplus", NULL, &a, 1));
  tpt_arg m = {TPT_ARG_TENSOR, NULL, sp, 0, 0, NULL, 0};
  return tpt_op_call(out, 1, &n, "mean", NULL, &m, 1);
}

/* z [N, Z] -> images [N, 1, 28, 28] in [-1, 1]; inside the scope "gen". */
static tpt_status *generator_layers(tpt_tensor **out, tpt_tower *tw, const tpt_tensor *z) {
  tpt_layer_options fc = TPT_LAYER_OPTIONS_INIT, up = TPT_LAYER_OPTIONS_INIT;
  fc.kernel_init = up.kernel_init = TPT_INIT_NORMAL; /* std 0.05 */
  fc.use_bias = up.use_bias = 0;                     /* BatchNorm follows */
  up.kernel[0] = up.kernel[1] = 4;
  up.stride[0] = up.stride[1] = 2;
  tpt_tensor *x;
  const int64_t shape[] = {-1, 2 * NF, 7, 7};
  TPT_RETURN_IF_ERROR(tpt_layer_fc(&x, tw, "fc0", z, 7 * 7 * 2 * NF, &fc));
  TPT_RETURN_IF_ERROR(tpt_tensor_reshape(&x, x, shape, 4));
  TPT_RETURN_IF_ERROR(tpt_layer_batch_norm(&x, tw, "bn0", x, 0.9, 1e-5));
  TPT_RETURN_IF_ERROR(tpt_layer_activation(&x, x, TPT_ACT_RELU, 0));
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d_transpose(&x, tw, "deconv1", x, NF, &up));
  TPT_RETURN_IF_ERROR(tpt_layer_batch_norm(&x, tw, "bn1", x, 0.9, 1e-5));
  TPT_RETURN_IF_ERROR(tpt_layer_activation(&x, x, TPT_ACT_RELU, 0));
  up.use_bias = 1;
  up.activation = TPT_ACT_TANH;
  return tpt_layer_conv2d_transpose(out, tw, "deconv2", x, 1, &up);
}

/* images [N, 1, 28, 28] -> logits [N, 1]; inside the scope "discrim". */
static tpt_status *discriminator_layers(tpt_tensor **out, tpt_tower *tw, const tpt_tensor *image) {
  tpt_layer_options conv = TPT_LAYER_OPTIONS_INIT, fc = TPT_LAYER_OPTIONS_INIT;
  conv.kernel_init = fc.kernel_init = TPT_INIT_NORMAL; /* std 0.05 */
  conv.kernel[0] = conv.kernel[1] = 4;
  conv.stride[0] = conv.stride[1] = 2;
  conv.activation = TPT_ACT_LEAKY_RELU; /* slope 0.2 */
  tpt_tensor *x;
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv0", image, NF, &conv));
  conv.activation = TPT_ACT_NONE;
  conv.use_bias = 0;
  TPT_RETURN_IF_ERROR(tpt_layer_conv2d(&x, tw, "conv1", x, 2 * NF, &conv));
  TPT_RETURN_IF_ERROR(tpt_layer_batch_norm(&x, tw, "bn1", x, 0.9, 1e-5));
  TPT_RETURN_IF_ERROR(tpt_layer_activation(&x, x, TPT_ACT_LEAKY_RELU, 0.2));
  return tpt_layer_fc(out, tw, "fc", x, 1, &fc);
}

/* The two nets under their variable scopes (tensorpack's
 * tf.variable_scope), "gen/..." and "discrim/...": the train ops select
 * their variables by these prefixes. The discriminator is applied twice, to
 * real and to generated images, under a reuse scope (tensorpack's
 * auto_reuse_variable_scope): both applications share its variables. */
static tpt_status *generator(tpt_tensor **out, tpt_tower *tw, const tpt_tensor *z) {
  TPT_RETURN_IF_ERROR(tpt_tower_push_scope(tw, "gen"));
  tpt_status *st = generator_layers(out, tw, z);
  tpt_status *popped = tpt_tower_pop_scope(tw);
  if (st) tpt_status_free(popped);
  return st ? st : popped;
}

static tpt_status *discriminator(tpt_tensor **out, tpt_tower *tw, const tpt_tensor *image) {
  TPT_RETURN_IF_ERROR(tpt_tower_push_reuse_scope(tw, "discrim")); /* applied twice, one set of variables */
  tpt_status *st = discriminator_layers(out, tw, image);
  tpt_status *popped = tpt_tower_pop_scope(tw);
  if (st) tpt_status_free(popped);
  return st ? st : popped;
}

/* The tower function: inputs image [N, 1, 28, 28] in [-1, 1], z [N, Z]. */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n, void *user_data) {
  (void)n, (void)user_data;
  tpt_tensor *fake, *real_logit, *fake_logit, *d_real, *d_fake, *d_loss, *g_loss;
  TPT_RETURN_IF_ERROR(generator(&fake, tw, in[1]));
  TPT_RETURN_IF_ERROR(discriminator(&real_logit, tw, in[0]));
  TPT_RETURN_IF_ERROR(discriminator(&fake_logit, tw, fake));
  TPT_RETURN_IF_ERROR(sigmoid_ce(&d_real, real_logit, -1)); /* against 1 */
  TPT_RETURN_IF_ERROR(sigmoid_ce(&d_fake, fake_logit, +1)); /* against 0 */
  TPT_RETURN_IF_ERROR(tpt_op_add(&d_loss, d_real, d_fake));
  TPT_RETURN_IF_ERROR(tpt_op_mul_scalar(&d_loss, d_loss, 0.5));
  TPT_RETURN_IF_ERROR(sigmoid_ce(&g_loss, fake_logit, -1));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "d_loss", d_loss));
  TPT_RETURN_IF_ERROR(tpt_tower_set_output(tw, "g_loss", g_loss));
  return tpt_tower_set_output(tw, "gen", fake);
}

/* The training pipeline: (image in [-1, 1], z) batched by BATCH. */
static tpt_dataflow *pipeline(const char *dir) {
  tpt_dataflow *mnist = NULL, *norm = NULL, *noise = NULL, *joined = NULL, *picked = NULL, *batched = NULL;
  TPT_CHECK_OR_DIE(tpt_dataflow_mnist(&mnist, dir, "train", 1));
  const double mean = 0.5, std = 0.5;
  tpt_augmentor a = TPT_AUGMENTOR_INIT;
  a.kind = TPT_AUGMENT_NORMALIZE;
  a.mean = &mean, a.std = &std, a.n_channels = 1;
  TPT_CHECK_OR_DIE(tpt_dataflow_augment(&norm, mnist, 0, &a, 1, 0));
  const int64_t zshape[] = {Z};
  tpt_input_spec zspec = {"z", TPT_DTYPE_F32, zshape, 1};
  TPT_CHECK_OR_DIE(tpt_dataflow_fake(&noise, &zspec, 1, 60000, 1, -1.0, 1.0));
  tpt_dataflow *both[] = {norm, noise};
  TPT_CHECK_OR_DIE(tpt_dataflow_join(&joined, both, 2)); /* (image, label, z) */
  const size_t keep[] = {0, 2};
  TPT_CHECK_OR_DIE(tpt_dataflow_select(&picked, joined, keep, 2));
  TPT_CHECK_OR_DIE(tpt_dataflow_batch(&batched, picked, BATCH, 0));
  tpt_dataflow *made[] = {mnist, norm, noise, joined, picked};
  for (size_t i = 0; i < 5; ++i) tpt_dataflow_free(made[i]);
  return batched;
}

/* The sampler callback: after every epoch, the generator on fixed noise. */
typedef struct sampler {
  tpt_model *model;
  float z[SAMPLES * Z];
  float blank[SAMPLES * 28 * 28]; /* the discriminator's input, unused here */
} sampler;

static tpt_status *draw_samples(tpt_trainer *trainer, tpt_event event, const tpt_record *record, void *user_data) {
  (void)event, (void)record;
  sampler *s = user_data;
  const int64_t zshape[] = {SAMPLES, Z}, ishape[] = {SAMPLES, 1, 28, 28};
  tpt_tensor *z, *blank, *images, *grid; /* the callback's: freed when it returns */
  TPT_RETURN_IF_ERROR(tptu_tensor_f32(&z, s->z, zshape, 2));
  TPT_RETURN_IF_ERROR(tptu_tensor_f32(&blank, s->blank, ishape, 4));
  const tpt_tensor *inputs[] = {blank, z};
  const char *names[] = {"gen"};
  TPT_RETURN_IF_ERROR(tpt_model_infer(&images, s->model, inputs, 2, names, 1));
  tpt_image_grid_options g = TPT_IMAGE_GRID_OPTIONS_INIT; /* 8 columns, padding 2 */
  g.low = -1, g.high = 1;
  TPT_RETURN_IF_ERROR(tpt_image_grid(&grid, images, &g));
  TPT_RETURN_IF_ERROR(tpt_trainer_put_image(trainer, "samples", grid));
  const char *logdir = NULL;
  int64_t epoch = 0;
  TPT_RETURN_IF_ERROR(tpt_trainer_logdir(&logdir, trainer));
  TPT_RETURN_IF_ERROR(tpt_trainer_epoch_num(&epoch, trainer));
  if (!logdir) return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/samples-epoch%lld.png", logdir, (long long)epoch);
  return tpt_image_write_png(grid, path);
}

static const char usage[] =
    "usage: gan [--towers N] [--steps S] [LOGDIR] [DATA_DIR] [EPOCHS]\n"
    "  LOGDIR      the log directory (default train_log/gan): samples-epochN.png,\n"
    "              checkpoints, stats.json; one that holds checkpoints goes on\n"
    "              from the latest\n"
    "  DATA_DIR    the IDX files (default /usr/share/datasets/fashion-mnist)\n"
    "  EPOCHS      the epochs to train (default 2)\n"
    "  --towers N  train on N replicated CPU towers, 1 to 256 (tensorpack's\n"
    "              MultiGPUGANTrainer(N)); each takes its own batch of 64\n"
    "  --steps S   S steps per epoch (default: one pass over the 60,000 images)\n"
    "  -h, --help  this text\n";

/* A whole number from 1 to max, else 0. */
static long parse_count(const char *s, long max) {
  long n = 0;
  if (!*s) return 0;
  for (const char *c = s; *c; ++c) {
    if (*c < '0' || *c > '9' || n > max) return 0;
    n = n * 10 + (*c - '0');
  }
  return n <= max ? n : 0;
}

static int usage_error(const char *what, const char *arg) {
  fprintf(stderr, "gan: %s%s%s%s\n%s", what, arg ? " '" : "", arg ? arg : "", arg ? "'" : "", usage);
  return 2;
}

int main(int argc, char **argv) {
  const char *pos[3] = {NULL, NULL, NULL};
  int n_pos = 0;
  long n_towers = 0, steps = 0; /* 0: no towers; one pass per epoch */
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(a, "--towers") || !strcmp(a, "--steps")) {
      if (i + 1 == argc) return usage_error("a value is missing after", a);
      long *into = a[2] == 't' ? &n_towers : &steps;
      if (!(*into = parse_count(argv[++i], a[2] == 't' ? 256 : 1000000000L)))
        return usage_error("not a whole number in range:", argv[i]);
    } else if (!strncmp(a, "--", 2)) {
      return usage_error("unknown option", a);
    } else if (n_pos < 3) {
      pos[n_pos++] = a;
    }
  }
  const char *logdir = n_pos > 0 ? pos[0] : "train_log/gan";
  const char *dir = n_pos > 1 ? pos[1] : "/usr/share/datasets/fashion-mnist";
  const int64_t epochs = n_pos > 2 ? atoll(pos[2]) : 2;
  TPT_CHECK_OR_DIE(tpt_manual_seed(1));

  const int64_t sx[] = {-1, 1, 28, 28}, sz[] = {-1, Z};
  tpt_input_spec spec[] = {{"image", TPT_DTYPE_F32, sx, 4}, {"z", TPT_DTYPE_F32, sz, 2}};
  tpt_model *model = NULL;
  TPT_CHECK_OR_DIE(tpt_model_new(&model, spec, 2, tower, NULL, NULL));
  tpt_optimizer *adam = NULL;
  TPT_CHECK_OR_DIE(tpt_optimizer_new(&adam, "adam"));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(adam, "learning_rate", 2e-4));
  TPT_CHECK_OR_DIE(tpt_optimizer_set(adam, "beta1", 0.5));
  TPT_CHECK_OR_DIE(tpt_model_set_optimizer(model, adam)); /* each train op gets a copy */

  tpt_trainer_options opts = TPT_TRAINER_OPTIONS_INIT;
  opts.max_epoch = epochs;
  opts.logdir = logdir;
  opts.logdir_action = TPT_LOGDIR_DELETE; /* a run without checkpoints starts afresh */
  opts.auto_resume = 1;                   /* one with checkpoints goes on from the latest */
  opts.stop_on_signals = 1;               /* SIGTERM/Ctrl-C: stop at a step, save, resume later */
  if (steps) opts.steps_per_epoch = steps;
  tpt_trainer *trainer = NULL;
  TPT_CHECK_OR_DIE(tpt_trainer_new(&trainer, &opts));

  tpt_input *input = NULL;
  tpt_dataflow *train = pipeline(dir);
  TPT_CHECK_OR_DIE(tpt_input_from_dataflow(&input, train, NULL)); /* a prefetching queue */
  tpt_dataflow_free(train);
  tpt_gan_options gan = TPT_GAN_OPTIONS_INIT; /* GANTrainer: g_op then d_op every step */
  tpt_towers_options towers = TPT_TOWERS_OPTIONS_INIT;
  if (n_towers) {
    towers.n_towers = (int32_t)n_towers;
    gan.towers = &towers;
  }
  TPT_CHECK_OR_DIE(tpt_trainer_set_gan(trainer, model, input, &gan));

  /* The samples: 64 fixed noise vectors, the same every epoch. */
  sampler *s = calloc(1, sizeof *s);
  if (!s) return 1;
  s->model = model;
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < SAMPLES * Z; ++i) { /* xorshift64: uniform in [-1, 1) */
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    s->z[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2 - 1);
  }
  tpt_callback_desc desc = TPT_CALLBACK_DESC_INIT; /* chief only */
  desc.events = TPT_EVENT_TRIGGER;                 /* after every epoch */
  desc.name = "Samples";
  desc.fn = draw_samples;
  desc.user_data = s;
  desc.destroy = free;
  tpt_callback *cb = NULL;
  TPT_CHECK_OR_DIE(tpt_callback_new(&cb, &desc));
  TPT_CHECK_OR_DIE(tpt_trainer_add_callback(trainer, cb));
  TPT_CHECK_OR_DIE(tpt_callback_model_saver(&cb, NULL)); /* every epoch: both nets, both optimizers */
  TPT_CHECK_OR_DIE(tpt_trainer_add_callback(trainer, cb));

  TPT_CHECK_OR_DIE(tpt_trainer_run(trainer));
  double g_loss = 0, d_loss = 0;
  int64_t step = 0;
  tpt_status *st = tpt_trainer_scalar_latest(&g_loss, &step, trainer, "g_loss");
  if (tpt_status_code(st) == TPT_ERR_NOT_FOUND) {
    tpt_status_free(st);
    printf("%s already holds a finished run of %lld epochs: nothing to train (give more EPOCHS, or another LOGDIR)\n",
           logdir, (long long)epochs);
  } else {
    TPT_CHECK_OR_DIE(st);
    TPT_CHECK_OR_DIE(tpt_trainer_scalar_latest(&d_loss, NULL, trainer, "d_loss"));
    printf("after %lld steps: g_loss %.4f, d_loss %.4f; samples in %s/samples-epoch%lld.png\n", (long long)step,
           g_loss, d_loss, logdir, (long long)epochs);
  }
  tpt_trainer_free(trainer);
  tpt_optimizer_free(adam);
  tpt_model_free(model);
  return 0;
}
