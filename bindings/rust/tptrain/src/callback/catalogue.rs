//! The rest of tensorpack's callback catalogue: hyper-parameter setters
//! ([`HyperParamFunc`], [`StatMonitorParam`], [`HumanHyperParam`]; the
//! schedule is [`ScheduledHyperParam`](crate::ScheduledHyperParam)), early
//! stopping and [`TerminateOnNaN`], trackers ([`ThroughputTracker`],
//! [`HostMemoryTracker`]), a [`StepWatchdog`], and the [`TensorBoard`]
//! monitor (the header sections "Monitors", "Optimizers" and "More
//! callbacks").
//!
//! Each is a builder: set what differs from the defaults, then give it to
//! [`Trainer::add_callback`](crate::Trainer::add_callback) or
//! [`TrainConfig::callback`](crate::TrainConfig::callback) (the
//! [`TensorBoard`] writer to [`Trainer::add_monitor`](crate::Trainer::add_monitor)
//! or [`TrainConfig::monitor`](crate::TrainConfig::monitor)), which build it
//! (each is an [`IntoCallback`], whose methods also wrap it:
//! [`IntoCallback::periodic_trigger`]), or call `build` for a [`Callback`].
//! Arguments are checked when it is built.
//!
//! ```no_run
//! use std::time::Duration;
//! use tptrain::{EarlyStopping, StatMonitorParam, StepWatchdog, TerminateOnNaN, ThroughputTracker};
//! # fn f(optimizer: &tptrain::Optimizer, trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
//! // Halve the learning rate when validation_error has not improved for 5 epochs.
//! trainer.add_callback(StatMonitorParam::new(optimizer, "learning_rate", "validation_error").factor(0.5))?;
//! trainer.add_callback(EarlyStopping::new("validation_error").patience(10))?;
//! trainer.add_callback(TerminateOnNaN::new())?;
//! trainer.add_callback(ThroughputTracker::new().samples_per_step(64))?;
//! trainer.add_callback(StepWatchdog::new(Duration::from_secs(600)))?;
//! # Ok(()) }
//! ```

use crate::binding::{make, Binding};
use crate::callback::{Callback, Every, IntoCallback};
use crate::common::{call, Code, Error, Result};
use crate::cstr::{cstring, cstrings, path_to_cstring, ptrs_or_null};
use crate::optimizer::Optimizer;
use crate::panic;
use crate::Flow;
use std::ffi::CString;
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::path::PathBuf;
use std::ptr;
use std::time::Duration;
use tptrain_sys as sys;

/// `n` as an `i64`, or an error naming `what`.
fn to_i64(n: u64, what: &str) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::new(Code::InvalidArgument, format!("{what} is too large: {n}")))
}

macro_rules! into_callback {
    ($t:ty) => {
        impl<'a> IntoCallback<'a> for $t {
            fn into_callback(self) -> Result<Callback<'a>> {
                self.build()
            }
        }
    };
}

// ------------------------------------------------------ hyper-parameters

/// The closure of a [`HyperParamFunc`], with its error turned into an [`Error`].
type HyperParamFn<'a> = Box<dyn FnMut(i64, f64) -> Result<f64> + 'a>;

/// The boxed user data of a [`HyperParamFunc`].
struct HyperParamData<'a> {
    param: String,
    f: HyperParamFn<'a>,
}

unsafe extern "C" fn hyperparam_trampoline(
    value: *mut f64,
    epoch_num: i64,
    current: f64,
    user_data: *mut c_void,
) -> *mut sys::tpt_status {
    // Tensors made in this call are Rust values that free themselves (Drop):
    // the library's scope for the call hands them over.
    crate::tensor::own_call_tensors();
    // SAFETY: user_data is the HyperParamData this trampoline was given with;
    // the library frees it only with the callback, and never re-enters it.
    let data = &mut *user_data.cast::<HyperParamData<'_>>();
    let (param, f) = (&data.param, &mut data.f);
    let mut v = current;
    let st = panic::guard(&|| format!("the HyperParamFunc of '{param}'"), || {
        v = f(epoch_num, current)?;
        Ok(Flow::Continue)
    });
    if st.is_null() {
        // SAFETY: the library passes a valid place for the value.
        *value = v;
    }
    st
}

