// Callbacks: C callbacks as tpt::Callback, the scheduling wrappers and
// tensorpack's catalogue (include/tptrain/callback.h).
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <c10/util/SmallVector.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/args.hpp"
#include "capi/model_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "loop/savers.hpp"
#include "model/dtype.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "train/hyperparams.hpp"

using tpt::capi::check_options_version;
using tpt::capi::give_callback;
using tpt::capi::guard;
using tpt::capi::handle_of;
using tpt::capi::live;
using tpt::capi::name_arg;
using tpt::capi::optional_string;
using tpt::capi::raise_status;
using tpt::capi::require;
using tpt::capi::take_callback;
using tpt::capi::tensor_arg;
using tpt::capi::UserData;
using tpt::dtype_of;

namespace {

// A callback written in C.
class CCallback final : public tpt::Callback {
 public:
  using SaveFn = tpt_status *(*)(tpt_tensor **, void *);
  using RestoreFn = tpt_status *(*)(const tpt_tensor *, void *);
  CCallback(std::string name, bool chief_only, uint32_t events, tpt_callback_fn fn,
            std::unique_ptr<UserData> ud, SaveFn save, RestoreFn restore)
      : Callback(std::move(name), chief_only), events_(events), fn_(fn), ud_(std::move(ud)), save_(save),
        restore_(restore) {}
  uint32_t events() const override { return events_; }

  // The host's state, as a tensor of any dtype and shape (checkpoints).
  bool save_state(std::vector<uint8_t> &out) override {
    if (!save_) return false;
    bool got = false;
    // Read inside the call's scope, which frees the tensor as it closes.
    tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_FREE, [&]() -> tpt_status * {
      tpt_tensor *t = nullptr;
      tpt_status *r = save_(&t, ud_->data);
      if (r || !t) return r;
      try {
        out = tpt::capi::encode_tensor_state(tpt::capi::tensor_arg(t, "the saved state"));
      } catch (...) {
        tpt_tensor_free(t);
        throw;
      }
      tpt_tensor_free(t);
      got = true;
      return nullptr;
    });
    if (st && tpt_status_code(st) != TPT_STOP && tpt_status_message(st)[0] == '\0') {
      tpt_status_free(st);
      tpt::fail(TPT_ERR_CALLBACK, "callback '" + name() + "': save returned an error without a message");
    }
    raise_status(st);
    if (!got) tpt::fail(TPT_ERR_CALLBACK, "callback '" + name() + "': save returned no tensor");
    return true;
  }
  void check_state(const std::vector<uint8_t> &state) const override {
    if (!restore_) {
      tpt::invalid_argument("the checkpoint has a state for callback '" + name() + "', which has no restore function");
    }
    tpt::capi::decode_tensor_state(state, "callback '" + name() + "'");
  }
  void restore_state(const std::vector<uint8_t> &state) override {
    if (!restore_) {
      tpt::invalid_argument("the checkpoint has a state for callback '" + name() + "', which has no restore function");
    }
    at::Tensor value = tpt::capi::decode_tensor_state(state, "callback '" + name() + "'");
    tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] {
      tpt_tensor *h = nullptr;
      tpt::capi::give(&h, value);
      return restore_(h, ud_->data);
    });
    raise_status(st);
  }
  void on_event(tpt::Trainer &t, tpt_event event, const tpt::Record *r) override {
    if (r == nullptr) {
      raise_status(named(call(t, event, nullptr), event));
      return;
    }
    tpt_record rec{};
    rec.struct_size = sizeof(tpt_record);
    rec.kind = r->kind;
    rec.name = r->name->c_str();
    rec.global_step = r->global_step;
    rec.epoch_num = r->epoch_num;
    rec.value = r->value;
    rec.tensor = nullptr;
    if (r->image) {
      tpt_tensor image(*r->image, tpt_tensor::Borrow{});  // lent for the call
      rec.tensor = &image;
      raise_status(named(call(t, event, &rec), event));
      return;
    }
    raise_status(named(call(t, event, &rec), event));
  }

 private:
  // An error without a message still says whose it is and when.
  tpt_status *named(tpt_status *st, tpt_event event) const {
    if (st && st != tpt::capi::out_of_memory_status() && st->message.empty() && tpt_status_code(st) != TPT_STOP) {
      try {
        st->message = "callback '" + name() + "' returned " + tpt_code_name(tpt_status_code(st)) +
                      " without a message at " + tpt::event_name(event);
      } catch (...) {
      }
    }
    return st;
  }

  tpt_status *call(tpt::Trainer &t, tpt_event event, const tpt_record *rec) {
    // The tensors the callback makes go when it returns.
    return tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return fn_(handle_of(t), event, rec, ud_->data); });
  }

  uint32_t events_;
  tpt_callback_fn fn_;
  std::unique_ptr<UserData> ud_;
  SaveFn save_;
  RestoreFn restore_;
};

}  // namespace

