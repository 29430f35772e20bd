// tpt_op_call against direct ATen calls, the overload choices of
// tpt::ops::resolve, and a randomized run of argument combinations that must
// never crash.
#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/div.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/std.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/transpose.h>
#include <ATen/ops/where.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <torch/library.h>

#include "capi/handles.hpp"
#include "model/ops.hpp"

namespace {

// Operators whose results tpt_op_call cannot hand out (a list of ints, a
// string): LibTorch 2.x's aten has none usable on the CPU, so the test
// registers its own.
std::vector<int64_t> sizes_of(const at::Tensor &t) { return t.sizes().vec(); }
std::string name_of(const at::Tensor &t) { return t.toString(); }
TORCH_LIBRARY(tpt_test, m) {
  m.def("sizes_of(Tensor self) -> int[]", &sizes_of);
  m.def("name_of(Tensor self) -> str", &name_of);
}

// Owns the handles a test passes to tpt_op_call.
struct Handles {
  std::vector<std::unique_ptr<tpt_tensor>> owned;
  const tpt_tensor *operator()(const at::Tensor &t) {
    owned.push_back(std::make_unique<tpt_tensor>(t));
    return owned.back().get();
  }
};

tpt_arg targ(const tpt_tensor *t) { return tpt_arg{TPT_ARG_TENSOR, nullptr, t, 0, 0.0, nullptr, 0}; }
tpt_arg iarg(int64_t v) { return tpt_arg{TPT_ARG_INT, nullptr, nullptr, v, 0.0, nullptr, 0}; }
tpt_arg darg(double v) { return tpt_arg{TPT_ARG_DOUBLE, nullptr, nullptr, 0, v, nullptr, 0}; }
tpt_arg barg(bool v) { return tpt_arg{TPT_ARG_BOOL, nullptr, nullptr, v ? 1 : 0, 0.0, nullptr, 0}; }
tpt_arg sarg(const char *s) { return tpt_arg{TPT_ARG_STRING, nullptr, nullptr, 0, 0.0, s, 0}; }
tpt_arg ilarg(const std::vector<int64_t> &v) {
  return tpt_arg{TPT_ARG_INT_LIST, nullptr, nullptr, 0, 0.0, v.data(), v.size()};
}
tpt_arg tlarg(const std::vector<const tpt_tensor *> &v) {
  return tpt_arg{TPT_ARG_TENSOR_LIST, nullptr, nullptr, 0, 0.0, v.data(), v.size()};
}
tpt_arg kw(const char *name, tpt_arg a) {
  a.name = name;
  return a;
}

// Calls through the C ABI; returns the outputs (an empty vector and a test
// failure on error).
std::vector<at::Tensor> call(const char *op, std::vector<tpt_arg> args, const char *overload = nullptr) {
  tpt_tensor *out[8] = {};
  size_t n = 0;
  tpt_status *st = tpt_op_call(out, 8, &n, op, overload, args.data(), args.size());
  if (st) {
    ADD_FAILURE() << op << ": " << tpt_status_message(st);
    tpt_status_free(st);
    return {};
  }
  std::vector<at::Tensor> r;
  for (size_t i = 0; i < n; ++i) {
    r.push_back(out[i]->value);
    tpt_tensor_free(out[i]);
  }
  return r;
}

::testing::AssertionResult same(const at::Tensor &got, const at::Tensor &want) {
  if (!got.defined()) return ::testing::AssertionFailure() << "no result";
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "shape " << got.sizes() << ", want " << want.sizes();
  if (got.scalar_type() != want.scalar_type())
    return ::testing::AssertionFailure() << "dtype " << got.scalar_type() << ", want " << want.scalar_type();
  if (got.is_floating_point() ? !at::allclose(got, want, 1e-6, 1e-7, /*equal_nan=*/true)
                              : !got.equal(want))
    return ::testing::AssertionFailure() << "values differ:\n" << got << "\nwant\n" << want;
  return ::testing::AssertionSuccess();
}

#define EXPECT_SAME(op, args, want)              \
  do {                                           \
    auto r_ = call(op, args);                    \
    ASSERT_EQ(r_.size(), 1u) << op;              \
    EXPECT_TRUE(same(r_[0], (want))) << op;      \
  } while (0)

// ---------------------------------------------------------------- against ATen

TEST(OpsVsAten, ElementwiseAndLinearAlgebraOnRandomInputs) {
  at::manual_seed(20240611);
  Handles h;
  at::Tensor a = at::randn({3, 4}), b = at::randn({3, 4}), m = at::randn({4, 5});
  at::Tensor sq = at::randn({4, 4}), bat = at::randn({2, 3, 4}), bat2 = at::randn({2, 4, 3});
  auto ta = targ(h(a)), tb = targ(h(b));

  EXPECT_SAME("aten::add", (std::vector<tpt_arg>{ta, tb}), at::add(a, b));
  EXPECT_SAME("aten::add", (std::vector<tpt_arg>{ta, tb, kw("alpha", darg(0.5))}), at::add(a, b, 0.5));
  EXPECT_SAME("aten::add", (std::vector<tpt_arg>{ta, darg(2.25)}), at::add(a, 2.25));
  EXPECT_SAME("aten::sub", (std::vector<tpt_arg>{ta, tb}), at::sub(a, b));
  EXPECT_SAME("aten::mul", (std::vector<tpt_arg>{ta, tb}), at::mul(a, b));
  EXPECT_SAME("aten::mul", (std::vector<tpt_arg>{ta, iarg(3)}), at::mul(a, 3));
  EXPECT_SAME("aten::div", (std::vector<tpt_arg>{ta, tb}), at::div(a, b));
  EXPECT_SAME("aten::div", (std::vector<tpt_arg>{ta, tb, kw("rounding_mode", sarg("trunc"))}),
              at::div(a, b, "trunc"));
  EXPECT_SAME("aten::matmul", (std::vector<tpt_arg>{ta, targ(h(m))}), at::matmul(a, m));
  EXPECT_SAME("aten::mm", (std::vector<tpt_arg>{ta, targ(h(m))}), at::mm(a, m));
  EXPECT_SAME("aten::bmm", (std::vector<tpt_arg>{targ(h(bat)), targ(h(bat2))}), at::bmm(bat, bat2));
  EXPECT_SAME("aten::addmm", (std::vector<tpt_arg>{targ(h(sq)), targ(h(sq)), targ(h(sq)), kw("beta", darg(0.5))}),
              at::addmm(sq, sq, sq, 0.5));
  EXPECT_SAME("aten::relu", (std::vector<tpt_arg>{ta}), at::relu(a));
  EXPECT_SAME("aten::sigmoid", (std::vector<tpt_arg>{ta}), at::sigmoid(a));
  EXPECT_SAME("aten::tanh", (std::vector<tpt_arg>{ta}), at::tanh(a));
  EXPECT_SAME("aten::gelu", (std::vector<tpt_arg>{ta}), at::gelu(a));
  EXPECT_SAME("aten::gelu", (std::vector<tpt_arg>{ta, kw("approximate", sarg("tanh"))}), at::gelu(a, "tanh"));
  EXPECT_SAME("aten::exp", (std::vector<tpt_arg>{ta}), at::exp(a));
  EXPECT_SAME("aten::softmax", (std::vector<tpt_arg>{ta, iarg(1)}), at::softmax(a, 1));
  EXPECT_SAME("aten::log_softmax", (std::vector<tpt_arg>{ta, iarg(0)}), at::log_softmax(a, 0));
  EXPECT_SAME("aten::leaky_relu", (std::vector<tpt_arg>{ta, darg(0.2)}), at::leaky_relu(a, 0.2));
  EXPECT_SAME("aten::pow", (std::vector<tpt_arg>{ta, iarg(3)}), at::pow(a, 3));
  EXPECT_SAME("aten::clamp", (std::vector<tpt_arg>{ta, darg(-0.5), darg(0.5)}), at::clamp(a, -0.5, 0.5));
}

TEST(OpsVsAten, ReductionsIndexingAndNnOnRandomInputs) {
  at::manual_seed(20240612);
  Handles h;
  at::Tensor a = at::randn({3, 4}), b = at::randn({3, 4}), m = at::randn({4, 5});
  at::Tensor img = at::randn({2, 3, 8, 8}), w = at::randn({5, 3, 3, 3}), bias = at::randn({5});
  auto ta = targ(h(a)), tb = targ(h(b));
  EXPECT_SAME("aten::sum", (std::vector<tpt_arg>{ta}), at::sum(a));
  EXPECT_SAME("aten::sum", (std::vector<tpt_arg>{ta, ilarg({1}), barg(true)}), at::sum(a, at::IntArrayRef{1}, true));
  EXPECT_SAME("aten::mean", (std::vector<tpt_arg>{ta, kw("dim", ilarg({0}))}), at::mean(a, at::IntArrayRef{0}));
  EXPECT_SAME("aten::std", (std::vector<tpt_arg>{ta, iarg(1)}), at::std(a, at::IntArrayRef{1}, true, false));
  EXPECT_SAME("aten::cumsum", (std::vector<tpt_arg>{ta, iarg(1)}), at::cumsum(a, 1));
  EXPECT_SAME("aten::transpose", (std::vector<tpt_arg>{ta, iarg(0), iarg(1)}), at::transpose(a, 0, 1));
  EXPECT_SAME("aten::cat", (std::vector<tpt_arg>{tlarg({h(a), h(b)}), iarg(1)}), at::cat({a, b}, 1));
  at::Tensor idx = at::randint(0, 3, {5}, at::TensorOptions().dtype(at::kLong));
  EXPECT_SAME("aten::index_select", (std::vector<tpt_arg>{ta, iarg(0), targ(h(idx))}), at::index_select(a, 0, idx));
  EXPECT_SAME("aten::index", (std::vector<tpt_arg>{ta, tlarg({h(idx)})}),
              at::index(a, c10::List<c10::optional<at::Tensor>>({idx})));
  EXPECT_SAME("aten::embedding", (std::vector<tpt_arg>{ta, targ(h(idx))}), at::embedding(a, idx));
  at::Tensor cond = at::randn({3, 4}).gt(0);
  EXPECT_SAME("aten::where", (std::vector<tpt_arg>{targ(h(cond)), ta, tb}), at::where(cond, a, b));
  EXPECT_SAME("aten::conv2d", (std::vector<tpt_arg>{targ(h(img)), targ(h(w)), targ(h(bias)), iarg(2), iarg(1)}),
              at::conv2d(img, w, bias, 2, 1));
  EXPECT_SAME("aten::conv2d", (std::vector<tpt_arg>{targ(h(img)), targ(h(w)), kw("padding", sarg("same"))}),
              at::conv2d(img, w, {}, 1, "same"));
  EXPECT_SAME("aten::max_pool2d", (std::vector<tpt_arg>{targ(h(img)), iarg(3), iarg(2), iarg(1)}),
              at::max_pool2d(img, 3, 2, 1));
  EXPECT_SAME("aten::avg_pool2d", (std::vector<tpt_arg>{targ(h(img)), ilarg({2, 4})}), at::avg_pool2d(img, {2, 4}));
  at::Tensor lw = at::randn({4}), lb = at::randn({4});
  EXPECT_SAME("aten::layer_norm", (std::vector<tpt_arg>{ta, ilarg({4}), targ(h(lw)), targ(h(lb))}),
              at::layer_norm(a, {4}, lw, lb));
  EXPECT_SAME("aten::linear", (std::vector<tpt_arg>{targ(h(m.t().contiguous())), targ(h(a))}),
              at::linear(m.t().contiguous(), a));
  at::Tensor target = at::randint(0, 4, {3}, at::TensorOptions().dtype(at::kLong));
  EXPECT_SAME("aten::cross_entropy_loss", (std::vector<tpt_arg>{ta, targ(h(target))}),
              at::cross_entropy_loss(a, target));
  EXPECT_SAME("aten::mse_loss", (std::vector<tpt_arg>{ta, tb}), at::mse_loss(a, b));

  // several outputs
  auto mx = call("aten::max", {ta, iarg(1)});
  auto want_mx = at::max(a, 1);
  ASSERT_EQ(mx.size(), 2u);
  EXPECT_TRUE(same(mx[0], std::get<0>(want_mx)));
  EXPECT_TRUE(same(mx[1], std::get<1>(want_mx)));
  auto tk = call("aten::topk", {ta, iarg(2), kw("dim", iarg(0))});
  auto want_tk = at::topk(a, 2, 0);
  ASSERT_EQ(tk.size(), 2u);
  EXPECT_TRUE(same(tk[0], std::get<0>(want_tk)));
  EXPECT_TRUE(same(tk[1], std::get<1>(want_tk)));
  auto so = call("aten::sort", {ta, kw("descending", barg(true))});
  auto want_so = at::sort(a, -1, true);
  ASSERT_EQ(so.size(), 2u);
  EXPECT_TRUE(same(so[0], std::get<0>(want_so)));
}

TEST(OpsVsAten, ResultsAliasLikeAten) {
  Handles h;
  at::Tensor a = at::randn({2, 3});
  auto t = call("aten::transpose", {targ(h(a)), iarg(0), iarg(1)});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t[0].is_alias_of(a));  // a view, as at::transpose gives
  at::Tensor d = a.clone();
  auto r = call("aten::add_", {targ(h(d)), targ(h(a))}, "Tensor");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].is_same(d));
  EXPECT_TRUE(same(d, at::mul(a, 2)));
}