/// tensorpack's HyperParamSetterWithFunc (`tpt_callback_hyperparam_func`):
/// in BEFORE_TRAIN and after each epoch (at every TRIGGER) the closure gets
/// the number of finished epochs (`starting_epoch - 1` in BEFORE_TRAIN; after
/// a resume, the resumed epoch - 1) and the hyper-parameter's current value,
/// and returns the value to set. An error it returns fails training (as for
/// [`Callback::on`]); a panic too, and
/// [`Trainer::run`](crate::Trainer::run) resumes it. The callback keeps its
/// own reference to the optimizer.
///
/// ```
/// # fn f(optimizer: &tptrain::Optimizer, trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
/// use tptrain::HyperParamFunc;
/// // lr = 0.1 * 0.9^epochs
/// let decay = HyperParamFunc::new(optimizer, "learning_rate", |epochs, _current| {
///     Ok(0.1 * 0.9f64.powi(epochs as i32))
/// });
/// trainer.add_callback(decay)?;
/// # Ok(()) }
/// ```
#[must_use = "a HyperParamFunc does nothing until it is added to a trainer"]
pub struct HyperParamFunc<'o, 'a> {
    optimizer: &'o Optimizer,
    param: String,
    f: HyperParamFn<'a>,
}

impl<'o, 'a> HyperParamFunc<'o, 'a> {
    /// Sets `param` of `optimizer` to what `f(epochs_done, current)` returns,
    /// a [`Result<f64>`](crate::Result) (an error of another type:
    /// `.map_err(Error::wrap)`).
    pub fn new<F>(optimizer: &'o Optimizer, param: impl Into<String>, f: F) -> HyperParamFunc<'o, 'a>
    where
        F: FnMut(i64, f64) -> Result<f64> + 'a,
    {
        HyperParamFunc { optimizer, param: param.into(), f: Box::new(f) }
    }

    /// Makes the callback. Fails for a `param` with a NUL byte or one the
    /// library refuses (the closure is dropped then).
    pub fn build(self) -> Result<Callback<'a>> {
        let HyperParamFunc { optimizer, param, f } = self;
        let c_param = cstring(&param, "param")?;
        let user_data = Box::into_raw(Box::new(HyperParamData { param, f })).cast::<c_void>();
        // SAFETY: live handles and strings for the call; the library owns
        // user_data from here on (also on failure) and destroys it once.
        make(|out| unsafe {
            sys::tpt_callback_hyperparam_func(
                out,
                optimizer.as_ptr(),
                c_param.as_ptr(),
                Some(hyperparam_trampoline),
                user_data,
                Some(panic::drop_box::<HyperParamData<'a>>),
            )
        })
    }
}

impl<'a> IntoCallback<'a> for HyperParamFunc<'_, 'a> {
    fn into_callback(self) -> Result<Callback<'a>> {
        self.build()
    }
}

impl fmt::Debug for HyperParamFunc<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HyperParamFunc")
            .field("optimizer", &self.optimizer)
            .field("param", &self.param)
            .finish_non_exhaustive()
    }
}

/// tensorpack's StatMonitorParamSetter, "reduce on plateau"
/// (`tpt_callback_stat_monitor_param`): after each epoch (at every TRIGGER)
/// it takes the newest value of the scalar `stat` into a window of the last
/// [`last_k`](Self::last_k) values (a value of a step it has seen is skipped
/// with a warning). When the window is full and its first value was not
/// beaten by more than [`threshold`](Self::threshold), it multiplies the
/// hyper-parameter by [`factor`](Self::factor) (not past
/// [`limit`](Self::limit)) and empties the window. Nothing happens in
/// BEFORE_TRAIN. The window is saved in checkpoints. It runs after the
/// callbacks that put scalars, whatever the order they were added in; a
/// `stat` nobody has put by the end of an epoch it runs at fails the run
/// ([`Code::NotFound`](crate::Code::NotFound)).
///
/// ```
/// # fn f(optimizer: &tptrain::Optimizer, trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
/// use tptrain::StatMonitorParam;
/// trainer.add_callback(
///     StatMonitorParam::new(optimizer, "learning_rate", "validation_error").last_k(3).factor(0.5).limit(1e-5),
/// )?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a StatMonitorParam does nothing until it is added to a trainer"]
pub struct StatMonitorParam<'o> {
    optimizer: &'o Optimizer,
    param: String,
    stat: String,
    last_k: usize,
    threshold: f64,
    maximize: bool,
    factor: f64,
    limit: f64,
}

