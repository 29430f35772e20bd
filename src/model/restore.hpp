// Restoring a model's variables by name from a file: a tptrain checkpoint,
// a state_dict saved by torch.save, or a TorchScript module.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tpt {

namespace model {
class Model;
}

// Restoring variables by name into a model (all or nothing: nothing changes
// unless every check passes).
struct RestoreOptions {
  bool ignore_missing = false;     // model variables the file lacks
  bool ignore_unexpected = true;   // file tensors the model lacks (optimizer slots, other heads)
  bool ignore_shape_mismatch = false;
  std::string prefix;              // prepended to the model's names to find them in the file
  std::map<std::string, std::string> name_map;  // model name -> name in the file
};
// From a tptrain checkpoint, a state_dict saved by torch.save (a dict of
// tensors), or a TorchScript module's parameters and buffers. Returns the
// names restored.
std::vector<std::string> restore_variables(model::Model &model, const std::string &path, const RestoreOptions &o);
// The named tensors of such a file.
std::vector<std::pair<std::string, at::Tensor>> read_named_tensors(const std::string &path);

}  // namespace tpt
