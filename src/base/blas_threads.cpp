// The BLAS's own thread pool, found at run time (base/blas_threads.hpp).
#include "base/blas_threads.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tpt {

namespace {

struct OpenBlas {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
  int (*parallel)() = nullptr;  // 0 sequential, 1 its own pthreads, 2 OpenMP
};

template <typename F>
void find(void *handle, const char *name, F &out) {
  if (!out) out = reinterpret_cast<F>(dlsym(handle, name));
}

// The process's OpenBLAS: in the global scope (a host linked with LibTorch),
// else among the loaded objects (a host that dlopen'ed libtptrain locally).
OpenBlas load() {
  OpenBlas b;
  find(RTLD_DEFAULT, "openblas_set_num_threads", b.set);
  find(RTLD_DEFAULT, "openblas_get_num_threads", b.get);
  find(RTLD_DEFAULT, "openblas_get_parallel", b.parallel);
  if (!b.set || !b.get || !b.parallel) {
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t, void *data) {
          auto &ob = *static_cast<OpenBlas *>(data);
          if (!info->dlpi_name || !std::strstr(info->dlpi_name, "blas")) return 0;
          void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);  // kept: the process's lifetime
          if (!h) return 0;
          find(h, "openblas_set_num_threads", ob.set);
          find(h, "openblas_get_num_threads", ob.get);
          find(h, "openblas_get_parallel", ob.parallel);
          return ob.set && ob.get && ob.parallel ? 1 : 0;
        },
        &b);
  }
  if (!b.set || !b.get || !b.parallel || b.parallel() != 1) return {};
  return b;
}

const OpenBlas &openblas() {
  static const OpenBlas b = load();
  return b;
}

bool kept() {
  const char *env = std::getenv("TPT_BLAS_POOL");
  return env && std::strcmp(env, "keep") == 0;
}

std::mutex g_mu;
int g_holders = 0;  // SingleThreadedBlas alive
int g_kept = 0;     // the pool's size to restore

}  // namespace

void set_blas_pool_threads(int n) {
  const OpenBlas &b = openblas();
  if (!b.set || n < 1 || kept()) return;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_holders > 0) g_kept = n;
  else b.set(n);
}

SingleThreadedBlas::SingleThreadedBlas() {
  const OpenBlas &b = openblas();
  if (!b.set || kept()) return;
  active_ = true;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_holders++ > 0) return;
  g_kept = b.get();
  if (g_kept != 1) b.set(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  const OpenBlas &b = openblas();
  if (!active_) return;
  std::lock_guard<std::mutex> l(g_mu);
  if (--g_holders > 0) return;
  if (g_kept != 1) b.set(g_kept);
}

}  // namespace tpt
