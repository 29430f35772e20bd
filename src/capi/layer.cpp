// Layers, losses and metrics: argument checks around tpt::model::layers
// (include/tptrain/layer.h).
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "capi/args.hpp"
#include "capi/handles.hpp"
#include "capi/model_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "model/layers.hpp"

using tpt::capi::clear;
using tpt::capi::give;
using tpt::capi::guard;
using tpt::capi::name_arg;
using tpt::capi::require;
using tpt::capi::tensor_arg;
using tpt::capi::tower_arg;

namespace layers = tpt::model::layers;

namespace {

// `index` >= 0 names an entry of `field` ("options->kernel[1]"). The text is
// made only on an error: layers run every step.
void at_least_one(int64_t v, const char *field, int index = -1) {
  if (v >= 1) return;
  std::string f = index >= 0 ? std::string(field) + "[" + std::to_string(index) + "]" : std::string(field);
  tpt::invalid_argument(f + " is " + std::to_string(v) + " (must be >= 1)");
}

// The options as the C++ layers take them; NULL means the defaults.
layers::LayerOptions layer_options(const tpt_layer_options *options) {
  layers::LayerOptions lo;
  if (options == nullptr) return lo;
  const tpt_layer_options &o = *options;
  if (o.version < 1 || o.version > TPT_LAYER_OPTIONS_VERSION)
    tpt::invalid_argument("options->version is " + std::to_string(o.version) +
                          " (initialise with TPT_LAYER_OPTIONS_INIT)");
  if (tpt::enum_int(o.activation) < TPT_ACT_NONE || tpt::enum_int(o.activation) > TPT_ACT_SOFTMAX)
    tpt::invalid_argument("options->activation " + std::to_string(tpt::enum_int(o.activation)) +
                          " is not a tpt_activation");
  if (!std::isfinite(o.alpha)) tpt::invalid_argument("options->alpha is not finite");
  if (tpt::enum_int(o.kernel_init) < TPT_INIT_ZEROS || tpt::enum_int(o.kernel_init) > TPT_INIT_HE_NORMAL)
    tpt::invalid_argument("options->kernel_init " + std::to_string(tpt::enum_int(o.kernel_init)) +
                          " is not a tpt_init");
  if (tpt::enum_int(o.bias_init) < TPT_INIT_ZEROS || tpt::enum_int(o.bias_init) > TPT_INIT_HE_NORMAL)
    tpt::invalid_argument("options->bias_init " + std::to_string(tpt::enum_int(o.bias_init)) +
                          " is not a tpt_init");
  for (int i = 0; i < 2; ++i) {
    at_least_one(o.kernel[i], "options->kernel", i);
    at_least_one(o.stride[i], "options->stride", i);
    at_least_one(o.dilation[i], "options->dilation", i);
    lo.kernel[i] = o.kernel[i];
    lo.stride[i] = o.stride[i];
    lo.dilation[i] = o.dilation[i];
  }
  at_least_one(o.groups, "options->groups");
  if (tpt::enum_int(o.padding) != TPT_PADDING_SAME && tpt::enum_int(o.padding) != TPT_PADDING_VALID)
    tpt::invalid_argument("options->padding " + std::to_string(tpt::enum_int(o.padding)) +
                          " is not a tpt_padding");
  lo.use_bias = o.use_bias != 0;
  lo.activation = o.activation;
  lo.alpha = o.alpha;
  lo.kernel_init = o.kernel_init;
  lo.bias_init = o.bias_init;
  lo.groups = o.groups;
  lo.padding = o.padding;
  return lo;
}
}  // namespace

tpt_status *tpt_layer_fc(tpt_tensor **out, tpt_tower *tower, const char *name, const tpt_tensor *x, int64_t units,
                         const tpt_layer_options *options) {
  return guard(__func__, [&] {
    clear(out);
    tpt::model::Tower &t = tower_arg(tower);
    std::string n = name_arg(name, "name");
    const at::Tensor &input = tensor_arg(x, "x");
    at_least_one(units, "units");
    give(out, layers::fc(t, n, input, units, layer_options(options)));
  });
}

tpt_status *tpt_layer_conv2d(tpt_tensor **out, tpt_tower *tower, const char *name, const tpt_tensor *x,
                             int64_t filters, const tpt_layer_options *options) {
  return guard(__func__, [&] {
    clear(out);
    tpt::model::Tower &t = tower_arg(tower);
    std::string n = name_arg(name, "name");
    const at::Tensor &input = tensor_arg(x, "x");
    at_least_one(filters, "filters");
    give(out, layers::conv2d(t, n, input, filters, layer_options(options)));
  });
}

tpt_status *tpt_layer_conv2d_transpose(tpt_tensor **out, tpt_tower *tower, const char *name, const tpt_tensor *x,
                                       int64_t filters, const tpt_layer_options *options) {
  return guard(__func__, [&] {
    clear(out);
    tpt::model::Tower &t = tower_arg(tower);
    std::string n = name_arg(name, "name");
    const at::Tensor &input = tensor_arg(x, "x");
    at_least_one(filters, "filters");
    give(out, layers::conv2d_transpose(t, n, input, filters, layer_options(options)));
  });
}

namespace {

// A pool's padding argument, checked as an integer (see tpt::enum_int)
// before it is passed on as the enum.
tpt_padding padding_arg(const tpt_padding &padding, const char *who) {
  if (tpt::enum_int(padding) != TPT_PADDING_SAME && tpt::enum_int(padding) != TPT_PADDING_VALID)
    tpt::invalid_argument(std::string(who) + ": padding " + std::to_string(tpt::enum_int(padding)) +
                          " is not a tpt_padding");
  return padding;
}

}  // namespace

