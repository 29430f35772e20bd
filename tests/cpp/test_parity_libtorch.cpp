// Parity of training through the C API with a hand-written LibTorch loop:
// the same MLP, data and initial values; the reference does its own forward
// (at::linear, relu, mse_loss), autograd, and SGD-with-momentum / Adam updates
// written out here from their formulas (no torch::optim). Losses and final
// parameters agree within 1e-5.
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <cstring>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include "capi/handles.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"

namespace {

constexpr int64_t N = 128, D = 6, H = 10, B = 16, STEPS = 200;

tpt_arg T(const tpt_tensor *t) {
  tpt_arg a;
  std::memset(&a, 0, sizeof a);
  a.kind = TPT_ARG_TENSOR;
  a.tensor = t;
  return a;
}

tpt_status *op1(tpt_tensor **out, const char *op, const tpt_arg *args, size_t n) {
  size_t got = 0;
  return tpt_op_call(out, 1, &got, op, nullptr, args, n);
}

// The MLP's cost (the caller frees it).
tpt_status *mlp(tpt_tower *tw, const tpt_tensor *const *in, tpt_tensor **cost) {
  const int64_t sw1[] = {H, D}, sb1[] = {H}, sw2[] = {1, H}, sb2[] = {1};
  tpt_tensor *w1 = nullptr, *b1 = nullptr, *w2 = nullptr, *b2 = nullptr, *h = nullptr, *a = nullptr, *p = nullptr,
             *c = nullptr;
  tpt_status *st = tpt_tower_variable(&w1, tw, "w1", sw1, 2, nullptr);
  if (!st) st = tpt_tower_variable(&b1, tw, "b1", sb1, 1, nullptr);
  if (!st) st = tpt_tower_variable(&w2, tw, "w2", sw2, 2, nullptr);
  if (!st) st = tpt_tower_variable(&b2, tw, "b2", sb2, 1, nullptr);
  tpt_arg l1[] = {T(in[0]), T(w1), T(b1)};
  if (!st) st = op1(&h, "aten::linear", l1, 3);
  tpt_arg r[] = {T(h)};
  if (!st) st = op1(&a, "aten::relu", r, 1);
  tpt_arg l2[] = {T(a), T(w2), T(b2)};
  if (!st) st = op1(&p, "aten::linear", l2, 3);
  tpt_arg m[] = {T(p), T(in[1])};
  if (!st) st = op1(&c, "aten::mse_loss", m, 2);
  for (tpt_tensor *t : {w1, b1, w2, b2, h, a, p}) tpt_tensor_free(t);
  *cost = c;
  return st;
}

tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t, void *) {
  tpt_tensor *c = nullptr;
  tpt_status *st = mlp(tw, in, &c);
  if (!st) st = tpt_tower_set_cost(tw, c);
  tpt_tensor_free(c);
  return st;
}

struct Run {
  std::vector<double> losses;
  std::vector<at::Tensor> params;
};

const char *const kNames[] = {"w1", "b1", "w2", "b2"};

// The MLP of tower function `fn`, built, with the initial values `init` and
// an optimizer of `kind` ("sgd": lr 0.05, momentum 0.9; "adam": lr 0.01)
// accumulating `accumulate` steps.
tpt_model *new_mlp(tpt_tower_fn fn, const std::vector<at::Tensor> &init, const std::string &kind,
                   int64_t accumulate = 1) {
  const int64_t sx[] = {-1, D}, sy[] = {-1, 1};
  tpt_input_spec spec[] = {{"x", TPT_DTYPE_F32, sx, 2}, {"y", TPT_DTYPE_F32, sy, 2}};
  tpt_model *model = nullptr;
  EXPECT_EQ(tpt_model_new(&model, spec, 2, fn, nullptr, nullptr), nullptr);
  EXPECT_EQ(tpt_model_build(model), nullptr);
  for (int i = 0; i < 4; ++i) {
    tpt_tensor v(init[static_cast<size_t>(i)]);
    EXPECT_EQ(tpt_model_set_variable(model, kNames[i], &v), nullptr);
  }
  tpt_optimizer *opt = nullptr;
  EXPECT_EQ(tpt_optimizer_new(&opt, kind.c_str()), nullptr);
  EXPECT_EQ(tpt_optimizer_set(opt, "learning_rate", kind == "sgd" ? 0.05 : 0.01), nullptr);
  if (kind == "sgd") {
    EXPECT_EQ(tpt_optimizer_set(opt, "momentum", 0.9), nullptr);
  }
  EXPECT_EQ(tpt_optimizer_set(opt, "accumulate_steps", static_cast<double>(accumulate)), nullptr);
  EXPECT_EQ(tpt_model_set_optimizer(model, opt), nullptr);
  tpt_optimizer_free(opt);
  return model;
}

