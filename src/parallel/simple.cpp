// The simple (single-tower) strategy, and attach().
#include <ATen/core/grad_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

#include <memory>
#include <utility>

#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "core/trainer.hpp"
#include "input/input.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "parallel/strategy.hpp"
#include "parallel/train_ops.hpp"

namespace tpt::parallel {

namespace {

class StrategySetup final : public Callback {
 public:
  explicit StrategySetup(std::shared_ptr<Strategy> s) : Callback("TowerSetup", false), s_(std::move(s)) {}
  uint32_t events() const override {
    return TPT_EVENT_SETUP | TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_AFTER_EPOCH | TPT_EVENT_AFTER_TRAIN;
  }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    if (e == TPT_EVENT_SETUP) s_->setup(t);
    else if (e == TPT_EVENT_BEFORE_TRAIN) s_->before_train(t);
    else if (e == TPT_EVENT_AFTER_EPOCH) s_->after_epoch(t);
    else if (e == TPT_EVENT_AFTER_TRAIN) s_->after_train(t);
  }

 private:
  std::shared_ptr<Strategy> s_;
};

class Simple final : public Strategy {
 public:
  Simple(std::shared_ptr<model::Model> m, std::unique_ptr<input::Input> in) : model_(std::move(m)), input_(std::move(in)) {}

  void setup(Trainer &t) override {
    if (!model_->optimizer()) fail(TPT_ERR_STATE, "the model has no optimizer (tpt_model_set_optimizer)");
    model_->build();
    vars_ = model_->variables().all();  // fixed once built: variables are only created in the build call
    resolve_ops();
    if (const Checkpoint *ck = t.resume_checkpoint()) restore(*ck);
    input_->setup();
  }

  void save(Checkpoint &ck) override {
    save_checked(ck, vars_, *input_, *model_->optimizer());
    save_train_ops(ck, ops_);
  }

  void restore(const Checkpoint &ck) {
    check_train_ops(ck, ops_);
    restore_checked(ck, vars_, *input_, *model_->optimizer());
    restore_train_ops(ck, ops_);
  }

  bool runs_train_ops() const override { return true; }

  void run_ops(Trainer &t, const std::vector<std::string> &names, bool hooked) override {
    selected_ = select_train_ops(ops_, *model_, names);
    if (hooked) t.hooked_step(&Simple::ops_step, this);
    else ops_body(t, false);
  }

  void before_train(Trainer &) override { input_->before_train(); }
  void after_train(Trainer &) override { input_->after_train(); }

  void run_step(Trainer &t) override { t.hooked_step(&Simple::step, this); }

 private:
  static void step(Trainer &t, void *self) { static_cast<Simple *>(self)->train_step(t); }

  void train_step(Trainer &t) {
    std::vector<at::Tensor> batch = input_->next();
    input_->after_step(t);  // the input's own moving summaries (the queue's fill)
    model_->check_inputs(batch);
    model::Tower tower(*model_, "tower0", 0, /*training=*/true, /*building=*/false, c10::Device(c10::kCPU));
    model_->call(tower, batch);
    if (!tower.cost()) fail(TPT_ERR_STATE, "the tower function did not set a cost (tpt_tower_set_cost)");
    const at::Tensor &cost = *tower.cost();
    cost_ = cost.item<double>();
    model::Optimizer &opt = *model_->optimizer();
    if (opt.processing().check_numerics != 0 && !std::isfinite(cost_))
      fail(TPT_ERR_BACKEND, "the cost is " + std::to_string(cost_) + " at global_step " + std::to_string(t.global_step()));
    if (!cost.requires_grad())
      fail(TPT_ERR_STATE, "the cost does not depend on any trainable variable (nothing to train)");
    cost.backward();
    opt.apply(vars_, t.global_step());
    Output c;
    c.scalar = cost_;
    t.set_output("cost", std::move(c));
    // tensorpack's add_moving_summary of the cost and of the tower's scalar
    // outputs: moving averages that MergeAllSummaries puts once per epoch.
    t.add_moving_summary("cost", cost_);
    for (const auto &[name, value] : tower.outputs()) {
      Output o;
      o.tensor = std::make_shared<const at::Tensor>(value.detach());
      t.set_output(name, std::move(o));
      if (value.numel() == 1 && !value.is_complex()) t.add_moving_summary(name, value.item<double>());
    }
  }

  void resolve_ops() {
    std::vector<model::Variable> trainables;
    for (const auto &v : vars_)
      if (v.trainable) trainables.push_back(v);
    ops_ = resolve_train_ops(*model_, trainables);
  }

  static void ops_step(Trainer &t, void *self) { static_cast<Simple *>(self)->ops_body(t, true); }

