//! The trainer: the epoch/step loop with callbacks around it.

use crate::callback::Callback;
use crate::context::{Context, StepContext};
use crate::error::{call, Code, Error, Result};
use crate::model::{Input, Model};
use crate::panic;
use crate::Flow;
use std::cell::OnceCell;
use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::os::raw::c_void;
use std::path::PathBuf;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};
use tptrain_sys as sys;

/// What to do when the log directory exists and is not empty (`tpt_logdir_action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LogdirAction {
    /// Fail with [`Code::Io`](crate::Code::Io), naming the other actions.
    #[default]
    Refuse,
    /// Use it as it is (resume: stats.json is appended to).
    Keep,
    /// Delete its contents first.
    Delete,
    /// Rename it to `<dir><MMDD-HHMMSS>` and start empty.
    Backup,
    /// Leave it and use `<dir><MMDD-HHMMSS>` instead.
    New,
    /// Ask on the terminal; Refuse without one.
    Ask,
}

impl LogdirAction {
    pub fn to_raw(self) -> sys::tpt_logdir_action {
        match self {
            LogdirAction::Refuse => sys::TPT_LOGDIR_REFUSE,
            LogdirAction::Keep => sys::TPT_LOGDIR_KEEP,
            LogdirAction::Delete => sys::TPT_LOGDIR_DELETE,
            LogdirAction::Backup => sys::TPT_LOGDIR_BACKUP,
            LogdirAction::New => sys::TPT_LOGDIR_NEW,
            LogdirAction::Ask => sys::TPT_LOGDIR_ASK,
        }
    }
}

/// How progress is shown while an epoch runs (`tpt_progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Progress {
    /// A bar on a terminal (stderr), else one line per epoch.
    #[default]
    Auto,
    /// Always a bar on stderr.
    Bar,
    /// One plain line per epoch, in the log.
    Lines,
    Off,
}

impl Progress {
    pub fn to_raw(self) -> sys::tpt_progress {
        match self {
            Progress::Auto => sys::TPT_PROGRESS_AUTO,
            Progress::Bar => sys::TPT_PROGRESS_BAR,
            Progress::Lines => sys::TPT_PROGRESS_LINES,
            Progress::Off => sys::TPT_PROGRESS_OFF,
        }
    }
}

/// Options of a trainer (`tpt_trainer_options`); `Default` gives the C
/// defaults (`TPT_TRAINER_OPTIONS_INIT`).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainerOptions {
    /// Chief-only callbacks are kept (default true).
    pub is_chief: bool,
    /// First epoch number, >= 1 (default 1).
    pub starting_epoch: i64,
    /// Last epoch number, inclusive (default 99999999).
    pub max_epoch: i64,
    /// Steps per epoch; `Some(0)` runs the callbacks only; `None` (default):
    /// not set, which run refuses.
    pub steps_per_epoch: Option<i64>,
    /// The log directory (log.log, stats.json); `None` (default): none.
    pub logdir: Option<PathBuf>,
    pub logdir_action: LogdirAction,
    pub progress: Progress,
    /// Log lines go to stdout too (default true).
    pub console: bool,
    /// The progress bar and the estimated time left (default true).
    pub default_callbacks: bool,
    /// The stats.json writer (with a logdir) and the per-epoch scalar
    /// printer (default true).
    pub default_monitors: bool,
}

impl Default for TrainerOptions {
    fn default() -> TrainerOptions {
        let c = sys::TPT_TRAINER_OPTIONS_INIT;
        TrainerOptions {
            is_chief: c.is_chief != 0,
            starting_epoch: c.starting_epoch,
            max_epoch: c.max_epoch,
            steps_per_epoch: (c.steps_per_epoch >= 0).then_some(c.steps_per_epoch),
            logdir: None,
            logdir_action: LogdirAction::default(),
            progress: Progress::default(),
            console: c.console != 0,
            default_callbacks: c.default_callbacks != 0,
            default_monitors: c.default_monitors != 0,
        }
    }
}

#[cfg(unix)]
fn path_to_cstring(p: &std::path::Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::new(Code::InvalidArgument, format!("logdir {p:?} contains a NUL byte")))
}

#[cfg(not(unix))]
fn path_to_cstring(p: &std::path::Path) -> Result<CString> {
    let s = p.to_str().ok_or_else(|| Error::new(Code::InvalidArgument, format!("logdir {p:?} is not UTF-8")))?;
    CString::new(s).map_err(|_| Error::new(Code::InvalidArgument, format!("logdir {p:?} contains a NUL byte")))
}

/// How a run ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RunOutcome {
    /// It ran to max_epoch.
    Finished,
    /// A [`Flow::Stop`] or a stop request ended it; the reason.
    Stopped(String),
}

impl RunOutcome {
    pub fn stop_reason(&self) -> Option<&str> {
        match self {
            RunOutcome::Finished => None,
            RunOutcome::Stopped(r) => Some(r),
        }
    }
}

