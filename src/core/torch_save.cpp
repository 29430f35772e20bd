// Reading the named tensors of a file written by python3-torch's
// torch.save: a zip archive (data.pkl, data/<key>) whose pickle is a dict
// or an OrderedDict (a state_dict, with its _metadata) of tensors or
// parameters, possibly nested. LibTorch's own unpickler reads only what
// LibTorch writes (it turns an OrderedDict into None and lacks SETITEM), so
// this is a small pickle machine for exactly that subset; anything else is
// an error naming the file and the object, never a crash: every read is
// bounds-checked and every stack access checked.
#include "core/torch_save.hpp"

#include <ATen/Functions.h>
#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <variant>

#include "core/error.hpp"

namespace tpt {

namespace {

struct Obj;
using Ref = std::shared_ptr<Obj>;

struct Global {
  std::string module, name;
};
struct Storage {
  at::ScalarType dtype;
  std::string key;
  int64_t numel;
};

// What the machine's stack holds.
struct Obj {
  enum Kind { None, Bool, Int, Float, Str, Tuple, List, Dict, GlobalK, StorageK, TensorK, Mark } kind = None;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<Ref> items;                        // Tuple, List
  std::vector<std::pair<Ref, Ref>> dict;         // Dict (ordered)
  Global g;
  Storage storage;
  at::Tensor tensor;
};

Ref make(Obj::Kind k) {
  auto o = std::make_shared<Obj>();
  o->kind = k;
  return o;
}

class Machine {
 public:
  Machine(const std::string &what, caffe2::serialize::PyTorchStreamReader &zip, const uint8_t *p, size_t n)
      : what_(what), zip_(zip), p_(p), n_(n) {}

  Ref run() {
    for (;;) {
      uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;                // PROTO
        case 0x95: bytes(8); break;              // FRAME
        case '(': push(make(Obj::Mark)); break;  // MARK
        case '.': {                              // STOP
          Ref r = pop();
          return r;
        }
        case 'N': push(make(Obj::None)); break;
        case 0x88: case 0x89: {
          Ref b = make(Obj::Bool);
          b->i = op == 0x88;
          push(b);
          break;
        }
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
          Ref f = make(Obj::Float);
          std::memcpy(&f->f, &v, 8);
          push(f);
          break;
        }
        case 'X': push(string(u32())); break;    // BINUNICODE
        case 0x8c: push(string(byte())); break;  // SHORT_BINUNICODE
        case 'U': push(string(byte())); break;   // SHORT_BINSTRING
        case 'T': push(string(u32())); break;    // BINSTRING
        case 'c': {                              // GLOBAL
          Ref g = make(Obj::GlobalK);
          g->g.module = line();
          g->g.name = line();
          push(g);
          break;
        }
        case 'q': memo(byte()); break;  // BINPUT
        case 'r': memo(u32()); break;   // LONG_BINPUT
        case 0x94: memo(memo_.size()); break;  // MEMOIZE
        case 'h': push(recall(byte())); break;  // BINGET
        case 'j': push(recall(u32())); break;   // LONG_BINGET
        case ')': push(make(Obj::Tuple)); break;
        case 't': {
          Ref t = make(Obj::Tuple);
          t->items = since_mark();
          push(t);
          break;
        }
        case 0x85: case 0x86: case 0x87: {
          size_t k = op - 0x84;
          Ref t = make(Obj::Tuple);
          t->items.resize(k);
          for (size_t j = k; j-- > 0;) t->items[j] = pop();
          push(t);
          break;
        }
        case ']': push(make(Obj::List)); break;
        case 'a': {
          Ref v = pop();
          target(Obj::List, "APPEND")->items.push_back(v);
          break;
        }
        case 'e': {
          std::vector<Ref> vs = since_mark();
          Ref l = target(Obj::List, "APPENDS");
          l->items.insert(l->items.end(), vs.begin(), vs.end());
          break;
        }
        case '}': push(make(Obj::Dict)); break;
        case 's': {
          Ref v = pop(), k = pop();
          target(Obj::Dict, "SETITEM")->dict.emplace_back(k, v);
          break;
        }
        case 'u': {
          std::vector<Ref> kv = since_mark();
          if (kv.size() % 2) bad("SETITEMS with an odd number of items");
          Ref d = target(Obj::Dict, "SETITEMS");
          for (size_t j = 0; j < kv.size(); j += 2) d->dict.emplace_back(kv[j], kv[j + 1]);
          break;
        }
        case 'Q': push(persistent(pop())); break;  // BINPERSID
        case 'R': {                                // REDUCE
          Ref args = pop(), fn = pop();
          push(reduce(fn, args));
          break;
        }
        case 'b': pop(); break;  // BUILD: a state_dict's _metadata, a tensor's state: not needed
        default: bad("pickle opcode 0x" + hex(op) + ", which torch.save files of tensors do not use");
      }
    }
  }

