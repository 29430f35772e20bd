// The checked zip archive and the pickle machine of base/pickle.hpp.
#include "base/pickle.hpp"

#include <ATen/Functions.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <set>
#include <unordered_map>

#include "base/error.hpp"

namespace tpt::pickle {

namespace {
std::atomic<uint64_t> g_read_limit{kDefaultReadLimit};
}

uint64_t read_limit() { return g_read_limit.load(std::memory_order_relaxed); }
void set_read_limit(uint64_t bytes) { g_read_limit.store(bytes, std::memory_order_relaxed); }

int64_t ZipIndex::record_size(const std::string &name) const {
  auto it = sizes.find(prefix + name);
  return it == sizes.end() ? -1 : static_cast<int64_t>(it->second);
}

bool valid_utf8(std::string_view s) {
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07, min = 0x10000;
    else return false;
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// ---------------------------------------------------------------- the zip

ZipIndex check_zip(const char *data, size_t size, const std::string &what) {
  const auto *p = reinterpret_cast<const uint8_t *>(data);
  auto bad = [&](const std::string &why) { invalid_argument(what + " is not a whole zip archive (" + why + ")"); };
  auto u16 = [&](uint64_t at) { return static_cast<uint32_t>(p[at] | (p[at + 1] << 8)); };
  auto u32 = [&](uint64_t at) { return u16(at) | (u16(at + 2) << 16); };
  auto u64 = [&](uint64_t at) { return static_cast<uint64_t>(u32(at)) | (static_cast<uint64_t>(u32(at + 4)) << 32); };
  if (size < 22) bad("too short");
  // The end record: the last signature within the final 64 KiB + 22 bytes.
  uint64_t eocd = UINT64_MAX;
  for (size_t at = size - 22 + 1; at-- > 0 && size - at <= 65536 + 22;)
    if (u32(at) == 0x06054b50) {
      eocd = at;
      break;
    }
  if (eocd == UINT64_MAX) bad("no end of central directory record; truncated?");
  if (u16(eocd + 4) != 0 || u16(eocd + 6) != 0) bad("an archive spread over several disks");
  uint64_t entries = u16(eocd + 10), cd_size = u32(eocd + 12), cd_offset = u32(eocd + 16);
  uint64_t cd_limit = eocd;  // the central directory ends before the records that follow it
  bool saturated = entries == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu;
  bool locator = eocd >= 20 && u32(eocd - 20) == 0x07064b50;
  if (saturated && !locator) bad("a zip64 archive without its locator");
  if (locator) {
    // zip64: the locator just before the end record, and the zip64 end record it
    // points to. A reader may take either record: where the small one is not
    // saturated, both must say the same.
    uint64_t rec = u64(eocd - 20 + 8);
    if (rec > eocd - 20 || eocd - 20 - rec < 56 || u32(rec) != 0x06064b50) bad("a damaged zip64 end record");
    if (u32(rec + 16) != 0 || u32(rec + 20) != 0 || u32(eocd - 20 + 4) != 0) bad("an archive spread over several disks");
    uint64_t e64 = u64(rec + 32), size64 = u64(rec + 40), offset64 = u64(rec + 48);
    if (u64(rec + 24) != e64) bad("a zip64 end record whose entry counts differ");
    if ((entries != 0xffff && entries != e64) || (cd_size != 0xffffffffu && cd_size != size64) ||
        (cd_offset != 0xffffffffu && cd_offset != offset64))
      bad("end records that disagree");
    entries = e64, cd_size = size64, cd_offset = offset64;
    cd_limit = rec;
  }
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) bad("the central directory runs past its end record");
  if (entries > cd_size / 46) bad("more entries than the central directory can hold");
  ZipIndex index;
  uint64_t at = cd_offset, end = cd_offset + cd_size, inflated = 0;
  const uint64_t allowed = static_cast<uint64_t>(size) + read_limit();
  for (uint64_t i = 0; i < entries; ++i) {
    std::string entry = "central directory entry " + std::to_string(i);
    if (end - at < 46 || u32(at) != 0x02014b50) bad(entry + " is damaged");
    uint32_t flags = u16(at + 8), method = u16(at + 10);
    uint64_t csize = u32(at + 20), usize = u32(at + 24);
    uint32_t name_len = u16(at + 28), extra_len = u16(at + 30), comment_len = u16(at + 32), disk = u16(at + 34);
    uint64_t local = u32(at + 42);
    if (end - at - 46 < static_cast<uint64_t>(name_len) + extra_len + comment_len) bad(entry + " runs past the directory");
    std::string name(data + at + 46, name_len);
    if (name.empty() || name.find('\0') != std::string::npos) bad(entry + " has an empty name or one with a NUL byte");
    entry += " ('" + name + "')";
    // zip64's extra field holds the sizes and the offset that do not fit in 32 bits, in this order.
    if (usize == 0xffffffffu || csize == 0xffffffffu || local == 0xffffffffu || disk == 0xffff) {
      uint64_t x = at + 46 + name_len, x_end = x + extra_len;
      bool found = false;
      while (x_end - x >= 4) {
        uint32_t id = u16(x), len = u16(x + 2);
        if (x_end - x - 4 < len) bad(entry + " has a damaged extra field");
        if (id == 0x0001) {
          uint64_t f = x + 4, f_end = f + len;
          auto take = [&](uint64_t &v) {
            if (f_end - f < 8) bad(entry + " has a short zip64 field");
            v = u64(f);
            f += 8;
          };
          if (usize == 0xffffffffu) take(usize);
          if (csize == 0xffffffffu) take(csize);
          if (local == 0xffffffffu) take(local);
          found = true;
          break;
        }
        x += 4 + len;
      }
      if (!found) bad(entry + " lacks the zip64 field its sizes call for");
      if (disk == 0xffff) bad("an archive spread over several disks");
    }
    if (disk != 0) bad("an archive spread over several disks");
    if (flags & 1) bad(entry + " is encrypted");
    if (method != 0 && method != 8) bad(entry + " has compression method " + std::to_string(method) + " (only stored and deflated entries are read)");
    if (method == 0 && csize != usize) bad(entry + " is stored but its sizes differ");
    if (local > cd_offset || cd_offset - local < 30 || u32(local) != 0x04034b50) bad(entry + " has a damaged local header");
    uint64_t data_at = local + 30 + u16(local + 26) + u16(local + 28);
    if (data_at > cd_offset || csize > cd_offset - data_at) bad(entry + "'s data runs past the central directory");
    if (usize > allowed - std::min(allowed, inflated))
      bad("its entries inflate to more than its " + std::to_string(size) + " bytes plus the read limit of " +
          std::to_string(read_limit()) + " bytes (tpt_set_checkpoint_read_limit raises it)");
    inflated += usize;
    if (!index.sizes.emplace(name, usize).second) bad("the name '" + name + "' is in it twice");
    if (method == 0) index.stored_at.emplace(name, data_at);
    index.names.push_back(name);
    at += 46 + static_cast<uint64_t>(name_len) + extra_len + comment_len;
  }
  if (index.names.empty()) bad("it has no entries");
  // LibTorch's reader: every record sits in the folder of the first one.
  size_t slash = index.names[0].find('/');
  if (slash == std::string::npos || slash == 0) bad("its first entry is not in a folder");
  index.prefix = index.names[0].substr(0, slash + 1);
  return index;
}

namespace {

class MemoryAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MemoryAdapter(Bytes bytes) : bytes_(std::move(bytes)) {}
  size_t size() const override { return bytes_->size(); }
  size_t read(uint64_t pos, void *buf, size_t n, const char * /*what*/) const override {
    if (pos >= bytes_->size()) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, bytes_->size() - pos));
    std::memcpy(buf, bytes_->data() + pos, n);
    return n;
  }

 private:
  Bytes bytes_;
};

}  // namespace

