//! What must not cross C frames: panics, and stops that a C call reported to
//! Rust code that can only say "go on".
//!
//! Every trampoline (the `extern "C"` functions that call a closure) runs the
//! closure inside [`catch_unwind`]. A panic is stored in a thread-local slot,
//! as git2-rs does (`src/panic.rs`), and the trampoline returns a
//! `TPT_ERR_CALLBACK` status so that training ends; `Trainer::run` re-raises
//! the panic with [`resume_unwind`] once `tpt_trainer_run` has returned. A
//! thread-local is right here because `tpt_trainer_run` fires every callback on
//! the thread that called it. Only the first panic of a run is kept (it is the
//! cause; later ones are usually consequences).
//!
//! Tower functions run on threads of the library's own too (towers 1, 2, ...
//! of a [`Trainer::set_towers`](crate::Trainer::set_towers) trainer), where
//! no Rust call is waiting to resume a panic. Their
//! trampoline checks [`entered`]: on a thread inside [`call_resuming`] the
//! panic is stored as above; elsewhere it is dropped there and only its
//! message travels, in the `TPT_ERR_CALLBACK` status that fails the step.
//!
//! Closures still run after a panic: AFTER_TRAIN reaches every callback
//! whatever happened, as the C API promises. State that a panicking closure
//! shared with others may be half updated at that point, as after any caught
//! panic.

use crate::common::Error;
use crate::Flow;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr;
use tptrain_sys as sys;

struct Pending {
    payload: Box<dyn Any + Send>,
}

/// What every trampoline call reads and writes: plain `Cell`s of `Copy`
/// types, so that an access costs no lazy destructor registration.
struct Hot {
    /// Panics caught on this thread so far (wrapping).
    caught: Cell<u64>,
    /// The innermost running closure made a C call that came back with
    /// TPT_STOP (put_scalar reaching a monitor that stops), or asked for a
    /// stop ([`Tower::stop`](crate::Tower::stop)); the reason is on top of
    /// `STOP_REASONS`. Its trampoline turns `Continue` into that stop.
    stopped: Cell<bool>,
    /// How many Rust entry points that resume panics (`Trainer::run`,
    /// `Model::build`, `Model::infer`) are running on this thread.
    entered: Cell<u32>,
}

thread_local! {
    static HOT: Hot = const { Hot { caught: Cell::new(0), stopped: Cell::new(false), entered: Cell::new(0) } };
    /// The first panic caught since the innermost `Trainer::run` began.
    static PANIC: RefCell<Option<Pending>> = const { RefCell::new(None) };
    /// The message of the latest panic caught.
    static LAST_MESSAGE: RefCell<String> = const { RefCell::new(String::new()) };
    /// One reason per running closure whose `stopped` is set, innermost last.
    static STOP_REASONS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The text of a panic payload (`panic!("...")` gives `&str` or `String`).
pub(crate) fn payload_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}

/// Drops a value whose `Drop` might panic, without letting the panic go on.
fn drop_quietly<T>(value: T) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        std::mem::forget(payload);
    }
}

pub(crate) fn pending() -> bool {
    PANIC.with(|p| p.borrow().is_some())
}

/// Stores a caught panic unless one is already pending. Called from C
/// frames, so it must not panic: `try_with` copes with a thread that is
/// tearing down its thread-locals (a trainer dropped by one of them).
fn store(payload: Box<dyn Any + Send>, message: String) {
    HOT.with(|h| h.caught.set(h.caught.get().wrapping_add(1)));
    let _ = LAST_MESSAGE.try_with(|m| *m.borrow_mut() = message);
    let rejected = PANIC
        .try_with(|p| {
            let mut slot = p.borrow_mut();
            if slot.is_none() {
                *slot = Some(Pending { payload });
                None
            } else {
                Some(payload)
            }
        })
        .unwrap_or(None);
    drop_quietly(rejected);
}

