/*
 * tptrain/tensor.h: tpt_tensor: tensors, their scopes, sharing memory,
 * devices, DLPack.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_TENSOR_H
#define TPTRAIN_TENSOR_H

#include "common.h"

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/*                                                                           */
/* A tpt_tensor is an owning handle on a LibTorch tensor. Handles are not    */
/* shared between threads without the caller's own synchronisation; reading */
/* one tensor from several threads at once is fine. A tensor returned       */
/* through an out-parameter belongs to the caller (free it with             */
/* tpt_tensor_free), except inside a tower function or a callback: there it */
/* belongs to that call and goes when the call returns (see "Tensor scopes" */
/* below). A freed or foreign pointer passed where a tensor is expected is  */
/* reported as an error where it can be detected.                           */
/* ------------------------------------------------------------------------ */

typedef enum tpt_dtype {
  TPT_DTYPE_F32 = 1,
  TPT_DTYPE_F64 = 2,
  TPT_DTYPE_F16 = 3,
  TPT_DTYPE_BF16 = 4,
  TPT_DTYPE_I64 = 5,
  TPT_DTYPE_I32 = 6,
  TPT_DTYPE_U8 = 7,
  TPT_DTYPE_BOOL = 8,
  TPT_DTYPE_FORCE32 = 0x7fffffff
} tpt_dtype;

/* Size in bytes of one element of `dtype`; 0 for an unknown value. Any thread. */
TPT_API size_t tpt_dtype_size(tpt_dtype dtype);

/* Options for creating a tensor. Initialise with TPT_TENSOR_OPTIONS_INIT. */
#define TPT_TENSOR_OPTIONS_VERSION 1
typedef struct tpt_tensor_options {
  uint32_t version;      /* TPT_TENSOR_OPTIONS_VERSION */
  tpt_dtype dtype;       /* element type of the data; default TPT_DTYPE_F32 */
  const char *device;    /* "cpu", "cuda", "cuda:N"; NULL means "cpu" */
  int32_t requires_grad; /* nonzero: track gradients (floating dtypes only) */
} tpt_tensor_options;
#define TPT_TENSOR_OPTIONS_INIT { TPT_TENSOR_OPTIONS_VERSION, TPT_DTYPE_F32, NULL, 0 }

/* Creates a tensor by copying `nbytes` bytes of host memory laid out as a
 * C-contiguous array of `shape[0..ndim)` elements of options->dtype.
 * `nbytes` must equal the product of the shape times tpt_dtype_size(dtype).
 * `shape` may be NULL only when ndim is 0 (a scalar). `data` may be NULL only
 * when the tensor has no elements. `options` may be NULL (defaults). The data
 * is copied before the call returns. On success *out is a new tensor owned
 * by the caller. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_from_data(
    tpt_tensor **out, const void *data, size_t nbytes, const int64_t *shape,
    size_t ndim, const tpt_tensor_options *options);

/* Releases a tensor handle. NULL is a no-op, and so is a tensor the library
 * lends (a tower function's inputs). A tensor of a scope is released at once
 * and its handle goes when the scope closes (freeing it is allowed, never
 * needed). */
TPT_API void tpt_tensor_free(tpt_tensor *tensor);

/* Number of dimensions. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_ndim(size_t *out, const tpt_tensor *tensor);

/* Writes the sizes of the first min(capacity, ndim) dimensions to `dims`.
 * It is an error if capacity < ndim (query tpt_tensor_ndim first). */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_shape(int64_t *dims, size_t capacity,
                                                   const tpt_tensor *tensor);

/* Number of elements. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_numel(int64_t *out, const tpt_tensor *tensor);

/* Element type. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_dtype(tpt_dtype *out, const tpt_tensor *tensor);

/* Copies the elements, C-contiguous, to host memory `dst` of `nbytes` bytes
 * (which must equal numel * tpt_dtype_size(dtype)). Works for tensors on any
 * device. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_copy_to(void *dst, size_t nbytes,
                                                     const tpt_tensor *tensor);

/* A tensor with the same elements and a new shape (one entry may be -1).
 * LibTorch's rules: the result may share storage with `tensor`. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_reshape(tpt_tensor **out, const tpt_tensor *tensor,
                                                     const int64_t *shape, size_t ndim);

/* Matrix product with LibTorch's matmul broadcasting rules. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_matmul(tpt_tensor **out, const tpt_tensor *a,
                                                    const tpt_tensor *b);

/* ---- Tensor scopes -------------------------------------------------------
 * Tensors made inside a call belong to that call, as PyTorch's autograd
 * graph owns its intermediates. While the library runs a tower function
 * (training, build or inference) or a trainer callback (event callbacks and
 * monitors, run_step, a hooked step's function, an enable_if predicate, a
 * train config's init function),
 * every tensor handle the calling thread receives from the library (layers,
 * losses, metrics, tpt_op_call, tpt_tensor_* functions that make a tensor,
 * step outputs, tpt_model_variable) belongs to that call and is released
 * when it returns: a tower function frees nothing. tpt_tensor_free inside
 * the call is allowed and releases the tensor at once. Scopes nest: a
 * callback that runs tpt_model_infer gets infer's outputs in the callback's
 * scope, while the tower function's own tensors go when it returns. Not
 * scoped: other threads, and dataflow and feed callbacks (their tensors go
 * to the library through out-parameters and stay the caller's to free, also
 * when they run inside another call's scope). A tensor needed after the call returns: tpt_tensor_keep.
 * After the call, a scoped handle must not be used (TPT_SCOPE_EXPIRE below
 * makes that a reported error for bindings). */

