//! Tensors: an owning handle on a LibTorch tensor.

use crate::binding::Binding;
use crate::common::{call, Code, Error, Result};
use crate::cstr::with_cstr;
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
///
/// A handle is not the data: LibTorch tensors share storage (views,
/// [`share`](Self::share), [`from_vec`](Self::from_vec), model variables), so
/// an in-place operator called through [`ops::call`](crate::ops::call) on one
/// handle is seen through the others. As in the C API, reading one tensor
/// from several threads is fine; changing it in place while another thread
/// reads it is a data race in LibTorch, which the caller must prevent.
///
/// `repr(transparent)`: a `Tensor` is exactly one `tpt_tensor *`, so that
/// the borrowed input arrays C hands to a tower function are seen as
/// `&[Tensor]` without a copy.
#[repr(transparent)]
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

    /// Gives up ownership of the handle (for a C function that takes it).
    pub fn into_raw(self) -> *mut sys::tpt_tensor {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    /// Copies `data` (C order, `shape`) into a new CPU tensor.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        // SAFETY: Element guarantees T's layout equals the dtype's.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
        Tensor::from_bytes(bytes, T::DTYPE, shape, None)
    }

    /// Copies raw bytes of `dtype` elements into a new tensor; `options`:
    /// `None` for the defaults (on the CPU, no gradient), or a
    /// [`TensorOptions`].
    ///
    /// ```
    /// use tptrain::{DType, Tensor, TensorOptions};
    /// let bytes = 1.5f32.to_ne_bytes();
    /// let t = Tensor::from_bytes(&bytes, DType::F32, &[1], None)?;
    /// let options = TensorOptions { requires_grad: true, ..Default::default() };
    /// let g = Tensor::from_bytes(&bytes, DType::F32, &[1], &options)?;
    /// assert_eq!((t.item()?, g.item()?), (1.5, 1.5));
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn from_bytes<'o>(
        data: &[u8],
        dtype: DType,
        shape: &[i64],
        options: impl Into<Option<&'o TensorOptions>>,
    ) -> Result<Tensor> {
        let defaults = TensorOptions::default();
        let options = options.into().unwrap_or(&defaults);
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

    /// The number of dimensions (`tpt_tensor_ndim`).
    ///
    /// # Panics
    /// If the library fails to answer, which it does only for a handle that
    /// is not live (never for a `Tensor`).
    pub fn ndim(&self) -> usize {
        let mut n = 0usize;
        infallible(call!(sys::tpt_tensor_ndim(&mut n, self.as_ptr())));
        n
    }

    /// The size of each dimension, C order (`tpt_tensor_shape`).
    ///
    /// # Panics
    /// As [`ndim`](Self::ndim).
    pub fn shape(&self) -> Vec<i64> {
        let mut dims = vec![0i64; self.ndim()];
        infallible(call!(sys::tpt_tensor_shape(dims.as_mut_ptr(), dims.len(), self.as_ptr())));
        dims
    }

    /// The number of elements (`tpt_tensor_numel`).
    ///
    /// # Panics
    /// As [`ndim`](Self::ndim).
    pub fn numel(&self) -> i64 {
        let mut n = 0i64;
        infallible(call!(sys::tpt_tensor_numel(&mut n, self.as_ptr())));
        n
    }

    /// The element type (`tpt_tensor_dtype`).
    ///
    /// # Panics
    /// If LibTorch's dtype of the tensor has no [`DType`] (complex, int8,
    /// int16, ...: only [`ops::call`](crate::ops::call) and
    /// [`from_dlpack`](Self::from_dlpack) can make such a tensor); use
    /// [`try_dtype`](Self::try_dtype) where that may happen.
    pub fn dtype(&self) -> DType {
        self.try_dtype().unwrap_or_else(|e| panic!("Tensor::dtype: {e}"))
    }

    /// The element type, or a [`Code::Unsupported`] error if LibTorch's
    /// dtype of the tensor has no [`DType`] (`tpt_tensor_dtype`).
    pub fn try_dtype(&self) -> Result<DType> {
        let mut d: sys::tpt_dtype = 0;
        call!(sys::tpt_tensor_dtype(&mut d, self.as_ptr()))?;
        DType::from_raw(d)
    }

    /// The elements as raw bytes, C order.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let n = self.numel() as usize * self.try_dtype()?.size();
        let mut buf = vec![0u8; n];
        call!(sys::tpt_tensor_copy_to(buf.as_mut_ptr() as *mut c_void, n, self.as_ptr()))?;
        Ok(buf)
    }

    /// The elements, C order; the tensor's dtype must be `T`'s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let dtype = self.try_dtype()?;
        if dtype != T::DTYPE {
            return Err(Error::new(
                Code::InvalidArgument,
                format!("tensor holds {:?}, asked for {:?}", dtype, T::DTYPE),
            ));
        }
        let n = self.numel() as usize;
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

