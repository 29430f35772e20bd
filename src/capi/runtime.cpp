// Process-wide settings: build features, threads, the seed, the checkpoint read
// limit, determinism and float32 precision (include/tptrain/runtime.h).
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <ATen/core/Tensor.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/GradMode.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/cpu_threads.hpp"
#include "base/cpu_allocator.hpp"
#include "base/pickle.hpp"
#include "capi/barrier.hpp"
#include "dist/nccl_info.hpp"
#include "dist/world.hpp"
#include "model/model.hpp"

using tpt::capi::guard;
using tpt::capi::require;

namespace {

bool cuda_available() noexcept {
  try {
    return at::detail::getCUDAHooks().hasCUDA() && at::detail::getCUDAHooks().getNumGPUs() > 0;
  } catch (...) {
    return false;
  }
}

#ifdef TPT_HAVE_GLOO
constexpr bool kHaveGloo = true;
#else
constexpr bool kHaveGloo = false;
#endif

std::string describe_build() {
  std::ostringstream s;
  s << "tptrain " << TPT_VERSION_STRING << " (ABI " << TPT_ABI_VERSION << ")\n";
  s << "LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << "."
    << TORCH_VERSION_PATCH << "\n";
  s << "c10d Gloo: " << (kHaveGloo ? "yes" : "no") << "\n";
  s << "CUDA devices: " << (cuda_available() ? "yes" : "no") << "\n";
  s << "NCCL: " << tpt::dist::nccl_description() << "\n";
  s << "intra-op threads: " << at::get_num_threads() << " (usable cores: " << tpt::usable_cores() << ")\n";
  s << "BLAS: " << tpt::blas_description() << "\n";
  tpt::model::CpuAllocatorStats a = tpt::model::cpu_allocator_stats();
  s << "CPU allocator: "
    << (a.installed ? "tptrain's, keeps freed blocks (up to " + std::to_string(a.cache_limit >> 20) + " MiB)"
                    : std::string("c10's default (TPT_CPU_ALLOCATOR=system or another allocator registered)"))
    << "\n";
  s << at::show_config();
  return s.str();
}

}  // namespace

int tpt_has_feature(tpt_feature feature) {
  const int64_t f = tpt::enum_int(feature);
  if (f != TPT_FEATURE_GLOO && f != TPT_FEATURE_CUDA && f != TPT_FEATURE_NCCL) return 0;
  switch (feature) {
    case TPT_FEATURE_GLOO: return kHaveGloo ? 1 : 0;
    case TPT_FEATURE_CUDA: return cuda_available() ? 1 : 0;
    case TPT_FEATURE_NCCL: return tpt::dist::nccl_compiled() ? 1 : 0;
    case TPT_FEATURE_FORCE32: break;
  }
  return 0;
}

const char *tpt_build_info(void) {
  static const std::string info = [] {
    try {
      return describe_build();
    } catch (...) {
      return std::string("tptrain " TPT_VERSION_STRING " (build description unavailable)");
    }
  }();
  return info.c_str();
}

tpt_status *tpt_set_num_threads(int num_threads) {
  return tpt::capi::guard(__func__, [&] {
    if (num_threads < 1)
      tpt::invalid_argument("num_threads must be >= 1, got " + std::to_string(num_threads));
    at::set_num_threads(num_threads);  // an OpenMP BLAS and MKL follow it (base/cpu_threads.hpp)
  });
}

tpt_status *tpt_get_num_threads(int *out) {
  return tpt::capi::guard(__func__, [&] {
    *tpt::capi::require(out, "out") = at::get_num_threads();
  });
}

tpt_status *tpt_manual_seed(uint64_t seed) {
  return guard(__func__, [&] { at::manual_seed(seed); });
}

tpt_status *tpt_set_float32_precision(tpt_float32_precision precision) {
  return guard(__func__, [&] {
    const int64_t p = tpt::enum_int(precision);
    if (p != TPT_FLOAT32_DEFAULT && p != TPT_FLOAT32_IEEE && p != TPT_FLOAT32_TF32)
      tpt::invalid_argument("precision must be TPT_FLOAT32_DEFAULT, TPT_FLOAT32_IEEE or TPT_FLOAT32_TF32, got " +
                            std::to_string(p));
    // The legacy setters: from 1.13 to 2.x each keeps the old flag and the newer per-operator
    // fp32_precision equal, so LibTorch's own checks for a mix of the two never fire.
    at::globalContext().setAllowTF32CuBLAS(p == TPT_FLOAT32_TF32);
    at::globalContext().setAllowTF32CuDNN(p != TPT_FLOAT32_IEEE);
  });
}

tpt_status *tpt_set_determinism(tpt_determinism mode) {
  return guard(__func__, [&] {
    const int64_t m = tpt::enum_int(mode);
    if (m != TPT_DETERMINISM_DEFAULT && m != TPT_DETERMINISM_WARN && m != TPT_DETERMINISM_ON)
      tpt::invalid_argument("mode must be TPT_DETERMINISM_DEFAULT, TPT_DETERMINISM_WARN or TPT_DETERMINISM_ON, got " +
                            std::to_string(m));
    const bool on = m != TPT_DETERMINISM_DEFAULT;
    // cuBLAS gives the same bits run to run only with a fixed workspace configuration (NVIDIA's
    // "results reproducibility"); LibTorch checks the variable once, at its first cuBLAS call.
    if (on && setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0) != 0)
      tpt::fail(TPT_ERR_OUT_OF_MEMORY, std::string("setting CUBLAS_WORKSPACE_CONFIG: ") + std::strerror(errno));
    at::globalContext().setDeterministicAlgorithms(on, m == TPT_DETERMINISM_WARN);
    at::globalContext().setDeterministicCuDNN(on);
    if (on) at::globalContext().setBenchmarkCuDNN(false);
  });
}

tpt_status *tpt_set_checkpoint_read_limit(uint64_t bytes) {
  return guard(__func__, [&] {
    if (bytes > (uint64_t(1) << 62)) tpt::invalid_argument("bytes is " + std::to_string(bytes) + "; at most 2^62");
    tpt::pickle::set_read_limit(bytes);
  });
}