// The model's final values, and frees it.
std::vector<at::Tensor> final_values(tpt_model *model) {
  std::vector<at::Tensor> out;
  for (const char *name : kNames) {
    tpt_tensor *v = nullptr;
    EXPECT_EQ(tpt_model_variable(&v, model, name), nullptr);
    out.push_back(v->value.detach().clone());
    tpt_tensor_free(v);
  }
  tpt_model_free(model);
  return out;
}

Run through_c_api(const at::Tensor &x, const at::Tensor &y, const std::vector<at::Tensor> &init,
                  const std::string &kind) {
  Run run;
  tpt_model *model = new_mlp(tower, init, kind);
  tpt_tensor tx(x), ty(y);
  const tpt_tensor *both[] = {&tx, &ty};
  tpt_input *input = nullptr;
  EXPECT_EQ(tpt_input_from_tensors(&input, both, 2, B, 0, 0), nullptr);
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = STEPS;
  o.max_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  tpt_trainer *t = nullptr;
  EXPECT_EQ(tpt_trainer_new(&t, &o), nullptr);
  EXPECT_EQ(tpt_trainer_set_model(t, model, input), nullptr);
  // Each step's cost, read from the step's output (the monitors get only its
  // moving average once per epoch).
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_AFTER_RUN;
  d.fn = [](tpt_trainer *tr, tpt_event, const tpt_record *, void *p) -> tpt_status * {
    double v = 0;
    if (tpt_status *st = tpt_trainer_output_scalar(&v, tr, "cost")) return st;
    static_cast<std::vector<double> *>(p)->push_back(v);
    return nullptr;
  };
  d.user_data = &run.losses;
  tpt_callback *cb = nullptr;
  EXPECT_EQ(tpt_callback_new(&cb, &d), nullptr);
  EXPECT_EQ(tpt_trainer_add_callback(t, cb), nullptr);
  EXPECT_EQ(tpt_trainer_run(t), nullptr);
  tpt_trainer_free(t);
  run.params = final_values(model);
  return run;
}

Run by_hand(const at::Tensor &x, const at::Tensor &y, const std::vector<at::Tensor> &init, const std::string &kind) {
  Run run;
  std::vector<at::Tensor> p;
  for (const auto &t : init) p.push_back(t.clone().set_requires_grad(true));
  std::vector<at::Tensor> m1, m2;
  for (const auto &t : p) {
    m1.push_back(at::zeros_like(t));
    m2.push_back(at::zeros_like(t));
  }
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (int64_t s = 0; s < STEPS; ++s) {
    int64_t k = s % (N / B);
    at::Tensor xb = x.narrow(0, k * B, B), yb = y.narrow(0, k * B, B);
    at::Tensor loss = at::mse_loss(at::linear(at::relu(at::linear(xb, p[0], p[1])), p[2], p[3]), yb);
    run.losses.push_back(loss.item<double>());
    loss.backward();
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < p.size(); ++i) {
      at::Tensor g = p[i].grad();
      if (kind == "sgd") {  // v = momentum * v + g (v = g at the first step); p -= lr * v
        m1[i] = s == 0 ? g.clone() : m1[i] * 0.9 + g;
        p[i].sub_(m1[i] * 0.05);
      } else {  // Adam with bias correction
        m1[i] = m1[i] * b1 + g * (1 - b1);
        m2[i] = m2[i] * b2 + g * g * (1 - b2);
        double c1 = 1 - std::pow(b1, s + 1), c2 = 1 - std::pow(b2, s + 1);
        p[i].sub_(0.01 * (m1[i] / c1) / ((m2[i] / c2).sqrt() + eps));
      }
      p[i].grad().zero_();
    }
  }
  for (const auto &t : p) run.params.push_back(t.detach());
  return run;
}

