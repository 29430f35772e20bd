// Checkpoints: everything a training needs to go on exactly where it was
// (variables, optimizer slots, counters, random state, the input's position,
// callbacks' and moving summaries' state), the file format (a torch.save
// compatible archive that python3-torch's torch.load opens), atomic writes,
// the index of a checkpoint directory, and restoring variables by name.
// docs/checkpoints.md describes the format.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tpt {

class Trainer;

namespace model {
class Model;
}

inline constexpr const char *kCheckpointFormat = "tptrain.checkpoint";
inline constexpr int64_t kCheckpointVersion = 1;

// An optimizer's state: its kind and hyper-parameters, and per trainable
// variable (by name) its slots (momentum buffers, Adam's moments) and step.
struct OptimizerState {
  std::string kind;
  std::map<std::string, double> hparams;
  int64_t micro_steps = 0;  // gradient accumulation in progress
  std::map<std::string, std::map<std::string, at::Tensor>> slots;
  std::map<std::string, int64_t> steps;
  std::map<std::string, at::Tensor> grads;  // accumulated gradients (micro_steps > 0)
};

struct MovingSummaryState {
  std::string name;
  double decay = 0, biased = 0, value = 0;
  int64_t count = 0;
};

struct Checkpoint {
  std::string source;  // "checkpoint <path>": for messages
  int64_t global_step = 0;
  int64_t epoch_num = 0;
  int64_t local_step = -1;
  // Where the loop goes on: the first run_step after this checkpoint.
  int64_t next_epoch = 1;
  int64_t next_step = 0;
  std::vector<std::pair<std::string, at::Tensor>> variables;  // creation order
  std::vector<std::string> trainable;
  std::optional<OptimizerState> optimizer;
  std::map<std::string, OptimizerState> train_ops;             // a custom trainer's, by op name
  std::vector<uint8_t> input;                                  // empty: the input has no state
  std::map<std::string, std::vector<uint8_t>> callbacks;       // by callback key
  std::vector<MovingSummaryState> summaries;
  at::Tensor rng_cpu;                                          // LibTorch's default CPU generator
  // The multi-tower strategies' base seed of the towers' own generators
  // (each tower's draws of a step follow from it, the rank, the tower and
  // the step); none: another strategy.
  std::optional<int64_t> tower_seed;
};

// The file's bytes, and back. decode validates every field against the
// others and throws TPT_ERR_INVALID_ARGUMENT naming `what` (the file) and
// the field; it never returns a half-read checkpoint.
std::vector<char> encode(const Checkpoint &ck);
Checkpoint decode(std::vector<char> bytes, const std::string &what);
// A zip archive with the trailer that makes it a checkpoint file (the fuzz
// target's way past the checksum).
std::vector<char> with_trailer(std::vector<char> archive);

// Why `state` (1-D uint8) is not a state LibTorch's CPU generator can take
// safely (its mt19937 position must lie inside its state), or "" when it is.
std::string check_cpu_generator_state(const at::Tensor &state);

// Writes `ck` to `path` atomically (core/log.hpp's write_file_atomic: a
// temporary file, fsync, rename, fsync of the directory): a reader sees the
// old file or the new one, never part of one.
void write_checkpoint(const std::string &path, const Checkpoint &ck);
// Reads and validates a checkpoint file (TPT_ERR_IO, TPT_ERR_INVALID_ARGUMENT naming it).
Checkpoint read_checkpoint(const std::string &path);

// The checkpoint directory's index, tensorpack's `checkpoint` file:
//   model_checkpoint_path: "model-120"
//   all_model_checkpoint_paths: "model-60"
//   all_model_checkpoint_paths: "model-120"
struct CheckpointIndex {
  std::string latest;             // file name, relative to the directory
  std::vector<std::string> all;   // oldest first
};
std::optional<CheckpointIndex> read_index(const std::string &dir);
void write_index(const std::string &dir, const CheckpointIndex &index);
// A checkpoint file, or a directory (its index's latest): the file's path.
std::string resolve_checkpoint(const std::string &path);

// The trainer's whole state, between two run_steps (TPT_ERR_STATE inside one).
// Its tensors share storage with the live ones (no copy): encode it before
// training goes on.
Checkpoint take_checkpoint(Trainer &trainer);

// Restoring variables by name into a model (all or nothing: nothing changes
// unless every check passes).
struct RestoreOptions {
  bool ignore_missing = false;     // model variables the file lacks
  bool ignore_unexpected = true;   // file tensors the model lacks (optimizer slots, other heads)
  bool ignore_shape_mismatch = false;
  std::string prefix;              // prepended to the model's names to find them in the file
  std::map<std::string, std::string> name_map;  // model name -> name in the file
};
// From a tptrain checkpoint, a state_dict saved by torch.save (a dict of
// tensors), or a TorchScript module's parameters and buffers. Returns the
// names restored.
std::vector<std::string> restore_variables(model::Model &model, const std::string &path, const RestoreOptions &o);
// The named tensors of such a file.
std::vector<std::pair<std::string, at::Tensor>> read_named_tensors(const std::string &path);

}  // namespace tpt
