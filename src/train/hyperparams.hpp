// tensorpack's hyper-parameter setters (callbacks/param.py): callbacks that
// change an optimizer's hyper-parameter by name during training.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loop/callback.hpp"

namespace tpt {

namespace model {
class Optimizer;
}

// One point of a schedule: from epoch (or global step) `at` on, `value`.
struct SchedulePoint {
  int64_t at;
  double value;
};

// ScheduledHyperParamSetter(param, schedule, interp, step_based,
// set_at_beginning): each point sets the value after epoch `at` completes
// (TRIGGER_EPOCH with epoch_num == at; at = 0 means before the first epoch,
// in BEFORE_TRAIN), or at global step `at` with step_based (TRIGGER_STEP).
// With `linear` the value is interpolated between points on every trigger,
// never extrapolated. In BEFORE_TRAIN the value that should hold at the
// current point is computed from the points up to it; when it differs from
// the optimizer's, a warning says so and, with set_at_beginning, it is set
// (what makes a resumed run use the schedule's value). The schedule is
// sorted; points must be >= 0, distinct and finite.
std::unique_ptr<Callback> make_scheduled_hyperparam(std::shared_ptr<model::Optimizer> optimizer, std::string param,
                                                    std::vector<SchedulePoint> schedule, bool linear, bool step_based,
                                                    bool set_at_beginning);

// HyperParamSetterWithFunc: in BEFORE_TRAIN and at every TRIGGER,
// fn(epochs finished, current value) gives the value to set; fn may throw.
using HyperParamFn = std::function<double(int64_t epoch_num, double current)>;
std::unique_ptr<Callback> make_hyperparam_func(std::shared_ptr<model::Optimizer> optimizer, std::string param,
                                               HyperParamFn fn);

// StatMonitorParamSetter, with value_func "current * factor", never past
// `limit` (0: no limit).
struct StatMonitorOptions {
  int64_t last_k = 5;
  double threshold = 0;
  bool maximize = false;
  double factor = 0.1;
  double limit = 0;
};
std::unique_ptr<Callback> make_stat_monitor_param(std::shared_ptr<model::Optimizer> optimizer, std::string param,
                                                  std::string stat, StatMonitorOptions options);

// HumanHyperParamSetter: `file` (relative: in the log directory) holds
// lines "name:value".
std::unique_ptr<Callback> make_human_hyperparam(std::shared_ptr<model::Optimizer> optimizer, std::string param,
                                                std::string file);

}  // namespace tpt
