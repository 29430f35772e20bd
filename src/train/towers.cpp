// The multi-tower machinery: the towers' lifecycle (setup, resume, the
// threads), one step (N batches, the towers' forward and backward passes at
// once, the update, the published cost), the towers' random generators,
// replicas and device mirrors. The gradient buckets are tower_buckets.cpp,
// train ops on towers tower_ops.cpp.
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

MultiTower::MultiTower(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input, TowersOptions o)
    : SingleCost(std::move(model), std::move(input)), o_(std::move(o)) {}

MultiTower::~MultiTower() = default;

model::VariableStore &MultiTower::store(int) { return model_->variables(); }

void MultiTower::setup(Trainer &t) {
  const Checkpoint *ck = setup_model(
      t, std::any_of(o_.devices.begin(), o_.devices.end(), [](const c10::Device &d) { return d.is_cpu(); }));
  prepare(t);
  all_.assign(static_cast<size_t>(towers()), {});
  trainables_.assign(static_cast<size_t>(towers()), {});
  for (int k = 0; k < towers(); ++k) {
    all_[static_cast<size_t>(k)] = k == 0 ? vars_ : store(k).all();
    for (const auto &v : all_[static_cast<size_t>(k)])
      if (v.trainable) trainables_[static_cast<size_t>(k)].push_back(v);
  }
  // The train ops' variables in every tower's replica, and the replicas'
  // optimizers (each op's state, on resume).
  op_optimizers_.assign(ops_.size(), {});
  op_vars_.assign(ops_.size(), {});
  for (size_t i = 0; i < ops_.size(); ++i) {
    const OpRun &r = ops_[i];
    for (int k = 0; k < towers(); ++k) {
      std::vector<model::Variable> mine;
      for (size_t j : r.index) mine.push_back(trainables_[static_cast<size_t>(k)][j]);
      if (k > 0 && replicates()) {
        auto opt = r.opt->replica();
        if (ck)
          if (auto it = ck->train_ops.find(r.op.name); it != ck->train_ops.end()) opt->load_state(it->second, mine);
        op_optimizers_[i].push_back(std::move(opt));
      }
      op_vars_[i].push_back(std::move(mine));
    }
  }
  // The base seed: the checkpoint's, else LibTorch's CPU seed when the first
  // step starts (sync_replicas: a tpt_manual_seed in the init hook counts).
  seed_from_checkpoint_ = ck && ck->tower_seed;
  seed_ = seed_from_checkpoint_ ? static_cast<uint64_t>(*ck->tower_seed) : 0;
  gens_.clear();
  for (int k = 0; k < towers(); ++k) {
    // A private generator per tower: a CPU one, or a copy of the device's
    // default one (of the device's generator type, without touching the
    // process's own stream on that device).
    const c10::Device d = o_.devices[static_cast<size_t>(k)];
    if (d.is_cpu()) {
      gens_.push_back(at::detail::createCPUGenerator());
    } else {
      at::Generator g = at::globalContext().defaultGenerator(d);
      std::lock_guard<std::mutex> lock(g.mutex());
      gens_.push_back(g.clone());
    }
  }
  gen_step_ = -1;
  gen_call_ = 0;
  make_leaves();
  device_reduce_ = reduces() ? dist::device_all_reduce(o_.devices, o_.world.get()) : nullptr;
  if (reduces()) make_buckets();
  input_->setup();
}

std::string MultiTower::describe() const {
  static const char *const kinds[] = {"simple", "replicated", "parameter-server", "async"};
  std::string s = std::string("Training with the ") + kinds[static_cast<int>(o_.kind)] + " strategy: " +
                  std::to_string(towers()) + (towers() == 1 ? " tower" : " towers") + ", on ";
  for (int k = 0; k < towers(); ++k) s += (k ? ", " : "") + o_.devices[static_cast<size_t>(k)].str();
  if (o_.world)
    s += "; rank " + std::to_string(o_.world->rank()) + " of " + std::to_string(o_.world->size()) +
         " (each rank with as many towers)";
  return s;
}

void MultiTower::broadcast_variables(bool all) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> values;
  for (const auto &v : vars_)
    if (all || !v.trainable) values.push_back(v.value);
  if (!values.empty()) o_.world->broadcast(values, 0);
}

void MultiTower::after_epoch(Trainer &t) {
  SingleCost::after_epoch(t);
  if (o_.world) broadcast_variables(/*all=*/false);  // HorovodTrainer: rank 0's statistics
  resync(/*all=*/false);
}

