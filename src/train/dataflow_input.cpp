// Inputs fed by dataflows (FeedInput, QueueInput), StagingInput and
// DummyConstantInput.
#include <ATen/ops/zeros.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <exception>
#include <system_error>
#include <thread>

#include "base/error.hpp"
#include "base/queue.hpp"
#include "data/dataflow.hpp"
#include "loop/callback.hpp"
#include "loop/trainer.hpp"
#include "model/model.hpp"
#include "train/input.hpp"

namespace tpt::input {

namespace {

// What ends a pass that yielded nothing, and what a non-repeating input says
// at the end of its pass.
const char *kEmptyPass = "end of data: a pass of the dataflow yielded no batch";
const char *kEndOfPass = "end of data: the dataflow's pass ended (the input does not repeat)";

// An input's state over a dataflow: whether the current pass gave a batch,
// then the dataflow's state.
std::vector<uint8_t> dataflow_input_state(StateKind kind, bool got, const data::DataFlow &df) {
  std::vector<uint8_t> out;
  put_state_header(out, kind);
  data::put_u64(out, got ? 1 : 0);
  std::vector<uint8_t> d = df.get_state();
  out.insert(out.end(), d.begin(), d.end());
  return out;
}

// Restores what dataflow_input_state wrote into `df`; returns `got`.
bool restore_dataflow_input(StateKind kind, const uint8_t *data, size_t size, data::DataFlow &df) {
  size_t at = check_state_header(data, size, kind);
  data::StateReader r(data + at, size - at, "input");
  bool got = r.u64() != 0;
  df.set_state(r.here(), r.left_bytes());
  return got;
}

// The next batch into `b`, going on to the dataflow's next pass at the end
// of one when `repeat`; `got` tracks whether the current pass gave a batch.
// Returns why training ends, or nullptr when `b` holds a batch.
const char *read_batch(data::DataFlow &df, data::Datapoint &b, bool repeat, bool &got) {
  if (df.next(b)) {
    got = true;
    return nullptr;
  }
  if (!got) return kEmptyPass;
  got = false;
  if (!repeat) return kEndOfPass;
  if (!df.next(b)) return kEmptyPass;
  got = true;
  return nullptr;
}

class FeedInput final : public Input {
 public:
  FeedInput(std::shared_ptr<data::DataFlow> df, bool repeat) : df_(std::move(df)), repeat_(repeat) {
    if (!df_) invalid_argument("no dataflow");
    df_->claim("FeedInput");
  }
  ~FeedInput() override {
    df_->stop();
    df_->release();
  }

  void setup() override { df_->reset_state(); }
  void after_train() override { df_->stop(); }
  std::optional<int64_t> size() const override { return df_->size(); }

  std::vector<at::Tensor> next() override {
    if (!df_->was_reset()) df_->reset_state();
    data::Datapoint b;
    if (const char *end = read_batch(*df_, b, repeat_, got_)) throw StopTraining(end);
    return b;
  }

  std::vector<uint8_t> get_state() const override { return dataflow_input_state(StateKind::Feed, got_, *df_); }
  void set_state(const uint8_t *data, size_t size) override {
    got_ = restore_dataflow_input(StateKind::Feed, data, size, *df_);
  }

 private:
  std::shared_ptr<data::DataFlow> df_;
  bool repeat_;
  bool got_ = false;
};

class QueueInput final : public Input {
 public:
  QueueInput(std::shared_ptr<data::DataFlow> df, int64_t capacity, bool repeat)
      : df_(std::move(df)), q_(static_cast<size_t>(capacity < 1 ? 1 : capacity)), repeat_(repeat) {
    if (!df_) invalid_argument("no dataflow");
    if (capacity < 1) invalid_argument("the queue's capacity must be >= 1, got " + std::to_string(capacity));
    df_->claim("QueueInput");
  }
  ~QueueInput() override {
    stop();
    df_->release();
  }

  void setup() override { df_->reset_state(); }
  void before_train() override { start(); }
  void after_train() override { stop(); }
  std::optional<int64_t> size() const override { return df_->size(); }

  std::vector<at::Tensor> next() override {
    if (error_) std::rethrow_exception(error_);
    if (!thread_.joinable()) start();
    fill_ = static_cast<double>(q_.size());
    have_fill_ = true;
    Item it;
    if (!q_.pop(it)) fail(TPT_ERR_STATE, "QueueInput: the queue was closed");
    if (it.error) {
      error_ = it.error;
      std::rethrow_exception(error_);
    }
    if (it.end) {
      error_ = std::make_exception_ptr(StopTraining(it.reason));
      std::rethrow_exception(error_);
    }
    last_ = std::move(it.state);
    return std::move(it.batch);
  }

  void after_step(Trainer &t) override {
    // tensorpack's QueueInput summarises the queue's size with decay 0.5.
    if (have_fill_) t.monitors().add_moving_summary("QueueInput/queue_size", fill_, 0.5);
  }

