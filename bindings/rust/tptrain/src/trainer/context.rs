//! What closures see of the running trainer: [`Context`] (counters, scalars,
//! outputs, the log), [`StepContext`](crate::StepContext) for run_step (adds hooked steps) and
//! [`HookedContext`] for the work of one hooked step (adds step outputs).
//!
//! The three are "reference types" in the manner of openssl-rs's `X509Ref`:
//! zero-sized, only ever seen as `&Context` / `&mut Context` whose address is
//! the `tpt_trainer *` itself. Swapping two of them moves no bytes, so a
//! closure cannot trade the trainer it was given for another one, and the
//! borrow ends when the closure returns.

use crate::binding::Binding;
use crate::common::{call, Code, Error, Result};
use crate::cstr::{cstrings, with_cstr};
use crate::model::Model;
use crate::optimizer::Optimizer;
use crate::panic;
use crate::tensor::Tensor;
use crate::Flow;
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::os::raw::{c_char, c_void};
use std::path::Path;
use std::path::PathBuf;
use std::ptr;
use tptrain_sys as sys;

/// The trainer as closures (and [`Trainer`](crate::Trainer), through `Deref`)
/// see it. Every method names the C function it wraps.
pub struct Context {
    // Zero-sized, neither Send nor Sync; UnsafeCell: the C side changes under `&`.
    _opaque: PhantomData<(UnsafeCell<()>, *mut ())>,
}

/// One (global_step, value) entry of a scalar's history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scalar {
    /// The global_step when it was put.
    pub global_step: i64,
    pub value: f64,
}

/// Reads a `(out, trainer)` counter; it cannot fail on a live trainer.
fn counter(f: unsafe extern "C" fn(*mut i64, *const sys::tpt_trainer) -> *mut sys::tpt_status, t: &Context) -> i64 {
    let mut v = 0i64;
    // SAFETY: t is a live trainer; the status (NULL in practice) is freed.
    let st = unsafe { f(&mut v, t.as_ptr()) };
    debug_assert!(st.is_null());
    unsafe { sys::tpt_status_free(st) };
    v
}

/// Copies a string that lives as long as the trainer; NULL → None.
fn string_out(
    f: unsafe extern "C" fn(*mut *const c_char, *const sys::tpt_trainer) -> *mut sys::tpt_status,
    t: &Context,
) -> Option<String> {
    let mut s: *const c_char = ptr::null();
    // SAFETY: as in `counter`; the string is copied at once.
    let st = unsafe { f(&mut s, t.as_ptr()) };
    debug_assert!(st.is_null());
    unsafe { sys::tpt_status_free(st) };
    if s.is_null() {
        None
    } else {
        Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }
}

impl Context {
    /// # Safety
    /// `raw` is a live trainer that outlives `'t`.
    pub(crate) unsafe fn from_ptr<'t>(raw: *mut sys::tpt_trainer) -> &'t mut Context {
        &mut *raw.cast::<Context>()
    }

    /// The raw handle, valid while the trainer lives.
    pub fn as_ptr(&self) -> *mut sys::tpt_trainer {
        self as *const Context as *mut sys::tpt_trainer
    }

    /// The running epoch (starting_epoch - 1 before training)
    /// (`tpt_trainer_epoch_num`).
    pub fn epoch_num(&self) -> i64 {
        counter(sys::tpt_trainer_epoch_num, self)
    }

    /// The 0-based step inside the epoch, -1 before the first
    /// (`tpt_trainer_local_step`).
    pub fn local_step(&self) -> i64 {
        counter(sys::tpt_trainer_local_step, self)
    }

    /// The number of hooked steps run (`tpt_trainer_global_step`).
    pub fn global_step(&self) -> i64 {
        counter(sys::tpt_trainer_global_step, self)
    }

    /// Sets global_step (after a restore): before run, or in SETUP or
    /// BEFORE_TRAIN (`tpt_trainer_set_global_step`).
    pub fn set_global_step(&mut self, step: i64) -> Result<()> {
        call!(sys::tpt_trainer_set_global_step(self.as_ptr(), step))
    }

    /// The steps per epoch the loop runs: the options', or the input's size
    /// (by the towers) that `set_model` and the like filled in; -1 while
    /// neither has set it (`tpt_trainer_steps_per_epoch`).
    pub fn steps_per_epoch(&self) -> i64 {
        counter(sys::tpt_trainer_steps_per_epoch, self)
    }

