// How a run ended, as its checkpoints record it: auto_resume reads it to
// leave a finished or stopped run ended (loop/trainer.cpp).
#pragma once

#include <string>

namespace tpt {

struct RunEnd {
  enum class How { Finished, Stopped, Interrupted };
  How how = How::Finished;
  std::string by;      // Stopped: the callback's name or "run_step"; otherwise empty
  std::string reason;  // Stopped, Interrupted: the stop reason; Finished: empty

  static const char *name(How h) {
    switch (h) {
      case How::Finished: return "finished";
      case How::Stopped: return "stopped";
      default: return "interrupted";
    }
  }
  // "stopped by EarlyStopping(x): ...", "interrupted: SIGTERM", "finished".
  std::string text() const {
    std::string s = name(how);
    if (!by.empty()) s += " by " + by;
    if (!reason.empty()) s += ": " + reason;
    return s;
  }
  bool operator==(const RunEnd &o) const { return how == o.how && by == o.by && reason == o.reason; }
  bool operator!=(const RunEnd &o) const { return !(*this == o); }
};

}  // namespace tpt
