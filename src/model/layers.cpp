#include "model/layers.hpp"
#include "base/pattern.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/binary_cross_entropy_with_logits.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/conv_transpose2d.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/l1_loss.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#include <regex>
#include <sstream>

#include "base/autocast.hpp"
#include "base/error.hpp"

namespace tpt::model::layers {

namespace {

// What an error message is about ("conv2d 'conv1'"), made into text only
// when there is an error (not on every call).
struct Who {
  const char *layer;
  const std::string *name = nullptr;
  Who(const char *l) : layer(l) {}  // NOLINT: implicit from a literal
  Who(const char *l, const std::string &n) : layer(l), name(&n) {}
  std::string str() const { return name ? std::string(layer) + " '" + *name + "'" : std::string(layer); }
};
std::string operator+(const Who &w, const char *s) { return w.str() + s; }

// The C API's names of dtypes.
std::string type_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "f32";
    case c10::ScalarType::Double: return "f64";
    case c10::ScalarType::Half: return "f16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Long: return "i64";
    case c10::ScalarType::Int: return "i32";
    case c10::ScalarType::Byte: return "u8";
    case c10::ScalarType::Bool: return "bool";
    default: return c10::toString(t);
  }
}

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void need_defined(const at::Tensor &x, const Who &who, const char *arg) {
  if (!x.defined()) invalid_argument(who + ": " + arg + " is an undefined tensor");
}

void need_floating(const at::Tensor &x, const Who &who, const char *arg) {
  need_defined(x, who, arg);
  if (!c10::isFloatingType(x.scalar_type()))
    invalid_argument(who + ": " + arg + " must be floating point, got " + type_name(x.scalar_type()) + " " +
                     shape_text(x.sizes()));
}

void need_image(const at::Tensor &x, const Who &who) {
  need_floating(x, who, "x");
  if (x.dim() != 4) invalid_argument(who + ": x must be [N, C, H, W], got " + shape_text(x.sizes()));
  if (x.size(2) < 1 || x.size(3) < 1)
    invalid_argument(who + ": x has no pixels: " + shape_text(x.sizes()));
}

// By reference and as integers: a caller's value outside the enum is not
// loaded as the enum (see enum_int).
bool valid_init(const tpt_init &i) { return enum_int(i) >= TPT_INIT_ZEROS && enum_int(i) <= TPT_INIT_HE_NORMAL; }
bool valid_activation(const tpt_activation &a) { return enum_int(a) >= TPT_ACT_NONE && enum_int(a) <= TPT_ACT_SOFTMAX; }
bool valid_padding(const tpt_padding &p) { return enum_int(p) == TPT_PADDING_SAME || enum_int(p) == TPT_PADDING_VALID; }

// Pops the scope it pushed, also when the layer throws.
class LayerScope {
 public:
  LayerScope(Tower &tower, const std::string &name) : tower_(tower) { tower_.push_scope(name); }
  ~LayerScope() {
    try {
      tower_.pop_scope();
    } catch (...) {
    }
  }
  LayerScope(const LayerScope &) = delete;
  LayerScope &operator=(const LayerScope &) = delete;

 private:
  Tower &tower_;
};

// The initializer of a layer's weight. tpt_layer_options has no initializer
// parameters, so those that need them get Keras' defaults (uniform in
// [-0.05, 0.05), normal and truncated normal with standard deviation 0.05);
// He initializers take the leaky ReLU slope when that is the activation.
VariableOptions init_options(tpt_init init, c10::ScalarType dtype, const LayerOptions &o) {
  VariableOptions v;
  v.dtype = dtype;
  v.init = init;
  switch (init) {
    case TPT_INIT_UNIFORM: v.a = -0.05, v.b = 0.05; break;
    case TPT_INIT_NORMAL:
    case TPT_INIT_TRUNCATED_NORMAL: v.a = 0, v.b = 0.05; break;
    case TPT_INIT_HE_UNIFORM:
    case TPT_INIT_HE_NORMAL: v.a = o.activation == TPT_ACT_LEAKY_RELU ? o.alpha : 0; break;
    default: break;
  }
  return v;
}

VariableOptions constant(c10::ScalarType dtype, double value, bool trainable) {
  VariableOptions v;
  v.dtype = dtype;
  v.init = value == 0 ? TPT_INIT_ZEROS : TPT_INIT_CONSTANT;
  v.a = value;
  v.trainable = trainable;
  return v;
}

