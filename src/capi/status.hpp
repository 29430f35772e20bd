// The definition of the opaque tpt_status and the helpers that make one.
#pragma once

#include <string>

#include "tptrain.h"

struct tpt_status {
  tpt_code code;
  std::string message;
};

namespace tpt::capi {

// A new status; never throws. Returns the static out-of-memory status if the
// allocation fails, and nullptr for TPT_OK.
tpt_status *make_status(tpt_code code, const char *message) noexcept;
tpt_status *make_status(tpt_code code, const std::string &message) noexcept;

// The preallocated status returned when memory runs out (never freed).
tpt_status *out_of_memory_status() noexcept;

// Throw TPT_ERR_INVALID_ARGUMENT: "argument 'name' is NULL" / "... is not a live <type>".
[[noreturn, gnu::cold]] void throw_null_argument(const char *name);
[[noreturn, gnu::cold]] void throw_not_live(const char *name, const char *type);

}  // namespace tpt::capi
