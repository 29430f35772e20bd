//! The trainer: the epoch/step loop with callbacks around it.

mod context;

pub use context::{Context, HookedContext, Run, Scalar, StepContext};

use crate::binding::call_dropping;
use crate::callback::{Callback, IntoCallback};
use crate::common::{call, Code, Error, Result};
use crate::cstr::{cstrings, path_to_cstring, with_cstr};
use crate::dataflow::DataFlow;
use crate::input::{Input, InputOptions};
use crate::launch::{init_trampoline, InitHook, TrainConfig};
use crate::model::Model;
use crate::panic;
use crate::strategy::{Distributed, Gan, RawDistributed, RawTowers, Towers};
use crate::Flow;
use std::cell::OnceCell;
use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::os::raw::{c_char, c_void};
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};
use tptrain_sys as sys;

/// What to do when the log directory exists and is not empty (`tpt_logdir_action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LogdirAction {
    /// Fail with [`Code::Io`], naming the other actions.
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

/// Whether SIGTERM and SIGINT stop a run gracefully
/// (`tpt_trainer_options.stop_on_signals`): at the next step boundary, with a
/// checkpoint from a [`ModelSaver`](crate::ModelSaver) there, so that a
/// preempted job loses no step; a second signal ends the process at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StopOnSignals {
    /// On when the environment has `TPTRAIN_STOP_ON_SIGNALS=1`, which
    /// `tools/tptrain-run` sets (the default).
    #[default]
    FromEnvironment,
    /// On for every run.
    Always,
    /// Never: the signals keep their dispositions (a host with handlers of
    /// its own).
    Never,
}

impl StopOnSignals {
    fn to_raw(self) -> i32 {
        match self {
            StopOnSignals::FromEnvironment => 0,
            StopOnSignals::Always => 1,
            StopOnSignals::Never => -1,
        }
    }
}

/// The arithmetic of the tower functions' calls (`tpt_precision`): mixed
/// precision as PyTorch's autocast, in training and in the inference
/// runners. Variables, the gradients the optimizer applies and its state stay
/// float32 in every mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Everything float32 (the default).
    #[default]
    Fp32,
    /// Autocast to bfloat16: matmuls, convolutions and linear layers in
    /// bfloat16, reductions, losses, softmax and normalisations in float32
    /// (LibTorch's per-operator policy); CPU and CUDA towers. On a CPU with
    /// AVX-512 BF16 or AMX a step is several times faster.
    Bf16Mixed,
    /// Autocast to float16 with dynamic loss scaling ([`LossScaling`]);
    /// CUDA towers only (with a CPU tower the run fails with
    /// [`Code::Unsupported`](crate::Code::Unsupported): use `Bf16Mixed` there).
    Fp16Mixed,
}

impl Precision {
    fn to_raw(self) -> sys::tpt_precision {
        match self {
            Precision::Fp32 => sys::TPT_PRECISION_FP32,
            Precision::Bf16Mixed => sys::TPT_PRECISION_BF16_MIXED,
            Precision::Fp16Mixed => sys::TPT_PRECISION_FP16_MIXED,
        }
    }
}

/// Whether gradients are computed from a scaled cost ([`LossScaling::mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LossScalingMode {
    /// On with [`Precision::Fp16Mixed`], off otherwise (the default).
    #[default]
    Auto,
    /// On in every precision (float32 and bfloat16 need none).
    On,
    /// Off, also in fp16-mixed (small gradients may underflow to zero).
    Off,
}