/// Replaces the pending panic (for nested runs), returning the old payload.
pub(crate) fn swap_pending(outer: Option<PendingPanic>) -> Option<PendingPanic> {
    PANIC.with(|p| std::mem::replace(&mut *p.borrow_mut(), outer.map(|o| o.0))).map(PendingPanic)
}

/// A stored panic, moved out of the thread-local.
pub(crate) struct PendingPanic(Pending);

impl PendingPanic {
    pub(crate) fn resume(self) -> ! {
        resume_unwind(self.0.payload)
    }
    /// Drops it (when a panic is already unwinding and a second one would abort).
    pub(crate) fn discard(self) {
        drop_quietly(self.0.payload);
    }
}

/// After a C call that may have run destroy functions (dropping closures):
/// re-raises a panic that a drop caused during the call.
pub(crate) fn resume_if_new(had_pending: bool) {
    if !had_pending {
        if let Some(p) = swap_pending(None) {
            if std::thread::panicking() {
                p.discard();
            } else {
                p.resume();
            }
        }
    }
}

/// Notes a stop that a C call reported while a closure runs, or that the
/// closure asked for (see `Hot`). The first one of a closure call wins.
pub(crate) fn note_stop(reason: String) {
    let first = HOT.with(|h| !h.stopped.replace(true));
    if first {
        STOP_REASONS.with(|r| r.borrow_mut().push(reason));
    }
}

pub(crate) fn status(code: sys::tpt_code, message: &str) -> *mut sys::tpt_status {
    let c = CString::new(message.replace('\0', "\u{FFFD}")).unwrap_or_default();
    // SAFETY: a valid C string for the duration of the call; it is copied.
    unsafe { sys::tpt_status_new(code, c.as_ptr()) }
}

fn error_status(e: &Error) -> *mut sys::tpt_status {
    let code = e.code().to_raw();
    if code == sys::TPT_OK || code == sys::TPT_STOP {
        // Not an error to C (NULL, or a stop): keep it a failure.
        return e.with_code(crate::Code::Callback).into_raw_status();
    }
    // The source (if any) is kept aside, to be attached again when the
    // library hands this error back (see `Error::check`).
    e.into_raw_status()
}

/// Runs a closure for C and turns its outcome into the status C expects:
/// `Continue` → NULL, `Stop(reason)` → `TPT_STOP` with the reason, `Err(e)`
/// → e's code and message, a panic → `TPT_ERR_CALLBACK` `"panic in
/// <origin>: <message>"` (the payload kept for `Trainer::run`). A panic caught
/// by an inner trampoline during this call (a monitor reached through
/// put_scalar) also fails this one, so a swallowed error cannot hide it.
#[inline]
pub(crate) fn guard<F>(origin: &dyn Fn() -> String, f: F) -> *mut sys::tpt_status
where
    F: FnOnce() -> crate::Result<Flow>,
{
    let (caught_before, outer_stopped) = HOT.with(|h| (h.caught.get(), h.stopped.replace(false)));
    let result = catch_unwind(AssertUnwindSafe(f));
    let (caught_after, stopped) = HOT.with(|h| (h.caught.get(), h.stopped.replace(outer_stopped)));
    let stop = if stopped { STOP_REASONS.try_with(|r| r.borrow_mut().pop()).ok().flatten() } else { None };
    match result {
        Ok(Err(e)) => error_status(&e),
        Ok(Ok(_)) if caught_after != caught_before => LAST_MESSAGE
            .try_with(|m| status(sys::TPT_ERR_CALLBACK, &m.borrow()))
            .unwrap_or_else(|_| status(sys::TPT_ERR_CALLBACK, "panic in a callback")),
        Ok(Ok(Flow::Stop(reason))) => status(sys::TPT_STOP, &reason),
        Ok(Ok(Flow::Continue)) => match stop {
            Some(reason) => status(sys::TPT_STOP, &reason),
            None => ptr::null_mut(),
        },
        Err(payload) => {
            let message = format!("panic in {}: {}", origin(), payload_message(&*payload));
            let st = status(sys::TPT_ERR_CALLBACK, &message);
            store(payload, message);
            st
        }
    }
}

