// A trainer's whole state as a Checkpoint (taking it between steps), and
// applying one at the start of a run: counters, callbacks' states, moving
// summaries, the CPU generator; the strategy adds the model's part through
// Stateful. The file format is base/checkpoint_file.cpp.
#include "loop/checkpoint.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "base/error.hpp"
#include "loop/trainer.hpp"

namespace fs = std::filesystem;

namespace tpt {

// ---- a trainer's state

namespace {

// Callbacks with state, keyed by name ("name", then "name#2", ...), in order.
std::vector<std::pair<std::string, Callback *>> keyed_callbacks(const Trainer &t) {
  std::vector<std::pair<std::string, Callback *>> out;
  std::map<std::string, int> seen;
  for (Callback *cb : t.callbacks()) {
    int n = ++seen[cb->name()];
    out.emplace_back(n == 1 ? cb->name() : cb->name() + "#" + std::to_string(n), cb);
  }
  return out;
}

at::Tensor cpu_rng_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

}  // namespace

Checkpoint take_checkpoint(Trainer &t) {
  if (t.in_run_step())
    fail(TPT_ERR_STATE, "a checkpoint is taken between steps (a callback's trigger_step, an epoch's events, "
                        "before or after training), not inside run_step");
  Checkpoint ck;
  ck.global_step = t.global_step();
  ck.epoch_num = t.epoch_num();
  ck.local_step = t.local_step();
  ck.next_epoch = t.next_epoch();
  ck.next_step = t.next_step();
  // A run stopped at a step boundary (a stop request, a signal) has set
  // local_step to the step it did not run, as tensorpack's loop does: the
  // checkpoint counts the last step that ran.
  if (ck.next_epoch == ck.epoch_num && ck.next_step > 0 && ck.local_step == ck.next_step) ck.local_step = ck.next_step - 1;
  if (t.steps_per_epoch() > 0 && ck.next_step >= t.steps_per_epoch()) ++ck.next_epoch, ck.next_step = 0;
  if (Stateful *s = t.stateful()) s->save(ck);
  for (auto &[key, cb] : keyed_callbacks(t)) {
    std::vector<uint8_t> b;
    if (cb->save_state(b)) ck.callbacks[key] = std::move(b);
  }
  for (const MovingSummary &m : t.monitors().moving_summaries())
    ck.summaries.push_back(MovingSummaryState{m.name, m.decay, m.biased, m.value, m.count});
  ck.rng_cpu = cpu_rng_state();
  ck.run_end = t.run_end();
  return ck;
}

std::optional<RunEnd> Trainer::run_end() const {
  if (pending_stop_) return RunEnd{RunEnd::How::Stopped, pending_stop_->by(), pending_stop_->what()};
  if (phase_ == Phase::AfterTrain || phase_ == Phase::Done) {
    if (failed_) return std::nullopt;
    if (!stopped_) return RunEnd{};
    if (interrupted_) return RunEnd{RunEnd::How::Interrupted, "", stop_reason_};
    return RunEnd{RunEnd::How::Stopped, stop_by_, stop_reason_};
  }
  if (phase_ == Phase::Loop) {
    int64_t next = next_epoch_;
    if (config_.steps_per_epoch > 0 && next_step_ >= config_.steps_per_epoch) ++next;
    if (next > config_.max_epoch) return RunEnd{};  // the last epoch's last events: nothing is left
  }
  return std::nullopt;
}

void Trainer::resume_from(std::shared_ptr<const Checkpoint> ck) {
  if (phase_ != Phase::Idle) fail(TPT_ERR_STATE, "a resume is set before the run");
  resume_ = std::move(ck);
  explicit_resume_ = true;
}

const std::string *Trainer::resumed_from() const {
  if (!resume_) return nullptr;
  const std::string prefix = "checkpoint ";
  const std::string &s = resume_->source;
  resumed_from_ = s.compare(0, prefix.size(), prefix) == 0 ? s.substr(prefix.size()) : s;
  return &resumed_from_;
}

bool Trainer::find_auto_resume(const std::string &dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !read_index(dir)) return false;
  std::string path = resolve_checkpoint(dir);
  resume_ = std::make_shared<const Checkpoint>(read_checkpoint(path));
  auto_resumed_from_ = path;  // logged once log.log is open
  return true;
}

