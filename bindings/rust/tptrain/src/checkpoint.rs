//! Checkpoints and exact resume (the header section "Checkpoints and
//! resume"; docs/checkpoints.md).
//!
//! [`ModelSaver`] and [`BestSaver`] are callbacks that write checkpoints;
//! [`Trainer::resume`](crate::Trainer::resume) and
//! [`TrainerOptions::auto_resume`](crate::TrainerOptions::auto_resume) go
//! on exactly from one; [`Model::restore`](crate::Model::restore) copies
//! variables by name from a checkpoint, a python3-torch `state_dict` or a
//! TorchScript module.
//!
//! ```no_run
//! use tptrain::{BestSaver, ModelSaver, TrainerOptions};
//!
//! let options = TrainerOptions { logdir: Some("train_log".into()), auto_resume: true, ..Default::default() };
//! let saver = ModelSaver::new().max_to_keep(5).every_k_steps(500);
//! let best = BestSaver::max("validation_accuracy");
//! # let _ = (options, saver, best);
//! ```

use crate::binding::Binding;
use crate::callback::{Callback, IntoCallback};
use crate::cstr::path_to_cstring;
use crate::error::{call, Code, Error, Result};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::ptr;
use tptrain_sys as sys;

/// tensorpack's ModelSaver (`tpt_callback_model_saver`): writes
/// `model-<global_step>` and the index file `checkpoint` into the log
/// directory (or [`dir`](Self::dir)), atomically, keeping the newest
/// [`max_to_keep`](Self::max_to_keep). Chief only. Add it to a trainer like
/// any callback.
#[derive(Debug, Clone)]
#[must_use = "a ModelSaver does nothing until it is added to a trainer"]
pub struct ModelSaver {
    max_to_keep: usize,
    keep_every_n_hours: f64,
    every_k_steps: u64,
    every_k_epochs: u64,
    dir: Option<PathBuf>,
}

impl Default for ModelSaver {
    fn default() -> ModelSaver {
        let o = sys::TPT_MODEL_SAVER_OPTIONS_INIT;
        ModelSaver {
            max_to_keep: o.max_to_keep as usize,
            keep_every_n_hours: o.keep_every_n_hours,
            every_k_steps: 0,
            every_k_epochs: o.every_k_epochs as u64,
            dir: None,
        }
    }
}

impl ModelSaver {
    /// After every epoch, keeping 10, one per half hour kept beyond them.
    pub fn new() -> ModelSaver {
        ModelSaver::default()
    }

    /// The newest `n` stay (0 keeps all). Default 10.
    pub fn max_to_keep(mut self, n: usize) -> ModelSaver {
        self.max_to_keep = n;
        self
    }

    /// One checkpoint per this many hours is never deleted (0: none).
    /// Default 0.5, as tensorpack.
    pub fn keep_every_n_hours(mut self, hours: f64) -> ModelSaver {
        self.keep_every_n_hours = hours;
        self
    }

    /// Also saves every `k` global steps (0, the default: not step-based).
    pub fn every_k_steps(mut self, k: u64) -> ModelSaver {
        self.every_k_steps = k;
        self
    }

