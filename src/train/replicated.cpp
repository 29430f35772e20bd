// tensorpack's SyncMultiGPUTrainerReplicated: a persistent replica of every
// variable per tower (tower 0's are the model's), copied from tower 0 when
// training starts; the towers' gradients are all-reduced (summed in tower
// order, averaged unless told otherwise) and every replica applies the same
// update with an optimizer of its own, so the replicas stay identical. Model
// variables that only tower 0 updates (BatchNorm's moving statistics) are
// copied to the replicas after every epoch. Checkpoints hold tower 0's.
#include <ATen/core/grad_mode.h>
#include <ATen/core/Tensor.h>

#include "base/checkpoint_file.hpp"
#include "model/optimizer.hpp"
#include "train/towers.hpp"

namespace tpt::parallel {

namespace {

class Replicated final : public MultiTower {
 public:
  using MultiTower::MultiTower;

 protected:
  model::VariableStore &store(int k) override {
    return k == 0 ? model_->variables() : *replicas_[static_cast<size_t>(k - 1)];
  }

  void prepare(Trainer &t) override {
    replicas_.clear();
    optimizers_.clear();
    const Checkpoint *ck = t.resume_checkpoint();
    at::NoGradGuard no_grad;
    for (int k = 1; k < towers(); ++k) {
      auto s = std::make_unique<model::VariableStore>();
      for (const auto &v : vars_) {
        at::Tensor copy = v.value.detach().clone();
        if (v.trainable) copy.requires_grad_(true);
        s->adopt(v.name, copy, v.trainable);
      }
      auto opt = model_->optimizer()->replica();
      if (ck && ck->optimizer) opt->load_state(*ck->optimizer, s->all());
      replicas_.push_back(std::move(s));
      optimizers_.push_back(std::move(opt));
    }
  }

  bool averages() const override { return o_.average; }
  bool replicates() const override { return true; }

  // The gradients are all-reduced already (the buckets); every tower applies
  // the update to its own replica, all at once.
  void update(Trainer &t, std::vector<TowerResult> &) override {
    const size_t n = trainables_[0].size();
    const int64_t step = t.global_step();
    g_.assign(n, at::Tensor());
    for (size_t i = 0; i < n; ++i) g_[i] = reduced(i);
    model::Optimizer &main = *model_->optimizer();
    for (int k = 1; k < towers(); ++k) optimizers_[static_cast<size_t>(k - 1)]->follow(main);
    // Every replica checks the same reduced gradients: they skip together.
    model::Optimizer::Update first = model::Optimizer::Update::Accumulated;
    on_towers([&](int k) {
      at::NoGradGuard no_grad;
      model::Optimizer &opt = k == 0 ? main : *optimizers_[static_cast<size_t>(k - 1)];
      const auto &vars = trainables_[static_cast<size_t>(k)];
      // g_ is read by every tower at once: a replica's gradient never aliases it.
      for (size_t i = 0; i < n; ++i) {
        if (!g_[i].defined()) continue;
        at::Tensor &grad = const_cast<at::Tensor &>(vars[i].value).mutable_grad();
        if (grad.defined()) grad.add_(g_[i]);
        else grad = g_[i].clone();
      }
      const model::Optimizer::Update u = opt.apply(all_[static_cast<size_t>(k)], step, scaler_.mode());
      if (k == 0) first = u;
    });
    scaler_.record(first);
    g_.clear();
  }

  // tensorpack's SyncVariables after every epoch: model variables (not
  // trainable) from tower 0 to the others; all of them once rank 0's reached
  // this process.
  void resync(bool all) override {
    at::NoGradGuard no_grad;
    for (int k = 1; k < towers(); ++k) {
      const auto &mine = all_[static_cast<size_t>(k)];
      for (size_t i = 0; i < vars_.size() && i < mine.size(); ++i)
        if (all || !vars_[i].trainable) mine[i].value.copy_(vars_[i].value);
    }
  }

 private:
  std::vector<std::unique_ptr<model::VariableStore>> replicas_;  // towers 1..N-1
  std::vector<std::shared_ptr<model::Optimizer>> optimizers_;    // theirs
  std::vector<at::Tensor> g_;                                     // the step's reduced gradients
};

}  // namespace

std::shared_ptr<Strategy> replicated(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
                                     TowersOptions options) {
  return std::make_shared<Replicated>(std::move(model), std::move(input), std::move(options));
}

}  // namespace tpt::parallel