std::shared_ptr<caffe2::serialize::ReadAdapterInterface> memory_reader(Bytes bytes) {
  return std::make_shared<MemoryAdapter>(std::move(bytes));
}

std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open_zip(Bytes bytes, const std::string &what) {
  try {
    return std::make_unique<caffe2::serialize::PyTorchStreamReader>(memory_reader(std::move(bytes)));
  } catch (const c10::Error &e) {
    std::string m = first_line(e.what_without_backtrace());
    invalid_argument(what + " is not a readable archive (" + m + ")");
  }
}

// ---------------------------------------------------------------- the machine

const char *kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "a bool";
    case Kind::Int: return "an integer";
    case Kind::Float: return "a float";
    case Kind::Str: return "a string";
    case Kind::Tuple: return "a tuple";
    case Kind::List: return "a list";
    case Kind::Dict: return "a dict";
    case Kind::Global: return "a global";
    case Kind::Storage: return "a storage";
    case Kind::Tensor: return "a tensor";
    case Kind::Object: return "an object";
  }
  return "?";
}

namespace {

// 16 bytes per value: the kind, an index into a side table (strings, lists,
// tensors) and a payload (an integer, a float's bits).
struct Node {
  Kind kind;
  uint32_t a = 0;
  uint64_t b = 0;
};

struct StorageInfo {
  at::ScalarType dtype;
  int64_t numel;
  std::string record;
  at::Tensor data;  // Mode::make_tensors: loaded at its first tensor
};

// What each value costs in the budget, beyond its bytes.
constexpr uint64_t kNodeCost = 48, kItemCost = 8, kStringCost = 32;
constexpr size_t kMaxDims = 64;

}  // namespace