impl<'o> StatMonitorParam<'o> {
    /// Watches `stat` (lower is better) to change `param` of `optimizer`,
    /// with the defaults: a window of 5, threshold 0, factor 0.1, no limit.
    pub fn new(optimizer: &'o Optimizer, param: impl Into<String>, stat: impl Into<String>) -> StatMonitorParam<'o> {
        let o = sys::TPT_STAT_MONITOR_OPTIONS_INIT;
        StatMonitorParam {
            optimizer,
            param: param.into(),
            stat: stat.into(),
            last_k: o.last_k as usize,
            threshold: o.threshold,
            maximize: o.maximize != 0,
            factor: o.factor,
            limit: o.limit,
        }
    }

    /// The number of values compared, at least 2. Default 5.
    pub fn last_k(mut self, k: usize) -> StatMonitorParam<'o> {
        self.last_k = k;
        self
    }

    /// The first value of the window must be beaten by more than this,
    /// at least 0. Default 0.
    pub fn threshold(mut self, threshold: f64) -> StatMonitorParam<'o> {
        self.threshold = threshold;
        self
    }

    /// The stat should grow (an accuracy; tensorpack's `reverse=True`): the
    /// window's first value is beaten by a larger one.
    pub fn maximize(mut self) -> StatMonitorParam<'o> {
        self.maximize = true;
        self
    }

    /// The new value is the current one times this, > 0. Default 0.1.
    pub fn factor(mut self, factor: f64) -> StatMonitorParam<'o> {
        self.factor = factor;
        self
    }

    /// The value never goes past this: a floor when the factor is below 1, a
    /// ceiling when it is above. Default 0: no limit.
    pub fn limit(mut self, limit: f64) -> StatMonitorParam<'o> {
        self.limit = limit;
        self
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let param = cstring(&self.param, "param")?;
        let stat = cstring(&self.stat, "stat")?;
        let mut o = sys::TPT_STAT_MONITOR_OPTIONS_INIT;
        o.last_k = to_i64(self.last_k as u64, "last_k")?;
        o.threshold = self.threshold;
        o.maximize = self.maximize as i32;
        o.factor = self.factor;
        o.limit = self.limit;
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_stat_monitor_param(
            &mut out,
            self.optimizer.as_ptr(),
            param.as_ptr(),
            stat.as_ptr(),
            &o
        ))?;
        Callback::wrap(out)
    }
}

into_callback!(StatMonitorParam<'_>);

/// tensorpack's HumanHyperParamSetter (`tpt_callback_human_hyperparam`): in
/// BEFORE_TRAIN and after each epoch it reads a file of `name:value` lines
/// (`hyper.txt` in the log directory, or [`file`](Self::file)) and sets the
/// hyper-parameter to the value on the line of its name. A missing file or
/// line changes nothing; a line that does not parse is logged and skipped.
/// Edit the file while training runs to change the learning rate by hand.
///
/// ```
/// # fn f(optimizer: &tptrain::Optimizer, trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
/// use tptrain::HumanHyperParam;
/// // echo learning_rate:0.01 > train_log/hyper.txt
/// trainer.add_callback(HumanHyperParam::new(optimizer, "learning_rate"))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a HumanHyperParam does nothing until it is added to a trainer"]
pub struct HumanHyperParam<'o> {
    optimizer: &'o Optimizer,
    param: String,
    file: Option<PathBuf>,
}