 private:
  [[noreturn]] void bad(const std::string &why) const {
    invalid_argument(what_ + " is not a torch.save file of tensors this reader understands: " + why);
  }
  static std::string hex(unsigned v) {
    const char *d = "0123456789abcdef";
    return std::string{d[(v >> 4) & 15], d[v & 15]};
  }
  const uint8_t *bytes(size_t k) {
    if (k > n_ - at_) bad("it ends in the middle of the pickle");
    const uint8_t *b = p_ + at_;
    at_ += k;
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
      if (s.size() > 256) bad("a global name longer than 256 characters");
      s += c;
    }
  }
  Ref integer(int64_t v) {
    Ref o = make(Obj::Int);
    o->i = v;
    return o;
  }
  Ref string(size_t k) {
    Ref o = make(Obj::Str);
    const uint8_t *b = bytes(k);
    o->s.assign(reinterpret_cast<const char *>(b), k);
    return o;
  }
  void push(Ref r) {
    if (stack_.size() > (1u << 20)) bad("a pickle stack deeper than 2^20");
    stack_.push_back(std::move(r));
  }
  Ref pop() {
    if (stack_.empty() || stack_.back()->kind == Obj::Mark) bad("a pickle that pops an empty stack");
    Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Ref target(Obj::Kind k, const char *op) {
    if (stack_.empty() || stack_.back()->kind != k) bad(std::string(op) + " on something else than a container");
    return stack_.back();
  }
  std::vector<Ref> since_mark() {
    size_t m = stack_.size();
    while (m > 0 && stack_[m - 1]->kind != Obj::Mark) --m;
    if (m == 0) bad("a pickle without its MARK");
    std::vector<Ref> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m - 1);
    return out;
  }
  void memo(size_t k) {
    if (stack_.empty()) bad("PUT on an empty stack");
    if (k > (1u << 24)) bad("a memo index beyond 2^24");
    if (memo_.size() <= k) memo_.resize(k + 1);
    memo_[k] = stack_.back();
  }
  Ref recall(size_t k) {
    if (k >= memo_.size() || !memo_[k]) bad("GET of memo " + std::to_string(k) + ", which was never PUT");
    return memo_[k];
  }

  // ('storage', torch.<Type>Storage, key, location, numel)
  Ref persistent(const Ref &pid) {
    if (pid->kind != Obj::Tuple || pid->items.size() < 5 || pid->items[0]->kind != Obj::Str ||
        pid->items[0]->s != "storage" || pid->items[1]->kind != Obj::GlobalK || pid->items[2]->kind != Obj::Str ||
        pid->items[4]->kind != Obj::Int)
      bad("a persistent id that is not a storage");
    static const std::map<std::string, at::ScalarType> types = {
        {"FloatStorage", at::kFloat}, {"DoubleStorage", at::kDouble}, {"HalfStorage", at::kHalf},
        {"BFloat16Storage", at::kBFloat16}, {"LongStorage", at::kLong}, {"IntStorage", at::kInt},
        {"ShortStorage", at::kShort}, {"CharStorage", at::kChar}, {"ByteStorage", at::kByte},
        {"BoolStorage", at::kBool}};
    auto t = types.find(pid->items[1]->g.name);
    if (pid->items[1]->g.module != "torch" || t == types.end())
      bad("a storage of type " + pid->items[1]->g.module + "." + pid->items[1]->g.name);
    Ref s = make(Obj::StorageK);
    s->storage = Storage{t->second, pid->items[2]->s, pid->items[4]->i};
    if (s->storage.numel < 0) bad("a storage of negative size");
    return s;
  }

  at::Tensor storage_tensor(const Storage &s) {
    auto found = storages_.find(s.key);
    if (found != storages_.end()) return found->second;
    std::string record = "data/" + s.key;
    if (!zip_.hasRecord(record)) bad("no record " + record + " for a storage");
    auto [data, size] = zip_.getRecord(record);
    size_t want = static_cast<size_t>(s.numel) * c10::elementSize(s.dtype);
    if (size != want) bad("record " + record + " has " + std::to_string(size) + " bytes, its storage " + std::to_string(want));
    at::Tensor t = at::empty({s.numel}, at::TensorOptions().dtype(s.dtype));
    if (want) std::memcpy(t.data_ptr(), data.get(), want);
    storages_[s.key] = t;
    return t;
  }

  std::vector<int64_t> ints(const Ref &t, const char *what) {
    if (t->kind != Obj::Tuple) bad(std::string(what) + " is not a tuple");
    std::vector<int64_t> v;
    for (const Ref &e : t->items) {
      if (e->kind != Obj::Int || e->i < 0) bad(std::string(what) + " holds a negative or non-integer entry");
      v.push_back(e->i);
    }
    return v;
  }

  Ref reduce(const Ref &fn, const Ref &args) {
    if (fn->kind != Obj::GlobalK || args->kind != Obj::Tuple) bad("REDUCE of something that is not a known class");
    const std::string name = fn->g.module + "." + fn->g.name;
    if (name == "collections.OrderedDict") return make(Obj::Dict);
    if (name == "torch._utils._rebuild_tensor_v2") {
      const auto &a = args->items;
      if (a.size() < 4 || a[0]->kind != Obj::StorageK || a[1]->kind != Obj::Int) bad("_rebuild_tensor_v2 with bad arguments");
      at::Tensor storage = storage_tensor(a[0]->storage);
      std::vector<int64_t> size = ints(a[2], "a tensor's size"), stride = ints(a[3], "a tensor's stride");
      if (size.size() != stride.size()) bad("a tensor whose size and stride differ in length");
      int64_t offset = a[1]->i, last = offset;
      if (offset < 0) bad("a tensor at a negative offset");
      bool empty = false;
      for (size_t j = 0; j < size.size(); ++j) {
        if (size[j] == 0) empty = true;
        else if (size[j] > 0 && stride[j] > (int64_t(1) << 40) / size[j]) bad("a tensor with huge strides");
        else last += (size[j] - 1) * stride[j];
      }
      if (!empty && last >= storage.numel()) bad("a tensor that reaches past its storage");
      Ref t = make(Obj::TensorK);
      t->tensor = storage.as_strided(size, stride, offset).clone();
      return t;
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != Obj::TensorK) bad("_rebuild_parameter without a tensor");
      return args->items[0];
    }
    bad("an object of " + name);
  }

  std::string what_;
  caffe2::serialize::PyTorchStreamReader &zip_;
  const uint8_t *p_;
  size_t n_, at_ = 0;
  std::vector<Ref> stack_, memo_;
  std::map<std::string, at::Tensor> storages_;
};

