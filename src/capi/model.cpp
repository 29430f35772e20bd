// C API sections "Models", "Optimizers" and "Inputs and the simple trainer".
#include <ATen/core/Tensor.h>
#include <ATen/Context.h>
#include <c10/core/GradMode.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtype.hpp"
#include "input/input.hpp"
#include "model/model.hpp"
#include "data_handle.hpp"
#include "model_handle.hpp"
#include "model/optimizer.hpp"
#include "model/torchscript.hpp"
#include "dist/world.hpp"
#include "parallel/strategy.hpp"
#include "core/hyperparams.hpp"
#include "trainer_handle.hpp"

inline constexpr uint64_t kOptimizerMagic = 0x747074496f707469ull;  // "tptIopti"

struct tpt_optimizer {
  uint64_t magic = kOptimizerMagic;
  std::shared_ptr<tpt::model::Optimizer> optimizer;
};

using tpt::capi::guard;
using tpt::capi::live;
using tpt::capi::model_arg;
using tpt::capi::tower_arg;
using tpt::capi::name_arg;
using tpt::capi::raise_status;
using tpt::capi::require;
using tpt::capi::tensor_arg;
using tpt::capi::UserData;

namespace {

tpt::model::Optimizer &optimizer_arg(const tpt_optimizer *o) {
  return *live(const_cast<tpt_optimizer *>(o), kOptimizerMagic, "optimizer", "tpt_optimizer").optimizer;
}

void copy_text(char *buf, size_t size, size_t *needed, const std::string &text, const char *buf_name = "buf") {
  if (needed) *needed = text.size() + 1;
  require(buf, buf_name);
  if (text.size() + 1 > size)
    tpt::invalid_argument("size is " + std::to_string(size) + " but " + std::to_string(text.size() + 1) +
                          " bytes are needed");
  std::memcpy(buf, text.c_str(), text.size() + 1);
}

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

std::vector<at::Tensor> tensors_arg(const tpt_tensor *const *ts, size_t n, const char *name) {
  if (n > 0) require(ts, name);
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    std::string entry = std::string(name) + "[" + std::to_string(i) + "]";
    out.push_back(tensor_arg(ts[i], entry.c_str()));
  }
  return out;
}

std::vector<tpt::model::InputSpec> signature_arg(const tpt_input_spec *inputs, size_t n_inputs) {
  if (n_inputs > 0) require(inputs, "inputs");
  std::vector<tpt::model::InputSpec> specs;
  for (size_t i = 0; i < n_inputs; ++i) {
    std::string where = "inputs[" + std::to_string(i) + "]";
    const tpt_input_spec &in = inputs[i];
    if (!in.name || !*in.name) tpt::invalid_argument(where + ".name is NULL or empty");
    auto type = tpt::capi::scalar_type_of(in.dtype);
    if (!type) tpt::invalid_argument(where + ".dtype " + std::to_string(static_cast<int>(in.dtype)) + " is not a tpt_dtype");
    if (in.ndim > 0 && !in.shape) tpt::invalid_argument(where + ".shape is NULL");
    std::vector<int64_t> shape(in.shape, in.shape + in.ndim);
    for (int64_t d : shape)
      if (d < 1 && d != -1)
        tpt::invalid_argument(where + ".shape " + tpt::model::shape_text(shape) + ": dimensions are >= 1 or -1");
    for (const auto &s : specs)
      if (s.name == in.name) tpt::invalid_argument(where + ".name '" + in.name + "' is used twice");
    specs.push_back({in.name, *type, shape});
  }
  return specs;
}

// NULL: TPT_VARIABLE_OPTIONS_INIT. `name` names the pointer in messages.
tpt::model::VariableOptions variable_options_arg(const tpt_variable_options *options, const std::string &name) {
  tpt_variable_options o = TPT_VARIABLE_OPTIONS_INIT;
  if (options) {
    if (options->version < 1 || options->version > TPT_VARIABLE_OPTIONS_VERSION)
      tpt::invalid_argument(name + "->version is " + std::to_string(options->version) +
                            " (initialise with TPT_VARIABLE_OPTIONS_INIT)");
    o = *options;
  }
  auto type = tpt::capi::scalar_type_of(o.dtype);
  if (!type) tpt::invalid_argument(name + "->dtype " + std::to_string(static_cast<int>(o.dtype)) + " is not a tpt_dtype");
  tpt::model::VariableOptions vo;
  vo.dtype = *type;
  vo.init = o.init;
  vo.trainable = o.trainable != 0;
  vo.a = o.a;
  vo.b = o.b;
  return vo;
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ models

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

// ------------------------------------------------------------------ towers

tpt_status *tpt_tower_is_training(int32_t *out, const tpt_tower *tower) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tower_arg(tower).is_training();
  });
}

