// Models: the input signature, the tower function, the variable store and
// the tower context (tensorpack's ModelDesc, TowerContext and get_variable
// with its reuse rules).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/SmallVector.h>

#include <functional>
#include <atomic>
#include <map>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/shape_text.hpp"
#include "tptrain/tower.h"
#include "tptrain/trainer.h"

namespace tpt::model {

class Model;
class Optimizer;

struct InputSpec {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;  // -1: free
};

struct VariableOptions {
  c10::ScalarType dtype = c10::ScalarType::Float;
  tpt_init init = TPT_INIT_GLOROT_UNIFORM;
  bool trainable = true;
  double a = 0, b = 0;
};

// A new variable's value: `shape` of `opts.dtype`, filled by `opts.init`
// (from LibTorch's default generator), requiring gradients when trainable.
// Throws TPT_ERR_INVALID_ARGUMENT for bad initializer parameters.
at::Tensor new_variable(c10::IntArrayRef shape, const VariableOptions &opts);

struct Variable {
  std::string name;
  at::Tensor value;
  bool trainable;
};

// Every variable of a model, in creation order. Thread-safe: towers on
// several threads look variables up at once.
class VariableStore {
 public:
  // The variable, creating it when `may_create`. Throws on the rule violations.
  // *index (if given) receives the variable's index in creation order.
  at::Tensor get(const std::string &name, c10::IntArrayRef shape, const VariableOptions &opts, bool may_create,
                 size_t *index = nullptr);
  // Registers an existing tensor as a variable (TorchScript parameters).
  void adopt(const std::string &name, const at::Tensor &value, bool trainable);
  // A copy (the store may grow on another thread while the caller reads it).
  std::optional<Variable> find(const std::string &name) const;
  std::vector<Variable> all() const;
  std::vector<at::Tensor> trainables() const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<Variable> vars_;
  std::unordered_map<std::string, size_t> index_;
};

// The context of one call of the tower function.
class Tower {
 public:
  // `store`: where the tower's variables are (a replica's; nullptr: the model's).
  Tower(Model &model, std::string name, int index, bool training, bool building, c10::Device device,
        VariableStore *store = nullptr);

  Model &model() const { return model_; }
  const std::string &name() const { return name_; }
  int index() const { return index_; }
  bool is_training() const { return training_; }
  bool is_building() const { return building_; }
  bool can_create_variables() const { return building_; }
  const c10::Device &device() const { return device_; }
  // The variables this call computes with: a replica's or a tower's own
  // leaves under the multi-tower strategies, the model's otherwise. Whatever
  // reads variables inside a tower function (tpt_regularize_l2, a variable
  // read by name) reads them here, so that its gradients reach this tower.
  VariableStore &store() const { return store_; }
  // The generator the call's random operations draw from (dropout, random
  // ATen operators): nullptr for LibTorch's default one (the simple
  // trainer, the build call, inference); a tower's own under the
  // multi-tower strategies (src/train/towers.cpp), so that towers on
  // threads draw reproducibly.
  const at::Generator *generator() const { return generator_ ? &*generator_ : nullptr; }
  void set_generator(at::Generator g) { generator_ = std::move(g); }
  // The arithmetic of the call (tpt_trainer_options.precision): under a
  // mixed mode Model::call runs the tower function inside autocast on the
  // tower's device. The trainer's strategies and inference runners set it;
  // the build call and a plain Model::infer keep float32.
  tpt_precision precision() const { return precision_; }
  void set_precision(tpt_precision p) { precision_ = p; }

  at::Tensor variable(const std::string &name, c10::IntArrayRef shape, const VariableOptions &opts);
  // reuse: tensorpack's auto_reuse_variable_scope: a variable under the
  // scope may be used again in this call (a net applied twice shares its
  // variables); elsewhere a second use of a name is an error.
  void push_scope(const std::string &scope, bool reuse = false);
  void pop_scope();
  std::string scoped(const std::string &name) const;

  void set_cost(const at::Tensor &cost);
  void set_output(const std::string &name, const at::Tensor &value);
  const std::optional<at::Tensor> &cost() const { return cost_; }
  const std::vector<std::pair<std::string, at::Tensor>> &outputs() const { return outputs_; }
  const at::Tensor *output(const std::string &name) const;

