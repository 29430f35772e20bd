// What every strategy shares (train/strategy.hpp): attaching one to a
// trainer, publishing a step's cost and outputs, saving and restoring the
// model's part of a checkpoint, adding gradients; choosing the strategy
// (make_strategy) and launch's part of it (train).
#include "train/strategy.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>
#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/autocast.hpp"
#include "base/checkpoint_file.hpp"
#include "base/cpu_threads.hpp"
#include "base/error.hpp"
#include "dist/world.hpp"
#include "loop/trainer.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "train/input.hpp"
#include "train/single_cost.hpp"
#include "train/towers.hpp"

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

}  // namespace

void attach(Trainer &trainer, std::shared_ptr<Strategy> strategy) {
  trainer.add(std::make_unique<StrategySetup>(strategy), Group::TrainerInternal);
  trainer.set_stateful(strategy);
  trainer.set_run_step([strategy](Trainer &t) { strategy->run_step(t); });
}

const Checkpoint *SingleCost::setup_model(Trainer &t, bool cpu_towers) {
  if (!model_->optimizer()) fail(TPT_ERR_STATE, "the model has no optimizer (tpt_model_set_optimizer)");
  t.log().info(describe());
  if (const std::string note = blas_threads_note(); !note.empty()) t.log().info(note);
  precision_ = t.config().precision;
  if (precision_ == TPT_PRECISION_FP16_MIXED && cpu_towers)
    fail(TPT_ERR_UNSUPPORTED,
         "precision fp16-mixed (float16 autocast with dynamic loss scaling) is for CUDA towers, and a tower "
         "computes on the CPU, whose autocast is bfloat16: use precision bf16-mixed there");
  scaler_.configure(t.config().loss_scaling, precision_);
  if (precision_ != TPT_PRECISION_FP32)
    t.log().info(std::string("Precision ") + precision_name(precision_) +
                 ": the tower functions run under autocast; variables, gradients and the optimizer stay float32");
  if (scaler_.on()) {
    char scale[32];
    std::snprintf(scale, sizeof scale, "%g", static_cast<double>(scaler_.scale()));
    t.log().info(std::string("Loss scaling: dynamic, from ") + scale +
                 " (an update whose gradients overflow is skipped and the scale backs off)");
  }
  if (precision_ == TPT_PRECISION_BF16_MIXED && cpu_towers && !cpu_has_native_bf16())
    t.log().warn(
        "Precision bf16-mixed on a CPU without AVX-512 BF16 or AMX: LibTorch emulates bfloat16 here, and a step "
        "is many times slower than in float32 (about 13x measured on AVX2); keep float32 on this machine");
  model_->build();
  vars_ = model_->variables().all();  // fixed once built: variables are only created in the build call
  std::vector<model::Variable> trainables;
  for (const auto &v : vars_)
    if (v.trainable) trainables.push_back(v);
  ops_ = resolve_train_ops(*model_, trainables);
  const Checkpoint *ck = t.resume_checkpoint();
  if (ck) {
    check_train_ops(*ck, ops_);
    restore_checked(*ck, vars_, *input_, *model_->optimizer());
    restore_train_ops(*ck, ops_);
    scaler_.restore(*ck, t);
  }
  return ck;
}

void SingleCost::save(Checkpoint &ck) {
  save_checked(ck, vars_, *input_, *model_->optimizer());
  save_train_ops(ck, ops_);
  scaler_.save(ck);
}

void Strategy::run_ops(Trainer &, const std::vector<std::string> &, bool) {
  fail(TPT_ERR_UNSUPPORTED, "this strategy does not run train ops");
}

// tensorpack's add_moving_summary of the cost and of the tower's scalar
// outputs: moving averages that MergeAllSummaries puts once per epoch.
void publish_step(Trainer &t, const double *cost, const std::vector<std::pair<std::string, at::Tensor>> &outputs,
                  dist::World *average_over) {
  // The cost and the scalar outputs, averaged over the processes when asked.
  std::vector<double> scalars;
  if (cost) scalars.push_back(*cost);
  for (const auto &[name, value] : outputs)
    if (value.numel() == 1 && !value.is_complex()) scalars.push_back(value.item<double>());
  if (average_over && !scalars.empty()) {
    at::Tensor all = at::tensor(scalars, at::kDouble);
    average_over->all_reduce(all);
    all.div_(average_over->size());
    for (size_t i = 0; i < scalars.size(); ++i) scalars[i] = all[static_cast<int64_t>(i)].item<double>();
  }
  size_t next_scalar = 0;
  if (cost) {
    Output c;
    c.scalar = scalars[next_scalar];
    t.set_output("cost", std::move(c));
    t.monitors().add_moving_summary("cost", scalars[next_scalar++]);
  }
  for (const auto &[name, value] : outputs) {
    Output o;
    o.tensor = std::make_shared<const at::Tensor>(value.detach());
    t.set_output(name, std::move(o));
    if (value.numel() == 1 && !value.is_complex()) t.monitors().add_moving_summary(name, scalars[next_scalar++]);
  }
}

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
                    shape_text(it->second->sizes()) + " in the checkpoint, " + c10::toString(v.value.scalar_type()) +
                    " " + shape_text(v.value.sizes()) + " in the model)";
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
