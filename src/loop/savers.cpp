// tensorpack's ModelSaver, MinSaver and MaxSaver (callbacks/saver.py).
#include "loop/savers.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/isfinite.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include "base/error.hpp"
#include "base/files.hpp"
#include "base/log.hpp"
#include "base/signals.hpp"
#include "loop/checkpoint.hpp"
#include "loop/trainer.hpp"

namespace fs = std::filesystem;

namespace tpt {

namespace {

using SysClock = std::chrono::system_clock;

std::string dir_for(Trainer &t, const std::string &dir, const char *who) {
  if (!dir.empty()) return dir;
  if (!t.has_logdir())
    fail(TPT_ERR_STATE, std::string(who) + " needs a directory: give the trainer a log directory (options.logdir) or the "
                                           "callback a checkpoint_dir");
  return t.logdir();
}

void make_dir(const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(TPT_ERR_IO, "cannot create the checkpoint directory " + dir + ": " + ec.message());
}

class ModelSaver final : public Callback {
 public:
  explicit ModelSaver(ModelSaverOptions o) : Callback("ModelSaver", true), o_(std::move(o)) {}
  uint32_t events() const override {
    return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER_STEP | TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_AFTER_TRAIN;
  }
  Place place() const override { return Place::SavesCheckpoint; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    switch (e) {
      case TPT_EVENT_BEFORE_TRAIN: start(t); break;
      case TPT_EVENT_AFTER_TRAIN: {
        // The end of a run that did not fail is saved, with how it ended:
        // a stopped or finished run stays ended under auto_resume, and an
        // interrupted one (SIGTERM, a preempted job; a stop request) goes
        // on from where it stopped, losing no step.
        std::optional<RunEnd> end = t.run_end();
        if (dir_.empty() || !end || !t.ran_a_step()) break;
        if (t.global_step() == last_step_ && end == last_end_) break;  // saved as it is
        if (t.stop_signal() != 0)
          t.log().info("ModelSaver: saving at the stop by " + std::string(signal_name(t.stop_signal())) + ".");
        else
          t.log().info("ModelSaver: saving at the end of the run (" + end->text() + ").");
        save(t, /*again=*/true);
        break;
      }
      case TPT_EVENT_TRIGGER_STEP:
        if (o_.every_k_steps > 0 && t.global_step() % o_.every_k_steps == 0) save(t);
        break;
      case TPT_EVENT_TRIGGER_EPOCH:
        if (o_.every_k_epochs > 0 && t.epoch_num() % o_.every_k_epochs == 0) save(t);
        break;
      default: break;
    }
  }

 private:
  void start(Trainer &t) {
    dir_ = dir_for(t, o_.dir, "ModelSaver");
    make_dir(dir_);
    // What a killed process left: temporary files of unfinished writes (in
    // the log directory the trainer removed them; a directory of its own is
    // not locked, so only those of processes that are gone).
    remove_stale_temporaries(dir_, /*owned=*/false);
    std::error_code ec;
    if (auto idx = read_index(dir_)) {
      index_ = *idx;
      for (const auto &n : index_.all) {
        auto mt = fs::last_write_time(dir_ + "/" + n, ec);
        made_[n] = ec ? SysClock::now() : SysClock::now() - (fs::file_time_type::clock::now() - mt);
      }
    }
    last_kept_ = SysClock::now();
    last_step_ = -1;
  }