/// Dynamic loss scaling (`tpt_loss_scaling`), with the rules and defaults of
/// PyTorch's `torch.amp.GradScaler`: every step's cost is multiplied by the
/// scale before the backward pass and the gradients are divided by it before
/// the update. An update whose gradients are not all finite is skipped (the
/// variables and the optimizer's state do not change) and the scale is
/// multiplied by `backoff_factor`; after `growth_interval` updates in a row
/// without one it is multiplied by `growth_factor`. Towers and distributed
/// ranks skip together. The scale is in checkpoints, in the step output
/// `"loss_scale"` ([`Context::output_scalar`]) and in the scalars
/// `"loss_scale"` and `"skipped_updates"` (per epoch).
///
/// ```
/// use tptrain::{LossScaling, LossScalingMode, Precision, TrainerOptions};
/// let options = TrainerOptions {
///     precision: Precision::Fp16Mixed,
///     loss_scaling: LossScaling { growth_interval: 1000, ..Default::default() },
///     ..Default::default()
/// };
/// assert_eq!(options.loss_scaling.mode, LossScalingMode::Auto);
/// assert_eq!(options.loss_scaling.init_scale, 65536.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossScaling {
    /// Default [`LossScalingMode::Auto`]: on for fp16-mixed.
    pub mode: LossScalingMode,
    /// The first scale, > 0 (default 65536).
    pub init_scale: f64,
    /// > 1 (default 2).
    pub growth_factor: f64,
    /// In (0, 1) (default 0.5).
    pub backoff_factor: f64,
    /// >= 1 (default 2000).
    pub growth_interval: u64,
}

impl Default for LossScaling {
    fn default() -> LossScaling {
        let c = sys::TPT_LOSS_SCALING_INIT;
        LossScaling {
            mode: LossScalingMode::default(),
            init_scale: c.init_scale,
            growth_factor: c.growth_factor,
            backoff_factor: c.backoff_factor,
            growth_interval: c.growth_interval as u64,
        }
    }
}

impl LossScaling {
    fn to_raw(self) -> Result<sys::tpt_loss_scaling> {
        let growth_interval = i64::try_from(self.growth_interval).map_err(|_| {
            Error::new(
                Code::InvalidArgument,
                format!("loss_scaling.growth_interval {} is too large", self.growth_interval),
            )
        })?;
        Ok(sys::tpt_loss_scaling {
            mode: match self.mode {
                LossScalingMode::Auto => sys::TPT_LOSS_SCALING_AUTO,
                LossScalingMode::On => sys::TPT_LOSS_SCALING_ON,
                LossScalingMode::Off => sys::TPT_LOSS_SCALING_OFF,
            },
            init_scale: self.init_scale,
            growth_factor: self.growth_factor,
            backoff_factor: self.backoff_factor,
            growth_interval,
        })
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
    /// The cost and the tower's one-element outputs are moving averages
    /// (tensorpack's `add_moving_summary`, decay 0.95) that reach the
    /// monitors in each epoch's last step; `Some(n)` also every n steps.
    /// Default `None`.
    pub summary_period: Option<u64>,
    /// When the log directory holds a checkpoint index (a [`ModelSaver`](crate::ModelSaver)'s),
    /// the run resumes exactly from its latest checkpoint; the directory is
    /// the run's and kept whatever `logdir_action` says, also before its
    /// first checkpoint (a run killed early starts again from the beginning
    /// in it) (tensorpack's AutoResumeTrainConfig). Default false.
    ///
    /// A run that ended stays ended (its checkpoint records how): after a
    /// finished run nothing is left unless `max_epoch` was raised; after a
    /// run a callback or the run step stopped (an [`EarlyStopping`](crate::EarlyStopping))
    /// the run trains nothing and ends with that stop's reason, unless
    /// `continue_stopped`. An interrupted run (a stop request, a signal, a
    /// failure) goes on.
    pub auto_resume: bool,
    /// With `auto_resume`: train on after a run that a callback or the run
    /// step stopped (default false: it stays stopped).
    pub continue_stopped: bool,
    /// SIGTERM and SIGINT as a graceful stop that saves (default: from the
    /// environment, see [`StopOnSignals`]).
    pub stop_on_signals: StopOnSignals,
    /// The tower functions' arithmetic (default float32; see [`Precision`]).
    pub precision: Precision,
    /// Dynamic loss scaling (default: on for fp16-mixed; see [`LossScaling`]).
    pub loss_scaling: LossScaling,
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
            summary_period: None,
            auto_resume: false,
            continue_stopped: c.continue_stopped != 0,
            stop_on_signals: StopOnSignals::default(),
            precision: Precision::default(),
            loss_scaling: LossScaling::default(),
        }
    }
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
/// threads, and the tower functions of a [`set_towers`](Self::set_towers)
/// trainer, which the library runs on threads of its own for towers 1, 2,
/// .... Through `Deref`, the [`Context`] methods (counters, scalars,
/// outputs, the log) are available on the trainer too.
pub struct Trainer<'a> {
    raw: NonNull<sys::tpt_trainer>,
    stop: OnceCell<Arc<StopShared>>,
    /// The init hook of a trainer made from a config: the C trainer borrows
    /// it, so it is dropped after the C trainer is freed.
    init: Option<NonNull<InitHook<'a>>>,
    _marker: PhantomData<(&'a (), *mut ())>,
}

