// The loop: tensorpack's Trainer.main_loop with its callbacks, counters and
// step outputs; its Monitors (loop/monitors.hpp) hold the scalars. No
// LibTorch here: tensors published as step outputs are opaque to the loop
// (the C API layer owns their type).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "base/run_end.hpp"
#include "loop/callback.hpp"
#include "loop/monitors.hpp"
#include "tptrain/trainer.h"

namespace tpt {

struct TrainerConfig {
  bool is_chief = true;
  int64_t starting_epoch = 1;
  int64_t max_epoch = 99999999;
  int64_t steps_per_epoch = -1;  // -1: not set
  std::string logdir;            // empty: none
  tpt_logdir_action logdir_action = TPT_LOGDIR_REFUSE;
  tpt_progress progress = TPT_PROGRESS_AUTO;
  bool console = true;
  bool default_callbacks = true;
  bool default_monitors = true;
  int64_t scalar_history = 1000; // entries kept per scalar name; 0: all
  int64_t summary_period = 0;    // MergeAllSummaries' period: 0, once per epoch (its last step)
  bool auto_resume = false;      // resume from the log directory's latest checkpoint, if any
  bool continue_stopped = false; // auto_resume goes on after a run that a callback or run_step stopped
  int stop_on_signals = 0;       // 1: SIGTERM/SIGINT stop gracefully; 0: when TPTRAIN_STOP_ON_SIGNALS=1; -1: never
  tpt_precision precision = TPT_PRECISION_FP32;  // the tower functions' arithmetic (autocast)
  tpt_loss_scaling loss_scaling = TPT_LOSS_SCALING_INIT;  // train/loss_scale.hpp
};

// Where a callback sits in the order of every event (tensorpack's order).
enum class Group : int { InputSource = 0, TrainerInternal, StepCounter, User, Default, Monitor, Count };

// A named output of a hooked step: a scalar, or a tensor that only the C API
// layer knows how to read (kept alive by the shared_ptr).
struct Output {
  double scalar = 0;
  std::shared_ptr<const void> tensor;  // set for tensor outputs
};

struct Checkpoint;  // base/checkpoint_file.hpp

// What a checkpoint holds besides the loop's own state: the strategy's model
// variables, optimizer and input (tensorpack's "global" state).
class Stateful {
 public:
  virtual ~Stateful() = default;
  virtual void save(Checkpoint &ck) = 0;
};

class Trainer {
 public:
  friend class Monitors;  // brings RECORD events to the monitor callbacks
  enum class Phase { Idle, Setup, BeforeTrain, Loop, AfterTrain, Done };

  explicit Trainer(TrainerConfig config);
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  // ---- set-up (before run)
  void set_run_step(std::function<void(Trainer &)> run_step);
  // Adds a callback at its group's place. Returns false when it was dropped
  // as chief-only on a non-chief trainer (set_distributed drops those added
  // before it at the run). Throws TPT_ERR_STATE once frozen.
  bool add(std::unique_ptr<Callback> callback, Group group);

  // ---- running
  // The whole training; throws what ended it (StopTraining is caught: a stop
  // is a success, see stop_reason()). Runs once.
  void run();
  // One hooked step around step(ctx): BEFORE_RUN, step, AFTER_RUN.
  void hooked_step(void (*step)(Trainer &, void *), void *ctx);
  // Asks the loop to stop at the next step boundary (any thread). The reason
  // is the stop_reason() of the run: "tpt_trainer_request_stop", or
  // "tpt_trainer_free" for a free from inside the run (the C API defers it).
  void request_stop() noexcept { request_stop(StopBy::Request); }
  // A stop for the signal `signo` (async-signal-safe): as a stop request,
  // with the signal's name as the reason; a ModelSaver saves at it.
  void request_signal_stop(int signo) noexcept {
    int none = 0;
    signal_requested_.compare_exchange_strong(none, signo, std::memory_order_relaxed);
  }
  // The signal that stopped the last run; 0: none did.
  int stop_signal() const { return stop_signal_; }
  enum class StopBy : int { None = 0, Request = 1, Free = 2, Reason = 3 };
  void request_stop(StopBy by) noexcept {
    int none = 0;
    stop_requested_.compare_exchange_strong(none, static_cast<int>(by), std::memory_order_relaxed);
  }
  // A stop request whose stop_reason() is `reason` (any thread, not a
  // signal handler); the first request of a run wins.
  void request_stop(const std::string &reason) {
    std::lock_guard<std::mutex> lock(stop_mu_);
    int none = 0;
    if (stop_requested_.compare_exchange_strong(none, static_cast<int>(StopBy::Reason), std::memory_order_relaxed))
      requested_reason_ = reason;
  }

