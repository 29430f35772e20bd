// The trainer's log: lines "[MMDD HH:MM:SS @tptrain] message" to stdout (when
// console is on) and to log.log in the log directory; and the log directory's
// set-up (tensorpack's keep / delete / backup / new actions).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "base/files.hpp"
#include "tptrain/trainer.h"

namespace tpt {

class Logger {
 public:
  Logger() = default;
  ~Logger();
  Logger(const Logger &) = delete;
  Logger &operator=(const Logger &) = delete;

  void set_console(bool on) { console_ = on; }
  bool console() const { return console_; }

  // Opens `path` for writing (an existing file is first renamed to
  // path.<MMDD-HHMMSS>). Throws tpt::Error(TPT_ERR_IO). Lines that cannot be
  // written to it (a full disk) are lost, never cut: the first failure is
  // said once on stderr, and when writing works again the file says how
  // many lines are missing.
  void open_file(const std::string &path);
  void close_file();

  void info(const std::string &message);
  void warn(const std::string &message);
  void error(const std::string &message);

 private:
  void write(const char *tag, const std::string &message);
  void append_line(const std::string &line);
  std::mutex mu_;
  bool console_ = true;
  AppendFile file_;
  int64_t lost_ = 0;  // lines not written since the last one that was
};

// One message per kind of failure (tensorpack's savers and monitors log an
// IO error and training goes on): the first failure of a run of failures is
// logged as an error, later ones are counted, and the first success after
// them is logged with the count.
class FailureReport {
 public:
  // `message` says what failed and why; `more` (optional) what happens now.
  void failed(Logger &log, const std::string &message);
  // `what` names the thing that works again, e.g. "ModelSaver: saving".
  void succeeded(Logger &log, const std::string &what);
  int64_t failures() const { return failures_; }

 private:
  int64_t failures_ = 0;
};

// "MMDD-HHMMSS" of the local time now.
std::string timestamp_suffix();

// A path that does not exist yet: base + suffix, or base + suffix + ".N".
std::string unused_path(const std::string &base, const std::string &suffix);

// Applies `action` to `dir`, creates it and takes its lock (one run per
// directory: a directory another run holds is refused before any action
// touches it). Returns the directory to use. Throws tpt::Error(TPT_ERR_IO, or TPT_ERR_STATE for
// a directory in use) with the reason. Messages go to `log`.
std::string prepare_logdir(const std::string &dir, tpt_logdir_action action, Logger &log, DirLock &lock);

}  // namespace tpt
