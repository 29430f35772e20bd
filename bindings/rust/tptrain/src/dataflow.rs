//! Dataflows: the input pipeline (tensorpack's DataFlow library).
//!
//! A [`DataFlow`](crate::DataFlow) yields datapoints, each a list of components (tensors; a
//! scalar is a 0-d tensor), pass after pass: [`DataFlow::iter`](crate::DataFlow::iter) gives one
//! pass. Sources read tensors in memory ([`DataFlow::from_tensors`](crate::DataFlow::from_tensors)), IDX
//! files ([`DataFlow::from_idx`](crate::DataFlow::from_idx), [`DataFlow::mnist`](crate::DataFlow::mnist)), files through a
//! decoding closure ([`DataFlow::from_files`](crate::DataFlow::from_files)), or Rust code
//! ([`DataFlow::from_fn`](crate::DataFlow::from_fn), [`DataFlow::from_iter`](crate::DataFlow::from_iter), [`DataFlow::from_source`](crate::DataFlow::from_source),
//! and [`DataFlow::from_stateful_source`](crate::DataFlow::from_stateful_source) for a source that saves its
//! position with the pipeline's state); combinators batch, map (also on
//! several threads), prefetch, shuffle, cache, repeat, concatenate, join and
//! augment them. A dataflow of batches feeds a trainer through
//! [`Input::from_dataflow`](crate::Input::from_dataflow) or
//! [`TrainConfig::from_dataflow`](crate::TrainConfig::from_dataflow), and an
//! inference runner ([`Callback::inference_runner`]) validates a model on one.
//!
//! ```
//! use tptrain::ops::{call1, Arg};
//! use tptrain::{DataFlow, Order, Remainder, Tensor};
//!
//! let x = Tensor::from_slice(&[0f32, 1., 2., 3., 4., 5., 6., 7.], &[4, 2])?;
//! let y = Tensor::from_slice(&[0i64, 1, 0, 1], &[4])?;
//! let rows = DataFlow::from_tensors(&[&x, &y], Order::Sequential)?;
//! let doubled = rows.map_component(0, |x| Ok(Some(call1("aten::mul", &[Arg::Tensor(x), Arg::Double(2.0)])?)))?;
//! let batches = doubled.batch(2, Remainder::Drop)?;
//! assert_eq!(batches.size(), Some(2));
//! let first = batches.iter().next().unwrap()?;
//! assert_eq!(first[0].to_vec::<f32>()?, vec![0., 2., 4., 6.]);
//! assert_eq!(first[1].shape(), vec![2]);
//! # Ok::<(), tptrain::Error>(())
//! ```
//!
//! Handles are shared: a combinator keeps its own reference to the dataflows
//! it reads, so they may be dropped at any time; but a dataflow has one
//! consumer (a second combinator or input reading it, or iterating it once it
//! has one, is an error).
//!
//! Closures run where the library iterates: a source's and a map's on the
//! thread that iterates the dataflow (which is a background thread under
//! [`prefetch`](DataFlow::prefetch), a queue input or a parallel map), a
//! parallel map's and a threaded decoder's on several worker threads at once.
//! So they are `Send` (and `Sync` where several threads share them). They
//! return this crate's [`Result`](crate::Result), so a closure that uses `?`
//! needs no annotation: its [`Error`] reaches the consumer with its code and
//! message unchanged. `?` converts an [`std::io::Error`] or a number's parse
//! error, and `.map_err(Error::wrap)` any other error, into a
//! [`Code::Callback`] (or [`Code::Io`], ...) error with the error itself as
//! the [`source`](std::error::Error::source) (see [`Error::wrap`]). (A
//! [`DataFlow::from_iter`](crate::DataFlow::from_iter) item may be a
//! `Result` of any error type.) A panic fails the call that ran
//! the closure as well; on the thread of a Rust call that iterates
//! ([`DataFlow::iter`](crate::DataFlow::iter), [`DataFlow::next_into`](crate::DataFlow::next_into), [`DataFlow::reset_state`](crate::DataFlow::reset_state),
//! [`DataFlow::get_state`](crate::DataFlow::get_state), [`Trainer::run`](crate::Trainer::run) with a
//! feed input) it is resumed
//! once the C call has returned; on a thread of the library's own, only its
//! message travels, in a [`Code::Callback`] error ("panic in the map function:
//! ...").
//!
//! [`DataFlow::get_state`](crate::DataFlow::get_state) saves the pipeline's state (generators, seeds and
//! positions, mid-pass too) and [`DataFlow::set_state`](crate::DataFlow::set_state) restores it into a
//! pipeline of the same shape. A Rust source's position is part of it only
//! if the source says how to save and restore it: a [`StatefulSource`] made
//! into a dataflow with [`DataFlow::from_stateful_source`](crate::DataFlow::from_stateful_source). The other Rust
//! sources ([`from_source`](DataFlow::from_source), `from_fn`, `from_iter`)
//! have none: restored, they are reset with the seed they had and start
//! their first pass again, and a state that holds a source's position is
//! refused by them.

use crate::binding::{make, Binding};
use crate::common::{call, Code, Error, Result};
use crate::cstr::{path_to_cstring, with_cstr};
use crate::model::{raw_specs, InputSpec};
use crate::panic;
use crate::tensor::Tensor;
use crate::Flow;
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::os::raw::{c_char, c_void};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Mutex;
use tptrain_sys as sys;

/// The reason of the `TPT_STOP` a source returns at the end of a pass.
const END_OF_PASS: &str = "end of the pass";

/// Runs a closure for C on whatever thread the library chose: a panic is
/// kept for the Rust call that waits on this thread, if any (see
/// [`panic::entered`]); otherwise only its message travels.
fn guarded(origin: &dyn Fn() -> String, f: impl FnOnce() -> Result<Flow>) -> *mut sys::tpt_status {
    if panic::entered() {
        panic::guard(origin, f)
    } else {
        panic::guard_detached(origin, f)
    }
}

// ------------------------------------------------------------------ datapoints

/// A datapoint lent by the library (`tpt_datapoint`): what a map closure,
/// a decoder and a source fill in. Like [`Tower`](crate::Tower) it is a
/// zero-sized reference type whose address is the C handle, only ever seen
/// as `&DatapointRef` / `&mut DatapointRef`, so a closure cannot keep it or
/// trade it for another. An owned [`Datapoint`] derefs to it.
///
/// Its components are tensor handles shared with the datapoint: setting one
/// does not copy it.
pub struct DatapointRef {
    _opaque: PhantomData<(UnsafeCell<()>, *mut ())>,
}

impl DatapointRef {
    /// # Safety
    /// `raw` is a live datapoint that outlives `'t`.
    pub(crate) unsafe fn from_ptr<'t>(raw: *mut sys::tpt_datapoint) -> &'t mut DatapointRef {
        &mut *raw.cast::<DatapointRef>()
    }

    /// The raw handle.
    pub fn as_ptr(&self) -> *mut sys::tpt_datapoint {
        self as *const DatapointRef as *mut sys::tpt_datapoint
    }

    /// The number of components (`tpt_datapoint_size`).
    pub fn len(&self) -> usize {
        // SAFETY: a live datapoint.
        unsafe { sys::tpt_datapoint_size(self.as_ptr()) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new handle on component `index` ([`Code::NotFound`] past the end)
    /// (`tpt_datapoint_get`).
    pub fn get(&self, index: usize) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_datapoint_get(&mut out, self.as_ptr(), index))?;
        Tensor::wrap(out)
    }

