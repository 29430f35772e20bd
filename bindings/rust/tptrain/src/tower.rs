//! Models' towers: what a tower function sees (`tpt_tower_*`): its index,
//! name and device, the cost and outputs it publishes, scopes and variables.

use crate::binding::Binding;
use crate::common::{call, Result};
use crate::cstr::{from_buf, with_cstr};
use crate::panic;
use crate::tensor::{DType, Tensor};
use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::ptr::{self};
use tptrain_sys as sys;

/// Initializers of variables (`tpt_init`); their parameters are
/// [`VariableOptions::a`] and [`VariableOptions::b`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Init {
    Zeros,
    /// The constant `a`.
    Constant,
    /// Uniform in `[a, b)`.
    Uniform,
    /// Mean `a`, standard deviation `b`.
    Normal,
    /// Mean `a`, standard deviation `b`, redrawn beyond 2 `b`.
    TruncatedNormal,
    /// Xavier; `a`: the gain (1 when 0).
    GlorotUniform,
    GlorotNormal,
    /// Kaiming, fan_in, ReLU gain; `a`: the negative slope.
    HeUniform,
    HeNormal,
}

impl Init {
    pub fn to_raw(self) -> sys::tpt_init {
        match self {
            Init::Zeros => sys::TPT_INIT_ZEROS,
            Init::Constant => sys::TPT_INIT_CONSTANT,
            Init::Uniform => sys::TPT_INIT_UNIFORM,
            Init::Normal => sys::TPT_INIT_NORMAL,
            Init::TruncatedNormal => sys::TPT_INIT_TRUNCATED_NORMAL,
            Init::GlorotUniform => sys::TPT_INIT_GLOROT_UNIFORM,
            Init::GlorotNormal => sys::TPT_INIT_GLOROT_NORMAL,
            Init::HeUniform => sys::TPT_INIT_HE_UNIFORM,
            Init::HeNormal => sys::TPT_INIT_HE_NORMAL,
        }
    }
}

/// Options of a variable (`tpt_variable_options`); `Default` gives the C
/// defaults: f32, Glorot uniform, trainable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VariableOptions {
    /// Floating dtypes only when trainable.
    pub dtype: DType,
    pub init: Init,
    /// Trained (default); false: model-only (saved, not trained).
    pub trainable: bool,
    /// Initializer parameters (see [`Init`]).
    pub a: f64,
    pub b: f64,
}

impl Default for VariableOptions {
    fn default() -> VariableOptions {
        VariableOptions { dtype: DType::F32, init: Init::GlorotUniform, trainable: true, a: 0.0, b: 0.0 }
    }
}

impl VariableOptions {
    /// `init` with parameters `a` and `b`, other options default.
    pub fn init(init: Init, a: f64, b: f64) -> VariableOptions {
        VariableOptions { init, a, b, ..Default::default() }
    }
    /// Zero-filled.
    pub fn zeros() -> VariableOptions {
        VariableOptions::init(Init::Zeros, 0.0, 0.0)
    }
    /// Filled with `value`.
    pub fn constant(value: f64) -> VariableOptions {
        VariableOptions::init(Init::Constant, value, 0.0)
    }
    /// Uniform in `[low, high)`.
    pub fn uniform(low: f64, high: f64) -> VariableOptions {
        VariableOptions::init(Init::Uniform, low, high)
    }
    /// Normal with `mean` and standard deviation `std`.
    pub fn normal(mean: f64, std: f64) -> VariableOptions {
        VariableOptions::init(Init::Normal, mean, std)
    }
    /// The same options with another dtype.
    pub fn with_dtype(self, dtype: DType) -> VariableOptions {
        VariableOptions { dtype, ..self }
    }
    /// The same options for a model-only variable (saved, not trained).
    pub fn model_only(self) -> VariableOptions {
        VariableOptions { trainable: false, ..self }
    }

    pub(crate) fn to_raw(self) -> sys::tpt_variable_options {
        let mut o = sys::TPT_VARIABLE_OPTIONS_INIT;
        o.dtype = self.dtype.to_raw();
        o.init = self.init.to_raw();
        o.trainable = self.trainable as i32;
        o.a = self.a;
        o.b = self.b;
        o
    }
}

/// What a tower function gets: the context of one call (`tpt_tower`),
/// borrowed for that call. Like [`Context`](crate::Context) it is a
/// zero-sized reference type whose address is the C handle. Layers with
/// variables are methods (see the [`nn`](crate::nn) module for the others).
pub struct Tower {
    _opaque: PhantomData<(UnsafeCell<()>, *mut ())>,
}

