/*
 * tptrain/runtime.h: process-wide settings: build features, LibTorch's
 * threads, the random seed, the checkpoint readers' memory limit,
 * deterministic kernels and float32 precision on GPUs.
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

/* ------------------------------------------------------------------------ */
/* Runtime: reproducible numbers on GPUs                                     */
/* ------------------------------------------------------------------------ */

/* How float32 matrix products and convolutions compute on CUDA devices
 * (PyTorch's torch.backends.cuda.matmul / cudnn fp32_precision). No effect
 * on the CPU: there float32 is always computed in float32 (bf16-mixed is a
 * trainer option, docs/precision.md). */
typedef enum tpt_float32_precision {
  TPT_FLOAT32_DEFAULT = 0, /* LibTorch's defaults: matrix products in full float32, cuDNN's
                              float32 convolutions in TF32 on GPUs that have it (Ampere on) */
  TPT_FLOAT32_IEEE = 1,    /* full float32 everywhere: TF32 off for both (what a comparison
                              with a CPU run wants) */
  TPT_FLOAT32_TF32 = 2,    /* TF32 for both: about 3 decimal digits, several times faster on
                              the GPU's matrix units (set_float32_matmul_precision("high")) */
  TPT_FLOAT32_FORCE32 = 0x7fffffff
} tpt_float32_precision;

/* Sets the float32 precision above. Process-wide; call it before training
 * starts, from one thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_set_float32_precision(tpt_float32_precision precision);

/* Whether LibTorch picks deterministic kernels (PyTorch's
 * torch.use_deterministic_algorithms, Lightning's Trainer(deterministic=)).
 * On CUDA, some kernels add in whatever order their threads finish (atomics:
 * index_add, scatter_add, some convolutions' backward passes) and cuDNN may
 * pick its algorithm by timing, so two runs of the same program differ in
 * the last bits. LibTorch's CPU kernels are deterministic (with rare
 * exceptions, which ON reports), and tptrain's own sums (over towers and
 * ranks on the CPU) always add in a fixed order. */
typedef enum tpt_determinism {
  TPT_DETERMINISM_DEFAULT = 0, /* LibTorch's defaults: the fastest kernels */
  TPT_DETERMINISM_WARN = 1,    /* deterministic kernels where LibTorch has them; an operator that
                                  has none runs anyway and LibTorch warns (to stderr) */
  TPT_DETERMINISM_ON = 2,      /* deterministic kernels; an operator that has none fails, and the
                                  step's error names it */
  TPT_DETERMINISM_FORCE32 = 0x7fffffff
} tpt_determinism;

/* Sets the determinism above: WARN and ON also make cuDNN deterministic and
 * stop it timing algorithms (cudnn.deterministic, cudnn.benchmark = False),
 * and set CUBLAS_WORKSPACE_CONFIG=:4096:8 in the environment when it is not
 * set (cuBLAS reads it when it starts, so call this before the first CUDA
 * work; a value already set is left alone); DEFAULT turns them back off
 * (the variable stays). Process-wide; call it before training starts, from
 * one thread (it may change the environment). */
TPT_API TPT_NODISCARD tpt_status *tpt_set_determinism(tpt_determinism mode);

TPT_END_DECL

#endif /* TPTRAIN_RUNTIME_H */
