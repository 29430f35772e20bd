// What this build knows about NCCL. The only NCCL-specific code of the
// foundation; the NCCL process group and reducer will live next to it.
#pragma once

#include <string>

namespace tpt::dist {

// True when the library was built with the CUDA toolkit's NCCL (TPT_HAVE_NCCL).
bool nccl_compiled() noexcept;

// "no (...)" or "yes, header X, library Y".
std::string nccl_description();

}  // namespace tpt::dist