namespace tpt::capi {

// Takes a callback handle's content and frees the handle.
std::unique_ptr<tpt::Callback> take_callback(tpt_callback *cb, const char *name) {
  require(cb, name);
  if (cb->magic != kCallbackMagic) tpt::capi::throw_not_live(name, "tpt_callback");
  std::unique_ptr<tpt::Callback> inner = std::move(cb->callback);
  cb->magic = 0;
  delete cb;
  return inner;
}

}  // namespace tpt::capi

namespace {

tpt_status *best_saver(tpt_callback **out, const char *stat, const char *filename, const char *dir, bool maximize) {
  return guard(maximize ? "tpt_callback_max_saver" : "tpt_callback_min_saver", [&] {
    require(out, "out");
    *out = nullptr;
    std::string s = tpt::capi::name_arg(stat, "stat");
    if (filename && *filename == '\0') tpt::invalid_argument("argument 'filename' is empty (NULL for the default)");
    if (dir && *dir == '\0') tpt::invalid_argument("argument 'dir' is empty (NULL for the log directory)");
    give_callback(out, tpt::make_best_saver(s, maximize, optional_string(filename), optional_string(dir)));
  });
}

}  // namespace

namespace tpt::capi {

// dtype (int64), rank (int64), sizes (int64 each), then the elements.
std::vector<uint8_t> encode_tensor_state(const at::Tensor &t) {
  at::Tensor c = t.detach().to(at::kCPU).contiguous();
  std::vector<int64_t> head = {static_cast<int64_t>(c.scalar_type()), c.dim()};
  for (int64_t d : c.sizes()) head.push_back(d);
  size_t nbytes = c.numel() * c.element_size();
  std::vector<uint8_t> out(head.size() * 8 + nbytes);
  std::memcpy(out.data(), head.data(), head.size() * 8);
  if (nbytes) std::memcpy(out.data() + head.size() * 8, c.data_ptr(), nbytes);
  return out;
}

at::Tensor decode_tensor_state(const std::vector<uint8_t> &b, const std::string &who) {
  auto bad = [&](const std::string &why) { tpt::invalid_argument("the checkpoint's state of " + who + ": " + why); };
  if (b.size() < 16) bad("too short");
  int64_t dtype = 0, rank = 0;
  std::memcpy(&dtype, b.data(), 8);
  std::memcpy(&rank, b.data() + 8, 8);
  if (dtype < 0 || dtype >= static_cast<int64_t>(c10::ScalarType::NumOptions) || rank < 0 || rank > 64) bad("a bad header");
  try {
    dtype_of(static_cast<c10::ScalarType>(dtype));  // a dtype a callback can have saved
  } catch (const tpt::Error &) {
    bad(std::string("a dtype (") + c10::toString(static_cast<c10::ScalarType>(dtype)) + ") that no tpt_dtype names");
  }
  if (b.size() < 16 + static_cast<size_t>(rank) * 8) bad("too short for its sizes");
  std::vector<int64_t> sizes(static_cast<size_t>(rank));
  if (rank) std::memcpy(sizes.data(), b.data() + 16, static_cast<size_t>(rank) * 8);
  auto type = static_cast<c10::ScalarType>(dtype);
  size_t numel = 1;
  for (int64_t d : sizes) {
    if (d < 0 || (d > 0 && numel > (size_t(1) << 40) / static_cast<size_t>(d))) bad("bad sizes");
    numel *= static_cast<size_t>(d);
  }
  size_t off = 16 + static_cast<size_t>(rank) * 8;
  size_t nbytes = numel * c10::elementSize(type);
  if (b.size() - off != nbytes) bad(std::to_string(b.size() - off) + " bytes of elements, " + std::to_string(nbytes) + " expected");
  if (type == c10::ScalarType::Bool)
    for (size_t i = 0; i < nbytes; ++i)
      if (b[off + i] > 1) bad("a bool element that is not 0 or 1");
  at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(type));
  if (nbytes) std::memcpy(t.data_ptr(), b.data() + off, nbytes);
  return t;
}

}  // namespace tpt::capi

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