tpt_status *tpt_tower_is_building(int32_t *out, const tpt_tower *tower) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tower_arg(tower).is_building();
  });
}

tpt_status *tpt_tower_index(int32_t *out, const tpt_tower *tower) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tower_arg(tower).index();
  });
}

tpt_status *tpt_tower_name(char *buf, size_t size, const tpt_tower *tower) {
  return guard(__func__, [&] { copy_text(buf, size, nullptr, tower_arg(tower).name()); });
}

tpt_status *tpt_tower_device(char *buf, size_t size, const tpt_tower *tower) {
  return guard(__func__, [&] { copy_text(buf, size, nullptr, tower_arg(tower).device().str()); });
}

tpt_status *tpt_tower_can_create_variables(int32_t *out, const tpt_tower *tower) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = tower_arg(tower).can_create_variables();
  });
}

tpt_status *tpt_tower_set_cost(tpt_tower *tower, const tpt_tensor *cost) {
  return guard(__func__, [&] {
    tpt::model::Tower &t = tower_arg(tower);
    t.set_cost(tensor_arg(cost, "cost"));
  });
}

tpt_status *tpt_tower_set_output(tpt_tower *tower, const char *name, const tpt_tensor *value) {
  return guard(__func__, [&] {
    tpt::model::Tower &t = tower_arg(tower);
    std::string key = name_arg(name, "name");
    t.set_output(key, tensor_arg(value, "value"));
  });
}

tpt_status *tpt_tower_push_scope(tpt_tower *tower, const char *scope) {
  return guard(__func__, [&] {
    tpt::model::Tower &t = tower_arg(tower);
    t.push_scope(require(scope, "scope"));
  });
}

tpt_status *tpt_tower_push_reuse_scope(tpt_tower *tower, const char *scope) {
  return guard(__func__, [&] {
    tpt::model::Tower &t = tower_arg(tower);
    t.push_scope(require(scope, "scope"), /*reuse=*/true);
  });
}

tpt_status *tpt_tower_pop_scope(tpt_tower *tower) {
  return guard(__func__, [&] { tower_arg(tower).pop_scope(); });
}

tpt_status *tpt_tower_variable(tpt_tensor **out, tpt_tower *tower, const char *name, const int64_t *shape,
                               size_t ndim, const tpt_variable_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt::model::Tower &t = tower_arg(tower);
    std::string key = name_arg(name, "name");
    if (ndim > 0) require(shape, "shape");
    tpt::model::VariableOptions vo = variable_options_arg(options, "options");
    tpt::capi::give(out, t.variable(key, c10::IntArrayRef(shape, ndim), vo));
  });
}

tpt_status *tpt_manual_seed(uint64_t seed) {
  return guard(__func__, [&] { at::manual_seed(seed); });
}

// ------------------------------------------------------------------ optimizers

tpt_status *tpt_optimizer_new(tpt_optimizer **out, const char *kind) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    auto opt = std::make_shared<tpt::model::Optimizer>(require(kind, "kind"));
    auto *h = new tpt_optimizer;
    h->optimizer = std::move(opt);
    *out = h;
  });
}

void tpt_optimizer_free(tpt_optimizer *optimizer) {
  if (optimizer == nullptr || optimizer->magic != kOptimizerMagic) return;
  optimizer->magic = 0;
  delete optimizer;
}

tpt_status *tpt_optimizer_set(tpt_optimizer *optimizer, const char *name, double value) {
  return guard(__func__, [&] {
    tpt::model::Optimizer &o = optimizer_arg(optimizer);
    o.set(name_arg(name, "name"), value);
  });
}

