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
  TPT_ERR_NOT_FOUND = 10,       /* a name (scalar, output, file) does not exist */
  TPT_ERR_TIMEOUT = 11,         /* something took longer than its time limit (a step
                                   under tpt_callback_step_watchdog) */
  /* Not an error: returned by a callback or a run_step (as tpt_status_new(TPT_STOP,
   * reason)) to end training gracefully, as tensorpack's StopTraining. */
  TPT_STOP = 100,
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

/* ------------------------------------------------------------------------ */
/* Trainer: the epoch/step loop                                              */
/*                                                                           */
/* "Training is running something again and again." A trainer runs          */
/*   for epoch_num in [starting_epoch, max_epoch]:          (inclusive)      */
/*     for local_step in [0, steps_per_epoch): run_step()                    */
/* with callbacks around it. run_step may do anything; each time it calls    */
/* tpt_trainer_hooked_step, the callbacks' BEFORE_RUN / AFTER_RUN events run */
/* around the step and global_step advances by one.                          */
/*                                                                           */
/* Counters (tensorpack's): epoch_num is starting_epoch - 1 before training  */
/* and the running epoch during it (also in TRIGGER_EPOCH); local_step is    */
/* the 0-based index inside the epoch (-1 before the first step);            */
/* global_step counts hooked steps, not run_steps, and is already advanced   */
/* when the AFTER_RUN of user callbacks and TRIGGER_STEP run.                */
/*                                                                           */
/* Threads: a trainer is used from one thread at a time. tpt_trainer_run     */
/* runs on the caller's thread and every callback fires on that thread;      */
/* only tpt_trainer_request_stop may be called from any thread.              */
/* ------------------------------------------------------------------------ */

typedef struct tpt_trainer tpt_trainer;

/* What to do when the log directory exists and is not empty. */
typedef enum tpt_logdir_action {
  TPT_LOGDIR_REFUSE = 0, /* fail with TPT_ERR_IO naming the other actions (default) */
  TPT_LOGDIR_KEEP = 1,   /* use it as it is (resume: stats.json is appended to) */
  TPT_LOGDIR_DELETE = 2, /* delete its contents first */
  TPT_LOGDIR_BACKUP = 3, /* rename it to <dir><MMDD-HHMMSS>, start empty */
  TPT_LOGDIR_NEW = 4,    /* leave it, use <dir><MMDD-HHMMSS> instead */
  TPT_LOGDIR_ASK = 5,    /* ask on the terminal (k/d/b/n/q); REFUSE without one */
  TPT_LOGDIR_FORCE32 = 0x7fffffff
} tpt_logdir_action;

/* How progress is shown while an epoch runs. */
typedef enum tpt_progress {
  TPT_PROGRESS_AUTO = 0, /* a bar on a terminal (stderr), else one line per epoch */
  TPT_PROGRESS_BAR = 1,  /* always a bar on stderr */
  TPT_PROGRESS_LINES = 2, /* one plain line per epoch, in the log */
  TPT_PROGRESS_OFF = 3,
  TPT_PROGRESS_FORCE32 = 0x7fffffff
} tpt_progress;

/* Options of a trainer. Initialise with TPT_TRAINER_OPTIONS_INIT. */
#define TPT_TRAINER_OPTIONS_VERSION 4
typedef struct tpt_trainer_options {
  uint32_t version;            /* TPT_TRAINER_OPTIONS_VERSION */
  int32_t is_chief;            /* nonzero (default): chief-only callbacks are kept */
  int64_t starting_epoch;      /* first epoch number, >= 1 (default 1) */
  int64_t max_epoch;           /* last epoch number, inclusive (default 99999999) */
  int64_t steps_per_epoch;     /* >= 0; 0 runs the callbacks only; -1: not set (default) */
  const char *logdir;          /* NULL (default): no log directory, stats.json or log.log */
  tpt_logdir_action logdir_action; /* default TPT_LOGDIR_REFUSE */
  tpt_progress progress;       /* default TPT_PROGRESS_AUTO */
  int32_t console;             /* nonzero (default): log lines go to stdout too */
  int32_t default_callbacks;   /* nonzero (default): progress bar and estimated time left */
  int32_t default_monitors;    /* nonzero (default): stats.json writer (with a logdir) and
                                  the per-epoch scalar printer */
  /* version 2: */
  int64_t scalar_history;      /* entries of each scalar kept for tpt_trainer_scalar_history
                                  (the latest ones, so a long run's memory stays flat);
                                  default 1000; 0 keeps all */
  int64_t summary_period;      /* the cost and the tower's one-element outputs are moving
                                  averages (tensorpack's add_moving_summary, decay 0.95)
                                  that reach the monitors in each epoch's last step, and
                                  every summary_period steps when > 0; default 0 */
  /* version 3: */
  int32_t auto_resume;         /* nonzero: when logdir holds a checkpoint index (a ModelSaver's),
                                  the run resumes exactly from its latest checkpoint
                                  (tpt_trainer_resume) and the directory is kept whatever
                                  logdir_action says; tensorpack's AutoResumeTrainConfig.
                                  Default 0 */
  /* version 4: */
  int32_t stop_on_signals;     /* 1: while tpt_trainer_run runs, SIGTERM and SIGINT stop training
                                  gracefully at the next step boundary (stop reason "SIGTERM" /
                                  "SIGINT"), a ModelSaver saves a checkpoint there, and a second
                                  signal ends the process at once (the dispositions from before
                                  the run are put back at the first signal and at the run's end).
                                  In a distributed job every rank stops at the same step (one
                                  small all-reduce per step; every rank must have the same
                                  setting). 0 (default): on when the environment has
                                  TPTRAIN_STOP_ON_SIGNALS=1, which tools/tptrain-run sets; -1: never.
                                  A host with its own handlers keeps -1 and calls
                                  tpt_trainer_signal_stop from them */
} tpt_trainer_options;
#define TPT_TRAINER_OPTIONS_INIT \
  { TPT_TRAINER_OPTIONS_VERSION, 1, 1, 99999999, -1, NULL, TPT_LOGDIR_REFUSE, \
    TPT_PROGRESS_AUTO, 1, 1, 1, 1000, 0, 0, 0 }

/* Creates a trainer. `options` may be NULL (defaults; steps_per_epoch must then
 * be given before run through a later section's input). The strings in
 * options are copied. The caller owns *out. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_new(tpt_trainer **out,
                                                  const tpt_trainer_options *options);

/* Releases a trainer, its callbacks (each destroy runs once) and its run_step.
 * NULL is a no-op, and so is the trainer of tpt_launch_train (the library's).
 * While tpt_trainer_run runs (a free from one of the run's own callbacks,
 * run_step, step, feed or predicate) the free is deferred: the run stops at
 * the next step boundary as on tpt_trainer_request_stop (stop reason
 * "tpt_trainer_free"; after_train runs, the handle stays usable by the run's
 * callbacks) and tpt_trainer_run releases the trainer as it returns. */
TPT_API void tpt_trainer_free(tpt_trainer *trainer);

/* The body of the loop: called steps_per_epoch times per epoch. Return NULL to
 * go on, tpt_status_new(TPT_STOP, reason) to end training gracefully, or any
 * other status to fail it (tpt_trainer_run returns that code and message). The
 * library takes ownership of the returned status. */
typedef tpt_status *(*tpt_run_step_fn)(tpt_trainer *trainer, void *user_data);

/* Sets run_step, replacing an earlier one (whose destroy then runs). The
 * library owns user_data from this call on and calls destroy(user_data)
 * exactly once, when the trainer is freed or run_step is replaced, and at
 * once if this call fails. destroy may be NULL. Before run only. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_run_step(tpt_trainer *trainer,
                                                           tpt_run_step_fn run_step,
                                                           void *user_data,
                                                           void (*destroy)(void *user_data));

/* The work of one hooked step, run between the callbacks' BEFORE_RUN and
 * AFTER_RUN. It may publish named outputs (tpt_trainer_set_output*). Same
 * return convention as tpt_run_step_fn. */
typedef tpt_status *(*tpt_step_fn)(tpt_trainer *trainer, void *user_data);

/* Runs one hooked step from inside run_step: BEFORE_RUN of every callback
 * that asked for it, then step(trainer, user_data) (step may be NULL: hooks
 * only), then AFTER_RUN; global_step advances by one. Returns what the step or
 * a callback returned (TPT_STOP included): run_step should return it as it is.
 * Only during run_step, on the training thread, and not nested: from a step
 * function or a BEFORE_RUN / AFTER_RUN callback it is TPT_ERR_STATE. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_hooked_step(tpt_trainer *trainer, tpt_step_fn step,
                                                          void *user_data);

/* Runs the training: callbacks SETUP, BEFORE_TRAIN, the epochs, and always
 * AFTER_TRAIN for every callback. Returns NULL when training finished or was
 * stopped (see tpt_trainer_stop_reason), or the error that ended it: a
 * callback's or run_step's status keeps its code and message. A trainer runs
 * once: from inside its own run this is TPT_ERR_STATE. On the caller's
 * thread; callbacks fire on it. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_run(tpt_trainer *trainer);

/* Asks the trainer to stop before its next step (a graceful stop: AFTER_TRAIN
 * runs, run returns NULL). Safe from any thread and from a signal handler. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_request_stop(tpt_trainer *trainer);

/* The same stop for the signal `signo`, as stop_on_signals makes it: the stop
 * reason is the signal's name ("SIGTERM") and a ModelSaver saves a checkpoint
 * at the stop. For hosts with signal handlers of their own: call it from the
 * handler (async-signal-safe; a NULL or dead handle is ignored). Single
 * process only: in a distributed job use stop_on_signals, which makes every
 * rank stop at the same step. */
TPT_API void tpt_trainer_signal_stop(tpt_trainer *trainer, int signo);

/* Why the last run stopped early: the message of the TPT_STOP status, or
 * "tpt_trainer_request_stop" for a request. *out is NULL when training ran to
 * max_epoch or failed. The string lives as long as the trainer. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_stop_reason(const char **out,
                                                          const tpt_trainer *trainer);

/* The loop counters (see above). Readable at any time from the training thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_epoch_num(int64_t *out, const tpt_trainer *trainer);
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_local_step(int64_t *out, const tpt_trainer *trainer);
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_global_step(int64_t *out, const tpt_trainer *trainer);

/* Sets global_step, e.g. after restoring a checkpoint. Before run, or from a
 * SETUP or BEFORE_TRAIN callback (the loop reads it again after BEFORE_TRAIN). */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_global_step(tpt_trainer *trainer, int64_t step);

/* The log directory in use: the one given, or the new one TPT_LOGDIR_NEW
 * chose. *out is NULL without a log directory, or before run set it up.
 * The string lives as long as the trainer. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_logdir(const char **out, const tpt_trainer *trainer);

/* Writes a line to the trainer's log (stdout when console is on, and
 * log.log in the log directory), prefixed like the trainer's own lines. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_log(tpt_trainer *trainer, const char *message);

/* ---- Step outputs --------------------------------------------------------
 * A hooked step may publish named outputs; AFTER_RUN callbacks (and anything
 * until the next hooked step begins) read them. Names are copied. */

/* Publishes a scalar output. Inside a hooked step only. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_output_scalar(tpt_trainer *trainer,
                                                                const char *name, double value);

/* Publishes a tensor output; the trainer keeps its own reference (the caller
 * still owns and frees `tensor`). Inside a hooked step only. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_output(tpt_trainer *trainer, const char *name,
                                                         const tpt_tensor *tensor);

/* Reads a scalar output of the latest hooked step (a tensor output of one
 * element is converted). TPT_ERR_NOT_FOUND if the step did not publish it. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_output_scalar(double *out,
                                                            const tpt_trainer *trainer,
                                                            const char *name);

/* A new handle on a tensor output of the latest hooked step (a scalar output
 * comes back as a 0-d f64 tensor). The caller owns *out. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_output(tpt_tensor **out, const tpt_trainer *trainer,
                                                     const char *name);

/* ------------------------------------------------------------------------ */
/* Callbacks                                                                 */
/*                                                                           */
/* One callback type for everything: a function that receives an event from */
/* the set it asked for. Events and their order in one run:                  */
/*   SETUP, BEFORE_TRAIN,                                                    */
/*   per epoch: BEFORE_EPOCH, per step: [run_step: per hooked step           */
/*     BEFORE_RUN, step, AFTER_RUN], TRIGGER_STEP; then AFTER_EPOCH,         */
/*     TRIGGER_EPOCH,                                                        */
/*   AFTER_TRAIN (always, for every callback, whatever happened before).     */
/* TRIGGER is "do your thing": a callback that asks for TRIGGER but not      */
/* TRIGGER_EPOCH gets TRIGGER after each epoch; scheduling wrappers call it  */
/* at other times. RECORD is for monitors (tpt_trainer_add_monitor): it      */
/* brings each scalar put with tpt_trainer_put_scalar.                       */
/*                                                                           */
/* Each event is delivered to the callbacks in registration order:           */
/* input-source callbacks, trainer callbacks, the step counter, the user's   */
/* callbacks, the default callbacks, then the monitors. A callback that did  */
/* not ask for an event costs nothing for it (per-step events included).     */
/* ------------------------------------------------------------------------ */

