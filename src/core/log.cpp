#include "core/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.hpp"

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

[[noreturn]] void io_error(const std::string &what) {
  fail(TPT_ERR_IO, what + ": " + std::strerror(errno));
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
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  std::error_code ec;
  if (fs::exists(path, ec)) {
    std::string backup = unused_path(path, "." + timestamp_suffix());
    fs::rename(path, backup, ec);
    if (ec) fail(TPT_ERR_IO, "cannot move the old " + path + " to " + backup + ": " + ec.message());
  }
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) io_error("cannot open " + path);
}

void Logger::close_file() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

void Logger::write(const char *tag, const std::string &message) {
  std::string line = "[" + local_time("%m%d %H:%M:%S") + " @tptrain] " + tag + message + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (console_) {
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }
  if (file_) {
    std::fputs(line.c_str(), file_);
    std::fflush(file_);
  }
}

void Logger::info(const std::string &message) { write("", message); }
void Logger::warn(const std::string &message) { write("WRN ", message); }
void Logger::error(const std::string &message) { write("ERR ", message); }

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

std::string prepare_logdir(const std::string &dir_in, tpt_logdir_action action, Logger &log) {
  if (dir_in.empty()) invalid_argument("logdir is empty");
  std::string dir = fs::path(dir_in).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code ec;
  bool exists = fs::exists(dir, ec);
  if (exists && !fs::is_directory(dir, ec)) fail(TPT_ERR_IO, "logdir " + dir + " exists and is not a directory");
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
        for (const auto &entry : fs::directory_iterator(dir, ec)) fs::remove_all(entry.path(), ec);
        if (has_visible_entries(dir)) fail(TPT_ERR_IO, "could not empty the log directory " + dir);
        log.info("Deleted the contents of " + dir);
        break;
      }
      case 'b': {
        std::string backup = unused_path(dir, timestamp_suffix());
        fs::rename(dir, backup, ec);
        if (ec) fail(TPT_ERR_IO, "cannot back up " + dir + " to " + backup + ": " + ec.message());
        log.info("Backed up the old log directory to " + backup);
        break;
      }
      case 'n':
        dir = unused_path(dir, timestamp_suffix());
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
  return dir;
}

void write_file_atomic(const std::string &path, const std::string &content, bool sync) {
  write_file_atomic(path, content.data(), content.size(), sync);
}

void write_file_atomic(const std::string &path, const char *data, size_t size, bool sync) {
  AtomicFile f(path);
  f.write(data, size);
  f.commit(sync);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) io_error("cannot create " + tmp_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {  // never committed: the target keeps its old content
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

bool AtomicFile::try_write(const char *data, size_t size) noexcept {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd_, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (!errno_) errno_ = errno;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void AtomicFile::write(const char *data, size_t size) {
  if (!try_write(data, size)) {
    errno = errno_;
    io_error("cannot write " + tmp_);
  }
}

void AtomicFile::commit(bool sync) {
  if (errno_) {
    errno = errno_;
    io_error("cannot write " + tmp_);
  }
  int synced = sync ? ::fsync(fd_) : 0;
  int saved_sync = errno;
  int closed = ::close(fd_);
  fd_ = -1;
  if (synced != 0 || closed != 0) {
    int saved = synced != 0 ? saved_sync : errno;
    ::unlink(tmp_.c_str());
    errno = saved;
    io_error("cannot sync " + tmp_);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp_.c_str());
    errno = saved;
    io_error("cannot rename " + tmp_ + " to " + path_);
  }
  if (sync) {  // the rename itself survives a power loss once the directory is synced
    std::string dir = fs::path(path_).parent_path().string();
    int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
}

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(TPT_ERR_IO, "cannot open " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tpt
