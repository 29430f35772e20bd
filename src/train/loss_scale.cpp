// Dynamic loss scaling: train/loss_scale.hpp.
#include "train/loss_scale.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/isfinite.h>

#include <cmath>
#include <string>

#include "base/checkpoint_file.hpp"
#include "loop/trainer.hpp"

namespace tpt::parallel {

void LossScaler::configure(const tpt_loss_scaling &o, tpt_precision precision) {
  on_ = o.mode == TPT_LOSS_SCALING_ON || (o.mode == TPT_LOSS_SCALING_AUTO && precision == TPT_PRECISION_FP16_MIXED);
  scale_ = static_cast<float>(o.init_scale);
  growth_tracker_ = 0;
  growth_factor_ = o.growth_factor;
  backoff_factor_ = o.backoff_factor;
  growth_interval_ = o.growth_interval;
  skipped_ = 0;
  due_ = overflow_ = false;
}

at::Tensor LossScaler::scaled(const at::Tensor &cost) const {
  return on_ ? cost.mul(static_cast<double>(scale_)) : cost;
}

void LossScaler::unscale(const at::Tensor &grad) const {
  if (!on_ || !grad.defined()) return;
  // GradScaler: inv_scale = scale.double().reciprocal().float()
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale_));
  const_cast<at::Tensor &>(grad).mul_(static_cast<double>(inv));
}

void LossScaler::unscale(const std::vector<at::Tensor> &grads) const {
  for (const auto &g : grads) unscale(g);
}

bool LossScaler::all_finite(const std::vector<at::Tensor> &grads) {
  at::Tensor all;
  for (const auto &g : grads) {
    if (!g.defined()) continue;
    at::Tensor f = at::isfinite(g).all();
    if (all.defined() && f.device() != all.device()) f = f.to(all.device());  // towers on several devices
    all = all.defined() ? all.logical_and(f) : f;
  }
  return !all.defined() || all.item<bool>();
}

void LossScaler::record(model::Optimizer::Update u) {
  if (u == model::Optimizer::Update::Accumulated) return;
  due_ = true;
  if (u == model::Optimizer::Update::Skipped) overflow_ = true;
}

void LossScaler::end_step(Trainer &t, bool hooked) {
  if (!on_) return;
  if (due_) {
    // GradScaler's _amp_update_scale_: the product in double, kept as float32;
    // growth only to a finite scale.
    if (overflow_) {
      scale_ = static_cast<float>(static_cast<double>(scale_) * backoff_factor_);
      growth_tracker_ = 0;
      ++skipped_;
    } else if (++growth_tracker_ >= growth_interval_) {
      const float grown = static_cast<float>(static_cast<double>(scale_) * growth_factor_);
      if (std::isfinite(grown)) scale_ = grown;
      growth_tracker_ = 0;
    }
  }
  due_ = overflow_ = false;
  if (hooked) {
    Output o;
    o.scalar = scale_;
    t.set_output("loss_scale", std::move(o));
  }
}

void LossScaler::after_epoch(Trainer &t) {
  if (!on_) return;
  t.monitors().put_scalar("loss_scale", scale_);
  t.monitors().put_scalar("skipped_updates", static_cast<double>(skipped_));
  skipped_ = 0;
}

void LossScaler::save(Checkpoint &ck) const {
  if (!on_) return;
  LossScaleState s;
  s.scale = scale_;
  s.growth_factor = growth_factor_;
  s.backoff_factor = backoff_factor_;
  s.growth_interval = growth_interval_;
  s.growth_tracker = growth_tracker_;
  ck.loss_scaler = s;
}

void LossScaler::restore(const Checkpoint &ck, Trainer &t) {
  if (!on_) return;
  if (!ck.loss_scaler) {
    t.log().info("Loss scaling: " + ck.source + " has no loss scale (a run without loss scaling); starting from " +
                 std::to_string(scale_));
    return;
  }
  scale_ = static_cast<float>(ck.loss_scaler->scale);
  growth_tracker_ = ck.loss_scaler->growth_tracker;
}

}  // namespace tpt::parallel
