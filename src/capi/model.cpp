// Models: tower functions, variables, TorchScript models, train ops, restoring
// variables (include/tptrain/model.h).
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/GradMode.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "capi/args.hpp"
#include "capi/model_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "base/optimizer_state.hpp"
#include "model/dtype.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "model/restore.hpp"
#include "model/torchscript.hpp"

using tpt::capi::check_options_version;
using tpt::capi::copy_text;
using tpt::capi::guard;
using tpt::capi::live;
using tpt::capi::model_arg;
using tpt::capi::name_arg;
using tpt::capi::optional_string;
using tpt::capi::path_arg;
using tpt::capi::raise_status;
using tpt::capi::require;
using tpt::capi::tensor_arg;
using tpt::capi::tensors_arg;
using tpt::capi::UserData;
using tpt::capi::variable_options_arg;

namespace {

// Borrowed tensor handles for the duration of a host call.
struct BorrowedTensors {  // inline for the usual handful of inputs: this runs every step
  c10::SmallVector<tpt_tensor, 8> handles;
  c10::SmallVector<const tpt_tensor *, 8> pointers;
  explicit BorrowedTensors(const std::vector<at::Tensor> &ts) {
    handles.reserve(ts.size());
    for (const auto &t : ts) handles.emplace_back(t, tpt_tensor::Borrow{});
    for (const auto &h : handles) pointers.push_back(&h);
  }
};

std::vector<tpt::model::InputSpec> signature_arg(const tpt_input_spec *inputs, size_t n_inputs) {
  if (n_inputs > 0) require(inputs, "inputs");
  std::vector<tpt::model::InputSpec> specs;
  for (size_t i = 0; i < n_inputs; ++i) {
    std::string where = "inputs[" + std::to_string(i) + "]";
    const tpt_input_spec &in = inputs[i];
    if (!in.name || !*in.name) tpt::invalid_argument(where + ".name is NULL or empty");
    auto type = tpt::scalar_type_of(in.dtype);
    if (!type) tpt::invalid_argument(where + ".dtype " + std::to_string(tpt::enum_int(in.dtype)) + " is not a tpt_dtype");
    if (in.ndim > 0 && !in.shape) tpt::invalid_argument(where + ".shape is NULL");
    std::vector<int64_t> shape(in.shape, in.shape + in.ndim);
    for (int64_t d : shape)
      if (d < 1 && d != -1)
        tpt::invalid_argument(where + ".shape " + tpt::shape_text(shape) + ": dimensions are >= 1 or -1");
    for (const auto &s : specs)
      if (s.name == in.name) tpt::invalid_argument(where + ".name '" + in.name + "' is used twice");
    specs.push_back({in.name, *type, shape});
  }
  return specs;
}

}  // namespace

tpt_status *tpt_model_new(tpt_model **out, const tpt_input_spec *inputs, size_t n_inputs, tpt_tower_fn tower_fn,
                          void *user_data, void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(reinterpret_cast<void *>(tower_fn), "tower_fn");
    std::vector<tpt::model::InputSpec> specs = signature_arg(inputs, n_inputs);
    tpt::model::TowerFn fn = [tower_fn, ud](tpt::model::Tower &tower, const std::vector<at::Tensor> &batch) {
      tpt_tower h{kTowerMagic, &tower};
      BorrowedTensors b(batch);
      // The tensors the tower function makes go when it returns.
      tpt_status *st = tpt::capi::scoped_call(
          TPT_SCOPE_FREE, [&] { return tower_fn(&h, b.pointers.data(), b.pointers.size(), ud->data); });
      h.magic = 0;
      raise_status(st);
    };
    auto *m = new tpt_model;
    m->model = std::make_shared<tpt::model::Model>(std::move(specs), std::move(fn));
    *out = m;
  });
}

tpt_status *tpt_model_from_torchscript(tpt_model **out, const char *path, const tpt_input_spec *inputs,
                                      size_t n_inputs) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::vector<tpt::model::InputSpec> specs = signature_arg(inputs, n_inputs);
    auto model = tpt::model::load_torchscript(require(path, "path"), std::move(specs));
    auto *m = new tpt_model;
    m->model = std::move(model);
    *out = m;
  });
}

tpt_status *tpt_model_from_torchscript_source(tpt_model **out, const char *source, const tpt_torchscript_param *params,
                                             size_t n_params, const tpt_input_spec *inputs, size_t n_inputs) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(source, "source");
    if (n_params > 0) require(params, "params");
    std::vector<tpt::model::TorchScriptParam> ps;
    for (size_t i = 0; i < n_params; ++i) {
      std::string where = "params[" + std::to_string(i) + "]";
      const tpt_torchscript_param &p = params[i];
      if (!p.name) tpt::invalid_argument(where + ".name is NULL");
      if (p.ndim > 0 && !p.shape) tpt::invalid_argument(where + ".shape is NULL");
      ps.push_back({p.name, std::vector<int64_t>(p.shape, p.shape + p.ndim),
                    variable_options_arg(p.options, where + ".options")});
    }
    std::vector<tpt::model::InputSpec> specs = signature_arg(inputs, n_inputs);
    auto model = tpt::model::compile_torchscript(source, ps, std::move(specs));
    auto *m = new tpt_model;
    m->model = std::move(model);
    *out = m;
  });
}

