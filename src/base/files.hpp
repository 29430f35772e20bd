// Every file the library writes or reads goes through here: whole files
// replaced atomically (checkpoints, the checkpoint index, stats.json's first
// write, the best-saver's copy, PNG images), files that grow at their end
// (log.log, TensorBoard event files), and reads that refuse what is not a
// regular file instead of blocking on it (a FIFO, a device).
//
// The rules each writer keeps:
// - a failed write never leaves a half-written target: the previous good
//   file stays (AtomicFile), or the file is cut back to its last whole record
//   (AppendFile);
// - errors name the path and the OS's reason; the non-throwing calls report
//   through their result so that callers (the savers, the monitors) can log
//   and go on;
// - temporaries have one name scheme, "<target>.tmp.<pid>.<n>", and a later
//   run removes those its predecessors left (remove_stale_temporaries).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tpt {

// The temporary this process writes beside `path` before renaming it over
// `path`: "<path>.tmp.<pid>.<n>", n counting up in the process.
std::string temporary_for(const std::string &path);

// Whether `name` (a file name, no directory) is a temporary of that scheme
// (or of the older "<name>.tmp.<pid>"); sets *pid to its process.
bool is_temporary_name(const std::string &name, long *pid);

// Removes from `dir` the temporaries that other processes left: all of them
// when this process owns the directory (its DirLock), else only those whose
// process no longer runs. Returns how many went; errors are ignored (a
// temporary that stays is harmless).
int remove_stale_temporaries(const std::string &dir, bool owned);

// Writes a file atomically: a temporary in the same directory, renamed over
// the target at commit(), so that a process killed at any moment, or a write
// that fails (a full disk), leaves either the old or the new file. With
// `sync` the data is fsync'ed before the rename and the directory after it
// (survives a power loss; costs milliseconds). Destroyed without commit, it
// removes the temporary and the target is untouched. try_write reports a
// failure without throwing (for writers called through C code); commit then
// throws. Errors are tpt::Error(TPT_ERR_IO) naming the target. Every 2 MiB
// written, the disk's writeback of them is started (Linux's sync_file_range),
// so that the writes and the disk overlap and commit's fsync waits for the
// last piece only: a 21 MB checkpoint's save went from ~30 to ~21 ms on an
// ext4 disk (benchmarks/checkpoint.c).
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
  [[noreturn]] void fail_with(int err, const std::string &what);
  void start_writeback() noexcept;
  std::string path_, tmp_;
  int fd_ = -1;
  int errno_ = 0;
  off_t written_ = 0, handed_ = 0;  // bytes written; bytes whose writeback was started
};

void write_file_atomic(const std::string &path, const std::string &content, bool sync = true);
void write_file_atomic(const std::string &path, const char *data, size_t size, bool sync = true);

// A file that grows at its end by whole records (lines, TFRecords). A record
// that cannot be written whole (a full disk) is cut off again, so the file
// only ever holds whole records; the writer decides whether to go on.
class AppendFile {
 public:
  AppendFile() = default;
  ~AppendFile() { close(); }
  AppendFile(const AppendFile &) = delete;
  AppendFile &operator=(const AppendFile &) = delete;
  // Creates `path` (exclusive: fails if it exists; else truncates an
  // existing file). Throws tpt::Error(TPT_ERR_IO).
  void create(const std::string &path, bool exclusive);
  bool is_open() const { return fd_ >= 0; }
  const std::string &path() const { return path_; }
  // Appends all of data or nothing; false with error() set (the OS's errno).
  bool append(const void *data, size_t size) noexcept;
  bool sync() noexcept;
  int error() const { return errno_; }
  void close() noexcept;

 private:
  std::string path_;
  int fd_ = -1;
  off_t end_ = 0;
  int errno_ = 0;
};

// Writes all of data at `offset` of `fd` (retrying short writes and EINTR);
// false with errno set.
bool pwrite_all(int fd, const void *data, size_t size, off_t offset) noexcept;

// Opens `path` for reading; refuses at once, without blocking, what is not a
// regular file (a FIFO, a device, a directory). Throws tpt::Error
// (TPT_ERR_IO) naming `what` (default: the path). The caller closes the
// descriptor.
int open_regular(const std::string &path, const std::string &what = "");

// A whole regular file (open_regular's rules).
std::string read_file(const std::string &path, const std::string &what = "");
std::vector<char> read_file_bytes(const std::string &path, const std::string &what = "");

// One run at a time per directory: an advisory lock (flock) on the
// directory's ".tptrain.lock", held while the object lives and released by
// the OS when the process dies. The file says which process holds it.
class DirLock {
 public:
  DirLock() = default;
  ~DirLock() { release(); }
  DirLock(const DirLock &) = delete;
  DirLock &operator=(const DirLock &) = delete;
  // Takes the lock of `dir` (which must exist), releasing one held before;
  // throws tpt::Error(TPT_ERR_STATE) naming the directory and the holder
  // when another run holds it. Where no lock can be taken (a read-only
  // directory, a filesystem without flock: ENOLCK, EOPNOTSUPP) it returns a
  // warning instead (warning()), and the run goes on unlocked.
  void acquire(const std::string &dir);
  void release() noexcept;
  bool held() const { return fd_ >= 0; }
  // Why the last acquire took no lock; empty when it did.
  const std::string &warning() const { return warning_; }
  static constexpr const char *kFileName = ".tptrain.lock";

 private:
  int fd_ = -1;
  std::string warning_;
};

}  // namespace tpt
