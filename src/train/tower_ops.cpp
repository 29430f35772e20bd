// Train ops on towers (tensorpack's multi-GPU custom and GAN trainers): one
// forward pass per tower, each op's gradients averaged over the towers and
// the processes, then each op's update in order.
#include "train/towers.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>

#include "base/checkpoint_file.hpp"
#include "base/error.hpp"
#include "dist/world.hpp"
#include "model/optimizer.hpp"
#include "train/input.hpp"

namespace tpt::parallel {

void MultiTower::run_ops(Trainer &t, const std::vector<std::string> &names, bool hooked) {
  if (!reduces())
    fail(TPT_ERR_UNSUPPORTED, "the async strategy does not run train ops (each tower would apply its own op "
                              "updates); use the replicated or the parameter-server strategy");
  selected_ = select_train_ops(ops_, *model_, names);
  if (hooked) t.hooked_step(&MultiTower::ops_step, this);
  else ops_body(t, false);
}

void MultiTower::ops_step(Trainer &t, void *self) { static_cast<MultiTower *>(self)->ops_body(t, true); }

void MultiTower::ops_body(Trainer &t, bool hooked) {
  const int n = towers();
  sync_replicas();
  batches_.resize(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    batches_[static_cast<size_t>(k)] = input_->next();
    model_->check_inputs(batches_[static_cast<size_t>(k)]);
  }
  if (hooked) input_->after_step(t);
  results_.resize(static_cast<size_t>(n));
  step_ = t.global_step();
  next_call();
  threads_.run([this](int k) {
    compute_ops(k, batches_[static_cast<size_t>(k)], results_[static_cast<size_t>(k)]);
  });
  for (auto &b : batches_) b.clear();
  if (mirrored(0)) write_back_mirror(0);
  // Each op's gradients: the towers' mean (summed in tower order), then the
  // processes'.
  const size_t m = selected_.size();
  std::vector<std::vector<at::Tensor>> g(m);
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < m; ++i) {
      const OpRun &r = *selected_[i];
      g[i].resize(r.vars.size());
      for (size_t j = 0; j < r.vars.size(); ++j) {
        const at::Tensor &v = r.vars[j].value;
        at::Tensor sum;
        for (int k = 0; k < n; ++k) {
          const at::Tensor &x = results_[static_cast<size_t>(k)].op_grads[i][j];
          if (!x.defined()) continue;
          at::Tensor y = x.device() == v.device() ? x : x.to(v.device());
          if (!sum.defined()) sum = y.clone();
          else sum.add_(y);
        }
        if (sum.defined() && n > 1) sum.mul_(1.0 / n);
        g[i][j] = std::move(sum);
      }
      if (o_.world) reduce_op_across(g[i], r);
      scaler_.unscale(g[i]);
    }
  }
  // Each op decides on its own gradients (the same in every tower and process).
  for (size_t i = 0; i < m; ++i) scaler_.record(apply_op(t, static_cast<size_t>(selected_[i] - ops_.data()), g[i]));
  scaler_.end_step(t, hooked);
  if (hooked)
    publish_towers(t, [m](const TowerResult &r) -> const double * {
      for (size_t i = 0; i < m; ++i)
        if (r.op_cost_names[i] == "cost") return &r.op_costs[i];
      return nullptr;
    });
  for (auto &r : results_) r.op_grads.clear();
}

