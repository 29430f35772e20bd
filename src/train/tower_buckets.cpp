// Gradient buckets with overlapped reduction (PyTorch DDP's reducer): the
// trainable variables' gradients packed into flat buckets in the order
// backward produces them, each reduced over the towers (in tower order, so
// deterministically) by the tower that fills its last part while the other
// backward passes go on, then across the processes of a job.
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
#include "train/tower_buckets.hpp"

namespace tpt::parallel {

void MultiTower::make_leaves() {
  const size_t n = static_cast<size_t>(towers());
  leaf_stores_.clear();
  leaves_.assign(n, {});
  mirrors_.assign(n, {});
  hooks_.clear();
  for (size_t k = 0; k < n; ++k) {
    const c10::Device device = o_.devices[k];
    auto s = std::make_unique<model::VariableStore>();
    for (const auto &v : all_[k]) {
      const bool mirror = v.value.device() != device || o_.mirror_cpu_towers;
      at::Tensor x = v.value;
      if (mirror) {
        at::NoGradGuard no_grad;
        x = v.value.detach().to(device, /*non_blocking=*/false, /*copy=*/true);
        mirrors_[k].emplace_back(v.value, x);
      }
      if (v.trainable) {
        if (!mirror) x = v.value.detach();  // the same memory, an autograd leaf of its own
        x.requires_grad_(true);
        leaves_[k].push_back(x);
      }
      s->adopt(v.name, x, v.trainable);
    }
    leaf_stores_.push_back(std::move(s));
  }
  if (!reduces()) return;
  // As PyTorch DDP's reducer: a hook after each leaf's gradient accumulator
  // tells the bucket that the gradient is there.
  for (size_t k = 0; k < n; ++k)
    for (size_t i = 0; i < leaves_[k].size(); ++i) {
      std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(leaves_[k][i]);
      acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [this, k, i](const torch::autograd::variable_list &outputs, const torch::autograd::variable_list &) {
            arrived(static_cast<int>(k), i);
            return outputs;
          }));
      hooks_.push_back(std::move(acc));
    }
}

// Buckets of about bucket_bytes, filled in reverse order of the variables
// (backward produces the last layers' gradients first), one dtype each.
void MultiTower::make_buckets() {
  const auto &t0 = trainables_[0];
  const size_t n = t0.size();
  buckets_.clear();
  slot_.assign(n, {0, 0});
  has_.assign(static_cast<size_t>(towers()), std::vector<char>(n, 0));
  std::unique_ptr<Bucket> cur;
  for (size_t j = n; j-- > 0;) {
    const at::Tensor &v = t0[j].value;
    const int64_t size = static_cast<int64_t>(v.element_size());
    if (cur && (cur->dtype != v.scalar_type() || cur->device != v.device() ||
                (cur->numel + v.numel()) * size > o_.bucket_bytes))
      buckets_.push_back(std::move(cur));
    if (!cur) {
      cur = std::make_unique<Bucket>();
      cur->dtype = v.scalar_type();
      cur->device = v.device();
    }
    slot_[j] = {buckets_.size(), cur->numel};
    cur->vars.push_back(j);
    cur->numel += v.numel();
  }
  if (cur) buckets_.push_back(std::move(cur));
  for (auto &b : buckets_)
    for (int k = 0; k < towers(); ++k)
      b->flat.push_back(at::zeros({b->numel}, at::TensorOptions().dtype(b->dtype).device(
                                                   device_reduce_ ? o_.devices[static_cast<size_t>(k)] : b->device)));
}

std::vector<std::vector<size_t>> MultiTower::buckets() const {
  std::vector<std::vector<size_t>> out;
  for (const auto &b : buckets_) out.push_back(b->vars);
  return out;
}

void MultiTower::arrived(int k, size_t i) {
  at::Tensor &g = leaves_[static_cast<size_t>(k)][i].mutable_grad();
  if (!g.defined()) return;  // missing() will see to it
  Bucket &b = *buckets_[slot_[i].first];
  b.flat[static_cast<size_t>(k)].narrow(0, slot_[i].second, g.numel()).copy_(g.reshape({-1}));
  g.reset();
  has_[static_cast<size_t>(k)][i] = 1;
  if (o_.overlap) ready(i, /*in_backward=*/true);
}

void MultiTower::missing(int k, size_t i) {
  Bucket &b = *buckets_[slot_[i].first];
  b.flat[static_cast<size_t>(k)].narrow(0, slot_[i].second, trainables_[0][i].value.numel()).zero_();
  if (o_.overlap) ready(i, /*in_backward=*/false);
}

void MultiTower::ready(size_t i, bool in_backward) {
  Bucket &b = *buckets_[slot_[i].first];
  if (b.pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  reduce_bucket(b);
  if (in_backward) in_backward_.fetch_add(1, std::memory_order_relaxed);
}

void MultiTower::reduce_bucket(Bucket &b) {
  at::NoGradGuard no_grad;
  if (device_reduce_ && device_reduce_->spans_processes()) {
    // NCCL over every device of every process (CUDA towers in a job): one
    // sum does it all; started in bucket order, as every rank must.
    std::lock_guard<std::mutex> lock(launch_mu_);
    b.complete = true;
    while (next_launch_ < buckets_.size() && buckets_[next_launch_]->complete) {
      Bucket &next = *buckets_[next_launch_++];
      device_reduce_->all_reduce(next.flat);
      at::Tensor sum = next.flat[0].to(next.device, /*non_blocking=*/false, /*copy=*/true);
      if (averages()) sum.mul_(1.0 / (towers() * o_.world->size()));
      next.sum = std::move(sum);
    }
    return;
  }
  at::Tensor sum;
  if (device_reduce_) {  // NCCL sums the devices' buffers; the variables' device gets the result
    device_reduce_->all_reduce(b.flat);
    sum = b.flat[0].to(b.device, /*non_blocking=*/false, /*copy=*/true);
  } else {
    sum = b.flat[0].clone();
    for (size_t k = 1; k < b.flat.size(); ++k) sum.add_(b.flat[k]);
  }
  if (!o_.world) {
    if (averages() && towers() > 1) sum.mul_(1.0 / towers());
    b.sum = std::move(sum);
    return;
  }
  // Across the processes: started in bucket order, scaled once all is summed.
  std::lock_guard<std::mutex> lock(launch_mu_);
  b.sum = std::move(sum);
  b.complete = true;
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->complete) {
    Bucket &next = *buckets_[next_launch_++];
    next.across = o_.world->start_all_reduce(next.sum);
  }
}

void MultiTower::finish_across() {
  const double scale = averages() ? 1.0 / (towers() * o_.world->size()) : 1.0;
  for (auto &b : buckets_) {
    if (!b->across) fail(TPT_ERR_STATE, "a bucket's all-reduce across the processes was not started");
    b->across->wait();
    b->across.reset();
    if (scale != 1.0) b->sum.mul_(scale);
  }
}


at::Tensor MultiTower::reduced(size_t i) const {
  bool any = false;
  for (const auto &h : has_) any = any || h[i];
  if (!any) return {};
  const at::Tensor &v = trainables_[0][i].value;
  return buckets_[slot_[i].first]->sum.narrow(0, slot_[i].second, v.numel()).view(v.sizes());
}

// tensorpack saves tower 0's variables (the replicated strategy's other
// copies are local variables); so does this, with the model's optimizer.

}  // namespace tpt::parallel
