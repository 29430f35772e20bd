// Benchmark call-roundtrip: the cost of one C API call on the success path
// (tpt_tensor_numel: handle check, exception barrier, out-parameter, NULL
// status) against the same query made directly in C++ (at::Tensor::numel()
// through a non-inlined function). Prints ns per call for both and the ratio
// direct/C-API as the last line (R > 1 would mean the C API is faster).
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tptrain.h"

namespace {

__attribute__((noinline)) int64_t direct_numel(const at::Tensor &t) { return t.numel(); }

template <class F>
double ns_per_call(F &&f, long iters) {
  auto t0 = std::chrono::steady_clock::now();
  f(iters);
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iters);
}

}  // namespace

int main(int argc, char **argv) {
  long iters = argc > 1 ? std::atol(argv[1]) : 20000000;
  const int repeats = 7;
  at::Tensor t = at::zeros({3, 5});
  float data[15] = {0};
  const int64_t shape[] = {3, 5};
  tpt_tensor *h = nullptr;
  if (tpt_status *st = tpt_tensor_from_data(&h, data, sizeof data, shape, 2, nullptr)) {
    std::fprintf(stderr, "%s\n", tpt_status_message(st));
    return 1;
  }
  volatile int64_t sink = 0;
  std::vector<double> capi, direct;
  for (int r = 0; r < repeats; ++r) {
    direct.push_back(ns_per_call([&](long n) {
      int64_t acc = 0;
      for (long i = 0; i < n; ++i) acc += direct_numel(t);
      sink = acc;
    }, iters));
    capi.push_back(ns_per_call([&](long n) {
      int64_t acc = 0, v = 0;
      for (long i = 0; i < n; ++i) {
        tpt_status *st = tpt_tensor_numel(&v, h);
        if (st) std::abort();
        acc += v;
      }
      sink = acc;
    }, iters));
  }
  std::sort(capi.begin(), capi.end());
  std::sort(direct.begin(), direct.end());
  double c = capi[repeats / 2], d = direct[repeats / 2];
  tpt_tensor_free(h);
  std::printf("iterations per repeat: %ld, repeats: %d (medians)\n", iters, repeats);
  std::printf("baseline  direct C++ at::Tensor::numel(): %.2f ns/call\n", d);
  std::printf("tptrain   tpt_tensor_numel() via C ABI:   %.2f ns/call (overhead %.2f ns)\n", c, c - d);
  std::printf("call-roundtrip ratio=%.3f goal=0.5\n", d / c);
  return 0;
}
