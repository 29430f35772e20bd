// Checkpoints: the file format (torch.save's archive: a pickled dict, read
// by python3-torch's torch.load), taking and applying a trainer's state, the
// index file, restoring variables by name. docs/checkpoints.md.
#include "core/checkpoint.hpp"

#include <ATen/Functions.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <ATen/CPUGeneratorImpl.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/torch_save.hpp"
#include "core/trainer.hpp"
#include "model/model.hpp"
#include "model/torchscript.hpp"

namespace fs = std::filesystem;

// libtorch_cpu's, declared in torch/csrc/jit/serialization/export.h, which
// pulls in ONNX headers; pickle_save uses it the same way.
namespace torch::jit {
TORCH_API void writeArchiveAndTensors(const std::string &archive_name, const char *pickle_bytes, size_t size,
                                      const std::vector<at::Tensor> &tensors,
                                      caffe2::serialize::PyTorchStreamWriter &out);
}

namespace tpt {

namespace {

using c10::IValue;
using GenericDict = c10::impl::GenericDict;

GenericDict any_dict() { return GenericDict(c10::StringType::get(), c10::AnyType::get()); }

at::Tensor bytes_tensor(const std::vector<uint8_t> &b) {
  at::Tensor t = at::empty({static_cast<int64_t>(b.size())}, at::kByte);
  if (!b.empty()) std::memcpy(t.data_ptr(), b.data(), b.size());
  return t;
}

// ---- reading a pickled value: every accessor names the field it failed on

class Reader {
 public:
  explicit Reader(std::string what) : what_(std::move(what)) {}
  [[noreturn]] void bad(const std::string &field, const std::string &why) const {
    invalid_argument(what_ + ": field '" + field + "' " + why);
  }
  const IValue &get(const GenericDict &d, const std::string &field) const {
    auto it = d.find(field);
    if (it == d.end()) bad(field, "is missing");
    return it->value();
  }
  bool has(const GenericDict &d, const std::string &field) const { return d.find(field) != d.end(); }
  int64_t int_(const GenericDict &d, const std::string &field, int64_t lo, int64_t hi) const {
    const IValue &v = get(d, field);
    if (!v.isInt()) bad(field, "is not an integer");
    int64_t x = v.toInt();
    if (x < lo || x > hi) bad(field, "is " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
  double number(const IValue &v, const std::string &field) const {
    if (v.isDouble()) return v.toDouble();
    if (v.isInt()) return static_cast<double>(v.toInt());
    bad(field, "is not a number");
  }
  std::string str(const IValue &v, const std::string &field) const {
    if (!v.isString()) bad(field, "is not a string");
    return v.toStringRef();
  }
  GenericDict dict(const IValue &v, const std::string &field) const {
    if (!v.isGenericDict()) bad(field, "is not a dict");
    return v.toGenericDict();
  }
  at::Tensor tensor(const IValue &v, const std::string &field) const {
    if (!v.isTensor()) bad(field, "is not a tensor");
    at::Tensor t = v.toTensor();
    if (!t.defined()) bad(field, "is an undefined tensor");
    return t;
  }
  std::vector<uint8_t> bytes(const IValue &v, const std::string &field) const {
    at::Tensor t = tensor(v, field);
    if (t.scalar_type() != at::kByte || t.dim() != 1) bad(field, "is not a 1-D uint8 tensor");
    t = t.contiguous();
    const uint8_t *p = t.data_ptr<uint8_t>();
    return std::vector<uint8_t>(p, p + t.numel());
  }
  // A dict with string keys, in its order.
  std::vector<std::pair<std::string, IValue>> items(const IValue &v, const std::string &field) const {
    GenericDict d = dict(v, field);
    std::vector<std::pair<std::string, IValue>> out;
    for (const auto &e : d) out.emplace_back(str(e.key(), field + " key"), e.value());
    return out;
  }

 private:
  std::string what_;
};

IValue load_pickle(const std::vector<char> &bytes, const std::string &what) {
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const std::exception &e) {
    std::string m = e.what();
    if (auto nl = m.find('\n'); nl != std::string::npos) m.resize(nl);
    invalid_argument(what + " is not a readable checkpoint or torch.save archive (" + m + ")");
  }
}

// A whole file, read once into its buffer.
std::vector<char> bytes_of_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(TPT_ERR_IO, "cannot open " + path);
  std::streamoff size = in.tellg();
  if (size < 0) fail(TPT_ERR_IO, "cannot read " + path);
  std::vector<char> out(static_cast<size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(out.data(), size)) fail(TPT_ERR_IO, "cannot read " + path);
  return out;
}

// The file is torch.save's zip archive followed by a trailer: "TPTCKPT1",
// the archive's length and its checksum (little-endian; docs/checkpoints.md). zip
// readers (LibTorch's, Python's) find the archive from its end record and
// ignore what follows; the trailer lets a reader refuse a truncated or
// damaged file before LibTorch's zip reader, which skips CRCs and trusts
// offsets, sees it.
constexpr char kTrailerMagic[8] = {'T', 'P', 'T', 'C', 'K', 'P', 'T', '1'};
constexpr size_t kTrailer = 24;

// FNV-1a's constants over 8-byte little-endian words, then the tail bytes
// (word-wise: a checkpoint is hashed at memory speed, not byte by byte), fed
// in pieces of any size.
class Checksum {
 public:
  void update(const char *p, size_t n) {
    while (n > 0 && carry_n_ > 0 && carry_n_ < 8) {  // finish a word begun in the last piece
      carry_[carry_n_++] = *p++;
      --n;
      if (carry_n_ == 8) {
        word(carry_);
        carry_n_ = 0;
      }
    }
    for (; n >= 8; p += 8, n -= 8) word(p);
    for (; n > 0; --n) carry_[carry_n_++] = *p++;
  }
  uint64_t value() const {
    uint64_t h = h_;
    for (size_t i = 0; i < carry_n_; ++i) h = (h ^ static_cast<uint8_t>(carry_[i])) * 0x100000001b3ull;
    return h;
  }