tpt_status *tpt_callback_new(tpt_callback **out, const tpt_callback_desc *desc) {
  std::unique_ptr<UserData> ud;
  if (desc) ud = std::make_unique<UserData>(desc->user_data, desc->destroy);
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    require(desc, "desc");
    check_options_version(desc->version, TPT_CALLBACK_DESC_VERSION, "desc", "TPT_CALLBACK_DESC_INIT");
    require(reinterpret_cast<void *>(desc->fn), "desc->fn");
    if (desc->events & ~static_cast<uint32_t>(TPT_EVENT_ALL))
      tpt::invalid_argument("desc->events has bits that are not tpt_event values: " + std::to_string(desc->events));
    std::string name = desc->name && *desc->name ? desc->name : "callback";
    CCallback::SaveFn save = desc->version >= 2 ? desc->save : nullptr;
    CCallback::RestoreFn restore = desc->version >= 2 ? desc->restore : nullptr;
    if ((save == nullptr) != (restore == nullptr))
      tpt::invalid_argument("desc->save and desc->restore go together: give both or neither");
    give_callback(out, std::make_unique<CCallback>(name, desc->chief_only != 0, desc->events, desc->fn,
                                                   std::move(ud), save, restore));
  });
}

void tpt_callback_free(tpt_callback *callback) {
  if (callback == nullptr || callback->magic != kCallbackMagic) return;
  callback->magic = 0;
  delete callback;
}

tpt_status *tpt_callback_periodic_trigger(tpt_callback **out, tpt_callback *inner, int64_t every_k_steps,
                                          int64_t every_k_epochs, int32_t before_train) {
  return guard(__func__, [&] {
    if (out) *out = nullptr;  // also when taking inner fails
    std::unique_ptr<tpt::Callback> cb = inner ? take_callback(inner, "inner") : nullptr;
    require(out, "out");
    require(cb.get(), "inner");
    give_callback(out, tpt::make_periodic_trigger(std::move(cb), every_k_steps, every_k_epochs, before_train != 0));
  });
}

tpt_status *tpt_callback_enable_if(tpt_callback **out, tpt_callback *inner, tpt_predicate_fn predicate,
                                   void *user_data, void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);
  return guard(__func__, [&] {
    if (out) *out = nullptr;  // also when taking inner fails
    std::unique_ptr<tpt::Callback> cb = inner ? take_callback(inner, "inner") : nullptr;
    require(out, "out");
    require(cb.get(), "inner");
    require(reinterpret_cast<void *>(predicate), "predicate");
    std::string name = cb->name();
    tpt::Predicate pred = [predicate, ud, name](tpt::Trainer &t) {
      int32_t r = tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return predicate(handle_of(t), ud->data); });
      if (r < 0) tpt::fail(TPT_ERR_CALLBACK, "the predicate of '" + name + "' failed (returned " + std::to_string(r) + ")");
      return r != 0;
    };
    give_callback(out, tpt::make_enable_if(std::move(cb), std::move(pred)));
  });
}