/// A trainer (`tpt_trainer`): runs
/// `for epoch_num in starting_epoch..=max_epoch { for local_step in 0..steps_per_epoch { run_step } }`
/// with callbacks around it. Freed on drop, with every closure it owns.
///
/// `'a` bounds what its closures borrow. A trainer is used from one thread
/// (it is neither `Send` nor `Sync`: its closures need not be); callbacks fire
/// on the thread that calls [`run`](Self::run). Only a [`StopHandle`] crosses
/// threads. Through `Deref`, the [`Context`] methods (counters, scalars,
/// outputs, the log) are available on the trainer too.
pub struct Trainer<'a> {
    raw: NonNull<sys::tpt_trainer>,
    stop: OnceCell<Arc<StopShared>>,
    _marker: PhantomData<(&'a (), *mut ())>,
}

unsafe extern "C" fn run_step_trampoline<F>(
    trainer: *mut sys::tpt_trainer,
    user_data: *mut c_void,
) -> *mut sys::tpt_status
where
    F: FnMut(&mut StepContext) -> Result<Flow>,
{
    // SAFETY: user_data is the boxed F; the loop never re-enters run_step.
    let f = &mut *user_data.cast::<F>();
    panic::guard(&|| "run_step".to_owned(), || f(StepContext::from_ptr(trainer)))
}

impl<'a> Trainer<'a> {
    /// Makes a trainer (`tpt_trainer_new`).
    pub fn new(options: &TrainerOptions) -> Result<Trainer<'a>> {
        let logdir = options.logdir.as_deref().map(path_to_cstring).transpose()?;
        let mut o = sys::TPT_TRAINER_OPTIONS_INIT;
        o.is_chief = options.is_chief as i32;
        o.starting_epoch = options.starting_epoch;
        o.max_epoch = options.max_epoch;
        o.steps_per_epoch = match options.steps_per_epoch {
            Some(n) if n < 0 => {
                return Err(Error::new(
                    Code::InvalidArgument,
                    format!("steps_per_epoch must be >= 0 (None: not set), got {n}"),
                ))
            }
            Some(n) => n,
            None => -1,
        };
        o.logdir = logdir.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        o.logdir_action = options.logdir_action.to_raw();
        o.progress = options.progress.to_raw();
        o.console = options.console as i32;
        o.default_callbacks = options.default_callbacks as i32;
        o.default_monitors = options.default_monitors as i32;
        let mut out = ptr::null_mut();
        call!(sys::tpt_trainer_new(&mut out, &o))?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(Code::Internal, "library returned no trainer"))?;
        Ok(Trainer { raw, stop: OnceCell::new(), _marker: PhantomData })
    }

    /// The raw handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::tpt_trainer {
        self.raw.as_ptr()
    }

    /// Sets the body of the loop, called steps_per_epoch times per epoch; it
    /// calls [`StepContext::hooked_step`] for each step that callbacks should
    /// see. It returns [`Flow::Continue`], [`Flow::Stop`] to end training
    /// gracefully, or an error that ends it. Replaces (and drops) an earlier
    /// one. Before run only (`tpt_trainer_set_run_step`).
    pub fn set_run_step<F>(&mut self, run_step: F) -> Result<()>
    where
        F: FnMut(&mut StepContext) -> Result<Flow> + 'a,
    {
        let user_data = Box::into_raw(Box::new(run_step)).cast::<c_void>();
        let had = panic::pending();
        // SAFETY: the library owns user_data from here on (also on failure)
        // and calls drop_box exactly once.
        let st = unsafe {
            sys::tpt_trainer_set_run_step(
                self.as_ptr(),
                Some(run_step_trampoline::<F>),
                user_data,
                Some(panic::drop_box::<F>),
            )
        };
        panic::resume_if_new(had);
        unsafe { Error::check(st) }
    }

    fn add(
        &mut self,
        f: unsafe extern "C" fn(*mut sys::tpt_trainer, *mut sys::tpt_callback) -> *mut sys::tpt_status,
        cb: Callback<'a>,
    ) -> Result<()> {
        let had = panic::pending();
        // SAFETY: the library takes the callback, also on failure.
        let st = unsafe { f(self.as_ptr(), cb.into_raw()) };
        panic::resume_if_new(had);
        unsafe { Error::check(st) }
    }

    /// Registers a callback. A chief-only callback on a non-chief trainer is
    /// dropped. Before run only: on failure the callback (and its closure)
    /// is dropped (`tpt_trainer_add_callback`).
    pub fn add_callback(&mut self, callback: Callback<'a>) -> Result<()> {
        self.add(sys::tpt_trainer_add_callback, callback)
    }

    /// Registers a monitor: a callback registered after all others that also
    /// receives [`Event::Record`](crate::Event::Record) for each scalar put
    /// (`tpt_trainer_add_monitor`).
    pub fn add_monitor(&mut self, monitor: Callback<'a>) -> Result<()> {
        self.add(sys::tpt_trainer_add_monitor, monitor)
    }

    /// Makes this trainer tensorpack's SimpleTrainer of `model`, fed by
    /// `input` (`tpt_trainer_set_model`): each run_step is one hooked step
    /// that takes a batch, runs the tower function, back-propagates the cost
    /// and applies the model's optimizer; the step output "cost" is the cost
    /// and the scalar "cost" is put each step. Replaces run_step. If
    /// steps_per_epoch is not set, the input's size is used. The trainer
    /// keeps its own reference to the model; it takes `input` (dropped on
    /// failure). Before run only.
    pub fn set_model(&mut self, model: &Model<'a>, input: Input<'a>) -> Result<()> {
        let had = panic::pending();
        // SAFETY: live handles; the library takes the input, also on failure.
        let st = unsafe { sys::tpt_trainer_set_model(self.as_ptr(), model.as_ptr(), input.into_raw()) };
        panic::resume_if_new(had);
        unsafe { Error::check(st) }
    }

    /// Runs the training on this thread: SETUP, BEFORE_TRAIN, the epochs,
    /// and always AFTER_TRAIN (`tpt_trainer_run`). Returns how it ended, or
    /// the error that ended it, with the code and message a closure returned.
    /// A trainer runs once.
    ///
    /// # Panics
    /// If a closure panicked, training ended there (AFTER_TRAIN still ran)
    /// and the panic is resumed here once the C loop has returned.
    pub fn run(&mut self) -> Result<RunOutcome> {
        // Runs nest (a closure may run another trainer): call_resuming keeps
        // an outer pending panic aside so that only this run's is resumed here.
        // SAFETY: a live trainer; no `&mut self` can reach a closure.
        let st = panic::call_resuming(|| unsafe { sys::tpt_trainer_run(self.as_ptr()) });
        unsafe { Error::check(st) }?;
        Ok(match self.stop_reason() {
            Some(reason) => RunOutcome::Stopped(reason),
            None => RunOutcome::Finished,
        })
    }

    /// A handle that asks this trainer to stop from any thread.
    pub fn stop_handle(&self) -> StopHandle {
        let shared = self.stop.get_or_init(|| Arc::new(StopShared { trainer: Mutex::new(Some(SendPtr(self.raw))) }));
        StopHandle { shared: Arc::clone(shared) }
    }
}