struct Pickle::Impl {
  std::vector<Node> nodes;
  std::vector<std::vector<uint32_t>> lists;  // Tuple, List, Dict (key, value, ...), Object (class, state)
  std::vector<std::string> strings;          // Str, Global
  std::vector<at::Tensor> tensors;
  uint64_t budget = 0;
};

class Machine {
 public:
  Machine(Pickle::Impl &m, caffe2::serialize::PyTorchStreamReader &zip, const ZipIndex &index, std::string what,
          Mode mode, const uint8_t *p, size_t n)
      : m_(m), zip_(zip), index_(index), what_(std::move(what)), mode_(mode), p_(p), n_(n) {}

  uint32_t run() {
    for (;;) {
      op_at_ = at_;
      uint8_t op = byte();
      switch (op) {
        case 0x80:  // PROTO
          if (byte() > 5) bad("pickle protocol above 5");
          break;
        case 0x95: bytes(8); break;  // FRAME: a hint
        case '(': marks_.push_back(stack_.size()); break;
        case '.': {  // STOP
          if (!marks_.empty() || stack_.size() != 1) bad("STOP with " + std::to_string(stack_.size()) + " values and " + std::to_string(marks_.size()) + " marks left (one value is expected)");
          return stack_.back();
        }
        case 'N': push(node(Kind::None)); break;
        case 0x88: push(node(Kind::Bool, 0, 1)); break;
        case 0x89: push(node(Kind::Bool, 0, 0)); break;
        case 'J': push(integer(static_cast<int32_t>(u32()))); break;
        case 'K': push(integer(byte())); break;
        case 'M': push(integer(u16())); break;
        case 0x8a: {  // LONG1
          size_t k = byte();
          if (k > 8) bad("an integer of " + std::to_string(k) + " bytes");
          const uint8_t *b = bytes(k);
          uint64_t v = 0;
          for (size_t j = 0; j < k; ++j) v |= static_cast<uint64_t>(b[j]) << (8 * j);
          if (k > 0 && k < 8 && (b[k - 1] & 0x80)) v |= ~uint64_t(0) << (8 * k);  // sign-extend
          push(integer(static_cast<int64_t>(v)));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          const uint8_t *b = bytes(8);
          uint64_t v = 0;
          for (int j = 0; j < 8; ++j) v = (v << 8) | b[j];
          push(node(Kind::Float, 0, v));
          break;
        }
        case 'X': push(string(u32())); break;    // BINUNICODE
        case 0x8c: push(string(byte())); break;  // SHORT_BINUNICODE
        case 0x8d: {                             // BINUNICODE8
          uint64_t k = static_cast<uint64_t>(u32());
          k |= static_cast<uint64_t>(u32()) << 32;
          push(string(k));
          break;
        }
        case 'c': {  // GLOBAL
          std::string module = line(), name = line();
          push(global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          uint32_t name = pop(), module = pop();
          if (kind(name) != Kind::Str || kind(module) != Kind::Str) bad("STACK_GLOBAL of something else than two strings");
          push(global(m_.strings[m_.nodes[module].a], m_.strings[m_.nodes[name].a]));
          break;
        }
        case 'q': put(byte()); break;
        case 'r': put(u32()); break;
        case 0x94: put(static_cast<uint32_t>(memo_.size())); break;  // MEMOIZE
        case 'h': push(get(byte())); break;
        case 'j': push(get(u32())); break;
        case ')': push(container(Kind::Tuple, {})); break;
        case 't': push(container(Kind::Tuple, since_mark("TUPLE"))); break;
        case 0x85: case 0x86: case 0x87: {
          size_t k = op - 0x84u;
          std::vector<uint32_t> items(k);
          for (size_t j = k; j-- > 0;) items[j] = pop();
          push(container(Kind::Tuple, std::move(items)));
          break;
        }
        case ']': push(container(Kind::List, {})); break;
        case 'a': {
          uint32_t v = pop();
          add(target(Kind::List, "APPEND"), {v});
          break;
        }
        case 'e': {
          std::vector<uint32_t> vs = since_mark("APPENDS");
          add(target(Kind::List, "APPENDS"), vs);
          break;
        }
        case '}': push(container(Kind::Dict, {})); break;
        case 's': {
          uint32_t v = pop(), k = pop();
          add(target(Kind::Dict, "SETITEM"), {k, v});
          break;
        }
        case 'u': {
          std::vector<uint32_t> kv = since_mark("SETITEMS");
          if (kv.size() % 2) bad("SETITEMS with an odd number of items");
          add(target(Kind::Dict, "SETITEMS"), kv);
          break;
        }
        case 'Q': push(persistent(pop())); break;  // BINPERSID
        case 'R': {                                // REDUCE
          uint32_t args = pop(), fn = pop();
          push(reduce(fn, args));
          break;
        }
        case 0x81: {  // NEWOBJ
          uint32_t args = pop(), cls = pop();
          push(newobj(cls, args));
          break;
        }
        case 'b': {  // BUILD
          uint32_t state = pop(), obj = top("BUILD");
          build(obj, state);
          break;
        }
        default:
          bad("pickle opcode 0x" + hex(op) + ", which these files do not use");
      }
    }
  }

 private:
  [[noreturn]] void bad(const std::string &why) const {
    invalid_argument(what_ + " is refused: " + why + " (pickle byte " + std::to_string(op_at_) + ")");
  }
  static std::string hex(unsigned v) {
    const char *d = "0123456789abcdef";
    return std::string{d[(v >> 4) & 15], d[v & 15]};
  }
  void charge(uint64_t cost) {
    if (cost > m_.budget) bad("reading it takes more memory than its size plus the read limit of " + std::to_string(read_limit()) + " bytes (tpt_set_checkpoint_read_limit raises it)");
    m_.budget -= cost;
  }
  const uint8_t *bytes(uint64_t k) {
    if (k > n_ - at_) bad("it ends in the middle of an opcode");
    const uint8_t *b = p_ + at_;
    at_ += static_cast<size_t>(k);
    return b;
  }
  uint8_t byte() { return *bytes(1); }
  uint32_t u16() {
    const uint8_t *b = bytes(2);
    return b[0] | (b[1] << 8);
  }
  uint32_t u32() {
    const uint8_t *b = bytes(4);
    return static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) | (static_cast<uint32_t>(b[2]) << 16) |
           (static_cast<uint32_t>(b[3]) << 24);
  }
  std::string line() {
    std::string s;
    for (;;) {
      char c = static_cast<char>(byte());
      if (c == '\n') return s;
      if (s.size() >= 256) bad("a global name longer than 256 characters");
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
      if (!ok) bad("a global name with the character 0x" + hex(static_cast<uint8_t>(c)));
      s += c;
    }
  }

