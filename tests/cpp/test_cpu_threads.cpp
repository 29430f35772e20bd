// tptrain's threads on the CPU (src/base/cpu_threads.cpp): a cgroup's CPU
// quota read as CPUs, and the usable cores against the affinity mask. The
// counts LibTorch and the BLAS get when libtptrain is loaded are checked from
// outside, against lscpu and taskset (tests/scripts/test_threads.sh).
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "base/cpu_threads.hpp"

namespace {

TEST(CpuThreads, CgroupQuotaInCpus) {
  EXPECT_EQ(tpt::cgroup_cpu_limit("max 100000"), 0);
  EXPECT_EQ(tpt::cgroup_cpu_limit("200000 100000"), 2);
  EXPECT_EQ(tpt::cgroup_cpu_limit("150000 100000"), 2);  // 1.5 CPUs: both cores get work
  EXPECT_EQ(tpt::cgroup_cpu_limit("50000 100000"), 1);
  EXPECT_EQ(tpt::cgroup_cpu_limit("100000 100000"), 1);
  EXPECT_EQ(tpt::cgroup_cpu_limit("-1 100000"), 0);  // v1's "no limit", as quota_us and period_us
  EXPECT_EQ(tpt::cgroup_cpu_limit("400000 100000\n"), 4);
  for (const char *bad : {"", "max", "100000", "abc 100000", "100000 0", "100000 -5", "12x 100000"})
    EXPECT_EQ(tpt::cgroup_cpu_limit(bad), 0) << '"' << bad << '"';
}

TEST(CpuThreads, UsableCoresWithinTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);
  const int cores = tpt::usable_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, cpus);
  // One CPU of the mask: one core, on a thread of its own (the mask is per thread).
  int first = 0;
  while (!CPU_ISSET(first, &set)) ++first;
  int seen = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) seen = tpt::usable_cores();
    else seen = 1;
  }).join();
  EXPECT_EQ(seen, 1);
}

}  // namespace
