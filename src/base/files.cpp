#include "base/files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "base/error.hpp"

namespace fs = std::filesystem;

namespace tpt {

namespace {

constexpr off_t kWritebackChunk = 2 << 20;

std::string reason(int err) { return std::strerror(err); }

[[noreturn]] void io_fail(const std::string &what, int err) { fail(TPT_ERR_IO, what + ": " + reason(err)); }

bool all_digits(const std::string &s, size_t from, size_t to) {
  if (from >= to) return false;
  for (size_t i = from; i < to; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// fsync of the directory holding `path`: a rename in it survives a power loss.
void sync_parent(const std::string &path) {
  std::string dir = fs::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

// ---- temporaries

std::string temporary_for(const std::string &path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
}

bool is_temporary_name(const std::string &name, long *pid) {
  // "<base>.tmp.<pid>.<n>" or "<base>.tmp.<pid>"; base not empty
  size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return false;
  size_t from = at + 5, dot = name.find('.', from);
  size_t pid_end = dot == std::string::npos ? name.size() : dot;
  if (!all_digits(name, from, pid_end) || pid_end - from > 9) return false;
  if (dot != std::string::npos && !all_digits(name, dot + 1, name.size())) return false;
  if (pid) *pid = std::stol(name.substr(from, pid_end - from));
  return true;
}

int remove_stale_temporaries(const std::string &dir, bool owned) {
  int removed = 0;
  std::error_code ec;
  const long self = static_cast<long>(::getpid());
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    long pid = 0;
    std::string name = entry.path().filename().string();
    if (!is_temporary_name(name, &pid) || pid == self) continue;
    std::error_code type_ec;
    if (!entry.is_regular_file(type_ec)) continue;
    // Without the directory's lock, only a process that is gone is known to
    // have left it (kill(pid, 0): ESRCH).
    if (!owned && !(::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) continue;
    std::error_code rm_ec;
    if (fs::remove(entry.path(), rm_ec)) ++removed;
  }
  return removed;
}

// ---- AtomicFile

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(temporary_for(path_)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) io_fail("cannot write " + path_ + " (creating " + tmp_ + ")", errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {  // never committed: the target keeps its old content
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

bool AtomicFile::try_write(const char *data, size_t size) noexcept {
  if (errno_) return false;
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd_, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      errno_ = errno;
      return false;
    }
    if (n == 0) {  // no progress and no error: treat as a full disk
      errno_ = ENOSPC;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  written_ += static_cast<off_t>(size);
  if (written_ - handed_ >= kWritebackChunk) start_writeback();
  return true;
}

// The disk's writeback of what is written so far starts now, while the rest
// is still being written, instead of all of it in commit's fsync
// (sync_file_range(SYNC_FILE_RANGE_WRITE) only starts it: it neither waits
// nor makes anything durable; the fsync still does). A hint: its failure
// changes nothing.
void AtomicFile::start_writeback() noexcept {
#ifdef __linux__
  ::sync_file_range(fd_, handed_, written_ - handed_, SYNC_FILE_RANGE_WRITE);
#endif
  handed_ = written_;
}

void AtomicFile::fail_with(int err, const std::string &what) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  io_fail(what, err);
}

void AtomicFile::write(const char *data, size_t size) {
  if (!try_write(data, size)) fail_with(errno_, "cannot write " + path_);
}

void AtomicFile::commit(bool sync) {
  if (fd_ < 0) fail(TPT_ERR_INTERNAL, "AtomicFile " + path_ + " committed twice");
  if (errno_) fail_with(errno_, "cannot write " + path_);
  if (sync && ::fsync(fd_) != 0) fail_with(errno, "cannot write " + path_ + " (fsync)");
  int closed = ::close(fd_);
  int close_errno = errno;
  fd_ = -1;
  if (closed != 0) {
    ::unlink(tmp_.c_str());
    io_fail("cannot write " + path_ + " (close)", close_errno);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_.c_str());
    io_fail("cannot write " + path_ + " (rename from " + tmp_ + ")", e);
  }
  if (sync) sync_parent(path_);
}

void write_file_atomic(const std::string &path, const std::string &content, bool sync) {
  write_file_atomic(path, content.data(), content.size(), sync);
}

void write_file_atomic(const std::string &path, const char *data, size_t size, bool sync) {
  AtomicFile f(path);
  f.write(data, size);
  f.commit(sync);
}

// ---- AppendFile

void AppendFile::create(const std::string &path, bool exclusive) {
  close();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), 0644);
  if (fd < 0) io_fail("cannot create " + path, errno);
  fd_ = fd;
  path_ = path;
  end_ = 0;
  errno_ = 0;
}

bool AppendFile::append(const void *data, size_t size) noexcept {
  if (fd_ < 0) {
    errno_ = EBADF;
    return false;
  }
  if (pwrite_all(fd_, data, size, end_)) {
    end_ += static_cast<off_t>(size);
    errno_ = 0;
    return true;
  }
  errno_ = errno ? errno : EIO;
  // What was written of the record goes again: the file ends with a whole
  // record. Shrinking never needs space.
  while (::ftruncate(fd_, end_) != 0 && errno == EINTR) {
  }
  return false;
}

bool AppendFile::sync() noexcept {
  if (fd_ < 0) return false;
  if (::fsync(fd_) == 0) return true;
  errno_ = errno;
  return false;
}

void AppendFile::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool pwrite_all(int fd, const void *data, size_t size, off_t offset) noexcept {
  const char *p = static_cast<const char *>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, p + done, size - done, offset + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// ---- reading

int open_regular(const std::string &path, const std::string &what_in) {
  const std::string what = what_in.empty() ? path : what_in;
  // O_NONBLOCK: opening a FIFO without a writer would wait for one.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) io_fail("cannot open " + what, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    io_fail("cannot open " + what, e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char *kind = S_ISDIR(st.st_mode)   ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    fail(TPT_ERR_IO, "cannot read " + what + ": it is " + kind + ", not a regular file");
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

namespace {

template <class Out>
Out read_all(const std::string &path, const std::string &what_in) {
  const std::string what = what_in.empty() ? path : what_in;
  int fd = open_regular(path, what_in);
  Out out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      io_fail("cannot read " + what, e);
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

}  // namespace

std::string read_file(const std::string &path, const std::string &what) { return read_all<std::string>(path, what); }

std::vector<char> read_file_bytes(const std::string &path, const std::string &what) {
  return read_all<std::vector<char>>(path, what);
}

// ---- DirLock

void DirLock::acquire(const std::string &dir) {
  release();
  warning_.clear();
  const std::string path = dir + "/" + kFileName;
  auto unlocked = [&](int e) {
    warning_ = "cannot lock the log directory " + dir + " (" + path + "): " + reason(e) +
               "; a second run on it would not be refused";
  };
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return unlocked(errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e != EWOULDBLOCK) {
      ::close(fd);
      return unlocked(e);
    }
    char buf[256] = {0};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    fail(TPT_ERR_STATE, "the log directory " + dir + " is in use by another run (" +
                            (holder.empty() ? std::string("its process is not recorded") : holder) +
                            "); one directory holds one run at a time: wait for it to end, or choose another logdir");
  }
  char host[256] = "unknown host";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown host");
  host[sizeof host - 1] = '\0';
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  std::string text = "process " + std::to_string(::getpid()) + " on " + host + ", since " + when + "\n";
  // Who holds it, for the refusal above; a failure here loses only that.
  if (::ftruncate(fd, 0) == 0) (void)pwrite_all(fd, text.data(), text.size(), 0);
  fd_ = fd;
}

void DirLock::release() noexcept {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
  fd_ = -1;
}

}  // namespace tpt
