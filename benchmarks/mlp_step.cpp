// Benchmark mlp-step: steps per second of a tiny MLP regression (batch 64,
// 32 -> 64 -> 64 -> 1, ReLU, MSE, SGD with momentum) trained through the C API
// (tpt_trainer_set_model, a C tower function using tptrain's layers) against
// the same training written by hand with LibTorch in C++ (at::linear, manual
// autograd and torch::optim::SGD). One intra-op thread each. Prints
// "c-api <steps/s>" and "libtorch <steps/s>"; benchmarks/mlp_step.sh adds
// python3-torch and the ratios.
#include <ATen/ops/linear.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tptrain.h"

namespace {

constexpr int64_t kBatch = 64, kIn = 32, kHidden = 64, kRows = 64 * 16;

void check(tpt_status *st) {
  if (st) {
    std::fprintf(stderr, "%s\n", tpt_status_message(st));
    std::exit(1);
  }
}

tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t, void *) {
  tpt_layer_options relu = TPT_LAYER_OPTIONS_INIT;
  relu.activation = TPT_ACT_RELU;
  tpt_tensor *h1 = nullptr, *h2 = nullptr, *p = nullptr, *cost = nullptr;
  tpt_status *st = tpt_layer_fc(&h1, tw, "fc1", in[0], kHidden, &relu);
  if (!st) st = tpt_layer_fc(&h2, tw, "fc2", h1, kHidden, &relu);
  if (!st) st = tpt_layer_fc(&p, tw, "out", h2, 1, nullptr);
  if (!st) st = tpt_loss_mse(&cost, p, in[1]);
  if (!st) st = tpt_tower_set_cost(tw, cost);
  tpt_tensor_free(h1);
  tpt_tensor_free(h2);
  tpt_tensor_free(p);
  tpt_tensor_free(cost);
  return st;
}

double capi_steps_per_second(const at::Tensor &x, const at::Tensor &y, int64_t steps) {
  const int64_t sx[] = {-1, kIn}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *model = nullptr;
  check(tpt_model_new(&model, spec, 2, tower, nullptr, nullptr));
  tpt_optimizer *opt = nullptr;
  check(tpt_optimizer_new(&opt, "sgd"));
  check(tpt_optimizer_set(opt, "learning_rate", 0.01));
  check(tpt_optimizer_set(opt, "momentum", 0.9));
  check(tpt_model_set_optimizer(model, opt));
  tpt_optimizer_free(opt);
  tpt_tensor *tx = nullptr, *ty = nullptr;
  const int64_t shx[] = {kRows, kIn}, shy[] = {kRows, 1};
  check(tpt_tensor_from_data(&tx, x.data_ptr(), x.numel() * 4, shx, 2, nullptr));
  check(tpt_tensor_from_data(&ty, y.data_ptr(), y.numel() * 4, shy, 2, nullptr));
  const tpt_tensor *both[] = {tx, ty};
  tpt_input *input = nullptr;
  check(tpt_input_from_tensors(&input, both, 2, kBatch, 0, 0));
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = steps;
  o.max_epoch = 1;
  o.console = 0;
  tpt_trainer *t = nullptr;
  check(tpt_trainer_new(&t, &o));
  check(tpt_trainer_set_model(t, model, input));
  auto t0 = std::chrono::steady_clock::now();
  check(tpt_trainer_run(t));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tpt_trainer_free(t);
  tpt_model_free(model);
  tpt_tensor_free(tx);
  tpt_tensor_free(ty);
  return static_cast<double>(steps) / s;
}

double libtorch_steps_per_second(const at::Tensor &x, const at::Tensor &y, int64_t steps) {
  auto p = [](std::vector<int64_t> shape) { return (at::randn(shape) * 0.1).set_requires_grad(true); };
  std::vector<at::Tensor> params = {p({kHidden, kIn}), p({kHidden}), p({kHidden, kHidden}), p({kHidden}),
                                    p({1, kHidden}), p({1})};
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.01).momentum(0.9));
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    int64_t k = s % (kRows / kBatch);
    at::Tensor xb = x.narrow(0, k * kBatch, kBatch), yb = y.narrow(0, k * kBatch, kBatch);
    at::Tensor h = at::relu(at::linear(xb, params[0], params[1]));
    h = at::relu(at::linear(h, params[2], params[3]));
    at::Tensor loss = at::mse_loss(at::linear(h, params[4], params[5]), yb);
    double v = loss.item<double>();  // the C API reads the cost each step too
    (void)v;
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(steps) / s;
}

}  // namespace

int main(int argc, char **argv) {
  int64_t steps = argc > 1 ? std::atoll(argv[1]) : 3000;
  std::string only = argc > 2 ? argv[2] : "";  // "c-api" or "libtorch": profile one side
  check(tpt_set_num_threads(1));
  at::Tensor x = at::randn({kRows, kIn}), y = at::randn({kRows, 1});
  std::vector<double> capi, hand;
  for (int r = 0; r < 5; ++r) {  // interleaved, best of 5
    capi.push_back(only == "libtorch" ? 0 : capi_steps_per_second(x, y, steps));
    hand.push_back(only == "c-api" ? 0 : libtorch_steps_per_second(x, y, steps));
  }
  std::printf("c-api %.1f\n", *std::max_element(capi.begin(), capi.end()));
  std::printf("libtorch %.1f\n", *std::max_element(hand.begin(), hand.end()));
  return 0;
}
