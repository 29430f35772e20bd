// tptrain's threads on the CPU, set when libtptrain is loaded
// (base/cpu_threads.hpp).
#include "base/cpu_threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <link.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace tpt {

namespace {

struct OpenBlas {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
  int (*parallel)() = nullptr;  // 0 sequential, 1 its own pthreads, 2 OpenMP
  char *(*config)() = nullptr;
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
  find(RTLD_DEFAULT, "openblas_get_config", b.config);
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
          find(h, "openblas_get_config", ob.config);
          return ob.set && ob.get && ob.parallel ? 1 : 0;
        },
        &b);
  }
  if (!b.set || !b.get || !b.parallel) return {};
  return b;
}

const OpenBlas &openblas() {
  static const OpenBlas b = load();
  return b;
}

bool own_pool(const OpenBlas &b) { return b.parallel && b.parallel() == 1; }

bool kept() {
  const char *env = std::getenv("TPT_BLAS_POOL");
  return env && std::strcmp(env, "keep") == 0;
}

std::string first_line(const std::string &path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

// The cgroup's CPU quota: v2's cpu.max of the process's cgroup and of each
// cgroup above it (the smallest limit), else v1's cpu.cfs_quota_us over
// cpu.cfs_period_us; 0 for none.
int cgroup_limit() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  int limit = 0;
  auto take = [&](int n) {
    if (n > 0 && (limit == 0 || n < limit)) limit = n;
  };
  while (std::getline(self, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {  // v2
      for (std::string p = path;; p = p.substr(0, p.rfind('/'))) {
        take(cgroup_cpu_limit(first_line("/sys/fs/cgroup" + (p == "/" ? std::string() : p) + "/cpu.max")));
        if (p.empty() || p == "/" || p.find('/') == std::string::npos) break;
      }
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {  // v1
      for (const std::string &dir : {"/sys/fs/cgroup/cpu,cpuacct" + path, "/sys/fs/cgroup/cpu" + path}) {
        const std::string q = first_line(dir + "/cpu.cfs_quota_us"), p = first_line(dir + "/cpu.cfs_period_us");
        if (!q.empty() && !p.empty()) {
          take(cgroup_cpu_limit(q + " " + p));
          break;
        }
      }
    }
  }
  return limit;
}

// LibTorch's intra-op threads: one per usable core, where nobody chose.
void set_default_threads() {
  if (std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS")) return;
  if (at::get_num_threads() != at::intraop_default_num_threads()) return;  // set before we were loaded
  const int n = usable_cores();
  if (n != at::get_num_threads()) at::set_num_threads(n);
}

// A pthread OpenBLAS on one thread: one pool of threads on the cores.
void single_pool() {
  const OpenBlas &b = openblas();
  if (own_pool(b) && !kept() && b.get() != 1) b.set(1);
}

}  // namespace

int cgroup_cpu_limit(const std::string &cpu_max) {
  std::istringstream s(cpu_max);
  std::string quota;
  long long period = 0;
  if (!(s >> quota >> period) || period <= 0 || quota == "max") return 0;
  char *end = nullptr;
  const long long q = std::strtoll(quota.c_str(), &end, 10);
  if (!end || *end != '\0' || q <= 0) return 0;  // v1's -1: no limit
  return static_cast<int>(std::min<long long>((q + period - 1) / period, 1 << 20));
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    std::set<std::string> cores;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      const std::string topo = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
      std::string siblings = first_line(topo + "core_cpus_list");
      if (siblings.empty()) siblings = first_line(topo + "thread_siblings_list");
      cores.insert(siblings.empty() ? "cpu" + std::to_string(c) : siblings);
    }
    n = static_cast<int>(cores.size());
  }
  if (n < 1) n = static_cast<int>(std::thread::hardware_concurrency());  // more CPUs than a cpu_set_t holds
  const int quota = cgroup_limit();
  if (quota > 0) n = std::min(n, quota);
  return std::max(n, 1);
}

std::string blas_description() {
  const OpenBlas &b = openblas();
  if (!b.parallel) return "not OpenBLAS (MKL or another BLAS: LibTorch sizes it, or it is single-threaded)";
  std::string s = b.config ? std::string(b.config()) : std::string("OpenBLAS");
  while (!s.empty() && s.back() == ' ') s.pop_back();
  switch (b.parallel()) {
    case 0: return s + ": single-threaded";
    case 2: return s + ": on OpenMP's threads (LibTorch's intra-op count)";
    default:
      return s + ": a pthread pool of its own, " + std::to_string(b.get()) + " thread" + (b.get() == 1 ? "" : "s") +
             (kept() ? " (TPT_BLAS_POOL=keep)" : "");
  }
}

std::string blas_threads_note() {
  const OpenBlas &b = openblas();
  if (!own_pool(b) || b.get() != 1 || at::get_num_threads() < 2) return {};
  return "BLAS: this OpenBLAS is its pthread build, whose own thread pool would fight LibTorch's " +
         std::to_string(at::get_num_threads()) +
         " intra-op threads for the cores, so float32 matrix products run on one thread here; OpenBLAS's "
         "OpenMP build (Debian's libopenblas0-openmp) runs them on the intra-op threads (docs/threading.md)";
}

namespace {
// When libtptrain is loaded (the shared library takes every object of the
// core archive), before the host makes a tensor through us.
[[maybe_unused]] const bool g_at_load = [] {
  try {
    set_default_threads();
    single_pool();
  } catch (...) {  // LibTorch refused: its own default stays
  }
  return true;
}();
}  // namespace

}  // namespace tpt
