// Summing flat buffers that live on several devices of one process, in place
// (the towers' gradient buckets when every tower is on its own CUDA device).
// The NCCL implementation is src/dist/nccl_reduce.cpp, compiled whenever the
// CUDA toolkit's NCCL is found and linked (registering itself) only with a
// CUDA LibTorch; without it, device_all_reduce gives nullptr and the towers
// sum their buckets on the CPU.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace tpt::dist {

class DeviceAllReduce {
 public:
  virtual ~DeviceAllReduce() = default;
  // flats[k] lives on the k-th device given to the maker; after the call each
  // holds the element-wise sum of all of them. One thread calls it at a time.
  virtual void all_reduce(std::vector<at::Tensor> &flats) = 0;
  virtual std::string name() const = 0;
};

using DeviceAllReduceMaker = std::unique_ptr<DeviceAllReduce> (*)(const std::vector<c10::Device> &devices);

// Called by an implementation's static registrar.
void register_device_all_reduce(DeviceAllReduceMaker maker);

// An all-reduce over `devices` (distinct CUDA devices), or nullptr where this
// build has none.
std::unique_ptr<DeviceAllReduce> device_all_reduce(const std::vector<c10::Device> &devices);

}  // namespace tpt::dist
