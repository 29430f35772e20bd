// Calling dispatcher operators by name: see ops.hpp.
#include "model/ops.hpp"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "base/error.hpp"
#include "base/names.hpp"
#include "model/dtype.hpp"
#include "model/model.hpp"

namespace tpt::ops {

const char *kind_name(ArgKind kind) noexcept {
  switch (kind) {
    case ArgKind::None: return "None";
    case ArgKind::Tensor: return "tensor";
    case ArgKind::Int: return "int";
    case ArgKind::Double: return "double";
    case ArgKind::Bool: return "bool";
    case ArgKind::IntList: return "int[]";
    case ArgKind::DoubleList: return "double[]";
    case ArgKind::TensorList: return "tensor[]";
    case ArgKind::String: return "string";
    case ArgKind::Dtype: return "dtype";
  }
  return "?";
}

namespace {

// ------------------------------------------------------------ the operator cache

// Resolution order of overloads, TorchScript's: the order in which they were
// registered (native_functions.yaml's for aten), as the JIT's operator table
// keeps it; ties of cost go to the earlier one. Overloads the table lacks
// come after, the plain one first, then by name.
void sort_overloads(const std::string &name, std::vector<std::string> &overloads) {
  std::unordered_map<std::string, size_t> position;
  try {
    const auto ops = torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(name));
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i]) position.emplace(ops[i]->schema().overload_name(), i);
  } catch (const std::exception &) {  // not a qualified name: by name alone
  }
  std::sort(overloads.begin(), overloads.end(), [&](const std::string &a, const std::string &b) {
    auto pa = position.find(a), pb = position.find(b);
    size_t ia = pa == position.end() ? SIZE_MAX : pa->second, ib = pb == position.end() ? SIZE_MAX : pb->second;
    if (ia != ib) return ia < ib;
    if (a.empty() != b.empty()) return a.empty();
    return a < b;
  });
}

using OverloadList = std::shared_ptr<const std::vector<std::string>>;

class Registry {
 public:
  // The overload names registered for `name` (some may lack a schema), or
  // null. A miss rescans the dispatcher once.
  OverloadList find(const std::string &name) {
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (scanned_) {
        auto it = ops_.find(name);
        if (it != ops_.end()) return it->second;
      }
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    scan_locked();
    auto it = ops_.find(name);
    return it == ops_.end() ? nullptr : it->second;
  }

  std::vector<std::string> names() {
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (scanned_) return names_locked();
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (!scanned_) scan_locked();
    return names_locked();
  }

 private:
  void scan_locked() {
    std::unordered_map<std::string, std::vector<std::string>> found;
    for (const c10::OperatorName &n : c10::Dispatcher::singleton().getAllOpNames())
      found[n.name].push_back(n.overload_name);
    std::unordered_map<std::string, OverloadList> ops;
    ops.reserve(found.size());
    for (auto &entry : found) {
      sort_overloads(entry.first, entry.second);
      ops.emplace(entry.first,
                  std::make_shared<const std::vector<std::string>>(std::move(entry.second)));
    }
    ops_.swap(ops);
    scanned_ = true;
  }

  std::vector<std::string> names_locked() const {
    std::vector<std::string> out;
    out.reserve(ops_.size());
    for (const auto &entry : ops_) out.push_back(entry.first);
    return out;
  }

  std::shared_mutex mu_;
  std::unordered_map<std::string, OverloadList> ops_;
  bool scanned_ = false;
};

Registry &registry() {
  static Registry *r = new Registry();  // never destroyed: usable during exit
  return *r;
}

c10::optional<c10::OperatorHandle> find_schema(const std::string &name, const std::string &overload) {
  return c10::Dispatcher::singleton().findSchema(c10::OperatorName(name, overload));
}

std::string full_name(const std::string &name, const std::string &overload) {
  return overload.empty() ? name : name + "." + overload;
}

std::string schema_text(const c10::FunctionSchema &schema) {
  std::ostringstream s;
  s << schema;
  return s.str();
}

std::string base_of(const std::string &qualified) {
  auto p = qualified.find("::");
  return p == std::string::npos ? qualified : qualified.substr(p + 2);
}

