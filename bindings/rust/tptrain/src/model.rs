//! Models (tensorpack's ModelDesc): an input signature, a tower function and
//! an optimizer; the tower the function sees; variables; optimizers; inputs.
//!
//! ```no_run
//! use tptrain::{nn, DType, Input, InputSpec, Model, Optimizer, Progress, Tensor, Trainer, TrainerOptions};
//!
//! let model = Model::new(
//!     &[InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])],
//!     |tower, inputs| {
//!         let (x, y) = (&inputs[0], &inputs[1]);
//!         let p = tower.fc("fc", x, 1, None)?;
//!         tower.set_cost(&nn::mse(&p, y)?)?;
//!         tower.set_output("prediction", &p)
//!     },
//! )?;
//! let opt = Optimizer::new("sgd")?;
//! opt.set("learning_rate", 0.1)?;
//! model.set_optimizer(&opt)?;
//! # let (x, y) = (Tensor::from_slice(&[0f32; 48], &[16, 3])?, Tensor::from_slice(&[0f32; 16], &[16, 1])?);
//! let options = TrainerOptions { max_epoch: 10, progress: Progress::Off, ..Default::default() };
//! let mut trainer = Trainer::new(&options)?;
//! trainer.set_model(&model, Input::from_tensors(&[&x, &y], 16, Some(42))?)?;
//! trainer.run()?;
//! let w = model.variable("fc/W")?;
//! # let _ = w;
//! # Ok::<(), tptrain::Error>(())
//! ```

use crate::binding::{make, Binding};
use crate::common::{call, Code, Error, Result};
use crate::cstr::{cstring, from_buf, path_to_cstring, with_cstr};
use crate::optimizer::Optimizer;
use crate::panic;
use crate::tensor::{DType, Tensor};
use crate::tower::{Tower, VariableOptions};
use crate::Flow;
use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::os::raw::{c_char, c_void};
use std::path::Path;
use std::ptr::{self, NonNull};
use tptrain_sys as sys;

/// One input of a model's signature (`tpt_input_spec`): a name, a dtype and
/// a shape whose entries are >= 1, or -1 for a free dimension (the batch).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InputSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
}

impl InputSpec {
    pub fn new(name: impl Into<String>, dtype: DType, shape: &[i64]) -> InputSpec {
        InputSpec { name: name.into(), dtype, shape: shape.to_vec() }
    }
}

/// An attribute of a module compiled by
/// [`Model::from_torchscript_source`](crate::Model::from_torchscript_source) (`tpt_torchscript_param`): a flat name
/// (a TorchScript identifier, `self.<name>` in the source), a shape whose
/// entries are >= 1, and how it is made; trainable ones become parameters,
/// model-only ones ([`VariableOptions::model_only`]) buffers.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchScriptParam {
    pub name: String,
    pub shape: Vec<i64>,
    pub options: VariableOptions,
}

impl TorchScriptParam {
    pub fn new(name: impl Into<String>, shape: &[i64], options: VariableOptions) -> TorchScriptParam {
        TorchScriptParam { name: name.into(), shape: shape.to_vec(), options }
    }
}

// ------------------------------------------------------------------ models