// `fresh`: x is the layer's own new output (of a convolution or a linear
// layer, whose backward passes do not keep it), so ReLU may overwrite it
// (no second activation-sized tensor, one pass less over memory); a user's
// tensor (tpt_layer_activation) is never changed.
at::Tensor activate(at::Tensor x, tpt_activation act, double alpha, const Who &who, bool fresh = false) {
  switch (act) {
    case TPT_ACT_NONE: return x;
    case TPT_ACT_RELU: return fresh ? at::relu_(x) : at::relu(x);
    case TPT_ACT_LEAKY_RELU: return at::leaky_relu(x, alpha);
    case TPT_ACT_SIGMOID: return at::sigmoid(x);
    case TPT_ACT_TANH: return at::tanh(x);
    case TPT_ACT_GELU: return at::gelu(x);
    case TPT_ACT_SOFTMAX:
      if (x.dim() < 2)
        invalid_argument(who + ": softmax is over dimension 1, but x is " + shape_text(x.sizes()));
      return at::softmax(x, 1);
    case TPT_ACT_FORCE32: break;
  }
  invalid_argument(who + ": activation " + std::to_string(static_cast<int>(act)) + " is not a tpt_activation");
}

// `index` >= 0 names an entry of `what` ("kernel[1]").
void need_at_least(int64_t v, int64_t min, const Who &who, const char *what, int index = -1) {
  if (v >= min) return;
  std::string field = index >= 0 ? std::string(what) + "[" + std::to_string(index) + "]" : std::string(what);
  invalid_argument(who + ": " + field + " must be >= " + std::to_string(min) + ", got " + std::to_string(v));
}

// Logits [N, K] (floating) and labels [N] (i64).
void check_classification(const at::Tensor &logits, const at::Tensor &labels, const Who &who) {
  need_floating(logits, who, "logits");
  need_defined(labels, who, "labels");
  if (logits.dim() != 2) invalid_argument(who + ": logits must be [N, K], got " + shape_text(logits.sizes()));
  if (labels.scalar_type() != c10::ScalarType::Long)
    invalid_argument(who + ": labels must be i64 class indices, got " + type_name(labels.scalar_type()) + " " +
                     shape_text(labels.sizes()));
  if (labels.dim() != 1 || labels.size(0) != logits.size(0))
    invalid_argument(who + ": labels must be [N] = [" + std::to_string(logits.size(0)) + "] for logits " +
                     shape_text(logits.sizes()) + ", got " + shape_text(labels.sizes()));
}

// Prediction and target of the same shape; the target takes the prediction's dtype.
at::Tensor check_pair(const at::Tensor &prediction, const at::Tensor &target, const Who &who,
                      const char *pname, const char *tname) {
  need_floating(prediction, who, pname);
  need_defined(target, who, tname);
  if (prediction.sizes() != target.sizes())
    invalid_argument(who + ": " + tname + " must have the shape of " + pname + " " + shape_text(prediction.sizes()) +
                     ", got " + shape_text(target.sizes()));
  if (target.scalar_type() == prediction.scalar_type()) return target;
  if (target.scalar_type() == c10::ScalarType::ComplexFloat || target.scalar_type() == c10::ScalarType::ComplexDouble)
    invalid_argument(who + ": " + tname + " is complex");
  // Under autocast a bfloat16/float16 prediction meets a float32 target in
  // a loss that autocast computes in float32: the target keeps its precision.
  const Tower *tower = current_tower();
  const bool low = prediction.scalar_type() == c10::ScalarType::BFloat16 ||
                   prediction.scalar_type() == c10::ScalarType::Half;
  if (low && tower && tower->precision() != TPT_PRECISION_FP32 && c10::isFloatingType(target.scalar_type()))
    return target;
  return target.to(prediction.scalar_type());
}

// 1 - momentum, rounded to 12 decimals: momentum 0.9 gives PyTorch's 0.1
// exactly (1 - 0.9 is 0.09999999999999998 in binary).
double pytorch_momentum(double momentum) { return std::round((1 - momentum) * 1e12) / 1e12; }

}  // namespace

// ------------------------------------------------------------------ options

void validate(const LayerOptions &o, const Who &who);
void validate(const LayerOptions &o, const std::string &who) { validate(o, Who(who.c_str())); }