  // ---- state
  Phase phase() const { return phase_; }
  bool in_run_step() const { return in_run_step_; }
  bool in_step() const { return in_step_; }
  const TrainerConfig &config() const { return config_; }
  int64_t epoch_num() const { return epoch_num_; }
  int64_t local_step() const { return local_step_; }
  int64_t global_step() const { return global_step_; }
  void set_global_step(int64_t step);
  void increment_global_step() { ++global_step_; }
  int64_t steps_per_epoch() const { return config_.steps_per_epoch; }
  // Sets steps_per_epoch from the input's size when the options left it unset.
  void default_steps_per_epoch(int64_t steps) {
    if (config_.steps_per_epoch < 0 && phase_ == Phase::Idle) config_.steps_per_epoch = steps;
  }
  // Non-null when the last run stopped gracefully.
  const std::string *stop_reason() const { return stopped_ ? &stop_reason_ : nullptr; }
  // How the run ends, as a checkpoint taken now records it: a stop a
  // callback raised in this event (it takes effect once the event's other
  // callbacks ran); after the loop, how it ended (none when it failed);
  // in the loop, finished once nothing is left to train. None: it goes on.
  std::optional<RunEnd> run_end() const;
  // Whether this run has run a step (a resumed run that found nothing left
  // to train has not).
  bool ran_a_step() const { return loop_steps_ > 0; }
  // In the events that end an epoch (after_epoch, trigger_epoch).
  bool at_epoch_end() const { return phase_ == Phase::Loop && next_step_ == 0 && next_epoch_ == epoch_num_ + 1; }
  bool has_logdir() const { return !logdir_.empty(); }
  const std::string &logdir() const { return logdir_; }
  Logger &log() { return log_; }

  // ---- checkpoints (loop/checkpoint.cpp)
  // The strategy's part of a checkpoint.
  void set_stateful(std::shared_ptr<Stateful> s) { stateful_ = std::move(s); }
  Stateful *stateful() const { return stateful_.get(); }
  // Before run: go on exactly where `ck` was taken. The strategy restores
  // its part at SETUP (resume_checkpoint()), the loop its counters, the
  // random state, moving summaries and callbacks' states right after SETUP.
  void resume_from(std::shared_ptr<const Checkpoint> ck);
  // Several processes (src/train's distributed training), before run:
  // this process's rank; rank 0 is the chief (is_chief), the others skip
  // chief-only callbacks and keep no log directory (the chief's is the
  // job's). `agree` runs first thing in the run, after the chief chose
  // whether to resume: it gives every rank the chief's checkpoint (or none).
  void set_distributed(int rank, std::function<void(std::shared_ptr<const Checkpoint> &)> agree);
  // A distributed job's agreement on a signal stop, at every step boundary
  // while signals stop the run: given this rank's signal (0: none), the
  // signal to stop for (0: go on), the same on every rank.
  void set_stop_agreement(std::function<int(int)> agree) { agree_stop_ = std::move(agree); }
  int rank() const { return rank_; }
  bool distributed() const { return static_cast<bool>(agree_resume_); }
  // Once per callback: a chief-only callback changed a hyper-parameter in a distributed job.
  void warn_chief_only_hyperparam(const Callback &cb);
  const Checkpoint *resume_checkpoint() const { return resume_.get(); }
  // The checkpoint's path (its source without "checkpoint "); nullptr: no
  // resume. Valid until the next call.
  const std::string *resumed_from() const;
  // Where the loop goes on after the run_step in progress or just ended.
  int64_t next_epoch() const { return next_epoch_; }
  int64_t next_step() const { return next_step_; }
  bool in_hooked_step() const { return in_hooked_step_; }
  const std::vector<Callback *> &callbacks() const { return order_; }

  // An opaque pointer for the layer above (the C API stores its tpt_trainer).
  void set_handle(void *handle) { handle_ = handle; }
  void *handle() const { return handle_; }

