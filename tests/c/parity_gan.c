/* Trains a small GAN with the GAN trainers through the C API, for the
 * parity test (tests/py/test_gan_parity.py), which writes the same
 * alternation by hand in python3-torch from the same initial values and
 * data and compares.
 *
 *   parity_gan DIR OPTIMIZER STEPS BATCH [D_PERIOD G_PERIOD]
 *
 * DIR holds real.bin [N, X], z.bin [N, Z], the eight initial values
 * (gen_fc0_W.bin [H, Z], gen_fc0_b.bin [H], gen_fc1_W.bin [X, H],
 * gen_fc1_b.bin [X], discrim_fc0_W.bin [H, X], discrim_fc0_b.bin [H],
 * discrim_fc1_W.bin [1, H], discrim_fc1_b.bin [1]) and dims.txt "N X Z H".
 * G: linear, relu, linear; D: linear, relu, linear (a logit).
 * d_loss = (sigmoid CE of D(real) against 1 + of D(G(z)) against 0) / 2,
 * g_loss = sigmoid CE of D(G(z)) against 1 (tensorpack's GANModelDesc).
 * OPTIMIZER "sgd" (lr 0.05, momentum 0.9) or "adam" (lr 0.01) is the
 * model's; each train op gets a copy. Without the periods: GANTrainer;
 * with them: SeparateGANTrainer. Batches are taken in order, one per hooked
 * run. Writes <name>.out for the eight variables. */
#include "parity_common.h"

static int64_t N, X, Z, H;

static const char *names[8] = {"gen/fc0/W",     "gen/fc0/b",     "gen/fc1/W",     "gen/fc1/b",
                               "discrim/fc0/W", "discrim/fc0/b", "discrim/fc1/W", "discrim/fc1/b"};
static const char *files[8] = {"gen_fc0_W",     "gen_fc0_b",     "gen_fc1_W",     "gen_fc1_b",
                               "discrim_fc0_W", "discrim_fc0_b", "discrim_fc1_W", "discrim_fc1_b"};

#define RET(call)               \
  do {                          \
    tpt_status *st_ = (call);   \
    if (st_) return st_;        \
  } while (0)

/* The four variables of an MLP: names[first .. first + 3]. */
static tpt_status *mlp_vars(tpt_tensor *v[4], tpt_tower *tw, int first, int64_t in, int64_t out_dim) {
  const int64_t s0[] = {H, in}, sb0[] = {H}, s1[] = {out_dim, H}, sb1[] = {out_dim};
  RET(tpt_tower_variable(&v[0], tw, names[first], s0, 2, NULL));
  RET(tpt_tower_variable(&v[1], tw, names[first + 1], sb0, 1, NULL));
  RET(tpt_tower_variable(&v[2], tw, names[first + 2], s1, 2, NULL));
  return tpt_tower_variable(&v[3], tw, names[first + 3], sb1, 1, NULL);
}

/* linear(relu(linear(x, W0, b0)), W1, b1) */
static tpt_status *mlp(tpt_tensor **out, tpt_tensor *const v[4], const tpt_tensor *x) {
  tpt_tensor *h, *a;
  tpt_arg l0[] = {parity_arg(x), parity_arg(v[0]), parity_arg(v[1])};
  RET(parity_op1(&h, "aten::linear", l0, 3));
  tpt_arg r[] = {parity_arg(h)};
  RET(parity_op1(&a, "aten::relu", r, 1));
  tpt_arg l1[] = {parity_arg(a), parity_arg(v[2]), parity_arg(v[3])};
  return parity_op1(out, "aten::linear", l1, 3);
}

