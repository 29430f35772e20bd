#include "model/model.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/util/irange.h>

#include <cmath>
#include <sstream>

#include "base/autocast.hpp"
#include "base/error.hpp"
#include "model/optimizer.hpp"

namespace tpt::model {

namespace {

// Fans as LibTorch counts them: dim 0 = outputs, dim 1 = inputs, the rest the
// receptive field (a Linear weight is [out, in], a Conv2d weight [out, in, kh, kw]).
std::pair<double, double> fans(const at::Tensor &t) {
  if (t.dim() < 2) {
    double n = t.dim() == 1 ? static_cast<double>(t.size(0)) : 1.0;
    return {n, n};
  }
  double receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= static_cast<double>(t.size(d));
  return {static_cast<double>(t.size(1)) * receptive, static_cast<double>(t.size(0)) * receptive};
}

void initialize(at::Tensor &t, const VariableOptions &o) {
  // As an integer first: a caller's value outside the enum (see enum_int).
  if (enum_int(o.init) < TPT_INIT_ZEROS || enum_int(o.init) > TPT_INIT_HE_NORMAL)
    invalid_argument("init " + std::to_string(enum_int(o.init)) + " is not a tpt_init");
  auto [fan_in, fan_out] = fans(t);
  switch (o.init) {
    case TPT_INIT_ZEROS: t.zero_(); break;
    case TPT_INIT_CONSTANT: t.fill_(o.a); break;
    case TPT_INIT_UNIFORM:
      if (!(o.b > o.a)) invalid_argument("a uniform initializer needs a < b, got a=" + std::to_string(o.a) + " b=" + std::to_string(o.b));
      t.uniform_(o.a, o.b);
      break;
    case TPT_INIT_NORMAL:
      if (!(o.b > 0)) invalid_argument("a normal initializer needs a standard deviation b > 0");
      t.normal_(o.a, o.b);
      break;
    case TPT_INIT_TRUNCATED_NORMAL: {
      if (!(o.b > 0)) invalid_argument("a truncated normal initializer needs a standard deviation b > 0");
      // Draw, then redraw what fell beyond two standard deviations.
      t.normal_(o.a, o.b);
      for (int round = 0; round < 100; ++round) {
        at::Tensor bad = t.sub(o.a).abs().gt(2 * o.b);
        if (!bad.any().item<bool>()) break;
        at::Tensor fresh = at::empty_like(t).normal_(o.a, o.b);
        t.copy_(at::where(bad, fresh, t));
      }
      break;
    }
    case TPT_INIT_GLOROT_UNIFORM:
    case TPT_INIT_GLOROT_NORMAL: {
      double gain = o.a == 0 ? 1.0 : o.a;
      double std = gain * std::sqrt(2.0 / (fan_in + fan_out));
      if (o.init == TPT_INIT_GLOROT_UNIFORM)
        t.uniform_(-std * std::sqrt(3.0), std * std::sqrt(3.0));
      else
        t.normal_(0, std);
      break;
    }
    case TPT_INIT_HE_UNIFORM:
    case TPT_INIT_HE_NORMAL: {
      double gain = std::sqrt(2.0 / (1 + o.a * o.a));
      double std = gain / std::sqrt(fan_in);
      if (o.init == TPT_INIT_HE_UNIFORM)
        t.uniform_(-std * std::sqrt(3.0), std * std::sqrt(3.0));
      else
        t.normal_(0, std);
      break;
    }
    default: invalid_argument("init " + std::to_string(enum_int(o.init)) + " is not a tpt_init");
  }
}

}  // namespace

at::Tensor new_variable(c10::IntArrayRef shape, const VariableOptions &opts) {
  at::Tensor value;
  {
    at::NoGradGuard no_grad;
    value = at::empty(shape, at::TensorOptions().dtype(opts.dtype));
    initialize(value, opts);
  }
  if (opts.trainable) value.set_requires_grad(true);
  return value;
}

// ------------------------------------------------------------------ store

namespace {

// Names are matched by users' patterns (pattern.hpp), whose search is
// polynomial in the name's length: a bound keeps every match quick.
constexpr size_t kMaxVariableName = 1024;

void check_name_length(const std::string &name) {
  if (name.size() > kMaxVariableName)
    invalid_argument("the variable name '" + name.substr(0, 48) + "...' has " + std::to_string(name.size()) +
                     " characters; at most " + std::to_string(kMaxVariableName) + " (scopes included)");
}

}  // namespace

at::Tensor VariableStore::get(const std::string &name, c10::IntArrayRef shape, const VariableOptions &opts,
                              bool may_create, size_t *index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(name);
  if (it != index_.end()) {
    if (index) *index = it->second;
    const Variable &v = vars_[it->second];
    if (v.value.sizes() != shape)
      invalid_argument("variable '" + name + "' exists with shape " + shape_text(v.value.sizes()) +
                       ", asked for shape " + shape_text(shape));
    if (v.value.scalar_type() != opts.dtype)
      invalid_argument("variable '" + name + "' exists with dtype " + c10::toString(v.value.scalar_type()) +
                       ", asked for " + c10::toString(opts.dtype));
    return v.value;
  }
  if (!may_create)
    invalid_argument("variable '" + name +
                     "' does not exist: variables are created by the first call of the first training tower "
                     "(the build call), and only reused afterwards");
  check_name_length(name);
  for (int64_t d : shape)
    if (d < 0) invalid_argument("variable '" + name + "' has a negative dimension: " + shape_text(shape));
  if (opts.trainable && !c10::isFloatingType(opts.dtype))
    invalid_argument("trainable variable '" + name + "' needs a floating dtype, got " + c10::toString(opts.dtype));
  at::Tensor value = new_variable(shape, opts);
  if (index) *index = vars_.size();
  index_[name] = vars_.size();
  vars_.push_back(Variable{name, value, opts.trainable});
  return value;
}

void VariableStore::adopt(const std::string &name, const at::Tensor &value, bool trainable) {
  std::lock_guard<std::mutex> lock(mu_);
  check_name_length(name);
  if (index_.count(name)) invalid_argument("variable '" + name + "' exists already");
  index_[name] = vars_.size();
  vars_.push_back(Variable{name, value, trainable});
}

std::optional<Variable> VariableStore::find(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return vars_[it->second];
}

std::vector<Variable> VariableStore::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  return vars_;
}