[[noreturn]] void unknown_operator(const std::string &name) {
  std::string message = "unknown operator '" + name + "'";
  auto near = similar_names(name);
  if (!near.empty()) {
    message += "; did you mean ";
    for (size_t i = 0; i < near.size(); ++i) message += (i ? ", " : "") + near[i];
    message += "?";
  }
  tpt::invalid_argument(message);
}

// ------------------------------------------------------------ argument matching

bool is_out_variant(const std::string &overload, const c10::FunctionSchema &schema) {
  if (overload == "out") return true;
  if (overload.size() >= 4 && overload.compare(overload.size() - 4, 4, "_out") == 0) return true;
  for (const c10::Argument &a : schema.arguments())
    if (a.is_out()) return true;
  return false;
}

std::string describe_args(const std::vector<Arg> &args) {
  std::string s = "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += ", ";
    if (!args[i].name.empty()) s += args[i].name + "=";
    s += kind_name(args[i].kind);
  }
  return s + ")";
}

// Converts `a` to an IValue for an argument of type `type` (a real type:
// ScalarType, SymInt, ... as they are). `n` is the N of int[N]. On success
// adds the conversions made to `cost` (0: exact). On failure `detail` may
// say more than "wants T, got K".
bool convert(const c10::Type &type, c10::optional<int32_t> n, const Arg &a, c10::IValue &out,
             int &cost, std::string &detail) {
  using c10::TypeKind;
  switch (type.kind()) {
    case TypeKind::OptionalType:
      if (a.kind == ArgKind::None) {
        out = c10::IValue();
        return true;
      }
      return convert(*type.expectRef<c10::OptionalType>().getElementType(), n, a, out, cost, detail);
    case TypeKind::TensorType:
      if (a.kind != ArgKind::Tensor) return false;
      out = a.tensor;
      return true;
    case TypeKind::NumberType:  // Scalar
      switch (a.kind) {
        case ArgKind::Int: out = c10::IValue(a.i); break;
        case ArgKind::Double: out = c10::IValue(a.d); break;
        case ArgKind::Bool: out = c10::IValue(a.i != 0); break;
        default: return false;
      }
      cost += 1;
      return true;
    case TypeKind::IntType:
    case TypeKind::SymIntType:
      if (a.kind == ArgKind::Int) {
        out = c10::IValue(a.i);
        return true;
      }
      if (a.kind == ArgKind::Bool) {
        out = c10::IValue(a.i);
        cost += 1;
        return true;
      }
      return false;
    case TypeKind::FloatType:
    case TypeKind::SymFloatType:
      if (a.kind == ArgKind::Double) {
        out = c10::IValue(a.d);
        return true;
      }
      if (a.kind == ArgKind::Int) {
        out = c10::IValue(static_cast<double>(a.i));
        cost += 1;
        return true;
      }
      return false;
    case TypeKind::BoolType:
      if (a.kind == ArgKind::Bool) {
        out = c10::IValue(a.i != 0);
        return true;
      }
      if (a.kind == ArgKind::Int) {
        if (a.i != 0 && a.i != 1) {
          detail = "an int for a bool must be 0 or 1, got " + std::to_string(a.i);
          return false;
        }
        out = c10::IValue(a.i != 0);
        cost += 1;
        return true;
      }
      return false;
    case TypeKind::StringType:
      if (a.kind != ArgKind::String) return false;
      out = c10::IValue(a.str);
      return true;
    case TypeKind::ScalarTypeType:
      if (a.kind != ArgKind::Dtype) return false;
      out = c10::IValue(static_cast<int64_t>(a.dtype));
      return true;
    case TypeKind::ListType: {
      const c10::Type &elem = *type.expectRef<c10::ListType>().getElementType();
      switch (elem.kind()) {
        case TypeKind::IntType:
        case TypeKind::SymIntType:
          if (a.kind == ArgKind::IntList) {
            out = c10::IValue(c10::List<int64_t>(a.ints));
            return true;
          }
          if (a.kind == ArgKind::Int && n) {  // int[2] stride=1 -> [1, 1]
            out = c10::IValue(c10::List<int64_t>(std::vector<int64_t>(static_cast<size_t>(*n), a.i)));
            return true;
          }
          return false;
        case TypeKind::FloatType:
          if (a.kind == ArgKind::DoubleList) {
            out = c10::IValue(c10::List<double>(a.doubles));
            return true;
          }
          if (a.kind == ArgKind::Double && n) {
            out = c10::IValue(c10::List<double>(std::vector<double>(static_cast<size_t>(*n), a.d)));
            return true;
          }
          return false;
        case TypeKind::BoolType: {
          if (a.kind != ArgKind::IntList) return false;
          c10::List<bool> list;
          list.reserve(a.ints.size());
          for (size_t k = 0; k < a.ints.size(); ++k) {
            if (a.ints[k] != 0 && a.ints[k] != 1) {
              detail = "entry " + std::to_string(k) + " is " + std::to_string(a.ints[k]) +
                       "; a bool[] takes 0 or 1";
              return false;
            }
            list.push_back(a.ints[k] != 0);
          }
          out = c10::IValue(std::move(list));
          return true;
        }
        case TypeKind::NumberType: {  // Scalar[]
          c10::List<c10::Scalar> list;
          if (a.kind == ArgKind::IntList) {
            for (int64_t v : a.ints) list.push_back(c10::Scalar(v));
          } else if (a.kind == ArgKind::DoubleList) {
            for (double v : a.doubles) list.push_back(c10::Scalar(v));
          } else {
            return false;
          }
          out = c10::IValue(std::move(list));
          cost += 1;
          return true;
        }
        case TypeKind::TensorType: {
          if (a.kind != ArgKind::TensorList) return false;
          c10::List<at::Tensor> list;
          list.reserve(a.tensors.size());
          for (size_t k = 0; k < a.tensors.size(); ++k) {
            if (!a.tensors[k]) {
              detail = "entry " + std::to_string(k) + " is NULL; only Tensor?[] takes NULL entries";
              return false;
            }
            list.push_back(*a.tensors[k]);
          }
          out = c10::IValue(std::move(list));
          return true;
        }
        case TypeKind::OptionalType:
          if (elem.expectRef<c10::OptionalType>().getElementType()->kind() == TypeKind::TensorType) {
            if (a.kind != ArgKind::TensorList) return false;
            c10::List<c10::optional<at::Tensor>> list;
            list.reserve(a.tensors.size());
            for (const auto &t : a.tensors) list.push_back(t);
            out = c10::IValue(std::move(list));
            return true;
          }
          break;
        default: break;
      }
      detail = "no tpt_arg kind can give a " + type.str();
      return false;
    }
    case TypeKind::LayoutType:
    case TypeKind::DeviceObjType:
    case TypeKind::MemoryFormatType:
    case TypeKind::GeneratorType:
      detail = "a " + type.str() + " can only be left at its default (or None where optional)";
      return false;
    default:
      detail = "no tpt_arg kind can give a " + type.str();
      return false;
  }
}

