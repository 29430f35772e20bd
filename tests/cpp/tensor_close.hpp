// Tensors equal within tolerances, as a gtest assertion that says how they
// differ (no result, the shape, or the largest difference).
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <gtest/gtest.h>

namespace tpt_test {

inline ::testing::AssertionResult close(const at::Tensor &got, const at::Tensor &want, double rtol = 1e-5,
                                        double atol = 1e-6) {
  if (!got.defined()) return ::testing::AssertionFailure() << "no result";
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "shape " << got.sizes() << ", want " << want.sizes();
  if (!at::allclose(got, want, rtol, atol))
    return ::testing::AssertionFailure() << "values differ by up to " << (got - want).abs().max().item<double>();
  return ::testing::AssertionSuccess();
}

}  // namespace tpt_test