void flatten(const Ref &d, const std::string &prefix, std::vector<std::pair<std::string, at::Tensor>> &out,
             const std::string &what, int depth) {
  if (depth > 32) invalid_argument(what + ": dicts nested more than 32 deep");
  for (const auto &[k, v] : d->dict) {
    if (k->kind != Obj::Str) invalid_argument(what + ": a key that is not a string");
    std::string name = prefix.empty() ? k->s : prefix + "/" + k->s;
    if (v->kind == Obj::TensorK) out.emplace_back(name, v->tensor);
    else if (v->kind == Obj::Dict) flatten(v, name, out, what, depth + 1);
    // other values (numbers, strings, lists: an epoch, a config) are not variables
  }
}

}  // namespace

void check_zip(const char *data, size_t size, const std::string &what) {
  const auto *p = reinterpret_cast<const uint8_t *>(data);
  auto bad = [&](const std::string &why) { invalid_argument(what + " is not a whole zip archive (" + why + ")"); };
  auto u16 = [&](size_t at) { return static_cast<uint32_t>(p[at] | (p[at + 1] << 8)); };
  auto u32 = [&](size_t at) { return u16(at) | (u16(at + 2) << 16); };
  if (size < 22) bad("too short");
  // The end record: the last signature within the final 64 KiB + 22 bytes.
  size_t eocd = std::string::npos;
  for (size_t at = size - 22 + 1; at-- > 0 && size - at <= 65536 + 22;)
    if (u32(at) == 0x06054b50) {
      eocd = at;
      break;
    }
  if (eocd == std::string::npos) bad("no end of central directory record; truncated?");
  uint32_t entries = u16(eocd + 10), cd_size = u32(eocd + 12), cd_offset = u32(eocd + 16);
  if (entries == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
    // zip64 (archives over 4 GiB): the 64-bit records must lie inside the file too
    if (eocd < 20 || u32(eocd - 20) != 0x07064b50) bad("a zip64 archive without its locator");
    return;
  }
  if (static_cast<uint64_t>(cd_offset) + cd_size > eocd) bad("the central directory runs past its end record");
  size_t at = cd_offset, end = static_cast<size_t>(cd_offset) + cd_size;
  for (uint32_t i = 0; i < entries; ++i) {
    if (at + 46 > end || u32(at) != 0x02014b50) bad("central directory entry " + std::to_string(i) + " is damaged");
    uint32_t method = u16(at + 10), csize = u32(at + 20), usize = u32(at + 24);
    uint32_t name = u16(at + 28), extra = u16(at + 30), comment = u16(at + 32), local = u32(at + 42);
    if (at + 46 + static_cast<size_t>(name) + extra + comment > end) bad("central directory entry " + std::to_string(i) + " runs past the directory");
    if (csize == 0xffffffffu || usize == 0xffffffffu || local == 0xffffffffu) bad("zip64 fields in a small archive");
    if (method != 0 && method != 8) bad("an unknown compression method");
    if (method == 0 && csize != usize) bad("a stored entry whose sizes differ");
    if (static_cast<uint64_t>(local) + 30 > cd_offset || u32(local) != 0x04034b50) bad("a damaged local header");
    uint64_t data_at = static_cast<uint64_t>(local) + 30 + u16(local + 26) + u16(local + 28);
    if (data_at + csize > cd_offset) bad("an entry's data runs past the central directory");
    at += 46 + static_cast<size_t>(name) + extra + comment;
  }
}

std::vector<std::pair<std::string, at::Tensor>> read_torch_save(const std::string &path) {
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip;
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(TPT_ERR_IO, "cannot open " + path);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    check_zip(bytes.data(), bytes.size(), path);
    zip = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const Error &) {
    throw;
  } catch (const std::exception &e) {
    std::string m = e.what();
    if (auto nl = m.find('\n'); nl != std::string::npos) m.resize(nl);
    invalid_argument(path + " is not a torch.save archive (" + m + ")");
  }
  if (!zip->hasRecord("data.pkl")) invalid_argument(path + " has no data.pkl: not a torch.save archive");
  auto [data, size] = zip->getRecord("data.pkl");
  Machine m(path, *zip, static_cast<const uint8_t *>(data.get()), size);
  Ref root = m.run();
  if (root->kind != Obj::Dict) invalid_argument(path + " does not hold a dict (a state_dict) of tensors");
  std::vector<std::pair<std::string, at::Tensor>> out;
  flatten(root, "", out, path, 0);
  return out;
}

}  // namespace tpt
