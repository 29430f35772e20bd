/*
 * tptrain.h: the whole public C ABI of tptrain.
 *
 * tptrain brings tensorpack's Trainer to LibTorch for any host that can call C.
 * This header is the contract: a function, type or constant that is not declared
 * here is not part of the API. It is plain C11 (it also compiles as C++) and
 * includes nothing from LibTorch.
 *
 * Conventions (docs/conventions.md has the long form):
 *   - Names are tpt_<module>_<verb>; types tpt_x; macros and enum values TPT_.
 *   - Out-parameters come first, then the subject handle, then inputs, then
 *     (callback, user_data).
 *   - A fallible function returns tpt_status *: NULL means success. A non-NULL
 *     status is owned by the caller and released with tpt_status_free. There is
 *     no thread-local error state.
 *   - No C++ exception ever leaves a tpt_ function. A bad argument gets a status
 *     whose message names the function and the argument.
 *   - Every *_free accepts NULL. Handles are opaque.
 *   - Option structs start with a `version` field, only grow at the end, and are
 *     initialised with their _INIT macro. Passing NULL options means defaults.
 *   - Enums have explicit values and are never renumbered.
 *   - Each function says which thread may call it and who owns what it returns.
 */
#ifndef TPTRAIN_H
#define TPTRAIN_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Export and language macros                                                */
/* ------------------------------------------------------------------------ */

#ifndef TPT_API
#  if defined(_WIN32)
#    if defined(TPT_BUILDING_LIBRARY)
#      define TPT_API __declspec(dllexport)
#    else
#      define TPT_API __declspec(dllimport)
#    endif
#  elif defined(__GNUC__) || defined(__clang__)
#    define TPT_API __attribute__((visibility("default")))
#  else
#    define TPT_API
#  endif
#endif

/* Marks functions whose result must not be ignored (a dropped tpt_status * is
 * both a leak and a missed error). */
#ifndef TPT_NODISCARD
#  if defined(__GNUC__) || defined(__clang__)
#    define TPT_NODISCARD __attribute__((warn_unused_result))
#  else
#    define TPT_NODISCARD
#  endif
#endif

#ifdef __cplusplus
#  define TPT_BEGIN_DECL extern "C" {
#  define TPT_END_DECL }
#else
#  define TPT_BEGIN_DECL
#  define TPT_END_DECL
#endif

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/*                                                                           */
/* TPT_VERSION_* describe the header you compiled against; tpt_version()     */
/* describes the library you run against. The ABI version is the SONAME      */
/* suffix (libtptrain.so.<TPT_ABI_VERSION>): a program built against one ABI  */
/* version runs against any library with the same ABI version and an equal   */
/* or newer TPT_VERSION_NUMBER.                                              */
/* ------------------------------------------------------------------------ */

#define TPT_VERSION_MAJOR 0
#define TPT_VERSION_MINOR 1
#define TPT_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define TPT_VERSION_NUMBER \
  (TPT_VERSION_MAJOR * 10000 + TPT_VERSION_MINOR * 100 + TPT_VERSION_PATCH)
#define TPT_VERSION_STRING "0.1.0"
#define TPT_ABI_VERSION 0

/* The library's TPT_VERSION_NUMBER. Any thread. */
TPT_API uint32_t tpt_version(void);

/* The library's version as "MAJOR.MINOR.PATCH". Static storage; do not free.
 * Any thread. */
TPT_API const char *tpt_version_string(void);

/* The library's TPT_ABI_VERSION. Any thread. */
TPT_API uint32_t tpt_abi_version(void);

/* ------------------------------------------------------------------------ */
/* Status: the error object                                                  */
/*                                                                           */
/* Every fallible function returns tpt_status *. NULL is success. A non-NULL */
/* status carries a code and a message, belongs to the caller, may be read   */
/* and freed from any thread, and must be freed with tpt_status_free.        */
/* ------------------------------------------------------------------------ */