  // The state that came with the last batch given (the thread reads ahead);
  // before the thread starts, the dataflow's.
  std::vector<uint8_t> get_state() const override {
    if (!last_.empty()) return last_;
    return dataflow_input_state(StateKind::Queue, got_, *df_);
  }
  void set_state(const uint8_t *data, size_t size) override {
    if (thread_.joinable()) fail(TPT_ERR_STATE, "QueueInput: set_state while its thread runs");
    got_ = restore_dataflow_input(StateKind::Queue, data, size, *df_);
    last_.clear();
  }

 private:
  struct Item {
    data::Datapoint batch;
    bool end = false;
    std::string reason;
    std::exception_ptr error;
    std::vector<uint8_t> state;  // the input's state after this batch
  };

  void start() {
    if (thread_.joinable()) return;
    if (!df_->was_reset()) df_->reset_state();
    q_.reset();
    error_ = nullptr;
    last_ = dataflow_input_state(StateKind::Queue, got_, *df_);  // before the thread reads ahead
    try {
      thread_ = std::thread([this] { produce(); });
    } catch (const std::system_error &e) {
      fail(TPT_ERR_INTERNAL, std::string("cannot start the queue input's thread: ") + e.what());
    }
  }

  void stop() {
    q_.close();
    if (thread_.joinable()) thread_.join();
    df_->stop();
  }

  void produce() {
    try {
      bool got = got_;  // the thread's copy; got_ is the consumer's (restored or false)
      for (;;) {
        Item it;
        if (const char *end = read_batch(*df_, it.batch, repeat_, got)) {
          it.end = true;
          it.reason = end;
          q_.push(std::move(it));
          return;
        }
        it.state = dataflow_input_state(StateKind::Queue, got, *df_);
        if (!q_.push(std::move(it))) return;
      }
    } catch (...) {
      Item it;
      it.error = std::current_exception();
      q_.push(std::move(it));
    }
  }

  std::shared_ptr<data::DataFlow> df_;
  data::BoundedQueue<Item> q_;
  bool repeat_;
  std::thread thread_;
  std::exception_ptr error_;
  double fill_ = 0;  // the queue's fill when the last batch was taken
  bool have_fill_ = false;
  bool got_ = false;            // restored: whether the pass under way gave a batch
  std::vector<uint8_t> last_;  // consumer side: the state that came with the last batch
};

// On the CPU a pass-through. On an accelerator the next batch is copied on a
// side stream while the current one is used; an event orders the two
// (device-generic c10 streams and events: CUDA's when LibTorch has CUDA).
class StagingInput final : public Input {
 public:
  StagingInput(std::unique_ptr<Input> inner, std::optional<c10::Device> device)
      : inner_(std::move(inner)), device_(device.value_or(c10::Device(c10::kCPU))) {
    if (!inner_) invalid_argument("no input to stage");
  }

  void set_signature(const std::vector<model::InputSpec> &sig) override { inner_->set_signature(sig); }
  void setup() override {
    inner_->setup();
    if (device_.type() != c10::kCPU) {
      const c10::impl::DeviceGuardImplInterface *impl = c10::impl::getDeviceGuardImpl(device_.type());
      side_ = impl->getStreamFromGlobalPool(device_, /*isHighPriority=*/false);
      event_.emplace(device_.type());
    }
  }
  void before_train() override { inner_->before_train(); }
  void after_step(Trainer &t) override { inner_->after_step(t); }
  void after_train() override {
    staged_.clear();
    inner_->after_train();
  }
  std::optional<int64_t> size() const override { return inner_->size(); }

  // The inner input's state as of the batch handed out (not the one staged).
  std::vector<uint8_t> get_state() const override {
    if (device_.type() == c10::kCPU || !given_) return inner_->get_state();
    if (!given_state_) std::rethrow_exception(given_state_error_);
    return *given_state_;
  }
  void set_state(const uint8_t *data, size_t size) override { inner_->set_state(data, size); }

  std::vector<at::Tensor> next() override {
    if (device_.type() == c10::kCPU) return inner_->next();
    if (stop_) std::rethrow_exception(stop_);
    if (staged_.empty()) stage();
    if (stop_ && staged_.empty()) std::rethrow_exception(stop_);
    const c10::Stream current = c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_);
    event_->block(current);
    std::vector<at::Tensor> batch = std::move(staged_);
    staged_.clear();
    given_ = true;
    given_state_ = std::move(staged_state_);
    given_state_error_ = staged_state_error_;
    // The batch was allocated on the side stream and is used on this one.
    for (auto &t : batch) t.record_stream(current);
    stage();
    return batch;
  }

