// C API sections "Trainer", "Callbacks" and "Monitors": handles over
// tpt::Trainer and adapters that turn C callbacks into tpt::Callback.
#include <ATen/ops/full.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros_like.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "core/files.hpp"
#include "core/image.hpp"
#include "trainer_handle.hpp"

using tpt::capi::check_options_version;
using tpt::capi::give_callback;
using tpt::capi::guard;
using tpt::capi::handle_of;
using tpt::capi::name_arg;
using tpt::capi::raise_status;
using tpt::capi::require;
using tpt::capi::take_callback;
using tpt::capi::trainer_arg;
using tpt::capi::UserData;

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



struct StepCall {
  tpt_step_fn fn;
  void *user_data;
};

void run_c_step(tpt::Trainer &t, void *ctx) {
  auto *call = static_cast<StepCall *>(ctx);
  tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return call->fn(handle_of(t), call->user_data); });
  raise_status(st);
}

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

tpt::TrainerConfig trainer_config(const tpt_trainer_options *options) {
  tpt_trainer_options o = TPT_TRAINER_OPTIONS_INIT;
  if (options) {
    check_options_version(options->version, TPT_TRAINER_OPTIONS_VERSION, "options",
                          "TPT_TRAINER_OPTIONS_INIT");
    if (options->version == 1)  // a version 1 struct ends before scalar_history
      std::memcpy(&o, options, offsetof(tpt_trainer_options, scalar_history));
    else if (options->version == 2)  // version 2 ends before auto_resume
      std::memcpy(&o, options, offsetof(tpt_trainer_options, auto_resume));
    else if (options->version == 3)  // version 3 ends before stop_on_signals
      std::memcpy(&o, options, offsetof(tpt_trainer_options, stop_on_signals));
    else
      o = *options;
  }
  if (o.stop_on_signals < -1 || o.stop_on_signals > 1)
    tpt::invalid_argument("options->stop_on_signals must be 1 (on), 0 (from TPTRAIN_STOP_ON_SIGNALS) or -1 (off), got " +
                          std::to_string(o.stop_on_signals));
  if (o.scalar_history < 0)
    tpt::invalid_argument("options->scalar_history must be >= 0 (0 keeps all), got " +
                          std::to_string(o.scalar_history));
  if (o.summary_period < 0)
    tpt::invalid_argument("options->summary_period must be >= 0 (0: once per epoch), got " +
                          std::to_string(o.summary_period));
  if (o.starting_epoch < 1)
    tpt::invalid_argument("options->starting_epoch must be >= 1, got " + std::to_string(o.starting_epoch));
  if (o.max_epoch < 0)
    tpt::invalid_argument("options->max_epoch must be >= 0, got " + std::to_string(o.max_epoch));
  if (o.steps_per_epoch < -1)
    tpt::invalid_argument("options->steps_per_epoch must be >= 0 (or -1: not set), got " +
                          std::to_string(o.steps_per_epoch));
  if (o.logdir_action < TPT_LOGDIR_REFUSE || o.logdir_action > TPT_LOGDIR_ASK)
    tpt::invalid_argument("options->logdir_action " + std::to_string(static_cast<int>(o.logdir_action)) +
                          " is not a tpt_logdir_action");
  if (o.progress < TPT_PROGRESS_AUTO || o.progress > TPT_PROGRESS_OFF)
    tpt::invalid_argument("options->progress " + std::to_string(static_cast<int>(o.progress)) +
                          " is not a tpt_progress");
  if (o.logdir && *o.logdir == '\0') tpt::invalid_argument("options->logdir is empty (use NULL for none)");
  tpt::TrainerConfig c;
  c.is_chief = o.is_chief != 0;
  c.starting_epoch = o.starting_epoch;
  c.max_epoch = o.max_epoch;
  c.steps_per_epoch = o.steps_per_epoch;
  c.logdir = o.logdir ? o.logdir : "";
  c.logdir_action = o.logdir_action;
  c.progress = o.progress;
  c.console = o.console != 0;
  c.default_callbacks = o.default_callbacks != 0;
  c.default_monitors = o.default_monitors != 0;
  c.scalar_history = o.scalar_history;
  c.summary_period = o.summary_period;
  c.auto_resume = o.auto_resume != 0;
  c.stop_on_signals = o.stop_on_signals;
  return c;
}

}  // namespace tpt::capi

extern "C" {

// ------------------------------------------------------------------ trainer

tpt_status *tpt_trainer_new(tpt_trainer **out, const tpt_trainer_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    *out = new tpt_trainer(tpt::capi::trainer_config(options));
  });
}

