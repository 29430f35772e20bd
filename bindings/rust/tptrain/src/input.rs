//! Input sources (`include/tptrain/input.h`): what feeds the towers their
//! batches: in-memory tensors, a feed closure, a dataflow (queued or fed),
//! staging onto a device, dummy data.

use crate::binding::{make, Binding};
use crate::common::{call, Code, Error, Result};
use crate::cstr::with_cstr;
use crate::dataflow::DataFlow;
use crate::panic;
use crate::tensor::Tensor;
use crate::Flow;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};
use tptrain_sys as sys;

/// Where a trainer's batches come from (`tpt_input`); given to
/// [`Trainer::set_model`](crate::Trainer::set_model), or freed on drop.
/// `'a` bounds what a feed closure borrows.
pub struct Input<'a> {
    raw: NonNull<sys::tpt_input>,
    _marker: PhantomData<(&'a (), *mut ())>,
}

unsafe extern "C" fn feed_trampoline<F>(
    batch: *mut *mut sys::tpt_tensor,
    n_inputs: usize,
    user_data: *mut c_void,
) -> *mut sys::tpt_status
where
    F: FnMut(usize) -> Result<Option<Vec<Tensor>>>,
{
    // SAFETY: user_data is the boxed F; the library calls the feed on the
    // training thread, one call at a time.
    let f = &mut *user_data.cast::<F>();
    panic::guard(&|| "the input feed".to_owned(), || match f(n_inputs)? {
        None => Ok(Flow::stop(END_OF_DATA)),
        Some(tensors) if tensors.len() != n_inputs => Err(Error::new(
            Code::InvalidArgument,
            format!("the input feed returned {} tensors for {} inputs", tensors.len(), n_inputs),
        )),
        Some(tensors) => {
            for (i, t) in tensors.into_iter().enumerate() {
                // SAFETY: batch has n_inputs slots; the library takes the handles.
                *batch.add(i) = t.into_raw();
            }
            Ok(Flow::Continue)
        }
    })
}

/// The stop reason when a feed closure says its data ended.
pub const END_OF_DATA: &str = "end of data";

impl<'a> Input<'a> {
    /// Batches of `batch_size` rows (dimension 0) of in-memory tensors,
    /// repeated forever; the last incomplete batch of each pass is dropped.
    /// `shuffle_seed`: `Some(seed)` shuffles each pass (seeded), `None` keeps
    /// the order. All tensors need the same number of rows; they are shared,
    /// not copied. Its size (batches per pass) is the default steps_per_epoch
    /// (`tpt_input_from_tensors`).
    pub fn from_tensors(tensors: &[&Tensor], batch_size: i64, shuffle_seed: Option<u64>) -> Result<Input<'a>> {
        let ptrs: Vec<*const sys::tpt_tensor> = tensors.iter().map(|t| t.as_ptr()).collect();
        let mut out = ptr::null_mut();
        call!(sys::tpt_input_from_tensors(
            &mut out,
            ptrs.as_ptr(),
            ptrs.len(),
            batch_size,
            shuffle_seed.is_some() as i32,
            shuffle_seed.unwrap_or(0)
        ))?;
        Input::wrap(out)
    }

    /// An input that calls `feed(n_inputs)` on the training thread for every
    /// step (tensorpack's FeedInput; `tpt_input_from_feed`). It returns
    /// `Ok(Some(tensors))`, one per input of the signature,
    /// `Ok(None)` at the end of the data (training stops gracefully, with the
    /// stop reason [`END_OF_DATA`]), or an [`Error`] that fails training (as
    /// [`Model::new`](crate::Model::new)'s tower function does). A panic fails
    /// training too and is resumed by [`Trainer::run`](crate::Trainer::run).
    pub fn from_feed<F>(feed: F) -> Result<Input<'a>>
    where
        F: FnMut(usize) -> Result<Option<Vec<Tensor>>> + 'a,
    {
        let user_data = Box::into_raw(Box::new(feed)).cast::<c_void>();
        // SAFETY: the library owns user_data from here on, also on failure.
        make(|out| unsafe {
            sys::tpt_input_from_feed(out, Some(feed_trampoline::<F>), user_data, Some(panic::drop_box::<F>))
        })
    }

    /// Gives up ownership of the handle (for a C function that takes it).
    pub fn into_raw(self) -> *mut sys::tpt_input {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }
}

impl Drop for Input<'_> {
    fn drop(&mut self) {
        let had = panic::pending();
        // SAFETY: we own the input; a feed closure is dropped here.
        unsafe { sys::tpt_input_free(self.raw.as_ptr()) };
        panic::resume_if_new(had);
    }
}

impl fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Input").field("raw", &self.raw).finish()
    }
}

/// How a dataflow feeds the towers (`tpt_input_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum InputKind {
    /// tensorpack's QueueInput: a background thread fills a bounded queue.
    #[default]
    Queue,
    /// tensorpack's FeedInput: the training thread reads the dataflow.
    Feed,
}