impl<'o> HumanHyperParam<'o> {
    /// Sets `param` of `optimizer` from the line `param:value` of the file.
    pub fn new(optimizer: &'o Optimizer, param: impl Into<String>) -> HumanHyperParam<'o> {
        HumanHyperParam { optimizer, param: param.into(), file: None }
    }

    /// The file to read (default `hyper.txt`); a relative path is in the
    /// log directory.
    pub fn file(mut self, file: impl Into<PathBuf>) -> HumanHyperParam<'o> {
        self.file = Some(file.into());
        self
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let param = cstring(&self.param, "param")?;
        let file = self.file.as_deref().map(|f| path_to_cstring(f, "file")).transpose()?;
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_human_hyperparam(
            &mut out,
            self.optimizer.as_ptr(),
            param.as_ptr(),
            file.as_ref().map_or(ptr::null(), |f| f.as_ptr())
        ))?;
        Callback::wrap(out)
    }
}

into_callback!(HumanHyperParam<'_>);

// ------------------------------------------------------ stopping

/// Early stopping, as Keras' EarlyStopping (`tpt_callback_early_stopping`;
/// tensorpack has none): after each epoch it reads the newest value of the
/// scalar `stat` (a value of a step it has seen does not count), and after
/// [`patience`](Self::patience) new values
/// without an improvement on the best by more than
/// [`min_delta`](Self::min_delta) it stops training gracefully:
/// [`Trainer::run`](crate::Trainer::run) returns
/// [`RunOutcome::Stopped`](crate::RunOutcome::Stopped) with a reason that
/// names the stat, its best value and the step of the best. The savers still
/// save that epoch, and its checkpoint records the stop, so a rerun with
/// [`auto_resume`](crate::TrainerOptions::auto_resume) leaves the run
/// stopped. Its best value and count are saved in checkpoints. It runs after
/// the callbacks that put scalars (an [`InferenceRunner`](crate::InferenceRunner)),
/// whatever the order they were added in; a `stat` nobody has put by the end
/// of an epoch it runs at (a misspelt name) fails the run with
/// [`Code::NotFound`](crate::Code::NotFound), naming the scalars put, the
/// closest first.
///
/// ```
/// # fn f(trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
/// use tptrain::EarlyStopping;
/// trainer.add_callback(EarlyStopping::new("validation_accuracy").maximize().patience(5).min_delta(1e-3))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "an EarlyStopping does nothing until it is added to a trainer"]
pub struct EarlyStopping {
    stat: String,
    patience: u64,
    min_delta: f64,
    maximize: bool,
}

impl EarlyStopping {
    /// Watches `stat`, lower is better, with patience 3 and min_delta 0.
    pub fn new(stat: impl Into<String>) -> EarlyStopping {
        let o = sys::TPT_EARLY_STOPPING_OPTIONS_INIT;
        EarlyStopping {
            stat: stat.into(),
            patience: o.patience as u64,
            min_delta: o.min_delta,
            maximize: o.maximize != 0,
        }
    }

    /// New values without an improvement before it stops, at least 1.
    /// Default 3.
    pub fn patience(mut self, n: u64) -> EarlyStopping {
        self.patience = n;
        self
    }

    /// An improvement is by more than this, >= 0. Default 0.
    pub fn min_delta(mut self, delta: f64) -> EarlyStopping {
        self.min_delta = delta;
        self
    }

    /// Higher is better (an accuracy).
    pub fn maximize(mut self) -> EarlyStopping {
        self.maximize = true;
        self
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let stat = cstring(&self.stat, "stat")?;
        let mut o = sys::TPT_EARLY_STOPPING_OPTIONS_INIT;
        o.patience = to_i64(self.patience, "patience")?;
        o.min_delta = self.min_delta;
        o.maximize = self.maximize as i32;
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_early_stopping(&mut out, stat.as_ptr(), &o))?;
        Callback::wrap(out)
    }
}

into_callback!(EarlyStopping);

