//! Inference during training (the header section "Inference during
//! training"): tensorpack's InferenceRunner and its inferencers.
//!
//! An [`InferenceRunner`] is a callback that, after each epoch (at every
//! TRIGGER; [`IntoCallback::periodic_trigger`] runs it every k steps or
//! epochs instead), makes one pass of a finite dataflow of
//! batches (in the model's signature order) through the model's inference
//! tower, on the training thread ([`InferenceRunner::towers`]: on several
//! inference towers at once, tensorpack's DataParallelInferenceRunner).
//! Each [`Inferencer`] asks for some of the tower's outputs and turns them
//! into scalars, put as any scalar (the history, stats.json, TensorBoard,
//! [`BestSaver`](crate::BestSaver), [`StatMonitorParam`](crate::StatMonitorParam)
//! and [`EarlyStopping`](crate::EarlyStopping) read them).
//!
//! Inferencers: [`Inferencer::scalar_stats`] (tensorpack's ScalarStats),
//! [`Inferencer::classification_error`] (ClassificationError), and
//! [`Inferencer::custom`], closures of the host.
//!
//! ```no_run
//! use tptrain::{DataFlow, EarlyStopping, InferenceRunner, Inferencer, Model, Trainer};
//! # fn f<'a>(model: &Model<'a>, test: &DataFlow<'a>, trainer: &mut Trainer<'a>) -> tptrain::Result<()> {
//! let runner = InferenceRunner::new(model, test)
//!     .inferencer(Inferencer::scalar_stats(&["cost"]))
//!     .inferencer(Inferencer::classification_error());
//! trainer.add_callback(runner)?; // puts validation_cost and validation_error
//! trainer.add_callback(EarlyStopping::new("validation_error").patience(5))?;
//! # Ok(()) }
//! ```

use crate::binding::{make, Binding};
use crate::callback::{Callback, IntoCallback};
use crate::common::{call, Code, Error, Result};
use crate::cstr::{cstring, cstrings, path_to_cstring, ptrs_or_null};
use crate::dataflow::DataFlow;
use crate::model::Model;
use crate::panic;
use crate::tensor::Tensor;
use crate::trainer::Context;
use crate::Flow;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};
use tptrain_sys as sys;

/// One inferencer of an [`InferenceRunner`] (`tpt_inferencer`), made by
/// [`Inferencer::scalar_stats`], [`Inferencer::classification_error`] or
/// [`Inferencer::custom`] and their builders. It is freed on drop
/// (`tpt_inferencer_free`), with its closures, unless a runner took it.
///
/// `'a` bounds what its closures borrow.
pub struct Inferencer<'a> {
    raw: NonNull<sys::tpt_inferencer>,
    _marker: PhantomData<(&'a (), *mut ())>,
}

impl<'a> Inferencer<'a> {
    /// tensorpack's ScalarStats: for each of `outputs`, the mean over the
    /// pass as the scalar `"validation_<name>"` (another prefix with
    /// [`ScalarStats::prefix`]). An output of one element per batch is
    /// weighted by the batch's rows (tensorpack weighs batches equally), one
    /// of one element per row is averaged over the rows.
    pub fn scalar_stats(outputs: &[&str]) -> ScalarStats {
        ScalarStats { outputs: outputs.iter().map(|s| (*s).to_owned()).collect(), prefix: None }
    }

    /// tensorpack's ClassificationError: the output `"wrong"` (what
    /// [`nn::wrong`](crate::nn::wrong) gives; another with
    /// [`ClassificationError::wrong_output`]) holds one 0/1 value per row,
    /// and the scalar `"validation_error"` (another with
    /// [`ClassificationError::summary_name`]) is the wrong rows over all
    /// rows of the pass, whatever the batch sizes.
    pub fn classification_error() -> ClassificationError {
        ClassificationError { wrong_output: None, summary_name: None }
    }