void compare(const std::string &kind) {
  at::manual_seed(11);
  at::Tensor x = at::randn({N, D});
  at::Tensor y = x.narrow(1, 0, 1) * 2 - x.narrow(1, 1, 1) + at::randn({N, 1}) * 0.1;
  std::vector<at::Tensor> init = {at::randn({H, D}) * 0.3, at::randn({H}) * 0.1, at::randn({1, H}) * 0.3,
                                  at::randn({1}) * 0.1};
  Run a = through_c_api(x, y, init, kind), b = by_hand(x, y, init, kind);
  ASSERT_EQ(a.losses.size(), b.losses.size());
  double dl = 0, dp = 0;
  for (size_t i = 0; i < a.losses.size(); ++i) dl = std::max(dl, std::abs(a.losses[i] - b.losses[i]));
  for (size_t i = 0; i < a.params.size(); ++i) dp = std::max(dp, (a.params[i] - b.params[i]).abs().max().item<double>());
  EXPECT_LE(dl, 1e-5) << kind;
  EXPECT_LE(dp, 1e-5) << kind;
  EXPECT_LT(b.losses.back(), b.losses.front()) << "the reference did not train";
  std::printf("# %s: max |loss diff| %.3g, max |param diff| %.3g\n", kind.c_str(), dl, dp);
}

TEST(ParityLibTorch, MlpSgdMomentumMatchesHandWrittenLoop) { compare("sgd"); }
TEST(ParityLibTorch, MlpAdamMatchesHandWrittenLoop) { compare("adam"); }

}  // namespace

// ---- Dynamic loss scaling (tpt_loss_scaling) against the same loop by hand.
//
// The tower multiplies its cost by 1e36 at chosen calls, so that the scaled
// gradients overflow float32 there (the cost itself stays finite). With loss
// scaling on, those updates are skipped: the result must equal the
// hand-written Adam loop that leaves those updates out (no step of Adam's
// counter, no change of its moments), fed the unscaled gradients, and the
// scale after each step must follow GradScaler's rules (growth_interval 3).
// Scales are powers of two, so the scaled backward pass and the unscaling
// are exact: the parameters agree within 1e-5 as the unscaled loops above
// (LibTorch's Adam and the formula here round differently).

