// tpt::model::layers against independent computations with the same weights
// on random inputs: fc vs at::linear, conv2d SAME vs at::conv2d on input
// padded the TensorFlow way, conv2d_transpose as the adjoint of the SAME
// convolution, pooling vs a naive loop, batch_norm vs at::batch_norm and the
// textbook formula for each kind of tower (first, second, build, inference),
// layer_norm, losses and metrics vs hand-written ATen, and L2 regularisation
// with gradients from a second tower; and four training towers on threads at
// once.
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/conv_transpose2d.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/log_sigmoid.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/zeros.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "model/layers.hpp"
#include "model/model.hpp"

#include "tensor_close.hpp"

namespace L = tpt::model::layers;
using tpt::model::Model;
using tpt::model::Tower;

namespace {

const c10::Device kCpu(c10::kCPU);
using tpt_test::close;

// A model whose towers the tests make by hand.
struct Fixture {
  Model model{{}, [](Tower &, const std::vector<at::Tensor> &) {}};
  Tower builder{model, "tower0", 0, true, true, kCpu};
  Tower first() { return Tower(model, "tower0", 0, true, false, kCpu); }
  Tower second() { return Tower(model, "tower1", 1, true, false, kCpu); }
  Tower inference() { return Tower(model, "InferenceTower", 0, false, false, kCpu); }
  at::Tensor var(const std::string &name) {
    std::optional<tpt::model::Variable> v = model.variables().find(name);
    EXPECT_TRUE(v.has_value()) << name;
    return v ? v->value : at::Tensor();
  }
  void set(const std::string &name, const at::Tensor &value) { model.assign(name, value); }
};

// TensorFlow's SAME: pad so that the output has ceil(in / stride) elements,
// the odd pixel at the bottom / right. Written independently of the library.
at::Tensor tf_same_pad(const at::Tensor &x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh = 1,
                       int64_t dw = 1, double value = 0) {
  auto pad = [](int64_t in, int64_t k, int64_t s, int64_t d) {
    int64_t out = (in + s - 1) / s;
    int64_t need = (out - 1) * s + (k - 1) * d + 1 - in;
    return std::max<int64_t>(need, 0);
  };
  int64_t ph = pad(x.size(2), kh, sh, dh), pw = pad(x.size(3), kw, sw, dw);
  return at::constant_pad_nd(x, {pw / 2, pw - pw / 2, ph / 2, ph - ph / 2}, value);
}

// Pooling by loops over each window's pixels inside the image.
at::Tensor naive_pool(const at::Tensor &x, int64_t k, int64_t s, bool same, bool is_max) {
  int64_t h = x.size(2), w = x.size(3);
  int64_t oh = same ? (h + s - 1) / s : (h - k) / s + 1, ow = same ? (w + s - 1) / s : (w - k) / s + 1;
  int64_t top = 0, left = 0;
  if (same) {
    top = std::max<int64_t>((oh - 1) * s + k - h, 0) / 2;
    left = std::max<int64_t>((ow - 1) * s + k - w, 0) / 2;
  }
  at::Tensor xd = x.to(at::kDouble).contiguous();
  at::Tensor out = at::zeros({x.size(0), x.size(1), oh, ow}, at::kDouble);
  auto xa = xd.accessor<double, 4>();
  auto oa = out.accessor<double, 4>();
  for (int64_t n = 0; n < x.size(0); ++n)
    for (int64_t c = 0; c < x.size(1); ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0;
          int count = 0;
          for (int64_t a = i * s - top; a < i * s - top + k; ++a)
            for (int64_t b = j * s - left; b < j * s - left + k; ++b) {
              if (a < 0 || b < 0 || a >= h || b >= w) continue;
              acc = is_max ? std::max(acc, xa[n][c][a][b]) : acc + xa[n][c][a][b];
              ++count;
            }
          oa[n][c][i][j] = is_max ? acc : acc / count;
        }
  return out.to(x.scalar_type());
}

std::string message_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const tpt::Error &e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// ---------------------------------------------------------------- padding

TEST(Layers, SamePaddingIsTensorFlows) {
  EXPECT_EQ(L::same_padding(3, 3, 1), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(L::same_padding(4, 3, 2), (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(L::same_padding(5, 3, 2), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(L::same_padding(7, 4, 1), (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(L::same_padding(8, 3, 1, 2), (std::pair<int64_t, int64_t>{2, 2}));
  EXPECT_EQ(L::same_padding(7, 1, 3), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(L::same_padding(2, 5, 4), (std::pair<int64_t, int64_t>{1, 2}));
}

// ---------------------------------------------------------------- fc

TEST(Layers, FcMatchesLinear) {
  at::manual_seed(1);
  Fixture f;
  at::Tensor x = at::randn({5, 7});
  L::LayerOptions o;
  o.activation = TPT_ACT_TANH;
  at::Tensor built = L::fc(f.builder, "fc", x, 3, o);
  EXPECT_EQ(built.sizes(), (std::vector<int64_t>{5, 3}));
  f.set("fc/b", at::randn({3}));
  Tower t = f.first();
  at::Tensor y = L::fc(t, "fc", x, 3, o);
  EXPECT_TRUE(close(y, at::linear(x, f.var("fc/W"), f.var("fc/b")).tanh()));
  // more dimensions are flattened
  Tower t2 = f.second();
  at::Tensor img = at::randn({4, 2, 3, 3});
  EXPECT_THROW(L::fc(t2, "fc", img, 3, o), tpt::Error);  // fc/W is [3, 7], not [3, 18]
  L::LayerOptions plain;
  plain.use_bias = false;
  at::Tensor z = L::fc(f.builder, "flat", img, 6, plain);
  EXPECT_TRUE(close(z, at::linear(img.reshape({4, 18}), f.var("flat/W"))));
  EXPECT_FALSE(f.model.variables().find("flat/b").has_value());
  // dtype follows x
  at::Tensor xd = at::randn({2, 3}, at::kDouble);
  EXPECT_EQ(L::fc(f.builder, "fc64", xd, 2).scalar_type(), at::kDouble);
  EXPECT_EQ(f.var("fc64/W").scalar_type(), at::kDouble);
}

// ---------------------------------------------------------------- conv2d

TEST(Layers, Conv2dSameMatchesExplicitPadding) {
  at::manual_seed(2);
  struct Case {
    int64_t h, w, k, s, d, groups;
  };
  for (Case c : {Case{8, 8, 3, 1, 1, 1}, Case{8, 8, 5, 1, 1, 1}, Case{9, 7, 3, 2, 1, 1}, Case{8, 8, 3, 2, 1, 2},
                 Case{10, 9, 5, 3, 1, 1}, Case{8, 8, 3, 1, 2, 1}, Case{7, 6, 4, 2, 1, 1}, Case{6, 6, 1, 2, 1, 2}}) {
    SCOPED_TRACE("h " + std::to_string(c.h) + " w " + std::to_string(c.w) + " k " + std::to_string(c.k) + " s " +
                 std::to_string(c.s) + " d " + std::to_string(c.d) + " groups " + std::to_string(c.groups));
    Fixture f;
    L::LayerOptions o;
    o.kernel = {c.k, c.k};
    o.stride = {c.s, c.s};
    o.dilation = {c.d, c.d};
    o.groups = c.groups;
    at::Tensor x = at::randn({2, 4, c.h, c.w});
    L::conv2d(f.builder, "conv", x, 6, o);
    f.set("conv/b", at::randn({6}));
    Tower t = f.first();
    at::Tensor y = L::conv2d(t, "conv", x, 6, o);
    at::Tensor want = at::conv2d(tf_same_pad(x, c.k, c.k, c.s, c.s, c.d, c.d), f.var("conv/W"), f.var("conv/b"),
                                 {c.s, c.s}, std::vector<int64_t>{0, 0}, {c.d, c.d}, c.groups);
    EXPECT_EQ(y.size(2), (c.h + c.s - 1) / c.s);
    EXPECT_EQ(y.size(3), (c.w + c.s - 1) / c.s);
    EXPECT_TRUE(close(y, want));
    if (c.k % 2 == 1 && c.s == 1) {  // odd kernels at stride 1: PyTorch's symmetric padding
      int64_t p = (c.k - 1) / 2 * c.d;
      EXPECT_TRUE(close(y, at::conv2d(x, f.var("conv/W"), f.var("conv/b"), 1, p, c.d, c.groups)));
    }
    // VALID: no padding
    Fixture g;
    o.padding = TPT_PADDING_VALID;
    at::Tensor v = L::conv2d(g.builder, "conv", x, 6, o);
    EXPECT_TRUE(close(v, at::conv2d(x, g.var("conv/W"), g.var("conv/b"), {c.s, c.s}, std::vector<int64_t>{0, 0}, {c.d, c.d}, c.groups)));
  }
}

// The fast layout: forced channels-last, conv2d computes NHWC and gives
// NCHW's numbers (forward, the input's and the weight's gradients) within
// float32 rounding, for every number of input channels: with one channel
// (a first layer's images) a tensor is "contiguous" in both formats, and
// the convolution once ran NCHW there, so that every layer after it paid a
// copy between the formats. The output is channels-last by the strides
// LibTorch's kernels read (suggest_memory_format), and a max pool after it
// stays so. Forced NCHW stays NCHW.
TEST(Layers, ChannelsLastEqualsNchw) {
  L::LayerOptions o;
  o.kernel = {3, 3};
  for (int64_t channels : {1, 4}) {
    SCOPED_TRACE("input channels " + std::to_string(channels));
    auto run = [&](int mode) {
      L::force_channels_last(mode);
      Fixture f;
      at::manual_seed(5);
      at::Tensor x = at::randn({2, channels, 7, 6}).requires_grad_(true);
      L::conv2d(f.builder, "c", x, 5, o);
      Tower t = f.first();
      at::Tensor y = L::conv2d(t, "c", x, 5, o);
      at::Tensor pooled = L::max_pool(y, 2, 2, TPT_PADDING_SAME);
      (y.mul(y).sum() + pooled.sum()).backward();
      return std::make_tuple(y.detach(), pooled.detach(), x.grad(), f.var("c/W").grad().clone());
    };
    auto [nhwc, pool_nhwc, gx_nhwc, gw_nhwc] = run(1);
    auto [nchw, pool_nchw, gx_nchw, gw_nchw] = run(0);
    L::force_channels_last(-1);
    EXPECT_EQ(nhwc.suggest_memory_format(), at::MemoryFormat::ChannelsLast);
    EXPECT_EQ(pool_nhwc.suggest_memory_format(), at::MemoryFormat::ChannelsLast);
    EXPECT_FALSE(nhwc.is_contiguous());
    EXPECT_TRUE(nchw.is_contiguous());
    EXPECT_TRUE(close(nhwc, nchw));
    EXPECT_TRUE(close(pool_nhwc, pool_nchw));
    EXPECT_TRUE(close(gx_nhwc, gx_nchw));
    EXPECT_TRUE(close(gw_nhwc, gw_nchw));
    EXPECT_GT(nchw.abs().sum().item<double>(), 1.0);  // not on zeros
    EXPECT_GT(gw_nchw.abs().sum().item<double>(), 1.0);
  }
}

TEST(Layers, Conv2dTransposeIsTheAdjointOfSameConv2d) {
  at::manual_seed(3);
  struct Case {
    int64_t in, k, s, d;
  };
  for (Case c : {Case{3, 3, 2, 1}, Case{4, 4, 2, 1}, Case{3, 2, 2, 1}, Case{3, 1, 2, 1}, Case{5, 3, 1, 1},
                 Case{3, 5, 4, 1}, Case{4, 3, 3, 2}, Case{2, 5, 2, 1}}) {
    SCOPED_TRACE("in " + std::to_string(c.in) + " k " + std::to_string(c.k) + " s " + std::to_string(c.s) + " d " +
                 std::to_string(c.d));
    Fixture f;
    L::LayerOptions o;
    o.kernel = {c.k, c.k};
    o.stride = {c.s, c.s};
    o.dilation = {c.d, c.d};
    o.use_bias = false;
    const int64_t C = 3, F = 2;
    at::Tensor x = at::randn({2, C, c.in, c.in});
    at::Tensor up = L::conv2d_transpose(f.builder, "up", x, F, o);
    ASSERT_EQ(up.sizes(), (std::vector<int64_t>{2, F, c.in * c.s, c.in * c.s}));
    // conv2d SAME maps [N, F, in * s, in * s] to [N, C, in, in] with the same weight
    at::Tensor z = at::randn({2, F, c.in * c.s, c.in * c.s});
    at::Tensor down = L::conv2d(f.builder, "down", z, C, o);
    ASSERT_EQ(down.sizes(), x.sizes());
    f.set("down/W", f.var("up/W"));
    Tower t = f.first();
    up = L::conv2d_transpose(t, "up", x, F, o);
    down = L::conv2d(t, "down", z, C, o);
    double lhs = (down * x).sum().item<double>(), rhs = (z * up).sum().item<double>();
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::abs(lhs)));
    // VALID: the full transposed convolution (TensorFlow's in * s + max(k_eff - s, 0))
    Fixture g;
    o.padding = TPT_PADDING_VALID;
    at::Tensor v = L::conv2d_transpose(g.builder, "up", x, F, o);
    int64_t k_eff = (c.k - 1) * c.d + 1;
    EXPECT_EQ(v.size(2), c.in * c.s + std::max<int64_t>(k_eff - c.s, 0));
    if (k_eff >= c.s) {
      EXPECT_TRUE(close(v, at::conv_transpose2d(x, g.var("up/W"), {}, c.s, 0, 0, 1, c.d)));
    }
  }
}

// ---------------------------------------------------------------- pooling

TEST(Layers, PoolingMatchesNaiveLoops) {
  at::manual_seed(4);
  for (int64_t size : {5, 6, 7, 8})
    for (int64_t k : {1, 2, 3, 4})
      for (int64_t s : {1, 2, 3}) {
        SCOPED_TRACE("size " + std::to_string(size) + " k " + std::to_string(k) + " s " + std::to_string(s));
        at::Tensor x = at::randn({2, 3, size, size + 1});
        for (bool is_max : {true, false}) {
          at::Tensor same = is_max ? L::max_pool(x, k, s, TPT_PADDING_SAME) : L::avg_pool(x, k, s, TPT_PADDING_SAME);
          EXPECT_TRUE(close(same, naive_pool(x, k, s, true, is_max))) << (is_max ? "max" : "avg") << " SAME";
          at::Tensor valid = is_max ? L::max_pool(x, k, s, TPT_PADDING_VALID) : L::avg_pool(x, k, s, TPT_PADDING_VALID);
          EXPECT_TRUE(close(valid, naive_pool(x, k, s, false, is_max))) << (is_max ? "max" : "avg") << " VALID";
        }
      }
  // and gradients flow through the asymmetric average
  at::Tensor x = at::randn({1, 1, 4, 4}).requires_grad_(true);
  L::avg_pool(x, 3, 2, TPT_PADDING_SAME).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_NEAR(x.grad()[0][0][3][3].item<double>(), 1.0 / 4 + 0, 1e-6);  // only in the last window (2x2 inside)
  at::Tensor g = at::randn({2, 3, 5, 4});
  EXPECT_TRUE(close(L::global_avg_pool(g), g.mean({2, 3})));
}

// ---------------------------------------------------------------- batch norm

TEST(Layers, BatchNormPerTower) {
  at::manual_seed(5);
  Fixture f;
  at::Tensor x = at::randn({6, 3, 4, 4}) * 2 + 1;
  L::batch_norm(f.builder, "bn", x, 0.9, 1e-5);
  // the build call: no update
  EXPECT_TRUE(f.var("bn/mean/EMA").equal(at::zeros({3})));
  EXPECT_TRUE(f.var("bn/variance/EMA").equal(at::ones({3})));
  EXPECT_TRUE(f.var("bn/gamma").requires_grad());
  EXPECT_FALSE(f.var("bn/mean/EMA").requires_grad());
  f.set("bn/gamma", at::randn({3}));
  f.set("bn/beta", at::randn({3}));
  at::Tensor gamma = f.var("bn/gamma").detach().clone(), beta = f.var("bn/beta").detach().clone();

  // the first training tower: batch statistics, and the moving averages move as PyTorch's (momentum 0.1)
  at::Tensor rm = at::zeros({3}), rv = at::ones({3});
  Tower t0 = f.first();
  at::Tensor y = L::batch_norm(t0, "bn", x, 0.9, 1e-5);
  at::Tensor want = at::batch_norm(x, gamma, beta, rm, rv, true, 0.1, 1e-5, true);
  EXPECT_TRUE(close(y, want));
  EXPECT_TRUE(close(f.var("bn/mean/EMA"), rm, 1e-6, 1e-7));
  EXPECT_TRUE(close(f.var("bn/variance/EMA"), rv, 1e-6, 1e-7));
  // the textbook formula
  at::Tensor mean = x.mean({0, 2, 3}), var = x.var({0, 2, 3}, /*unbiased=*/false);
  at::Tensor formula = (x - mean.view({1, 3, 1, 1})) / at::sqrt(var.view({1, 3, 1, 1}) + 1e-5) *
                           gamma.view({1, 3, 1, 1}) + beta.view({1, 3, 1, 1});
  EXPECT_TRUE(close(y, formula, 1e-4, 1e-5));
  EXPECT_TRUE(close(f.var("bn/mean/EMA"), mean * 0.1, 1e-5, 1e-6));
  EXPECT_TRUE(close(f.var("bn/variance/EMA"), 0.9 + 0.1 * x.var({0, 2, 3}, /*unbiased=*/true), 1e-5, 1e-6));
  at::Tensor ema_mean = f.var("bn/mean/EMA").clone(), ema_var = f.var("bn/variance/EMA").clone();

  // another training tower: batch statistics, no update
  at::Tensor x2 = at::randn({5, 3, 4, 4});
  Tower t1 = f.second();
  at::Tensor y1 = L::batch_norm(t1, "bn", x2, 0.9, 1e-5);
  EXPECT_TRUE(close(y1, at::batch_norm(x2, gamma, beta, {}, {}, true, 0.1, 1e-5, true)));
  EXPECT_TRUE(f.var("bn/mean/EMA").equal(ema_mean));
  EXPECT_TRUE(f.var("bn/variance/EMA").equal(ema_var));

  // the build call again (another model's build would look the same): no update
  Tower b(f.model, "tower0", 0, true, true, kCpu);
  L::batch_norm(b, "bn", x2, 0.9, 1e-5);
  EXPECT_TRUE(f.var("bn/mean/EMA").equal(ema_mean));

  // inference: the moving averages, unchanged
  Tower inf = f.inference();
  at::Tensor yi = L::batch_norm(inf, "bn", x2, 0.9, 1e-5);
  EXPECT_TRUE(close(yi, at::batch_norm(x2, gamma, beta, ema_mean, ema_var, false, 0.1, 1e-5, true)));
  EXPECT_TRUE(f.var("bn/mean/EMA").equal(ema_mean));
  EXPECT_TRUE(f.var("bn/variance/EMA").equal(ema_var));

  // [N, C] and gradients to gamma and beta
  Fixture g;
  at::Tensor v = at::randn({8, 5});
  L::batch_norm(g.builder, "bn", v);
  Tower gt = g.first();
  L::batch_norm(gt, "bn", v).pow(2).mul(at::randn({8, 5})).sum().backward();
  EXPECT_TRUE(g.var("bn/gamma").grad().defined());
  EXPECT_TRUE(g.var("bn/beta").grad().defined());
  EXPECT_FALSE(g.var("bn/mean/EMA").grad().defined());
  // one value per channel cannot be trained on
  Tower gt2 = g.first();
  EXPECT_NE(message_of([&] { L::batch_norm(gt2, "bn", at::randn({1, 5})); }).find("more than one value per channel"),
            std::string::npos);
}

TEST(Layers, LayerNormAndDropout) {
  at::manual_seed(6);
  Fixture f;
  at::Tensor x = at::randn({4, 3, 6});
  L::layer_norm(f.builder, "ln", x, 1e-5);
  f.set("ln/gamma", at::randn({6}));
  f.set("ln/beta", at::randn({6}));
  Tower t = f.first();
  at::Tensor y = L::layer_norm(t, "ln", x, 1e-5);
  at::Tensor mean = x.mean({-1}, true), var = x.var({-1}, false, true);
  EXPECT_TRUE(close(y, (x - mean) / at::sqrt(var + 1e-5) * f.var("ln/gamma") + f.var("ln/beta"), 1e-4, 1e-5));

  Tower inf = f.inference();
  EXPECT_TRUE(L::dropout(inf, x, 0.5).equal(x));
  EXPECT_TRUE(L::dropout(f.builder, x, 0.5).equal(x));
  Tower t2 = f.first();
  at::Tensor big = at::ones({10000});
  at::Tensor d = L::dropout(t2, big, 0.25);
  double kept = d.ne(0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 0.75, 0.03);
  EXPECT_TRUE(close(d.masked_select(d.ne(0)), at::ones({d.ne(0).sum().item<int64_t>()}) / 0.75));
}

// Dropout's CPU noise (a counter-based hash of one draw of the generator):
// every dtype, kept with probability 1 - rate within 5 sigma, kept elements
// scaled by 1 / (1 - rate), neighbours independent (the two halves of one
// hash, and across hashes), the same mask for the same generator state
// whatever the number of threads, a new mask each call, the tower's own
// generator when it has one, an odd count and a transposed input, and the
// gradient through the mask.
TEST(Layers, DropoutMaskOnTheCpu) {
  Fixture f;
  const int64_t n = 200001;  // odd: the last hash gives one element
  for (double rate : {0.1, 0.5, 0.75}) {
    const double keep = 1 - rate, sigma = std::sqrt(keep * (1 - keep) / n);
    for (c10::ScalarType dt : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}) {
      const std::string what = std::string(c10::toString(dt)) + " rate " + std::to_string(rate);
      Tower t = f.first();
      at::manual_seed(21);
      at::Tensor d = L::dropout(t, at::ones({n}, at::TensorOptions().dtype(dt)), rate).to(at::kDouble);
      at::Tensor kept = d.ne(0);
      const double frac = kept.to(at::kDouble).mean().item<double>();
      EXPECT_NEAR(frac, keep, 5 * sigma) << what;
      const double scale = dt == at::kDouble ? 1 / keep : static_cast<double>(1.0f / static_cast<float>(keep));
      EXPECT_TRUE(d.masked_select(kept).sub(scale).abs().max().item<double>() <= 1e-2 * scale) << what;
      // pairs from one hash (2k, 2k + 1) and across hashes (2k + 1, 2k + 2)
      at::Tensor k = kept.to(at::kDouble);
      const double same = (k.slice(0, 0, n - 1, 2) * k.slice(0, 1, n, 2)).mean().item<double>();
      const double across = (k.slice(0, 1, n - 1, 2) * k.slice(0, 2, n, 2)).mean().item<double>();
      const double pair_sigma = std::sqrt(keep * keep * (1 - keep * keep) / (n / 2));
      EXPECT_NEAR(same, keep * keep, 5 * pair_sigma) << what;
      EXPECT_NEAR(across, keep * keep, 5 * pair_sigma) << what;
      // the same generator state gives the same mask, on one thread as on several
      const int threads = at::get_num_threads();
      at::set_num_threads(1);
      at::manual_seed(21);
      at::Tensor one = L::dropout(t, at::ones({n}, at::TensorOptions().dtype(dt)), rate).to(at::kDouble);
      at::set_num_threads(threads);
      EXPECT_TRUE(one.equal(d)) << what;
      // the next call draws a new mask
      at::Tensor next = L::dropout(t, at::ones({n}, at::TensorOptions().dtype(dt)), rate).to(at::kDouble);
      EXPECT_FALSE(next.equal(d)) << what;
      EXPECT_NEAR(next.ne(0).to(at::kDouble).mean().item<double>(), keep, 5 * sigma) << what;
    }
  }
  // A tower with a generator of its own draws from it, not from LibTorch's default.
  Tower own = f.first();
  own.set_generator(at::detail::createCPUGenerator(5));
  at::manual_seed(1);
  at::Tensor a = L::dropout(own, at::ones({1000}), 0.5);
  at::manual_seed(2);
  Tower own2 = f.first();
  own2.set_generator(at::detail::createCPUGenerator(5));
  EXPECT_TRUE(L::dropout(own2, at::ones({1000}), 0.5).equal(a));
  // a transposed (non-contiguous) input keeps its shape; the gradient is the noise
  at::manual_seed(3);
  at::Tensor x = at::randn({64, 48}).t().requires_grad_();
  Tower t = f.first();
  at::Tensor y = L::dropout(t, x, 0.5);
  EXPECT_EQ(y.sizes(), x.sizes());
  y.sum().backward();
  at::Tensor noise = x.grad();
  EXPECT_TRUE(noise.eq(0).logical_or(noise.eq(2)).all().item<bool>());
  EXPECT_TRUE(close(y, x.detach() * noise));
}

// ---------------------------------------------------------------- losses and metrics

TEST(Layers, LossesMatchAten) {
  at::manual_seed(7);
  at::Tensor logits = at::randn({9, 5}), labels = at::randint(0, 5, {9}, at::kLong);
  at::Tensor nll = -at::log_softmax(logits, 1).gather(1, labels.unsqueeze(1)).mean();
  EXPECT_TRUE(close(L::softmax_cross_entropy(logits, labels), nll));
  at::Tensor z = at::randn({4, 3}), t = at::rand({4, 3});
  at::Tensor bce = -(t * at::log_sigmoid(z) + (1 - t) * at::log_sigmoid(-z)).mean();
  EXPECT_TRUE(close(L::sigmoid_cross_entropy(z, t), bce));
  at::Tensor p = at::randn({3, 4}), q = at::randn({3, 4});
  EXPECT_TRUE(close(L::mse(p, q), (p - q).pow(2).mean()));
  EXPECT_TRUE(close(L::l1(p, q), (p - q).abs().mean()));
  EXPECT_TRUE(close(L::mse(p, q.to(at::kDouble)), (p - q).pow(2).mean()));  // the target takes the prediction's dtype
}

TEST(Layers, MetricsMatchTopk) {
  at::manual_seed(8);
  at::Tensor logits = at::randn({50, 7}), labels = at::randint(0, 7, {50}, at::kLong);
  for (int64_t k : {1, 2, 3, 7, 9}) {
    at::Tensor top = std::get<1>(at::topk(logits, std::min<int64_t>(k, 7), 1));
    at::Tensor want = top.eq(labels.unsqueeze(1)).any(1).logical_not().to(at::kFloat);
    EXPECT_TRUE(L::wrong(logits, labels, k).equal(want)) << "k " << k;
  }
  at::Tensor acc = logits.argmax(1).eq(labels).to(at::kFloat).mean();
  EXPECT_TRUE(close(L::accuracy(logits, labels), acc));
  EXPECT_TRUE(close(L::accuracy(logits, labels), 1 - L::wrong(logits, labels, 1).mean()));
  // labels outside [0, K) are wrong, not an error
  at::Tensor odd = labels.clone();
  odd[0] = 7;
  odd[1] = -1;
  at::Tensor w = L::wrong(logits, odd, 7);
  EXPECT_EQ(w[0].item<float>(), 1);
  EXPECT_EQ(w[1].item<float>(), 1);
  EXPECT_EQ(w.sum().item<float>(), 2);
}

// ---------------------------------------------------------------- regularisation

TEST(Layers, RegularizeL2FromAnyTower) {
  at::manual_seed(9);
  Fixture f;
  at::Tensor x = at::randn({4, 3, 5, 5});
  at::Tensor h = L::conv2d(f.builder, "conv", x, 2);
  h = L::batch_norm(f.builder, "bn", h);
  L::fc(f.builder, "fc", h, 4);
  at::Tensor cw = f.var("conv/W"), fw = f.var("fc/W");
  at::Tensor want = (cw.pow(2).sum() + fw.pow(2).sum()) * 0.25;
  // a second training tower, the inference tower: the same tensors
  Tower t1 = f.second();
  at::Tensor r = L::regularize_l2(t1, "/W$", 0.25);
  EXPECT_EQ(r.dim(), 0);
  EXPECT_TRUE(close(r, want));
  r.backward();
  EXPECT_TRUE(close(cw.grad(), cw.detach() * 0.5));
  EXPECT_TRUE(close(fw.grad(), fw.detach() * 0.5));
  EXPECT_FALSE(f.var("conv/b").grad().defined());
  {
    at::NoGradGuard no_grad;
    Tower inf = f.inference();
    EXPECT_TRUE(close(L::regularize_l2(inf, "W", 0.25), want));
  }
  // model-only variables are never included
  Tower t2 = f.second();
  at::Tensor all = L::regularize_l2(t2, "", 1);
  double sum = 0;
  for (const auto &v : f.model.variables().all())
    if (v.trainable) sum += v.value.pow(2).sum().item<double>();
  EXPECT_NEAR(all.item<double>(), sum, 1e-4 * sum);
  EXPECT_EQ(L::regularize_l2(t2, "^none$", 1).item<double>(), 0);
}

// ---------------------------------------------------------------- errors and scopes

TEST(Layers, ErrorsNameTheLayerAndTheScopeIsPopped) {
  Fixture f;
  EXPECT_EQ(message_of([&] { L::conv2d(f.builder, "conv1", at::randn({3, 4}), 2); }),
            "conv2d 'conv1': x must be [N, C, H, W], got [3, 4]");
  EXPECT_EQ(message_of([&] { L::max_pool(at::randn({1, 1, 2, 2}), 3, 1, TPT_PADDING_VALID); }),
            "max_pool: with VALID padding the input [1, 1, 2, 2] is smaller than the kernel 3x3");
  EXPECT_EQ(message_of([&] { L::fc(f.builder, "fc", at::randn({2, 3}), 0); }), "fc 'fc': units must be >= 1, got 0");
  L::LayerOptions o;
  o.stride = {1, 0};
  EXPECT_EQ(message_of([&] { L::conv2d(f.builder, "c", at::randn({1, 1, 3, 3}), 2, o); }),
            "conv2d 'c': stride[1] must be >= 1, got 0");
  EXPECT_EQ(message_of([&] { L::softmax_cross_entropy(at::randn({2, 3}), at::zeros({2}, at::kInt)); }),
            "softmax_cross_entropy: labels must be i64 class indices, got i32 [2]");
  // a failure inside the layer's scope (the name used twice) pops it
  at::Tensor x = at::randn({2, 3});
  L::fc(f.builder, "fc", x, 2);
  EXPECT_NE(message_of([&] { L::fc(f.builder, "fc", x, 2); }).find("used twice"), std::string::npos);
  EXPECT_EQ(f.builder.scoped("v"), "v");
  // a reused layer with another input width
  Tower t = f.first();
  EXPECT_NE(message_of([&] { L::fc(t, "fc", at::randn({2, 4}), 2); }).find("exists with shape [2, 3]"),
            std::string::npos);
  EXPECT_EQ(t.scoped("v"), "v");
}