    /// The checkpoint the run resumes from: the path given to
    /// [`Trainer::resume`](crate::Trainer::resume) or the one auto-resume found (once the run has
    /// begun); `None` when it starts afresh (`tpt_trainer_resumed_from`).
    pub fn resumed_from(&self) -> Option<PathBuf> {
        string_out(sys::tpt_trainer_resumed_from, self).map(PathBuf::from)
    }

    /// The best checkpoint the trainer's [`BestSaver`](crate::BestSaver) of
    /// `stat` has kept (Lightning's `best_model_path`): `None` before one was
    /// kept; [`Code::NotFound`](crate::Code::NotFound) when there is no best
    /// saver of `stat` (`tpt_trainer_best_checkpoint`).
    pub fn best_checkpoint(&self, stat: &str) -> Result<Option<PathBuf>> {
        let mut out = std::ptr::null();
        crate::cstr::with_cstr(stat, "stat", |s| call!(sys::tpt_trainer_best_checkpoint(&mut out, self.as_ptr(), s)))??;
        // SAFETY: the string lives as long as the trainer.
        Ok((!out.is_null())
            .then(|| PathBuf::from(unsafe { std::ffi::CStr::from_ptr(out) }.to_string_lossy().into_owned())))
    }

    /// The log directory in use, once run has set it up (`tpt_trainer_logdir`).
    pub fn logdir(&self) -> Option<PathBuf> {
        string_out(sys::tpt_trainer_logdir, self).map(PathBuf::from)
    }

    /// Why the last run stopped early: the reason of a [`Flow::Stop`], or
    /// "tpt_trainer_request_stop". `None` when it ran to max_epoch or failed
    /// (`tpt_trainer_stop_reason`).
    pub fn stop_reason(&self) -> Option<String> {
        string_out(sys::tpt_trainer_stop_reason, self)
    }

    /// Writes the trainer's whole state to `path` now, atomically
    /// (`tpt_trainer_save_checkpoint`): from a callback between steps
    /// (trigger_step, the epoch events, before or after training);
    /// [`Code::State`](crate::Code::State) inside run_step.
    pub fn save_checkpoint(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = crate::cstr::path_to_cstring(path.as_ref(), "path")?;
        call!(sys::tpt_trainer_save_checkpoint(self.as_ptr(), path.as_ptr()))
    }

    /// Writes a line to the trainer's log (`tpt_trainer_log`).
    pub fn log(&mut self, message: &str) -> Result<()> {
        with_cstr(message, "message", |m| call!(sys::tpt_trainer_log(self.as_ptr(), m)))?
    }

    /// Asks training to stop before its next step: AFTER_TRAIN runs and run
    /// returns [`RunOutcome::Stopped`](crate::RunOutcome::Stopped)
    /// (`tpt_trainer_request_stop`). From another thread, use a
    /// [`StopHandle`](crate::StopHandle).
    pub fn request_stop(&self) {
        // SAFETY: a live trainer; the call cannot fail on one.
        unsafe { sys::tpt_status_free(sys::tpt_trainer_request_stop(self.as_ptr())) }
    }

    /// Puts a scalar: recorded in the history at the current global_step and
    /// brought to every monitor at once (`tpt_trainer_put_scalar`). While
    /// training runs only. A monitor that answers [`Flow::Stop`] stops
    /// training: the closure that called this goes on, and its `Continue`
    /// becomes that stop when it returns.
    pub fn put_scalar(&mut self, name: &str, value: f64) -> Result<()> {
        let st = with_cstr(name, "name", |n| unsafe { sys::tpt_trainer_put_scalar(self.as_ptr(), n, value) })?;
        match flow_of(st)? {
            Flow::Continue => Ok(()),
            Flow::Stop(reason) => {
                panic::note_stop(reason);
                Ok(())
            }
        }
    }

