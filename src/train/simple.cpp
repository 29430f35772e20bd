// tensorpack's SimpleTrainer: one tower, one batch per step.
#include <ATen/core/grad_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

#include <memory>
#include <utility>

#include "base/checkpoint_file.hpp"
#include "base/error.hpp"
#include "loop/trainer.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "train/input.hpp"
#include "train/single_cost.hpp"
#include "train/strategy.hpp"
#include "train/train_ops.hpp"

namespace tpt::parallel {

namespace {

class Simple final : public SingleCost {
 public:
  Simple(std::shared_ptr<model::Model> m, std::unique_ptr<input::Input> in) : SingleCost(std::move(m), std::move(in)) {}

  void setup(Trainer &t) override {
    setup_model(t, /*cpu_towers=*/true);
    input_->setup();
  }

  bool runs_train_ops() const override { return true; }
  std::string describe() const override { return "Training with the simple trainer: one tower, on cpu"; }

  void run_ops(Trainer &t, const std::vector<std::string> &names, bool hooked) override {
    selected_ = select_train_ops(ops_, *model_, names);
    if (hooked) t.hooked_step(&Simple::ops_step, this);
    else ops_body(t, false);
  }

  void run_step(Trainer &t) override { t.hooked_step(&Simple::step, this); }

 private:
  static void step(Trainer &t, void *self) { static_cast<Simple *>(self)->train_step(t); }

  void train_step(Trainer &t) {
    std::vector<at::Tensor> batch = input_->next();
    input_->after_step(t);  // the input's own moving summaries (the queue's fill)
    model_->check_inputs(batch);
    model::Tower tower(*model_, "tower0", 0, /*training=*/true, /*building=*/false, c10::Device(c10::kCPU));
    tower.set_precision(precision_);
    model_->call(tower, batch);
    if (!tower.cost()) fail(TPT_ERR_STATE, "the tower function did not set a cost (tpt_tower_set_cost)");
    const at::Tensor &cost = *tower.cost();
    cost_ = cost.item<double>();
    model::Optimizer &opt = *model_->optimizer();
    if (opt.processing().check_numerics != 0 && !std::isfinite(cost_))
      fail(TPT_ERR_BACKEND, "the cost is " + std::to_string(cost_) + " at global_step " + std::to_string(t.global_step()));
    if (!cost.requires_grad())
      fail(TPT_ERR_STATE, "the cost does not depend on any trainable variable (nothing to train)");
    if (!scaler_.on()) {
      cost.backward();
      opt.apply(vars_, t.global_step());
    } else {
      // The scaled cost's gradients, unscaled before they join the
      // gradients an accumulated update has gathered so far.
      std::vector<at::Tensor> leaves;
      for (const auto &v : vars_)
        if (v.trainable) leaves.push_back(v.value);
      std::vector<at::Tensor> grads = torch::autograd::grad({scaler_.scaled(cost)}, leaves, {}, /*retain_graph=*/false,
                                                            /*create_graph=*/false, /*allow_unused=*/true);
      {
        at::NoGradGuard no_grad;
        scaler_.unscale(grads);
        for (size_t i = 0; i < leaves.size(); ++i) add_grad(leaves[i], grads[i]);
      }
      scaler_.record(opt.apply(vars_, t.global_step(), scaler_.mode()));
    }
    publish_step(t, &cost_, tower.outputs());
    scaler_.end_step(t, /*hooked=*/true);
  }

  static void ops_step(Trainer &t, void *self) { static_cast<Simple *>(self)->ops_body(t, true); }

  void ops_body(Trainer &t, bool hooked) {
    std::vector<at::Tensor> batch = input_->next();
    if (hooked) input_->after_step(t);
    model_->check_inputs(batch);
    model::Tower tower(*model_, "tower0", 0, /*training=*/true, /*building=*/false, c10::Device(c10::kCPU));
    tower.set_precision(precision_);
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
      grads[i] = torch::autograd::grad({scaler_.scaled(c)}, inputs, {}, /*retain_graph=*/i + 1 < selected_.size(),
                                       /*create_graph=*/false, /*allow_unused=*/true);
      costs.emplace_back(cost_name, value);
    }
    for (size_t i = 0; i < selected_.size(); ++i) {
      OpRun &r = *selected_[i];
      if (r.replica) r.opt->follow(*model_->optimizer());
      {
        at::NoGradGuard no_grad;
        scaler_.unscale(grads[i]);
        for (size_t j = 0; j < r.vars.size(); ++j) add_grad(r.vars[j].value, grads[i][j]);
      }
      scaler_.record(r.opt->apply(r.vars, t.global_step(), scaler_.mode()));  // each op decides on its own gradients
    }
    scaler_.end_step(t, hooked);
    if (!hooked) return;
    const double *cost = nullptr;  // the first op's cost named "cost" (the tower's), as the towers' run_ops
    for (const auto &[name, value] : costs)
      if (name == "cost" && !cost) cost = &value;
    publish_step(t, cost, tower.outputs());
  }

  double cost_ = 0;
};

}  // namespace

std::shared_ptr<Strategy> simple(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input) {
  return std::make_shared<Simple>(std::move(model), std::move(input));
}

}  // namespace tpt::parallel
