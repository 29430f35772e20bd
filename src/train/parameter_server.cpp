// tensorpack's SyncMultiGPUTrainerParameterServer: the towers share the
// model's variables (on the CPU, the parameter server); each computes the
// gradients of its own batch, their average (summed in tower order, times
// 1/N) is applied once.
#include <ATen/core/Tensor.h>

#include "model/optimizer.hpp"
#include "train/towers.hpp"

namespace tpt::parallel {

namespace {

class ParameterServer final : public MultiTower {
 public:
  using MultiTower::MultiTower;

 protected:
  void update(Trainer &t, std::vector<TowerResult> &) override {
    const auto &vars = trainables_[0];
    const size_t n = vars.size(), step = static_cast<size_t>(towers());
    on_towers([&](int k) {  // the average is in the buckets already
      for (size_t i = static_cast<size_t>(k); i < n; i += step) add_grad(vars[i].value, reduced(i));
    });
    scaler_.record(model_->optimizer()->apply(all_[0], t.global_step(), scaler_.mode()));
  }
};

}  // namespace

std::shared_ptr<Strategy> parameter_server(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
                                           TowersOptions options) {
  return std::make_shared<ParameterServer>(std::move(model), std::move(input), std::move(options));
}

}  // namespace tpt::parallel