typedef enum tpt_event {
  TPT_EVENT_SETUP = 1 << 0,
  TPT_EVENT_BEFORE_TRAIN = 1 << 1,
  TPT_EVENT_BEFORE_EPOCH = 1 << 2,
  TPT_EVENT_BEFORE_RUN = 1 << 3,
  TPT_EVENT_AFTER_RUN = 1 << 4,
  TPT_EVENT_TRIGGER_STEP = 1 << 5,
  TPT_EVENT_AFTER_EPOCH = 1 << 6,
  TPT_EVENT_TRIGGER_EPOCH = 1 << 7,
  TPT_EVENT_TRIGGER = 1 << 8,
  TPT_EVENT_AFTER_TRAIN = 1 << 9,
  TPT_EVENT_RECORD = 1 << 10,
  TPT_EVENT_ALL = (1 << 11) - 1,
  TPT_EVENT_FORCE32 = 0x7fffffff
} tpt_event;

/* Kinds of monitor records. Monitors ignore kinds they do not know
 * (histograms and text will be added as new kinds). */
typedef enum tpt_record_kind {
  TPT_RECORD_SCALAR = 1,
  TPT_RECORD_IMAGE = 2, /* tensor: uint8, N x H x W x C (C = 1, 3 or 4); value unused */
  TPT_RECORD_FORCE32 = 0x7fffffff
} tpt_record_kind;

/* A record brought to monitors by TPT_EVENT_RECORD. Borrowed: valid during
 * the callback only. `struct_size` is sizeof the struct the library filled:
 * fields past it do not exist (a newer header against an older library). */
typedef struct tpt_record {
  uint32_t struct_size;
  tpt_record_kind kind;
  const char *name;          /* as given to tpt_trainer_put_scalar */
  int64_t global_step;       /* when it was put */
  int64_t epoch_num;
  double value;              /* TPT_RECORD_SCALAR */
  const tpt_tensor *tensor;  /* TPT_RECORD_IMAGE; NULL for scalars */
} tpt_record;

/* The callback function. `record` is non-NULL only for TPT_EVENT_RECORD.
 * Return NULL to go on, a TPT_STOP status to end training gracefully, or any
 * other status to fail training with that code and message (the library takes
 * ownership). During AFTER_TRAIN a returned error is reported but the other
 * callbacks still run; TPT_STOP is ignored there. */
typedef tpt_status *(*tpt_callback_fn)(tpt_trainer *trainer, tpt_event event,
                                       const tpt_record *record, void *user_data);

/* Describes a callback. Initialise with TPT_CALLBACK_DESC_INIT. */
#define TPT_CALLBACK_DESC_VERSION 2
typedef struct tpt_callback_desc {
  uint32_t version;     /* TPT_CALLBACK_DESC_VERSION */
  uint32_t events;      /* a mask of tpt_event: the events to deliver */
  const char *name;     /* for logs and the slow-callback report; copied; NULL: "callback" */
  int32_t chief_only;   /* nonzero (default, as tensorpack): dropped on non-chief trainers */
  tpt_callback_fn fn;
  void *user_data;
  void (*destroy)(void *user_data); /* called exactly once; may be NULL */
  /* version 2: the callback's own state in checkpoints (both or neither).
   * save returns a new tensor of any dtype and shape (the library frees
   * it); restore gets it back, with the dtype and shape it had, when a
   * resumed run starts (after SETUP, before BEFORE_TRAIN). The callback's
   * name is its key in the checkpoint. A checkpoint made elsewhere can hold
   * any tensor of a tpt_dtype whose bytes fit its shape (the library checks
   * that much): check the shape you expect before you use it. */
  tpt_status *(*save)(tpt_tensor **out, void *user_data);
  tpt_status *(*restore)(const tpt_tensor *state, void *user_data);
} tpt_callback_desc;
#define TPT_CALLBACK_DESC_INIT { TPT_CALLBACK_DESC_VERSION, 0, NULL, 1, NULL, NULL, NULL, NULL, NULL }

typedef struct tpt_callback tpt_callback;

/* Makes a callback from a description. The library owns desc->user_data from
 * this call on: destroy runs exactly once, when the callback is freed (by the
 * trainer that took it, or tpt_callback_free), or at once if this call fails.
 * The caller owns *out until it gives it to a trainer or a wrapper. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_new(tpt_callback **out,
                                                   const tpt_callback_desc *desc);

/* Releases a callback that was not given away. NULL is a no-op. */
TPT_API void tpt_callback_free(tpt_callback *callback);

/* Scheduling wrappers (tensorpack's). Each takes ownership of `inner` (also on
 * failure) and gives a new callback in *out.
 *
 * periodic_trigger: every event passes through to inner, except TRIGGER_EPOCH
 * which is replaced: inner gets TRIGGER when global_step % every_k_steps == 0
 * (checked after each step), when epoch_num % every_k_epochs == 0 (after each
 * epoch) and, with before_train, in BEFORE_TRAIN. 0 disables a condition; at
 * least one must be set. Use it to make a callback trigger more often. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_periodic_trigger(tpt_callback **out,
                                                                tpt_callback *inner,
                                                                int64_t every_k_steps,
                                                                int64_t every_k_epochs,
                                                                int32_t before_train);

/* A predicate for tpt_callback_enable_if: 1 enables, 0 disables, a negative
 * value fails training (TPT_ERR_CALLBACK). */
typedef int32_t (*tpt_predicate_fn)(tpt_trainer *trainer, void *user_data);

/* enable_if: BEFORE/AFTER_EPOCH, BEFORE/AFTER_RUN, TRIGGER_STEP and
 * TRIGGER_EPOCH reach inner only when predicate(trainer) is true (for a run it
 * is asked in BEFORE_RUN and remembered for AFTER_RUN); other events always
 * pass. The library owns user_data (destroy exactly once, as above). */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_enable_if(tpt_callback **out, tpt_callback *inner,
                                                         tpt_predicate_fn predicate,
                                                         void *user_data,
                                                         void (*destroy)(void *user_data));

/* periodic: enable_if with the predicate "global_step % every_k_steps == 0, or
 * epoch_num % every_k_epochs == 0, or (with every_k_epochs) the last step of
 * the last epoch". 0 disables a condition; at least one must be set. It only
 * makes a callback run less often. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_periodic(tpt_callback **out, tpt_callback *inner,
                                                        int64_t every_k_steps,
                                                        int64_t every_k_epochs);

/* Registers a user callback. Takes ownership of `callback` (also on failure).
 * A chief-only callback on a non-chief trainer is dropped (and freed), with a
 * log line. Before run only: the list is frozen once run starts. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_add_callback(tpt_trainer *trainer,
                                                           tpt_callback *callback);

/* ---- Monitors -------------------------------------------------------------
 * Monitors are callbacks registered last that also receive RECORD events.
 * Built in (default_monitors): the TensorBoard writer (with a log directory,
 * see tpt_monitor_tensorboard), the stats.json writer (with a log directory:
 * one entry per epoch, and one per step where scalars were put mid-epoch,
 * each with epoch_num and global_step; rewritten atomically after each epoch
 * and at most every 5 s mid-epoch; appended to when
 * starting_epoch continues its last epoch_num, else the old file is kept as
 * stats.json.<MMDD-HHMMSS>) and the scalar printer (the latest value of each
 * scalar, sorted by name, after each epoch). NaN and infinities are written to
 * stats.json as null. */

/* Registers a monitor (a callback that asked for TPT_EVENT_RECORD, and any
 * other events it wants). Takes ownership of `monitor` (also on failure).
 * Before run only. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_add_monitor(tpt_trainer *trainer,
                                                          tpt_callback *monitor);

/* Puts a scalar: recorded in the history with the current global_step and
 * brought to every monitor at once. From run_step, steps and callbacks, on
 * the training thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_put_scalar(tpt_trainer *trainer, const char *name,
                                                         double value);

/* tensorpack's put_image: `image` is H x W, H x W x C or N x H x W x C with
 * C = 1 (grey), 3 (RGB) or 4 (RGBA), of dtype uint8, or floating point in
 * [0, 255] (rounded and clamped; NaN or infinite values are an error). Brought to every monitor at once as a
 * TPT_RECORD_IMAGE record of uint8 N x H x W x C; not kept in the history,
 * not in stats.json. Same threads and times as tpt_trainer_put_scalar. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_put_image(tpt_trainer *trainer, const char *name,
                                                        const tpt_tensor *image);

/* Options of tpt_image_grid (torchvision's make_grid). Initialise with
 * TPT_IMAGE_GRID_OPTIONS_INIT. */
#define TPT_IMAGE_GRID_OPTIONS_VERSION 1
typedef struct tpt_image_grid_options {
  uint32_t version;  /* TPT_IMAGE_GRID_OPTIONS_VERSION */
  int32_t columns;   /* images per row, >= 1; default 8 */
  int32_t padding;   /* pixels between the images and around them, 0 to 4096; default 2 */
  double low, high;  /* the values drawn black and white (linear between, clamped);
                        low == high (default 0, 0): the images' own minimum and maximum */
  double pad_value;  /* the padding's grey level in [0, 255]; default 0 */
} tpt_image_grid_options;
#define TPT_IMAGE_GRID_OPTIONS_INIT { TPT_IMAGE_GRID_OPTIONS_VERSION, 8, 2, 0.0, 0.0, 0.0 }

/* Tiles a batch of images into one (torchvision's make_grid), e.g. a
 * generator's samples: `images` is N x C x H x W (LibTorch's layout, as a
 * tower computes them; C = 1, 3 or 4) or N x H x W, of any real dtype
 * (NaN or infinite values are an error).
 * *out is a uint8 image of rows x cols x C (at most 2^24 pixels a side),
 * ready for tpt_trainer_put_image and tpt_image_write_png. `options` may be
 * NULL. */
TPT_API TPT_NODISCARD tpt_status *tpt_image_grid(tpt_tensor **out, const tpt_tensor *images,
                                                 const tpt_image_grid_options *options);

/* Writes `image` (as tpt_trainer_put_image takes it: H x W or H x W x C with
 * C = 1, 3 or 4; uint8, or floating point in [0, 255]; NaN or infinite
 * values are an error) to the PNG file
 * `path`, replacing it. TPT_ERR_IO naming the file when it cannot be
 * written. */
TPT_API TPT_NODISCARD tpt_status *tpt_image_write_png(const tpt_tensor *image, const char *path);

/* tensorpack's TFEventWriter: a monitor that writes the scalars and images
 * to a TensorFlow event file, events.out.tfevents.<unix time>.<host>, in
 * `dir` (NULL: the trainer's log directory; without either the monitor does
 * nothing), which TensorBoard reads. Scalars are float32 simple values,
 * images PNG (one as `name`, several as name/0, name/1, ...). The file is
 * flushed after each epoch and at the end; a resumed run starts a new file
 * with a SessionLog START event, so TensorBoard drops what the interrupted
 * run wrote after its checkpoint. Built in with default_monitors and a log
 * directory; add this one for another directory. docs/callbacks.md has the
 * format. The caller owns *out. */
TPT_API TPT_NODISCARD tpt_status *tpt_monitor_tensorboard(tpt_callback **out, const char *dir);

/* The latest value of a scalar and the global_step it was put at (step_out
 * may be NULL). TPT_ERR_NOT_FOUND if it was never put. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_scalar_latest(double *value_out, int64_t *step_out,
                                                            const tpt_trainer *trainer,
                                                            const char *name);

/* The history of a scalar: *count_out receives the number of entries; the
 * first min(count, capacity) (global_step, value) pairs are copied to steps
 * and values (either may be NULL). Capacity 0 queries the count.
 * TPT_ERR_NOT_FOUND if it was never put. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_scalar_history(size_t *count_out, int64_t *steps,
                                                             double *values, size_t capacity,
                                                             const tpt_trainer *trainer,
                                                             const char *name);

/* ------------------------------------------------------------------------ */
/* Models: tower functions and variables                                     */
/*                                                                           */
/* A model (tensorpack's ModelDesc) is an input signature, a tower function  */
/* and an optimizer. The tower function computes the model for one step from */
/* the step's input tensors and sets the cost; it may publish named outputs. */
/* It "might get called multiple times": once per tower per step (several   */
/* towers may call it at the same time from different threads), by          */
/* inference, and once when the model is built. Variables follow            */
/* tensorpack's rules: tpt_tower_variable creates a variable only in the     */
/* first call of the first training tower (the build call); every later call */
/* (other steps, other towers, inference) reuses it by name. Creating one    */
/* anywhere else, a shape or dtype that differs from the existing variable,  */
/* and one name used twice in one call are errors.                           */
/*                                                                           */
/* The build call runs when training is set up (or at the first inference),  */
/* on zero-filled inputs of the signature's shapes (-1 becomes 1), without   */
/* gradients; tpt_tower_is_building tells it apart. Layers skip their state  */
/* updates (BatchNorm statistics) in it.                                     */
/* ------------------------------------------------------------------------ */

typedef struct tpt_model tpt_model;
typedef struct tpt_tower tpt_tower; /* borrowed: valid during one tower function call */