    /// Puts an image (tensorpack's `put_image`): `image` is `H x W`,
    /// `H x W x C` or `N x H x W x C` with `C` = 1 (grey), 3 (RGB) or 4
    /// (RGBA), of dtype [`U8`](crate::DType::U8), or floating point in
    /// [0, 255] (rounded and clamped) (`tpt_trainer_put_image`). It is
    /// brought to every monitor at once as an [`Event::Record`](crate::Event::Record)
    /// of kind [`RecordKind::Image`](crate::RecordKind::Image), and written
    /// by the [`TensorBoard`](crate::TensorBoard) monitor; it is not kept in
    /// the history nor in stats.json. While training runs only, as
    /// [`put_scalar`](Self::put_scalar), and a monitor's stop is handled the
    /// same way.
    pub fn put_image(&mut self, name: &str, image: &Tensor) -> Result<()> {
        let st = with_cstr(name, "name", |n| unsafe { sys::tpt_trainer_put_image(self.as_ptr(), n, image.as_ptr()) })?;
        match flow_of(st)? {
            Flow::Continue => Ok(()),
            Flow::Stop(reason) => {
                panic::note_stop(reason);
                Ok(())
            }
        }
    }

    /// The latest value of a scalar and when it was put; [`Code::NotFound`](crate::Code::NotFound) if
    /// it never was (`tpt_trainer_scalar_latest`).
    pub fn scalar_latest(&self, name: &str) -> Result<Scalar> {
        let (mut value, mut global_step) = (0f64, 0i64);
        with_cstr(name, "name", |n| {
            call!(sys::tpt_trainer_scalar_latest(&mut value, &mut global_step, self.as_ptr(), n))
        })??;
        Ok(Scalar { global_step, value })
    }

    /// Every value a scalar was put with, oldest first; [`Code::NotFound`](crate::Code::NotFound) if
    /// it never was (`tpt_trainer_scalar_history`).
    pub fn scalar_history(&self, name: &str) -> Result<Vec<Scalar>> {
        with_cstr(name, "name", |n| {
            let mut count = 0usize;
            call!(sys::tpt_trainer_scalar_history(&mut count, ptr::null_mut(), ptr::null_mut(), 0, self.as_ptr(), n))?;
            let mut steps = vec![0i64; count];
            let mut values = vec![0f64; count];
            call!(sys::tpt_trainer_scalar_history(
                &mut count,
                steps.as_mut_ptr(),
                values.as_mut_ptr(),
                steps.len(),
                self.as_ptr(),
                n
            ))?;
            // History only grows; keep what was copied.
            let n = count.min(steps.len());
            Ok(steps[..n]
                .iter()
                .zip(&values[..n])
                .map(|(&global_step, &value)| Scalar { global_step, value })
                .collect())
        })?
    }

    /// A scalar output of the latest hooked step (a one-element tensor output
    /// is converted); [`Code::NotFound`](crate::Code::NotFound) if the step did not publish it
    /// (`tpt_trainer_output_scalar`).
    pub fn output_scalar(&self, name: &str) -> Result<f64> {
        let mut v = 0f64;
        with_cstr(name, "name", |n| call!(sys::tpt_trainer_output_scalar(&mut v, self.as_ptr(), n)))??;
        Ok(v)
    }

    /// The trainer's model (`tpt_trainer_model`); [`Code::NotFound`](crate::Code::NotFound) if it
    /// has none.
    pub fn model(&self) -> Result<Model<'_>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_trainer_model(&mut out, self.as_ptr()))?;
        Model::wrap(out)
    }

    /// The optimizer of the trainer's model (`tpt_trainer_optimizer`), e.g.
    /// for a learning-rate schedule in a callback:
    /// `ctx.optimizer()?.set("learning_rate", lr)?`. [`Code::NotFound`](crate::Code::NotFound) if
    /// there is none.
    pub fn optimizer(&self) -> Result<Optimizer> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_trainer_optimizer(&mut out, self.as_ptr()))?;
        Optimizer::wrap(out)
    }

    /// A tensor output of the latest hooked step (a scalar output comes back
    /// as a 0-d f64 tensor) (`tpt_trainer_output`).
    pub fn output(&self, name: &str) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        with_cstr(name, "name", |n| call!(sys::tpt_trainer_output(&mut out, self.as_ptr(), n)))??;
        Tensor::wrap(out)
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("epoch_num", &self.epoch_num())
            .field("local_step", &self.local_step())
            .field("global_step", &self.global_step())
            .finish()
    }
}

