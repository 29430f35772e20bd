//! Raw declarations of `include/tptrain.h`, written by hand and kept in the
//! header's order. Enums are plain integers with constants (a C enum value the
//! Rust side does not know must not be undefined behaviour). The safe API is
//! the `tptrain` crate.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

// ---- Versions
pub const TPT_VERSION_MAJOR: u32 = 0;
pub const TPT_VERSION_MINOR: u32 = 1;
pub const TPT_VERSION_PATCH: u32 = 0;
pub const TPT_VERSION_NUMBER: u32 = TPT_VERSION_MAJOR * 10000 + TPT_VERSION_MINOR * 100 + TPT_VERSION_PATCH;
pub const TPT_ABI_VERSION: u32 = 0;

// ---- Status
pub type tpt_code = c_int;
pub const TPT_OK: tpt_code = 0;
pub const TPT_ERR_INVALID_ARGUMENT: tpt_code = 1;
pub const TPT_ERR_OUT_OF_MEMORY: tpt_code = 2;
pub const TPT_ERR_BACKEND: tpt_code = 3;
pub const TPT_ERR_INTERNAL: tpt_code = 4;
pub const TPT_ERR_UNKNOWN: tpt_code = 5;
pub const TPT_ERR_CALLBACK: tpt_code = 6;
pub const TPT_ERR_IO: tpt_code = 7;
pub const TPT_ERR_STATE: tpt_code = 8;
pub const TPT_ERR_UNSUPPORTED: tpt_code = 9;

/// Opaque (`tpt_status`).
#[repr(C)]
pub struct tpt_status {
    _private: [u8; 0],
}

// ---- Runtime
pub type tpt_feature = c_int;
pub const TPT_FEATURE_GLOO: tpt_feature = 1;
pub const TPT_FEATURE_CUDA: tpt_feature = 2;
pub const TPT_FEATURE_NCCL: tpt_feature = 3;

// ---- Tensors
pub type tpt_dtype = c_int;
pub const TPT_DTYPE_F32: tpt_dtype = 1;
pub const TPT_DTYPE_F64: tpt_dtype = 2;
pub const TPT_DTYPE_F16: tpt_dtype = 3;
pub const TPT_DTYPE_BF16: tpt_dtype = 4;
pub const TPT_DTYPE_I64: tpt_dtype = 5;
pub const TPT_DTYPE_I32: tpt_dtype = 6;
pub const TPT_DTYPE_U8: tpt_dtype = 7;
pub const TPT_DTYPE_BOOL: tpt_dtype = 8;

pub const TPT_TENSOR_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tpt_tensor_options {
    pub version: u32,
    pub dtype: tpt_dtype,
    pub device: *const c_char,
    pub requires_grad: i32,
}
/// `TPT_TENSOR_OPTIONS_INIT`
pub const TPT_TENSOR_OPTIONS_INIT: tpt_tensor_options = tpt_tensor_options {
    version: TPT_TENSOR_OPTIONS_VERSION,
    dtype: TPT_DTYPE_F32,
    device: std::ptr::null(),
    requires_grad: 0,
};

/// Opaque (`tpt_tensor`).
#[repr(C)]
pub struct tpt_tensor {
    _private: [u8; 0],
}

extern "C" {
    pub fn tpt_version() -> u32;
    pub fn tpt_version_string() -> *const c_char;
    pub fn tpt_abi_version() -> u32;

    pub fn tpt_status_code(status: *const tpt_status) -> tpt_code;
    pub fn tpt_status_message(status: *const tpt_status) -> *const c_char;
    pub fn tpt_status_free(status: *mut tpt_status);
    pub fn tpt_status_new(code: tpt_code, message: *const c_char) -> *mut tpt_status;
    pub fn tpt_code_name(code: tpt_code) -> *const c_char;

    pub fn tpt_has_feature(feature: tpt_feature) -> c_int;
    pub fn tpt_build_info() -> *const c_char;
    pub fn tpt_set_num_threads(num_threads: c_int) -> *mut tpt_status;
    pub fn tpt_get_num_threads(out: *mut c_int) -> *mut tpt_status;

    pub fn tpt_dtype_size(dtype: tpt_dtype) -> usize;
    pub fn tpt_tensor_from_data(
        out: *mut *mut tpt_tensor,
        data: *const c_void,
        nbytes: usize,
        shape: *const i64,
        ndim: usize,
        options: *const tpt_tensor_options,
    ) -> *mut tpt_status;
    pub fn tpt_tensor_free(tensor: *mut tpt_tensor);
    pub fn tpt_tensor_ndim(out: *mut usize, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_shape(dims: *mut i64, capacity: usize, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_numel(out: *mut i64, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_dtype(out: *mut tpt_dtype, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_copy_to(dst: *mut c_void, nbytes: usize, tensor: *const tpt_tensor) -> *mut tpt_status;
    pub fn tpt_tensor_reshape(
        out: *mut *mut tpt_tensor,
        tensor: *const tpt_tensor,
        shape: *const i64,
        ndim: usize,
    ) -> *mut tpt_status;
    pub fn tpt_tensor_matmul(out: *mut *mut tpt_tensor, a: *const tpt_tensor, b: *const tpt_tensor) -> *mut tpt_status;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn header_and_library_versions_agree() {
        unsafe {
            assert_eq!(tpt_version(), TPT_VERSION_NUMBER);
            assert_eq!(tpt_abi_version(), TPT_ABI_VERSION);
        }
    }

    #[test]
    fn tensor_options_layout_matches_c() {
        // Same numbers as tests/abi/abi_layout.h.
        assert_eq!(offset_of!(tpt_tensor_options, version), 0);
        assert_eq!(offset_of!(tpt_tensor_options, dtype), 4);
        assert_eq!(offset_of!(tpt_tensor_options, device), 8);
        assert_eq!(offset_of!(tpt_tensor_options, requires_grad), 8 + size_of::<usize>());
        assert_eq!(size_of::<tpt_tensor_options>(), 8 + 2 * size_of::<usize>());
    }
}