/// TerminateOnNaN (`tpt_callback_terminate_on_nan`): after every hooked step
/// it checks the step's scalar outputs ("cost", or [`outputs`](Self::outputs))
/// and stops training gracefully when one is NaN or infinite, with a reason
/// that names it and the step. The stop comes before any checkpoint of that
/// step (and a [`ModelSaver`](crate::ModelSaver) never writes variables that
/// are not finite), so the last checkpoint is a good one.
#[derive(Debug, Clone, Default)]
#[must_use = "a TerminateOnNaN does nothing until it is added to a trainer"]
pub struct TerminateOnNaN {
    outputs: Vec<String>,
}

impl TerminateOnNaN {
    /// Checks the step output "cost".
    pub fn new() -> TerminateOnNaN {
        TerminateOnNaN::default()
    }

    /// The step outputs to check instead of "cost".
    pub fn outputs(mut self, outputs: &[&str]) -> TerminateOnNaN {
        self.outputs = outputs.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let names = cstrings(&self.outputs, "outputs")?;
        let ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_terminate_on_nan(&mut out, ptrs_or_null(&ptrs), ptrs.len()))?;
        Callback::wrap(out)
    }
}

into_callback!(TerminateOnNaN);

/// A step watchdog (tensorpack's SessionRunTimeout, for a whole step;
/// `tpt_callback_step_watchdog`): a thread of its own watches each step
/// (run_step with its wait for input, and the per-step callbacks). A step
/// still running after the timeout is logged as an error at once and a stop
/// is requested; when the step returns, training fails with
/// [`Code::Timeout`], naming the step and its time. A step that never
/// returns cannot be interrupted: the log line is then what says why.
///
/// ```
/// # fn f(trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
/// use std::time::Duration;
/// trainer.add_callback(tptrain::StepWatchdog::new(Duration::from_secs(300)))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a StepWatchdog does nothing until it is added to a trainer"]
pub struct StepWatchdog {
    timeout: Duration,
}

impl StepWatchdog {
    /// Fails training when a step takes longer than `timeout` (which must
    /// not be zero).
    pub fn new(timeout: Duration) -> StepWatchdog {
        StepWatchdog { timeout }
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_step_watchdog(&mut out, self.timeout.as_secs_f64()))?;
        Callback::wrap(out)
    }
}

into_callback!(StepWatchdog);

// ------------------------------------------------------ trackers

/// tensorpack's ThroughputTracker (`tpt_callback_throughput`): times the
/// steps of each epoch (without the epoch's callbacks) and at every TRIGGER
/// puts the scalar "Throughput (steps/sec)", or with
/// [`samples_per_step`](Self::samples_per_step) "Throughput (samples/sec)",
/// over the steps since the last trigger.
#[derive(Debug, Clone, Default)]
#[must_use = "a ThroughputTracker does nothing until it is added to a trainer"]
pub struct ThroughputTracker {
    samples_per_step: u64,
}

impl ThroughputTracker {
    /// Puts steps per second.
    pub fn new() -> ThroughputTracker {
        ThroughputTracker::default()
    }

    /// Puts samples per second, with this many samples in a step (0: steps
    /// per second).
    pub fn samples_per_step(mut self, n: u64) -> ThroughputTracker {
        self.samples_per_step = n;
        self
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let n = to_i64(self.samples_per_step, "samples_per_step")?;
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_throughput(&mut out, n))?;
        Callback::wrap(out)
    }
}

into_callback!(ThroughputTracker);

/// tensorpack's HostMemoryTracker (`tpt_callback_host_memory`): logs the
/// host's available memory in SETUP and BEFORE_TRAIN, and at every TRIGGER
/// puts the scalars "HostFreeMemory (GB)" (the kernel's MemAvailable) and
/// "HostResidentMemory (MB)" (this process's resident set). Linux only:
/// building it fails with [`Code::Unsupported`] where `/proc/meminfo` is
/// missing.
#[derive(Debug, Clone, Default)]
#[must_use = "a HostMemoryTracker does nothing until it is added to a trainer"]
pub struct HostMemoryTracker {
    _private: (),
}

impl HostMemoryTracker {
    pub fn new() -> HostMemoryTracker {
        HostMemoryTracker::default()
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_host_memory(&mut out))?;
        Callback::wrap(out)
    }
}

