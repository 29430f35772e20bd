// The LibTorch versions tptrain builds against differ in a few signatures.
// Each difference is one name here, so that no other file tests a version:
// Debian 12's LibTorch 1.13, Debian 13's 2.6 and PyTorch's current 2.x
// (meson.build refuses the versions in between, which nothing here covers).
#pragma once

#include <torch/version.h>

#include <sstream>
#include <string>
#include <type_traits>

#define TPT_TORCH_VERSION (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)

// c10::Allocator::allocate: const up to 2.2, not from 2.3 on (it changes the
// allocator's state); write `c10::DataPtr allocate(size_t n) TPT_ALLOCATE_CONST override`.
// From 2.3 on, copy_data is pure virtual too: define it (without override).
#if TPT_TORCH_VERSION >= 203
#define TPT_ALLOCATE_CONST
#else
#define TPT_ALLOCATE_CONST const
#endif

// at::autocast's per-device state: is_cpu_enabled / set_cpu_enabled /
// set_autocast_cpu_dtype (is_enabled & co. for CUDA) up to 2.3; one function
// per concern taking the device type from 2.4 on, where the old ones are
// deprecated. For base/autocast.cpp, which includes <ATen/autocast_mode.h>.
#if TPT_TORCH_VERSION >= 204
#define TPT_AUTOCAST_ENABLED(device) at::autocast::is_autocast_enabled(device)
#define TPT_AUTOCAST_SET_ENABLED(device, on) at::autocast::set_autocast_enabled(device, on)
#define TPT_AUTOCAST_DTYPE(device) at::autocast::get_autocast_dtype(device)
#define TPT_AUTOCAST_SET_DTYPE(device, dtype) at::autocast::set_autocast_dtype(device, dtype)
#else
#define TPT_AUTOCAST_ENABLED(device) \
  ((device) == c10::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled())
#define TPT_AUTOCAST_SET_ENABLED(device, on) \
  ((device) == c10::kCUDA ? at::autocast::set_enabled(on) : at::autocast::set_cpu_enabled(on))
#define TPT_AUTOCAST_DTYPE(device) \
  ((device) == c10::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype())
#define TPT_AUTOCAST_SET_DTYPE(device, dtype) \
  ((device) == c10::kCUDA ? at::autocast::set_autocast_gpu_dtype(dtype) : at::autocast::set_autocast_cpu_dtype(dtype))
#endif

namespace tpt::compat {

// torch::optim::Optimizer::state()'s key for parameter p: the TensorImpl's
// address as text up to 1.13 (c10::guts::to_string), the address itself in 2.x.
template <class Key, class TensorT>
Key optimizer_state_key(const TensorT &p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << static_cast<const void *>(p.unsafeGetTensorImpl());
    return s.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

// c10d::TCPStoreOptions: 2.4 added useLibUV (default true; Debian's LibTorch
// has no libuv): the classic TCP store, the only one 1.13 has, everywhere.
template <class Options>
auto classic_tcp_store(Options &o, int) -> decltype(o.useLibUV = false, void()) {
  o.useLibUV = false;
}
template <class Options>
void classic_tcp_store(Options &, long) {}
template <class Options>
void classic_tcp_store(Options &o) {
  classic_tcp_store(o, 0);
}

}  // namespace tpt::compat