void MultiTower::refresh_mirror(int k) {
  at::NoGradGuard no_grad;
  for (auto &[variable, mirror] : mirrors_[static_cast<size_t>(k)]) mirror.copy_(variable);
}

void MultiTower::write_back_mirror(int k) {
  at::NoGradGuard no_grad;
  for (auto &[variable, mirror] : mirrors_[static_cast<size_t>(k)])
    if (!mirror.requires_grad()) variable.copy_(mirror);
}

void MultiTower::save(Checkpoint &ck) {
  SingleCost::save(ck);
  ck.tower_seed = static_cast<int64_t>(seed_);
}

namespace {
// splitmix64's finaliser: nearby inputs give unrelated seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
}  // namespace

at::Generator MultiTower::generator_for(int k) {
  const uint64_t rank = o_.world ? static_cast<uint64_t>(o_.world->rank()) : 0;
  uint64_t s = mix(seed_);
  s = mix(s ^ rank);
  s = mix(s ^ static_cast<uint64_t>(k));
  s = mix(s ^ static_cast<uint64_t>(step_));
  s = mix(s ^ static_cast<uint64_t>(gen_call_));
  at::Generator &g = gens_[static_cast<size_t>(k)];
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(s);
  return g;
}

void MultiTower::before_train(Trainer &t) {
  SingleCost::before_train(t);
  int intra = o_.intra_op_threads > 0 ? o_.intra_op_threads : std::max(1, at::get_num_threads() / towers());
  threads_.start(towers(), intra);
}

void MultiTower::after_train(Trainer &t) {
  threads_.stop();
  SingleCost::after_train(t);
}

void MultiTower::run_step(Trainer &t) { t.hooked_step(&MultiTower::step, this); }

void MultiTower::step(Trainer &t, void *self) { static_cast<MultiTower *>(self)->train_step(t); }

