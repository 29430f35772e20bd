//! Safe Rust API for tptrain.
//!
//! Every fallible call returns [`Result`]; the error carries the C library's
//! code and message unchanged. Handles free themselves on `Drop`. Nothing here
//! depends on crates outside the standard library.
//!
//! ```no_run
//! let a = tptrain::Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let p = a.matmul(&a)?;
//! assert_eq!(p.to_vec::<f32>()?, vec![7.0, 10.0, 15.0, 22.0]);
//! # Ok::<(), tptrain::Error>(())
//! ```

mod error;
mod runtime;
mod tensor;

pub use error::{Code, Error, Result};
pub use runtime::{abi_version, build_info, has_feature, num_threads, set_num_threads, version, version_string, Feature};
pub use tensor::{DType, Element, Tensor, TensorOptions};

/// The raw FFI crate, for what the safe API does not cover yet.
pub use tptrain_sys as sys;
