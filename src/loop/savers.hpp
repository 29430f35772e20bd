// tensorpack's ModelSaver, MinSaver and MaxSaver.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "loop/callback.hpp"

namespace tpt {

struct ModelSaverOptions {
  int64_t max_to_keep = 10;         // 0 keeps all
  double keep_every_n_hours = 0.5;  // one checkpoint per this many hours is never deleted; 0: none
  int64_t every_k_steps = 0;        // also save every k global steps (at TRIGGER_STEP)
  int64_t every_k_epochs = 1;       // save at TRIGGER_EPOCH of every k-th epoch; 0: never
  std::string dir;                  // empty: the trainer's log directory
};

// Saves model-<global_step> and the `checkpoint` index (base/checkpoint_file.hpp),
// atomically; chief only. IO errors are logged and training goes on.
std::unique_ptr<Callback> make_model_saver(ModelSaverOptions options);

// MinSaver / MaxSaver: when the latest value of `stat` is the best so far,
// copies the newest checkpoint (which must be of that step) to `filename`
// (default min-<stat> / max-<stat>) in `dir` (default: the log directory).
std::unique_ptr<Callback> make_best_saver(const std::string &stat, bool maximize, const std::string &filename,
                                          const std::string &dir);

class Trainer;
// The best checkpoint the trainer's MinSaver / MaxSaver of `stat` has kept
// (its path; nullptr: none yet), tensorpack's min-<stat> file, Lightning's
// best_model_path. TPT_ERR_NOT_FOUND, naming the stats it has, when no such
// saver was added.
const std::string *best_checkpoint(const Trainer &t, const std::string &stat);

}  // namespace tpt
