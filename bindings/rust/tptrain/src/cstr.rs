//! Borrowed Rust strings as C strings, without a heap allocation for short ones.

use crate::error::{Code, Error, Result};
use std::ffi::CString;
use std::os::raw::c_char;

/// Calls `f` with `s` as a NUL-terminated string. `what` names the argument
/// in the error for an interior NUL byte.
pub(crate) fn with_cstr<R>(s: &str, what: &str, f: impl FnOnce(*const c_char) -> R) -> Result<R> {
    const STACK: usize = 128;
    let bytes = s.as_bytes();
    if bytes.contains(&0) {
        return Err(Error::new(Code::InvalidArgument, format!("argument '{what}' contains a NUL byte: {s:?}")));
    }
    if bytes.len() < STACK {
        let mut buf = [0u8; STACK];
        buf[..bytes.len()].copy_from_slice(bytes);
        Ok(f(buf.as_ptr().cast()))
    } else {
        let c = CString::new(bytes).expect("checked for NUL above");
        Ok(f(c.as_ptr()))
    }
}

/// The text of a NUL-terminated C string the library wrote into `buf`.
pub(crate) fn from_buf(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