  Kind kind(uint32_t id) const { return m_.nodes[id].kind; }
  uint32_t node(Kind k, uint32_t a = 0, uint64_t b = 0) {
    charge(kNodeCost);
    if (m_.nodes.size() >= UINT32_MAX) bad("too many values");
    m_.nodes.push_back(Node{k, a, b});
    return static_cast<uint32_t>(m_.nodes.size() - 1);
  }
  uint32_t integer(int64_t v) { return node(Kind::Int, 0, static_cast<uint64_t>(v)); }
  uint32_t string(uint64_t k) {
    const uint8_t *b = bytes(k);
    std::string_view s(reinterpret_cast<const char *>(b), static_cast<size_t>(k));
    if (!valid_utf8(s)) bad("a string that is not valid UTF-8");
    return text(Kind::Str, std::string(s));
  }
  uint32_t text(Kind k, std::string s) {
    charge(kStringCost + s.size());
    m_.strings.push_back(std::move(s));
    return node(k, static_cast<uint32_t>(m_.strings.size() - 1));
  }
  uint32_t container(Kind k, std::vector<uint32_t> items) {
    charge(kItemCost * (items.size() + 3));
    m_.lists.push_back(std::move(items));
    return node(k, static_cast<uint32_t>(m_.lists.size() - 1));
  }
  std::vector<uint32_t> &items(uint32_t id) { return m_.lists[m_.nodes[id].a]; }
  void add(uint32_t id, const std::vector<uint32_t> &more) {
    charge(kItemCost * more.size());
    auto &v = items(id);
    v.insert(v.end(), more.begin(), more.end());
  }

  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(uint32_t id) {
    charge(kItemCost);
    stack_.push_back(id);
  }
  uint32_t pop() {
    if (stack_.size() <= floor()) bad("an opcode that takes a value from an empty stack");
    uint32_t r = stack_.back();
    stack_.pop_back();
    return r;
  }
  uint32_t top(const char *op) {
    if (stack_.size() <= floor()) bad(std::string(op) + " on an empty stack");
    return stack_.back();
  }
  uint32_t target(Kind k, const char *op) {
    uint32_t id = top(op);
    if (kind(id) != k) bad(std::string(op) + " on " + kind_name(kind(id)));
    return id;
  }
  std::vector<uint32_t> since_mark(const char *op) {
    if (marks_.empty()) bad(std::string(op) + " without its MARK");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  void put(uint32_t k) {
    uint32_t v = top("PUT");
    if (memo_.size() >= (1u << 24) && !memo_.count(k)) bad("more than 2^24 memo entries");
    charge(kItemCost * 4);
    memo_[k] = v;
  }
  uint32_t get(uint32_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) bad("GET of memo " + std::to_string(k) + ", which was never PUT");
    return it->second;
  }