// ---------------------------------------------------------------- resolution

std::string chosen(const std::string &op, const std::vector<tpt::ops::Arg> &args,
                   const std::string &overload = "") {
  tpt::ops::Prepared p = tpt::ops::resolve(op, overload, args);
  return p.handle->schema().overload_name();
}

using tpt::ops::Arg;

TEST(OpsResolve, PicksTheOverloadTorchScriptWould) {
  at::Tensor t = at::randn({2, 3}), img = at::randn({1, 1, 4, 4}), w = at::randn({1, 1, 2, 2});
  EXPECT_EQ(chosen("aten::add", {Arg::of(t), Arg::of(t)}), "Tensor");
  EXPECT_EQ(chosen("aten::add", {Arg::of(t), Arg::of_double(2.0)}), "Scalar");
  EXPECT_EQ(chosen("aten::add", {Arg::of(t), Arg::of_int(2)}), "Scalar");
  EXPECT_EQ(chosen("aten::pow", {Arg::of(t), Arg::of_int(2)}), "Tensor_Scalar");
  EXPECT_EQ(chosen("aten::pow", {Arg::of_int(2), Arg::of(t)}), "Scalar");
  EXPECT_EQ(chosen("aten::pow", {Arg::of(t), Arg::of(t)}), "Tensor_Tensor");
  EXPECT_EQ(chosen("aten::sum", {Arg::of(t)}), "");
  EXPECT_EQ(chosen("aten::sum", {Arg::of(t), Arg::of_ints({1}).named("dim")}), "dim_IntList");
  EXPECT_EQ(chosen("aten::sum", {Arg::of(t), Arg::of_int(1)}), "dim_IntList");
  EXPECT_EQ(chosen("aten::std", {Arg::of(t)}), "");
  EXPECT_EQ(chosen("aten::std", {Arg::of(t), Arg::of_int(1)}), "dim");  // int -> int[1] beats int -> bool
  EXPECT_EQ(chosen("aten::std", {Arg::of(t), Arg::of_bool(false)}), "");
  EXPECT_EQ(chosen("aten::max", {Arg::of(t)}), "");
  EXPECT_EQ(chosen("aten::max", {Arg::of(t), Arg::of_int(1)}), "dim");
  EXPECT_EQ(chosen("aten::max", {Arg::of(t), Arg::of(t)}), "other");
  EXPECT_EQ(chosen("aten::conv2d", {Arg::of(img), Arg::of(w)}), "");
  EXPECT_EQ(chosen("aten::conv2d", {Arg::of(img), Arg::of(w), Arg::of_string("same").named("padding")}), "padding");
  EXPECT_EQ(chosen("aten::to", {Arg::of(t), Arg::of_dtype(at::kDouble)}), "dtype");
  EXPECT_EQ(chosen("aten::to", {Arg::of(t), Arg::of(t)}), "other");
  EXPECT_EQ(chosen("aten::clamp", {Arg::of(t), Arg::of_double(0).named("min")}), "");
  EXPECT_EQ(chosen("aten::clamp", {Arg::of(t), Arg::of(t).named("min")}), "Tensor");
  EXPECT_EQ(chosen("aten::split", {Arg::of(t), Arg::of_int(1)}), "Tensor");
  EXPECT_EQ(chosen("aten::split", {Arg::of(t), Arg::of_ints({1, 2}), Arg::of_int(1)}), "sizes");
  EXPECT_EQ(chosen("aten::where", {Arg::of(t.gt(0)), Arg::of(t), Arg::of_double(0)}), "ScalarOther");
  EXPECT_EQ(chosen("aten::add_", {Arg::of(t), Arg::of(t)}), "Tensor");  // in place: self is mutated
  EXPECT_EQ(chosen("aten::add.Tensor", {Arg::of(t), Arg::of(t)}), "Tensor");
  EXPECT_EQ(chosen("add", {Arg::of(t), Arg::of(t), Arg::of(t).named("out")}, "out"), "out");
}

