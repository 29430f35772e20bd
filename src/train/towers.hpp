// What the multi-tower strategies share (tensorpack's SyncMultiGPUTrainer*
// and AsyncMultiGPUTrainer): every step each tower takes its own batch from
// the input, the towers run their forward and backward passes at once (tower
// 0 on the training thread, the others on threads of their own), and the
// strategy turns the towers' gradients into an update. A strategy is one
// subclass in its own file: replicated.cpp, parameter_server.cpp, async.cpp.
// MultiTower's code is in towers.cpp (lifecycle and step), tower_buckets.cpp
// (gradient buckets) and tower_ops.cpp (train ops).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <atomic>
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

#include "base/tower_threads.hpp"
#include "dist/device_reduce.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "train/input.hpp"
#include "train/single_cost.hpp"
#include "train/strategy.hpp"
#include "train/train_ops.hpp"

namespace tpt::parallel {

// One tower's step.
struct TowerResult {
  double cost = 0;
  // Strategies that do not reduce (async): per trainable variable, the
  // tower's gradient; undefined: not used.
  std::vector<at::Tensor> grads;
  // Tower 0's; the other towers' scalar ones when the scalars are averaged
  // over the towers.
  std::vector<std::pair<std::string, at::Tensor>> outputs;
  // run_ops: per selected op, the tower's gradient of each of the op's
  // variables (undefined: none), the op's cost and its name.
  std::vector<std::vector<at::Tensor>> op_grads;
  std::vector<double> op_costs;
  std::vector<std::string> op_cost_names;
};

class MultiTower : public SingleCost {
 public:
  MultiTower(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input, TowersOptions options);
  ~MultiTower() override;

  void setup(Trainer &t) override;
  void save(Checkpoint &ck) override;
  void before_train(Trainer &t) override;
  void after_train(Trainer &t) override;
  void after_epoch(Trainer &t) override;
  void run_step(Trainer &t) override;
  // tensorpack's MultiGPUGANTrainer: every tower takes its own batch and
  // computes every op's gradients from its one forward pass; each op's
  // gradients are averaged over the towers (and the processes: each op
  // minimises its cost averaged over every tower of the job), then the ops'
  // updates are applied in order, by every replica in the replicated
  // strategy. Not the async strategy.
  void run_ops(Trainer &t, const std::vector<std::string> &ops, bool hooked) override;
  bool runs_train_ops() const override { return reduces(); }
  std::string describe() const override;

  int towers() const { return static_cast<int>(o_.devices.size()); }
  // Tower k's variables, all (its replica's in the replicated strategy),
  // once set up; for tests and the towers' own inference.
  const std::vector<model::Variable> &variables_of(int k) const { return all_.at(static_cast<size_t>(k)); }
  // The flat buckets' variables (indices of the trainable ones, in the order
  // backward is expected to produce them); for tests.
  std::vector<std::vector<size_t>> buckets() const;
  // How many bucket reductions ran inside a backward pass (overlap), in all.
  int64_t reduced_in_backward() const { return in_backward_.load(); }

 protected:
  // The variables tower k updates: the model's by default (shared), a
  // replica's in the replicated strategy.
  virtual model::VariableStore &store(int k);
  // After the build and a resume's restore of tower 0, before the input
  // starts: e.g. make the replicas.
  virtual void prepare(Trainer &) {}
  // Whether the strategy sums the towers' gradients (replicated, parameter
  // server): then reduced(i) is the sum over the towers, in tower order, of
  // gradient i (and over the processes), divided by the towers (of every
  // process) when averages(). Otherwise (async) each tower's
  // gradients are in its TowerResult.
  virtual bool reduces() const { return true; }
  virtual bool averages() const { return true; }
  // Whether every tower updates a replica of its own (the replicated
  // strategy), rather than all sharing the model's variables.
  virtual bool replicates() const { return false; }
  // In update(): trainable variable i's reduced gradient; undefined when no
  // tower has one.
  at::Tensor reduced(size_t i) const;
  // After every epoch (and after rank 0's non-trainable variables reached
  // this process): the replicated strategy copies tower 0's to the replicas;
  // `all`: every variable (rank 0's reached this process before the first
  // step), else the non-trainable ones.
  virtual void resync(bool /*all*/) {}
  // The update, from every tower's gradients.
  virtual void update(Trainer &t, std::vector<TowerResult> &results) = 0;
  // Runs fn(k) for every tower k at once, on the towers' threads (for an
  // update whose parts are per tower).
  void on_towers(const std::function<void(int)> &fn) { threads_.run(fn); }

  TowersOptions o_;
  std::vector<std::vector<model::Variable>> all_;         // per tower, all its variables
  std::vector<std::vector<model::Variable>> trainables_;  // per tower, its trainable ones

