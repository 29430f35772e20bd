#include "loop/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "base/error.hpp"
#include "base/optimizer_state.hpp"
#include "base/signals.hpp"

namespace tpt {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

constexpr tpt_event kAllEvents[] = {
    TPT_EVENT_SETUP,        TPT_EVENT_BEFORE_TRAIN, TPT_EVENT_BEFORE_EPOCH, TPT_EVENT_BEFORE_RUN,
    TPT_EVENT_AFTER_RUN,    TPT_EVENT_TRIGGER_STEP, TPT_EVENT_AFTER_EPOCH,  TPT_EVENT_TRIGGER_EPOCH,
    TPT_EVENT_TRIGGER,      TPT_EVENT_AFTER_TRAIN,  TPT_EVENT_RECORD,
};

}  // namespace

const char *event_name(tpt_event e) {
  switch (e) {
    case TPT_EVENT_SETUP: return "setup";
    case TPT_EVENT_BEFORE_TRAIN: return "before_train";
    case TPT_EVENT_BEFORE_EPOCH: return "before_epoch";
    case TPT_EVENT_BEFORE_RUN: return "before_run";
    case TPT_EVENT_AFTER_RUN: return "after_run";
    case TPT_EVENT_TRIGGER_STEP: return "trigger_step";
    case TPT_EVENT_AFTER_EPOCH: return "after_epoch";
    case TPT_EVENT_TRIGGER_EPOCH: return "trigger_epoch";
    case TPT_EVENT_TRIGGER: return "trigger";
    case TPT_EVENT_AFTER_TRAIN: return "after_train";
    case TPT_EVENT_RECORD: return "record";
    default: return "event";
  }
}

bool deliver(Callback &cb, Trainer &trainer, tpt_event event, const Record *record) {
  uint32_t mask = cb.events();
  if (event == TPT_EVENT_TRIGGER_EPOCH && !(mask & TPT_EVENT_TRIGGER_EPOCH)) {
    if (!(mask & TPT_EVENT_TRIGGER)) return false;
    event = TPT_EVENT_TRIGGER;  // tensorpack: the default trigger_epoch calls trigger
  } else if (!(mask & event)) {
    return false;
  }
  const bool watch = trainer.distributed() && cb.chief_only();
  const uint64_t before = watch ? hyperparam_changes().load(std::memory_order_relaxed) : 0;
  try {
    cb.on_event(trainer, event, record);
  } catch (StopTraining &stop) {
    stop.set_by(cb.name());  // the innermost callback (a wrapper's inner one) names it first
    throw;
  }
  if (watch && hyperparam_changes().load(std::memory_order_relaxed) != before) trainer.warn_chief_only_hyperparam(cb);
  return true;
}

void Trainer::warn_chief_only_hyperparam(const Callback &cb) {
  if (!warned_hyperparam_.insert(&cb).second) return;
  log_.warn("Callback '" + cb.name() + "' is chief-only and changed an optimizer's hyper-parameter: it runs on rank 0 "
            "only, so the other ranks keep the old value and the ranks drift apart. Make it run on every rank "
            "(tpt_callback_desc.chief_only = 0); the library's hyper-parameter setters already do.");
}

Trainer::Trainer(TrainerConfig config) : config_(std::move(config)), monitors_(*this) {
  log_.set_console(config_.console);
  epoch_num_ = config_.starting_epoch - 1;  // tensorpack: before training, starting_epoch - 1
}

Trainer::~Trainer() = default;

void Trainer::set_run_step(std::function<void(Trainer &)> run_step) {
  if (phase_ != Phase::Idle) fail(TPT_ERR_STATE, "run_step cannot change once training has started");
  run_step_ = std::move(run_step);
}

bool Trainer::add(std::unique_ptr<Callback> callback, Group group) {
  if (frozen_)
    fail(TPT_ERR_STATE, "callback '" + callback->name() +
                            "' added after training started: the callback list is frozen");
  if (!config_.is_chief && callback->chief_only()) {
    log_.info("Callback '" + callback->name() + "' is chief-only, skipped.");
    return false;
  }
  groups_[static_cast<size_t>(group)].push_back(std::move(callback));
  return true;
}