    /// Sets component `index` to `value` (shared, not copied); `index ==
    /// len()` appends (`tpt_datapoint_set`).
    pub fn set(&mut self, index: usize, value: &Tensor) -> Result<()> {
        call!(sys::tpt_datapoint_set(self.as_ptr(), index, value.as_ptr()))
    }

    /// Appends a component (shared, not copied).
    pub fn push(&mut self, value: &Tensor) -> Result<()> {
        self.set(self.len(), value)
    }

    /// Keeps the first `len` components (`tpt_datapoint_truncate`). A map
    /// closure that leaves the datapoint empty drops it.
    pub fn truncate(&mut self, len: usize) -> Result<()> {
        call!(sys::tpt_datapoint_truncate(self.as_ptr(), len))
    }

    /// Removes every component (a map closure that does this drops the
    /// datapoint).
    pub fn clear(&mut self) -> Result<()> {
        self.truncate(0)
    }

    /// In a map closure ([`DataFlow::map`], [`DataFlow::parallel_map`]): a
    /// seed for this datapoint's randomness, drawn in input order from the
    /// map's generator (which [`DataFlow::set_seed`] seeds and checkpoints
    /// save), so results do not depend on the threads and a resumed run
    /// draws what the uninterrupted one would; seed a generator of your own
    /// with it (`tpt_datapoint_seed`). [`Code::State`] elsewhere.
    pub fn seed(&self) -> Result<u64> {
        let mut out = 0u64;
        call!(sys::tpt_datapoint_seed(&mut out, self.as_ptr()))?;
        Ok(out)
    }

    /// New handles on all components, in order.
    pub fn tensors(&self) -> Result<Vec<Tensor>> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }

    /// Replaces all components with `tensors` (shared, not copied).
    pub fn assign(&mut self, tensors: &[Tensor]) -> Result<()> {
        self.clear()?;
        tensors.iter().try_for_each(|t| self.push(t))
    }
}

impl fmt::Debug for DatapointRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.tensors().unwrap_or_default()).finish()
    }
}

/// An owned datapoint (`tpt_datapoint`), e.g. for
/// [`DataFlow::next_into`](crate::DataFlow::next_into); freed on drop. Its methods are
/// [`DatapointRef`]'s.
pub struct Datapoint {
    raw: NonNull<sys::tpt_datapoint>,
}

// SAFETY: an owned datapoint is a list of tensor handles, which may move
// between threads; it is changed only through &mut.
unsafe impl Send for Datapoint {}

impl Datapoint {
    /// An empty datapoint (`tpt_datapoint_new`).
    pub fn new() -> Result<Datapoint> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_datapoint_new(&mut out))?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(Code::Internal, "library returned no datapoint"))?;
        Ok(Datapoint { raw })
    }

    /// A datapoint of these components (shared, not copied).
    pub fn from_tensors(tensors: &[&Tensor]) -> Result<Datapoint> {
        let mut dp = Datapoint::new()?;
        tensors.iter().try_for_each(|t| dp.push(t))?;
        Ok(dp)
    }

    /// The components; the datapoint is freed.
    pub fn into_tensors(self) -> Result<Vec<Tensor>> {
        self.tensors()
    }
}

impl Deref for Datapoint {
    type Target = DatapointRef;
    fn deref(&self) -> &DatapointRef {
        // SAFETY: live while self is.
        unsafe { DatapointRef::from_ptr(self.raw.as_ptr()) }
    }
}

impl DerefMut for Datapoint {
    fn deref_mut(&mut self) -> &mut DatapointRef {
        unsafe { DatapointRef::from_ptr(self.raw.as_ptr()) }
    }
}

impl Drop for Datapoint {
    fn drop(&mut self) {
        // SAFETY: we own it.
        unsafe { sys::tpt_datapoint_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Datapoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

// ------------------------------------------------------------------ options

/// The order of a source's datapoints in each pass
/// ([`DataFlow::from_tensors`](crate::DataFlow::from_tensors),
/// [`from_idx`](crate::DataFlow::from_idx), [`mnist`](crate::DataFlow::mnist),
/// [`from_files`](crate::DataFlow::from_files)) or of a cache's replays
/// ([`DataFlow::cache`](crate::DataFlow::cache)); tensorpack's `shuffle`
/// argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// In order, the same every pass (tensorpack's `shuffle=False`). The
    /// default.
    #[default]
    Sequential,
    /// Reshuffled every pass, from the dataflow's seed
    /// ([`DataFlow::set_seed`](crate::DataFlow::set_seed)) (`shuffle=True`).
    Shuffled,
}

impl Order {
    /// The C `shuffle` flag.
    fn shuffle(self) -> i32 {
        (self == Order::Shuffled) as i32
    }
}

/// What [`DataFlow::batch`](crate::DataFlow::batch) does with the short
/// last batch of a pass (tensorpack's `remainder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Remainder {
    /// Dropped: every batch has `batch_size` rows (tensorpack's default
    /// `remainder=False`; PyTorch's `drop_last=True`). The default.
    #[default]
    Drop,
    /// Emitted, with fewer rows (tensorpack's `remainder=True`; PyTorch's
    /// `drop_last=False`), e.g. to validate on every row.
    Keep,
}

/// Where a pass of [`DataFlow::fixed_size`](crate::DataFlow::fixed_size)
/// leaves the dataflow it reads for the next one (tensorpack's
/// FixedSizeData `keep_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum InnerState {
    /// The next pass goes on where this one stopped (`keep_state=True`,
    /// tensorpack's default). The default.
    #[default]
    Keep,
    /// The next pass starts the inner dataflow over (`keep_state=False`).
    Reset,
}

/// Options of [`DataFlow::fake`](crate::DataFlow::fake) (tensorpack's
/// FakeData): what the fake datapoints hold. `Default`: new random values
/// every datapoint, uniform in `[0, 1)` (tensorpack's `random=True`). Set
/// fields (`FakeOptions { random: false, ..Default::default() }`) or chain
/// the setters (`FakeOptions::default().range(-1.0, 1.0)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FakeOptions {
    /// New values every datapoint (default true); false: one constant
    /// datapoint repeated (the fastest, for benchmarks of what follows).
    pub random: bool,
    /// The values are uniform in `[low, high)` (integers: rounded down);
    /// default 0.
    pub low: f64,
    /// Default 1.
    pub high: f64,
}

impl Default for FakeOptions {
    fn default() -> FakeOptions {
        FakeOptions { random: true, low: 0.0, high: 1.0 }
    }
}

impl FakeOptions {
    /// New values every datapoint (`true`, the default) or one constant
    /// datapoint repeated (`false`).
    pub fn random(self, random: bool) -> FakeOptions {
        FakeOptions { random, ..self }
    }
    /// Values uniform in `[low, high)` (default `[0, 1)`).
    pub fn range(self, low: f64, high: f64) -> FakeOptions {
        FakeOptions { low, high, ..self }
    }
}

/// Options of [`DataFlow::parallel_map`](crate::DataFlow::parallel_map) (`tpt_parallel_map_options`);
/// `Default` gives the C defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParallelMapOptions {
    /// Worker threads, >= 1 (default 2).
    pub n_threads: i32,
    /// Datapoints in flight (default 200).
    pub buffer_size: i32,
    /// Outputs in input order (default false).
    pub ordered: bool,
    /// Each pass maps exactly the input's pass (the buffer drains at its
    /// end; a drop is an error). false (default): the input repeats forever
    /// and passes blend (tensorpack's default).
    pub strict: bool,
}

