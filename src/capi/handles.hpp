// Definitions of the opaque handle types and the checks that turn a NULL,
// freed or foreign pointer into a clear error instead of a crash.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "barrier.hpp"

// A tag at the start of every handle: a pointer whose tag is wrong is not a
// live handle of that type. free() clears the tag before releasing memory.
inline constexpr uint64_t kTensorMagic = 0x74707454656e7372ull;  // "tptTensr"

struct tpt_tensor {
  uint64_t magic = kTensorMagic;
  at::Tensor value;
  explicit tpt_tensor(at::Tensor t) : value(std::move(t)) {}
};

namespace tpt::capi {

inline const at::Tensor &tensor_arg(const tpt_tensor *t, const char *name) {
  require(t, name);
  if (__builtin_expect(t->magic != kTensorMagic, 0)) throw_not_live(name, "tpt_tensor");
  return t->value;
}

// Wraps a tensor in a new handle and stores it in *out.
inline void give(tpt_tensor **out, at::Tensor value) { *out = new tpt_tensor(std::move(value)); }

}  // namespace tpt::capi