void tpt_trainer_free(tpt_trainer *trainer) {
  if (trainer == nullptr || trainer->magic != kTrainerMagic || trainer->library_owned) return;
  int s = trainer->state.load();
  while (s & tpt_trainer::kRunning) {
    // Freed during its own run (from inside, or from another thread): stop
    // it; tpt_trainer_run deletes it. The stop is asked first: once the flag
    // is set, the trainer may be gone.
    if (s & tpt_trainer::kFreePending) return;  // freed already
    trainer->trainer.request_stop(tpt::Trainer::StopBy::Free);
    if (trainer->state.compare_exchange_weak(s, s | tpt_trainer::kFreePending)) return;
  }
  trainer->magic = 0;
  delete trainer;
}

tpt_status *tpt_trainer_set_run_step(tpt_trainer *trainer, tpt_run_step_fn run_step, void *user_data,
                                     void (*destroy)(void *)) {
  auto ud = std::make_shared<UserData>(user_data, destroy);  // destroy runs once, whatever happens
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    require(reinterpret_cast<void *>(run_step), "run_step");
    t.set_run_step([run_step, ud](tpt::Trainer &tr) {
      tpt_status *st = tpt::capi::scoped_call(TPT_SCOPE_FREE, [&] { return run_step(handle_of(tr), ud->data); });
      raise_status(st);
    });
  });
}

tpt_status *tpt_trainer_hooked_step(tpt_trainer *trainer, tpt_step_fn step, void *user_data) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    if (step) {
      StepCall call{step, user_data};
      t.hooked_step(run_c_step, &call);
    } else {
      t.hooked_step(nullptr, nullptr);
    }
  });
}

tpt_status *tpt_trainer_run(tpt_trainer *trainer) {
  bool entered = false;
  tpt_status *st = guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    int idle = 0;
    if (!trainer->state.compare_exchange_strong(idle, tpt_trainer::kRunning))
      tpt::fail(TPT_ERR_STATE,
                "the trainer is running already (called from inside its own run: a callback, run_step, step, feed "
                "or predicate); a trainer runs once");
    entered = true;
    t.run();
  });
  if (entered) {
    // library_owned is set before any run and never changes.
    if ((trainer->state.exchange(0) & tpt_trainer::kFreePending) && !trainer->library_owned) {  // freed meanwhile
      trainer->magic = 0;
      delete trainer;
    }
  }
  return st;
}

tpt_status *tpt_trainer_request_stop(tpt_trainer *trainer) {
  return guard(__func__, [&] { trainer_arg(trainer).request_stop(); });
}

void tpt_trainer_signal_stop(tpt_trainer *trainer, int signo) {
  // Async-signal-safe: no allocation, no lock, only the handle's magic word
  // and an atomic.
  if (trainer == nullptr || trainer->magic != kTrainerMagic || signo <= 0) return;
  trainer->trainer.request_signal_stop(signo);
}

tpt_status *tpt_trainer_stop_reason(const char **out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const std::string *r = trainer_arg(trainer).stop_reason();
    *out = r ? r->c_str() : nullptr;
  });
}

tpt_status *tpt_trainer_epoch_num(int64_t *out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = trainer_arg(trainer).epoch_num();
  });
}

tpt_status *tpt_trainer_local_step(int64_t *out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = trainer_arg(trainer).local_step();
  });
}

tpt_status *tpt_trainer_global_step(int64_t *out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = trainer_arg(trainer).global_step();
  });
}

tpt_status *tpt_trainer_set_global_step(tpt_trainer *trainer, int64_t step) {
  return guard(__func__, [&] { trainer_arg(trainer).set_global_step(step); });
}

tpt_status *tpt_trainer_logdir(const char **out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const tpt::Trainer &t = trainer_arg(trainer);
    *out = t.has_logdir() ? t.logdir().c_str() : nullptr;
  });
}

tpt_status *tpt_trainer_log(tpt_trainer *trainer, const char *message) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    t.log().info(require(message, "message"));
  });
}

// ------------------------------------------------------------------ outputs

tpt_status *tpt_trainer_set_output_scalar(tpt_trainer *trainer, const char *name, double value) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    tpt::Output o;
    o.scalar = value;
    t.set_output(name_arg(name, "name"), std::move(o));
  });
}

tpt_status *tpt_trainer_set_output(tpt_trainer *trainer, const char *name, const tpt_tensor *tensor) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    std::string key = name_arg(name, "name");
    tpt::Output o;
    o.tensor = std::make_shared<const at::Tensor>(tpt::capi::tensor_arg(tensor, "tensor"));
    t.set_output(key, std::move(o));
  });
}

namespace {
const tpt::Output &output_arg(const tpt::Trainer &t, const char *name) {
  std::string key = name_arg(name, "name");
  const tpt::Output *o = t.output(key);
  if (!o)
    tpt::fail(TPT_ERR_NOT_FOUND, "the latest hooked step published no output '" + key + "'" +
                                     (t.has_run_a_step() ? "" : " (no hooked step has run)"));
  return *o;
}
}  // namespace