/* The tower function. `inputs` are the step's tensors in signature order
 * (borrowed). Return NULL, or a status (the step fails with it; TPT_STOP
 * ends training gracefully). */
typedef tpt_status *(*tpt_tower_fn)(tpt_tower *tower, const tpt_tensor *const *inputs,
                                    size_t n_inputs, void *user_data);

/* One input of the signature. shape entries are >= 1, or -1 for a free
 * dimension (the batch). */
typedef struct tpt_input_spec {
  const char *name;
  tpt_dtype dtype;
  const int64_t *shape;
  size_t ndim;
} tpt_input_spec;

/* Makes a model. The signature is copied. The library owns user_data from
 * this call on (destroy exactly once: when the model's last reference goes,
 * or at once on failure). The caller owns *out; trainers that use the model
 * keep their own reference. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_new(tpt_model **out, const tpt_input_spec *inputs,
                                                size_t n_inputs, tpt_tower_fn tower_fn,
                                                void *user_data, void (*destroy)(void *user_data));

/* Drops the caller's reference. NULL is a no-op, and so is the model lent to
 * a config's init hook (the library's handle). */
TPT_API void tpt_model_free(tpt_model *model);

/* Builds the model now if it was not built yet (the build call; see above). */
TPT_API TPT_NODISCARD tpt_status *tpt_model_build(tpt_model *model);

/* A new handle on a variable's tensor (the same storage: in-place changes
 * are seen by the model). Called from inside the model's tower function, it
 * is the running tower's variable (a replica's under the replicated
 * strategy), whose gradients reach that tower's update; elsewhere tower 0's,
 * the model's own. TPT_ERR_NOT_FOUND if there is no such variable. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_variable(tpt_tensor **out, const tpt_model *model,
                                                     const char *name);

/* Copies `value` into a variable (same shape; converted to its dtype), e.g.
 * to initialise or restore it. Not while a step runs. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_set_variable(tpt_model *model, const char *name,
                                                         const tpt_tensor *value);

/* The variables' names in creation order, one per line, into buf
 * (NUL-terminated; an error if it does not fit; *needed receives the size
 * needed when not NULL). */
TPT_API TPT_NODISCARD tpt_status *tpt_model_variable_names(char *buf, size_t size, size_t *needed,
                                                           const tpt_model *model);

/* Runs the tower function as an inference tower ("InferenceTower": not
 * training, no gradients, no variable is created or changed) on `inputs`
 * and returns the named outputs it published, in the order of `names`
 * (the cost is the output "cost"). The caller owns outputs[0..n_names)
 * (inside a tower function or callback: that call's scope does).
 * Several threads may call it at once on one model (the tower function then
 * runs on them at once: tptrain's layers allow that), but not while a
 * trainer trains the model. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_infer(tpt_tensor **outputs, tpt_model *model,
                                                  const tpt_tensor *const *inputs, size_t n_inputs,
                                                  const char *const *names, size_t n_names);

/* ---- Inside a tower function ---------------------------------------------- */

TPT_API TPT_NODISCARD tpt_status *tpt_tower_is_training(int32_t *out, const tpt_tower *tower);
TPT_API TPT_NODISCARD tpt_status *tpt_tower_is_building(int32_t *out, const tpt_tower *tower);
/* The tower's index among the training towers (0 for inference towers). */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_index(int32_t *out, const tpt_tower *tower);
/* "tower0", "tower1", ... or "InferenceTower"; copied into buf. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_name(char *buf, size_t size, const tpt_tower *tower);
/* The tower's device ("cpu", "cuda:1"); copied into buf. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_device(char *buf, size_t size, const tpt_tower *tower);
/* 1 when tpt_tower_variable may create variables in this call. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_can_create_variables(int32_t *out,
                                                                 const tpt_tower *tower);

/* Sets the cost (a floating tensor of one element) that training minimises.
 * A training tower must set it. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_set_cost(tpt_tower *tower, const tpt_tensor *cost);

/* Publishes a named output (logits, accuracy, wrong counts): step outputs for
 * callbacks (tpt_trainer_output) and inference results. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_set_output(tpt_tower *tower, const char *name,
                                                       const tpt_tensor *value);

/* Name scopes: variables created inside get "scope/" in front of their name
 * (layers do this with their own name). pop closes the innermost scope. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_push_scope(tpt_tower *tower, const char *scope);
/* A scope whose variables one call of the tower function may use more than
 * once (tensorpack's auto_reuse_variable_scope): a net applied twice, e.g. a
 * GAN's discriminator on real and on generated images, shares its variables
 * (BatchNorm's moving averages are then updated by each application). */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_push_reuse_scope(tpt_tower *tower, const char *scope);
TPT_API TPT_NODISCARD tpt_status *tpt_tower_pop_scope(tpt_tower *tower);

/* Initializers of variables. */
typedef enum tpt_init {
  TPT_INIT_ZEROS = 1,
  TPT_INIT_CONSTANT = 2,         /* a */
  TPT_INIT_UNIFORM = 3,          /* in [a, b) */
  TPT_INIT_NORMAL = 4,           /* mean a, standard deviation b */
  TPT_INIT_TRUNCATED_NORMAL = 5, /* mean a, standard deviation b, redrawn beyond 2 b */
  TPT_INIT_GLOROT_UNIFORM = 6,   /* Xavier; a: gain (1 when 0) */
  TPT_INIT_GLOROT_NORMAL = 7,
  TPT_INIT_HE_UNIFORM = 8,       /* Kaiming, fan_in, ReLU gain; a: negative slope */
  TPT_INIT_HE_NORMAL = 9,
  TPT_INIT_FORCE32 = 0x7fffffff
} tpt_init;

/* Options of a variable. Initialise with TPT_VARIABLE_OPTIONS_INIT. */
#define TPT_VARIABLE_OPTIONS_VERSION 1
typedef struct tpt_variable_options {
  uint32_t version;   /* TPT_VARIABLE_OPTIONS_VERSION */
  tpt_dtype dtype;    /* default TPT_DTYPE_F32 (floating dtypes only when trainable) */
  tpt_init init;      /* default TPT_INIT_GLOROT_UNIFORM */
  int32_t trainable;  /* nonzero (default): trained; 0: model-only (saved, not trained) */
  double a, b;        /* initializer parameters (see tpt_init) */
} tpt_variable_options;
#define TPT_VARIABLE_OPTIONS_INIT \
  { TPT_VARIABLE_OPTIONS_VERSION, TPT_DTYPE_F32, TPT_INIT_GLOROT_UNIFORM, 1, 0.0, 0.0 }

/* Gets the variable `name` (prefixed by the current scopes), creating it in
 * the build call. *out is a new handle on the variable itself (trainable
 * variables carry gradients); the caller frees the handle. A full name
 * (scopes included) has at most 1024 characters. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_variable(tpt_tensor **out, tpt_tower *tower,
                                                     const char *name, const int64_t *shape,
                                                     size_t ndim,
                                                     const tpt_variable_options *options);

/* Seeds LibTorch's default random generator (variable initializers, dropout). */
TPT_API TPT_NODISCARD tpt_status *tpt_manual_seed(uint64_t seed);

/* ---- TorchScript models ----------------------------------------------------
 * A module saved with torch.jit.save (for example from Python), trained as a
 * tower function: forward(*inputs) returns the cost, or a tuple (cost,
 * outputs) with outputs a Dict[str, Tensor] of named outputs. Its parameters
 * become trainable variables and its buffers model-only variables, named by
 * their path with "/" ("fc1.weight" -> "fc1/weight"); they are the module's
 * own tensors, so tpt_model_save_torchscript writes the trained module. The
 * module runs in train() mode in training towers and eval() mode in
 * inference. There is no build call: the variables exist from the start.
 * forward's arguments must take the signature's tensors (their number and
 * types are checked when the model is made). */

/* Loads `path` as a model with the given input signature (the signature is
 * checked against each batch, as for any model). */
TPT_API TPT_NODISCARD tpt_status *tpt_model_from_torchscript(tpt_model **out, const char *path,
                                                             const tpt_input_spec *inputs,
                                                             size_t n_inputs);

/* A parameter or buffer of a module compiled from source: a flat attribute
 * name (a TorchScript identifier, used as self.<name> in the source), its
 * shape, and how it is made (NULL: TPT_VARIABLE_OPTIONS_INIT; trainable
 * ones become parameters, model-only ones buffers). */
typedef struct tpt_torchscript_param {
  const char *name;
  const int64_t *shape;
  size_t ndim;
  const tpt_variable_options *options;
} tpt_torchscript_param;

/* Compiles TorchScript source into a model: `source` defines forward(self,
 * ...) (and any helper methods) over the attributes in params, which are
 * created and initialised first (with LibTorch's default generator, see
 * tpt_manual_seed). Same conventions as tpt_model_from_torchscript;
 * self.training is the train()/eval() flag. A compile error is
 * TPT_ERR_INVALID_ARGUMENT with the compiler's message, as are names that
 * are not identifiers, are reserved (Python's keywords, self, forward,
 * training) or repeated, and dimensions < 1. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_from_torchscript_source(
    tpt_model **out, const char *source, const tpt_torchscript_param *params, size_t n_params,
    const tpt_input_spec *inputs, size_t n_inputs);

/* Saves a TorchScript model's module, with its current (trained) values, for
 * torch.jit.load or tpt_model_from_torchscript. TPT_ERR_UNSUPPORTED for a
 * model made from a C tower function. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_save_torchscript(const tpt_model *model, const char *path);

/* ------------------------------------------------------------------------ */
/* Layers, losses and metrics                                                */
/*                                                                           */
/* tensorpack-style helpers for tower functions. A layer with variables     */
/* creates them under its name (tpt_layer_fc(.., "fc1", ..) makes "fc1/W"    */
/* and "fc1/b") in the current scope, with the tower's reuse rules. Tensors  */
/* use LibTorch's layouts: images NCHW; a fully-connected weight is          */
/* [units, in]; a convolution weight [filters, in / groups, kh, kw]; a       */
/* transposed convolution weight [in, filters / groups, kh, kw]. Every       */
/* result is a new tensor owned by the caller. Options may be NULL.          */
/* ------------------------------------------------------------------------ */

typedef enum tpt_activation {
  TPT_ACT_NONE = 0,
  TPT_ACT_RELU = 1,
  TPT_ACT_LEAKY_RELU = 2, /* slope `alpha` */
  TPT_ACT_SIGMOID = 3,
  TPT_ACT_TANH = 4,
  TPT_ACT_GELU = 5,
  TPT_ACT_SOFTMAX = 6,    /* over dimension 1 */
  TPT_ACT_FORCE32 = 0x7fffffff
} tpt_activation;

typedef enum tpt_padding {
  TPT_PADDING_SAME = 0,  /* output size ceil(in / stride), as tensorpack */
  TPT_PADDING_VALID = 1, /* no padding */
  TPT_PADDING_FORCE32 = 0x7fffffff
} tpt_padding;

/* Options of layers with weights. Initialise with TPT_LAYER_OPTIONS_INIT. */
#define TPT_LAYER_OPTIONS_VERSION 1
typedef struct tpt_layer_options {
  uint32_t version;          /* TPT_LAYER_OPTIONS_VERSION */
  int32_t use_bias;          /* 1 */
  tpt_activation activation; /* TPT_ACT_NONE */
  double alpha;              /* leaky ReLU slope (0.2) */
  tpt_init kernel_init;      /* TPT_INIT_HE_NORMAL (He uses alpha with leaky ReLU; uniform
                                is [-0.05, 0.05), normal and truncated normal std 0.05) */
  tpt_init bias_init;        /* TPT_INIT_ZEROS */
  /* convolutions */
  int64_t kernel[2];         /* {3, 3} */
  int64_t stride[2];         /* {1, 1} */
  int64_t dilation[2];       /* {1, 1} */
  int64_t groups;            /* 1 */
  tpt_padding padding;       /* TPT_PADDING_SAME */
} tpt_layer_options;
#define TPT_LAYER_OPTIONS_INIT                                                             \
  { TPT_LAYER_OPTIONS_VERSION, 1, TPT_ACT_NONE, 0.2, TPT_INIT_HE_NORMAL, TPT_INIT_ZEROS, \
    {3, 3}, {1, 1}, {1, 1}, 1, TPT_PADDING_SAME }

