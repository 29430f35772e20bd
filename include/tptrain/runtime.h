/*
 * tptrain/runtime.h: process-wide settings: build features, LibTorch's
 * threads, the random seed, the checkpoint readers' memory limit.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_RUNTIME_H
#define TPTRAIN_RUNTIME_H

#include "common.h"

TPT_BEGIN_DECL

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
 * (at::set_num_threads); an OpenMP BLAS (MKL, OpenBLAS's OpenMP build) runs
 * its products on them. `num_threads` must be >= 1. Without a call, tptrain
 * uses one thread per physical core the process may run on (its CPU
 * affinity and cgroup quota), unless OMP_NUM_THREADS or MKL_NUM_THREADS is
 * set; OpenBLAS's pthread build is kept at one thread (docs/threading.md).
 * Process-wide; call it before training starts, from one thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_set_num_threads(int num_threads);

/* The number of intra-op threads LibTorch uses. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_get_num_threads(int *out);

/* Seeds LibTorch's default random generator (variable initializers, dropout). */
TPT_API TPT_NODISCARD tpt_status *tpt_manual_seed(uint64_t seed);

/* Reading a checkpoint, a torch.save file or a TorchScript module (restore,
 * resume, tpt_model_from_torchscript) never trusts the file (see
 * docs/checkpoints.md, "Checkpoints from others"); among its limits, a file
 * may make the reader allocate at most its own size plus `bytes` (entries
 * inflated past their compressed size, tensors wider than their records,
 * the reader's tables): more is refused, naming the file. Default 256 MiB;
 * at most 2^62. Process-wide; any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_set_checkpoint_read_limit(uint64_t bytes);

TPT_END_DECL

#endif /* TPTRAIN_RUNTIME_H */