void validate(const LayerOptions &o, const Who &who) {
  if (!valid_activation(o.activation))
    invalid_argument(who + ": activation " + std::to_string(enum_int(o.activation)) + " is not a tpt_activation");
  if (!std::isfinite(o.alpha)) invalid_argument(who + ": alpha must be finite, got " + num(o.alpha));
  if (!valid_init(o.kernel_init))
    invalid_argument(who + ": kernel_init " + std::to_string(enum_int(o.kernel_init)) + " is not a tpt_init");
  if (!valid_init(o.bias_init))
    invalid_argument(who + ": bias_init " + std::to_string(enum_int(o.bias_init)) + " is not a tpt_init");
  for (int i = 0; i < 2; ++i) {
    need_at_least(o.kernel[i], 1, who, "kernel", i);
    need_at_least(o.stride[i], 1, who, "stride", i);
    need_at_least(o.dilation[i], 1, who, "dilation", i);
  }
  need_at_least(o.groups, 1, who, "groups");
  if (!valid_padding(o.padding))
    invalid_argument(who + ": padding " + std::to_string(enum_int(o.padding)) + " is not a tpt_padding");
}

std::pair<int64_t, int64_t> same_padding(int64_t in, int64_t kernel, int64_t stride, int64_t dilation) {
  int64_t out = (in + stride - 1) / stride;
  int64_t total = std::max<int64_t>((out - 1) * stride + (kernel - 1) * dilation + 1 - in, 0);
  return {total / 2, total - total / 2};
}

// ------------------------------------------------------------------ layers with weights

// The fast layout without user tuning: whether conv2d computes in
// channels-last (NHWC) memory format (conv2d_transpose stays NCHW: LibTorch
// 1.13's CPU kernel returns NCHW whatever it is given). The rule, decided
// once per process: on the CPU, when it computes bfloat16 natively (AVX-512 BF16 or AMX, where
// oneDNN's NHWC convolutions are the faster ones; on an AVX2 CPU NHWC
// measured 0.87-1.0x of NCHW in fp32 and no faster in bf16, so NCHW stays);
// on CUDA under a mixed precision (tensor cores take NHWC). TPTRAIN_CHANNELS_LAST=1
// or 0 decides instead. The result is the same numbers within float32
// rounding; the activations that follow are channels-last tensors of the
// same shape (flatten and reshape see NCHW order; a raw view may not).
static std::atomic<int> channels_last_mode{-2};  // -2: not read yet; -1: the rule; 0, 1: forced

void force_channels_last(int mode) { channels_last_mode.store(mode < 0 ? -1 : mode != 0); }

static bool channels_last(const Tower &tower, const at::Tensor &x) {
  int mode = channels_last_mode.load();
  if (mode == -2) {
    const char *e = std::getenv("TPTRAIN_CHANNELS_LAST");
    int from_env = e && *e ? (std::strcmp(e, "0") == 0 ? 0 : 1) : -1;
    channels_last_mode.compare_exchange_strong(mode, from_env);
    mode = channels_last_mode.load();
  }
  if (x.dim() != 4) return false;
  if (mode >= 0) return mode == 1;
  if (x.device().is_cpu()) {
    static const bool native_bf16 = cpu_has_native_bf16();
    return native_bf16;
  }
  return x.device().is_cuda() && tower.precision() != TPT_PRECISION_FP32;
}

// t in channels-last strides, as LibTorch's kernels read them (their
// suggest_memory_format()). contiguous(ChannelsLast) is not enough: a tensor
// with one channel (the first convolution's images, its weight) is already
// "contiguous" in both formats and comes back with NCHW strides, so the
// convolution ran NCHW, its output stayed NCHW, and every layer after it
// paid a copy between the formats (and LibTorch 1.13's NCHW bfloat16 max
// pool is several times slower). to(memory_format) restrides such a tensor
// (one copy of a small weight), as PyTorch's Module.to(memory_format=) and
// Tensor.to(memory_format=) do; one that needs no gradient (the input batch)
// and whose memory is already in channels-last order (one channel, or 1x1
// images) becomes a view with channels-last strides instead: the same bytes,
// no copy each step.
static at::Tensor as_channels_last(const at::Tensor &t) {
  if (t.suggest_memory_format() == at::MemoryFormat::ChannelsLast) return t;
  if (!t.requires_grad() && t.is_contiguous(at::MemoryFormat::ChannelsLast))
    return t.as_strided(t.sizes(), c10::get_channels_last_strides_2d(t.sizes()), t.storage_offset());
  return t.to(t.options(), /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::ChannelsLast);
}

// The dtype of a layer's variables: x's, except under a mixed precision
// (autocast) where a bfloat16/float16 activation still gets float32
// variables (master weights; autocast casts them for the operator).
static c10::ScalarType variable_type(const Tower &tower, const at::Tensor &x) {
  const c10::ScalarType t = x.scalar_type();
  const bool low = t == c10::ScalarType::BFloat16 || t == c10::ScalarType::Half;
  return low && tower.precision() != TPT_PRECISION_FP32 ? c10::ScalarType::Float : t;
}