/* y = act(x W^T + b); x is [N, in] (more dimensions are flattened). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_fc(tpt_tensor **out, tpt_tower *tower, const char *name,
                                               const tpt_tensor *x, int64_t units,
                                               const tpt_layer_options *options);

/* 2-D convolution of x [N, C, H, W] into `filters` channels. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_conv2d(tpt_tensor **out, tpt_tower *tower,
                                                   const char *name, const tpt_tensor *x,
                                                   int64_t filters,
                                                   const tpt_layer_options *options);

/* 2-D transposed convolution (SAME: output size in * stride). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_conv2d_transpose(tpt_tensor **out, tpt_tower *tower,
                                                             const char *name, const tpt_tensor *x,
                                                             int64_t filters,
                                                             const tpt_layer_options *options);

/* Max or average pooling of x [N, C, H, W] with a square window. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_max_pool(tpt_tensor **out, const tpt_tensor *x,
                                                     int64_t kernel, int64_t stride,
                                                     tpt_padding padding);
TPT_API TPT_NODISCARD tpt_status *tpt_layer_avg_pool(tpt_tensor **out, const tpt_tensor *x,
                                                     int64_t kernel, int64_t stride,
                                                     tpt_padding padding);
/* Mean over H and W: [N, C, H, W] -> [N, C]. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_global_avg_pool(tpt_tensor **out, const tpt_tensor *x);

/* Batch normalisation over dimension 1 of x ([N, C] or [N, C, H, W]), with
 * variables "name/gamma", "name/beta" (trainable) and "name/mean/EMA",
 * "name/variance/EMA" (model-only). Training towers normalise with the batch
 * statistics; only the first training tower (index 0) updates the moving
 * averages (ema = momentum * ema + (1 - momentum) * batch, unbiased batch
 * variance, as PyTorch), and never in the build call. Inference towers use
 * the moving averages. momentum 0.9 and eps 1e-5 are tensorpack's and
 * PyTorch's defaults (PyTorch writes momentum as 1 - 0.9 = 0.1). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_batch_norm(tpt_tensor **out, tpt_tower *tower,
                                                       const char *name, const tpt_tensor *x,
                                                       double momentum, double eps);

/* Layer normalisation over the last dimension, with "name/gamma", "name/beta"
 * of that dimension's size (PyTorch's LayerNorm(d)). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_layer_norm(tpt_tensor **out, tpt_tower *tower,
                                                       const char *name, const tpt_tensor *x,
                                                       double eps);

/* Layer normalisation over the dimensions `axes` (negative: from the end):
 * (x - mean) / sqrt(var + eps) * gamma + beta, mean and the biased variance
 * per example over `axes`, "name/gamma" and "name/beta" of size
 * x.shape[channel_axis] broadcast along it. axes {1, 2, 3} with
 * channel_axis 1 is tensorpack's LayerNorm of an NCHW tensor. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_layer_norm_axes(tpt_tensor **out, tpt_tower *tower,
                                                            const char *name, const tpt_tensor *x,
                                                            const int64_t *axes, size_t n_axes,
                                                            int64_t channel_axis, double eps);

/* Dropout with drop probability `rate` in training towers; the identity in
 * inference towers and in the build call. The simple trainer draws the mask
 * from LibTorch's default generator; under the multi-tower strategies and in
 * distributed jobs each tower draws from its own, reseeded every step from
 * the seed, the rank, the tower and the step (docs/towers.md), so runs are
 * reproducible and resume exactly. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_dropout(tpt_tensor **out, const tpt_tower *tower,
                                                    const tpt_tensor *x, double rate);

/* An activation (alpha: the leaky ReLU slope). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_activation(tpt_tensor **out, const tpt_tensor *x,
                                                       tpt_activation activation, double alpha);

/* [N, ...] -> [N, product of the rest]. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_flatten(tpt_tensor **out, const tpt_tensor *x);

/* Concatenation along `dim`. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_concat(tpt_tensor **out, const tpt_tensor *const *xs,
                                                   size_t n, int64_t dim);

/* Losses, averaged over the batch: softmax cross-entropy of logits [N, K]
 * with integer labels [N] (i64); sigmoid cross-entropy of logits with
 * targets of the same shape; mean squared error; mean absolute error. */
TPT_API TPT_NODISCARD tpt_status *tpt_loss_softmax_cross_entropy(tpt_tensor **out,
                                                                 const tpt_tensor *logits,
                                                                 const tpt_tensor *labels);
TPT_API TPT_NODISCARD tpt_status *tpt_loss_sigmoid_cross_entropy(tpt_tensor **out,
                                                                 const tpt_tensor *logits,
                                                                 const tpt_tensor *targets);
TPT_API TPT_NODISCARD tpt_status *tpt_loss_mse(tpt_tensor **out, const tpt_tensor *prediction,
                                               const tpt_tensor *target);
TPT_API TPT_NODISCARD tpt_status *tpt_loss_l1(tpt_tensor **out, const tpt_tensor *prediction,
                                              const tpt_tensor *target);

/* weight * sum over the trainable variables w whose name matches `pattern`
 * (ECMAScript regular expression, searched), e.g. "/W$", of sum(w^2): L2
 * regularisation as PyTorch's weight decay counts it. A 0-d tensor, to add
 * to the cost. The variables are the calling tower's own: with towers, each
 * tower's term sends its gradient into that tower's update, as a term
 * computed from the tower's layers would. tensorpack's recipes use TensorFlow's
 * regularize_cost(pattern, l2_regularizer(wd)) = wd * sum(w^2) / 2
 * (tf.nn.l2_loss): pass weight = wd / 2 to port them. */
TPT_API TPT_NODISCARD tpt_status *tpt_regularize_l2(tpt_tensor **out, tpt_tower *tower,
                                                    const char *pattern, double weight);

/* Metrics of logits [N, K] against integer labels [N]: accuracy (a 0-d f32
 * tensor), and the wrong vector of top-k classification (a [N] f32 tensor of
 * 0/1: 1 where the label is not among the k largest logits; tensorpack's
 * prediction_incorrect, whose mean is the error rate). */
TPT_API TPT_NODISCARD tpt_status *tpt_metric_accuracy(tpt_tensor **out, const tpt_tensor *logits,
                                                      const tpt_tensor *labels);
TPT_API TPT_NODISCARD tpt_status *tpt_metric_wrong(tpt_tensor **out, const tpt_tensor *logits,
                                                   const tpt_tensor *labels, int64_t k);

/* ------------------------------------------------------------------------ */
/* Optimizers                                                                */
/*                                                                           */
/* Made by kind, configured by hyper-parameter name; names can be read and   */
/* set during training (schedules), from the training thread.                */
/*   "sgd":     learning_rate (0.01), momentum (0), dampening (0),           */
/*              weight_decay (0), nesterov (0/1)                              */
/*   "adam", "adamw": learning_rate (0.001), beta1 (0.9), beta2 (0.999),     */
/*              eps (1e-8), weight_decay (0; adamw 0.01), amsgrad (0/1)       */
/*   "rmsprop": learning_rate (0.01), alpha (0.99), eps (1e-8), momentum (0),*/
/*              weight_decay (0), centered (0/1)                              */
/*   "adagrad": learning_rate (0.01), lr_decay (0), weight_decay (0),        */
/*              initial_accumulator_value (0), eps (1e-10)                    */
/* Gradient processing, for every kind:                                      */
/*   "clip_global_norm" (0: off): when > 0, after accumulation and scaling,  */
/*     PyTorch's clip_grad_norm_ bit for bit (float32 steps): norm = the     */
/*     2-norm of the stacked 2-norms of the gradients, every gradient times  */
/*     min(1, clip_global_norm / (norm + 1e-6));                              */
/*   "clip_global_norm_tf" (0; 1: TensorFlow's clip_by_global_norm instead,  */
/*     tensorpack's GlobalNormClip: g * clip / max(norm, clip));              */
/*   "clip_value" (0: off; every gradient element clamped to +-clip_value,  */
/*     before the global-norm clip),                                          */
/*   "accumulate_steps" (1: apply every step; N: average N micro-steps),     */
/*   "check_numerics" (1, the default: a NaN or Inf cost fails the step;    */
/*   2: a NaN or Inf gradient too, at the price of one more sync per step;   */
/*   0: no check).                                                            */
/* ------------------------------------------------------------------------ */

typedef struct tpt_optimizer tpt_optimizer;

TPT_API TPT_NODISCARD tpt_status *tpt_optimizer_new(tpt_optimizer **out, const char *kind);
/* Drops the caller's reference. NULL is a no-op. */
TPT_API void tpt_optimizer_free(tpt_optimizer *optimizer);
TPT_API TPT_NODISCARD tpt_status *tpt_optimizer_set(tpt_optimizer *optimizer, const char *name,
                                                    double value);
TPT_API TPT_NODISCARD tpt_status *tpt_optimizer_get(double *out, const tpt_optimizer *optimizer,
                                                    const char *name);
/* Multiplies the gradients of the variables whose name matches `pattern`
 * (an ECMAScript regular expression, searched) by `factor`, before clipping. */
TPT_API TPT_NODISCARD tpt_status *tpt_optimizer_scale_gradients(tpt_optimizer *optimizer,
                                                                const char *pattern, double factor);

/* tensorpack's ScheduledHyperParamSetter: a callback (on every worker) that
 * sets the optimizer's hyper-parameter `param` on a schedule. Each point
 * sets its value after epoch `at` completes (at TRIGGER_EPOCH; at = 0:
 * before the first epoch, in BEFORE_TRAIN), or at global step `at` with
 * TPT_SCHEDULE_STEP_BASED (at TRIGGER_STEP). With TPT_SCHEDULE_LINEAR the
 * value is interpolated between points at every trigger (never before the
 * first point or after the last). In BEFORE_TRAIN the value that should hold
 * at the current epoch (or step) is worked out from the points up to it and,
 * when the optimizer's differs, a warning is logged and the value set (not
 * with TPT_SCHEDULE_NOT_AT_BEGINNING): a resumed run follows the schedule.
 * Points are sorted; they must be >= 0, distinct and finite. Keeps a
 * reference to the optimizer. */
typedef struct tpt_schedule_point {
  int64_t at;   /* an epoch number, or a global step */
  double value;
} tpt_schedule_point;
typedef enum tpt_schedule_flags {
  TPT_SCHEDULE_LINEAR = 1,
  TPT_SCHEDULE_STEP_BASED = 2,
  TPT_SCHEDULE_NOT_AT_BEGINNING = 4,
  TPT_SCHEDULE_FORCE32 = 0x7fffffff
} tpt_schedule_flags;
TPT_API TPT_NODISCARD tpt_status *tpt_callback_scheduled_hyperparam(tpt_callback **out,
                                                                    tpt_optimizer *optimizer,
                                                                    const char *param,
                                                                    const tpt_schedule_point *schedule,
                                                                    size_t n_points, uint32_t flags);

/* tensorpack's HyperParamSetterWithFunc: in BEFORE_TRAIN and at every
 * TRIGGER (after each epoch), fn(&value, epoch_num, current value) gives the
 * value to set; epoch_num is the number of finished epochs (starting_epoch - 1
 * in BEFORE_TRAIN, the resumed epoch - 1 after a resume). fn returns NULL, or
 * an error that fails training. The library owns user_data (destroy exactly
 * once, also when this call fails). Keeps a reference to the optimizer. */
typedef tpt_status *(*tpt_hyperparam_fn)(double *value, int64_t epoch_num, double current,
                                         void *user_data);
TPT_API TPT_NODISCARD tpt_status *tpt_callback_hyperparam_func(tpt_callback **out,
                                                               tpt_optimizer *optimizer,
                                                               const char *param,
                                                               tpt_hyperparam_fn fn, void *user_data,
                                                               void (*destroy)(void *user_data));

/* Options of tpt_callback_stat_monitor_param. Initialise with
 * TPT_STAT_MONITOR_OPTIONS_INIT. */
#define TPT_STAT_MONITOR_OPTIONS_VERSION 1
typedef struct tpt_stat_monitor_options {
  uint32_t version;   /* TPT_STAT_MONITOR_OPTIONS_VERSION */
  int64_t last_k;     /* the values compared, >= 2; default 5 */
  double threshold;   /* >= 0; default 0 */
  int32_t maximize;   /* nonzero: the stat should grow (tensorpack's reverse); default 0 */
  double factor;      /* the new value is current * factor; > 0, default 0.1 */
  double limit;       /* the value never goes past this: a floor when factor < 1, a
                         ceiling when factor > 1; default 0: no limit */
} tpt_stat_monitor_options;
#define TPT_STAT_MONITOR_OPTIONS_INIT { TPT_STAT_MONITOR_OPTIONS_VERSION, 5, 0.0, 0, 0.1, 0.0 }

