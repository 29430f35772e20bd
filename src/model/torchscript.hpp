// Models made from TorchScript modules.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/pickle.hpp"
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

// The parameters and buffers of a module saved with torch.jit.save (the
// file's bytes, checked by pickle::check_zip into `index`), under the names
// its model's variables get (dots become '/'), for restoring another model's
// variables. The archive is checked as TorchScript source is (see
// load_checked_module) before LibTorch loads it. TPT_ERR_INVALID_ARGUMENT or
// TPT_ERR_IO naming `what`.
std::vector<std::pair<std::string, at::Tensor>> torchscript_named_tensors(const pickle::Bytes &bytes,
                                                                          const pickle::ZipIndex &index,
                                                                          const std::string &what);
// Whether a checked zip archive holds TorchScript code (torch.jit.save's).
bool is_torchscript_archive(const pickle::ZipIndex &index);

}  // namespace tpt::model