impl Deref for Trainer<'_> {
    type Target = Context;
    fn deref(&self) -> &Context {
        // SAFETY: the trainer is live while `self` is.
        unsafe { Context::from_ptr(self.raw.as_ptr()) }
    }
}

impl DerefMut for Trainer<'_> {
    fn deref_mut(&mut self) -> &mut Context {
        unsafe { Context::from_ptr(self.raw.as_ptr()) }
    }
}

impl Drop for Trainer<'_> {
    fn drop(&mut self) {
        if let Some(shared) = self.stop.get() {
            // Wait for a request_stop in progress; later ones find None.
            *shared.trainer.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        let had = panic::pending();
        // SAFETY: we own the trainer; its closures are dropped here.
        unsafe { sys::tpt_trainer_free(self.raw.as_ptr()) };
        panic::resume_if_new(had);
    }
}

impl fmt::Debug for Trainer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trainer")
            .field("epoch_num", &self.epoch_num())
            .field("local_step", &self.local_step())
            .field("global_step", &self.global_step())
            .finish()
    }
}

struct SendPtr(NonNull<sys::tpt_trainer>);
// SAFETY: the pointer is only used for tpt_trainer_request_stop, which the C
// API allows from any thread, and only while the mutex says the trainer lives.
unsafe impl Send for SendPtr {}

struct StopShared {
    trainer: Mutex<Option<SendPtr>>,
}

/// Asks a trainer to stop before its next step, from any thread
/// (`tpt_trainer_request_stop`). Cheap to clone; it may outlive the trainer,
/// after which requests do nothing. A request made before run makes run stop
/// before its first step.
#[derive(Clone)]
pub struct StopHandle {
    shared: Arc<StopShared>,
}

impl StopHandle {
    /// Asks for a graceful stop: AFTER_TRAIN runs and run returns
    /// [`RunOutcome::Stopped`] with "tpt_trainer_request_stop". Returns
    /// false if the trainer is gone.
    pub fn request_stop(&self) -> bool {
        let guard = self.shared.trainer.lock().unwrap_or_else(|e| e.into_inner());
        match &*guard {
            Some(p) => {
                // SAFETY: the trainer lives while the lock is held (Drop takes it).
                unsafe { sys::tpt_status_free(sys::tpt_trainer_request_stop(p.0.as_ptr())) };
                true
            }
            None => false,
        }
    }
}

impl fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StopHandle")
    }
}
