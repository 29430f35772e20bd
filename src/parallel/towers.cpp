// The multi-tower machinery: tower threads, N batches per step, the towers'
// forward and backward passes at once, and what every strategy saves.
#include "parallel/towers.hpp"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>

#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "input/input.hpp"
#include "model/optimizer.hpp"

namespace tpt::parallel {

// ------------------------------------------------------------------ strategy

MultiTower::MultiTower(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input, TowersOptions o)
    : model_(std::move(model)), input_(std::move(input)), o_(std::move(o)) {}

MultiTower::~MultiTower() = default;

model::VariableStore &MultiTower::store(int) { return model_->variables(); }

void MultiTower::setup(Trainer &t) {
  if (!model_->optimizer()) fail(TPT_ERR_STATE, "the model has no optimizer (tpt_model_set_optimizer)");
  model_->build();
  vars_ = model_->variables().all();
  if (const Checkpoint *ck = t.resume_checkpoint()) restore_checked(*ck, vars_, *input_, *model_->optimizer());
  prepare(t);
  all_.assign(static_cast<size_t>(towers()), {});
  trainables_.assign(static_cast<size_t>(towers()), {});
  for (int k = 0; k < towers(); ++k) {
    all_[static_cast<size_t>(k)] = k == 0 ? vars_ : store(k).all();
    for (const auto &v : all_[static_cast<size_t>(k)])
      if (v.trainable) trainables_[static_cast<size_t>(k)].push_back(v);
  }
  input_->setup();
}

// tensorpack saves tower 0's variables (the replicated strategy's other
// copies are local variables); so does this, with the model's optimizer.
void MultiTower::save(Checkpoint &ck) { save_checked(ck, vars_, *input_, *model_->optimizer()); }

void MultiTower::before_train(Trainer &) {
  input_->before_train();
  int intra = o_.intra_op_threads > 0 ? o_.intra_op_threads : std::max(1, at::get_num_threads() / towers());
  threads_.start(towers(), intra);
}

void MultiTower::after_train(Trainer &) {
  threads_.stop();
  input_->after_train();
}

void MultiTower::run_step(Trainer &t) { t.hooked_step(&MultiTower::step, this); }

void MultiTower::step(Trainer &t, void *self) { static_cast<MultiTower *>(self)->train_step(t); }

void MultiTower::train_step(Trainer &t) {
  const int n = towers();
  batches_.resize(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {  // tower k takes the k-th batch of the step, always
    batches_[static_cast<size_t>(k)] = input_->next();
    model_->check_inputs(batches_[static_cast<size_t>(k)]);
  }
  input_->after_step(t);
  results_.resize(static_cast<size_t>(n));
  step_ = t.global_step();
  std::function<void(int)> job = [this](int k) {
    compute(k, batches_[static_cast<size_t>(k)], results_[static_cast<size_t>(k)]);
  };
  threads_.run(job);
  for (auto &b : batches_) b.clear();
  update(t, results_);
  // The cost and outputs of tower 0, as tensorpack's summaries of the main
  // training tower.
  const TowerResult &r0 = results_[0];
  Output c;
  c.scalar = r0.cost;
  t.set_output("cost", std::move(c));
  t.add_moving_summary("cost", r0.cost);
  for (const auto &[name, value] : r0.outputs) {
    Output o;
    o.tensor = std::make_shared<const at::Tensor>(value);
    t.set_output(name, std::move(o));
    if (value.numel() == 1 && !value.is_complex()) t.add_moving_summary(name, value.item<double>());
  }
  for (auto &r : results_) r.grads.clear();
}

void MultiTower::compute(int k, const std::vector<at::Tensor> &batch, TowerResult &r) {
  const std::string name = "tower" + std::to_string(k);
  try {
    model::Tower tower(*model_, name, k, /*training=*/true, /*building=*/false, o_.devices[static_cast<size_t>(k)],
                       &store(k));
    model_->call(tower, batch);
    if (!tower.cost()) fail(TPT_ERR_STATE, "the tower function did not set a cost (tpt_tower_set_cost)");
    const at::Tensor &cost = *tower.cost();
    r.cost = cost.item<double>();
    if (model_->optimizer()->processing().check_numerics != 0 && !std::isfinite(r.cost))
      fail(TPT_ERR_BACKEND, "the cost is " + std::to_string(r.cost) + " at global_step " + std::to_string(step_));
    if (!cost.requires_grad())
      fail(TPT_ERR_STATE, "the cost does not depend on any trainable variable (nothing to train)");
    std::vector<at::Tensor> params;
    for (const auto &v : trainables_[static_cast<size_t>(k)]) params.push_back(v.value);
    r.grads = torch::autograd::grad({cost}, params, {}, c10::nullopt, false, /*allow_unused=*/true);
    r.outputs.clear();
    if (k == 0)
      for (const auto &[n, value] : tower.outputs()) r.outputs.emplace_back(n, value.detach());
  } catch (const Error &e) {
    if (e.passthrough()) throw;  // the host's own status, as it gave it
    throw Error(e.code(), name + ": " + e.what());
  } catch (const c10::Error &e) {
    throw Error(TPT_ERR_BACKEND, name + ": " + e.what_without_backtrace());
  }
}

at::Tensor reduce(const std::vector<TowerResult> &results, size_t i, double scale) {
  at::Tensor sum;
  for (const auto &r : results) {
    if (i >= r.grads.size() || !r.grads[i].defined()) continue;
    sum = sum.defined() ? sum.add(r.grads[i]) : r.grads[i].clone();
  }
  if (sum.defined() && scale != 1.0) sum.mul_(scale);
  return sum;
}

void add_grad(const at::Tensor &variable, const at::Tensor &g) {
  if (!g.defined()) return;
  at::Tensor &grad = const_cast<at::Tensor &>(variable).mutable_grad();
  if (grad.defined()) grad.add_(g);
  else grad = g.is_view() ? g.clone() : g;  // the optimizer's zero_grad detaches it in place: no views
}

std::shared_ptr<Strategy> make_strategy(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
                                        TowersOptions o) {
  if (o.devices.empty()) invalid_argument("a multi-tower strategy needs at least one tower");
  if (o.devices.size() > 256) invalid_argument(std::to_string(o.devices.size()) + " towers are too many (at most 256)");
  for (size_t k = 0; k < o.devices.size(); ++k)
    if (!o.devices[k].is_cpu())
      fail(TPT_ERR_UNSUPPORTED, "tower " + std::to_string(k) + " is on " + o.devices[k].str() +
                                    ": towers on CUDA devices are not implemented yet (CPU towers are)");
  if (o.intra_op_threads < 0 || o.intra_op_threads > 1024)
    invalid_argument("intra_op_threads is " + std::to_string(o.intra_op_threads) + ": it must be in [0, 1024]");
  switch (o.kind) {
    case Kind::Simple:
      if (o.devices.size() != 1) invalid_argument("the simple strategy has one tower");
      return simple(std::move(model), std::move(input));
    case Kind::Replicated: return replicated(std::move(model), std::move(input), std::move(o));
    case Kind::ParameterServer: return parameter_server(std::move(model), std::move(input), std::move(o));
    case Kind::Async: return async(std::move(model), std::move(input), std::move(o));
  }
  invalid_argument("unknown strategy " + std::to_string(static_cast<int>(o.kind)));
}

}  // namespace tpt::parallel
