// The trainer's log: lines "[MMDD HH:MM:SS @tptrain] message" to stdout (when
// console is on) and to log.log in the log directory; and the log directory's
// set-up (tensorpack's keep / delete / backup / new actions).
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include "tptrain.h"

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
  // path.<MMDD-HHMMSS>). Throws tpt::Error(TPT_ERR_IO).
  void open_file(const std::string &path);
  void close_file();

  void info(const std::string &message);
  void warn(const std::string &message);
  void error(const std::string &message);

 private:
  void write(const char *tag, const std::string &message);
  std::mutex mu_;
  bool console_ = true;
  std::FILE *file_ = nullptr;
};

// "MMDD-HHMMSS" of the local time now.
std::string timestamp_suffix();

// A path that does not exist yet: base + suffix, or base + suffix + ".N".
std::string unused_path(const std::string &base, const std::string &suffix);

// Applies `action` to `dir` and creates it; returns the directory to use.
// Throws tpt::Error(TPT_ERR_IO) with the reason. Messages go to `log`.
std::string prepare_logdir(const std::string &dir, tpt_logdir_action action, Logger &log);

// Writes `content` to `path` atomically: a temporary file in the same
// directory, renamed over `path`, so that a process killed at any moment
// leaves either the old or the new file. With `sync` the data is also
// fsync'ed before the rename (survives a power loss; costs milliseconds).
// Throws tpt::Error(TPT_ERR_IO).
// With `sync` the directory is fsync'ed after the rename as well.
void write_file_atomic(const std::string &path, const std::string &content, bool sync = true);
void write_file_atomic(const std::string &path, const char *data, size_t size, bool sync = true);

// The same, written piece by piece: a temporary file in the target's
// directory; commit() fsyncs it (with `sync`), renames it over the target
// and fsyncs the directory. Destroyed without commit, it removes the
// temporary and the target is untouched. try_write reports a failure
// without throwing (for writers called through C code); commit then throws.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;
  bool try_write(const char *data, size_t size) noexcept;
  void write(const char *data, size_t size);
  void commit(bool sync);
  bool failed() const { return errno_ != 0; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  int errno_ = 0;
};

// Reads a whole file; throws tpt::Error(TPT_ERR_IO).
std::string read_file(const std::string &path);

}  // namespace tpt
