// Mapping between tpt_dtype (the public vocabulary) and LibTorch's ScalarType.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

#include "base/error.hpp"
#include "tptrain/tensor.h"

namespace tpt {

// (By reference: a caller's value outside the enum is read as an integer,
// see enum_int.)
inline c10::optional<c10::ScalarType> scalar_type_of(const tpt_dtype &d) noexcept {
  const int64_t v = enum_int(d);
  if (v < TPT_DTYPE_F32 || v >= TPT_DTYPE_FORCE32) return c10::nullopt;
  switch (d) {
    case TPT_DTYPE_F32: return c10::ScalarType::Float;
    case TPT_DTYPE_F64: return c10::ScalarType::Double;
    case TPT_DTYPE_F16: return c10::ScalarType::Half;
    case TPT_DTYPE_BF16: return c10::ScalarType::BFloat16;
    case TPT_DTYPE_I64: return c10::ScalarType::Long;
    case TPT_DTYPE_I32: return c10::ScalarType::Int;
    case TPT_DTYPE_U8: return c10::ScalarType::Byte;
    case TPT_DTYPE_BOOL: return c10::ScalarType::Bool;
    case TPT_DTYPE_FORCE32: break;
  }
  return c10::nullopt;
}

// Throws TPT_ERR_UNSUPPORTED for a LibTorch type the ABI has no name for.
inline tpt_dtype dtype_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return TPT_DTYPE_F32;
    case c10::ScalarType::Double: return TPT_DTYPE_F64;
    case c10::ScalarType::Half: return TPT_DTYPE_F16;
    case c10::ScalarType::BFloat16: return TPT_DTYPE_BF16;
    case c10::ScalarType::Long: return TPT_DTYPE_I64;
    case c10::ScalarType::Int: return TPT_DTYPE_I32;
    case c10::ScalarType::Byte: return TPT_DTYPE_U8;
    case c10::ScalarType::Bool: return TPT_DTYPE_BOOL;
    default: break;
  }
  tpt::fail(TPT_ERR_UNSUPPORTED,
            std::string("LibTorch dtype ") + c10::toString(t) + " has no tpt_dtype");
}

inline const char *dtype_name(tpt_dtype d) noexcept {
  switch (d) {
    case TPT_DTYPE_F32: return "f32";
    case TPT_DTYPE_F64: return "f64";
    case TPT_DTYPE_F16: return "f16";
    case TPT_DTYPE_BF16: return "bf16";
    case TPT_DTYPE_I64: return "i64";
    case TPT_DTYPE_I32: return "i32";
    case TPT_DTYPE_U8: return "u8";
    case TPT_DTYPE_BOOL: return "bool";
    case TPT_DTYPE_FORCE32: break;
  }
  return "unknown";
}

}  // namespace tpt