  // ---- globals and what they build

  uint32_t global(const std::string &module, const std::string &name) {
    static const std::set<std::string> known = {
        "collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
        "torch._utils._rebuild_parameter_with_state", "torch.jit._pickle.restore_type_tag",
        "torch.jit._pickle.build_intlist", "torch.jit._pickle.build_doublelist", "torch.jit._pickle.build_boollist",
        "torch.jit._pickle.build_tensorlist", "torch.jit._pickle.build_genericlist"};
    std::string full = module + "." + name;
    bool ok = known.count(full) || (module == "torch" && storage_type(name));
    if (mode_.objects) {
      bool ts_class = module.rfind("__torch__", 0) == 0 && module.rfind("__torch__.torch.classes", 0) != 0;
      ok = ok || ts_class || full == "torch.device";
    }
    if (!ok) bad("the global " + full + ", which these files do not use");
    return text(Kind::Global, full);
  }
  static const at::ScalarType *storage_type(const std::string &name) {
    static const std::map<std::string, at::ScalarType> types = {
        {"FloatStorage", at::kFloat}, {"DoubleStorage", at::kDouble}, {"HalfStorage", at::kHalf},
        {"BFloat16Storage", at::kBFloat16}, {"LongStorage", at::kLong}, {"IntStorage", at::kInt},
        {"ShortStorage", at::kShort}, {"CharStorage", at::kChar}, {"ByteStorage", at::kByte},
        {"BoolStorage", at::kBool}};
    auto it = types.find(name);
    return it == types.end() ? nullptr : &it->second;
  }
  const std::string &global_name(uint32_t id) { return m_.strings[m_.nodes[id].a]; }

