// The tensors of a file written by python3-torch's torch.save (a
// state_dict, or a dict holding dicts of tensors).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace tpt {

// Name -> tensor in the file's order; nested dicts give "outer/inner" names
// and other values are skipped. TPT_ERR_INVALID_ARGUMENT naming the file for
// anything else (other pickled objects, truncated or corrupted archives).
std::vector<std::pair<std::string, at::Tensor>> read_torch_save(const std::string &path);

// Checks a zip archive's structure (the end record, every central directory
// entry and the local header and data it points to lie inside the file and
// agree) before LibTorch's zip reader, which trusts them, sees it.
// TPT_ERR_INVALID_ARGUMENT naming `what`.
void check_zip(const char *data, size_t size, const std::string &what);

}  // namespace tpt
