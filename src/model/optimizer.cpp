#include "model/optimizer.hpp"

#include <ATen/core/grad_mode.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <ATen/Parallel.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "base/error.hpp"
#include "base/optimizer_state.hpp"
#include "base/pattern.hpp"
#include "base/torch_compat.hpp"
#include "model/model.hpp"

namespace tpt::model {

namespace {

bool flag(double v) { return v != 0; }

// The key of p's state in LibTorch's optimizer (a string up to 1.13, a pointer in 2.x).
using StateKey = std::decay_t<decltype(std::declval<torch::optim::Optimizer &>().state())>::key_type;
StateKey key_of(const at::Tensor &p) { return compat::optimizer_state_key<StateKey>(p); }

// ---- Adam and AdamW in one pass (the fast path of Optimizer::apply).
//
// LibTorch's Adam::step makes six passes over each variable (mul_, add_,
// mul_, addcmul_, sqrt + div + add_, addcdiv_), each a dispatched operator
// on one thread for small variables: 3.5 ms a step for the Fashion-MNIST
// example's 0.84 M parameters, 13 % of its bf16 step. The same arithmetic
// in float32, element by element in one pass over p, g, m, v, split over
// LibTorch's intra-op threads as its element-wise kernels are: the same
// roundings as LibTorch 1.13's kernels, measured element by element (add_
// and addcmul_ end in a fused multiply-add where the CPU has FMA, addcdiv_
// is self + (value * t1) / t2, the division a true one), so the same
// update (the parity tests: identical to python3-torch's Adam here). The
// state stays LibTorch's (exp_avg, exp_avg_sq, step: checkpoints
// unchanged), and each tensor written gets its version bumped, as an
// in-place operator's (a graph that saved one refuses to run backward);
// the first update, which creates that state, and anything unusual
// (amsgrad, a variable or slot that is not a contiguous float32 CPU tensor)
// take LibTorch's step.
// TPT_FUSED_OPTIMIZER=0 in the environment turns it off (for A/B runs).

struct AdamScalars {
  float b1, a1, b2, a2, c2, eps, neg_step, wd, decay;  // a = 1 - b; c2 = sqrt(bias correction 2)
  bool adamw;
};

struct AdamSpan {
  float *p;
  const float *g;
  float *m, *v;
};

inline void adam_element(const AdamScalars &k, const AdamSpan &s, int64_t i, bool fma) {
  float g = s.g[i], p = s.p[i];
  if (k.wd != 0) {
    if (k.adamw) p = p * k.decay;                         // p.mul_(1 - lr * wd)
    else g = fma ? std::fma(p, k.wd, g) : g + p * k.wd;   // grad.add(p, wd)
  }
  float m = s.m[i] * k.b1, v = s.v[i] * k.b2, ag = k.a2 * g;
  m = fma ? std::fma(g, k.a1, m) : m + g * k.a1;          // exp_avg.mul_(b1).add_(g, 1 - b1)
  v = fma ? std::fma(ag, g, v) : v + ag * g;              // exp_avg_sq.mul_(b2).addcmul_(g, g, 1 - b2)
  float d = std::sqrt(v) / k.c2 + k.eps;                  // (sqrt(v) / sqrt(c2)).add_(eps)
  s.p[i] = p + (k.neg_step * m) / d;                      // p.addcdiv_(m, d, -lr / c1)
  s.m[i] = m;
  s.v[i] = v;
}

void adam_range_plain(const AdamScalars &k, const AdamSpan &s, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) adam_element(k, s, i, false);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TPT_ADAM_AVX2 1
__attribute__((target("avx2,fma"))) void adam_range_avx2(const AdamScalars &k, const AdamSpan &s, int64_t begin,
                                                         int64_t end) {
  const __m256 b1 = _mm256_set1_ps(k.b1), a1 = _mm256_set1_ps(k.a1), b2 = _mm256_set1_ps(k.b2),
               a2 = _mm256_set1_ps(k.a2), c2 = _mm256_set1_ps(k.c2), eps = _mm256_set1_ps(k.eps),
               step = _mm256_set1_ps(k.neg_step), wd = _mm256_set1_ps(k.wd), decay = _mm256_set1_ps(k.decay);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 g = _mm256_loadu_ps(s.g + i), p = _mm256_loadu_ps(s.p + i);
    if (k.wd != 0) {
      if (k.adamw) p = _mm256_mul_ps(p, decay);
      else g = _mm256_fmadd_ps(p, wd, g);
    }
    __m256 m = _mm256_fmadd_ps(g, a1, _mm256_mul_ps(_mm256_loadu_ps(s.m + i), b1));
    __m256 v = _mm256_fmadd_ps(_mm256_mul_ps(a2, g), g, _mm256_mul_ps(_mm256_loadu_ps(s.v + i), b2));
    __m256 d = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), c2), eps);
    _mm256_storeu_ps(s.p + i, _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(step, m), d)));
    _mm256_storeu_ps(s.m + i, m);
    _mm256_storeu_ps(s.v + i, v);
  }
  for (; i < end; ++i) adam_element(k, s, i, true);
}

bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

std::atomic<bool> portable_only{false};

// After an update: the gradients go (PyTorch's zero_grad(set_to_none=True),
// LibTorch 2.x's default; 1.13's zero_grad zeroes them in place). The next
// backward pass then hands its gradient over instead of adding it to zeros,
// and nothing is filled.
void clear_grads(const std::vector<at::Tensor> &params) {
  for (const auto &p : params) p.mutable_grad().reset();
}

bool fused_optimizer_enabled() {
  static const bool on = [] {
    const char *e = std::getenv("TPT_FUSED_OPTIMIZER");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// One pass per variable of `opt` (an Adam or AdamW); false (nothing changed)
// when a variable or its state is not for this path.
template <class Options, class State>
bool fused_adam_step(torch::optim::Optimizer &opt) {
  constexpr bool adamw = std::is_same_v<Options, torch::optim::AdamWOptions>;
  struct Work {
    at::Tensor param;
    AdamSpan span;
    int64_t n;
    State *state;
    const Options *options;
  };
  std::vector<Work> work;
  auto fits = [](const at::Tensor &t, int64_t n) {
    return t.defined() && t.layout() == at::kStrided && t.device().is_cpu() && t.scalar_type() == at::kFloat &&
           t.numel() == n && t.is_contiguous();
  };
  for (auto &group : opt.param_groups()) {
    auto *o = dynamic_cast<Options *>(&group.options());
    if (!o || o->amsgrad()) return false;
    for (auto &p : group.params()) {
      const at::Tensor &g = p.grad();
      if (!g.defined()) continue;  // LibTorch's step skips it too
      auto it = opt.state().find(key_of(p));
      if (it == opt.state().end()) return false;  // the first update: LibTorch's step makes the state
      auto *st = dynamic_cast<State *>(it->second.get());
      const int64_t n = p.numel();
      if (!st || !fits(p, n) || !fits(g, n) || !fits(st->exp_avg(), n) || !fits(st->exp_avg_sq(), n)) return false;
      work.push_back({p, {p.data_ptr<float>(), g.data_ptr<float>(), st->exp_avg().template data_ptr<float>(),
                       st->exp_avg_sq().template data_ptr<float>()},
                      n, st, o});
    }
  }
  for (Work &w : work) {
    const Options &o = *w.options;
    w.state->step(w.state->step() + 1);
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    const double c1 = 1 - std::pow(beta1, w.state->step()), c2 = 1 - std::pow(beta2, w.state->step());
    AdamScalars k{static_cast<float>(beta1), static_cast<float>(1 - beta1), static_cast<float>(beta2),
                  static_cast<float>(1 - beta2), static_cast<float>(std::sqrt(c2)), static_cast<float>(o.eps()),
                  static_cast<float>(-(o.lr() / c1)), static_cast<float>(o.weight_decay()),
                  static_cast<float>(1 - o.lr() * o.weight_decay()), adamw};
    for (const at::Tensor *t : {&w.param, &w.state->exp_avg(), &w.state->exp_avg_sq()})
      t->unsafeGetTensorImpl()->bump_version();
    const AdamSpan span = w.span;
    at::parallel_for(0, w.n, at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
#ifdef TPT_ADAM_AVX2
      if (cpu_has_avx2_fma() && !portable_only.load(std::memory_order_relaxed))
        return adam_range_avx2(k, span, begin, end);
#endif
      adam_range_plain(k, span, begin, end);
    });
  }
  return true;
}

}  // namespace

Optimizer::Optimizer(const std::string &kind) : kind_(kind), params_(optimizer_defaults(kind)) {}

Optimizer::~Optimizer() = default;

