// tensorpack's hyper-parameter setters (callbacks/param.py): callbacks that
// change an optimizer's hyper-parameter by name during training.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/callback.hpp"

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

}  // namespace tpt
