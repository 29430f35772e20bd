#include "base/log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "base/error.hpp"

namespace fs = std::filesystem;

namespace tpt {

namespace {

// The local time now, formatted with strftime's `format`.
std::string local_time(const char *format) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

bool has_visible_entries(const fs::path &dir) {
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!name.empty() && name[0] != '.') return true;
  }
  return false;
}

}  // namespace

Logger::~Logger() { close_file(); }

void Logger::open_file(const std::string &path) {
  std::lock_guard<std::mutex> lock(mu_);
  file_.close();
  lost_ = 0;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    std::string backup = unused_path(path, "." + timestamp_suffix());
    fs::rename(path, backup, ec);
    if (ec) fail(TPT_ERR_IO, "cannot move the old " + path + " to " + backup + ": " + ec.message());
  }
  file_.create(path, /*exclusive=*/false);
}

void Logger::close_file() {
  std::lock_guard<std::mutex> lock(mu_);
  file_.close();
}

void Logger::append_line(const std::string &line) {
  if (!file_.is_open()) return;
  if (lost_ > 0) {
    // Writing works again: say what is missing, before the line itself.
    std::string note = "[" + local_time("%m%d %H:%M:%S") + " @tptrain] WRN " + std::to_string(lost_) +
                       " line(s) of this log are missing here: " + file_.path() + " could not be written (" +
                       std::strerror(file_.error()) + ")\n";
    if (!file_.append(note.data(), note.size())) {
      ++lost_;
      return;
    }
    lost_ = 0;
  }
  if (file_.append(line.data(), line.size())) return;
  if (lost_++ == 0)
    std::fprintf(stderr, "[%s @tptrain] ERR cannot write %s: %s; log lines are lost until it can be written (said once)\n",
                 local_time("%m%d %H:%M:%S").c_str(), file_.path().c_str(), std::strerror(file_.error()));
}

void Logger::write(const char *tag, const std::string &message) {
  std::string line = "[" + local_time("%m%d %H:%M:%S") + " @tptrain] " + tag + message + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (console_) {
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }
  append_line(line);
}

void Logger::info(const std::string &message) { write("", message); }
void Logger::warn(const std::string &message) { write("WRN ", message); }
void Logger::error(const std::string &message) { write("ERR ", message); }

void FailureReport::failed(Logger &log, const std::string &message) {
  if (failures_++ == 0)
    log.error(message + " (training goes on; until this works again, the same failure is counted, not logged)");
}

void FailureReport::succeeded(Logger &log, const std::string &what) {
  if (failures_ == 0) return;
  log.info(what + " works again, after " + std::to_string(failures_) + " failure(s).");
  failures_ = 0;
}

std::string timestamp_suffix() { return local_time("%m%d-%H%M%S"); }

std::string unused_path(const std::string &base, const std::string &suffix) {
  std::error_code ec;
  std::string candidate = base + suffix;
  for (int n = 1; fs::exists(candidate, ec); ++n) candidate = base + suffix + "." + std::to_string(n);
  return candidate;
}

namespace {

char ask_action(const std::string &dir) {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return 'q';
  std::cout << "Log directory " << dir
            << " exists! Use 'k' to keep it, 'd' to delete it, 'b' to back it up, 'n' to use a "
               "new one, 'q' to quit: "
            << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer) || answer.empty()) return 'q';
  return answer[0];
}

}  // namespace

std::string prepare_logdir(const std::string &dir_in, tpt_logdir_action action, Logger &log, DirLock &lock) {
  if (dir_in.empty()) invalid_argument("logdir is empty");
  std::string dir = fs::path(dir_in).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code ec;
  bool exists = fs::exists(dir, ec);
  if (exists && !fs::is_directory(dir, ec)) fail(TPT_ERR_IO, "logdir " + dir + " exists and is not a directory");
  // Another run's directory is refused before any action touches it.
  std::string locked;  // the directory whose lock was asked for
  auto take = [&](const std::string &d) {  // (a warning of lock's is the caller's to log)
    locked = d;
    lock.acquire(d);
  };
  if (exists) take(dir);
  if (exists && has_visible_entries(dir)) {
    char act = 0;
    switch (action) {
      case TPT_LOGDIR_KEEP: act = 'k'; break;
      case TPT_LOGDIR_DELETE: act = 'd'; break;
      case TPT_LOGDIR_BACKUP: act = 'b'; break;
      case TPT_LOGDIR_NEW: act = 'n'; break;
      case TPT_LOGDIR_ASK: act = ask_action(dir); break;
      case TPT_LOGDIR_REFUSE: act = 'q'; break;
      default: invalid_argument("logdir_action " + std::to_string(static_cast<int>(action)) + " is not a tpt_logdir_action");
    }
    switch (act) {
      case 'k':
        log.info("Keeping the existing log directory " + dir);
        break;
      case 'd': {
        for (const auto &entry : fs::directory_iterator(dir, ec))
          if (entry.path().filename() != DirLock::kFileName) fs::remove_all(entry.path(), ec);
        if (has_visible_entries(dir)) fail(TPT_ERR_IO, "could not empty the log directory " + dir);
        log.info("Deleted the contents of " + dir);
        break;
      }
      case 'b': {
        std::string backup = unused_path(dir, timestamp_suffix());
        fs::rename(dir, backup, ec);
        if (ec) fail(TPT_ERR_IO, "cannot back up " + dir + " to " + backup + ": " + ec.message());
        lock.release();  // its lock file went with it
        locked.clear();
        log.info("Backed up the old log directory to " + backup);
        break;
      }
      case 'n':
        dir = unused_path(dir, timestamp_suffix());
        lock.release();
        locked.clear();
        log.info("Using a new log directory " + dir);
        break;
      default:
        fail(TPT_ERR_IO, "log directory " + dir +
                             " exists and is not empty; choose logdir_action KEEP, DELETE, BACKUP "
                             "or NEW (or ASK on a terminal)");
    }
  }
  fs::create_directories(dir, ec);
  if (ec) fail(TPT_ERR_IO, "cannot create the log directory " + dir + ": " + ec.message());
  if (locked != dir) take(dir);
  return dir;
}

}  // namespace tpt