/// Reads a flag of a tower; it cannot fail on a live tower.
fn flag(f: unsafe extern "C" fn(*mut i32, *const sys::tpt_tower) -> *mut sys::tpt_status, t: &Tower) -> i32 {
    let mut v = 0i32;
    // SAFETY: a live tower; the status (NULL in practice) is freed.
    let st = unsafe { f(&mut v, t.as_ptr()) };
    debug_assert!(st.is_null());
    unsafe { sys::tpt_status_free(st) };
    v
}

/// Reads a short text of a tower.
fn text(
    f: unsafe extern "C" fn(*mut c_char, usize, *const sys::tpt_tower) -> *mut sys::tpt_status,
    t: &Tower,
) -> String {
    let mut buf = [0u8; 256];
    // SAFETY: a live tower; buf has 256 bytes (names and devices are short).
    let st = unsafe { f(buf.as_mut_ptr().cast(), buf.len(), t.as_ptr()) };
    debug_assert!(st.is_null());
    unsafe { sys::tpt_status_free(st) };
    from_buf(&buf)
}

impl Tower {
    /// # Safety
    /// `raw` is a live tower that outlives `'t`.
    pub(crate) unsafe fn from_ptr<'t>(raw: *mut sys::tpt_tower) -> &'t mut Tower {
        &mut *raw.cast::<Tower>()
    }

    /// The raw handle, valid during the tower function call.
    pub fn as_ptr(&self) -> *mut sys::tpt_tower {
        self as *const Tower as *mut sys::tpt_tower
    }

    /// A training tower (false: inference) (`tpt_tower_is_training`).
    pub fn is_training(&self) -> bool {
        flag(sys::tpt_tower_is_training, self) != 0
    }

    /// The build call: zero-filled inputs, no gradients; layers skip their
    /// state updates (`tpt_tower_is_building`).
    pub fn is_building(&self) -> bool {
        flag(sys::tpt_tower_is_building, self) != 0
    }

    /// The index among the training towers (0 for inference) (`tpt_tower_index`).
    pub fn index(&self) -> i32 {
        flag(sys::tpt_tower_index, self)
    }

    /// "tower0", "tower1", ... or "InferenceTower" ("InferenceTower0",
    /// "InferenceTower1", ... for the towers of a data-parallel
    /// [`InferenceRunner`](crate::InferenceRunner::towers)) (`tpt_tower_name`).
    pub fn name(&self) -> String {
        text(sys::tpt_tower_name, self)
    }

    /// The tower's device, e.g. "cpu" (`tpt_tower_device`).
    pub fn device(&self) -> String {
        text(sys::tpt_tower_device, self)
    }

    /// Whether [`variable`](Self::variable) may create variables in this
    /// call (the build call) (`tpt_tower_can_create_variables`).
    pub fn can_create_variables(&self) -> bool {
        flag(sys::tpt_tower_can_create_variables, self) != 0
    }

