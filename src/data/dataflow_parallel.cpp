// Dataflow nodes with threads: the parallel map (tensorpack's
// MultiThreadMapData) and prefetching (PrefetchData with one worker).
// Threads start at reset and are joined at the next reset, at a restart, at
// stop() and in the destructor; an exception in a thread reaches the
// consumer's next().
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "base/error.hpp"
#include "base/queue.hpp"
#include "data/dataflow.hpp"

namespace tpt::data {

namespace {

class ParallelMap final : public DataFlow {
 public:
  ParallelMap(DataFlowPtr df, SeededMapFn fn, ParallelMapOptions o, std::string kind)
      : DataFlow(std::move(kind)), df_(std::move(df)), fn_(std::move(fn)), o_(o) {
    if (!df_) invalid_argument("no input dataflow");
    if (!fn_) invalid_argument("no map function");
    if (o_.n_threads < 1) invalid_argument("n_threads must be >= 1, got " + std::to_string(o_.n_threads));
    if (o_.buffer_size < 1) invalid_argument("buffer_size must be >= 1, got " + std::to_string(o_.buffer_size));
    df_->claim(this->kind());
  }
  ~ParallelMap() override {
    stop_threads();
    df_->release();
  }

  bool next(Datapoint &dp) override {
    for (;;) {
      feed();
      if (in_flight_ == 0) {  // the pass is over (strict), or the input has no data
        child_ended_ = false;
        fed_in_child_pass_ = 0;
        last_.clear();
        save_now(last_);
        return false;
      }
      Result r = wait_result();
      --in_flight_;
      if (r.error) std::rethrow_exception(r.error);
      last_ = std::move(r.snapshot);  // unordered: an approximation (see the header)
      if (r.dp.empty()) {
        if (o_.strict) fail(TPT_ERR_CALLBACK, kind() + ": the map function dropped a datapoint (not allowed in strict mode)");
        continue;
      }
      dp = std::move(r.dp);
      return true;
    }
  }
  std::optional<int64_t> size() const override { return df_->size(); }

 protected:
  std::vector<DataFlow *> children() const override { return {df_.get()}; }
  Rng *rng() override { return &rng_; }

  void start_threads() override {
    stopping_ = false;
    try {
      for (int i = 0; i < o_.n_threads; ++i) workers_.emplace_back([this] { work(); });
    } catch (const std::system_error &e) {
      size_t started = workers_.size();
      stop_threads();  // the ones that did start
      fail(TPT_ERR_INTERNAL, "cannot start the parallel map's worker thread " + std::to_string(started + 1) + " of " +
                                 std::to_string(o_.n_threads) + ": " + e.what());
    }
  }

  void stop_threads() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto &t : workers_) t.join();
    workers_.clear();
    jobs_.clear();
    ordered_.clear();
    unordered_.clear();
    in_flight_ = 0;
    next_seq_ = expect_seq_ = 0;
  }

  void clear_pass() override {
    child_ended_ = false;
    fed_in_child_pass_ = 0;
    last_.clear();
  }
  // The state as of the last datapoint given: what save_now wrote when its
  // input was read (the generator had drawn its seed).
  bool save_snapshot(std::vector<uint8_t> &out) const override {
    if (last_.empty()) return false;
    out.insert(out.end(), last_.begin(), last_.end());
    return true;
  }
  void save_own(std::vector<uint8_t> &out) const override { put_u64(out, static_cast<uint64_t>(fed_in_child_pass_)); }
  void load_own(StateReader &r, bool apply) override {
    uint64_t fed = r.u64();
    if (apply) fed_in_child_pass_ = static_cast<int64_t>(fed);
  }

 private:
  struct Job {
    uint64_t seq;
    Datapoint dp;
    uint64_t seed;
    std::vector<uint8_t> snapshot;
  };
  struct Result {
    Datapoint dp;
    std::exception_ptr error;
    std::vector<uint8_t> snapshot;
  };

  // Reads the input on the consumer's thread until the buffer is full.
  void feed() {
    while (in_flight_ < o_.buffer_size && !child_ended_) {
      Datapoint x;
      if (!df_->next(x)) {
        if (o_.strict || fed_in_child_pass_ == 0) {  // strict: the pass ends; else: no data at all
          child_ended_ = true;
          break;
        }
        fed_in_child_pass_ = 0;  // non-strict: go on with the input's next pass
        continue;
      }
      ++fed_in_child_pass_;
      uint64_t seed = rng_.next();
      std::vector<uint8_t> snapshot;
      save_now(snapshot);
      {
        std::lock_guard<std::mutex> l(mu_);
        jobs_.push_back(Job{next_seq_++, std::move(x), seed, std::move(snapshot)});
      }
      ++in_flight_;
      work_cv_.notify_one();
    }
  }