void Trainer::set_global_step(int64_t step) {
  if (phase_ != Phase::Idle && phase_ != Phase::Setup && phase_ != Phase::BeforeTrain)
    fail(TPT_ERR_STATE, "global_step can only be set before training or during setup and before_train");
  if (step < 0) invalid_argument("global_step must be >= 0, got " + std::to_string(step));
  global_step_ = step;
}

void Trainer::set_distributed(int rank, std::function<void(std::shared_ptr<const Checkpoint> &)> agree) {
  if (phase_ != Phase::Idle || frozen_) fail(TPT_ERR_STATE, "a trainer joins a distributed job before it runs");
  rank_ = rank;
  config_.is_chief = rank == 0;
  agree_resume_ = std::move(agree);
}

void Trainer::freeze() {
  // tensorpack: a non-chief trainer skips the callbacks marked chief-only
  // (here at the freeze, so that the order of set-up calls does not matter).
  if (!config_.is_chief)
    for (auto &group : groups_)
      for (auto it = group.begin(); it != group.end();) {
        if ((*it)->chief_only()) {
          log_.info("Callback '" + (*it)->name() + "' is chief-only, skipped.");
          it = group.erase(it);
        } else {
          ++it;
        }
      }
  if (config_.default_callbacks) {
    groups_[static_cast<size_t>(Group::Default)].push_back(make_progress_bar(config_.progress));
    if (config_.is_chief) groups_[static_cast<size_t>(Group::Default)].push_back(make_estimated_time_left());
  }
  groups_[static_cast<size_t>(Group::StepCounter)].insert(groups_[static_cast<size_t>(Group::StepCounter)].begin(),
                                                          make_step_counter());
  // tensorpack's MergeAllSummaries (one of its default callbacks): always
  // here, so the cost and the tower's scalar outputs reach the monitors even
  // without the progress bar.
  if (config_.is_chief)
    groups_[static_cast<size_t>(Group::Default)].push_back(make_merge_all_summaries(config_.summary_period));
  auto &monitors = groups_[static_cast<size_t>(Group::Monitor)];
  if (config_.default_monitors) {
    std::vector<std::unique_ptr<Callback>> defaults;
    if (has_logdir()) {
      defaults.push_back(make_tensorboard_writer(""));
      defaults.push_back(make_json_writer());
    }
    defaults.push_back(make_scalar_printer());
    monitors.insert(monitors.begin(), std::make_move_iterator(defaults.begin()),
                    std::make_move_iterator(defaults.end()));
  }
  for (auto &group : groups_)
    for (auto &cb : group) order_.push_back(cb.get());
  for (Callback *cb : order_) {
    uint32_t mask = cb->events();
    for (tpt_event e : kAllEvents) {
      if (e == TPT_EVENT_RECORD) continue;
      if (wants(mask, e)) by_event_[event_index(e)].push_back(cb);
    }
  }
  // The events that save checkpoints: the callbacks in their places
  // (Callback::place), in the order added within a place.
  for (tpt_event e : {TPT_EVENT_TRIGGER_STEP, TPT_EVENT_TRIGGER_EPOCH, TPT_EVENT_AFTER_TRAIN})
    std::stable_sort(by_event_[event_index(e)].begin(), by_event_[event_index(e)].end(),
                     [](const Callback *a, const Callback *b) { return a->place() < b->place(); });
  for (auto &cb : monitors)
    if (cb->events() & TPT_EVENT_RECORD) by_event_[event_index(TPT_EVENT_RECORD)].push_back(cb.get());
  frozen_ = true;
}

void Trainer::dispatch(tpt_event event) {
  for (Callback *cb : by_event_[event_index(event)]) deliver(*cb, *this, event);
}

// A stop a callback raises at a step's or an epoch's end waits for the
// event's other callbacks, as a stop request would (tensorpack's
// should_stop, Keras's stop_training): the savers still save that step or
// epoch, and the checkpoint records the stop.
void Trainer::dispatch_to_all(tpt_event event) {
  for (Callback *cb : by_event_[event_index(event)]) {
    try {
      deliver(*cb, *this, event);
    } catch (const StopTraining &stop) {
      if (!pending_stop_) pending_stop_ = stop;
    }
  }
}

