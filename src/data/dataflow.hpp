// The DataFlow library (tensorpack's dataflow/): sources, combinators,
// parallel maps and prefetching, seeded randomness whose state can be saved.
//
// A dataflow is a cursor over passes: next() gives the pass's datapoints and
// then false once; the call after that starts a new pass. Nodes form a tree
// (each has at most one consumer); the consumer resets the root, which
// resets the whole tree: threads are stopped, every node is seeded (or keeps
// its restored state) and passes start afresh.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tpt::data {

using Datapoint = std::vector<at::Tensor>;

// xoshiro256**: small, fast, and its whole state (4 words) is easy to save.
struct Rng {
  uint64_t s[4] = {1, 2, 3, 4};
  void seed(uint64_t seed);
  uint64_t next();
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n);                                                // [0, n)
  std::vector<int64_t> permutation(int64_t n);
};

// splitmix64 finaliser: mixes a seed with a node's place in the tree.
uint64_t mix_seed(uint64_t a, uint64_t b);

// Little-endian words in a dataflow state (see DataFlow::get_state).
void put_u64(std::vector<uint8_t> &out, uint64_t v);
void put_rng(std::vector<uint8_t> &out, const Rng &r);
// Throws "not a state of this dataflow: <why>" (TPT_ERR_INVALID_ARGUMENT).
[[noreturn]] void bad_state(const std::string &why);
class StateReader {
 public:
  // `of` names what the state is of in errors ("not a state of this <of>: ...").
  StateReader(const uint8_t *data, size_t size, const char *of = "dataflow") : p_(data), n_(size), of_(of) {}
  uint64_t u64();
  Rng rng();
  // The next n bytes as a reader of their own.
  StateReader sub(size_t n);
  bool done() const { return pos_ == n_; }
  size_t left_bytes() const { return n_ - pos_; }
  const uint8_t *here() const { return p_ + pos_; }

 private:
  [[noreturn]] void truncated() const;
  const uint8_t *p_;
  size_t n_, pos_ = 0;
  const char *of_;
};

class DataFlow {
 public:
  explicit DataFlow(std::string kind) : kind_(std::move(kind)) {}
  virtual ~DataFlow() = default;
  DataFlow(const DataFlow &) = delete;
  DataFlow &operator=(const DataFlow &) = delete;

  const std::string &kind() const { return kind_; }

  // The next datapoint of the pass, or false at its end.
  virtual bool next(Datapoint &dp) = 0;
  // Datapoints per pass; nullopt when unknown or infinite.
  virtual std::optional<int64_t> size() const { return std::nullopt; }

  // The consumer's reset of the whole tree (see the file comment).
  void reset_state();
  bool was_reset() const { return was_reset_; }
  // Drops the rest of the current pass (and what threads read ahead); the
  // next next() starts a new pass. Keeps the random state.
  void restart();
  // Joins this tree's threads (the consumer is done).
  void stop();

  void set_seed(uint64_t seed) { seed_ = seed; }
  // The state of the whole pipeline as of the last datapoint this node gave
  // (its generators, positions and the seeds of its last reset), for the
  // consumer's thread between next() calls. Nodes with threads keep a
  // snapshot of their input's state with every datapoint they read ahead,
  // so the state does not include what they read ahead.
  std::vector<uint8_t> get_state() const;
  // Checks a state of this pipeline's shape; the next reset continues from
  // it (mid-pass: the datapoint after the last one given) instead of
  // reseeding. Nothing changes if it throws.
  void set_state(const uint8_t *data, size_t size);
  // Appends this subtree's state (see get_state) to `out`.
  void save_tree(std::vector<uint8_t> &out) const;

  // Records that `consumer` reads this dataflow; a second consumer is an error.
  void claim(const std::string &consumer);
  bool claimed() const { return !consumer_.empty(); }
  // The consumer is gone (or its construction failed): another may read it.
  void release() { consumer_.clear(); }

 protected:
  // Hooks of a node. Children are reset/restarted by the base between
  // stop_threads() and clear_pass().
  virtual std::vector<DataFlow *> children() const { return {}; }
  virtual void stop_threads() {}
  virtual void clear_pass() {}   // forget the current pass (positions, buffers)
  virtual void start_threads() {}
  // Called at every reset (not at a restart), after seeding.
  virtual void on_reset();
  // Nodes with randomness return their generator; the base seeds it at reset
  // and saves / restores it.
  virtual Rng *rng() { return nullptr; }
  // The seed given to the node at its last reset (for sources that seed
  // something else, such as a C callback). A restored state brings its own.
  uint64_t node_seed() const { return node_seed_; }

  // State beyond the generator and the seed: positions in the pass. save_own
  // runs on the consumer's thread between next() calls; load_own reads what
  // save_own wrote and, with `apply`, sets it, at a reset after clear_pass()
  // and before start_threads() (without `apply` it only checks).
  virtual void save_own(std::vector<uint8_t> &) const {}
  virtual void load_own(StateReader &, bool /*apply*/) {}
  // The children's part of the state; Cache gives what they were when its
  // cache started filling.
  virtual void save_children(std::vector<uint8_t> &out) const;
  // Nodes with threads: appends the state as of the last datapoint given and
  // returns true (else save_tree writes the state as it is now).
  virtual bool save_snapshot(std::vector<uint8_t> &) const { return false; }
  // What save_tree writes when there is no snapshot: this node now, then its
  // children's save_tree.
  void save_now(std::vector<uint8_t> &out) const;
  // The node's own part of the state (kind, seed, generator, save_own).
  void save_header(std::vector<uint8_t> &out) const;