into_callback!(HostMemoryTracker);

// ------------------------------------------------------ monitors

/// tensorpack's TFEventWriter (`tpt_monitor_tensorboard`): a monitor that
/// writes the scalars and images put ([`Context::put_scalar`](crate::Context::put_scalar),
/// [`Context::put_image`](crate::Context::put_image)) to a TensorFlow event file,
/// `events.out.tfevents.<unix time>.<host>`, which TensorBoard reads: in the
/// trainer's log directory, or [`dir`](Self::dir) (without either it does
/// nothing). Scalars are float32 values, images PNG (several in one put as
/// `name/0`, `name/1`, ...). The file is flushed after each epoch and at the
/// end; a resumed run starts a new file that tells TensorBoard to drop what
/// the interrupted run wrote after its checkpoint (docs/monitors.md).
///
/// A trainer with [`default_monitors`](crate::TrainerOptions::default_monitors)
/// and a log directory has one already; add this one for another directory,
/// with [`Trainer::add_monitor`](crate::Trainer::add_monitor) (as a plain
/// callback it would receive no records).
///
/// ```
/// # fn f(trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
/// trainer.add_monitor(tptrain::TensorBoard::new().dir("/tmp/tb"))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a TensorBoard monitor does nothing until it is added to a trainer"]
pub struct TensorBoard {
    dir: Option<PathBuf>,
}

impl TensorBoard {
    /// Writes into the trainer's log directory.
    pub fn new() -> TensorBoard {
        TensorBoard::default()
    }

    /// The directory of the event file (default: the log directory).
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> TensorBoard {
        self.dir = Some(dir.into());
        self
    }

    /// Makes the monitor.
    pub fn build(self) -> Result<Callback<'static>> {
        let dir = self.dir.as_deref().map(|d| path_to_cstring(d, "dir")).transpose()?;
        let mut out = ptr::null_mut();
        call!(sys::tpt_monitor_tensorboard(&mut out, dir.as_ref().map_or(ptr::null(), |d| d.as_ptr())))?;
        Callback::wrap(out)
    }
}

into_callback!(TensorBoard);

/// tensorpack's ModelSaver (`tpt_callback_model_saver`): writes
/// `model-<global_step>` and the index file `checkpoint` into the log
/// directory (or [`dir`](Self::dir)), atomically, keeping the newest
/// [`max_to_keep`](Self::max_to_keep). Chief only. Add it to a trainer like
/// any callback. With [`TrainerOptions::auto_resume`](crate::TrainerOptions::auto_resume)
/// a rerun goes on exactly from its latest checkpoint (docs/checkpoints.md):
///
/// ```no_run
/// use tptrain::{BestSaver, Every, ModelSaver, TrainerOptions};
///
/// let options = TrainerOptions { logdir: Some("train_log".into()), auto_resume: true, ..Default::default() };
/// // After every epoch and every 500 steps, keeping the newest 5.
/// let saver = ModelSaver::new().max_to_keep(5).every(Every::epochs(1).and_steps(500));
/// let best = BestSaver::max("validation_accuracy");
/// # let _ = (options, saver, best);
/// ```
#[derive(Debug, Clone)]
#[must_use = "a ModelSaver does nothing until it is added to a trainer"]
pub struct ModelSaver {
    max_to_keep: usize,
    keep_every_n_hours: f64,
    every: Every,
    dir: Option<PathBuf>,
}

impl Default for ModelSaver {
    fn default() -> ModelSaver {
        let o = sys::TPT_MODEL_SAVER_OPTIONS_INIT;
        ModelSaver {
            max_to_keep: o.max_to_keep as usize,
            keep_every_n_hours: o.keep_every_n_hours,
            every: Every { steps: o.every_k_steps, epochs: o.every_k_epochs, before_train: false },
            dir: None,
        }
    }
}

impl ModelSaver {
    /// After every epoch, keeping 10, one per half hour kept beyond them.
    pub fn new() -> ModelSaver {
        ModelSaver::default()
    }

