// A model's train ops as a strategy runs them (tpt_model_add_train_op):
// each op's variables (by scope prefix) and optimizer (its own, or a
// replica that follows the model's), resolved when training starts; what
// the simple and the multi-tower strategies share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model.hpp"

namespace at {
class Tensor;
}
namespace tpt {
struct Checkpoint;
}

namespace tpt::parallel {

struct OpRun {
  model::TrainOp op;
  std::vector<size_t> index;          // the op's variables' positions among the trainable ones
  std::vector<model::Variable> vars;  // the model's (tower 0's)
  std::shared_ptr<model::Optimizer> opt;
  bool replica = false;  // the model's optimizer's replica: follows its hyper-parameters
};

// The model's train ops over `trainables` (the model's trainable variables,
// in order), checked: every op has variables and an optimizer of its own.
std::vector<OpRun> resolve_train_ops(const model::Model &m, const std::vector<model::Variable> &trainables);

// The ops named, in order; an unknown name is an error naming the model's ops.
std::vector<OpRun *> select_train_ops(std::vector<OpRun> &ops, const model::Model &m,
                                      const std::vector<std::string> &names);

// Each op's optimizer state, by op name.
void save_train_ops(Checkpoint &ck, const std::vector<OpRun> &ops);
// Checks that the checkpoint has no op the model lacks and that each op's
// state fits its optimizer (changing nothing); call before any restore.
void check_train_ops(const Checkpoint &ck, const std::vector<OpRun> &ops);
void restore_train_ops(const Checkpoint &ck, std::vector<OpRun> &ops);

// The op's cost in a tower that has run, checked (one real element that
// depends on a trainable variable, finite unless check_numerics is 0); its
// value in *value and its name ("cost" for the tower's cost) in *name.
const at::Tensor &op_cost(const model::Tower &tower, const OpRun &r, int64_t global_step, double *value,
                          std::string *name);

}  // namespace tpt::parallel
