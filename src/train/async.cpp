// tensorpack's AsyncMultiGPUTrainer: shared variables; every tower's
// gradients, scaled by 1/N (scale_gradient), are applied as an update of
// their own, with no averaging across towers: N updates per step, in tower
// order (tensorpack leaves their order to TensorFlow). With one tower it is
// the simple trainer.
#include <ATen/core/Tensor.h>

#include "model/optimizer.hpp"
#include "train/towers.hpp"

namespace tpt::parallel {

namespace {

class Async final : public MultiTower {
 public:
  using MultiTower::MultiTower;

 protected:
  bool reduces() const override { return false; }

  void update(Trainer &t, std::vector<TowerResult> &results) override {
    const auto &vars = trainables_[0];
    const double scale = 1.0 / towers();
    // Loss scaling: one decision for the step; when a tower's gradients
    // overflowed, every tower's update is skipped.
    model::Optimizer::LossScaled scaled = scaler_.mode();
    if (scaler_.on()) {
      std::vector<at::Tensor> all;
      for (const auto &r : results) all.insert(all.end(), r.grads.begin(), r.grads.end());
      if (!LossScaler::all_finite(all)) scaled = model::Optimizer::LossScaled::Overflowed;
    }
    for (auto &r : results) {
      for (size_t i = 0; i < vars.size() && i < r.grads.size(); ++i) {
        if (!r.grads[i].defined()) continue;
        scaler_.unscale(r.grads[i]);
        if (scale != 1.0) r.grads[i].mul_(scale);
        // A tower on another device hands its gradients to the variables' device.
        const at::Tensor &v = vars[i].value;
        add_grad(v, r.grads[i].device() == v.device() ? r.grads[i] : r.grads[i].to(v.device()));
      }
      scaler_.record(model_->optimizer()->apply(all_[0], t.global_step(), scaled));
    }
  }
};

}  // namespace

std::shared_ptr<Strategy> async(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
                                TowersOptions options) {
  return std::make_shared<Async>(std::move(model), std::move(input), std::move(options));
}

}  // namespace tpt::parallel