    /// The newest `n` stay, from 1 on (0, as in C, keeps all: say
    /// [`keep_all`](Self::keep_all)). Default 10.
    pub fn max_to_keep(mut self, n: usize) -> ModelSaver {
        self.max_to_keep = n;
        self
    }

    /// Every checkpoint stays (tensorpack's `max_to_keep=None`).
    pub fn keep_all(self) -> ModelSaver {
        self.max_to_keep(0)
    }

    /// One checkpoint per this many hours is never deleted; `None`: none is
    /// kept for its age. Default `Some(0.5)`, as tensorpack.
    pub fn keep_every_n_hours(mut self, hours: impl Into<Option<f64>>) -> ModelSaver {
        self.keep_every_n_hours = hours.into().unwrap_or(0.0);
        self
    }

    /// When it saves (default `Every::epochs(1)`: after every epoch):
    /// after every [`every.epochs`](Every::epochs)-th epoch and every
    /// [`every.steps`](Every::steps) global steps; `Every::steps(500)` saves
    /// by steps alone, `Every::epochs(1).and_steps(500)` by both.
    /// [`Every::before_train`] is refused when it is built
    /// ([`Code::InvalidArgument`]).
    pub fn every(mut self, every: Every) -> ModelSaver {
        self.every = every;
        self
    }

    /// The directory (default: the trainer's log directory).
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> ModelSaver {
        self.dir = Some(dir.into());
        self
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let too_big = |what: &str, n: u64| Error::new(Code::InvalidArgument, format!("{what} is too large: {n}"));
        let dir = self.dir.as_deref().map(|d| path_to_cstring(d, "dir")).transpose()?;
        let mut o = sys::TPT_MODEL_SAVER_OPTIONS_INIT;
        o.max_to_keep = i32::try_from(self.max_to_keep).map_err(|_| too_big("max_to_keep", self.max_to_keep as u64))?;
        o.keep_every_n_hours = self.keep_every_n_hours;
        if self.every.before_train {
            return Err(Error::new(
                Code::InvalidArgument,
                "ModelSaver::every: Every::before_train is for Callback::periodic_trigger only",
            ));
        }
        o.every_k_steps = self.every.steps;
        o.every_k_epochs = self.every.epochs;
        o.dir = dir.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_model_saver(&mut out, &o))?;
        Callback::wrap(out)
    }
}

impl<'a> IntoCallback<'a> for ModelSaver {
    fn into_callback(self) -> Result<Callback<'a>> {
        self.build()
    }
}

/// tensorpack's MinSaver / MaxSaver (`tpt_callback_min_saver`,
/// `tpt_callback_max_saver`): when the latest value of a scalar is the best
/// so far, the newest checkpoint (which must be of that step) is copied to
/// `min-<stat>` / `max-<stat>` (or [`filename`](Self::filename)). The
/// trainer runs it after the [`ModelSaver`] and the callbacks that put
/// scalars, whatever the order they were added in; a scalar nobody has put
/// by the end of an epoch it runs at fails the run
/// ([`Code::NotFound`](crate::Code::NotFound)).
#[derive(Debug, Clone)]
#[must_use = "a BestSaver does nothing until it is added to a trainer"]
pub struct BestSaver {
    stat: String,
    maximize: bool,
    filename: Option<String>,
    dir: Option<PathBuf>,
}

impl BestSaver {
    /// Keeps the checkpoint with the lowest `stat` (MinSaver).
    pub fn min(stat: impl Into<String>) -> BestSaver {
        BestSaver { stat: stat.into(), maximize: false, filename: None, dir: None }
    }

    /// Keeps the checkpoint with the highest `stat` (MaxSaver).
    pub fn max(stat: impl Into<String>) -> BestSaver {
        BestSaver { stat: stat.into(), maximize: true, filename: None, dir: None }
    }

    /// The copy's file name (default `min-<stat>` / `max-<stat>`).
    pub fn filename(mut self, name: impl Into<String>) -> BestSaver {
        self.filename = Some(name.into());
        self
    }