 private:
  Model &model_;
  VariableStore &store_;
  std::string name_;
  int index_;
  bool training_, building_;
  c10::Device device_;
  std::string prefix_;              // the scopes joined, each followed by '/'
  // Kept inline: a tower call runs every step, and these are a handful.
  c10::SmallVector<size_t, 8> scope_ends_;  // prefix_'s length before each scope
  c10::SmallVector<bool, 8> scope_reuse_;   // each scope's reuse flag
  int reuse_depth_ = 0;                     // the open scopes that allow reuse
  c10::SmallVector<size_t, 32> used_;       // indices of the variables used in this call
  std::optional<at::Tensor> cost_;
  std::vector<std::pair<std::string, at::Tensor>> outputs_;
  std::optional<at::Generator> generator_;
  tpt_precision precision_ = TPT_PRECISION_FP32;
};

// The innermost tower call running on this thread (of any model), or
// nullptr: what a function without a tower argument (tpt_op_call, a
// variable read by name) consults to act on the running tower.
Tower *current_tower();

using TowerFn = std::function<void(Tower &, const std::vector<at::Tensor> &)>;

// A named optimisation step (tensorpack's opt.minimize(cost, var_list)):
// the tower's output `cost` ("": the tower's cost) minimised over the
// trainable variables whose names start with `scope` ("": all of them) by
// `optimizer` (nullptr: a replica of the model's, following its
// hyper-parameters). A custom trainer's run_step runs train ops by name.
struct TrainOp {
  std::string name, cost, scope;
  std::shared_ptr<Optimizer> optimizer;
};

class Model {
 public:
  Model(std::vector<InputSpec> inputs, TowerFn fn);
  // A model whose variables already exist (no build call), e.g. TorchScript.
  Model(std::vector<InputSpec> inputs, TowerFn fn, bool prebuilt) : Model(std::move(inputs), std::move(fn)) {
    built_ = prebuilt;
  }

  // Saves the model where that means something (TorchScript); set by its maker.
  std::function<void(const std::string &path)> saver;
  // The tower function computes with parameters of its own (a TorchScript
  // module's), not with the tower's variables: towers cannot swap them.
  bool own_parameters = false;
  ~Model();

  const std::vector<InputSpec> &inputs() const { return inputs_; }
  VariableStore &variables() { return store_; }
  const VariableStore &variables() const { return store_; }

  // The build call, once (thread-safe).
  void build();
  bool built() const;

  // Throws TPT_ERR_INVALID_ARGUMENT when a batch does not fit the signature.
  void check_inputs(const std::vector<at::Tensor> &batch) const;

  // Runs the tower function in `tower` on `batch` (under autocast when the
  // tower's precision is a mixed one).
  void call(Tower &tower, const std::vector<at::Tensor> &batch);

  // Inference: no gradients, no variable changes; returns the tower's
  // outputs. Thread-safe (the data-parallel runner's towers call it at once).
  // `precision`: the trainer's, for its inference runners.
  std::vector<at::Tensor> infer(const std::vector<at::Tensor> &batch, const std::vector<std::string> &names,
                                const std::string &tower_name = "InferenceTower",
                                tpt_precision precision = TPT_PRECISION_FP32);

  void set_optimizer(std::shared_ptr<Optimizer> opt);
  const std::shared_ptr<Optimizer> &optimizer() const { return optimizer_; }
  // Train ops, by unique name, before training; in the order added.
  void add_train_op(TrainOp op);
  const std::vector<TrainOp> &train_ops() const { return train_ops_; }
  const TrainOp *train_op(const std::string &name) const;

  // Copies `value` into variable `name` (shape must match).
  void assign(const std::string &name, const at::Tensor &value);
  // Variable `name` as the caller sees it: inside one of this model's tower
  // calls on this thread, that tower's (a replica's under the replicated
  // strategy), else the model's.
  std::optional<Variable> find_variable(const std::string &name) const;
  // Bumped by every change of the variables' values through the model
  // (assign, restores): strategies that keep replicas copy tower 0's to them
  // before their next step when it moved.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  void touch() { generation_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  std::vector<InputSpec> inputs_;
  TowerFn fn_;
  VariableStore store_;
  std::shared_ptr<Optimizer> optimizer_;
  std::vector<TrainOp> train_ops_;
  mutable std::mutex build_mu_;
  std::atomic<bool> built_{false};
  std::atomic<uint64_t> generation_{0};
  // Whether this thread is inside one of this model's tower calls.
  bool running_here() const;
  void refuse_reentry(const char *what) const;
};

}  // namespace tpt::model
