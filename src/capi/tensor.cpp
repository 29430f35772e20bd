// Tensors: handles, scopes, shared memory, devices, DLPack
// (include/tptrain/tensor.h).
#include <ATen/DLConvertor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/matmul.h>
#include <c10/core/Device.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "capi/handles.hpp"
#include "model/dtype.hpp"

using tpt::capi::guard;
using tpt::capi::require;
using tpt::capi::tensor_arg;

namespace tpt::capi {

thread_local TensorScope *t_scope = nullptr;

void throw_tensor_not_live(const tpt_tensor *t, const char *name) {
  if (t->magic == kTensorExpired || t->magic == kTensorFreedInScope)
    tpt::invalid_argument(std::string("argument '") + name + "' is a tensor that " +
                          (t->magic == kTensorExpired
                               ? "was released when the tower function or callback that made it returned "
                                 "(keep a tensor beyond its call with tpt_tensor_keep)"
                               : "was freed"));
  throw_not_live(name, "tpt_tensor");
}

}  // namespace tpt::capi

namespace {

std::vector<int64_t> shape_arg(const int64_t *shape, size_t ndim, const char *name,
                               bool allow_minus_one) {
  if (ndim > 0) require(shape, name);
  std::vector<int64_t> dims(shape, shape + ndim);
  for (size_t i = 0; i < ndim; ++i) {
    if (dims[i] < 0 && !(allow_minus_one && dims[i] == -1))
      tpt::invalid_argument(std::string(name) + "[" + std::to_string(i) + "] is " +
                            std::to_string(dims[i]) + "; dimensions must be >= 0");
  }
  return dims;
}

tpt_tensor_options options_arg(const tpt_tensor_options *options) {
  tpt_tensor_options opts = TPT_TENSOR_OPTIONS_INIT;
  if (options) {
    if (options->version < 1 || options->version > TPT_TENSOR_OPTIONS_VERSION)
      tpt::invalid_argument("options->version is " + std::to_string(options->version) +
                            "; this library supports 1.." + std::to_string(TPT_TENSOR_OPTIONS_VERSION) +
                            " (initialise with TPT_TENSOR_OPTIONS_INIT)");
    opts = *options;
  }
  return opts;
}

c10::ScalarType dtype_arg(const tpt_dtype &d, const char *what = "options->dtype") {
  auto type = tpt::scalar_type_of(d);
  if (!type) tpt::invalid_argument(std::string(what) + " " + std::to_string(tpt::enum_int(d)) + " is not a tpt_dtype");
  return *type;
}

std::string shape_text(const std::vector<int64_t> &dims) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < dims.size(); ++i) s << (i ? ", " : "") << dims[i];
  s << "]";
  return s.str();
}

}  // namespace

size_t tpt_dtype_size(tpt_dtype dtype) {
  auto type = tpt::scalar_type_of(dtype);
  return type ? c10::elementSize(*type) : 0;
}

tpt_status *tpt_tensor_from_data(tpt_tensor **out, const void *data, size_t nbytes,
                                 const int64_t *shape, size_t ndim,
                                 const tpt_tensor_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt_tensor_options opts = options_arg(options);
    auto type = dtype_arg(opts.dtype);
    auto dims = shape_arg(shape, ndim, "shape", false);
    // Overflow-checked element count.
    uint64_t numel = 1;
    for (int64_t d : dims) {
      if (d != 0 && numel > UINT64_MAX / static_cast<uint64_t>(d))
        tpt::invalid_argument("shape " + shape_text(dims) + " has too many elements");
      numel *= static_cast<uint64_t>(d);
    }
    size_t elem = c10::elementSize(type);
    if (numel > SIZE_MAX / elem || numel * elem != nbytes)
      tpt::invalid_argument("nbytes is " + std::to_string(nbytes) + " but shape " +
                            shape_text(dims) + " of " + tpt::dtype_name(opts.dtype) +
                            " needs " + std::to_string(numel) + " x " + std::to_string(elem) +
                            " bytes");
    if (nbytes > 0) require(data, "data");
    c10::Device device(opts.device ? std::string(opts.device) : std::string("cpu"));
    if (opts.requires_grad && !c10::isFloatingType(type))
      tpt::invalid_argument(std::string("requires_grad needs a floating dtype, got ") +
                            tpt::dtype_name(opts.dtype));
    at::Tensor host = at::empty(dims, at::TensorOptions().dtype(type));
    if (nbytes > 0) std::memcpy(host.data_ptr(), data, nbytes);
    at::Tensor value = device.is_cpu() ? host : host.to(device);
    if (opts.requires_grad) value.set_requires_grad(true);
    tpt::capi::give(out, std::move(value));
  });
}

