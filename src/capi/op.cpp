// Operators by name and element-wise arithmetic (include/tptrain/op.h).
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "capi/args.hpp"
#include "capi/handles.hpp"
#include "model/dtype.hpp"
#include "model/ops.hpp"

using tpt::capi::clear;
using tpt::capi::give;
using tpt::capi::guard;
using tpt::capi::require;
using tpt::capi::tensor_arg;

namespace {

std::string entry(size_t i, const char *field) {
  return "args[" + std::to_string(i) + "]." + field;
}

const at::Tensor &live_tensor(const tpt_tensor *t, const std::string &what) {
  if (t == nullptr) tpt::invalid_argument(what + " is NULL");
  if (t->magic != kTensorMagic) tpt::invalid_argument(what + " is not a live tpt_tensor");
  return t->value;
}

// Reads args[i] as the caller described it: exactly `len` list entries, a
// NUL-terminated string (its end cannot be checked: an unterminated one is
// the caller's bug, as for every const char * of the API).
tpt::ops::Arg convert_arg(const tpt_arg &a, size_t i) {
  using tpt::ops::Arg;
  using tpt::ops::ArgKind;
  Arg out;
  if (a.name != nullptr) out.name = a.name;  // "" is positional, as NULL
  auto need_list = [&] {
    if (a.list == nullptr && a.len > 0)
      tpt::invalid_argument(entry(i, "list") + " is NULL but " + entry(i, "len") + " is " +
                            std::to_string(a.len));
  };
  if (tpt::enum_int(a.kind) < TPT_ARG_NONE || tpt::enum_int(a.kind) > TPT_ARG_DTYPE)
    tpt::invalid_argument(entry(i, "kind") + " is " + std::to_string(tpt::enum_int(a.kind)) + ", not a tpt_arg_kind");
  switch (a.kind) {
    case TPT_ARG_NONE: out.kind = ArgKind::None; break;
    case TPT_ARG_TENSOR:
      out.kind = ArgKind::Tensor;
      out.tensor = live_tensor(a.tensor, entry(i, "tensor"));
      break;
    case TPT_ARG_INT:
      out.kind = ArgKind::Int;
      out.i = a.i;
      break;
    case TPT_ARG_DOUBLE:
      out.kind = ArgKind::Double;
      out.d = a.d;
      break;
    case TPT_ARG_BOOL:
      if (a.i != 0 && a.i != 1)
        tpt::invalid_argument(entry(i, "i") + " is " + std::to_string(a.i) +
                              "; a TPT_ARG_BOOL holds 0 or 1");
      out.kind = ArgKind::Bool;
      out.i = a.i;
      break;
    case TPT_ARG_INT_LIST: {
      need_list();
      out.kind = ArgKind::IntList;
      const auto *p = static_cast<const int64_t *>(a.list);
      if (a.len > 0) out.ints.assign(p, p + a.len);
      break;
    }
    case TPT_ARG_DOUBLE_LIST: {
      need_list();
      out.kind = ArgKind::DoubleList;
      const auto *p = static_cast<const double *>(a.list);
      if (a.len > 0) out.doubles.assign(p, p + a.len);
      break;
    }
    case TPT_ARG_TENSOR_LIST: {
      need_list();
      out.kind = ArgKind::TensorList;
      const auto *p = static_cast<const tpt_tensor *const *>(a.list);
      out.tensors.reserve(a.len);
      for (size_t k = 0; k < a.len; ++k) {
        if (p[k] == nullptr) {
          out.tensors.emplace_back();  // None: only a Tensor?[] takes it
        } else {
          out.tensors.emplace_back(live_tensor(
              p[k], "args[" + std::to_string(i) + "].list[" + std::to_string(k) + "]"));
        }
      }
      break;
    }
    case TPT_ARG_STRING:
      if (a.list == nullptr) tpt::invalid_argument(entry(i, "list") + " (the string) is NULL");
      out.kind = ArgKind::String;
      out.str = static_cast<const char *>(a.list);
      break;
    case TPT_ARG_DTYPE: {
      auto type = a.i >= INT32_MIN && a.i <= INT32_MAX
                      ? tpt::scalar_type_of(static_cast<tpt_dtype>(a.i))
                      : c10::nullopt;
      if (!type)
        tpt::invalid_argument(entry(i, "i") + " is " + std::to_string(a.i) + ", not a tpt_dtype");
      out.kind = ArgKind::Dtype;
      out.dtype = *type;
      break;
    }
    default:
      tpt::invalid_argument(entry(i, "kind") + " is " + std::to_string(static_cast<long long>(a.kind)) +
                            ", not a tpt_arg_kind");
  }
  return out;
}

// a and b broadcast (LibTorch's rule: aligned from the right, each pair equal
// or one of them 1), or an error naming both shapes.
void check_broadcast(const at::Tensor &a, const at::Tensor &b, const char *a_name = "a", const char *b_name = "b") {
  int64_t na = a.dim(), nb = b.dim();
  for (int64_t i = 1; i <= std::min(na, nb); ++i) {
    int64_t x = a.size(na - i), y = b.size(nb - i);
    if (x != y && x != 1 && y != 1)
      tpt::invalid_argument(std::string(a_name) + " is " + tpt::shape_text(a.sizes()) + " and " + b_name + " is " +
                            tpt::shape_text(b.sizes()) + ": the shapes do not broadcast");
  }
}

enum class Arith { Add, Sub, Mul, Div, Eq, Gt, Ge, Lt, Le };

// b: a tensor or a number.
template <class B>
at::Tensor arith(Arith op, const at::Tensor &a, const B &b) {
  if constexpr (std::is_same_v<B, at::Tensor>) check_broadcast(a, b);
  switch (op) {
    case Arith::Add: return a.add(b);
    case Arith::Sub: return a.sub(b);
    case Arith::Mul: return a.mul(b);
    case Arith::Div: return a.div(b);
    case Arith::Eq: return a.eq(b);
    case Arith::Gt: return a.gt(b);
    case Arith::Ge: return a.ge(b);
    case Arith::Lt: return a.lt(b);
    case Arith::Le: return a.le(b);
  }
  return {};
}

}  // namespace

