// A shape as messages write it: "[2, 3]".
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace tpt {

inline std::string shape_text(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace tpt