tpt_status *tpt_callback_scheduled_hyperparam(tpt_callback **out, tpt_optimizer *optimizer, const char *param,
                                              const tpt_schedule_point *schedule, size_t n_points, uint32_t flags) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::shared_ptr<tpt::model::Optimizer> opt =
        live(optimizer, kOptimizerMagic, "optimizer", "tpt_optimizer").optimizer;
    std::string name = name_arg(param, "param");
    if (n_points == 0) tpt::invalid_argument("n_points is 0: a schedule needs at least one point");
    require(schedule, "schedule");
    if (n_points > (size_t(1) << 24)) tpt::invalid_argument("n_points " + std::to_string(n_points) + " is too large");
    constexpr uint32_t known = TPT_SCHEDULE_LINEAR | TPT_SCHEDULE_STEP_BASED | TPT_SCHEDULE_NOT_AT_BEGINNING;
    if (flags & ~known) tpt::invalid_argument("flags has bits that are not tpt_schedule_flags: " + std::to_string(flags));
    std::vector<tpt::SchedulePoint> points;
    for (size_t i = 0; i < n_points; ++i) points.push_back({schedule[i].at, schedule[i].value});
    tpt::capi::give_callback(out, tpt::make_scheduled_hyperparam(std::move(opt), name, std::move(points),
                                                                 (flags & TPT_SCHEDULE_LINEAR) != 0,
                                                                 (flags & TPT_SCHEDULE_STEP_BASED) != 0,
                                                                 (flags & TPT_SCHEDULE_NOT_AT_BEGINNING) == 0));
  });
}

tpt_status *tpt_callback_hyperparam_func(tpt_callback **out, tpt_optimizer *optimizer, const char *param,
                                         tpt_hyperparam_fn fn, void *user_data, void (*destroy)(void *)) {
  auto ud = std::make_shared<tpt::capi::UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::shared_ptr<tpt::model::Optimizer> opt =
        live(optimizer, kOptimizerMagic, "optimizer", "tpt_optimizer").optimizer;
    std::string name = name_arg(param, "param");
    require(reinterpret_cast<void *>(fn), "fn");
    std::string who = "HyperParamSetterWithFunc(" + name + ")";
    auto call = [fn, ud, who](int64_t epoch, double current) {
      double v = current;
      tpt::capi::raise_status(tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return fn(&v, epoch, current, ud->data); }));
      return v;
    };
    tpt::capi::give_callback(out, tpt::make_hyperparam_func(std::move(opt), name, call));
  });
}

tpt_status *tpt_callback_stat_monitor_param(tpt_callback **out, tpt_optimizer *optimizer, const char *param,
                                            const char *stat, const tpt_stat_monitor_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::shared_ptr<tpt::model::Optimizer> opt =
        live(optimizer, kOptimizerMagic, "optimizer", "tpt_optimizer").optimizer;
    std::string name = name_arg(param, "param");
    std::string s = name_arg(stat, "stat");
    tpt::StatMonitorOptions o;
    if (options) {
      tpt::capi::check_options_version(options->version, TPT_STAT_MONITOR_OPTIONS_VERSION, "options",
                                       "TPT_STAT_MONITOR_OPTIONS_INIT");
      o.last_k = options->last_k;
      o.threshold = options->threshold;
      o.maximize = options->maximize != 0;
      o.factor = options->factor;
      o.limit = options->limit;
    }
    tpt::capi::give_callback(out, tpt::make_stat_monitor_param(std::move(opt), name, s, o));
  });
}

tpt_status *tpt_callback_human_hyperparam(tpt_callback **out, tpt_optimizer *optimizer, const char *param,
                                          const char *file) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::shared_ptr<tpt::model::Optimizer> opt =
        live(optimizer, kOptimizerMagic, "optimizer", "tpt_optimizer").optimizer;
    std::string name = name_arg(param, "param");
    std::string f = file ? name_arg(file, "file") : "hyper.txt";
    tpt::capi::give_callback(out, tpt::make_human_hyperparam(std::move(opt), name, f));
  });
}

tpt_status *tpt_optimizer_get(double *out, const tpt_optimizer *optimizer, const char *name) {
  return guard(__func__, [&] {
    require(out, "out");
    const tpt::model::Optimizer &o = optimizer_arg(optimizer);
    *out = o.get(name_arg(name, "name"));
  });
}

tpt_status *tpt_optimizer_scale_gradients(tpt_optimizer *optimizer, const char *pattern, double factor) {
  return guard(__func__, [&] {
    tpt::model::Optimizer &o = optimizer_arg(optimizer);
    o.scale_gradients(require(pattern, "pattern"), factor);
  });
}

tpt_status *tpt_model_set_optimizer(tpt_model *model, tpt_optimizer *optimizer) {
  return guard(__func__, [&] {
    tpt::model::Model &m = model_arg(model);
    m.set_optimizer(live(optimizer, kOptimizerMagic, "optimizer", "tpt_optimizer").optimizer);
  });
}

