// Reading the named tensors of a file written by python3-torch's
// torch.save: a zip archive (data.pkl, data/<key>) whose pickle is a dict
// or an OrderedDict (a state_dict, with its _metadata) of tensors or
// parameters, possibly nested. LibTorch's own unpickler reads only what
// LibTorch writes (it turns an OrderedDict into None and lacks SETITEM), and
// trusts the file; base/pickle.hpp's machine reads both, checked.
#include "base/torch_save.hpp"

#include <caffe2/serialize/inline_container.h>

#include <set>

#include "base/error.hpp"
#include "base/pickle.hpp"

namespace tpt {

namespace {

using pickle::Kind;
using pickle::Value;

constexpr size_t kMaxNesting = 32;

// The tensors of a dict of dicts, walked with a stack of our own (no
// recursion); each dict is entered once (a dict shared by two keys, or one
// that holds itself, is refused: a few hundred bytes of memo references could
// otherwise make a walk of 2^31 paths).
void flatten(const Value &root, std::vector<std::pair<std::string, at::Tensor>> &out, const std::string &what) {
  struct Frame {
    Value dict;
    std::string prefix;
    size_t next = 0;
  };
  std::vector<Frame> stack{{root, "", 0}};
  std::set<uint32_t> entered{root.id()};
  std::set<std::string> names;
  while (!stack.empty()) {
    Frame &f = stack.back();
    if (f.next == f.dict.size()) {
      stack.pop_back();
      continue;
    }
    size_t i = f.next++;
    Value k = f.dict.key(i), v = f.dict.value(i);
    if (!k.is(Kind::Str)) invalid_argument(what + ": a key that is " + pickle::kind_name(k.kind()) + ", not a string");
    std::string name = f.prefix.empty() ? std::string(k.str()) : f.prefix + "/" + std::string(k.str());
    if (v.is(Kind::Tensor)) {
      if (!names.insert(name).second) invalid_argument(what + ": the name '" + name + "' is given twice");
      out.emplace_back(name, v.tensor());
    } else if (v.is(Kind::Dict)) {
      if (stack.size() >= kMaxNesting) invalid_argument(what + ": dicts nested more than 32 deep (at '" + name + "')");
      if (!entered.insert(v.id()).second) invalid_argument(what + ": the dict at '" + name + "' appears twice (shared or holding itself)");
      stack.push_back(Frame{v, name, 0});
    }
    // other values (numbers, strings, lists: an epoch, a config) are not variables
  }
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> read_torch_save(const pickle::Bytes &archive, const std::string &what) {
  pickle::ZipIndex index = pickle::check_zip(archive->data(), archive->size(), what);
  index.bytes = archive;  // tensors are views of it
  if (index.record_size("data.pkl") < 0) invalid_argument(what + " has no data.pkl: not a torch.save archive");
  auto zip = pickle::open_zip(archive, what);
  pickle::Pickle pk(*zip, index, "data.pkl", what, pickle::Mode{}, archive->size() + pickle::read_limit());
  if (!pk.root().is(Kind::Dict))
    invalid_argument(what + " holds " + pickle::kind_name(pk.root().kind()) + ", not a dict (a state_dict) of tensors");
  std::vector<std::pair<std::string, at::Tensor>> out;
  flatten(pk.root(), out, what);
  return out;
}

}  // namespace tpt