/* tensorpack's StatMonitorParamSetter (reduce on plateau): at every TRIGGER
 * (after each epoch) it takes the newest value of the scalar `stat` (a step
 * it has seen is skipped with a warning) into a window of the last last_k
 * values. When the window is full and its first value was not beaten by more
 * than threshold (min >= first - threshold; maximize: max <= first +
 * threshold), it sets current * factor and empties the window. Nothing in
 * BEFORE_TRAIN. The window is saved in checkpoints. `options` may be NULL. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_stat_monitor_param(
    tpt_callback **out, tpt_optimizer *optimizer, const char *param, const char *stat,
    const tpt_stat_monitor_options *options);

/* tensorpack's HumanHyperParamSetter: in BEFORE_TRAIN and at every TRIGGER
 * (after each epoch) it reads `file` (NULL: "hyper.txt"; a relative name is in
 * the log directory), lines of the form name:value, and sets the value of
 * `param` when it is there. A missing file or name changes nothing; a line
 * that does not parse is logged and skipped. Edit the file while training
 * runs to change the learning rate by hand. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_human_hyperparam(tpt_callback **out,
                                                                tpt_optimizer *optimizer,
                                                                const char *param,
                                                                const char *file);

/* The model's optimizer. The model takes its own reference. Before training. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_set_optimizer(tpt_model *model,
                                                          tpt_optimizer *optimizer);

/* ------------------------------------------------------------------------ */
/* Dataflows: the input pipeline                                             */
/*                                                                           */
/* tensorpack's DataFlow library. A dataflow yields datapoints, each a list  */
/* of components (tensors; a scalar is a 0-d tensor). It is iterated in      */
/* passes: tpt_dataflow_next gives the pass's datapoints, then TPT_STOP once */
/* at its end; the next call starts another pass. A dataflow may be finite   */
/* or infinite and may know its size (datapoints per pass).                  */
/*                                                                           */
/* Handles are shared: a combinator keeps its own reference to the dataflows */
/* it reads, so the caller may free its handles at any time. A dataflow has  */
/* one consumer: using it in a second combinator or input, or iterating it   */
/* directly once it has one, is an error (tensorpack's "not reentrant").     */
/*                                                                           */
/* Randomness is seeded: tpt_dataflow_set_seed on the outermost dataflow     */
/* seeds every random part of the pipeline (each gets its own stream, mixed  */
/* from the seed and its place in the pipeline); without it the seed comes  */
/* from LibTorch's default generator (tpt_manual_seed), so a seeded program */
/* repeats its data. The random state can be saved and restored.            */
/*                                                                           */
/* Threads: a dataflow is iterated by one thread at a time. Callbacks of    */
/* sources run on the thread that iterates; map callbacks of                */
/* tpt_dataflow_parallel_map run on its worker threads, several at once.     */
/* Threads a dataflow starts (parallel map, prefetch, the queue input) are   */
/* joined when it is reset again, when its consumer stops, or when its last */
/* reference goes; none outlives it.                                         */
/* ------------------------------------------------------------------------ */

typedef struct tpt_dataflow tpt_dataflow;
typedef struct tpt_datapoint tpt_datapoint;

/* ---- Datapoints --------------------------------------------------------- */

/* An empty datapoint (for tpt_dataflow_next). The caller owns it. */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_new(tpt_datapoint **out);
/* NULL is a no-op, and so is a datapoint the library lent to a callback (the
 * `dp` of a source's next or of a map): it belongs to the call. */
TPT_API void tpt_datapoint_free(tpt_datapoint *dp);
/* The number of components (0 for NULL). */
TPT_API size_t tpt_datapoint_size(const tpt_datapoint *dp);
/* A new handle on component `index` (the caller frees it). */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_get(tpt_tensor **out, const tpt_datapoint *dp,
                                                    size_t index);
/* Sets component `index` to `value` (shared, not copied); index ==
 * tpt_datapoint_size appends. */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_set(tpt_datapoint *dp, size_t index,
                                                    const tpt_tensor *value);
/* Keeps the first `size` components (0 empties it: a map callback that
 * leaves the datapoint empty drops it). */
TPT_API TPT_NODISCARD tpt_status *tpt_datapoint_truncate(tpt_datapoint *dp, size_t size);

/* ---- Sources ------------------------------------------------------------ */

/* A dataflow from C callbacks. next fills `dp` (empty on entry) with the
 * next datapoint, or returns TPT_STOP at the end of the pass (any other
 * status is an error that ends the consumer with its message). reset (may
 * be NULL) is called by every reset of the dataflow with the seed the source
 * should use for its randomness; a restart of the pass by a consumer (join,
 * fixed_size without keep_state) does not reach the callbacks, the source
 * goes on where it was. size (may be NULL: unknown) returns the datapoints
 * per pass, or -1.
 *
 * Version 2 adds the source's position, for tpt_dataflow_get_state. save
 * puts the source's state after the last datapoint next gave (or at the
 * start of a pass) into *out as a new 1-d u8 tensor (the library takes it).
 * It runs on the thread that iterates the source: after every datapoint
 * when a thread reads ahead of the pipeline's consumer (prefetch, a parallel
 * map, a queue input), so keep it cheap (a position and a generator state).
 * restore gets what save made (valid during the call), right after reset
 * at the reset that continues from a saved state. Both NULL: restored, the
 * source is reset with the seed it had and starts its first pass again; a
 * state with a position is refused by a source without restore.
 * Initialise with TPT_DATAFLOW_CALLBACKS_INIT. */
#define TPT_DATAFLOW_CALLBACKS_VERSION 2
typedef struct tpt_dataflow_callbacks {
  uint32_t version; /* TPT_DATAFLOW_CALLBACKS_VERSION (1: without save and restore) */
  tpt_status *(*next)(tpt_datapoint *dp, void *user_data);
  tpt_status *(*reset)(uint64_t seed, void *user_data);
  int64_t (*size)(void *user_data);
  /* Version 2 */
  tpt_status *(*save)(tpt_tensor **out, void *user_data);
  tpt_status *(*restore)(const tpt_tensor *state, void *user_data);
} tpt_dataflow_callbacks;
#define TPT_DATAFLOW_CALLBACKS_INIT { TPT_DATAFLOW_CALLBACKS_VERSION, NULL, NULL, NULL, NULL, NULL }

/* The library owns user_data (destroy exactly once: when the dataflow's
 * last reference goes, or at once on failure). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_from_callbacks(tpt_dataflow **out,
                                                              const tpt_dataflow_callbacks *callbacks,
                                                              void *user_data,
                                                              void (*destroy)(void *user_data));

/* Rows of in-memory tensors (dimension 0): datapoint i is (tensors[0][i],
 * tensors[1][i], ...), in order or reshuffled every pass. Host arrays come in
 * through tpt_tensor_from_blob. The tensors are shared, not copied. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_from_tensors(tpt_dataflow **out,
                                                            const tpt_tensor *const *tensors,
                                                            size_t n_tensors, int32_t shuffle);

/* Rows of IDX files (the MNIST format; gzip-compressed when the name ends in
 * .gz): datapoint i is (row i of paths[0], row i of paths[1], ...) in the
 * files' element types (u8 for MNIST). The files are read at this call; a
 * missing, truncated, wrong-magic or wrong-size file, or files with
 * different row counts, give TPT_ERR_IO or TPT_ERR_INVALID_ARGUMENT naming
 * the file. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_from_idx(tpt_dataflow **out,
                                                        const char *const *paths, size_t n_paths,
                                                        int32_t shuffle);

/* MNIST or Fashion-MNIST (the same files) in `dir`: split "train" (60,000)
 * or "test" (10,000). Datapoints (image f32 [1, 28, 28] in [0, 1], label
 * i64 scalar). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_mnist(tpt_dataflow **out, const char *dir,
                                                     const char *split, int32_t shuffle);

/* Decodes file `path` (number `index` in the list) into `dp` (empty on
 * entry). Called on the thread that iterates, or on worker threads when
 * n_threads > 0 (several at once). */
typedef tpt_status *(*tpt_decode_fn)(tpt_datapoint *dp, const char *path, size_t index,
                                     void *user_data);

/* A list of files decoded by `decode` (the paths are copied), in order or
 * shuffled every pass; with n_threads > 0 they are decoded by that many
 * threads, in order. The library owns user_data. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_from_files(tpt_dataflow **out,
                                                          const char *const *paths, size_t n_paths,
                                                          int32_t shuffle, int32_t n_threads,
                                                          tpt_decode_fn decode, void *user_data,
                                                          void (*destroy)(void *user_data));

/* `size` datapoints per pass of the given shapes and dtypes (names are
 * ignored; -1 is not allowed), for benchmarks: uniform in [low, high)
 * (integers: [low, high) rounded down), new every datapoint when `random`,
 * else one constant datapoint repeated. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_fake(tpt_dataflow **out,
                                                    const tpt_input_spec *components,
                                                    size_t n_components, int64_t size,
                                                    int32_t random, double low, double high);

/* ---- Combinators -------------------------------------------------------- */

/* Stacks `batch_size` datapoints into one along a new dimension 0 (each
 * component; shapes and dtypes must agree, else an error naming both
 * shapes). A short last batch is dropped, or emitted when `remainder`. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_batch(tpt_dataflow **out, tpt_dataflow *df,
                                                     int64_t batch_size, int32_t remainder);

/* A map callback: changes `dp` in place (set, truncate, append). Leaving it
 * empty drops the datapoint. An error status ends the consumer with its
 * message. Only a source's next callback may return TPT_STOP; from a map,
 * component, decode or reset callback it is TPT_ERR_CALLBACK. */
typedef tpt_status *(*tpt_map_fn)(tpt_datapoint *dp, void *user_data);

/* Applies `fn` to every datapoint on the iterating thread. The library owns
 * user_data. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_map(tpt_dataflow **out, tpt_dataflow *df,
                                                   tpt_map_fn fn, void *user_data,
                                                   void (*destroy)(void *user_data));

/* Replaces component `index` with what `fn` makes of it (*out: a new
 * tensor that the library takes, or NULL to drop the datapoint). `value` is
 * lent for the call: setting *out to it is an error of the pass
 * (TPT_ERR_INVALID_ARGUMENT); tpt_tensor_keep(out, value) keeps it as is. */
typedef tpt_status *(*tpt_component_fn)(tpt_tensor **out, const tpt_tensor *value,
                                        void *user_data);
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_map_component(tpt_dataflow **out,
                                                             tpt_dataflow *df, size_t index,
                                                             tpt_component_fn fn, void *user_data,
                                                             void (*destroy)(void *user_data));

/* Options of tpt_dataflow_parallel_map. Initialise with
 * TPT_PARALLEL_MAP_OPTIONS_INIT. */
#define TPT_PARALLEL_MAP_OPTIONS_VERSION 1
typedef struct tpt_parallel_map_options {
  uint32_t version;     /* TPT_PARALLEL_MAP_OPTIONS_VERSION */
  int32_t n_threads;    /* >= 1; default 2 */
  int32_t buffer_size;  /* datapoints in flight; default 200 */
  int32_t ordered;      /* nonzero: outputs in input order (default 0) */
  int32_t strict;       /* nonzero: each pass maps exactly the input's pass
                           (the buffer drains at its end); 0 (default): the
                           input repeats forever and passes blend */
} tpt_parallel_map_options;
#define TPT_PARALLEL_MAP_OPTIONS_INIT { TPT_PARALLEL_MAP_OPTIONS_VERSION, 2, 200, 0, 0 }

/* tensorpack's MultiThreadMapData: `fn` runs on n_threads worker threads.
 * In strict mode a drop is an error. Workers start at reset. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_parallel_map(tpt_dataflow **out, tpt_dataflow *df,
                                                            tpt_map_fn fn, void *user_data,
                                                            void (*destroy)(void *user_data),
                                                            const tpt_parallel_map_options *options);

/* Iterates `df` on a background thread, up to `capacity` datapoints ahead
 * (tensorpack's PrefetchData with one worker; passes are kept apart). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_prefetch(tpt_dataflow **out, tpt_dataflow *df,
                                                        int64_t capacity);

/* Shuffles within a buffer of `buffer_size` datapoints, each read
 * `n_reuse` times (>= 1); reads `df` over and over, so it is infinite; its
 * size is size(df) * n_reuse (tensorpack's LocallyShuffleData). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_local_shuffle(tpt_dataflow **out,
                                                             tpt_dataflow *df,
                                                             int64_t buffer_size, int64_t n_reuse);

/* Keeps the first pass of `df` in memory and replays it, reshuffled every
 * pass when `shuffle` (tensorpack's CacheData). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_cache(tpt_dataflow **out, tpt_dataflow *df,
                                                     int32_t shuffle);

/* `n` passes of `df` as one pass (n = -1: forever, infinite). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_repeat(tpt_dataflow **out, tpt_dataflow *df,
                                                      int64_t n);

/* Exactly `size` datapoints per pass, restarting `df` when it ends; with
 * keep_state the next pass goes on where this one stopped, else restarts. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_fixed_size(tpt_dataflow **out, tpt_dataflow *df,
                                                          int64_t size, int32_t keep_state);

/* Every count-th datapoint, from the index-th on (0 <= index < count): a
 * rank's share of the data of a distributed job (index: the rank, count: the
 * world size; tpt_trainer_rank, or torchrun's RANK and WORLD_SIZE), put near
 * the source so that the expensive steps after it run on the share only
 * (then the job's distributed options say shard = 0). Each datapoint given
 * reads `count` of df's and drops all but one, so every share's pipeline is
 * in the same state; a pass's last datapoints that do not make `count` are
 * dropped. Its size is df's / count. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_shard(tpt_dataflow **out, tpt_dataflow *df,
                                                     int64_t index, int64_t count);

/* One after the other. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_concat(tpt_dataflow **out,
                                                      tpt_dataflow *const *dfs, size_t n);

/* Side by side: the components of dfs[0], then of dfs[1], ...; the pass
 * ends with the shortest. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_join(tpt_dataflow **out, tpt_dataflow *const *dfs,
                                                    size_t n);

/* Components indices[0], indices[1], ... in that order (repeats allowed). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_select(tpt_dataflow **out, tpt_dataflow *df,
                                                      const size_t *indices, size_t n);

/* ---- Image augmentation ------------------------------------------------- */

/* Image augmentors, applied in order to an image component of shape
 * [C, H, W] or [H, W] (any real dtype; TO_FLOAT converts). */
