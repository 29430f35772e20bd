// The towers' flat gradient buckets (MultiTower::Bucket), shared by
// towers.cpp (the step) and tower_buckets.cpp (filling and reducing them).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/world.hpp"
#include "train/towers.hpp"

namespace tpt::parallel {

// A flat bucket: some trainable variables' gradients, packed one after the
// other, one buffer per tower; summed (in tower order) when every tower has
// filled its part, by the tower that filled the last part (overlap) or after
// every backward pass.
struct MultiTower::Bucket {
  std::vector<size_t> vars;  // trainable variables
  int64_t numel = 0;
  at::ScalarType dtype = at::kFloat;
  c10::Device device{c10::kCPU};
  std::vector<at::Tensor> flat;  // per tower
  at::Tensor sum;                // this step's reduction
  std::atomic<int64_t> pending{0};
  // Several processes: summed here (under launch_mu_), its all-reduce started.
  bool complete = false;
  std::unique_ptr<dist::World::Pending> across;
};

}  // namespace tpt::parallel