impl InputKind {
    pub fn to_raw(self) -> sys::tpt_input_kind {
        match self {
            InputKind::Queue => sys::TPT_INPUT_QUEUE,
            InputKind::Feed => sys::TPT_INPUT_FEED,
        }
    }
}

/// Options of [`Input::from_dataflow`](crate::Input::from_dataflow) (`tpt_input_options`); `Default`
/// gives the C defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InputOptions {
    pub kind: InputKind,
    /// Queue capacity in batches (default 50).
    pub capacity: i64,
    /// Pass after pass, forever (default true); false: the end of the first
    /// pass ends training gracefully.
    pub repeat: bool,
}

impl Default for InputOptions {
    fn default() -> InputOptions {
        let c = sys::TPT_INPUT_OPTIONS_INIT;
        InputOptions { kind: InputKind::Queue, capacity: c.capacity, repeat: c.repeat != 0 }
    }
}

impl InputOptions {
    pub(crate) fn to_raw(&self) -> sys::tpt_input_options {
        let mut o = sys::TPT_INPUT_OPTIONS_INIT;
        o.kind = self.kind.to_raw();
        o.capacity = self.capacity;
        o.repeat = self.repeat as i32;
        o
    }
}

impl<'a> Input<'a> {
    /// An input fed by a dataflow of batches, its components in signature
    /// order (usually a [`DataFlow::batch`](crate::DataFlow::batch)) (`tpt_input_from_dataflow`). The
    /// input keeps a reference to `df` and resets it at SETUP; the queue's
    /// thread runs from BEFORE_TRAIN to AFTER_TRAIN and puts the scalar
    /// "QueueInput/queue_size" every step. A dataflow error ends training
    /// with its message; a pass that yields nothing ends it gracefully. Its
    /// size (the dataflow's) is the default steps_per_epoch. `options`:
    /// `None` for the defaults (a queue of 50 batches that repeats), or an
    /// [`InputOptions`].
    ///
    /// ```
    /// use tptrain::{DataFlow, Input, InputKind, InputOptions, Order, Remainder, Tensor};
    /// let x = Tensor::from_slice(&[0f32; 8], &[4, 2])?;
    /// let batches = DataFlow::from_tensors(&[&x], Order::Shuffled)?.batch(2, Remainder::Drop)?;
    /// let queued = Input::from_dataflow(&batches, None)?;
    /// # drop(queued);
    /// let batches = DataFlow::from_tensors(&[&x], Order::Sequential)?.batch(2, Remainder::Drop)?;
    /// let fed = Input::from_dataflow(&batches, &InputOptions { kind: InputKind::Feed, ..Default::default() })?;
    /// # drop(fed);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn from_dataflow<'o>(df: &DataFlow<'a>, options: impl Into<Option<&'o InputOptions>>) -> Result<Input<'a>> {
        let o = options.into().copied().unwrap_or_default().to_raw();
        let mut out = ptr::null_mut();
        call!(sys::tpt_input_from_dataflow(&mut out, df.as_ptr(), &o))?;
        Input::wrap(out)
    }

    /// tensorpack's StagingInput: copies the next batch of this input to
    /// `device` (`None`: the tower's device) ahead of time; a plain
    /// pass-through on the CPU (`tpt_input_staging`). Takes this input, also
    /// on failure.
    pub fn staging(self, device: Option<&str>) -> Result<Input<'a>> {
        let had = panic::pending();
        let mut out = ptr::null_mut();
        let inner = self.into_raw();
        let r = match device {
            // SAFETY: the library takes `inner` in every case.
            Some(d) => with_cstr(d, "device", |d| unsafe { sys::tpt_input_staging(&mut out, inner, d) }),
            None => Ok(unsafe { sys::tpt_input_staging(&mut out, inner, ptr::null()) }),
        };
        let st = match r {
            Ok(st) => st,
            Err(e) => {
                // A NUL in the device: not given to C, so freed here.
                unsafe { sys::tpt_input_free(inner) };
                panic::resume_if_new(had);
                return Err(e);
            }
        };
        panic::resume_if_new(had);
        unsafe { Error::check(st) }?;
        Input::wrap(out)
    }

    /// tensorpack's DummyConstantInput: the same zero tensors of the
    /// signature's shapes (free dimensions become `batch_size`) every step,
    /// to benchmark a model without data (`tpt_input_dummy`).
    pub fn dummy(batch_size: i64) -> Result<Input<'a>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_input_dummy(&mut out, batch_size))?;
        Input::wrap(out)
    }
}

impl<'a> Binding for Input<'a> {
    type Raw = sys::tpt_input;
    const WHAT: &'static str = "input";
    unsafe fn from_raw_handle(raw: *mut sys::tpt_input) -> Option<Input<'a>> {
        NonNull::new(raw).map(|raw| Input { raw, _marker: PhantomData })
    }
}