typedef enum tpt_augment_kind {
  TPT_AUGMENT_TO_FLOAT = 1,    /* f32, times `scale` (e.g. 1/255) */
  TPT_AUGMENT_NORMALIZE = 2,   /* (x - mean[c]) / std[c]; n_channels 1 applies to all */
  TPT_AUGMENT_RANDOM_CROP = 3, /* pad by `padding` (zeros), crop height x width at random */
  TPT_AUGMENT_FLIP = 4,        /* flip horizontally with `probability` */
  TPT_AUGMENT_FORCE32 = 0x7fffffff
} tpt_augment_kind;

/* One augmentor: the fields its kind uses (see tpt_augment_kind). */
typedef struct tpt_augmentor {
  tpt_augment_kind kind;
  double scale;
  const double *mean; /* copied */
  const double *std;  /* copied */
  size_t n_channels;
  int64_t height, width, padding;
  double probability;
} tpt_augmentor;

/* Applies `augmentors` to component `index` of every datapoint (tensorpack's
 * AugmentImageComponent). Each datapoint's randomness is drawn in input
 * order, so the result does not depend on n_threads: 0 augments on the
 * iterating thread, n > 0 on n worker threads (in order). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_augment(tpt_dataflow **out, tpt_dataflow *df,
                                                       size_t index,
                                                       const tpt_augmentor *augmentors,
                                                       size_t n_augmentors, int32_t n_threads);

/* ---- Iterating, seeds and state ----------------------------------------- */

/* Prepares `df` (and what it reads) for iteration: seeds its randomness
 * (from the seed, or the restored state), starts its threads, starts a new
 * pass. tensorpack calls it once per consumer; here a later reset starts
 * over (threads are joined and restarted). tpt_dataflow_next resets a
 * dataflow that never was. Not while another thread iterates it. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_reset_state(tpt_dataflow *df);

/* The next datapoint of the pass into `dp` (its previous components are
 * replaced); TPT_STOP at the end of the pass. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_next(tpt_dataflow *df, tpt_datapoint *dp);

/* Datapoints per pass, or -1 when unknown. As tensorpack's len(), it is the
 * nominal size: an infinite dataflow made from a finite one (local shuffle,
 * non-strict parallel map) reports its input's size, and a map that drops
 * datapoints reports what it reads. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_size(int64_t *out, const tpt_dataflow *df);

/* Seeds the pipeline (see above) at its next reset. Only the seed of the
 * dataflow that is reset (the outermost) counts. */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_set_seed(tpt_dataflow *df, uint64_t seed);

/* The state of the pipeline as of the last datapoint tpt_dataflow_next gave
 * (every generator, the seeds of the last reset, the position in the pass),
 * as a u8 tensor to save with a checkpoint. Threads that read ahead do not
 * change it: prefetch and parallel maps keep a snapshot of their input's
 * state with each datapoint. Call it from the thread that iterates the
 * dataflow, between next calls, or while nothing iterates it; a dataflow
 * read by another dataflow or an input is an error (take the state of the
 * outermost). Not saved:
 * a local shuffle's buffer (restored, it refills from where its input was),
 * the order of an unordered parallel map, and the position of a C source
 * without save and restore (restored, it is reset with the seed it had). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_get_state(tpt_tensor **out, const tpt_dataflow *df);

/* Restores a state from tpt_dataflow_get_state of a pipeline of the same
 * shape; the next reset continues from it instead of reseeding: the next
 * datapoint is the one after the last one given when the state was taken,
 * mid-pass or not. An error (nothing changed) if the shape differs, the
 * state is damaged, or the dataflow is read by another dataflow or an input
 * (set the state before you give it to one). */
TPT_API TPT_NODISCARD tpt_status *tpt_dataflow_set_state(tpt_dataflow *df, const tpt_tensor *state);

/* Drops the caller's reference. NULL is a no-op. */
TPT_API void tpt_dataflow_free(tpt_dataflow *df);

/* ------------------------------------------------------------------------ */
/* Inputs and the simple trainer                                             */
/*                                                                           */
/* An input gives the tower its batches: tensors in memory, a C feed        */
/* callback, or a dataflow (queued or fed). tpt_trainer_set_model            */
/* turns a trainer into tensorpack's SimpleTrainer: each run_step is one     */
/* hooked step that takes a batch, runs the tower function, back-propagates  */
/* the cost and applies the optimizer; the cost is the step output "cost"    */
/* and the scalar "cost" is put each step.                                   */
/* ------------------------------------------------------------------------ */

typedef struct tpt_input tpt_input;

/* Batches of `batch_size` rows (dimension 0) from in-memory tensors, in
 * order or shuffled each epoch of the data (seeded); the last incomplete
 * batch is dropped; repeats forever. All tensors need the same number of
 * rows. The tensors are shared, not copied. Its size (batches per pass) is
 * the default steps_per_epoch. */
TPT_API TPT_NODISCARD tpt_status *tpt_input_from_tensors(tpt_input **out,
                                                         const tpt_tensor *const *tensors,
                                                         size_t n_tensors, int64_t batch_size,
                                                         int32_t shuffle, uint64_t seed);

/* The feed callback: fill batch[0..n_inputs) with new tensors (the library
 * takes them). Return NULL, TPT_STOP for the end of data (training stops
 * gracefully), or an error. */
typedef tpt_status *(*tpt_feed_fn)(tpt_tensor **batch, size_t n_inputs, void *user_data);

/* An input that calls `feed` on the training thread for every step
 * (tensorpack's FeedInput). The library owns user_data (destroy exactly
 * once, also on failure). */
TPT_API TPT_NODISCARD tpt_status *tpt_input_from_feed(tpt_input **out, tpt_feed_fn feed,
                                                      void *user_data,
                                                      void (*destroy)(void *user_data));

/* How a dataflow feeds the towers. */
typedef enum tpt_input_kind {
  TPT_INPUT_QUEUE = 1, /* QueueInput: a background thread fills a bounded queue */
  TPT_INPUT_FEED = 2,  /* FeedInput: the training thread reads the dataflow */
  TPT_INPUT_KIND_FORCE32 = 0x7fffffff
} tpt_input_kind;

/* Options of tpt_input_from_dataflow. Initialise with TPT_INPUT_OPTIONS_INIT. */
#define TPT_INPUT_OPTIONS_VERSION 1
typedef struct tpt_input_options {
  uint32_t version;    /* TPT_INPUT_OPTIONS_VERSION */
  tpt_input_kind kind; /* default TPT_INPUT_QUEUE */
  int64_t capacity;    /* queue capacity in batches; default 50 */
  int32_t repeat;      /* nonzero (default): pass after pass, forever; 0: the
                          end of the first pass ends training gracefully */
} tpt_input_options;
#define TPT_INPUT_OPTIONS_INIT { TPT_INPUT_OPTIONS_VERSION, TPT_INPUT_QUEUE, 50, 1 }

/* An input fed by a dataflow of batches (its components in signature order;
 * usually a tpt_dataflow_batch). The input keeps a reference to `df` and
 * resets it at SETUP. The queue's thread starts at BEFORE_TRAIN and is joined
 * at AFTER_TRAIN (also when training fails or stops); the queue input puts
 * the scalar "QueueInput/queue_size" (an EMA of the queue's fill, decay 0.5,
 * tensorpack's throughput diagnostic) every step. A dataflow error ends
 * training with its message. A pass that yields nothing ends training
 * gracefully (end of data). Its size (the dataflow's) is the default
 * steps_per_epoch. */
TPT_API TPT_NODISCARD tpt_status *tpt_input_from_dataflow(tpt_input **out, tpt_dataflow *df,
                                                          const tpt_input_options *options);

/* tensorpack's StagingInput: copies the next batch of `input` to `device`
 * (NULL: the tower's device) ahead of time, on a side stream with events on
 * CUDA; a plain pass-through on the CPU. TPT_ERR_UNSUPPORTED for a device
 * this LibTorch has no support for. Takes `input` (also on failure). */
TPT_API TPT_NODISCARD tpt_status *tpt_input_staging(tpt_input **out, tpt_input *input,
                                                    const char *device);

/* tensorpack's DummyConstantInput: the same zero tensors of the signature's
 * shapes (free dimensions become batch_size) every step, to benchmark the
 * model without data. */
TPT_API TPT_NODISCARD tpt_status *tpt_input_dummy(tpt_input **out, int64_t batch_size);

TPT_API void tpt_input_free(tpt_input *input);

/* Makes `trainer` a simple (single-tower) trainer of `model` fed by
 * `input`. Takes a reference to the model and ownership of `input` (also on
 * failure). Replaces run_step. If the trainer's steps_per_epoch is not set,
 * the input's size is used. Batches are checked against the signature
 * (dtype, rank, fixed dimensions). Before run. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_model(tpt_trainer *trainer, tpt_model *model,
                                                        tpt_input *input);

/* ---- Towers: data-parallel training on several devices ---------------------
 * tensorpack's multi-GPU trainers. Every step each tower takes its own batch
 * from the input (the total batch is batch x towers; steps_per_epoch counts
 * steps, and its default is the input's size / towers) and runs the tower
 * function (tpt_tower_index and tpt_tower_name say which: "tower0",
 * "tower1", ...) at the same time as the others: tower 0 on the training
 * thread, the others on threads of their own, each with its share of
 * LibTorch's intra-op threads. The tower function must therefore be safe to
 * call from several threads at once. The cost and outputs the loop reports
 * are tower 0's. Checkpoints hold tower 0's variables, as tensorpack's. */

typedef enum tpt_strategy {
  TPT_STRATEGY_SIMPLE = 0,            /* one tower (tpt_trainer_set_model) */
  TPT_STRATEGY_REPLICATED = 1,        /* SyncMultiGPUTrainerReplicated: a copy of the variables
                                         per tower, gradients all-reduced, every copy updated;
                                         non-trainable variables copied from tower 0 after
                                         every epoch */
  TPT_STRATEGY_PARAMETER_SERVER = 2,  /* SyncMultiGPUTrainerParameterServer: shared variables,
                                         the towers' gradients averaged and applied once */
  TPT_STRATEGY_ASYNC = 3,             /* AsyncMultiGPUTrainer: shared variables, each tower's
                                         gradients times 1/N applied as an update of their own */
  TPT_STRATEGY_FORCE32 = 0x7fffffff
} tpt_strategy;

/* Initialise with TPT_TOWERS_OPTIONS_INIT. */
#define TPT_TOWERS_OPTIONS_VERSION 3
typedef struct tpt_towers_options {
  uint32_t version;            /* TPT_TOWERS_OPTIONS_VERSION */
  tpt_strategy strategy;       /* default TPT_STRATEGY_REPLICATED */
  int32_t n_towers;            /* 1 to 256; default 2 */
  const char *const *devices;  /* n_towers device names; NULL (default): every tower on "cpu".
                                  A tower on another device ("cuda:1") computes on a copy of
                                  the variables, which stay on the CPU (docs/towers.md); not
                                  run on a GPU yet. TPT_ERR_UNSUPPORTED where LibTorch has no
                                  such device. In a distributed job "cuda" (no index) is this
                                  process's device: cuda:<LOCAL_RANK x n_towers + k> */
  int32_t average;             /* replicated: nonzero (default) averages the gradients, 0 sums them
                                  (the default step's; train ops always average) */
  int32_t intra_op_threads;    /* LibTorch intra-op threads per tower; 0 (default): the process's
                                  (tpt_get_num_threads) divided by n_towers, at least 1 */
  /* version 2: */
  int32_t overlap;             /* replicated and parameter server: nonzero (default) reduces a
                                  bucket of gradients as soon as every tower's backward pass has
                                  produced them, while the backward passes go on (PyTorch DDP's
                                  reducer); 0 reduces every bucket after all the backward passes.
                                  The result is the same bit for bit */
  size_t bucket_bytes;         /* the gradients are packed into flat buckets of about this size
                                  (in the order backward produces them); 0 (default): 1 MiB */
  /* version 3: */
  int32_t average_scalars;     /* nonzero: the cost and the scalar outputs the monitors and step
                                  outputs get are averaged over the towers (and over the ranks too
                                  with tpt_distributed_options.average_scalars); 0 (default):
                                  tower 0's, as tensorpack's main training tower */
} tpt_towers_options;
#define TPT_TOWERS_OPTIONS_INIT { TPT_TOWERS_OPTIONS_VERSION, TPT_STRATEGY_REPLICATED, 2, NULL, 1, 0, 1, 0, 0 }

/* tpt_trainer_set_model with towers: makes `trainer` train `model` with the
 * strategy and towers of `options` (NULL: the defaults, 2 replicated CPU
 * towers), fed by `input`, which it takes (also on failure). Before run. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_towers(tpt_trainer *trainer, tpt_model *model,
                                                         tpt_input *input,
                                                         const tpt_towers_options *options);

/* ---- Distributed training: several processes -------------------------------
 * tensorpack's HorovodTrainer on LibTorch's c10d (Gloo over TCP): every
 * process (a rank) trains its towers (one by default) on its share of the
 * input, and before every update the gradients are summed over every tower
 * of every process, so N processes train as one process with N towers would.
 * Rank 0 is the chief: it alone keeps the log directory and runs chief-only
 * callbacks (checkpoints, monitors); its variables reach every rank before
 * the first step, its non-trainable ones after every epoch, and every rank
 * resumes from its checkpoint. Start the processes with tools/tptrain-run
 * (`tptrain-run -n 4 ./train ...`), torchrun, or anything that sets
 * torchrun's variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID); docs/distributed.md. */

