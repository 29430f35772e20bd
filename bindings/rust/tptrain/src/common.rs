//! Errors: a copy of a `tpt_status` (code + message), freed at once, with
//! the source of an error that began in Rust.

use std::error::Error as StdError;
use std::ffi::{CStr, CString};
use std::fmt;
use std::sync::Arc;
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
    /// Something took longer than its time limit (a step under a
    /// [`StepWatchdog`](crate::StepWatchdog)).
    Timeout,
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
            sys::TPT_ERR_TIMEOUT => Code::Timeout,
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
            Code::Timeout => sys::TPT_ERR_TIMEOUT,
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
///
/// It carries the C library's code and message, and, when it began as
/// another error (an [`std::io::Error`] turned into one with `?`, or the
/// error a closure returned), that error as its
/// [`source`](std::error::Error::source). The source survives the trip
/// through the C library: an error that a closure returns comes back from
/// [`Trainer::run`](crate::Trainer::run), [`Model::build`](crate::Model::build)
/// or a [`DataFlow`](crate::DataFlow) iteration with its source attached.
///
/// A message from the library begins with the function or method of this
/// crate that makes the failing C call, and ends with that C function in
/// parentheses: `DataFlow::batch: batch_size must be >= 1, got 0
/// (tpt_dataflow_batch)`. (The name comes from a table that the build script
/// reads out of this crate's sources; where several methods make the call,
/// the one named after the C function, else those of one name, joined by
/// "or".)
///
/// Two errors are equal when their codes and messages are (the source is not
/// compared); a clone shares the source.
#[derive(Clone)]
pub struct Error {
    code: Code,
    message: String,
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

/// `std::result::Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error { code, message: message.into(), source: None }
    }
    pub fn code(&self) -> Code {
        self.code
    }
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with `source` as its [`source`](std::error::Error::source)
    /// (replacing any other), e.g. for a [`Source`](crate::Source) that
    /// wants its own code: `Error::new(Code::Io, "no labels").with_source(e)`.
    pub fn with_source(mut self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Error {
        self.source = Some(Arc::from(source.into()));
        self
    }

    /// Any error as an `Error`, the way a closure's error is turned into one:
    /// an `Error` stays as it is (its code, message and source); any other
    /// becomes a [`Code::Callback`] error whose message is the error's
    /// `Display` text and whose [`source`](std::error::Error::source) is the
    /// error itself (downcast it to get it back).
    ///
    /// ```
    /// use std::error::Error as _;
    /// let e = tptrain::Error::wrap("x".parse::<u8>().unwrap_err());
    /// assert_eq!(e.code(), tptrain::Code::Callback);
    /// assert!(e.source().unwrap().downcast_ref::<std::num::ParseIntError>().is_some());
    /// ```
    pub fn wrap<E: Into<Box<dyn StdError + Send + Sync>>>(error: E) -> Error {
        match error.into().downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error { code: Code::Callback, message: other.to_string(), source: Some(Arc::from(other)) },
        }
    }

    /// The same message and source with another code.
    pub(crate) fn with_code(&self, code: Code) -> Error {
        Error { code, ..self.clone() }
    }

    /// Takes ownership of a status: `Ok(())` for NULL, otherwise an `Error`
    /// with its code and message; the status is freed. If the status carries
    /// an error that a closure of this crate returned (same code and
    /// message), that error's source is attached.
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
        let source = sources::take(code, &message);
        Err(Error { code, message: rust_message(message), source })
    }

    /// A new C status with this error's code and message (for callbacks that
    /// report to the library). Interior NUL bytes are replaced. A source is
    /// kept aside, so that [`check`](Self::check) attaches it again when the
    /// library hands the same error back.
    pub fn into_raw_status(&self) -> *mut sys::tpt_status {
        if let Some(source) = &self.source {
            sources::put(self.code, &self.message, Arc::clone(source));
        }
        let msg = CString::new(self.message.replace('\0', "\u{FFFD}")).unwrap_or_default();
        // SAFETY: msg is a valid C string for the call; the library copies it.
        unsafe { sys::tpt_status_new(self.code.to_raw(), msg.as_ptr()) }
    }
}

impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.code == other.code && self.message == other.message
    }
}

impl Eq for Error {}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("code", &self.code).field("message", &self.message);
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code.name())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|s| s as &(dyn StdError + 'static))
    }
}

/// [`Code::Io`], the error's text as the message, the error as the source.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::new(Code::Io, e.to_string()).with_source(e)
    }
}

/// [`Code::Callback`] (formatting failed in host code: a `write!` to a sink
/// that failed), the error as the source.
impl From<fmt::Error> for Error {
    fn from(e: fmt::Error) -> Error {
        Error::new(Code::Callback, e.to_string()).with_source(e)
    }
}

