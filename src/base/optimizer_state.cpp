// Optimizer kinds as data (base/optimizer_state.hpp).
#include "base/optimizer_state.hpp"

#include <cmath>
#include <sstream>

#include "base/error.hpp"

namespace tpt {

namespace {

// Hyper-parameters per kind, with defaults (PyTorch's).
const std::map<std::string, std::map<std::string, double>> &defaults() {
  static const std::map<std::string, std::map<std::string, double>> table = [] {
    std::map<std::string, double> common = {
        {"clip_global_norm", 0}, {"clip_global_norm_tf", 0}, {"clip_value", 0}, {"accumulate_steps", 1},
        {"check_numerics", 1}};
    auto with = [&](std::map<std::string, double> m) {
      m.insert(common.begin(), common.end());
      return m;
    };
    return std::map<std::string, std::map<std::string, double>>{
        {"sgd", with({{"learning_rate", 0.01}, {"momentum", 0}, {"dampening", 0}, {"weight_decay", 0}, {"nesterov", 0}})},
        {"adam", with({{"learning_rate", 0.001}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0},
                       {"amsgrad", 0}})},
        {"adamw", with({{"learning_rate", 0.001}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
                        {"weight_decay", 0.01}, {"amsgrad", 0}})},
        {"rmsprop", with({{"learning_rate", 0.01}, {"alpha", 0.99}, {"eps", 1e-8}, {"momentum", 0},
                          {"weight_decay", 0}, {"centered", 0}})},
        {"adagrad", with({{"learning_rate", 0.01}, {"lr_decay", 0}, {"weight_decay", 0},
                          {"initial_accumulator_value", 0}, {"eps", 1e-10}})},
    };
  }();
  return table;
}

// A number as the caller wrote it (shortest form: 1e+30, 0.5), not
// std::to_string's fixed six decimals.
std::string as_given(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

}  // namespace

const std::map<std::string, double> &optimizer_defaults(const std::string &kind) {
  check_optimizer_kind(kind);
  return defaults().at(kind);
}

std::atomic<uint64_t> &hyperparam_changes() {
  static std::atomic<uint64_t> changes{0};
  return changes;
}

std::string hyperparameter_names(const std::map<std::string, double> &m) {
  std::string s;
  for (auto &kv : m) s += (s.empty() ? "" : ", ") + kv.first;
  return s;
}

// The slot names each kind may hold.
const std::vector<std::string> &slot_names(const std::string &kind) {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"sgd", {"momentum_buffer"}},
      {"adam", {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}},
      {"adamw", {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}},
      {"rmsprop", {"square_avg", "momentum_buffer", "grad_avg"}},
      {"adagrad", {"sum"}},
  };
  return names.at(kind);
}

void check_optimizer_kind(const std::string &kind) {
  if (!defaults().count(kind)) invalid_argument("unknown optimizer kind '" + kind + "'; kinds: adagrad, adam, adamw, rmsprop, sgd");
}

void check_hyperparameter(const std::string &name, double value) {
  if (!std::isfinite(value)) invalid_argument("hyper-parameter '" + name + "' must be finite");
  if ((name == "clip_global_norm_tf" || name == "nesterov" || name == "amsgrad" || name == "centered") && value != 0 &&
      value != 1)
    invalid_argument(name + " must be 0 or 1, got " + as_given(value) +
                     (name == "clip_global_norm_tf" ? " (0: PyTorch's clip_grad_norm_, 1: TensorFlow's clip_by_global_norm)" : ""));
  if (name == "check_numerics" && value != 0 && value != 1 && value != 2)
    invalid_argument("check_numerics must be 0, 1 or 2, got " + as_given(value));
  if (name == "accumulate_steps" && (value < 1 || value > 1e9 || value != std::floor(value)))
    invalid_argument("accumulate_steps must be an integer >= 1 and <= 1e9, got " + as_given(value));
  if ((name == "beta1" || name == "beta2") && !(value >= 0 && value < 1))
    invalid_argument("hyper-parameter '" + name + "' must be in [0, 1), got " + as_given(value));
  if ((name == "learning_rate" || name == "eps" || name == "clip_global_norm" || name == "clip_value" ||
       name == "weight_decay" || name == "momentum" || name == "dampening" || name == "alpha" || name == "lr_decay" ||
       name == "initial_accumulator_value") &&
      value < 0)
    invalid_argument("hyper-parameter '" + name + "' must be >= 0, got " + as_given(value));
}

void check_hyperparameters(const std::string &kind, const std::map<std::string, double> &values) {
  check_optimizer_kind(kind);
  const auto &known = defaults().at(kind);
  for (const auto &[name, value] : values) {
    if (!known.count(name))
      invalid_argument("optimizer '" + kind + "' has no hyper-parameter '" + name + "'; it has " + hyperparameter_names(known));
    check_hyperparameter(name, value);
  }
  auto get = [&](const char *n) {
    auto it = values.find(n);
    return it != values.end() ? it->second : known.at(n);
  };
  // LibTorch's SGD refuses this combination when it is made.
  if (kind == "sgd" && get("nesterov") != 0 && !(get("momentum") > 0 && get("dampening") == 0))
    invalid_argument("nesterov needs a momentum > 0 and dampening 0");
}

}  // namespace tpt
