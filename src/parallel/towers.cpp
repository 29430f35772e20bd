// The multi-tower machinery: tower threads, N batches per step, the towers'
// forward and backward passes at once, and what every strategy saves.
#include "parallel/towers.hpp"

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

#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "dist/world.hpp"
#include "input/input.hpp"
#include "model/optimizer.hpp"

namespace tpt::parallel {

// ------------------------------------------------------------------ strategy

// A flat bucket: some trainable variables' gradients, packed one after the
// other, one buffer per tower; summed (in tower order) when every tower has
// filled its part, by the tower that filled the last part (overlap) or after
// every backward pass.
struct MultiTower::Bucket {
  std::vector<size_t> vars;  // trainable variables
  int64_t numel = 0;
  at::ScalarType dtype = at::kFloat;
  c10::Device device{c10::kCPU};
  std::vector<at::Tensor> flat;  // per tower
  at::Tensor sum;                // this step's reduction
  std::atomic<int64_t> pending{0};
  // Several processes: summed here (under launch_mu_), its all-reduce started.
  bool complete = false;
  std::unique_ptr<dist::World::Pending> across;
};

MultiTower::MultiTower(std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input, TowersOptions o)
    : model_(std::move(model)), input_(std::move(input)), o_(std::move(o)) {}

MultiTower::~MultiTower() = default;

model::VariableStore &MultiTower::store(int) { return model_->variables(); }

void MultiTower::setup(Trainer &t) {
  if (!model_->optimizer()) fail(TPT_ERR_STATE, "the model has no optimizer (tpt_model_set_optimizer)");
  model_->build();
  vars_ = model_->variables().all();
  {
    std::vector<model::Variable> trainables;
    for (const auto &v : vars_)
      if (v.trainable) trainables.push_back(v);
    ops_ = resolve_train_ops(*model_, trainables);
  }
  const Checkpoint *ck = t.resume_checkpoint();
  if (ck) {
    check_train_ops(*ck, ops_);
    restore_checked(*ck, vars_, *input_, *model_->optimizer());
    restore_train_ops(*ck, ops_);
  }
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

void MultiTower::broadcast_variables(bool all) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> values;
  for (const auto &v : vars_)
    if (all || !v.trainable) values.push_back(v.value);
  if (!values.empty()) o_.world->broadcast(values, 0);
}

void MultiTower::after_epoch(Trainer &) {
  if (o_.world) broadcast_variables(/*all=*/false);  // HorovodTrainer: rank 0's statistics
  resync(/*all=*/false);
}

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

void MultiTower::refresh_mirror(int k) {
  at::NoGradGuard no_grad;
  for (auto &[variable, mirror] : mirrors_[static_cast<size_t>(k)]) mirror.copy_(variable);
}

void MultiTower::write_back_mirror(int k) {
  at::NoGradGuard no_grad;
  for (auto &[variable, mirror] : mirrors_[static_cast<size_t>(k)])
    if (!mirror.requires_grad()) variable.copy_(mirror);
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
void MultiTower::save(Checkpoint &ck) {
  save_checked(ck, vars_, *input_, *model_->optimizer());
  save_train_ops(ck, ops_);
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
  update(t, results_);
  // The cost and outputs of tower 0, as tensorpack's summaries of the main
  // training tower (or averaged over the towers).
  publish_towers(t, [](const TowerResult &r) { return &r.cost; });
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
    publish(t, cost0, results_[0].outputs);
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
  publish(t, cost0 ? &cost : nullptr, outputs);
}

void MultiTower::publish(Trainer &t, const double *cost,
                         const std::vector<std::pair<std::string, at::Tensor>> &outputs) {
  // The cost and the scalar outputs, averaged over the processes when asked.
  std::vector<double> scalars;
  if (cost) scalars.push_back(*cost);
  for (const auto &[name, value] : outputs)
    if (value.numel() == 1 && !value.is_complex()) scalars.push_back(value.item<double>());
  if (o_.world && o_.average_scalars && !scalars.empty()) {
    at::Tensor all = at::tensor(scalars, at::kDouble);
    o_.world->all_reduce(all);
    all.div_(o_.world->size());
    for (size_t i = 0; i < scalars.size(); ++i) scalars[i] = all[static_cast<int64_t>(i)].item<double>();
  }
  size_t next_scalar = 0;
  if (cost) {
    Output c;
    c.scalar = scalars[next_scalar];
    t.set_output("cost", std::move(c));
    t.add_moving_summary("cost", scalars[next_scalar++]);
  }
  for (const auto &[name, value] : outputs) {
    Output o;
    o.tensor = std::make_shared<const at::Tensor>(value);
    t.set_output(name, std::move(o));
    if (value.numel() == 1 && !value.is_complex()) t.add_moving_summary(name, scalars[next_scalar++]);
  }
}

// ------------------------------------------------------------------ train ops

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
    }
  }
  for (size_t i = 0; i < m; ++i) apply_op(t, static_cast<size_t>(selected_[i] - ops_.data()), g[i]);
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