unsafe extern "C" fn run_step_trampoline<F>(
    trainer: *mut sys::tpt_trainer,
    user_data: *mut c_void,
) -> *mut sys::tpt_status
where
    F: FnMut(&mut StepContext) -> Result<Flow>,
{
    // Tensors made in this call are Rust values that free themselves (Drop):
    // the library's scope for the call hands them over.
    crate::tensor::own_call_tensors();
    // SAFETY: user_data is the boxed F; the loop never re-enters run_step.
    let f = &mut *user_data.cast::<F>();
    panic::guard(&|| "run_step".to_owned(), || f(StepContext::from_ptr(trainer)))
}

impl TrainerOptions {
    /// The C options, and the C string their `logdir` points into (keep it
    /// alive while the options are used).
    fn to_raw(&self) -> Result<(sys::tpt_trainer_options, Option<CString>)> {
        let logdir = self.logdir.as_deref().map(|p| path_to_cstring(p, "logdir")).transpose()?;
        let mut o = sys::TPT_TRAINER_OPTIONS_INIT;
        o.is_chief = self.is_chief as i32;
        o.starting_epoch = self.starting_epoch;
        o.max_epoch = self.max_epoch;
        o.steps_per_epoch = match self.steps_per_epoch {
            Some(n) if n < 0 => {
                return Err(Error::new(
                    Code::InvalidArgument,
                    format!("steps_per_epoch must be >= 0 (None: not set), got {n}"),
                ))
            }
            Some(n) => n,
            None => -1,
        };
        // The CString's buffer does not move when the CString does.
        o.logdir = logdir.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        o.logdir_action = self.logdir_action.to_raw();
        o.progress = self.progress.to_raw();
        o.console = self.console as i32;
        o.default_callbacks = self.default_callbacks as i32;
        o.default_monitors = self.default_monitors as i32;
        o.summary_period = match self.summary_period {
            Some(n) if n == 0 || n > i64::MAX as u64 => {
                return Err(Error::new(
                    Code::InvalidArgument,
                    format!("summary_period must be >= 1 (None: once per epoch), got {n}"),
                ))
            }
            Some(n) => n as i64,
            None => 0,
        };
        o.auto_resume = self.auto_resume as i32;
        o.continue_stopped = self.continue_stopped as i32;
        o.stop_on_signals = self.stop_on_signals.to_raw();
        o.precision = self.precision.to_raw();
        o.loss_scaling = self.loss_scaling.to_raw()?;
        Ok((o, logdir))
    }
}