  // again: also when this step was saved (the end of the run, recorded).
  void save(Trainer &t, bool again = false) {
    if (t.global_step() == last_step_ && !again) return;  // a step's save and its epoch's save are one checkpoint
    last_step_ = t.global_step();
    std::string name = "model-" + std::to_string(t.global_step());
    std::string path = dir_ + "/" + name;
    std::optional<RunEnd> end;
    try {
      Checkpoint ck = take_checkpoint(t);
      end = ck.run_end;
      // A diverged model is not saved over good checkpoints (TerminateOnNaN
      // relies on it): the last checkpoint stays the last good one.
      for (const auto &v : ck.variables) {
        if (v.second.is_floating_point() && !v.second.isfinite().all().item<bool>()) {
          t.log().error("ModelSaver: not saving " + name + ": the variable " + v.first +
                        " is not finite (NaN or infinite)" +
                        (index_.latest.empty() ? std::string() : "; the latest checkpoint is still " + index_.latest));
          return;
        }
      }
      write_checkpoint(path, ck);
    } catch (const Error &e) {
      if (e.code() != TPT_ERR_IO) throw;
      // tensorpack's ModelSaver logs IO errors and training goes on; the
      // index still names the last checkpoint written whole.
      report_.failed(t.log(), "ModelSaver: " + std::string(e.what()) + "; the latest checkpoint is " +
                                  (index_.latest.empty() ? std::string("none yet") : index_.latest));
      return;
    }
    CheckpointIndex next = index_;
    for (auto it = next.all.begin(); it != next.all.end();)
      it = *it == name ? next.all.erase(it) : it + 1;
    next.all.push_back(name);
    next.latest = name;
    std::vector<std::string> remove;
    SysClock::time_point kept = last_kept_;
    while (o_.max_to_keep > 0 && static_cast<int64_t>(next.all.size()) > o_.max_to_keep) {
      std::string oldest = next.all.front();
      next.all.erase(next.all.begin());
      auto made = made_.count(oldest) ? made_[oldest] : SysClock::now();
      // keep_checkpoint_every_n_hours: one checkpoint per that many hours is
      // never deleted (TensorFlow's Saver: "don't delete", not "create").
      if (o_.keep_every_n_hours > 0 &&
          std::chrono::duration<double, std::ratio<3600>>(made - kept).count() >= o_.keep_every_n_hours) {
        kept = made;
        continue;
      }
      remove.push_back(oldest);
    }
    try {
      write_index(dir_, next);  // the index first: it never names a deleted file
    } catch (const Error &e) {
      if (e.code() != TPT_ERR_IO) throw;
      // The new checkpoint is not indexed, so it goes: a later run would
      // never rotate it away. The old index and its files stay as they were.
      std::error_code ec;
      fs::remove(path, ec);
      report_.failed(t.log(), "ModelSaver: " + std::string(e.what()) + "; " + name +
                                  " was removed again, the latest checkpoint is " +
                                  (index_.latest.empty() ? std::string("none yet") : index_.latest));
      return;
    }
    index_ = std::move(next);
    last_end_ = std::move(end);
    last_kept_ = kept;
    made_[name] = SysClock::now();
    std::error_code ec;
    for (const auto &n : remove) {
      fs::remove(dir_ + "/" + n, ec);
      made_.erase(n);
    }
    report_.succeeded(t.log(), "ModelSaver: saving");
    t.log().info("Model saved to " + path + ".");
  }

