// Checkpoint files: the format (torch.save's archive: a pickled dict that
// python3-torch's torch.load opens, with a checksummed trailer), the
// checkpoint directory's index, and the CPU generator state check.
// docs/checkpoints.md. Taking a trainer's state is loop/checkpoint.cpp;
// restoring variables into a model is model/restore.cpp.
#include "base/checkpoint_file.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/Functions.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <ATen/CPUGeneratorImpl.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "base/files.hpp"
#include "base/log.hpp"
#include "base/optimizer_state.hpp"
#include "base/pickle.hpp"
#include "base/shape_text.hpp"
#include "base/torch_save.hpp"

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

using pickle::Kind;
using pickle::Value;

// A dict of the file: its string keys (each once), in order.
struct Fields {
  std::vector<std::pair<std::string, Value>> items;
  std::map<std::string, size_t> at;
};

class Reader {
 public:
  explicit Reader(std::string what) : what_(std::move(what)) {}
  [[noreturn]] void bad(const std::string &field, const std::string &why) const {
    invalid_argument(what_ + ": field '" + field + "' " + why);
  }
  Fields dict(const Value &v, const std::string &field) const {
    if (!v.is(Kind::Dict)) bad(field, std::string("is ") + pickle::kind_name(v.kind()) + ", not a dict");
    Fields f;
    for (size_t i = 0; i < v.size(); ++i) {
      std::string k = str(v.key(i), field + " key");
      if (!f.at.emplace(k, f.items.size()).second) bad(field, "has the key '" + k + "' twice");
      f.items.emplace_back(std::move(k), v.value(i));
    }
    return f;
  }
  const Value *find(const Fields &d, const std::string &key) const {
    auto it = d.at.find(key);
    return it == d.at.end() ? nullptr : &d.items[it->second].second;
  }
  const Value &get(const Fields &d, const std::string &field, const std::string &key) const {
    const Value *v = find(d, key);
    if (!v) bad(field, "is missing");
    return *v;
  }
  int64_t int_(const Value &v, const std::string &field, int64_t lo, int64_t hi) const {
    if (!v.is(Kind::Int)) bad(field, std::string("is ") + pickle::kind_name(v.kind()) + ", not an integer");
    int64_t x = v.as_int();
    if (x < lo || x > hi) bad(field, "is " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
  double number(const Value &v, const std::string &field) const {
    if (v.is(Kind::Float)) return v.as_float();
    if (v.is(Kind::Int)) return static_cast<double>(v.as_int());
    bad(field, std::string("is ") + pickle::kind_name(v.kind()) + ", not a number");
  }
  std::string str(const Value &v, const std::string &field) const {
    if (!v.is(Kind::Str)) bad(field, std::string("is ") + pickle::kind_name(v.kind()) + ", not a string");
    return std::string(v.str());
  }
  at::Tensor tensor(const Value &v, const std::string &field) const {
    if (!v.is(Kind::Tensor)) bad(field, std::string("is ") + pickle::kind_name(v.kind()) + ", not a tensor");
    return v.tensor();
  }
  std::vector<uint8_t> bytes(const Value &v, const std::string &field) const {
    at::Tensor t = tensor(v, field);
    if (t.scalar_type() != at::kByte || t.dim() != 1)
      bad(field, "is a " + std::string(c10::toString(t.scalar_type())) + " tensor of shape " + shape_text(t.sizes()) +
                     ", not a 1-D uint8 tensor");
    t = t.contiguous();
    const uint8_t *p = t.data_ptr<uint8_t>();
    return std::vector<uint8_t>(p, p + t.numel());
  }
  std::vector<Value> list(const Value &v, const std::string &field) const {
    if (!v.is(Kind::List)) bad(field, std::string("is ") + pickle::kind_name(v.kind()) + ", not a list");
    std::vector<Value> out;
    for (size_t i = 0; i < v.size(); ++i) out.push_back(v.item(i));
    return out;
  }

 private:
  std::string what_;
};

// The file is torch.save's zip archive followed by a trailer: "TPTCKPT2"
// (or "TPTCKPT1", written until 2026-11-29), the archive's length and its
// checksum (little-endian; docs/checkpoints.md). zip readers (LibTorch's,
// Python's) find the archive from its end record and ignore what follows;
// the trailer lets a reader refuse a truncated or damaged file before
// LibTorch's zip reader, which skips CRCs and trusts offsets, sees it.
constexpr char kTrailerV1[8] = {'T', 'P', 'T', 'C', 'K', 'P', 'T', '1'};
constexpr char kTrailerV2[8] = {'T', 'P', 'T', 'C', 'K', 'P', 'T', '2'};
constexpr size_t kTrailer = 24;
constexpr uint64_t kBasis = 0xcbf29ce484222325ull, kPrime = 0x100000001b3ull;  // FNV-1a's

// One step of a chain: a bijection of the state for each word, so a changed
// word always changes the chain.
inline uint64_t mix(uint64_t h, uint64_t w) {
  h = (h ^ w) * kPrime;
  return h ^ (h >> 29);
}

inline uint64_t load64(const char *p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Version 1's checksum: one chain over 8-byte little-endian words, then the
// tail bytes. Each word waits for the last one's multiply, so it hashes at
// a third of the speed memory gives; read, not written.
uint64_t checksum_v1(const char *p, size_t n) {
  uint64_t h = kBasis;
  for (; n >= 8; p += 8, n -= 8) h = mix(h, load64(p));
  for (; n > 0; --n) h = (h ^ static_cast<uint8_t>(*p++)) * kPrime;
  return h;
}

// Version 2's checksum, fed in pieces of any size: four chains, chain i
// over word i of each 32-byte block (four multiplies in flight at once),
// folded into one, then the tail bytes. A 21 MB checkpoint hashed in 3.5 ms
// against version 1's 5.5 ms here (memory-bound now).
class Checksum {
 public:
  void update(const char *p, size_t n) {
    if (n == 0) return;
    if (carry_n_ > 0) {  // finish a block begun in the last piece
      const size_t take = std::min(kBlock - carry_n_, n);
      std::memcpy(carry_ + carry_n_, p, take);
      carry_n_ += take, p += take, n -= take;
      if (carry_n_ < kBlock) return;
      block(carry_);
      carry_n_ = 0;
    }
    for (; n >= kBlock; p += kBlock, n -= kBlock) block(p);
    if (n > 0) std::memcpy(carry_, p, n);
    carry_n_ = n;
  }
  uint64_t value() const {
    uint64_t h = kBasis;
    for (uint64_t lane : h_) h = mix(h, lane);
    for (size_t i = 0; i < carry_n_; ++i) h = (h ^ static_cast<uint8_t>(carry_[i])) * kPrime;
    return h;
  }

 private:
  static constexpr size_t kBlock = 32;
  void block(const char *p) {
    h_[0] = mix(h_[0], load64(p));
    h_[1] = mix(h_[1], load64(p + 8));
    h_[2] = mix(h_[2], load64(p + 16));
    h_[3] = mix(h_[3], load64(p + 24));
  }
  uint64_t h_[4] = {kBasis, kBasis ^ 1, kBasis ^ 2, kBasis ^ 3};
  char carry_[kBlock] = {};
  size_t carry_n_ = 0;
};

uint64_t checksum(const char *p, size_t n) {
  Checksum c;
  c.update(p, n);
  return c.value();
}

// Checks the trailer (either version) and drops it: `file` becomes the archive.
void strip_trailer(std::vector<char> &file, const std::string &what) {
  const char *magic = file.size() >= kTrailer ? file.data() + file.size() - kTrailer : nullptr;
  const bool v1 = magic && std::memcmp(magic, kTrailerV1, 8) == 0, v2 = magic && std::memcmp(magic, kTrailerV2, 8) == 0;
  if (!v1 && !v2)
    invalid_argument(what + " is truncated or not a tptrain checkpoint (it does not end with tptrain's trailer)");
  uint64_t len = 0, hash = 0;
  std::memcpy(&len, file.data() + file.size() - 16, 8);
  std::memcpy(&hash, file.data() + file.size() - 8, 8);
  if (len != file.size() - kTrailer) invalid_argument(what + " is damaged: its trailer gives another length");
  if ((v1 ? checksum_v1(file.data(), len) : checksum(file.data(), len)) != hash)
    invalid_argument(what + " is corrupted: its bytes do not match the hash in its trailer");
  file.resize(len);
}

// The trailer (version 2) of an archive of `len` bytes with checksum `hash`.
std::array<char, kTrailer> trailer_of(uint64_t len, uint64_t hash) {
  std::array<char, kTrailer> t{};
  std::memcpy(t.data(), kTrailerV2, 8);
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
  if (ck.loss_scaler) {  // GradScaler.state_dict()'s keys: it loads into a torch.amp.GradScaler
    GenericDict ls = any_dict();
    ls.insert("scale", ck.loss_scaler->scale);
    ls.insert("growth_factor", ck.loss_scaler->growth_factor);
    ls.insert("backoff_factor", ck.loss_scaler->backoff_factor);
    ls.insert("growth_interval", ck.loss_scaler->growth_interval);
    ls.insert("_growth_tracker", ck.loss_scaler->growth_tracker);
    d.insert("loss_scaler", ls);
  }
  if (ck.run_end) {  // how the run ended (auto_resume leaves a finished or stopped run ended)
    GenericDict e = any_dict();
    e.insert("how", std::string(RunEnd::name(ck.run_end->how)));
    e.insert("by", ck.run_end->by);
    e.insert("reason", ck.run_end->reason);
    d.insert("run_end", e);
  }
  return d;
}

// torch::pickle_save's archive, written through `sink` as it is made: the
// pickle, then each tensor's storage straight from the tensor (pickle_save
// would gather all of it in growing buffers first). Returns the bytes written.
uint64_t write_archive(const Checkpoint &ck, const std::function<bool(const char *, size_t)> &sink) {
  std::vector<char> pickle_data;
  // No type tags (torch.jit._pickle.restore_type_tag): PyTorch 2.6's torch.load
  // defaults to weights_only=True, which refuses that global; without them a
  // checkpoint holds only what weights_only allows (dicts, lists, numbers,
  // strings, _rebuild_tensor_v2 over storages).
  torch::jit::Pickler pickler([&](const char *b, size_t n) { pickle_data.insert(pickle_data.end(), b, b + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
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

std::vector<char> with_trailer(std::vector<char> archive) {
  auto t = trailer_of(archive.size(), checksum(archive.data(), archive.size()));
  archive.insert(archive.end(), t.begin(), t.end());
  return archive;
}

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

// Counters are bounded where doubles still count exactly (stats.json).
constexpr int64_t kMaxCount = int64_t(1) << 53;

// An optimizer's state from its dict; errors name `f` ("optimizer", "train_ops['d_op']").
// Checked against the checkpoint's own variables (names, shapes, dtypes) and
// the rules of tpt_optimizer_set; restore checks them against the model.
OptimizerState optimizer_of(const Reader &r, const Value &v, const std::string &f,
                            const std::map<std::string, const at::Tensor *> &trainable) {
  Fields od = r.dict(v, f);
  OptimizerState o;
  o.kind = r.str(r.get(od, f + ".kind", "kind"), f + ".kind");
  try {
    check_optimizer_kind(o.kind);
  } catch (const Error &e) {
    r.bad(f + ".kind", std::string("is not valid: ") + e.what());
  }
  for (auto &[k, hv] : r.dict(r.get(od, f + ".hparams", "hparams"), f + ".hparams").items)
    o.hparams[k] = r.number(hv, f + ".hparams['" + k + "']");
  try {
    check_hyperparameters(o.kind, o.hparams);
  } catch (const Error &e) {
    r.bad(f + ".hparams", std::string("is not valid: ") + e.what());
  }
  auto acc = o.hparams.find("accumulate_steps");
  int64_t accumulate = acc == o.hparams.end() ? 1 : static_cast<int64_t>(acc->second);
  o.micro_steps = r.int_(r.get(od, f + ".micro_steps", "micro_steps"), f + ".micro_steps", 0, accumulate - 1);
  const auto &allowed = slot_names(o.kind);
  auto like = [&](const std::string &var, const at::Tensor &t, const std::string &field) {
    const at::Tensor &w = *trainable.at(var);
    if (t.sizes() != w.sizes() || t.scalar_type() != w.scalar_type())
      r.bad(field, "is a " + std::string(c10::toString(t.scalar_type())) + " tensor of shape " + shape_text(t.sizes()) +
                       "; the variable is " + c10::toString(w.scalar_type()) + " " + shape_text(w.sizes()));
  };
  for (auto &[var, sv] : r.dict(r.get(od, f + ".state", "state"), f + ".state").items) {
    if (!trainable.count(var)) r.bad(f + ".state", "has '" + var + "', which is not a trainable variable of the checkpoint");
    auto &slots = o.slots[var];
    for (auto &[slot, x] : r.dict(sv, f + ".state['" + var + "']").items) {
      std::string field = f + ".state['" + var + "']['" + slot + "']";
      if (slot == "step") {
        o.steps[var] = r.int_(x, field, 0, kMaxCount);
      } else {
        if (std::find(allowed.begin(), allowed.end(), slot) == allowed.end())
          r.bad(field, "is a slot that a '" + o.kind + "' optimizer does not have");
        slots[slot] = r.tensor(x, field);
        like(var, slots[slot], field);
      }
    }
  }
  for (auto &[var, g] : r.dict(r.get(od, f + ".grads", "grads"), f + ".grads").items) {
    if (!trainable.count(var)) r.bad(f + ".grads", "has '" + var + "', which is not a trainable variable of the checkpoint");
    o.grads[var] = r.tensor(g, f + ".grads['" + var + "']");
    like(var, o.grads[var], f + ".grads['" + var + "']");
  }
  return o;
}

}  // namespace

Checkpoint decode(std::vector<char> file, const std::string &what) {
  strip_trailer(file, what);
  pickle::ZipIndex index = pickle::check_zip(file.data(), file.size(), what);
  const uint64_t budget = file.size() + pickle::read_limit();
  index.bytes = std::make_shared<const std::vector<char>>(std::move(file));  // tensors are views of it
  auto zip = pickle::open_zip(index.bytes, what);
  pickle::Pickle pk(*zip, index, "data.pkl", what, pickle::Mode{}, budget);
  Reader r(what);
  Value root = pk.root();
  if (!root.is(Kind::Dict)) invalid_argument(what + " is not a tptrain checkpoint (it holds " + pickle::kind_name(root.kind()) + ", not a dict)");
  Fields d = r.dict(root, "(the checkpoint)");
  const Value *format = r.find(d, "format");
  if (!format || !format->is(Kind::Str) || format->str() != kCheckpointFormat)
    invalid_argument(what + " is not a tptrain checkpoint (no format \"" + kCheckpointFormat +
                     "\"; a state_dict restores variables only: tpt_model_restore)");
  int64_t version = r.int_(r.get(d, "version", "version"), "version", 1, INT64_MAX);
  if (version > kCheckpointVersion)
    invalid_argument(what + " has checkpoint version " + std::to_string(version) + "; this tptrain reads up to " +
                     std::to_string(kCheckpointVersion));
  auto counter = [&](const char *name, int64_t lo) { return r.int_(r.get(d, name, name), name, lo, kMaxCount); };
  Checkpoint ck;
  ck.source = what;
  ck.global_step = counter("global_step", 0);
  ck.epoch_num = counter("epoch_num", 0);
  ck.local_step = counter("local_step", -1);
  ck.next_epoch = counter("next_epoch", 1);
  ck.next_step = counter("next_step", 0);
  // Where the loop goes on follows from where it was (take_checkpoint):
  // the next epoch from its first step, or this epoch from its first step
  // (before it) or from the step after local_step.
  if (ck.next_epoch == ck.epoch_num + 1) {
    if (ck.next_step != 0) r.bad("next_step", "is " + std::to_string(ck.next_step) + "; an epoch that has not begun (next_epoch is epoch_num + 1) goes on from step 0");
  } else if (ck.next_epoch == ck.epoch_num) {
    if (ck.next_step != 0 && ck.next_step != ck.local_step + 1)
      r.bad("next_step", "is " + std::to_string(ck.next_step) + "; in epoch " + std::to_string(ck.epoch_num) +
                             " the loop goes on from step 0 or from local_step + 1 (" + std::to_string(ck.local_step + 1) + ")");
  } else {
    r.bad("next_epoch", "is " + std::to_string(ck.next_epoch) + "; with epoch_num " + std::to_string(ck.epoch_num) +
                            " it is epoch_num or epoch_num + 1");
  }
  std::map<std::string, const at::Tensor *> by_name;
  Fields vars = r.dict(r.get(d, "variables", "variables"), "variables");
  ck.variables.reserve(vars.items.size());
  for (auto &[name, v] : vars.items) {
    if (name.empty()) r.bad("variables", "has an empty name");
    ck.variables.emplace_back(name, r.tensor(v, "variables['" + name + "']"));
  }
  for (const auto &[name, t] : ck.variables) by_name[name] = &t;
  std::map<std::string, const at::Tensor *> trainable;
  for (const Value &n : r.list(r.get(d, "trainable", "trainable"), "trainable")) {
    std::string name = r.str(n, "trainable[]");
    auto it = by_name.find(name);
    if (it == by_name.end()) r.bad("trainable", "names '" + name + "', which is not in variables");
    if (!trainable.emplace(name, it->second).second) r.bad("trainable", "names '" + name + "' twice");
    if (!it->second->is_floating_point())
      r.bad("variables['" + name + "']", "is a trainable variable of dtype " + std::string(c10::toString(it->second->scalar_type())) + ", not floating point");
    ck.trainable.push_back(name);
  }
  if (const Value *o = r.find(d, "optimizer")) ck.optimizer = optimizer_of(r, *o, "optimizer", trainable);
  if (const Value *ops = r.find(d, "train_ops"))
    for (auto &[name, v] : r.dict(*ops, "train_ops").items)
      ck.train_ops[name] = optimizer_of(r, v, "train_ops['" + name + "']", trainable);
  if (const Value *in = r.find(d, "input")) ck.input = r.bytes(*in, "input");
  for (auto &[key, v] : r.dict(r.get(d, "callbacks", "callbacks"), "callbacks").items) {
    if (key.empty()) r.bad("callbacks", "has an empty key");
    ck.callbacks[key] = r.bytes(v, "callbacks['" + key + "']");
  }
  {
    std::set<std::string> seen;
    for (const Value &e : r.list(r.get(d, "moving_summaries", "moving_summaries"), "moving_summaries")) {
      std::string f = "moving_summaries[" + std::to_string(ck.summaries.size()) + "]";
      Fields m = r.dict(e, f);
      MovingSummaryState ms;
      ms.name = r.str(r.get(m, f + ".name", "name"), f + ".name");
      if (ms.name.empty() || !seen.insert(ms.name).second) r.bad(f + ".name", "is empty or given twice ('" + ms.name + "')");
      ms.decay = r.number(r.get(m, f + ".decay", "decay"), f + ".decay");
      ms.biased = r.number(r.get(m, f + ".biased", "biased"), f + ".biased");
      ms.value = r.number(r.get(m, f + ".value", "value"), f + ".value");
      ms.count = r.int_(r.get(m, f + ".count", "count"), f + ".count", 0, kMaxCount);
      if (!(ms.decay >= 0 && ms.decay < 1)) r.bad(f + ".decay", "is outside [0, 1)");
      ck.summaries.push_back(std::move(ms));
    }
  }
  {
    Fields rng = r.dict(r.get(d, "rng", "rng"), "rng");
    if (const Value *cpu = r.find(rng, "cpu")) {
      ck.rng_cpu = r.tensor(*cpu, "rng.cpu");
      if (ck.rng_cpu.scalar_type() != at::kByte || ck.rng_cpu.dim() != 1) r.bad("rng.cpu", "is not a 1-D uint8 tensor");
      ck.rng_cpu = ck.rng_cpu.contiguous();
      std::string why = check_cpu_generator_state(ck.rng_cpu);
      if (!why.empty()) r.bad("rng.cpu", why);
    }
    if (const Value *seed = r.find(rng, "tower_seed")) ck.tower_seed = r.int_(*seed, "rng.tower_seed", INT64_MIN, INT64_MAX);
  }
  if (const Value *v = r.find(d, "loss_scaler")) {
    Fields ls = r.dict(*v, "loss_scaler");
    LossScaleState s;
    auto number = [&](const char *key) {
      const std::string f = std::string("loss_scaler.") + key;
      return r.number(r.get(ls, f, key), f);
    };
    s.scale = number("scale");
    if (!(s.scale > 0 && s.scale <= std::numeric_limits<float>::max()))
      r.bad("loss_scaler.scale", "is " + std::to_string(s.scale) + "; a scale is a positive, finite float32");
    s.growth_factor = number("growth_factor");
    if (!(s.growth_factor > 1 && std::isfinite(s.growth_factor)))
      r.bad("loss_scaler.growth_factor", "is " + std::to_string(s.growth_factor) + ", not a finite number > 1");
    s.backoff_factor = number("backoff_factor");
    if (!(s.backoff_factor > 0 && s.backoff_factor < 1))
      r.bad("loss_scaler.backoff_factor", "is " + std::to_string(s.backoff_factor) + ", outside (0, 1)");
    s.growth_interval =
        r.int_(r.get(ls, "loss_scaler.growth_interval", "growth_interval"), "loss_scaler.growth_interval", 1, kMaxCount);
    s.growth_tracker = r.int_(r.get(ls, "loss_scaler._growth_tracker", "_growth_tracker"),
                              "loss_scaler._growth_tracker", 0, s.growth_interval - 1);
    ck.loss_scaler = s;
  }
  if (const Value *v = r.find(d, "run_end")) {
    Fields e = r.dict(*v, "run_end");
    RunEnd end;
    const std::string how = r.str(r.get(e, "run_end.how", "how"), "run_end.how");
    if (how == "finished") end.how = RunEnd::How::Finished;
    else if (how == "stopped") end.how = RunEnd::How::Stopped;
    else if (how == "interrupted") end.how = RunEnd::How::Interrupted;
    else r.bad("run_end.how", "is '" + how.substr(0, 64) + "', not finished, stopped or interrupted");
    end.by = r.str(r.get(e, "run_end.by", "by"), "run_end.by");
    end.reason = r.str(r.get(e, "run_end.reason", "reason"), "run_end.reason");
    for (const std::string *text : {&end.by, &end.reason})
      if (text->size() > 4096) r.bad(text == &end.by ? "run_end.by" : "run_end.reason", "is longer than 4096 bytes");
    ck.run_end = std::move(end);
  }
  return ck;
}

void write_checkpoint(const std::string &path, const Checkpoint &ck) {
  AtomicFile f(path);
  Checksum sum;
  uint64_t len = 0;
  // The sink tells LibTorch's writer that every write succeeded, also after
  // one failed (a full disk): told otherwise, the writer throws, and its
  // destructor writes the end of the archive again and throws inside a
  // noexcept destructor (std::terminate). The failure is f's: commit()
  // throws it below and renames nothing.
  len = write_archive(ck, [&](const char *p, size_t n) {
    sum.update(p, n);
    f.try_write(p, n);
    return true;
  });
  auto t = trailer_of(len, sum.value());
  f.write(t.data(), t.size());
  f.commit(/*sync=*/true);
}

Checkpoint read_checkpoint(const std::string &path) { return decode(read_file_bytes(path), "checkpoint " + path); }

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


// LibTorch's CPU generator state (CPUGeneratorImpl.cpp, THGeneratorStateNew):
// the_initial_seed u64 @0, left i32 @8, seeded i32 @12, next u64 @16,
// state u64[624] @24, normal_x/y/rho f64 @5016, normal_is_valid i32 @5040,
// next_float_normal_sample f32 @5048, its valid flag (bool) @5052; 5056
// bytes. set_state checks 1 <= left <= 624 and next <= 624, but a draw reads
// state[next] for left - 1 draws before it refills: next + left <= 625 keeps
// every read inside (a seeded generator has left 1, next 0; after k draws of
// a refill, left 625 - k and next k).
std::string check_cpu_generator_state(const at::Tensor &state) {
  constexpr int64_t kSize = 5056, kN = 624;
  static const bool layout_known = [] {
    at::Tensor probe = at::detail::createCPUGenerator(42).get_state();
    if (probe.numel() != kSize) return false;
    const uint8_t *p = probe.data_ptr<uint8_t>();
    int32_t left, seeded;
    uint64_t seed, next;
    std::memcpy(&seed, p, 8), std::memcpy(&left, p + 8, 4), std::memcpy(&seeded, p + 12, 4), std::memcpy(&next, p + 16, 8);
    return seed == 42 && left == 1 && seeded == 1 && next == 0;
  }();
  at::Tensor probe = at::detail::createCPUGenerator().get_state();
  if (state.numel() != probe.numel())
    return "has " + std::to_string(state.numel()) + " bytes; LibTorch's CPU generator state has " + std::to_string(probe.numel());
  if (!layout_known) return "";  // another LibTorch's layout: its own checks only
  const uint8_t *p = state.data_ptr<uint8_t>();
  int32_t left, seeded;
  uint64_t next;
  std::memcpy(&left, p + 8, 4), std::memcpy(&seeded, p + 12, 4), std::memcpy(&next, p + 16, 8);
  if (seeded != 1) return "is not a seeded generator's state (seeded is " + std::to_string(seeded) + ")";
  if (left < 1 || left > kN || next > static_cast<uint64_t>(kN) || next + static_cast<uint64_t>(left) > kN + 1)
    return "has the mt19937 position left " + std::to_string(left) + ", next " + std::to_string(next) +
           ", which reads past its 624 words (1 <= left, next + left <= 625)";
  for (int64_t i = 0; i < kN; ++i) {
    uint64_t w;
    std::memcpy(&w, p + 24 + 8 * i, 8);
    if (w > UINT32_MAX) return "has a mt19937 word wider than 32 bits (word " + std::to_string(i) + ")";
  }
  if (p[5052] > 1) return "has a normal-sample flag that is not 0 or 1";
  return "";
}

bool is_checkpoint_file(const std::vector<char> &bytes) {
  if (bytes.size() < kTrailer) return false;
  const char *magic = bytes.data() + bytes.size() - kTrailer;
  return std::memcmp(magic, kTrailerV1, 8) == 0 || std::memcmp(magic, kTrailerV2, 8) == 0;
}

}  // namespace tpt