    /// An inferencer written in Rust (tensorpack's Inferencer): in each pass,
    /// the [`before`](InferencerBuilder::before) closure, then `on_outputs`
    /// once per batch with the tower's `outputs` (in that order; borrowed for
    /// the call) and the batch's rows, then the
    /// [`after`](InferencerBuilder::after) closure, which puts the results
    /// with [`Context::put_scalar`]. `name` is the inferencer's in errors.
    ///
    /// Each closure returns `Ok(())` or an [`Error`] that fails training (its
    /// message then names the batch), a [`Result<()>`](crate::Result) as for
    /// [`Callback::on`] (`.map_err(Error::wrap)` for an error of another
    /// type). A panic ends training too, and
    /// [`Trainer::run`](crate::Trainer::run) resumes it. The closures run on
    /// the training thread, one at a time.
    ///
    /// ```
    /// use std::{cell::Cell, rc::Rc};
    /// use tptrain::Inferencer;
    ///
    /// // The largest cost of any batch, as "validation_max_cost".
    /// let max = Rc::new(Cell::new(f64::NEG_INFINITY));
    /// let (m1, m2, m3) = (max.clone(), max.clone(), max.clone());
    /// let worst = Inferencer::custom("max cost", &["cost"], move |outputs, _rows| {
    ///     m1.set(m1.get().max(outputs[0].item()?));
    ///     Ok(())
    /// })
    /// .before(move || {
    ///     m2.set(f64::NEG_INFINITY);
    ///     Ok(())
    /// })
    /// .after(move |ctx| ctx.put_scalar("validation_max_cost", m3.get()));
    /// # let _ = worst;
    /// ```
    pub fn custom<F>(name: impl Into<String>, outputs: &[&str], on_outputs: F) -> InferencerBuilder<'a>
    where
        F: FnMut(&[Tensor], i64) -> Result<()> + 'a,
    {
        InferencerBuilder {
            name: name.into(),
            outputs: outputs.iter().map(|s| (*s).to_owned()).collect(),
            before: None,
            on_outputs: Box::new(on_outputs),
            after: None,
        }
    }

    /// Takes ownership of a handle.
    ///
    /// # Safety
    /// `raw` is a live inferencer that nothing else frees, whose user data
    /// outlives `'a`.
    pub unsafe fn from_raw(raw: *mut sys::tpt_inferencer) -> Option<Inferencer<'a>> {
        NonNull::new(raw).map(|raw| Inferencer { raw, _marker: PhantomData })
    }

    /// The raw handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::tpt_inferencer {
        self.raw.as_ptr()
    }

    /// Gives up ownership of the handle (for a C function that takes it).
    pub fn into_raw(self) -> *mut sys::tpt_inferencer {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }
}

impl Drop for Inferencer<'_> {
    fn drop(&mut self) {
        let had = panic::pending();
        // SAFETY: we own the handle; its destroy function runs here.
        unsafe { sys::tpt_inferencer_free(self.raw.as_ptr()) };
        panic::resume_if_new(had);
    }
}

impl fmt::Debug for Inferencer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inferencer").field("raw", &self.raw).finish()
    }
}

/// What [`InferenceRunner::inferencer`] takes: an [`Inferencer`], or a
/// builder ([`ScalarStats`], [`ClassificationError`], [`InferencerBuilder`])
/// that it builds.
pub trait IntoInferencer<'a> {
    fn into_inferencer(self) -> Result<Inferencer<'a>>;
}

impl<'a> IntoInferencer<'a> for Inferencer<'a> {
    fn into_inferencer(self) -> Result<Inferencer<'a>> {
        Ok(self)
    }
}

/// tensorpack's ScalarStats (`tpt_inferencer_scalar_stats`), made by
/// [`Inferencer::scalar_stats`].
#[derive(Debug, Clone)]
#[must_use = "a ScalarStats does nothing until it is given to an InferenceRunner"]
pub struct ScalarStats {
    outputs: Vec<String>,
    prefix: Option<String>,
}

impl ScalarStats {
    /// The scalars are `"<prefix>_<name>"` (default prefix "validation");
    /// an empty prefix gives just the output's name.
    pub fn prefix(mut self, prefix: impl Into<String>) -> ScalarStats {
        self.prefix = Some(prefix.into());
        self
    }

    /// Makes the inferencer.
    pub fn build(self) -> Result<Inferencer<'static>> {
        let names = cstrings(&self.outputs, "outputs")?;
        let ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
        let prefix = self.prefix.as_deref().map(|p| cstring(p, "prefix")).transpose()?;
        let mut out = ptr::null_mut();
        call!(sys::tpt_inferencer_scalar_stats(
            &mut out,
            ptrs_or_null(&ptrs),
            ptrs.len(),
            prefix.as_ref().map_or(ptr::null(), |p| p.as_ptr())
        ))?;
        Inferencer::wrap(out)
    }
}

