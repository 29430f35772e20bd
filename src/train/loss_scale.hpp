// Dynamic loss scaling (tpt_loss_scaling), with the rules of PyTorch's
// torch.amp.GradScaler: the scale a step multiplies its cost by, unscaling
// the gradients before they reach an optimizer, the update of the scale
// after a step's updates, and the scale's part of a checkpoint. Whether an
// update is skipped is the optimizer's decision (model::Optimizer::apply
// checks the gradients it would apply), so a replica, a train op and an
// accumulated update each decide on exactly what they apply.
#pragma once

#include <cstdint>
#include <vector>

#include "model/optimizer.hpp"
#include "tptrain/trainer.h"

namespace at {
class Tensor;
}
namespace tpt {
struct Checkpoint;
class Trainer;
}  // namespace tpt

namespace tpt::parallel {

class LossScaler {
 public:
  // Off until configured.
  LossScaler() = default;
  // On for fp16-mixed (TPT_LOSS_SCALING_AUTO) or when the options say so.
  void configure(const tpt_loss_scaling &options, tpt_precision precision);
  bool on() const { return on_; }
  // The scale (a float32 value, as GradScaler's).
  float scale() const { return scale_; }
  // How the optimizer treats gradients that are not all finite.
  model::Optimizer::LossScaled mode() const {
    return on_ ? model::Optimizer::LossScaled::Yes : model::Optimizer::LossScaled::No;
  }

  // cost x scale; the cost itself when off.
  at::Tensor scaled(const at::Tensor &cost) const;
  // Multiplies each defined gradient in place by 1/scale (GradScaler's
  // inv_scale: the double reciprocal rounded to float32); nothing when off.
  void unscale(const std::vector<at::Tensor> &grads) const;
  void unscale(const at::Tensor &grad) const;
  // Whether every defined tensor of `grads` is finite (one synchronisation).
  static bool all_finite(const std::vector<at::Tensor> &grads);

  // A step's updates, as the optimizers' apply calls returned them (tower
  // 0's for the replicas, which decide alike); then end_step: when one was
  // due (applied or skipped), the scale's update: backoff_factor after a
  // skipped one, else growth_factor after growth_interval applied ones in a
  // row. A hooked step publishes the new scale as the output "loss_scale".
  void record(model::Optimizer::Update u);
  void end_step(Trainer &t, bool hooked);
  // At an epoch's end: the scalars "loss_scale" and "skipped_updates" (in
  // the epoch).
  void after_epoch(Trainer &t);

  // The scale and its growth tracker, as GradScaler's state_dict.
  void save(Checkpoint &ck) const;
  // A resumed run goes on with the checkpoint's scale and growth tracker
  // (the rules stay the options'); a checkpoint without them starts from
  // init_scale.
  void restore(const Checkpoint &ck, Trainer &t);

 private:
  bool on_ = false;
  float scale_ = 65536.0f;
  int64_t growth_tracker_ = 0;
  double growth_factor_ = 2, backoff_factor_ = 0.5;
  int64_t growth_interval_ = 2000;
  int64_t skipped_ = 0;    // skipped updates in the epoch
  bool due_ = false;       // this step: an update was applied or skipped
  bool overflow_ = false;  // this step: one was skipped
};

}  // namespace tpt::parallel