  void ops_body(Trainer &t, bool hooked) {
    std::vector<at::Tensor> batch = input_->next();
    if (hooked) input_->after_step(t);
    model_->check_inputs(batch);
    model::Tower tower(*model_, "tower0", 0, /*training=*/true, /*building=*/false, c10::Device(c10::kCPU));
    model_->call(tower, batch);
    // Every op's gradients from this one forward pass (as TensorFlow computes
    // both minimize ops' gradients from one run), then the updates in order.
    std::vector<std::vector<at::Tensor>> grads(selected_.size());
    std::vector<std::pair<std::string, double>> costs;
    for (size_t i = 0; i < selected_.size(); ++i) {
      const OpRun &r = *selected_[i];
      std::string cost_name;
      double value = 0;
      const at::Tensor &c = op_cost(tower, r, t.global_step(), &value, &cost_name);
      std::vector<at::Tensor> inputs;
      for (const auto &v : r.vars) inputs.push_back(v.value);
      grads[i] = torch::autograd::grad({c}, inputs, {}, /*retain_graph=*/i + 1 < selected_.size(),
                                       /*create_graph=*/false, /*allow_unused=*/true);
      costs.emplace_back(cost_name, value);
    }
    for (size_t i = 0; i < selected_.size(); ++i) {
      OpRun &r = *selected_[i];
      if (r.replica) r.opt->follow(*model_->optimizer());
      for (size_t j = 0; j < r.vars.size(); ++j) add_grad(r.vars[j].value, grads[i][j]);
      r.opt->apply(r.vars, t.global_step());
    }
    if (!hooked) return;
    for (const auto &[name, value] : costs) {
      if (name != "cost") continue;  // the tower's outputs are published below
      Output o;
      o.scalar = value;
      t.set_output("cost", std::move(o));
      t.add_moving_summary("cost", value);
    }
    for (const auto &[name, value] : tower.outputs()) {
      Output o;
      o.tensor = std::make_shared<const at::Tensor>(value.detach());
      t.set_output(name, std::move(o));
      if (value.numel() == 1 && !value.is_complex()) t.add_moving_summary(name, value.item<double>());
    }
  }

  std::shared_ptr<model::Model> model_;
  std::unique_ptr<input::Input> input_;
  std::vector<model::Variable> vars_;
  double cost_ = 0;
  std::vector<OpRun> ops_;
  std::vector<OpRun *> selected_;  // the running run_ops' ops
};

}  // namespace

void save_checked(Checkpoint &ck, const std::vector<model::Variable> &vars, input::Input &input,
                  model::Optimizer &optimizer) {
  for (const auto &v : vars) {
    ck.variables.emplace_back(v.name, v.value.detach());
    if (v.trainable) ck.trainable.push_back(v.name);
  }
  ck.optimizer = optimizer.state(vars);
  try {
    ck.input = input.get_state();
  } catch (const Error &e) {
    if (e.code() != TPT_ERR_UNSUPPORTED) throw;  // a feed function: it has no position to save
  }
}

void restore_checked(const Checkpoint &ck, const std::vector<model::Variable> &vars, input::Input &input,
                     model::Optimizer &optimizer) {
  std::map<std::string, const at::Tensor *> saved;
  for (const auto &[name, value] : ck.variables) saved[name] = &value;
  std::string missing, mismatched, extra;
  for (const auto &v : vars) {
    auto it = saved.find(v.name);
    if (it == saved.end()) {
      missing += (missing.empty() ? "" : ", ") + v.name;
      continue;
    }
    if (it->second->sizes() != v.value.sizes() || it->second->scalar_type() != v.value.scalar_type())
      mismatched += (mismatched.empty() ? "" : ", ") + v.name + " (" + c10::toString(it->second->scalar_type()) + " " +
                    model::shape_text(it->second->sizes()) + " in the checkpoint, " + c10::toString(v.value.scalar_type()) +
                    " " + model::shape_text(v.value.sizes()) + " in the model)";
    saved.erase(it);
  }
  for (const auto &kv : saved) extra += (extra.empty() ? "" : ", ") + kv.first;
  if (!missing.empty() || !mismatched.empty() || !extra.empty())
    invalid_argument("the checkpoint is not of this model" + (missing.empty() ? "" : "; missing: " + missing) +
                     (mismatched.empty() ? "" : "; shapes or dtypes differ: " + mismatched) +
                     (extra.empty() ? "" : "; not in the model: " + extra));
  // Everything is checked before anything changes: the optimizer's state,
  // then the input's (set_state checks all of it before it applies any).
  if (ck.optimizer) optimizer.check_state(*ck.optimizer, vars);
  if (!ck.input.empty()) input.set_state(ck.input.data(), ck.input.size());
  if (ck.optimizer) optimizer.load_state(*ck.optimizer, vars);
  at::NoGradGuard no_grad;
  for (const auto &[name, value] : ck.variables)
    for (const auto &v : vars)
      if (v.name == name) v.value.copy_(value);
}

void Strategy::run_ops(Trainer &, const std::vector<std::string> &, bool) {
  fail(TPT_ERR_UNSUPPORTED, "this strategy does not run train ops");
}

void attach(Trainer &trainer, std::shared_ptr<Strategy> strategy) {
  trainer.add(std::make_unique<StrategySetup>(strategy), Group::TrainerInternal);
  trainer.set_stateful(strategy);
  trainer.set_run_step([strategy](Trainer &t) { strategy->run_step(t); });
}

std::shared_ptr<Strategy> simple(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input) {
  return std::make_shared<Simple>(std::move(model), std::move(input));
}

}  // namespace tpt::parallel
