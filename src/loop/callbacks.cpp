// Built-in callbacks: the step counter, the progress bar, the estimated time
// left, and the scheduling wrappers.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "loop/trainer.hpp"

namespace tpt {

namespace {

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------ step counter
// tensorpack's MaintainStepCounter: global_step advances after every hooked
// step, before the user callbacks' AFTER_RUN.
class StepCounter final : public Callback {
 public:
  StepCounter() : Callback("MaintainStepCounter", false) {}
  uint32_t events() const override { return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_AFTER_RUN; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    if (e == TPT_EVENT_AFTER_RUN) {
      t.increment_global_step();
    } else if (t.global_step() > 0) {
      t.log().info("Start training with global_step=" + std::to_string(t.global_step()));
    }
  }
};

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string rate_text(double per_second) {
  char buf[32];
  if (per_second >= 1 || per_second <= 0)
    std::snprintf(buf, sizeof buf, "%.2fit/s", per_second);
  else
    std::snprintf(buf, sizeof buf, "%.2fs/it", 1.0 / per_second);
  return buf;
}

// ------------------------------------------------------------ progress bar
// A bar per epoch on a terminal (stderr, redrawn at most 10 times a second);
// otherwise one plain line per epoch in the log.
class ProgressBar final : public Callback {
 public:
  explicit ProgressBar(tpt_progress mode) : Callback("ProgressBar", false) {
    bool tty = isatty(STDERR_FILENO) != 0;
    bar_ = mode == TPT_PROGRESS_BAR || (mode == TPT_PROGRESS_AUTO && tty);
    lines_ = mode == TPT_PROGRESS_LINES || (mode == TPT_PROGRESS_AUTO && !tty);
  }
  uint32_t events() const override {
    if (!bar_ && !lines_) return 0;
    return TPT_EVENT_BEFORE_EPOCH | TPT_EVENT_AFTER_EPOCH | (bar_ ? TPT_EVENT_TRIGGER_STEP : 0);
  }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    switch (e) {
      case TPT_EVENT_BEFORE_EPOCH:
        start_ = last_draw_ = Clock::now();
        done_ = 0;
        total_ = t.steps_per_epoch();
        if (bar_) draw(t, false);
        break;
      case TPT_EVENT_TRIGGER_STEP: {
        ++done_;
        auto now = Clock::now();
        if (now - last_draw_ >= std::chrono::milliseconds(100)) {
          last_draw_ = now;
          draw(t, false);
        }
        break;
      }
      case TPT_EVENT_AFTER_EPOCH:
        done_ = total_;
        if (bar_) draw(t, true);
        if (lines_) t.log().info(line(t));
        break;
      default: break;
    }
  }

 private:
  std::string line(Trainer &t) const {
    double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
    double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0;
    int pct = total_ > 0 ? static_cast<int>(100 * done_ / total_) : 100;
    char head[64];
    std::snprintf(head, sizeof head, "Epoch %lld: %3d%%", static_cast<long long>(t.epoch_num()), pct);
    std::string bar;
    if (bar_) {
      const int width = 30;
      int fill = total_ > 0 ? static_cast<int>(width * done_ / total_) : width;
      bar = "|" + std::string(static_cast<size_t>(fill), '#') + std::string(static_cast<size_t>(width - fill), ' ') + "|";
    }
    return std::string(head) + bar + " " + std::to_string(done_) + "/" + std::to_string(total_) + " [" +
           clock_text(elapsed) + "<" + clock_text(eta) + ", " + rate_text(rate) + "]";
  }
  void draw(Trainer &t, bool final) {
    std::string s = "\r" + line(t) + (final ? "\n" : "");
    std::fputs(s.c_str(), stderr);
    std::fflush(stderr);
  }

  bool bar_ = false, lines_ = false;
  Clock::time_point start_, last_draw_;
  int64_t done_ = 0, total_ = 0;
};

// ------------------------------------------------------------ estimated time left
// "12.34 seconds", "3 minutes 12 seconds", "2 days 4 hours": the two largest units.
std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "unknown";
  char buf[64];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.2f seconds", seconds);
    return buf;
  }
  const struct {
    const char *name;
    long long seconds;
  } units[] = {{"day", 86400}, {"hour", 3600}, {"minute", 60}, {"second", 1}};
  long long rest = static_cast<long long>(seconds);
  std::string out;
  int parts = 0;
  for (const auto &u : units) {
    long long n = rest / u.seconds;
    rest -= n * u.seconds;
    if (n == 0 && parts == 0) continue;
    if (n > 0) {
      std::snprintf(buf, sizeof buf, "%s%lld %s%s", out.empty() ? "" : " ", n, u.name, n == 1 ? "" : "s");
      out += buf;
    }
    if (++parts == 2) break;
  }
  return out;
}

