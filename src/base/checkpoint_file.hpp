// Checkpoint files: everything a training needs to go on exactly where it
// was (variables, optimizer slots, counters, random state, the input's
// position, callbacks' and moving summaries' state), the file format (a
// torch.save compatible archive that python3-torch's torch.load opens),
// atomic writes and the index of a checkpoint directory. docs/checkpoints.md
// describes the format. Taking a trainer's state: loop/checkpoint.hpp;
// restoring variables by name: model/restore.hpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/optimizer_state.hpp"
#include "base/run_end.hpp"

namespace tpt {

inline constexpr const char *kCheckpointFormat = "tptrain.checkpoint";
inline constexpr int64_t kCheckpointVersion = 1;

struct MovingSummaryState {
  std::string name;
  double decay = 0, biased = 0, value = 0;
  int64_t count = 0;
};

// Dynamic loss scaling's state (train/loss_scale.hpp), with the keys of
// PyTorch's GradScaler.state_dict().
struct LossScaleState {
  double scale = 65536, growth_factor = 2, backoff_factor = 0.5;
  int64_t growth_interval = 2000, growth_tracker = 0;
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
  std::optional<LossScaleState> loss_scaler;                   // none: no loss scaling
  std::optional<RunEnd> run_end;                               // none: the run went on after it
};

// The file's bytes, and back. decode validates every field against the
// others and throws TPT_ERR_INVALID_ARGUMENT naming `what` (the file) and
// the field; it never returns a half-read checkpoint.
std::vector<char> encode(const Checkpoint &ck);
Checkpoint decode(std::vector<char> bytes, const std::string &what);
// A zip archive with the trailer that makes it a checkpoint file (the fuzz
// target's way past the checksum).
std::vector<char> with_trailer(std::vector<char> archive);
// Whether `bytes` end with a checkpoint file's trailer.
bool is_checkpoint_file(const std::vector<char> &bytes);

// Why `state` (1-D uint8) is not a state LibTorch's CPU generator can take
// safely (its mt19937 position must lie inside its state), or "" when it is.
std::string check_cpu_generator_state(const at::Tensor &state);

// Writes `ck` to `path` atomically (base/files.hpp's AtomicFile: a
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

}  // namespace tpt
