// tensorpack's Monitors (loop/monitors.hpp), and the built-in monitor
// callbacks: the stats.json writer and the per-epoch scalar printer.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/files.hpp"
#include "base/json.hpp"
#include "base/names.hpp"
#include "loop/monitors.hpp"
#include "loop/trainer.hpp"

namespace fs = std::filesystem;

namespace tpt {

void Monitors::put_scalar(const std::string &name, double value) {
  if (t_.phase_ == Trainer::Phase::Idle || t_.phase_ == Trainer::Phase::Done)
    fail(TPT_ERR_STATE, "scalars can only be put while training runs");
  auto it = history_.try_emplace(name).first;
  ScalarHistory &h = it->second;
  h.steps.push_back(t_.global_step_);
  h.values.push_back(value);
  if (t_.config_.scalar_history > 0 && static_cast<int64_t>(h.values.size()) > t_.config_.scalar_history) {
    h.steps.pop_front();
    h.values.pop_front();
  }
  Record record;
  record.kind = TPT_RECORD_SCALAR;
  record.name = &it->first;
  record.global_step = t_.global_step_;
  record.epoch_num = t_.epoch_num_;
  record.value = value;
  for (Callback *cb : t_.by_event_[event_index(TPT_EVENT_RECORD)]) cb->on_event(t_, TPT_EVENT_RECORD, &record);
}

void Monitors::put_image(const std::string &name, const at::Tensor &image) {
  if (t_.phase_ == Trainer::Phase::Idle || t_.phase_ == Trainer::Phase::Done)
    fail(TPT_ERR_STATE, "images can only be put while training runs");
  Record record;
  record.kind = TPT_RECORD_IMAGE;
  record.name = &name;
  record.global_step = t_.global_step_;
  record.epoch_num = t_.epoch_num_;
  record.image = &image;
  for (Callback *cb : t_.by_event_[event_index(TPT_EVENT_RECORD)]) cb->on_event(t_, TPT_EVENT_RECORD, &record);
}

void MovingSummary::update(double x) {
  biased = decay * biased + (1 - decay) * x;
  ++count;
  value = biased / (1 - std::pow(decay, static_cast<double>(count)));
}

void Monitors::add_moving_summary(const std::string &name, double value, double decay) {
  summaries_pending_ = true;
  for (MovingSummary &m : summaries_) {
    if (m.name == name) {
      m.update(value);
      return;
    }
  }
  MovingSummary m;
  m.name = name;
  m.decay = decay;
  m.update(value);
  summaries_.push_back(std::move(m));
}

void Monitors::put_summaries() {
  summaries_pending_ = false;
  for (const MovingSummary &m : summaries_) put_scalar(m.name, m.value);
}

const MovingSummary *Monitors::moving_summary(const std::string &name) const {
  for (const MovingSummary &m : summaries_)
    if (m.name == name) return &m;
  return nullptr;
}

const ScalarHistory *Monitors::history(const std::string &name) const {
  auto it = history_.find(name);
  return it == history_.end() ? nullptr : &it->second;
}

const ScalarHistory *watched_scalar(const Trainer &t, const std::string &who, const std::string &stat) {
  const ScalarHistory *h = t.monitors().history(stat);
  if (h && !h->values.empty()) return h;
  // Mid-epoch, or on a rank without the chief-only callbacks that put it,
  // it may come later; by an epoch's end on the chief it is a wrong name.
  if (!t.at_epoch_end() || !t.config().is_chief) return nullptr;
  std::vector<std::string> names;
  for (const auto &kv : t.monitors().histories())
    if (!kv.second.values.empty()) names.push_back(kv.first);
  std::string list;
  for (const std::string &n : closest_first(stat, names)) list += (list.empty() ? "" : ", ") + n;
  fail(TPT_ERR_NOT_FOUND, who + ": no callback or monitor has put the scalar '" + stat + "' by the end of epoch " +
                              std::to_string(t.epoch_num()) + "; the scalars put are: " +
                              (list.empty() ? std::string("none") : list) +
                              " (closest first). If its callback puts it every k epochs, give " + who +
                              " the same schedule.");
}

namespace {

// tensorpack's JSONWriter (callbacks/monitor.py): scalars collected since
// the last trigger become one entry {name: value, ..., "epoch_num": E,
// "global_step": G} of the list in <logdir>/stats.json. It triggers in
// before_train (so scalars put before training get an entry of their own,
// with epoch_num starting_epoch - 1), after each epoch, and after each step
// but an epoch's last, so scalars put mid-epoch get entries of their own.
// Whatever is left is written in after_train.
//
// tensorpack rewrites the whole file at every trigger, which makes a long
// run quadratic. Here a write that fits in the page (the OS's unit of
// memory) where the closing "\n]\n" lies appends the new entries in place:
// one pwrite over that closing bracket. A process killed during a write
// leaves a file whole only where the OS cannot cut the write short, and
// Linux cuts a write that a fatal signal (SIGKILL, the OOM killer) meets
// between two pages (generic_perform_write checks for one before each page;
// seen on tmpfs: 178 of 200 killed 64 KiB writes were cut at a 4 KiB mark),
// so a write that spans pages never goes in place: the file is written
// again, atomically (a temporary holding the old list's bytes and the new
// entries, renamed over it). Either way a killed process leaves the old or
// the new list, both whole, and the file is fsync'ed after each epoch.
// Nothing but the unwritten entries is held in memory.
//
// Most writes (an epoch's few scalars, ~200 bytes) go in place; a write of
// many entries (scalars put every step) costs a copy of the file. So that
// this never grows to more than a small share of a long run: mid-epoch
// entries reach the file at most every kMidEpochInterval, or less often
// when writing takes long (<= 5 % of the time), and an epoch's entries that
// would rewrite a file over kLargeFile wait the same way (written at a
// later epoch's end, and at the end of training; a killed run loses them).
//
// A write that fails (a full disk) is logged once and training goes on, as
// with tensorpack's JSONWriter: the old closing bracket is put back and the
// file cut to its old length (neither needs new space), so stats.json stays
// the valid list it was; the entries stay pending and are written when
// writing works again. Should even that repair fail, the next write
// rewrites the file whole from its intact beginning.
class JsonWriter final : public Callback {
 public:
  JsonWriter() : Callback("JSONWriter", false) {}
  ~JsonWriter() override { close_file(); }
  uint32_t events() const override {
    return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER_STEP | TPT_EVENT_TRIGGER_EPOCH | TPT_EVENT_AFTER_TRAIN |
           TPT_EVENT_RECORD;
  }
  void on_event(Trainer &t, tpt_event e, const Record *r) override {
    switch (e) {
      case TPT_EVENT_BEFORE_TRAIN:
        load(t);
        trigger(t, false);  // tensorpack's _before_train ends with self._trigger()
        break;
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
        if (!path_.empty()) trigger(t, true, /*last=*/true);
        if (!pending_.empty())
          t.log().warn("JSONWriter: " + std::to_string(std::count(pending_.begin(), pending_.end(), '{')) +
                       " entr(ies) were never written to " + path_ + " (see its error above); it holds those before them");
        close_file();
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
    close_file();
    pending_.clear();
    entries_ = 0;
    size_ = 0;
    broken_ = false;
    next_write_ = Clock::time_point();
    next_rewrite_ = Clock::time_point();
    std::string body;  // the entries kept from an earlier run, serialised our way
    std::error_code ec;
    if (fs::exists(path_, ec)) {
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
        if (t.resume_checkpoint()) {
          // An exact resume: the entries up to the checkpoint's step stay;
          // later ones came from steps that run again.
          keep = true;
          size_t kept = 0, dropped = 0;
          for (const json::Value &entry : old.items()) {
            const json::Value *g = entry.find("global_step");
            if (g && g->is_number() && static_cast<int64_t>(g->as_number()) > t.global_step()) {
              ++dropped;
              continue;
            }
            body += (body.empty() ? "" : ",") + serialise(entry);
            ++kept;
          }
          t.log().info("Resuming at global_step " + std::to_string(t.global_step()) + ": stats.json keeps " +
                       std::to_string(kept) + " entries" +
                       (dropped ? " and drops " + std::to_string(dropped) + " written after the checkpoint" : "") + ".");
        } else if (last + 1 == t.config().starting_epoch) {
          keep = true;
          for (const json::Value &entry : old.items()) body += (body.empty() ? "" : ",") + serialise(entry);
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
        if (ec) {
          t.log().error("JSONWriter: cannot move " + path_ + " to " + backup + ": " + ec.message() +
                        "; no stats.json is written in this run");
          path_.clear();
          return;
        }
        t.log().warn("Existing stats.json was moved to " + backup + ": " + why + ".");
        body.clear();
      } else if (body.empty()) {
        fs::remove(path_, ec);  // a resume from before its first entry
      }
    }
    // The kept entries are written again whole, atomically, in the format
    // that appends rely on: at once, by the trigger that follows.
    pending_ = std::move(body);
  }

  void trigger(Trainer &t, bool epoch, bool last = false) {
    if (!now_.empty()) {
      json::Value entry = json::Value::object();
      for (auto &p : now_) entry.set(p.first, json::Value::number(p.second));
      entry.set("epoch_num", json::Value::number(static_cast<double>(t.epoch_num())));
      entry.set("global_step", json::Value::number(static_cast<double>(t.global_step())));
      pending_ += (entries_ == 0 && pending_.empty()) ? "" : ",";
      pending_ += serialise(entry);
      now_.clear();
    }
    if (path_.empty()) {
      pending_.clear();
      return;
    }
    if (pending_.empty()) {
      if (epoch && fd_ >= 0) ::fsync(fd_);
      return;
    }
    Clock::time_point start = Clock::now();
    if (!epoch && start < next_write_) return;
    const bool whole = must_rewrite();
    // An epoch's entries wait too when they would rewrite a large file
    // sooner than its last rewrite allows (<= 5 % of the time).
    if (epoch && !last && whole && size_ > kLargeFile && start < next_rewrite_) return;
    write_pending(t, epoch);
    Clock::time_point end = Clock::now();
    next_write_ = end + std::max<Clock::duration>(kMidEpochInterval, 20 * (end - start));  // <= 5 % of the time
    if (whole) next_rewrite_ = end + 20 * (end - start);
  }

  // Whether writing the pending entries rewrites the file (see above).
  bool must_rewrite() const {
    return fd_ < 0 || broken_ ||
           !in_one_page(size_ - static_cast<int64_t>(std::strlen(kClose)), pending_.size() + std::strlen(kClose));
  }

  // "\n  {...}" for one entry, a line each.
  static std::string serialise(const json::Value &entry) {
    std::string text = "\n  " + json::write(entry, /*pretty=*/true);
    text.pop_back();  // write() ends a pretty document with a newline
    return text;
  }

  void open_file() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail(TPT_ERR_IO, "cannot open " + path_ + ": " + std::strerror(errno));
  }
  void close_file() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Whether bytes [at, at + n) of the file lie in one page: a write of them
  // is never cut short by a signal.
  static bool in_one_page(int64_t at, size_t n) {
    static const int64_t page = [] {
      long p = ::sysconf(_SC_PAGESIZE);
      return p > 0 ? static_cast<int64_t>(p) : int64_t{4096};
    }();
    return n > 0 && at / page == (at + static_cast<int64_t>(n) - 1) / page;
  }