at::Tensor fc(Tower &tower, const std::string &name, const at::Tensor &x, int64_t units, const LayerOptions &o) {
  const Who who("fc", name);
  validate(o, who);
  need_at_least(units, 1, who, "units");
  need_floating(x, who, "x");
  if (x.dim() < 2)
    invalid_argument(who + ": x must be [N, in] (more dimensions are flattened), got " + shape_text(x.sizes()));
  at::Tensor x2 = x.dim() > 2 ? x.flatten(1) : x;
  int64_t in = x2.size(1);
  if (in < 1) invalid_argument(who + ": x has no features: " + shape_text(x.sizes()));
  LayerScope scope(tower, name);
  at::Tensor w = tower.variable("W", {units, in}, init_options(o.kernel_init, variable_type(tower, x), o));
  at::Tensor b;
  if (o.use_bias) b = tower.variable("b", {units}, init_options(o.bias_init, variable_type(tower, x), o));
  return activate(at::linear(x2, w, b), o.activation, o.alpha, who, /*fresh=*/true);
}

at::Tensor conv2d(Tower &tower, const std::string &name, const at::Tensor &x, int64_t filters,
                  const LayerOptions &o) {
  const Who who("conv2d", name);
  validate(o, who);
  need_at_least(filters, 1, who, "filters");
  need_image(x, who);
  int64_t channels = x.size(1);
  if (channels % o.groups != 0 || filters % o.groups != 0)
    invalid_argument(who + ": groups " + std::to_string(o.groups) + " must divide the input channels (" +
                     std::to_string(channels) + ") and filters (" + std::to_string(filters) + ")");
  std::array<int64_t, 2> pad{0, 0}, extra{0, 0};
  for (int i = 0; i < 2; ++i) {
    int64_t in = x.size(2 + i), k_eff = (o.kernel[i] - 1) * o.dilation[i] + 1;
    if (o.padding == TPT_PADDING_SAME) {
      auto [before, after] = same_padding(in, o.kernel[i], o.stride[i], o.dilation[i]);
      pad[i] = before;
      extra[i] = after - before;
    } else if (in < k_eff) {
      invalid_argument(who + ": with VALID padding the input " + shape_text(x.sizes()) + " is smaller than the kernel " +
                       std::to_string(o.kernel[0]) + "x" + std::to_string(o.kernel[1]) + " (dilation " +
                       std::to_string(o.dilation[0]) + "x" + std::to_string(o.dilation[1]) + ")");
    }
  }
  LayerScope scope(tower, name);
  at::Tensor w = tower.variable("W", {filters, channels / o.groups, o.kernel[0], o.kernel[1]},
                                init_options(o.kernel_init, variable_type(tower, x), o));
  at::Tensor b;
  if (o.use_bias) b = tower.variable("b", {filters}, init_options(o.bias_init, variable_type(tower, x), o));
  // The symmetric part of SAME padding goes to the convolution; the odd pixel
  // at the bottom / right is padded explicitly.
  at::Tensor xp = (extra[0] || extra[1]) ? at::constant_pad_nd(x, {0, extra[1], 0, extra[0]}, 0) : x;
  if (channels_last(tower, xp)) {
    xp = as_channels_last(xp);
    w = as_channels_last(w);
  }
  at::Tensor y = at::conv2d(xp, w, b, {o.stride[0], o.stride[1]}, {pad[0], pad[1]}, {o.dilation[0], o.dilation[1]},
                            o.groups);
  return activate(y, o.activation, o.alpha, who, /*fresh=*/true);
}

