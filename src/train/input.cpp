#include "train/input.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randperm.h>

#include <cstring>

#include "base/error.hpp"
#include "data/dataflow.hpp"
#include "model/model.hpp"

namespace tpt::input {

namespace {
constexpr char kInputStateMagic[8] = {'T', 'P', 'T', 'I', 'N', 'P', '0', '1'};
const char *kind_name(uint64_t k) {
  switch (k) {
    case 1: return "tensor input";
    case 2: return "feed input";
    case 3: return "queue input";
    case 4: return "dummy input";
    default: return "unknown input";
  }
}
}  // namespace

void put_state_header(std::vector<uint8_t> &out, StateKind kind) {
  out.insert(out.end(), kInputStateMagic, kInputStateMagic + 8);
  data::put_u64(out, static_cast<uint64_t>(kind));
}

size_t check_state_header(const uint8_t *data, size_t size, StateKind kind) {
  if (size < 16 || std::memcmp(data, kInputStateMagic, 8) != 0)
    invalid_argument("not a state of this input: it does not start with an input state's tag");
  data::StateReader r(data + 8, 8, "input");
  uint64_t k = r.u64();
  if (k != static_cast<uint64_t>(kind))
    invalid_argument(std::string("not a state of this input: it is a state of a ") + kind_name(k) + ", this is a " +
                     kind_name(static_cast<uint64_t>(kind)));
  return 16;
}

std::vector<uint8_t> Input::get_state() const {
  fail(TPT_ERR_UNSUPPORTED, "this input cannot save where it is (a feed callback has no position)");
}

void Input::set_state(const uint8_t *, size_t) {
  fail(TPT_ERR_UNSUPPORTED, "this input cannot be restored (a feed callback has no position)");
}

namespace {

class TensorInput final : public Input {
 public:
  TensorInput(std::vector<at::Tensor> tensors, int64_t batch, bool shuffle, uint64_t seed)
      : tensors_(std::move(tensors)), batch_(batch), shuffle_(shuffle),
        gen_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
    if (tensors_.empty()) invalid_argument("no tensors given");
    if (batch_ < 1) invalid_argument("batch_size must be >= 1, got " + std::to_string(batch_));
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (!tensors_[i].defined() || tensors_[i].dim() < 1)
        invalid_argument("tensors[" + std::to_string(i) + "] needs at least one dimension (the rows)");
      if (tensors_[i].size(0) != tensors_[0].size(0))
        invalid_argument("tensors[" + std::to_string(i) + "] has " + std::to_string(tensors_[i].size(0)) +
                         " rows, tensors[0] has " + std::to_string(tensors_[0].size(0)));
    }
    rows_ = tensors_[0].size(0);
    if (rows_ < batch_)
      invalid_argument("batch_size " + std::to_string(batch_) + " is larger than the " + std::to_string(rows_) +
                       " rows of the data");
  }

  std::vector<at::Tensor> next() override {
    if (!started_ || pos_ + batch_ > rows_) new_pass();
    std::vector<at::Tensor> out;
    out.reserve(tensors_.size());
    if (shuffle_) {
      at::Tensor idx = order_.narrow(0, pos_, batch_);
      for (const auto &t : tensors_) out.push_back(t.index_select(0, idx));
    } else {  // in order: views of the rows, no copy
      for (const auto &t : tensors_) out.push_back(t.narrow(0, pos_, batch_));
    }
    pos_ += batch_;
    return out;
  }

  std::optional<int64_t> size() const override { return rows_ / batch_; }

  // The position, and the generator: in a shuffled pass as it was before
  // the pass's order was drawn (the order is drawn again from it), else as
  // it is (the next pass draws from it).
  std::vector<uint8_t> get_state() const override {
    std::vector<uint8_t> out;
    put_state_header(out, StateKind::Tensors);
    data::put_u64(out, started_ ? 1 : 0);
    data::put_u64(out, static_cast<uint64_t>(pos_));
    at::Tensor g = started_ && shuffle_ ? pass_gen_ : gen_.get_state();
    data::put_u64(out, static_cast<uint64_t>(g.numel()));
    out.insert(out.end(), g.data_ptr<uint8_t>(), g.data_ptr<uint8_t>() + g.numel());
    return out;
  }
  void set_state(const uint8_t *data, size_t size) override {
    size_t at = check_state_header(data, size, StateKind::Tensors);
    data::StateReader r(data + at, size - at, "input");
    bool started = r.u64() != 0;
    uint64_t pos = r.u64(), n = r.u64();
    data::StateReader g = r.sub(static_cast<size_t>(n));
    if (!r.done()) invalid_argument("not a state of this input: it has bytes too many");
    if (pos > static_cast<uint64_t>(rows_)) invalid_argument("not a state of this input: its position is past the rows");
    at::Tensor gen_state = at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kByte));
    if (n > 0) std::memcpy(gen_state.data_ptr<uint8_t>(), g.here(), n);
    at::Generator probe = at::make_generator<at::CPUGeneratorImpl>(0);
    try {
      probe.set_state(gen_state);
    } catch (const std::exception &e) {
      invalid_argument(std::string("not a state of this input: its generator state is damaged (") + e.what() + ")");
    }
    started_ = started;
    pos_ = static_cast<int64_t>(pos);
    gen_.set_state(gen_state);
    if (started_ && shuffle_) {
      pass_gen_ = gen_state;
      order_ = at::randperm(rows_, gen_, at::TensorOptions().dtype(at::kLong));
    }
  }

 private:
  void new_pass() {
    if (shuffle_) {
      pass_gen_ = gen_.get_state();
      order_ = at::randperm(rows_, gen_, at::TensorOptions().dtype(at::kLong));
    }
    pos_ = 0;
    started_ = true;
  }

  std::vector<at::Tensor> tensors_;
  int64_t batch_;
  bool shuffle_;
  at::Generator gen_;
  int64_t rows_ = 0, pos_ = 0;
  bool started_ = false;
  at::Tensor order_;
  at::Tensor pass_gen_;  // the generator's state before this pass's order (u8; empty in order)
};

class FunctionInput final : public Input {
 public:
  explicit FunctionInput(std::function<std::vector<at::Tensor>(size_t)> fn) : fn_(std::move(fn)) {}
  std::vector<at::Tensor> next() override { return fn_(width_); }
  void set_signature(const std::vector<model::InputSpec> &sig) override { width_ = sig.size(); }

 private:
  std::function<std::vector<at::Tensor>(size_t)> fn_;
  size_t width_ = 0;
};

}  // namespace

std::unique_ptr<Input> from_tensors(std::vector<at::Tensor> tensors, int64_t batch_size, bool shuffle, uint64_t seed) {
  return std::make_unique<TensorInput>(std::move(tensors), batch_size, shuffle, seed);
}

std::unique_ptr<Input> from_function(std::function<std::vector<at::Tensor>(size_t)> fn) {
  return std::make_unique<FunctionInput>(std::move(fn));
}

}  // namespace tpt::input