    /// Ends training gracefully once this call of the tower function returns
    /// `Ok(())` (tensorpack's `StopTraining` from inside the model): the step
    /// reports a stop with `reason`, AFTER_TRAIN runs and
    /// [`Trainer::run`](crate::Trainer::run) returns
    /// [`RunOutcome::Stopped(reason)`](crate::RunOutcome::Stopped). The first
    /// call in a tower call wins; an error returned by the tower function
    /// wins over it. In [`Model::infer`](crate::Model::infer) the stop comes back as an error
    /// whose code is `Code::Other(100)` (`TPT_STOP`) and whose message is
    /// the reason.
    ///
    /// ```no_run
    /// # use tptrain::{InputSpec, Model};
    /// # use std::sync::atomic::{AtomicUsize, Ordering};
    /// let steps = AtomicUsize::new(0);
    /// let model = Model::new(&[], |tower, _inputs| -> tptrain::Result<()> {
    ///     if steps.fetch_add(1, Ordering::Relaxed) == 100 {
    ///         tower.stop("100 calls are enough");
    ///         return Ok(());
    ///     }
    ///     // ... layers, tower.set_cost(...)
    ///     Ok(())
    /// })?;
    /// # drop(model);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn stop(&mut self, reason: impl Into<String>) {
        panic::note_stop(reason.into());
    }

    /// Sets the cost (a floating tensor of one element) that training
    /// minimises; a training tower must set it (`tpt_tower_set_cost`).
    pub fn set_cost(&mut self, cost: &Tensor) -> Result<()> {
        call!(sys::tpt_tower_set_cost(self.as_ptr(), cost.as_ptr()))
    }

    /// Publishes a named output: a step output for callbacks
    /// ([`Context::output`](crate::Context::output)) and an inference result
    /// (`tpt_tower_set_output`).
    pub fn set_output(&mut self, name: &str, value: &Tensor) -> Result<()> {
        with_cstr(name, "name", |n| call!(sys::tpt_tower_set_output(self.as_ptr(), n, value.as_ptr())))?
    }

    /// Opens a name scope: variables created inside get "scope/" in front of
    /// their name (`tpt_tower_push_scope`). See also [`scope`](Self::scope).
    pub fn push_scope(&mut self, scope: &str) -> Result<()> {
        with_cstr(scope, "scope", |s| call!(sys::tpt_tower_push_scope(self.as_ptr(), s)))?
    }

    /// Opens a name scope whose variables this call may use more than once
    /// (`tpt_tower_push_reuse_scope`, tensorpack's
    /// `auto_reuse_variable_scope`): a net applied twice, such as a GAN's
    /// discriminator on real and on generated images, shares its variables.
    /// See also [`reuse_scope`](Self::reuse_scope).
    pub fn push_reuse_scope(&mut self, scope: &str) -> Result<()> {
        with_cstr(scope, "scope", |s| call!(sys::tpt_tower_push_reuse_scope(self.as_ptr(), s)))?
    }

    /// Closes the innermost name scope (`tpt_tower_pop_scope`).
    pub fn pop_scope(&mut self) -> Result<()> {
        call!(sys::tpt_tower_pop_scope(self.as_ptr()))
    }

    /// Runs `f` inside the name scope `scope`, closed again when `f` returns
    /// (also with an error).
    pub fn scope<R>(&mut self, scope: &str, f: impl FnOnce(&mut Tower) -> Result<R>) -> Result<R> {
        self.push_scope(scope)?;
        let r = f(self);
        let popped = self.pop_scope();
        let r = r?;
        popped?;
        Ok(r)
    }

    /// Runs `f` inside the reuse scope `scope` (see
    /// [`push_reuse_scope`](Self::push_reuse_scope)), closed again when `f`
    /// returns (also with an error). Call it once per application of the net:
    ///
    /// ```no_run
    /// # use tptrain::{nn::LayerOptions, Tensor, Tower};
    /// // A linear discriminator: its variables are discrim/fc/W and discrim/fc/b.
    /// fn discriminator(t: &mut Tower, x: &Tensor) -> tptrain::Result<Tensor> {
    ///     t.fc("fc", x, 1, &LayerOptions::default())
    /// }
    /// # fn demo(tower: &mut Tower, real: &Tensor, fake: &Tensor) -> tptrain::Result<()> {
    /// let real_logit = tower.reuse_scope("discrim", |t| discriminator(t, real))?;
    /// let fake_logit = tower.reuse_scope("discrim", |t| discriminator(t, fake))?; // the same variables
    /// # Ok(())
    /// # }
    /// ```
    pub fn reuse_scope<R>(&mut self, scope: &str, f: impl FnOnce(&mut Tower) -> Result<R>) -> Result<R> {
        self.push_reuse_scope(scope)?;
        let r = f(self);
        let popped = self.pop_scope();
        let r = r?;
        popped?;
        Ok(r)
    }

    /// Gets the variable `name` (prefixed by the current scopes), creating it
    /// in the build call: a new handle on the variable itself (trainable
    /// variables carry gradients) (`tpt_tower_variable`). Creating one
    /// outside the build call, a shape or dtype that differs from the
    /// existing variable, and one name used twice in one call (outside a
    /// [`reuse_scope`](Self::reuse_scope)) are errors. `options`: `None` for
    /// the defaults (f32, Glorot uniform, trainable), or a
    /// [`VariableOptions`] (`&VariableOptions::zeros()`, ...).
    pub fn variable<'o>(
        &mut self,
        name: &str,
        shape: &[i64],
        options: impl Into<Option<&'o VariableOptions>>,
    ) -> Result<Tensor> {
        let o = options.into().copied().unwrap_or_default().to_raw();
        let mut out = ptr::null_mut();
        with_cstr(name, "name", |n| {
            call!(sys::tpt_tower_variable(&mut out, self.as_ptr(), n, shape.as_ptr(), shape.len(), &o))
        })??;
        Tensor::wrap(out)
    }
}

impl fmt::Debug for Tower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tower")
            .field("name", &self.name())
            .field("index", &self.index())
            .field("training", &self.is_training())
            .field("building", &self.is_building())
            .finish()
    }
}

// ------------------------------------------------------------------ optimizers
