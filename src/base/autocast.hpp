// Mixed precision for one call of a tower function (tpt_precision): PyTorch's
// autocast, entered and left as torch.autocast(device, dtype) does.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "tptrain/trainer.h"

namespace tpt {

// The low-precision type of a mixed mode (bfloat16, float16); float32 for
// TPT_PRECISION_FP32.
c10::ScalarType low_precision_type(tpt_precision p);
const char *precision_name(tpt_precision p);  // "fp32", "bf16-mixed", "fp16-mixed"

// Whether this CPU computes bfloat16 natively (x86: AVX-512 BF16 or AMX-BF16;
// AArch64: the BF16 extension). Without, LibTorch emulates bfloat16 and a
// bf16-mixed step on the CPU is many times slower than a float32 one.
bool cpu_has_native_bf16();

// While it lives, the calling thread's operators on `device` run under
// autocast to `p`'s low-precision type (LibTorch's per-operator policy:
// matmuls and convolutions low, reductions, losses and normalisations float32);
// nothing for TPT_PRECISION_FP32. Autocast is per thread: each tower thread
// enters its own. Nested guards restore what they found, and the outermost
// clears the cache of cast weights, as torch.autocast's exit does.
class AutocastGuard {
 public:
  AutocastGuard(tpt_precision p, c10::DeviceType device);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard &) = delete;
  AutocastGuard &operator=(const AutocastGuard &) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace tpt