/// What run_step gets: the [`Context`] plus [`hooked_step`](Self::hooked_step).
pub struct StepContext {
    _opaque: PhantomData<(UnsafeCell<()>, *mut ())>,
}

/// What the work of one hooked step gets: the [`Context`] plus the step
/// outputs that AFTER_RUN callbacks read.
pub struct HookedContext {
    _opaque: PhantomData<(UnsafeCell<()>, *mut ())>,
}

macro_rules! ref_type {
    ($t:ty) => {
        impl $t {
            /// # Safety
            /// `raw` is a live trainer that outlives `'t`.
            pub(crate) unsafe fn from_ptr<'t>(raw: *mut sys::tpt_trainer) -> &'t mut $t {
                &mut *raw.cast::<$t>()
            }
        }
        impl Deref for $t {
            type Target = Context;
            fn deref(&self) -> &Context {
                // SAFETY: all three are zero-sized views of the same trainer.
                unsafe { &*(self as *const $t).cast::<Context>() }
            }
        }
        impl DerefMut for $t {
            fn deref_mut(&mut self) -> &mut Context {
                unsafe { &mut *(self as *mut $t).cast::<Context>() }
            }
        }
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&**self, f)
            }
        }
    };
}
ref_type!(StepContext);
ref_type!(HookedContext);

/// Turns a status from the loop (hooked_step) into control flow.
pub(crate) fn flow_of(st: *mut sys::tpt_status) -> Result<Flow> {
    if st.is_null() {
        return Ok(Flow::Continue);
    }
    // SAFETY: a live status owned by us; freed by check, or here.
    if unsafe { sys::tpt_status_code(st) } == sys::TPT_STOP {
        let reason = unsafe { CStr::from_ptr(sys::tpt_status_message(st)) }.to_string_lossy().into_owned();
        unsafe { sys::tpt_status_free(st) };
        return Ok(Flow::Stop(reason));
    }
    unsafe { Error::check(st) }.map(|()| Flow::Continue)
}

unsafe extern "C" fn step_trampoline<F>(trainer: *mut sys::tpt_trainer, user_data: *mut c_void) -> *mut sys::tpt_status
where
    F: FnOnce(&mut HookedContext) -> Result<Flow>,
{
    // Tensors made in this call are Rust values that free themselves (Drop):
    // the library's scope for the call hands them over.
    crate::tensor::own_call_tensors();
    // SAFETY: user_data is the `Option<F>` on hooked_step's stack, alive for the call.
    let slot = &mut *user_data.cast::<Option<F>>();
    panic::guard(&|| "hooked step".to_owned(), || match slot.take() {
        Some(step) => step(HookedContext::from_ptr(trainer)),
        None => Ok(Flow::Continue),
    })
}

impl StepContext {
    /// Runs one hooked step: BEFORE_RUN of the callbacks that asked for it,
    /// then `step`, then AFTER_RUN; global_step advances by one
    /// (`tpt_trainer_hooked_step`). Returns what the step or a callback
    /// returned: `Ok(Continue)`, `Ok(Stop(reason))`, or the error (`step`
    /// returns a [`Result<Flow>`](crate::Result), as
    /// [`Callback::on`](crate::Callback::on)'s closure does). Return a stop or
    /// an error from run_step as it is (the loop would stop or fail anyway:
    /// the outcome of a hooked step cannot be swallowed).
    pub fn hooked_step<F>(&mut self, step: F) -> Result<Flow>
    where
        F: FnOnce(&mut HookedContext) -> Result<Flow>,
    {
        let mut slot = Some(step);
        // SAFETY: the slot outlives the call; the trampoline matches F.
        let st = unsafe {
            sys::tpt_trainer_hooked_step(
                self.as_ptr(),
                Some(step_trampoline::<F>),
                (&mut slot as *mut Option<F>).cast::<c_void>(),
            )
        };
        flow_of(st)
    }

    /// A hooked step with no work of its own: the callbacks' BEFORE_RUN and
    /// AFTER_RUN only (`tpt_trainer_hooked_step` with a NULL step).
    pub fn hooks_only(&mut self) -> Result<Flow> {
        // SAFETY: a live trainer; NULL step is allowed.
        flow_of(unsafe { sys::tpt_trainer_hooked_step(self.as_ptr(), None, ptr::null_mut()) })
    }
}

