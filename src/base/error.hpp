// tpt::Error: the exception tptrain's own code throws. The C ABI barrier
// (src/capi/barrier.hpp) turns it into a tpt_status with the same code.
#pragma once

#include <stdexcept>
#include <string>
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
  explicit StopTraining(std::string reason) : reason_(std::move(reason)) {}
  const char *what() const noexcept override { return reason_.c_str(); }

 private:
  std::string reason_;
};

[[noreturn]] inline void fail(tpt_code code, const std::string &message) {
  throw Error(code, message);
}

[[noreturn]] inline void invalid_argument(const std::string &message) {
  throw Error(TPT_ERR_INVALID_ARGUMENT, message);
}

// The first line of a LibTorch message (its later lines are a backtrace or
// LibTorch's source context, not for users; LibTorch 2.x's c10d even puts a
// backtrace into what_without_backtrace()).
inline std::string first_line(std::string message) {
  if (auto nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
  return message;
}

}  // namespace tpt
