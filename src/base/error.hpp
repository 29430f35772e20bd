// tpt::Error: the exception tptrain's own code throws. The C ABI barrier
// (src/capi/barrier.hpp) turns it into a tpt_status with the same code.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "tptrain/common.h"

namespace tpt {

class Error : public std::runtime_error {
 public:
  // `passthrough`: the message came from the host (a callback's status) and
  // goes back to it unchanged, without the entry point's name in front.
  Error(tpt_code code, const std::string &message, bool passthrough = false)
      : std::runtime_error(message), code_(code), passthrough_(passthrough) {}
  tpt_code code() const noexcept { return code_; }
  bool passthrough() const noexcept { return passthrough_; }

 private:
  tpt_code code_;
  bool passthrough_;
};

// tensorpack's StopTraining: a graceful end, with a reason (a callback's
// stop, a tower's, the loop's).
class StopTraining : public std::exception {
 public:
  // `interrupt`: the stop came from outside the run (a stop request, a
  // signal): a checkpoint records the run as interrupted, and auto_resume
  // goes on from it. Otherwise a callback or run_step ended the run: it
  // stays stopped (loop/trainer.hpp's RunEnd).
  explicit StopTraining(std::string reason, bool interrupt = false)
      : reason_(std::move(reason)), interrupt_(interrupt) {}
  const char *what() const noexcept override { return reason_.c_str(); }
  bool interrupt() const noexcept { return interrupt_; }
  // Who raised it: the callback's name, "run_step"; empty until the loop
  // that caught it first names it.
  const std::string &by() const noexcept { return by_; }
  void set_by(const std::string &by) {
    if (by_.empty()) by_ = by;
  }

 private:
  std::string reason_;
  bool interrupt_;
  std::string by_;
};

[[noreturn]] inline void fail(tpt_code code, const std::string &message) {
  throw Error(code, message);
}

[[noreturn]] inline void invalid_argument(const std::string &message) {
  throw Error(TPT_ERR_INVALID_ARGUMENT, message);
}

// The integer a caller stored in a C enum (a field of an options struct, an
// argument), for the checks that refuse a value outside the enum: loading
// such a value as the enum type is undefined behaviour in C++ (an enum
// without a fixed underlying type only holds the values of its enumerators'
// bits, so -1 in an enum of 0..2 is already out of range), so every first
// look at a caller's enum goes through this and compares integers.
template <class E>
inline int64_t enum_int(const E &value) noexcept {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int32_t), "a C enum of the ABI");
  int32_t v;
  std::memcpy(&v, &value, sizeof v);
  return v;
}

// The first line of a LibTorch message (its later lines are a backtrace or
// LibTorch's source context, not for users; LibTorch 2.x's c10d even puts a
// backtrace into what_without_backtrace()).
inline std::string first_line(std::string message) {
  if (auto nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
  return message;
}

}  // namespace tpt