// Fills `stack` with the arguments of `schema` taken from `args` (the first
// `npos` positional). Returns false with the reason in `why`.
bool match(const c10::FunctionSchema &schema, const std::vector<Arg> &args, size_t npos,
           torch::jit::Stack &stack, int &cost, std::string &why) {
  const auto &formals = schema.arguments();
  size_t n_positional = 0;
  while (n_positional < formals.size() && !formals[n_positional].kwarg_only()) ++n_positional;
  if (npos > n_positional) {
    why = "takes " + std::to_string(n_positional) + " positional argument" +
          (n_positional == 1 ? "" : "s") + ", got " + std::to_string(npos);
    return false;
  }
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> given(formals.size(), kNone);  // index into args
  for (size_t p = 0; p < npos; ++p) given[p] = p;
  for (size_t k = npos; k < args.size(); ++k) {
    size_t j = 0;
    while (j < formals.size() && formals[j].name() != args[k].name) ++j;
    if (j == formals.size()) {
      why = "no argument named '" + args[k].name + "' (args[" + std::to_string(k) + "])";
      return false;
    }
    if (given[j] != kNone) {
      why = "argument '" + args[k].name + "' is given twice (args[" + std::to_string(given[j]) +
            "] and args[" + std::to_string(k) + "])";
      return false;
    }
    given[j] = k;
  }
  stack.clear();
  stack.reserve(formals.size());
  cost = 0;
  for (size_t j = 0; j < formals.size(); ++j) {
    const c10::Argument &formal = formals[j];
    if (given[j] == kNone) {
      if (!formal.default_value()) {
        why = "argument '" + formal.name() + "' is missing";
        return false;
      }
      c10::IValue v = *formal.default_value();
      // a bare int default of an int[N] (older schemas) repeated N times
      if (v.isInt() && formal.N() && formal.real_type()->kind() == c10::TypeKind::ListType)
        v = c10::IValue(c10::List<int64_t>(std::vector<int64_t>(static_cast<size_t>(*formal.N()), v.toInt())));
      stack.push_back(std::move(v));
      continue;
    }
    const Arg &a = args[given[j]];
    c10::IValue v;
    std::string detail;
    if (!convert(*formal.real_type(), formal.N(), a, v, cost, detail)) {
      why = "argument '" + formal.name() + "' (args[" + std::to_string(given[j]) + "]) wants " +
            formal.real_type()->str() + ", got " + kind_name(a.kind);
      if (!detail.empty()) why += ": " + detail;
      return false;
    }
    stack.push_back(std::move(v));
  }
  return true;
}