/// The C signature of `inputs`, and the names it points into (the specs
/// also point into `inputs`' shapes): keep both alive while it is used.
pub(crate) fn raw_specs(inputs: &[InputSpec]) -> Result<(Vec<CString>, Vec<sys::tpt_input_spec>)> {
    let names = inputs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            CString::new(s.name.as_str()).map_err(|_| {
                Error::new(Code::InvalidArgument, format!("inputs[{i}].name contains a NUL byte: {:?}", s.name))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // A CString's buffer does not move when the Vec does.
    let specs = inputs
        .iter()
        .zip(&names)
        .map(|(s, n)| sys::tpt_input_spec {
            name: n.as_ptr(),
            dtype: s.dtype.to_raw(),
            shape: s.shape.as_ptr(),
            ndim: s.shape.len(),
        })
        .collect();
    Ok((names, specs))
}

/// A model (`tpt_model`): an input signature, a tower function and an
/// optimizer. Freed on drop; trainers that use it keep their own reference
/// (and with it the tower closure).
///
/// `'a` bounds what the tower closure borrows. A model is neither `Send` nor
/// `Sync`: it shares its [`Optimizer`], whose hyper-parameters the library
/// reads on the training thread without a lock.
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let model = tptrain::Model::new(&[], |_, _| Ok(())).unwrap();
/// send(model); // a Model stays on its thread
/// ```
///
/// The tower closure must be `Send + Sync` (towers may run on several threads):
///
/// ```compile_fail
/// let calls = std::rc::Rc::new(std::cell::Cell::new(0));
/// let model = tptrain::Model::new(&[], move |_, _| {
///     calls.set(calls.get() + 1); // Rc and Cell are not Sync: use atomics
///     Ok(())
/// });
/// ```
pub struct Model<'a> {
    raw: NonNull<sys::tpt_model>,
    _marker: PhantomData<(&'a (), *mut ())>,
}

unsafe extern "C" fn tower_trampoline<F>(
    tower: *mut sys::tpt_tower,
    inputs: *const *const sys::tpt_tensor,
    n_inputs: usize,
    user_data: *mut c_void,
) -> *mut sys::tpt_status
where
    F: Fn(&mut Tower, &[Tensor]) -> Result<()> + Send + Sync,
{
    // Tensors made in this call are Rust values that free themselves (Drop):
    // the library's scope for the call hands them over.
    crate::tensor::own_call_tensors();
    // SAFETY: user_data is the boxed F, freed only with the model's last
    // reference; F is Sync, so shared calls from several threads (several
    // towers) and re-entered calls are fine.
    let f = &*user_data.cast::<F>();
    // SAFETY: Tensor is a repr(transparent) tpt_tensor *; the library lends
    // n_inputs live, non-NULL handles for the call and frees them itself; a
    // shared slice cannot move them out.
    let inputs: &[Tensor] =
        if n_inputs == 0 { &[] } else { std::slice::from_raw_parts(inputs.cast::<Tensor>(), n_inputs) };
    let tower = Tower::from_ptr(tower);
    let origin = || "the tower function".to_owned();
    let call = || f(tower, inputs).map(|()| Flow::Continue);
    if panic::entered() {
        panic::guard(&origin, call)
    } else {
        panic::guard_detached(&origin, call)
    }
}

impl<'a> Model<'a> {
    /// Makes a model with the signature `inputs` and the tower function
    /// `tower` (`tpt_model_new`).
    ///
    /// The tower function computes the model for one step from the step's
    /// input tensors (in signature order) and sets the cost
    /// ([`Tower::set_cost`]); it may publish named outputs. It is called once
    /// when the model is built (the build call, on zero-filled inputs, where
    /// variables are created), once per step of each training tower, and by
    /// [`infer`](Self::infer). It returns `Ok(())`, or an [`Error`] that
    /// fails the step with its code and message unchanged: the error that
    /// [`Trainer::run`](crate::Trainer::run), [`build`](Self::build) or
    /// [`infer`](Self::infer) returns. Its result type is this crate's
    /// [`Result<()>`](crate::Result), so a closure that uses `?` needs no
    /// annotation; an error of another type converts with `?` where this
    /// crate has a `From` for it, or with `.map_err(Error::wrap)`, which
    /// makes a [`Code::Callback`] error with the error as its
    /// [`source`](std::error::Error::source). To end training gracefully, it
    /// calls [`Tower::stop`] and returns `Ok(())`.
    ///
    /// It is `Fn + Send + Sync` because the library may call it from several
    /// threads at once (one per tower of a
    /// [`Trainer::set_towers`](crate::Trainer::set_towers) trainer;
    /// [`Tower::index`] says which) and re-enter it; keep mutable state in
    /// atomics or a `Mutex`. A panic fails the call that ran it, and is
    /// resumed by [`Trainer::run`](crate::Trainer::run), [`build`](Self::build)
    /// or [`infer`](Self::infer) once the C call has returned (on a thread of
    /// the library's own, only the message travels, in the error).
    pub fn new<F>(inputs: &[InputSpec], tower: F) -> Result<Model<'a>>
    where
        F: Fn(&mut Tower, &[Tensor]) -> Result<()> + Send + Sync + 'a,
    {
        let (_names, specs) = raw_specs(inputs)?;
        let user_data = Box::into_raw(Box::new(tower)).cast::<c_void>();
        // SAFETY: the specs point into `names` and `inputs`, alive for the
        // call (the signature is copied). The library owns user_data from
        // here on and calls drop_box exactly once, also on failure.
        make(|out| unsafe {
            sys::tpt_model_new(
                out,
                specs.as_ptr(),
                specs.len(),
                Some(tower_trampoline::<F>),
                user_data,
                Some(panic::drop_box::<F>),
            )
        })
    }

    /// Wraps a new model handle from a successful call.

    /// A model that does not own `raw`: a handle the library lends for a
    /// call (the init hook's), never freed through it. `None` for NULL.
    ///
    /// # Safety
    /// `raw` is NULL or a live model that outlives the result.
    pub(crate) unsafe fn borrowed(raw: *mut sys::tpt_model) -> Option<ManuallyDrop<Model<'a>>> {
        NonNull::new(raw).map(|raw| ManuallyDrop::new(Model { raw, _marker: PhantomData }))
    }

    /// Loads a TorchScript module saved with `torch.jit.save` (for example
    /// from Python) as a model with the signature `inputs`
    /// (`tpt_model_from_torchscript`). Its `forward(*inputs)` returns the
    /// cost, or a tuple `(cost, outputs)` with `outputs` a
    /// `Dict[str, Tensor]` of named outputs. Its parameters become trainable
    /// variables and its buffers model-only variables, named by their path
    /// with "/" ("fc1.weight" -> "fc1/weight"); they exist from the start
    /// (there is no build call). The module runs in train() mode in training
    /// towers and eval() mode in inference. A file that cannot be read or is
    /// not a TorchScript archive is a [`Code::Io`] error.
    pub fn from_torchscript(path: impl AsRef<Path>, inputs: &[InputSpec]) -> Result<Model<'a>> {
        let path = path_to_cstring(path.as_ref(), "path")?;
        let (_names, specs) = raw_specs(inputs)?;
        let mut out = ptr::null_mut();
        // SAFETY: the specs point into `_names` and `inputs`, alive for the
        // call (the signature is copied).
        call!(sys::tpt_model_from_torchscript(&mut out, path.as_ptr(), specs.as_ptr(), specs.len()))?;
        Model::wrap(out)
    }

    /// Compiles TorchScript source into a model with the signature `inputs`
    /// (`tpt_model_from_torchscript_source`): `source` defines
    /// `forward(self, ...)` (and any helper methods) over the attributes in
    /// `params`, which are created and initialised first, in order, from
    /// LibTorch's default generator ([`manual_seed`](crate::manual_seed)). Otherwise as
    /// [`from_torchscript`](Self::from_torchscript): the attributes are the
    /// model's variables from the start, and
    /// [`save_torchscript`](Self::save_torchscript) writes the module. Bad
    /// params and compile errors (with the compiler's message) are
    /// [`Code::InvalidArgument`] errors.
    ///
    /// ```no_run
    /// use tptrain::{DType, InputSpec, Model, TorchScriptParam, VariableOptions};
    ///
    /// let source = "
    /// def forward(self, x, y):
    ///     p = torch.matmul(x, self.w.t()) + self.b
    ///     return torch.mean((p - y) * (p - y)), {'prediction': p}
    /// ";
    /// let params = [
    ///     TorchScriptParam::new("w", &[1, 3], VariableOptions::default()),
    ///     TorchScriptParam::new("b", &[1], VariableOptions::zeros()),
    /// ];
    /// let inputs = [InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])];
    /// let model = Model::from_torchscript_source(source, &params, &inputs)?;
    /// # let _ = model;
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn from_torchscript_source(
        source: &str,
        params: &[TorchScriptParam],
        inputs: &[InputSpec],
    ) -> Result<Model<'a>> {
        let source = CString::new(source)
            .map_err(|_| Error::new(Code::InvalidArgument, "argument 'source' contains a NUL byte"))?;
        let names = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                CString::new(p.name.as_str()).map_err(|_| {
                    Error::new(Code::InvalidArgument, format!("params[{i}].name contains a NUL byte: {:?}", p.name))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let options: Vec<sys::tpt_variable_options> = params.iter().map(|p| p.options.to_raw()).collect();
        let raw: Vec<sys::tpt_torchscript_param> = params
            .iter()
            .zip(&names)
            .zip(&options)
            .map(|((p, n), o)| sys::tpt_torchscript_param {
                name: n.as_ptr(),
                shape: p.shape.as_ptr(),
                ndim: p.shape.len(),
                options: o,
            })
            .collect();
        let (_names, specs) = raw_specs(inputs)?;
        let mut out = ptr::null_mut();
        // SAFETY: `raw` points into `names`, `options` and `params`, and the
        // specs into `_names` and `inputs`, all alive for the call (both are
        // copied).
        call!(sys::tpt_model_from_torchscript_source(
            &mut out,
            source.as_ptr(),
            raw.as_ptr(),
            raw.len(),
            specs.as_ptr(),
            specs.len()
        ))?;
        Model::wrap(out)
    }

    /// Saves the TorchScript module of a model made by
    /// [`from_torchscript`](Self::from_torchscript) or
    /// [`from_torchscript_source`](Self::from_torchscript_source), with its
    /// current (trained) values, for `torch.jit.load` or `from_torchscript`
    /// (`tpt_model_save_torchscript`). [`Code::Unsupported`] for a model
    /// made from a Rust tower function.
    pub fn save_torchscript(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path_to_cstring(path.as_ref(), "path")?;
        call!(sys::tpt_model_save_torchscript(self.as_ptr(), path.as_ptr()))
    }

    /// The raw handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::tpt_model {
        self.raw.as_ptr()
    }

    /// Copies tensors into the model's variables by name (building it first
    /// when it is not built yet) (`tpt_model_restore`, tensorpack's SaverRestore) from a tptrain
    /// checkpoint (or a directory's latest), a `state_dict` saved by
    /// python3-torch (dotted names such as `fc.weight` read as `fc/weight`)
    /// or a TorchScript module. All or nothing: the error lists the missing
    /// and mismatched variables, and no variable changes. Returns how many
    /// variables were restored. `options`: `None` for the defaults, or
    /// `&RestoreOptions`.
    ///
    /// ```no_run
    /// # fn f(model: &tptrain::Model) -> tptrain::Result<()> {
    /// use tptrain::RestoreOptions;
    /// model.restore("train_log/max-validation_accuracy", None)?;
    /// model.restore("pretrained.pt", &RestoreOptions::new().ignore_missing(true))?;
    /// # Ok(()) }
    /// ```
    pub fn restore<'o>(
        &self,
        path: impl AsRef<Path>,
        options: impl Into<Option<&'o crate::RestoreOptions>>,
    ) -> Result<usize> {
        let defaults = crate::RestoreOptions::new();
        restore(self.as_ptr(), path.as_ref(), options.into().unwrap_or(&defaults))
    }

    /// Builds the model now if it was not built yet: the build call of the
    /// tower function, which creates the variables (`tpt_model_build`).
    /// Training and the first inference build it too.
    ///
    /// # Panics
    /// Resumes a panic of the tower function.
    pub fn build(&self) -> Result<()> {
        // SAFETY: a live model.
        let st = panic::call_resuming(|| unsafe { sys::tpt_model_build(self.as_ptr()) });
        unsafe { Error::check(st) }
    }

    /// A new handle on a variable: the same storage, so changes by training
    /// are seen through it (`tpt_model_variable`). [`Code::NotFound`] if
    /// there is no such variable.
    pub fn variable(&self, name: &str) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        with_cstr(name, "name", |n| call!(sys::tpt_model_variable(&mut out, self.as_ptr(), n)))??;
        Tensor::wrap(out)
    }

    /// What the model's optimizer keeps for trainable variable `variable`:
    /// its slot `slot` as PyTorch names them (`"momentum_buffer"`,
    /// `"exp_avg"`, `"exp_avg_sq"`, ...) or `"step"` (a 0-d i64 tensor), a
    /// copy (`tpt_model_optimizer_slot`). [`Code::NotFound`](crate::Code::NotFound) names the
    /// slots there are (none before the first update).
    pub fn optimizer_slot(&self, variable: &str, slot: &str) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        with_cstr(variable, "variable", |v| {
            with_cstr(slot, "slot", |s| call!(sys::tpt_model_optimizer_slot(&mut out, self.as_ptr(), v, s)))
        })???;
        Tensor::wrap(out)
    }

    /// Copies `value` into a variable (same shape; converted to its dtype),
    /// e.g. to initialise or restore it. Not while a step runs
    /// (`tpt_model_set_variable`).
    pub fn set_variable(&self, name: &str, value: &Tensor) -> Result<()> {
        with_cstr(name, "name", |n| call!(sys::tpt_model_set_variable(self.as_ptr(), n, value.as_ptr())))?
    }

    /// The variables' names in creation order (`tpt_model_variable_names`).
    pub fn variable_names(&self) -> Result<Vec<String>> {
        let mut buf = vec![0u8; 1024];
        loop {
            let mut needed = 0usize;
            // SAFETY: buf has buf.len() bytes.
            let st = unsafe {
                sys::tpt_model_variable_names(buf.as_mut_ptr().cast(), buf.len(), &mut needed, self.as_ptr())
            };
            match unsafe { Error::check(st) } {
                Ok(()) => return Ok(from_buf(&buf).lines().map(str::to_owned).collect()),
                Err(_) if needed > buf.len() => buf.resize(needed, 0),
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs the tower function as an inference tower (not training, no
    /// gradients, no variable created or changed) on `inputs`, and returns
    /// the outputs it published under `names`, in that order (the cost is
    /// "cost") (`tpt_model_infer`). Builds the model first if needed.
    ///
    /// A [`Tower::stop`] in the tower function comes back as an error whose
    /// code is `Code::Other(100)` (`TPT_STOP`) and whose message is the reason.
    ///
    /// # Panics
    /// Resumes a panic of the tower function.
    pub fn infer(&self, inputs: &[&Tensor], names: &[&str]) -> Result<Vec<Tensor>> {
        let ins: Vec<*const sys::tpt_tensor> = inputs.iter().map(|t| t.as_ptr()).collect();
        let cnames = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                CString::new(*n)
                    .map_err(|_| Error::new(Code::InvalidArgument, format!("names[{i}] contains a NUL byte: {n:?}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<*const c_char> = cnames.iter().map(|c| c.as_ptr()).collect();
        let mut outs: Vec<*mut sys::tpt_tensor> = vec![ptr::null_mut(); names.len()];
        // SAFETY: all arrays live for the call; outs has names.len() slots.
        let st = panic::call_resuming(|| unsafe {
            sys::tpt_model_infer(
                outs.as_mut_ptr(),
                self.as_ptr(),
                ins.as_ptr(),
                ins.len(),
                name_ptrs.as_ptr(),
                name_ptrs.len(),
            )
        });
        unsafe { Error::check(st) }?;
        outs.into_iter().map(Tensor::wrap).collect()
    }

    /// Sets the model's optimizer; the model takes its own reference, and
    /// `optimizer` stays usable (e.g. for schedules from callbacks). Before
    /// training (`tpt_model_set_optimizer`).
    pub fn set_optimizer(&self, optimizer: &Optimizer) -> Result<()> {
        call!(sys::tpt_model_set_optimizer(self.as_ptr(), optimizer.as_ptr()))
    }
}

impl Drop for Model<'_> {
    fn drop(&mut self) {
        let had = panic::pending();
        // SAFETY: we own this reference; the closure is dropped here if it
        // was the last one.
        unsafe { sys::tpt_model_free(self.raw.as_ptr()) };
        panic::resume_if_new(had);
    }
}

impl fmt::Debug for Model<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model").field("variables", &self.variable_names().ok()).finish()
    }
}

// ------------------------------------------------------------------ towers

impl<'a> Binding for Model<'a> {
    type Raw = sys::tpt_model;
    const WHAT: &'static str = "model";
    unsafe fn from_raw_handle(raw: *mut sys::tpt_model) -> Option<Model<'a>> {
        NonNull::new(raw).map(|raw| Model { raw, _marker: PhantomData })
    }
}

impl<'a> Model<'a> {
    /// Adds a train op to this model, before training
    /// (`tpt_model_add_train_op`). Its variables are resolved when training
    /// starts (an op with none fails then, naming it). Each op's optimizer
    /// state is saved in checkpoints under the op's name and restored on
    /// resume. A name the model has already, or an optimizer that is the
    /// model's or another op's, is a [`Code::InvalidArgument`] error.
    ///
    /// ```no_run
    /// # fn demo(model: &tptrain::Model<'_>) -> tptrain::Result<()> {
    /// use tptrain::TrainOp;
    /// model.add_train_op(&TrainOp::new("g_op").cost("g_loss").scope("gen/"))?;
    /// model.add_train_op(&TrainOp::new("d_op").cost("d_loss").scope("discrim/"))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_train_op(&self, op: &TrainOp<'_>) -> Result<()> {
        let name = cstring(&op.name, "name")?;
        let cost = op.cost.as_deref().map(|c| cstring(c, "cost")).transpose()?;
        let scope = op.scope.as_deref().map(|s| cstring(s, "scope")).transpose()?;
        let mut raw = sys::TPT_TRAIN_OP_INIT;
        raw.name = name.as_ptr();
        raw.cost = cost.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        raw.scope = scope.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        raw.optimizer = op.optimizer.map_or(ptr::null_mut(), Optimizer::as_ptr);
        // The strings live for the call (the library copies them); it takes
        // its own reference to the optimizer.
        call!(sys::tpt_model_add_train_op(self.as_ptr(), &raw))
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

/// One optimisation of a model (`tpt_train_op`; tensorpack's
/// `opt.minimize(cost, var_list)`), for [`Model::add_train_op`](crate::Model::add_train_op): a name
/// that run_steps run it by, the cost it minimises, the variables it
/// updates and its optimizer.
///
/// ```
/// use tptrain::{Optimizer, TrainOp};
///
/// // The tower's output "d_loss" over the variables under "discrim/", with
/// // a copy of the model's optimizer.
/// let d_op = TrainOp::new("d_op").cost("d_loss").scope("discrim/");
/// assert_eq!(d_op.name(), "d_op");
/// // The tower's cost over every trainable variable, with Adam of its own.
/// let adam = Optimizer::new("adam")?;
/// let all = TrainOp::new("all").optimizer(&adam);
/// # let _ = all;
/// # Ok::<(), tptrain::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a TrainOp does nothing until it is given to Model::add_train_op"]
pub struct TrainOp<'o> {
    pub(crate) name: String,
    pub(crate) cost: Option<String>,
    pub(crate) scope: Option<String>,
    pub(crate) optimizer: Option<&'o Optimizer>,
}

impl<'o> TrainOp<'o> {
    /// A train op named `name` (unique in the model) that minimises the
    /// tower's cost ([`Tower::set_cost`](crate::Tower::set_cost)) over every
    /// trainable variable with a copy of the model's optimizer; the setters
    /// change each part.
    pub fn new(name: &str) -> TrainOp<'o> {
        TrainOp { name: name.to_owned(), cost: None, scope: None, optimizer: None }
    }

    /// The one-element output of the tower function to minimise
    /// ([`Tower::set_output`](crate::Tower::set_output)), instead of the
    /// tower's cost. A step whose tower function did not set it fails with
    /// a [`Code::State`] error naming the op and the output.
    pub fn cost(mut self, output: &str) -> TrainOp<'o> {
        self.cost = Some(output.to_owned());
        self
    }

    /// Updates only the trainable variables whose names start with `prefix`
    /// ("discrim/"), tensorpack's `var_list`; default (and ""): all of them.
    /// A prefix that matches no variable fails when training starts, with a
    /// [`Code::InvalidArgument`] error naming the op and the prefix.
    pub fn scope(mut self, prefix: &str) -> TrainOp<'o> {
        self.scope = Some(prefix.to_owned());
        self
    }

    /// An optimizer of the op's own, whose hyper-parameters it follows
    /// (the model takes its own reference: `optimizer` stays usable). It may
    /// not be the model's nor another op's ([`Code::InvalidArgument`]).
    /// Default: a copy of the model's optimizer with slots of its own, that
    /// follows the model's hyper-parameters (so a schedule of the model's
    /// learning rate moves it too).
    pub fn optimizer(mut self, optimizer: &'o Optimizer) -> TrainOp<'o> {
        self.optimizer = Some(optimizer);
        self
    }

    /// The op's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}
