/*
 * tptrain/op.h: tpt_op: any ATen operator by name, and element-wise
 * arithmetic.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_OP_H
#define TPTRAIN_OP_H

#include "tensor.h"

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Operators: any ATen operator by name                                      */
/*                                                                           */
/* tpt_op_call runs an operator registered with LibTorch's c10 dispatcher    */
/* ("aten::conv2d", "aten::add", ...), so all of ATen is reachable from C,   */
/* Rust and Go. Arguments are matched against the operator's schemas like    */
/* TorchScript does: positionally, then by keyword (tpt_arg.name); missing   */
/* arguments take the schema's defaults; an int or double goes where the     */
/* schema wants a Scalar; one int where it wants an int[N] of fixed length N */
/* is repeated N times, as in Python (stride=2 for `int[2] stride` gives     */
/* [2, 2]; an int[] without N takes only a list). Without an overload name,  */
/* the overload that accepts the arguments with the fewest conversions (int  */
/* to float, number to Scalar, ...) is called, ties going to the overload   */
/* registered first, as in TorchScript ("out" overloads only when named).    */
/* ------------------------------------------------------------------------ */

typedef enum tpt_arg_kind {
  TPT_ARG_NONE = 0,        /* None (an optional argument left out explicitly) */
  TPT_ARG_TENSOR = 1,      /* .tensor */
  TPT_ARG_INT = 2,         /* .i (also fills an int[N], see above) */
  TPT_ARG_DOUBLE = 3,      /* .d */
  TPT_ARG_BOOL = 4,        /* .i (0 or 1) */
  TPT_ARG_INT_LIST = 5,    /* .list: const int64_t *, .len */
  TPT_ARG_DOUBLE_LIST = 6, /* .list: const double *, .len */
  TPT_ARG_TENSOR_LIST = 7, /* .list: const tpt_tensor *const *, .len (entries may be NULL
                              for Tensor?[] arguments, as aten::index takes) */
  TPT_ARG_STRING = 8,      /* .list: const char * (NUL-terminated) */
  TPT_ARG_DTYPE = 9,       /* .i: a tpt_dtype, for ScalarType arguments */
  TPT_ARG_KIND_FORCE32 = 0x7fffffff
} tpt_arg_kind;

/* One argument. A flat struct (no unions) so that every binding can fill it;
 * only the fields of its kind are read. Borrowed for the call. */
typedef struct tpt_arg {
  tpt_arg_kind kind;
  const char *name;         /* NULL: positional; else the schema's argument name */
  const tpt_tensor *tensor; /* TPT_ARG_TENSOR */
  int64_t i;                /* TPT_ARG_INT, TPT_ARG_BOOL, TPT_ARG_DTYPE */
  double d;                 /* TPT_ARG_DOUBLE */
  const void *list;         /* lists and strings */
  size_t len;               /* number of list entries */
} tpt_arg;
/* An argument with every field zero: TPT_ARG_NONE, positional. */
#define TPT_ARG_INIT { TPT_ARG_NONE, NULL, NULL, 0, 0.0, NULL, 0 }

/* Calls operator `op` ("namespace::name"; a bare name means "aten::name"),
 * with `overload` ("Tensor", "Scalar", "out", ...; NULL or "" picks one as
 * above). The results are returned as tensors: a Tensor result as it is, a
 * tuple or list of tensors as several outputs, a number or bool as a 0-d
 * tensor (f64, i64 or bool); an undefined tensor result is a NULL output (it
 * counts), a None result no output. On success *n_outputs is the number of
 * results, stored in outputs[] (owned by the caller). If capacity is smaller,
 * the call fails, *n_outputs still says how many are needed, and nothing is
 * left allocated. Unknown operators,
 * wrong argument counts, kinds or names are TPT_ERR_INVALID_ARGUMENT with a
 * message that lists the schemas tried; errors raised by the operator itself
 * are TPT_ERR_BACKEND. Any thread (the operator's own rules apply). */
TPT_API TPT_NODISCARD tpt_status *tpt_op_call(tpt_tensor **outputs, size_t capacity, size_t *n_outputs,
                                              const char *op, const char *overload,
                                              const tpt_arg *args, size_t nargs);

/* The schemas of an operator, one per line, into buf (NUL-terminated; an
 * error if it does not fit; *needed, if not NULL, receives the size needed).
 * TPT_ERR_NOT_FOUND if there is no such operator. */
TPT_API TPT_NODISCARD tpt_status *tpt_op_schemas(char *buf, size_t size, size_t *needed,
                                                 const char *op);

/* Element-wise arithmetic, with broadcasting and type promotion as
 * LibTorch's: *out = a + b, a - b, a * b, a / b (true division: integers
 * give floats), and the same with a number b. Shapes that do not broadcast
 * are TPT_ERR_INVALID_ARGUMENT naming both. Inside a tower function or a
 * callback, *out belongs to the call like every tensor made there. */
TPT_API TPT_NODISCARD tpt_status *tpt_op_add(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_sub(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_mul(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_div(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_add_scalar(tpt_tensor **out, const tpt_tensor *a, double b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_sub_scalar(tpt_tensor **out, const tpt_tensor *a, double b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_mul_scalar(tpt_tensor **out, const tpt_tensor *a, double b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_div_scalar(tpt_tensor **out, const tpt_tensor *a, double b);

/* Element-wise comparisons, with broadcasting as above: *out is a bool
 * tensor of a == b, a > b, a >= b, a < b, a <= b (aten::eq, gt, ge, lt, le),
 * or of the same against a number b. */
TPT_API TPT_NODISCARD tpt_status *tpt_op_eq(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_gt(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_ge(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_lt(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_le(tpt_tensor **out, const tpt_tensor *a, const tpt_tensor *b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_eq_scalar(tpt_tensor **out, const tpt_tensor *a, double b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_gt_scalar(tpt_tensor **out, const tpt_tensor *a, double b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_ge_scalar(tpt_tensor **out, const tpt_tensor *a, double b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_lt_scalar(tpt_tensor **out, const tpt_tensor *a, double b);
TPT_API TPT_NODISCARD tpt_status *tpt_op_le_scalar(tpt_tensor **out, const tpt_tensor *a, double b);

/* *out = cond ? a : b element-wise (aten::where): cond is a bool tensor (a
 * comparison's result), the three broadcast, a and b promote to a common
 * dtype. A cond of another dtype is TPT_ERR_INVALID_ARGUMENT naming it. */
TPT_API TPT_NODISCARD tpt_status *tpt_op_where(tpt_tensor **out, const tpt_tensor *cond, const tpt_tensor *a,
                                               const tpt_tensor *b);

TPT_END_DECL

#endif /* TPTRAIN_OP_H */
