// src/dist/nccl_reduce.cpp, the NCCL all-reduce of CUDA towers' buckets, is
// only linked into the library with a CUDA LibTorch, which the development
// machines do not have. This test links it anyway (with the CUDA toolkit's
// NCCL and CUDA runtime) to check that it links, that it registers itself,
// and that on a machine without a GPU it fails with an error, not a crash.
// It does not all-reduce anything: that needs CUDA tensors (README, "GPUs").
// The same for the communicator that spans the processes of a job.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "dist/device_reduce.hpp"
#include "dist/world.hpp"
#include "free_port.hpp"

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

// In a job of two processes (here two threads, each its own World over TCP)
// with one CUDA tower each, the communicator spans both: rank 0 makes NCCL's
// id and the World carries it. Without a GPU every rank fails cleanly: NCCL's
// error, or (when rank 0 failed before sending the id) the World's broadcast
// timing out, naming the rank.
TEST(Nccl, AcrossProcessesFailsCleanlyWithoutGpus) {
  const int port = free_port();
  std::vector<std::string> errors(2);
  std::vector<int> made(2, 0);
  auto rank_main = [&](int rank) {
    try {
      tpt::dist::WorldOptions o;
      o.master_addr = "127.0.0.1";
      o.master_port = port;
      o.rank = rank;
      o.world_size = 2;
      o.timeout = std::chrono::milliseconds(5000);
      tpt::dist::World world(tpt::dist::rendezvous(o, [](const char *) -> const char * { return nullptr; }));
      auto r = device_all_reduce({c10::Device(c10::DeviceType::CUDA, 0)}, &world);
      made[static_cast<size_t>(rank)] = r != nullptr;
      if (r) {
        EXPECT_TRUE(r->spans_processes());
      }
    } catch (const tpt::Error &e) {
      EXPECT_EQ(e.code(), TPT_ERR_BACKEND) << e.what();
      errors[static_cast<size_t>(rank)] = e.what();
    }
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  for (int rank = 0; rank < 2; ++rank) {
    const std::string &m = errors[static_cast<size_t>(rank)];
    if (made[static_cast<size_t>(rank)]) continue;  // a machine with a GPU per rank
    std::cout << "# rank " << rank << " without GPUs: " << m << "\n";
    EXPECT_TRUE(m.rfind("NCCL ", 0) == 0 || m.rfind("CUDA ", 0) == 0 ||
                m.find("broadcast from rank 0 (rank " + std::to_string(rank) + " of 2)") != std::string::npos)
        << m;
  }
  // one device and no world: nothing to sum across
  EXPECT_EQ(device_all_reduce({c10::Device(c10::DeviceType::CUDA, 0)}), nullptr);
}

// A job of one process with one CUDA tower sums through NCCL too (a
// communicator of one rank, as PyTorch DDP's NCCL backend at world size 1), so
// a one-GPU job runs the code of a job of many: the maker is called (nullptr
// would mean the Gloo path), and without a GPU it fails cleanly.
TEST(Nccl, OneRankJobUsesNccl) {
  tpt::dist::WorldOptions o;
  o.master_addr = "127.0.0.1";
  o.master_port = free_port();
  o.rank = 0;
  o.world_size = 1;
  o.timeout = std::chrono::milliseconds(5000);
  tpt::dist::World world(tpt::dist::rendezvous(o, [](const char *) -> const char * { return nullptr; }));
  try {
    auto r = device_all_reduce({c10::Device(c10::DeviceType::CUDA, 0)}, &world);
    ASSERT_NE(r, nullptr);  // a machine with a GPU
    EXPECT_TRUE(r->spans_processes());
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_BACKEND) << e.what();
    const std::string m = e.what();
    std::cout << "# one rank without a GPU: " << m << "\n";
    EXPECT_TRUE(m.rfind("NCCL ", 0) == 0 || m.rfind("CUDA ", 0) == 0) << m;
  }
}