tpt_status *tpt_model_save_torchscript(const tpt_model *model, const char *path) {
  return guard(__func__, [&] {
    const tpt::model::Model &m = model_arg(model);
    require(path, "path");
    if (!m.saver) tpt::fail(TPT_ERR_UNSUPPORTED, "the model was not made from TorchScript; there is no module to save");
    m.saver(path);
  });
}

void tpt_model_free(tpt_model *model) {
  if (model == nullptr || model->magic != kModelMagic || model->lent) return;
  model->magic = 0;
  delete model;
}

tpt_status *tpt_model_build(tpt_model *model) {
  // The reference is held for the call: a tower function that frees the
  // model's handle cannot destroy the model under its own build.
  return guard(__func__, [&] { tpt::capi::model_arg_ptr(model)->build(); });
}

tpt_status *tpt_model_variable(tpt_tensor **out, const tpt_model *model, const char *name) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const tpt::model::Model &m = model_arg(model);
    std::string key = name_arg(name, "name");
    // Inside a tower function: the running tower's variable (its replica's).
    std::optional<tpt::model::Variable> v = m.find_variable(key);
    if (!v)
      tpt::fail(TPT_ERR_NOT_FOUND, "no variable '" + key + "'" + (m.built() ? "" : " (the model is not built yet)"));
    tpt::capi::give(out, v->value);
  });
}

tpt_status *tpt_model_set_variable(tpt_model *model, const char *name, const tpt_tensor *value) {
  return guard(__func__, [&] {
    tpt::model::Model &m = model_arg(model);
    std::string key = name_arg(name, "name");
    m.assign(key, tensor_arg(value, "value"));
  });
}

tpt_status *tpt_model_variable_names(char *buf, size_t size, size_t *needed, const tpt_model *model) {
  return guard(__func__, [&] {
    std::string text;
    for (const auto &v : model_arg(model).variables().all()) text += v.name + "\n";
    copy_text(buf, size, needed, text);
  });
}

tpt_status *tpt_model_variable_list(char ***names, size_t *count, const tpt_model *model) {
  return guard(__func__, [&] {
    require(names, "names");
    require(count, "count");
    *names = nullptr;
    *count = 0;
    const auto vars = model_arg(model).variables().all();
    if (vars.empty()) return;
    // malloc'ed (tpt_strings_free), everything or nothing
    char **out = static_cast<char **>(std::calloc(vars.size(), sizeof(char *)));
    if (!out) throw std::bad_alloc();
    for (size_t i = 0; i < vars.size(); ++i) {
      out[i] = static_cast<char *>(std::malloc(vars[i].name.size() + 1));
      if (!out[i]) {
        tpt_strings_free(out, i);
        throw std::bad_alloc();
      }
      std::memcpy(out[i], vars[i].name.c_str(), vars[i].name.size() + 1);
    }
    *names = out;
    *count = vars.size();
  });
}

tpt_status *tpt_model_infer(tpt_tensor **outputs, tpt_model *model, const tpt_tensor *const *inputs, size_t n_inputs,
                            const char *const *names, size_t n_names) {
  return guard(__func__, [&] {
    if (n_names > 0) require(outputs, "outputs");
    for (size_t i = 0; i < n_names; ++i) outputs[i] = nullptr;
    std::shared_ptr<tpt::model::Model> keep = tpt::capi::model_arg_ptr(model);  // held for the call (see tpt_model_build)
    tpt::model::Model &m = *keep;
    std::vector<at::Tensor> batch = tensors_arg(inputs, n_inputs, "inputs");
    if (n_names > 0) require(names, "names");
    std::vector<std::string> keys;
    for (size_t i = 0; i < n_names; ++i) {
      std::string entry = "names[" + std::to_string(i) + "]";
      keys.push_back(name_arg(names[i], entry.c_str()));
    }
    std::vector<at::Tensor> results = m.infer(batch, keys);
    std::vector<std::unique_ptr<tpt_tensor>> made;
    for (auto &r : results) made.push_back(std::make_unique<tpt_tensor>(r));
    for (size_t i = 0; i < made.size(); ++i) outputs[i] = tpt::capi::adopt(made[i].release());
  });
}

tpt_status *tpt_model_set_optimizer(tpt_model *model, tpt_optimizer *optimizer) {
  return guard(__func__, [&] {
    tpt::model::Model &m = model_arg(model);
    m.set_optimizer(live(optimizer, kOptimizerMagic, "optimizer", "tpt_optimizer").optimizer);
  });
}