  ModelSaverOptions o_;
  std::string dir_;
  CheckpointIndex index_;
  std::map<std::string, SysClock::time_point> made_;
  SysClock::time_point last_kept_;
  int64_t last_step_ = -1;
  std::optional<RunEnd> last_end_;  // how the run ended, as the last checkpoint records it
  FailureReport report_;
};

class BestSaver final : public Callback {
 public:
  BestSaver(std::string stat, bool maximize, std::string filename, std::string dir)
      : Callback(maximize ? "MaxSaver" : "MinSaver", true),
        stat_(std::move(stat)),
        maximize_(maximize),
        filename_(filename.empty() ? std::string(maximize ? "max-" : "min-") + stat_ : std::move(filename)),
        dir_(std::move(dir)),
        best_(maximize ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()) {}
  uint32_t events() const override { return TPT_EVENT_TRIGGER; }
  Place place() const override { return Place::KeepsBest; }
  void on_event(Trainer &t, tpt_event, const Record *) override {
    const ScalarHistory *h = watched_scalar(t, name(), stat_);
    if (!h) {
      t.log().warn(name() + ": no value of '" + stat_ + "' yet.");
      return;
    }
    double v = h->values.back();
    int64_t step = h->steps.back();
    if (std::isnan(v) || !(maximize_ ? v > best_ : v < best_)) return;
    std::string dir = dir_for(t, dir_, name().c_str());
    auto idx = read_index(dir);
    std::string want = "model-" + std::to_string(step);
    if (!idx || idx->latest != want) {
      // tensorpack: the newest checkpoint must be the one of that step
      t.log().warn(name() + ": the newest checkpoint is not " + want + " (give the trainer a ModelSaver that saves at "
                   "the steps " + name() + " runs, or see ModelSaver's error if its save failed); '" +
                   stat_ + "' = " + std::to_string(v) + " was not kept.");
      return;
    }
    std::string from = dir + "/" + idx->latest, to = dir + "/" + filename_;
    try {
      std::vector<char> bytes = read_file_bytes(from);
      write_file_atomic(to, bytes.data(), bytes.size(), /*sync=*/true);
    } catch (const Error &e) {
      if (e.code() != TPT_ERR_IO) throw;
      // Logged, and training goes on; the best value is not taken, so the
      // next epoch that matches it tries again.
      report_.failed(t.log(), name() + ": " + e.what() + "; " + to + " is still the earlier best");
      return;
    }
    report_.succeeded(t.log(), name() + ": keeping the best checkpoint");
    best_ = v;
    t.log().info(name() + ": " + (maximize_ ? "max " : "min ") + stat_ + " = " + std::to_string(v) + "; " +
                 idx->latest + " copied to " + to + ".");
  }
  // The best value so far goes into checkpoints.
  bool save_state(std::vector<uint8_t> &out) override {
    out.resize(sizeof best_);
    std::memcpy(out.data(), &best_, sizeof best_);
    return true;
  }
  void check_state(const std::vector<uint8_t> &s) const override {
    if (s.size() != sizeof best_) invalid_argument(name() + ": a saved state of " + std::to_string(s.size()) + " bytes, not 8");
  }
  void restore_state(const std::vector<uint8_t> &s) override {
    check_state(s);
    std::memcpy(&best_, s.data(), sizeof best_);
  }

  const std::string &stat() const { return stat_; }
  // The best checkpoint's path once one was kept (by this run or, after a
  // resume, an earlier one); nullptr before. Lives as long as the saver.
  const std::string *kept(const Trainer &t) const {
    if (std::isinf(best_)) return nullptr;
    if (!dir_.empty()) kept_ = dir_ + "/" + filename_;
    else if (t.has_logdir()) kept_ = t.logdir() + "/" + filename_;
    else return nullptr;
    return &kept_;
  }

 private:
  std::string stat_;
  bool maximize_;
  std::string filename_;
  std::string dir_;
  double best_;
  FailureReport report_;
  mutable std::string kept_;
};

}  // namespace

const std::string *best_checkpoint(const Trainer &t, const std::string &stat) {
  std::string stats;
  for (const Callback *cb : t.callbacks())
    if (const auto *b = dynamic_cast<const BestSaver *>(cb)) {
      if (b->stat() == stat) return b->kept(t);
      stats += (stats.empty() ? "" : ", ") + b->stat();
    }
  fail(TPT_ERR_NOT_FOUND, "the trainer has no MinSaver or MaxSaver of '" + stat + "'" +
                              (stats.empty() ? std::string(" (it has none)") : "; it has them of: " + stats));
}

std::unique_ptr<Callback> make_model_saver(ModelSaverOptions o) {
  if (o.max_to_keep < 0) invalid_argument("max_to_keep must be >= 0 (0 keeps all), got " + std::to_string(o.max_to_keep));
  if (!(o.keep_every_n_hours >= 0) || !std::isfinite(o.keep_every_n_hours))
    invalid_argument("keep_every_n_hours must be a finite number >= 0");
  if (o.every_k_steps < 0 || o.every_k_epochs < 0) invalid_argument("every_k_steps and every_k_epochs must be >= 0");
  if (o.every_k_steps == 0 && o.every_k_epochs == 0)
    invalid_argument("every_k_steps and every_k_epochs are both 0: the saver would never save");
  return std::make_unique<ModelSaver>(std::move(o));
}

std::unique_ptr<Callback> make_best_saver(const std::string &stat, bool maximize, const std::string &filename,
                                          const std::string &dir) {
  if (stat.empty()) invalid_argument("the monitored statistic's name is empty");
  if (filename.find('/') != std::string::npos) invalid_argument("filename '" + filename + "' is not a plain file name");
  return std::make_unique<BestSaver>(stat, maximize, filename, dir);
}

}  // namespace tpt