tpt_status *tpt_layer_max_pool(tpt_tensor **out, const tpt_tensor *x, int64_t kernel, int64_t stride,
                               tpt_padding padding) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::max_pool(tensor_arg(x, "x"), kernel, stride, padding_arg(padding, "max_pool")));
  });
}

tpt_status *tpt_layer_avg_pool(tpt_tensor **out, const tpt_tensor *x, int64_t kernel, int64_t stride,
                               tpt_padding padding) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::avg_pool(tensor_arg(x, "x"), kernel, stride, padding_arg(padding, "avg_pool")));
  });
}

tpt_status *tpt_layer_global_avg_pool(tpt_tensor **out, const tpt_tensor *x) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::global_avg_pool(tensor_arg(x, "x")));
  });
}

tpt_status *tpt_layer_batch_norm(tpt_tensor **out, tpt_tower *tower, const char *name, const tpt_tensor *x,
                                 double momentum, double eps) {
  return guard(__func__, [&] {
    clear(out);
    tpt::model::Tower &t = tower_arg(tower);
    std::string n = name_arg(name, "name");
    give(out, layers::batch_norm(t, n, tensor_arg(x, "x"), momentum, eps));
  });
}

tpt_status *tpt_layer_layer_norm(tpt_tensor **out, tpt_tower *tower, const char *name, const tpt_tensor *x,
                                 double eps) {
  return guard(__func__, [&] {
    clear(out);
    tpt::model::Tower &t = tower_arg(tower);
    std::string n = name_arg(name, "name");
    give(out, layers::layer_norm(t, n, tensor_arg(x, "x"), eps));
  });
}

tpt_status *tpt_layer_layer_norm_axes(tpt_tensor **out, tpt_tower *tower, const char *name, const tpt_tensor *x,
                                      const int64_t *axes, size_t n_axes, int64_t channel_axis, double eps) {
  return guard(__func__, [&] {
    clear(out);
    tpt::model::Tower &t = tower_arg(tower);
    std::string n = name_arg(name, "name");
    if (n_axes > 0) require(axes, "axes");
    std::vector<int64_t> a(axes, axes + n_axes);
    give(out, layers::layer_norm_axes(t, n, tensor_arg(x, "x"), std::move(a), channel_axis, eps));
  });
}

tpt_status *tpt_layer_dropout(tpt_tensor **out, const tpt_tower *tower, const tpt_tensor *x, double rate) {
  return guard(__func__, [&] {
    clear(out);
    const tpt::model::Tower &t = tower_arg(tower);
    give(out, layers::dropout(t, tensor_arg(x, "x"), rate));
  });
}

tpt_status *tpt_layer_activation(tpt_tensor **out, const tpt_tensor *x, tpt_activation activation, double alpha) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::activation(tensor_arg(x, "x"), activation, alpha));
  });
}

tpt_status *tpt_layer_flatten(tpt_tensor **out, const tpt_tensor *x) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::flatten(tensor_arg(x, "x")));
  });
}

tpt_status *tpt_layer_concat(tpt_tensor **out, const tpt_tensor *const *xs, size_t n, int64_t dim) {
  return guard(__func__, [&] {
    clear(out);
    if (n == 0) tpt::invalid_argument("n is 0: nothing to concatenate");
    require(xs, "xs");
    std::vector<at::Tensor> ts;
    ts.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      std::string entry = "xs[" + std::to_string(i) + "]";
      ts.push_back(tensor_arg(xs[i], entry.c_str()));
    }
    give(out, layers::concat(ts, dim));
  });
}

tpt_status *tpt_loss_softmax_cross_entropy(tpt_tensor **out, const tpt_tensor *logits, const tpt_tensor *labels) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::softmax_cross_entropy(tensor_arg(logits, "logits"), tensor_arg(labels, "labels")));
  });
}

tpt_status *tpt_loss_sigmoid_cross_entropy(tpt_tensor **out, const tpt_tensor *logits, const tpt_tensor *targets) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::sigmoid_cross_entropy(tensor_arg(logits, "logits"), tensor_arg(targets, "targets")));
  });
}

tpt_status *tpt_loss_mse(tpt_tensor **out, const tpt_tensor *prediction, const tpt_tensor *target) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::mse(tensor_arg(prediction, "prediction"), tensor_arg(target, "target")));
  });
}

tpt_status *tpt_loss_l1(tpt_tensor **out, const tpt_tensor *prediction, const tpt_tensor *target) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::l1(tensor_arg(prediction, "prediction"), tensor_arg(target, "target")));
  });
}

tpt_status *tpt_regularize_l2(tpt_tensor **out, tpt_tower *tower, const char *pattern, double weight) {
  return guard(__func__, [&] {
    clear(out);
    tpt::model::Tower &t = tower_arg(tower);
    give(out, layers::regularize_l2(t, require(pattern, "pattern"), weight));
  });
}

tpt_status *tpt_metric_accuracy(tpt_tensor **out, const tpt_tensor *logits, const tpt_tensor *labels) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::accuracy(tensor_arg(logits, "logits"), tensor_arg(labels, "labels")));
  });
}

tpt_status *tpt_metric_wrong(tpt_tensor **out, const tpt_tensor *logits, const tpt_tensor *labels, int64_t k) {
  return guard(__func__, [&] {
    clear(out);
    give(out, layers::wrong(tensor_arg(logits, "logits"), tensor_arg(labels, "labels"), k));
  });
}
