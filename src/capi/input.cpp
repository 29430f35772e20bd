// Input sources (include/tptrain/input.h).
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/args.hpp"
#include "capi/data_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "train/input.hpp"

using tpt::capi::check_taken;
using tpt::capi::dataflow_arg;
using tpt::capi::guard;
using tpt::capi::raise_status;
using tpt::capi::require;
using tpt::capi::take_input;
using tpt::capi::tensors_arg;
using tpt::capi::UserData;
using tpt::data::DataFlowPtr;

tpt_status *tpt_input_from_tensors(tpt_input **out, const tpt_tensor *const *tensors, size_t n_tensors,
                                   int64_t batch_size, int32_t shuffle, uint64_t seed) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    if (n_tensors == 0) tpt::invalid_argument("n_tensors is 0");
    auto input = tpt::input::from_tensors(tensors_arg(tensors, n_tensors, "tensors"), batch_size, shuffle != 0, seed);
    auto *h = new tpt_input;
    h->input = std::move(input);
    *out = h;
  });
}

tpt_status *tpt_input_from_feed(tpt_input **out, tpt_feed_fn feed, void *user_data, void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(reinterpret_cast<void *>(feed), "feed");
    auto fn = [feed, ud](size_t width) {
      std::vector<tpt_tensor *> slots(width, nullptr);
      // Unscoped: the feed's tensors go to the library.
      tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_OFF, [&] { return feed(slots.data(), slots.size(), ud->data); });
      std::vector<at::Tensor> batch;
      for (tpt_tensor *h : slots) {  // the library takes every handle the feed made
        batch.push_back(h && h->magic == kTensorMagic ? h->value : at::Tensor());
        tpt_tensor_free(h);
      }
      raise_status(st);
      for (size_t i = 0; i < batch.size(); ++i)
        if (!batch[i].defined())
          tpt::fail(TPT_ERR_CALLBACK, "the feed callback did not fill batch[" + std::to_string(i) + "]");
      return batch;
    };
    auto *h = new tpt_input;
    h->input = tpt::input::from_function(std::move(fn));
    *out = h;
  });
}

void tpt_input_free(tpt_input *input) {
  if (input == nullptr || input->magic != kInputMagic) return;
  input->magic = 0;
  delete input;
}

tpt_status *tpt_input_from_dataflow(tpt_input **out, tpt_dataflow *df, const tpt_input_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    DataFlowPtr d = dataflow_arg(df);
    std::unique_ptr<tpt::input::Input> in = tpt::capi::input_of(std::move(d), options, "options");
    auto *h = new tpt_input;
    h->input = std::move(in);
    *out = h;
  });
}

tpt_status *tpt_input_staging(tpt_input **out, tpt_input *input, const char *device) {
  std::unique_ptr<tpt::input::Input> inner = tpt::capi::take_input(input);  // taken in every case
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt::capi::check_taken(inner, input);
    std::optional<c10::Device> dev;
    if (device) {
      try {
        dev = c10::Device(std::string(device));
      } catch (const c10::Error &) {
        tpt::invalid_argument(std::string("device \"") + device + "\" is not a device (\"cpu\", \"cuda:0\", ...)");
      }
      if (dev->type() != c10::kCPU && !c10::impl::hasDeviceGuardImpl(dev->type()))
        tpt::fail(TPT_ERR_UNSUPPORTED, std::string("this LibTorch cannot use device \"") + device +
                                           "\" (built without its backend)");
    }
    auto *h = new tpt_input;
    h->input = tpt::input::staging(std::move(inner), dev);
    *out = h;
  });
}

tpt_status *tpt_input_dummy(tpt_input **out, int64_t batch_size) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    auto in = tpt::input::dummy(batch_size);
    auto *h = new tpt_input;
    h->input = std::move(in);
    *out = h;
  });
}