/* inputs: real [B, X], z [B, Z], ones [B, 1], zeros [B, 1] */
static tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t n_in, void *ud) {
  (void)n_in, (void)ud;
  tpt_tensor *g[4], *d[4], *fake, *d_real, *d_fake, *a, *b, *d_loss, *g_loss;
  RET(mlp_vars(g, tw, 0, Z, X));
  RET(mlp_vars(d, tw, 4, X, 1));
  RET(mlp(&fake, g, in[1]));
  RET(mlp(&d_real, d, in[0]));
  RET(mlp(&d_fake, d, fake));
  RET(tpt_loss_sigmoid_cross_entropy(&a, d_real, in[2]));
  RET(tpt_loss_sigmoid_cross_entropy(&b, d_fake, in[3]));
  RET(tpt_op_add(&d_loss, a, b));
  RET(tpt_op_mul_scalar(&d_loss, d_loss, 0.5));
  RET(tpt_loss_sigmoid_cross_entropy(&g_loss, d_fake, in[2]));
  RET(tpt_tower_set_output(tw, "d_loss", d_loss));
  return tpt_tower_set_output(tw, "g_loss", g_loss);
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 7) {
    fprintf(stderr, "usage: parity_gan DIR OPTIMIZER STEPS BATCH [D_PERIOD G_PERIOD]\n");
    return 2;
  }
  const char *dir = argv[1], *kind = argv[2];
  const long steps = atol(argv[3]);
  const int64_t batch = atoll(argv[4]);
  char path[1024];
  snprintf(path, sizeof path, "%s/dims.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f || fscanf(f, "%lld %lld %lld %lld", (long long *)&N, (long long *)&X, (long long *)&Z, (long long *)&H) != 4)
    return 3;
  fclose(f);
  CHECK(tpt_set_num_threads(1));

  const int64_t sr[] = {N, X}, sz[] = {N, Z}, s1[] = {N, 1};
  tpt_tensor *real = parity_load(dir, "real.bin", sr, 2, TPT_DTYPE_F32), *z = parity_load(dir, "z.bin", sz, 2, TPT_DTYPE_F32);
  float *ones = malloc((size_t)N * sizeof(float)), *zeros = calloc((size_t)N, sizeof(float));
  for (int64_t i = 0; i < N; ++i) ones[i] = 1;
  tpt_tensor *t1 = NULL, *t0 = NULL;
  CHECK(tpt_tensor_from_data(&t1, ones, (size_t)N * sizeof(float), s1, 2, NULL));
  CHECK(tpt_tensor_from_data(&t0, zeros, (size_t)N * sizeof(float), s1, 2, NULL));
  const int64_t in_r[] = {-1, X}, in_z[] = {-1, Z}, in_1[] = {-1, 1};
  tpt_input_spec spec[] = {{"real", TPT_DTYPE_F32, in_r, 2}, {"z", TPT_DTYPE_F32, in_z, 2},
                           {"ones", TPT_DTYPE_F32, in_1, 2}, {"zeros", TPT_DTYPE_F32, in_1, 2}};
  tpt_model *model = NULL;
  CHECK(tpt_model_new(&model, spec, 4, tower, NULL, NULL));
  CHECK(tpt_model_build(model));
  const int64_t shapes[8][2] = {{H, Z}, {H, 0}, {X, H}, {X, 0}, {H, X}, {H, 0}, {1, H}, {1, 0}};
  for (int i = 0; i < 8; ++i) {
    char file[64];
    snprintf(file, sizeof file, "%s.bin", files[i]);
    tpt_tensor *init = parity_load(dir, file, shapes[i], shapes[i][1] ? 2 : 1, TPT_DTYPE_F32);
    CHECK(tpt_model_set_variable(model, names[i], init));
    tpt_tensor_free(init);
  }
  parity_set_optimizer(model, kind);

  const tpt_tensor *data[] = {real, z, t1, t0};
  tpt_input *input = NULL;
  CHECK(tpt_input_from_tensors(&input, data, 4, batch, 0, 0));
  tpt_trainer *trainer = parity_trainer(steps);
  tpt_gan_options g = TPT_GAN_OPTIONS_INIT;
  if (argc == 7) {
    g.separate = 1;
    g.d_period = atoll(argv[5]);
    g.g_period = atoll(argv[6]);
  }
  CHECK(tpt_trainer_set_gan(trainer, model, input, &g));
  CHECK(tpt_trainer_run(trainer));
  for (int i = 0; i < 8; ++i) {
    tpt_tensor *v = NULL;
    CHECK(tpt_model_variable(&v, model, names[i]));
    char file[64];
    snprintf(file, sizeof file, "%s.out", files[i]);
    parity_save(dir, file, v);
    tpt_tensor_free(v);
  }
  tpt_trainer_free(trainer);
  tpt_model_free(model);
  tpt_tensor_free(real);
  tpt_tensor_free(z);
  tpt_tensor_free(t1);
  tpt_tensor_free(t0);
  free(ones);
  free(zeros);
  return 0;
}
