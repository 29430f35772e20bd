// Tensor handles and the dtype mapping, checked against LibTorch directly.
#include <gtest/gtest.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/allclose.h>
#include <ATen/Context.h>

#include "model/dtype.hpp"
#include "capi/handles.hpp"

namespace {

TEST(Dtype, RoundTripsEveryTptDtype) {
  for (int d = TPT_DTYPE_F32; d <= TPT_DTYPE_BOOL; ++d) {
    auto st = tpt::scalar_type_of(static_cast<tpt_dtype>(d));
    ASSERT_TRUE(st.has_value()) << d;
    EXPECT_EQ(tpt::dtype_of(*st), d);
    EXPECT_EQ(tpt_dtype_size(static_cast<tpt_dtype>(d)), c10::elementSize(*st));
  }
  EXPECT_FALSE(tpt::scalar_type_of(static_cast<tpt_dtype>(0)).has_value());
}

TEST(Dtype, UnnamedLibTorchTypeIsUnsupported) {
  EXPECT_THROW(
      {
        try {
          tpt::dtype_of(c10::ScalarType::ComplexFloat);
        } catch (const tpt::Error &e) {
          EXPECT_EQ(e.code(), TPT_ERR_UNSUPPORTED);
          throw;
        }
      },
      tpt::Error);
}

TEST(TensorHandle, MatmulMatchesLibTorch) {
  at::Tensor a = at::randn({3, 4});
  at::Tensor b = at::randn({4, 2});
  tpt_tensor ha(a), hb(b);
  tpt_tensor *out = nullptr;
  ASSERT_EQ(tpt_tensor_matmul(&out, &ha, &hb), nullptr);
  EXPECT_TRUE(at::allclose(out->value, at::matmul(a, b)));
  tpt_tensor_free(out);
}

TEST(TensorHandle, ForeignPointerIsRejected) {
  struct {
    uint64_t magic = 1;
  } not_a_tensor;
  int64_t n = 0;
  tpt_status *s = tpt_tensor_numel(&n, reinterpret_cast<const tpt_tensor *>(&not_a_tensor));
  EXPECT_EQ(tpt_status_code(s), TPT_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(tpt_status_message(s), "tpt_tensor_numel: argument 'tensor' is not a live tpt_tensor");
  tpt_status_free(s);
}

TEST(TensorHandle, NonContiguousCopyOut) {
  at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3}).t();  // non-contiguous view
  tpt_tensor h(t);
  float buf[6];
  ASSERT_EQ(tpt_tensor_copy_to(buf, sizeof buf, &h), nullptr);
  const float want[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(buf[i], want[i]);
}

// tpt_set_determinism and tpt_set_float32_precision set LibTorch's own flags
// (the ones torch.use_deterministic_algorithms and torch.backends.* set), and
// DEFAULT gives LibTorch's defaults back.
TEST(Runtime, DeterminismAndPrecisionReachLibTorch) {
  at::Context &ctx = at::globalContext();
  ASSERT_EQ(tpt_set_determinism(TPT_DETERMINISM_ON), nullptr);
  EXPECT_TRUE(ctx.deterministicAlgorithms());
  EXPECT_FALSE(ctx.deterministicAlgorithmsWarnOnly());
  EXPECT_TRUE(ctx.deterministicCuDNN());
  EXPECT_FALSE(ctx.benchmarkCuDNN());
  EXPECT_THROW(at::globalContext().alertNotDeterministic("an operator"), c10::Error);
  ASSERT_EQ(tpt_set_determinism(TPT_DETERMINISM_WARN), nullptr);
  EXPECT_TRUE(ctx.deterministicAlgorithms());
  EXPECT_TRUE(ctx.deterministicAlgorithmsWarnOnly());
  EXPECT_TRUE(ctx.deterministicCuDNN());
  ASSERT_EQ(tpt_set_determinism(TPT_DETERMINISM_DEFAULT), nullptr);
  EXPECT_FALSE(ctx.deterministicAlgorithms());
  EXPECT_FALSE(ctx.deterministicCuDNN());
  EXPECT_NO_THROW(at::globalContext().alertNotDeterministic("an operator"));

  const bool cudnn_default = ctx.allowTF32CuDNN();  // true in LibTorch
  const bool cublas_default = ctx.allowTF32CuBLAS();  // false since LibTorch 1.12
  ASSERT_EQ(tpt_set_float32_precision(TPT_FLOAT32_IEEE), nullptr);
  EXPECT_FALSE(ctx.allowTF32CuBLAS());
  EXPECT_FALSE(ctx.allowTF32CuDNN());
  EXPECT_EQ(ctx.float32MatmulPrecision(), at::Float32MatmulPrecision::HIGHEST);
  ASSERT_EQ(tpt_set_float32_precision(TPT_FLOAT32_TF32), nullptr);
  EXPECT_TRUE(ctx.allowTF32CuBLAS());
  EXPECT_TRUE(ctx.allowTF32CuDNN());
  EXPECT_EQ(ctx.float32MatmulPrecision(), at::Float32MatmulPrecision::HIGH);
  ASSERT_EQ(tpt_set_float32_precision(TPT_FLOAT32_DEFAULT), nullptr);
  EXPECT_EQ(ctx.allowTF32CuBLAS(), cublas_default);
  EXPECT_EQ(ctx.allowTF32CuDNN(), cudnn_default);
  EXPECT_TRUE(cudnn_default);
  EXPECT_FALSE(cublas_default);
}

}  // namespace
