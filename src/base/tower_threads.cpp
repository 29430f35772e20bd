// Threads for towers, each with its share of LibTorch's intra-op threads.
#include "base/tower_threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <string>
#include <system_error>

#include "base/error.hpp"

namespace tpt {

namespace {

// OpenMP's per-thread thread count, found in whatever OpenMP runtime
// LibTorch loaded (none: the counts are left alone).
using SetThreads = void (*)(int);
using GetThreads = int (*)();
SetThreads omp_set() {
  static SetThreads f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return f;
}
GetThreads omp_get() {
  static GetThreads f = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return f;
}

// This thread's intra-op threads for a scope.
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int n) {
    if (n <= 0 || !omp_set() || !omp_get()) return;
    at::get_num_threads();  // LibTorch's per-thread initialisation first, or it would undo ours
    old_ = omp_get()();
    if (old_ != n) omp_set()(n);
  }
  ~IntraOpThreads() {
    if (old_ > 0) omp_set()(old_);
  }
  IntraOpThreads(const IntraOpThreads &) = delete;
  IntraOpThreads &operator=(const IntraOpThreads &) = delete;

 private:
  int old_ = 0;
};

}  // namespace

void TowerThreads::start(int towers, int intra_op_threads) {
  stop();
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = false;
    errors_.assign(static_cast<size_t>(towers), nullptr);
    intra_ = intra_op_threads;
  }
  for (int k = 1; k < towers; ++k) {
    try {
      threads_.emplace_back([this, k] { loop(k); });
    } catch (const std::system_error &e) {
      stop();
      fail(TPT_ERR_BACKEND, "cannot start the thread of tower " + std::to_string(k) + ": " + e.what());
    }
  }
}

void TowerThreads::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = true;
  }
  wake_.notify_all();
  for (auto &th : threads_) th.join();
  threads_.clear();
}

void TowerThreads::run(const std::function<void(int)> &fn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    job_ = &fn;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
    for (auto &e : errors_) e = nullptr;
  }
  wake_.notify_all();
  std::exception_ptr first;
  {
    IntraOpThreads threads(threads_.empty() ? 0 : intra_);
    try {
      fn(0);
    } catch (...) {
      first = std::current_exception();
    }
  }
  std::unique_lock<std::mutex> l(mu_);
  done_.wait(l, [&] { return pending_ == 0; });
  job_ = nullptr;
  errors_[0] = first;
  // An error wins over a stop (tensorpack's rule for one step): the lowest
  // tower's error, else the lowest tower's stop.
  std::exception_ptr stop;
  for (auto &e : errors_) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const StopTraining &) {
      if (!stop) stop = e;
      continue;
    } catch (...) {
    }
    std::rethrow_exception(e);
  }
  if (stop) std::rethrow_exception(stop);
}

void TowerThreads::loop(int k) {
  IntraOpThreads threads(intra_);
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)> *job = nullptr;
    {
      std::unique_lock<std::mutex> l(mu_);
      wake_.wait(l, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err;
    try {
      (*job)(k);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> l(mu_);
    errors_[static_cast<size_t>(k)] = err;
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace tpt