  // ('storage', torch.<Type>Storage, key, location, numel)
  uint32_t persistent(uint32_t pid) {
    auto is_str = [&](uint32_t id) { return kind(id) == Kind::Str; };
    if (kind(pid) != Kind::Tuple) bad("a persistent id that is not a storage tuple");
    const auto pv = items(pid);
    if (pv.size() != 5 || !is_str(pv[0]) || m_.strings[m_.nodes[pv[0]].a] != "storage" || kind(pv[1]) != Kind::Global ||
        !is_str(pv[2]) || !is_str(pv[3]) || kind(pv[4]) != Kind::Int)
      bad("a persistent id that is not ('storage', type, key, location, numel)");
    const std::string &type = global_name(pv[1]);
    const at::ScalarType *dtype = type.rfind("torch.", 0) == 0 ? storage_type(type.substr(6)) : nullptr;
    if (!dtype) bad("a storage of type " + type);
    const std::string &key = m_.strings[m_.nodes[pv[2]].a];
    if (key.empty() || key.size() > 64) bad("a storage key of " + std::to_string(key.size()) + " characters");
    for (char c : key)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
        bad("the storage key '" + key + "', which is not a record name");
    if (m_.strings[m_.nodes[pv[3]].a].size() > 64) bad("a storage location longer than 64 characters");
    int64_t numel = static_cast<int64_t>(m_.nodes[pv[4]].b);
    if (numel < 0) bad("storage '" + key + "' of " + std::to_string(numel) + " elements");
    auto found = storage_index_.find(key);
    if (found != storage_index_.end()) {
      const StorageInfo &s = storages_[found->second];
      if (s.dtype != *dtype || s.numel != numel)
        bad("storage '" + key + "' given twice, as " + std::to_string(numel) + " " + c10::toString(*dtype) + " and as " +
            std::to_string(s.numel) + " " + c10::toString(s.dtype));
      return node(Kind::Storage, found->second);
    }
    std::string record = "data/" + key;
    int64_t have = index_.record_size(record);
    if (have < 0) bad("storage '" + key + "' has no record " + record);
    uint64_t want;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel), c10::elementSize(*dtype), &want) ||
        want != static_cast<uint64_t>(have))
      bad("storage '" + key + "' is " + std::to_string(numel) + " " + c10::toString(*dtype) + " elements, but its record " +
          record + " has " + std::to_string(have) + " bytes");
    storages_.push_back(StorageInfo{*dtype, numel, record, {}});
    storage_index_[key] = storages_.size() - 1;
    return node(Kind::Storage, static_cast<uint32_t>(storages_.size() - 1));
  }

  std::vector<int64_t> ints(uint32_t t, const char *what) {
    if (kind(t) != Kind::Tuple) bad(std::string("a tensor whose ") + what + " is not a tuple");
    const auto &v = items(t);
    if (v.size() > kMaxDims) bad(std::string("a tensor whose ") + what + " has " + std::to_string(v.size()) + " dimensions");
    std::vector<int64_t> out;
    for (uint32_t e : v) {
      if (kind(e) != Kind::Int || static_cast<int64_t>(m_.nodes[e].b) < 0)
        bad(std::string("a tensor whose ") + what + " holds a negative or non-integer entry");
      out.push_back(static_cast<int64_t>(m_.nodes[e].b));
    }
    return out;
  }

  bool empty_dict(uint32_t id) { return kind(id) == Kind::Dict && items(id).empty(); }

  uint32_t rebuild_tensor(uint32_t args) {
    const auto a = items(args);
    if (a.size() != 6 && a.size() != 7) bad("_rebuild_tensor_v2 with " + std::to_string(a.size()) + " arguments");
    if (kind(a[0]) != Kind::Storage || kind(a[1]) != Kind::Int || kind(a[4]) != Kind::Bool)
      bad("_rebuild_tensor_v2 whose arguments are not (storage, offset, size, stride, requires_grad, hooks)");
    if (!empty_dict(a[5])) bad("a tensor with backward hooks");
    if (a.size() == 7 && !empty_dict(a[6])) bad("a tensor with metadata (conjugate or negative bits) this reader does not apply");
    StorageInfo &s = storages_[m_.nodes[a[0]].a];
    int64_t offset = static_cast<int64_t>(m_.nodes[a[1]].b);
    std::vector<int64_t> size = ints(a[2], "size"), stride = ints(a[3], "stride");
    if (size.size() != stride.size()) bad("a tensor whose size and stride differ in length");
    if (offset < 0) bad("a tensor at offset " + std::to_string(offset));
    // numel, and the last element the view reaches, without overflow.
    uint64_t numel = 1, last = static_cast<uint64_t>(offset);
    for (size_t j = 0; j < size.size(); ++j)
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(size[j]), &numel)) bad("a tensor whose sizes overflow");
    std::string where = std::string("a ") + c10::toString(s.dtype) + " tensor of size " + shape(size) + " and stride " + shape(stride) +
                        " at offset " + std::to_string(offset) + " over " + std::to_string(s.numel) + " elements of " + s.record;
    if (numel == 0) {
      if (static_cast<uint64_t>(offset) > static_cast<uint64_t>(s.numel)) bad(where + " starts past its storage");
    } else {
      for (size_t j = 0; j < size.size(); ++j) {
        uint64_t reach;
        if (__builtin_mul_overflow(static_cast<uint64_t>(size[j] - 1), static_cast<uint64_t>(stride[j]), &reach) ||
            __builtin_add_overflow(last, reach, &last))
          bad(where + " reaches past its storage");
      }
      if (last >= static_cast<uint64_t>(s.numel)) bad(where + " reaches past its storage");
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, c10::elementSize(s.dtype), &nbytes)) bad(where + " is too large");
    if (!mode_.make_tensors) {
      m_.tensors.emplace_back();
      return node(Kind::Tensor, static_cast<uint32_t>(m_.tensors.size() - 1));
    }
    if (!s.data.defined()) {
      const uint64_t bytes_ = static_cast<uint64_t>(s.numel) * c10::elementSize(s.dtype);
      auto check_bools = [&](const uint8_t *raw) {
        if (s.dtype == at::kBool)
          for (uint64_t i = 0; i < bytes_; ++i)
            if (raw[i] > 1) bad("a bool record " + s.record + " with a byte that is not 0 or 1");
      };
      // A stored record inside bytes the caller shares: the tensor is a view of
      // them (torch.save aligns records to 64 bytes), kept alive by the tensor.
      // const_cast: LibTorch's tensors take void*; a checkpoint's tensors are
      // read, or copied into variables, never written in place.
      auto at_ = index_.bytes ? index_.stored_at.find(index_.prefix + s.record) : index_.stored_at.end();
      if (at_ != index_.stored_at.end() && bytes_ > 0 && at_->second <= index_.bytes->size() &&
          bytes_ <= index_.bytes->size() - at_->second &&
          reinterpret_cast<uintptr_t>(index_.bytes->data() + at_->second) % alignof(std::max_align_t) == 0) {
        const auto *raw = reinterpret_cast<const uint8_t *>(index_.bytes->data() + at_->second);
        check_bools(raw);
        auto holder = index_.bytes;
        s.data = at::from_blob(const_cast<uint8_t *>(raw), {s.numel}, [holder](void *) {},
                               at::TensorOptions().dtype(s.dtype));
      } else {
        charge(bytes_);
        at::DataPtr data;
        size_t got = 0;
        try {
          std::tie(data, got) = zip_.getRecord(s.record);
        } catch (const c10::Error &e) {
          std::string m = first_line(e.what_without_backtrace());
          bad("its record " + s.record + " cannot be read (" + m + ")");
        }
        if (got != bytes_) bad(s.record + " inflates to " + std::to_string(got) + " bytes, not the " + std::to_string(bytes_) + " it declares");
        const auto *raw = static_cast<const uint8_t *>(data.get());
        check_bools(raw);
        if (bytes_ == 0 || reinterpret_cast<uintptr_t>(raw) % alignof(std::max_align_t) != 0) {
          s.data = at::empty({s.numel}, at::TensorOptions().dtype(s.dtype));
          if (bytes_ > 0) std::memcpy(s.data.data_ptr(), raw, bytes_);
        } else {
          // The record's own buffer becomes the storage (no second copy of the file's tensors).
          auto holder = std::make_shared<at::DataPtr>(std::move(data));
          void *p = holder->get();
          s.data = at::from_blob(p, {s.numel}, [holder](void *) {},  // holder goes with the storage
                                 at::TensorOptions().dtype(s.dtype));
        }
      }
    }
    bool whole = offset == 0 && numel == static_cast<uint64_t>(s.numel);
    for (int64_t j = static_cast<int64_t>(size.size()) - 1, expect = 1; whole && j >= 0; --j) {
      if (size[j] != 1 && stride[j] != expect) whole = false;
      expect *= size[j];
    }
    at::Tensor t;
    if (whole) {
      t = s.data.view(size);
    } else {
      charge(nbytes);
      t = s.data.as_strided(size, stride, offset).clone(at::MemoryFormat::Contiguous);
    }
    m_.tensors.push_back(t);
    return node(Kind::Tensor, static_cast<uint32_t>(m_.tensors.size() - 1));
  }
  static std::string shape(const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }

  // A TorchScript type, as restore_type_tag gives it: short, brackets nested a little.
  void check_type_text(const std::string &t) {
    if (t.size() > 4096) bad("a type tag of " + std::to_string(t.size()) + " characters");
    int depth = 0;
    for (char c : t) {
      if (c == '[' || c == '(') {
        if (++depth > 32) bad("a type tag nested more than 32 deep");
      } else if (c == ']' || c == ')') {
        --depth;
      }
    }
  }

  uint32_t reduce(uint32_t fn, uint32_t args) {
    if (kind(fn) != Kind::Global) bad("REDUCE of " + std::string(kind_name(kind(fn))));
    if (kind(args) != Kind::Tuple) bad("REDUCE with arguments that are not a tuple");
    const std::string &name = global_name(fn);
    const auto a = items(args);
    if (name == "collections.OrderedDict") {
      if (!a.empty()) bad("an OrderedDict made from arguments");
      return container(Kind::Dict, {});
    }
    if (name == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(args);
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (a.size() < 3 || a.size() > 4 || kind(a[0]) != Kind::Tensor) bad(name + " without a tensor");
      if (!empty_dict(a[2])) bad("a parameter with backward hooks");
      return a[0];
    }
    if (name == "torch.jit._pickle.restore_type_tag") {
      if (a.size() != 2 || kind(a[1]) != Kind::Str) bad("restore_type_tag without (value, type)");
      check_type_text(m_.strings[m_.nodes[a[1]].a]);
      return a[0];
    }
    if (name.rfind("torch.jit._pickle.build_", 0) == 0) {
      if (a.size() != 1 || kind(a[0]) != Kind::List) bad(name + " of something else than a list");
      return a[0];
    }
    if (name == "torch.device") {
      if (a.size() != 1 || kind(a[0]) != Kind::Str || m_.strings[m_.nodes[a[0]].a].size() > 64) bad("torch.device of something else than its name");
      return container(Kind::Object, {fn});
    }
    bad("REDUCE of " + name);
  }

  uint32_t newobj(uint32_t cls, uint32_t args) {
    if (!mode_.objects || kind(cls) != Kind::Global || global_name(cls).rfind("__torch__", 0) != 0)
      bad("NEWOBJ of something else than a TorchScript class");
    if (kind(args) != Kind::Tuple) bad("NEWOBJ with arguments that are not a tuple");
    return container(Kind::Object, {cls});
  }

  void build(uint32_t obj, uint32_t state) {
    switch (kind(obj)) {
      case Kind::Object:
        if (items(obj).size() != 1) bad("BUILD of an object twice");
        add(obj, {state});
        return;
      case Kind::Dict:  // an OrderedDict's attributes (a state_dict's _metadata): not needed
        return;
      default:
        bad(std::string("BUILD of ") + kind_name(kind(obj)));
    }
  }

  Pickle::Impl &m_;
  caffe2::serialize::PyTorchStreamReader &zip_;
  const ZipIndex &index_;
  std::string what_;
  Mode mode_;
  const uint8_t *p_;
  size_t n_, at_ = 0, op_at_ = 0;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
  std::vector<StorageInfo> storages_;
  std::map<std::string, size_t> storage_index_;
};

