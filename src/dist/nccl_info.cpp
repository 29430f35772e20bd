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

// ------------------------------------------------------------- device reduce

#include "dist/device_reduce.hpp"
#include "dist/world.hpp"

namespace tpt::dist {

namespace {
DeviceAllReduceMaker &maker() {
  static DeviceAllReduceMaker m = nullptr;
  return m;
}
}  // namespace

void register_device_all_reduce(DeviceAllReduceMaker m) { maker() = m; }

std::unique_ptr<DeviceAllReduce> device_all_reduce(const std::vector<c10::Device> &devices, World *world) {
  // A job of any size, one process included, sums over its world with NCCL as
  // PyTorch DDP's NCCL backend does at world size 1 (a communicator of one
  // rank): a one-GPU job runs the code a job of many does.
  const bool across = world != nullptr;
  if (!maker() || devices.empty() || (devices.size() < 2 && !across)) return nullptr;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].is_cuda() || !devices[i].has_index()) return nullptr;
    for (size_t j = 0; j < i; ++j)
      if (devices[j] == devices[i]) return nullptr;  // NCCL: one rank per device
  }
  return maker()(devices, across ? world : nullptr);
}

}  // namespace tpt::dist
