// Models made from TorchScript modules.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.hpp"

namespace tpt::model {

// Loads a module saved with torch.jit.save as a model (see tptrain.h).
std::shared_ptr<Model> load_torchscript(const std::string &path, std::vector<InputSpec> inputs);

}  // namespace tpt::model