at::Tensor conv2d_transpose(Tower &tower, const std::string &name, const at::Tensor &x, int64_t filters,
                            const LayerOptions &o) {
  const Who who("conv2d_transpose", name);
  validate(o, who);
  need_at_least(filters, 1, who, "filters");
  need_image(x, who);
  int64_t channels = x.size(1);
  if (channels % o.groups != 0 || filters % o.groups != 0)
    invalid_argument(who + ": groups " + std::to_string(o.groups) + " must divide the input channels (" +
                     std::to_string(channels) + ") and filters (" + std::to_string(filters) + ")");
  // LibTorch's full output is (in - 1) * stride + k_eff. TensorFlow's is
  // in * stride (SAME), or max(in * stride, full) (VALID). SAME is the
  // transpose of a SAME convolution of the in * stride output: its padding
  // (full - in * stride when that is positive) is cropped, the smaller half
  // at the top / left; a shorter full output is extended with
  // output_padding.
  std::array<int64_t, 2> pad{0, 0}, out_pad{0, 0}, target{0, 0};
  bool crop = false;
  for (int i = 0; i < 2; ++i) {
    int64_t in = x.size(2 + i), s = o.stride[i];
    int64_t full = (in - 1) * s + (o.kernel[i] - 1) * o.dilation[i] + 1;
    if (full <= in * s) {
      out_pad[i] = in * s - full;
      target[i] = in * s;
    } else if (o.padding == TPT_PADDING_SAME) {
      int64_t total = full - in * s;
      pad[i] = total / 2;
      target[i] = in * s;
      crop = crop || total % 2 != 0;
    } else {
      target[i] = full;
    }
  }
  LayerScope scope(tower, name);
  at::Tensor w = tower.variable("W", {channels, filters / o.groups, o.kernel[0], o.kernel[1]},
                                init_options(o.kernel_init, variable_type(tower, x), o));
  at::Tensor b;
  if (o.use_bias) b = tower.variable("b", {filters}, init_options(o.bias_init, variable_type(tower, x), o));
  at::Tensor y = at::conv_transpose2d(x, w, b, {o.stride[0], o.stride[1]}, {pad[0], pad[1]}, {out_pad[0], out_pad[1]},
                                      o.groups, {o.dilation[0], o.dilation[1]});
  if (crop) y = y.narrow(2, 0, target[0]).narrow(3, 0, target[1]);
  return activate(y, o.activation, o.alpha, who, /*fresh=*/true);
}

// ------------------------------------------------------------------ pooling

namespace {

at::Tensor pool(bool is_max, const at::Tensor &x, int64_t kernel, int64_t stride, tpt_padding padding) {
  const Who who(is_max ? "max_pool" : "avg_pool");
  need_image(x, who);
  need_at_least(kernel, 1, who, "kernel");
  need_at_least(stride, 1, who, "stride");
  if (!valid_padding(padding))
    invalid_argument(who + ": padding " + std::to_string(enum_int(padding)) + " is not a tpt_padding");
  if (padding == TPT_PADDING_VALID) {
    if (x.size(2) < kernel || x.size(3) < kernel)
      invalid_argument(who + ": with VALID padding the input " + shape_text(x.sizes()) + " is smaller than the kernel " +
                       std::to_string(kernel) + "x" + std::to_string(kernel));
    return is_max ? at::max_pool2d(x, {kernel, kernel}, {stride, stride})
                  : at::avg_pool2d(x, {kernel, kernel}, {stride, stride});
  }
  auto [top, bottom] = same_padding(x.size(2), kernel, stride);
  auto [left, right] = same_padding(x.size(3), kernel, stride);
  bool symmetric = top == bottom && left == right;
  if (is_max) {
    // Padding counts as -inf (never the maximum: every SAME window holds a
    // pixel). LibTorch pads symmetrically; the odd pixel is padded here.
    at::Tensor xp = symmetric ? x
                              : at::constant_pad_nd(x, {0, right - left, 0, bottom - top},
                                                    -std::numeric_limits<double>::infinity());
    return at::max_pool2d(xp, {kernel, kernel}, {stride, stride}, {top, left});
  }
  // The average of the pixels inside the image only (TensorFlow's).
  if (symmetric)
    return at::avg_pool2d(x, {kernel, kernel}, {stride, stride}, {top, left}, false, /*count_include_pad=*/false);
  std::vector<int64_t> p{left, right, top, bottom};
  at::Tensor sums = at::avg_pool2d(at::constant_pad_nd(x, p, 0), {kernel, kernel}, {stride, stride}, 0, false, true,
                                   /*divisor_override=*/1);
  at::Tensor ones = at::ones({1, 1, x.size(2), x.size(3)}, x.options().requires_grad(false));
  at::Tensor counts = at::avg_pool2d(at::constant_pad_nd(ones, p, 0), {kernel, kernel}, {stride, stride}, 0, false,
                                     true, /*divisor_override=*/1);
  return sums.div(counts);
}

}  // namespace

at::Tensor max_pool(const at::Tensor &x, int64_t kernel, int64_t stride, tpt_padding padding) {
  return pool(true, x, kernel, stride, padding);
}

at::Tensor avg_pool(const at::Tensor &x, int64_t kernel, int64_t stride, tpt_padding padding) {
  return pool(false, x, kernel, stride, padding);
}

at::Tensor global_avg_pool(const at::Tensor &x) {
  need_image(x, "global_avg_pool");
  return x.mean({2, 3});
}