std::vector<at::Tensor> VariableStore::trainables() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<at::Tensor> out;
  for (const auto &v : vars_)
    if (v.trainable) out.push_back(v.value);
  return out;
}

size_t VariableStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return vars_.size();
}

// ------------------------------------------------------------------ tower

Tower::Tower(Model &model, std::string name, int index, bool training, bool building, c10::Device device,
             VariableStore *store)
    : model_(model), store_(store ? *store : model.variables()), name_(std::move(name)), index_(index),
      training_(training), building_(building), device_(device) {}

std::string Tower::scoped(const std::string &name) const { return prefix_ + name; }

void Tower::push_scope(const std::string &scope, bool reuse) {
  if (scope.empty() || scope.find('/') != std::string::npos)
    invalid_argument("scope '" + scope + "' must be a non-empty name without '/'");
  scope_ends_.push_back(prefix_.size());
  scope_reuse_.push_back(reuse);
  reuse_depth_ += reuse ? 1 : 0;
  prefix_ += scope;
  prefix_ += '/';
}

void Tower::pop_scope() {
  if (scope_ends_.empty()) fail(TPT_ERR_STATE, "pop_scope without a scope to pop");
  prefix_.resize(scope_ends_.back());
  scope_ends_.pop_back();
  reuse_depth_ -= scope_reuse_.back() ? 1 : 0;
  scope_reuse_.pop_back();
}

at::Tensor Tower::variable(const std::string &name, c10::IntArrayRef shape, const VariableOptions &opts) {
  if (name.empty()) invalid_argument("a variable name is empty");
  std::string full = scoped(name);
  size_t index = 0;
  at::Tensor v = store_.get(full, shape, opts, can_create_variables(), &index);
  for (size_t u : used_)
    if (u == index) {
      if (reuse_depth_ > 0) return v;  // a reuse scope: the same variable again
      invalid_argument("variable '" + full + "' is used twice in one call of the tower function (a net applied "
                       "twice shares its variables under a reuse scope: tpt_tower_push_reuse_scope)");
    }
  used_.push_back(index);
  return v;
}

void Tower::set_cost(const at::Tensor &cost) {
  if (!cost.defined()) invalid_argument("the cost is an undefined tensor");
  if (cost.numel() != 1) invalid_argument("the cost must have one element, got shape " + shape_text(cost.sizes()));
  if (!c10::isFloatingType(cost.scalar_type()))
    invalid_argument(std::string("the cost must be floating point, got ") + c10::toString(cost.scalar_type()));
  cost_ = cost.dim() == 0 ? cost : cost.reshape({});  // no extra view op in the common case
}

void Tower::set_output(const std::string &name, const at::Tensor &value) {
  if (name.empty()) invalid_argument("an output name is empty");
  for (auto &o : outputs_) {
    if (o.first == name) {
      o.second = value;
      return;
    }
  }
  outputs_.emplace_back(name, value);
}

const at::Tensor *Tower::output(const std::string &name) const {
  if (name == "cost" && cost_) return &*cost_;
  for (auto &o : outputs_)
    if (o.first == name) return &o.second;
  return nullptr;
}

// ------------------------------------------------------------------ model

Model::Model(std::vector<InputSpec> inputs, TowerFn fn) : inputs_(std::move(inputs)), fn_(std::move(fn)) {}
Model::~Model() = default;

namespace {
// The models whose tower function runs on this thread, innermost last: a
// tower function that calls back into its own model (build, infer) would
// wait for the build lock it holds, or recurse without end.
// Each with the tower of its call.
thread_local std::vector<std::pair<const Model *, Tower *>> t_running;

struct Running {
  Running(const Model *m, Tower *tower) { t_running.emplace_back(m, tower); }
  ~Running() { t_running.pop_back(); }
  Running(const Running &) = delete;
  Running &operator=(const Running &) = delete;
};
}  // namespace