impl<'a> IntoInferencer<'a> for ScalarStats {
    fn into_inferencer(self) -> Result<Inferencer<'a>> {
        self.build()
    }
}

/// tensorpack's ClassificationError (`tpt_inferencer_classification_error`),
/// made by [`Inferencer::classification_error`].
#[derive(Debug, Clone)]
#[must_use = "a ClassificationError does nothing until it is given to an InferenceRunner"]
pub struct ClassificationError {
    wrong_output: Option<String>,
    summary_name: Option<String>,
}

impl ClassificationError {
    /// The tower's output of one 0/1 value per row (default "wrong").
    pub fn wrong_output(mut self, name: impl Into<String>) -> ClassificationError {
        self.wrong_output = Some(name.into());
        self
    }

    /// The scalar put (default "validation_error").
    pub fn summary_name(mut self, name: impl Into<String>) -> ClassificationError {
        self.summary_name = Some(name.into());
        self
    }

    /// Makes the inferencer.
    pub fn build(self) -> Result<Inferencer<'static>> {
        let wrong = self.wrong_output.as_deref().map(|w| cstring(w, "wrong_output")).transpose()?;
        let summary = self.summary_name.as_deref().map(|s| cstring(s, "summary_name")).transpose()?;
        let mut out = ptr::null_mut();
        call!(sys::tpt_inferencer_classification_error(
            &mut out,
            wrong.as_ref().map_or(ptr::null(), |w| w.as_ptr()),
            summary.as_ref().map_or(ptr::null(), |s| s.as_ptr())
        ))?;
        Inferencer::wrap(out)
    }
}

impl<'a> IntoInferencer<'a> for ClassificationError {
    fn into_inferencer(self) -> Result<Inferencer<'a>> {
        self.build()
    }
}

/// The closures of a custom inferencer, with their errors turned into [`Error`]s.
type BeforeFn<'a> = Box<dyn FnMut() -> Result<()> + 'a>;
type OnOutputsFn<'a> = Box<dyn FnMut(&[Tensor], i64) -> Result<()> + 'a>;
type AfterFn<'a> = Box<dyn FnMut(&mut Context) -> Result<()> + 'a>;

/// An inferencer being described: made by [`Inferencer::custom`], finished
/// by [`build`](Self::build) or by [`InferenceRunner::inferencer`].
#[must_use = "an inferencer builder does nothing until it is built or given to an InferenceRunner"]
pub struct InferencerBuilder<'a> {
    name: String,
    outputs: Vec<String>,
    before: Option<BeforeFn<'a>>,
    on_outputs: OnOutputsFn<'a>,
    after: Option<AfterFn<'a>>,
}

/// The boxed user data of a custom inferencer.
struct InferencerData<'a> {
    name: String,
    before: Option<BeforeFn<'a>>,
    on_outputs: OnOutputsFn<'a>,
    after: Option<AfterFn<'a>>,
}

unsafe extern "C" fn before_trampoline(user_data: *mut c_void) -> *mut sys::tpt_status {
    // Tensors made in this call are Rust values that free themselves (Drop):
    // the library's scope for the call hands them over.
    crate::tensor::own_call_tensors();
    // SAFETY: user_data is the InferencerData given with the description;
    // the library frees it only with the inferencer, and calls its functions
    // one at a time on the training thread.
    let data = &mut *user_data.cast::<InferencerData<'_>>();
    let name = &data.name;
    match &mut data.before {
        Some(f) => panic::guard(&|| format!("inferencer '{name}'"), || f().map(|()| Flow::Continue)),
        None => ptr::null_mut(),
    }
}