impl HookedContext {
    /// Publishes a scalar output of this step (`tpt_trainer_set_output_scalar`).
    pub fn set_output_scalar(&mut self, name: &str, value: f64) -> Result<()> {
        with_cstr(name, "name", |n| call!(sys::tpt_trainer_set_output_scalar(self.as_ptr(), n, value)))?
    }

    /// Publishes a tensor output of this step; the trainer keeps its own
    /// reference (`tpt_trainer_set_output`).
    pub fn set_output(&mut self, name: &str, tensor: &Tensor) -> Result<()> {
        with_cstr(name, "name", |n| call!(sys::tpt_trainer_set_output(self.as_ptr(), n, tensor.as_ptr())))?
    }
}

impl Context {
    /// This process's rank in its job: 0 (the chief) to
    /// [`world_size`](Self::world_size) - 1; 0 for a trainer that is not
    /// distributed (`tpt_trainer_rank`). Any time, callbacks included.
    pub fn rank(&self) -> Result<usize> {
        Ok(self.rank_and_world_size()?.0)
    }

    /// The number of processes in this trainer's job; 1 for a trainer that
    /// is not distributed (`tpt_trainer_rank`). Any time.
    pub fn world_size(&self) -> Result<usize> {
        Ok(self.rank_and_world_size()?.1)
    }

    fn rank_and_world_size(&self) -> Result<(usize, usize)> {
        let (mut rank, mut world_size) = (0i32, 0i32);
        call!(sys::tpt_trainer_rank(&mut rank, &mut world_size, self.as_ptr()))?;
        let bad = || Error::new(Code::Internal, format!("library returned rank {rank} of {world_size}"));
        Ok((usize::try_from(rank).map_err(|_| bad())?, usize::try_from(world_size).map_err(|_| bad())?))
    }
}

impl StepContext {
    /// Runs the model's train ops `names`, in order
    /// (`tpt_trainer_run_train_ops`): takes the input's next batch, runs
    /// the tower function once, computes every named op's gradients from
    /// that one pass (as TensorFlow runs several `minimize` ops of one
    /// `session.run`), then applies the ops' updates in order; as one
    /// hooked step with [`Run::Hooked`](crate::Run::Hooked), or without hooks with
    /// [`Run::Raw`](crate::Run::Raw). The trainer must have a model
    /// ([`Trainer::set_model`](crate::Trainer::set_model), then [`Trainer::set_run_step`](crate::Trainer::set_run_step)).
    ///
    /// Returns what [`hooked_step`](Self::hooked_step) returns: return a
    /// stop or an error from run_step as it is. An unknown op is a
    /// [`Code::InvalidArgument`] error naming it (and the model's ops); a
    /// trainer without a model a [`Code::State`] one; the async strategy
    /// ([`Strategy::Async`](crate::Strategy::Async)) a [`Code::Unsupported`]
    /// one.
    ///
    /// ```no_run
    /// # fn demo(trainer: &mut tptrain::Trainer<'_>) -> tptrain::Result<()> {
    /// use tptrain::Run;
    /// // tensorpack's GANTrainer: both updates from one forward pass, one hooked step.
    /// trainer.set_run_step(|ctx| ctx.run_train_ops(&["g_op", "d_op"], Run::Hooked))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_train_ops<S: AsRef<str>>(&mut self, names: &[S], run: Run) -> Result<Flow> {
        let names = cstrings(names, "names")?;
        let pointers: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
        let hooked = match run {
            Run::Hooked => 1,
            Run::Raw => 0,
        };
        // SAFETY: a live trainer; the names live for the call.
        let st = unsafe { sys::tpt_trainer_run_train_ops(self.as_ptr(), pointers.as_ptr(), pointers.len(), hooked) };
        flow_of(st)
    }
}

/// How [`StepContext::run_train_ops`](crate::StepContext::run_train_ops) runs its train ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Run {
    /// As one hooked step (tensorpack's `hooked_sess.run`): BEFORE_RUN and
    /// AFTER_RUN callbacks around it, global_step advances by one, the
    /// tower's outputs are published and their moving summaries updated.
    Hooked,
    /// Without hooks (tensorpack's `sess.run`): no callbacks, no counter, no
    /// outputs.
    Raw,
}