/* A new handle on `tensor`'s values that belongs to the caller, also inside
 * a scope: detached from autograd's graph (no gradient flows through it),
 * sharing the storage (no copy). Free it with tpt_tensor_free. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_keep(tpt_tensor **out, const tpt_tensor *tensor);

/* The number of tensor handles alive in the process: made by the library
 * and not yet released (lent inputs are not counted). For leak checks. Any
 * thread. */
TPT_API int64_t tpt_tensor_live_handles(void);

/* How the innermost scope of the calling thread treats its handles. For
 * bindings, whose trampolines set it first thing in every call; C programs
 * keep the default. */
typedef enum tpt_scope_mode {
  TPT_SCOPE_FREE = 0,   /* default: released and their handles freed when the call returns */
  TPT_SCOPE_EXPIRE = 1, /* released when the call returns; each handle stays until
                           tpt_tensor_free (a garbage-collected binding's finalizer),
                           and using it is TPT_ERR_INVALID_ARGUMENT */
  TPT_SCOPE_OFF = 2,    /* the call's tensors belong to the caller, as outside any
                           call (bindings with destructors; handles made earlier in
                           the call are handed over too) */
  TPT_SCOPE_MODE_FORCE32 = 0x7fffffff
} tpt_scope_mode;

/* Sets the mode of the innermost scope open on the calling thread; without
 * one it does nothing. An unknown mode is TPT_ERR_INVALID_ARGUMENT. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_scope_set_mode(tpt_scope_mode mode);

/* ---- Sharing memory, devices, DLPack ------------------------------------ */

/* Wraps host memory without copying: the tensor uses `data` in place (a CPU
 * tensor laid out C-contiguous with `shape` and options->dtype; options->device
 * must be NULL or "cpu"). deleter(data, deleter_ctx) runs exactly once, when
 * LibTorch releases the memory (after the last tensor using it is gone), or
 * at once if this call fails. deleter may be NULL (the caller keeps `data`
 * alive longer than every tensor made from it). */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_from_blob(tpt_tensor **out, void *data,
                                                       const int64_t *shape, size_t ndim,
                                                       const tpt_tensor_options *options,
                                                       void (*deleter)(void *data, void *deleter_ctx),
                                                       void *deleter_ctx);

/* A new handle on the same tensor (no copy; both must be freed). */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_share(tpt_tensor **out, const tpt_tensor *tensor);

/* The device as text ("cpu", "cuda:0"), copied into buf (NUL-terminated; an
 * error if it does not fit). */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_device(char *buf, size_t size, const tpt_tensor *tensor);

/* A copy on another device and/or with another dtype. `device` NULL keeps the
 * device; `dtype` 0 keeps the dtype. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_to(tpt_tensor **out, const tpt_tensor *tensor,
                                                const char *device, tpt_dtype dtype);

/* The value of a one-element tensor, as a double. */
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_item(double *out, const tpt_tensor *tensor);

/* DLPack (dlpack.h, DLPACK_VERSION 0.6, as LibTorch 1.13): zero-copy exchange
 * with other frameworks. to_dlpack gives a DLManagedTensor that the consumer
 * owns (it calls the tensor's deleter). from_dlpack takes ownership of `src`
 * (its deleter runs when the tensor is released; also if this call fails). */
struct DLManagedTensor;
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_to_dlpack(struct DLManagedTensor **out,
                                                       const tpt_tensor *tensor);
TPT_API TPT_NODISCARD tpt_status *tpt_tensor_from_dlpack(tpt_tensor **out,
                                                         struct DLManagedTensor *src);

TPT_END_DECL

#endif /* TPTRAIN_TENSOR_H */
