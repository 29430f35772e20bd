// Built-in monitors: the stats.json writer and the per-epoch scalar printer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/trainer.hpp"

namespace fs = std::filesystem;

namespace tpt {

namespace {

// tensorpack's JSONWriter: scalars collected since the last trigger become one
// entry {name: value, ..., "epoch_num": E, "global_step": G}, appended to a
// list that is rewritten atomically to <logdir>/stats.json. It triggers after
// each epoch and after each step but an epoch's last, so scalars put
// mid-epoch get entries of their own. Whatever is left is written in
// after_train.
//
// The file is rewritten after every epoch and at the end; mid-epoch entries
// reach it at most every kMidEpochInterval, or less often when writing takes
// long (the file grows with the run: rewriting it after every step would make
// a long run quadratic). tensorpack rewrites it at every trigger.
class JsonWriter final : public Callback {
 public:
  JsonWriter() : Callback("JSONWriter", false) {}
  uint32_t events() const override {
    return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER_STEP | TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_AFTER_TRAIN |
           TPT_EVENT_RECORD;
  }
  void on_event(Trainer &t, tpt_event e, const Record *r) override {
    switch (e) {
      case TPT_EVENT_BEFORE_TRAIN: load(t); break;
      case TPT_EVENT_RECORD:
        if (r->kind == TPT_RECORD_SCALAR) put(*r->name, r->value);
        break;
      case TPT_EVENT_TRIGGER_STEP:
        if (t.local_step() != t.steps_per_epoch() - 1) trigger(t, false);
        break;
      case TPT_EVENT_TRIGGER_EPOCH: trigger(t, true); break;
      // Scalars put by the step that stopped (or failed) training still get
      // their entry (tensorpack would drop them).
      case TPT_EVENT_AFTER_TRAIN:
        if (!path_.empty()) trigger(t, true);
        break;
      default: break;
    }
  }

 private:
  void put(const std::string &name, double v) {
    for (auto &p : now_) {
      if (p.first == name) {
        p.second = v;
        return;
      }
    }
    now_.emplace_back(name, v);
  }

  void load(Trainer &t) {
    path_ = t.logdir() + "/stats.json";
    body_.clear();
    unwritten_ = false;
    next_write_ = Clock::time_point();
    std::error_code ec;
    if (!fs::exists(path_, ec)) return;
    bool keep = false;
    std::string why;
    try {
      json::Value old = json::parse(read_file(path_));
      if (!old.is_array()) throw std::runtime_error("not a list");
      int64_t last = 0;
      if (!old.items().empty()) {
        const json::Value *e = old.items().back().find("epoch_num");
        if (e && e->is_number()) last = static_cast<int64_t>(e->as_number());
      }
      if (last + 1 == t.config().starting_epoch) {
        keep = true;
        for (const json::Value &entry : old.items()) append(entry);
        t.log().info("Found existing stats.json at epoch " + std::to_string(last) + "; appending to it.");
      } else {
        why = "its last epoch_num is " + std::to_string(last) + " and training starts at epoch " +
              std::to_string(t.config().starting_epoch);
      }
    } catch (const std::exception &e) {
      why = std::string("it cannot be read (") + e.what() + ")";
    }
    if (!keep) {
      std::string backup = unused_path(path_, "." + timestamp_suffix());
      fs::rename(path_, backup, ec);
      if (ec) fail(TPT_ERR_IO, "cannot move " + path_ + " to " + backup + ": " + ec.message());
      t.log().warn("Existing stats.json was moved to " + backup + ": " + why + ".");
    }
  }

  // Mid-epoch writes are atomic but not fsync'ed (a killed process still
  // leaves a whole file); the write after each epoch is synced too.
  void trigger(Trainer &t, bool epoch) {
    if (!now_.empty()) {
      json::Value entry = json::Value::object();
      for (auto &p : now_) entry.set(p.first, json::Value::number(p.second));
      entry.set("epoch_num", json::Value::number(static_cast<double>(t.epoch_num())));
      entry.set("global_step", json::Value::number(static_cast<double>(t.global_step())));
      append(entry);
      now_.clear();
      unwritten_ = true;
    }
    if (!unwritten_) return;
    Clock::time_point start = Clock::now();
    if (!epoch && start < next_write_) return;
    write_file_atomic(path_, "[" + body_ + "\n]\n", /*sync=*/epoch);
    Clock::time_point end = Clock::now();
    next_write_ = end + std::max<Clock::duration>(kMidEpochInterval, 20 * (end - start));  // <= 5 % of the time
    unwritten_ = false;
  }

  // The file is a list with one entry per line; entries are serialised once.
  void append(const json::Value &entry) {
    body_ += body_.empty() ? "\n  " : ",\n  ";
    body_ += json::write(entry, /*pretty=*/true);
    body_.pop_back();  // write() ends a pretty document with a newline
  }

  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kMidEpochInterval{5};

  std::string path_;
  std::string body_;
  bool unwritten_ = false;        // body_ has entries the file lacks
  Clock::time_point next_write_;  // the earliest mid-epoch write (the first one is at once)
  std::vector<std::pair<std::string, double>> now_;
};

// tensorpack's ScalarPrinter: the latest value of each scalar, sorted by
// name, 5 significant digits, after each epoch (and before training).
class ScalarPrinter final : public Callback {
 public:
  ScalarPrinter() : Callback("ScalarPrinter", false) {}
  uint32_t events() const override { return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_RECORD; }
  void on_event(Trainer &t, tpt_event e, const Record *r) override {
    if (e == TPT_EVENT_RECORD) {
      if (r->kind != TPT_RECORD_SCALAR) return;
      for (auto &p : latest_) {
        if (p.first == *r->name) {
          p.second = r->value;
          return;
        }
      }
      latest_.emplace_back(*r->name, r->value);
      return;
    }
    std::sort(latest_.begin(), latest_.end());
    for (auto &p : latest_) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.5g", p.second);
      t.log().info(p.first + ": " + buf);
    }
    latest_.clear();
  }

 private:
  std::vector<std::pair<std::string, double>> latest_;
};

}  // namespace

std::unique_ptr<Callback> make_json_writer() { return std::make_unique<JsonWriter>(); }
std::unique_ptr<Callback> make_scalar_printer() { return std::make_unique<ScalarPrinter>(); }

}  // namespace tpt