tpt_status *tpt_trainer_output_scalar(double *out, const tpt_trainer *trainer, const char *name) {
  return guard(__func__, [&] {
    require(out, "out");
    const tpt::Output &o = output_arg(trainer_arg(trainer), name);
    if (!o.tensor) {
      *out = o.scalar;
      return;
    }
    const auto &t = *std::static_pointer_cast<const at::Tensor>(o.tensor);
    if (t.numel() != 1)
      tpt::invalid_argument(std::string("output '") + name + "' is a tensor of " + std::to_string(t.numel()) +
                            " elements, not a scalar");
    *out = t.item<double>();
  });
}

tpt_status *tpt_trainer_output(tpt_tensor **out, const tpt_trainer *trainer, const char *name) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const tpt::Output &o = output_arg(trainer_arg(trainer), name);
    if (o.tensor)
      tpt::capi::give(out, *std::static_pointer_cast<const at::Tensor>(o.tensor));
    else
      tpt::capi::give(out, at::scalar_tensor(o.scalar, at::kDouble));
  });
}

// ------------------------------------------------------------------ callbacks

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

tpt_status *tpt_trainer_add_callback(tpt_trainer *trainer, tpt_callback *callback) {
  return guard(__func__, [&] {
    std::unique_ptr<tpt::Callback> cb = callback ? take_callback(callback, "callback") : nullptr;
    tpt::Trainer &t = trainer_arg(trainer);
    require(cb.get(), "callback");
    t.add(std::move(cb), tpt::Group::User);
  });
}

tpt_status *tpt_trainer_add_monitor(tpt_trainer *trainer, tpt_callback *monitor) {
  return guard(__func__, [&] {
    std::unique_ptr<tpt::Callback> cb = monitor ? take_callback(monitor, "monitor") : nullptr;
    tpt::Trainer &t = trainer_arg(trainer);
    require(cb.get(), "monitor");
    t.add(std::move(cb), tpt::Group::Monitor);
  });
}

// ------------------------------------------------------------------ monitors

tpt_status *tpt_trainer_put_scalar(tpt_trainer *trainer, const char *name, double value) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    t.put_scalar(name_arg(name, "name"), value);
  });
}

namespace {
const tpt::ScalarHistory &history_arg(const tpt::Trainer &t, const char *name) {
  std::string key = name_arg(name, "name");
  const tpt::ScalarHistory *h = t.history(key);
  if (!h) tpt::fail(TPT_ERR_NOT_FOUND, "no scalar '" + key + "' was put");
  return *h;
}
}  // namespace

tpt_status *tpt_trainer_scalar_latest(double *value_out, int64_t *step_out, const tpt_trainer *trainer,
                                      const char *name) {
  return guard(__func__, [&] {
    require(value_out, "value_out");
    const tpt::ScalarHistory &h = history_arg(trainer_arg(trainer), name);
    *value_out = h.values.back();
    if (step_out) *step_out = h.steps.back();
  });
}

tpt_status *tpt_trainer_scalar_history(size_t *count_out, int64_t *steps, double *values, size_t capacity,
                                       const tpt_trainer *trainer, const char *name) {
  return guard(__func__, [&] {
    require(count_out, "count_out");
    const tpt::ScalarHistory &h = history_arg(trainer_arg(trainer), name);
    *count_out = h.values.size();
    size_t n = std::min(capacity, h.values.size());
    for (size_t i = 0; i < n; ++i) {
      if (steps) steps[i] = h.steps[i];
      if (values) values[i] = h.values[i];
    }
  });
}

namespace {

// An image argument as put_image takes it (H x W, H x W x C or, with
// `batch`, N x H x W x C; C = 1, 3 or 4; uint8 or floating point in
// [0, 255]) as a contiguous CPU uint8 N x H x W x C tensor.
at::Tensor image_u8(const tpt_tensor *image, bool batch) {
  at::Tensor img = tpt::capi::tensor_arg(image, "image");
  const int64_t d = img.dim();
  if (d < 2 || d > (batch ? 4 : 3))
    tpt::invalid_argument("image has " + std::to_string(d) + " dimensions: H x W, H x W x C" +
                          (batch ? " or N x H x W x C" : "") + " expected");
  if (d == 2) img = img.unsqueeze(-1);
  if (img.dim() == 3) img = img.unsqueeze(0);
  const int64_t c = img.size(3);
  if (c != 1 && c != 3 && c != 4)
    tpt::invalid_argument("image has " + std::to_string(c) + " channels in its last dimension: 1, 3 or 4 expected");
  if (img.size(0) < 1 || img.size(1) < 1 || img.size(2) < 1) tpt::invalid_argument("image is empty");
  if (img.scalar_type() == at::kByte) {
  } else if (img.is_floating_point()) {
    img = img.detach().to(at::kCPU, at::kFloat);
    if (!img.isfinite().all().item<bool>()) tpt::invalid_argument("image has values that are NaN or infinite");
    img = img.round().clamp(0, 255).to(at::kByte);
  } else {
    tpt::invalid_argument(std::string("image has dtype ") + c10::toString(img.scalar_type()) +
                          ": uint8, or floating point in [0, 255], expected");
  }
  return img.detach().to(at::kCPU).contiguous();
}

}  // namespace