impl Default for ParallelMapOptions {
    fn default() -> ParallelMapOptions {
        let c = sys::TPT_PARALLEL_MAP_OPTIONS_INIT;
        ParallelMapOptions {
            n_threads: c.n_threads,
            buffer_size: c.buffer_size,
            ordered: c.ordered != 0,
            strict: c.strict != 0,
        }
    }
}

impl ParallelMapOptions {
    fn to_raw(self) -> sys::tpt_parallel_map_options {
        let mut o = sys::TPT_PARALLEL_MAP_OPTIONS_INIT;
        o.n_threads = self.n_threads;
        o.buffer_size = self.buffer_size;
        o.ordered = self.ordered as i32;
        o.strict = self.strict as i32;
        o
    }
}

/// An image augmentor of [`DataFlow::augment`](crate::DataFlow::augment) (`tpt_augmentor`), applied to
/// an image component of shape `[C, H, W]` or `[H, W]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Augmentor {
    /// To f32, times `scale` (e.g. 1/255).
    ToFloat { scale: f64 },
    /// `(x - mean[c]) / std[c]`; one value applies to every channel. `mean`
    /// and `std` have the same length.
    Normalize { mean: Vec<f64>, std: Vec<f64> },
    /// Pads by `padding` zeros, then crops `height` x `width` at random.
    RandomCrop { height: i64, width: i64, padding: i64 },
    /// Flips horizontally with `probability`.
    Flip { probability: f64 },
}

impl Augmentor {
    /// The C augmentor; it points into `self`'s vectors.
    fn to_raw(&self, i: usize) -> Result<sys::tpt_augmentor> {
        let mut a = sys::TPT_AUGMENTOR_INIT;
        match self {
            Augmentor::ToFloat { scale } => {
                a.kind = sys::TPT_AUGMENT_TO_FLOAT;
                a.scale = *scale;
            }
            Augmentor::Normalize { mean, std } => {
                if mean.len() != std.len() {
                    return Err(Error::new(
                        Code::InvalidArgument,
                        format!("augmentors[{i}]: mean has {} values, std {}", mean.len(), std.len()),
                    ));
                }
                a.kind = sys::TPT_AUGMENT_NORMALIZE;
                a.mean = mean.as_ptr();
                a.std = std.as_ptr();
                a.n_channels = mean.len();
            }
            Augmentor::RandomCrop { height, width, padding } => {
                a.kind = sys::TPT_AUGMENT_RANDOM_CROP;
                (a.height, a.width, a.padding) = (*height, *width, *padding);
            }
            Augmentor::Flip { probability } => {
                a.kind = sys::TPT_AUGMENT_FLIP;
                a.probability = *probability;
            }
        }
        Ok(a)
    }
}

// ------------------------------------------------------------------ sources

/// A source of datapoints written in Rust, for [`DataFlow::from_source`](crate::DataFlow::from_source)
/// (`tpt_dataflow_callbacks`).
///
/// The library calls it on the thread that iterates the dataflow, one call
/// at a time (it is kept behind a mutex), so it must be `Send`.
pub trait Source: Send {
    /// The next datapoint of the pass (its components, at least one), or
    /// `None` at the end of the pass; the call after that starts the next
    /// pass. An error ends the consumer with its code and message, and its
    /// [`source`](std::error::Error::source) if it has one: `?` turns an
    /// [`std::io::Error`] or a number's parse error into an [`Error`] that
    /// keeps it, and [`Error::wrap`] does so for any error.
    fn next(&mut self) -> Result<Option<Vec<Tensor>>>;

    /// Called by every reset of the dataflow, with the seed this source
    /// should use for its randomness (derived from
    /// [`DataFlow::set_seed`](crate::DataFlow::set_seed) of the outermost dataflow, or from
    /// [`manual_seed`](crate::manual_seed)). The default does nothing.
    fn reset(&mut self, seed: u64) -> Result<()> {
        let _ = seed;
        Ok(())
    }

    /// Datapoints per pass; `None` (the default) when unknown or infinite.
    fn size(&self) -> Option<i64> {
        None
    }
}

/// A [`Source`] with a position that the pipeline's state can hold, for
/// [`DataFlow::from_stateful_source`](crate::DataFlow::from_stateful_source) (`tpt_dataflow_callbacks` version 2,
/// `save` and `restore`). With it, [`DataFlow::get_state`](crate::DataFlow::get_state) records where the
/// source is inside its pass, and a pipeline restored with
/// [`DataFlow::set_state`](crate::DataFlow::set_state) goes on with the datapoint after the last one
/// given when the state was taken.
///
/// ```
/// use tptrain::{DataFlow, Result, Source, StatefulSource, Tensor};
///
/// /// 0, 1, ..., 9 each pass.
/// struct Counter(u64);
/// impl Source for Counter {
///     fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
///         if self.0 == 10 {
///             self.0 = 0;
///             return Ok(None);
///         }
///         self.0 += 1;
///         Ok(Some(vec![Tensor::from_slice(&[self.0 as i64 - 1], &[])?]))
///     }
///     fn reset(&mut self, _seed: u64) -> Result<()> {
///         self.0 = 0;
///         Ok(())
///     }
/// }
/// impl StatefulSource for Counter {
///     fn save_state(&self) -> Result<Vec<u8>> {
///         Ok(self.0.to_le_bytes().to_vec())
///     }
///     fn restore_state(&mut self, state: &[u8]) -> Result<()> {
///         let bytes = state.try_into().map_err(|_| tptrain::Error::new(tptrain::Code::InvalidArgument, "bad state"))?;
///         self.0 = u64::from_le_bytes(bytes);
///         Ok(())
///     }
/// }
///
/// let a = DataFlow::from_stateful_source(Counter(0))?;
/// let mut it = a.iter();
/// it.next().unwrap()?;
/// it.next().unwrap()?;
/// let state = a.get_state()?; // after datapoint 1
/// let b = DataFlow::from_stateful_source(Counter(0))?;
/// b.set_state(&state)?;
/// b.reset_state()?;
/// assert_eq!(b.iter().next().unwrap()?[0].item()?, 2.0);
/// # Ok::<(), tptrain::Error>(())
/// ```
pub trait StatefulSource: Source {
    /// The source's state after the last datapoint [`next`](Source::next)
    /// gave (or at the start of a pass): its position and whatever else it
    /// needs to go on from there (a generator's state, say), as bytes of its
    /// own format. It runs on the thread that iterates the source: under
    /// [`prefetch`](DataFlow::prefetch), a parallel map or a queue input,
    /// after every datapoint read ahead, so keep it cheap. An error fails
    /// [`get_state`](DataFlow::get_state), or, where a thread reads ahead,
    /// the iteration, with its code and message.
    fn save_state(&self) -> Result<Vec<u8>>;

    /// Goes back to a state that [`save_state`](Self::save_state) made. It
    /// is called right after [`reset`](Source::reset) (given the seed the
    /// source had when the state was taken), at the reset that continues
    /// from a state set with [`set_state`](DataFlow::set_state). An error
    /// fails that reset with its code and message.
    fn restore_state(&mut self, state: &[u8]) -> Result<()>;
}

/// The user data of a source: the mutex orders `size` (which the library
/// may ask from the consumer's thread) with `next` (on the iterating thread).
struct SourceData<S>(Mutex<S>);

