#include "input/input.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randperm.h>

#include "core/error.hpp"
#include "model/model.hpp"

namespace tpt::input {

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

 private:
  void new_pass() {
    if (shuffle_) order_ = at::randperm(rows_, gen_, at::TensorOptions().dtype(at::kLong));
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