TEST(OpsResolve, DefaultsAndRepetitionFillTheStack) {
  at::Tensor img = at::randn({1, 1, 4, 4});
  tpt::ops::Prepared p = tpt::ops::resolve("aten::max_pool2d", "", {Arg::of(img), Arg::of_int(2)});
  ASSERT_EQ(p.stack.size(), 6u);
  EXPECT_EQ(p.stack[1].toIntVector(), (std::vector<int64_t>{2, 2}));  // int[2] from one int
  EXPECT_EQ(p.stack[2].toIntVector(), std::vector<int64_t>{});        // stride=[]
  EXPECT_EQ(p.stack[3].toIntVector(), (std::vector<int64_t>{0, 0}));  // padding=0
  EXPECT_FALSE(p.stack[5].toBool());
  EXPECT_EQ(p.min_outputs, 1u);
  auto out = tpt::ops::run(p);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), (at::IntArrayRef{1, 1, 2, 2}));
}

TEST(OpsResolve, ErrorsSayWhyForEachSchema) {
  at::Tensor t = at::randn({2});
  try {
    tpt::ops::resolve("aten::add", "", {Arg::of_string("x"), Arg::of(t)});
    FAIL() << "no error";
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_INVALID_ARGUMENT);
    std::string m = e.what();
    EXPECT_NE(m.find("no overload of aten::add takes (string, tensor):\n  aten::add.Tensor("), std::string::npos) << m;
    EXPECT_NE(m.find("\n  aten::add.Scalar("), std::string::npos) << m;
    EXPECT_NE(m.find("(2 out variants not tried"), std::string::npos) << m;
  }
  try {
    tpt::ops::resolve("aten::sofmax", "", {Arg::of(t)});
    FAIL() << "no error";
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("did you mean aten::softmax"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tpt::ops::resolve("aten::relu", "", {Arg::of(at::Tensor())}), tpt::Error);
}

