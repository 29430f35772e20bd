// Layers, losses and metrics for tower functions (tensorpack's models/ and
// symbolic_functions), behind the C API section of the same name
// (src/capi/layer.cpp).
//
// A layer with variables creates them in the tower's scope `name` ("fc1/W",
// "fc1/b") with the tower's reuse rules; variables take x's dtype. Layouts are
// LibTorch's: NCHW images, fc weight [units, in], conv weight [filters,
// in / groups, kh, kw], transposed conv weight [in, filters / groups, kh, kw].
// Padding SAME is TensorFlow's (and tensorpack's): the output has
// ceil(in / stride) elements, and the padding of that size is split with the
// odd pixel at the bottom / right. Every error is tpt::Error
// TPT_ERR_INVALID_ARGUMENT whose message names the layer ("conv2d 'conv1': x
// must be [N, C, H, W], got [3, 4]"); LibTorch's own errors pass through.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model.hpp"
#include "tptrain/layer.h"

namespace tpt::model::layers {

// The C API's tpt_layer_options (same defaults).
struct LayerOptions {
  bool use_bias = true;
  tpt_activation activation = TPT_ACT_NONE;
  double alpha = 0.2;
  tpt_init kernel_init = TPT_INIT_HE_NORMAL;
  tpt_init bias_init = TPT_INIT_ZEROS;
  std::array<int64_t, 2> kernel{3, 3};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  tpt_padding padding = TPT_PADDING_SAME;
};

// Throws when a field is out of range; `who` starts the message.
void validate(const LayerOptions &o, const std::string &who);

// TensorFlow's SAME padding of one dimension: {before, after}, after - before
// in {0, 1}, for an output of ceil(in / stride) elements.
std::pair<int64_t, int64_t> same_padding(int64_t in, int64_t kernel, int64_t stride, int64_t dilation = 1);

// The convolutions' memory format (layers.cpp says the rule): -1 follows the
// rule (or TPTRAIN_CHANNELS_LAST, read once), 1 forces channels-last, 0 NCHW.
// For tests, which check that both give the same numbers.
void force_channels_last(int mode);

at::Tensor fc(Tower &tower, const std::string &name, const at::Tensor &x, int64_t units,
              const LayerOptions &o = {});
at::Tensor conv2d(Tower &tower, const std::string &name, const at::Tensor &x, int64_t filters,
                  const LayerOptions &o = {});
at::Tensor conv2d_transpose(Tower &tower, const std::string &name, const at::Tensor &x, int64_t filters,
                            const LayerOptions &o = {});

at::Tensor max_pool(const at::Tensor &x, int64_t kernel, int64_t stride, tpt_padding padding);
at::Tensor avg_pool(const at::Tensor &x, int64_t kernel, int64_t stride, tpt_padding padding);
at::Tensor global_avg_pool(const at::Tensor &x);

at::Tensor batch_norm(Tower &tower, const std::string &name, const at::Tensor &x, double momentum = 0.9,
                      double eps = 1e-5);
at::Tensor layer_norm(Tower &tower, const std::string &name, const at::Tensor &x, double eps = 1e-5);
// Layer normalisation over `axes` (negative counts from the end), with
// gamma/beta of size x.size(channel_axis) broadcast along it: axes {1, 2, 3}
// and channel_axis 1 are tensorpack's LayerNorm of an NCHW tensor.
at::Tensor layer_norm_axes(Tower &tower, const std::string &name, const at::Tensor &x, std::vector<int64_t> axes,
                           int64_t channel_axis, double eps);
at::Tensor dropout(const Tower &tower, const at::Tensor &x, double rate);

at::Tensor activation(const at::Tensor &x, tpt_activation act, double alpha = 0.2);
at::Tensor flatten(const at::Tensor &x);
at::Tensor concat(const std::vector<at::Tensor> &xs, int64_t dim);

at::Tensor softmax_cross_entropy(const at::Tensor &logits, const at::Tensor &labels);
at::Tensor sigmoid_cross_entropy(const at::Tensor &logits, const at::Tensor &targets);
at::Tensor mse(const at::Tensor &prediction, const at::Tensor &target);
at::Tensor l1(const at::Tensor &prediction, const at::Tensor &target);

at::Tensor regularize_l2(Tower &tower, const std::string &pattern, double weight);

at::Tensor accuracy(const at::Tensor &logits, const at::Tensor &labels);
at::Tensor wrong(const at::Tensor &logits, const at::Tensor &labels, int64_t k);

}  // namespace tpt::model::layers