    /// The directory of the checkpoints (default: the log directory).
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> BestSaver {
        self.dir = Some(dir.into());
        self
    }

    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let c = |s: &str, what: &str| {
            CString::new(s).map_err(|_| Error::new(Code::InvalidArgument, format!("{what} contains a NUL byte")))
        };
        let stat = c(&self.stat, "stat")?;
        let filename = self.filename.as_deref().map(|f| c(f, "filename")).transpose()?;
        let dir = self.dir.as_deref().map(|d| path_to_cstring(d, "dir")).transpose()?;
        let f = filename.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let d = dir.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let mut out = ptr::null_mut();
        if self.maximize {
            call!(sys::tpt_callback_max_saver(&mut out, stat.as_ptr(), f, d))?;
        } else {
            call!(sys::tpt_callback_min_saver(&mut out, stat.as_ptr(), f, d))?;
        }
        Callback::wrap(out)
    }
}

impl<'a> IntoCallback<'a> for BestSaver {
    fn into_callback(self) -> Result<Callback<'a>> {
        self.build()
    }
}

/// tensorpack's ScheduledHyperParamSetter (`tpt_callback_scheduled_hyperparam`):
/// sets an optimizer's hyper-parameter after epoch `at` completes (0:
/// before the first epoch), or at global step `at` with
/// [`by_step`](Self::by_step); in BEFORE_TRAIN it sets what the schedule
/// says for the epochs completed, so a resumed run follows it.
///
/// ```
/// # fn f(optimizer: &tptrain::Optimizer, trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
/// use tptrain::ScheduledHyperParam;
/// trainer.add_callback(ScheduledHyperParam::new(optimizer, "learning_rate", &[(0, 1e-3), (10, 1e-4)]))?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a schedule does nothing until it is added to a trainer"]
pub struct ScheduledHyperParam<'o> {
    optimizer: &'o crate::Optimizer,
    param: String,
    points: Vec<(i64, f64)>,
    flags: u32,
}

impl<'o> ScheduledHyperParam<'o> {
    /// `points` are (epoch or step, value) pairs, in any order.
    pub fn new(optimizer: &'o crate::Optimizer, param: impl Into<String>, points: &[(i64, f64)]) -> Self {
        ScheduledHyperParam { optimizer, param: param.into(), points: points.to_vec(), flags: 0 }
    }
    /// Interpolates between points at every trigger.
    pub fn linear(mut self) -> Self {
        self.flags |= sys::TPT_SCHEDULE_LINEAR;
        self
    }
    /// The points are global steps, checked after every step.
    pub fn by_step(mut self) -> Self {
        self.flags |= sys::TPT_SCHEDULE_STEP_BASED;
        self
    }
    /// Leaves the value alone in BEFORE_TRAIN (only a warning when it
    /// differs from the schedule's).
    pub fn not_at_beginning(mut self) -> Self {
        self.flags |= sys::TPT_SCHEDULE_NOT_AT_BEGINNING;
        self
    }
    /// Makes the callback.
    pub fn build(self) -> Result<Callback<'static>> {
        let param =
            CString::new(self.param).map_err(|_| Error::new(Code::InvalidArgument, "param contains a NUL byte"))?;
        let pts: Vec<sys::tpt_schedule_point> =
            self.points.iter().map(|&(at, value)| sys::tpt_schedule_point { at, value }).collect();
        let mut out = ptr::null_mut();
        call!(sys::tpt_callback_scheduled_hyperparam(
            &mut out,
            self.optimizer.as_ptr(),
            param.as_ptr(),
            if pts.is_empty() { ptr::null() } else { pts.as_ptr() },
            pts.len(),
            self.flags
        ))?;
        Callback::wrap(out)
    }
}

impl<'a> IntoCallback<'a> for ScheduledHyperParam<'_> {
    fn into_callback(self) -> Result<Callback<'a>> {
        self.build()
    }
}

/// The name [`ScheduledHyperParam`] had first, before Rust and Go agreed on
/// the name of the C function (`tpt_callback_scheduled_hyperparam`).
#[deprecated(note = "renamed ScheduledHyperParam, the name of the C function and of Go's")]
pub type HyperParamSchedule<'o> = ScheduledHyperParam<'o>;
