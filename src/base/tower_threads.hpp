// Threads for towers: the training towers of the multi-tower strategies
// (src/train/towers.hpp) and the inference towers of the data-parallel
// InferenceRunner (src/train/inference.cpp).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tpt {

// Threads for towers 1..N-1 (tower 0 runs on the caller's), started in
// BEFORE_TRAIN and joined in AFTER_TRAIN (and by the destructor). Each runs
// LibTorch's intra-op work with `intra_op_threads` OpenMP threads (an
// OpenMP BLAS follows them; a pthread OpenBLAS is kept at one thread, each
// caller's products on the caller's thread: base/cpu_threads.hpp).
class TowerThreads {
 public:
  TowerThreads() = default;
  ~TowerThreads() { stop(); }
  TowerThreads(const TowerThreads &) = delete;
  TowerThreads &operator=(const TowerThreads &) = delete;

  // Starts towers - 1 threads; on a failure the started ones are stopped and
  // the error names the tower.
  void start(int towers, int intra_op_threads);
  void stop();
  // Whether start ran (and stop has not): from the thread that starts them.
  bool running() const { return !threads_.empty(); }
  // Runs fn(k) for every tower k at once and returns when all are done;
  // rethrows the error of the lowest tower that failed.
  void run(const std::function<void(int)> &fn);

 private:
  void loop(int k);

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)> *job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool quit_ = false;
  std::vector<std::exception_ptr> errors_;
  int intra_ = 0;
};

}  // namespace tpt
