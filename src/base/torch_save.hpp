// The tensors of a file written by python3-torch's torch.save (a
// state_dict, or a dict holding dicts of tensors).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tpt {

// Name -> tensor in the file's order; nested dicts give "outer/inner" names
// and other values are skipped. `archive` is the file's bytes, `what` names
// it in errors: TPT_ERR_INVALID_ARGUMENT for anything else (other pickled
// objects, a dict shared or nested more than 32 deep, names given twice,
// damaged archives), never a crash (base/pickle.hpp reads it).
std::vector<std::pair<std::string, at::Tensor>> read_torch_save(const std::shared_ptr<const std::vector<char>> &archive,
                                                                const std::string &what);

}  // namespace tpt
