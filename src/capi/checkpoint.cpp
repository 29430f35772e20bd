// C API section "Checkpoints and resume": ModelSaver, MinSaver/MaxSaver,
// resuming a trainer, saving from a callback, restoring a model's variables.
#include <ATen/Functions.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/checkpoint.hpp"
#include "core/pickle.hpp"
#include "core/savers.hpp"
#include "dtype.hpp"
#include "model/model.hpp"
#include "model_handle.hpp"
#include "trainer_handle.hpp"

using tpt::capi::check_options_version;
using tpt::capi::dtype_of;
using tpt::capi::give_callback;
using tpt::capi::guard;
using tpt::capi::require;
using tpt::capi::trainer_arg;

namespace {

std::string path_arg(const char *path, const char *name) {
  require(path, name);
  if (*path == '\0') tpt::invalid_argument(std::string("argument '") + name + "' is empty");
  return path;
}

std::string optional_string(const char *s) { return s ? s : ""; }

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

extern "C" {

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

tpt_status *tpt_set_checkpoint_read_limit(uint64_t bytes) {
  return guard(__func__, [&] {
    if (bytes > (uint64_t(1) << 62)) tpt::invalid_argument("bytes is " + std::to_string(bytes) + "; at most 2^62");
    tpt::pickle::set_read_limit(bytes);
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
    if (!m->built()) tpt::fail(TPT_ERR_STATE, "the model is not built: tpt_model_build first, then restore");
    std::vector<std::string> done = tpt::restore_variables(*m, p, ro);
    if (n_restored) *n_restored = done.size();
  });
}

}  // extern "C"
