//! Errors: a copy of a `tpt_status` (code + message), freed at once.

use std::ffi::{CStr, CString};
use std::fmt;
use tptrain_sys as sys;

/// The code of an error, mirroring `tpt_code`. A code this crate does not know
/// (from a newer library) is kept in [`Code::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    InvalidArgument,
    OutOfMemory,
    Backend,
    Internal,
    Unknown,
    Callback,
    Io,
    State,
    Unsupported,
    /// A name (scalar, output, file) does not exist.
    NotFound,
    /// A code this crate does not know. (`TPT_STOP` is not an error: the
    /// trainer API reports it as [`Flow::Stop`](crate::Flow::Stop).)
    Other(i32),
}

impl Code {
    pub(crate) fn from_raw(code: sys::tpt_code) -> Code {
        match code {
            sys::TPT_ERR_INVALID_ARGUMENT => Code::InvalidArgument,
            sys::TPT_ERR_OUT_OF_MEMORY => Code::OutOfMemory,
            sys::TPT_ERR_BACKEND => Code::Backend,
            sys::TPT_ERR_INTERNAL => Code::Internal,
            sys::TPT_ERR_UNKNOWN => Code::Unknown,
            sys::TPT_ERR_CALLBACK => Code::Callback,
            sys::TPT_ERR_IO => Code::Io,
            sys::TPT_ERR_STATE => Code::State,
            sys::TPT_ERR_UNSUPPORTED => Code::Unsupported,
            sys::TPT_ERR_NOT_FOUND => Code::NotFound,
            other => Code::Other(other),
        }
    }

    pub fn to_raw(self) -> sys::tpt_code {
        match self {
            Code::InvalidArgument => sys::TPT_ERR_INVALID_ARGUMENT,
            Code::OutOfMemory => sys::TPT_ERR_OUT_OF_MEMORY,
            Code::Backend => sys::TPT_ERR_BACKEND,
            Code::Internal => sys::TPT_ERR_INTERNAL,
            Code::Unknown => sys::TPT_ERR_UNKNOWN,
            Code::Callback => sys::TPT_ERR_CALLBACK,
            Code::Io => sys::TPT_ERR_IO,
            Code::State => sys::TPT_ERR_STATE,
            Code::Unsupported => sys::TPT_ERR_UNSUPPORTED,
            Code::NotFound => sys::TPT_ERR_NOT_FOUND,
            Code::Other(c) => c,
        }
    }

    /// The C name, e.g. `"TPT_ERR_BACKEND"` (`tpt_code_name`).
    pub fn name(self) -> &'static str {
        // SAFETY: tpt_code_name returns static storage for every input.
        unsafe { CStr::from_ptr(sys::tpt_code_name(self.to_raw())) }.to_str().unwrap_or("TPT_UNKNOWN_CODE")
    }
}

/// An error reported by libtptrain (or made by a host to report back to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: Code,
    message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }
    pub fn code(&self) -> Code {
        self.code
    }
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Takes ownership of a status: `Ok(())` for NULL, otherwise an `Error`
    /// with its code and message; the status is freed.
    ///
    /// # Safety
    /// `status` is NULL or a live status that nothing else will free.
    pub unsafe fn check(status: *mut sys::tpt_status) -> Result<()> {
        if status.is_null() {
            return Ok(());
        }
        let code = Code::from_raw(sys::tpt_status_code(status));
        let message = CStr::from_ptr(sys::tpt_status_message(status)).to_string_lossy().into_owned();
        sys::tpt_status_free(status);
        Err(Error { code, message })
    }

    /// A new C status with this error's code and message (for callbacks that
    /// report to the library). Interior NUL bytes are replaced.
    pub fn into_raw_status(&self) -> *mut sys::tpt_status {
        let msg = CString::new(self.message.replace('\0', "\u{FFFD}")).unwrap_or_default();
        // SAFETY: msg is a valid C string for the call; the library copies it.
        unsafe { sys::tpt_status_new(self.code.to_raw(), msg.as_ptr()) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code.name())
    }
}

impl std::error::Error for Error {}

/// Calls a C function returning `tpt_status *` and converts the result.
macro_rules! call {
    ($e:expr) => {
        // SAFETY: the C API returns NULL or a fresh status owned by the caller.
        unsafe { $crate::error::Error::check($e) }
    };
}
pub(crate) use call;
