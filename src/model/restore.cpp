// Restoring variables by name into a model: from a tptrain checkpoint, a
// torch.save'd state_dict or a TorchScript module (docs/checkpoints.md).
#include "model/restore.hpp"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "base/checkpoint_file.hpp"
#include "base/error.hpp"
#include "base/files.hpp"
#include "base/pickle.hpp"
#include "base/torch_save.hpp"
#include "model/model.hpp"
#include "model/torchscript.hpp"

namespace tpt {

// ---- variables by name

std::vector<std::pair<std::string, at::Tensor>> read_named_tensors(const std::string &path) {
  std::string file = resolve_checkpoint(path);
  std::vector<char> bytes = read_file_bytes(file);
  if (is_checkpoint_file(bytes))
    return decode(std::move(bytes), "checkpoint " + file).variables;  // a tptrain checkpoint: its variables
  pickle::ZipIndex index = pickle::check_zip(bytes.data(), bytes.size(), file);  // before LibTorch's zip reader sees it
  auto shared = std::make_shared<const std::vector<char>>(std::move(bytes));
  if (model::is_torchscript_archive(index)) return model::torchscript_named_tensors(shared, index, file);
  // torch.save's file: PyTorch's dotted names ("fc.weight") as tptrain spells variables ("fc/weight").
  std::vector<std::pair<std::string, at::Tensor>> out = read_torch_save(shared, file);
  std::set<std::string> names;
  for (auto &[name, t] : out) {
    std::replace(name.begin(), name.end(), '.', '/');
    if (!names.insert(name).second) invalid_argument(file + ": the name '" + name + "' is given twice ('.' reads as '/')");
  }
  return out;
}

std::vector<std::string> restore_variables(model::Model &m, const std::string &path, const RestoreOptions &o) {
  std::vector<std::pair<std::string, at::Tensor>> file = read_named_tensors(path);
  std::map<std::string, const at::Tensor *> by_name;
  for (const auto &[n, t] : file) by_name[n] = &t;
  std::vector<model::Variable> vars = m.variables().all();
  if (vars.empty()) fail(TPT_ERR_STATE, "the model has no variables yet: build it first (tpt_model_build)");
  std::vector<std::string> missing, mismatched;
  std::set<std::string> used;
  std::vector<std::pair<const model::Variable *, const at::Tensor *>> plan;
  for (const model::Variable &v : vars) {
    auto mapped = o.name_map.find(v.name);
    std::string key = mapped != o.name_map.end() ? mapped->second : o.prefix + v.name;
    auto it = by_name.find(key);
    if (it == by_name.end()) {
      missing.push_back(v.name + (key != v.name ? " (as '" + key + "')" : ""));
      continue;
    }
    used.insert(key);
    const at::Tensor &t = *it->second;
    if (t.sizes() != v.value.sizes()) {
      mismatched.push_back(v.name + ": the model's is " + shape_text(v.value.sizes()) + ", the file's " +
                           shape_text(t.sizes()));
      continue;
    }
    if (!t.is_floating_point() && v.value.is_floating_point()) {
      mismatched.push_back(v.name + ": the file's tensor is not floating point");
      continue;
    }
    if (t.is_complex() || t.is_quantized() || t.layout() != at::kStrided || t.device().type() != at::kCPU) {
      mismatched.push_back(v.name + ": the file's tensor is " + std::string(c10::toString(t.scalar_type())) + " on " +
                           t.device().str() + ", not a real dense tensor on the CPU");
      continue;
    }
    plan.emplace_back(&v, &t);
  }
  std::vector<std::string> unexpected;
  for (const auto &[n, t] : file)
    if (!used.count(n)) unexpected.push_back(n);
  auto list = [](const std::vector<std::string> &v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 20; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 20) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  };
  std::string errors;
  if (!missing.empty() && !o.ignore_missing) errors += "; missing from the file: " + list(missing);
  if (!mismatched.empty() && !o.ignore_shape_mismatch) errors += "; shapes differ: " + list(mismatched);
  if (!unexpected.empty() && !o.ignore_unexpected) errors += "; in the file but not in the model: " + list(unexpected);
  if (!errors.empty())
    invalid_argument("cannot restore from " + path + errors.substr(1) + " (nothing was changed)");
  at::NoGradGuard no_grad;
  std::vector<std::string> restored;
  for (auto &[v, t] : plan) {
    v->value.copy_(*t);
    restored.push_back(v->name);
  }
  m.touch();  // replicas follow before the next step
  return restored;
}


}  // namespace tpt
