// The trainer: its handle, the loop, outputs, monitors, and how it gets its
// model: simple, towers, distributed, train ops, GAN, resume
// (include/tptrain/trainer.h).
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
#include "capi/data_handle.hpp"
#include "capi/model_handle.hpp"
#include "capi/trainer_handle.hpp"
#include "dist/world.hpp"
#include "loop/checkpoint.hpp"
#include "loop/savers.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "train/input.hpp"
#include "train/strategy.hpp"

using tpt::capi::check_options_version;
using tpt::capi::check_taken;
using tpt::capi::dataflow_arg;
using tpt::capi::guard;
using tpt::capi::handle_of;
using tpt::capi::image_u8;
using tpt::capi::live;
using tpt::capi::name_arg;
using tpt::capi::path_arg;
using tpt::capi::raise_status;
using tpt::capi::require;
using tpt::capi::take_callback;
using tpt::capi::take_input;
using tpt::capi::tensor_arg;
using tpt::capi::trainer_arg;
using tpt::capi::UserData;

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
  if (tpt::enum_int(o.strategy) < TPT_STRATEGY_SIMPLE || tpt::enum_int(o.strategy) > TPT_STRATEGY_ASYNC)
    tpt::invalid_argument(name + "->strategy " + std::to_string(tpt::enum_int(o.strategy)) + " is not a tpt_strategy");
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
    tpt::invalid_argument(name + "->master_port is " + std::to_string(o.master_port) +
                          ": it must be in [1, 65535] (0: MASTER_PORT, or any free port for a one-process job)");
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
    else if (options->version == 4)  // version 4 ends before precision
      std::memcpy(&o, options, offsetof(tpt_trainer_options, precision));
    else if (options->version == 5)  // version 5 ends before loss_scaling
      std::memcpy(&o, options, offsetof(tpt_trainer_options, loss_scaling));
    else if (options->version == 6)  // version 6 ends before continue_stopped
      std::memcpy(&o, options, offsetof(tpt_trainer_options, continue_stopped));
    else
      o = *options;
  }
  if (o.stop_on_signals < -1 || o.stop_on_signals > 1)
    tpt::invalid_argument("options->stop_on_signals must be 1 (on), 0 (from TPTRAIN_STOP_ON_SIGNALS) or -1 (off), got " +
                          std::to_string(o.stop_on_signals));
  if (tpt::enum_int(o.precision) < TPT_PRECISION_FP32 || tpt::enum_int(o.precision) > TPT_PRECISION_FP16_MIXED)
    tpt::invalid_argument("options->precision " + std::to_string(tpt::enum_int(o.precision)) +
                          " is not a tpt_precision (TPT_PRECISION_FP32, _BF16_MIXED or _FP16_MIXED)");
  const tpt_loss_scaling &ls = o.loss_scaling;
  if (tpt::enum_int(ls.mode) < TPT_LOSS_SCALING_AUTO || tpt::enum_int(ls.mode) > TPT_LOSS_SCALING_OFF)
    tpt::invalid_argument("options->loss_scaling.mode " + std::to_string(tpt::enum_int(ls.mode)) +
                          " is not a tpt_loss_scaling_mode (TPT_LOSS_SCALING_AUTO, _ON or _OFF)");
  if (!(ls.init_scale > 0 && ls.init_scale <= 3.4028234663852886e38))
    tpt::invalid_argument("options->loss_scaling.init_scale must be > 0 and a finite float32, got " +
                          std::to_string(ls.init_scale));
  if (!(ls.growth_factor > 1 && std::isfinite(ls.growth_factor)))
    tpt::invalid_argument("options->loss_scaling.growth_factor must be a finite number > 1, got " +
                          std::to_string(ls.growth_factor));
  if (!(ls.backoff_factor > 0 && ls.backoff_factor < 1))
    tpt::invalid_argument("options->loss_scaling.backoff_factor must be in (0, 1), got " +
                          std::to_string(ls.backoff_factor));
  if (ls.growth_interval < 1)
    tpt::invalid_argument("options->loss_scaling.growth_interval must be >= 1, got " +
                          std::to_string(ls.growth_interval));
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
  if (tpt::enum_int(o.logdir_action) < TPT_LOGDIR_REFUSE || tpt::enum_int(o.logdir_action) > TPT_LOGDIR_ASK)
    tpt::invalid_argument("options->logdir_action " + std::to_string(tpt::enum_int(o.logdir_action)) +
                          " is not a tpt_logdir_action");
  if (tpt::enum_int(o.progress) < TPT_PROGRESS_AUTO || tpt::enum_int(o.progress) > TPT_PROGRESS_OFF)
    tpt::invalid_argument("options->progress " + std::to_string(tpt::enum_int(o.progress)) +
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
  c.continue_stopped = o.continue_stopped != 0;
  c.stop_on_signals = o.stop_on_signals;
  c.precision = o.precision;
  c.loss_scaling = o.loss_scaling;
  return c;
}

}  // namespace tpt::capi