void Optimizer::set(const std::string &name, double value) {
  auto it = params_.find(name);
  if (it == params_.end())
    invalid_argument("optimizer '" + kind_ + "' has no hyper-parameter '" + name + "'; it has " + hyperparameter_names(params_));
  check_hyperparameter(name, value);
  if (it->second != value) hyperparam_changes().fetch_add(1, std::memory_order_relaxed);
  it->second = value;
  processing_.accumulate_steps = static_cast<int64_t>(params_.at("accumulate_steps"));
  processing_.check_numerics = static_cast<int>(params_.at("check_numerics"));
  processing_.clip_value = params_.at("clip_value");
  processing_.clip_global_norm = params_.at("clip_global_norm");
  processing_.clip_tf = params_.at("clip_global_norm_tf") != 0;
  if (opt_) push_options();
}

double Optimizer::get(const std::string &name) const {
  auto it = params_.find(name);
  if (it == params_.end())
    invalid_argument("optimizer '" + kind_ + "' has no hyper-parameter '" + name + "'; it has " + hyperparameter_names(params_));
  return it->second;
}

void Optimizer::scale_gradients(const std::string &pattern, double factor) {
  if (!std::isfinite(factor)) invalid_argument("the scale factor must be finite");
  scales_.emplace_back(name_pattern(pattern, "scale_gradients"), factor);
}

std::shared_ptr<Optimizer> Optimizer::replica() const {
  auto r = std::make_shared<Optimizer>(kind_);
  r->follow(*this);
  return r;
}

void Optimizer::follow(const Optimizer &main) {
  if (params_ != main.params_) {
    params_ = main.params_;
    processing_ = main.processing_;
    if (opt_) push_options();
  }
  if (scales_.size() != main.scales_.size()) scales_ = main.scales_;  // scales are only ever added
}

void Optimizer::make(const std::vector<at::Tensor> &params) {
  const auto &p = params_;
  auto get = [&](const char *n) { return p.at(n); };
  if (kind_ == "sgd") {
    torch::optim::SGDOptions o(get("learning_rate"));
    o.momentum(get("momentum")).dampening(get("dampening")).weight_decay(get("weight_decay")).nesterov(flag(get("nesterov")));
    opt_ = std::make_unique<torch::optim::SGD>(params, o);
  } else if (kind_ == "adam" || kind_ == "adamw") {
    if (kind_ == "adam") {
      torch::optim::AdamOptions o(get("learning_rate"));
      o.betas({get("beta1"), get("beta2")}).eps(get("eps")).weight_decay(get("weight_decay")).amsgrad(flag(get("amsgrad")));
      opt_ = std::make_unique<torch::optim::Adam>(params, o);
    } else {
      torch::optim::AdamWOptions o(get("learning_rate"));
      o.betas({get("beta1"), get("beta2")}).eps(get("eps")).weight_decay(get("weight_decay")).amsgrad(flag(get("amsgrad")));
      opt_ = std::make_unique<torch::optim::AdamW>(params, o);
    }
  } else if (kind_ == "rmsprop") {
    torch::optim::RMSpropOptions o(get("learning_rate"));
    o.alpha(get("alpha")).eps(get("eps")).momentum(get("momentum")).weight_decay(get("weight_decay")).centered(flag(get("centered")));
    opt_ = std::make_unique<torch::optim::RMSprop>(params, o);
  } else {
    torch::optim::AdagradOptions o(get("learning_rate"));
    o.lr_decay(get("lr_decay")).weight_decay(get("weight_decay")).initial_accumulator_value(get("initial_accumulator_value")).eps(get("eps"));
    opt_ = std::make_unique<torch::optim::Adagrad>(params, o);
  }
}

// Hyper-parameters set during training reach every parameter group.
void Optimizer::push_options() {
  const auto &p = params_;
  for (auto &group : opt_->param_groups()) {
    auto &options = group.options();
    options.set_lr(p.at("learning_rate"));
    if (auto *o = dynamic_cast<torch::optim::SGDOptions *>(&options)) {
      o->momentum(p.at("momentum")).dampening(p.at("dampening")).weight_decay(p.at("weight_decay")).nesterov(flag(p.at("nesterov")));
    } else if (auto *o = dynamic_cast<torch::optim::AdamOptions *>(&options)) {
      o->betas({p.at("beta1"), p.at("beta2")}).eps(p.at("eps")).weight_decay(p.at("weight_decay")).amsgrad(flag(p.at("amsgrad")));
    } else if (auto *o = dynamic_cast<torch::optim::AdamWOptions *>(&options)) {
      o->betas({p.at("beta1"), p.at("beta2")}).eps(p.at("eps")).weight_decay(p.at("weight_decay")).amsgrad(flag(p.at("amsgrad")));
    } else if (auto *o = dynamic_cast<torch::optim::RMSpropOptions *>(&options)) {
      o->alpha(p.at("alpha")).eps(p.at("eps")).momentum(p.at("momentum")).weight_decay(p.at("weight_decay")).centered(flag(p.at("centered")));
    } else if (auto *o = dynamic_cast<torch::optim::AdagradOptions *>(&options)) {
      o->lr_decay(p.at("lr_decay")).weight_decay(p.at("weight_decay")).eps(p.at("eps"));
    }
  }
}