impl<S> SourceData<S> {
    fn lock(&self) -> std::sync::MutexGuard<'_, S> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

unsafe extern "C" fn source_next<S: Source>(
    dp: *mut sys::tpt_datapoint,
    user_data: *mut c_void,
) -> *mut sys::tpt_status {
    // SAFETY: user_data is the boxed SourceData<S>, freed only with the
    // dataflow's last reference; dp is lent for the call.
    let data = &*user_data.cast::<SourceData<S>>();
    guarded(&|| "the dataflow source".to_owned(), || match data.lock().next()? {
        None => Ok(Flow::stop(END_OF_PASS)),
        Some(tensors) => {
            DatapointRef::from_ptr(dp).assign(&tensors)?;
            Ok(Flow::Continue)
        }
    })
}

unsafe extern "C" fn source_reset<S: Source>(seed: u64, user_data: *mut c_void) -> *mut sys::tpt_status {
    // SAFETY: as in source_next.
    let data = &*user_data.cast::<SourceData<S>>();
    guarded(&|| "the dataflow source's reset".to_owned(), || {
        data.lock().reset(seed)?;
        Ok(Flow::Continue)
    })
}

unsafe extern "C" fn source_size<S: Source>(user_data: *mut c_void) -> i64 {
    // SAFETY: as in source_next.
    let data = &*user_data.cast::<SourceData<S>>();
    let mut n = -1;
    let st = guarded(&|| "the dataflow source's size".to_owned(), || {
        n = data.lock().size().unwrap_or(-1);
        Ok(Flow::Continue)
    });
    if !st.is_null() {
        // A panic: the size is unknown (C cannot take an error here).
        sys::tpt_status_free(st);
        n = -1;
    }
    n
}

unsafe extern "C" fn source_save<S: StatefulSource>(
    out: *mut *mut sys::tpt_tensor,
    user_data: *mut c_void,
) -> *mut sys::tpt_status {
    // SAFETY: as in source_next; out is a valid place for the result.
    let data = &*user_data.cast::<SourceData<S>>();
    let mut made = None;
    let st = guarded(&|| "the dataflow source's save_state".to_owned(), || {
        let bytes = data.lock().save_state()?;
        let n = bytes.len() as i64;
        made = Some(Tensor::from_vec(bytes, &[n])?);
        Ok(Flow::Continue)
    });
    if st.is_null() {
        // The library takes the tensor: Rust must not free it. (On failure
        // C takes nothing, and `made` is freed here.)
        *out = made.map_or(ptr::null_mut(), Tensor::into_raw);
    }
    st
}

unsafe extern "C" fn source_restore<S: StatefulSource>(
    state: *const sys::tpt_tensor,
    user_data: *mut c_void,
) -> *mut sys::tpt_status {
    // SAFETY: as in source_next. The state is lent for the call: Tensor is a
    // repr(transparent) tpt_tensor *, so it is seen as a borrowed &Tensor
    // (never dropped), as in component_trampoline.
    let data = &*user_data.cast::<SourceData<S>>();
    let handle = state;
    let state: &Tensor = &*(&handle as *const *const sys::tpt_tensor).cast::<Tensor>();
    guarded(&|| "the dataflow source's restore_state".to_owned(), || {
        let bytes = state.to_bytes()?;
        data.lock().restore_state(&bytes)?;
        Ok(Flow::Continue)
    })
}

/// `next` as a [`Source`].
struct FnSource<F> {
    next: F,
    size: Option<i64>,
}

impl<F> Source for FnSource<F>
where
    F: FnMut() -> Result<Option<Vec<Tensor>>> + Send,
{
    fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
        (self.next)()
    }
    fn size(&self) -> Option<i64> {
        self.size
    }
}

/// A new iterator per pass, as a [`Source`].
struct IterSource<F, I> {
    make: F,
    current: Option<I>,
}

impl<F, I> Source for IterSource<F, I>
where
    F: FnMut() -> I + Send,
    I: Iterator + Send,
    I::Item: IterItem,
{
    fn next(&mut self) -> Result<Option<Vec<Tensor>>> {
        let it = self.current.get_or_insert_with(&mut self.make);
        match it.next() {
            Some(item) => item.into_datapoint().map(Some),
            None => {
                self.current = None; // the next call starts a new pass
                Ok(None)
            }
        }
    }
    fn reset(&mut self, _seed: u64) -> Result<()> {
        self.current = None;
        Ok(())
    }
}

/// An item of a [`DataFlow::from_iter`](crate::DataFlow::from_iter) iterator: a datapoint's components
/// (`Vec<Tensor>`), or a `Result` of them whose error ends the consumer. The
/// error may be of any type that converts into `Box<dyn Error + Send + Sync>`
/// (see [`Error::wrap`]).
pub trait IterItem {
    /// The components, or the error as an [`Error`].
    fn into_datapoint(self) -> Result<Vec<Tensor>>;
}

impl IterItem for Vec<Tensor> {
    fn into_datapoint(self) -> Result<Vec<Tensor>> {
        Ok(self)
    }
}

impl<E: Into<Box<dyn std::error::Error + Send + Sync>>> IterItem for std::result::Result<Vec<Tensor>, E> {
    fn into_datapoint(self) -> Result<Vec<Tensor>> {
        self.map_err(Error::wrap)
    }
}

// ------------------------------------------------------------------ trampolines

unsafe extern "C" fn map_trampoline<F>(dp: *mut sys::tpt_datapoint, user_data: *mut c_void) -> *mut sys::tpt_status
where
    F: FnMut(&mut DatapointRef) -> Result<()> + Send,
{
    // SAFETY: user_data is the boxed F; the library calls a map on the
    // thread that iterates, one call at a time. dp is lent for the call.
    let f = &mut *user_data.cast::<F>();
    guarded(&|| "the map function".to_owned(), || {
        f(DatapointRef::from_ptr(dp))?;
        Ok(Flow::Continue)
    })
}

unsafe extern "C" fn parallel_map_trampoline<F>(
    dp: *mut sys::tpt_datapoint,
    user_data: *mut c_void,
) -> *mut sys::tpt_status
where
    F: Fn(&mut DatapointRef) -> Result<()> + Send + Sync,
{
    // SAFETY: user_data is the boxed F, shared by the worker threads (F is
    // Sync); dp is lent for the call.
    let f = &*user_data.cast::<F>();
    guarded(&|| "the parallel map function".to_owned(), || {
        f(DatapointRef::from_ptr(dp))?;
        Ok(Flow::Continue)
    })
}

unsafe extern "C" fn component_trampoline<F>(
    out: *mut *mut sys::tpt_tensor,
    value: *const sys::tpt_tensor,
    user_data: *mut c_void,
) -> *mut sys::tpt_status
where
    F: FnMut(&Tensor) -> Result<Option<Tensor>> + Send,
{
    // SAFETY: as in map_trampoline. Tensor is a repr(transparent)
    // tpt_tensor *: `value` is seen as a borrowed &Tensor (never dropped).
    let f = &mut *user_data.cast::<F>();
    let handle = value;
    let value: &Tensor = &*(&handle as *const *const sys::tpt_tensor).cast::<Tensor>();
    guarded(&|| "the component map function".to_owned(), || {
        // The library takes the new tensor (NULL drops the datapoint).
        *out = f(value)?.map_or(ptr::null_mut(), Tensor::into_raw);
        Ok(Flow::Continue)
    })
}

unsafe extern "C" fn decode_trampoline<F>(
    dp: *mut sys::tpt_datapoint,
    path: *const c_char,
    index: usize,
    user_data: *mut c_void,
) -> *mut sys::tpt_status
where
    F: Fn(&mut DatapointRef, &Path, usize) -> Result<()> + Send + Sync,
{
    // SAFETY: user_data is the boxed F, shared by the decoding threads;
    // dp and path are lent for the call.
    let f = &*user_data.cast::<F>();
    let bytes = CStr::from_ptr(path).to_bytes();
    #[cfg(unix)]
    let path: &Path = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes).as_ref();
    #[cfg(not(unix))]
    let owned = String::from_utf8_lossy(bytes).into_owned();
    #[cfg(not(unix))]
    let path: &Path = owned.as_ref();
    guarded(&|| "the decode function".to_owned(), || {
        f(DatapointRef::from_ptr(dp), path, index)?;
        Ok(Flow::Continue)
    })
}