unsafe extern "C" fn on_outputs_trampoline(
    outputs: *const *const sys::tpt_tensor,
    n_outputs: usize,
    rows: i64,
    user_data: *mut c_void,
) -> *mut sys::tpt_status {
    crate::tensor::own_call_tensors();
    // SAFETY: as in before_trampoline.
    let data = &mut *user_data.cast::<InferencerData<'_>>();
    let (name, f) = (&data.name, &mut data.on_outputs);
    // SAFETY: Tensor is a repr(transparent) tpt_tensor *; the library lends
    // n_outputs live, non-NULL handles for the call and frees them itself; a
    // shared slice cannot move them out.
    let lent: &[Tensor] =
        if n_outputs == 0 { &[] } else { std::slice::from_raw_parts(outputs.cast::<Tensor>(), n_outputs) };
    let st = panic::guard(&|| format!("inferencer '{name}'"), || f(lent, rows).map(|()| Flow::Continue));
    // own_call_tensors hands the call's handles to us, and a handle the
    // library made for this call (rather than lent) would be among them:
    // free each one now (tpt_tensor_free ignores a lent handle). The closure
    // only borrowed them, so none is used after this.
    for t in lent {
        sys::tpt_tensor_free(t.as_ptr() as *mut sys::tpt_tensor);
    }
    st
}

unsafe extern "C" fn after_trampoline(trainer: *mut sys::tpt_trainer, user_data: *mut c_void) -> *mut sys::tpt_status {
    crate::tensor::own_call_tensors();
    // SAFETY: as in before_trampoline; the trainer is live for the call.
    let data = &mut *user_data.cast::<InferencerData<'_>>();
    let name = &data.name;
    match &mut data.after {
        Some(f) => {
            panic::guard(&|| format!("inferencer '{name}'"), || f(Context::from_ptr(trainer)).map(|()| Flow::Continue))
        }
        None => ptr::null_mut(),
    }
}

impl<'a> InferencerBuilder<'a> {
    /// Called at the start of each pass (to reset what `on_outputs` adds up).
    pub fn before<F>(mut self, before: F) -> InferencerBuilder<'a>
    where
        F: FnMut() -> Result<()> + 'a,
    {
        self.before = Some(Box::new(before));
        self
    }

    /// Called at the end of each pass, with the trainer, to put the results
    /// ([`Context::put_scalar`]).
    pub fn after<F>(mut self, after: F) -> InferencerBuilder<'a>
    where
        F: FnMut(&mut Context) -> Result<()> + 'a,
    {
        self.after = Some(Box::new(after));
        self
    }

    /// Makes the inferencer (`tpt_inferencer_new`). Fails for a name or an
    /// output with a NUL byte (the closures are dropped then).
    pub fn build(self) -> Result<Inferencer<'a>> {
        let InferencerBuilder { name, outputs, before, on_outputs, after } = self;
        let c_name = cstring(&name, "name")?;
        let names = cstrings(&outputs, "outputs")?;
        let ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
        let has_before = before.is_some();
        let has_after = after.is_some();
        let data = Box::new(InferencerData { name, before, on_outputs, after });
        let mut desc = sys::TPT_INFERENCER_DESC_INIT;
        desc.name = c_name.as_ptr();
        desc.outputs = ptrs_or_null(&ptrs);
        desc.n_outputs = ptrs.len();
        if has_before {
            desc.before = Some(before_trampoline);
        }
        desc.on_outputs = Some(on_outputs_trampoline);
        if has_after {
            desc.after = Some(after_trampoline);
        }
        desc.user_data = Box::into_raw(data).cast::<c_void>();
        desc.destroy = Some(panic::drop_box::<InferencerData<'a>>);
        // SAFETY: the strings live for the call (the library copies them);
        // it owns user_data from here on, also on failure.
        make(|out| unsafe { sys::tpt_inferencer_new(out, &desc) })
    }
}

impl<'a> IntoInferencer<'a> for InferencerBuilder<'a> {
    fn into_inferencer(self) -> Result<Inferencer<'a>> {
        self.build()
    }
}

impl fmt::Debug for InferencerBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InferencerBuilder")
            .field("name", &self.name)
            .field("outputs", &self.outputs)
            .field("before", &self.before.is_some())
            .field("after", &self.after.is_some())
            .finish_non_exhaustive()
    }
}

/// An inferencer to be made when the runner is built.
type PendingInferencer<'a> = Box<dyn FnOnce() -> Result<Inferencer<'a>> + 'a>;

