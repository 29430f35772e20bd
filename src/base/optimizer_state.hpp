// Optimizer kinds as data: each kind's hyper-parameters with their defaults
// (PyTorch's), the rules a value must follow (tpt_optimizer_set's), the
// slots a kind keeps per variable, and OptimizerState, an optimizer's state
// as a checkpoint holds it. The checkpoint reader checks a file against these
// without an optimizer at hand; model/optimizer.cpp makes LibTorch's.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tpt {

// An optimizer's state: its kind and hyper-parameters, and per trainable
// variable (by name) its slots (momentum buffers, Adam's moments) and step.
struct OptimizerState {
  std::string kind;
  std::map<std::string, double> hparams;
  int64_t micro_steps = 0;  // gradient accumulation in progress
  std::map<std::string, std::map<std::string, at::Tensor>> slots;
  std::map<std::string, int64_t> steps;
  std::map<std::string, at::Tensor> grads;  // accumulated gradients (micro_steps > 0)
};

// A kind's hyper-parameters and their defaults; TPT_ERR_INVALID_ARGUMENT
// listing the kinds for an unknown one.
const std::map<std::string, double> &optimizer_defaults(const std::string &kind);
// The kinds and hyper-parameters an optimizer accepts, for a value from
// elsewhere (a checkpoint): TPT_ERR_INVALID_ARGUMENT naming what is wrong.
void check_optimizer_kind(const std::string &kind);
// One value by tpt_optimizer_set's rules (finite; flags 0 or 1; rates,
// decays and eps >= 0; betas in [0, 1); accumulate_steps an integer in [1, 1e9]).
void check_hyperparameter(const std::string &name, double value);
// A kind's set of them (names known, each value, the combinations LibTorch refuses).
void check_hyperparameters(const std::string &kind, const std::map<std::string, double> &values);
// The slots (PyTorch's state_dict names) a kind's per-variable state has.
const std::vector<std::string> &slot_names(const std::string &kind);
// Changes of any optimizer's hyper-parameters in this process
// (model::Optimizer::set counts them): in a distributed job the trainer
// warns when a chief-only callback made one, as the other ranks, which do
// not run it, go on with the old value.
std::atomic<uint64_t> &hyperparam_changes();
// "a, b, c": the names of a hyper-parameter map, for messages.
std::string hyperparameter_names(const std::map<std::string, double> &m);

}  // namespace tpt
