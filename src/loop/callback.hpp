// The callback interface of the loop. Everything that reacts to the loop's
// events is a Callback: the step counter, the progress bar, the monitors, the
// scheduling wrappers and callbacks written in C (src/capi/callback.cpp).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "tptrain/trainer.h"

namespace at {
class Tensor;
}

namespace tpt {

class Trainer;

// What a monitor receives for TPT_EVENT_RECORD.
struct Record {
  tpt_record_kind kind = TPT_RECORD_SCALAR;
  const std::string *name = nullptr;
  int64_t global_step = 0;
  int64_t epoch_num = 0;
  double value = 0;
  const at::Tensor *image = nullptr;  // TPT_RECORD_IMAGE: uint8 N x H x W x C
};

class Callback {
 public:
  Callback(std::string name, bool chief_only) : name_(std::move(name)), chief_only_(chief_only) {}
  virtual ~Callback() = default;
  Callback(const Callback &) = delete;
  Callback &operator=(const Callback &) = delete;

  const std::string &name() const { return name_; }
  bool chief_only() const { return chief_only_; }

  // Where the callback's trigger_step, trigger_epoch (trigger) and
  // after_train run among the other callbacks', whatever order they were
  // added in: those that read the epoch's scalars (EarlyStopping) after
  // those that put them, the checkpoint after both (so it records a stop
  // they asked for), the best checkpoint's copy after the checkpoint.
  enum class Place : int { Any = 0, ReadsScalars = 1, SavesCheckpoint = 2, KeepsBest = 3 };
  virtual Place place() const { return Place::Any; }

  // The tpt_event bits this callback wants. Read once, when the trainer
  // freezes its callback list.
  virtual uint32_t events() const = 0;

  // Handles one event it asked for. Throws StopTraining to end training
  // gracefully, anything else to fail it. `record` is set for RECORD only.
  virtual void on_event(Trainer &trainer, tpt_event event, const Record *record) = 0;

  // A callback with state of its own (a schedule's position, a best value)
  // saves it into checkpoints: save_state returns false when it has none.
  // check_state runs before SETUP of a resumed run (with every other check
  // of the checkpoint, before anything is restored) and throws on bytes that
  // restore_state could not take; restore_state runs after SETUP, before
  // BEFORE_TRAIN, and throws (nothing changed) on bytes it cannot read.
  virtual bool save_state(std::vector<uint8_t> & /*out*/) { return false; }
  virtual void check_state(const std::vector<uint8_t> & /*state*/) const {}
  virtual void restore_state(const std::vector<uint8_t> & /*state*/) {}

 private:
  std::string name_;
  bool chief_only_;
};

// Delivers `event` to `cb` if it asked for it, with tensorpack's default
// trigger_epoch: a callback that asked for TRIGGER but not TRIGGER_EPOCH
// gets TRIGGER at TRIGGER_EPOCH. Returns whether anything was delivered.
bool deliver(Callback &cb, Trainer &trainer, tpt_event event, const Record *record = nullptr);

// The mask under which `cb` must be registered to receive `event`
// (TRIGGER_EPOCH is also delivered to TRIGGER-only callbacks).
inline bool wants(uint32_t mask, tpt_event event) {
  if (event == TPT_EVENT_TRIGGER_EPOCH) return (mask & (TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_TRIGGER)) != 0;
  return (mask & event) != 0;
}

// Scheduling wrappers (tensorpack's callbacks/trigger.py).
std::unique_ptr<Callback> make_periodic_trigger(std::unique_ptr<Callback> inner, int64_t every_k_steps,
                                                int64_t every_k_epochs, bool before_train);
// `predicate` returns whether to forward; it may throw.
using Predicate = std::function<bool(Trainer &)>;
std::unique_ptr<Callback> make_enable_if(std::unique_ptr<Callback> inner, Predicate predicate);
std::unique_ptr<Callback> make_periodic(std::unique_ptr<Callback> inner, int64_t every_k_steps,
                                        int64_t every_k_epochs);

// Built-in callbacks (src/loop/callbacks.cpp, src/loop/monitors.cpp).
std::unique_ptr<Callback> make_step_counter();
std::unique_ptr<Callback> make_progress_bar(tpt_progress mode);
std::unique_ptr<Callback> make_estimated_time_left(int last_k_epochs = 5);
// tensorpack's MergeAllSummaries (RunWithOp): the moving summaries reach the
// monitors in the AFTER_RUN of each epoch's last step, and every `period`
// steps when period > 0.
std::unique_ptr<Callback> make_merge_all_summaries(int64_t period);
std::unique_ptr<Callback> make_json_writer();
std::unique_ptr<Callback> make_scalar_printer();
// tensorpack's TFEventWriter (src/loop/tensorboard.cpp); dir empty: the log
// directory, and nothing without one.
std::unique_ptr<Callback> make_tensorboard_writer(std::string dir);

// The rest of the catalogue (src/loop/callbacks.cpp); include/tptrain.h's
// "More callbacks" has their rules.
struct EarlyStoppingOptions {
  int64_t patience = 3;
  double min_delta = 0;
  bool maximize = false;
};
std::unique_ptr<Callback> make_early_stopping(std::string stat, EarlyStoppingOptions options);
std::unique_ptr<Callback> make_terminate_on_nan(std::vector<std::string> outputs);
std::unique_ptr<Callback> make_throughput_tracker(int64_t samples_per_step);
std::unique_ptr<Callback> make_step_watchdog(double timeout_seconds);
std::unique_ptr<Callback> make_host_memory_tracker();

}  // namespace tpt
