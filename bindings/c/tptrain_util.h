/*
 * tptrain_util.h: C conveniences on top of tptrain.h (header-only).
 *
 * Error-checking macros for the three usual shapes of C error handling, and
 * small helpers for common patterns (typed tensor creation and read-back,
 * taking a status's message). Everything here is built only on the public
 * API; nothing is exported from libtptrain. See README.md in this folder.
 */
#ifndef TPTRAIN_UTIL_H
#define TPTRAIN_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tptrain.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Error-checking macros ------------------------------------------------ */

/* Programs and examples: on error print "file:line: call: message" to stderr
 * and exit(1). */
#define TPT_CHECK_OR_DIE(call)                                                    \
  do {                                                                            \
    tpt_status *tpt_util_st_ = (call);                                            \
    if (tpt_util_st_) {                                                           \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,   \
              tpt_status_message(tpt_util_st_),                                   \
              tpt_code_name(tpt_status_code(tpt_util_st_)));                      \
      tpt_status_free(tpt_util_st_);                                              \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

/* Functions that themselves return tpt_status *: pass the error up. */
#define TPT_RETURN_IF_ERROR(call)                  \
  do {                                             \
    tpt_status *tpt_util_st_ = (call);             \
    if (tpt_util_st_) return tpt_util_st_;         \
  } while (0)

/* Functions with a cleanup label: store the error in `status_var` (a
 * tpt_status * that starts NULL) and jump to `label`. */
#define TPT_TRY(status_var, call, label)  \
  do {                                    \
    (status_var) = (call);                \
    if (status_var) goto label;           \
  } while (0)

/* ---- Helpers -------------------------------------------------------------- */

/* Copies the message of `status` into buf (truncated, always NUL-terminated
 * when size > 0), frees the status, and returns its code. TPT_OK and an empty
 * string for NULL. */
static inline tpt_code tptu_take_status(tpt_status *status, char *buf, size_t size) {
  tpt_code code = tpt_status_code(status);
  if (buf && size > 0) {
    const char *msg = tpt_status_message(status);
    size_t n = strlen(msg);
    if (n >= size) n = size - 1;
    memcpy(buf, msg, n);
    buf[n] = '\0';
  }
  tpt_status_free(status);
  return code;
}

/* Number of elements of a shape; 0 if any dimension is negative. */
static inline size_t tptu_shape_numel(const int64_t *shape, size_t ndim) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0) return 0;
    n *= (size_t)shape[i];
  }
  return n;
}

/* A CPU tensor of `dtype` copied from `data`, with nbytes computed from the shape. */
static inline tpt_status *tptu_tensor_new(tpt_tensor **out, tpt_dtype dtype, const void *data,
                                          const int64_t *shape, size_t ndim) {
  tpt_tensor_options opts = TPT_TENSOR_OPTIONS_INIT;
  opts.dtype = dtype;
  size_t nbytes = tptu_shape_numel(shape, ndim) * tpt_dtype_size(dtype);
  return tpt_tensor_from_data(out, data, nbytes, shape, ndim, &opts);
}

static inline tpt_status *tptu_tensor_f32(tpt_tensor **out, const float *data,
                                          const int64_t *shape, size_t ndim) {
  return tptu_tensor_new(out, TPT_DTYPE_F32, data, shape, ndim);
}

/* Reads a tensor back into a new malloc'ed buffer (free() it); *count_out
 * receives the element count. The buffer holds the tensor's own dtype. */
static inline tpt_status *tptu_tensor_read(void **data_out, int64_t *count_out,
                                           const tpt_tensor *tensor) {
  tpt_dtype dtype;
  int64_t n = 0;
  if (!data_out) return tpt_status_new(TPT_ERR_INVALID_ARGUMENT, "tptu_tensor_read: argument 'data_out' is NULL");
  *data_out = NULL;
  TPT_RETURN_IF_ERROR(tpt_tensor_dtype(&dtype, tensor));
  TPT_RETURN_IF_ERROR(tpt_tensor_numel(&n, tensor));
  size_t nbytes = (size_t)n * tpt_dtype_size(dtype);
  void *buf = malloc(nbytes ? nbytes : 1);
  if (!buf) return tpt_status_new(TPT_ERR_OUT_OF_MEMORY, "tptu_tensor_read: malloc failed");
  tpt_status *st = tpt_tensor_copy_to(buf, nbytes, tensor);
  if (st) {
    free(buf);
    return st;
  }
  *data_out = buf;
  if (count_out) *count_out = n;
  return NULL;
}

/* Prints a small tensor's shape and (float) values to `f`, for examples and debugging. */
static inline tpt_status *tptu_tensor_print(FILE *f, const char *name, const tpt_tensor *tensor) {
  size_t ndim = 0;
  int64_t dims[8];
  TPT_RETURN_IF_ERROR(tpt_tensor_ndim(&ndim, tensor));
  if (ndim > 8) return tpt_status_new(TPT_ERR_INVALID_ARGUMENT, "tptu_tensor_print: more than 8 dimensions");
  TPT_RETURN_IF_ERROR(tpt_tensor_shape(dims, 8, tensor));
  tpt_dtype dtype;
  TPT_RETURN_IF_ERROR(tpt_tensor_dtype(&dtype, tensor));
  if (dtype != TPT_DTYPE_F32) return tpt_status_new(TPT_ERR_UNSUPPORTED, "tptu_tensor_print: f32 tensors only");
  void *data = NULL;
  int64_t n = 0;
  TPT_RETURN_IF_ERROR(tptu_tensor_read(&data, &n, tensor));
  fprintf(f, "%s [", name ? name : "tensor");
  for (size_t i = 0; i < ndim; ++i) fprintf(f, "%s%lld", i ? "x" : "", (long long)dims[i]);
  fprintf(f, "] =");
  for (int64_t i = 0; i < n; ++i) fprintf(f, " %g", (double)((const float *)data)[i]);
  fprintf(f, "\n");
  free(data);
  return NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* TPTRAIN_UTIL_H */
