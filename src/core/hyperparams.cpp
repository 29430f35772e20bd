// tensorpack's ScheduledHyperParamSetter (callbacks/param.py), step by step.
#include "core/hyperparams.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "core/error.hpp"
#include "core/trainer.hpp"
#include "model/optimizer.hpp"

namespace tpt {

namespace {

std::string number(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
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

  void set(Trainer &t, double v) {
    double old = opt_->get(param_);
    if (old == v) return;
    opt_->set(param_, v);
    t.log().info("[HyperParamSetter] At global_step=" + std::to_string(t.global_step()) + ", " + param_ +
                 " changes from " + number(old) + " to " + number(v));
  }

  std::shared_ptr<model::Optimizer> opt_;
  std::string param_;
  std::vector<SchedulePoint> schedule_;
  bool linear_, step_based_, set_at_beginning_;
};

}  // namespace

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
