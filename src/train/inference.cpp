// tensorpack's InferenceRunner and its inferencers.
#include "train/inference.hpp"

#include <ATen/core/Tensor.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <exception>
#include <map>

#include "base/error.hpp"
#include "base/tower_threads.hpp"
#include "data/dataflow.hpp"
#include "loop/trainer.hpp"
#include "model/model.hpp"

namespace tpt {

namespace {

// A per-batch output as (sum over rows, rows it covers): one element is the
// batch's mean, one element per row is summed.
double row_sum(const at::Tensor &o, int64_t rows, const std::string &who, const std::string &output) {
  if (o.numel() == 1) return o.item<double>() * static_cast<double>(rows);
  if (o.numel() == rows) return o.to(at::kDouble).sum().item<double>();
  invalid_argument(who + ": the output \"" + output + "\" has " + std::to_string(o.numel()) +
                   " elements for a batch of " + std::to_string(rows) + " rows (1 or one per row expected)");
}

class ScalarStats final : public Inferencer {
 public:
  ScalarStats(std::vector<std::string> names, std::string prefix) : names_(std::move(names)), prefix_(std::move(prefix)) {}
  std::string name() const override { return "ScalarStats"; }
  const std::vector<std::string> &outputs() const override { return names_; }
  void before() override {
    sum_.assign(names_.size(), 0.0);
    rows_ = 0;
  }
  void on_outputs(const std::vector<at::Tensor> &outs, int64_t rows) override {
    for (size_t i = 0; i < names_.size(); ++i) sum_[i] += row_sum(outs[i], rows, name(), names_[i]);
    rows_ += static_cast<double>(rows);
  }
  void after(Trainer &t) override {
    if (rows_ <= 0) return;
    for (size_t i = 0; i < names_.size(); ++i)
      t.monitors().put_scalar(prefix_.empty() ? names_[i] : prefix_ + "_" + names_[i], sum_[i] / rows_);
  }

 private:
  std::vector<std::string> names_;
  std::string prefix_;
  std::vector<double> sum_;
  double rows_ = 0;
};

class ClassificationError final : public Inferencer {
 public:
  ClassificationError(std::string wrong, std::string summary) : out_{std::move(wrong)}, summary_(std::move(summary)) {}
  std::string name() const override { return "ClassificationError"; }
  const std::vector<std::string> &outputs() const override { return out_; }
  void before() override { wrong_ = rows_ = 0; }
  void on_outputs(const std::vector<at::Tensor> &outs, int64_t rows) override {
    const at::Tensor &w = outs[0];
    if (w.numel() != rows)
      invalid_argument(name() + ": the output \"" + out_[0] + "\" has " + std::to_string(w.numel()) +
                       " elements for a batch of " + std::to_string(rows) + " rows (one 0/1 value per row expected)");
    wrong_ += w.to(at::kDouble).sum().item<double>();
    rows_ += static_cast<double>(rows);
  }
  void after(Trainer &t) override {
    if (rows_ > 0) t.monitors().put_scalar(summary_, wrong_ / rows_);
  }

 private:
  std::vector<std::string> out_;
  std::string summary_;
  double wrong_ = 0, rows_ = 0;
};

class InferenceRunner final : public Callback {
 public:
  InferenceRunner(std::shared_ptr<model::Model> model, std::shared_ptr<data::DataFlow> df,
                  std::vector<std::unique_ptr<Inferencer>> infs, int towers)
      : Callback(towers > 1 ? "DataParallelInferenceRunner" : "InferenceRunner", true), model_(std::move(model)),
        df_(std::move(df)), infs_(std::move(infs)), towers_(towers) {
    // One inference per batch for every inferencer: the union of their
    // outputs, and where each finds its own.
    std::map<std::string, size_t> at;
    for (const auto &inf : infs_) {
      std::vector<size_t> idx;
      for (const std::string &o : inf->outputs()) {
        auto it = at.find(o);
        if (it == at.end()) {
          it = at.emplace(o, names_.size()).first;
          names_.push_back(o);
        }
        idx.push_back(it->second);
      }
      index_.push_back(std::move(idx));
    }
    df_->claim("InferenceRunner");
  }
  ~InferenceRunner() override {
    threads_.stop();
    df_->stop();
    df_->release();
  }
  uint32_t events() const override { return TPT_EVENT_BEFORE_TRAIN | TPT_EVENT_TRIGGER | TPT_EVENT_AFTER_TRAIN; }
  void on_event(Trainer &t, tpt_event e, const Record *) override {
    if (e == TPT_EVENT_BEFORE_TRAIN) {
      df_->reset_state();  // the towers' threads start with the first pass (run)
    } else if (e == TPT_EVENT_AFTER_TRAIN) {
      threads_.stop();
      df_->stop();
    } else {
      run(t);
    }
  }