void MultiTower::apply_op(Trainer &t, size_t op, std::vector<at::Tensor> &g) {
  OpRun &r = ops_[op];
  const int64_t step = t.global_step();
  if (r.replica) r.opt->follow(*model_->optimizer());
  if (!replicates()) {  // the parameter server: the towers share the model's variables
    for (size_t j = 0; j < r.vars.size(); ++j) add_grad(r.vars[j].value, g[j]);
    r.opt->apply(r.vars, step);
    return;
  }
  for (auto &o : op_optimizers_[op]) o->follow(*r.opt);
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
    opt.apply(vars, step);
  });
}

void MultiTower::compute_ops(int k, const std::vector<at::Tensor> &batch, TowerResult &r) {
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
    model_->call(tower, mirrored(k) ? moved : batch);
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
      r.op_grads[i] = torch::autograd::grad({c}, inputs, {}, /*retain_graph=*/i + 1 < m, /*create_graph=*/false,
                                            /*allow_unused=*/true);
    }
    r.outputs.clear();
    if (k == 0 || o_.average_towers)
      for (const auto &[n, value] : tower.outputs())
        if (k == 0 || (value.numel() == 1 && !value.is_complex())) r.outputs.emplace_back(n, value.detach());
  } catch (const Error &e) {
    if (e.passthrough()) throw;
    throw Error(e.code(), name + ": " + e.what());
  } catch (const c10::Error &e) {
    throw Error(TPT_ERR_BACKEND, name + ": " + e.what_without_backtrace());
  }
}