  void write_pending(Trainer &t, bool sync) {
    try {
      const std::string text = pending_ + kClose;
      const int64_t at = size_ - static_cast<int64_t>(std::strlen(kClose));  // the old closing bracket
      if (!must_rewrite()) {
        // The new entries and the closing bracket over the old closing bracket.
        if (!pwrite_all(fd_, text.data(), text.size(), static_cast<off_t>(at))) {
          int e = errno;
          // Back to the old list: its closing bracket where it was, its length.
          if (!pwrite_all(fd_, kClose, std::strlen(kClose), static_cast<off_t>(at)) ||
              ::ftruncate(fd_, static_cast<off_t>(size_)) != 0)
            broken_ = true;
          fail(TPT_ERR_IO, "cannot write " + path_ + ": " + std::strerror(e));
        }
        written(at + static_cast<int64_t>(text.size()));
        if (sync && ::fsync(fd_) != 0) fail(TPT_ERR_IO, "cannot sync " + path_ + ": " + std::strerror(errno));
      } else {
        rewrite(text, sync);
      }
    } catch (const Error &e) {
      if (e.code() != TPT_ERR_IO) throw;
      report_.failed(t.log(), "JSONWriter: " + std::string(e.what()) +
                                  (broken_ ? "; it could not be repaired in place and is rewritten at the next write"
                                           : "; stats.json keeps its earlier entries, the new ones wait"));
      return;
    }
    report_.succeeded(t.log(), "JSONWriter: writing " + path_);
  }