// Every rank sums its towers' mean of each of the op's variables' gradients
// (one flat buffer per dtype, in the variables' order, with one count per
// variable of the ranks that have a gradient) and takes the mean.
void MultiTower::reduce_op_across(std::vector<at::Tensor> &g, const OpRun &r) {
  std::vector<at::ScalarType> types;
  for (const auto &v : r.vars)
    if (std::find(types.begin(), types.end(), v.value.scalar_type()) == types.end())
      types.push_back(v.value.scalar_type());
  const double scale = 1.0 / o_.world->size();
  for (at::ScalarType type : types) {
    std::vector<size_t> which;
    std::vector<at::Tensor> parts;
    const auto options = at::TensorOptions().dtype(type).device(r.vars[0].value.device());
    for (size_t j = 0; j < r.vars.size(); ++j) {
      const at::Tensor &v = r.vars[j].value;
      if (v.scalar_type() != type) continue;
      which.push_back(j);
      parts.push_back(g[j].defined() ? g[j].reshape({-1}) : at::zeros({v.numel()}, options.device(v.device())));
    }
    at::Tensor flags = at::zeros({static_cast<int64_t>(which.size())}, options);
    for (size_t w = 0; w < which.size(); ++w)
      if (g[which[w]].defined()) flags[static_cast<int64_t>(w)].fill_(1);
    parts.push_back(flags);
    at::Tensor flat = at::cat(parts);
    o_.world->all_reduce(flat);
    int64_t off = 0;
    const int64_t total = flat.numel() - static_cast<int64_t>(which.size());
    // the counts, on the CPU at once (one copy, not one sync per variable)
    const at::Tensor counts = flat.narrow(0, total, static_cast<int64_t>(which.size())).to(at::kCPU, at::kDouble).contiguous();
    const double *count = counts.data_ptr<double>();
    for (size_t w = 0; w < which.size(); ++w) {
      const at::Tensor &v = r.vars[which[w]].value;
      const bool any = count[w] > 0;
      g[which[w]] = any ? flat.narrow(0, off, v.numel()).view(v.sizes()).mul(scale) : at::Tensor();
      off += v.numel();
    }
  }
}

model::Optimizer::Update MultiTower::apply_op(Trainer &t, size_t op, std::vector<at::Tensor> &g) {
  OpRun &r = ops_[op];
  const int64_t step = t.global_step();
  if (r.replica) r.opt->follow(*model_->optimizer());
  if (!replicates()) {  // the parameter server: the towers share the model's variables
    for (size_t j = 0; j < r.vars.size(); ++j) add_grad(r.vars[j].value, g[j]);
    return r.opt->apply(r.vars, step, scaler_.mode());
  }
  for (auto &o : op_optimizers_[op]) o->follow(*r.opt);
  model::Optimizer::Update first = model::Optimizer::Update::Accumulated;
  on_towers([&](int k) {
    at::NoGradGuard no_grad;
    model::Optimizer &opt = k == 0 ? *r.opt : *op_optimizers_[op][static_cast<size_t>(k - 1)];
    const auto &vars = op_vars_[op][static_cast<size_t>(k)];
    // g is read by every tower at once: a replica's gradient never aliases it.
    for (size_t j = 0; j < vars.size(); ++j) {
      if (!g[j].defined()) continue;
      at::Tensor &grad = const_cast<at::Tensor &>(vars[j].value).mutable_grad();
      if (grad.defined()) grad.add_(g[j]);
      else grad = g[j].clone();
    }
    const model::Optimizer::Update u = opt.apply(vars, step, scaler_.mode());
    if (k == 0) first = u;
  });
  return first;
}

void MultiTower::compute_ops(int k, const std::vector<at::Tensor> &batch, TowerResult &r) {
  forward(k, batch, r, [&](model::Tower &tower) {
    const size_t m = selected_.size();
    r.op_grads.assign(m, {});
    r.op_costs.assign(m, 0.0);
    r.op_cost_names.assign(m, {});
    const std::vector<at::Tensor> &leaves = leaves_[static_cast<size_t>(k)];
    for (size_t i = 0; i < m; ++i) {
      const OpRun &op = *selected_[i];
      const at::Tensor &c = op_cost(tower, op, step_, &r.op_costs[i], &r.op_cost_names[i]);
      std::vector<at::Tensor> inputs;
      for (size_t j : op.index) inputs.push_back(leaves[j]);
      r.op_grads[i] = torch::autograd::grad({scaler_.scaled(c)}, inputs, {}, /*retain_graph=*/i + 1 < m, /*create_graph=*/false,
                                            /*allow_unused=*/true);
    }
  });
}

}  // namespace tpt::parallel