size_t guaranteed_outputs(const c10::FunctionSchema &schema) {
  size_t n = 0;
  for (const c10::Argument &r : schema.returns()) {
    auto kind = r.real_type()->kind();
    if (kind != c10::TypeKind::ListType && kind != c10::TypeKind::OptionalType &&
        kind != c10::TypeKind::TupleType)
      ++n;
  }
  return n;
}

[[noreturn]] void unsupported_result(const c10::OperatorHandle &op, const c10::IValue &v) {
  tpt::fail(TPT_ERR_UNSUPPORTED,
            full_name(op.schema().name(), op.schema().overload_name()) + " returned " +
                v.type()->str() + ", which tpt_op_call cannot give as tensors");
}

void append_result(const c10::OperatorHandle &op, const c10::Argument *ret, const c10::IValue &v,
                   std::vector<at::Tensor> &out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isNone()) {
    // nothing
  } else if (v.isTensorList()) {
    for (const at::Tensor &t : v.toTensorVector()) out.push_back(t);
  } else if (v.isTuple()) {
    for (const c10::IValue &e : v.toTupleRef().elements()) {
      if (!e.isTensor()) unsupported_result(op, v);
      out.push_back(e.toTensor());
    }
  } else if (v.isList()) {  // e.g. Tensor?[]
    for (const c10::IValue &e : v.toListRef()) {
      if (e.isTensor()) {
        out.push_back(e.toTensor());
      } else if (e.isNone()) {
        out.emplace_back();
      } else {
        unsupported_result(op, v);
      }
    }
  } else if (v.isInt()) {
    if (ret && ret->real_type()->kind() == c10::TypeKind::ScalarTypeType) {
      auto d = tpt::dtype_of(static_cast<c10::ScalarType>(v.toInt()));
      out.push_back(at::scalar_tensor(static_cast<int64_t>(d), at::TensorOptions().dtype(at::kLong)));
    } else {
      out.push_back(at::scalar_tensor(v.toInt(), at::TensorOptions().dtype(at::kLong)));
    }
  } else if (v.isDouble()) {
    out.push_back(at::scalar_tensor(v.toDouble(), at::TensorOptions().dtype(at::kDouble)));
  } else if (v.isBool()) {
    out.push_back(at::scalar_tensor(v.toBool(), at::TensorOptions().dtype(at::kBool)));
  } else {
    unsupported_result(op, v);
  }
}

}  // namespace

// ------------------------------------------------------------ public

QualifiedName qualify(const std::string &op, const std::string &overload) {
  if (op.empty()) tpt::invalid_argument("the operator name is empty");
  QualifiedName q;
  q.name = op.find("::") == std::string::npos ? "aten::" + op : op;
  q.overload = overload;
  if (overload.empty()) {
    size_t start = q.name.find("::") + 2;
    size_t dot = q.name.find('.', start);
    if (dot != std::string::npos) {
      q.overload = q.name.substr(dot + 1);
      q.name.resize(dot);
    }
  }
  return q;
}

