// Reading the zip archives of torch.save, tptrain's checkpoints and
// torch.jit.save without trusting them: the archive's structure is checked
// before LibTorch's zip reader sees it, and the pickles are run by a pickle
// machine of ours, which allows only the opcodes and globals these files
// use, checks every stack access, memo reference and string, keeps values in
// a flat table (no recursion on the file's nesting, when it is read or when
// it is freed), and checks every tensor's dtype, sizes, strides and offset
// against its record's real length with overflow-safe arithmetic before a
// view is made. What a file may make the reader allocate beyond its own size
// is bounded by the read limit (tpt_set_checkpoint_read_limit).
// docs/checkpoints.md, "Checkpoints from others".
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace caffe2::serialize {
class PyTorchStreamReader;
class ReadAdapterInterface;
}

namespace tpt::pickle {

// Bytes a file may make a reader allocate beyond the file's own size
// (entries inflated past their compressed size, tensors wider than their
// records, the pickle machine's tables). Process-wide; default kDefaultReadLimit.
inline constexpr uint64_t kDefaultReadLimit = uint64_t(256) << 20;
uint64_t read_limit();
void set_read_limit(uint64_t bytes);

// A checked zip archive: its entries' names (unique) and inflated sizes, and
// the folder its records sit in (LibTorch's archive name: "archive/data.pkl").
struct ZipIndex {
  std::string prefix;                     // "archive/"
  std::map<std::string, uint64_t> sizes;  // full entry name -> inflated size
  std::vector<std::string> names;         // in the archive's order
  std::map<std::string, uint64_t> stored_at;  // full entry name -> offset of a stored entry's bytes
  // The archive's bytes, when the caller shares them (set after check_zip):
  // a tensor of a stored record is then a view of them, not a copy.
  std::shared_ptr<const std::vector<char>> bytes;
  // The inflated size of record `name` (under the prefix), or -1 if absent.
  int64_t record_size(const std::string &name) const;
};

// Checks a zip archive's structure (the end records, zip64's included, every
// central directory entry and the local header and data it points to lie
// inside the file and agree; names are unique; the entries inflate to at
// most the file's size plus the read limit) before LibTorch's zip reader,
// which trusts them, sees it. TPT_ERR_INVALID_ARGUMENT naming `what`.
ZipIndex check_zip(const char *data, size_t size, const std::string &what);

// LibTorch's reading of bytes in memory (kept alive by the reader), and its
// zip reader over them: the bytes checked are the bytes read (a file that
// changes between the check and the read cannot slip through).
using Bytes = std::shared_ptr<const std::vector<char>>;
std::shared_ptr<caffe2::serialize::ReadAdapterInterface> memory_reader(Bytes bytes);
// TPT_ERR_INVALID_ARGUMENT naming `what` when LibTorch's reader refuses them.
std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open_zip(Bytes bytes, const std::string &what);

enum class Kind : uint8_t { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Storage, Tensor, Object };
const char *kind_name(Kind k);

// What a pickle may hold and what becomes of its tensors.
struct Mode {
  // Tensors are made (CPU, their own memory); else only checked against
  // their records (a TorchScript archive, which LibTorch then loads).
  bool make_tensors = true;
  // TorchScript's objects: NEWOBJ and BUILD of __torch__ classes, torch.device.
  bool objects = false;
};

class Pickle;

// A value of a pickle (a view: valid while its Pickle lives).
class Value {
 public:
  Value(const Pickle *p, uint32_t id) : p_(p), id_(id) {}
  Kind kind() const;
  bool is(Kind k) const { return kind() == k; }
  int64_t as_int() const;             // Int or Bool
  double as_float() const;            // Float
  std::string_view str() const;       // Str (valid UTF-8)
  const std::string &global() const;  // Global: "module.name"
  size_t size() const;                // Tuple, List: items; Dict: pairs
  Value item(size_t i) const;         // Tuple, List
  Value key(size_t i) const;          // Dict
  Value value(size_t i) const;        // Dict
  const at::Tensor &tensor() const;   // Tensor (Mode::make_tensors)
  uint32_t id() const { return id_; }

 private:
  const Pickle *p_;
  uint32_t id_;
};

// Runs the pickle `record` (a name under the archive's prefix: "data.pkl")
// of an archive that check_zip accepted. TPT_ERR_INVALID_ARGUMENT naming
// `what` and the offending opcode, object or tensor.
class Pickle {
 public:
  Pickle(caffe2::serialize::PyTorchStreamReader &zip, const ZipIndex &index, const std::string &record,
         const std::string &what, Mode mode, uint64_t budget);
  ~Pickle();
  Pickle(const Pickle &) = delete;
  Pickle &operator=(const Pickle &) = delete;
  Value root() const { return Value(this, root_); }
  // Bytes of the budget left (for the next pickle of the same archive).
  uint64_t budget_left() const;

 private:
  friend class Value;
  friend class Machine;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint32_t root_ = 0;
};

// Whether `s` is valid UTF-8 (Python's strict decoding: no overlong forms,
// no surrogates, nothing past U+10FFFF).
bool valid_utf8(std::string_view s);

}  // namespace tpt::pickle
