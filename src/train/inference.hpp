// tensorpack's InferenceRunner and Inferencers (callbacks/inference_runner.py,
// callbacks/inference.py): one pass of a finite dataflow through the model's
// inference tower, whose outputs the inferencers turn into monitors' scalars.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loop/callback.hpp"

namespace tpt {

namespace model {
class Model;
}
namespace data {
class DataFlow;
}

class Inferencer {
 public:
  virtual ~Inferencer() = default;
  // For errors: "ScalarStats", "ClassificationError" or the host's name.
  virtual std::string name() const = 0;
  // The tower's outputs it needs (on_outputs gets them in this order).
  virtual const std::vector<std::string> &outputs() const = 0;
  virtual void before() = 0;
  // One batch: its outputs and its rows (the first dimension).
  virtual void on_outputs(const std::vector<at::Tensor> &outputs, int64_t rows) = 0;
  // After the pass: put the results as scalars.
  virtual void after(Trainer &trainer) = 0;
};

// ScalarStats: "<prefix>_<name>" (just the name when prefix is empty) is
// the mean over the pass; one element per batch is weighted by its rows, one
// element per row is averaged over rows.
std::unique_ptr<Inferencer> make_scalar_stats(std::vector<std::string> names, std::string prefix);
// ClassificationError: `wrong` has one 0/1 value per row; `summary` is the
// wrong rows over all rows.
std::unique_ptr<Inferencer> make_classification_error(std::string wrong, std::string summary);

// The runner, a chief-only callback: at every TRIGGER, one pass of `df`.
// With towers > 1, tensorpack's DataParallelInferenceRunner: that many
// inference towers ("InferenceTower0", ...) each take a batch at once, on
// threads of their own; the inferencers get the batches in order.
std::unique_ptr<Callback> make_inference_runner(std::shared_ptr<model::Model> model, std::shared_ptr<data::DataFlow> df,
                                                std::vector<std::unique_ptr<Inferencer>> inferencers, int towers = 1);

}  // namespace tpt