  // The pending entries are in the file, which is `size` bytes long now.
  void written(int64_t size) {
    size_ = size;
    entries_ += 1;
    pending_.clear();
  }

  // The file again, atomically: "[" (the first write) or the old list up to
  // its closing bracket (its intact beginning after a failed repair), then
  // `tail`. Copied in pieces: the file is never held in memory whole.
  void rewrite(const std::string &tail, bool sync) {
    AtomicFile out(path_);
    int64_t at = 1;
    if (size_ == 0) {
      out.write("[", 1);
    } else {
      at = size_ - static_cast<int64_t>(std::strlen(kClose));
      struct Fd {
        int fd;
        ~Fd() { ::close(fd); }
      } in{open_regular(path_)};
      std::vector<char> buf(static_cast<size_t>(std::min<int64_t>(at, int64_t{1} << 20)));
      for (int64_t done = 0; done < at;) {
        ssize_t n = ::pread(in.fd, buf.data(), static_cast<size_t>(std::min<int64_t>(at - done, buf.size())),
                            static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
          fail(TPT_ERR_IO, "cannot read " + path_ + " back: " +
                               (n < 0 ? std::string(std::strerror(errno)) : "it is shorter than this run wrote it"));
        out.write(buf.data(), static_cast<size_t>(n));
        done += n;
      }
    }
    out.write(tail.data(), tail.size());
    out.commit(sync);
    // The new file is the one to append to; until it is open (should that
    // fail), the next write starts from the file again.
    close_file();
    written(at + static_cast<int64_t>(tail.size()));
    broken_ = false;
    open_file();
  }

  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kMidEpochInterval{5};
  static constexpr int64_t kLargeFile = int64_t{1} << 20;  // rewritten in a millisecond or more
  static constexpr const char *kClose = "\n]\n";

  std::string path_;
  int fd_ = -1;                   // stats.json, once written
  int64_t size_ = 0;              // its length
  int64_t entries_ = 0;           // nonzero once the file has an entry
  std::string pending_;           // entries not yet written, serialised
  bool broken_ = false;           // a failed write could not be undone in place
  FailureReport report_;
  Clock::time_point next_write_;  // the earliest mid-epoch write (the first one is at once)
  Clock::time_point next_rewrite_;  // the earliest epoch-end rewrite of a large file
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
