#include "base/autocast.hpp"

#include <ATen/autocast_mode.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "base/torch_compat.hpp"

namespace tpt {

c10::ScalarType low_precision_type(tpt_precision p) {
  switch (p) {
    case TPT_PRECISION_BF16_MIXED: return c10::ScalarType::BFloat16;
    case TPT_PRECISION_FP16_MIXED: return c10::ScalarType::Half;
    default: return c10::ScalarType::Float;
  }
}

const char *precision_name(tpt_precision p) {
  switch (p) {
    case TPT_PRECISION_BF16_MIXED: return "bf16-mixed";
    case TPT_PRECISION_FP16_MIXED: return "fp16-mixed";
    default: return "fp32";
  }
}

bool cpu_has_native_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1u;
  const unsigned max_subleaf = a;
  bool avx512_bf16 = false;
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) avx512_bf16 = (a >> 5) & 1u;
  return avx512_bf16 || amx_bf16;
#elif defined(__aarch64__) && defined(__linux__) && defined(HWCAP2_BF16)
  return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#else
  return true;  // not known here: no warning
#endif
}

AutocastGuard::AutocastGuard(tpt_precision p, c10::DeviceType device) : device_(device) {
  if (p != TPT_PRECISION_BF16_MIXED && p != TPT_PRECISION_FP16_MIXED) return;
  prev_enabled_ = TPT_AUTOCAST_ENABLED(device_);
  prev_dtype_ = TPT_AUTOCAST_DTYPE(device_);
  TPT_AUTOCAST_SET_ENABLED(device_, true);
  TPT_AUTOCAST_SET_DTYPE(device_, low_precision_type(p));
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  TPT_AUTOCAST_SET_ENABLED(device_, prev_enabled_);
  TPT_AUTOCAST_SET_DTYPE(device_, prev_dtype_);
}

}  // namespace tpt