// ------------------------------------------------------------------ normalisation

at::Tensor batch_norm(Tower &tower, const std::string &name, const at::Tensor &x, double momentum, double eps) {
  const Who who("batch_norm", name);
  need_floating(x, who, "x");
  if (x.dim() < 2)
    invalid_argument(who + ": x must be [N, C] or [N, C, H, W], got " + shape_text(x.sizes()));
  if (!(momentum >= 0 && momentum <= 1)) invalid_argument(who + ": momentum must be in [0, 1], got " + num(momentum));
  if (!(eps > 0) || !std::isfinite(eps)) invalid_argument(who + ": eps must be > 0, got " + num(eps));
  int64_t channels = x.size(1);
  if (channels < 1) invalid_argument(who + ": x has no channels: " + shape_text(x.sizes()));
  bool training = tower.is_training(), building = tower.is_building();
  if (training && !building && x.numel() / channels < 2)
    invalid_argument(who + ": training needs more than one value per channel, got x " + shape_text(x.sizes()));
  auto type = variable_type(tower, x);
  LayerScope scope(tower, name);
  at::Tensor gamma = tower.variable("gamma", {channels}, constant(type, 1, true));
  at::Tensor beta = tower.variable("beta", {channels}, constant(type, 0, true));
  at::Tensor mean = tower.variable("mean/EMA", {channels}, constant(type, 0, false));
  at::Tensor var = tower.variable("variance/EMA", {channels}, constant(type, 1, false));
  double m = pytorch_momentum(momentum);
  if (!training) return at::batch_norm(x, gamma, beta, mean, var, false, m, eps, /*cudnn_enabled=*/true);
  // Batch statistics; the moving averages are updated in place by LibTorch,
  // by the first training tower only, and never in the build call.
  if (tower.index() == 0 && !building) return at::batch_norm(x, gamma, beta, mean, var, true, m, eps, true);
  return at::batch_norm(x, gamma, beta, c10::nullopt, c10::nullopt, true, m, eps, true);
}

at::Tensor layer_norm(Tower &tower, const std::string &name, const at::Tensor &x, double eps) {
  const Who who("layer_norm", name);
  need_floating(x, who, "x");
  if (x.dim() < 1 || x.size(-1) < 1)
    invalid_argument(who + ": x must have a non-empty last dimension, got " + shape_text(x.sizes()));
  if (!(eps > 0) || !std::isfinite(eps)) invalid_argument(who + ": eps must be > 0, got " + num(eps));
  int64_t d = x.size(-1);
  LayerScope scope(tower, name);
  at::Tensor gamma = tower.variable("gamma", {d}, constant(variable_type(tower, x), 1, true));
  at::Tensor beta = tower.variable("beta", {d}, constant(variable_type(tower, x), 0, true));
  return at::layer_norm(x, {d}, gamma, beta, eps);
}

at::Tensor layer_norm_axes(Tower &tower, const std::string &name, const at::Tensor &x, std::vector<int64_t> axes,
                           int64_t channel_axis, double eps) {
  const Who who("layer_norm", name);
  need_floating(x, who, "x");
  if (!(eps > 0) || !std::isfinite(eps)) invalid_argument(who + ": eps must be > 0, got " + num(eps));
  const int64_t nd = x.dim();
  auto axis = [&](int64_t a, const std::string &what) {
    int64_t b = a < 0 ? a + nd : a;
    if (b < 0 || b >= nd)
      invalid_argument(who + ": " + what + " is " + std::to_string(a) + " but x has " + std::to_string(nd) +
                       " dimensions " + shape_text(x.sizes()));
    return b;
  };
  if (axes.empty()) invalid_argument(who + ": axes is empty (give the dimensions to normalise over)");
  for (size_t i = 0; i < axes.size(); ++i) {
    axes[i] = axis(axes[i], "axes[" + std::to_string(i) + "]");
    for (size_t j = 0; j < i; ++j)
      if (axes[j] == axes[i]) invalid_argument(who + ": axis " + std::to_string(axes[i]) + " is given twice");
  }
  channel_axis = axis(channel_axis, "channel_axis");
  const int64_t c = x.size(channel_axis);
  if (c < 1) invalid_argument(who + ": the channel dimension of x " + shape_text(x.sizes()) + " is empty");
  LayerScope scope(tower, name);
  at::Tensor gamma = tower.variable("gamma", {c}, constant(variable_type(tower, x), 1, true));
  at::Tensor beta = tower.variable("beta", {c}, constant(variable_type(tower, x), 0, true));
  // tensorpack's LayerNorm: tf.nn.moments over the axes (the biased
  // variance), then (x - mean) / sqrt(var + eps) * gamma + beta, gamma and
  // beta broadcast along the channel axis.
  at::Tensor mean = x.mean(axes, /*keepdim=*/true);
  at::Tensor centred = x.sub(mean);
  at::Tensor var = centred.mul(centred).mean(axes, /*keepdim=*/true);
  std::vector<int64_t> shape(static_cast<size_t>(nd), 1);
  shape[static_cast<size_t>(channel_axis)] = c;
  return centred.mul(var.add(eps).rsqrt()).mul(gamma.view(shape)).add(beta.view(shape));
}