TEST(OpsCall, ResultsThatAreNotTensorsAreRefused) {
  Handles h;
  at::Tensor t = at::randn({2, 3});
  const std::pair<const char *, const char *> cases[] = {{"tpt_test::sizes_of", "int[]"}, {"tpt_test::name_of", "str"}};
  for (const auto &[op, type] : cases) {
    tpt_tensor *out[2] = {};
    size_t n = 9;
    std::vector<tpt_arg> args{targ(h(t))};
    tpt_status *st = tpt_op_call(out, 2, &n, op, nullptr, args.data(), args.size());
    ASSERT_NE(st, nullptr) << op;
    EXPECT_EQ(tpt_status_code(st), TPT_ERR_UNSUPPORTED) << op;
    const std::string m = tpt_status_message(st);
    EXPECT_NE(m.find(std::string(op) + " returned " + type + ", which tpt_op_call cannot give as tensors"),
              std::string::npos)
        << m;
    EXPECT_EQ(out[0], nullptr) << op;
    tpt_status_free(st);
  }
}

TEST(OpsResolve, NamesAndSchemas) {
  EXPECT_EQ(tpt::ops::qualify("add", "").name, "aten::add");
  EXPECT_EQ(tpt::ops::qualify("aten::add.Tensor", "").overload, "Tensor");
  EXPECT_EQ(tpt::ops::qualify("prim::foo", "x").name, "prim::foo");
  auto ov = tpt::ops::overloads_of("aten::add");
  ASSERT_GE(ov.size(), 4u);
  EXPECT_EQ(ov[0], "Tensor");  // no plain aten::add; native_functions.yaml's order
  EXPECT_LT(std::find(ov.begin(), ov.end(), "Tensor") - ov.begin(), std::find(ov.begin(), ov.end(), "Scalar") - ov.begin());
  EXPECT_TRUE(tpt::ops::overloads_of("aten::no_such_op").empty());
  EXPECT_EQ(tpt::ops::schemas("relu"),
            (std::vector<std::string>{"aten::relu(Tensor self) -> Tensor",
                                      "aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"}));
  EXPECT_EQ(tpt::ops::schemas("aten::relu", "out").size(), 1u);
  auto near = tpt::ops::similar_names("aten::relu");
  EXPECT_NE(std::find(near.begin(), near.end(), "aten::relu_"), near.end());
}