class EstimatedTimeLeft final : public Callback {
 public:
  explicit EstimatedTimeLeft(int last_k) : Callback("EstimatedTimeLeft", true), last_k_(last_k) {}
  uint32_t events() const override { return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER_EPOCH; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    auto now = Clock::now();
    if (e == TPT_EVENT_BEFORE_TRAIN) {
      last_ = now;
      return;
    }
    durations_.push_back(std::chrono::duration<double>(now - last_).count());
    last_ = now;
    if (durations_.size() > static_cast<size_t>(last_k_)) durations_.pop_front();
    int64_t left = t.config().max_epoch - t.epoch_num();
    if (left <= 0) return;
    std::vector<double> sorted(durations_.begin(), durations_.end());
    std::sort(sorted.begin(), sorted.end());
    double median = sorted[sorted.size() / 2];
    t.log().info("Estimated Time Left: " + human_duration(median * static_cast<double>(left)));
  }

 private:
  int last_k_;
  Clock::time_point last_;
  std::deque<double> durations_;
};

// ------------------------------------------------------------ wrappers
constexpr uint32_t kPerStepOrEpoch = TPT_EVENT_BEFORE_EPOCH | TPT_EVENT_AFTER_EPOCH | TPT_EVENT_BEFORE_RUN |
                                     TPT_EVENT_AFTER_RUN | TPT_EVENT_TRIGGER_STEP | TPT_EVENT_TRIGGER_EPOCH;

class PeriodicTrigger final : public Callback {
 public:
  PeriodicTrigger(std::unique_ptr<Callback> inner, int64_t ks, int64_t ke, bool before_train)
      : Callback("PeriodicTrigger(" + inner->name() + ")", inner->chief_only()),
        inner_(std::move(inner)), ks_(ks), ke_(ke), before_train_(before_train) {}
  uint32_t events() const override {
    uint32_t m = inner_->events() & ~(TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_TRIGGER);
    if (ks_ > 0) m |= TPT_EVENT_TRIGGER_STEP;
    if (ke_ > 0) m |= TPT_EVENT_TRIGGER_EPOCH;
    if (before_train_) m |= TPT_EVENT_BEFORE_TRAIN;
    return m;
  }
  void on_event(Trainer &t, tpt_event e, const Record *r) override {
    uint32_t inner_mask = inner_->events();
    switch (e) {
      case TPT_EVENT_TRIGGER_STEP:
        if (inner_mask & TPT_EVENT_TRIGGER_STEP) inner_->on_event(t, e, r);
        if (ks_ > 0 && t.global_step() % ks_ == 0) trigger(t);
        break;
      case TPT_EVENT_TRIGGER_EPOCH:  // replaced, not forwarded
        if (ke_ > 0 && t.epoch_num() % ke_ == 0) trigger(t);
        break;
      case TPT_EVENT_BEFORE_TRAIN:
        if (inner_mask & TPT_EVENT_BEFORE_TRAIN) inner_->on_event(t, e, r);
        if (before_train_) trigger(t);
        break;
      default:
        if (inner_mask & e) inner_->on_event(t, e, r);
    }
  }

  bool save_state(std::vector<uint8_t> &out) override { return inner_->save_state(out); }
  void check_state(const std::vector<uint8_t> &state) const override { inner_->check_state(state); }
  void restore_state(const std::vector<uint8_t> &state) override { inner_->restore_state(state); }
  Place place() const override { return inner_->place(); }

 private:
  void trigger(Trainer &t) {
    if (inner_->events() & TPT_EVENT_TRIGGER) inner_->on_event(t, TPT_EVENT_TRIGGER, nullptr);
  }
  std::unique_ptr<Callback> inner_;
  int64_t ks_, ke_;
  bool before_train_;
};