/* Initialise with TPT_DISTRIBUTED_OPTIONS_INIT (zero fields keep the defaults). */
#define TPT_DISTRIBUTED_OPTIONS_VERSION 1
typedef struct tpt_distributed_options {
  uint32_t version;          /* TPT_DISTRIBUTED_OPTIONS_VERSION */
  const char *master_addr;   /* rank 0's host; NULL (default): MASTER_ADDR */
  int32_t master_port;       /* its port; 0 (default): MASTER_PORT */
  int32_t world_size;        /* 0 (default): WORLD_SIZE, RANK and LOCAL_RANK from the environment;
                                else the number of processes, with rank and local_rank below */
  int32_t rank;              /* with world_size: this process's, 0 to world_size - 1 */
  int32_t local_rank;        /* with world_size: its index among the processes of its machine */
  int64_t timeout_ms;        /* the rendezvous and every collective: a rank that died or hangs
                                makes the others fail after at most this, with an error naming
                                it; 0 (default): 60000. It must exceed the longest chief-only
                                work between two steps (an inference pass on rank 0) */
  int32_t shard;             /* nonzero (default): each rank takes every world_size-th batch of
                                the input (rank r the r-th of every world_size, so the job's
                                towers take the batches one process's towers would); 0: the
                                input is already this rank's share */
  int32_t average_scalars;   /* nonzero: the cost and the scalar outputs the monitors get are
                                averaged over the ranks (one more all-reduce per step);
                                0 (default): rank 0's */
} tpt_distributed_options;
#define TPT_DISTRIBUTED_OPTIONS_INIT { TPT_DISTRIBUTED_OPTIONS_VERSION, NULL, 0, 0, 0, 0, 0, 1, 0 }

/* Joins the job (the rendezvous: blocks until every rank has joined, at most
 * the timeout) and makes `trainer` one rank of it (NULL options: the
 * defaults, all from the environment). Call it before tpt_trainer_set_model
 * or tpt_trainer_set_towers, which then train across the ranks (the simple
 * trainer becomes one replicated tower per rank; the async strategy cannot
 * be distributed). Errors: TPT_ERR_INVALID_ARGUMENT naming a missing or bad
 * variable or option, TPT_ERR_BACKEND when the rendezvous fails (naming the
 * address and the rank), TPT_ERR_STATE after a model was set or a second
 * time, TPT_ERR_UNSUPPORTED in a build without c10d's Gloo. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_distributed(tpt_trainer *trainer,
                                                              const tpt_distributed_options *options);

/* This process's rank and the job's size: 0 and 1 for a trainer that is not
 * distributed. Any time. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_rank(int32_t *rank, int32_t *world_size,
                                                   const tpt_trainer *trainer);

/* ---- Writing a trainer: train ops and the GAN trainers ---------------------
 * tensorpack: "If your task is fundamentally different from single-cost
 * optimization, you will need to write a trainer." A train op is one
 * optimisation of the model (tensorpack's opt.minimize(cost, var_list)): a
 * scalar the tower function publishes, minimised over the trainable
 * variables under a scope, by an optimizer of its own. A run_step of your
 * own (tpt_trainer_set_run_step, after tpt_trainer_set_model) runs train
 * ops by name with tpt_trainer_run_train_ops; the GAN trainers are such
 * run_steps, made by tpt_trainer_set_gan; tpt_trainer_set_train_ops makes
 * train ops the default step. The simple trainer, the replicated and the
 * parameter-server strategies and distributed jobs run train ops (with
 * towers each op's gradients are averaged over the towers); the async
 * strategy does not. */

/* Initialise with TPT_TRAIN_OP_INIT. */
#define TPT_TRAIN_OP_VERSION 1
typedef struct tpt_train_op {
  uint32_t version;         /* TPT_TRAIN_OP_VERSION */
  const char *name;         /* required, unique in the model; copied */
  const char *cost;         /* the tower's one-element output to minimise (tpt_tower_set_output);
                               NULL (default): the tower's cost (tpt_tower_set_cost); copied */
  const char *scope;        /* the trainable variables whose names start with it ("discrim/");
                               NULL or "" (default): all of them; copied */
  tpt_optimizer *optimizer; /* its own (a reference is taken; not the model's, not another
                               op's); NULL (default): a copy of the model's optimizer, with
                               slots of its own, that follows the model's hyper-parameters
                               (so tpt_callback_scheduled_hyperparam on the model's moves it) */
} tpt_train_op;
#define TPT_TRAIN_OP_INIT { TPT_TRAIN_OP_VERSION, NULL, NULL, NULL, NULL }

/* Adds a train op to `model`, before training. Its variables are resolved
 * when training starts (an op with none fails then, naming it). Each op's
 * optimizer state is saved in checkpoints under the op's name and restored
 * on resume. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_add_train_op(tpt_model *model, const tpt_train_op *op);

/* From run_step: one forward pass of the tower function on the input's next
 * batch (with towers: one per tower, each on a batch of its own), then the
 * train ops names[0..n), in order: each op's gradients, all from that one
 * pass (as TensorFlow runs several minimize ops; with towers averaged over
 * the towers, and over the ranks of a job), then each op's update in
 * order. hooked (nonzero): as one hooked step
 * (tensorpack's hooked_sess.run: BEFORE_RUN / AFTER_RUN callbacks,
 * global_step + 1, the tower's outputs published and their moving
 * summaries); 0: a raw run (no callbacks, no counter, no outputs). Returns
 * what a hooked step returns: run_step should return it as it is.
 * TPT_ERR_INVALID_ARGUMENT naming an unknown op; TPT_ERR_STATE outside
 * run_step or without a model set; TPT_ERR_UNSUPPORTED with async towers. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_run_train_ops(tpt_trainer *trainer,
                                                            const char *const *names, size_t n,
                                                            int32_t hooked);

/* Replaces the default step (tensorpack's trainer.train_op) without a
 * run_step of your own: every run_step is then one hooked run of the train
 * ops names[0..n) (tpt_trainer_run_train_ops with hooked = 1). After
 * tpt_trainer_set_model or tpt_trainer_set_towers (or a config), before
 * run; an unknown op is named, and async towers are TPT_ERR_UNSUPPORTED.
 * Like tpt_trainer_set_run_step it replaces the trainer's run_step: the
 * last of the two calls (or tpt_trainer_set_gan) wins. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_train_ops(tpt_trainer *trainer,
                                                            const char *const *names, size_t n);

/* Initialise with TPT_GAN_OPTIONS_INIT. */
#define TPT_GAN_OPTIONS_VERSION 2
typedef struct tpt_gan_options {
  uint32_t version;   /* TPT_GAN_OPTIONS_VERSION */
  int32_t separate;   /* 0 (default): GANTrainer: every run_step is one hooked run of the
                         generator's then the discriminator's update from one forward pass;
                         nonzero: SeparateGANTrainer: a hooked run of D's update when
                         global_step % d_period == 0, then one of G's when global_step %
                         g_period == 0 (global_step as it is by then: a run_step may make two
                         hooked runs, and each takes a batch) */
  int64_t d_period;   /* separate: >= 1, default 1; one of the two periods must be 1 */
  int64_t g_period;
  const char *g_op;   /* the generator's train op; NULL (default): "g_op" */
  const char *d_op;   /* the discriminator's; NULL (default): "d_op" */
  /* version 2: */
  const tpt_towers_options *towers; /* NULL (default): one tower; else tensorpack's
                         MultiGPUGANTrainer: every tower takes its own batch and each op
                         minimises its cost averaged over the towers (and over the ranks of
                         a distributed job, whatever towers->average says); the replicated or
                         the parameter-server strategy */
} tpt_gan_options;
#define TPT_GAN_OPTIONS_INIT { TPT_GAN_OPTIONS_VERSION, 0, 1, 1, NULL, NULL, NULL }

/* tensorpack's GANTrainer / SeparateGANTrainer / MultiGPUGANTrainer
 * (`options` NULL: the defaults, a GANTrainer): tpt_trainer_set_model (or
 * tpt_trainer_set_towers with options->towers), then the GAN's run_step.
 * When the model lacks the train ops g_op and d_op they are made as
 * tensorpack's GANModelDesc: the tower's outputs "g_loss" over the variables
 * under "gen/" and "d_loss" over those under "discrim/", each with a copy of
 * the model's optimizer. Takes `input` (also on failure). Before run. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_gan(tpt_trainer *trainer, tpt_model *model,
                                                      tpt_input *input,
                                                      const tpt_gan_options *options);

/* ---- Inference during training -------------------------------------------
 * tensorpack's InferenceRunner and inferencers: at every TRIGGER (after each
 * epoch; wrap it in tpt_callback_periodic_trigger to run it every k steps or
 * epochs) the runner makes one pass of a finite dataflow of batches (in
 * signature order) through the model's inference tower, on the training
 * thread, and each inferencer turns the outputs it asked for into scalars,
 * put as monitors' scalars (stats.json, TensorBoard, MinSaver/MaxSaver,
 * StatMonitorParamSetter read them). */

typedef struct tpt_inferencer tpt_inferencer;

/* tensorpack's ScalarStats: for each name in outputs, the mean over the pass
 * as the scalar "<prefix>_<name>" (prefix NULL: "validation"; "": just the
 * name). An output of one element per batch is weighted by the batch's rows
 * (tensorpack weighs batches equally: docs/trainer.md), one of one element per
 * row is averaged over rows. */
TPT_API TPT_NODISCARD tpt_status *tpt_inferencer_scalar_stats(tpt_inferencer **out,
                                                              const char *const *outputs,
                                                              size_t n_outputs, const char *prefix);

/* tensorpack's ClassificationError: `wrong_output` (NULL: "wrong", what
 * tpt_metric_wrong gives) holds one 0/1 value per row; the scalar
 * `summary_name` (NULL: "validation_error") is the wrong rows over all rows of
 * the pass, whatever the batch sizes. */
TPT_API TPT_NODISCARD tpt_status *tpt_inferencer_classification_error(tpt_inferencer **out,
                                                                      const char *wrong_output,
                                                                      const char *summary_name);

/* An inferencer written by the host (tensorpack's Inferencer). Initialise
 * with TPT_INFERENCER_DESC_INIT. In one pass: before, then on_outputs once per
 * batch with the outputs named in `outputs` (borrowed tensors, in that order;
 * `rows` is the batch's first dimension), then after, which puts its results
 * with tpt_trainer_put_scalar. Each returns NULL or an error that fails
 * training (its message keeps the batch's number). */
#define TPT_INFERENCER_DESC_VERSION 1
typedef struct tpt_inferencer_desc {
  uint32_t version;             /* TPT_INFERENCER_DESC_VERSION */
  const char *name;             /* for errors; copied; NULL: "inferencer" */
  const char *const *outputs;   /* the tower's outputs it needs; copied */
  size_t n_outputs;
  tpt_status *(*before)(void *user_data);                       /* may be NULL */
  tpt_status *(*on_outputs)(const tpt_tensor *const *outputs, size_t n_outputs, int64_t rows,
                            void *user_data);                   /* required */
  tpt_status *(*after)(tpt_trainer *trainer, void *user_data);  /* may be NULL */
  void *user_data;
  void (*destroy)(void *user_data); /* called exactly once; may be NULL */
} tpt_inferencer_desc;
#define TPT_INFERENCER_DESC_INIT { TPT_INFERENCER_DESC_VERSION, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL }

/* Makes an inferencer from a description. The library owns desc->user_data
 * from this call on (destroy exactly once, also when this call fails). */
TPT_API TPT_NODISCARD tpt_status *tpt_inferencer_new(tpt_inferencer **out,
                                                     const tpt_inferencer_desc *desc);

/* Releases an inferencer that was not given to a runner. NULL is a no-op. */
TPT_API void tpt_inferencer_free(tpt_inferencer *inferencer);

/* An InferenceRunner (chief only) of `model` over `df` with the given
 * inferencers, which it takes (also on failure). Keeps references to model
 * and df. */
TPT_API TPT_NODISCARD tpt_status *tpt_inference_runner(tpt_callback **out, tpt_model *model,
                                                       tpt_dataflow *df,
                                                       tpt_inferencer *const *inferencers,
                                                       size_t n_inferencers);

/* tensorpack's DataParallelInferenceRunner: tpt_inference_runner with
 * n_towers (1 to 256) CPU inference towers ("InferenceTower0", ...) that
 * each infer a batch at once, on threads of their own (started in
 * BEFORE_TRAIN, joined in AFTER_TRAIN) with a share of the intra-op threads;
 * the inferencers get the batches in the dataflow's order, so the results
 * are the single runner's. The tower function must be safe to call from
 * several threads at once. */
TPT_API TPT_NODISCARD tpt_status *tpt_inference_runner_data_parallel(tpt_callback **out, tpt_model *model,
                                                                     tpt_dataflow *df,
                                                                     tpt_inferencer *const *inferencers,
                                                                     size_t n_inferencers, int32_t n_towers);

