// Inference during training: inferencers and runners
// (include/tptrain/inference.h).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/args.hpp"
#include "capi/data_handle.hpp"
#include "capi/model_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "loop/trainer.hpp"
#include "model/restore.hpp"
#include "train/inference.hpp"

using tpt::capi::dataflow_arg;
using tpt::capi::guard;
using tpt::capi::live;
using tpt::capi::raise_status;
using tpt::capi::require;
using tpt::capi::tensors_arg;
using tpt::capi::UserData;
using tpt::data::DataFlowPtr;

tpt_inferencer::~tpt_inferencer() = default;

namespace {

// An inferencer written by the host.
class HostInferencer final : public tpt::Inferencer {
 public:
  HostInferencer(std::string name, std::vector<std::string> outputs, const tpt_inferencer_desc &d,
                 std::unique_ptr<UserData> ud)
      : name_(std::move(name)), outputs_(std::move(outputs)), before_(d.before), on_outputs_(d.on_outputs),
        after_(d.after), ud_(std::move(ud)) {}
  std::string name() const override { return name_; }
  const std::vector<std::string> &outputs() const override { return outputs_; }
  void before() override {
    if (before_) raise_status(tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return before_(ud_->data); }));
  }
  void on_outputs(const std::vector<at::Tensor> &outs, int64_t rows) override {
    // Lent for the call, as a tower function's inputs.
    std::vector<tpt_tensor> hs;
    hs.reserve(outs.size());
    for (const at::Tensor &o : outs) hs.emplace_back(o, tpt_tensor::Borrow{});
    std::vector<const tpt_tensor *> ps;
    for (const tpt_tensor &h : hs) ps.push_back(&h);
    raise_status(tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return on_outputs_(ps.data(), ps.size(), rows, ud_->data); }));
  }
  void after(tpt::Trainer &t) override {
    if (after_)
      raise_status(tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return after_(tpt::capi::handle_of(t), ud_->data); }));
  }

 private:
  std::string name_;
  std::vector<std::string> outputs_;
  decltype(tpt_inferencer_desc::before) before_;
  decltype(tpt_inferencer_desc::on_outputs) on_outputs_;
  decltype(tpt_inferencer_desc::after) after_;
  std::unique_ptr<UserData> ud_;
};

std::vector<std::string> names_arg(const char *const *names, size_t n, const char *arg) {
  if (n > 0) require(names, arg);
  if (n > (size_t(1) << 20)) tpt::invalid_argument(std::string(arg) + ": " + std::to_string(n) + " names is too many");
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string entry = std::string(arg) + "[" + std::to_string(i) + "]";
    out.push_back(tpt::capi::name_arg(names[i], entry.c_str()));
  }
  return out;
}

void give_inferencer(tpt_inferencer **out, std::unique_ptr<tpt::Inferencer> inf) {
  auto *h = new tpt_inferencer;
  h->inferencer = std::move(inf);
  *out = h;
}

tpt_status *make_runner(const char *fn, tpt_callback **out, tpt_model *model, tpt_dataflow *df,
                        tpt_inferencer *const *inferencers, size_t n_inferencers, int32_t n_towers) {
  // The inferencers are taken whatever happens: each live one is moved out
  // first (a dead or repeated handle is an error after that).
  std::vector<std::unique_ptr<tpt::Inferencer>> infs;
  std::string bad;
  if (inferencers && n_inferencers <= (size_t(1) << 20)) {
    for (size_t i = 0; i < n_inferencers; ++i) {
      tpt_inferencer *h = inferencers[i];
      if (h && h->magic == kInferencerMagic) {
        infs.push_back(std::move(h->inferencer));
        h->magic = 0;
        delete h;
      } else if (bad.empty()) {
        bad = "argument 'inferencers[" + std::to_string(i) + "]' is " +
              (h ? "not a live tpt_inferencer (freed, or given to a runner already)" : "NULL");
      }
    }
  }
  return guard(fn, [&] {
    require(out, "out");
    *out = nullptr;
    if (n_inferencers == 0) tpt::invalid_argument("n_inferencers is 0: an InferenceRunner needs an inferencer");
    require(inferencers, "inferencers");
    if (n_inferencers > (size_t(1) << 20)) tpt::invalid_argument("n_inferencers is too large");
    if (!bad.empty()) tpt::invalid_argument(bad);
    std::shared_ptr<tpt::model::Model> m = tpt::capi::model_arg_ptr(model);
    DataFlowPtr d = dataflow_arg(df);
    tpt::capi::give_callback(out, tpt::make_inference_runner(std::move(m), std::move(d), std::move(infs), n_towers));
  });
}

}  // namespace