namespace {
const tpt::Output &output_arg(const tpt::Trainer &t, const char *name) {
  std::string key = name_arg(name, "name");
  const tpt::Output *o = t.output(key);
  if (!o)
    tpt::fail(TPT_ERR_NOT_FOUND, "the latest hooked step published no output '" + key + "'" +
                                     (t.has_run_a_step() ? "" : " (no hooked step has run)"));
  return *o;
}
const tpt::ScalarHistory &history_arg(const tpt::Trainer &t, const char *name) {
  std::string key = name_arg(name, "name");
  const tpt::ScalarHistory *h = t.monitors().history(key);
  if (!h) tpt::fail(TPT_ERR_NOT_FOUND, "no scalar '" + key + "' was put");
  return *h;
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
    const tpt_input_options *io = config->version >= 5 ? config->input_options : nullptr;
    if (config->input) {
      check_taken(in, config->input, "config->input");
      if (io)
        tpt::invalid_argument("config->input_options is set with config->input: it shapes the input made from "
                              "config->dataflow (give the input's options to tpt_input_from_dataflow)");
    } else {  // tensorpack's automatic QueueInput around a dataflow
      in = tpt::capi::input_of(tpt::capi::dataflow_arg(df, "config->dataflow"), io, "config->input_options");
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

tpt_status *tpt_trainer_request_stop_because(tpt_trainer *trainer, const char *reason) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    t.request_stop(name_arg(reason, "reason"));
  });
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

tpt_status *tpt_trainer_best_checkpoint(const char **out, const tpt_trainer *trainer, const char *stat) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const std::string *p = tpt::best_checkpoint(trainer_arg(trainer), name_arg(stat, "stat"));
    *out = p ? p->c_str() : nullptr;
  });
}

tpt_status *tpt_trainer_steps_per_epoch(int64_t *out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = trainer_arg(trainer).steps_per_epoch();
  });
}

tpt_status *tpt_trainer_resumed_from(const char **out, const tpt_trainer *trainer) {
  return guard(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const std::string *r = trainer_arg(trainer).resumed_from();
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

tpt_status *tpt_trainer_put_scalar(tpt_trainer *trainer, const char *name, double value) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    t.monitors().put_scalar(name_arg(name, "name"), value);
  });
}

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

tpt_status *tpt_trainer_put_image(tpt_trainer *trainer, const char *name, const tpt_tensor *image) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    std::string key = name_arg(name, "name");
    t.monitors().put_image(key, image_u8(image, /*batch=*/true));
  });
}

tpt_status *tpt_trainer_resume(tpt_trainer *trainer, const char *path) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    std::string p = path_arg(path, "path");
    if (t.phase() != tpt::Trainer::Phase::Idle) tpt::fail(TPT_ERR_STATE, "the trainer has run already: resume before tpt_trainer_run");
    auto ck = std::make_shared<const tpt::Checkpoint>(tpt::read_checkpoint(tpt::resolve_checkpoint(p)));
    t.resume_from(std::move(ck));
  });
}

tpt_status *tpt_trainer_save_checkpoint(tpt_trainer *trainer, const char *path) {
  return guard(__func__, [&] {
    tpt::Trainer &t = trainer_arg(trainer);
    std::string p = path_arg(path, "path");
    if (t.phase() == tpt::Trainer::Phase::Idle || t.phase() == tpt::Trainer::Phase::Done)
      tpt::fail(TPT_ERR_STATE, "the trainer is not running: a checkpoint is saved from its callbacks");
    tpt::write_checkpoint(p, tpt::take_checkpoint(t));
  });
}