namespace scaled {

std::set<std::pair<int, int64_t>> overflow_at;  // (tower, call): the cost times 1e36
int64_t calls[2];                                 // each tower's training calls (its own thread)

tpt_status *tower(tpt_tower *tw, const tpt_tensor *const *in, size_t, void *) {
  int32_t building = 0, k = 0;
  tpt_tensor *cost = nullptr, *big = nullptr;
  tpt_status *st = tpt_tower_is_building(&building, tw);
  if (!st) st = tpt_tower_index(&k, tw);
  if (!st) st = mlp(tw, in, &cost);
  if (!st && !building && overflow_at.count({k, calls[k]++})) {
    st = tpt_op_mul_scalar(&big, cost, 1e36);
    if (!st) st = tpt_tower_set_cost(tw, big);
  } else if (!st) {
    st = tpt_tower_set_cost(tw, cost);
  }
  tpt_tensor_free(cost);
  tpt_tensor_free(big);
  return st;
}

struct Setup {
  std::set<int64_t> overflow_steps;  // the steps whose update is skipped
  tpt_strategy strategy = TPT_STRATEGY_REPLICATED;
  int towers = 0;  // 0: the simple trainer
  int overflow_tower = 0;
  int64_t accumulate = 1;
};

struct Result {
  std::vector<double> scales;
  std::vector<at::Tensor> params;
};

Result through_c_api(const at::Tensor &x, const at::Tensor &y, const std::vector<at::Tensor> &init, const Setup &s) {
  Result run;
  overflow_at.clear();
  for (int64_t step : s.overflow_steps) overflow_at.insert({s.overflow_tower, step});
  calls[0] = calls[1] = 0;
  tpt_model *model = new_mlp(tower, init, "adam", s.accumulate);
  tpt_tensor tx(x), ty(y);
  const tpt_tensor *both[] = {&tx, &ty};
  tpt_input *input = nullptr;
  EXPECT_EQ(tpt_input_from_tensors(&input, both, 2, s.towers ? B / s.towers : B, 0, 0), nullptr);
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  o.steps_per_epoch = STEPS;
  o.max_epoch = 1;
  o.console = 0;
  o.progress = TPT_PROGRESS_OFF;
  o.loss_scaling.mode = TPT_LOSS_SCALING_ON;
  o.loss_scaling.growth_interval = 3;
  tpt_trainer *t = nullptr;
  EXPECT_EQ(tpt_trainer_new(&t, &o), nullptr);
  if (s.towers) {
    tpt_towers_options to = TPT_TOWERS_OPTIONS_INIT;
    to.strategy = s.strategy;
    to.n_towers = s.towers;
    EXPECT_EQ(tpt_trainer_set_towers(t, model, input, &to), nullptr);
  } else {
    EXPECT_EQ(tpt_trainer_set_model(t, model, input), nullptr);
  }
  tpt_callback_desc d = TPT_CALLBACK_DESC_INIT;
  d.events = TPT_EVENT_AFTER_RUN;
  d.fn = [](tpt_trainer *tr, tpt_event, const tpt_record *, void *p) -> tpt_status * {
    double v = 0;
    if (tpt_status *st = tpt_trainer_output_scalar(&v, tr, "loss_scale")) return st;
    static_cast<std::vector<double> *>(p)->push_back(v);
    return nullptr;
  };
  d.user_data = &run.scales;
  tpt_callback *cb = nullptr;
  EXPECT_EQ(tpt_callback_new(&cb, &d), nullptr);
  EXPECT_EQ(tpt_trainer_add_callback(t, cb), nullptr);
  tpt_status *st = tpt_trainer_run(t);
  EXPECT_EQ(st, nullptr) << (st ? tpt_status_message(st) : "");
  tpt_status_free(st);
  tpt_trainer_free(t);
  run.params = final_values(model);
  return run;
}

// Adam by hand over the concatenated batches, accumulating `accumulate`
// steps' gradients (their mean) per update; an update any of whose steps
// overflowed is left out. The scales GradScaler's rules give, per step.
Result by_hand(const at::Tensor &x, const at::Tensor &y, const std::vector<at::Tensor> &init, const Setup &s) {
  Result run;
  std::vector<at::Tensor> p, m1, m2, acc;
  for (const auto &t : init) {
    p.push_back(t.clone().set_requires_grad(true));
    m1.push_back(at::zeros_like(t));
    m2.push_back(at::zeros_like(t));
    acc.push_back(at::zeros_like(t));
  }
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  int64_t updates = 0, tracker = 0;
  double scale = 65536;
  bool window_overflowed = false;
  for (int64_t s_ = 0; s_ < STEPS; ++s_) {
    const int64_t k = s_ % (N / B);
    at::Tensor xb = x.narrow(0, k * B, B), yb = y.narrow(0, k * B, B);
    at::Tensor loss = at::mse_loss(at::linear(at::relu(at::linear(xb, p[0], p[1])), p[2], p[3]), yb);
    loss.backward();
    window_overflowed = window_overflowed || s.overflow_steps.count(s_) > 0;
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < p.size(); ++i) {
      acc[i].add_(p[i].grad());
      p[i].grad().zero_();
    }
    if ((s_ + 1) % s.accumulate == 0) {
      if (window_overflowed) {
        scale *= 0.5;
        tracker = 0;
      } else {
        ++updates;
        for (size_t i = 0; i < p.size(); ++i) {
          at::Tensor g = acc[i] / static_cast<double>(s.accumulate);
          m1[i] = m1[i] * b1 + g * (1 - b1);
          m2[i] = m2[i] * b2 + g * g * (1 - b2);
          double c1 = 1 - std::pow(b1, updates), c2 = 1 - std::pow(b2, updates);
          p[i].sub_(0.01 * (m1[i] / c1) / ((m2[i] / c2).sqrt() + eps));
        }
        if (++tracker == 3) {
          scale *= 2;
          tracker = 0;
        }
      }
      for (auto &a : acc) a.zero_();
      window_overflowed = false;
    }
    run.scales.push_back(scale);
  }
  for (const auto &t : p) run.params.push_back(t.detach());
  return run;
}

