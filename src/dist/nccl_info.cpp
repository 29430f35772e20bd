#include "dist/nccl_info.hpp"

#ifdef TPT_HAVE_NCCL
#include <nccl.h>
#endif

namespace tpt::dist {

bool nccl_compiled() noexcept {
#ifdef TPT_LINK_NCCL
  return true;
#else
  return false;
#endif
}

std::string nccl_description() {
#if defined(TPT_LINK_NCCL)
  int runtime = 0;
  std::string text = "yes, header " + std::to_string(NCCL_VERSION_CODE);
  if (ncclGetVersion(&runtime) == ncclSuccess) text += ", library " + std::to_string(runtime);
  return text;
#elif defined(TPT_HAVE_NCCL)
  return "header " + std::to_string(NCCL_VERSION_CODE) +
         " compiled, not linked (this LibTorch has no CUDA)";
#else
  return "no (built without the CUDA toolkit's NCCL)";
#endif
}

}  // namespace tpt::dist