tpt_status *tpt_model_optimizer_slot(tpt_tensor **out, const tpt_model *model, const char *variable,
                                     const char *slot) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const tpt::model::Model &m = model_arg(model);
    const std::string var = name_arg(variable, "variable"), name = name_arg(slot, "slot");
    if (!m.optimizer()) tpt::fail(TPT_ERR_STATE, "the model has no optimizer (tpt_model_set_optimizer)");
    const std::vector<tpt::model::Variable> vars = m.variables().all();
    std::string trainable;
    bool found = false;
    for (const auto &v : vars)
      if (v.trainable) {
        trainable += (trainable.empty() ? "" : ", ") + v.name;
        found = found || v.name == var;
      }
    if (!found)
      tpt::fail(TPT_ERR_NOT_FOUND, "no trainable variable '" + var + "'" +
                                       (trainable.empty() ? std::string(" (the model is not built yet)")
                                                          : "; the trainable ones: " + trainable));
    const tpt::OptimizerState st = m.optimizer()->state(vars);
    auto slots = st.slots.find(var);
    auto step = st.steps.find(var);
    if (name == "step" && step != st.steps.end()) {
      tpt::capi::give(out, at::scalar_tensor(step->second, at::kLong));
      return;
    }
    if (slots != st.slots.end())
      if (auto it = slots->second.find(name); it != slots->second.end()) {
        tpt::capi::give(out, it->second.clone());
        return;
      }
    std::string have;
    if (slots != st.slots.end())
      for (const auto &kv : slots->second) have += (have.empty() ? "" : ", ") + kv.first;
    if (step != st.steps.end()) have += (have.empty() ? "" : ", ") + std::string("step");
    tpt::fail(TPT_ERR_NOT_FOUND, "the " + st.kind + " optimizer keeps no '" + name + "' for '" + var + "'" +
                                     (have.empty() ? std::string(" (it has not updated it yet)") : "; it keeps: " + have));
  });
}

tpt_status *tpt_model_add_train_op(tpt_model *model, const tpt_train_op *op) {
  return guard(__func__, [&] {
    tpt::model::Model &m = model_arg(model);
    require(op, "op");
    tpt::capi::check_options_version(op->version, TPT_TRAIN_OP_VERSION, "op", "TPT_TRAIN_OP_INIT");
    tpt::model::TrainOp t;
    t.name = name_arg(op->name, "op->name");
    if (op->cost) t.cost = name_arg(op->cost, "op->cost");
    if (op->scope) t.scope = op->scope;
    if (op->optimizer) {
      t.optimizer = live(op->optimizer, kOptimizerMagic, "op->optimizer", "tpt_optimizer").optimizer;
      if (t.optimizer == m.optimizer())
        tpt::invalid_argument("op->optimizer is the model's, whose slots are the default step's: give the op an "
                              "optimizer of its own, or NULL (a copy of the model's)");
      for (const auto &other : m.train_ops())
        if (other.optimizer == t.optimizer)
          tpt::invalid_argument("op->optimizer is train op '" + other.name + "''s already: give each op its own");
    }
    m.add_train_op(std::move(t));
  });
}

tpt_status *tpt_model_restore(size_t *n_restored, tpt_model *model, const char *path,
                              const tpt_restore_options *options) {
  return guard(__func__, [&] {
    if (n_restored) *n_restored = 0;
    std::shared_ptr<tpt::model::Model> m = tpt::capi::model_arg_ptr(model);
    std::string p = path_arg(path, "path");
    tpt::RestoreOptions ro;
    if (options) {
      check_options_version(options->version, TPT_RESTORE_OPTIONS_VERSION, "options", "TPT_RESTORE_OPTIONS_INIT");
      ro.ignore_missing = options->ignore_missing != 0;
      ro.ignore_unexpected = options->ignore_unexpected != 0;
      ro.ignore_shape_mismatch = options->ignore_shape_mismatch != 0;
      ro.prefix = optional_string(options->prefix);
      if (options->n_name_map > 0) require(options->name_map, "options->name_map");
      if (options->n_name_map > (size_t(1) << 24)) tpt::invalid_argument("options->n_name_map is too large");
      for (size_t i = 0; i < options->n_name_map; ++i) {
        const char *from = options->name_map[2 * i], *to = options->name_map[2 * i + 1];
        if (!from || !to || !*from || !*to)
          tpt::invalid_argument("options->name_map pair " + std::to_string(i) + " has a NULL or empty name");
        ro.name_map[from] = to;
      }
    }
    m->build();  // once: a model not built yet is built first, as tpt_model_infer does
    std::vector<std::string> done = tpt::restore_variables(*m, p, ro);
    if (n_restored) *n_restored = done.size();
  });
}
