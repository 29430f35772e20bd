// The DataFlow base (reset, restart, seeds and state) and the sequential
// sources and combinators. Threads live in dataflow_parallel.cpp, image augmentation
// in augment.cpp, the IDX reader in idx.cpp.
#include "data/dataflow.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/stack.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "base/error.hpp"

namespace tpt::data {

// ------------------------------------------------------------------ Rng

namespace {
uint64_t splitmix(uint64_t &x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b * 0xd1b54a32d192ed03ull);
  return splitmix(x);
}

void Rng::seed(uint64_t seed) {
  uint64_t x = seed;
  for (auto &w : s) w = splitmix(x);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // rejection keeps it unbiased
  uint64_t x;
  do x = next();
  while (x >= limit);
  return x % n;
}

std::vector<int64_t> Rng::permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[below(static_cast<uint64_t>(i) + 1)]);
  return p;
}

// ------------------------------------------------------------------ base

void DataFlow::reset_state() {
  uint64_t base = seed_ ? *seed_ : at::detail::getDefaultCPUGenerator().current_seed();
  uint64_t index = 0;
  reset_tree(base, index);
}

void DataFlow::reset_tree(uint64_t base, uint64_t &index) {
  stop_threads();
  node_seed_ = restored_ ? restored_seed_ : mix_seed(base, index);
  ++index;
  for (DataFlow *c : children()) c->reset_tree(base, index);
  if (Rng *r = rng()) {
    if (restored_) *r = restored_rng_;
    else r->seed(node_seed_);
  }
  on_reset();
  clear_pass();
  if (restored_) {
    restored_ = false;
    std::vector<uint8_t> own = std::move(restored_own_);
    restored_own_.clear();
    StateReader r(own.data(), own.size());
    load_own(r, /*apply=*/true);
  }
  start_threads();
  was_reset_ = true;
}

void DataFlow::restart() { restart_tree(); }

void DataFlow::restart_tree() {
  stop_threads();
  for (DataFlow *c : children()) c->restart_tree();
  clear_pass();
  start_threads();
}

void DataFlow::stop() { stop_tree(); }

void DataFlow::stop_tree() {
  stop_threads();
  for (DataFlow *c : children()) c->stop_tree();
  was_reset_ = false;
}

void DataFlow::collect(std::vector<DataFlow *> &out) {
  out.push_back(this);
  for (DataFlow *c : children()) c->collect(out);
}

void DataFlow::claim(const std::string &consumer) {
  if (!consumer_.empty())
    invalid_argument("this " + kind_ + " is already read by " + consumer_ +
                     " (a dataflow has one consumer; make another dataflow)");
  consumer_ = consumer;
}

namespace {
// Format 02: positions and seeds too (01 had the generators only).
constexpr char kStateMagic[8] = {'T', 'P', 'T', 'D', 'F', 'S', '0', '2'};
constexpr char kStateMagic01[8] = {'T', 'P', 'T', 'D', 'F', 'S', '0', '1'};
uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
}  // namespace

void bad_state(const std::string &why) { invalid_argument("not a state of this dataflow: " + why); }