Tower *current_tower() { return t_running.empty() ? nullptr : t_running.back().second; }

bool Model::running_here() const {
  for (const auto &r : t_running)
    if (r.first == this) return true;
  return false;
}

std::optional<Variable> Model::find_variable(const std::string &name) const {
  for (auto it = t_running.rbegin(); it != t_running.rend(); ++it)
    if (it->first == this) return it->second->store().find(name);
  return store_.find(name);
}

void Model::refuse_reentry(const char *what) const {
  if (running_here())
    fail(TPT_ERR_STATE, std::string(what) +
                            " was called from inside this model's own tower function; a tower function cannot build "
                            "or run inference on the model it belongs to (use another model, or do it after the "
                            "call returns)");
}

bool Model::built() const { return built_.load(std::memory_order_acquire); }

void Model::build() {
  refuse_reentry("the build of the model");
  std::lock_guard<std::mutex> lock(build_mu_);
  if (built_) return;
  std::vector<at::Tensor> zeros;
  for (const auto &spec : inputs_) {
    std::vector<int64_t> shape = spec.shape;
    for (auto &d : shape)
      if (d < 0) d = 1;
    zeros.push_back(at::zeros(shape, at::TensorOptions().dtype(spec.dtype)));
  }
  at::NoGradGuard no_grad;
  Tower tower(*this, "tower0", 0, /*training=*/true, /*building=*/true, c10::Device(c10::kCPU));
  {
    Running running(this, &tower);
    fn_(tower, zeros);
  }
  built_.store(true, std::memory_order_release);
}

void Model::check_inputs(const std::vector<at::Tensor> &batch) const {
  if (batch.size() != inputs_.size())
    invalid_argument("the input gave " + std::to_string(batch.size()) + " tensors, the signature has " +
                     std::to_string(inputs_.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    const InputSpec &spec = inputs_[i];
    const at::Tensor &t = batch[i];
    if (!t.defined()) invalid_argument("input '" + spec.name + "' is undefined");
    bool ok = t.scalar_type() == spec.dtype && t.dim() == static_cast<int64_t>(spec.shape.size());
    for (size_t d = 0; ok && d < spec.shape.size(); ++d)
      ok = spec.shape[d] < 0 || spec.shape[d] == t.size(static_cast<int64_t>(d));
    if (!ok)
      invalid_argument("input '" + spec.name + "' is " + c10::toString(t.scalar_type()) + " " +
                       shape_text(t.sizes()) + " but the signature says " + c10::toString(spec.dtype) + " " +
                       shape_text(spec.shape));
  }
}

void Model::call(Tower &tower, const std::vector<at::Tensor> &batch) {
  Running running(this, &tower);
  AutocastGuard autocast(tower.precision(), tower.device().type());
  fn_(tower, batch);
}

std::vector<at::Tensor> Model::infer(const std::vector<at::Tensor> &batch, const std::vector<std::string> &names,
                                     const std::string &tower_name, tpt_precision precision) {
  refuse_reentry("inference");
  build();
  check_inputs(batch);
  at::NoGradGuard no_grad;
  Tower tower(*this, tower_name, 0, /*training=*/false, /*building=*/false, c10::Device(c10::kCPU));
  tower.set_precision(precision);
  call(tower, batch);
  std::vector<at::Tensor> out;
  for (const auto &n : names) {
    const at::Tensor *t = tower.output(n);
    if (!t) fail(TPT_ERR_NOT_FOUND, "the tower function published no output '" + n + "'");
    // Under autocast an output may be bfloat16/float16: the inferencers get
    // float32, so that their sums and means keep float32's precision.
    const bool low = t->scalar_type() == c10::ScalarType::BFloat16 || t->scalar_type() == c10::ScalarType::Half;
    out.push_back(low && precision != TPT_PRECISION_FP32 ? t->to(c10::ScalarType::Float) : *t);
  }
  return out;
}

void Model::set_optimizer(std::shared_ptr<Optimizer> opt) { optimizer_ = std::move(opt); }

void Model::add_train_op(TrainOp op) {
  if (op.name.empty()) invalid_argument("a train op needs a name");
  if (train_op(op.name)) invalid_argument("the model has a train op '" + op.name + "' already");
  train_ops_.push_back(std::move(op));
}

const TrainOp *Model::train_op(const std::string &name) const {
  for (const auto &op : train_ops_)
    if (op.name == name) return &op;
  return nullptr;
}

void Model::assign(const std::string &name, const at::Tensor &value) {
  std::optional<Variable> v = store_.find(name);
  if (!v) fail(TPT_ERR_NOT_FOUND, "no variable '" + name + "'");
  if (v->value.sizes() != value.sizes())
    invalid_argument("variable '" + name + "' has shape " + shape_text(v->value.sizes()) + ", the value " +
                     shape_text(value.sizes()));
  at::NoGradGuard no_grad;
  at::Tensor target = v->value;
  target.copy_(value);
  touch();
}

}  // namespace tpt::model