// ------------------------------------------------------------------ inputs

tpt_status *tpt_input_from_tensors(tpt_input **out, const tpt_tensor *const *tensors, size_t n_tensors,
                                   int64_t batch_size, int32_t shuffle, uint64_t seed) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    if (n_tensors == 0) tpt::invalid_argument("n_tensors is 0");
    auto input = tpt::input::from_tensors(tensors_arg(tensors, n_tensors, "tensors"), batch_size, shuffle != 0, seed);
    auto *h = new tpt_input;
    h->input = std::move(input);
    *out = h;
  });
}

tpt_status *tpt_input_from_feed(tpt_input **out, tpt_feed_fn feed, void *user_data, void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(reinterpret_cast<void *>(feed), "feed");
    auto fn = [feed, ud](size_t width) {
      std::vector<tpt_tensor *> slots(width, nullptr);
      // Unscoped: the feed's tensors go to the library.
      tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_OFF, [&] { return feed(slots.data(), slots.size(), ud->data); });
      std::vector<at::Tensor> batch;
      for (tpt_tensor *h : slots) {  // the library takes every handle the feed made
        batch.push_back(h && h->magic == kTensorMagic ? h->value : at::Tensor());
        tpt_tensor_free(h);
      }
      raise_status(st);
      for (size_t i = 0; i < batch.size(); ++i)
        if (!batch[i].defined())
          tpt::fail(TPT_ERR_CALLBACK, "the feed callback did not fill batch[" + std::to_string(i) + "]");
      return batch;
    };
    auto *h = new tpt_input;
    h->input = tpt::input::from_function(std::move(fn));
    *out = h;
  });
}

void tpt_input_free(tpt_input *input) {
  if (input == nullptr || input->magic != kInputMagic) return;
  input->magic = 0;
  delete input;
}

using tpt::capi::check_taken;
using tpt::capi::take_input;

namespace {

// tpt_towers_options (NULL: the defaults) as the strategy's options, checked;
// `name` is the argument's.
tpt::parallel::TowersOptions towers_options(const tpt_towers_options *options, const std::string &name) {
  tpt_towers_options o = TPT_TOWERS_OPTIONS_INIT;
  if (options) {
    tpt::capi::check_options_version(options->version, TPT_TOWERS_OPTIONS_VERSION, name.c_str(),
                                     "TPT_TOWERS_OPTIONS_INIT");
    // An older struct ends earlier (version 1 after intra_op_threads, 2 after
    // bucket_bytes): the rest keeps its defaults.
    std::memcpy(&o, options,
                options->version >= 3   ? sizeof o
                : options->version == 2 ? offsetof(tpt_towers_options, average_scalars)
                                        : offsetof(tpt_towers_options, overlap));
  }
  tpt::parallel::TowersOptions to;
  switch (o.strategy) {
    case TPT_STRATEGY_SIMPLE: to.kind = tpt::parallel::Kind::Simple; break;
    case TPT_STRATEGY_REPLICATED: to.kind = tpt::parallel::Kind::Replicated; break;
    case TPT_STRATEGY_PARAMETER_SERVER: to.kind = tpt::parallel::Kind::ParameterServer; break;
    case TPT_STRATEGY_ASYNC: to.kind = tpt::parallel::Kind::Async; break;
    default: tpt::invalid_argument(name + "->strategy " + std::to_string(o.strategy) + " is not a tpt_strategy");
  }
  if (o.n_towers < 1 || o.n_towers > 256)
    tpt::invalid_argument(name + "->n_towers is " + std::to_string(o.n_towers) + ": it must be in [1, 256]");
  for (int32_t k = 0; k < o.n_towers; ++k) {
    if (!o.devices) {
      to.devices.emplace_back(c10::kCPU);
      continue;
    }
    std::string entry = name + "->devices[" + std::to_string(k) + "]";
    std::string device = name_arg(o.devices[k], entry.c_str());
    try {
      to.devices.emplace_back(device);
    } catch (const c10::Error &) {
      tpt::invalid_argument(entry + " is \"" + device + "\", not a device (\"cpu\", \"cuda:0\", ...)");
    }
  }
  to.average = o.average != 0;
  to.intra_op_threads = o.intra_op_threads;
  to.overlap = o.overlap != 0;
  if (o.bucket_bytes > (size_t{1} << 40))
    tpt::invalid_argument(name + "->bucket_bytes is " + std::to_string(o.bucket_bytes) + ": it must be at most 2^40");
  if (o.bucket_bytes) to.bucket_bytes = static_cast<int64_t>(o.bucket_bytes);
  to.average_towers = o.average_scalars != 0;
  return to;
}

}  // namespace