// ------------------------------------------------------------------ dataflows

/// A dataflow (`tpt_dataflow`): a cursor over passes of datapoints. Freed on
/// drop; the dataflows and inputs that read it keep their own reference (and
/// with it its closures).
///
/// `'a` bounds what its closures (and those of the dataflows it reads)
/// borrow. The closures are `Send` because the library may run them on its
/// own threads, but the handle is neither `Send` nor `Sync`: handles of one
/// pipeline share state that the library does not lock (a dataflow "is
/// iterated by one thread at a time").
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// let x = tptrain::Tensor::from_slice(&[1f32, 2.], &[2]).unwrap();
/// send(tptrain::DataFlow::from_tensors(&[&x], tptrain::Order::Sequential).unwrap()); // stays on its thread
/// ```
///
/// A map closure must be `Send` (it may run on a prefetch thread):
///
/// ```compile_fail
/// let x = tptrain::Tensor::from_slice(&[1f32, 2.], &[2]).unwrap();
/// let df = tptrain::DataFlow::from_tensors(&[&x], tptrain::Order::Sequential).unwrap();
/// let seen = std::rc::Rc::new(std::cell::Cell::new(0));
/// df.map(move |_| { seen.set(seen.get() + 1); Ok(()) });
/// ```
pub struct DataFlow<'a> {
    raw: NonNull<sys::tpt_dataflow>,
    _marker: PhantomData<(&'a (), *mut ())>,
}

