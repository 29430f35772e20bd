// What the multi-tower strategies share (tensorpack's SyncMultiGPUTrainer*
// and AsyncMultiGPUTrainer): every step each tower takes its own batch from
// the input, the towers run their forward and backward passes at once (tower
// 0 on the training thread, the others on threads of their own), and the
// strategy turns the towers' gradients into an update. A strategy is one
// subclass in its own file: replicated.cpp, parameter_server.cpp, async.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/tower_threads.hpp"
#include "input/input.hpp"
#include "model/model.hpp"
#include "parallel/strategy.hpp"

namespace tpt::parallel {

// One tower's step.
struct TowerResult {
  double cost = 0;
  std::vector<at::Tensor> grads;  // per trainable variable of the tower's store; undefined: not used
  std::vector<std::pair<std::string, at::Tensor>> outputs;  // tower 0's only
};

class MultiTower : public Strategy {
 public:
  MultiTower(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input, TowersOptions options);
  ~MultiTower() override;

  void setup(Trainer &t) override;
  void save(Checkpoint &ck) override;
  void before_train(Trainer &t) override;
  void after_train(Trainer &t) override;
  void run_step(Trainer &t) override;

  int towers() const { return static_cast<int>(o_.devices.size()); }
  // Tower k's variables, all (its replica's in the replicated strategy),
  // once set up; for tests and the towers' own inference.
  const std::vector<model::Variable> &variables_of(int k) const { return all_.at(static_cast<size_t>(k)); }

 protected:
  // The variables tower k reads and differentiates: the model's by default
  // (shared), a replica's in the replicated strategy.
  virtual model::VariableStore &store(int k);
  // After the build and a resume's restore of tower 0, before the input
  // starts: e.g. make the replicas.
  virtual void prepare(Trainer &) {}
  // The update, from every tower's gradients (in tower order).
  virtual void update(Trainer &t, std::vector<TowerResult> &results) = 0;
  // Runs fn(k) for every tower k at once, on the towers' threads (for an
  // update whose parts are per tower).
  void on_towers(const std::function<void(int)> &fn) { threads_.run(fn); }

  std::shared_ptr<model::Model> model_;
  std::unique_ptr<input::Input> input_;
  TowersOptions o_;
  std::vector<model::Variable> vars_;                     // tower 0's (the model's), all
  std::vector<std::vector<model::Variable>> all_;         // per tower, all its variables
  std::vector<std::vector<model::Variable>> trainables_;  // per tower, its trainable ones

 private:
  static void step(Trainer &t, void *self);
  void train_step(Trainer &t);
  void compute(int k, const std::vector<at::Tensor> &batch, TowerResult &r);

  tpt::TowerThreads threads_;
  std::vector<std::vector<at::Tensor>> batches_;
  std::vector<TowerResult> results_;
  int64_t step_ = 0;
};

// The sum over the towers of gradient i, in tower order, times `scale`;
// undefined when no tower has one.
at::Tensor reduce(const std::vector<TowerResult> &results, size_t i, double scale);
// Adds `g` to the variable's gradient (its accumulation across micro-steps).
void add_grad(const at::Tensor &variable, const at::Tensor &g);

}  // namespace tpt::parallel