void MultiTower::compute(int k, const std::vector<at::Tensor> &batch, TowerResult &r) {
  const std::string name = "tower" + std::to_string(k);
  try {
    const c10::Device device = o_.devices[static_cast<size_t>(k)];
    std::vector<at::Tensor> moved;
    if (mirrored(k)) {
      refresh_mirror(k);
      for (const auto &b : batch) moved.push_back(b.device() == device ? b : b.to(device));
    }
    model::Tower tower(*model_, name, k, /*training=*/true, /*building=*/false, o_.devices[static_cast<size_t>(k)],
                       leaf_stores_[static_cast<size_t>(k)].get());
    tower.set_generator(generator_for(k));
    model_->call(tower, mirrored(k) ? moved : batch);
    if (!tower.cost()) fail(TPT_ERR_STATE, "the tower function did not set a cost (tpt_tower_set_cost)");
    const at::Tensor &cost = *tower.cost();
    r.cost = cost.item<double>();
    if (model_->optimizer()->processing().check_numerics != 0 && !std::isfinite(r.cost))
      fail(TPT_ERR_BACKEND, "the cost is " + std::to_string(r.cost) + " at global_step " + std::to_string(step_));
    if (!cost.requires_grad())
      fail(TPT_ERR_STATE, "the cost does not depend on any trainable variable (nothing to train)");
    std::vector<at::Tensor> &leaves = leaves_[static_cast<size_t>(k)];
    for (auto &l : leaves) l.mutable_grad().reset();  // what a failed step left
    torch::autograd::backward({cost}, {}, false, false, leaves);
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
  if (model->own_parameters && o.kind != Kind::Simple)
    fail(TPT_ERR_UNSUPPORTED,
         "the model computes with its TorchScript module's own parameters, which towers cannot replace; "
         "train it with the simple trainer (no towers), or write the network with tpt_tower_variable and the layers");
  for (size_t k = 0; k < o.devices.size(); ++k) {
    const c10::Device &d = o.devices[k];
    if (d.is_cpu()) continue;
    const std::string which = "tower " + std::to_string(k) + " is on " + d.str();
    if (!c10::impl::hasDeviceGuardImpl(d.type()))
      fail(TPT_ERR_UNSUPPORTED, which + ", and this LibTorch cannot use " + c10::DeviceTypeName(d.type(), /*lower_case=*/false) +
                                    " devices (built without them; Debian's libtorch-dev is CPU-only: build "
                                    "tptrain with -Dtorch_dir= pointing at a CUDA LibTorch)");
    if (!d.has_index()) invalid_argument(which + ": give the device's index (\"cuda:0\", \"cuda:1\", ...)");
    const auto count = c10::impl::getDeviceGuardImpl(d.type())->deviceCount();
    if (d.index() >= count)
      fail(TPT_ERR_UNSUPPORTED, which + ", and there are " + std::to_string(count) + " such devices");
  }
  if (o.bucket_bytes < 1) invalid_argument("bucket_bytes is " + std::to_string(o.bucket_bytes) + ": it must be at least 1");
  if (o.intra_op_threads < 0 || o.intra_op_threads > 1024)
    invalid_argument("intra_op_threads is " + std::to_string(o.intra_op_threads) + ": it must be in [0, 1024]");
  if (o.world && (o.kind == Kind::Async || o.kind == Kind::Simple))
    fail(TPT_ERR_UNSUPPORTED, std::string("the ") + (o.kind == Kind::Async ? "async" : "simple") +
                                  " strategy runs in one process; train several with the replicated or the "
                                  "parameter-server strategy");
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

namespace {

// Every rank resumes from the chief's checkpoint (or starts afresh with it):
// rank 0's choice, encoded as a checkpoint file's bytes, broadcast.
void agree_on_resume(dist::World &world, std::shared_ptr<const Checkpoint> &resume) {
  std::vector<char> bytes;
  if (world.rank() == 0 && resume) bytes = encode(*resume);
  at::Tensor size = at::tensor({static_cast<int64_t>(bytes.size())}, at::kLong);
  world.broadcast({size}, 0);
  const int64_t n = size.item<int64_t>();
  if (n == 0) {
    resume.reset();
    return;
  }
  at::Tensor data = at::empty({n}, at::kByte);
  if (world.rank() == 0) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  world.broadcast({data}, 0);
  if (world.rank() == 0) return;
  const auto *p = static_cast<const char *>(data.data_ptr());
  resume = std::make_shared<const Checkpoint>(decode(std::vector<char>(p, p + n), "rank 0's checkpoint"));
}

}  // namespace

void train(Trainer &t, std::shared_ptr<model::Model> model, std::unique_ptr<input::Input> input,
           const std::optional<TowersOptions> &towers_in, const std::optional<Distributed> &distributed) {
  if (t.phase() != Trainer::Phase::Idle) fail(TPT_ERR_STATE, "the trainer has already run");
  std::optional<TowersOptions> towers = towers_in;
  if (distributed) {
    if (!distributed->world) invalid_argument("a distributed training needs its World");
    std::shared_ptr<dist::World> world = distributed->world;
    if (!towers) {  // HorovodTrainer: one tower per process
      towers.emplace();
      towers->devices = {c10::Device(c10::kCPU)};
    }
    towers->world = world;
    towers->average_scalars = distributed->average_scalars;
    // HorovodTrainer's device per process: a CUDA tower without an index is
    // on this process's device, cuda:<local rank x towers + k>.
    const auto n = static_cast<int>(towers->devices.size());
    for (int k = 0; k < n; ++k) {
      c10::Device &d = towers->devices[static_cast<size_t>(k)];
      if (d.is_cuda() && !d.has_index())
        d = c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(world->local_rank() * n + k));
    }
    if (towers->kind == Kind::Simple && towers->devices.size() == 1) towers->kind = Kind::Replicated;
    if (distributed->shard) input = input::shard(std::move(input), world->rank(), world->size());
    // The chief's resume is the job's: it sends it if it has one.
    t.set_distributed(world->rank(), [world](std::shared_ptr<const Checkpoint> &ck) { agree_on_resume(*world, ck); });
    // A signal stop: whichever rank got the signal, all stop at this boundary.
    t.set_stop_agreement([world](int signo) {
      at::Tensor v = at::tensor({signo != 0 ? 1.0f : 0.0f, static_cast<float>(signo)});
      world->all_reduce(v);
      if (signo != 0) return signo;
      return v[0].item<float>() > 0 ? static_cast<int>(v[1].item<float>() / v[0].item<float>()) : 0;
    });
  }
  input->set_signature(model->inputs());
  const std::optional<int64_t> size = input->size();
  std::shared_ptr<Strategy> s;
  if (towers) {
    const auto n = static_cast<int64_t>(towers->devices.size());
    s = make_strategy(std::move(model), std::move(input), *towers);
    // An epoch counts steps of every tower (tensorpack's users had to divide by hand: #598).
    if (size) t.default_steps_per_epoch(std::max<int64_t>(1, *size / n));
  } else {
    s = simple(std::move(model), std::move(input));
    if (size) t.default_steps_per_epoch(*size);
  }
  attach(t, std::move(s));
}

}  // namespace tpt::parallel
