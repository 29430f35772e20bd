// GoogleTest main that reports in TAP, so `meson test` counts the tests.
// Failure details go to stdout as TAP diagnostics ("# ...").
#include <gtest/gtest.h>

#include <cstdio>

namespace {

class TapListener : public testing::EmptyTestEventListener {
 public:
  void OnTestProgramStart(const testing::UnitTest &unit) override {
    std::printf("TAP version 13\n1..%d\n", unit.test_to_run_count() > 0 ? unit.test_to_run_count() : 1);
    std::fflush(stdout);
  }
  void OnTestPartResult(const testing::TestPartResult &r) override {
    if (!r.failed()) return;
    std::printf("# %s:%d: %s\n", r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const testing::TestInfo &info) override {
    ++n_;
    const char *verdict = info.result()->Failed() ? "not ok" : "ok";
    const char *skip = info.result()->Skipped() ? " # SKIP" : "";
    std::printf("%s %d - %s.%s%s\n", verdict, n_, info.test_suite_name(), info.name(), skip);
    std::fflush(stdout);
  }
  void OnTestProgramEnd(const testing::UnitTest &unit) override {
    if (unit.test_to_run_count() == 0) std::printf("not ok 1 - no tests ran\n");
  }

 private:
  int n_ = 0;
};

}  // namespace

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  auto &listeners = testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new TapListener);
  int rc = RUN_ALL_TESTS();
  return testing::UnitTest::GetInstance()->test_to_run_count() == 0 ? 1 : rc;
}
