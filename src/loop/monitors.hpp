// tensorpack's Monitors: what a training puts (scalars, images), the
// scalars' history, and the moving summaries (add_moving_summary), brought to
// the monitor callbacks as RECORD events. One per Trainer
// (Trainer::monitors()). The built-in monitor callbacks (stats.json, the
// scalar printer) are in monitors.cpp too; TensorBoard's in tensorboard.cpp.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace tpt {

class Trainer;

// The latest entries of a scalar (at most TrainerConfig::scalar_history).
struct ScalarHistory {
  std::deque<int64_t> steps;
  std::deque<double> values;
};

// tensorpack's add_moving_summary: an exponential moving average with
// TensorFlow's zero-debiasing (assign_moving_average(zero_debias=True)):
// biased = decay * biased + (1 - decay) * x; value = biased / (1 - decay^n)
// after n updates.
struct MovingSummary {
  std::string name;
  double decay = 0.95;
  double biased = 0;
  int64_t count = 0;
  double value = 0;
  void update(double x);
};

class Monitors {
 public:
  explicit Monitors(Trainer &trainer) : t_(trainer) {}
  Monitors(const Monitors &) = delete;
  Monitors &operator=(const Monitors &) = delete;

  // Puts a scalar: recorded in the history with the current global_step and
  // brought to every monitor at once. While training runs only.
  void put_scalar(const std::string &name, double value);
  // Brings a uint8 N x H x W x C image to the monitors (not kept).
  void put_image(const std::string &name, const at::Tensor &image);
  const ScalarHistory *history(const std::string &name) const;
  const std::map<std::string, ScalarHistory> &histories() const { return history_; }

  // Updates the moving average `name` (tensorpack's add_moving_summary); it
  // reaches the monitors when put_summaries runs (MergeAllSummaries: the
  // last step of each epoch, and every summary_period steps).
  void add_moving_summary(const std::string &name, double value, double decay = 0.95);
  // Puts every moving summary updated so far as a scalar.
  void put_summaries();
  // Whether a moving summary was updated after the last put_summaries.
  bool summaries_pending() const { return summaries_pending_; }
  const MovingSummary *moving_summary(const std::string &name) const;
  // In order of first update (checkpoints keep them).
  const std::vector<MovingSummary> &moving_summaries() const { return summaries_; }
  void restore_moving_summaries(std::vector<MovingSummary> summaries) { summaries_ = std::move(summaries); }

 private:
  Trainer &t_;
  std::map<std::string, ScalarHistory> history_;
  std::vector<MovingSummary> summaries_;
  bool summaries_pending_ = false;
};

// The history of the scalar `stat` that the callback `who` watches
// (EarlyStopping, a best saver, StatMonitorParamSetter); nullptr while none
// has been put. At an epoch's end on the chief, a scalar never put is a
// wrong name: TPT_ERR_NOT_FOUND naming the scalars put, the closest first.
const ScalarHistory *watched_scalar(const Trainer &t, const std::string &who, const std::string &stat);

}  // namespace tpt