std::vector<std::string> overloads_of(const std::string &qualified_name) {
  std::vector<std::string> out;
  OverloadList all = registry().find(qualified_name);
  if (!all) return out;
  for (const std::string &ov : *all)
    if (find_schema(qualified_name, ov)) out.push_back(ov);
  return out;
}

std::vector<std::string> schemas(const std::string &op, const std::string &overload) {
  QualifiedName q = qualify(op, overload);
  std::vector<std::string> out;
  if (!q.overload.empty()) {
    if (auto h = find_schema(q.name, q.overload)) out.push_back(schema_text(h->schema()));
    return out;
  }
  for (const std::string &ov : overloads_of(q.name))
    if (auto h = find_schema(q.name, ov)) out.push_back(schema_text(h->schema()));
  return out;
}

std::vector<std::string> similar_names(const std::string &qualified_name, size_t max) {
  const std::string want = base_of(qualified_name);
  const std::string want_ns = qualified_name.substr(0, qualified_name.size() - want.size());
  // (edit distance, other namespace, not a prefix either way, name): best first
  std::vector<std::tuple<size_t, bool, bool, std::string>> scored;
  for (const std::string &name : registry().names()) {
    if (name == qualified_name) continue;
    const std::string base = base_of(name);
    size_t limit = want.size() <= 3 ? 1 : 2;
    // cheap filter: lengths that differ by more than the limit cannot match
    size_t diff = base.size() > want.size() ? base.size() - want.size() : want.size() - base.size();
    if (diff > limit) continue;
    size_t d = edit_distance(want, base);
    if (d > limit) continue;
    bool other_ns = name.compare(0, want_ns.size(), want_ns) != 0 || name.size() - base.size() != want_ns.size();
    bool prefix = base.compare(0, want.size(), want) == 0 || want.compare(0, base.size(), base) == 0;
    scored.emplace_back(d, other_ns, !prefix, name);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && out.size() < max; ++i) out.push_back(std::get<3>(scored[i]));
  return out;
}

Prepared resolve(const std::string &op, const std::string &overload, const std::vector<Arg> &args) {
  QualifiedName q = qualify(op, overload);

  // Rules that do not depend on the schema.
  size_t npos = 0;
  while (npos < args.size() && args[npos].name.empty()) ++npos;
  for (size_t k = npos; k < args.size(); ++k) {
    if (args[k].name.empty())
      tpt::invalid_argument("args[" + std::to_string(k) +
                            "] is positional but follows keyword argument args[" +
                            std::to_string(npos) + "] ('" + args[npos].name + "')");
    for (size_t m = npos; m < k; ++m)
      if (args[m].name == args[k].name)
        tpt::invalid_argument("keyword argument '" + args[k].name + "' is given twice (args[" +
                              std::to_string(m) + "] and args[" + std::to_string(k) + "])");
  }
  for (size_t k = 0; k < args.size(); ++k)
    if (args[k].kind == ArgKind::Tensor && !args[k].tensor.defined())
      tpt::invalid_argument("args[" + std::to_string(k) + "] is an undefined tensor");

  std::vector<std::string> candidates;
  bool explicit_overload = !q.overload.empty();
  if (explicit_overload) {
    if (!find_schema(q.name, q.overload)) {
      auto all = overloads_of(q.name);
      if (all.empty()) unknown_operator(q.name);
      std::string message = "operator '" + q.name + "' has no overload '" + q.overload + "'; it has ";
      for (size_t i = 0; i < all.size(); ++i)
        message += (i ? ", " : "") + (all[i].empty() ? std::string("'' (the plain one)") : "'" + all[i] + "'");
      tpt::invalid_argument(message);
    }
    candidates.push_back(q.overload);
  } else {
    candidates = overloads_of(q.name);
    if (candidates.empty()) unknown_operator(q.name);
  }

  Prepared best;
  int best_cost = INT_MAX;
  std::string reasons;
  size_t skipped = 0;
  torch::jit::Stack stack;
  for (const std::string &ov : candidates) {
    auto handle = find_schema(q.name, ov);
    if (!handle) continue;  // deregistered meanwhile
    const c10::FunctionSchema &schema = handle->schema();
    if (!explicit_overload && is_out_variant(ov, schema)) {
      ++skipped;
      continue;
    }
    int cost = 0;
    std::string why;
    if (!match(schema, args, npos, stack, cost, why)) {
      reasons += "\n  " + schema_text(schema) + ": " + why;
      continue;
    }
    if (cost < best_cost) {
      best_cost = cost;
      best.handle = handle;
      best.stack = std::move(stack);
      best.min_outputs = guaranteed_outputs(schema);
      stack = torch::jit::Stack();
      if (cost == 0) break;
    }
  }
  if (!best.handle) {
    std::string message = explicit_overload
                              ? full_name(q.name, q.overload) + " does not take " + describe_args(args) + ":"
                              : "no overload of " + q.name + " takes " + describe_args(args) + ":";
    message += reasons;
    if (skipped)
      message += "\n  (" + std::to_string(skipped) + " out variant" + (skipped == 1 ? "" : "s") +
                 " not tried: name the overload to call one)";
    tpt::invalid_argument(message);
  }
  return best;
}

