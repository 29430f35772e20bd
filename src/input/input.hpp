// Input sources: what gives the towers their batches. The DataFlow library
// and the prefetching sources (QueueInput, StagingInput) will add kinds.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace tpt::input {

class Input {
 public:
  virtual ~Input() = default;
  // The next batch, one tensor per input of the signature. Throws
  // tpt::StopTraining at the end of the data.
  virtual std::vector<at::Tensor> next() = 0;
  // Batches per pass over the data, when known.
  virtual std::optional<int64_t> size() const { return std::nullopt; }
  // Tells the input how many tensors each batch has (the signature's width),
  // before the first next().
  virtual void set_width(size_t) {}
};

// Batches of rows of in-memory tensors, in order or reshuffled each pass.
std::unique_ptr<Input> from_tensors(std::vector<at::Tensor> tensors, int64_t batch_size, bool shuffle,
                                    uint64_t seed);

// Batches from a function given the batch width (tensorpack's FeedInput); it
// throws StopTraining at the end.
std::unique_ptr<Input> from_function(std::function<std::vector<at::Tensor>(size_t width)> fn);

}  // namespace tpt::input
