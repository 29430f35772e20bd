//! Versions, build features, threads, the seed, determinism and float32
//! precision on GPUs.

use crate::common::{call, Result};
use std::ffi::CStr;
use std::os::raw::c_int;
use tptrain_sys as sys;

/// Optional parts of a build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// c10d's Gloo process group.
    Gloo,
    /// A CUDA LibTorch that sees at least one device.
    Cuda,
    /// NCCL linked in.
    Nccl,
}

pub fn has_feature(feature: Feature) -> bool {
    let raw = match feature {
        Feature::Gloo => sys::TPT_FEATURE_GLOO,
        Feature::Cuda => sys::TPT_FEATURE_CUDA,
        Feature::Nccl => sys::TPT_FEATURE_NCCL,
    };
    unsafe { sys::tpt_has_feature(raw) != 0 }
}

/// A multi-line description of the build.
pub fn build_info() -> &'static str {
    // SAFETY: static storage in the library, built once.
    unsafe { CStr::from_ptr(sys::tpt_build_info()) }.to_str().unwrap_or("")
}

/// Sets LibTorch's intra-op thread count (process-wide; an OpenMP BLAS runs
/// its products on them) (`tpt_set_num_threads`). Without a call: one thread
/// per core the process may run on, unless `OMP_NUM_THREADS` says otherwise
/// (docs/threading.md).
pub fn set_num_threads(n: i32) -> Result<()> {
    call!(sys::tpt_set_num_threads(n as c_int))
}

/// LibTorch's intra-op thread count.
pub fn num_threads() -> Result<i32> {
    let mut n: c_int = 0;
    call!(sys::tpt_get_num_threads(&mut n))?;
    Ok(n)
}

/// The most a checkpoint, torch.save file or TorchScript module may make the
/// reader allocate beyond its own size (`tpt_set_checkpoint_read_limit`):
/// entries inflated past their compressed size, tensors wider than their
/// records, the reader's tables. More is refused with an error naming the
/// file. Default 256 MiB, at most 2^62; process-wide. Reading never trusts
/// the file: see docs/checkpoints.md, "Checkpoints from others".
pub fn set_checkpoint_read_limit(bytes: u64) -> Result<()> {
    call!(sys::tpt_set_checkpoint_read_limit(bytes))
}

/// Seeds LibTorch's default random generator: variable initializers,
/// dropout (`tpt_manual_seed`).
pub fn manual_seed(seed: u64) -> Result<()> {
    call!(sys::tpt_manual_seed(seed))
}

/// How float32 matrix products and convolutions compute on CUDA devices
/// (`tpt_float32_precision`); no effect on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Float32Precision {
    /// LibTorch's defaults: matrix products in full float32, cuDNN's float32
    /// convolutions in TF32 on GPUs that have it.
    #[default]
    Default,
    /// Full float32 everywhere: TF32 off (what a comparison with a CPU run wants).
    Ieee,
    /// TF32 for both: about 3 decimal digits, several times faster on the
    /// GPU's matrix units.
    Tf32,
}

/// Sets the float32 precision of CUDA's matrix products and convolutions
/// (`tpt_set_float32_precision`). Process-wide; call it before training starts.
pub fn set_float32_precision(precision: Float32Precision) -> Result<()> {
    let raw = match precision {
        Float32Precision::Default => sys::TPT_FLOAT32_DEFAULT,
        Float32Precision::Ieee => sys::TPT_FLOAT32_IEEE,
        Float32Precision::Tf32 => sys::TPT_FLOAT32_TF32,
    };
    call!(sys::tpt_set_float32_precision(raw))
}

/// Whether LibTorch picks deterministic kernels (`tpt_determinism`,
/// PyTorch's `torch.use_deterministic_algorithms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Determinism {
    /// LibTorch's defaults: the fastest kernels; on CUDA two runs may differ
    /// in the last bits.
    #[default]
    Default,
    /// Deterministic kernels where LibTorch has them; an operator without one
    /// runs anyway and LibTorch warns.
    Warn,
    /// Deterministic kernels; an operator without one fails the step.
    On,
}

/// Sets the determinism (`tpt_set_determinism`): `Warn` and `On` also make
/// cuDNN deterministic and set `CUBLAS_WORKSPACE_CONFIG=:4096:8` when it is
/// not set (call it before the first CUDA work). Process-wide; call it before
/// training starts, from one thread (it may change the environment).
pub fn set_determinism(mode: Determinism) -> Result<()> {
    let raw = match mode {
        Determinism::Default => sys::TPT_DETERMINISM_DEFAULT,
        Determinism::Warn => sys::TPT_DETERMINISM_WARN,
        Determinism::On => sys::TPT_DETERMINISM_ON,
    };
    call!(sys::tpt_set_determinism(raw))
}