void Trainer::check_resume() {
  const Checkpoint &ck = *resume_;
  std::string what = ck.source.empty() ? "the checkpoint" : ck.source;
  auto bad = [&](const std::string &field, const std::string &why) {
    invalid_argument(what + ": field '" + field + "' " + why + " (nothing was restored)");
  };
  if (ck.next_step > 0 && ck.next_step >= config_.steps_per_epoch)
    bad("next_step", "is " + std::to_string(ck.next_step) + ": the checkpoint goes on inside epoch " +
                         std::to_string(ck.next_epoch) + " at step " + std::to_string(ck.next_step) +
                         ", but this trainer's epochs have " + std::to_string(config_.steps_per_epoch) + " steps");
  for (auto &[key, cb] : keyed_callbacks(*this)) {
    auto it = ck.callbacks.find(key);
    if (it == ck.callbacks.end()) continue;
    try {
      cb->check_state(it->second);
    } catch (const Error &e) {
      bad("callbacks['" + key + "']", std::string("is not a state this callback takes: ") + e.what());
    }
  }
  const std::string at = " at epoch " + std::to_string(ck.epoch_num) + " (global_step " + std::to_string(ck.global_step) + ")";
  // "stopped at epoch 4 (global_step 20) by EarlyStopping(val): <reason>"
  auto ended = [&](const RunEnd &e) {
    return RunEnd::name(e.how) + at + (e.by.empty() ? "" : " by " + e.by) + (e.reason.empty() ? "" : ": " + e.reason);
  };
  const bool automatic = config_.auto_resume && !explicit_resume_;
  if (ck.run_end && ck.run_end->how == RunEnd::How::Stopped) {
    if (automatic && !config_.continue_stopped) {
      // A rerun of a run that a callback stopped (EarlyStopping) leaves it
      // stopped: training on would change what it kept (its best checkpoint).
      log_.info("Auto-resume: the run was " + ended(*ck.run_end) +
                ". There is nothing to train: it stays stopped (set continue_stopped to train on).");
      StopTraining stop(ck.run_end->reason.empty() ? ck.run_end->text() : ck.run_end->reason);
      stop.set_by(ck.run_end->by);
      ended_before_ = stop;
    } else {
      log_.info("The checkpoint's run was " + ended(*ck.run_end) + "; this run goes on from it (" +
                (automatic ? "continue_stopped" : "an explicit resume") + ").");
    }
  } else if (ck.run_end && ck.run_end->how == RunEnd::How::Interrupted) {
    log_.info("The checkpoint's run was " + ended(*ck.run_end) + "; this run goes on from it.");
  }
  if (!ended_before_ && ck.next_epoch > config_.max_epoch)
    log_.info(std::string(ck.run_end && ck.run_end->how == RunEnd::How::Finished ? "The checkpoint's run finished" : "The checkpoint was taken") +
              at + "; it goes on at epoch " + std::to_string(ck.next_epoch) + ", after max_epoch " +
              std::to_string(config_.max_epoch) + ": there is nothing left to train (raise max_epoch to train more).");
}

void Trainer::apply_resume() {
  const Checkpoint &ck = *resume_;
  // Callbacks first: the only part that can still refuse (the strategy
  // checked and applied its part in SETUP).
  auto keyed = keyed_callbacks(*this);
  for (auto &[key, cb] : keyed) {
    auto it = ck.callbacks.find(key);
    if (it != ck.callbacks.end()) cb->restore_state(it->second);
  }
  for (const auto &kv : ck.callbacks) {
    bool found = false;
    for (auto &k : keyed) found = found || k.first == kv.first;
    // (Ranks other than the chief lack its chief-only callbacks by design.)
    if (!found && rank_ == 0)
      log_.warn("The checkpoint has the state of a callback '" + kv.first + "' that this trainer lacks; ignored.");
  }
  if (!stateful_ && (!ck.variables.empty() || !ck.input.empty()))
    log_.warn("The checkpoint holds " + std::to_string(ck.variables.size()) +
              " variables and an input position, but this trainer has no model (tpt_trainer_set_model): "
              "only counters, random state and callbacks are restored.");
  global_step_ = ck.global_step;
  epoch_num_ = ck.epoch_num;
  local_step_ = ck.local_step;
  first_epoch_ = next_epoch_ = ck.next_epoch;
  first_step_ = next_step_ = ck.next_step;
  std::vector<MovingSummary> summaries;
  for (const MovingSummaryState &m : ck.summaries) {
    MovingSummary s;
    s.name = m.name, s.decay = m.decay, s.biased = m.biased, s.value = m.value, s.count = m.count;
    summaries.push_back(std::move(s));
  }
  monitors_.restore_moving_summaries(std::move(summaries));
  if (ck.rng_cpu.defined()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(ck.rng_cpu);
  }
  log_.info("Resumed at epoch " + std::to_string(first_epoch_) + ", step " + std::to_string(first_step_) +
            " (global_step " + std::to_string(global_step_) + ").");
}


}  // namespace tpt