tpt_status *tpt_inferencer_scalar_stats(tpt_inferencer **out, const char *const *outputs, size_t n_outputs,
                                        const char *prefix) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(outputs, "outputs");
    if (n_outputs == 0) tpt::invalid_argument("n_outputs is 0: ScalarStats needs at least one output");
    give_inferencer(out, tpt::make_scalar_stats(names_arg(outputs, n_outputs, "outputs"),
                                                prefix ? prefix : "validation"));
  });
}

tpt_status *tpt_inferencer_classification_error(tpt_inferencer **out, const char *wrong_output,
                                                const char *summary_name) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::string wrong = wrong_output ? tpt::capi::name_arg(wrong_output, "wrong_output") : "wrong";
    std::string summary = summary_name ? tpt::capi::name_arg(summary_name, "summary_name") : "validation_error";
    give_inferencer(out, tpt::make_classification_error(std::move(wrong), std::move(summary)));
  });
}

tpt_status *tpt_inferencer_new(tpt_inferencer **out, const tpt_inferencer_desc *desc) {
  std::unique_ptr<UserData> ud;
  if (desc) ud = std::make_unique<UserData>(desc->user_data, desc->destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(desc, "desc");
    tpt::capi::check_options_version(desc->version, TPT_INFERENCER_DESC_VERSION, "desc", "TPT_INFERENCER_DESC_INIT");
    require(reinterpret_cast<void *>(desc->on_outputs), "desc->on_outputs");
    std::string name = desc->name && *desc->name ? desc->name : "inferencer";
    std::vector<std::string> outputs = names_arg(desc->outputs, desc->n_outputs, "desc->outputs");
    give_inferencer(out, std::make_unique<HostInferencer>(std::move(name), std::move(outputs), *desc, std::move(ud)));
  });
}

void tpt_inferencer_free(tpt_inferencer *inferencer) {
  if (inferencer == nullptr || inferencer->magic != kInferencerMagic) return;
  inferencer->magic = 0;
  delete inferencer;
}

tpt_status *tpt_inference_runner(tpt_callback **out, tpt_model *model, tpt_dataflow *df,
                                 tpt_inferencer *const *inferencers, size_t n_inferencers) {
  return make_runner(__func__, out, model, df, inferencers, n_inferencers, 1);
}

tpt_status *tpt_inference_runner_data_parallel(tpt_callback **out, tpt_model *model, tpt_dataflow *df,
                                               tpt_inferencer *const *inferencers, size_t n_inferencers,
                                               int32_t n_towers) {
  return make_runner(__func__, out, model, df, inferencers, n_inferencers, n_towers);
}

tpt_status *tpt_inference_runner_new(tpt_callback **out, tpt_model *model, tpt_dataflow *df,
                                     const char *const *outputs, size_t n_outputs) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::shared_ptr<tpt::model::Model> m = tpt::capi::model_arg_ptr(model);
    DataFlowPtr d = dataflow_arg(df);
    require(outputs, "outputs");
    if (n_outputs == 0) tpt::invalid_argument("n_outputs is 0");
    std::vector<std::unique_ptr<tpt::Inferencer>> infs;
    infs.push_back(tpt::make_scalar_stats(names_arg(outputs, n_outputs, "outputs"), "validation"));
    tpt::capi::give_callback(out, tpt::make_inference_runner(std::move(m), std::move(d), std::move(infs)));
  });
}

// ---- predictors (tensorpack's OfflinePredictor)

namespace {
constexpr uint64_t kPredictorMagic = 0x7470745072656469ull;  // "tptPredi"
}

struct tpt_predictor {
  uint64_t magic = kPredictorMagic;
  std::shared_ptr<tpt::model::Model> model;
  std::vector<size_t> given;                    // the signature index of each input run takes
  std::vector<std::vector<int64_t>> left_out;   // per signature input: its zeros' shape past the batch, if left out
  std::vector<bool> is_left_out;
  std::vector<std::string> outputs;
};

namespace {

std::string names_of_inputs(const tpt::model::Model &m) {
  std::string s;
  for (const auto &spec : m.inputs()) s += (s.empty() ? "" : ", ") + spec.name;
  return s;
}

}  // namespace

