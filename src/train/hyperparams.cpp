// tensorpack's ScheduledHyperParamSetter (callbacks/param.py), step by step.
#include "train/hyperparams.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <sstream>

#include "base/error.hpp"
#include "base/files.hpp"
#include "loop/trainer.hpp"
#include "model/optimizer.hpp"

namespace tpt {

namespace {

std::string number(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

// HyperParamSetter._set_param: sets and logs a value that differs.
void set_param(Trainer &t, model::Optimizer &opt, const std::string &param, double v) {
  if (!std::isfinite(v)) fail(TPT_ERR_CALLBACK, "HyperParamSetter: the value for " + param + " is not finite: " + number(v));
  double old = opt.get(param);
  if (old == v) return;
  opt.set(param, v);
  t.log().info("[HyperParamSetter] At global_step=" + std::to_string(t.global_step()) + ", " + param +
               " changes from " + number(old) + " to " + number(v));
}

class ScheduledHyperParam final : public Callback {
 public:
  ScheduledHyperParam(std::shared_ptr<model::Optimizer> opt, std::string param, std::vector<SchedulePoint> schedule,
                      bool linear, bool step_based, bool set_at_beginning)
      : Callback("ScheduledHyperParamSetter(" + param + ")", /*chief_only=*/false),
        opt_(std::move(opt)),
        param_(std::move(param)),
        schedule_(std::move(schedule)),
        linear_(linear),
        step_based_(step_based),
        set_at_beginning_(set_at_beginning) {}

  uint32_t events() const override {
    return TPT_EVENT_BEFORE_TRAIN | (step_based_ ? TPT_EVENT_TRIGGER_STEP : TPT_EVENT_TRIGGER_EPOCH);
  }

  void on_event(Trainer &t, tpt_event e, const Record *) override {
    int64_t ref = step_based_ ? t.global_step() : t.epoch_num();
    if (e == TPT_EVENT_BEFORE_TRAIN) {
      // The epochs completed: starting_epoch - 1 in a new run (tensorpack's
      // epoch_num there), one less than the epoch a resume goes on in.
      if (!step_based_) ref = t.next_epoch() - 1;
      // HyperParamSetter._before_train: a trigger; then the check of what
      // should hold now (ScheduledHyperParamSetter's set_at_beginning).
      if (auto v = value_to_set(ref)) set(t, *v);
      if (auto want = value_at(ref)) {
        double now = opt_->get(param_);
        if (!close(now, *want)) {
          t.log().warn(name() + ": " + param_ + " is " + number(now) + " but the schedule says " + number(*want) +
                       " at " + (step_based_ ? "global_step " : "epoch ") + std::to_string(ref) +
                       (set_at_beginning_ ? "; setting it" : ""));
          if (set_at_beginning_) set(t, *want);
        }
      }
      return;
    }
    if (auto v = value_to_set(ref)) set(t, *v);
  }

 private:
  static bool close(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

  // tensorpack's _get_value_to_set: the value of the point at `ref`, or
  // with interpolation the value between the points around it; nothing
  // before the first point, after the last, or between points without it.
  std::optional<double> value_to_set(int64_t ref) const {
    const SchedulePoint *last = nullptr;
    for (const SchedulePoint &p : schedule_) {
      if (p.at == ref) return p.value;
      if (p.at > ref) {
        if (!last || !linear_) return std::nullopt;
        return static_cast<double>(ref - last->at) / static_cast<double>(p.at - last->at) * (p.value - last->value) +
               last->value;
      }
      last = &p;
    }
    return std::nullopt;
  }

  // What should hold at `ref` given every point up to it: the last point's
  // value, or the interpolation; nothing before the first point.
  std::optional<double> value_at(int64_t ref) const {
    if (auto v = value_to_set(ref)) return v;
    const SchedulePoint *last = nullptr;
    for (const SchedulePoint &p : schedule_)
      if (p.at <= ref) last = &p;
    if (!last) return std::nullopt;
    return last->value;
  }

  void set(Trainer &t, double v) { set_param(t, *opt_, param_, v); }

  std::shared_ptr<model::Optimizer> opt_;
  std::string param_;
  std::vector<SchedulePoint> schedule_;
  bool linear_, step_based_, set_at_beginning_;
};

// The number of finished epochs: in BEFORE_TRAIN the one before the first
// epoch this run trains (starting_epoch - 1, or a resume's), else epoch_num.
int64_t epochs_done(Trainer &t, tpt_event e) { return e == TPT_EVENT_BEFORE_TRAIN ? t.next_epoch() - 1 : t.epoch_num(); }

class HyperParamFunc final : public Callback {
 public:
  HyperParamFunc(std::shared_ptr<model::Optimizer> opt, std::string param, HyperParamFn fn)
      : Callback("HyperParamSetterWithFunc(" + param + ")", false), opt_(std::move(opt)), param_(std::move(param)),
        fn_(std::move(fn)) {}
  uint32_t events() const override { return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    set_param(t, *opt_, param_, fn_(epochs_done(t, e), opt_->get(param_)));
  }

 private:
  std::shared_ptr<model::Optimizer> opt_;
  std::string param_;
  HyperParamFn fn_;
};

class StatMonitorParam final : public Callback {
 public:
  StatMonitorParam(std::shared_ptr<model::Optimizer> opt, std::string param, std::string stat, StatMonitorOptions o)
      : Callback("StatMonitorParamSetter(" + param + ")", false), opt_(std::move(opt)), param_(std::move(param)),
        stat_(std::move(stat)), o_(o) {}
  uint32_t events() const override { return TPT_EVENT_TRIGGER; }  // not in BEFORE_TRAIN (tensorpack)
  Place place() const override { return Place::ReadsScalars; }
  void on_event(Trainer &t, tpt_event, const Record *) override {
    const ScalarHistory *h = watched_scalar(t, name(), stat_);
    if (!h) {
      t.log().warn(name() + ": the scalar " + stat_ + " has not been put; nothing to monitor");
      return;
    }
    std::pair<int64_t, double> last{h->steps.back(), h->values.back()};
    if (!window_.empty() && window_.back().first == last.first) {
      t.log().warn(name() + " is triggered, but no new value of " + stat_ + " has been put since last time");
      return;
    }
    window_.push_back(last);
    if (static_cast<int64_t>(window_.size()) > o_.last_k) window_.pop_front();
    if (static_cast<int64_t>(window_.size()) < o_.last_k) return;
    double first = window_.front().second, best = first;
    for (const auto &p : window_) best = o_.maximize ? std::max(best, p.second) : std::min(best, p.second);
    if (o_.maximize ? best > first + o_.threshold : best < first - o_.threshold) return;  // it moved enough
    window_.clear();
    double v = opt_->get(param_) * o_.factor;
    if (o_.limit > 0) v = o_.factor < 1 ? std::max(v, o_.limit) : std::min(v, o_.limit);
    t.log().info(name() + ": " + stat_ + " has not " + (o_.maximize ? "grown" : "fallen") + " by more than " +
                 number(o_.threshold) + " in its last " + std::to_string(o_.last_k) + " values");
    set_param(t, *opt_, param_, v);
  }
  bool save_state(std::vector<uint8_t> &out) override {
    out.clear();
    auto put = [&](const void *p, size_t n) {
      out.insert(out.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n);
    };
    uint64_t n = window_.size();
    put(&n, 8);
    for (const auto &p : window_) {
      put(&p.first, 8);
      put(&p.second, 8);
    }
    return true;
  }
  void check_state(const std::vector<uint8_t> &state) const override {
    uint64_t n = 0;
    if (state.size() >= 8) std::memcpy(&n, state.data(), 8);
    if (state.size() < 8 || n > static_cast<uint64_t>(o_.last_k) || state.size() != 8 + 16 * n)
      invalid_argument(name() + ": the checkpoint's state has " + std::to_string(state.size()) +
                       " bytes, not a window of at most " + std::to_string(o_.last_k) + " values");
  }
  void restore_state(const std::vector<uint8_t> &state) override {
    check_state(state);
    uint64_t n = 0;
    std::memcpy(&n, state.data(), 8);
    std::deque<std::pair<int64_t, double>> w;
    for (uint64_t i = 0; i < n; ++i) {
      std::pair<int64_t, double> p;
      std::memcpy(&p.first, state.data() + 8 + 16 * i, 8);
      std::memcpy(&p.second, state.data() + 16 + 16 * i, 8);
      w.push_back(p);
    }
    window_ = std::move(w);
  }

 private:
  std::shared_ptr<model::Optimizer> opt_;
  std::string param_, stat_;
  StatMonitorOptions o_;
  std::deque<std::pair<int64_t, double>> window_;  // (global_step, value), oldest first
};

class HumanHyperParam final : public Callback {
 public:
  HumanHyperParam(std::shared_ptr<model::Optimizer> opt, std::string param, std::string file)
      : Callback("HumanHyperParamSetter(" + param + ")", false), opt_(std::move(opt)), param_(std::move(param)),
        file_(std::move(file)) {}
  uint32_t events() const override { return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    if (e == TPT_EVENT_BEFORE_TRAIN) {
      path_ = file_;
      if (!file_.empty() && file_[0] != '/') {
        if (!t.has_logdir())
          fail(TPT_ERR_STATE, name() + ": the file " + file_ +
                                  " is relative to the log directory, and the trainer has none (give options.logdir "
                                  "or an absolute path)");
        path_ = t.logdir() + "/" + file_;
      }
    }
    std::error_code exists_ec;
    if (!std::filesystem::exists(path_, exists_ec)) return;  // no file: no change
    std::istringstream in;
    try {
      in.str(read_file(path_));  // a FIFO or a device is refused, not waited on
    } catch (const Error &e) {
      if (e.code() != TPT_ERR_IO) throw;
      report_.failed(t.log(), name() + ": " + e.what() + "; " + param_ + " is unchanged");
      return;
    }
    report_.succeeded(t.log(), name() + ": reading " + path_);
    std::string line;
    std::optional<double> value;
    for (int n = 1; std::getline(in, line); ++n) {
      auto trim = [](std::string s) {
        size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
        return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
      };
      line = trim(line);
      if (line.empty() || line[0] == '#') continue;
      size_t colon = line.find(':');
      if (colon == std::string::npos) {
        t.log().warn(name() + ": " + path_ + " line " + std::to_string(n) + " is not name:value: " + line);
        continue;
      }
      if (trim(line.substr(0, colon)) != param_) continue;
      std::string text = trim(line.substr(colon + 1));
      char *end = nullptr;
      errno = 0;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v)) {
        t.log().warn(name() + ": " + path_ + " line " + std::to_string(n) + ": " + text + " is not a finite number");
        continue;
      }
      value = v;
    }
    if (value) set_param(t, *opt_, param_, *value);
  }

 private:
  std::shared_ptr<model::Optimizer> opt_;
  std::string param_, file_, path_;
  FailureReport report_;
};

}  // namespace

std::unique_ptr<Callback> make_hyperparam_func(std::shared_ptr<model::Optimizer> optimizer, std::string param,
                                               HyperParamFn fn) {
  optimizer->get(param);
  if (!fn) invalid_argument("HyperParamSetterWithFunc needs a function");
  return std::make_unique<HyperParamFunc>(std::move(optimizer), std::move(param), std::move(fn));
}

std::unique_ptr<Callback> make_stat_monitor_param(std::shared_ptr<model::Optimizer> optimizer, std::string param,
                                                  std::string stat, StatMonitorOptions o) {
  optimizer->get(param);
  if (stat.empty()) invalid_argument("StatMonitorParamSetter needs a stat name");
  if (o.last_k < 2 || o.last_k > 1000000)
    invalid_argument("options.last_k is " + std::to_string(o.last_k) + ": it must be in [2, 1000000]");
  if (!(o.threshold >= 0) || !std::isfinite(o.threshold))
    invalid_argument("options.threshold must be finite and >= 0, not " + number(o.threshold));
  if (!(o.factor > 0) || !std::isfinite(o.factor))
    invalid_argument("options.factor must be finite and > 0, not " + number(o.factor));
  if (!(o.limit >= 0) || !std::isfinite(o.limit))
    invalid_argument("options.limit must be finite and >= 0, not " + number(o.limit));
  return std::make_unique<StatMonitorParam>(std::move(optimizer), std::move(param), std::move(stat), o);
}

std::unique_ptr<Callback> make_human_hyperparam(std::shared_ptr<model::Optimizer> optimizer, std::string param,
                                                std::string file) {
  optimizer->get(param);
  if (file.empty()) file = "hyper.txt";
  return std::make_unique<HumanHyperParam>(std::move(optimizer), std::move(param), std::move(file));
}

std::unique_ptr<Callback> make_scheduled_hyperparam(std::shared_ptr<model::Optimizer> optimizer, std::string param,
                                                    std::vector<SchedulePoint> schedule, bool linear, bool step_based,
                                                    bool set_at_beginning) {
  optimizer->get(param);  // an unknown name fails here, naming the optimizer's names
  if (schedule.empty()) invalid_argument("the schedule is empty");
  std::sort(schedule.begin(), schedule.end(), [](const SchedulePoint &a, const SchedulePoint &b) { return a.at < b.at; });
  for (size_t i = 0; i < schedule.size(); ++i) {
    const SchedulePoint &p = schedule[i];
    if (p.at < 0) invalid_argument("schedule point " + std::to_string(p.at) + " is negative");
    if (!std::isfinite(p.value)) invalid_argument("the value at schedule point " + std::to_string(p.at) + " is not finite");
    if (i > 0 && schedule[i - 1].at == p.at)
      invalid_argument("the schedule has two values at " + std::to_string(p.at));
  }
  return std::make_unique<ScheduledHyperParam>(std::move(optimizer), std::move(param), std::move(schedule), linear,
                                               step_based, set_at_beginning);
}

}  // namespace tpt
