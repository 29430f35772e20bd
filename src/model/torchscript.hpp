// Models made from TorchScript modules.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/model.hpp"

namespace tpt::model {

// Loads a module saved with torch.jit.save as a model (see tptrain.h).
std::shared_ptr<Model> load_torchscript(const std::string &path, std::vector<InputSpec> inputs);

// An attribute of a module compiled from source: a parameter when
// options.trainable, else a buffer.
struct TorchScriptParam {
  std::string name;  // a TorchScript identifier (self.<name>)
  std::vector<int64_t> shape;
  VariableOptions options;
};

// Creates and initialises `params` (in order, LibTorch's default generator),
// then compiles `source` into a module over them (see tptrain.h). Bad params
// and compile errors are TPT_ERR_INVALID_ARGUMENT; messages name params[i].
std::shared_ptr<Model> compile_torchscript(const std::string &source, const std::vector<TorchScriptParam> &params,
                                           std::vector<InputSpec> inputs);

// The parameters and buffers of a module saved with torch.jit.save, under
// the names its model's variables get (dots become '/'), for restoring
// another model's variables. TPT_ERR_IO when it is not such a module.
std::vector<std::pair<std::string, at::Tensor>> torchscript_named_tensors(const std::string &path);
// Whether `path` is a zip archive holding TorchScript code (torch.jit.save's).
bool is_torchscript_archive(const std::string &path);

}  // namespace tpt::model