impl<'a> Trainer<'a> {
    /// Makes a trainer (`tpt_trainer_new`).
    pub fn new(options: &TrainerOptions) -> Result<Trainer<'a>> {
        let (o, _logdir) = options.to_raw()?;
        let mut out = ptr::null_mut();
        call!(sys::tpt_trainer_new(&mut out, &o))?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(Code::Internal, "library returned no trainer"))?;
        Ok(Trainer { raw, stop: OnceCell::new(), init: None, _marker: PhantomData })
    }

    /// Makes the trainer of a config without running it
    /// (`tpt_trainer_from_config`): the trainer of `config.model` fed by
    /// `config.input` or by `config.dataflow` in a queue input (giving both,
    /// or neither, is a [`Code::InvalidArgument`] error), as
    /// [`set_model`](Self::set_model), or as [`set_towers`](Self::set_towers)
    /// with `config.towers`, after joining the job of `config.distributed`
    /// (as [`set_distributed`](Self::set_distributed)) if any, with the
    /// config's callbacks registered in order, then its monitors, and its
    /// init hook. Add more callbacks if needed, then [`run`](Self::run).
    ///
    /// The input, the callbacks and the monitors are taken, also on failure
    /// (their closures are then dropped before this returns). The trainer
    /// owns the init hook and drops it after the C trainer is freed; a
    /// failure drops it at once.
    pub fn from_config(config: TrainConfig<'_, 'a>) -> Result<Trainer<'a>> {
        let TrainConfig {
            options,
            model,
            input,
            dataflow,
            input_options,
            callbacks,
            monitors,
            init,
            towers,
            distributed,
        } = config;
        let input_options = input_options.as_ref().map(InputOptions::to_raw);
        // Everything that can fail in Rust first: on an error here the
        // config is dropped, which frees what C would have taken.
        let options = options.as_ref().map(TrainerOptions::to_raw).transpose()?;
        let towers = towers.as_ref().map(Towers::to_raw).transpose()?;
        let distributed = distributed.as_ref().map(Distributed::to_raw).transpose()?;
        let input = input.map_or(ptr::null_mut(), Input::into_raw);
        let callbacks: Vec<*mut sys::tpt_callback> = callbacks.into_iter().map(Callback::into_raw).collect();
        let monitors: Vec<*mut sys::tpt_callback> = monitors.into_iter().map(Callback::into_raw).collect();
        let hook = init.map(|f| NonNull::from(Box::leak(Box::new(InitHook(f)))));
        let list = |v: &Vec<*mut sys::tpt_callback>| if v.is_empty() { ptr::null() } else { v.as_ptr() };
        let mut c = sys::TPT_TRAIN_CONFIG_INIT;
        c.options = options.as_ref().map_or(ptr::null(), |(o, _)| o as *const sys::tpt_trainer_options);
        c.model = model.as_ptr();
        c.input = input;
        c.dataflow = dataflow.map_or(ptr::null_mut(), DataFlow::as_ptr);
        c.input_options = input_options.as_ref().map_or(ptr::null(), |o| o as *const sys::tpt_input_options);
        c.callbacks = list(&callbacks);
        c.n_callbacks = callbacks.len();
        c.monitors = list(&monitors);
        c.n_monitors = monitors.len();
        c.towers = towers.as_ref().map_or(ptr::null(), RawTowers::as_ptr);
        c.distributed = distributed.as_ref().map_or(ptr::null(), RawDistributed::as_ptr);
        if let Some(h) = hook {
            c.init = Some(init_trampoline);
            c.init_user_data = h.as_ptr().cast();
        }
        let had = panic::pending();
        let mut out = ptr::null_mut();
        // SAFETY: the arrays and options (and the towers' device names and
        // the master address) live for the call; the library takes the
        // input and the callbacks (also on failure) and only borrows the
        // hook, which the trainer keeps until it is freed.
        let st = unsafe { sys::tpt_trainer_from_config(&mut out, &c) };
        let made = unsafe { Error::check(st) }
            .and_then(|()| NonNull::new(out).ok_or_else(|| Error::new(Code::Internal, "library returned no trainer")));
        let result = match made {
            Ok(raw) => Ok(Trainer { raw, stop: OnceCell::new(), init: hook, _marker: PhantomData }),
            Err(e) => {
                if let Some(h) = hook {
                    // SAFETY: no C trainer refers to the hook any more.
                    unsafe { panic::drop_box::<InitHook<'a>>(h.as_ptr().cast()) };
                }
                if e.message().contains("options->steps_per_epoch is not set") {
                    // The option as Rust spells it.
                    let message = e
                        .message()
                        .replace("options->steps_per_epoch", "TrainerOptions::steps_per_epoch")
                        .replace("give the source a size", "make the source with a size (DataFlow::from_fn_sized)");
                    return Err(Error::new(e.code(), message));
                }
                Err(e)
            }
        };
        // A drop that panicked (a closure of a callback the library freed):
        // resumed here, after the trainer (if any) is owned by `result`.
        panic::resume_if_new(had);
        result
    }

    /// The raw handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::tpt_trainer {
        self.raw.as_ptr()
    }

    /// Sets the body of the loop, called steps_per_epoch times per epoch; it
    /// calls [`StepContext::hooked_step`](crate::StepContext::hooked_step) for each step that callbacks should
    /// see. It returns [`Flow::Continue`], [`Flow::Stop`] to end training
    /// gracefully, or an [`Error`] that ends it with its code and message (a
    /// [`Result<Flow>`](crate::Result), as for [`Callback::on`]: `?` needs no
    /// annotation; `.map_err(Error::wrap)` for an error of another type).
    /// Replaces (and drops) an earlier one. Before run only
    /// (`tpt_trainer_set_run_step`).
    ///
    /// ```
    /// use tptrain::{Flow, Trainer, TrainerOptions};
    /// let mut trainer = Trainer::new(&TrainerOptions { steps_per_epoch: Some(2), ..Default::default() })?;
    /// trainer.set_run_step(|ctx| {
    ///     ctx.hooked_step(|step| {
    ///         step.set_output_scalar("loss", 1.0)?;
    ///         Ok(Flow::Continue)
    ///     })?;
    ///     Ok(if ctx.global_step() == 3 { Flow::stop("enough") } else { Flow::Continue })
    /// })?;
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn set_run_step<F>(&mut self, run_step: F) -> Result<()>
    where
        F: FnMut(&mut StepContext) -> Result<Flow> + 'a,
    {
        let user_data = Box::into_raw(Box::new(run_step)).cast::<c_void>();
        // SAFETY: the library owns user_data from here on (also on failure)
        // and calls drop_box exactly once.
        call_dropping(|| unsafe {
            sys::tpt_trainer_set_run_step(
                self.as_ptr(),
                Some(run_step_trampoline::<F>),
                user_data,
                Some(panic::drop_box::<F>),
            )
        })
    }

    fn add(
        &mut self,
        f: unsafe extern "C" fn(*mut sys::tpt_trainer, *mut sys::tpt_callback) -> *mut sys::tpt_status,
        cb: impl IntoCallback<'a>,
    ) -> Result<()> {
        let cb = cb.into_callback()?;
        // SAFETY: the library takes the callback, also on failure.
        call_dropping(|| unsafe { f(self.as_ptr(), cb.into_raw()) })
    }

    /// Registers a callback: anything [`IntoCallback`] (a [`Callback`], a
    /// [`CallbackBuilder`](crate::CallbackBuilder) from [`Callback::on`], a
    /// builder of the catalogue such as [`EarlyStopping`](crate::EarlyStopping),
    /// or a `Result` of one, as [`Callback::inference_runner`] returns),
    /// built here. A chief-only callback on a non-chief trainer is dropped.
    /// Before run only: on failure the callback (and its closure) is dropped
    /// (`tpt_trainer_add_callback`).
    pub fn add_callback(&mut self, callback: impl IntoCallback<'a>) -> Result<()> {
        self.add(sys::tpt_trainer_add_callback, callback)
    }

    /// Registers a monitor: a callback registered after all others that also
    /// receives [`Event::Record`](crate::Event::Record) for each scalar and image put
    /// (`tpt_trainer_add_monitor`). Takes what
    /// [`add_callback`](Self::add_callback) takes.
    pub fn add_monitor(&mut self, monitor: impl IntoCallback<'a>) -> Result<()> {
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
        // SAFETY: live handles; the library takes the input, also on failure.
        call_dropping(|| unsafe { sys::tpt_trainer_set_model(self.as_ptr(), model.as_ptr(), input.into_raw()) })
    }

    /// Before [`run`](Self::run): the run goes on exactly from the
    /// checkpoint at `path`, a checkpoint file or a directory whose index
    /// names its latest (`tpt_trainer_resume`): variables, optimizer state,
    /// counters, random state, the input's position and callbacks' state.
    /// The file is read and checked now; whether it fits the model is
    /// checked when the run starts, which then fails naming the variables.
    pub fn resume(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path_to_cstring(path.as_ref(), "path")?;
        call!(sys::tpt_trainer_resume(self.as_ptr(), path.as_ptr()))
    }

    /// Runs the training on this thread: SETUP, BEFORE_TRAIN, the epochs,
    /// and always AFTER_TRAIN (`tpt_trainer_run`). Returns how it ended, or
    /// the error that ended it, with the code and message a closure returned.
    /// A trainer runs once.
    ///
    /// # Panics
    /// If a closure panicked, training ended there (AFTER_TRAIN still ran)
    /// and the panic is resumed here once the C loop has returned.
    ///
    /// # Freeing from inside
    /// What a C caller must be careful about (docs/ownership.md) the
    /// compiler checks here: a callback cannot drop the trainer it runs in,
    /// since `run` borrows it for the whole run; the callback reaches the
    /// trainer through its [`Context`](crate::Context) instead.
    ///
    /// ```compile_fail
    /// use tptrain::{Callback, Events, Flow, Trainer, TrainerOptions};
    /// let mut trainer = Trainer::new(&TrainerOptions::default())?;
    /// let t = &mut trainer;
    /// trainer.add_callback(Callback::on(Events::TRIGGER_STEP, move |_, _, _| {
    ///     drop(t); // error: `trainer` is borrowed by the callback and by run
    ///     Ok::<Flow, tptrain::Error>(Flow::Continue)
    /// }))?;
    /// trainer.run()?;
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    ///
    /// Nor can a tower function call back into its own model: a
    /// [`Model`](crate::Model) is neither `Send` nor `Sync`, and tower functions must be.
    ///
    /// ```compile_fail
    /// use std::sync::{Arc, OnceLock};
    /// let cell: Arc<OnceLock<tptrain::Model>> = Arc::new(OnceLock::new());
    /// let inner = Arc::clone(&cell);
    /// let model = tptrain::Model::new(&[], move |_, _| {
    ///     inner.get().map(|m| m.build()).transpose()?; // error: Model is not Sync
    ///     Ok::<(), tptrain::Error>(())
    /// })?;
    /// # Ok::<(), tptrain::Error>(())
    /// ```
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

