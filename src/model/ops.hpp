// Any operator of LibTorch's c10 dispatcher, called by name with loosely typed
// arguments: the engine behind tpt_op_call (src/capi/op.cpp).
//
// Arguments are matched against the operator's schemas as TorchScript does:
// positional arguments first, then keyword arguments by name; kwarg-only
// arguments (after `*`) only by keyword; missing arguments take the schema's
// default; one int where the schema wants int[N] (a fixed N, as `int[2]
// stride`) is repeated N times, as Python does. Without an overload name
// every overload is tried (out variants excepted) and the one that needs the
// fewest implicit conversions wins; ties go to the first in TorchScript's
// order (registration order: native_functions.yaml's for aten; overloads the
// JIT's table lacks after, the plain one first, then by name). Errors are tpt::Error:
// TPT_ERR_INVALID_ARGUMENT for an unknown operator or arguments no schema
// accepts (the message gives the reason for each schema),
// TPT_ERR_UNSUPPORTED for a result that is not a tensor, a list or tuple of
// tensors, a number or a bool. Whatever the operator itself throws
// (c10::Error, ...) propagates unchanged.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tpt::ops {

// The kinds of argument a caller can give (the C ABI's tpt_arg_kind).
enum class ArgKind {
  None,        // None: an optional argument left out explicitly
  Tensor,      // .tensor (defined)
  Int,         // .i
  Double,      // .d
  Bool,        // .i, 0 or 1
  IntList,     // .ints
  DoubleList,  // .doubles
  TensorList,  // .tensors; nullopt entries only fit Tensor?[]
  String,      // .str
  Dtype,       // .dtype
};

// "tensor", "int", "int[]", ...: how messages name a kind.
const char *kind_name(ArgKind kind) noexcept;

struct Arg {
  ArgKind kind = ArgKind::None;
  std::string name;  // empty: positional
  at::Tensor tensor;
  int64_t i = 0;
  double d = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<c10::optional<at::Tensor>> tensors;
  std::string str;

  static Arg none() { return Arg(); }
  static Arg of(at::Tensor t) {
    Arg a;
    a.kind = ArgKind::Tensor;
    a.tensor = std::move(t);
    return a;
  }
  static Arg of_int(int64_t v) {
    Arg a;
    a.kind = ArgKind::Int;
    a.i = v;
    return a;
  }
  static Arg of_double(double v) {
    Arg a;
    a.kind = ArgKind::Double;
    a.d = v;
    return a;
  }
  static Arg of_bool(bool v) {
    Arg a;
    a.kind = ArgKind::Bool;
    a.i = v ? 1 : 0;
    return a;
  }
  static Arg of_ints(std::vector<int64_t> v) {
    Arg a;
    a.kind = ArgKind::IntList;
    a.ints = std::move(v);
    return a;
  }
  static Arg of_doubles(std::vector<double> v) {
    Arg a;
    a.kind = ArgKind::DoubleList;
    a.doubles = std::move(v);
    return a;
  }
  static Arg of_tensors(std::vector<c10::optional<at::Tensor>> v) {
    Arg a;
    a.kind = ArgKind::TensorList;
    a.tensors = std::move(v);
    return a;
  }
  static Arg of_string(std::string v) {
    Arg a;
    a.kind = ArgKind::String;
    a.str = std::move(v);
    return a;
  }
  static Arg of_dtype(c10::ScalarType v) {
    Arg a;
    a.kind = ArgKind::Dtype;
    a.dtype = v;
    return a;
  }
  // The same argument given by keyword.
  Arg named(std::string n) && {
    name = std::move(n);
    return std::move(*this);
  }
};

// "add" -> "aten::add". An operator name with a '.' ("aten::add.Tensor") is
// split into name and overload when no overload is given separately.
struct QualifiedName {
  std::string name;      // "aten::add"
  std::string overload;  // "" when none was given
};
QualifiedName qualify(const std::string &op, const std::string &overload);

// The overload names of an operator that has schemas, in the stable order
// used for resolution (TorchScript's, see above); empty if there is no such
// operator. The dispatcher's list of operators is scanned once and cached;
// a name that is not in the cache triggers a rescan (operators registered
// later, e.g. by a library loaded at run time, are found). Thread-safe.
std::vector<std::string> overloads_of(const std::string &qualified_name);

// The schemas of `op` (bare or qualified name, optionally "name.overload"),
// one string each, in resolution order. Empty if there is no such operator.
std::vector<std::string> schemas(const std::string &op, const std::string &overload = "");

// Up to `max` operator names that look like `qualified_name` (for "did you
// mean" hints). Empty if nothing is close.
std::vector<std::string> similar_names(const std::string &qualified_name, size_t max = 5);

// An operator call whose arguments have been matched: the chosen overload and
// the argument stack, ready to run.
struct Prepared {
  c10::optional<c10::OperatorHandle> handle;
  torch::jit::Stack stack;
  // The number of results the schema guarantees (its returns that are not
  // lists or optionals), known before running.
  size_t min_outputs = 0;
};

// Resolves `op` / `overload` against `args`. Throws tpt::Error
// (TPT_ERR_INVALID_ARGUMENT) for an unknown operator or overload, for
// arguments that break the rules whatever the schema (a keyword given twice,
// a positional argument after a keyword one), and when no schema accepts the
// arguments.
Prepared resolve(const std::string &op, const std::string &overload, const std::vector<Arg> &args);

// Runs a prepared call and converts its results: a Tensor as it is (an
// undefined tensor as an undefined at::Tensor, which the C ABI gives as a NULL
// handle); a list or tuple of tensors as its elements; int, float, bool and
// Scalar as 0-d tensors (i64, f64, bool); ScalarType as a 0-d i64 tensor that
// holds the tpt_dtype value; None as nothing. Other results throw
// TPT_ERR_UNSUPPORTED (after the operator ran).
std::vector<at::Tensor> run(Prepared &prepared);

// resolve + run.
std::vector<at::Tensor> call(const std::string &op, const std::string &overload,
                             const std::vector<Arg> &args);

}  // namespace tpt::ops
