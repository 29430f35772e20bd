//! Tensors: an owning handle on a LibTorch tensor.

use crate::error::{call, Code, Error, Result};
use std::ffi::CString;
use std::fmt;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};
use tptrain_sys as sys;

/// Element types, mirroring `tpt_dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I64,
    I32,
    U8,
    Bool,
}

impl DType {
    pub fn to_raw(self) -> sys::tpt_dtype {
        match self {
            DType::F32 => sys::TPT_DTYPE_F32,
            DType::F64 => sys::TPT_DTYPE_F64,
            DType::F16 => sys::TPT_DTYPE_F16,
            DType::BF16 => sys::TPT_DTYPE_BF16,
            DType::I64 => sys::TPT_DTYPE_I64,
            DType::I32 => sys::TPT_DTYPE_I32,
            DType::U8 => sys::TPT_DTYPE_U8,
            DType::Bool => sys::TPT_DTYPE_BOOL,
        }
    }
    fn from_raw(raw: sys::tpt_dtype) -> Result<DType> {
        Ok(match raw {
            sys::TPT_DTYPE_F32 => DType::F32,
            sys::TPT_DTYPE_F64 => DType::F64,
            sys::TPT_DTYPE_F16 => DType::F16,
            sys::TPT_DTYPE_BF16 => DType::BF16,
            sys::TPT_DTYPE_I64 => DType::I64,
            sys::TPT_DTYPE_I32 => DType::I32,
            sys::TPT_DTYPE_U8 => DType::U8,
            sys::TPT_DTYPE_BOOL => DType::Bool,
            other => return Err(Error::new(Code::Unsupported, format!("unknown tpt_dtype {other}"))),
        })
    }
    /// Bytes per element (`tpt_dtype_size`).
    pub fn size(self) -> usize {
        unsafe { sys::tpt_dtype_size(self.to_raw()) }
    }
}

/// Rust element types that map to a [`DType`].
///
/// # Safety
/// `Self` must have exactly the size and representation of `DTYPE`'s elements.
pub unsafe trait Element: Copy + Default + 'static {
    const DTYPE: DType;
}
unsafe impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
unsafe impl Element for f64 {
    const DTYPE: DType = DType::F64;
}
unsafe impl Element for i64 {
    const DTYPE: DType = DType::I64;
}
unsafe impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
unsafe impl Element for u8 {
    const DTYPE: DType = DType::U8;
}
unsafe impl Element for bool {
    const DTYPE: DType = DType::Bool;
}

/// Options for creating a tensor (`tpt_tensor_options`).
#[derive(Debug, Clone, Default)]
pub struct TensorOptions {
    /// "cpu" (default), "cuda", "cuda:N".
    pub device: Option<String>,
    pub requires_grad: bool,
}

/// An owning handle on a LibTorch tensor; freed on drop.
pub struct Tensor {
    raw: NonNull<sys::tpt_tensor>,
}

// SAFETY: a tensor handle may move between threads, and the C API allows
// concurrent reads of one tensor; every method here only reads through &self.
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe { sys::tpt_tensor_free(self.raw.as_ptr()) }
    }
}

impl Tensor {
    /// Takes ownership of a raw handle.
    ///
    /// # Safety
    /// `raw` is a live tensor handle that nothing else frees.
    pub unsafe fn from_raw(raw: *mut sys::tpt_tensor) -> Option<Tensor> {
        NonNull::new(raw).map(|raw| Tensor { raw })
    }

    /// The raw handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *const sys::tpt_tensor {
        self.raw.as_ptr()
    }

    fn wrap(out: *mut sys::tpt_tensor) -> Result<Tensor> {
        // SAFETY: the C API gave us a new handle after a successful call.
        unsafe { Tensor::from_raw(out) }.ok_or_else(|| Error::new(Code::Internal, "library returned no tensor"))
    }

    /// Copies `data` (C order, `shape`) into a new CPU tensor.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        // SAFETY: Element guarantees T's layout equals the dtype's.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
        Tensor::from_bytes(bytes, T::DTYPE, shape, &TensorOptions::default())
    }

    /// Copies raw bytes of `dtype` elements into a new tensor.
    pub fn from_bytes(data: &[u8], dtype: DType, shape: &[i64], options: &TensorOptions) -> Result<Tensor> {
        let device = match &options.device {
            Some(d) => {
                Some(CString::new(d.as_str()).map_err(|_| Error::new(Code::InvalidArgument, "device contains NUL"))?)
            }
            None => None,
        };
        let mut opts = sys::TPT_TENSOR_OPTIONS_INIT;
        opts.dtype = dtype.to_raw();
        opts.device = device.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        opts.requires_grad = options.requires_grad as i32;
        let mut out = ptr::null_mut();
        let data_ptr = if data.is_empty() { ptr::null() } else { data.as_ptr() as *const c_void };
        call!(sys::tpt_tensor_from_data(&mut out, data_ptr, data.len(), shape.as_ptr(), shape.len(), &opts))?;
        Tensor::wrap(out)
    }

    pub fn ndim(&self) -> Result<usize> {
        let mut n = 0usize;
        call!(sys::tpt_tensor_ndim(&mut n, self.as_ptr()))?;
        Ok(n)
    }

    pub fn shape(&self) -> Result<Vec<i64>> {
        let mut dims = vec![0i64; self.ndim()?];
        call!(sys::tpt_tensor_shape(dims.as_mut_ptr(), dims.len(), self.as_ptr()))?;
        Ok(dims)
    }

    pub fn numel(&self) -> Result<i64> {
        let mut n = 0i64;
        call!(sys::tpt_tensor_numel(&mut n, self.as_ptr()))?;
        Ok(n)
    }

    pub fn dtype(&self) -> Result<DType> {
        let mut d: sys::tpt_dtype = 0;
        call!(sys::tpt_tensor_dtype(&mut d, self.as_ptr()))?;
        DType::from_raw(d)
    }

    /// The elements as raw bytes, C order.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let n = self.numel()? as usize * self.dtype()?.size();
        let mut buf = vec![0u8; n];
        call!(sys::tpt_tensor_copy_to(buf.as_mut_ptr() as *mut c_void, n, self.as_ptr()))?;
        Ok(buf)
    }

    /// The elements, C order; the tensor's dtype must be `T`'s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let dtype = self.dtype()?;
        if dtype != T::DTYPE {
            return Err(Error::new(
                Code::InvalidArgument,
                format!("tensor holds {:?}, asked for {:?}", dtype, T::DTYPE),
            ));
        }
        let n = self.numel()? as usize;
        let mut v = vec![T::default(); n];
        call!(sys::tpt_tensor_copy_to(v.as_mut_ptr() as *mut c_void, n * dtype.size(), self.as_ptr()))?;
        Ok(v)
    }

    /// Same elements, new shape (one entry may be -1).
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_tensor_reshape(&mut out, self.as_ptr(), shape.as_ptr(), shape.len()))?;
        Tensor::wrap(out)
    }

    /// Matrix product (LibTorch's matmul rules).
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_tensor_matmul(&mut out, self.as_ptr(), other.as_ptr()))?;
        Tensor::wrap(out)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor").field("dtype", &self.dtype().ok()).field("shape", &self.shape().ok()).finish()
    }
}