// Dropout's noise on the CPU: 1 / keep with probability keep, else 0, for
// element i of the noise's memory decided by a counter-based hash
// (SplitMix64's output function) of one 64-bit draw of the generator and i.
// LibTorch's bernoulli_ draws every element from the generator in turn on
// one thread: 0.7 ms of a 15 ms step of the Fashion-MNIST example (128 x 512
// elements), a twentieth of its time; this takes ~0.05 ms on two threads. One
// draw per call, so the generator (in checkpoints) advances the same whatever
// x's size, and each element's fate depends on i alone, not on how
// parallel_for splits the range: the same mask on any number of threads.
static at::Tensor dropout_noise_cpu(const at::Tensor &x, double keep, const at::Generator &gen) {
  uint64_t seed;
  {
    auto *impl = at::check_generator<at::CPUGeneratorImpl>(gen);
    std::lock_guard<std::mutex> lock(impl->mutex_);
    seed = impl->random64();
  }
  // keep element i when the 32-bit half of hash(i / 2) is below keep * 2^32
  const auto threshold = static_cast<uint64_t>(std::ldexp(keep, 32));
  at::Tensor noise = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, noise.scalar_type(), "dropout_noise", [&] {
    using opmath = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    const auto scale = static_cast<scalar_t>(opmath(1) / static_cast<opmath>(keep));
    const auto zero = static_cast<scalar_t>(0);
    scalar_t *out = noise.data_ptr<scalar_t>();
    const int64_t n = noise.numel(), pairs = (n + 1) / 2;
    at::parallel_for(0, pairs, 8192, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        uint64_t z = seed + static_cast<uint64_t>(k + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        out[2 * k] = (z & 0xFFFFFFFFull) < threshold ? scale : zero;
        if (2 * k + 1 < n) out[2 * k + 1] = (z >> 32) < threshold ? scale : zero;
      }
    });
  });
  return noise;
}

at::Tensor dropout(const Tower &tower, const at::Tensor &x, double rate) {
  need_floating(x, "dropout", "x");
  if (!(rate >= 0 && rate < 1)) invalid_argument("dropout: rate must be in [0, 1), got " + num(rate));
  if (!tower.is_training() || tower.is_building() || rate == 0) return x;
  const at::Generator *gen = tower.generator();
  const bool own = gen && gen->device().type() == x.device().type();
  if (x.device().is_cpu())  // the tower's own generator (towers on threads), else LibTorch's default
    return x.mul(dropout_noise_cpu(x, 1 - rate, own ? *gen : at::detail::getDefaultCPUGenerator()));
  if (own) {  // a tower's own (towers on threads): ATen's dropout with it
    at::Tensor noise = at::empty_like(x).bernoulli_(1 - rate, *gen);
    noise.div_(1 - rate);
    return x.mul(noise);
  }
  return at::dropout(x, rate, true);
}

// ------------------------------------------------------------------ shapes

at::Tensor activation(const at::Tensor &x, tpt_activation act, double alpha) {
  need_defined(x, "activation", "x");
  if (!std::isfinite(alpha)) invalid_argument("activation: alpha must be finite, got " + num(alpha));
  return activate(x, act, alpha, "activation");
}

at::Tensor flatten(const at::Tensor &x) {
  need_defined(x, "flatten", "x");
  if (x.dim() < 1) invalid_argument("flatten: x must be [N, ...], got a 0-d tensor");
  int64_t rest = 1;
  for (int64_t d = 1; d < x.dim(); ++d) rest *= x.size(d);
  return x.reshape({x.size(0), rest});
}