class EnableCallbackIf final : public Callback {
 public:
  EnableCallbackIf(std::unique_ptr<Callback> inner, Predicate pred, std::string label)
      : Callback(label + "(" + inner->name() + ")", inner->chief_only()), inner_(std::move(inner)),
        pred_(std::move(pred)) {}
  uint32_t events() const override {
    uint32_t m = inner_->events();
    if (m & TPT_EVENT_AFTER_RUN) m |= TPT_EVENT_BEFORE_RUN;  // the decision is made in before_run
    // Take TRIGGER_EPOCH itself (not the TRIGGER it defaults to), so that the
    // predicate gates an inner callback's default trigger_epoch -> trigger.
    if (m & TPT_EVENT_TRIGGER) m |= TPT_EVENT_TRIGGER_EPOCH;
    return m;
  }
  void on_event(Trainer &t, tpt_event e, const Record *r) override {
    if (!(e & kPerStepOrEpoch)) {
      deliver(*inner_, t, e, r);
      return;
    }
    if (e == TPT_EVENT_AFTER_RUN) {
      if (enabled_for_run_) deliver(*inner_, t, e, r);
      return;
    }
    bool on = pred_(t);
    if (e == TPT_EVENT_BEFORE_RUN) enabled_for_run_ = on;
    if (on) deliver(*inner_, t, e, r);
  }

  bool save_state(std::vector<uint8_t> &out) override { return inner_->save_state(out); }
  void check_state(const std::vector<uint8_t> &state) const override { inner_->check_state(state); }
  void restore_state(const std::vector<uint8_t> &state) override { inner_->restore_state(state); }
  Place place() const override { return inner_->place(); }

 private:
  std::unique_ptr<Callback> inner_;
  Predicate pred_;
  bool enabled_for_run_ = false;
};

// tensorpack's callbacks/summary.py, MergeAllSummaries_RunWithOp._need_run:
// the moving summaries reach the monitors after an epoch's last step, and
// after every `period` steps when period > 0. Unlike tensorpack, a run that
// ends mid-epoch (a stop request, the end of the data) puts them once more
// in after_train, so its last steps are not lost.
class MergeAllSummaries final : public Callback {
 public:
  explicit MergeAllSummaries(int64_t period) : Callback("MergeAllSummaries", true), period_(period) {}
  uint32_t events() const override { return TPT_EVENT_AFTER_RUN | TPT_EVENT_AFTER_TRAIN; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    if (e == TPT_EVENT_AFTER_TRAIN) {
      if (t.monitors().summaries_pending()) t.monitors().put_summaries();
      return;
    }
    int64_t k = t.local_step();
    if (k == t.steps_per_epoch() - 1 || (period_ > 0 && (k + 1) % period_ == 0)) t.monitors().put_summaries();
  }

 private:
  int64_t period_;
};

void check_periods(int64_t ks, int64_t ke, bool allow_none) {
  if (ks < 0) invalid_argument("every_k_steps must be >= 0, got " + std::to_string(ks));
  if (ke < 0) invalid_argument("every_k_epochs must be >= 0, got " + std::to_string(ke));
  if (!allow_none && ks == 0 && ke == 0) invalid_argument("set every_k_steps or every_k_epochs (both are 0)");
}

}  // namespace

std::unique_ptr<Callback> make_merge_all_summaries(int64_t period) {
  return std::make_unique<MergeAllSummaries>(period);
}
std::unique_ptr<Callback> make_step_counter() { return std::make_unique<StepCounter>(); }
std::unique_ptr<Callback> make_progress_bar(tpt_progress mode) { return std::make_unique<ProgressBar>(mode); }
std::unique_ptr<Callback> make_estimated_time_left(int last_k_epochs) {
  return std::make_unique<EstimatedTimeLeft>(last_k_epochs);
}

std::unique_ptr<Callback> make_periodic_trigger(std::unique_ptr<Callback> inner, int64_t ks, int64_t ke,
                                                bool before_train) {
  check_periods(ks, ke, before_train);
  return std::make_unique<PeriodicTrigger>(std::move(inner), ks, ke, before_train);
}

std::unique_ptr<Callback> make_enable_if(std::unique_ptr<Callback> inner, Predicate predicate) {
  return std::make_unique<EnableCallbackIf>(std::move(inner), std::move(predicate), "EnableCallbackIf");
}

std::unique_ptr<Callback> make_periodic(std::unique_ptr<Callback> inner, int64_t ks, int64_t ke) {
  check_periods(ks, ke, false);
  Predicate pred = [ks, ke](Trainer &t) {
    if (ks > 0 && t.global_step() % ks == 0) return true;
    if (ke > 0 && t.epoch_num() % ke == 0) return true;
    if (ke > 0 && t.epoch_num() == t.config().max_epoch && t.local_step() == t.steps_per_epoch() - 1)
      return true;
    return false;
  };
  return std::make_unique<EnableCallbackIf>(std::move(inner), std::move(pred), "PeriodicCallback");
}

}  // namespace tpt
