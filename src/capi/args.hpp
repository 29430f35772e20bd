// Argument conversions that the C API files of several modules share (each
// names the argument in its error): text out-parameters, tensor arrays,
// variable options, paths, images.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "capi/barrier.hpp"
#include "capi/handles.hpp"
#include "model/dtype.hpp"
#include "model/model.hpp"
#include "tptrain.h"

namespace tpt::capi {

// Copies `text` with its NUL into buf; *needed (when not NULL) receives the
// size needed, also when it does not fit (TPT_ERR_INVALID_ARGUMENT).
inline void copy_text(char *buf, size_t size, size_t *needed, const std::string &text, const char *buf_name = "buf") {
  if (needed) *needed = text.size() + 1;
  require(buf, buf_name);
  if (text.size() + 1 > size)
    tpt::invalid_argument("size is " + std::to_string(size) + " but " + std::to_string(text.size() + 1) +
                          " bytes are needed");
  std::memcpy(buf, text.c_str(), text.size() + 1);
}

// The tensors ts[0..n), each checked, named "name[i]" in errors.
inline std::vector<at::Tensor> tensors_arg(const tpt_tensor *const *ts, size_t n, const char *name) {
  if (n > 0) require(ts, name);
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    std::string entry = std::string(name) + "[" + std::to_string(i) + "]";
    out.push_back(tensor_arg(ts[i], entry.c_str()));
  }
  return out;
}

// tpt_variable_options (NULL: TPT_VARIABLE_OPTIONS_INIT) as the variable
// store's; `name` names the pointer in messages.
inline tpt::model::VariableOptions variable_options_arg(const tpt_variable_options *options, const std::string &name) {
  tpt_variable_options o = TPT_VARIABLE_OPTIONS_INIT;
  if (options) {
    if (options->version < 1 || options->version > TPT_VARIABLE_OPTIONS_VERSION)
      tpt::invalid_argument(name + "->version is " + std::to_string(options->version) +
                            " (initialise with TPT_VARIABLE_OPTIONS_INIT)");
    o = *options;
  }
  auto type = tpt::scalar_type_of(o.dtype);
  if (!type) tpt::invalid_argument(name + "->dtype " + std::to_string(tpt::enum_int(o.dtype)) + " is not a tpt_dtype");
  tpt::model::VariableOptions vo;
  vo.dtype = *type;
  std::memcpy(&vo.init, &o.init, sizeof vo.init);  // checked as an integer where it is used (initialize)
  vo.trainable = o.trainable != 0;
  vo.a = o.a;
  vo.b = o.b;
  return vo;
}

// The common prologue of functions with a tensor out-parameter: *out is
// cleared first, so that it is NULL on failure.
inline void clear(tpt_tensor **out) {
  require(out, "out");
  *out = nullptr;
}

// A path argument: not NULL, not empty.
inline std::string path_arg(const char *path, const char *name) {
  require(path, name);
  if (*path == '\0') tpt::invalid_argument(std::string("argument '") + name + "' is empty");
  return path;
}

// NULL as "".
inline std::string optional_string(const char *s) { return s ? s : ""; }

// An image argument as put_image takes it (H x W, H x W x C or, with
// `batch`, N x H x W x C; C = 1, 3 or 4; uint8 or floating point in
// [0, 255]) as a contiguous CPU uint8 N x H x W x C tensor (capi/image.cpp).
at::Tensor image_u8(const tpt_tensor *image, bool batch);

}  // namespace tpt::capi