tpt_status *tpt_callback_periodic(tpt_callback **out, tpt_callback *inner, int64_t every_k_steps,
                                  int64_t every_k_epochs) {
  return guard(__func__, [&] {
    if (out) *out = nullptr;  // also when taking inner fails
    std::unique_ptr<tpt::Callback> cb = inner ? take_callback(inner, "inner") : nullptr;
    require(out, "out");
    require(cb.get(), "inner");
    give_callback(out, tpt::make_periodic(std::move(cb), every_k_steps, every_k_epochs));
  });
}

tpt_status *tpt_monitor_tensorboard(tpt_callback **out, const char *dir) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give_callback(out, tpt::make_tensorboard_writer(dir ? name_arg(dir, "dir") : std::string()));
  });
}

tpt_status *tpt_callback_early_stopping(tpt_callback **out, const char *stat, const tpt_early_stopping_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::string name = name_arg(stat, "stat");
    tpt::EarlyStoppingOptions o;
    if (options) {
      check_options_version(options->version, TPT_EARLY_STOPPING_OPTIONS_VERSION, "options",
                            "TPT_EARLY_STOPPING_OPTIONS_INIT");
      o.patience = options->patience;
      o.min_delta = options->min_delta;
      o.maximize = options->maximize != 0;
    }
    give_callback(out, tpt::make_early_stopping(std::move(name), o));
  });
}

tpt_status *tpt_callback_terminate_on_nan(tpt_callback **out, const char *const *outputs, size_t n_outputs) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    std::vector<std::string> names;
    if (n_outputs > 0 && outputs == nullptr) require(outputs, "outputs");
    if (n_outputs > (size_t(1) << 20)) tpt::invalid_argument("n_outputs is too large");
    for (size_t i = 0; i < n_outputs; ++i) {
      std::string entry = "outputs[" + std::to_string(i) + "]";
      names.push_back(name_arg(outputs[i], entry.c_str()));
    }
    give_callback(out, tpt::make_terminate_on_nan(std::move(names)));
  });
}

tpt_status *tpt_callback_throughput(tpt_callback **out, int64_t samples_per_step) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give_callback(out, tpt::make_throughput_tracker(samples_per_step));
  });
}

tpt_status *tpt_callback_step_watchdog(tpt_callback **out, double timeout_seconds) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give_callback(out, tpt::make_step_watchdog(timeout_seconds));
  });
}

tpt_status *tpt_callback_host_memory(tpt_callback **out) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    give_callback(out, tpt::make_host_memory_tracker());
  });
}

tpt_status *tpt_callback_model_saver(tpt_callback **out, const tpt_model_saver_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    tpt_model_saver_options o = TPT_MODEL_SAVER_OPTIONS_INIT;
    if (options) {
      check_options_version(options->version, TPT_MODEL_SAVER_OPTIONS_VERSION, "options",
                            "TPT_MODEL_SAVER_OPTIONS_INIT");
      o = *options;
    }
    if (o.dir && *o.dir == '\0') tpt::invalid_argument("options->dir is empty (NULL for the log directory)");
    tpt::ModelSaverOptions so;
    so.max_to_keep = o.max_to_keep;
    so.keep_every_n_hours = o.keep_every_n_hours;
    so.every_k_steps = o.every_k_steps;
    so.every_k_epochs = o.every_k_epochs;
    so.dir = optional_string(o.dir);
    try {
      give_callback(out, tpt::make_model_saver(std::move(so)));
    } catch (const tpt::Error &e) {
      tpt::fail(e.code(), std::string("options->") + e.what());
    }
  });
}

tpt_status *tpt_callback_min_saver(tpt_callback **out, const char *stat, const char *filename, const char *dir) {
  return best_saver(out, stat, filename, dir, false);
}

tpt_status *tpt_callback_max_saver(tpt_callback **out, const char *stat, const char *filename, const char *dir) {
  return best_saver(out, stat, filename, dir, true);
}