double max_diff(const std::vector<at::Tensor> &a, const std::vector<at::Tensor> &b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

void compare(const Setup &s, double tolerance, const char *what) {
  at::manual_seed(11);
  at::Tensor x = at::randn({N, D});
  at::Tensor y = x.narrow(1, 0, 1) * 2 - x.narrow(1, 1, 1) + at::randn({N, 1}) * 0.1;
  std::vector<at::Tensor> init = {at::randn({H, D}) * 0.3, at::randn({H}) * 0.1, at::randn({1, H}) * 0.3,
                                  at::randn({1}) * 0.1};
  Result a = through_c_api(x, y, init, s), b = by_hand(x, y, init, s);
  ASSERT_EQ(a.scales, b.scales) << what;
  const double d = max_diff(a.params, b.params);
  EXPECT_LE(d, tolerance) << what;
  // Not an accident: treating the overflowed steps' updates as ordinary
  // zero-gradient steps, or not skipping them, ends elsewhere.
  Setup none = s;
  none.overflow_steps.clear();
  const double moved = max_diff(by_hand(x, y, init, none).params, b.params);
  EXPECT_GT(moved, 10 * tolerance) << what;
  std::printf("# %s: the scale as GradScaler's at all %zu steps (last %g); max |param diff| %.3g (%.3g without the "
              "skips)\n",
              what, a.scales.size(), a.scales.back(), d, moved);
}

}  // namespace scaled

TEST(ParityLibTorch, LossScalingSkipsOverflowedUpdatesSimple) {
  scaled::Setup s;
  s.overflow_steps = {0, 5, 6, 40, 41, 42, 120};
  scaled::compare(s, 1e-5, "simple");
}

TEST(ParityLibTorch, LossScalingSkipsOverflowedUpdatesAccumulated) {
  scaled::Setup s;
  s.overflow_steps = {0, 5, 40, 41, 120};
  s.accumulate = 2;
  scaled::compare(s, 1e-5, "simple, accumulate_steps 2");
}

TEST(ParityLibTorch, LossScalingTowersSkipTogether) {
  // The overflow in tower 1 only: both replicas (and the parameter server's
  // one update) skip, and the result is one tower's on the concatenated batch.
  for (tpt_strategy kind : {TPT_STRATEGY_REPLICATED, TPT_STRATEGY_PARAMETER_SERVER}) {
    scaled::Setup s;
    s.overflow_steps = {0, 5, 6, 40, 120};
    s.towers = 2;
    s.strategy = kind;
    s.overflow_tower = 1;
    scaled::compare(s, 1e-5, kind == TPT_STRATEGY_REPLICATED ? "replicated, 2 towers" : "parameter server, 2 towers");
  }
}

TEST(ParityLibTorch, LossScalingAsyncTowersSkipTogether) {
  // Async: each tower's update is its own, so there is no one-tower
  // reference; an overflow in either tower must skip the step's updates of
  // both: the same run whichever tower overflowed, and another one than
  // without overflows.
  at::manual_seed(11);
  at::Tensor x = at::randn({N, D});
  at::Tensor y = x.narrow(1, 0, 1) * 2 - x.narrow(1, 1, 1) + at::randn({N, 1}) * 0.1;
  std::vector<at::Tensor> init = {at::randn({H, D}) * 0.3, at::randn({H}) * 0.1, at::randn({1, H}) * 0.3,
                                  at::randn({1}) * 0.1};
  scaled::Setup s;
  s.overflow_steps = {3, 4, 50};
  s.towers = 2;
  s.strategy = TPT_STRATEGY_ASYNC;
  s.overflow_tower = 0;
  scaled::Result in0 = scaled::through_c_api(x, y, init, s);
  s.overflow_tower = 1;
  scaled::Result in1 = scaled::through_c_api(x, y, init, s);
  s.overflow_steps.clear();
  scaled::Result none = scaled::through_c_api(x, y, init, s);
  EXPECT_EQ(in0.scales, in1.scales);
  EXPECT_EQ(in0.scales[2], 131072);  // grown after 3 good steps
  EXPECT_EQ(in0.scales[3], 65536);   // step 3 backed off, once for both towers' updates
  EXPECT_EQ(scaled::max_diff(in0.params, in1.params), 0);
  EXPECT_GT(scaled::max_diff(in0.params, none.params), 1e-4);
}