at::Tensor concat(const std::vector<at::Tensor> &xs, int64_t dim) {
  if (xs.empty()) invalid_argument("concat: no tensors");
  for (size_t i = 0; i < xs.size(); ++i)
    if (!xs[i].defined()) invalid_argument("concat: xs[" + std::to_string(i) + "] is an undefined tensor");
  int64_t rank = xs[0].dim();
  if (rank < 1) invalid_argument("concat: xs[0] is a 0-d tensor");
  if (dim < -rank || dim >= rank)
    invalid_argument("concat: dim " + std::to_string(dim) + " is out of range for " + std::to_string(rank) +
                     "-d tensors");
  int64_t d = dim < 0 ? dim + rank : dim;
  for (size_t i = 1; i < xs.size(); ++i) {
    bool ok = xs[i].dim() == rank;
    for (int64_t j = 0; ok && j < rank; ++j) ok = j == d || xs[i].size(j) == xs[0].size(j);
    if (!ok)
      invalid_argument("concat: xs[" + std::to_string(i) + "] is " + shape_text(xs[i].sizes()) + " but xs[0] is " +
                       shape_text(xs[0].sizes()) + ": only dimension " + std::to_string(d) + " may differ");
  }
  return at::cat(xs, d);
}

// ------------------------------------------------------------------ losses

at::Tensor softmax_cross_entropy(const at::Tensor &logits, const at::Tensor &labels) {
  const Who who("softmax_cross_entropy");
  check_classification(logits, labels, who);
  int64_t k = logits.size(1);
  if (labels.numel() > 0 && labels.device().is_cpu()) {
    int64_t lo = labels.min().item<int64_t>(), hi = labels.max().item<int64_t>();
    if (lo < 0 || hi >= k)
      invalid_argument(who + ": labels must be class indices in [0, " + std::to_string(k) + "), got " +
                       std::to_string(lo < 0 ? lo : hi));
  }
  return at::cross_entropy_loss(logits, labels);
}

at::Tensor sigmoid_cross_entropy(const at::Tensor &logits, const at::Tensor &targets) {
  at::Tensor t = check_pair(logits, targets, "sigmoid_cross_entropy", "logits", "targets");
  return at::binary_cross_entropy_with_logits(logits, t);
}

at::Tensor mse(const at::Tensor &prediction, const at::Tensor &target) {
  return at::mse_loss(prediction, check_pair(prediction, target, "mse", "prediction", "target"));
}

at::Tensor l1(const at::Tensor &prediction, const at::Tensor &target) {
  return at::l1_loss(prediction, check_pair(prediction, target, "l1", "prediction", "target"));
}

at::Tensor regularize_l2(Tower &tower, const std::string &pattern, double weight) {
  if (!std::isfinite(weight)) invalid_argument("regularize_l2: weight must be finite, got " + num(weight));
  std::regex re = name_pattern(pattern, "regularize_l2");
  // The tower's own variables (a replica's, or its own leaves under the
  // multi-tower strategies): the ones this call's layers use, so the term's
  // gradients reach this tower's update.
  at::Tensor total;
  for (const auto &v : tower.store().all()) {
    if (!v.trainable || !std::regex_search(v.name, re)) continue;
    at::Tensor term = v.value.pow(2).sum();
    total = total.defined() ? total.add(term) : term;
  }
  if (!total.defined()) return at::zeros({}, at::TensorOptions().dtype(c10::ScalarType::Float));
  return total.mul(weight);
}

// ------------------------------------------------------------------ metrics

at::Tensor accuracy(const at::Tensor &logits, const at::Tensor &labels) {
  check_classification(logits, labels, "accuracy");
  return at::argmax(logits, 1).eq(labels).to(c10::ScalarType::Float).mean();
}

at::Tensor wrong(const at::Tensor &logits, const at::Tensor &labels, int64_t k) {
  check_classification(logits, labels, "wrong");
  need_at_least(k, 1, "wrong", "k");
  // TensorFlow's in_top_k, as tensorpack's prediction_incorrect: the label
  // is among the top k when fewer than k logits are strictly larger than its
  // own (ties count in), and never when a logit of the row is not finite or
  // the label is not a class.
  int64_t classes = logits.size(1);
  at::Tensor l = logits.detach();
  if (classes == 0) return at::ones({l.size(0)}, l.options().dtype(c10::ScalarType::Float));
  at::Tensor valid = labels.ge(0).logical_and(labels.lt(classes));
  at::Tensor own = l.gather(1, labels.clamp(0, classes - 1).unsqueeze(1));
  at::Tensor larger = l.gt(own).sum(1);
  at::Tensor finite = at::isfinite(l).all(1);
  at::Tensor in_top = valid.logical_and(finite).logical_and(larger.lt(k));
  return in_top.logical_not().to(c10::ScalarType::Float);
}

}  // namespace tpt::model::layers