    /// Saves after every `k`-th epoch (0: never; default 1).
    pub fn every_k_epochs(mut self, k: u64) -> ModelSaver {
        self.every_k_epochs = k;
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
        o.every_k_steps =
            i64::try_from(self.every_k_steps).map_err(|_| too_big("every_k_steps", self.every_k_steps))?;
        o.every_k_epochs =
            i64::try_from(self.every_k_epochs).map_err(|_| too_big("every_k_epochs", self.every_k_epochs))?;
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
/// `min-<stat>` / `max-<stat>` (or [`filename`](Self::filename)). Add it
/// after the [`ModelSaver`] and after the callback that puts the scalar.
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

/// How [`Model::restore`](crate::Model::restore) matches variables
/// (`tpt_restore_options`). The default: every variable must be in the
/// file with its shape; tensors of the file that match no variable are
/// skipped.
#[derive(Debug, Clone)]
pub struct RestoreOptions {
    ignore_missing: bool,
    ignore_unexpected: bool,
    ignore_shape_mismatch: bool,
    prefix: Option<String>,
    name_map: Vec<(String, String)>,
}

impl Default for RestoreOptions {
    fn default() -> RestoreOptions {
        RestoreOptions {
            ignore_missing: false,
            ignore_unexpected: true,
            ignore_shape_mismatch: false,
            prefix: None,
            name_map: Vec::new(),
        }
    }
}

impl RestoreOptions {
    pub fn new() -> RestoreOptions {
        RestoreOptions::default()
    }
    /// Variables the file lacks keep their values instead of an error.
    pub fn ignore_missing(mut self, yes: bool) -> RestoreOptions {
        self.ignore_missing = yes;
        self
    }
    /// Tensors of the file that match no variable are skipped (default) or
    /// an error.
    pub fn ignore_unexpected(mut self, yes: bool) -> RestoreOptions {
        self.ignore_unexpected = yes;
        self
    }
    /// Variables whose shapes differ are skipped instead of an error.
    pub fn ignore_shape_mismatch(mut self, yes: bool) -> RestoreOptions {
        self.ignore_shape_mismatch = yes;
        self
    }
    /// Put in front of every variable's name to find it in the file.
    pub fn prefix(mut self, prefix: impl Into<String>) -> RestoreOptions {
        self.prefix = Some(prefix.into());
        self
    }
    /// Finds `variable` under `name_in_file`.
    pub fn map(mut self, variable: impl Into<String>, name_in_file: impl Into<String>) -> RestoreOptions {
        self.name_map.push((variable.into(), name_in_file.into()));
        self
    }
}

/// `tpt_model_restore` (see [`Model::restore`](crate::Model::restore)).
pub(crate) fn restore(model: *mut sys::tpt_model, path: &Path, o: &RestoreOptions) -> Result<usize> {
    let c =
        |s: &str| CString::new(s).map_err(|_| Error::new(Code::InvalidArgument, format!("{s:?} contains a NUL byte")));
    let path = path_to_cstring(path, "path")?;
    let prefix = o.prefix.as_deref().map(c).transpose()?;
    let names = o.name_map.iter().flat_map(|(a, b)| [c(a), c(b)]).collect::<Result<Vec<CString>>>()?;
    let ptrs: Vec<*const std::os::raw::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let mut raw = sys::TPT_RESTORE_OPTIONS_INIT;
    raw.ignore_missing = o.ignore_missing as i32;
    raw.ignore_unexpected = o.ignore_unexpected as i32;
    raw.ignore_shape_mismatch = o.ignore_shape_mismatch as i32;
    raw.prefix = prefix.as_ref().map_or(ptr::null(), |p| p.as_ptr());
    raw.name_map = if ptrs.is_empty() { ptr::null() } else { ptrs.as_ptr() };
    raw.n_name_map = o.name_map.len();
    let mut n = 0usize;
    call!(sys::tpt_model_restore(&mut n, model, path.as_ptr(), &raw))?;
    Ok(n)
}

/// The most a checkpoint, torch.save file or TorchScript module may make the
/// reader allocate beyond its own size (`tpt_set_checkpoint_read_limit`):
/// entries inflated past their compressed size, tensors wider than their
/// records, the reader's tables. More is refused with an error naming the
/// file. Default 256 MiB, at most 2^62; process-wide. Reading never trusts
/// the file: see docs/checkpoints.md, "Checkpoints from others".
pub fn set_checkpoint_read_limit(bytes: u64) -> Result<()> {
    call!(sys::tpt_set_checkpoint_read_limit(bytes))
}

/// tensorpack's ScheduledHyperParamSetter (`tpt_callback_scheduled_hyperparam`):
/// sets an optimizer's hyper-parameter after epoch `at` completes (0:
/// before the first epoch), or at global step `at` with
/// [`by_step`](Self::by_step); in BEFORE_TRAIN it sets what the schedule
/// says for the epochs completed, so a resumed run follows it.
///
/// ```
/// # fn f(optimizer: &tptrain::Optimizer, trainer: &mut tptrain::Trainer) -> tptrain::Result<()> {
/// use tptrain::HyperParamSchedule;
/// trainer.add_callback(HyperParamSchedule::new(optimizer, "learning_rate", &[(0, 1e-3), (10, 1e-4)]))?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a schedule does nothing until it is added to a trainer"]
pub struct HyperParamSchedule<'o> {
    optimizer: &'o crate::Optimizer,
    param: String,
    points: Vec<(i64, f64)>,
    flags: u32,
}

impl<'o> HyperParamSchedule<'o> {
    /// `points` are (epoch or step, value) pairs, in any order.
    pub fn new(optimizer: &'o crate::Optimizer, param: impl Into<String>, points: &[(i64, f64)]) -> Self {
        HyperParamSchedule { optimizer, param: param.into(), points: points.to_vec(), flags: 0 }
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

impl<'a> IntoCallback<'a> for HyperParamSchedule<'_> {
    fn into_callback(self) -> Result<Callback<'a>> {
        self.build()
    }
}