/// The outcome of a getter that cannot fail on a live handle: a failure
/// anyway is a bug, reported by a panic with the library's message.
#[track_caller]
fn infallible(r: Result<()>) {
    if let Err(e) = r {
        panic!("tptrain: a getter failed on a live tensor: {e}");
    }
}

/// The deleter of [`Tensor::from_buffer`]: drops the boxed owner of the data.
unsafe extern "C" fn drop_owner<B>(_data: *mut c_void, ctx: *mut c_void) {
    // SAFETY: ctx came from Box::into_raw(Box<B>) and LibTorch calls the
    // deleter exactly once. A panic must not cross the C frame: a drop that
    // panics aborts the process, as any unwinding out of a deleter would.
    let owner = unsafe { Box::from_raw(ctx.cast::<B>()) };
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(owner))).is_err() {
        std::process::abort();
    }
}

/// The number of elements of `shape`, or why it is not a valid shape.
fn shape_numel(shape: &[i64]) -> std::result::Result<usize, String> {
    let mut n: usize = 1;
    for (i, &d) in shape.iter().enumerate() {
        let d = usize::try_from(d).map_err(|_| format!("shape[{i}] is {d}; dimensions must be >= 0"))?;
        n = n.checked_mul(d).ok_or_else(|| format!("shape {shape:?} has too many elements"))?;
    }
    Ok(n)
}

impl Tensor {
    /// A CPU tensor that uses `data` in place, without a copy
    /// (`tpt_tensor_from_blob`): the `Vec` moves into the tensor's storage
    /// and LibTorch drops it, exactly once, when the last tensor using it is
    /// gone (views and [`share`](Self::share)d handles included), on whatever
    /// thread frees that tensor. `shape` (C order) must hold exactly
    /// `data.len()` elements; this is checked before anything is handed over.
    pub fn from_vec<T: Element + Send>(data: Vec<T>, shape: &[i64]) -> Result<Tensor> {
        Tensor::from_buffer(data, shape)
    }

