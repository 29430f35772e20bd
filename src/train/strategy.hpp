// How the loop trains a model: a strategy sets the towers up and runs one
// step. The loop (src/loop) knows a strategy only through attach(); a new
// strategy (replicated, parameter server, async, distributed) is a new file
// here, not an edit of the loop.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loop/trainer.hpp"

namespace at {
class Tensor;
}
namespace tpt {
struct Checkpoint;
}
namespace tpt::model {
class Model;
class Optimizer;
struct Variable;
}
namespace tpt::input {
class Input;
}
namespace tpt::dist {
class World;
}

namespace tpt::parallel {

// A strategy's part of a checkpoint (Stateful::save): the model's
// variables, the optimizer's state and the input's position. When the
// trainer resumes, setup() restores that part after the build call and
// before the input starts (all checked before anything changes).
class Strategy : public Stateful {
 public:
  // At the trainer's SETUP: build the towers (the model's build call).
  virtual void setup(Trainer &trainer) = 0;
  // One run_step.
  virtual void run_step(Trainer &trainer) = 0;
  // At BEFORE_TRAIN (start input threads) and AFTER_TRAIN (join them; also
  // after a failure).
  virtual void before_train(Trainer &) {}
  virtual void after_train(Trainer &) {}
  // At AFTER_EPOCH (the replicated strategy re-syncs model variables).
  virtual void after_epoch(Trainer &) {}
  // A custom trainer's run_step (tensorpack's hooked_sess.run(ops)): one
  // forward pass on the input's next batch, then the model's train ops
  // `ops` (by name), in order: each op's cost's gradients over its
  // variables, all computed from that pass, then each op's update. As a
  // hooked step (BEFORE_RUN / AFTER_RUN, global_step + 1) or raw.
  virtual void run_ops(Trainer &t, const std::vector<std::string> &ops, bool hooked);
  // Whether run_ops is supported (checked before training where it helps).
  virtual bool runs_train_ops() const { return false; }
};

// Makes `strategy` the trainer's run_step and hooks its setup, before_train
// and after_train into the loop (as a trainer callback, ahead of the user's
// callbacks); it is the trainer's Stateful for checkpoints.
void attach(Trainer &trainer, std::shared_ptr<Strategy> strategy);

// tensorpack's SimpleTrainer: one tower, one batch per step.
std::shared_ptr<Strategy> simple(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input);

// Several towers, each taking its own batch from the input every step
// (src/train/towers.hpp has the machinery they share).
enum class Kind { Simple = 0, Replicated = 1, ParameterServer = 2, Async = 3 };
struct TowersOptions {
  Kind kind = Kind::Replicated;
  std::vector<c10::Device> devices;  // one per tower
  bool average = true;               // replicated: average the gradients, or sum them
  int intra_op_threads = 0;          // per CPU tower; 0: the process's threads / towers, at least 1
  bool overlap = true;               // reduce each bucket as soon as its gradients are ready
  int64_t bucket_bytes = 1 << 20;    // the flat buckets' size
  // Several processes (tensorpack's HorovodTrainer, one World per
  // process): every bucket's sum over this process's towers is also summed
  // over the processes, and rank 0's variables are broadcast when training
  // starts and its non-trainable ones after every epoch. nullptr: one process.
  std::shared_ptr<dist::World> world;
  bool average_scalars = false;  // with a world: the cost and scalar outputs averaged over the processes
  bool average_towers = false;   // the cost and scalar outputs averaged over the towers (else tower 0's)
  // Tests: run CPU towers the way towers on other devices run (each
  // computing on a copy of its variables, refreshed every step).
  bool mirror_cpu_towers = false;
};
// tensorpack's SyncMultiGPUTrainerReplicated, SyncMultiGPUTrainerParameterServer
// and AsyncMultiGPUTrainer; Kind::Simple with one tower is simple().
std::shared_ptr<Strategy> make_strategy(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
                                        TowersOptions options);
std::shared_ptr<Strategy> replicated(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
                                     TowersOptions options);
std::shared_ptr<Strategy> parameter_server(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
                                           TowersOptions options);
std::shared_ptr<Strategy> async(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
                                TowersOptions options);

// Several processes, one World each (tensorpack's HorovodTrainer).
struct Distributed {
  std::shared_ptr<dist::World> world;
  // Each process takes every world_size-th batch of the input (rank r the
  // r-th of every world_size batches: the job's towers take the batches in
  // the order one process's towers would); false: the input is already this
  // process's share.
  bool shard = true;
  bool average_scalars = false;  // TowersOptions::average_scalars
};

// tensorpack's launch_train_with_config, the part that chooses the trainer:
// `input` takes the model's signature, the trainer's default steps_per_epoch
// becomes the input's size (divided by the towers: an epoch counts steps),
// and the strategy (the simple one without `towers`, else make_strategy)
// becomes the trainer's run_step. With `distributed` the trainer is one
// rank of the job (Trainer::set_distributed; its resume is the chief's) and
// the strategy the towers' (one replicated tower without `towers`) summing
// across the processes. Before the trainer runs.
void train(Trainer &trainer, std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
           const std::optional<TowersOptions> &towers, const std::optional<Distributed> &distributed = std::nullopt);

// tensorpack's GANTrainer and SeparateGANTrainer (its examples/GAN): the
// model's train ops `g_op` and `d_op` (made when the model lacks them: the
// tower's outputs "g_loss" and "d_loss" over the variables under "gen/" and
// "discrim/", each with a replica of the model's optimizer) run by the
// strategy's run_ops. GANTrainer: every run_step is one hooked run of
// G's then D's update from one forward pass. SeparateGANTrainer: D's hooked
// run when global_step % d_period == 0, then G's when global_step %
// g_period == 0 (global_step as it is then: one run_step may make two
// hooked runs); one of the periods is 1.
struct GanOptions {
  std::string g_op = "g_op", d_op = "d_op";
  bool separate = false;
  int64_t d_period = 1, g_period = 1;
};
// With `towers` (replicated or parameter server) or `distributed`: tensorpack's
// MultiGPUGANTrainer, each op's gradients averaged over every tower (run_ops).
void gan(Trainer &trainer, std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
         const GanOptions &options, const std::optional<TowersOptions> &towers = std::nullopt,
         const std::optional<Distributed> &distributed = std::nullopt);

// Publishes a step's cost (when there is one) and outputs: the step outputs
// "cost" and each output's name, and the moving summaries of the cost and of
// the scalar outputs; with `average_over`, the scalars are first averaged
// over its processes (the towers' average_scalars). Every strategy's step
// publishes through this.
void publish_step(Trainer &t, const double *cost, const std::vector<std::pair<std::string, at::Tensor>> &outputs,
                  dist::World *average_over = nullptr);

// Adds `g` to the variable's gradient (its accumulation across micro-steps;
// undefined `g`: nothing).
void add_grad(const at::Tensor &variable, const at::Tensor &g);

// What every strategy saves: tower 0's variables (the model's), the
// optimizer's state and the input's position (none for a feed function).
void save_checked(Checkpoint &ck, const std::vector<model::Variable> &vars, input::Input &input,
                  model::Optimizer &optimizer);
// What every strategy's restore does with tower 0's part of a checkpoint:
// checks every variable (names, shapes, dtypes; all or nothing), then the
// input's state, then the optimizer's, then copies the variables.
void restore_checked(const Checkpoint &ck, const std::vector<model::Variable> &vars, input::Input &input,
                     model::Optimizer &optimizer);

}  // namespace tpt::parallel