Pickle::Pickle(caffe2::serialize::PyTorchStreamReader &zip, const ZipIndex &index, const std::string &record,
               const std::string &what, Mode mode, uint64_t budget)
    : impl_(std::make_unique<Impl>()) {
  impl_->budget = budget;
  int64_t size = index.record_size(record);
  if (size < 0) invalid_argument(what + " has no record " + record);
  at::DataPtr data;
  size_t got = 0;
  try {
    std::tie(data, got) = zip.getRecord(record);
  } catch (const c10::Error &e) {
    std::string m = first_line(e.what_without_backtrace());
    invalid_argument(what + ": cannot read its record " + record + " (" + m + ")");
  }
  if (got != static_cast<uint64_t>(size)) invalid_argument(what + ": its record " + record + " is damaged");
  Machine m(*impl_, zip, index, what + " (" + record + ")", mode, static_cast<const uint8_t *>(data.get()), got);
  root_ = m.run();
}

Pickle::~Pickle() = default;

uint64_t Pickle::budget_left() const { return impl_->budget; }

// ---------------------------------------------------------------- values

namespace {
// A reader asking a value for what its kind does not have is our bug, not the file's.
[[noreturn]] void wrong_kind(Kind k, const char *what) {
  fail(TPT_ERR_INTERNAL, std::string("pickle value: ") + what + " of " + kind_name(k));
}
}  // namespace

