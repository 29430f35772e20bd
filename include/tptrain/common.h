/*
 * tptrain/common.h: the ground every module stands on: the export macros,
 * the versions, tpt_status and its codes, and the opaque handle types.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_COMMON_H
#define TPTRAIN_COMMON_H

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

/* Releases an array of `count` strings that the library allocated (e.g.
 * tpt_model_variable_list's), the strings and the array. NULL is a no-op. */
TPT_API void tpt_strings_free(char **strings, size_t count);

/* Makes a status, for hosts that report errors back to tptrain (callbacks in
 * later sections return these). `message` is copied; NULL means "". Returns
 * NULL for TPT_OK. Never fails: if memory runs out, a static out-of-memory
 * status is returned (tpt_status_free accepts it too). Any thread. */
TPT_API tpt_status *tpt_status_new(tpt_code code, const char *message);

/* A short name for a code, e.g. "TPT_ERR_BACKEND"; "TPT_UNKNOWN_CODE" for a
 * value outside the enum. Static storage. Any thread. */
TPT_API const char *tpt_code_name(tpt_code code);

/* ------------------------------------------------------------------------ */
/* Handles                                                                   */
/*                                                                           */
/* Every object of the API is an opaque handle, declared here once so that   */
/* each module header can name the others' handles. Each module says who    */
/* owns a handle and how it is released.                                    */
/* ------------------------------------------------------------------------ */

typedef struct tpt_tensor tpt_tensor;
typedef struct tpt_trainer tpt_trainer;
typedef struct tpt_callback tpt_callback;
typedef struct tpt_model tpt_model;
typedef struct tpt_tower tpt_tower; /* borrowed: valid during one tower function call */
typedef struct tpt_optimizer tpt_optimizer;
typedef struct tpt_dataflow tpt_dataflow;
typedef struct tpt_datapoint tpt_datapoint;
typedef struct tpt_input tpt_input;
typedef struct tpt_inferencer tpt_inferencer;
typedef struct tpt_predictor tpt_predictor;

TPT_END_DECL

#endif /* TPTRAIN_COMMON_H */
