// Input sources: what gives the towers their batches (tensorpack's
// InputSource): in-memory tensors, a feed function, dataflows fed or queued,
// staging to a device, dummy data.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace tpt {
class Trainer;
}
namespace tpt::model {
struct InputSpec;
}
namespace tpt::data {
class DataFlow;
}

namespace tpt::input {

class Input {
 public:
  virtual ~Input() = default;
  // The next batch, one tensor per input of the signature. Throws
  // tpt::StopTraining at the end of the data.
  virtual std::vector<at::Tensor> next() = 0;
  // Batches per pass over the data, when known.
  virtual std::optional<int64_t> size() const { return std::nullopt; }
  // Tells the input the model's signature, before the first next().
  virtual void set_signature(const std::vector<model::InputSpec> &) {}
  // The training's life cycle, driven by the strategy: SETUP (reset the
  // data), BEFORE_TRAIN (start threads), after each hooked step (put
  // scalars), AFTER_TRAIN (join threads; also after a failure).
  virtual void setup() {}
  virtual void before_train() {}
  virtual void after_step(Trainer &) {}
  virtual void after_train() {}

  // Where the input is, as of the last batch next() gave (threads that read
  // ahead do not change it): for checkpoints. Throws TPT_ERR_UNSUPPORTED for
  // an input that cannot say (a feed callback). Call it from the thread that
  // calls next().
  virtual std::vector<uint8_t> get_state() const;
  // Before setup(): the first batch after it is the one after the last
  // batch given when the state was taken. Throws TPT_ERR_INVALID_ARGUMENT
  // (nothing changed) for a state of another kind of input or pipeline.
  virtual void set_state(const uint8_t *data, size_t size);
};

// For implementations: an input's state starts with a tag and its kind.
enum class StateKind : uint64_t { Tensors = 1, Feed = 2, Queue = 3, Dummy = 4 };
void put_state_header(std::vector<uint8_t> &out, StateKind kind);
// Checks the tag and the kind (TPT_ERR_INVALID_ARGUMENT); the offset of the rest.
size_t check_state_header(const uint8_t *data, size_t size, StateKind kind);

// Batches of rows of in-memory tensors, in order or reshuffled each pass.
std::unique_ptr<Input> from_tensors(std::vector<at::Tensor> tensors, int64_t batch_size, bool shuffle,
                                    uint64_t seed);

// Batches from a function given the batch width (tensorpack's FeedInput); it
// throws StopTraining at the end.
std::unique_ptr<Input> from_function(std::function<std::vector<at::Tensor>(size_t width)> fn);

// A dataflow of batches read on the training thread (FeedInput) or by a
// background thread into a bounded queue (QueueInput). With `repeat` the
// dataflow is read pass after pass; without, its end ends training.
std::unique_ptr<Input> feed(std::shared_ptr<data::DataFlow> df, bool repeat);
std::unique_ptr<Input> queue(std::shared_ptr<data::DataFlow> df, int64_t capacity, bool repeat);
// Copies the inner input's next batch to `device` ahead of time
// (StagingInput); nullopt: the towers' device (the CPU for now).
std::unique_ptr<Input> staging(std::unique_ptr<Input> inner, std::optional<c10::Device> device);
// Every `count`-th batch of `inner`, starting at the `index`-th (a
// process's share of a distributed job's input). Each next() reads `count`
// batches of the inner input and gives the index-th, so every share's state
// is the same whatever its index (a checkpoint's position fits every rank);
// a pass's last batches that do not make `count` are dropped. Its size is
// the inner's divided by `count`.
std::unique_ptr<Input> shard(std::unique_ptr<Input> inner, int index, int count);
// Zeros of the signature's shapes, free dimensions set to batch_size.
std::unique_ptr<Input> dummy(int64_t batch_size);
// What a dataflow given to a TrainConfig becomes for `n_towers` towers on
// `device` (tensorpack's automatic wrapping).
std::unique_ptr<Input> auto_wrap(std::shared_ptr<data::DataFlow> df, int n_towers, c10::Device device);

}  // namespace tpt::input
