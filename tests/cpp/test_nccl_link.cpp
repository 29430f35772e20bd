// src/dist/nccl_reduce.cpp, the NCCL all-reduce of CUDA towers' buckets, is
// only linked into the library with a CUDA LibTorch, which the development
// machines do not have. This test links it anyway (with the CUDA toolkit's
// NCCL and CUDA runtime) to check that it links, that it registers itself,
// and that on a machine without a GPU it fails with an error, not a crash.
// It does not all-reduce anything: that needs CUDA tensors (README, "GPUs").
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dist/device_reduce.hpp"

using tpt::dist::device_all_reduce;

TEST(Nccl, OnlyDistinctCudaDevices) {
  const c10::Device cpu(c10::kCPU), cuda0(c10::DeviceType::CUDA, 0);
  EXPECT_EQ(device_all_reduce({cpu, cpu}), nullptr);
  EXPECT_EQ(device_all_reduce({cuda0, cuda0}), nullptr);
  EXPECT_EQ(device_all_reduce({cuda0}), nullptr);
  EXPECT_EQ(device_all_reduce({cuda0, cpu}), nullptr);
}

TEST(Nccl, RegisteredAndFailsCleanlyWithoutGpus) {
  const std::vector<c10::Device> devices = {c10::Device(c10::DeviceType::CUDA, 0), c10::Device(c10::DeviceType::CUDA, 1)};
  try {
    auto r = device_all_reduce(devices);
    ASSERT_NE(r, nullptr) << "nccl_reduce.cpp did not register itself";
    EXPECT_EQ(r->name(), "NCCL");  // a machine with two GPUs
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_BACKEND) << e.what();
    const std::string m = e.what();
    std::cout << "# without GPUs: " << m << "\n";
    EXPECT_TRUE(m.rfind("NCCL ", 0) == 0 || m.rfind("CUDA ", 0) == 0) << m;
  }
}