namespace {

// The distribution a trainer was given (tpt_trainer_set_distributed), for parallel::train.
std::optional<tpt::parallel::Distributed> distribution(const tpt_trainer *trainer) {
  if (!trainer->distributed) return std::nullopt;
  return *trainer->distributed;
}

// tpt_distributed_options (NULL: the defaults) as a World joined: the
// rendezvous happens here.
std::shared_ptr<tpt::parallel::Distributed> join(const tpt_distributed_options *options, const std::string &name) {
  tpt_distributed_options o = TPT_DISTRIBUTED_OPTIONS_INIT;
  if (options) {
    tpt::capi::check_options_version(options->version, TPT_DISTRIBUTED_OPTIONS_VERSION, name.c_str(),
                                     "TPT_DISTRIBUTED_OPTIONS_INIT");
    o = *options;
  }
  tpt::dist::WorldOptions wo;
  if (o.master_addr) wo.master_addr = o.master_addr;
  if (o.master_port < 0 || o.master_port > 65535)
    tpt::invalid_argument(name + "->master_port is " + std::to_string(o.master_port) + ": it must be in [1, 65535] (0: MASTER_PORT)");
  if (o.master_port) wo.master_port = o.master_port;
  if (o.world_size < 0) tpt::invalid_argument(name + "->world_size is " + std::to_string(o.world_size) + ": it must be at least 1 (0: WORLD_SIZE)");
  if (o.world_size) {
    if (o.rank < 0 || o.rank >= o.world_size)
      tpt::invalid_argument(name + "->rank is " + std::to_string(o.rank) + ": it must be in [0, " +
                            std::to_string(o.world_size - 1) + "] (world_size is " + std::to_string(o.world_size) + ")");
    if (o.local_rank < 0 || o.local_rank > o.rank)
      tpt::invalid_argument(name + "->local_rank is " + std::to_string(o.local_rank) + ": it must be in [0, rank]");
    wo.world_size = o.world_size, wo.rank = o.rank, wo.local_rank = o.local_rank;
  }
  if (o.timeout_ms < 0 || o.timeout_ms > 24LL * 3600 * 1000)
    tpt::invalid_argument(name + "->timeout_ms is " + std::to_string(o.timeout_ms) + ": it must be in [1, 86400000] (0: 60000)");
  if (o.timeout_ms) wo.timeout = std::chrono::milliseconds(o.timeout_ms);
  auto d = std::make_shared<tpt::parallel::Distributed>();
  const tpt::dist::Rendezvous r = tpt::dist::rendezvous(wo);
  d->world = std::make_shared<tpt::dist::World>(r);
  d->shard = o.shard != 0;
  d->average_scalars = o.average_scalars != 0;
  return d;
}

}  // namespace

tpt_status *tpt_trainer_set_distributed(tpt_trainer *trainer, const tpt_distributed_options *options) {
  return guard(__func__, [&] {
    tpt::Trainer &t = tpt::capi::trainer_arg(trainer);
    if (t.phase() != tpt::Trainer::Phase::Idle) tpt::fail(TPT_ERR_STATE, "the trainer has already run");
    if (trainer->distributed) tpt::fail(TPT_ERR_STATE, "the trainer is already one rank of a job");
    if (trainer->model)
      tpt::fail(TPT_ERR_STATE, "the trainer has a model already: call tpt_trainer_set_distributed before "
                               "tpt_trainer_set_model or tpt_trainer_set_towers");
    trainer->distributed = join(options, "options");
    trainer->rank = trainer->distributed->world->rank();
    trainer->world_size = trainer->distributed->world->size();
  });
}