/// tensorpack's InferenceRunner (`tpt_inference_runner`), chief only: after
/// each epoch (at every TRIGGER) one pass of `df` through the model's
/// inference tower, whose outputs go to the runner's inferencers, in the
/// order they were given. Built into a [`Callback`] by
/// [`build`](Self::build), or by [`Trainer::add_callback`](crate::Trainer::add_callback).
/// The callback keeps references to the model and `df`, which it consumes
/// (a dataflow has one consumer). [`Callback::inference_runner`] is the
/// short form with one [`ScalarStats`].
///
/// With [`towers`](Self::towers) above 1 it is tensorpack's
/// DataParallelInferenceRunner (`tpt_inference_runner_data_parallel`): that
/// many CPU inference towers ("InferenceTower0", "InferenceTower1", ...)
/// each infer a batch at once, tower 0 on the training thread and the others
/// on threads of the library's own (started before training, joined after
/// it), with a share of the intra-op threads. The inferencers still run on
/// the training thread and get the batches in the dataflow's order, so the
/// results are the single runner's. The tower closure is `Send + Sync`
/// already ([`Model::new`]); a panic in it on one of the library's threads
/// fails the pass with its message (the panic is not resumed).
///
/// ```no_run
/// use tptrain::{DataFlow, Every, InferenceRunner, Inferencer, IntoCallback, Model};
/// # fn f<'a>(model: &Model<'a>, test: &DataFlow<'a>) -> tptrain::Result<()> {
/// // Every 500 steps instead of every epoch.
/// let runner = InferenceRunner::new(model, test)
///     .inferencer(Inferencer::scalar_stats(&["cost", "accuracy"]).prefix("val"))
///     .periodic_trigger(Every::steps(500))?;
/// # let _ = runner;
/// // Four batches inferred at once, on InferenceTower0..3.
/// let runner = InferenceRunner::new(model, test)
///     .inferencer(Inferencer::classification_error())
///     .towers(4)
///     .build()?;
/// # let _ = runner;
/// # Ok(()) }
/// ```
#[must_use = "an InferenceRunner does nothing until it is added to a trainer"]
pub struct InferenceRunner<'r, 'a> {
    model: &'r Model<'a>,
    df: &'r DataFlow<'a>,
    inferencers: Vec<PendingInferencer<'a>>,
    towers: usize,
}

impl<'r, 'a> InferenceRunner<'r, 'a> {
    /// A runner of `model` over `df` (a finite dataflow of batches in the
    /// model's signature order), with no inferencers yet.
    pub fn new(model: &'r Model<'a>, df: &'r DataFlow<'a>) -> InferenceRunner<'r, 'a> {
        InferenceRunner { model, df, inferencers: Vec::new(), towers: 1 }
    }

    /// Adds an inferencer: an [`Inferencer`] or one of its builders, built
    /// when the runner is.
    pub fn inferencer(mut self, inferencer: impl IntoInferencer<'a> + 'a) -> InferenceRunner<'r, 'a> {
        self.inferencers.push(Box::new(move || inferencer.into_inferencer()));
        self
    }

    /// The number of inference towers (1 to 256; default 1). Above 1 the
    /// runner is tensorpack's DataParallelInferenceRunner: `towers` batches
    /// at a time are inferred at once, one on each of "InferenceTower0",
    /// "InferenceTower1", ... ([`Tower::name`](crate::Tower::name)), on
    /// threads of their own. A count out of range is a
    /// [`Code::InvalidArgument`] error from [`build`](Self::build).
    pub fn towers(mut self, towers: usize) -> InferenceRunner<'r, 'a> {
        self.towers = towers;
        self
    }

    /// Makes the callback (`tpt_inference_runner`, or
    /// `tpt_inference_runner_data_parallel` with [`towers`](Self::towers)
    /// other than 1). The inferencers are built first, in order; the first
    /// error is returned (and the others are dropped).
    pub fn build(self) -> Result<Callback<'a>> {
        let InferenceRunner { model, df, inferencers, towers } = self;
        // Out of i32: the library's own message for a count out of range.
        let n_towers = i32::try_from(towers)
            .map_err(|_| Error::new(Code::InvalidArgument, format!("n_towers is {towers}: it must be in [1, 256]")))?;
        let mut made = Vec::with_capacity(inferencers.len());
        for make in inferencers {
            made.push(make()?);
        }
        let ptrs: Vec<*mut sys::tpt_inferencer> = made.into_iter().map(Inferencer::into_raw).collect();
        let list = if ptrs.is_empty() { ptr::null() } else { ptrs.as_ptr() };
        // SAFETY: live handles; the library takes the inferencers, also on
        // failure, and keeps its own references to the model and df.
        make(|out| unsafe {
            if n_towers == 1 {
                sys::tpt_inference_runner(out, model.as_ptr(), df.as_ptr(), list, ptrs.len())
            } else {
                sys::tpt_inference_runner_data_parallel(out, model.as_ptr(), df.as_ptr(), list, ptrs.len(), n_towers)
            }
        })
    }
}