impl<'a> DataFlow<'a> {
    /// The raw handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::tpt_dataflow {
        self.raw.as_ptr()
    }

    // ---- sources

    /// A dataflow from a [`Source`] (`tpt_dataflow_from_callbacks`). The
    /// source has no position in the pipeline's state: restored, it is
    /// reset with the seed it had and starts its first pass again, and a
    /// state that holds a source's position is refused (see
    /// [`from_stateful_source`](Self::from_stateful_source)).
    pub fn from_source<S: Source + 'a>(source: S) -> Result<DataFlow<'a>> {
        DataFlow::from_source_with(source, sys::TPT_DATAFLOW_CALLBACKS_INIT)
    }

    /// A dataflow from a [`StatefulSource`] (`tpt_dataflow_from_callbacks`
    /// with `save` and `restore`): [`get_state`](Self::get_state) records
    /// the source's position, and [`set_state`](Self::set_state) brings it
    /// back at the next reset.
    pub fn from_stateful_source<S: StatefulSource + 'a>(source: S) -> Result<DataFlow<'a>> {
        let mut callbacks = sys::TPT_DATAFLOW_CALLBACKS_INIT;
        callbacks.save = Some(source_save::<S>);
        callbacks.restore = Some(source_restore::<S>);
        DataFlow::from_source_with(source, callbacks)
    }

    /// `callbacks` (save and restore, or neither) with the source's next,
    /// reset and size.
    fn from_source_with<S: Source + 'a>(source: S, callbacks: sys::tpt_dataflow_callbacks) -> Result<DataFlow<'a>> {
        let mut callbacks = callbacks;
        callbacks.next = Some(source_next::<S>);
        callbacks.reset = Some(source_reset::<S>);
        callbacks.size = Some(source_size::<S>);
        let user_data = Box::into_raw(Box::new(SourceData(Mutex::new(source)))).cast::<c_void>();
        // SAFETY: the library owns user_data from here on, also on failure.
        make(|out| unsafe {
            sys::tpt_dataflow_from_callbacks(out, &callbacks, user_data, Some(panic::drop_box::<SourceData<S>>))
        })
    }

    /// A dataflow whose datapoints `next` makes: `Ok(Some(components))`, or
    /// `Ok(None)` at the end of a pass (the call after that starts the next
    /// one), or an error that ends the consumer. Its size is unknown: a trainer fed by it needs
    /// `steps_per_epoch` (see [`from_fn_sized`](Self::from_fn_sized), or
    /// [`from_source`](Self::from_source) for one that reseeds).
    ///
    /// ```
    /// # use tptrain::{DataFlow, Tensor};
    /// use std::io::BufRead;
    ///
    /// let mut lines = std::io::Cursor::new("0.5\n1.5\n").lines();
    /// let df = DataFlow::from_fn(move || {
    ///     let Some(line) = lines.next() else { return Ok(None) };
    ///     let x: f32 = line?.trim().parse()?; // io::Error and ParseFloatError convert
    ///     Ok(Some(vec![Tensor::from_slice(&[x], &[])?]))
    /// })?;
    /// assert_eq!(df.iter().count(), 2);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn from_fn<F>(next: F) -> Result<DataFlow<'a>>
    where
        F: FnMut() -> Result<Option<Vec<Tensor>>> + Send + 'a,
    {
        DataFlow::from_source(FnSource { next, size: None })
    }

    /// [`from_fn`](Self::from_fn) with a known size: `size` datapoints per
    /// pass (a trainer fed by it takes its `steps_per_epoch` from it).
    ///
    /// ```
    /// # use tptrain::{DataFlow, Tensor};
    /// let mut i = 0i64;
    /// let df = DataFlow::from_fn_sized(4, move || {
    ///     i += 1;
    ///     if i > 4 {
    ///         return Ok(None);
    ///     }
    ///     Tensor::from_slice(&[i], &[]).map(|t| Some(vec![t]))
    /// })?;
    /// assert_eq!(df.size(), Some(4));
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn from_fn_sized<F>(size: i64, next: F) -> Result<DataFlow<'a>>
    where
        F: FnMut() -> Result<Option<Vec<Tensor>>> + Send + 'a,
    {
        if size < 0 {
            return Err(Error::new(Code::InvalidArgument, format!("from_fn_sized: size must be >= 0, got {size}")));
        }
        DataFlow::from_source(FnSource { next, size: Some(size) })
    }

    /// A dataflow that iterates a new iterator from `make` each pass (and
    /// after each reset): every item is a datapoint's components, a
    /// `Vec<Tensor>`, or a `Result` of them whose error (of any type: see
    /// [`IterItem`]) ends the consumer.
    ///
    /// ```
    /// # use tptrain::{DataFlow, Tensor};
    /// let df = DataFlow::from_iter(|| (0..3i64).map(|i| vec![Tensor::from_slice(&[i], &[]).unwrap()]))?;
    /// let pass: Vec<i64> = df.iter().map(|dp| dp.unwrap()[0].item().unwrap() as i64).collect();
    /// assert_eq!(pass, vec![0, 1, 2]);
    /// assert_eq!(df.iter().count(), 3); // the next pass starts over
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    // Not `FromIterator`: `make` is called for every pass, not iterated once.
    #[allow(clippy::should_implement_trait)]
    pub fn from_iter<F, I>(make: F) -> Result<DataFlow<'a>>
    where
        F: FnMut() -> I + Send + 'a,
        I: IntoIterator,
        I::IntoIter: Send + 'a,
        I::Item: IterItem,
    {
        let mut make = make;
        DataFlow::from_source(IterSource { make: move || make().into_iter(), current: None })
    }

    /// Rows of in-memory tensors (dimension 0): datapoint i is
    /// `(tensors[0][i], tensors[1][i], ...)`, in `order`
    /// ([`Order::Shuffled`]: reshuffled every pass). The tensors are shared,
    /// not copied (`tpt_dataflow_from_tensors`).
    ///
    /// ```
    /// use tptrain::{DataFlow, Order, Tensor};
    /// let x = Tensor::from_slice(&[1f32, 2., 3.], &[3])?;
    /// let rows = DataFlow::from_tensors(&[&x], Order::Shuffled)?;
    /// assert_eq!(rows.size(), Some(3));
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn from_tensors(tensors: &[&Tensor], order: Order) -> Result<DataFlow<'a>> {
        let ptrs: Vec<*const sys::tpt_tensor> = tensors.iter().map(|t| t.as_ptr()).collect();
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_from_tensors(&mut out, ptrs.as_ptr(), ptrs.len(), order.shuffle()))?;
        DataFlow::wrap(out)
    }

    /// Rows of IDX files (the MNIST format; gzip when the name ends in .gz):
    /// datapoint i is `(row i of paths[0], row i of paths[1], ...)` in the
    /// files' element types, in `order`. The files are read now; a missing,
    /// truncated or malformed file is a [`Code::Io`] or
    /// [`Code::InvalidArgument`] error naming it (`tpt_dataflow_from_idx`).
    pub fn from_idx<P: AsRef<Path>>(paths: &[P], order: Order) -> Result<DataFlow<'a>> {
        let cpaths = paths
            .iter()
            .enumerate()
            .map(|(i, p)| path_to_cstring(p.as_ref(), &format!("paths[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const c_char> = cpaths.iter().map(|c| c.as_ptr()).collect();
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_from_idx(&mut out, ptrs.as_ptr(), ptrs.len(), order.shuffle()))?;
        DataFlow::wrap(out)
    }

    /// MNIST or Fashion-MNIST in `dir`, `split` "train" (60,000) or "test"
    /// (10,000): datapoints (image f32 `[1, 28, 28]` in [0, 1], label i64
    /// scalar), in `order` (`tpt_dataflow_mnist`).
    pub fn mnist(dir: impl AsRef<Path>, split: &str, order: Order) -> Result<DataFlow<'a>> {
        let dir = path_to_cstring(dir.as_ref(), "dir")?;
        let mut out = ptr::null_mut();
        with_cstr(split, "split", |s| call!(sys::tpt_dataflow_mnist(&mut out, dir.as_ptr(), s, order.shuffle())))??;
        DataFlow::wrap(out)
    }

    /// A list of files that `decode(dp, path, index)` turns into datapoints
    /// (filling the empty `dp`), in `order`; decoded on the iterating thread
    /// when `n_threads` is 0, else by that many worker threads at once, the
    /// datapoints still in `order` (`tpt_dataflow_from_files`). `decode`
    /// returns a [`Result`](crate::Result): `?` turns the [`std::io::Error`]
    /// of reading the file into an [`Error`] that keeps it as its source.
    ///
    /// ```no_run
    /// use tptrain::{DataFlow, Order, Tensor};
    /// # let paths = ["a.txt", "b.txt"];
    /// let df = DataFlow::from_files(&paths, Order::Shuffled, 4, |dp, path, _index| {
    ///     let x: f32 = std::fs::read_to_string(path)?.trim().parse()?;
    ///     dp.push(&Tensor::from_slice(&[x], &[])?)
    /// })?;
    /// # let _ = df;
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn from_files<P, F>(paths: &[P], order: Order, n_threads: i32, decode: F) -> Result<DataFlow<'a>>
    where
        P: AsRef<Path>,
        F: Fn(&mut DatapointRef, &Path, usize) -> Result<()> + Send + Sync + 'a,
    {
        let cpaths = paths
            .iter()
            .enumerate()
            .map(|(i, p)| path_to_cstring(p.as_ref(), &format!("paths[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const c_char> = cpaths.iter().map(|c| c.as_ptr()).collect();
        let user_data = Box::into_raw(Box::new(decode)).cast::<c_void>();
        // SAFETY: the paths are copied; the library owns user_data from
        // here on, also on failure.
        make(|out| unsafe {
            sys::tpt_dataflow_from_files(
                out,
                ptrs.as_ptr(),
                ptrs.len(),
                order.shuffle(),
                n_threads,
                Some(decode_trampoline::<F>),
                user_data,
                Some(panic::drop_box::<F>),
            )
        })
    }

    /// `size` datapoints per pass of the given shapes and dtypes (names are
    /// ignored; no -1), for benchmarks (tensorpack's FakeData,
    /// `tpt_dataflow_fake`): `options`, `None` for the defaults (new values
    /// every datapoint, uniform in `[0, 1)`), or a [`FakeOptions`].
    ///
    /// ```
    /// use tptrain::{DType, DataFlow, FakeOptions, InputSpec};
    /// let spec = [InputSpec::new("x", DType::F32, &[2, 3])];
    /// let random = DataFlow::fake(&spec, 10, None)?;
    /// let constant = DataFlow::fake(&spec, 10, &FakeOptions::default().random(false).range(-1.0, 1.0))?;
    /// assert_eq!((random.size(), constant.size()), (Some(10), Some(10)));
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn fake<'o>(
        components: &[InputSpec],
        size: i64,
        options: impl Into<Option<&'o FakeOptions>>,
    ) -> Result<DataFlow<'a>> {
        let o = options.into().copied().unwrap_or_default();
        let (_names, specs) = raw_specs(components)?;
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_fake(&mut out, specs.as_ptr(), specs.len(), size, o.random as i32, o.low, o.high))?;
        DataFlow::wrap(out)
    }

    // ---- combinators

    /// Stacks `batch_size` datapoints into one along a new dimension 0; the
    /// short last batch of a pass is dropped ([`Remainder::Drop`],
    /// tensorpack's default) or emitted ([`Remainder::Keep`])
    /// (`tpt_dataflow_batch`).
    pub fn batch(&self, batch_size: i64, remainder: Remainder) -> Result<DataFlow<'a>> {
        let keep = (remainder == Remainder::Keep) as i32;
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_batch(&mut out, self.as_ptr(), batch_size, keep))?;
        DataFlow::wrap(out)
    }

    /// Applies `f` to every datapoint in place, on the thread that iterates
    /// (`tpt_dataflow_map`). Leaving the datapoint empty drops it.
    ///
    /// ```
    /// use tptrain::{DataFlow, Order, Tensor};
    /// let x = Tensor::from_slice(&[1f32, 2., 3.], &[3])?;
    /// let squared = DataFlow::from_tensors(&[&x], Order::Sequential)?.map(|dp| {
    ///     let v = dp.get(0)?.item()?;
    ///     dp.set(0, &Tensor::from_slice(&[(v * v) as f32], &[])?)
    /// })?;
    /// assert_eq!(squared.iter().map(|dp| dp.unwrap()[0].item().unwrap()).collect::<Vec<_>>(), vec![1., 4., 9.]);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn map<F>(&self, f: F) -> Result<DataFlow<'a>>
    where
        F: FnMut(&mut DatapointRef) -> Result<()> + Send + 'a,
    {
        let user_data = Box::into_raw(Box::new(f)).cast::<c_void>();
        // SAFETY: the library owns user_data from here on, also on failure.
        make(|out| unsafe {
            sys::tpt_dataflow_map(out, self.as_ptr(), Some(map_trampoline::<F>), user_data, Some(panic::drop_box::<F>))
        })
    }

    /// Replaces component `index` with what `f` makes of it; `Ok(None)`
    /// drops the datapoint (`tpt_dataflow_map_component`).
    pub fn map_component<F>(&self, index: usize, f: F) -> Result<DataFlow<'a>>
    where
        F: FnMut(&Tensor) -> Result<Option<Tensor>> + Send + 'a,
    {
        let user_data = Box::into_raw(Box::new(f)).cast::<c_void>();
        // SAFETY: the library owns user_data from here on, also on failure.
        make(|out| unsafe {
            sys::tpt_dataflow_map_component(
                out,
                self.as_ptr(),
                index,
                Some(component_trampoline::<F>),
                user_data,
                Some(panic::drop_box::<F>),
            )
        })
    }

    /// tensorpack's MultiThreadMapData: `f` runs on
    /// [`n_threads`](ParallelMapOptions::n_threads) worker threads at once,
    /// which start at reset (`tpt_dataflow_parallel_map`); `options`: `None`
    /// for the defaults, or a [`ParallelMapOptions`]. In strict mode a drop
    /// is an error.
    ///
    /// ```
    /// use tptrain::{DataFlow, Order, ParallelMapOptions, Tensor};
    /// let x = Tensor::from_slice(&[1f32, 2., 3., 4.], &[4])?;
    /// let rows = DataFlow::from_tensors(&[&x], Order::Sequential)?;
    /// let options = ParallelMapOptions { ordered: true, strict: true, ..Default::default() };
    /// let doubled = rows.parallel_map(&options, |dp| {
    ///     let v = dp.get(0)?.item()?;
    ///     dp.set(0, &Tensor::from_slice(&[(2.0 * v) as f32], &[])?)
    /// })?;
    /// assert_eq!(doubled.iter().map(|dp| dp.unwrap()[0].item().unwrap()).collect::<Vec<_>>(), vec![2., 4., 6., 8.]);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn parallel_map<'o, F>(&self, options: impl Into<Option<&'o ParallelMapOptions>>, f: F) -> Result<DataFlow<'a>>
    where
        F: Fn(&mut DatapointRef) -> Result<()> + Send + Sync + 'a,
    {
        let o = options.into().copied().unwrap_or_default().to_raw();
        let user_data = Box::into_raw(Box::new(f)).cast::<c_void>();
        // SAFETY: the library owns user_data from here on, also on failure.
        make(|out| unsafe {
            sys::tpt_dataflow_parallel_map(
                out,
                self.as_ptr(),
                Some(parallel_map_trampoline::<F>),
                user_data,
                Some(panic::drop_box::<F>),
                &o,
            )
        })
    }

    /// Iterates this dataflow on a background thread, up to `capacity`
    /// datapoints ahead (tensorpack's PrefetchData; `tpt_dataflow_prefetch`).
    pub fn prefetch(&self, capacity: i64) -> Result<DataFlow<'a>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_prefetch(&mut out, self.as_ptr(), capacity))?;
        DataFlow::wrap(out)
    }

    /// Shuffles within a buffer of `buffer_size` datapoints, each read
    /// `n_reuse` times; reads this dataflow over and over, so it is
    /// infinite (tensorpack's LocallyShuffleData; `tpt_dataflow_local_shuffle`).
    pub fn local_shuffle(&self, buffer_size: i64, n_reuse: i64) -> Result<DataFlow<'a>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_local_shuffle(&mut out, self.as_ptr(), buffer_size, n_reuse))?;
        DataFlow::wrap(out)
    }

    /// Keeps the first pass in memory and replays it in `order`
    /// ([`Order::Shuffled`]: reshuffled every pass) (tensorpack's CacheData;
    /// `tpt_dataflow_cache`).
    pub fn cache(&self, order: Order) -> Result<DataFlow<'a>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_cache(&mut out, self.as_ptr(), order.shuffle()))?;
        DataFlow::wrap(out)
    }

    /// `times` passes of this dataflow as one pass; `None`: forever
    /// (infinite) (`tpt_dataflow_repeat`).
    pub fn repeat(&self, times: Option<i64>) -> Result<DataFlow<'a>> {
        let n = match times {
            Some(n) if n < 0 => {
                return Err(Error::new(Code::InvalidArgument, format!("times must be >= 0 (None: forever), got {n}")))
            }
            Some(n) => n,
            None => -1,
        };
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_repeat(&mut out, self.as_ptr(), n))?;
        DataFlow::wrap(out)
    }

    /// Exactly `size` datapoints per pass, restarting this dataflow when it
    /// ends; the next pass goes on where this one stopped
    /// ([`InnerState::Keep`], tensorpack's default) or starts this dataflow
    /// over ([`InnerState::Reset`]) (tensorpack's FixedSizeData;
    /// `tpt_dataflow_fixed_size`).
    pub fn fixed_size(&self, size: i64, inner: InnerState) -> Result<DataFlow<'a>> {
        let keep_state = (inner == InnerState::Keep) as i32;
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_fixed_size(&mut out, self.as_ptr(), size, keep_state))?;
        DataFlow::wrap(out)
    }

    /// Every `count`-th datapoint, from the `index`-th on: a rank's share of
    /// the data of a distributed job (`index`: the rank, `count`: the world
    /// size). Put it near the source so that the expensive steps after it
    /// run on the share only, and give the trainer
    /// [`Distributed::shard(false)`](crate::Distributed::shard), since the
    /// input is then already this rank's share. Each datapoint given reads
    /// `count` of this dataflow's and drops all but one, so every share's
    /// pipeline is in the same state; a pass's last datapoints that do not
    /// make `count` are dropped. Its size is this dataflow's / `count`.
    /// Errors: [`Code::InvalidArgument`] when `count` is not from 1 to 2^20
    /// or `index` not from 0 to `count - 1` (`tpt_dataflow_shard`).
    pub fn shard(&self, index: i64, count: i64) -> Result<DataFlow<'a>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_shard(&mut out, self.as_ptr(), index, count))?;
        DataFlow::wrap(out)
    }

    /// `dfs` one after the other (`tpt_dataflow_concat`).
    pub fn concat(dfs: &[&DataFlow<'a>]) -> Result<DataFlow<'a>> {
        let ptrs: Vec<*mut sys::tpt_dataflow> = dfs.iter().map(|d| d.as_ptr()).collect();
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_concat(&mut out, ptrs.as_ptr(), ptrs.len()))?;
        DataFlow::wrap(out)
    }

    /// `dfs` side by side: the components of `dfs[0]`, then of `dfs[1]`, ...;
    /// a pass ends with the shortest (`tpt_dataflow_join`).
    pub fn join(dfs: &[&DataFlow<'a>]) -> Result<DataFlow<'a>> {
        let ptrs: Vec<*mut sys::tpt_dataflow> = dfs.iter().map(|d| d.as_ptr()).collect();
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_join(&mut out, ptrs.as_ptr(), ptrs.len()))?;
        DataFlow::wrap(out)
    }

    /// Components `indices[0]`, `indices[1]`, ... in that order (repeats
    /// allowed) (`tpt_dataflow_select`).
    pub fn select(&self, indices: &[usize]) -> Result<DataFlow<'a>> {
        let mut out = ptr::null_mut();
        call!(sys::tpt_dataflow_select(&mut out, self.as_ptr(), indices.as_ptr(), indices.len()))?;
        DataFlow::wrap(out)
    }

    /// Applies `augmentors`, in order, to the image component `index` of
    /// every datapoint (tensorpack's AugmentImageComponent;
    /// `tpt_dataflow_augment`). Each datapoint's randomness is drawn in input
    /// order, so the result does not depend on `n_threads` (0: on the
    /// iterating thread).
    pub fn augment(&self, index: usize, augmentors: &[Augmentor], n_threads: i32) -> Result<DataFlow<'a>> {
        let raw = augmentors.iter().enumerate().map(|(i, a)| a.to_raw(i)).collect::<Result<Vec<_>>>()?;
        let mut out = ptr::null_mut();
        // SAFETY: `raw` points into `augmentors`, alive for the call (copied).
        call!(sys::tpt_dataflow_augment(&mut out, self.as_ptr(), index, raw.as_ptr(), raw.len(), n_threads))?;
        DataFlow::wrap(out)
    }

    // ---- iterating, seeds and state

    /// Prepares the dataflow (and what it reads) for iteration: seeds its
    /// randomness (or restores the state set), starts its threads and a new
    /// pass (`tpt_dataflow_reset_state`). Iterating resets a dataflow that
    /// never was; a later reset starts over.
    ///
    /// # Panics
    /// Resumes a panic of a closure that ran on this thread.
    pub fn reset_state(&self) -> Result<()> {
        // SAFETY: a live dataflow.
        let st = panic::call_resuming(|| unsafe { sys::tpt_dataflow_reset_state(self.as_ptr()) });
        unsafe { Error::check(st) }
    }

    /// The next datapoint of the pass into `dp` (its components are
    /// replaced): `Ok(true)`, or `Ok(false)` at the end of the pass, after
    /// which the next call starts another (`tpt_dataflow_next`).
    ///
    /// # Panics
    /// Resumes a panic of a closure that ran on this thread.
    pub fn next_into(&self, dp: &mut Datapoint) -> Result<bool> {
        // SAFETY: live handles.
        let st = panic::call_resuming(|| unsafe { sys::tpt_dataflow_next(self.as_ptr(), dp.as_ptr()) });
        // SAFETY: the status is NULL or ours.
        if !st.is_null() && unsafe { sys::tpt_status_code(st) } == sys::TPT_STOP {
            unsafe { sys::tpt_status_free(st) };
            return Ok(false);
        }
        unsafe { Error::check(st) }?;
        Ok(true)
    }

    /// One pass: an iterator over its datapoints' components. It ends at
    /// the end of the pass, or after the first error; the next `iter`
    /// starts the next pass. An iterator dropped half-way leaves the rest of
    /// its pass to the next one (after an error too: the pass goes on past
    /// the datapoint that failed); [`reset_state`](Self::reset_state) starts
    /// over. (See [`next_into`](Self::next_into) for reuse of one datapoint.)
    ///
    /// # Panics
    /// `next` resumes a panic of a closure that ran on this thread.
    pub fn iter(&self) -> DataFlowIter<'_, 'a> {
        DataFlowIter { df: self, dp: None, done: false }
    }

    /// Datapoints per pass; `None` when unknown or infinite
    /// (`tpt_dataflow_size`).
    pub fn size(&self) -> Option<i64> {
        let mut n = -1i64;
        // SAFETY: a live dataflow.
        let st = panic::call_resuming(|| unsafe { sys::tpt_dataflow_size(&mut n, self.as_ptr()) });
        // It fails only for a bad handle, which `self` is not.
        unsafe { sys::tpt_status_free(st) };
        (n >= 0).then_some(n)
    }

    /// Seeds every random part of the pipeline at its next reset (each gets
    /// its own stream, mixed from `seed` and its place in the pipeline); call
    /// it on the outermost dataflow (`tpt_dataflow_set_seed`). Without it the
    /// seed comes from [`manual_seed`](crate::manual_seed).
    pub fn set_seed(&self, seed: u64) -> Result<()> {
        call!(sys::tpt_dataflow_set_seed(self.as_ptr(), seed))
    }

    /// The pipeline's state as of the last datapoint it gave (generators,
    /// seeds, the position in the pass), as a u8 tensor to save with a
    /// checkpoint (`tpt_dataflow_get_state`). Threads that read ahead do not
    /// change it. Not saved: a local shuffle's buffer, the order of an
    /// unordered parallel map, and the position of a Rust source other than
    /// a [`StatefulSource`] (from [`from_source`](Self::from_source),
    /// [`from_fn`](Self::from_fn) or [`from_iter`](Self::from_iter)); a
    /// source made with [`from_stateful_source`](Self::from_stateful_source)
    /// keeps its position. A [`StatefulSource::save_state`] that fails fails
    /// this call (where no thread reads ahead of it) with its error.
    ///
    /// # Panics
    /// Resumes a panic of a closure that ran on this thread (a
    /// [`StatefulSource::save_state`]).
    pub fn get_state(&self) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        // SAFETY: a live dataflow; out receives a new tensor.
        let st = panic::call_resuming(|| unsafe { sys::tpt_dataflow_get_state(&mut out, self.as_ptr()) });
        unsafe { Error::check(st) }?;
        Tensor::wrap(out)
    }

    /// Restores a state from [`get_state`](Self::get_state) of a pipeline of
    /// the same shape; the next reset continues with the datapoint after the
    /// last one given when the state was taken, mid-pass or not (a
    /// [`StatefulSource`] gets its position back through
    /// [`restore_state`](StatefulSource::restore_state) at that reset). An
    /// error if the pipeline's shape differs, or if the state holds a
    /// source's position and this pipeline's source cannot restore one (one
    /// made with [`from_source`](Self::from_source), `from_fn` or
    /// `from_iter`) (`tpt_dataflow_set_state`).
    pub fn set_state(&self, state: &Tensor) -> Result<()> {
        call!(sys::tpt_dataflow_set_state(self.as_ptr(), state.as_ptr()))
    }
}