tpt_status *tpt_trainer_put_image(tpt_trainer *trainer, const char *name, const tpt_tensor *image) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    std::string key = name_arg(name, "name");
    t.put_image(key, image_u8(image, /*batch=*/true));
  });
}

tpt_status *tpt_image_grid(tpt_tensor **out, const tpt_tensor *images, const tpt_image_grid_options *options) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    at::Tensor x = tpt::capi::tensor_arg(images, "images");
    tpt_image_grid_options o = TPT_IMAGE_GRID_OPTIONS_INIT;
    if (options) {
      check_options_version(options->version, TPT_IMAGE_GRID_OPTIONS_VERSION, "options", "TPT_IMAGE_GRID_OPTIONS_INIT");
      o = *options;
    }
    if (o.columns < 1) tpt::invalid_argument("options->columns is " + std::to_string(o.columns) + ": it must be at least 1");
    if (o.padding < 0 || o.padding > 4096)
      tpt::invalid_argument("options->padding is " + std::to_string(o.padding) + ": it must be in [0, 4096]");
    if (!(o.pad_value >= 0 && o.pad_value <= 255))
      tpt::invalid_argument("options->pad_value is " + std::to_string(o.pad_value) + ": it must be in [0, 255]");
    if (!std::isfinite(o.low) || !std::isfinite(o.high) || o.low > o.high)
      tpt::invalid_argument("options->low and high are " + std::to_string(o.low) + " and " + std::to_string(o.high) +
                            ": finite, low < high (or both equal: the images' own range) expected");
    if (x.dim() == 3) x = x.unsqueeze(1);
    if (x.dim() != 4)
      tpt::invalid_argument("images has " + std::to_string(x.dim()) +
                            " dimensions: N x C x H x W (C = 1, 3 or 4) or N x H x W expected");
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    if (c != 1 && c != 3 && c != 4)
      tpt::invalid_argument("images has " + std::to_string(c) + " channels in dimension 1: 1, 3 or 4 expected");
    if (n < 1 || h < 1 || w < 1) tpt::invalid_argument("images is empty");
    if (x.is_complex() || x.scalar_type() == at::kBool)
      tpt::invalid_argument(std::string("images has dtype ") + c10::toString(x.scalar_type()) + ": a real dtype expected");
    x = x.detach().to(at::kCPU, at::kFloat);
    if (!x.isfinite().all().item<bool>()) tpt::invalid_argument("images has values that are NaN or infinite");
    double lo = o.low, hi = o.high;
    if (lo == hi) {
      lo = x.min().item<double>();
      hi = x.max().item<double>();
    }
    x = hi > lo ? x.sub(lo).div_(hi - lo).clamp_(0, 1).mul_(255) : at::zeros_like(x);
    const int64_t p = o.padding, cols = std::min<int64_t>(o.columns, n), rows = (n + cols - 1) / cols;
    if ((h + p) * rows + p > (1 << 24) || (w + p) * cols + p > (1 << 24))
      tpt::invalid_argument("the grid would be larger than 2^24 pixels on a side");
    at::Tensor grid = at::full({c, (h + p) * rows + p, (w + p) * cols + p}, o.pad_value, at::kFloat);
    for (int64_t i = 0; i < n; ++i)
      grid.narrow(1, (i / cols) * (h + p) + p, h).narrow(2, (i % cols) * (w + p) + p, w).copy_(x[i]);
    // torchvision's save_image: + 0.5, truncated
    tpt::capi::give(out, grid.permute({1, 2, 0}).add(0.5).floor_().clamp_(0, 255).to(at::kByte).contiguous());
  });
}

tpt_status *tpt_image_write_png(const tpt_tensor *image, const char *path) {
  return guard(__func__, [&] {
    std::string file = name_arg(path, "path");
    at::Tensor img = image_u8(image, /*batch=*/false);
    const std::vector<uint8_t> png =
        tpt::encode_png(static_cast<const uint8_t *>(img.data_ptr()), img.size(1), img.size(2), img.size(3));
    // Written beside the file and renamed over it: a reader never sees half
    // an image, and a failed write leaves the old file.
    tpt::write_file_atomic(file, reinterpret_cast<const char *>(png.data()), png.size(), /*sync=*/false);
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

}  // extern "C"