  Result wait_result() {
    std::unique_lock<std::mutex> l(mu_);
    if (o_.ordered) {
      done_cv_.wait(l, [&] { return ordered_.count(expect_seq_) > 0; });
      auto it = ordered_.find(expect_seq_++);
      Result r = std::move(it->second);
      ordered_.erase(it);
      return r;
    }
    done_cv_.wait(l, [&] { return !unordered_.empty(); });
    Result r = std::move(unordered_.front());
    unordered_.pop_front();
    return r;
  }

  void work() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> l(mu_);
        work_cv_.wait(l, [&] { return stopping_ || !jobs_.empty(); });
        if (stopping_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      Result r;
      r.snapshot = std::move(job.snapshot);
      try {
        fn_(job.dp, job.seed);
        r.dp = std::move(job.dp);
      } catch (...) {
        r.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        if (o_.ordered) ordered_.emplace(job.seq, std::move(r));
        else unordered_.push_back(std::move(r));
      }
      done_cv_.notify_one();
    }
  }

  DataFlowPtr df_;
  SeededMapFn fn_;
  ParallelMapOptions o_;
  Rng rng_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Job> jobs_;
  std::map<uint64_t, Result> ordered_;
  std::deque<Result> unordered_;
  bool stopping_ = false;
  // Consumer-thread state.
  int in_flight_ = 0;
  uint64_t next_seq_ = 0, expect_seq_ = 0;
  bool child_ended_ = false;
  int64_t fed_in_child_pass_ = 0;
  std::vector<uint8_t> last_;  // the snapshot of the last datapoint given (empty: none since the pass began)
};

class Prefetch final : public DataFlow {
 public:
  Prefetch(DataFlowPtr df, int64_t capacity)
      : DataFlow("PrefetchData"), df_(std::move(df)), q_(static_cast<size_t>(capacity < 1 ? 1 : capacity)) {
    if (!df_) invalid_argument("no input dataflow");
    if (capacity < 1) invalid_argument("capacity must be >= 1, got " + std::to_string(capacity));
    df_->claim(kind());
  }
  ~Prefetch() override {
    stop_threads();
    df_->release();
  }

  bool next(Datapoint &dp) override {
    if (error_) std::rethrow_exception(error_);
    if (!thread_.joinable()) fail(TPT_ERR_STATE, "PrefetchData: not started (reset the dataflow first)");
    Item it;
    if (!q_.pop(it)) fail(TPT_ERR_STATE, "PrefetchData: stopped");
    if (it.error) {
      error_ = it.error;
      std::rethrow_exception(error_);
    }
    last_child_ = std::move(it.snapshot);
    if (it.end) return false;
    dp = std::move(it.dp);
    return true;
  }
  std::optional<int64_t> size() const override { return df_->size(); }

 protected:
  std::vector<DataFlow *> children() const override { return {df_.get()}; }
  void start_threads() override {
    q_.reset();
    error_ = nullptr;
    last_child_.clear();
    df_->save_tree(last_child_);  // nothing given yet: the input as it is before the thread reads it
    try {
      thread_ = std::thread([this] { produce(); });
    } catch (const std::system_error &e) {
      fail(TPT_ERR_INTERNAL, std::string("cannot start the prefetch thread: ") + e.what());
    }
  }
  // This node, then its input's state as of the last datapoint given.
  bool save_snapshot(std::vector<uint8_t> &out) const override {
    if (last_child_.empty()) return false;  // never started
    save_header(out);
    out.insert(out.end(), last_child_.begin(), last_child_.end());
    return true;
  }
  void stop_threads() override {
    q_.close();
    if (thread_.joinable()) thread_.join();
    q_.reset();
  }

 private:
  struct Item {
    Datapoint dp;
    bool end = false;
    std::exception_ptr error;
    std::vector<uint8_t> snapshot;  // the input's state after reading it
  };
  void produce() {
    try {
      for (;;) {
        Item it;
        it.end = !df_->next(it.dp);
        df_->save_tree(it.snapshot);
        if (!q_.push(std::move(it))) return;
      }
    } catch (...) {
      Item it;
      it.error = std::current_exception();
      q_.push(std::move(it));
    }
  }

  DataFlowPtr df_;
  BoundedQueue<Item> q_;
  std::thread thread_;
  std::exception_ptr error_;
  std::vector<uint8_t> last_child_;  // consumer side: the snapshot of the last item taken (empty: none)
};

}  // namespace

DataFlowPtr parallel_map(DataFlowPtr df, SeededMapFn fn, ParallelMapOptions options, std::string kind) {
  return std::make_shared<ParallelMap>(std::move(df), std::move(fn), options, std::move(kind));
}

DataFlowPtr prefetch(DataFlowPtr df, int64_t capacity) { return std::make_shared<Prefetch>(std::move(df), capacity); }

}  // namespace tpt::data