impl<'a> IntoCallback<'a> for InferenceRunner<'_, 'a> {
    fn into_callback(self) -> Result<Callback<'a>> {
        self.build()
    }
}

impl fmt::Debug for InferenceRunner<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InferenceRunner")
            .field("model", &self.model)
            .field("df", &self.df)
            .field("inferencers", &self.inferencers.len())
            .field("towers", &self.towers)
            .finish()
    }
}

impl<'a> Binding for Inferencer<'a> {
    type Raw = sys::tpt_inferencer;
    const WHAT: &'static str = "inferencer";
    unsafe fn from_raw_handle(raw: *mut sys::tpt_inferencer) -> Option<Inferencer<'a>> {
        Inferencer::from_raw(raw)
    }
}

/// [`Callback::inference_runner`]: the short form of the inference runner
/// (`tpt_inference_runner_new`).
pub(crate) fn short_runner<'a>(model: &Model<'a>, df: &DataFlow<'a>, outputs: &[&str]) -> Result<Callback<'a>> {
    let names = cstrings(outputs, "outputs")?;
    let ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
    let mut out = ptr::null_mut();
    call!(sys::tpt_inference_runner_new(&mut out, model.as_ptr(), df.as_ptr(), ptrs.as_ptr(), ptrs.len()))?;
    Callback::wrap(out)
}

// ------------------------------------------------------ predictors

/// tensorpack's OfflinePredictor (`tpt_predictor`): a model's tower function
/// run as an inference tower on some of its inputs, by name, returning some
/// of its outputs, by name. The inputs it is not given (the labels) reach
/// the tower function as zeros of the batch's size, so a tower function that
/// computes its loss runs unchanged. Made by [`Predictor::builder`].
///
/// It keeps the model alive and may be shared by threads
/// ([`predict`](Self::predict) takes `&self`; the tower closure is
/// `Send + Sync`), but not used while a trainer trains the model.
///
/// ```no_run
/// use tptrain::{Model, Predictor, Tensor};
/// # fn f(model: &Model<'static>, x: &Tensor) -> tptrain::Result<()> {
/// // build, restore the best checkpoint, and predict from x alone
/// let predictor = Predictor::builder(model)
///     .inputs(&["x"])
///     .outputs(&["probabilities"])
///     .checkpoint("train_log/max-validation_accuracy")
///     .build()?;
/// let probabilities = &predictor.predict(&[x])?[0];
/// # let _ = probabilities; Ok(()) }
/// ```
pub struct Predictor<'a> {
    raw: NonNull<sys::tpt_predictor>,
    outputs: usize,
    _marker: PhantomData<&'a ()>,
}

// SAFETY: tpt_predictor_run is safe from any number of threads at once on
// one predictor; the tower closure it calls is Send + Sync (Model::new);
// the outputs are new tensors owned by the caller.
unsafe impl Send for Predictor<'_> {}
unsafe impl Sync for Predictor<'_> {}

