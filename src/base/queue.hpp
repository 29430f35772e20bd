// A bounded blocking queue that can be closed: what prefetching threads and
// their consumers hand datapoints over with.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>

namespace tpt::data {

template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // Blocks while full. False (and `v` is dropped) once closed.
  bool push(T v) {
    std::unique_lock<std::mutex> l(mu_);
    not_full_.wait(l, [&] { return closed_ || q_.size() < capacity_; });
    if (closed_) return false;
    q_.push_back(std::move(v));
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty. False once closed and empty.
  bool pop(T &v) {
    std::unique_lock<std::mutex> l(mu_);
    not_empty_.wait(l, [&] { return closed_ || !q_.empty(); });
    if (q_.empty()) return false;
    v = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return true;
  }

  // Wakes every waiter; later pushes fail, pops drain what is left.
  void close() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  // Empties and reopens (no thread may be using it).
  void reset() {
    std::lock_guard<std::mutex> l(mu_);
    q_.clear();
    closed_ = false;
  }

  size_t size() const {
    std::lock_guard<std::mutex> l(mu_);
    return q_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> q_;
  bool closed_ = false;
};

}  // namespace tpt::data