/// Runs a closure whose only way to fail is a panic (a predicate); `None`
/// when it panicked (the panic is stored).
pub(crate) fn guard_value<T>(origin: &dyn Fn() -> String, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(payload) => {
            let message = format!("panic in {}: {}", origin(), payload_message(&*payload));
            store(payload, message);
            None
        }
    }
}

/// The destroy function given to C with a boxed closure: drops the box. A
/// panic in a drop is stored (see [`resume_if_new`]).
pub(crate) unsafe extern "C" fn drop_box<T>(user_data: *mut std::os::raw::c_void) {
    let _ = guard_value(&|| "a drop of a closure".to_owned(), || {
        // SAFETY: user_data came from Box::into_raw(Box<T>), and C calls
        // destroy exactly once.
        drop(unsafe { Box::from_raw(user_data.cast::<T>()) })
    });
}

/// Decrements `entered` when dropped.
struct Entered;

impl Entered {
    fn new() -> Entered {
        HOT.with(|h| h.entered.set(h.entered.get() + 1));
        Entered
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let _ = HOT.try_with(|h| h.entered.set(h.entered.get() - 1));
    }
}

/// Whether this thread is inside [`call_resuming`] (a panic stored here will
/// be resumed).
pub(crate) fn entered() -> bool {
    HOT.with(|h| h.entered.get() > 0)
}

/// Makes a C call that may run closures on this thread (`tpt_trainer_run`,
/// `tpt_model_build`, `tpt_model_infer`) and, if one of them panicked during
/// the call, frees the status and resumes that panic once C has returned.
/// Calls nest: a pending panic of an outer call is kept aside meanwhile. (A
/// panic that happens while this thread is already unwinding is dropped.)
pub(crate) fn call_resuming(f: impl FnOnce() -> *mut sys::tpt_status) -> *mut sys::tpt_status {
    let outer = swap_pending(None);
    let entered = Entered::new();
    let st = f();
    drop(entered);
    if let Some(mine) = swap_pending(outer) {
        // SAFETY: the status is NULL or ours.
        unsafe { sys::tpt_status_free(st) };
        if std::thread::panicking() {
            mine.discard();
            return status(sys::TPT_ERR_CALLBACK, "a closure panicked while this thread was unwinding");
        }
        mine.resume();
    }
    st
}

/// [`guard`] for a thread where no Rust call waits to resume a panic: the
/// payload is dropped here and only its message reaches C.
pub(crate) fn guard_detached<F>(origin: &dyn Fn() -> String, f: F) -> *mut sys::tpt_status
where
    F: FnOnce() -> crate::Result<Flow>,
{
    // try_with: a thread of the library's own may be tearing down its
    // thread-locals; a stop asked for then is lost, nothing else.
    let outer_stopped = HOT.try_with(|h| h.stopped.replace(false)).unwrap_or(false);
    let result = catch_unwind(AssertUnwindSafe(f));
    let stopped = HOT.try_with(|h| h.stopped.replace(outer_stopped)).unwrap_or(false);
    let stop = if stopped { STOP_REASONS.try_with(|r| r.borrow_mut().pop()).ok().flatten() } else { None };
    match result {
        Ok(Ok(Flow::Continue)) => match stop {
            Some(reason) => status(sys::TPT_STOP, &reason),
            None => ptr::null_mut(),
        },
        Ok(Ok(Flow::Stop(reason))) => status(sys::TPT_STOP, &reason),
        Ok(Err(e)) => error_status(&e),
        Err(payload) => {
            let message = format!("panic in {}: {}", origin(), payload_message(&*payload));
            drop_quietly(payload);
            status(sys::TPT_ERR_CALLBACK, &message)
        }
    }
}
