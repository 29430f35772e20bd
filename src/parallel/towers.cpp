// The multi-tower machinery: tower threads, N batches per step, the towers'
// forward and backward passes at once, and what every strategy saves.
#include "parallel/towers.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <system_error>

#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "input/input.hpp"
#include "model/optimizer.hpp"

namespace tpt::parallel {

namespace {

// OpenMP's per-thread thread count, found in whatever OpenMP runtime
// LibTorch loaded (none: the counts are left alone).
using SetThreads = void (*)(int);
using GetThreads = int (*)();
SetThreads omp_set() {
  static SetThreads f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return f;
}
GetThreads omp_get() {
  static GetThreads f = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return f;
}

// This thread's intra-op threads for a scope.
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int n) {
    if (n <= 0 || !omp_set() || !omp_get()) return;
    at::get_num_threads();  // LibTorch's per-thread initialisation first, or it would undo ours
    old_ = omp_get()();
    if (old_ != n) omp_set()(n);
  }
  ~IntraOpThreads() {
    if (old_ > 0) omp_set()(old_);
  }
  IntraOpThreads(const IntraOpThreads &) = delete;
  IntraOpThreads &operator=(const IntraOpThreads &) = delete;

 private:
  int old_ = 0;
};

}  // namespace

// ------------------------------------------------------------------ threads

void TowerThreads::start(int towers, int intra_op_threads) {
  stop();
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = false;
    errors_.assign(static_cast<size_t>(towers), nullptr);
    intra_ = intra_op_threads;
  }
  for (int k = 1; k < towers; ++k) {
    try {
      threads_.emplace_back([this, k] { loop(k); });
    } catch (const std::system_error &e) {
      stop();
      fail(TPT_ERR_BACKEND, "cannot start the thread of tower " + std::to_string(k) + ": " + e.what());
    }
  }
}

void TowerThreads::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = true;
  }
  wake_.notify_all();
  for (auto &th : threads_) th.join();
  threads_.clear();
}

void TowerThreads::run(const std::function<void(int)> &fn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    job_ = &fn;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
    for (auto &e : errors_) e = nullptr;
  }
  wake_.notify_all();
  std::exception_ptr first;
  {
    IntraOpThreads threads(threads_.empty() ? 0 : intra_);
    try {
      fn(0);
    } catch (...) {
      first = std::current_exception();
    }
  }
  std::unique_lock<std::mutex> l(mu_);
  done_.wait(l, [&] { return pending_ == 0; });
  job_ = nullptr;
  errors_[0] = first;
  // An error wins over a stop (tensorpack's rule for one step): the lowest
  // tower's error, else the lowest tower's stop.
  std::exception_ptr stop;
  for (auto &e : errors_) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const StopTraining &) {
      if (!stop) stop = e;
      continue;
    } catch (...) {
    }
    std::rethrow_exception(e);
  }
  if (stop) std::rethrow_exception(stop);
}

void TowerThreads::loop(int k) {
  IntraOpThreads threads(intra_);
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)> *job = nullptr;
    {
      std::unique_lock<std::mutex> l(mu_);
      wake_.wait(l, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err;
    try {
      (*job)(k);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> l(mu_);
    errors_[static_cast<size_t>(k)] = err;
    if (--pending_ == 0) done_.notify_all();
  }
}

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
void MultiTower::save(Checkpoint &ck) {
  for (const auto &v : vars_) {
    ck.variables.emplace_back(v.name, v.value.detach());
    if (v.trainable) ck.trainable.push_back(v.name);
  }
  ck.optimizer = model_->optimizer()->state(vars_);
  try {
    ck.input = input_->get_state();
  } catch (const Error &e) {
    if (e.code() != TPT_ERR_UNSUPPORTED) throw;
  }
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