typedef enum tpt_code {
  TPT_OK = 0,
  TPT_ERR_INVALID_ARGUMENT = 1, /* the caller passed a bad value; nothing changed */
  TPT_ERR_OUT_OF_MEMORY = 2,    /* an allocation failed */
  TPT_ERR_BACKEND = 3,          /* LibTorch or the C++ runtime under it raised an error
                                   (c10::Error or another std::exception) */
  TPT_ERR_INTERNAL = 4,         /* a broken invariant inside tptrain: a bug, please report */
  TPT_ERR_UNKNOWN = 5,          /* an exception of unknown type was caught */
  TPT_ERR_CALLBACK = 6,         /* a user callback reported an error */
  TPT_ERR_IO = 7,               /* a file could not be read or written */
  TPT_ERR_STATE = 8,            /* the call is not allowed in the object's current state */
  TPT_ERR_UNSUPPORTED = 9,      /* not available in this build (e.g. CUDA on a CPU LibTorch) */
  TPT_CODE_FORCE32 = 0x7fffffff
} tpt_code;

typedef struct tpt_status tpt_status;

/* The code of a status; TPT_OK for NULL. Any thread. */
TPT_API tpt_code tpt_status_code(const tpt_status *status);

/* The message of a status: "" for NULL, never NULL otherwise. The string lives
 * as long as the status. Any thread. */
TPT_API const char *tpt_status_message(const tpt_status *status);

/* Releases a status. NULL is a no-op. Any thread. */
TPT_API void tpt_status_free(tpt_status *status);

/* Makes a status, for hosts that report errors back to tptrain (callbacks in
 * later sections return these). `message` is copied; NULL means "". Returns
 * NULL for TPT_OK. Never fails: if memory runs out, a static out-of-memory
 * status is returned (tpt_status_free accepts it too). Any thread. */
TPT_API tpt_status *tpt_status_new(tpt_code code, const char *message);

/* A short name for a code, e.g. "TPT_ERR_BACKEND"; "TPT_UNKNOWN_CODE" for a
 * value outside the enum. Static storage. Any thread. */
TPT_API const char *tpt_code_name(tpt_code code);

/* ------------------------------------------------------------------------ */
/* Runtime: build features and threads                                       */
/* ------------------------------------------------------------------------ */

typedef enum tpt_feature {
  TPT_FEATURE_GLOO = 1, /* c10d's Gloo process group was compiled in */
  TPT_FEATURE_CUDA = 2, /* the LibTorch in use has CUDA and sees at least one device */
  TPT_FEATURE_NCCL = 3, /* NCCL support was compiled in (CUDA toolkit + NCCL found) */
  TPT_FEATURE_FORCE32 = 0x7fffffff
} tpt_feature;

/* 1 if the feature is available, 0 if not or if `feature` is unknown.
 * Any thread. */
TPT_API int tpt_has_feature(tpt_feature feature);

/* A human-readable, multi-line description of the build (tptrain and LibTorch
 * versions, features, BLAS and parallel backend). Static storage, built on the
 * first call. Any thread. */
TPT_API const char *tpt_build_info(void);

/* Sets the number of threads LibTorch uses inside one operator
 * (at::set_num_threads). `num_threads` must be >= 1. Process-wide; call it
 * before training starts, from one thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_set_num_threads(int num_threads);

/* The number of intra-op threads LibTorch uses. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_get_num_threads(int *out);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/*                                                                           */
/* A tpt_tensor is an owning handle on a LibTorch tensor. Handles are not    */
/* shared between threads without the caller's own synchronisation; reading */
/* one tensor from several threads at once is fine. Every tensor returned    */
/* through an out-parameter belongs to the caller: free it with              */
/* tpt_tensor_free. A freed or foreign pointer passed where a tensor is      */
/* expected is reported as an error where it can be detected.                */
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

typedef struct tpt_tensor tpt_tensor;

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

/* Releases a tensor handle. NULL is a no-op. */
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

TPT_END_DECL

#endif /* TPTRAIN_H */