TEST(OpsResolve, ConcurrentCallsAgree) {
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([k, &failures] {
      at::Tensor a = at::full({2, 2}, static_cast<double>(k));
      for (int i = 0; i < 200; ++i) {
        auto r = tpt::ops::call(i % 2 ? "aten::add" : "aten::mul", "", {Arg::of(a), Arg::of_int(2)});
        double want = i % 2 ? k + 2 : k * 2;
        if (r.size() != 1 || r[0].sum().item<double>() != 4 * want) ++failures[k];
        if (i % 50 == 0 && !tpt::ops::overloads_of("aten::nope_" + std::to_string(i)).empty()) ++failures[k];
      }
    });
  }
  for (auto &t : threads) t.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(failures[k], 0) << k;
}

// ---------------------------------------------------------------- fuzz

// Random calls: random operators, 0-4 random arguments of random kinds (some
// invalid on purpose), random keyword names and capacities. Every call must
// return (success, or a status with a message) and leave nothing behind.
TEST(OpsFuzz, RandomArgumentsNeverCrash) {
  static const char *const kOps[] = {
      "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::matmul", "aten::mm",
      "aten::relu", "aten::sigmoid", "aten::softmax", "aten::log_softmax", "aten::sum", "aten::mean",
      "aten::max", "aten::min", "aten::argmax", "aten::reshape", "aten::view", "aten::transpose",
      "aten::permute", "aten::flatten", "aten::squeeze", "aten::unsqueeze", "aten::cat", "aten::stack",
      "aten::split", "aten::chunk", "aten::narrow", "aten::slice", "aten::select", "aten::index_select",
      "aten::gather", "aten::where", "aten::eq", "aten::masked_fill", "aten::full_like", "aten::conv2d",
      "aten::max_pool2d", "aten::layer_norm", "aten::linear", "aten::embedding", "aten::cross_entropy_loss",
      "aten::topk", "aten::sort", "aten::cumsum", "aten::clamp", "aten::pow", "aten::index", "aten::to",
      "aten::_to_copy", "aten::expand", "aten::repeat", "aten::add_", "aten::std", "aten::gelu",
      "aten::nope", "relu", "aten::size", "aten::item", "aten::unbind", "aten::dropout"};
  static const char *const kNames[] = {"dim", "alpha", "keepdim", "dtype", "other", "self", "out",
                                       "padding", "stride", "min", "max", "bogus", "approximate", "", "p"};
  static const char *const kStrings[] = {"same", "valid", "none", "tanh", "floor", "", "x", "mean"};
  static const char *const kOverloads[] = {"Tensor", "Scalar", "int", "dim", "nope", "out", "self"};
  // T tensor, I int, D double, B bool, L int[], X tensor[], S string, Y dtype, N None
  struct Template {
    const char *op, *sig;
  };
  static const Template kTemplates[] = {
      {"aten::add", "TT"}, {"aten::add", "TI"}, {"aten::add", "TD"}, {"aten::sub", "TT"},
      {"aten::mul", "TT"}, {"aten::mul", "TD"}, {"aten::div", "TT"}, {"aten::div", "TTS"},
      {"aten::matmul", "TT"}, {"aten::mm", "TT"}, {"aten::relu", "T"}, {"aten::sigmoid", "T"},
      {"aten::softmax", "TI"}, {"aten::log_softmax", "TIY"}, {"aten::sum", "T"}, {"aten::sum", "TLB"},
      {"aten::mean", "TL"}, {"aten::max", "T"}, {"aten::max", "TI"}, {"aten::max", "TIB"},
      {"aten::min", "TT"}, {"aten::argmax", "TI"}, {"aten::reshape", "TL"}, {"aten::view", "TL"},
      {"aten::transpose", "TII"}, {"aten::permute", "TL"}, {"aten::flatten", "TII"},
      {"aten::squeeze", "TI"}, {"aten::unsqueeze", "TI"}, {"aten::cat", "XI"}, {"aten::stack", "XI"},
      {"aten::split", "TII"}, {"aten::split", "TLI"}, {"aten::chunk", "TII"}, {"aten::narrow", "TIII"},
      {"aten::slice", "TIIII"}, {"aten::select", "TII"}, {"aten::index_select", "TIT"},
      {"aten::gather", "TIT"}, {"aten::where", "TTT"}, {"aten::where", "TTD"}, {"aten::eq", "TT"},
      {"aten::masked_fill", "TTD"}, {"aten::full_like", "TD"}, {"aten::conv2d", "TT"},
      {"aten::conv2d", "TTTIII"}, {"aten::conv2d", "TTNLS"}, {"aten::max_pool2d", "TI"},
      {"aten::max_pool2d", "TLLLLB"}, {"aten::layer_norm", "TL"}, {"aten::layer_norm", "TLTTD"},
      {"aten::linear", "TT"}, {"aten::linear", "TTT"}, {"aten::embedding", "TT"},
      {"aten::cross_entropy_loss", "TT"}, {"aten::topk", "TI"}, {"aten::topk", "TIIBB"},
      {"aten::sort", "TIB"}, {"aten::cumsum", "TI"}, {"aten::clamp", "TDD"}, {"aten::clamp", "TTT"},
      {"aten::pow", "TI"}, {"aten::pow", "TT"}, {"aten::index", "TX"}, {"aten::to", "TY"},
      {"aten::_to_copy", "T"}, {"aten::expand", "TL"}, {"aten::repeat", "TL"}, {"aten::add_", "TT"},
      {"aten::std", "TLB"}, {"aten::gelu", "TS"}, {"aten::item", "T"}, {"aten::unbind", "TI"},
      {"aten::dropout", "TDB"}, {"aten::size", "TI"}};
  auto kind_of_letter = [](char c) {
    switch (c) {
      case 'T': return static_cast<int>(TPT_ARG_TENSOR);
      case 'I': return static_cast<int>(TPT_ARG_INT);
      case 'D': return static_cast<int>(TPT_ARG_DOUBLE);
      case 'B': return static_cast<int>(TPT_ARG_BOOL);
      case 'L': return static_cast<int>(TPT_ARG_INT_LIST);
      case 'X': return static_cast<int>(TPT_ARG_TENSOR_LIST);
      case 'S': return static_cast<int>(TPT_ARG_STRING);
      case 'Y': return static_cast<int>(TPT_ARG_DTYPE);
      default: return static_cast<int>(TPT_ARG_NONE);
    }
  };
  const int kCalls = 10000;
  std::mt19937_64 rng(0x7e57ab1e);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto random_tensor = [&]() {
    std::vector<int64_t> shape(static_cast<size_t>(pick(0, 4)));
    for (auto &d : shape) d = pick(0, 8) ? pick(1, 3) : 0;  // empty now and then
    static const at::ScalarType kTypes[] = {at::kFloat, at::kFloat, at::kFloat, at::kDouble, at::kLong, at::kBool};
    at::ScalarType type = kTypes[pick(0, 5)];
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
    auto n = t.numel();
    if (type == at::kFloat) {
      float *p = t.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(pick(-20, 20)) / 4;
    } else if (type == at::kDouble) {
      double *p = t.data_ptr<double>();
      for (int64_t i = 0; i < n; ++i) p[i] = pick(-20, 20) / 4.0;
    } else if (type == at::kLong) {
      int64_t *p = t.data_ptr<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = pick(-1, 3);
    } else {
      bool *p = t.data_ptr<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = pick(0, 1) != 0;
    }
    return t;
  };

  size_t ok = 0, failed = 0, outputs = 0;
  int codes[16] = {};
  auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < kCalls; ++it) {
    std::vector<std::unique_ptr<tpt_tensor>> tensors;
    std::vector<std::vector<int64_t>> int_lists;
    std::vector<std::vector<double>> double_lists;
    std::vector<std::vector<const tpt_tensor *>> tensor_lists;
    auto new_tensor = [&]() -> const tpt_tensor * {
      tensors.push_back(std::make_unique<tpt_tensor>(random_tensor()));
      return tensors.back().get();
    };
    // a few tensors shared between arguments, so that shapes sometimes agree
    std::vector<const tpt_tensor *> shared;
    for (int k = pick(1, 2); k > 0; --k) shared.push_back(new_tensor());
    auto some_tensor = [&]() {
      return pick(0, 3) ? shared[static_cast<size_t>(pick(0, static_cast<int>(shared.size()) - 1))]
                        : new_tensor();
    };

    const char *op = kOps[pick(0, static_cast<int>(sizeof kOps / sizeof kOps[0]) - 1)];
    // Half of the calls follow a plausible signature of the operator (random
    // shapes and values still make most of them fail inside the operator).
    const char *sig = nullptr;
    if (pick(0, 1)) {
      std::vector<const char *> sigs;
      for (const auto &t : kTemplates)
        if (std::strcmp(t.op, op) == 0) sigs.push_back(t.sig);
      if (!sigs.empty()) sig = sigs[static_cast<size_t>(pick(0, static_cast<int>(sigs.size()) - 1))];
    }
    std::vector<tpt_arg> args(sig ? std::strlen(sig) : static_cast<size_t>(pick(0, 4)));
    for (size_t i = 0; i < args.size(); ++i) {
      tpt_arg &a = args[i];
      a = tpt_arg{TPT_ARG_NONE, nullptr, nullptr, 0, 0.0, nullptr, 0};
      // weighted: mostly tensors and ints, now and then anything
      static const int kKinds[] = {TPT_ARG_TENSOR, TPT_ARG_TENSOR, TPT_ARG_TENSOR, TPT_ARG_TENSOR,
                                   TPT_ARG_INT, TPT_ARG_INT, TPT_ARG_INT, TPT_ARG_INT_LIST,
                                   TPT_ARG_INT_LIST, TPT_ARG_DOUBLE, TPT_ARG_BOOL, TPT_ARG_TENSOR_LIST,
                                   TPT_ARG_NONE, TPT_ARG_DOUBLE_LIST, TPT_ARG_STRING, TPT_ARG_DTYPE};
      int kind = sig                    ? kind_of_letter(sig[i])
                 : (i == 0 && pick(0, 7)) ? TPT_ARG_TENSOR
                 : pick(0, 40) == 0       ? 10
                                          : kKinds[pick(0, 15)];
      switch (kind) {
        case TPT_ARG_NONE: break;
        case TPT_ARG_TENSOR: a.kind = TPT_ARG_TENSOR; a.tensor = some_tensor(); break;
        case TPT_ARG_INT: a.kind = TPT_ARG_INT; a.i = pick(-3, 5); break;
        case TPT_ARG_DOUBLE: a.kind = TPT_ARG_DOUBLE; a.d = pick(-8, 8) / 4.0; break;
        case TPT_ARG_BOOL: a.kind = TPT_ARG_BOOL; a.i = pick(0, 20) || sig ? pick(0, 1) : 7; break;
        case TPT_ARG_INT_LIST: {
          int_lists.emplace_back(static_cast<size_t>(pick(0, 4)));
          for (auto &e : int_lists.back()) e = pick(-2, 4);
          a.kind = TPT_ARG_INT_LIST;
          a.list = int_lists.back().data();
          a.len = int_lists.back().size();
          break;
        }
        case TPT_ARG_DOUBLE_LIST: {
          double_lists.emplace_back(static_cast<size_t>(pick(0, 3)));
          for (auto &e : double_lists.back()) e = pick(-4, 4) / 2.0;
          a.kind = TPT_ARG_DOUBLE_LIST;
          a.list = double_lists.back().data();
          a.len = double_lists.back().size();
          break;
        }
        case TPT_ARG_TENSOR_LIST: {
          tensor_lists.emplace_back(static_cast<size_t>(pick(0, 3)));
          for (auto &e : tensor_lists.back()) e = pick(0, 5) ? some_tensor() : nullptr;
          a.kind = TPT_ARG_TENSOR_LIST;
          a.list = tensor_lists.back().data();
          a.len = tensor_lists.back().size();
          break;
        }
        case TPT_ARG_STRING:
          a.kind = TPT_ARG_STRING;
          a.list = kStrings[pick(0, 7)];
          break;
        case TPT_ARG_DTYPE: {
          static const int64_t kDtypes[] = {TPT_DTYPE_F32, TPT_DTYPE_F64, TPT_DTYPE_I64, TPT_DTYPE_I32,
                                            TPT_DTYPE_BOOL, TPT_DTYPE_F16, 0, 99};
          a.kind = TPT_ARG_DTYPE;
          a.i = kDtypes[pick(0, sig ? 5 : 7)];
          break;
        }
        case 10:  // broken on purpose
          switch (pick(0, 3)) {
            case 0: a.kind = static_cast<tpt_arg_kind>(pick(10, 1000)); break;
            case 1: a.kind = TPT_ARG_TENSOR; a.tensor = nullptr; break;
            case 2: a.kind = TPT_ARG_INT_LIST; a.list = nullptr; a.len = static_cast<size_t>(pick(1, 1 << 30)); break;
            default: a.kind = TPT_ARG_STRING; a.list = nullptr; break;
          }
          break;
      }
      if (!sig && i > 0 && pick(0, 5) == 0) a.name = kNames[pick(0, 14)];
    }
    const char *overload = !sig && pick(0, 7) == 0 ? kOverloads[pick(0, 6)] : nullptr;
    size_t capacity = static_cast<size_t>(pick(0, 8));
    tpt_tensor *out[8];
    for (auto &o : out) o = reinterpret_cast<tpt_tensor *>(0x1);  // must be overwritten
    size_t n = 12345;
    tpt_status *st = tpt_op_call(capacity ? out : nullptr, capacity, &n, op, overload, args.data(), args.size());
    if (st == nullptr) {
      ++ok;
      ASSERT_LE(n, capacity) << op;
      for (size_t k = 0; k < n; ++k) {
        if (out[k]) {
          ASSERT_EQ(out[k]->magic, kTensorMagic);
        }
        tpt_tensor_free(out[k]);
      }
      for (size_t k = n; k < capacity; ++k) ASSERT_EQ(out[k], nullptr) << op;
      outputs += n;
    } else {
      ++failed;
      tpt_code code = tpt_status_code(st);
      ASSERT_NE(code, TPT_OK);
      ASSERT_NE(code, TPT_ERR_INTERNAL) << tpt_status_message(st);
      ASSERT_NE(code, TPT_ERR_UNKNOWN) << tpt_status_message(st);
      ASSERT_EQ(std::strncmp(tpt_status_message(st), "tpt_op_call: ", 13), 0) << tpt_status_message(st);
      ASSERT_GT(std::strlen(tpt_status_message(st)), 13u);
      for (size_t k = 0; k < capacity; ++k) ASSERT_EQ(out[k], nullptr) << op << ": " << tpt_status_message(st);
      codes[static_cast<int>(code) & 15]++;
      if (std::getenv("TPT_FUZZ_VERBOSE")) std::printf("# %s\n", tpt_status_message(st));
      tpt_status_free(st);
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("# fuzz: %d calls in %.2f s: %zu succeeded (%zu outputs), %zu failed "
              "(invalid argument %d, backend %d, unsupported %d)\n",
              kCalls, seconds, ok, outputs, failed, codes[TPT_ERR_INVALID_ARGUMENT], codes[TPT_ERR_BACKEND],
              codes[TPT_ERR_UNSUPPORTED]);
  EXPECT_EQ(ok + failed, static_cast<size_t>(kCalls));
  EXPECT_GT(ok, static_cast<size_t>(kCalls / 20));  // the fuzz reaches the operators
  EXPECT_GT(codes[TPT_ERR_BACKEND], 0);              // and their own checks
}

}  // namespace
