// tptrain's caching CPU allocator (src/base/cpu_allocator.cpp): freed blocks
// of 16 KiB and more come back for the next tensor of their size class, small
// ones are not kept, the kept bytes stay under the limit, and threads share it.
#include <gtest/gtest.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "base/cpu_allocator.hpp"

namespace {

using tpt::model::cpu_allocator_stats;

void *data_of(size_t bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes)}, at::kByte);
  std::memset(t.data_ptr(), 0xab, bytes);  // every byte is ours (ASan checks the bound)
  return t.data_ptr();
}

TEST(CpuAllocator, IsInstalledAndReusesLargeBlocks) {
  if (const char *env = std::getenv("TPT_CPU_ALLOCATOR"); env && std::strcmp(env, "system") == 0)
    GTEST_SKIP() << "TPT_CPU_ALLOCATOR=system";
  ASSERT_TRUE(tpt::model::install_cpu_allocator());
  ASSERT_TRUE(cpu_allocator_stats().installed);
  tpt::model::release_cached_cpu_memory();
  const auto before = cpu_allocator_stats();
  EXPECT_EQ(before.cached_bytes, 0u);
  EXPECT_GT(before.cache_limit, 0u);
  EXPECT_LE(before.cache_limit, uint64_t{2} << 30);

  void *a = data_of(1 << 20);  // freed at once: kept
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, uint64_t{1} << 20);
  void *b = data_of(1 << 20);  // the same block again
  EXPECT_EQ(a, b);
  void *c = data_of((1 << 20) - 1000);  // the same class (rounded up to 1 MiB)
  EXPECT_EQ(a, c);
  void *d = data_of((1 << 20) + 1);  // the next class: 1.25 MiB, a new block
  EXPECT_NE(a, d);
  const auto after = cpu_allocator_stats();
  EXPECT_EQ(after.hits - before.hits, 2u);
  EXPECT_EQ(after.misses - before.misses, 2u);
  EXPECT_EQ(after.cached_bytes, (uint64_t{1} << 20) + (uint64_t{5} << 18));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);  // c10's alignment
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 64, 0u);

  // Small tensors are glibc's business.
  const auto small_before = cpu_allocator_stats();
  (void)data_of(1000);
  (void)data_of(16383);
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, small_before.cached_bytes);
  EXPECT_EQ(cpu_allocator_stats().misses, small_before.misses);

  // A live tensor's block is not handed out twice.
  at::Tensor live = at::ones({1 << 18}, at::kFloat);  // 1 MiB, takes the kept block
  void *other = data_of(1 << 20);
  EXPECT_NE(other, live.data_ptr());
  EXPECT_EQ(live.sum().item<float>(), static_cast<float>(1 << 18));

  tpt::model::release_cached_cpu_memory();
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, 0u);
}

TEST(CpuAllocator, KeepsNoMoreThanItsLimit) {
  if (!cpu_allocator_stats().installed) GTEST_SKIP() << "not installed";
  const uint64_t limit = cpu_allocator_stats().cache_limit;
  tpt::model::release_cached_cpu_memory();
  tpt::model::set_cpu_cache_limit(uint64_t{3} << 20);
  {
    std::vector<at::Tensor> held;
    for (int i = 0; i < 5; ++i) held.push_back(at::empty({1 << 20}, at::kByte));
  }  // five 1 MiB blocks freed: three kept, two given back
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, uint64_t{3} << 20);
  tpt::model::set_cpu_cache_limit(uint64_t{1} << 20);  // lowering gives back what is over
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, uint64_t{1} << 20);
  tpt::model::set_cpu_cache_limit(limit);
  tpt::model::release_cached_cpu_memory();
}

// Tensors made on some threads and freed on others (a dataflow thread hands
// batches to the training thread): each block has one owner at a time.
TEST(CpuAllocator, Threads) {
  constexpr int kThreads = 4, kRounds = 300;
  std::vector<std::thread> threads;
  std::vector<std::vector<at::Tensor>> passed(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &passed] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<at::Tensor> mine;
      for (int i = 0; i < kRounds; ++i) {
        int64_t n = 4096 + static_cast<int64_t>(rng() % (1 << 18));
        at::Tensor x = at::empty({n}, at::kFloat);
        x.fill_(static_cast<float>(t * kRounds + i));
        mine.push_back(x);
        if (mine.size() > 8) {
          const at::Tensor &old = mine.front();
          float want = old.data_ptr<float>()[0];
          EXPECT_EQ(old.data_ptr<float>()[old.numel() - 1], want);  // nobody else wrote it
          mine.erase(mine.begin());
        }
      }
      passed[static_cast<size_t>(t)] = std::move(mine);  // freed by the main thread
    });
  }
  for (auto &th : threads) th.join();
  for (auto &list : passed)
    for (const at::Tensor &x : list) EXPECT_EQ(x.data_ptr<float>()[0], x.data_ptr<float>()[x.numel() - 1]);
  passed.clear();
}

}  // namespace
