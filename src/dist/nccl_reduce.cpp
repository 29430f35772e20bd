// NCCL's all-reduce of the towers' gradient buckets when every tower is on a
// CUDA device of its own (tensorpack's NCCL all-reduce of the replicated
// trainer): one communicator per device (ncclCommInitAll), and one group
// call over the devices per bucket, issued by the thread that completed the
// bucket. In a distributed job whose processes have CUDA towers, one
// communicator spans the devices of every process (ncclCommInitRank, the id
// sent over the job's World), and the buckets are issued in bucket order. Compiled whenever the CUDA toolkit's NCCL is found; linked, and
// registered, only with a CUDA LibTorch (TPT_LINK_NCCL).
//
// Streams: LibTorch 1.13 does not expose a CUDA stream's handle through its
// device-generic API, and Debian's c10/cuda headers are incomplete, so this
// file uses only nccl.h and the CUDA runtime. When a device's current stream
// is LibTorch's default (the legacy default stream, id 0: what a program
// that does not pick streams uses), NCCL runs on it, ordered with LibTorch's
// work. Otherwise the device is synchronized first and NCCL runs on a stream
// of its own, which is synchronized after.
//
// NOT RUN: no GPU has run this yet (README, "GPUs").
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dist/device_reduce.hpp"
#include "dist/world.hpp"

namespace tpt::dist {

namespace {

void check(ncclResult_t r, const char *what) {
  if (r != ncclSuccess) fail(TPT_ERR_BACKEND, std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}

void check(cudaError_t r, const char *what) {
  if (r != cudaSuccess) fail(TPT_ERR_BACKEND, std::string("CUDA ") + what + ": " + cudaGetErrorString(r));
}

ncclDataType_t nccl_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    default: fail(TPT_ERR_UNSUPPORTED, std::string("NCCL all-reduce of ") + c10::toString(t) + " gradients");
  }
}

class NcclAllReduce final : public DeviceAllReduce {
 public:
  NcclAllReduce(const std::vector<c10::Device> &devices, World *world) : across_(world != nullptr) {
    for (const auto &d : devices) index_.push_back(d.index());
    comms_.resize(index_.size());
    if (!world) {
      check(ncclCommInitAll(comms_.data(), static_cast<int>(index_.size()), index_.data()), "ncclCommInitAll");
    } else {
      // One communicator over every device of every process: rank 0 makes
      // NCCL's id and the World (Gloo) carries it; process p's device k is
      // NCCL rank p x devices + k (every process has as many devices).
      at::Tensor id = at::zeros({static_cast<int64_t>(sizeof(ncclUniqueId))}, at::kByte);
      ncclUniqueId uid;
      if (world->rank() == 0) {
        check(ncclGetUniqueId(&uid), "ncclGetUniqueId");
        std::memcpy(id.data_ptr(), &uid, sizeof uid);
      }
      at::Tensor count = at::full({1}, static_cast<int64_t>(index_.size()), at::kLong);
      world->broadcast({id, count}, 0);
      if (count.item<int64_t>() != static_cast<int64_t>(index_.size()))
        fail(TPT_ERR_INVALID_ARGUMENT, "NCCL across processes: this process has " + std::to_string(index_.size()) +
                                           " CUDA towers and rank 0 has " + std::to_string(count.item<int64_t>()) +
                                           ": every process needs as many");
      std::memcpy(&uid, id.data_ptr(), sizeof uid);
      const int n = static_cast<int>(index_.size()), ranks = world->size() * n;
      check(ncclGroupStart(), "ncclGroupStart");
      ncclResult_t first = ncclSuccess;
      for (int k = 0; k < n; ++k) {
        cudaError_t c = cudaSetDevice(index_[static_cast<size_t>(k)]);
        ncclResult_t r = c == cudaSuccess ? ncclCommInitRank(&comms_[static_cast<size_t>(k)], ranks, uid, world->rank() * n + k)
                                          : ncclUnhandledCudaError;
        if (first == ncclSuccess) first = r;
      }
      ncclResult_t end = ncclGroupEnd();
      check(first, "ncclCommInitRank");
      check(end, "ncclGroupEnd (ncclCommInitRank)");
    }
    streams_.resize(index_.size(), nullptr);
    for (size_t k = 0; k < index_.size(); ++k) {
      check(cudaSetDevice(index_[k]), "cudaSetDevice");
      check(cudaStreamCreateWithFlags(&streams_[k], cudaStreamNonBlocking), "cudaStreamCreate");
    }
  }
  ~NcclAllReduce() override {
    for (size_t k = 0; k < comms_.size(); ++k) {
      if (comms_[k]) ncclCommDestroy(comms_[k]);
      if (streams_[k]) cudaStreamDestroy(streams_[k]);
    }
  }

  std::string name() const override { return "NCCL"; }
  bool spans_processes() const override { return across_; }

  void all_reduce(std::vector<at::Tensor> &flats) override {
    if (flats.size() != comms_.size()) fail(TPT_ERR_STATE, "NCCL all-reduce: one buffer per device");
    const c10::impl::DeviceGuardImplInterface *cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    std::vector<cudaStream_t> on(flats.size());
    std::vector<bool> own(flats.size(), false);
    for (size_t k = 0; k < flats.size(); ++k) {
      const c10::Stream s = cuda->getStream(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index_[k])));
      if (s.id() == 0) {
        on[k] = nullptr;  // LibTorch's default stream: the legacy default stream
      } else {
        check(cudaSetDevice(index_[k]), "cudaSetDevice");
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        on[k] = streams_[k];
        own[k] = true;
      }
    }
    const ncclDataType_t type = nccl_type(flats[0].scalar_type());  // before the group: it may throw
    check(ncclGroupStart(), "ncclGroupStart");
    ncclResult_t first = ncclSuccess;
    for (size_t k = 0; k < flats.size(); ++k) {
      at::Tensor &f = flats[k];
      ncclResult_t r = ncclAllReduce(f.data_ptr(), f.data_ptr(), static_cast<size_t>(f.numel()), type, ncclSum,
                                     comms_[k], on[k]);
      if (first == ncclSuccess) first = r;
    }
    ncclResult_t end = ncclGroupEnd();  // always closes the group
    check(first, "ncclAllReduce");
    check(end, "ncclGroupEnd");
    for (size_t k = 0; k < flats.size(); ++k)
      if (own[k]) check(cudaStreamSynchronize(streams_[k]), "cudaStreamSynchronize");
  }

 private:
  bool across_;
  std::vector<int> index_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
};

[[maybe_unused]] std::unique_ptr<DeviceAllReduce> make(const std::vector<c10::Device> &devices, World *world) {
  return std::make_unique<NcclAllReduce>(devices, world);
}

#ifdef TPT_LINK_NCCL
const bool registered = (register_device_all_reduce(&make), true);
#endif

}  // namespace

}  // namespace tpt::dist