tpt_status *tpt_trainer_rank(int32_t *rank, int32_t *world_size, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(rank, "rank");
    require(world_size, "world_size");
    tpt::capi::trainer_arg(trainer);
    *rank = trainer->rank;
    *world_size = trainer->world_size;
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

tpt_status *tpt_trainer_run_train_ops(tpt_trainer *trainer, const char *const *names, size_t n, int32_t hooked) {
  return guard(__func__, [&] {
    tpt::Trainer &t = tpt::capi::trainer_arg(trainer);
    require(names, "names");
    std::vector<std::string> ops;
    for (size_t i = 0; i < n; ++i) ops.push_back(name_arg(names[i], ("names[" + std::to_string(i) + "]").c_str()));
    auto *strategy = dynamic_cast<tpt::parallel::Strategy *>(t.stateful());
    if (!strategy) tpt::fail(TPT_ERR_STATE, "the trainer has no model (tpt_trainer_set_model)");
    if (!t.in_run_step()) tpt::fail(TPT_ERR_STATE, "train ops run inside run_step (tpt_trainer_set_run_step)");
    strategy->run_ops(t, ops, hooked != 0);
  });
}

tpt_status *tpt_trainer_set_train_ops(tpt_trainer *trainer, const char *const *names, size_t n) {
  return guard(__func__, [&] {
    tpt::Trainer &t = tpt::capi::trainer_arg(trainer);
    require(names, "names");
    if (n == 0) tpt::invalid_argument("n is 0: name at least one train op");
    if (t.phase() != tpt::Trainer::Phase::Idle) tpt::fail(TPT_ERR_STATE, "the trainer has already run");
    auto *strategy = dynamic_cast<tpt::parallel::Strategy *>(t.stateful());
    if (!strategy || !trainer->model)
      tpt::fail(TPT_ERR_STATE, "the trainer has no model yet (tpt_trainer_set_model or tpt_trainer_set_towers first)");
    if (!strategy->runs_train_ops())
      tpt::fail(TPT_ERR_UNSUPPORTED, "the trainer's strategy (async towers) does not run train ops; use the simple, "
                                     "the replicated or the parameter-server strategy");
    std::vector<std::string> ops;
    for (size_t i = 0; i < n; ++i) {
      std::string field = "names[" + std::to_string(i) + "]";
      ops.push_back(name_arg(names[i], field.c_str()));
      if (!trainer->model->train_op(ops.back())) {
        std::string known;
        for (const auto &op : trainer->model->train_ops()) known += (known.empty() ? "'" : ", '") + op.name + "'";
        tpt::invalid_argument(field + " is '" + ops.back() + "', not a train op of the model (it has " +
                              (known.empty() ? std::string("none: tpt_model_add_train_op") : known) + ")");
      }
    }
    t.set_run_step([strategy, ops](tpt::Trainer &tr) { strategy->run_ops(tr, ops, /*hooked=*/true); });
  });
}

tpt_status *tpt_trainer_set_gan(tpt_trainer *trainer, tpt_model *model, tpt_input *input,
                                const tpt_gan_options *options) {
  std::unique_ptr<tpt::input::Input> in = take_input(input);  // taken in every case
  return guard(__func__, [&] {
    tpt::Trainer &t = tpt::capi::trainer_arg(trainer);
    std::shared_ptr<tpt::model::Model> m = tpt::capi::model_arg_ptr(model);
    check_taken(in, input);
    tpt_gan_options o = TPT_GAN_OPTIONS_INIT;
    if (options) {
      tpt::capi::check_options_version(options->version, TPT_GAN_OPTIONS_VERSION, "options", "TPT_GAN_OPTIONS_INIT");
      // A version 1 struct ends after d_op: towers keeps its default.
      std::memcpy(&o, options, options->version >= 2 ? sizeof o : offsetof(tpt_gan_options, towers));
    }
    std::optional<tpt::parallel::TowersOptions> towers;
    if (o.towers) towers = towers_options(o.towers, "options->towers");
    tpt::parallel::GanOptions g;
    if (o.g_op) g.g_op = name_arg(o.g_op, "options->g_op");
    if (o.d_op) g.d_op = name_arg(o.d_op, "options->d_op");
    g.separate = o.separate != 0;
    g.d_period = o.d_period;
    g.g_period = o.g_period;
    tpt::parallel::gan(t, m, std::move(in), g, towers, distribution(trainer));
    trainer->model = std::move(m);
  });
}

tpt_status *tpt_trainer_set_model(tpt_trainer *trainer, tpt_model *model, tpt_input *input) {
  std::unique_ptr<tpt::input::Input> in = take_input(input);  // taken in every case
  return guard(__func__, [&] {
    tpt::Trainer &t = tpt::capi::trainer_arg(trainer);
    std::shared_ptr<tpt::model::Model> m = tpt::capi::model_arg_ptr(model);
    check_taken(in, input);
    tpt::parallel::train(t, m, std::move(in), std::nullopt, distribution(trainer));
    trainer->model = std::move(m);
  });
}

tpt_status *tpt_trainer_set_towers(tpt_trainer *trainer, tpt_model *model, tpt_input *input,
                                   const tpt_towers_options *options) {
  std::unique_ptr<tpt::input::Input> in = take_input(input);  // taken in every case
  return guard(__func__, [&] {
    tpt::Trainer &t = tpt::capi::trainer_arg(trainer);
    std::shared_ptr<tpt::model::Model> m = tpt::capi::model_arg_ptr(model);
    check_taken(in, input);
    tpt::parallel::train(t, m, std::move(in), towers_options(options, "options"), distribution(trainer));
    trainer->model = std::move(m);
  });
}

tpt_status *tpt_trainer_model(tpt_model **out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt::capi::trainer_arg(const_cast<tpt_trainer *>(trainer));
    if (!trainer->model)
      tpt::fail(TPT_ERR_NOT_FOUND, "the trainer has no model (tpt_trainer_set_model or a config gives it one)");
    auto *h = new tpt_model;
    h->model = trainer->model;
    *out = h;
  });
}