 private:
  void stage() {
    std::vector<at::Tensor> b;
    try {
      b = inner_->next();
    } catch (const StopTraining &) {
      stop_ = std::current_exception();  // hand out what is staged first
      return;
    }
    staged_state_.reset();
    staged_state_error_ = nullptr;
    try {
      staged_state_ = inner_->get_state();
    } catch (...) {  // an input without a state: get_state says so when asked
      staged_state_error_ = std::current_exception();
    }
    c10::StreamGuard guard(*side_);
    for (auto &t : b) t = t.to(device_, /*non_blocking=*/true);
    event_->record(*side_);
    staged_ = std::move(b);
  }

  std::unique_ptr<Input> inner_;
  c10::Device device_;
  std::optional<c10::Stream> side_;
  std::optional<c10::Event> event_;
  std::vector<at::Tensor> staged_;
  std::exception_ptr stop_;
  // The inner input's state after the staged batch, and after the batch given.
  std::optional<std::vector<uint8_t>> staged_state_, given_state_;
  std::exception_ptr staged_state_error_, given_state_error_;
  bool given_ = false;
};

class ShardInput final : public Input {
 public:
  ShardInput(std::unique_ptr<Input> inner, int index, int count) : inner_(std::move(inner)), index_(index), count_(count) {
    if (!inner_) invalid_argument("no input to shard");
    if (count < 1 || index < 0 || index >= count)
      invalid_argument("shard " + std::to_string(index) + " of " + std::to_string(count) +
                       ": the index must be from 0 to count - 1");
  }
  void set_signature(const std::vector<model::InputSpec> &sig) override { inner_->set_signature(sig); }
  void setup() override { inner_->setup(); }
  void before_train() override { inner_->before_train(); }
  void after_step(Trainer &t) override { inner_->after_step(t); }
  void after_train() override { inner_->after_train(); }
  std::optional<int64_t> size() const override {
    std::optional<int64_t> n = inner_->size();
    if (n) *n /= count_;
    return n;
  }
  std::vector<uint8_t> get_state() const override { return inner_->get_state(); }
  void set_state(const uint8_t *data, size_t size) override { inner_->set_state(data, size); }
  // The group's batches before and after this share's are read and dropped
  // (an end of data inside a group ends it, as for every other share).
  std::vector<at::Tensor> next() override {
    std::vector<at::Tensor> mine;
    for (int i = 0; i < count_; ++i) {
      std::vector<at::Tensor> b = inner_->next();
      if (i == index_) mine = std::move(b);
    }
    return mine;
  }

 private:
  std::unique_ptr<Input> inner_;
  int index_, count_;
};

class DummyInput final : public Input {
 public:
  explicit DummyInput(int64_t batch) : batch_(batch) {
    if (batch_ < 1) invalid_argument("batch_size must be >= 1, got " + std::to_string(batch_));
  }
  void set_signature(const std::vector<model::InputSpec> &sig) override {
    tensors_.clear();
    for (const auto &s : sig) {
      std::vector<int64_t> shape = s.shape;
      for (auto &d : shape)
        if (d < 0) d = batch_;
      tensors_.push_back(at::zeros(shape, at::TensorOptions().dtype(s.dtype)));
    }
  }
  std::vector<at::Tensor> next() override { return tensors_; }
  std::vector<uint8_t> get_state() const override {
    std::vector<uint8_t> out;
    put_state_header(out, StateKind::Dummy);
    return out;
  }
  void set_state(const uint8_t *data, size_t size) override {
    if (check_state_header(data, size, StateKind::Dummy) != size)
      invalid_argument("not a state of this input: it has bytes too many");
  }

 private:
  int64_t batch_;
  std::vector<at::Tensor> tensors_;
};

}  // namespace

std::unique_ptr<Input> feed(std::shared_ptr<data::DataFlow> df, bool repeat) {
  return std::make_unique<FeedInput>(std::move(df), repeat);
}

std::unique_ptr<Input> queue(std::shared_ptr<data::DataFlow> df, int64_t capacity, bool repeat) {
  return std::make_unique<QueueInput>(std::move(df), capacity, repeat);
}

std::unique_ptr<Input> staging(std::unique_ptr<Input> inner, std::optional<c10::Device> device) {
  return std::make_unique<StagingInput>(std::move(inner), device);
}

std::unique_ptr<Input> shard(std::unique_ptr<Input> inner, int index, int count) {
  if (count == 1) return inner;
  return std::make_unique<ShardInput>(std::move(inner), index, count);
}

std::unique_ptr<Input> dummy(int64_t batch_size) { return std::make_unique<DummyInput>(batch_size); }

std::unique_ptr<Input> auto_wrap(std::shared_ptr<data::DataFlow> df, int n_towers, c10::Device device) {
  std::unique_ptr<Input> in = queue(std::move(df), 50, true);
  if (n_towers > 1 || device.type() != c10::kCPU) in = staging(std::move(in), device);
  return in;
}

}  // namespace tpt::input