namespace {

bool is_optional_generator(const c10::Type &type) {
  return type.kind() == c10::TypeKind::OptionalType &&
         type.containedTypes().size() == 1 && type.containedTypes()[0]->kind() == c10::TypeKind::GeneratorType;
}

// The device type a call computes on: its first tensor argument's, else
// its `device` argument's, else the CPU (a factory without one).
c10::DeviceType call_device(const torch::jit::Stack &stack) {
  for (const c10::IValue &v : stack)
    if (v.isTensor() && v.toTensor().defined()) return v.toTensor().device().type();
  for (const c10::IValue &v : stack)
    if (v.isDevice()) return v.toDevice().type();
  return c10::DeviceType::CPU;
}

// Inside a tower that has a generator of its own (the multi-tower
// strategies), random operators that compute on the generator's device type
// draw from it: a `generator` argument left at None gets it, and
// aten::dropout (which has no such argument) is computed as LibTorch
// computes it, with the tower's generator. Returns true when it computed the
// call itself.
bool use_tower_generator(const c10::OperatorHandle &op, torch::jit::Stack &stack, std::vector<at::Tensor> &out) {
  const model::Tower *tower = model::current_tower();
  const at::Generator *gen = tower ? tower->generator() : nullptr;
  if (!gen || call_device(stack) != gen->device().type()) return false;
  const c10::FunctionSchema &schema = op.schema();
  const auto &formals = schema.arguments();
  for (size_t j = 0; j < formals.size() && j < stack.size(); ++j)
    if (stack[j].isNone() && is_optional_generator(*formals[j].real_type())) stack[j] = c10::IValue(*gen);
  if (schema.name() != "aten::dropout" || !schema.overload_name().empty() || stack.size() != 3) return false;
  if (!stack[0].isTensor() || !stack[1].isDouble() || !stack[2].isBool()) return false;
  const at::Tensor x = stack[0].toTensor();
  const double p = stack[1].toDouble();
  if (!stack[2].toBool() || !(p > 0 && p < 1) || !x.is_floating_point()) return false;
  at::Tensor noise = at::empty_like(x).bernoulli_(1 - p, *gen);  // ATen's _dropout_impl, with the generator
  noise.div_(1 - p);
  out.push_back(x.mul(noise));
  stack.clear();
  return true;
}

}  // namespace

std::vector<at::Tensor> run(Prepared &prepared) {
  if (!prepared.handle) tpt::fail(TPT_ERR_INTERNAL, "tpt::ops::run: the call was not resolved");
  const c10::OperatorHandle &op = *prepared.handle;
  {
    std::vector<at::Tensor> out;
    if (use_tower_generator(op, prepared.stack, out)) return out;
  }
  op.callBoxed(prepared.stack);
  const auto &returns = op.schema().returns();
  std::vector<at::Tensor> out;
  out.reserve(prepared.stack.size());
  for (size_t i = 0; i < prepared.stack.size(); ++i)
    append_result(op, i < returns.size() ? &returns[i] : nullptr, prepared.stack[i], out);
  prepared.stack.clear();
  return out;
}

std::vector<at::Tensor> call(const std::string &op, const std::string &overload,
                             const std::vector<Arg> &args) {
  Prepared p = resolve(op, overload, args);
  return run(p);
}

}  // namespace tpt::ops
