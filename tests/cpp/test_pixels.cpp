// The input pipeline's one-pass pixel loop (tpt::data::float_pixels, behind
// the Mnist dataflow, NORMALIZE and TO_FLOAT) against the ATen operators it
// replaces, bit for bit, on this LibTorch: every uint8 value and float32
// values of every kind (signed zeros, subnormals, infinities, NaN, large and
// small), one channel and per channel; and the tensors it leaves to ATen.
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/tensor.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "data/dataflow.hpp"

namespace {

using tpt::data::float_pixels;
using tpt::data::PixelOp;

// The operators the augmentor ran before: the means and standard deviations
// as double tensors ([C, 1, 1] for several channels) cast to the image's
// float32, then sub and div (or mul).
at::Tensor aten_reference(const at::Tensor &x, PixelOp op, const std::vector<double> &shift,
                          const std::vector<double> &operand) {
  const auto c = static_cast<int64_t>(shift.size());
  std::vector<int64_t> shape = c > 1 ? std::vector<int64_t>{c, 1, 1} : std::vector<int64_t>{};
  auto as = [&](const std::vector<double> &v) {
    return at::tensor(v, at::TensorOptions().dtype(at::kDouble)).reshape(shape).to(at::kFloat);
  };
  at::Tensor f = x.to(at::kFloat);
  if (op == PixelOp::Multiply) return f.mul(as(operand));
  return f.sub(as(shift)).div(as(operand));
}

std::vector<float> to_floats(const std::vector<double> &v) { return {v.begin(), v.end()}; }

// Bit for bit; NaN against NaN (any payload: both come from the hardware).
void expect_same_bits(const at::Tensor &got, const at::Tensor &want, const std::string &what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.scalar_type(), at::kFloat) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_TRUE(got.is_contiguous()) << what;
  at::Tensor w = want.contiguous();
  const float *g = got.data_ptr<float>(), *r = w.data_ptr<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    uint32_t gb, rb;
    std::memcpy(&gb, g + i, 4);
    std::memcpy(&rb, r + i, 4);
    if (gb != rb && !(std::isnan(g[i]) && std::isnan(r[i]))) {
      if (++bad <= 5) ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", ATen gives " << r[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// Every uint8 value in each channel: [C, 1, 259] (not a multiple of the
// vector loop's 8: its scalar tail runs too).
at::Tensor all_bytes(int64_t channels) {
  at::Tensor one = at::arange(259, at::TensorOptions().dtype(at::kInt)).remainder(256).to(at::kByte).reshape({1, 1, 259});
  std::vector<at::Tensor> planes(static_cast<size_t>(channels), one);
  return at::cat(planes, 0);
}

// Random floats over many magnitudes and the special values, [C, 41, 49].
at::Tensor odd_floats(int64_t channels) {
  at::Tensor x = at::randn({channels, 41, 49}) * at::randn({channels, 41, 49}).mul(8).exp2();
  float *p = x.data_ptr<float>();
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -1e-40f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::lowest(), 1e-30f, 255.0f, 127.5f};
  for (size_t i = 0; i < sizeof specials / sizeof *specials; ++i) p[i * 7] = specials[i];
  return x;
}

struct Case {
  std::vector<double> shift, operand;
};

TEST(FloatPixels, DivideEqualsAtenBitForBit) {
  const std::vector<Case> cases = {
      {{0}, {255}},                      // Mnist: x / 255
      {{127.5}, {127.5}},                // uint8 to [-1, 1]
      {{0.5}, {0.5}},                    // [0, 1] to [-1, 1] (the example)
      {{0.1307}, {0.3081}},              // MNIST's statistics
      {{1e-3}, {7.0}},
      {{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}},  // ImageNet's, per channel
      {{-3, 0, 1e6}, {1e-6, 3, 0.1}},
  };
  at::manual_seed(11);
  for (const Case &c : cases) {
    const auto channels = static_cast<int64_t>(c.shift.size());
    for (const at::Tensor &x : {all_bytes(channels), odd_floats(channels)}) {
      std::string what = std::string(x.scalar_type() == at::kByte ? "uint8" : "float32") + " (x - " +
                         std::to_string(c.shift[0]) + ") / " + std::to_string(c.operand[0]) + ", " +
                         std::to_string(channels) + " channel(s)";
      at::Tensor got = float_pixels(x, PixelOp::Divide, to_floats(c.shift), to_floats(c.operand));
      expect_same_bits(got, aten_reference(x, PixelOp::Divide, c.shift, c.operand), what);
      EXPECT_NE(got.data_ptr(), x.data_ptr()) << what << ": a new tensor, never the input";
    }
  }
  // Mnist's own line: x.to(kFloat).div_(255.0) of [28, 28]
  at::Tensor img = all_bytes(1).reshape({7, 37});
  expect_same_bits(float_pixels(img, PixelOp::Divide, {0.0f}, {255.0f}), img.to(at::kFloat).div_(255.0),
                   "Mnist's x / 255");
}

TEST(FloatPixels, MultiplyEqualsAtenBitForBit) {
  at::manual_seed(12);
  for (double scale : {1.0 / 255, 0.5, 3.0, 1e-3}) {
    for (const at::Tensor &x : {all_bytes(1), odd_floats(1)}) {
      std::string what = "x * " + std::to_string(scale);
      expect_same_bits(float_pixels(x, PixelOp::Multiply, {0.0f}, {static_cast<float>(scale)}),
                       aten_reference(x, PixelOp::Multiply, {0}, {scale}), what);
      // TO_FLOAT's own line: x.to(kFloat).mul(scale) with the double scale
      expect_same_bits(float_pixels(x, PixelOp::Multiply, {0.0f}, {static_cast<float>(scale)}),
                       x.to(at::kFloat).mul(scale), what + " (mul by a double)");
    }
  }
}

TEST(FloatPixels, LeavesOtherTensorsToAten) {
  const std::vector<float> one{0.0f}, two{0.5f, 0.5f};
  at::Tensor u8 = all_bytes(1);
  EXPECT_TRUE(float_pixels(u8, PixelOp::Divide, one, {255.0f}).defined());
  // not contiguous, another dtype, channels that do not match, no values
  EXPECT_FALSE(float_pixels(u8.reshape({7, 37}).t(), PixelOp::Divide, one, {255.0f}).defined());
  EXPECT_FALSE(float_pixels(u8.to(at::kDouble), PixelOp::Divide, one, {255.0f}).defined());
  EXPECT_FALSE(float_pixels(u8.to(at::kInt), PixelOp::Divide, one, {255.0f}).defined());
  EXPECT_FALSE(float_pixels(u8.to(at::kBFloat16), PixelOp::Divide, one, {255.0f}).defined());
  EXPECT_FALSE(float_pixels(u8, PixelOp::Divide, two, two).defined());  // 2 channels for 1
  EXPECT_FALSE(float_pixels(u8, PixelOp::Divide, {}, {}).defined());
  EXPECT_FALSE(float_pixels(u8, PixelOp::Divide, one, two).defined());
  EXPECT_FALSE(float_pixels(at::Tensor(), PixelOp::Divide, one, {255.0f}).defined());
  at::Tensor w = at::randn({4}).requires_grad_();
  EXPECT_FALSE(float_pixels(w, PixelOp::Divide, one, {2.0f}).defined());
  // a contiguous view into a larger tensor (a row of a dataset) is read from its offset
  at::Tensor rows = at::arange(3 * 10, at::TensorOptions().dtype(at::kByte)).reshape({3, 10});
  at::Tensor row = rows.select(0, 2);
  at::Tensor got = float_pixels(row, PixelOp::Divide, one, {1.0f});
  ASSERT_TRUE(got.defined());
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(got[i].item<float>(), static_cast<float>(20 + i));
  // empty images give empty results
  at::Tensor none = at::empty({0, 28, 28}, at::TensorOptions().dtype(at::kByte));
  at::Tensor e = float_pixels(none, PixelOp::Divide, one, {255.0f});
  ASSERT_TRUE(e.defined());
  EXPECT_EQ(e.numel(), 0);
}

}  // namespace
