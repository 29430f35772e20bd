// Optimizers by kind with hyper-parameters by name (for schedules), and the
// gradient processors applied before each update. The kinds' tables and
// rules are base/optimizer_state.hpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace tpt {
struct OptimizerState;  // base/optimizer_state.hpp
}

namespace tpt::model {

struct Variable;

class Optimizer {
 public:
  explicit Optimizer(const std::string &kind);
  ~Optimizer();

  const std::string &kind() const { return kind_; }
  // The gradient processors' settings, read on every step (kept out of the name map).
  struct Processing {
    int64_t accumulate_steps = 1;
    int check_numerics = 1;
    double clip_value = 0, clip_global_norm = 0;
    bool clip_tf = false;  // TensorFlow's clip_by_global_norm instead of PyTorch's clip_grad_norm_
  };
  const Processing &processing() const { return processing_; }
  void set(const std::string &name, double value);
  double get(const std::string &name) const;
  void scale_gradients(const std::string &pattern, double factor);

  // A replica's optimizer (a tower of the replicated strategy): this one's
  // kind, hyper-parameters and gradient scales, and no state.
  std::shared_ptr<Optimizer> replica() const;
  // Takes `main`'s hyper-parameters and scales where they differ (a setter
  // changed main's); cheap when nothing changed.
  void follow(const Optimizer &main);

  // How an update treats gradients that are not all finite.
  enum class LossScaled {
    No,          // check_numerics decides (2: an error naming the variable)
    Yes,         // dynamic loss scaling (train/loss_scale.hpp): the update is skipped
    Overflowed,  // ... and another part of the step overflowed (an async tower): skipped anyway
  };
  // What an apply call did: added to the gradients of an update to come
  // (accumulate_steps), applied the update, or skipped it (its gradients
  // cleared; the variables and the optimizer's state unchanged).
  enum class Update { Accumulated, Applied, Skipped };
  // After the cost's backward pass: process the gradients of `vars` (the
  // trainable variables) and, every accumulate_steps calls, apply the update
  // and clear the gradients. Under loss scaling the gradients arrive
  // unscaled, and an update whose accumulated gradients are not all finite
  // is skipped (checked before any processor, as GradScaler's step).
  Update apply(const std::vector<Variable> &vars, int64_t global_step, LossScaled scaled = LossScaled::No);

  // For checkpoints: the hyper-parameters, and per trainable variable of
  // `vars` (named by it) its slots, its step and a pending accumulated
  // gradient. load_state checks every slot against `vars` (names, shapes,
  // dtypes, the kind) before it changes anything; it creates the LibTorch
  // optimizer over the trainable variables when no update has run yet.
  OptimizerState state(const std::vector<Variable> &vars) const;
  // Every check of load_state, changing nothing.
  void check_state(const OptimizerState &state, const std::vector<Variable> &vars) const;
  void load_state(const OptimizerState &state, const std::vector<Variable> &vars);

  // The updates applied by the one-pass Adam/AdamW (optimizer.cpp), not by
  // LibTorch's step: for the tests.
  int64_t fused_updates() const { return fused_updates_; }

 private:
  void make(const std::vector<at::Tensor> &params);
  void push_options();

  std::string kind_;
  std::map<std::string, double> params_;
  Processing processing_;
  std::vector<std::pair<std::regex, double>> scales_;
  std::vector<std::string> scale_patterns_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
  std::vector<at::Tensor> params_list_;  // the trainable variables, fixed at the first update
  int64_t micro_steps_ = 0;
  int64_t fused_updates_ = 0;
};

// Tests: the one-pass Adam/AdamW's portable loop (no AVX2/FMA), as on a
// CPU without them, instead of its AVX2 loop.
void force_portable_fused_adam(bool on);

// Scales `grads` in place so that their global 2-norm is at most max_norm:
// PyTorch's clip_grad_norm_ arithmetic (float32 steps, coefficient
// min(1, max_norm / (norm + 1e-6))), or with tf, TensorFlow's
// clip_by_global_norm (g * max_norm / max(norm, max_norm)).
void clip_global_norm(const std::vector<at::Tensor> &grads, double max_norm, bool tf);

}  // namespace tpt::model
