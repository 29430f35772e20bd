//! One trait for the C API's handle types (git2-rs's `Binding`), and the two
//! helpers every call that makes a handle or may drop closures ends with.

use crate::common::{Code, Error, Result};
use crate::panic;
use std::ptr;
use tptrain_sys as sys;

/// A Rust type that owns one C handle.
pub(crate) trait Binding: Sized {
    /// The C type (`sys::tpt_tensor`, ...).
    type Raw;
    /// What messages call it ("tensor").
    const WHAT: &'static str;

    /// Wraps a handle; NULL gives `None`.
    ///
    /// # Safety
    /// `raw` is NULL or a live handle of this type that nothing else owns.
    unsafe fn from_raw_handle(raw: *mut Self::Raw) -> Option<Self>;

    /// The handle a successful call made, or an internal error when the
    /// library gave none.
    fn wrap(raw: *mut Self::Raw) -> Result<Self> {
        // SAFETY: after a successful call the out-parameter is a new handle
        // the caller owns.
        unsafe { Self::from_raw_handle(raw) }
            .ok_or_else(|| Error::new(Code::Internal, format!("library returned no {}", Self::WHAT)))
    }
}

/// Calls `f`, a C function that may run destroy functions (dropping the
/// closures a handle kept, also on failure): re-raises a panic one of those
/// drops caused, then checks the status.
pub(crate) fn call_dropping(f: impl FnOnce() -> *mut sys::tpt_status) -> Result<()> {
    let had = panic::pending();
    let st = f();
    panic::resume_if_new(had);
    // SAFETY: the C API returns NULL or a fresh status owned by the caller.
    unsafe { Error::check(st) }
}

/// [`call_dropping`] of a C function that makes a handle into its
/// out-parameter, and that handle.
pub(crate) fn make<T: Binding>(f: impl FnOnce(*mut *mut T::Raw) -> *mut sys::tpt_status) -> Result<T> {
    let mut out = ptr::null_mut();
    call_dropping(|| f(&mut out))?;
    T::wrap(out)
}
