// SIGTERM and SIGINT as a graceful stop (tpt_trainer_options.stop_on_signals):
// while a SignalStop lives, the first of them sets a flag that the loop reads
// at its next step boundary, and puts back the dispositions that were there
// before, so that a second signal acts as it would have (the default: the
// process ends at once).
#pragma once

namespace tpt {

class SignalStop {
 public:
  // Installs the handlers (the first of several live objects does; the last
  // one destroyed puts the old dispositions back). Throws tpt::Error
  // (TPT_ERR_INTERNAL) if sigaction refuses.
  SignalStop();
  ~SignalStop();
  SignalStop(const SignalStop &) = delete;
  SignalStop &operator=(const SignalStop &) = delete;

  // The signal received since the handlers were installed; 0: none.
  static int received() noexcept;
};

// "SIGTERM", "SIGINT", or "signal N".
const char *signal_name(int signo) noexcept;

}  // namespace tpt