    /// [`from_vec`](Self::from_vec) for any owner of a buffer: `buffer` moves
    /// into the tensor's storage, the tensor uses the slice that
    /// `buffer.as_mut()` returns (asked once, after the move), and LibTorch
    /// drops `buffer` exactly once when the last tensor using it is gone. A
    /// `Drop` of `buffer` that panics aborts the process (it runs under C
    /// frames).
    pub fn from_buffer<T, B>(buffer: B, shape: &[i64]) -> Result<Tensor>
    where
        T: Element,
        B: AsMut<[T]> + Send + 'static,
    {
        let fail = |m: String| Error::new(Code::InvalidArgument, format!("Tensor::from_buffer: {m}"));
        let numel = shape_numel(shape).map_err(fail)?;
        // Boxed first: the slice may live inside `buffer` itself (an array).
        let mut boxed = Box::new(buffer);
        let slice: &mut [T] = (*boxed).as_mut();
        if numel != slice.len() {
            return Err(fail(format!("shape {shape:?} has {numel} elements but the buffer holds {}", slice.len())));
        }
        let data = slice.as_mut_ptr().cast::<c_void>();
        let ctx = Box::into_raw(boxed).cast::<c_void>();
        let mut opts = sys::TPT_TENSOR_OPTIONS_INIT;
        opts.dtype = T::DTYPE.to_raw();
        let mut out = ptr::null_mut();
        // SAFETY: data points to `numel` initialised T (checked above), laid
        // out as T::DTYPE (Element's contract), and stays valid until the
        // deleter drops the owner, which nothing else touches until then; the
        // library runs the deleter exactly once, also on failure. B: Send,
        // since the last tensor may be freed on another thread.
        call!(sys::tpt_tensor_from_blob(
            &mut out,
            data,
            shape.as_ptr(),
            shape.len(),
            &opts,
            Some(drop_owner::<B>),
            ctx
        ))?;
        Tensor::wrap(out)
    }

    /// A new handle on the same tensor: no copy, the same storage, and
    /// changes made through one are seen through the other
    /// (`tpt_tensor_share`). This is deliberately not `Clone`, which would
    /// suggest an independent copy; use [`to`](Self::to) for a copy.
    pub fn share(&self) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_tensor_share(&mut out, self.as_ptr()))?;
        Tensor::wrap(out)
    }

    /// A new handle on the same values, detached from autograd's graph (no
    /// gradient flows through it), sharing the storage (`tpt_tensor_keep`).
    pub fn detach(&self) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_tensor_keep(&mut out, self.as_ptr()))?;
        Tensor::wrap(out)
    }

    /// The number of tensor handles alive in the process
    /// (`tpt_tensor_live_handles`), for leak checks.
    pub fn live_handles() -> i64 {
        unsafe { sys::tpt_tensor_live_handles() }
    }

    /// The device, e.g. "cpu" or "cuda:0" (`tpt_tensor_device`).
    ///
    /// # Panics
    /// As [`ndim`](Self::ndim).
    pub fn device(&self) -> String {
        let mut buf = [0u8; 128];
        infallible(call!(sys::tpt_tensor_device(buf.as_mut_ptr().cast(), buf.len(), self.as_ptr())));
        crate::cstr::from_buf(&buf)
    }

    /// A copy on another device and/or with another dtype (`tpt_tensor_to`);
    /// `None` keeps the tensor's own.
    pub fn to(&self, device: Option<&str>, dtype: Option<DType>) -> Result<Tensor> {
        let dtype = dtype.map_or(0, DType::to_raw);
        let mut out = ptr::null_mut();
        match device {
            Some(d) => with_cstr(d, "device", |d| call!(sys::tpt_tensor_to(&mut out, self.as_ptr(), d, dtype)))??,
            None => call!(sys::tpt_tensor_to(&mut out, self.as_ptr(), ptr::null(), dtype))?,
        }
        Tensor::wrap(out)
    }

    /// A copy with another dtype (`tpt_tensor_to`).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.to(None, Some(dtype))
    }

    /// A copy on another device, e.g. "cuda:0" (`tpt_tensor_to`).
    pub fn to_device(&self, device: &str) -> Result<Tensor> {
        self.to(Some(device), None)
    }

    /// The value of a one-element tensor, as `f64` (`tpt_tensor_item`).
    pub fn item(&self) -> Result<f64> {
        let mut v = 0f64;
        call!(sys::tpt_tensor_item(&mut v, self.as_ptr()))?;
        Ok(v)
    }

    /// Exports the tensor through DLPack (DLPACK_VERSION 0.6) without a copy
    /// (`tpt_tensor_to_dlpack`). The result is a `DLManagedTensor *` that the
    /// caller owns: give it to a consumer, or call its `deleter` (it keeps
    /// the storage alive until then; dropping the pointer leaks it).
    pub fn to_dlpack(&self) -> Result<*mut c_void> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_tensor_to_dlpack(&mut out, self.as_ptr()))?;
        Ok(out.cast())
    }

    /// Imports a DLPack tensor without a copy (`tpt_tensor_from_dlpack`).
    /// Takes ownership of `src`: its deleter runs when the tensor's storage
    /// is released, or before this returns if it fails.
    ///
    /// # Safety
    /// `src` is a live `DLManagedTensor *` (DLPack 0.6) that nothing else
    /// will use or delete, whose memory stays valid until its deleter runs.
    pub unsafe fn from_dlpack(src: *mut c_void) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_tensor_from_dlpack(&mut out, src.cast()))?;
        Tensor::wrap(out)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor").field("dtype", &self.try_dtype().ok()).field("shape", &self.shape()).finish()
    }
}