/// [`Code::InvalidArgument`] (text that is not a number), the error's text
/// as the message, the error as the source.
impl From<std::num::ParseFloatError> for Error {
    fn from(e: std::num::ParseFloatError) -> Error {
        Error::new(Code::InvalidArgument, e.to_string()).with_source(e)
    }
}

/// [`Code::InvalidArgument`] (text that is not a number, or out of range),
/// the error's text as the message, the error as the source.
impl From<std::num::ParseIntError> for Error {
    fn from(e: std::num::ParseIntError) -> Error {
        Error::new(Code::InvalidArgument, e.to_string()).with_source(e)
    }
}

/// The sources of errors on their way through the C library, which carries
/// only a code and a message.
///
/// A closure's error becomes a C status in its trampoline (on whatever
/// thread the library runs it: a prefetch thread, a queue input's, a worker
/// of a parallel map), and the library hands the same code and message back
/// to the Rust call that waits on it, often as a new status made on another
/// thread. So the source is kept in one process-wide list, keyed by code and
/// message, and taken back by [`Error::check`] when a status with the same
/// code and message comes back. The list is short and bounded: an error the
/// library swallows (an `AFTER_TRAIN` failure that is only logged) leaves its
/// entry behind until newer ones push it out, and an entry matches at most
/// once.
mod sources {
    use super::{Code, StdError};
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    struct Entry {
        code: Code,
        message: String,
        source: Arc<dyn StdError + Send + Sync>,
    }

    /// Entries kept at most; the oldest goes first.
    const CAPACITY: usize = 64;

    static ENTRIES: Mutex<VecDeque<Entry>> = Mutex::new(VecDeque::new());
    /// `ENTRIES.len()`, read without the lock by [`take`].
    static LEN: AtomicUsize = AtomicUsize::new(0);

    fn entries() -> std::sync::MutexGuard<'static, VecDeque<Entry>> {
        ENTRIES.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the source of an error that becomes a C status. Called from C
    /// frames: it must not panic (a poisoned lock is taken over).
    pub(super) fn put(code: Code, message: &str, source: Arc<dyn StdError + Send + Sync>) {
        let old = {
            let mut list = entries();
            let old = if list.len() == CAPACITY { list.pop_front() } else { None };
            list.push_back(Entry { code, message: message.to_owned(), source });
            LEN.store(list.len(), Ordering::Release);
            old
        };
        // A source's Drop runs outside the lock (and must not unwind into C).
        if let Some(old) = old {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(old)));
        }
    }

    /// The newest source kept for this code and message, removed.
    pub(super) fn take(code: Code, message: &str) -> Option<Arc<dyn StdError + Send + Sync>> {
        if LEN.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut list = entries();
        let i = list.iter().rposition(|e| e.code == code && e.message == message)?;
        let entry = list.remove(i)?;
        LEN.store(list.len(), Ordering::Release);
        Some(entry.source)
    }
}

// C_CALLERS: for each C function this crate calls, the public function or
// method that calls it, made by build.rs from this crate's sources.
include!(concat!(env!("OUT_DIR"), "/c_callers.rs"));

/// A library message "tpt_fn: text" with the Rust call in front and the C
/// function in parentheses at the end: "Model::restore: text
/// (tpt_model_restore)". A message of another form, or of a C function no
/// public function calls, stays as it is.
fn rust_message(message: String) -> String {
    let Some(colon) = message.find(": ") else { return message };
    let c = &message[..colon];
    if !c.starts_with("tpt_") || !c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return message;
    }
    match C_CALLERS.binary_search_by(|(name, _)| name.cmp(&c)) {
        Ok(i) => format!("{}: {} ({c})", C_CALLERS[i].1, &message[colon + 2..]),
        Err(_) => message,
    }
}

/// Calls a C function returning `tpt_status *` and converts the result.
macro_rules! call {
    ($e:expr) => {
        // SAFETY: the C API returns NULL or a fresh status owned by the caller.
        unsafe { $crate::common::Error::check($e) }
    };
}
pub(crate) use call;

/// The library's version number (MAJOR * 10000 + MINOR * 100 + PATCH).
pub fn version() -> u32 {
    unsafe { sys::tpt_version() }
}

/// The library's version as "MAJOR.MINOR.PATCH".
pub fn version_string() -> &'static str {
    // SAFETY: static storage in the library.
    unsafe { CStr::from_ptr(sys::tpt_version_string()) }.to_str().unwrap_or("?")
}

/// The library's ABI version (the SONAME suffix).
pub fn abi_version() -> u32 {
    unsafe { sys::tpt_abi_version() }
}