tpt_status *tpt_tensor_from_blob(tpt_tensor **out, void *data, const int64_t *shape, size_t ndim,
                                 const tpt_tensor_options *options, void (*deleter)(void *, void *),
                                 void *deleter_ctx) {
  // The deleter runs exactly once: when LibTorch frees the storage, or here on failure.
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto release = [done, deleter, data, deleter_ctx] {
    if (deleter && !done->exchange(true)) deleter(data, deleter_ctx);
  };
  tpt_status *st = guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt_tensor_options opts = options_arg(options);
    auto type = dtype_arg(opts.dtype);
    auto dims = shape_arg(shape, ndim, "shape", false);
    if (opts.device && c10::Device(std::string(opts.device)).type() != c10::DeviceType::CPU)
      tpt::invalid_argument(std::string("from_blob wraps host memory; options->device must be \"cpu\", got \"") +
                            opts.device + "\"");
    if (opts.requires_grad && !c10::isFloatingType(type))
      tpt::invalid_argument(std::string("requires_grad needs a floating dtype, got ") + tpt::dtype_name(opts.dtype));
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    if (numel > 0) require(data, "data");
    at::Tensor value = at::from_blob(data, dims, [release](void *) { release(); }, at::TensorOptions().dtype(type));
    if (opts.requires_grad) value.set_requires_grad(true);
    tpt::capi::give(out, std::move(value));
  });
  if (st) release();
  return st;
}

tpt_status *tpt_tensor_share(tpt_tensor **out, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt::capi::give(out, tensor_arg(tensor, "tensor"));
  });
}

tpt_status *tpt_tensor_device(char *buf, size_t size, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    std::string text = tensor_arg(tensor, "tensor").device().str();
    require(buf, "buf");
    if (text.size() + 1 > size)
      tpt::invalid_argument("size is " + std::to_string(size) + " but \"" + text + "\" needs " +
                            std::to_string(text.size() + 1) + " bytes");
    std::memcpy(buf, text.c_str(), text.size() + 1);
  });
}

tpt_status *tpt_tensor_to(tpt_tensor **out, const tpt_tensor *tensor, const char *device, tpt_dtype dtype) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const at::Tensor &t = tensor_arg(tensor, "tensor");
    c10::Device dev = device ? c10::Device(std::string(device)) : t.device();
    c10::ScalarType type = tpt::enum_int(dtype) == 0 ? t.scalar_type() : dtype_arg(dtype, "dtype");
    tpt::capi::give(out, t.to(dev, type, /*non_blocking=*/false, /*copy=*/true));
  });
}

tpt_status *tpt_tensor_item(double *out, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    require(out, "out");
    const at::Tensor &t = tensor_arg(tensor, "tensor");
    if (t.numel() != 1)
      tpt::invalid_argument("the tensor has " + std::to_string(t.numel()) + " elements; item needs exactly 1");
    *out = t.item<double>();
  });
}

tpt_status *tpt_tensor_to_dlpack(struct DLManagedTensor **out, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    *out = at::toDLPack(tensor_arg(tensor, "tensor"));
  });
}