void Trainer::throw_pending_stop() {
  if (!pending_stop_) return;
  StopTraining stop = *pending_stop_;
  pending_stop_.reset();
  throw stop;
}

void Trainer::trigger_epoch_timed() {
  std::vector<std::pair<Callback *, double>> times;
  double total = 0;
  for (Callback *cb : by_event_[event_index(TPT_EVENT_TRIGGER_EPOCH)]) {
    auto t0 = Clock::now();
    try {
      deliver(*cb, *this, TPT_EVENT_TRIGGER_EPOCH);
    } catch (const StopTraining &stop) {
      if (!pending_stop_) pending_stop_ = stop;  // dispatch_to_all's rule
    }
    double dt = seconds_since(t0);
    total += dt;
    times.emplace_back(cb, dt);
  }
  // tensorpack's rule: over 2 s in total, name the callbacks that took more
  // than 30 % of it and more than 1 s.
  if (total > 2.0) {
    std::string msg = "Callbacks took " + fmt_seconds(total) + " sec in total.";
    for (auto &[cb, dt] : times)
      if (dt > 0.3 * total && dt > 1.0) msg += " " + cb->name() + ": " + fmt_seconds(dt) + " sec";
    log_.info(msg);
  }
}

namespace {

// An environment variable set to "1" (tools/tptrain-run sets TPTRAIN_STOP_ON_SIGNALS).
bool env_flag(const char *name) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace

void Trainer::throw_if_stop_requested() {
  int sig = signal_requested_.load(std::memory_order_relaxed);
  if (signals_) {
    if (!sig) sig = SignalStop::received();
    if (agree_stop_) sig = agree_stop_(sig);  // every rank stops at the same step boundary
  }
  if (sig) {
    stop_signal_ = sig;
    throw StopTraining(signal_name(sig), /*interrupt=*/true);
  }
  switch (stop_requested_.load(std::memory_order_relaxed)) {
    case 0: return;
    case static_cast<int>(StopBy::Free): throw StopTraining("tpt_trainer_free", /*interrupt=*/true);
    case static_cast<int>(StopBy::Reason): {
      std::string reason;
      {
        std::lock_guard<std::mutex> lock(stop_mu_);  // written with the request, under the lock
        reason = requested_reason_;
      }
      throw StopTraining(reason, /*interrupt=*/true);
    }
    default: throw StopTraining("tpt_trainer_request_stop", /*interrupt=*/true);
  }
}

void Trainer::hooked_step(void (*step)(Trainer &, void *), void *ctx) {
  // The thread first: in_run_step_ belongs to the training thread.
  if (run_thread_.load(std::memory_order_relaxed) != std::this_thread::get_id())
    fail(TPT_ERR_STATE, "a hooked step can only run inside run_step, on the training thread");
  if (!in_run_step_) fail(TPT_ERR_STATE, "a hooked step can only run inside run_step");
  // Not nested: a hooked step from inside another (its step function, or a
  // callback's before_run / after_run) would count one step twice.
  if (in_hooked_step_)
    fail(TPT_ERR_STATE,
         "a hooked step was started inside another hooked step (from its step function or a before_run / "
         "after_run callback); hooked steps do not nest: run them one after the other in run_step");
  if (pending_) std::rethrow_exception(pending_);
  struct InHooked {
    bool &flag;
    explicit InHooked(bool &f) : flag(f) { flag = true; }
    ~InHooked() { flag = false; }
  } in_hooked(in_hooked_step_);
  try {
    outputs_.clear();
    for (Callback *cb : by_event_[event_index(TPT_EVENT_BEFORE_RUN)]) deliver(*cb, *this, TPT_EVENT_BEFORE_RUN);
    if (step) {
      in_step_ = true;
      step(*this, ctx);
      in_step_ = false;
    }
    ++steps_run_;
    for (Callback *cb : by_event_[event_index(TPT_EVENT_AFTER_RUN)]) deliver(*cb, *this, TPT_EVENT_AFTER_RUN);
  } catch (...) {
    in_step_ = false;
    pending_ = std::current_exception();
    throw;
  }
}

// One epoch of main_loop (a resumed epoch goes on from its next step).
void Trainer::run_epoch(int64_t epoch) {
  epoch_num_ = epoch;
  const int64_t first_step = epoch == first_epoch_ ? first_step_ : 0;  // a resumed epoch goes on
  next_epoch_ = epoch, next_step_ = first_step;
  // tensorpack (train/base.py, main_loop) asks should_stop() only inside
  // the step loop: a stop requested in an epoch's last step still runs
  // the next epoch's before_epoch and ends at its local_step 0. With no
  // steps there is no step loop, so the request is seen here instead.
  if (config_.steps_per_epoch == 0) throw_if_stop_requested();
  log_.info("Start Epoch " + std::to_string(epoch) + " ...");
  dispatch(TPT_EVENT_BEFORE_EPOCH);
  auto t0 = Clock::now();
  for (int64_t k = first_step; k < config_.steps_per_epoch; ++k) run_one_step(k);
  next_epoch_ = epoch + 1, next_step_ = 0;
  dispatch_to_all(TPT_EVENT_AFTER_EPOCH);
  log_.info("Epoch " + std::to_string(epoch) + " (global_step " + std::to_string(global_step_) +
            ") finished, time: " + fmt_seconds(seconds_since(t0)) + " sec.");
  trigger_epoch_timed();
  throw_pending_stop();  // a stop in after_epoch or trigger_epoch: the epoch's events all ran
}

// One step: run_step, then TRIGGER_STEP.
void Trainer::run_one_step(int64_t k) {
  local_step_ = k;
  throw_if_stop_requested();
  in_run_step_ = true;
  try {
    run_step_(*this);
  } catch (StopTraining &stop) {
    stop.set_by("run_step");  // unless a hooked step's callback raised it
    in_run_step_ = false;
    pending_ = nullptr;
    throw;
  } catch (...) {
    in_run_step_ = false;
    pending_ = nullptr;
    throw;
  }
  in_run_step_ = false;
  next_step_ = k + 1;
  ++loop_steps_;
  if (pending_) {  // run_step swallowed the outcome of a hooked step
    std::exception_ptr p = pending_;
    pending_ = nullptr;
    std::rethrow_exception(p);
  }
  dispatch_to_all(TPT_EVENT_TRIGGER_STEP);
  throw_pending_stop();
}

// Opens the log directory (the chief's: the lock, log.log, stale
// temporaries) and finds auto-resume's checkpoint in it.
void Trainer::open_logdir() {
  if (!config_.logdir.empty() && rank_ != 0) {
    log_.info("Rank " + std::to_string(rank_) + " keeps no log directory: the chief's (rank 0's) is the job's.");
  } else if (!config_.logdir.empty()) {
    // auto_resume: a directory with a checkpoint index is kept and resumed
    // from; one without (a run killed before its first checkpoint left its
    // log.log) is this run's too: kept, and the run starts afresh in it.
    bool resuming = config_.auto_resume && !resume_ && find_auto_resume(config_.logdir);
    try {
      logdir_ = prepare_logdir(config_.logdir, config_.auto_resume ? TPT_LOGDIR_KEEP : config_.logdir_action, log_,
                               logdir_lock_);
      log_.open_file(logdir_ + "/log.log");
    } catch (...) {
      logdir_lock_.release();
      throw;
    }
    log_.info("Log directory: " + logdir_);
    if (!logdir_lock_.warning().empty()) log_.warn(logdir_lock_.warning());
    if (resuming) log_.info("Auto-resume: continuing from " + auto_resumed_from_ + ".");
    else if (config_.auto_resume && !resume_)
      log_.info("Auto-resume: no checkpoint in " + logdir_ + " yet; starting from the beginning.");
    // What killed runs left: this run owns the directory now (unlocked,
    // only the temporaries of processes that are gone).
    if (int n = remove_stale_temporaries(logdir_, /*owned=*/logdir_lock_.held()))
      log_.info("Removed " + std::to_string(n) + " temporary file(s) that an earlier run left in " + logdir_ + ".");
  }
}

void Trainer::run() {
  if (phase_ != Phase::Idle) fail(TPT_ERR_STATE, "a trainer runs once; make a new one");
  if (config_.steps_per_epoch < 0)
    invalid_argument("steps_per_epoch is not set (tpt_trainer_options.steps_per_epoch)");
  if (config_.steps_per_epoch > 0 && !run_step_)
    fail(TPT_ERR_STATE, "no run_step: set one with tpt_trainer_set_run_step");
  open_logdir();
  freeze();
  // SIGTERM/SIGINT as a graceful stop, while the run runs.
  std::optional<SignalStop> signal_stop;
  if (config_.stop_on_signals > 0 || (config_.stop_on_signals == 0 && env_flag("TPTRAIN_STOP_ON_SIGNALS"))) {
    signal_stop.emplace();
    signals_ = true;
    log_.info("SIGTERM and SIGINT stop training at the next step boundary (a second one ends the process).");
  }
  stop_signal_ = 0;
  run_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  epoch_num_ = config_.starting_epoch - 1;
  local_step_ = -1;
  first_epoch_ = next_epoch_ = config_.starting_epoch;
  first_step_ = next_step_ = 0;
  std::exception_ptr error;
  try {
    phase_ = Phase::Setup;
    if (agree_resume_) agree_resume_(resume_);  // every rank resumes from the chief's checkpoint
    if (resume_) check_resume();                // what only this trainer can check, before anything changes
    dispatch(TPT_EVENT_SETUP);
    if (resume_) apply_resume();  // the strategy restored its part in SETUP
    phase_ = Phase::BeforeTrain;
    dispatch(TPT_EVENT_BEFORE_TRAIN);
    phase_ = Phase::Loop;
    if (ended_before_) throw *ended_before_;  // auto_resume of a stopped run: it stays stopped
    // global_step is read again here: BEFORE_TRAIN (a restore) may have set it.
    for (int64_t epoch = first_epoch_; epoch <= config_.max_epoch; ++epoch) run_epoch(epoch);
    log_.info("Training has finished!");
  } catch (const StopTraining &stop) {
    stopped_ = true;
    stop_reason_ = stop.what();
    stop_by_ = stop.by();
    interrupted_ = stop.interrupt();
    log_.info("Training was stopped by: " + stop_reason_);
  } catch (const std::exception &e) {
    failed_ = true;
    error = std::current_exception();
    log_.error("Training failed at global_step=" + std::to_string(global_step_) + ": " + e.what());
  } catch (...) {
    failed_ = true;
    error = std::current_exception();
    log_.error("Training failed at global_step=" + std::to_string(global_step_));
  }
  in_run_step_ = false;
  pending_stop_.reset();
  after_train(error);
  phase_ = Phase::Done;
  run_thread_.store(std::thread::id(), std::memory_order_relaxed);
  signals_ = false;
  log_.close_file();
  logdir_lock_.release();
  if (error) std::rethrow_exception(error);
}

void Trainer::after_train(std::exception_ptr &error) {
  phase_ = Phase::AfterTrain;
  // Every callback, each isolated from the others' failures.
  for (Callback *cb : by_event_[event_index(TPT_EVENT_AFTER_TRAIN)]) {
    try {
      cb->on_event(*this, TPT_EVENT_AFTER_TRAIN, nullptr);
    } catch (const StopTraining &) {
      // a stop during after_train changes nothing
    } catch (const std::exception &e) {
      log_.error("Callback '" + cb->name() + "' failed in after_train: " + e.what());
      if (!error) error = std::current_exception();
    } catch (...) {
      log_.error("Callback '" + cb->name() + "' failed in after_train");
      if (!error) error = std::current_exception();
    }
  }
}

void Trainer::set_output(const std::string &name, Output value) {
  if (!in_step_) fail(TPT_ERR_STATE, "outputs can only be set inside a hooked step");
  for (auto &o : outputs_) {
    if (o.first == name) {
      o.second = std::move(value);
      return;
    }
  }
  outputs_.emplace_back(name, std::move(value));
}

const Output *Trainer::output(const std::string &name) const {
  for (auto &o : outputs_)
    if (o.first == name) return &o.second;
  return nullptr;
}

}  // namespace tpt