Kind Value::kind() const { return p_->impl_->nodes[id_].kind; }

int64_t Value::as_int() const {
  if (!is(Kind::Int) && !is(Kind::Bool)) wrong_kind(kind(), "as_int");
  return static_cast<int64_t>(p_->impl_->nodes[id_].b);
}

double Value::as_float() const {
  if (!is(Kind::Float)) wrong_kind(kind(), "as_float");
  double d;
  uint64_t b = p_->impl_->nodes[id_].b;
  std::memcpy(&d, &b, 8);
  return d;
}

std::string_view Value::str() const {
  if (!is(Kind::Str)) wrong_kind(kind(), "str");
  return p_->impl_->strings[p_->impl_->nodes[id_].a];
}

const std::string &Value::global() const {
  if (!is(Kind::Global)) wrong_kind(kind(), "global");
  return p_->impl_->strings[p_->impl_->nodes[id_].a];
}

namespace {
bool is_container(Kind k) { return k == Kind::Tuple || k == Kind::List || k == Kind::Dict || k == Kind::Object; }
}  // namespace

size_t Value::size() const {
  if (!is_container(kind())) wrong_kind(kind(), "size");
  const auto &v = p_->impl_->lists[p_->impl_->nodes[id_].a];
  return kind() == Kind::Dict ? v.size() / 2 : v.size();
}

Value Value::item(size_t i) const {
  if (!is_container(kind()) || is(Kind::Dict)) wrong_kind(kind(), "item");
  return Value(p_, p_->impl_->lists[p_->impl_->nodes[id_].a].at(i));
}

Value Value::key(size_t i) const {
  if (!is(Kind::Dict)) wrong_kind(kind(), "key");
  return Value(p_, p_->impl_->lists[p_->impl_->nodes[id_].a].at(2 * i));
}

Value Value::value(size_t i) const {
  if (!is(Kind::Dict)) wrong_kind(kind(), "value");
  return Value(p_, p_->impl_->lists[p_->impl_->nodes[id_].a].at(2 * i + 1));
}

const at::Tensor &Value::tensor() const {
  if (!is(Kind::Tensor)) wrong_kind(kind(), "tensor");
  const at::Tensor &t = p_->impl_->tensors[p_->impl_->nodes[id_].a];
  if (!t.defined()) fail(TPT_ERR_INTERNAL, "pickle value: a tensor that was checked, not made");
  return t;
}

}  // namespace tpt::pickle