tpt_status *tpt_trainer_optimizer(tpt_optimizer **out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt::capi::trainer_arg(const_cast<tpt_trainer *>(trainer));
    if (!trainer->model)
      tpt::fail(TPT_ERR_NOT_FOUND, "the trainer has no model (tpt_trainer_set_model or a config gives it one)");
    const std::shared_ptr<tpt::model::Optimizer> &opt = trainer->model->optimizer();
    if (!opt) tpt::fail(TPT_ERR_NOT_FOUND, "the trainer's model has no optimizer (tpt_model_set_optimizer)");
    auto *h = new tpt_optimizer;
    h->optimizer = opt;
    *out = h;
  });
}

namespace {

// The config's init hook, as a chief-only trainer callback at BEFORE_TRAIN
// (after the strategy's SETUP built the model). Not when the run resumes
// from a checkpoint: as tensorpack's AutoResumeTrainConfig replaces
// session_init by the checkpoint's restore, the checkpoint's values win.
class InitHook final : public tpt::Callback {
 public:
  InitHook(tpt_init_fn fn, void *ud, std::shared_ptr<tpt::model::Model> model)
      : Callback("SessionInit", true), fn_(fn), ud_(ud), model_(new tpt_model) {
    model_->model = std::move(model);
    model_->lent = true;  // a free from the hook is a no-op, not a double free
  }
  ~InitHook() override {
    model_->magic = 0;
    delete model_;
  }
  uint32_t events() const override { return TPT_EVENT_BEFORE_TRAIN; }
  void on_event(tpt::Trainer &t, tpt_event, const tpt::Record *) override {
    if (t.resume_checkpoint()) {
      t.log().info("SessionInit: the config's init function is skipped, the run resumes from a checkpoint.");
      return;
    }
    tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return fn_(model_, ud_); });
    raise_status(st);
  }

 private:
  tpt_init_fn fn_;
  void *ud_;
  tpt_model *model_;  // the hook's own handle of the trainer's model
};

// Runs fn; an error it raises is re-addressed to the config field it is
// about: "config->options: options->max_epoch must be >= 0, got -1".
extern "C++" template <class F>
auto about(const std::string &field, F &&fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const tpt::Error &e) {
    if (e.passthrough()) throw;
    throw tpt::Error(e.code(), field + ": " + e.what());
  }
}

// A config's list of callbacks, taken: an entry that is NULL or not a live
// handle leaves a null and is named in *bad (the first one).
void take_callbacks(tpt_callback *const *list, size_t n, const std::string &field,
                    std::vector<std::unique_ptr<tpt::Callback>> &into, std::string *bad) {
  for (size_t i = 0; list && i < n; ++i) {
    tpt_callback *cb = list[i];
    const bool live = cb && cb->magic == kCallbackMagic;
    into.push_back(live ? tpt::capi::take_callback(cb, field.c_str()) : nullptr);
    if (!live && bad->empty()) *bad = field + "[" + std::to_string(i) + "]";
  }
}

}  // namespace