  // ---- step outputs
  void set_output(const std::string &name, Output value);
  const Output *output(const std::string &name) const;
  bool has_run_a_step() const { return steps_run_ > 0; }

  // ---- monitors (tensorpack's Monitors: scalars, images, their history,
  // the moving summaries)
  Monitors &monitors() { return monitors_; }
  const Monitors &monitors() const { return monitors_; }

 private:
  void open_logdir();              // log.log, the lock, auto-resume's checkpoint (run's first part)
  void freeze();
  void dispatch(tpt_event event);
  // The event's callbacks, every one of them: a stop one raises waits in
  // pending_stop_ until throw_pending_stop (the epoch's or step's end).
  void dispatch_to_all(tpt_event event);
  void throw_pending_stop();
  void run_epoch(int64_t epoch);   // BEFORE_EPOCH, the steps, AFTER_EPOCH, TRIGGER_EPOCH
  void run_one_step(int64_t k);    // one run_step and its TRIGGER_STEP
  void trigger_epoch_timed();
  void after_train(std::exception_ptr &error);
  void check_resume();        // loop/checkpoint.cpp
  void apply_resume();        // loop/checkpoint.cpp
  // auto_resume: the log directory's latest checkpoint, if it has an index.
  bool find_auto_resume(const std::string &dir);  // loop/checkpoint.cpp

  TrainerConfig config_;
  Logger log_;
  DirLock logdir_lock_;  // the log directory is this run's while it runs
  std::string auto_resumed_from_;  // the checkpoint auto_resume found
  mutable std::string resumed_from_;  // resumed_from()'s
  std::function<void(Trainer &)> run_step_;
  std::array<std::vector<std::unique_ptr<Callback>>, static_cast<size_t>(Group::Count)> groups_;
  std::vector<Callback *> order_;                  // every callback, in event order
  std::array<std::vector<Callback *>, 11> by_event_;  // per tpt_event bit, the callbacks that want it
  bool frozen_ = false;

  Phase phase_ = Phase::Idle;
  int64_t epoch_num_ = 0;
  int64_t local_step_ = -1;
  int64_t global_step_ = 0;
  int64_t steps_run_ = 0;
  bool in_run_step_ = false;
  bool in_step_ = false;
  bool in_hooked_step_ = false;
  // The thread tpt_trainer_run runs on: hooked steps run there only.
  std::atomic<std::thread::id> run_thread_{};
  std::exception_ptr pending_;  // what ended a hooked step, until run_step returns
  std::atomic<int> stop_requested_{0};  // a StopBy
  std::mutex stop_mu_;                  // guards requested_reason_
  std::string requested_reason_;        // StopBy::Reason's
  std::atomic<int> signal_requested_{0};  // request_signal_stop's signal
  static_assert(std::atomic<int>::is_always_lock_free, "request_signal_stop runs in signal handlers");
  bool signals_ = false;                  // this run stops on SIGTERM/SIGINT
  int stop_signal_ = 0;
  std::function<int(int)> agree_stop_;
  void throw_if_stop_requested();
  bool stopped_ = false;
  std::string stop_reason_;
  std::string stop_by_;
  bool interrupted_ = false;
  bool failed_ = false;
  std::optional<StopTraining> pending_stop_;
  std::optional<StopTraining> ended_before_;  // auto_resume found a stopped run: what stopped it
  bool explicit_resume_ = false;              // resume_from, not auto_resume
  int64_t loop_steps_ = 0;
  std::string logdir_;

  void *handle_ = nullptr;
  std::vector<std::pair<std::string, Output>> outputs_;
  Monitors monitors_;

  std::shared_ptr<Stateful> stateful_;
  std::shared_ptr<const Checkpoint> resume_;
  int rank_ = 0;
  std::function<void(std::shared_ptr<const Checkpoint> &)> agree_resume_;
  std::set<const Callback *> warned_hyperparam_;
  int64_t first_epoch_ = 1, first_step_ = 0;  // where the loop starts (a resume moves it)
  int64_t next_epoch_ = 1, next_step_ = 0;
};

// Index of a single tpt_event bit in Trainer::by_event_.
inline size_t event_index(tpt_event e) { return static_cast<size_t>(__builtin_ctz(static_cast<uint32_t>(e))); }

const char *event_name(tpt_event e);

}  // namespace tpt
