// c10d's ProcessGroupGloo is usable from this build: two ranks (threads)
// rendezvous through a FileStore and all-reduce a tensor.
#include <gtest/gtest.h>

#include <ATen/ops/full.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

TEST(C10dGloo, TwoRankAllreduceSums) {
  char path[] = "/tmp/tpt_gloo_storeXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::remove(path);
  const int world = 2;
  std::vector<at::Tensor> results(world);
  std::vector<std::string> errors(world);
  auto rank_main = [&](int rank) {
    try {
      auto store = c10::make_intrusive<::c10d::FileStore>(path, world);
      auto opts = ::c10d::ProcessGroupGloo::Options::create();
      opts->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      auto pg = c10::make_intrusive<::c10d::ProcessGroupGloo>(store, rank, world, opts);
      std::vector<at::Tensor> t{at::full({4}, static_cast<float>(rank + 1))};
      pg->allreduce(t)->wait();
      results[rank] = t[0];
    } catch (const std::exception &e) {
      errors[rank] = e.what();
    }
  };
  std::thread r1(rank_main, 1);
  rank_main(0);
  r1.join();
  std::remove(path);
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(results[r][i].item<float>(), 3.0f);
  }
}

}  // namespace