tpt_status *tpt_predictor_new(tpt_predictor **out, tpt_model *model, const char *const *output_names, size_t n_outputs,
                              const tpt_predictor_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    auto p = std::make_unique<tpt_predictor>();
    p->model = tpt::capi::model_arg_ptr(model);
    tpt::model::Model &m = *p->model;
    if (n_outputs == 0) tpt::invalid_argument("n_outputs is 0: a predictor returns at least one output");
    require(output_names, "output_names");
    p->outputs = names_arg(output_names, n_outputs, "output_names");
    tpt_predictor_options o = TPT_PREDICTOR_OPTIONS_INIT;
    if (options) {
      tpt::capi::check_options_version(options->version, TPT_PREDICTOR_OPTIONS_VERSION, "options",
                                       "TPT_PREDICTOR_OPTIONS_INIT");
      o = *options;
    }
    const auto &specs = m.inputs();
    if (o.n_input_names == 0) {
      for (size_t i = 0; i < specs.size(); ++i) p->given.push_back(i);
    } else {
      require(o.input_names, "options->input_names");
      for (const std::string &name : names_arg(o.input_names, o.n_input_names, "options->input_names")) {
        size_t i = 0;
        while (i < specs.size() && specs[i].name != name) ++i;
        if (i == specs.size())
          tpt::invalid_argument("options->input_names: the model has no input '" + name + "'; its inputs: " +
                                names_of_inputs(m));
        for (size_t j : p->given)
          if (j == i) tpt::invalid_argument("options->input_names names '" + name + "' twice");
        p->given.push_back(i);
      }
    }
    p->is_left_out.assign(specs.size(), true);
    p->left_out.resize(specs.size());
    for (size_t i : p->given) p->is_left_out[i] = false;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (!p->is_left_out[i]) continue;
      const auto &shape = specs[i].shape;
      for (size_t d = 1; d < shape.size(); ++d) {
        if (shape[d] < 0)
          tpt::invalid_argument("the input '" + specs[i].name + "', which the predictor is not given, has an unknown "
                                "dimension " + std::to_string(d) + " (its zeros could not be made): give it in "
                                "options->input_names");
        p->left_out[i].push_back(shape[d]);
      }
      if (shape.empty())
        tpt::invalid_argument("the input '" + specs[i].name + "', which the predictor is not given, has no batch "
                              "dimension: give it in options->input_names");
    }
    m.build();  // once, as tpt_model_infer and tpt_model_restore do
    if (o.checkpoint) tpt::restore_variables(m, tpt::capi::path_arg(o.checkpoint, "options->checkpoint"), {});
    *out = p.release();
  });
}

tpt_status *tpt_predictor_run(tpt_tensor **outputs, const tpt_predictor *predictor, const tpt_tensor *const *inputs,
                              size_t n_inputs) {
  return guard(__func__, [&] {
    require(outputs, "outputs");
    const tpt_predictor &p = live(const_cast<tpt_predictor *>(predictor), kPredictorMagic, "predictor", "tpt_predictor");
    for (size_t i = 0; i < p.outputs.size(); ++i) outputs[i] = nullptr;
    std::shared_ptr<tpt::model::Model> keep = p.model;
    const auto &specs = keep->inputs();
    if (n_inputs != p.given.size()) {
      std::string names;
      for (size_t i : p.given) names += (names.empty() ? "" : ", ") + specs[i].name;
      tpt::invalid_argument("n_inputs is " + std::to_string(n_inputs) + "; the predictor takes " +
                            std::to_string(p.given.size()) + " (" + names + ")");
    }
    std::vector<at::Tensor> given = tensors_arg(inputs, n_inputs, "inputs");
    std::vector<at::Tensor> batch(specs.size());
    for (size_t k = 0; k < p.given.size(); ++k) batch[p.given[k]] = given[k];
    for (size_t i = 0; i < specs.size(); ++i) {
      if (!p.is_left_out[i]) continue;
      // The zeros take the batch size of the first input given.
      if (given.empty() || given[0].dim() == 0)
        tpt::invalid_argument("inputs[0] has no batch dimension to give the inputs left out (" + specs[i].name + ")");
      const int64_t rows = given[0].size(0);
      std::vector<int64_t> shape{specs[i].shape[0] < 0 ? rows : specs[i].shape[0]};
      shape.insert(shape.end(), p.left_out[i].begin(), p.left_out[i].end());
      batch[i] = at::zeros(shape, at::TensorOptions().dtype(specs[i].dtype));
    }
    std::vector<at::Tensor> results = keep->infer(batch, p.outputs);
    std::vector<std::unique_ptr<tpt_tensor>> made;
    for (auto &r : results) made.push_back(std::make_unique<tpt_tensor>(r));
    for (size_t i = 0; i < made.size(); ++i) outputs[i] = tpt::capi::adopt(made[i].release());
  });
}

void tpt_predictor_free(tpt_predictor *predictor) {
  if (predictor == nullptr || predictor->magic != kPredictorMagic) return;
  predictor->magic = 0;
  delete predictor;
}
