// How the loop trains a model: a strategy sets the towers up and runs one
// step. The loop (src/core) knows a strategy only through attach(); a new
// strategy (replicated, parameter server, async, distributed) is a new file
// here, not an edit of the loop.
#pragma once

#include <memory>

#include "core/trainer.hpp"

namespace tpt {
struct Checkpoint;
}
namespace tpt::model {
class Model;
}
namespace tpt::input {
class Input;
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
};

// Makes `strategy` the trainer's run_step and hooks its setup, before_train
// and after_train into the loop (as a trainer callback, ahead of the user's
// callbacks); it is the trainer's Stateful for checkpoints.
void attach(Trainer &trainer, std::shared_ptr<Strategy> strategy);

// tensorpack's SimpleTrainer: one tower, one batch per step.
std::shared_ptr<Strategy> simple(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input);

}  // namespace tpt::parallel