impl Drop for DataFlow<'_> {
    fn drop(&mut self) {
        let had = panic::pending();
        // SAFETY: we own this reference; closures (and threads) go with the
        // last one.
        unsafe { sys::tpt_dataflow_free(self.raw.as_ptr()) };
        panic::resume_if_new(had);
    }
}

impl fmt::Debug for DataFlow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataFlow").field("raw", &self.raw).finish()
    }
}

/// One pass of a [`DataFlow`](crate::DataFlow) ([`DataFlow::iter`](crate::DataFlow::iter)): each item is a
/// datapoint's components, or the error that ended the pass.
pub struct DataFlowIter<'d, 'a> {
    df: &'d DataFlow<'a>,
    dp: Option<Datapoint>,
    done: bool,
}

impl Iterator for DataFlowIter<'_, '_> {
    type Item = Result<Vec<Tensor>>;

    fn next(&mut self) -> Option<Result<Vec<Tensor>>> {
        if self.done {
            return None;
        }
        let step = (|| {
            let dp = match &mut self.dp {
                Some(dp) => dp,
                None => self.dp.insert(Datapoint::new()?),
            };
            Ok(if self.df.next_into(dp)? { Some(dp.tensors()?) } else { None })
        })();
        match step {
            Ok(Some(tensors)) => Some(Ok(tensors)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for DataFlowIter<'_, '_> {}

impl<'d, 'a> IntoIterator for &'d DataFlow<'a> {
    type Item = Result<Vec<Tensor>>;
    type IntoIter = DataFlowIter<'d, 'a>;
    fn into_iter(self) -> DataFlowIter<'d, 'a> {
        self.iter()
    }
}

impl fmt::Debug for DataFlowIter<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataFlowIter").field("df", self.df).field("done", &self.done).finish()
    }
}

impl<'a> Binding for DataFlow<'a> {
    type Raw = sys::tpt_dataflow;
    const WHAT: &'static str = "dataflow";
    unsafe fn from_raw_handle(raw: *mut sys::tpt_dataflow) -> Option<DataFlow<'a>> {
        NonNull::new(raw).map(|raw| DataFlow { raw, _marker: PhantomData })
    }
}