// Translates the config's handles and structs, then tpt::parallel::train
// assembles the trainer.
tpt_status *tpt_trainer_from_config(tpt_trainer **out, const tpt_train_config *config) {
  return guard(__func__, [&] {
    // Everything the config hands over is taken, whatever happens.
    std::unique_ptr<tpt::input::Input> in;
    std::vector<std::unique_ptr<tpt::Callback>> callbacks, monitors;
    std::string bad_callback, bad_monitor;
    if (config && config->version >= 1 && config->version <= TPT_TRAIN_CONFIG_VERSION) {
      in = take_input(config->input);
      take_callbacks(config->callbacks, config->n_callbacks, "config->callbacks", callbacks, &bad_callback);
      take_callbacks(config->monitors, config->n_monitors, "config->monitors", monitors, &bad_monitor);
    }
    require(out, "out");
    *out = nullptr;
    require(config, "config");
    if (config->version < 1 || config->version > TPT_TRAIN_CONFIG_VERSION)
      tpt::invalid_argument("config->version is " + std::to_string(config->version) +
                            " (initialise with TPT_TRAIN_CONFIG_INIT)");
    std::shared_ptr<tpt::model::Model> m = tpt::capi::model_arg_ptr(config->model, "config->model");
    tpt_dataflow *df = config->version >= 2 ? config->dataflow : nullptr;
    if (config->input && df) tpt::invalid_argument("config->input and config->dataflow are both set (give one)");
    if (!config->input && !df) tpt::invalid_argument("config->input and config->dataflow are both NULL (give one)");
    if (config->input) {
      check_taken(in, config->input, "config->input");
    } else {  // tensorpack's automatic QueueInput around a dataflow
      const tpt_input_options io = TPT_INPUT_OPTIONS_INIT;
      in = tpt::input::queue(tpt::capi::dataflow_arg(df, "config->dataflow"), io.capacity, io.repeat != 0);
    }
    if (!bad_callback.empty())
      about(bad_callback, [&] { tpt::capi::throw_not_live("callback", "tpt_callback"); });
    if (!bad_monitor.empty()) about(bad_monitor, [&] { tpt::capi::throw_not_live("monitor", "tpt_callback"); });
    auto trainer = std::make_unique<tpt_trainer>(
        about("config->options", [&] { return tpt::capi::trainer_config(config->options); }));
    tpt::Trainer &t = trainer->trainer;
    const tpt_towers_options *towers = config->version >= 3 ? config->towers : nullptr;
    const tpt_distributed_options *dist = config->version >= 4 ? config->distributed : nullptr;
    std::optional<tpt::parallel::TowersOptions> to;
    if (towers) to = about("config->towers", [&] { return towers_options(towers, "options"); });
    if (dist) {
      trainer->distributed = about("config->distributed", [&] { return join(dist, "options"); });
      trainer->rank = trainer->distributed->world->rank();
      trainer->world_size = trainer->distributed->world->size();
    }
    if (towers) {
      about("config->towers", [&] { tpt::parallel::train(t, m, std::move(in), to, distribution(trainer.get())); });
    } else {
      tpt::parallel::train(t, m, std::move(in), std::nullopt, distribution(trainer.get()));
    }
    trainer->model = m;
    // A missing steps_per_epoch is the config's mistake: say so now, not at run.
    if (t.steps_per_epoch() < 0)
      tpt::invalid_argument(
          "options->steps_per_epoch is not set and the input does not know its size (a source made from a function, "
          "without a size); set options->steps_per_epoch, or give the source a size");
    if (config->init) t.add(std::make_unique<InitHook>(config->init, config->init_user_data, m), tpt::Group::TrainerInternal);
    for (size_t i = 0; i < callbacks.size(); ++i)
      about("config->callbacks[" + std::to_string(i) + "]", [&] { t.add(std::move(callbacks[i]), tpt::Group::User); });
    for (size_t i = 0; i < monitors.size(); ++i)
      about("config->monitors[" + std::to_string(i) + "]", [&] { t.add(std::move(monitors[i]), tpt::Group::Monitor); });
    *out = trainer.release();
  });
}

tpt_status *tpt_launch_train(const tpt_train_config *config) {
  tpt_trainer *trainer = nullptr;
  tpt_status *st = tpt_trainer_from_config(&trainer, config);
  if (st) return st;
  trainer->library_owned = true;  // a callback's tpt_trainer_free of it is a no-op
  st = tpt_trainer_run(trainer);
  trainer->library_owned = false;
  tpt_trainer_free(trainer);
  return st;
}

}  // extern "C"
