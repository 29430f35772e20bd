// What the simple trainer and the towers share (tensorpack's
// SingleCostTrainer): one model with one cost and its train ops, fed by one
// input; building the model, restoring a resumed checkpoint's part of it,
// saving it, and the input's lifecycle. simple.cpp and towers.cpp derive
// from it; train/strategy.cpp defines it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "train/loss_scale.hpp"
#include "train/input.hpp"
#include "train/strategy.hpp"
#include "train/train_ops.hpp"

namespace tpt::parallel {

class SingleCost : public Strategy {
 public:
  // The model's variables, the optimizer's state, the train ops' and the
  // input's position.
  void save(Checkpoint &ck) override;
  void before_train(Trainer &) override { input_->before_train(); }
  void after_train(Trainer &) override { input_->after_train(); }
  void after_epoch(Trainer &t) override { scaler_.after_epoch(t); }

 protected:
  SingleCost(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input)
      : model_(std::move(model)), input_(std::move(input)) {}
  // SETUP's common part: checks the optimizer, builds the model, fixes its
  // variables (only the build call creates any), resolves the train ops and,
  // when the trainer resumes, restores their part of the checkpoint (every
  // check before anything changes). Returns that checkpoint (nullptr: none).
  // `cpu_towers`: whether a tower computes on the CPU (for the precision's
  // check: bfloat16 without the CPU's native support is slow, and said so).
  const Checkpoint *setup_model(Trainer &t, bool cpu_towers);
  // The log's first line about the training: the strategy, its towers and
  // their devices, the rank.
  virtual std::string describe() const = 0;

  std::shared_ptr<model::Model> model_;
  std::unique_ptr<input::Input> input_;
  std::vector<model::Variable> vars_;  // the model's (tower 0's), all
  std::vector<OpRun> ops_;
  std::vector<OpRun *> selected_;      // the running run_ops' ops
  tpt_precision precision_ = TPT_PRECISION_FP32;  // the trainer's, for every tower call
  LossScaler scaler_;                               // the trainer's loss scaling
};

}  // namespace tpt::parallel