impl<'a> Drop for Trainer<'a> {
    fn drop(&mut self) {
        if let Some(shared) = self.stop.get() {
            // Wait for a request_stop in progress; later ones find None.
            *shared.trainer.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        let had = panic::pending();
        // SAFETY: we own the trainer; its closures are dropped here.
        unsafe { sys::tpt_trainer_free(self.raw.as_ptr()) };
        if let Some(hook) = self.init.take() {
            // SAFETY: the C trainer that borrowed the hook is gone.
            unsafe { panic::drop_box::<InitHook<'a>>(hook.as_ptr().cast()) };
        }
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

    /// [`request_stop`](Self::request_stop) with a reason of your own, which
    /// [`RunOutcome::Stopped`] and the log give (`tpt_trainer_request_stop_because`;
    /// the first request of a run wins). Returns false if the trainer is
    /// gone; an empty reason or one with a NUL byte is an error.
    pub fn request_stop_because(&self, reason: &str) -> Result<bool> {
        if reason.is_empty() {
            return Err(Error::new(Code::InvalidArgument, "StopHandle::request_stop_because: the reason is empty"));
        }
        let guard = self.shared.trainer.lock().unwrap_or_else(|e| e.into_inner());
        match &*guard {
            Some(p) => {
                // SAFETY: the trainer lives while the lock is held (Drop takes it).
                with_cstr(reason, "reason", |r| call!(sys::tpt_trainer_request_stop_because(p.0.as_ptr(), r)))??;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StopHandle")
    }
}

impl<'a> Trainer<'a> {
    /// Makes this trainer a data-parallel trainer of `model` with the
    /// strategy and towers of `towers`, fed by `input`
    /// (`tpt_trainer_set_towers`): [`set_model`](Self::set_model) with
    /// towers. Each step is one hooked step in which every tower takes a
    /// batch of its own from `input` and runs the tower function, at the same
    /// time as the others (towers 1, 2, ... on threads of the library's own),
    /// and the gradients are combined as the strategy says. The step output
    /// and scalar "cost" are tower 0's. If steps_per_epoch is not set, the
    /// input's size divided by the number of towers is used. Replaces
    /// run_step. The trainer keeps its own reference to the model; it takes
    /// `input` (dropped on failure). Before run only.
    ///
    /// Invalid towers (0 or more than 256, a name that is no device, device
    /// names that are not one per tower) are a [`Code::InvalidArgument`]
    /// error; a device other than the CPU a [`Code::Unsupported`] one.
    ///
    /// An error (or a [`Tower::stop`](crate::Tower::stop)) from the tower
    /// function in any tower ends the run with that error (or stop), once the
    /// step's other towers have finished their call. A panic in tower 0 is
    /// resumed by [`run`](Self::run); in another tower only its message
    /// travels, in the [`Code::Callback`] error that `run` returns.
    pub fn set_towers(&mut self, model: &Model<'a>, input: Input<'a>, towers: &Towers) -> Result<()> {
        // On an error here `input` is dropped, as the library would have.
        let raw = towers.to_raw()?;
        // SAFETY: live handles; the options and the names they point into
        // live for the call; the library takes the input, also on failure.
        call_dropping(|| unsafe {
            sys::tpt_trainer_set_towers(self.as_ptr(), model.as_ptr(), input.into_raw(), raw.as_ptr())
        })
    }
}

impl<'a> Trainer<'a> {
    /// Makes this trainer one rank of a distributed job
    /// (`tpt_trainer_set_distributed`): joins the job (the rendezvous, which
    /// blocks until every rank has joined, at most the timeout). Call it
    /// before [`set_model`](Self::set_model) or
    /// [`set_towers`](Self::set_towers), which then train across the ranks:
    /// the simple trainer becomes one replicated tower per rank, and the
    /// gradients of [`Towers`](crate::Towers) are summed over every tower of
    /// every rank ([`Strategy::Async`](crate::Strategy::Async) cannot be
    /// distributed). Rank 0 is the chief; the other ranks drop their
    /// chief-only callbacks. [`rank`](Context::rank) and
    /// [`world_size`](Context::world_size) say which rank of how many this
    /// trainer is.
    ///
    /// Errors: [`Code::InvalidArgument`] naming a missing or bad environment
    /// variable or option; [`Code::Backend`] when the rendezvous fails
    /// (naming the address and the rank); [`Code::State`] after a model was
    /// set, after run, or a second time; [`Code::Unsupported`] in a build
    /// without c10d's Gloo.
    pub fn set_distributed(&mut self, distributed: &Distributed) -> Result<()> {
        let raw = distributed.to_raw()?;
        // The options and the address live for the call.
        call!(sys::tpt_trainer_set_distributed(self.as_ptr(), raw.as_ptr()))
    }
}

impl<'a> Trainer<'a> {
    /// Replaces the default step (tensorpack's `trainer.train_op`) without
    /// a run_step of your own (`tpt_trainer_set_train_ops`): every run_step
    /// is then one hooked run of the model's train ops `names`, in order, as
    /// [`StepContext::run_train_ops`](crate::StepContext::run_train_ops) with [`Run::Hooked`](crate::Run::Hooked) runs them (one
    /// forward pass, every op's gradients from it, then the updates in
    /// order; global_step advances by one). After
    /// [`set_model`](Self::set_model) or [`set_towers`](Self::set_towers)
    /// (or [`from_config`](Self::from_config)), before run; it replaces
    /// run_step.
    ///
    /// No name, or one that is not a train op of the model, is a
    /// [`Code::InvalidArgument`] error naming it (and the model's ops); a
    /// trainer without a model yet, or that has run, a [`Code::State`] one.
    /// With the async strategy the first step fails with a
    /// [`Code::Unsupported`] error.
    ///
    /// ```no_run
    /// use tptrain::{Input, Model, TrainOp, Trainer, TrainerOptions};
    /// # fn demo(model: &Model<'_>, input: Input<'_>) -> tptrain::Result<()> {
    /// // Pre-train the discriminator alone: "d_loss" over "discrim/".
    /// model.add_train_op(&TrainOp::new("d_op").cost("d_loss").scope("discrim/"))?;
    /// let mut trainer = Trainer::new(&TrainerOptions { max_epoch: 2, ..Default::default() })?;
    /// trainer.set_model(model, input)?;
    /// trainer.set_train_ops(&["d_op"])?;
    /// trainer.run()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_train_ops<S: AsRef<str>>(&mut self, names: &[S]) -> Result<()> {
        let names = cstrings(names, "names")?;
        let pointers: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
        // The names live for the call (the library copies them).
        call!(sys::tpt_trainer_set_train_ops(self.as_ptr(), pointers.as_ptr(), pointers.len()))
    }
}

impl<'a> Trainer<'a> {
    /// Makes this trainer tensorpack's GANTrainer, SeparateGANTrainer or
    /// MultiGPUGANTrainer of `model`, fed by `input`, as `gan` says (`None`:
    /// GANTrainer, as [`Gan::new`]) (`tpt_trainer_set_gan`): [`set_model`](Self::set_model) (or
    /// [`set_towers`](Self::set_towers) with [`Gan::towers`]), then the GAN's
    /// run_step. When the
    /// model lacks the train ops (by default "g_op" and "d_op") they are made
    /// as tensorpack's GANModelDesc: the tower's outputs "g_loss" over the
    /// variables under "gen/" and "d_loss" over those under "discrim/",
    /// each with a copy of the model's optimizer. The trainer keeps its own
    /// reference to the model; it takes `input` (dropped on failure). Before
    /// run only.
    ///
    /// A distributed trainer ([`set_distributed`](Self::set_distributed)
    /// first) trains the GAN across the ranks, each op's cost averaged over
    /// every tower of every rank.
    ///
    /// Periods that are not at least 1, or of which neither is 1, two ops of
    /// the same name and invalid towers are [`Code::InvalidArgument`]
    /// errors; towers of the async strategy a [`Code::Unsupported`] one.
    ///
    /// ```no_run
    /// use tptrain::{Gan, Input, Model, Towers, Trainer, TrainerOptions};
    /// # fn demo(model: &Model<'_>, input: Input<'_>, input2: Input<'_>) -> tptrain::Result<()> {
    /// let mut trainer = Trainer::new(&TrainerOptions { max_epoch: 10, ..Default::default() })?;
    /// // The discriminator every step, the generator every 5th global step.
    /// trainer.set_gan(model, input, &Gan::separate(1, 5))?;
    /// trainer.run()?;
    ///
    /// // GANTrainer on 2 replicated towers (tensorpack's MultiGPUGANTrainer).
    /// let mut trainer = Trainer::new(&TrainerOptions { max_epoch: 10, ..Default::default() })?;
    /// trainer.set_gan(model, input2, &Gan::new().towers(&Towers::replicated(2)))?;
    /// trainer.run()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_gan<'g>(&mut self, model: &Model<'a>, input: Input<'a>, gan: impl Into<Option<&'g Gan>>) -> Result<()> {
        // On an error here `input` is dropped, as the library would have.
        let raw = match gan.into() {
            Some(gan) => gan.to_raw()?,
            None => Gan::new().to_raw()?,
        };
        // SAFETY: live handles; the options and the names they point into
        // live for the call; the library takes the input, also on failure.
        call_dropping(|| unsafe {
            sys::tpt_trainer_set_gan(self.as_ptr(), model.as_ptr(), input.into_raw(), &raw.options)
        })
    }
}
