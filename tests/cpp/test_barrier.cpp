// The exception barrier: every exception type becomes the right status.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "capi/barrier.hpp"

namespace {

struct Weird {};

std::string message_of(tpt_status *s) {
  std::string m = tpt_status_message(s);
  tpt_status_free(s);
  return m;
}

TEST(Barrier, SuccessIsNull) {
  bool ran = false;
  EXPECT_EQ(tpt::capi::guard("f", [&] { ran = true; }), nullptr);
  EXPECT_TRUE(ran);
}

TEST(Barrier, TptErrorKeepsCodeAndPrefixesFunction) {
  tpt_status *s = tpt::capi::guard("tpt_x", [] { tpt::fail(TPT_ERR_IO, "cannot open 'a.bin'"); });
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(tpt_status_code(s), TPT_ERR_IO);
  EXPECT_EQ(message_of(s), "tpt_x: cannot open 'a.bin'");
}

TEST(Barrier, C10ErrorIsBackendWithoutBacktrace) {
  tpt_status *s = tpt::capi::guard("tpt_y", [] { TORCH_CHECK(false, "shape mismatch 3 vs 4"); });
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(tpt_status_code(s), TPT_ERR_BACKEND);
  std::string m = message_of(s);
  EXPECT_EQ(m.rfind("tpt_y: shape mismatch 3 vs 4", 0), 0u) << m;
  EXPECT_EQ(m.find("frame #"), std::string::npos) << m;
}

TEST(Barrier, BadAllocIsStaticOutOfMemory) {
  tpt_status *s = tpt::capi::guard("f", [] { throw std::bad_alloc(); });
  EXPECT_EQ(tpt_status_code(s), TPT_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(s, tpt::capi::out_of_memory_status());
  tpt_status_free(s);  // must be a no-op on the static status
  EXPECT_EQ(tpt_status_code(tpt::capi::out_of_memory_status()), TPT_ERR_OUT_OF_MEMORY);
}

TEST(Barrier, OtherStdExceptionIsBackend) {
  // LibTorch throws plain std::runtime_error in places (reshape's size check).
  tpt_status *s = tpt::capi::guard("f", [] { throw std::out_of_range("index 9"); });
  EXPECT_EQ(tpt_status_code(s), TPT_ERR_BACKEND);
  EXPECT_EQ(message_of(s), "f: index 9");
}

TEST(Barrier, AnythingElseIsUnknown) {
  tpt_status *s = tpt::capi::guard("f", [] { throw Weird{}; });
  EXPECT_EQ(tpt_status_code(s), TPT_ERR_UNKNOWN);
  EXPECT_EQ(message_of(s), "f: unknown exception");
  s = tpt::capi::guard("f", [] { throw 42; });
  EXPECT_EQ(tpt_status_code(s), TPT_ERR_UNKNOWN);
  tpt_status_free(s);
}

TEST(Barrier, RequireNamesArgument) {
  int *p = nullptr;
  tpt_status *s = tpt::capi::guard("tpt_z", [&] { tpt::capi::require(p, "out"); });
  EXPECT_EQ(tpt_status_code(s), TPT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(message_of(s), "tpt_z: argument 'out' is NULL");
}

TEST(Status, MakeOkIsNull) {
  EXPECT_EQ(tpt::capi::make_status(TPT_OK, "ignored"), nullptr);
  EXPECT_EQ(tpt_status_new(TPT_OK, "x"), nullptr);
}

TEST(Status, CodeNamesAreDistinct) {
  std::set<std::string> names;
  for (int c = TPT_OK; c <= TPT_ERR_UNSUPPORTED; ++c) names.insert(tpt_code_name(static_cast<tpt_code>(c)));
  EXPECT_EQ(names.size(), static_cast<size_t>(TPT_ERR_UNSUPPORTED + 1));
  EXPECT_STREQ(tpt_code_name(static_cast<tpt_code>(999)), "TPT_UNKNOWN_CODE");
}

}  // namespace
