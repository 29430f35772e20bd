// Summing flat buffers that live on several devices of one process, in place
// (the towers' gradient buckets when every tower is on its own CUDA device),
// and, given the job's World, over the devices of every process (one NCCL
// communicator over all of them: the distributed trainer's backend on CUDA).
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

class World;

class DeviceAllReduce {
 public:
  virtual ~DeviceAllReduce() = default;
  // flats[k] lives on the k-th device given to the maker; after the call each
  // holds the element-wise sum of all of them. One thread calls it at a time.
  virtual void all_reduce(std::vector<at::Tensor> &flats) = 0;
  virtual std::string name() const = 0;
  // Whether the sum also runs over the other processes' devices (then every
  // process must call all_reduce for the same buffers in the same order).
  virtual bool spans_processes() const { return false; }
};

using DeviceAllReduceMaker = std::unique_ptr<DeviceAllReduce> (*)(const std::vector<c10::Device> &devices,
                                                                  World *world);

// Called by an implementation's static registrar.
void register_device_all_reduce(DeviceAllReduceMaker maker);

// An all-reduce over `devices` (distinct CUDA devices, at least two), or
// nullptr where this build has none. With a `world` (a job of any size, one
// process included; each process with at least one CUDA device of its own:
// "cuda:<LOCAL_RANK>"), over the devices of every process; every process
// calls this at once (it exchanges NCCL's id over the world).
std::unique_ptr<DeviceAllReduce> device_all_reduce(const std::vector<c10::Device> &devices, World *world = nullptr);

}  // namespace tpt::dist
