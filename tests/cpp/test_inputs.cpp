// Input sources resume where they were: the state an input gives after k
// batches, restored into a new input built with another seed, gives the
// same next batches as the input that went on. Covers the tensor input
// (LibTorch's generator), feeding and queueing a dataflow (the queue's thread
// reads ahead; prefetch and a parallel map read ahead inside), CPU staging
// and the dummy input; and the errors of a state of another input.
#include <gtest/gtest.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loop/callback.hpp"
#include "base/error.hpp"
#include "data/dataflow.hpp"
#include "train/input.hpp"
#include "model/model.hpp"

namespace {

using tpt::input::Input;
using Batches = std::vector<std::vector<at::Tensor>>;
using Make = std::function<std::unique_ptr<Input>(uint64_t seed)>;

constexpr int64_t kRows = 20;

std::vector<at::Tensor> rows() {
  at::Tensor x = at::arange(kRows, at::TensorOptions().dtype(at::kFloat)).reshape({kRows, 1});
  return {x, at::arange(kRows, at::TensorOptions().dtype(at::kLong)) * 10};
}

tpt::data::DataFlowPtr shuffled_rows() { return tpt::data::from_tensors(rows(), /*shuffle=*/true); }

// The pipeline's seed is the outermost dataflow's.
tpt::data::DataFlowPtr seeded(tpt::data::DataFlowPtr df, uint64_t seed) {
  df->set_seed(seed);
  return df;
}

Batches take(Input &in, int n) {
  Batches out;
  for (int i = 0; i < n; ++i) out.push_back(in.next());
  return out;
}

bool same(const Batches &a, const Batches &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    for (size_t c = 0; c < a[i].size(); ++c)
      if (a[i][c].sizes() != b[i][c].sizes() || !at::equal(a[i][c], b[i][c])) return false;
  }
  return true;
}

void start(Input &in) {
  in.setup();
  in.before_train();
}

const std::vector<std::pair<std::string, Make>> &inputs() {
  using namespace tpt;
  static const std::vector<std::pair<std::string, Make>> all = {
      {"tensors", [](uint64_t seed) { return input::from_tensors(rows(), 3, /*shuffle=*/true, seed); }},
      {"feed", [](uint64_t seed) { return input::feed(seeded(data::batch(shuffled_rows(), 3, true), seed), true); }},
      {"queue over prefetch",
       [](uint64_t seed) {
         auto df = data::prefetch(data::batch(shuffled_rows(), 4, true), 3);
         return input::queue(seeded(df, seed), 5, true);
       }},
      {"queue over a parallel map",
       [](uint64_t seed) {
         data::ParallelMapOptions o;
         o.n_threads = 2;
         o.buffer_size = 4;
         o.ordered = true;
         o.strict = true;
         auto noisy = data::parallel_map(
             shuffled_rows(), [](data::Datapoint &dp, uint64_t s) { dp[0] = dp[0] + static_cast<double>(s % 7); }, o);
         return input::queue(seeded(data::batch(noisy, 3, false), seed), 2, true);
       }},
      {"staging on the CPU",
       [](uint64_t seed) {
         return input::staging(input::queue(seeded(data::batch(shuffled_rows(), 3, true), seed), 4, true), std::nullopt);
       }},
  };
  return all;
}

TEST(InputState, ResumesAfterTheLastBatchGiven) {
  const int cuts[] = {0, 1, 5, 6, 7, 13};
  for (const auto &[name, make] : inputs()) {
    int differs = 0;
    for (int k : cuts) {
      SCOPED_TRACE(name + ", cut after " + std::to_string(k) + " batches");
      auto a = make(7);
      start(*a);
      take(*a, k);
      std::vector<uint8_t> state = a->get_state();
      Batches want = take(*a, 15);
      a->after_train();

      auto b = make(12345);
      b->set_state(state.data(), state.size());
      start(*b);
      EXPECT_TRUE(same(take(*b, 15), want));
      b->after_train();

      auto c = make(12345);  // without the state: other batches
      start(*c);
      take(*c, k);
      differs += !same(take(*c, 15), want);
      c->after_train();
    }
    EXPECT_GT(differs, 0) << name << ": the seed changes nothing, so the test proves nothing";
  }
}

TEST(InputState, StateOfAnotherInputIsRefused) {
  auto feed = inputs()[1].second(1), queue = inputs()[2].second(1), tensors = inputs()[0].second(1);
  std::vector<uint8_t> s = feed->get_state();
  try {
    queue->set_state(s.data(), s.size());
    FAIL() << "a feed input's state was taken by a queue input";
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("it is a state of a feed input, this is a queue input"), std::string::npos)
        << e.what();
  }
  std::vector<uint8_t> t = tensors->get_state();
  t.resize(t.size() - 100);
  try {
    tensors->set_state(t.data(), t.size());
    FAIL() << "a truncated state was taken";
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("not a state of this input: it is truncated"), std::string::npos) << e.what();
  }
  // A state of another pipeline, inside the right kind of input.
  std::vector<uint8_t> q = queue->get_state();
  auto other = tpt::input::queue(tpt::data::batch(shuffled_rows(), 3, true), 4, true);
  try {
    other->set_state(q.data(), q.size());
    FAIL() << "the state of a pipeline with prefetch was taken by one without";
  } catch (const tpt::Error &e) {
    EXPECT_NE(std::string(e.what()).find("not a state of this dataflow"), std::string::npos) << e.what();
  }
  // A feed callback has no position.
  auto fn = tpt::input::from_function([](size_t) { return std::vector<at::Tensor>{at::arange(3)}; });
  try {
    fn->get_state();
    FAIL() << "a feed callback gave a state";
  } catch (const tpt::Error &e) {
    EXPECT_EQ(e.code(), TPT_ERR_UNSUPPORTED);
  }
  // The dummy input's state is its kind alone.
  auto dummy = tpt::input::dummy(4);
  std::vector<uint8_t> d = dummy->get_state();
  EXPECT_NO_THROW(dummy->set_state(d.data(), d.size()));
  EXPECT_THROW(dummy->set_state(s.data(), s.size()), tpt::Error);
}

}  // namespace