 private:
  void load_tree(StateReader &r, bool apply, size_t &index);
  void reset_tree(uint64_t base, uint64_t &index);
  void restart_tree();
  void stop_tree();
  void collect(std::vector<DataFlow *> &out);

  std::string kind_;
  std::string consumer_;
  std::optional<uint64_t> seed_;
  uint64_t node_seed_ = 0;
  bool was_reset_ = false;
  // A state set by set_state, applied at the next reset.
  bool restored_ = false;
  uint64_t restored_seed_ = 0;
  Rng restored_rng_;
  std::vector<uint8_t> restored_own_;
};

using DataFlowPtr = std::shared_ptr<DataFlow>;

// ---- sources
// Rows of tensors (dimension 0).
DataFlowPtr from_tensors(std::vector<at::Tensor> tensors, bool shuffle);
// A source made of functions: next fills dp or returns false; reset gets the
// node's seed; size returns -1 when unknown.
struct SourceFns {
  std::function<bool(Datapoint &)> next;
  std::function<void(uint64_t seed)> reset;
  std::function<int64_t()> size;
  // The source's position (both or neither): save gives it after the last
  // datapoint; restore gets it back right after reset.
  std::function<std::vector<uint8_t>()> save;
  std::function<void(const uint8_t *data, size_t size)> restore;
};
DataFlowPtr from_functions(SourceFns fns);
// The tensor stored in an IDX file (gzip when the name ends in .gz).
at::Tensor read_idx(const std::string &path);
DataFlowPtr from_idx(const std::vector<std::string> &paths, bool shuffle);
DataFlowPtr mnist(const std::string &dir, const std::string &split, bool shuffle);
struct FakeSpec {
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
};
DataFlowPtr fake(std::vector<FakeSpec> specs, int64_t size, bool random, double low, double high);
// Datapoints (index as an i64 scalar) for 0 .. n-1, in order or shuffled.
DataFlowPtr indices(int64_t n, bool shuffle);

// ---- combinators
DataFlowPtr batch(DataFlowPtr df, int64_t batch_size, bool remainder);
// fn changes dp in place; an empty dp is dropped.
using MapFn = std::function<void(Datapoint &dp)>;
DataFlowPtr map(DataFlowPtr df, MapFn fn, std::string kind = "MapData");
// A map that also gets a seed drawn for each datapoint in input order.
using SeededMapFn = std::function<void(Datapoint &dp, uint64_t seed)>;
DataFlowPtr seeded_map(DataFlowPtr df, SeededMapFn fn, std::string kind);
struct ParallelMapOptions {
  int n_threads = 2;
  int buffer_size = 200;
  bool ordered = false;
  bool strict = false;
};
DataFlowPtr parallel_map(DataFlowPtr df, SeededMapFn fn, ParallelMapOptions options,
                         std::string kind = "MultiThreadMapData");
DataFlowPtr prefetch(DataFlowPtr df, int64_t capacity);
DataFlowPtr local_shuffle(DataFlowPtr df, int64_t buffer_size, int64_t n_reuse);
DataFlowPtr cache(DataFlowPtr df, bool shuffle);
DataFlowPtr repeat(DataFlowPtr df, int64_t n);
DataFlowPtr fixed_size(DataFlowPtr df, int64_t size, bool keep_state);
// Every count-th datapoint from the index-th (a rank's share).
DataFlowPtr shard(DataFlowPtr df, int64_t index, int64_t count);
DataFlowPtr concat(std::vector<DataFlowPtr> dfs);
DataFlowPtr join(std::vector<DataFlowPtr> dfs);
DataFlowPtr select(DataFlowPtr df, std::vector<size_t> indices);

// ---- image augmentation (augment.cpp)
// float32 pixels of x in one pass, per channel c of a [C, ...] image (one
// value for every pixel when C is 1): (float(x) - shift[c]) / divisor[c], or
// float(x) * factor[c]. The numbers are those of ATen's x.to(kFloat).sub(shift)
// .div(divisor) (.mul(factor)) in float32 (tests/cpp/test_pixels.cpp checks it
// bit for bit), without their operators and temporaries per image: the input
// thread's share of the cores while the model trains. An undefined tensor when x
// is not a contiguous uint8 or float32 CPU tensor of C * k elements (the caller
// then runs ATen's operators).
enum class PixelOp { Divide, Multiply };
at::Tensor float_pixels(const at::Tensor &x, PixelOp op, const std::vector<float> &shift,
                        const std::vector<float> &operand);

struct Augmentor {
  enum Kind { ToFloat = 1, Normalize = 2, RandomCrop = 3, Flip = 4 } kind = ToFloat;
  double scale = 1;
  std::vector<double> mean, std;
  int64_t height = 0, width = 0, padding = 0;
  double probability = 0.5;
};
DataFlowPtr augment(DataFlowPtr df, size_t index, std::vector<Augmentor> augmentors, int n_threads);

}  // namespace tpt::data