 private:
  void word(const char *p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h_ = (h_ ^ w) * 0x100000001b3ull;
    h_ ^= h_ >> 29;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
  char carry_[8] = {};
  size_t carry_n_ = 0;
};

uint64_t checksum(const char *p, size_t n) {
  Checksum c;
  c.update(p, n);
  return c.value();
}

// Checks the trailer and drops it: `file` becomes the archive.
void strip_trailer(std::vector<char> &file, const std::string &what) {
  if (file.size() < kTrailer || std::memcmp(file.data() + file.size() - kTrailer, kTrailerMagic, 8) != 0)
    invalid_argument(what + " is truncated or not a tptrain checkpoint (it does not end with tptrain's trailer)");
  uint64_t len = 0, hash = 0;
  std::memcpy(&len, file.data() + file.size() - 16, 8);
  std::memcpy(&hash, file.data() + file.size() - 8, 8);
  if (len != file.size() - kTrailer) invalid_argument(what + " is damaged: its trailer gives another length");
  if (checksum(file.data(), len) != hash)
    invalid_argument(what + " is corrupted: its bytes do not match the hash in its trailer");
  file.resize(len);
  check_zip(file.data(), file.size(), what);
}

// The trailer of an archive of `len` bytes with checksum `hash`.
std::array<char, kTrailer> trailer_of(uint64_t len, uint64_t hash) {
  std::array<char, kTrailer> t{};
  std::memcpy(t.data(), kTrailerMagic, 8);
  std::memcpy(t.data() + 8, &len, 8);
  std::memcpy(t.data() + 16, &hash, 8);
  return t;
}

}  // namespace

// ---- the format

namespace {

GenericDict optimizer_dict(const OptimizerState &o) {
  GenericDict od = any_dict();
  od.insert("kind", o.kind);
  c10::Dict<std::string, double> hp;
  for (const auto &[k, v] : o.hparams) hp.insert(k, v);
  od.insert("hparams", hp);
  od.insert("micro_steps", o.micro_steps);
  GenericDict state = any_dict();
  for (const auto &[var, slots] : o.slots) {
    GenericDict st = any_dict();
    for (const auto &[slot, t] : slots) st.insert(slot, t);
    if (auto step = o.steps.find(var); step != o.steps.end()) st.insert("step", step->second);
    state.insert(var, st);
  }
  od.insert("state", state);
  c10::Dict<std::string, at::Tensor> grads;
  for (const auto &[var, g] : o.grads) grads.insert(var, g);
  od.insert("grads", grads);
  return od;
}

GenericDict to_dict(const Checkpoint &ck) {
  GenericDict d = any_dict();
  d.insert("format", std::string(kCheckpointFormat));
  d.insert("version", kCheckpointVersion);
  d.insert("global_step", ck.global_step);
  d.insert("epoch_num", ck.epoch_num);
  d.insert("local_step", ck.local_step);
  d.insert("next_epoch", ck.next_epoch);
  d.insert("next_step", ck.next_step);
  c10::Dict<std::string, at::Tensor> vars;
  for (const auto &[name, value] : ck.variables) vars.insert(name, value.detach());
  d.insert("variables", vars);
  c10::List<std::string> trainable;
  for (const auto &n : ck.trainable) trainable.push_back(n);
  d.insert("trainable", trainable);
  if (ck.optimizer) d.insert("optimizer", optimizer_dict(*ck.optimizer));
  if (!ck.train_ops.empty()) {  // a custom trainer's train ops' optimizers, by op name
    GenericDict ops = any_dict();
    for (const auto &[name, o] : ck.train_ops) ops.insert(name, optimizer_dict(o));
    d.insert("train_ops", ops);
  }
  if (!ck.input.empty()) d.insert("input", bytes_tensor(ck.input));
  c10::Dict<std::string, at::Tensor> cbs;
  for (const auto &[key, b] : ck.callbacks) cbs.insert(key, bytes_tensor(b));
  d.insert("callbacks", cbs);
  c10::impl::GenericList sums(c10::AnyType::get());
  for (const MovingSummaryState &m : ck.summaries) {
    GenericDict s = any_dict();
    s.insert("name", m.name);
    s.insert("decay", m.decay);
    s.insert("biased", m.biased);
    s.insert("value", m.value);
    s.insert("count", m.count);
    sums.push_back(s);
  }
  d.insert("moving_summaries", sums);
  GenericDict rng = any_dict();
  if (ck.rng_cpu.defined()) rng.insert("cpu", ck.rng_cpu);
  if (ck.tower_seed) rng.insert("tower_seed", *ck.tower_seed);
  d.insert("rng", rng);
  return d;
}

// torch::pickle_save's archive, written through `sink` as it is made: the
// pickle, then each tensor's storage straight from the tensor (pickle_save
// would gather all of it in growing buffers first). Returns the bytes written.
uint64_t write_archive(const Checkpoint &ck, const std::function<bool(const char *, size_t)> &sink) {
  std::vector<char> pickle_data;
  torch::jit::Pickler pickler([&](const char *b, size_t n) { pickle_data.insert(pickle_data.end(), b, b + n); });
  pickler.protocol();
  pickler.pushIValue(to_dict(ck));
  pickler.stop();
  uint64_t written = 0;
  // The writer runs under miniz's C frames: it reports failures, never throws.
  caffe2::serialize::PyTorchStreamWriter writer([&](const void *p, size_t n) -> size_t {
    if (!sink(static_cast<const char *>(p), n)) return 0;
    written += n;
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle_data.data(), pickle_data.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return written;
}

}  // namespace

std::vector<char> encode(const Checkpoint &ck) {
  std::vector<char> out;
  Checksum sum;
  uint64_t len = write_archive(ck, [&](const char *p, size_t n) {
    out.insert(out.end(), p, p + n);
    sum.update(p, n);
    return true;
  });
  auto t = trailer_of(len, sum.value());
  out.insert(out.end(), t.begin(), t.end());
  return out;
}

namespace {

// An optimizer's state from its dict; errors name `f` ("optimizer", "train_ops['d_op']").
OptimizerState optimizer_of(Reader &r, const GenericDict &od, const std::string &f, const std::set<std::string> &names) {
  constexpr int64_t kMax = int64_t(1) << 60;
  OptimizerState o;
  o.kind = r.str(r.get(od, "kind"), f + ".kind");
  for (auto &[k, v] : r.items(r.get(od, "hparams"), f + ".hparams")) o.hparams[k] = r.number(v, f + ".hparams['" + k + "']");
  o.micro_steps = r.int_(od, "micro_steps", 0, kMax);
  for (auto &[var, sv] : r.items(r.get(od, "state"), f + ".state")) {
    if (!names.count(var)) r.bad(f + ".state", "has '" + var + "', which is not in variables");
    auto &slots = o.slots[var];
    for (auto &[slot, v] : r.items(sv, f + ".state['" + var + "']")) {
      std::string field = f + ".state['" + var + "']['" + slot + "']";
      if (slot == "step") {
        if (!v.isInt() || v.toInt() < 0) r.bad(field, "is not a non-negative integer");
        o.steps[var] = v.toInt();
      } else {
        slots[slot] = r.tensor(v, field);
      }
    }
  }
  for (auto &[var, v] : r.items(r.get(od, "grads"), f + ".grads")) {
    if (!names.count(var)) r.bad(f + ".grads", "has '" + var + "', which is not in variables");
    o.grads[var] = r.tensor(v, f + ".grads['" + var + "']");
  }
  return o;
}

}  // namespace

Checkpoint decode(std::vector<char> file, const std::string &what) {
  strip_trailer(file, what);
  IValue root = load_pickle(file, what);
  Reader r(what);
  if (!root.isGenericDict()) invalid_argument(what + " is not a tptrain checkpoint (not a dict)");
  GenericDict d = root.toGenericDict();
  if (!r.has(d, "format") || !d.at("format").isString() || d.at("format").toStringRef() != kCheckpointFormat)
    invalid_argument(what + " is not a tptrain checkpoint (no format \"" + kCheckpointFormat +
                     "\"; a state_dict restores variables only: tpt_model_restore)");
  int64_t version = r.int_(d, "version", 1, INT64_MAX);
  if (version > kCheckpointVersion)
    invalid_argument(what + " has checkpoint version " + std::to_string(version) + "; this tptrain reads up to " +
                     std::to_string(kCheckpointVersion));
  constexpr int64_t kMax = int64_t(1) << 60;
  Checkpoint ck;
  ck.global_step = r.int_(d, "global_step", 0, kMax);
  ck.epoch_num = r.int_(d, "epoch_num", 0, kMax);
  ck.local_step = r.int_(d, "local_step", -1, kMax);
  ck.next_epoch = r.int_(d, "next_epoch", 1, kMax);
  ck.next_step = r.int_(d, "next_step", 0, kMax);
  std::set<std::string> names;
  for (auto &[name, v] : r.items(r.get(d, "variables"), "variables")) {
    if (name.empty()) r.bad("variables", "has an empty name");
    ck.variables.emplace_back(name, r.tensor(v, "variables['" + name + "']"));
    names.insert(name);
  }
  {
    const IValue &t = r.get(d, "trainable");
    if (!t.isList()) r.bad("trainable", "is not a list");
    for (const IValue &n : t.toListRef()) {
      std::string name = r.str(n, "trainable");
      if (!names.count(name)) r.bad("trainable", "names '" + name + "', which is not in variables");
      ck.trainable.push_back(name);
    }
  }
  if (r.has(d, "optimizer")) ck.optimizer = optimizer_of(r, r.dict(d.at("optimizer"), "optimizer"), "optimizer", names);
  if (r.has(d, "train_ops"))
    for (auto &[name, v] : r.items(d.at("train_ops"), "train_ops"))
      ck.train_ops[name] = optimizer_of(r, r.dict(v, "train_ops['" + name + "']"), "train_ops['" + name + "']", names);
  if (r.has(d, "input")) ck.input = r.bytes(d.at("input"), "input");
  for (auto &[key, v] : r.items(r.get(d, "callbacks"), "callbacks")) ck.callbacks[key] = r.bytes(v, "callbacks['" + key + "']");
  {
    const IValue &s = r.get(d, "moving_summaries");
    if (!s.isList()) r.bad("moving_summaries", "is not a list");
    for (const IValue &e : s.toListRef()) {
      GenericDict m = r.dict(e, "moving_summaries[]");
      MovingSummaryState ms;
      ms.name = r.str(r.get(m, "name"), "moving_summaries[].name");
      ms.decay = r.number(r.get(m, "decay"), "moving_summaries[].decay");
      ms.biased = r.number(r.get(m, "biased"), "moving_summaries[].biased");
      ms.value = r.number(r.get(m, "value"), "moving_summaries[].value");
      ms.count = r.int_(m, "count", 0, kMax);
      if (!(ms.decay >= 0 && ms.decay < 1)) r.bad("moving_summaries[].decay", "is outside [0, 1)");
      ck.summaries.push_back(std::move(ms));
    }
  }
  {
    GenericDict rng = r.dict(r.get(d, "rng"), "rng");
    if (r.has(rng, "cpu")) {
      ck.rng_cpu = r.tensor(rng.at("cpu"), "rng.cpu");
      if (ck.rng_cpu.scalar_type() != at::kByte || ck.rng_cpu.dim() != 1) r.bad("rng.cpu", "is not a 1-D uint8 tensor");
      // LibTorch's CPU generator state: a mt19937 state and the normal cache (CPUGeneratorImpl.cpp).
      at::Tensor probe = at::detail::createCPUGenerator().get_state();
      if (ck.rng_cpu.numel() != probe.numel())
        r.bad("rng.cpu", "has " + std::to_string(ck.rng_cpu.numel()) + " bytes; LibTorch's CPU generator state has " +
                             std::to_string(probe.numel()));
    }
    if (r.has(rng, "tower_seed")) {
      const IValue &v = rng.at("tower_seed");
      if (!v.isInt()) r.bad("rng.tower_seed", "is not an integer");
      ck.tower_seed = v.toInt();
    }
  }
  return ck;
}

void write_checkpoint(const std::string &path, const Checkpoint &ck) {
  AtomicFile f(path);
  Checksum sum;
  uint64_t len = 0;
  try {
    len = write_archive(ck, [&](const char *p, size_t n) {
      sum.update(p, n);
      return f.try_write(p, n);
    });
  } catch (const c10::Error &) {
    if (f.failed()) f.commit(false);  // throws the write's own error (disk full, ...), renaming nothing
    throw;                            // the temporary goes with f
  }
  auto t = trailer_of(len, sum.value());
  f.write(t.data(), t.size());
  f.commit(/*sync=*/true);
}

Checkpoint read_checkpoint(const std::string &path) { return decode(bytes_of_file(path), "checkpoint " + path); }

// ---- the index

std::optional<CheckpointIndex> read_index(const std::string &dir) {
  std::string path = dir + "/checkpoint";
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::istringstream in(read_file(path));
  CheckpointIndex idx;
  std::string line;
  auto quoted = [&](const std::string &l, size_t from) {
    size_t a = l.find('"', from), b = l.rfind('"');
    if (a == std::string::npos || b <= a) invalid_argument("checkpoint index " + path + ": cannot read line '" + l + "'");
    std::string name = l.substr(a + 1, b - a - 1);
    if (name.empty() || name.find('/') != std::string::npos)
      invalid_argument("checkpoint index " + path + ": '" + name + "' is not a file name in its directory");
    return name;
  };
  while (std::getline(in, line)) {
    if (line.rfind("model_checkpoint_path:", 0) == 0) idx.latest = quoted(line, 22);
    else if (line.rfind("all_model_checkpoint_paths:", 0) == 0) idx.all.push_back(quoted(line, 27));
  }
  if (idx.latest.empty()) invalid_argument("checkpoint index " + path + " names no model_checkpoint_path");
  return idx;
}

void write_index(const std::string &dir, const CheckpointIndex &idx) {
  std::string text = "model_checkpoint_path: \"" + idx.latest + "\"\n";
  for (const auto &n : idx.all) text += "all_model_checkpoint_paths: \"" + n + "\"\n";
  write_file_atomic(dir + "/checkpoint", text, /*sync=*/true);
}

std::string resolve_checkpoint(const std::string &path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    auto idx = read_index(path);
    if (!idx) fail(TPT_ERR_NOT_FOUND, "no checkpoint in " + path + " (it has no 'checkpoint' index file)");
    return path + "/" + idx->latest;
  }
  if (fs::path(path).filename() == "checkpoint") {
    std::string dir = fs::path(path).parent_path().string();
    auto idx = read_index(dir.empty() ? "." : dir);
    return (dir.empty() ? "." : dir) + "/" + idx->latest;
  }
  if (!fs::exists(path, ec)) fail(TPT_ERR_IO, "checkpoint " + path + " does not exist");
  return path;
}

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
  if (t.steps_per_epoch() > 0 && ck.next_step >= t.steps_per_epoch()) ++ck.next_epoch, ck.next_step = 0;
  if (Stateful *s = t.stateful()) s->save(ck);
  for (auto &[key, cb] : keyed_callbacks(t)) {
    std::vector<uint8_t> b;
    if (cb->save_state(b)) ck.callbacks[key] = std::move(b);
  }
  for (const MovingSummary &m : t.moving_summaries())
    ck.summaries.push_back(MovingSummaryState{m.name, m.decay, m.biased, m.value, m.count});
  ck.rng_cpu = cpu_rng_state();
  return ck;
}

void Trainer::resume_from(std::shared_ptr<const Checkpoint> ck) {
  if (phase_ != Phase::Idle) fail(TPT_ERR_STATE, "a resume is set before the run");
  resume_ = std::move(ck);
}

bool Trainer::find_auto_resume(const std::string &dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !read_index(dir)) return false;
  std::string path = resolve_checkpoint(dir);
  resume_ = std::make_shared<const Checkpoint>(read_checkpoint(path));
  log_.info("Auto-resume: continuing from " + path + ".");
  return true;
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
  summaries_.clear();
  for (const MovingSummaryState &m : ck.summaries) {
    MovingSummary s;
    s.name = m.name, s.decay = m.decay, s.biased = m.biased, s.value = m.value, s.count = m.count;
    summaries_.push_back(std::move(s));
  }
  if (ck.rng_cpu.defined()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(ck.rng_cpu);
  }
  log_.info("Resumed at epoch " + std::to_string(first_epoch_) + ", step " + std::to_string(first_step_) +
            " (global_step " + std::to_string(global_step_) + ").");
}

// ---- variables by name

std::vector<std::pair<std::string, at::Tensor>> read_named_tensors(const std::string &path) {
  std::string file = resolve_checkpoint(path);
  std::vector<char> bytes = bytes_of_file(file);
  if (bytes.size() >= kTrailer && std::memcmp(bytes.data() + bytes.size() - kTrailer, kTrailerMagic, 8) == 0)
    return decode(std::move(bytes), "checkpoint " + file).variables;  // a tptrain checkpoint: its variables
  check_zip(bytes.data(), bytes.size(), file);  // before LibTorch's zip reader sees it
  if (model::is_torchscript_archive(file)) return model::torchscript_named_tensors(file);
  // torch.save's file: PyTorch's dotted names ("fc.weight") as tptrain spells variables ("fc/weight").
  std::vector<std::pair<std::string, at::Tensor>> out = read_torch_save(file);
  for (auto &[name, t] : out) std::replace(name.begin(), name.end(), '.', '/');
  return out;
}

std::vector<std::string> restore_variables(model::Model &m, const std::string &path, const RestoreOptions &o) {
  std::vector<std::pair<std::string, at::Tensor>> file = read_named_tensors(path);
  std::map<std::string, const at::Tensor *> by_name;
  for (const auto &[n, t] : file) by_name[n] = &t;
  std::vector<model::Variable> vars = m.variables().all();
  if (vars.empty()) fail(TPT_ERR_STATE, "the model has no variables yet: build it first (tpt_model_build)");
  std::vector<std::string> missing, mismatched;
  std::set<std::string> used;
  std::vector<std::pair<const model::Variable *, const at::Tensor *>> plan;
  for (const model::Variable &v : vars) {
    auto mapped = o.name_map.find(v.name);
    std::string key = mapped != o.name_map.end() ? mapped->second : o.prefix + v.name;
    auto it = by_name.find(key);
    if (it == by_name.end()) {
      missing.push_back(v.name + (key != v.name ? " (as '" + key + "')" : ""));
      continue;
    }
    used.insert(key);
    const at::Tensor &t = *it->second;
    if (t.sizes() != v.value.sizes()) {
      mismatched.push_back(v.name + ": the model's is " + model::shape_text(v.value.sizes()) + ", the file's " +
                           model::shape_text(t.sizes()));
      continue;
    }
    if (!t.is_floating_point() && v.value.is_floating_point()) {
      mismatched.push_back(v.name + ": the file's tensor is not floating point");
      continue;
    }
    plan.emplace_back(&v, &t);
  }
  std::vector<std::string> unexpected;
  for (const auto &[n, t] : file)
    if (!used.count(n)) unexpected.push_back(n);
  auto list = [](const std::vector<std::string> &v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 20; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 20) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  };
  std::string errors;
  if (!missing.empty() && !o.ignore_missing) errors += "; missing from the file: " + list(missing);
  if (!mismatched.empty() && !o.ignore_shape_mismatch) errors += "; shapes differ: " + list(mismatched);
  if (!unexpected.empty() && !o.ignore_unexpected) errors += "; in the file but not in the model: " + list(unexpected);
  if (!errors.empty())
    invalid_argument("cannot restore from " + path + errors.substr(1) + " (nothing was changed)");
  c10::NoGradGuard no_grad;
  std::vector<std::string> restored;
  for (auto &[v, t] : plan) {
    v->value.copy_(*t);
    restored.push_back(v->name);
  }
  m.touch();  // replicas follow before the next step
  return restored;
}

}  // namespace tpt
