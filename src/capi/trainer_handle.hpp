// The trainer and callback handles, and what C API files that call back into
// host code share: turning a returned status into the loop's control flow,
// and user_data that is destroyed exactly once.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/handles.hpp"
#include "loop/trainer.hpp"

inline constexpr uint64_t kTrainerMagic = 0x7470745472616e72ull;   // "tptTranr"
inline constexpr uint64_t kCallbackMagic = 0x74707443616c6c62ull;  // "tptCallb"
inline constexpr uint64_t kInferencerMagic = 0x74707449666e6372ull;  // "tptIfncr"

namespace tpt::model {
class Model;
}
namespace tpt::parallel {
struct Distributed;
}

struct tpt_trainer {
  uint64_t magic = kTrainerMagic;
  tpt::Trainer trainer;
  std::shared_ptr<tpt::model::Model> model;  // set by tpt_trainer_set_model, for tpt_trainer_model
  // tpt_trainer_set_distributed: the job this trainer is one rank of.
  std::shared_ptr<tpt::parallel::Distributed> distributed;
  int32_t rank = 0, world_size = 1;
  // kRunning: tpt_trainer_run is in progress; a tpt_trainer_free meanwhile
  // (from the run's own callbacks, or another thread) stops the run and sets
  // kFreePending, and tpt_trainer_run deletes the trainer as it returns. One
  // word, so a free from another thread and the end of the run agree on who
  // deletes.
  static constexpr int kRunning = 1, kFreePending = 2;
  std::atomic<int> state{0};
  // Made and freed by the library (tpt_launch_train): tpt_trainer_free from
  // the host is a no-op on it.
  bool library_owned = false;
  explicit tpt_trainer(tpt::TrainerConfig config) : trainer(std::move(config)) { trainer.set_handle(this); }
};

struct tpt_callback {
  uint64_t magic = kCallbackMagic;
  std::unique_ptr<tpt::Callback> callback;
};

namespace tpt {
class Inferencer;
}
struct tpt_inferencer {
  uint64_t magic = kInferencerMagic;
  std::unique_ptr<tpt::Inferencer> inferencer;
  ~tpt_inferencer();  // src/capi/inference.cpp, where tpt::Inferencer is complete
};

namespace tpt::capi {

inline tpt_trainer *handle_of(tpt::Trainer &t) { return static_cast<tpt_trainer *>(t.handle()); }

inline tpt::Trainer &trainer_arg(tpt_trainer *t, const char *name = "trainer") {
  require(t, name);
  if (__builtin_expect(t->magic != kTrainerMagic, 0)) throw_not_live(name, "tpt_trainer");
  return t->trainer;
}

inline const tpt::Trainer &trainer_arg(const tpt_trainer *t, const char *name = "trainer") {
  return trainer_arg(const_cast<tpt_trainer *>(t), name);
}

// A non-empty name argument.
inline std::string name_arg(const char *name, const char *arg) {
  require(name, arg);
  if (*name == '\0') tpt::invalid_argument(std::string("argument '") + arg + "' is empty");
  return name;
}

// Takes ownership of a status returned by host code and turns it into the
// loop's control flow: NULL goes on, TPT_STOP stops, anything else fails with
// the same code and message.
inline void raise_status(tpt_status *st) {
  if (st == nullptr) return;
  tpt_code code = tpt_status_code(st);
  std::string message = tpt_status_message(st);
  tpt_status_free(st);
  if (code == TPT_STOP) throw tpt::StopTraining(message);
  throw tpt::Error(code, message, /*passthrough=*/true);
}

// Calls `destroy(user_data)` exactly once, when it goes out of scope.
struct UserData {
  void *data;
  void (*destroy)(void *);
  UserData(void *d, void (*f)(void *)) : data(d), destroy(f) {}
  ~UserData() {
    if (destroy) destroy(data);
  }
  UserData(const UserData &) = delete;
  UserData &operator=(const UserData &) = delete;
};

// Wraps a callback in a new handle the caller owns.
inline void give_callback(tpt_callback **out, std::unique_ptr<tpt::Callback> cb) {
  auto *h = new tpt_callback;
  h->callback = std::move(cb);
  *out = h;
}

// Takes a callback handle's content and frees the handle; `name` is the
// argument's, for the error when it is NULL or not live.
std::unique_ptr<tpt::Callback> take_callback(tpt_callback *cb, const char *name);

// tpt_trainer_options (NULL: the defaults) as the loop's config, checked.
tpt::TrainerConfig trainer_config(const tpt_trainer_options *options);

// An options struct's version: 1..max (older structs are shorter).
inline void check_options_version(uint32_t version, uint32_t max, const char *what, const char *init) {
  if (version < 1 || version > max)
    tpt::invalid_argument(std::string(what) + "->version is " + std::to_string(version) +
                          "; this library supports 1.." + std::to_string(max) + " (initialise with " + init + ")");
}

// A tensor of any dtype and shape as bytes (dtype, rank, sizes, elements),
// and back (src/capi/callback.cpp): the state of callbacks written in C.
std::vector<uint8_t> encode_tensor_state(const at::Tensor &t);
at::Tensor decode_tensor_state(const std::vector<uint8_t> &bytes, const std::string &who);

}  // namespace tpt::capi