Optimizer::Update Optimizer::apply(const std::vector<Variable> &vars, int64_t global_step, LossScaled scaled) {
  if (!opt_) {
    for (const auto &v : vars)
      if (v.trainable) params_list_.push_back(v.value);
    if (params_list_.empty()) fail(TPT_ERR_STATE, "the model has no trainable variables to optimise");
    make(params_list_);
  }
  const std::vector<at::Tensor> &params = params_list_;
  int64_t accumulate = processing_.accumulate_steps;
  if (++micro_steps_ < accumulate) return Update::Accumulated;
  micro_steps_ = 0;
  at::NoGradGuard no_grad;
  if (scaled != LossScaled::No) {
    bool finite = scaled == LossScaled::Yes;
    if (finite) {  // every gradient at once: one synchronisation
      at::Tensor all;
      for (const auto &v : vars) {
        if (!v.trainable || !v.value.grad().defined()) continue;
        at::Tensor f = v.value.grad().isfinite().all();
        all = all.defined() ? all.logical_and(f) : f;
      }
      finite = !all.defined() || all.item<bool>();
    }
    if (!finite) {
      clear_grads(params_list_);
      return Update::Skipped;
    }
  }
  bool check = processing_.check_numerics >= 2;  // 1 checks the cost only (the strategy does that)
  double clip_value = processing_.clip_value;
  at::Tensor total;  // the sum of every gradient: finite iff they all are (one sync, not one per variable)
  for (const auto &v : vars) {
    if (!v.trainable) continue;
    at::Tensor g = v.value.grad();
    if (!g.defined()) continue;
    if (accumulate > 1) g.div_(static_cast<double>(accumulate));
    for (const auto &[re, factor] : scales_)
      if (std::regex_search(v.name, re)) g.mul_(factor);
    if (check) total = total.defined() ? total.add(g.sum().to(at::kDouble)) : g.sum().to(at::kDouble);
  }
  if (check && total.defined() && !std::isfinite(total.item<double>())) {
    for (const auto &v : vars)  // the slow path: name the culprit
      if (v.trainable && v.value.grad().defined() && !v.value.grad().isfinite().all().item<bool>())
        fail(TPT_ERR_BACKEND, "the gradient of variable '" + v.name + "' has NaN or Inf at global_step " +
                                  std::to_string(global_step));
  }
  if (clip_value > 0)
    for (const auto &p : params)
      if (p.grad().defined()) p.grad().clamp_(-clip_value, clip_value);
  double max_norm = processing_.clip_global_norm;
  if (max_norm > 0) {
    std::vector<at::Tensor> grads;
    for (const auto &p : params)
      if (p.grad().defined()) grads.push_back(p.grad());
    if (!grads.empty()) clip_global_norm(grads, max_norm, processing_.clip_tf);
  }
  bool fused = false;
  if (fused_optimizer_enabled()) {
    if (kind_ == "adam") fused = fused_adam_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(*opt_);
    else if (kind_ == "adamw") fused = fused_adam_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(*opt_);
  }
  if (fused) ++fused_updates_;
  else opt_->step();
  clear_grads(params);
  return Update::Applied;
}

