//! Borrowed Rust strings as C strings, without a heap allocation for short ones.

use crate::common::{Code, Error, Result};
use std::ffi::CString;
use std::os::raw::c_char;
use std::path::Path;

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

/// A path as a C string. `what` names it in the error for an interior NUL
/// byte (or, off Unix, a path that is not UTF-8).
#[cfg(unix)]
pub(crate) fn path_to_cstring(p: &Path, what: &str) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::new(Code::InvalidArgument, format!("{what} {p:?} contains a NUL byte")))
}

/// A path as a C string. `what` names it in the error for an interior NUL
/// byte (or, off Unix, a path that is not UTF-8).
#[cfg(not(unix))]
pub(crate) fn path_to_cstring(p: &Path, what: &str) -> Result<CString> {
    let s = p.to_str().ok_or_else(|| Error::new(Code::InvalidArgument, format!("{what} {p:?} is not UTF-8")))?;
    CString::new(s).map_err(|_| Error::new(Code::InvalidArgument, format!("{what} {p:?} contains a NUL byte")))
}

/// A list of strings as C strings (keep the result alive while C reads the
/// pointers). `what` names the list in the error for an interior NUL byte,
/// with the item's index.
pub(crate) fn cstrings<S: AsRef<str>>(items: &[S], what: &str) -> Result<Vec<CString>> {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let s = s.as_ref();
            CString::new(s)
                .map_err(|_| Error::new(Code::InvalidArgument, format!("{what}[{i}] contains a NUL byte: {s:?}")))
        })
        .collect()
}

/// One string as a C string; `what` names it in the error for an interior
/// NUL byte.
pub(crate) fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s)
        .map_err(|_| Error::new(Code::InvalidArgument, format!("argument '{what}' contains a NUL byte: {s:?}")))
}

/// The pointers of a list of C strings; NULL for an empty list.
pub(crate) fn ptrs_or_null(ptrs: &[*const c_char]) -> *const *const c_char {
    if ptrs.is_empty() {
        std::ptr::null()
    } else {
        ptrs.as_ptr()
    }
}