tpt_status *tpt_op_call(tpt_tensor **outputs, size_t capacity, size_t *n_outputs, const char *op,
                        const char *overload, const tpt_arg *args, size_t nargs) {
  return guard(__func__, [&] {
    require(n_outputs, "n_outputs");
    *n_outputs = 0;
    if (capacity > 0) {
      require(outputs, "outputs");
      for (size_t k = 0; k < capacity; ++k) outputs[k] = nullptr;
    }
    require(op, "op");
    if (nargs > 0) require(args, "args");
    std::vector<tpt::ops::Arg> converted;
    converted.reserve(nargs);
    for (size_t i = 0; i < nargs; ++i) converted.push_back(convert_arg(args[i], i));

    tpt::ops::Prepared call = tpt::ops::resolve(op, overload ? overload : "", converted);
    converted.clear();  // the stack holds what the call needs
    auto too_small = [&](size_t n, const char *when) {
      const auto &s = call.handle->schema();
      std::string name = s.overload_name().empty() ? s.name() : s.name() + "." + s.overload_name();
      tpt::invalid_argument("capacity is " + std::to_string(capacity) + " but " + name + when +
                            std::to_string(n) + " output" + (n == 1 ? "" : "s"));
    };
    if (call.min_outputs > capacity) {
      *n_outputs = call.min_outputs;
      too_small(call.min_outputs, " returns at least ");  // before running: nothing changed
    }
    std::vector<at::Tensor> results = tpt::ops::run(call);
    *n_outputs = results.size();
    if (results.size() > capacity) too_small(results.size(), " returned ");
    // Allocate every handle before storing any, so that a failure leaks nothing.
    std::vector<std::unique_ptr<tpt_tensor>> handles(results.size());
    for (size_t k = 0; k < results.size(); ++k)
      if (results[k].defined()) handles[k] = std::make_unique<tpt_tensor>(std::move(results[k]));
    for (size_t k = 0; k < handles.size(); ++k) outputs[k] = tpt::capi::adopt(handles[k].release());
  });
}

tpt_status *tpt_op_schemas(char *buf, size_t size, size_t *needed, const char *op) {
  return guard(__func__, [&] {
    if (needed) *needed = 0;
    if (size > 0) {
      require(buf, "buf");
      buf[0] = '\0';
    }
    require(op, "op");
    std::vector<std::string> lines = tpt::ops::schemas(op);
    if (lines.empty()) {
      tpt::ops::QualifiedName q = tpt::ops::qualify(op, "");
      std::string message = "no operator '" + (q.overload.empty() ? q.name : q.name + "." + q.overload) + "'";
      auto near = tpt::ops::similar_names(q.name);
      if (!near.empty()) {
        message += "; did you mean ";
        for (size_t i = 0; i < near.size(); ++i) message += (i ? ", " : "") + near[i];
        message += "?";
      }
      tpt::fail(TPT_ERR_NOT_FOUND, message);
    }
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) text += '\n';
      text += lines[i];
    }
    if (needed) *needed = text.size() + 1;
    if (size < text.size() + 1)
      tpt::invalid_argument("size is " + std::to_string(size) + " but the schemas need " +
                            std::to_string(text.size() + 1) + " bytes");
    std::memcpy(buf, text.c_str(), text.size() + 1);
  });
}

// ---- element-wise arithmetic

#define TPT_ARITH(fn, op)                                                                            \
  tpt_status *fn(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b) {                       \
    return guard(#fn, [&] {                                                                          \
      clear(out);                                                                                    \
      give(out, arith(Arith::op, tensor_arg(a, "a"), tensor_arg(b, "b")));                           \
    });                                                                                              \
  }                                                                                                  \
  tpt_status *fn##_scalar(tpt_tensor **out, const tpt_tensor *a, double b) {                         \
    return guard(#fn "_scalar", [&] {                                                                \
      clear(out);                                                                                    \
      give(out, arith(Arith::op, tensor_arg(a, "a"), b));                                            \
    });                                                                                              \
  }

TPT_ARITH(tpt_op_add, Add)
TPT_ARITH(tpt_op_sub, Sub)
TPT_ARITH(tpt_op_mul, Mul)
TPT_ARITH(tpt_op_div, Div)
TPT_ARITH(tpt_op_eq, Eq)
TPT_ARITH(tpt_op_gt, Gt)
TPT_ARITH(tpt_op_ge, Ge)
TPT_ARITH(tpt_op_lt, Lt)
TPT_ARITH(tpt_op_le, Le)
#undef TPT_ARITH

tpt_status *tpt_op_where(tpt_tensor **out, const tpt_tensor *cond, const tpt_tensor *a, const tpt_tensor *b) {
  return guard(__func__, [&] {
    clear(out);
    const at::Tensor &c = tensor_arg(cond, "cond"), &x = tensor_arg(a, "a"), &y = tensor_arg(b, "b");
    if (c.scalar_type() != at::kBool)
      tpt::invalid_argument(std::string("cond is a ") + c10::toString(c.scalar_type()) +
                            " tensor; where takes a bool one (a comparison's result, e.g. tpt_op_gt)");
    check_broadcast(c, x, "cond", "a");
    check_broadcast(c, y, "cond", "b");
    check_broadcast(x, y);
    give(out, x.where(c, y));
  });
}