 private:
  struct Bucket;
  static void step(Trainer &t, void *self);
  void train_step(Trainer &t);
  void compute(int k, const std::vector<at::Tensor> &batch, TowerResult &r);
  // One call of tower k's function on its share of the batch, for compute()
  // and compute_ops(): the mirror refreshed and the batch moved to the
  // tower's device first, tower k's generator, then `grads` with the tower
  // (its cost and outputs), then the outputs kept in r (tower 0's, and every
  // tower's scalar ones when they are averaged); errors named "tower<k>: ".
  void forward(int k, const std::vector<at::Tensor> &batch, TowerResult &r,
               const std::function<void(model::Tower &)> &grads);
  void make_leaves();
  void make_buckets();
  // Tower k's gradient of trainable variable i has arrived in its leaf (an
  // autograd hook, during backward) or will not come (after backward).
  void arrived(int k, size_t i);
  void missing(int k, size_t i);
  void ready(size_t i, bool in_backward);
  void reduce_bucket(Bucket &b);
  void finish_across();  // waits for the buckets' all-reduces across the processes
  void broadcast_variables(bool all);  // rank 0's: all, or the non-trainable ones
  // Before every step: the first one of a run makes every replica (and, in a
  // job, every rank) equal to rank 0's tower 0 as it is then; later ones
  // copy tower 0's variables to the replicas again when they were changed
  // through the model (tpt_model_set_variable, a restore) since.
  void sync_replicas();
  // Tower k's generator for this step's call (a random op's draws follow
  // from the run's seed, the rank, the tower, the step and the call).
  at::Generator generator_for(int k);
  void next_call();  // a new call of the towers at step_
  // publish_step() of tower 0's cost and outputs, or (average_towers) of the cost
  // and scalar outputs averaged over the towers, in tower order. `cost_of`
  // gives a tower's cost (nullptr: the step has none).
  void publish_towers(Trainer &t, const std::function<const double *(const TowerResult &)> &cost_of);
  // run_ops
  static void ops_step(Trainer &t, void *self);
  void ops_body(Trainer &t, bool hooked);
  void compute_ops(int k, const std::vector<at::Tensor> &batch, TowerResult &r);
  void reduce_op_across(std::vector<at::Tensor> &g, const OpRun &r);
  // Tower 0's update (every replica decides alike).
  model::Optimizer::Update apply_op(Trainer &t, size_t op, std::vector<at::Tensor> &g);
  // The replicated strategy: per op, towers 1..N-1's optimizers; per op, per
  // tower, the op's variables in that tower's replica.
  std::vector<std::vector<std::shared_ptr<model::Optimizer>>> op_optimizers_;
  std::vector<std::vector<std::vector<model::Variable>>> op_vars_;

  tpt::TowerThreads threads_;
  std::vector<std::vector<at::Tensor>> batches_;
  std::vector<TowerResult> results_;
  int64_t step_ = 0;
  // Each tower computes with stores of its own whose trainable variables are
  // leaves of their own (sharing the variables' memory), so its backward
  // pass fills gradients no other tower and no optimizer touches.
  // A tower on another device than its variables (a CUDA tower: the
  // variables stay on the CPU, which is the parameter server, and the
  // checkpoints' and the inference's copy) computes on a mirror of them on
  // its device, refreshed at the start of every step; tower 0's non-trainable
  // variables (BatchNorm's statistics) are copied back after its step.
  bool mirrored(int k) const { return !mirrors_.empty() && !mirrors_[static_cast<size_t>(k)].empty(); }
  void refresh_mirror(int k);
  void write_back_mirror(int k);
  std::vector<std::vector<std::pair<at::Tensor, at::Tensor>>> mirrors_;  // per tower: (variable, its mirror)
  std::vector<std::unique_ptr<model::VariableStore>> leaf_stores_;
  std::vector<std::vector<at::Tensor>> leaves_;  // per tower, per trainable variable
  std::vector<std::vector<char>> has_;           // per tower, per trainable: a gradient this step
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::pair<size_t, int64_t>> slot_;  // per trainable: its bucket and offset
  std::vector<std::shared_ptr<void>> hooks_;      // the leaves' gradient accumulators, kept alive
  std::atomic<int64_t> in_backward_{0};
  // Several processes: the buckets' all-reduces across them start in bucket
  // order (every rank must start its collectives in the same order).
  std::mutex launch_mu_;
  size_t next_launch_ = 0;
  bool synced_ = false;  // rank 0's variables broadcast (before the first step)
  uint64_t generation_ = 0;  // the model's generation() the replicas were made equal at
  // The towers' own generators (a CPU generator per CPU tower; a private
  // copy of its device's default one for a tower on a device), reseeded for
  // every call from seed_ (LibTorch's CPU seed when the first step starts,
  // the checkpoint's on resume, rank 0's in a job), the rank, the tower, the step and the
  // call in it: draws reproducible whatever the threads' timing, and exact
  // after a resume without saving any generator's state.
  uint64_t seed_ = 0;
  bool seed_from_checkpoint_ = false;
  std::vector<at::Generator> gens_;
  int64_t gen_step_ = -1;
  int64_t gen_call_ = 0;  // calls of the towers within the step gen_step_
  // Every tower on a CUDA device of its own, in a build with NCCL: the
  // buckets live on the towers' devices and NCCL sums them.
  std::unique_ptr<dist::DeviceAllReduce> device_reduce_;
};


}  // namespace tpt::parallel