namespace {

// The slots of one parameter's LibTorch state, by the names PyTorch's
// state_dict uses; `step` separately.
std::map<std::string, at::Tensor> slots_of(const torch::optim::OptimizerParamState &st, int64_t &step) {
  std::map<std::string, at::Tensor> m;
  auto put = [&](const char *name, const at::Tensor &t) {
    if (t.defined()) m[name] = t.detach();  // encoded at once: no copy
  };
  step = -1;
  if (auto *s = dynamic_cast<const torch::optim::SGDParamState *>(&st)) {
    put("momentum_buffer", s->momentum_buffer());
  } else if (auto *s = dynamic_cast<const torch::optim::AdamParamState *>(&st)) {
    step = s->step();
    put("exp_avg", s->exp_avg()), put("exp_avg_sq", s->exp_avg_sq()), put("max_exp_avg_sq", s->max_exp_avg_sq());
  } else if (auto *s = dynamic_cast<const torch::optim::AdamWParamState *>(&st)) {
    step = s->step();
    put("exp_avg", s->exp_avg()), put("exp_avg_sq", s->exp_avg_sq()), put("max_exp_avg_sq", s->max_exp_avg_sq());
  } else if (auto *s = dynamic_cast<const torch::optim::RMSpropParamState *>(&st)) {
    step = s->step();
    put("square_avg", s->square_avg()), put("momentum_buffer", s->momentum_buffer()), put("grad_avg", s->grad_avg());
  } else if (auto *s = dynamic_cast<const torch::optim::AdagradParamState *>(&st)) {
    step = s->step();
    put("sum", s->sum());
  }
  return m;
}


std::unique_ptr<torch::optim::OptimizerParamState> make_param_state(const std::string &kind,
                                                                    const std::map<std::string, at::Tensor> &slots,
                                                                    int64_t step) {
  auto get = [&](const char *n) {
    auto it = slots.find(n);
    return it == slots.end() ? at::Tensor() : it->second.detach().clone();
  };
  if (kind == "sgd") {
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(get("momentum_buffer"));
    return s;
  }
  if (kind == "adam") {
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(step).exp_avg(get("exp_avg")).exp_avg_sq(get("exp_avg_sq")).max_exp_avg_sq(get("max_exp_avg_sq"));
    return s;
  }
  if (kind == "adamw") {
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(step).exp_avg(get("exp_avg")).exp_avg_sq(get("exp_avg_sq")).max_exp_avg_sq(get("max_exp_avg_sq"));
    return s;
  }
  if (kind == "rmsprop") {
    auto s = std::make_unique<torch::optim::RMSpropParamState>();
    s->step(step).square_avg(get("square_avg")).momentum_buffer(get("momentum_buffer")).grad_avg(get("grad_avg"));
    return s;
  }
  auto s = std::make_unique<torch::optim::AdagradParamState>();
  s->step(step).sum(get("sum"));
  return s;
}

}  // namespace

OptimizerState Optimizer::state(const std::vector<Variable> &vars) const {
  OptimizerState out;
  out.kind = kind_;
  out.hparams = params_;
  out.micro_steps = micro_steps_;
  for (const Variable &v : vars) {
    if (!v.trainable) continue;
    if (micro_steps_ > 0 && v.value.grad().defined()) out.grads[v.name] = v.value.grad().detach();
    if (!opt_) continue;
    auto it = opt_->state().find(key_of(v.value));
    if (it == opt_->state().end()) continue;  // not updated yet
    int64_t step = -1;
    out.slots[v.name] = slots_of(*it->second, step);
    if (step >= 0) out.steps[v.name] = step;
  }
  return out;
}

void Optimizer::check_state(const OptimizerState &st, const std::vector<Variable> &vars) const {
  auto bad = [](const std::string &what) { invalid_argument("the checkpoint's optimizer state: " + what); };
  if (st.kind != kind_) bad("it is for a '" + st.kind + "' optimizer, this model's is '" + kind_ + "'");
  std::map<std::string, const Variable *> trainable;
  for (const Variable &v : vars)
    if (v.trainable) trainable[v.name] = &v;
  try {
    check_hyperparameters(kind_, st.hparams);
  } catch (const Error &e) {
    bad(e.what());
  }
  if (st.micro_steps < 0 || st.micro_steps >= std::max<int64_t>(1, static_cast<int64_t>(st.hparams.count("accumulate_steps") ? st.hparams.at("accumulate_steps") : 1)))
    bad("micro_steps " + std::to_string(st.micro_steps) + " is out of range for its accumulate_steps");
  auto check_like = [&](const std::string &var, const std::string &slot, const at::Tensor &t) {
    auto it = trainable.find(var);
    if (it == trainable.end()) bad("it has state for '" + var + "', which is not a trainable variable of this model");
    const at::Tensor &v = it->second->value;
    if (!t.defined() || t.sizes() != v.sizes() || t.scalar_type() != v.scalar_type())
      bad("'" + var + "' " + slot + " is " + (t.defined() ? std::string(c10::toString(t.scalar_type())) + " " + shape_text(t.sizes()) : "(none)") +
          ", the variable " + c10::toString(v.scalar_type()) + " " + shape_text(v.sizes()));
  };
  const auto &allowed = slot_names(kind_);
  for (const auto &[var, slots] : st.slots) {
    for (const auto &[slot, t] : slots) {
      if (std::find(allowed.begin(), allowed.end(), slot) == allowed.end())
        bad("'" + var + "' has a slot '" + slot + "' that a '" + kind_ + "' optimizer does not have");
      check_like(var, slot, t);
    }
    if (trainable.count(var) == 0) bad("it has state for '" + var + "', which is not a trainable variable of this model");
  }
  for (const auto &[var, step] : st.steps)
    if (step < 0 || st.slots.count(var) == 0) bad("'" + var + "' has a step without slots, or a negative one");
  for (const auto &[var, g] : st.grads) check_like(var, "accumulated gradient", g);
}

