// What the strategies share about train ops (train/train_ops.hpp).
#include "train/train_ops.hpp"

#include <ATen/core/Tensor.h>

#include <cmath>

#include "base/checkpoint_file.hpp"
#include "base/error.hpp"
#include "model/optimizer.hpp"

namespace tpt::parallel {

std::vector<OpRun> resolve_train_ops(const model::Model &m, const std::vector<model::Variable> &trainables) {
  std::vector<OpRun> ops;
  for (const model::TrainOp &op : m.train_ops()) {
    OpRun r;
    r.op = op;
    for (size_t i = 0; i < trainables.size(); ++i)
      if (trainables[i].name.compare(0, op.scope.size(), op.scope) == 0) {
        r.index.push_back(i);
        r.vars.push_back(trainables[i]);
      }
    if (r.vars.empty())
      invalid_argument("train op '" + op.name + "': no trainable variable's name starts with '" + op.scope + "'");
    if (op.optimizer && op.optimizer == m.optimizer())
      invalid_argument("train op '" + op.name + "' has the model's optimizer, whose slots are the default step's: "
                       "give it an optimizer of its own, or none (a replica of the model's)");
    for (const OpRun &o : ops)
      if (op.optimizer && o.opt == op.optimizer)
        invalid_argument("train ops '" + o.op.name + "' and '" + op.name +
                         "' share an optimizer: give each its own (or none: each gets a replica of the model's)");
    r.replica = !op.optimizer;
    r.opt = op.optimizer ? op.optimizer : m.optimizer()->replica();
    ops.push_back(std::move(r));
  }
  return ops;
}

std::vector<OpRun *> select_train_ops(std::vector<OpRun> &ops, const model::Model &m,
                                      const std::vector<std::string> &names) {
  if (ops.empty()) fail(TPT_ERR_STATE, "the model has no train ops (tpt_model_add_train_op)");
  if (names.empty()) invalid_argument("no train op to run");
  std::vector<OpRun *> selected;
  for (const std::string &n : names) {
    OpRun *found = nullptr;
    for (OpRun &r : ops)
      if (r.op.name == n) found = &r;
    if (!found) {
      std::string known;
      for (const auto &op : m.train_ops()) known += (known.empty() ? "'" : ", '") + op.name + "'";
      invalid_argument("the model has no train op '" + n + "' (it has " + known + ")");
    }
    selected.push_back(found);
  }
  return selected;
}

void save_train_ops(Checkpoint &ck, const std::vector<OpRun> &ops) {
  for (const OpRun &r : ops) ck.train_ops[r.op.name] = r.opt->state(r.vars);
}

void check_train_ops(const Checkpoint &ck, const std::vector<OpRun> &ops) {
  for (const auto &kv : ck.train_ops) {
    bool known = false;
    for (const OpRun &r : ops) known = known || r.op.name == kv.first;
    if (!known) invalid_argument("the checkpoint has the optimizer of a train op '" + kv.first + "' that this model lacks");
  }
  for (const OpRun &r : ops)
    if (auto it = ck.train_ops.find(r.op.name); it != ck.train_ops.end()) r.opt->check_state(it->second, r.vars);
}

void restore_train_ops(const Checkpoint &ck, std::vector<OpRun> &ops) {
  for (OpRun &r : ops)
    if (auto it = ck.train_ops.find(r.op.name); it != ck.train_ops.end()) r.opt->load_state(it->second, r.vars);
}

const at::Tensor &op_cost(const model::Tower &tower, const OpRun &r, int64_t global_step, double *value,
                          std::string *name) {
  *name = r.op.cost.empty() ? "cost" : r.op.cost;
  const at::Tensor *c = r.op.cost.empty() ? (tower.cost() ? &*tower.cost() : nullptr) : tower.output(r.op.cost);
  if (!c)
    fail(TPT_ERR_STATE, "train op '" + r.op.name + "': the tower function did not set " +
                            (r.op.cost.empty() ? std::string("a cost (tpt_tower_set_cost)")
                                               : "the output '" + r.op.cost + "' (tpt_tower_set_output)"));
  if (c->numel() != 1 || c->is_complex())
    invalid_argument("train op '" + r.op.name + "': its cost '" + *name + "' has shape " +
                     shape_text(c->sizes()) + ", not one real number");
  *value = c->item<double>();
  if (r.opt->processing().check_numerics != 0 && !std::isfinite(*value))
    fail(TPT_ERR_BACKEND, "train op '" + r.op.name + "': the cost '" + *name + "' is " + std::to_string(*value) +
                              " at global_step " + std::to_string(global_step));
  if (!c->requires_grad())
    fail(TPT_ERR_STATE, "train op '" + r.op.name + "': the cost '" + *name + "' does not depend on any trainable variable");
  return *c;
}

}  // namespace tpt::parallel