/* The short form: an InferenceRunner with one ScalarStats of `outputs`
 * (scalars "validation_<name>"). */
TPT_API TPT_NODISCARD tpt_status *tpt_inference_runner_new(tpt_callback **out, tpt_model *model,
                                                           tpt_dataflow *df,
                                                           const char *const *outputs,
                                                           size_t n_outputs);

/* ---- TrainConfig and launch ------------------------------------------------
 * tensorpack's high-level interface: describe the training in a config and
 * launch it with the simple trainer. */

/* An initializer / restore hook (tensorpack's session_init): runs once on the
 * chief, after the model's build call and before BEFORE_TRAIN, e.g. to load
 * weights with tpt_model_set_variable. `model` is lent for the call (freeing
 * it is a no-op). Same return convention as callbacks. */
typedef tpt_status *(*tpt_init_fn)(tpt_model *model, void *user_data);

/* Initialise with TPT_TRAIN_CONFIG_INIT. */
#define TPT_TRAIN_CONFIG_VERSION 4
typedef struct tpt_train_config {
  uint32_t version;                      /* TPT_TRAIN_CONFIG_VERSION */
  const tpt_trainer_options *options;    /* NULL: defaults (steps_per_epoch from the input) */
  tpt_model *model;                      /* required; the trainer takes a reference */
  tpt_input *input;                      /* this or dataflow; taken */
  tpt_callback *const *callbacks;        /* taken; registered as user callbacks, in order */
  size_t n_callbacks;
  tpt_callback *const *monitors;         /* taken; registered after the default monitors */
  size_t n_monitors;
  tpt_init_fn init;                      /* NULL: none */
  void *init_user_data;                  /* borrowed: must outlive the trainer */
  /* version 2: */
  tpt_dataflow *dataflow;                /* this or input: batches in signature order,
                                            wrapped in a queue input (tensorpack's automatic
                                            QueueInput); the trainer takes a reference */
  /* version 3: */
  const tpt_towers_options *towers;      /* NULL: the simple trainer (one tower); else the
                                            strategy and towers (tpt_trainer_set_towers) */
  /* version 4: */
  const tpt_distributed_options *distributed; /* NULL: one process; else this process is one
                                            rank of a job (tpt_trainer_set_distributed) */
} tpt_train_config;
#define TPT_TRAIN_CONFIG_INIT \
  { TPT_TRAIN_CONFIG_VERSION, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL }

/* The model of a trainer (set by tpt_trainer_set_model or a config), and
 * that model's optimizer, as new handles the caller frees: a callback can
 * reach them without user_data, e.g. to set the learning rate
 * (tpt_optimizer_set). TPT_ERR_NOT_FOUND when there is none. Any time. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_model(tpt_model **out, const tpt_trainer *trainer);
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_optimizer(tpt_optimizer **out,
                                                        const tpt_trainer *trainer);

/* Makes a simple trainer from a config without running it (add callbacks,
 * then tpt_trainer_run). The input and every callback and monitor are taken,
 * also on failure. steps_per_epoch comes from the options or else from the
 * input's size; with neither, this fails (TPT_ERR_INVALID_ARGUMENT naming
 * options->steps_per_epoch) rather than the later run. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_from_config(tpt_trainer **out,
                                                          const tpt_train_config *config);

/* tensorpack's launch_train_with_config: tpt_trainer_from_config, run, free.
 * Returns what the run returned. */
TPT_API TPT_NODISCARD tpt_status *tpt_launch_train(const tpt_train_config *config);

/* ---- Checkpoints and resume ------------------------------------------------
 * A checkpoint holds everything a training needs to go on exactly where it
 * was: every variable, the optimizer's slots and hyper-parameters, the loop
 * counters and where the loop goes on, LibTorch's CPU random state, the
 * input's position (its dataflow's, mid-pass), the moving summaries, and the
 * state of callbacks that have one (MinSaver/MaxSaver, tpt_callback_desc's
 * save/restore). The file is a torch.save archive of a dict, so
 * python3-torch's torch.load opens it; docs/checkpoints.md has its fields.
 * Files are written atomically (temporary file, fsync, rename, fsync of
 * the directory), so a process killed at any moment leaves only whole ones. */

/* tensorpack's ModelSaver. Initialise with TPT_MODEL_SAVER_OPTIONS_INIT. */
#define TPT_MODEL_SAVER_OPTIONS_VERSION 1
typedef struct tpt_model_saver_options {
  uint32_t version;            /* TPT_MODEL_SAVER_OPTIONS_VERSION */
  int32_t max_to_keep;         /* >= 0; default 10; 0 keeps all */
  double keep_every_n_hours;   /* one checkpoint per this many hours is never deleted;
                                  default 0.5; 0: none */
  int64_t every_k_steps;       /* also save every k global steps (at trigger_step);
                                  default 0: not step-based */
  int64_t every_k_epochs;      /* save after every k-th epoch; default 1; 0: never */
  const char *dir;             /* NULL (default): the trainer's log directory; copied */
} tpt_model_saver_options;
#define TPT_MODEL_SAVER_OPTIONS_INIT { TPT_MODEL_SAVER_OPTIONS_VERSION, 10, 0.5, 0, 1, NULL }

/* A callback (chief only) that writes model-<global_step> and the index file
 * `checkpoint` naming the latest (tensorpack's layout), deleting the oldest
 * beyond max_to_keep. An IO error while saving is logged and training goes
 * on. `options` may be NULL (defaults). The caller owns *out. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_model_saver(tpt_callback **out,
                                                           const tpt_model_saver_options *options);

/* tensorpack's MinSaver / MaxSaver: when the latest value of the scalar
 * `stat` is the lowest (highest) so far, the newest checkpoint, which must
 * be of that step, is copied to `filename` (NULL: min-<stat> / max-<stat>) in
 * `dir` (NULL: the log directory). Register it after the ModelSaver and the
 * callback that puts `stat`. The best value is saved in checkpoints. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_min_saver(tpt_callback **out, const char *stat,
                                                         const char *filename, const char *dir);
TPT_API TPT_NODISCARD tpt_status *tpt_callback_max_saver(tpt_callback **out, const char *stat,
                                                         const char *filename, const char *dir);

/* Before tpt_trainer_run: the run goes on exactly from the checkpoint at
 * `path` (a checkpoint file, or a directory whose index names its latest).
 * The file is read and every field checked now, never trusted (TPT_ERR_IO,
 * TPT_ERR_INVALID_ARGUMENT naming the file and field; see
 * tpt_set_checkpoint_read_limit); what only the run knows (the model's
 * variables, the input's and the callbacks' states, steps_per_epoch) is
 * checked when the run starts, before anything is restored: a mismatch
 * fails the run naming it, and changes nothing. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_resume(tpt_trainer *trainer, const char *path);

/* Writes the trainer's checkpoint to `path` now, atomically. From a
 * callback between steps (trigger_step, the epoch events, before_train,
 * after_train); TPT_ERR_STATE inside run_step. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_save_checkpoint(tpt_trainer *trainer, const char *path);

/* How tpt_model_restore matches variables. Initialise with
 * TPT_RESTORE_OPTIONS_INIT. */
#define TPT_RESTORE_OPTIONS_VERSION 1
typedef struct tpt_restore_options {
  uint32_t version;                 /* TPT_RESTORE_OPTIONS_VERSION */
  int32_t ignore_missing;           /* nonzero: model variables the file lacks keep their values
                                       (default 0: an error listing them) */
  int32_t ignore_unexpected;        /* nonzero (default): tensors of the file that match no
                                       variable are skipped; 0: an error listing them */
  int32_t ignore_shape_mismatch;    /* nonzero: variables whose shapes differ are skipped
                                       (default 0: an error listing them) */
  const char *prefix;               /* NULL (default), or put in front of every variable name
                                       to find it in the file */
  const char *const *name_map;      /* n_name_map pairs: a variable's name, then its name in
                                       the file */
  size_t n_name_map;
} tpt_restore_options;
#define TPT_RESTORE_OPTIONS_INIT { TPT_RESTORE_OPTIONS_VERSION, 0, 1, 0, NULL, NULL, 0 }

/* Restores a built model's variables by name from a tptrain checkpoint (or a
 * directory's latest), a state_dict saved with torch.save (PyTorch's dotted
 * names, "fc.weight", are read as "fc/weight"), or a TorchScript module's
 * parameters and buffers: tensorpack's SaverRestore. All or nothing: on any
 * error, which names the variables or the file, no variable changes.
 * `options` may be NULL (defaults). *n_restored (may be NULL) receives the
 * number of variables restored. Not while the model trains. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_restore(size_t *n_restored, tpt_model *model, const char *path,
                                                    const tpt_restore_options *options);

/* Reading a checkpoint, a torch.save file or a TorchScript module (restore,
 * resume, tpt_model_from_torchscript) never trusts the file (see
 * docs/checkpoints.md, "Checkpoints from others"); among its limits, a file
 * may make the reader allocate at most its own size plus `bytes` (entries
 * inflated past their compressed size, tensors wider than their records,
 * the reader's tables): more is refused, naming the file. Default 256 MiB;
 * at most 2^62. Process-wide; any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_set_checkpoint_read_limit(uint64_t bytes);

/* ---- More callbacks ---------------------------------------------------------
 * The rest of tensorpack's catalogue that does not belong to a section above,
 * and the two every long run wants (early stopping, TerminateOnNaN). Each
 * gives a new callback the caller owns until it gives it to a trainer. */

/* Options of tpt_callback_early_stopping. Initialise with
 * TPT_EARLY_STOPPING_OPTIONS_INIT. */
#define TPT_EARLY_STOPPING_OPTIONS_VERSION 1
typedef struct tpt_early_stopping_options {
  uint32_t version;   /* TPT_EARLY_STOPPING_OPTIONS_VERSION */
  int64_t patience;   /* checks without improvement before stopping, >= 1; default 3 */
  double min_delta;   /* an improvement is by more than this, >= 0; default 0 */
  int32_t maximize;   /* nonzero: higher is better; default 0 (lower is better) */
} tpt_early_stopping_options;
#define TPT_EARLY_STOPPING_OPTIONS_INIT { TPT_EARLY_STOPPING_OPTIONS_VERSION, 3, 0.0, 0 }

/* Early stopping (Keras' EarlyStopping; tensorpack has none): at every
 * TRIGGER (after each epoch) it reads the newest value of the scalar `stat`
 * (a step it has seen does not count; a stat never put is a warning). After
 * `patience` new values without an improvement on the best by more than
 * min_delta, training stops gracefully with a reason that names the stat,
 * its best value and the step of the best. Its best value and count are
 * saved in checkpoints. `options` may be NULL. Register it after the
 * callback that puts `stat`. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_early_stopping(
    tpt_callback **out, const char *stat, const tpt_early_stopping_options *options);

/* TerminateOnNaN: after every hooked step (AFTER_RUN; at TRIGGER_STEP for a
 * run_step without hooked steps) it checks the step's scalar outputs named in
 * `outputs` (NULL or none: "cost"), and stops training gracefully when one is
 * NaN or infinite, with a reason naming it and the step. It comes before any
 * checkpoint of that step; a ModelSaver also never writes a checkpoint whose
 * variables are not finite, so the last checkpoint is a good one. (The
 * optimizer's check_numerics, on by default, already fails a step whose cost
 * is not finite, before its update; TerminateOnNaN is for check_numerics 0
 * and for a run_step of the host's own, and ends training gracefully.) */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_terminate_on_nan(tpt_callback **out,
                                                                const char *const *outputs,
                                                                size_t n_outputs);

/* tensorpack's ThroughputTracker: times the steps of each epoch (between
 * BEFORE_EPOCH and AFTER_EPOCH, without the epoch's callbacks) and at every
 * TRIGGER puts "Throughput (steps/sec)", or with samples_per_step > 0
 * "Throughput (samples/sec)", over the steps since the last trigger. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_throughput(tpt_callback **out,
                                                          int64_t samples_per_step);

/* A step watchdog (tensorpack's SessionRunTimeout, for a whole step): a
 * thread of its own, started in BEFORE_TRAIN and joined in AFTER_TRAIN,
 * watches each step (run_step with its input wait, and the per-step
 * callbacks; not the epoch's callbacks). A step still running after
 * timeout_seconds (> 0, at most 1e9) is logged as an error at once, and when
 * the step returns training fails with TPT_ERR_TIMEOUT naming the step and its
 * time. A step that never returns cannot be interrupted: the log line is then
 * what says why. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_step_watchdog(tpt_callback **out,
                                                             double timeout_seconds);

/* tensorpack's HostMemoryTracker: logs the host's available memory in SETUP
 * and BEFORE_TRAIN, and at every TRIGGER puts "HostFreeMemory (GB)" (the
 * kernel's MemAvailable) and "HostResidentMemory (MB)" (this process's
 * resident set). Linux only: TPT_ERR_UNSUPPORTED where /proc/meminfo is
 * missing. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_host_memory(tpt_callback **out);

TPT_END_DECL

#endif /* TPTRAIN_H */
