// The rest of the callback catalogue (include/tptrain.h, "More callbacks"):
// early stopping, TerminateOnNaN, tensorpack's ThroughputTracker and
// HostMemoryTracker, and a step watchdog.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "loop/trainer.hpp"

namespace tpt {

namespace {

using Clock = std::chrono::steady_clock;

std::string number(double v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

// ------------------------------------------------------------ early stopping
class EarlyStopping final : public Callback {
 public:
  EarlyStopping(std::string stat, EarlyStoppingOptions o)
      : Callback("EarlyStopping(" + stat + ")", false), stat_(std::move(stat)), o_(o) {}
  uint32_t events() const override { return TPT_EVENT_TRIGGER; }
  Place place() const override { return Place::ReadsScalars; }
  void on_event(Trainer &t, tpt_event, const Record *) override {
    const ScalarHistory *h = watched_scalar(t, name(), stat_);
    if (!h) {
      t.log().warn(name() + ": the scalar " + stat_ + " has not been put yet");
      return;
    }
    int64_t step = h->steps.back();
    double v = h->values.back();
    if (s_.seen && step == s_.last_step) return;  // no new value since the last check
    s_.seen = true;
    s_.last_step = step;
    bool better = !s_.has_best || (o_.maximize ? v > s_.best + o_.min_delta : v < s_.best - o_.min_delta);
    if (std::isnan(v)) better = false;
    if (better) {
      s_.has_best = true;
      s_.best = v;
      s_.best_step = step;
      s_.wait = 0;
      return;
    }
    if (++s_.wait < o_.patience) return;
    std::string reason = "EarlyStopping: " + stat_ + " has not " + (o_.maximize ? "risen above" : "fallen below") +
                         " its best";
    if (s_.has_best) reason += ", " + number(s_.best) + " at global_step " + std::to_string(s_.best_step) + ",";
    reason += " by more than " + number(o_.min_delta) + " in " + std::to_string(o_.patience) + " new value" +
              (o_.patience == 1 ? "" : "s");
    throw StopTraining(reason);
  }
  bool save_state(std::vector<uint8_t> &out) override {
    out.resize(sizeof s_);
    std::memcpy(out.data(), &s_, sizeof s_);
    return true;
  }
  void check_state(const std::vector<uint8_t> &state) const override {
    if (state.size() != sizeof s_)
      invalid_argument(name() + ": the checkpoint's state has " + std::to_string(state.size()) + " bytes, not " +
                       std::to_string(sizeof s_));
  }
  void restore_state(const std::vector<uint8_t> &state) override {
    check_state(state);
    State s;
    std::memcpy(&s, state.data(), sizeof s);
    s_ = s;
  }

 private:
  struct State {  // saved as its bytes (one machine's layout: checkpoints are not portable across ABIs anyway)
    double best = 0;
    int64_t best_step = 0, last_step = 0, wait = 0;
    int32_t has_best = 0, seen = 0;
  };
  std::string stat_;
  EarlyStoppingOptions o_;
  State s_;
};

// ------------------------------------------------------------ TerminateOnNaN
class TerminateOnNaN final : public Callback {
 public:
  explicit TerminateOnNaN(std::vector<std::string> outputs)
      : Callback("TerminateOnNaN", false), outputs_(std::move(outputs)) {}
  uint32_t events() const override { return TPT_EVENT_BEFORE_EPOCH | TPT_EVENT_AFTER_RUN | TPT_EVENT_TRIGGER_STEP; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    if (e == TPT_EVENT_BEFORE_EPOCH) {
      checked_ = false;
      return;
    }
    if (e == TPT_EVENT_TRIGGER_STEP && checked_) {
      checked_ = false;  // the step's hooked runs were checked already
      return;
    }
    checked_ = e == TPT_EVENT_AFTER_RUN;
    for (const std::string &n : outputs_) {
      const Output *o = t.output(n);
      if (!o || o->tensor) continue;  // not (yet) an output of this run_step, or not a scalar
      if (!std::isfinite(o->scalar))
        throw StopTraining("TerminateOnNaN: the output " + n + " is " + number(o->scalar) + " at global_step " +
                           std::to_string(t.global_step()) + " (epoch " + std::to_string(t.epoch_num()) +
                           "); training stopped before any checkpoint of this step");
    }
  }

 private:
  std::vector<std::string> outputs_;
  bool checked_ = false;
};

// ------------------------------------------------------------ throughput
class ThroughputTracker final : public Callback {
 public:
  explicit ThroughputTracker(int64_t samples) : Callback("ThroughputTracker", false), samples_(samples) {}
  uint32_t events() const override {
    return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_BEFORE_EPOCH | TPT_EVENT_AFTER_EPOCH | TPT_EVENT_TRIGGER;
  }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    auto now = Clock::now();
    switch (e) {
      case TPT_EVENT_BEFORE_TRAIN:
        last_step_ = t.global_step();
        elapsed_ = 0;
        running_ = false;
        break;
      case TPT_EVENT_BEFORE_EPOCH:
        start_ = now;
        running_ = true;
        break;
      case TPT_EVENT_AFTER_EPOCH:
        if (running_) elapsed_ += std::chrono::duration<double>(now - start_).count();
        running_ = false;
        break;
      default: {  // TRIGGER
        double secs = elapsed_ + (running_ ? std::chrono::duration<double>(now - start_).count() : 0.0);
        int64_t steps = t.global_step() - last_step_;
        if (secs > 0 && steps > 0) {
          double per_sec = static_cast<double>(steps) / secs;
          if (samples_ > 0)
            t.monitors().put_scalar("Throughput (samples/sec)", per_sec * static_cast<double>(samples_));
          else
            t.monitors().put_scalar("Throughput (steps/sec)", per_sec);
        }
        last_step_ = t.global_step();
        elapsed_ = 0;
        if (running_) start_ = now;
        break;
      }
    }
  }

 private:
  int64_t samples_;
  int64_t last_step_ = 0;
  double elapsed_ = 0;
  bool running_ = false;
  Clock::time_point start_;
};

// ------------------------------------------------------------ step watchdog
// A thread waits for the running step's deadline; the training thread marks
// where steps start and end.
class StepWatchdog final : public Callback {
 public:
  explicit StepWatchdog(double timeout) : Callback("StepWatchdog", false), timeout_(timeout) {}
  ~StepWatchdog() override { stop(); }
  uint32_t events() const override {
    return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_BEFORE_EPOCH | TPT_EVENT_TRIGGER_STEP | TPT_EVENT_AFTER_EPOCH |
           TPT_EVENT_AFTER_TRAIN;
  }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    switch (e) {
      case TPT_EVENT_BEFORE_TRAIN: start(t); break;
      case TPT_EVENT_BEFORE_EPOCH: begin_step(t); break;
      case TPT_EVENT_TRIGGER_STEP: {
        double took = end_step();
        if (took > timeout_)
          fail(TPT_ERR_TIMEOUT, "StepWatchdog: the step to global_step " + std::to_string(t.global_step()) + " took " +
                                    number(took) + " s, over the timeout of " + number(timeout_) + " s");
        if (t.local_step() + 1 < t.steps_per_epoch()) begin_step(t);
        break;
      }
      case TPT_EVENT_AFTER_EPOCH: end_step(); break;
      default: stop(); break;  // AFTER_TRAIN
    }
  }