tpt_status *tpt_tensor_from_dlpack(tpt_tensor **out, struct DLManagedTensor *src) {
  return guard(__func__, [&] {
    if (out) *out = nullptr;
    if (src == nullptr) tpt::capi::throw_null_argument("src");
    at::Tensor value;
    try {
      require(out, "out");
      value = at::fromDLPack(src);  // from here on the tensor owns src
    } catch (...) {
      if (src->deleter) src->deleter(src);
      throw;
    }
    tpt::capi::give(out, std::move(value));
  });
}

void tpt_tensor_free(tpt_tensor *tensor) {
  if (tensor == nullptr) return;
  if (tensor->magic == kTensorExpired) {  // its scope released it; the handle is the caller's
    tensor->magic = 0;
    delete tensor;
    return;
  }
  if (tensor->magic != kTensorMagic || tensor->borrowed) return;
  if (tensor->scope) {  // released now; the scope deletes the handle when it closes
    tensor->value.reset();
    tensor->magic = kTensorFreedInScope;
    return;
  }
  tensor->magic = 0;
  delete tensor;
}

tpt_status *tpt_tensor_keep(tpt_tensor **out, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt::capi::give_kept(out, tensor_arg(tensor, "tensor").detach());
  });
}

int64_t tpt_tensor_live_handles(void) { return tpt::capi::g_live_tensors.load(std::memory_order_relaxed); }

tpt_status *tpt_tensor_scope_set_mode(tpt_scope_mode mode) {
  return guard(__func__, [&] {
    const int64_t m = tpt::enum_int(mode);
    if (m != TPT_SCOPE_FREE && m != TPT_SCOPE_EXPIRE && m != TPT_SCOPE_OFF)
      tpt::invalid_argument("mode " + std::to_string(m) + " is not a tpt_scope_mode");
    if (tpt::capi::TensorScope *s = tpt::capi::t_scope) s->set_mode(mode);
  });
}

tpt_status *tpt_tensor_ndim(size_t *out, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = static_cast<size_t>(tensor_arg(tensor, "tensor").dim());
  });
}

tpt_status *tpt_tensor_shape(int64_t *dims, size_t capacity, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    const at::Tensor &t = tensor_arg(tensor, "tensor");
    size_t ndim = static_cast<size_t>(t.dim());
    if (capacity < ndim)
      tpt::invalid_argument("capacity is " + std::to_string(capacity) + " but the tensor has " +
                            std::to_string(ndim) + " dimensions");
    if (ndim > 0) require(dims, "dims");
    for (size_t i = 0; i < ndim; ++i) dims[i] = t.size(static_cast<int64_t>(i));
  });
}

tpt_status *tpt_tensor_numel(int64_t *out, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tensor_arg(tensor, "tensor").numel();
  });
}

tpt_status *tpt_tensor_dtype(tpt_dtype *out, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tpt::dtype_of(tensor_arg(tensor, "tensor").scalar_type());
  });
}

tpt_status *tpt_tensor_copy_to(void *dst, size_t nbytes, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    const at::Tensor &t = tensor_arg(tensor, "tensor");
    size_t need = static_cast<size_t>(t.numel()) * t.element_size();
    if (nbytes != need)
      tpt::invalid_argument("nbytes is " + std::to_string(nbytes) + " but the tensor holds " +
                            std::to_string(need) + " bytes");
    if (need == 0) return;
    require(dst, "dst");
    at::Tensor host = t.detach().to(at::kCPU).contiguous();
    std::memcpy(dst, host.data_ptr(), need);
  });
}

tpt_status *tpt_tensor_reshape(tpt_tensor **out, const tpt_tensor *tensor, const int64_t *shape,
                               size_t ndim) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const at::Tensor &t = tensor_arg(tensor, "tensor");
    auto dims = shape_arg(shape, ndim, "shape", true);
    tpt::capi::give(out, t.reshape(dims));
  });
}

tpt_status *tpt_tensor_matmul(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const at::Tensor &ta = tensor_arg(a, "a");
    const at::Tensor &tb = tensor_arg(b, "b");
    tpt::capi::give(out, at::matmul(ta, tb));
  });
}