void put_u64(std::vector<uint8_t> &out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_rng(std::vector<uint8_t> &out, const Rng &r) {
  for (uint64_t w : r.s) put_u64(out, w);
}

void StateReader::truncated() const { invalid_argument(std::string("not a state of this ") + of_ + ": it is truncated"); }

uint64_t StateReader::u64() {
  if (n_ - pos_ < 8) truncated();
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
  pos_ += 8;
  return v;
}

Rng StateReader::rng() {
  Rng r;
  for (auto &w : r.s) w = u64();
  return r;
}

StateReader StateReader::sub(size_t n) {
  if (n_ - pos_ < n) truncated();
  StateReader r(p_ + pos_, n, of_);
  pos_ += n;
  return r;
}

// Layout: magic, node count, then the tree in preorder; per node: the hash of
// its kind, its seed, a flag and the 4 words of its generator when the flag
// is 1, the length of its own part and the part (positions), then its
// children.
std::vector<uint8_t> DataFlow::get_state() const {
  std::vector<DataFlow *> nodes;
  const_cast<DataFlow *>(this)->collect(nodes);
  std::vector<uint8_t> out(kStateMagic, kStateMagic + 8);
  put_u64(out, nodes.size());
  save_tree(out);
  return out;
}

void DataFlow::save_tree(std::vector<uint8_t> &out) const {
  if (!save_snapshot(out)) save_now(out);
}

void DataFlow::save_now(std::vector<uint8_t> &out) const {
  save_header(out);
  save_children(out);
}

void DataFlow::save_header(std::vector<uint8_t> &out) const {
  put_u64(out, fnv1a(kind_));
  put_u64(out, node_seed_);
  Rng *r = const_cast<DataFlow *>(this)->rng();
  put_u64(out, r ? 1 : 0);
  if (r) put_rng(out, *r);
  size_t at = out.size();
  put_u64(out, 0);
  save_own(out);
  uint64_t n = out.size() - at - 8;
  for (int i = 0; i < 8; ++i) out[at + i] = static_cast<uint8_t>(n >> (8 * i));
}

void DataFlow::save_children(std::vector<uint8_t> &out) const {
  for (DataFlow *c : children()) c->save_tree(out);
}

void DataFlow::load_tree(StateReader &r, bool apply, size_t &index) {
  auto part = [&] { return "part " + std::to_string(index) + " (" + kind_ + ")"; };  // for errors only
  if (r.u64() != fnv1a(kind_))
    bad_state("part " + std::to_string(index) + " is a " + kind_ + " here and something else in the state");
  uint64_t seed = r.u64();
  uint64_t flag = r.u64();
  Rng *g = rng();
  if (flag > 1 || (flag == 1) != (g != nullptr)) bad_state(part() + " differs");
  Rng v;
  if (g) v = r.rng();
  uint64_t n = r.u64();
  StateReader own = r.sub(static_cast<size_t>(n));
  const uint8_t *own_bytes = own.here();
  if (!apply) {  // checked in the dry run; applied at the next reset
    load_own(own, /*apply=*/false);
    if (!own.done()) bad_state(part() + " has more bytes than it reads");
  } else {
    restored_ = true;
    restored_seed_ = seed;
    restored_rng_ = v;
    restored_own_.assign(own_bytes, own_bytes + n);
  }
  ++index;
  for (DataFlow *c : children()) c->load_tree(r, apply, index);
}

void DataFlow::set_state(const uint8_t *data, size_t size) {
  std::vector<DataFlow *> nodes;
  collect(nodes);
  if (size >= 8 && std::memcmp(data, kStateMagic01, 8) == 0)
    bad_state("it is in format 01 (generators only, from an older tptrain); save it again");
  if (size < 16 || std::memcmp(data, kStateMagic, 8) != 0) bad_state("it does not start with a dataflow state's tag");
  StateReader head(data + 8, 8);
  uint64_t count = head.u64();
  if (count != nodes.size())
    bad_state("it has " + std::to_string(count) + " parts, this pipeline has " + std::to_string(nodes.size()));
  for (bool apply : {false, true}) {  // check all of it, then apply
    StateReader r(data + 16, size - 16);
    size_t index = 0;
    load_tree(r, apply, index);
    if (!r.done()) bad_state("it has " + std::to_string(r.left_bytes()) + " bytes too many");
  }
}

namespace {

std::string shape_str(const at::Tensor &t) {
  std::ostringstream s;
  s << t.sizes() << " (" << c10::toString(t.scalar_type()) << ")";
  return s.str();
}

// ------------------------------------------------------------------ sources

class TensorSource final : public DataFlow {
 public:
  TensorSource(std::vector<at::Tensor> tensors, bool shuffle, std::string kind)
      : DataFlow(std::move(kind)), tensors_(std::move(tensors)), shuffle_(shuffle) {
    if (tensors_.empty()) invalid_argument("no tensors given");
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (!tensors_[i].defined() || tensors_[i].dim() < 1)
        invalid_argument("tensors[" + std::to_string(i) + "] needs at least one dimension (the rows)");
      if (tensors_[i].size(0) != tensors_[0].size(0))
        invalid_argument("tensors[" + std::to_string(i) + "] has " + std::to_string(tensors_[i].size(0)) +
                         " rows, tensors[0] has " + std::to_string(tensors_[0].size(0)));
    }
    rows_ = tensors_[0].size(0);
  }
  bool next(Datapoint &dp) override {
    if (need_pass_) {
      if (shuffle_) {
        pass_rng_ = rng_;
        order_ = rng_.permutation(rows_);
      }
      pos_ = 0;
      need_pass_ = false;
    }
    if (pos_ >= rows_) {
      need_pass_ = true;
      return false;
    }
    int64_t row = shuffle_ ? order_[pos_] : pos_;
    ++pos_;
    dp.clear();
    for (const auto &t : tensors_) dp.push_back(t.select(0, row));
    return true;
  }
  std::optional<int64_t> size() const override { return rows_; }

 protected:
  void clear_pass() override { need_pass_ = true; }
  Rng *rng() override { return shuffle_ ? &rng_ : nullptr; }
  // In a pass: the position, and the generator as it was before the pass's
  // order was drawn (the order is drawn again from it).
  void save_own(std::vector<uint8_t> &out) const override {
    put_u64(out, need_pass_ ? 1 : 0);
    if (need_pass_) return;
    put_u64(out, static_cast<uint64_t>(pos_));
    if (shuffle_) put_rng(out, pass_rng_);
  }
  void load_own(StateReader &r, bool apply) override {
    bool need = r.u64() != 0;
    if (need) {
      if (apply) need_pass_ = true;
      return;
    }
    uint64_t pos = r.u64();
    if (pos > static_cast<uint64_t>(rows_))
      bad_state("position " + std::to_string(pos) + " is past the " + std::to_string(rows_) + " rows of " + kind());
    Rng before;
    if (shuffle_) before = r.rng();
    if (!apply) return;
    need_pass_ = false;
    pos_ = static_cast<int64_t>(pos);
    if (shuffle_) {
      pass_rng_ = before;
      order_ = before.permutation(rows_);
    }
  }

 private:
  std::vector<at::Tensor> tensors_;
  bool shuffle_;
  int64_t rows_ = 0, pos_ = 0;
  bool need_pass_ = true;
  std::vector<int64_t> order_;
  Rng rng_, pass_rng_;
};

class FunctionSource final : public DataFlow {
 public:
  explicit FunctionSource(SourceFns fns) : DataFlow("DataFromCallbacks"), fns_(std::move(fns)) {}
  bool next(Datapoint &dp) override {
    dp.clear();
    return fns_.next(dp);
  }
  std::optional<int64_t> size() const override {
    if (!fns_.size) return std::nullopt;
    int64_t n = fns_.size();
    if (n < 0) return std::nullopt;
    return n;
  }

 protected:
  void on_reset() override {
    if (fns_.reset) fns_.reset(node_seed());
  }
  // A flag, then what save gave. Without save the source has no position:
  // restored, its reset with the seed it had starts its first pass again.
  void save_own(std::vector<uint8_t> &out) const override {
    if (!fns_.save) return put_u64(out, 0);
    std::vector<uint8_t> mine = fns_.save();
    put_u64(out, 1);
    put_u64(out, mine.size());
    out.insert(out.end(), mine.begin(), mine.end());
  }
  void load_own(StateReader &r, bool apply) override {
    if (r.u64() == 0) return;
    uint64_t n = r.u64();
    StateReader mine = r.sub(static_cast<size_t>(n));
    if (!fns_.restore) bad_state("it has the position of a source, and this source cannot restore one (no restore callback)");
    if (apply) fns_.restore(mine.here(), static_cast<size_t>(n));
  }

 private:
  SourceFns fns_;
};

class FakeSource final : public DataFlow {
 public:
  FakeSource(std::vector<FakeSpec> specs, int64_t size, bool random, double low, double high)
      : DataFlow("FakeData"), specs_(std::move(specs)), size_(size), random_(random), low_(low), high_(high) {
    if (specs_.empty()) invalid_argument("no components given");
    if (size_ < 1) invalid_argument("size must be >= 1, got " + std::to_string(size_));
    if (!(low_ < high_)) invalid_argument("low must be < high");
    for (size_t i = 0; i < specs_.size(); ++i)
      for (int64_t d : specs_[i].shape)
        if (d < 0) invalid_argument("components[" + std::to_string(i) + "] has a free dimension (-1)");
  }
  bool next(Datapoint &dp) override {
    if (pos_ >= size_) {
      pos_ = 0;
      return false;
    }
    ++pos_;
    if (!random_) {
      if (constant_.empty()) {  // from the node's seed, so that a restored state makes it again
        Rng c;
        c.seed(mix_seed(node_seed(), 0x636f6e7374616e74ull));
        constant_ = make(c);
      }
      dp = constant_;
    } else {
      dp = make(rng_);
    }
    return true;
  }
  std::optional<int64_t> size() const override { return size_; }

 protected:
  void clear_pass() override { pos_ = 0; }
  void on_reset() override { constant_.clear(); }
  Rng *rng() override { return &rng_; }
  void save_own(std::vector<uint8_t> &out) const override { put_u64(out, static_cast<uint64_t>(pos_)); }
  void load_own(StateReader &r, bool apply) override {
    uint64_t pos = r.u64();
    if (pos > static_cast<uint64_t>(size_)) bad_state("position " + std::to_string(pos) + " is past FakeData's size");
    if (apply) pos_ = static_cast<int64_t>(pos);
  }

 private:
  Datapoint make(Rng &rng) {
    Datapoint dp;
    for (const auto &s : specs_) {
      at::Tensor v = at::empty(s.shape, at::TensorOptions().dtype(at::kDouble));
      double *p = v.data_ptr<double>();
      const bool integral = !c10::isFloatingType(s.dtype) && !c10::isComplexType(s.dtype);
      for (int64_t i = 0, n = v.numel(); i < n; ++i) {
        double x = low_ + (high_ - low_) * rng.uniform();
        p[i] = integral ? std::floor(x) : x;
      }
      dp.push_back(v.to(s.dtype));
    }
    return dp;
  }
  std::vector<FakeSpec> specs_;
  int64_t size_;
  bool random_;
  double low_, high_;
  int64_t pos_ = 0;
  Datapoint constant_;
  Rng rng_;
};

// ------------------------------------------------------------------ combinators

// A node with one input.
class Proxy : public DataFlow {
 public:
  Proxy(std::string kind, DataFlowPtr df) : DataFlow(std::move(kind)), df_(std::move(df)) {
    if (!df_) invalid_argument("no input dataflow");
    df_->claim(this->kind());
  }
  // Also runs when a derived constructor rejects its arguments: a failed call
  // leaves the input free for another consumer.
  ~Proxy() override { df_->release(); }
  std::optional<int64_t> size() const override { return df_->size(); }

 protected:
  std::vector<DataFlow *> children() const override { return {df_.get()}; }
  DataFlowPtr df_;
};

class Batch final : public Proxy {
 public:
  Batch(DataFlowPtr df, int64_t bs, bool remainder) : Proxy("BatchData", std::move(df)), bs_(bs), rem_(remainder) {
    if (bs_ < 1) invalid_argument("batch_size must be >= 1, got " + std::to_string(bs_));
    auto n = df_->size();
    if (!rem_ && n && bs_ > *n)
      invalid_argument("batch_size " + std::to_string(bs_) + " is larger than the " + std::to_string(*n) +
                       " datapoints of a pass (and remainder is off)");
    parts_.reserve(static_cast<size_t>(std::min<int64_t>(bs_, 4096)));
  }
  bool next(Datapoint &dp) override {
    if (ended_) {  // the input's pass ended inside the short batch given last
      ended_ = false;
      return false;
    }
    parts_.clear();
    Datapoint x;
    bool more = true;
    while (static_cast<int64_t>(parts_.size()) < bs_ && (more = df_->next(x))) parts_.push_back(std::move(x));
    if (parts_.empty() || (static_cast<int64_t>(parts_.size()) < bs_ && !rem_)) {
      parts_.clear();
      return false;
    }
    ended_ = !more;
    const Datapoint &first = parts_[0];
    for (size_t i = 1; i < parts_.size(); ++i)
      if (parts_[i].size() != first.size())
        invalid_argument("BatchData: datapoint " + std::to_string(i) + " of the batch has " +
                         std::to_string(parts_[i].size()) + " components, the first has " +
                         std::to_string(first.size()));
    dp.assign(first.size(), at::Tensor());
    std::vector<at::Tensor> col(parts_.size());
    for (size_t c = 0; c < first.size(); ++c) {
      for (size_t i = 0; i < parts_.size(); ++i) {
        const at::Tensor &t = parts_[i][c];
        if (!t.defined()) invalid_argument("BatchData: component " + std::to_string(c) + " is not set");
        if (i > 0 && (t.sizes() != first[c].sizes() || t.scalar_type() != first[c].scalar_type()))
          invalid_argument("BatchData: datapoint " + std::to_string(i) + " of the batch has component " +
                           std::to_string(c) + " of shape " + shape_str(t) + ", the first has " +
                           shape_str(first[c]));
        col[i] = t;
      }
      dp[c] = at::stack(col);
    }
    parts_.clear();
    return true;
  }
  std::optional<int64_t> size() const override {
    auto n = df_->size();
    if (!n) return std::nullopt;
    return *n / bs_ + ((rem_ && *n % bs_) ? 1 : 0);
  }

 protected:
  void clear_pass() override { ended_ = false; }
  void save_own(std::vector<uint8_t> &out) const override { put_u64(out, ended_ ? 1 : 0); }
  void load_own(StateReader &r, bool apply) override {
    bool ended = r.u64() != 0;
    if (apply) ended_ = ended;
  }

 private:
  int64_t bs_;
  bool rem_;
  bool ended_ = false;
  std::vector<Datapoint> parts_;
};

class Map final : public Proxy {
 public:
  Map(DataFlowPtr df, MapFn fn, std::string kind) : Proxy(std::move(kind), std::move(df)), fn_(std::move(fn)) {}
  bool next(Datapoint &dp) override {
    for (;;) {
      if (!df_->next(dp)) return false;
      fn_(dp);
      if (!dp.empty()) return true;
    }
  }

 private:
  MapFn fn_;
};

class SeededMap final : public Proxy {
 public:
  SeededMap(DataFlowPtr df, SeededMapFn fn, std::string kind) : Proxy(std::move(kind), std::move(df)), fn_(std::move(fn)) {}
  bool next(Datapoint &dp) override {
    for (;;) {
      if (!df_->next(dp)) return false;
      fn_(dp, rng_.next());
      if (!dp.empty()) return true;
    }
  }

 protected:
  Rng *rng() override { return &rng_; }

 private:
  SeededMapFn fn_;
  Rng rng_;
};

class LocalShuffle final : public Proxy {
 public:
  LocalShuffle(DataFlowPtr df, int64_t buffer, int64_t reuse)
      : Proxy("LocallyShuffleData", std::move(df)), buffer_(buffer), reuse_(reuse) {
    if (buffer_ < 1) invalid_argument("buffer_size must be >= 1, got " + std::to_string(buffer_));
    if (reuse_ < 1) invalid_argument("n_reuse must be >= 1, got " + std::to_string(reuse_));
  }
  bool next(Datapoint &dp) override {
    while (static_cast<int64_t>(buf_.size()) < buffer_ && pull()) {
    }
    if (buf_.empty()) return false;  // the input has no data at all
    size_t j = static_cast<size_t>(rng_.below(buf_.size()));
    std::swap(buf_[j], buf_.back());
    dp = std::move(buf_.back());
    buf_.pop_back();
    return true;
  }
  std::optional<int64_t> size() const override {
    auto n = df_->size();
    if (!n) return std::nullopt;
    return *n * reuse_;
  }

 protected:
  void clear_pass() override {
    buf_.clear();
    got_ = 0;
  }
  Rng *rng() override { return &rng_; }
  // The buffer is not saved: a restored LocallyShuffleData fills it anew
  // from where its input was (what the buffer held is skipped).
  void save_own(std::vector<uint8_t> &out) const override { put_u64(out, static_cast<uint64_t>(got_)); }
  void load_own(StateReader &r, bool apply) override {
    uint64_t got = r.u64();
    if (apply) got_ = static_cast<int64_t>(got);
  }

 private:
  // Reads one datapoint into the buffer (n_reuse times), going on to the
  // input's next pass at the end of one; false if a whole pass was empty.
  bool pull() {
    Datapoint x;
    if (!df_->next(x)) {
      if (got_ == 0) return false;
      got_ = 0;
      if (!df_->next(x)) return false;
    }
    ++got_;
    for (int64_t k = 1; k < reuse_; ++k) buf_.push_back(x);
    buf_.push_back(std::move(x));
    return true;
  }
  int64_t buffer_, reuse_;
  int64_t got_ = 0;
  std::vector<Datapoint> buf_;
  Rng rng_;
};

class Cache final : public Proxy {
 public:
  Cache(DataFlowPtr df, bool shuffle) : Proxy("CacheData", std::move(df)), shuffle_(shuffle) {}
  bool next(Datapoint &dp) override {
    if (refill_) refill();
    if (!filled_) {
      if (fill_start_.empty()) Proxy::save_children(fill_start_);  // the input's state now is where the cache starts
      if (df_->next(dp)) {
        cached_.push_back(dp);
        return true;
      }
      filled_ = true;
      pos_ = 0;
      order_.clear();
      return false;
    }
    if (pos_ == 0 && order_.empty() && shuffle_) {
      pass_rng_ = rng_;
      order_ = rng_.permutation(static_cast<int64_t>(cached_.size()));
    }
    if (pos_ >= cached_.size()) {
      pos_ = 0;
      order_.clear();
      return false;
    }
    if (shuffle_ && order_.size() != cached_.size())
      fail(TPT_ERR_INTERNAL, "CacheData: its order has " + std::to_string(order_.size()) + " entries for " +
                                 std::to_string(cached_.size()) + " datapoints");
    dp = cached_[shuffle_ ? static_cast<size_t>(order_[pos_]) : pos_];
    ++pos_;
    return true;
  }
  std::optional<int64_t> size() const override {
    if (filled_) return static_cast<int64_t>(cached_.size());
    return df_->size();
  }

 protected:
  void clear_pass() override {
    if (!filled_) {  // a first pass cut short is read again
      cached_.clear();
      fill_start_.clear();
    }
    pos_ = 0;
    order_.clear();
  }
  void on_reset() override {
    filled_ = false;
    fill_start_.clear();
    refill_ = false;
    cached_.clear();
  }
  Rng *rng() override { return shuffle_ ? &rng_ : nullptr; }
  // The cache itself is not saved: the input's state where the cache
  // started is, and a restored CacheData reads the input again from there
  // (the whole pass when the cache was full, else what it had cached).
  void save_children(std::vector<uint8_t> &out) const override {
    if (!fill_start_.empty()) out.insert(out.end(), fill_start_.begin(), fill_start_.end());
    else Proxy::save_children(out);
  }
  void save_own(std::vector<uint8_t> &out) const override {
    put_u64(out, filled_ ? 1 : 0);
    put_u64(out, cached_.size());
    put_u64(out, pos_);
    bool ordered = filled_ && shuffle_ && !order_.empty();
    put_u64(out, ordered ? 1 : 0);
    if (ordered) put_rng(out, pass_rng_);
  }
  void load_own(StateReader &r, bool apply) override {
    bool filled = r.u64() != 0;
    uint64_t n = r.u64(), pos = r.u64();
    bool ordered = r.u64() != 0;
    if (pos > n) bad_state("CacheData's position is past its cache");
    if (ordered && !shuffle_) bad_state("CacheData differs (shuffle)");
    // A shuffled pass under way has its order (the generator that made it).
    if (filled && shuffle_ && pos > 0 && !ordered) bad_state("CacheData is inside a shuffled pass without its order");
    Rng before;
    if (ordered) before = r.rng();
    if (!apply) return;
    filled_ = filled;
    refill_ = n > 0 || filled;
    refill_count_ = n;
    pos_ = static_cast<size_t>(pos);
    has_pass_rng_ = ordered;
    pass_rng_ = before;
  }

 private:
  // After a restore: the cache read again from the input's restored state.
  void refill() {
    refill_ = false;
    fill_start_.clear();
    Proxy::save_children(fill_start_);
    cached_.clear();
    Datapoint x;
    if (filled_) {
      while (df_->next(x)) cached_.push_back(std::move(x));
    } else {
      for (uint64_t k = 0; k < refill_count_; ++k) {
        if (!df_->next(x)) fail(TPT_ERR_STATE, "CacheData: its input gave fewer datapoints than the restored state cached");
        cached_.push_back(std::move(x));
      }
    }
    if (filled_ && cached_.size() != refill_count_)
      fail(TPT_ERR_STATE, "CacheData: its input gave " + std::to_string(cached_.size()) +
                              " datapoints, the restored state cached " + std::to_string(refill_count_));
    if (has_pass_rng_) {
      Rng r = pass_rng_;
      order_ = r.permutation(static_cast<int64_t>(cached_.size()));
      has_pass_rng_ = false;
    }
  }

  bool shuffle_, filled_ = false;
  std::vector<Datapoint> cached_;
  size_t pos_ = 0;
  std::vector<int64_t> order_;
  Rng rng_, pass_rng_;
  std::vector<uint8_t> fill_start_;  // empty until the cache starts filling
  bool refill_ = false, has_pass_rng_ = false;
  uint64_t refill_count_ = 0;
};

class Repeat final : public Proxy {
 public:
  Repeat(DataFlowPtr df, int64_t n) : Proxy("RepeatedData", std::move(df)), n_(n) {
    if (n_ < 1 && n_ != -1) invalid_argument("n must be >= 1 or -1 (forever), got " + std::to_string(n_));
  }
  bool next(Datapoint &dp) override {
    for (;;) {
      if (df_->next(dp)) {
        got_ = true;
        return true;
      }
      bool empty = !got_;
      got_ = false;
      ++done_;
      if (empty || (n_ > 0 && done_ >= n_)) {  // an empty input would repeat forever
        done_ = 0;
        return false;
      }
    }
  }
  std::optional<int64_t> size() const override {
    auto n = df_->size();
    if (!n || n_ < 0) return std::nullopt;
    return *n * n_;
  }

 protected:
  void clear_pass() override {
    done_ = 0;
    got_ = false;
  }
  void save_own(std::vector<uint8_t> &out) const override {
    put_u64(out, static_cast<uint64_t>(done_));
    put_u64(out, got_ ? 1 : 0);
  }
  void load_own(StateReader &r, bool apply) override {
    uint64_t done = r.u64();
    bool got = r.u64() != 0;
    if (apply) done_ = static_cast<int64_t>(done), got_ = got;
  }

 private:
  int64_t n_, done_ = 0;
  bool got_ = false;
};

class FixedSize final : public Proxy {
 public:
  FixedSize(DataFlowPtr df, int64_t size, bool keep) : Proxy("FixedSizeData", std::move(df)), size_(size), keep_(keep) {
    if (size_ < 1) invalid_argument("size must be >= 1, got " + std::to_string(size_));
  }
  bool next(Datapoint &dp) override {
    if (count_ >= size_) {
      count_ = 0;
      if (!keep_) df_->restart();
      return false;
    }
    for (;;) {
      if (df_->next(dp)) {
        got_ = true;
        ++count_;
        return true;
      }
      if (!got_) {  // the input is empty
        count_ = 0;
        return false;
      }
      got_ = false;
    }
  }
  std::optional<int64_t> size() const override { return size_; }

 protected:
  void clear_pass() override {
    count_ = 0;
    got_ = false;
  }
  void save_own(std::vector<uint8_t> &out) const override {
    put_u64(out, static_cast<uint64_t>(count_));
    put_u64(out, got_ ? 1 : 0);
  }
  void load_own(StateReader &r, bool apply) override {
    uint64_t count = r.u64();
    bool got = r.u64() != 0;
    if (count > static_cast<uint64_t>(size_)) bad_state("FixedSizeData's count is past its size");
    if (apply) count_ = static_cast<int64_t>(count), got_ = got;
  }

 private:
  int64_t size_, count_ = 0;
  bool keep_, got_ = false;
};

// Every count-th datapoint from the index-th: each next() reads `count` and
// keeps one, so every share's pipeline is in the same state.
class Shard final : public Proxy {
 public:
  Shard(DataFlowPtr df, int64_t index, int64_t count) : Proxy("ShardData", std::move(df)), index_(index), count_(count) {
    if (count_ < 1 || count_ > (int64_t{1} << 20))
      invalid_argument("count must be from 1 to 2^20, got " + std::to_string(count_));
    if (index_ < 0 || index_ >= count_)
      invalid_argument("index must be from 0 to count - 1 (" + std::to_string(count_ - 1) + "), got " +
                       std::to_string(index_));
  }
  bool next(Datapoint &dp) override {
    for (int64_t i = 0; i < count_; ++i) {
      if (!df_->next(i == index_ ? dp : skipped_)) return false;  // a last, partial group is dropped
    }
    skipped_.clear();
    return true;
  }
  std::optional<int64_t> size() const override {
    std::optional<int64_t> n = df_->size();
    if (n) *n /= count_;
    return n;
  }

 private:
  int64_t index_, count_;
  Datapoint skipped_;
};

class Many : public DataFlow {
 public:
  Many(std::string kind, std::vector<DataFlowPtr> dfs) : DataFlow(std::move(kind)), dfs_(std::move(dfs)) {
    if (dfs_.empty()) invalid_argument("no dataflows given");
    for (size_t i = 0; i < dfs_.size(); ++i) {
      if (!dfs_[i]) invalid_argument("dfs[" + std::to_string(i) + "] is NULL");
      for (size_t j = 0; j < i; ++j)
        if (dfs_[j] == dfs_[i]) invalid_argument("dfs[" + std::to_string(j) + "] and dfs[" + std::to_string(i) + "] are the same dataflow");
    }
    size_t claimed = 0;
    try {
      for (; claimed < dfs_.size(); ++claimed) dfs_[claimed]->claim(this->kind());
    } catch (...) {  // one is read by another consumer: leave the others free
      for (size_t i = 0; i < claimed; ++i) dfs_[i]->release();
      throw;
    }
  }
  ~Many() override {
    for (auto &d : dfs_) d->release();
  }

 protected:
  std::vector<DataFlow *> children() const override {
    std::vector<DataFlow *> out;
    for (const auto &d : dfs_) out.push_back(d.get());
    return out;
  }
  std::vector<DataFlowPtr> dfs_;
};

class Concat final : public Many {
 public:
  explicit Concat(std::vector<DataFlowPtr> dfs) : Many("ConcatData", std::move(dfs)) {}
  bool next(Datapoint &dp) override {
    while (cur_ < dfs_.size()) {
      if (dfs_[cur_]->next(dp)) return true;
      ++cur_;
    }
    cur_ = 0;
    return false;
  }
  std::optional<int64_t> size() const override {
    int64_t total = 0;
    for (const auto &d : dfs_) {
      auto n = d->size();
      if (!n) return std::nullopt;
      total += *n;
    }
    return total;
  }

 protected:
  void clear_pass() override { cur_ = 0; }
  void save_own(std::vector<uint8_t> &out) const override { put_u64(out, cur_); }
  void load_own(StateReader &r, bool apply) override {
    uint64_t cur = r.u64();
    if (cur > dfs_.size()) bad_state("ConcatData's input index is out of range");
    if (apply) cur_ = static_cast<size_t>(cur);
  }

 private:
  size_t cur_ = 0;
};

class Join final : public Many {
 public:
  explicit Join(std::vector<DataFlowPtr> dfs) : Many("JoinData", std::move(dfs)) {}
  bool next(Datapoint &dp) override {
    dp.clear();
    Datapoint part;
    for (size_t i = 0; i < dfs_.size(); ++i) {
      if (!dfs_[i]->next(part)) {
        // The shortest ended: the others start their next pass with it.
        for (size_t j = 0; j < dfs_.size(); ++j)
          if (j != i) dfs_[j]->restart();
        dp.clear();
        return false;
      }
      dp.insert(dp.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
    }
    return true;
  }
  std::optional<int64_t> size() const override {
    std::optional<int64_t> m;
    for (const auto &d : dfs_) {
      auto n = d->size();
      if (!n) return std::nullopt;
      m = m ? std::min(*m, *n) : *n;
    }
    return m;
  }
};

}  // namespace

void DataFlow::on_reset() {}

DataFlowPtr from_tensors(std::vector<at::Tensor> tensors, bool shuffle) {
  return std::make_shared<TensorSource>(std::move(tensors), shuffle, "DataFromTensors");
}

DataFlowPtr from_functions(SourceFns fns) {
  if (!fns.next) invalid_argument("no next function");
  if (!fns.save != !fns.restore) invalid_argument("a source's save and restore come together (give both or neither)");
  return std::make_shared<FunctionSource>(std::move(fns));
}

DataFlowPtr from_idx(const std::vector<std::string> &paths, bool shuffle) {
  if (paths.empty()) invalid_argument("no files given");
  std::vector<at::Tensor> tensors;
  for (const auto &p : paths) {
    tensors.push_back(read_idx(p));
    if (tensors.back().size(0) != tensors[0].size(0))
      invalid_argument("the IDX file " + p + " has " + std::to_string(tensors.back().size(0)) + " rows, " + paths[0] +
                       " has " + std::to_string(tensors[0].size(0)));
  }
  return std::make_shared<TensorSource>(std::move(tensors), shuffle, "IDXData");
}

DataFlowPtr fake(std::vector<FakeSpec> specs, int64_t size, bool random, double low, double high) {
  return std::make_shared<FakeSource>(std::move(specs), size, random, low, high);
}

DataFlowPtr indices(int64_t n, bool shuffle) {
  if (n < 0) invalid_argument("negative count");
  return std::make_shared<TensorSource>(std::vector<at::Tensor>{at::arange(n, at::TensorOptions().dtype(at::kLong))},
                                        shuffle, "DataFromList");
}

DataFlowPtr batch(DataFlowPtr df, int64_t bs, bool remainder) {
  return std::make_shared<Batch>(std::move(df), bs, remainder);
}

DataFlowPtr map(DataFlowPtr df, MapFn fn, std::string kind) {
  if (!fn) invalid_argument("no map function");
  return std::make_shared<Map>(std::move(df), std::move(fn), std::move(kind));
}

DataFlowPtr seeded_map(DataFlowPtr df, SeededMapFn fn, std::string kind) {
  if (!fn) invalid_argument("no map function");
  return std::make_shared<SeededMap>(std::move(df), std::move(fn), std::move(kind));
}

DataFlowPtr local_shuffle(DataFlowPtr df, int64_t buffer, int64_t reuse) {
  return std::make_shared<LocalShuffle>(std::move(df), buffer, reuse);
}

DataFlowPtr cache(DataFlowPtr df, bool shuffle) { return std::make_shared<Cache>(std::move(df), shuffle); }

DataFlowPtr repeat(DataFlowPtr df, int64_t n) { return std::make_shared<Repeat>(std::move(df), n); }

DataFlowPtr fixed_size(DataFlowPtr df, int64_t size, bool keep) {
  return std::make_shared<FixedSize>(std::move(df), size, keep);
}

DataFlowPtr shard(DataFlowPtr df, int64_t index, int64_t count) {
  return std::make_shared<Shard>(std::move(df), index, count);
}

DataFlowPtr concat(std::vector<DataFlowPtr> dfs) { return std::make_shared<Concat>(std::move(dfs)); }

DataFlowPtr join(std::vector<DataFlowPtr> dfs) { return std::make_shared<Join>(std::move(dfs)); }

DataFlowPtr select(DataFlowPtr df, std::vector<size_t> idx) {
  if (idx.empty()) invalid_argument("no component indices given");
  return map(
      std::move(df),
      [idx](Datapoint &dp) {
        Datapoint out;
        out.reserve(idx.size());
        for (size_t i : idx) {
          if (i >= dp.size())
            invalid_argument("SelectComponent: component " + std::to_string(i) + " asked for, the datapoint has " +
                             std::to_string(dp.size()));
          out.push_back(dp[i]);
        }
        dp = std::move(out);
      },
      "SelectComponent");
}

DataFlowPtr mnist(const std::string &dir, const std::string &split, bool shuffle) {
  std::string prefix;
  if (split == "train") prefix = "train";
  else if (split == "test") prefix = "t10k";
  else invalid_argument("split must be \"train\" or \"test\", got \"" + split + "\"");
  auto pick = [&](const std::string &base) {
    std::string plain = dir + "/" + base;
    std::error_code ec;
    if (std::filesystem::exists(plain + ".gz", ec)) return plain + ".gz";
    return plain;  // read_idx names it if it is missing too
  };
  DataFlowPtr raw = from_idx({pick(prefix + "-images-idx3-ubyte"), pick(prefix + "-labels-idx1-ubyte")}, shuffle);
  return map(
      std::move(raw),
      [](Datapoint &dp) {
        // x / 255 in float32, one pass (float_pixels); [H, W] -> [1, H, W]
        at::Tensor x = float_pixels(dp[0], PixelOp::Divide, {0.0f}, {255.0f});
        dp[0] = (x.defined() ? x : dp[0].to(at::kFloat).div_(255.0)).unsqueeze_(0);
        const at::Tensor &y = dp[1];  // the label, a uint8 scalar: an int64 one
        if (y.dim() == 0 && y.scalar_type() == at::kByte && y.device().is_cpu()) {
          at::Tensor label = at::detail::empty_cpu({}, at::kLong);
          *label.data_ptr<int64_t>() = *y.data_ptr<uint8_t>();
          dp[1] = std::move(label);
        } else {
          dp[1] = y.to(at::kLong);
        }
      },
      "Mnist");
}

}  // namespace tpt::data