 private:
  void start(Trainer &t) {
    stop();
    std::lock_guard<std::mutex> l(mu_);
    quit_ = false;
    running_ = false;
    trainer_ = &t;
    thread_ = std::thread([this] { watch(); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void begin_step(Trainer &t) {
    {
      std::lock_guard<std::mutex> l(mu_);
      running_ = true;
      reported_ = false;
      started_ = Clock::now();
      step_ = t.global_step() + 1;
    }
    cv_.notify_all();
  }
  // The step's time in seconds (0 when none was running).
  double end_step() {
    std::lock_guard<std::mutex> l(mu_);
    if (!running_) return 0;
    running_ = false;
    return std::chrono::duration<double>(Clock::now() - started_).count();
  }
  void watch() {
    std::unique_lock<std::mutex> l(mu_);
    const auto limit = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
    while (!quit_) {
      if (!running_ || reported_) {
        cv_.wait(l);
        continue;
      }
      auto deadline = started_ + limit;
      if (Clock::now() < deadline) {
        cv_.wait_until(l, deadline);
        continue;
      }
      reported_ = true;
      std::string msg = "StepWatchdog: the step to global_step " + std::to_string(step_) + " has run for more than " +
                        number(timeout_) + " s; training fails when it returns";
      Trainer *t = trainer_;
      l.unlock();
      t->log().error(msg);
      l.lock();
    }
  }

  double timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool quit_ = false, running_ = false, reported_ = false;
  Clock::time_point started_;
  int64_t step_ = 0;
  Trainer *trainer_ = nullptr;
};

// ------------------------------------------------------------ host memory
std::optional<double> meminfo_kb(const char *key) {
  std::ifstream in("/proc/meminfo");
  std::string k;
  double v;
  std::string unit;
  while (in >> k >> v) {
    std::getline(in, unit);
    if (k == key) return v;
  }
  return std::nullopt;
}

double resident_mb() {
  std::ifstream in("/proc/self/statm");
  double size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

class HostMemoryTracker final : public Callback {
 public:
  HostMemoryTracker() : Callback("HostMemoryTracker", false) {}
  uint32_t events() const override { return TPT_EVENT_SETUP | TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    double free_gb = meminfo_kb("MemAvailable:").value_or(0) / (1024.0 * 1024.0);
    if (e != TPT_EVENT_TRIGGER) {
      t.log().info("HostMemoryTracker: free RAM " + number(free_gb) + " GB, this process " + number(resident_mb()) +
                   " MB resident");
      return;
    }
    t.monitors().put_scalar("HostFreeMemory (GB)", free_gb);
    t.monitors().put_scalar("HostResidentMemory (MB)", resident_mb());
  }
};

}  // namespace

std::unique_ptr<Callback> make_early_stopping(std::string stat, EarlyStoppingOptions o) {
  if (stat.empty()) invalid_argument("EarlyStopping needs a stat name");
  if (o.patience < 1) invalid_argument("options.patience is " + std::to_string(o.patience) + ": it must be >= 1");
  if (!(o.min_delta >= 0) || !std::isfinite(o.min_delta))
    invalid_argument("options.min_delta must be finite and >= 0, not " + number(o.min_delta));
  return std::make_unique<EarlyStopping>(std::move(stat), o);
}

std::unique_ptr<Callback> make_terminate_on_nan(std::vector<std::string> outputs) {
  if (outputs.empty()) outputs.push_back("cost");
  return std::make_unique<TerminateOnNaN>(std::move(outputs));
}

std::unique_ptr<Callback> make_throughput_tracker(int64_t samples_per_step) {
  if (samples_per_step < 0)
    invalid_argument("samples_per_step is " + std::to_string(samples_per_step) + ": it must be >= 0");
  return std::make_unique<ThroughputTracker>(samples_per_step);
}

std::unique_ptr<Callback> make_step_watchdog(double timeout_seconds) {
  if (!(timeout_seconds > 0) || !(timeout_seconds <= 1e9))
    invalid_argument("timeout_seconds must be in (0, 1e9], not " + number(timeout_seconds));
  return std::make_unique<StepWatchdog>(timeout_seconds);
}

std::unique_ptr<Callback> make_host_memory_tracker() {
  if (!meminfo_kb("MemAvailable:")) fail(TPT_ERR_UNSUPPORTED, "HostMemoryTracker needs Linux's /proc/meminfo");
  return std::make_unique<HostMemoryTracker>();
}

}  // namespace tpt