 private:
  void run(Trainer &t) {
    const tpt_precision precision = t.config().precision;  // the training's arithmetic
    if (!df_->was_reset()) df_->reset_state();
    if (!complete_) df_->restart();  // a run that failed half-way starts over
    complete_ = false;
    for (auto &inf : infs_) inf->before();
    const int n = towers_ > 1 ? towers_ : 1;
    if (n > 1 && !threads_.running()) threads_.start(n, std::max(1, at::get_num_threads() / n));
    std::vector<data::Datapoint> batches(static_cast<size_t>(n));
    std::vector<std::vector<at::Tensor>> outs(static_cast<size_t>(n));
    std::vector<at::Tensor> mine;
    bool more = true;
    for (int64_t first = 0; more; first += n) {
      // Errors say they came from the runner's dataflow and which batch
      // (a host callback's own status goes back unchanged).
      int64_t k = first;
      auto where = [&](const std::string &what) {
        return name() + ": batch " + std::to_string(k) + " of its dataflow: " + what;
      };
      try {
        int got = 0;  // up to one batch per tower
        for (; got < n; ++got, ++k) {
          if (!df_->next(batches[static_cast<size_t>(got)])) {
            more = false;
            break;
          }
          const data::Datapoint &b = batches[static_cast<size_t>(got)];
          if (b.empty() || b[0].dim() < 1) invalid_argument("a batch needs a first dimension (rows)");
        }
        k = first;
        if (!names_.empty()) {
          if (n == 1) {
            if (got == 1) outs[0] = model_->infer(batches[0], names_, "InferenceTower", precision);
          } else {
            // Each tower's error is kept, so the lowest one is reported
            // with its own batch's number.
            std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
            threads_.run([&](int tower) {
              if (tower >= got) return;
              try {
                outs[static_cast<size_t>(tower)] =
                    model_->infer(batches[static_cast<size_t>(tower)], names_, "InferenceTower" + std::to_string(tower),
                                  precision);
              } catch (...) {
                errors[static_cast<size_t>(tower)] = std::current_exception();
              }
            });
            for (int tower = 0; tower < got; ++tower) {
              if (!errors[static_cast<size_t>(tower)]) continue;
              k = first + tower;
              std::rethrow_exception(errors[static_cast<size_t>(tower)]);
            }
          }
        }
        for (int b = 0; b < got; ++b, ++k) {
          const int64_t rows = batches[static_cast<size_t>(b)][0].size(0);
          for (size_t i = 0; i < infs_.size(); ++i) {
            mine.clear();
            for (size_t j : index_[i]) mine.push_back(outs[static_cast<size_t>(b)][j]);
            infs_[i]->on_outputs(mine, rows);
          }
        }
      } catch (const Error &e) {
        if (e.passthrough()) throw;
        throw Error(e.code(), where(e.what()));
      } catch (const c10::Error &e) {
        throw Error(TPT_ERR_BACKEND, where(e.what_without_backtrace()));
      }
    }
    complete_ = true;
    for (auto &inf : infs_) inf->after(t);
  }

  std::shared_ptr<model::Model> model_;
  std::shared_ptr<data::DataFlow> df_;
  std::vector<std::unique_ptr<Inferencer>> infs_;
  std::vector<std::string> names_;          // the outputs inferred per batch
  std::vector<std::vector<size_t>> index_;  // per inferencer, its outputs in names_
  bool complete_ = true;
  int towers_;
  TowerThreads threads_;
};

}  // namespace

std::unique_ptr<Inferencer> make_scalar_stats(std::vector<std::string> names, std::string prefix) {
  if (names.empty()) invalid_argument("ScalarStats needs at least one output name");
  return std::make_unique<ScalarStats>(std::move(names), std::move(prefix));
}

std::unique_ptr<Inferencer> make_classification_error(std::string wrong, std::string summary) {
  return std::make_unique<ClassificationError>(std::move(wrong), std::move(summary));
}

std::unique_ptr<Callback> make_inference_runner(std::shared_ptr<model::Model> model, std::shared_ptr<data::DataFlow> df,
                                                std::vector<std::unique_ptr<Inferencer>> inferencers, int towers) {
  if (inferencers.empty()) invalid_argument("an InferenceRunner needs at least one inferencer");
  if (towers < 1 || towers > 256)
    invalid_argument("n_towers is " + std::to_string(towers) + ": it must be in [1, 256]");
  return std::make_unique<InferenceRunner>(std::move(model), std::move(df), std::move(inferencers), towers);
}

}  // namespace tpt