void MultiTower::train_step(Trainer &t) {
  const int n = towers();
  sync_replicas();
  batches_.resize(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {  // tower k takes the k-th batch of the step, always
    batches_[static_cast<size_t>(k)] = input_->next();
    model_->check_inputs(batches_[static_cast<size_t>(k)]);
  }
  input_->after_step(t);
  results_.resize(static_cast<size_t>(n));
  step_ = t.global_step();
  next_call();
  if (reduces()) {
    for (auto &h : has_) std::fill(h.begin(), h.end(), 0);
    for (auto &b : buckets_) {
      b->sum = at::Tensor();
      b->pending.store(static_cast<int64_t>(b->vars.size()) * n, std::memory_order_relaxed);
      b->complete = false;
      b->across.reset();
    }
    next_launch_ = 0;
  }
  std::function<void(int)> job = [this](int k) {
    compute(k, batches_[static_cast<size_t>(k)], results_[static_cast<size_t>(k)]);
  };
  threads_.run(job);
  for (auto &b : batches_) b.clear();
  // Only tower 0 updates the statistics; the others have read the variables by now.
  if (mirrored(0)) write_back_mirror(0);
  if (reduces() && !o_.overlap)  // each tower sums a share of the buckets
    threads_.run([this, n](int k) {
      for (size_t b = static_cast<size_t>(k); b < buckets_.size(); b += static_cast<size_t>(n)) reduce_bucket(*buckets_[b]);
    });
  if (reduces() && o_.world && !(device_reduce_ && device_reduce_->spans_processes())) finish_across();
  if (reduces() && scaler_.on()) {  // every process's and tower's sum, unscaled once
    at::NoGradGuard no_grad;
    for (auto &b : buckets_) scaler_.unscale(b->sum);
  }
  update(t, results_);
  // The cost and outputs of tower 0, as tensorpack's summaries of the main
  // training tower (or averaged over the towers).
  publish_towers(t, [](const TowerResult &r) { return &r.cost; });
  scaler_.end_step(t, /*hooked=*/true);
  for (auto &r : results_) r.grads.clear();
}

// HorovodTrainer's broadcast and the replicated strategy's initial copy:
// every process and every replica starts from rank 0's tower 0, as it is
// after its SETUP (a resume) and BEFORE_TRAIN (the config's init hook, the
// user's callbacks), just before the first step. Later changes made through
// the model reach this process's replicas before the next step.
void MultiTower::sync_replicas() {
  if (!synced_) {
    if (!seed_from_checkpoint_) seed_ = at::detail::getDefaultCPUGenerator().current_seed();
    if (o_.world) {
      broadcast_variables(/*all=*/true);
      at::Tensor seed = at::tensor({static_cast<int64_t>(seed_)}, at::kLong);
      o_.world->broadcast({seed}, 0);
      seed_ = static_cast<uint64_t>(seed.item<int64_t>());
    }
    resync(/*all=*/true);
    synced_ = true;
    generation_ = model_->generation();
    return;
  }
  const uint64_t g = model_->generation();
  if (g != generation_) {
    resync(/*all=*/true);
    generation_ = g;
  }
}

void MultiTower::next_call() {
  if (step_ != gen_step_) {
    gen_step_ = step_;
    gen_call_ = 0;
  } else {
    ++gen_call_;
  }
}

void MultiTower::publish_towers(Trainer &t, const std::function<const double *(const TowerResult &)> &cost_of) {
  const double *cost0 = cost_of(results_[0]);
  if (!o_.average_towers || towers() == 1) {
    publish_step(t, cost0, results_[0].outputs, o_.average_scalars ? o_.world.get() : nullptr);
    return;
  }
  double cost = 0;
  if (cost0) {
    for (const auto &r : results_) cost += *cost_of(r);
    cost /= towers();
  }
  // Each floating-point scalar output: the mean over the towers that
  // published it (integer and boolean outputs stay tower 0's).
  std::vector<std::pair<std::string, at::Tensor>> outputs = results_[0].outputs;
  at::NoGradGuard no_grad;
  for (auto &[name, value] : outputs) {
    if (value.numel() != 1 || !value.is_floating_point()) continue;
    double sum = 0;
    int count = 0;
    for (const auto &r : results_)
      for (const auto &[other, v] : r.outputs)
        if (other == name && v.numel() == 1 && v.is_floating_point()) {
          sum += v.item<double>();
          ++count;
          break;
        }
    value = at::full_like(value, sum / count);
  }
  publish_step(t, cost0 ? &cost : nullptr, outputs, o_.average_scalars ? o_.world.get() : nullptr);
}

void MultiTower::forward(int k, const std::vector<at::Tensor> &batch, TowerResult &r,
                         const std::function<void(model::Tower &)> &grads) {
  const std::string name = "tower" + std::to_string(k);
  try {
    const c10::Device device = o_.devices[static_cast<size_t>(k)];
    std::vector<at::Tensor> moved;
    if (mirrored(k)) {
      refresh_mirror(k);
      for (const auto &b : batch) moved.push_back(b.device() == device ? b : b.to(device));
    }
    model::Tower tower(*model_, name, k, /*training=*/true, /*building=*/false, device,
                       leaf_stores_[static_cast<size_t>(k)].get());
    tower.set_generator(generator_for(k));
    tower.set_precision(precision_);
    model_->call(tower, mirrored(k) ? moved : batch);
    grads(tower);
    r.outputs.clear();
    if (k == 0 || o_.average_towers)
      for (const auto &[n, value] : tower.outputs())
        if (k == 0 || (value.numel() == 1 && !value.is_complex())) r.outputs.emplace_back(n, value.detach());
  } catch (const Error &e) {
    if (e.passthrough()) throw;  // the host's own status, as it gave it
    throw Error(e.code(), name + ": " + e.what());
  } catch (const c10::Error &e) {
    throw Error(TPT_ERR_BACKEND, name + ": " + e.what_without_backtrace());
  }
}

void MultiTower::compute(int k, const std::vector<at::Tensor> &batch, TowerResult &r) {
  forward(k, batch, r, [&](model::Tower &tower) {
    if (!tower.cost()) fail(TPT_ERR_STATE, "the tower function did not set a cost (tpt_tower_set_cost)");
    const at::Tensor &cost = *tower.cost();
    r.cost = cost.item<double>();
    if (model_->optimizer()->processing().check_numerics != 0 && !std::isfinite(r.cost))
      fail(TPT_ERR_BACKEND, "the cost is " + std::to_string(r.cost) + " at global_step " + std::to_string(step_));
    if (!cost.requires_grad())
      fail(TPT_ERR_STATE, "the cost does not depend on any trainable variable (nothing to train)");
    std::vector<at::Tensor> &leaves = leaves_[static_cast<size_t>(k)];
    for (auto &l : leaves) l.mutable_grad().reset();  // what a failed step left
    torch::autograd::backward({scaler_.scaled(cost)}, {}, false, false, leaves);
    if (reduces()) {
      for (size_t i = 0; i < leaves.size(); ++i)
        if (!has_[static_cast<size_t>(k)][i]) missing(k, i);
    } else {
      r.grads.resize(leaves.size());
      for (size_t i = 0; i < leaves.size(); ++i) {
        r.grads[i] = leaves[i].grad();
        leaves[i].mutable_grad().reset();
      }
    }
  });
}

}  // namespace tpt::parallel