// ---- The one-pass Adam/AdamW (model/optimizer.cpp) against LibTorch's own
// torch::optim::Adam / AdamW, driven by hand with the same gradients: every
// kind, with and without weight decay, amsgrad (which LibTorch's step
// takes), variables too small for one vector, with an odd tail, and large
// enough to be split over the threads; the learning rate changed halfway.
// Equal within 1e-6 (on LibTorch 1.13, x86-64: identical, the same
// roundings as its element-wise kernels).
namespace fused {

TEST(ParityLibTorch, OnePassAdamEqualsLibTorchs) {
  const std::vector<std::vector<int64_t>> shapes = {{4}, {3, 7}, {40000}, {300, 257}};
  for (bool portable : {false, true})  // the AVX2 + FMA loop where the CPU has them, and the portable one
  for (std::string kind : {"adam", "adamw"})
    for (double wd : {0.0, 0.05})
      for (int amsgrad : {0, 1}) {
        SCOPED_TRACE(kind + " weight_decay " + std::to_string(wd) + " amsgrad " + std::to_string(amsgrad) +
                     (portable ? " portable loop" : ""));
        tpt::model::force_portable_fused_adam(portable);
        at::manual_seed(21);
        std::vector<tpt::model::Variable> vars;
        std::vector<at::Tensor> ref;
        for (size_t i = 0; i < shapes.size(); ++i) {
          at::Tensor v = at::randn(shapes[i]);
          vars.push_back({"v" + std::to_string(i), v.clone().requires_grad_(true), true});
          ref.push_back(v.clone().requires_grad_(true));
        }
        tpt::model::Optimizer ours(kind);
        ours.set("learning_rate", 0.01);
        ours.set("weight_decay", wd);
        ours.set("amsgrad", amsgrad);
        std::unique_ptr<torch::optim::Optimizer> theirs;
        if (kind == "adam")
          theirs = std::make_unique<torch::optim::Adam>(
              ref, torch::optim::AdamOptions(0.01).weight_decay(wd).amsgrad(amsgrad != 0));
        else
          theirs = std::make_unique<torch::optim::AdamW>(
              ref, torch::optim::AdamWOptions(0.01).weight_decay(wd).amsgrad(amsgrad != 0));
        const int steps = 6;
        for (int s = 0; s < steps; ++s) {
          if (s == steps / 2) {
            ours.set("learning_rate", 0.003);
            for (auto &group : theirs->param_groups()) group.options().set_lr(0.003);
          }
          for (size_t i = 0; i < vars.size(); ++i) {
            at::Tensor g = at::randn(shapes[i]);
            vars[i].value.mutable_grad() = g.clone();
            ref[i].mutable_grad() = g.clone();
          }
          const int64_t version = vars[2].value._version();
          ASSERT_EQ(ours.apply(vars, s), tpt::model::Optimizer::Update::Applied);
          // written in place as by an operator: its version moved (a graph that saved it would refuse)
          EXPECT_GT(vars[2].value._version(), version);
          theirs->step();
          theirs->zero_grad();
        }
        double worst = 0;
        for (size_t i = 0; i < vars.size(); ++i) {
          at::Tensor a = vars[i].value.detach(), b = ref[i].detach();
          worst = std::max(worst, (a - b).abs().max().item<double>() / (1 + b.abs().max().item<double>()));
        }
        EXPECT_LE(worst, 1e-6);
        // the first update makes LibTorch's state; every later one is the one-pass loop's
        EXPECT_EQ(ours.fused_updates(), amsgrad ? 0 : steps - 1);
        std::printf("# %s wd %g amsgrad %d%s: max relative difference from LibTorch's %s %.3g\n", kind.c_str(), wd,
                    amsgrad, portable ? " (portable loop)" : "", kind.c_str(), worst);
      }
  tpt::model::force_portable_fused_adam(false);
}

}  // namespace fused