void Optimizer::load_state(const OptimizerState &st, const std::vector<Variable> &vars) {
  check_state(st, vars);
  std::map<std::string, const Variable *> trainable;
  for (const Variable &v : vars)
    if (v.trainable) trainable[v.name] = &v;

  // Checked: apply.
  params_ = optimizer_defaults(kind_);
  for (const auto &[name, value] : st.hparams) params_[name] = value;
  processing_.accumulate_steps = static_cast<int64_t>(params_.at("accumulate_steps"));
  processing_.check_numerics = static_cast<int>(params_.at("check_numerics"));
  processing_.clip_value = params_.at("clip_value");
  processing_.clip_global_norm = params_.at("clip_global_norm");
  processing_.clip_tf = params_.at("clip_global_norm_tf") != 0;
  if (!opt_) {
    params_list_.clear();
    for (const auto &v : vars)
      if (v.trainable) params_list_.push_back(v.value);
    if (params_list_.empty()) fail(TPT_ERR_STATE, "the model has no trainable variables to optimise");
    make(params_list_);
  } else {
    push_options();
  }
  opt_->state().clear();
  for (const auto &[var, slots] : st.slots) {
    auto step = st.steps.find(var);
    opt_->state()[key_of(trainable.at(var)->value)] =
        make_param_state(kind_, slots, step == st.steps.end() ? 0 : step->second);
  }
  micro_steps_ = st.micro_steps;
  at::NoGradGuard no_grad;
  for (const auto &[name, v] : trainable) {
    auto g = st.grads.find(name);
    if (g != st.grads.end()) v->value.mutable_grad() = g->second.detach().clone();
    else if (v->value.grad().defined()) v->value.mutable_grad() = at::Tensor();
  }
}

void force_portable_fused_adam(bool on) { portable_only.store(on); }

void clip_global_norm(const std::vector<at::Tensor> &grads, double max_norm, bool tf) {
  if (!tf) {
    // PyTorch's clip_grad_norm_ (torch/nn/utils/clip_grad.py, 1.13), step by
    // step in the gradients' dtype: per-gradient 2-norms, the 2-norm of their
    // stack, clip_coef = max_norm / (total + 1e-6) (Python's scalar / tensor
    // is reciprocal() * scalar), clamped to at most 1, every gradient times it.
    std::vector<at::Tensor> norms;
    norms.reserve(grads.size());
    for (const auto &g : grads) {
      std::vector<int64_t> all(static_cast<size_t>(g.dim()));
      for (int64_t d = 0; d < g.dim(); ++d) all[static_cast<size_t>(d)] = d;
      norms.push_back(at::norm(g, 2, all, false));
    }
    at::Tensor total = at::norm(at::stack(norms), 2, {0}, false);
    at::Tensor coef = at::clamp((total + 1e-6).reciprocal() * max_norm, c10::nullopt, 1.0);
    for (const auto &g : grads) g.mul_(coef);
  } else {
    // TensorFlow's clip_by_global_norm (tensorpack's GlobalNormClip):
    // global_norm = sqrt(sum of sum(g^2)); g *= max_norm * min(1/global_norm, 1/max_norm).
    at::Tensor sum;
    for (const auto &g : grads) {
      at::Tensor s = (g * g).sum();
      sum = sum.defined() ? sum + s : s;
    }
    at::Tensor scale = at::minimum(sum.sqrt().reciprocal(), at::full({}, 1.0 / max_norm, sum.options())) * max_norm;
    for (const auto &g : grads) g.mul_(scale);
  }
}

}  // namespace tpt::model
