//! Versions, build features and threads.

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
