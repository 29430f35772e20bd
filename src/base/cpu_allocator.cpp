#include "base/cpu_allocator.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include <c10/core/Allocator.h>

#include "base/torch_compat.hpp"
#include <c10/core/impl/alloc_cpu.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define TPT_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define TPT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define TPT_POISON(p, n) ((void)(p), (void)(n))
#define TPT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tpt::model {

namespace {

// Each block starts with a header of one alignment unit (c10's 64 bytes):
// the tensor's data follows it, so that the DataPtr's context is its data
// pointer (raw_deleter works) and the deleter finds the block's capacity.
constexpr size_t kHeader = 64;
constexpr size_t kMinCached = size_t{16} << 10;  // smaller blocks: glibc's tcache does well
constexpr int kMinShift = 14;                    // log2(kMinCached)
constexpr size_t kClasses = 4 * (64 - kMinShift);
constexpr uint64_t kMagic = 0x7470745f626c6b31ull;  // "tpt_blk1"

struct Header {
  uint64_t magic;
  uint64_t capacity;  // bytes after the header; 0: not cached (a small block)
};

// The class of a block of n >= kMinCached bytes, and its capacity: n rounded
// up to a quarter of its power of two.
size_t class_of(size_t n, size_t *capacity) {
  int shift = 63 - __builtin_clzll(n);  // 2^shift <= n
  size_t step = (size_t{1} << shift) / 4;
  size_t rounded = (n + step - 1) / step * step;
  if (rounded == (size_t{1} << (shift + 1))) {  // rounded up to the next power
    ++shift;
    step *= 2;
  }
  *capacity = rounded;
  return static_cast<size_t>(shift - kMinShift) * 4 + (rounded - (size_t{1} << shift)) / step;
}

uint64_t default_limit() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  return std::min<uint64_t>(ram ? ram / 8 : uint64_t{1} << 30, uint64_t{2} << 30);
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  CachingCpuAllocator() : limit_(default_limit()) {}

  c10::DataPtr allocate(size_t n) TPT_ALLOCATE_CONST override {
    void *data = const_cast<CachingCpuAllocator *>(this)->take(n);
    return {data, data, &CachingCpuAllocator::deleter, c10::Device(c10::DeviceType::CPU)};
  }
  // LibTorch 2.3's Allocator::clone copies with it (an override there, a plain member before).
  void copy_data(void *dest, const void *src, std::size_t count) const {
    if (count) std::memcpy(dest, src, count);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CachingCpuAllocator::deleter; }

  static CachingCpuAllocator &instance() {
    // Never destroyed: tensors may outlive every static object.
    static auto *a = new CachingCpuAllocator();
    return *a;
  }

  CpuAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    CpuAllocatorStats s;
    s.hits = hits_;
    s.misses = misses_;
    s.cached_bytes = cached_;
    s.cache_limit = limit_;
    return s;
  }

  void release_all() {
    std::vector<void *> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto &list : free_) {
        blocks.insert(blocks.end(), list.begin(), list.end());
        list.clear();
      }
      cached_ = 0;
    }
    for (void *base : blocks) {
      TPT_UNPOISON(static_cast<char *>(base) + kHeader, static_cast<Header *>(base)->capacity);
      c10::free_cpu(base);
    }
  }

 private:
  static void deleter(void *data) { instance().give_back(data); }

  void *take(size_t n) {
    if (n < kMinCached) return fresh(n, 0);
    size_t capacity = 0;
    size_t cls = class_of(n, &capacity);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cls < kClasses && !free_[cls].empty()) {
        void *base = free_[cls].back();
        free_[cls].pop_back();
        cached_ -= capacity;
        ++hits_;
        char *data = static_cast<char *>(base) + kHeader;
        TPT_UNPOISON(data, capacity);
        return data;
      }
      ++misses_;
    }
    return fresh(capacity, capacity);
  }

  // A new block with room for n bytes (c10's aligned allocation, which
  // throws c10::Error when out of memory, as the default allocator does).
  static void *fresh(size_t n, size_t capacity) {
    void *base = c10::alloc_cpu(n + kHeader);
    auto *h = static_cast<Header *>(base);
    h->magic = kMagic;
    h->capacity = capacity;
    return static_cast<char *>(base) + kHeader;
  }

  void give_back(void *data) {
    if (!data) return;
    void *base = static_cast<char *>(data) - kHeader;
    const size_t capacity = static_cast<Header *>(base)->capacity;
    if (capacity != 0 && keep(base, capacity)) return;
    c10::free_cpu(base);
  }

  // Puts a freed block in its class's list unless that goes over the limit.
  bool keep(void *base, size_t capacity) {
    size_t cap = 0;
    size_t cls = class_of(capacity, &cap);
    std::lock_guard<std::mutex> lock(mu_);
    if (cls >= kClasses || cached_ + capacity > limit_) return false;
    try {
      free_[cls].push_back(base);
    } catch (const std::bad_alloc &) {  // a deleter must not throw: give it back instead
      return false;
    }
    cached_ += capacity;
    TPT_POISON(static_cast<char *>(base) + kHeader, capacity);  // under the lock: take() unpoisons under it
    return true;
  }

 public:
  void set_limit(uint64_t bytes) {
    std::vector<void *> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      limit_ = bytes;
      for (size_t c = kClasses; c-- > 0 && cached_ > limit_;) {
        while (!free_[c].empty() && cached_ > limit_) {
          void *base = free_[c].back();
          free_[c].pop_back();
          cached_ -= static_cast<Header *>(base)->capacity;
          drop.push_back(base);
        }
      }
    }
    for (void *base : drop) {
      TPT_UNPOISON(static_cast<char *>(base) + kHeader, static_cast<Header *>(base)->capacity);
      c10::free_cpu(base);
    }
  }

 private:
  std::mutex mu_;
  std::array<std::vector<void *>, kClasses> free_;
  uint64_t cached_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  uint64_t limit_;
};

std::once_flag g_once;
bool g_installed = false;

}  // namespace

bool install_cpu_allocator() {
  std::call_once(g_once, [] {
    const char *env = std::getenv("TPT_CPU_ALLOCATOR");
    if (env && std::strcmp(env, "system") == 0) return;
    c10::SetAllocator(c10::DeviceType::CPU, &CachingCpuAllocator::instance());
    g_installed = true;
  });
  return g_installed;
}

CpuAllocatorStats cpu_allocator_stats() {
  CpuAllocatorStats s = CachingCpuAllocator::instance().stats();
  s.installed = install_cpu_allocator() && c10::GetAllocator(c10::DeviceType::CPU) == &CachingCpuAllocator::instance();
  return s;
}

void release_cached_cpu_memory() { CachingCpuAllocator::instance().release_all(); }

void set_cpu_cache_limit(uint64_t bytes) { CachingCpuAllocator::instance().set_limit(bytes); }

namespace {
// Registered when libtptrain is loaded (the shared library takes every object
// of the core archive), before any tensor of the host's is made through us.
[[maybe_unused]] const bool g_at_load = install_cpu_allocator();
}  // namespace

}  // namespace tpt::model
