//! Optimizers (`tpt_optimizer_*`): a kind by name and its hyper-parameters.

use crate::binding::Binding;
use crate::common::{call, Code, Error, Result};
use crate::cstr::with_cstr;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use tptrain_sys as sys;

/// An optimizer by kind, configured by hyper-parameter name
/// (`tpt_optimizer`); see the C header for the kinds and names ("sgd",
/// "adam", "adamw", "rmsprop", "adagrad"; "learning_rate", "momentum", ...,
/// "clip_global_norm", "accumulate_steps", "check_numerics").
///
/// The handle is shared: a model that uses it ([`Model::set_optimizer`](crate::Model::set_optimizer))
/// keeps its own reference, and changes made here later (a learning-rate
/// schedule in a callback) reach training. The library reads and writes the
/// hyper-parameters on the training thread without a lock, so an optimizer
/// stays on the thread that made it: it is neither `Send` nor `Sync` (and so
/// is [`Model`](crate::Model), which shares it).
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// send(tptrain::Optimizer::new("sgd").unwrap());
/// ```
pub struct Optimizer {
    raw: NonNull<sys::tpt_optimizer>,
    _marker: PhantomData<*mut ()>,
}

impl Optimizer {
    /// Wraps a new optimizer handle from a successful call.

    /// A new optimizer of `kind` with its default hyper-parameters
    /// (`tpt_optimizer_new`).
    pub fn new(kind: &str) -> Result<Optimizer> {
        let mut out = ptr::null_mut();
        with_cstr(kind, "kind", |k| call!(sys::tpt_optimizer_new(&mut out, k)))??;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(Code::Internal, "library returned no optimizer"))?;
        Ok(Optimizer { raw, _marker: PhantomData })
    }

    /// The raw handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::tpt_optimizer {
        self.raw.as_ptr()
    }

    /// Sets a hyper-parameter (`tpt_optimizer_set`).
    pub fn set(&self, name: &str, value: f64) -> Result<()> {
        with_cstr(name, "name", |n| call!(sys::tpt_optimizer_set(self.as_ptr(), n, value)))?
    }

    /// Reads a hyper-parameter (`tpt_optimizer_get`).
    pub fn get(&self, name: &str) -> Result<f64> {
        let mut v = 0f64;
        with_cstr(name, "name", |n| call!(sys::tpt_optimizer_get(&mut v, self.as_ptr(), n)))??;
        Ok(v)
    }

    /// Multiplies the gradients of the variables whose name matches
    /// `pattern` (an ECMAScript regular expression, searched) by `factor`,
    /// before clipping (`tpt_optimizer_scale_gradients`).
    pub fn scale_gradients(&self, pattern: &str, factor: f64) -> Result<()> {
        with_cstr(pattern, "pattern", |p| call!(sys::tpt_optimizer_scale_gradients(self.as_ptr(), p, factor)))?
    }
}

impl Drop for Optimizer {
    fn drop(&mut self) {
        // SAFETY: we own this reference.
        unsafe { sys::tpt_optimizer_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Optimizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Optimizer").field("learning_rate", &self.get("learning_rate").ok()).finish()
    }
}

impl Binding for Optimizer {
    type Raw = sys::tpt_optimizer;
    const WHAT: &'static str = "optimizer";
    unsafe fn from_raw_handle(raw: *mut sys::tpt_optimizer) -> Option<Optimizer> {
        NonNull::new(raw).map(|raw| Optimizer { raw, _marker: PhantomData })
    }
}