/// Called first thing by every trampoline that the library runs inside a
/// tensor scope (tower functions, trainer callbacks): the tensors the Rust
/// code makes in the call are Rust values that free themselves, so the
/// library's scope hands them over (`TPT_SCOPE_OFF`) instead of releasing
/// them when the call returns.
pub(crate) fn own_call_tensors() {
    // SAFETY: TPT_SCOPE_OFF is a valid mode; the status (always NULL for a
    // valid mode) is freed.
    unsafe {
        let st = sys::tpt_tensor_scope_set_mode(sys::TPT_SCOPE_OFF);
        if !st.is_null() {
            sys::tpt_status_free(st);
        }
    }
}

// ---- element-wise arithmetic: `&a + &b`, `&a * 2.0`, ... (`tpt_op_add`, ...)

macro_rules! arithmetic {
    ($trait:ident, $method:ident, $tensor_fn:ident, $scalar_fn:ident, $what:literal) => {
        #[doc = concat!("`&a ", $what, " &b`, element-wise with broadcasting (`", stringify!($tensor_fn), "`); ")]
        #[doc = "shapes that do not broadcast are an error, hence the `Result`: `(&a + &b)?`."]
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                let mut out = ptr::null_mut();
                call!(sys::$tensor_fn(&mut out, self.as_ptr(), rhs.as_ptr()))?;
                Tensor::wrap(out)
            }
        }
        #[doc = concat!("`&a ", $what, " x` with a number (`", stringify!($scalar_fn), "`).")]
        impl std::ops::$trait<f64> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f64) -> Result<Tensor> {
                let mut out = ptr::null_mut();
                call!(sys::$scalar_fn(&mut out, self.as_ptr(), rhs))?;
                Tensor::wrap(out)
            }
        }
        #[doc = concat!("`a ", $what, " &b` on an owned tensor, for chains: `((&x * 2.0)? + &b)?`.")]
        impl std::ops::$trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                std::ops::$trait::$method(&self, rhs)
            }
        }
        #[doc = concat!("`a ", $what, " x` on an owned tensor, for chains: `((&x * 2.0)? + 1.0)?`.")]
        impl std::ops::$trait<f64> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: f64) -> Result<Tensor> {
                std::ops::$trait::$method(&self, rhs)
            }
        }
    };
}

arithmetic!(Add, add, tpt_op_add, tpt_op_add_scalar, "+");
arithmetic!(Sub, sub, tpt_op_sub, tpt_op_sub_scalar, "-");
arithmetic!(Mul, mul, tpt_op_mul, tpt_op_mul_scalar, "*");
arithmetic!(Div, div, tpt_op_div, tpt_op_div_scalar, "/");

impl Binding for Tensor {
    type Raw = sys::tpt_tensor;
    const WHAT: &'static str = "tensor";
    unsafe fn from_raw_handle(raw: *mut sys::tpt_tensor) -> Option<Tensor> {
        Tensor::from_raw(raw)
    }
}