impl<'a> Predictor<'a> {
    /// A predictor of `model`: name its [`outputs`](PredictorBuilder::outputs),
    /// and optionally its [`inputs`](PredictorBuilder::inputs) and the
    /// [`checkpoint`](PredictorBuilder::checkpoint) to restore.
    pub fn builder<'m>(model: &'m Model<'a>) -> PredictorBuilder<'m, 'a> {
        PredictorBuilder { model, inputs: None, outputs: Vec::new(), checkpoint: None }
    }

    /// Runs the tower function on `inputs` (in the order of the builder's
    /// inputs, all with the same first dimension) and returns the outputs,
    /// in the order of the builder's outputs (`tpt_predictor_run`).
    ///
    /// # Panics
    /// Resumes a panic of the tower function.
    pub fn predict(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let ins: Vec<*const sys::tpt_tensor> = inputs.iter().map(|t| t.as_ptr()).collect();
        let mut outs: Vec<*mut sys::tpt_tensor> = vec![ptr::null_mut(); self.outputs];
        // SAFETY: a live predictor; outs has a slot per output; ins lives for the call.
        let st = panic::call_resuming(|| unsafe {
            sys::tpt_predictor_run(outs.as_mut_ptr(), self.raw.as_ptr(), ins.as_ptr(), ins.len())
        });
        // SAFETY: a status the library returned, owned here.
        unsafe { Error::check(st) }?;
        outs.into_iter().map(Tensor::wrap).collect()
    }
}

impl Drop for Predictor<'_> {
    fn drop(&mut self) {
        // SAFETY: owned, freed once.
        unsafe { sys::tpt_predictor_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Predictor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Predictor").field("outputs", &self.outputs).finish()
    }
}

/// The builder of a [`Predictor`] (tensorpack's PredictConfig).
#[must_use = "a PredictorBuilder does nothing until built"]
pub struct PredictorBuilder<'m, 'a> {
    model: &'m Model<'a>,
    inputs: Option<Vec<String>>,
    outputs: Vec<String>,
    checkpoint: Option<std::path::PathBuf>,
}

impl<'m, 'a> PredictorBuilder<'m, 'a> {
    /// The inputs [`Predictor::predict`] takes, by name, in its order
    /// (default: every input of the model's signature).
    pub fn inputs(mut self, names: &[&str]) -> Self {
        self.inputs = Some(names.iter().map(|s| (*s).to_owned()).collect());
        self
    }

    /// The outputs it returns, by name, in this order (at least one; "cost"
    /// is the cost).
    pub fn outputs(mut self, names: &[&str]) -> Self {
        self.outputs = names.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// A checkpoint file or directory (its latest), or a state_dict, whose
    /// variables are restored now (the model is built first), as
    /// [`Model::restore`] does with its defaults; e.g. a
    /// [`BestSaver`](crate::BestSaver)'s file. Default: the model's
    /// variables as they are.
    pub fn checkpoint(mut self, path: impl AsRef<std::path::Path>) -> Self {
        self.checkpoint = Some(path.as_ref().to_path_buf());
        self
    }

    /// Makes the predictor (`tpt_predictor_new`), building the model when it
    /// is not built. An unknown input name, an input left out whose shape
    /// past the batch is not known, no outputs or an unreadable checkpoint
    /// are errors that name them.
    ///
    /// # Panics
    /// Resumes a panic of the tower function (in the build call).
    pub fn build(self) -> Result<Predictor<'a>> {
        let outputs = cstrings(&self.outputs, "PredictorBuilder::outputs")?;
        let out_ptrs: Vec<*const c_char> = outputs.iter().map(|c| c.as_ptr()).collect();
        let inputs = self.inputs.as_deref().map(|i| cstrings(i, "PredictorBuilder::inputs")).transpose()?;
        let in_ptrs: Vec<*const c_char> = inputs.iter().flatten().map(|c| c.as_ptr()).collect();
        let checkpoint =
            self.checkpoint.as_deref().map(|p| path_to_cstring(p, "PredictorBuilder::checkpoint")).transpose()?;
        let mut o = sys::TPT_PREDICTOR_OPTIONS_INIT;
        o.input_names = ptrs_or_null(&in_ptrs);
        o.n_input_names = in_ptrs.len();
        o.checkpoint = checkpoint.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let mut out = ptr::null_mut();
        // SAFETY: a live model; every array and string lives for the call.
        let st = panic::call_resuming(|| unsafe {
            sys::tpt_predictor_new(&mut out, self.model.as_ptr(), ptrs_or_null(&out_ptrs), out_ptrs.len(), &o)
        });
        // SAFETY: a status the library returned, owned here.
        unsafe { Error::check(st) }?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(Code::Internal, "the library returned no predictor"))?;
        Ok(Predictor { raw, outputs: out_ptrs.len(), _marker: PhantomData })
    }
}
