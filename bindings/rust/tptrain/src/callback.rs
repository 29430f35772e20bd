//! Callbacks and monitors: one closure that receives the events it asked for,
//! and the scheduling wrappers around it.

mod catalogue;

#[allow(deprecated)]
pub use catalogue::HyperParamSchedule;
pub use catalogue::{
    BestSaver, EarlyStopping, HostMemoryTracker, HumanHyperParam, HyperParamFunc, ModelSaver, ScheduledHyperParam,
    StatMonitorParam, StepWatchdog, TensorBoard, TerminateOnNaN, ThroughputTracker,
};

use crate::binding::{make, Binding};
use crate::common::{call, Code, Error, Result};
use crate::cstr::with_cstr;
use crate::dataflow::DataFlow;
use crate::model::Model;
use crate::panic;
use crate::tensor::Tensor;
use crate::trainer::Context;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::ops::{BitAnd, BitOr, BitOrAssign};
use std::os::raw::c_void;
use std::ptr::{self, NonNull};
use tptrain_sys as sys;

/// What a closure tells the loop: go on, or end training gracefully
/// (tensorpack's `StopTraining`). Errors are the `Err` of the closure's
/// `Result`, and end training with their code and message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Flow {
    #[default]
    Continue,
    /// Stop training: AFTER_TRAIN still runs, and run returns
    /// [`RunOutcome::Stopped`](crate::RunOutcome::Stopped) with this reason.
    Stop(String),
}

impl Flow {
    /// `Flow::Stop(reason.into())`.
    pub fn stop(reason: impl Into<String>) -> Flow {
        Flow::Stop(reason.into())
    }
    pub fn is_stop(&self) -> bool {
        matches!(self, Flow::Stop(_))
    }
}

/// One event delivered to a callback (`tpt_event`). In one run they come in
/// this order: `Setup`, `BeforeTrain`; per epoch `BeforeEpoch`, per step
/// [per hooked step `BeforeRun`, the step, `AfterRun`] `TriggerStep`; then
/// `AfterEpoch`, `TriggerEpoch` (and `Trigger` for callbacks that asked for it
/// but not for `TriggerEpoch`); finally `AfterTrain`, always. `Record`
/// brings monitors each scalar and image put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    Setup,
    BeforeTrain,
    BeforeEpoch,
    BeforeRun,
    AfterRun,
    TriggerStep,
    AfterEpoch,
    TriggerEpoch,
    Trigger,
    AfterTrain,
    Record,
}

const EVENTS: [(Event, sys::tpt_event, &str); 11] = [
    (Event::Setup, sys::TPT_EVENT_SETUP, "SETUP"),
    (Event::BeforeTrain, sys::TPT_EVENT_BEFORE_TRAIN, "BEFORE_TRAIN"),
    (Event::BeforeEpoch, sys::TPT_EVENT_BEFORE_EPOCH, "BEFORE_EPOCH"),
    (Event::BeforeRun, sys::TPT_EVENT_BEFORE_RUN, "BEFORE_RUN"),
    (Event::AfterRun, sys::TPT_EVENT_AFTER_RUN, "AFTER_RUN"),
    (Event::TriggerStep, sys::TPT_EVENT_TRIGGER_STEP, "TRIGGER_STEP"),
    (Event::AfterEpoch, sys::TPT_EVENT_AFTER_EPOCH, "AFTER_EPOCH"),
    (Event::TriggerEpoch, sys::TPT_EVENT_TRIGGER_EPOCH, "TRIGGER_EPOCH"),
    (Event::Trigger, sys::TPT_EVENT_TRIGGER, "TRIGGER"),
    (Event::AfterTrain, sys::TPT_EVENT_AFTER_TRAIN, "AFTER_TRAIN"),
    (Event::Record, sys::TPT_EVENT_RECORD, "RECORD"),
];

impl Event {
    /// The C value (one bit).
    pub fn to_raw(self) -> sys::tpt_event {
        EVENTS[self as usize].1
    }
    /// `None` for a value this crate does not know.
    pub fn from_raw(raw: sys::tpt_event) -> Option<Event> {
        if raw <= 0 || raw & (raw - 1) != 0 || raw > sys::TPT_EVENT_RECORD {
            return None;
        }
        Some(EVENTS[raw.trailing_zeros() as usize].0)
    }
}

/// A set of events (the `events` mask of `tpt_callback_desc`), combined with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Events(u32);

impl Events {
    pub const NONE: Events = Events(0);
    pub const SETUP: Events = Events(sys::TPT_EVENT_SETUP as u32);
    pub const BEFORE_TRAIN: Events = Events(sys::TPT_EVENT_BEFORE_TRAIN as u32);
    pub const BEFORE_EPOCH: Events = Events(sys::TPT_EVENT_BEFORE_EPOCH as u32);
    pub const BEFORE_RUN: Events = Events(sys::TPT_EVENT_BEFORE_RUN as u32);
    pub const AFTER_RUN: Events = Events(sys::TPT_EVENT_AFTER_RUN as u32);
    pub const TRIGGER_STEP: Events = Events(sys::TPT_EVENT_TRIGGER_STEP as u32);
    pub const AFTER_EPOCH: Events = Events(sys::TPT_EVENT_AFTER_EPOCH as u32);
    pub const TRIGGER_EPOCH: Events = Events(sys::TPT_EVENT_TRIGGER_EPOCH as u32);
    pub const TRIGGER: Events = Events(sys::TPT_EVENT_TRIGGER as u32);
    pub const AFTER_TRAIN: Events = Events(sys::TPT_EVENT_AFTER_TRAIN as u32);
    pub const RECORD: Events = Events(sys::TPT_EVENT_RECORD as u32);
    /// Every event, RECORD included.
    pub const ALL: Events = Events(sys::TPT_EVENT_ALL as u32);

    pub const fn bits(self) -> u32 {
        self.0
    }
    /// The known events among `bits`; unknown bits are dropped.
    pub const fn from_bits_truncate(bits: u32) -> Events {
        Events(bits & Events::ALL.0)
    }
    pub const fn union(self, other: Events) -> Events {
        Events(self.0 | other.0)
    }
    pub const fn contains(self, other: Events) -> bool {
        self.0 & other.0 == other.0
    }
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The events in the set, in delivery order.
    pub fn iter(self) -> impl Iterator<Item = Event> {
        EVENTS.iter().filter(move |e| self.0 & e.1 as u32 != 0).map(|e| e.0)
    }
}

impl From<Event> for Events {
    fn from(e: Event) -> Events {
        Events(e.to_raw() as u32)
    }
}

impl BitOr for Events {
    type Output = Events;
    fn bitor(self, rhs: Events) -> Events {
        self.union(rhs)
    }
}

impl BitOrAssign for Events {
    fn bitor_assign(&mut self, rhs: Events) {
        self.0 |= rhs.0
    }
}

impl BitAnd for Events {
    type Output = Events;
    fn bitand(self, rhs: Events) -> Events {
        Events(self.0 & rhs.0)
    }
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("Events(NONE)");
        }
        f.write_str("Events(")?;
        for (i, e) in EVENTS.iter().filter(|e| self.0 & e.1 as u32 != 0).enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            f.write_str(e.2)?;
        }
        f.write_str(")")
    }
}

/// Kinds of monitor records (`tpt_record_kind`). Monitors should ignore
/// kinds they do not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// A scalar put with [`Context::put_scalar`]: its value is
    /// [`Record::value`].
    Scalar,
    /// An image put with [`Context::put_image`] (its [`Record::value`] is
    /// unused; the image itself is the C record's `tensor`, not carried by
    /// [`Record`]).
    Image,
    Other(i32),
}

/// What [`Event::Record`] brings a monitor (`tpt_record`), borrowed for the
/// callback.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<'r> {
    pub kind: RecordKind,
    /// As given to put_scalar.
    pub name: Cow<'r, str>,
    /// When it was put.
    pub global_step: i64,
    pub epoch_num: i64,
    /// The value of a [`RecordKind::Scalar`] record.
    pub value: f64,
}

/// The offset of `tpt_record::value` (`std::mem::offset_of!` is newer than
/// the crate's rust-version, 1.70).
fn value_offset() -> usize {
    let record = MaybeUninit::<sys::tpt_record>::uninit();
    let base = record.as_ptr();
    // SAFETY: addr_of! makes a pointer to the field without reading it or
    // making a reference to uninitialised memory.
    let field = unsafe { std::ptr::addr_of!((*base).value) };
    field as usize - base as usize
}

impl<'r> Record<'r> {
    /// # Safety
    /// `r` is a record the library filled, valid for `'r`.
    unsafe fn from_raw(r: &'r sys::tpt_record) -> Record<'r> {
        // Fields past struct_size do not exist (an older library).
        let has = |end: usize| r.struct_size as usize >= end;
        Record {
            kind: match r.kind {
                sys::TPT_RECORD_SCALAR => RecordKind::Scalar,
                sys::TPT_RECORD_IMAGE => RecordKind::Image,
                other => RecordKind::Other(other),
            },
            name: if r.name.is_null() { Cow::Borrowed("") } else { CStr::from_ptr(r.name).to_string_lossy() },
            global_step: r.global_step,
            epoch_num: r.epoch_num,
            value: if has(value_offset() + size_of::<f64>()) { r.value } else { f64::NAN },
        }
    }

    fn into_owned(self) -> Record<'static> {
        Record { name: Cow::Owned(self.name.into_owned()), ..self }
    }
}

/// A callback (or monitor) not yet given to a trainer (`tpt_callback`),
/// described with [`Callback::on`] and made by [`CallbackBuilder::build`]
/// (or by [`Trainer::add_callback`](crate::Trainer::add_callback), which
/// takes the builder). It owns its closure; dropping it frees both
/// (`tpt_callback_free`).
///
/// `'a` bounds what the closure borrows: it must outlive the trainer the
/// callback is added to.
pub struct Callback<'a> {
    raw: NonNull<sys::tpt_callback>,
    _marker: PhantomData<(&'a (), *mut ())>,
}

/// The boxed user data of a callback: its closure `f`, and `S`, its state's
/// save and restore (see [`CallbackBuilder::state`]).
struct CallbackData<F, S> {
    name: String,
    f: F,
    state: S,
    /// True while `f` runs: a closure cannot be re-entered.
    busy: Cell<bool>,
    /// Records that reached this callback while `f` ran (a monitor that puts
    /// a scalar receives it itself), delivered when `f` returns.
    deferred: RefCell<VecDeque<Record<'static>>>,
}

unsafe extern "C" fn callback_trampoline<F, S>(
    trainer: *mut sys::tpt_trainer,
    event: sys::tpt_event,
    record: *const sys::tpt_record,
    user_data: *mut c_void,
) -> *mut sys::tpt_status
where
    F: FnMut(&mut Context, Event, Option<Record<'_>>) -> Result<Flow>,
{
    // Tensors made in this call are Rust values that free themselves (Drop):
    // the library's scope for the call hands them over.
    crate::tensor::own_call_tensors();
    // SAFETY: user_data is the CallbackData<F, S> this trampoline was made
    // with; the library frees it only with the callback, never during a call.
    // Fields are borrowed one by one: `f` mutably only while not busy, the
    // others shared (a re-entered call touches `busy` and `deferred` only).
    let data = user_data.cast::<CallbackData<F, S>>();
    let (busy, deferred) = (&(*data).busy, &(*data).deferred);
    let Some(event) = Event::from_raw(event) else { return ptr::null_mut() };
    let record = if record.is_null() { None } else { Some(Record::from_raw(&*record)) };
    if busy.get() {
        if let (Event::Record, Some(r)) = (event, record) {
            deferred.borrow_mut().push_back(r.into_owned());
        }
        return ptr::null_mut();
    }
    busy.set(true);
    let f = &mut (*data).f;
    let name = &(*data).name;
    let origin = || format!("callback '{name}'");
    let mut st = panic::guard(&origin, || f(Context::from_ptr(trainer), event, record));
    loop {
        let next = deferred.borrow_mut().pop_front();
        let Some(r) = next else { break };
        if st.is_null() {
            // The first outcome that is not Continue wins; the rest are drained.
            st = panic::guard(&origin, || f(Context::from_ptr(trainer), Event::Record, Some(r)));
        }
    }
    busy.set(false);
    st
}

unsafe extern "C" fn predicate_trampoline<P>(trainer: *mut sys::tpt_trainer, user_data: *mut c_void) -> i32
where
    P: FnMut(&mut Context) -> bool,
{
    // Tensors made in this call are Rust values that free themselves (Drop):
    // the library's scope for the call hands them over.
    crate::tensor::own_call_tensors();
    // SAFETY: user_data is the boxed P; a predicate is not re-entered (it is
    // asked only for loop events, never for RECORD).
    let p = &mut *user_data.cast::<P>();
    match panic::guard_value(&|| "an enable_if predicate".to_owned(), || p(Context::from_ptr(trainer))) {
        Some(true) => 1,
        Some(false) => 0,
        None => -1,
    }
}

/// The closure of a callback, with its error turned into an [`Error`].
type CallbackFn<'a> = Box<dyn FnMut(&mut Context, Event, Option<Record<'_>>) -> Result<Flow> + 'a>;

/// A callback's own state for checkpoints: save, then restore.
type StateFns<'a> = Option<(Box<dyn FnMut() -> Result<Vec<u8>> + 'a>, Box<dyn FnMut(&[u8]) -> Result<()> + 'a>)>;

unsafe extern "C" fn state_save<F, S>(out: *mut *mut sys::tpt_tensor, user_data: *mut c_void) -> *mut sys::tpt_status
where
    S: StateAccess,
{
    // SAFETY: user_data is this callback's CallbackData<F, S>; the library
    // asks for its state between events, never during one.
    let data = &mut *user_data.cast::<CallbackData<F, S>>();
    let name = &data.name;
    let mut made = None;
    let st = panic::guard(&|| format!("callback '{name}' saving its state"), || {
        let bytes = data.state.save()?;
        let n = bytes.len() as i64;
        made = Some(Tensor::from_vec(bytes, &[n])?);
        Ok(Flow::Continue)
    });
    if st.is_null() {
        // The library takes the tensor (on failure it takes nothing).
        *out = made.map_or(ptr::null_mut(), Tensor::into_raw);
    }
    st
}

unsafe extern "C" fn state_restore<F, S>(state: *const sys::tpt_tensor, user_data: *mut c_void) -> *mut sys::tpt_status
where
    S: StateAccess,
{
    // SAFETY: as in state_save; the tensor is lent for the call and seen as
    // a borrowed &Tensor (Tensor is a repr(transparent) handle), never dropped.
    let data = &mut *user_data.cast::<CallbackData<F, S>>();
    let name = &data.name;
    let handle = state;
    let state: &Tensor = &*(&handle as *const *const sys::tpt_tensor).cast::<Tensor>();
    panic::guard(&|| format!("callback '{name}' restoring its state"), || {
        let bytes = state.to_bytes()?;
        data.state.restore(&bytes)?;
        Ok(Flow::Continue)
    })
}

/// What the state trampolines need of `S`.
trait StateAccess {
    fn save(&mut self) -> Result<Vec<u8>>;
    fn restore(&mut self, bytes: &[u8]) -> Result<()>;
}

impl StateAccess for StateFns<'_> {
    fn save(&mut self) -> Result<Vec<u8>> {
        match self {
            Some((save, _)) => save(),
            None => Err(Error::new(Code::Internal, "a callback without state was asked for it")),
        }
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            Some((_, restore)) => restore(bytes),
            None => Err(Error::new(Code::Internal, "a callback without state was given one")),
        }
    }
}

/// A callback being described: made by [`Callback::on`], finished by
/// [`build`](Self::build), or by [`Trainer::add_callback`](crate::Trainer::add_callback)
/// and [`Trainer::add_monitor`](crate::Trainer::add_monitor), which take
/// either.
///
/// ```
/// use tptrain::{Callback, Events, Flow};
///
/// let report = Callback::on(Events::TRIGGER_EPOCH, |ctx, _, _| {
///     ctx.log(&format!("epoch {} done", ctx.epoch_num()))?;
///     Ok(Flow::Continue)
/// })
/// .name("report")
/// .all_workers()
/// .build()?;
/// # drop(report);
/// # Ok::<(), tptrain::Error>(())
/// ```
#[must_use = "a callback builder does nothing until it is built or added to a trainer"]
pub struct CallbackBuilder<'a> {
    events: Events,
    name: Option<String>,
    chief_only: bool,
    f: CallbackFn<'a>,
    state: StateFns<'a>,
}

impl<'a> Callback<'a> {
    /// Describes a callback that receives `events` (`tpt_callback_new`); name
    /// it with [`name`](CallbackBuilder::name) and choose where it runs with
    /// [`chief_only`](CallbackBuilder::chief_only) (the default, as in
    /// tensorpack) or [`all_workers`](CallbackBuilder::all_workers).
    ///
    /// The closure gets the trainer, the event, and for [`Event::Record`] the
    /// record; it returns [`Flow::Continue`], [`Flow::Stop`] to end training
    /// gracefully, or an [`Error`] that ends training with its code and
    /// message ([`Trainer::run`](crate::Trainer::run) returns it). Its result
    /// type is this crate's [`Result<Flow>`](crate::Result), so a closure
    /// that uses `?` needs no annotation; `?` also converts the errors this
    /// crate has a `From` for ([`std::io::Error`], a number's parse error),
    /// and `.map_err(Error::wrap)` any other, keeping it as the
    /// [`source`](std::error::Error::source) (see [`Error::wrap`]). For a
    /// closure whose error is of a type of its own, use
    /// [`on_fallible`](Self::on_fallible). A panic ends training too, and
    /// `Trainer::run` resumes it.
    ///
    /// ```
    /// use tptrain::{Callback, Events, Flow};
    ///
    /// let report = Callback::on(Events::TRIGGER_EPOCH, |ctx, _, _| {
    ///     let cost = ctx.scalar_latest("cost")?.value;
    ///     println!("epoch {}: cost {cost:.3}", ctx.epoch_num());
    ///     Ok(Flow::Continue)
    /// });
    /// # drop(report);
    /// ```
    pub fn on<F>(events: Events, f: F) -> CallbackBuilder<'a>
    where
        F: FnMut(&mut Context, Event, Option<Record<'_>>) -> Result<Flow> + 'a,
    {
        CallbackBuilder { events, name: None, chief_only: true, f: Box::new(f), state: None }
    }

    /// [`on`](Self::on) for a closure whose error is of any type that
    /// converts into `Box<dyn Error + Send + Sync>` (its own error enum, a
    /// boxed error, an `anyhow::Error`...): an [`Error`] keeps its code and
    /// message; any other becomes a [`Code::Callback`] error with the error's
    /// text as the message and the error itself as the
    /// [`source`](std::error::Error::source) of the error that
    /// [`Trainer::run`](crate::Trainer::run) returns (see [`Error::wrap`]).
    /// Name the error type where the body does not:
    ///
    /// ```
    /// use tptrain::{Callback, Events, Flow};
    ///
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// let check = Callback::on_fallible(Events::TRIGGER_EPOCH, |ctx, _, _| -> Result<Flow, BoxError> {
    ///     if ctx.epoch_num() > 100 {
    ///         return Err("too many epochs".into());
    ///     }
    ///     Ok(Flow::Continue)
    /// });
    /// # drop(check);
    /// ```
    pub fn on_fallible<F, E>(events: Events, f: F) -> CallbackBuilder<'a>
    where
        F: FnMut(&mut Context, Event, Option<Record<'_>>) -> std::result::Result<Flow, E> + 'a,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut f = f;
        Callback::on(events, move |ctx, event, record| f(ctx, event, record).map_err(Error::wrap))
    }

    /// Gives up ownership of the handle (for a C function that takes it).
    pub fn into_raw(self) -> *mut sys::tpt_callback {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        raw
    }

    /// Takes ownership of a handle.
    ///
    /// # Safety
    /// `raw` is a live callback that nothing else frees, whose user data
    /// outlives `'a`.
    pub unsafe fn from_raw(raw: *mut sys::tpt_callback) -> Option<Callback<'a>> {
        NonNull::new(raw).map(|raw| Callback { raw, _marker: PhantomData })
    }

    /// Calls a wrapper that consumes `inner` (also on failure).
    fn wrapped(
        self,
        f: impl FnOnce(*mut *mut sys::tpt_callback, *mut sys::tpt_callback) -> *mut sys::tpt_status,
    ) -> Result<Callback<'a>> {
        make(|out| f(out, self.into_raw()))
    }

    /// Makes the callback trigger more often (tensorpack's
    /// `PeriodicTrigger`, `tpt_callback_periodic_trigger`): it gets
    /// [`Event::Trigger`] after each step where `global_step` is a multiple
    /// of [`every.steps`](Every::steps), after each epoch where `epoch_num`
    /// is a multiple of [`every.epochs`](Every::epochs), and, with
    /// [`every.before_train`](Every::before_train), in BEFORE_TRAIN; its own
    /// TRIGGER_EPOCH is replaced. At least one condition must be set
    /// ([`Code::InvalidArgument`] otherwise). Takes the callback, also on
    /// failure.
    ///
    /// ```
    /// use tptrain::{Callback, Events, Every, Flow};
    ///
    /// let validate = Callback::on(Events::TRIGGER, |ctx, _, _| {
    ///     ctx.log("validating")?;
    ///     Ok(Flow::Continue)
    /// })
    /// .periodic_trigger(Every::steps(500).before_train())?;
    /// # drop(validate);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn periodic_trigger(self, every: Every) -> Result<Callback<'a>> {
        let Every { steps, epochs, before_train } = every;
        self.wrapped(|out, inner| unsafe {
            sys::tpt_callback_periodic_trigger(out, inner, steps, epochs, before_train as i32)
        })
    }

    /// Makes the callback run less often (tensorpack's `PeriodicCallback`,
    /// `tpt_callback_periodic`): its per-epoch and per-step events reach it
    /// only when `global_step` is a multiple of [`every.steps`](Every::steps),
    /// when `epoch_num` is a multiple of [`every.epochs`](Every::epochs), or
    /// (with `every.epochs`) at the last step of the last epoch. At least one
    /// condition must be set; [`Every::before_train`] is
    /// [`periodic_trigger`](Self::periodic_trigger)'s alone (both are
    /// [`Code::InvalidArgument`] errors). Takes the callback, also on
    /// failure.
    ///
    /// ```
    /// use tptrain::{Callback, Events, Every, Flow};
    ///
    /// let log = Callback::on(Events::TRIGGER_STEP, |ctx, _, _| {
    ///     ctx.log(&format!("step {}", ctx.global_step()))?;
    ///     Ok(Flow::Continue)
    /// })
    /// .periodic(Every::steps(25))?;
    /// # drop(log);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn periodic(self, every: Every) -> Result<Callback<'a>> {
        if every.before_train {
            return Err(Error::new(
                Code::InvalidArgument,
                "Callback::periodic: Every::before_train is for periodic_trigger only \
                 (periodic lets events through, it makes none)",
            ));
        }
        let Every { steps, epochs, .. } = every;
        self.wrapped(|out, inner| unsafe { sys::tpt_callback_periodic(out, inner, steps, epochs) })
    }

    /// Lets BEFORE/AFTER_EPOCH, BEFORE/AFTER_RUN, TRIGGER_STEP and
    /// TRIGGER_EPOCH reach the callback only when `predicate` says so (asked
    /// in BEFORE_RUN and remembered for AFTER_RUN); other events always pass
    /// (tensorpack's `EnableCallbackIf`, `tpt_callback_enable_if`). Takes the
    /// callback, also on failure.
    pub fn enable_if<P>(self, predicate: P) -> Result<Callback<'a>>
    where
        P: FnMut(&mut Context) -> bool + 'a,
    {
        let user_data = Box::into_raw(Box::new(predicate)).cast::<c_void>();
        self.wrapped(|out, inner| unsafe {
            // The library owns user_data from here on, also on failure.
            sys::tpt_callback_enable_if(
                out,
                inner,
                Some(predicate_trampoline::<P>),
                user_data,
                Some(panic::drop_box::<P>),
            )
        })
    }
}

impl<'a> CallbackBuilder<'a> {
    /// The name in logs, in the slow-callback report and in errors
    /// ("panic in callback 'name': ..."); without one it is "callback".
    pub fn name(mut self, name: impl Into<String>) -> CallbackBuilder<'a> {
        self.name = Some(name.into());
        self
    }

    /// Runs on the chief only: dropped by a trainer whose
    /// [`is_chief`](crate::TrainerOptions::is_chief) is false. The default.
    pub fn chief_only(mut self) -> CallbackBuilder<'a> {
        self.chief_only = true;
        self
    }

    /// Runs on every worker, chief or not.
    pub fn all_workers(mut self) -> CallbackBuilder<'a> {
        self.chief_only = false;
        self
    }

    /// Gives the callback state of its own that checkpoints keep (a
    /// schedule's position, a best value): `save` returns it as bytes when a
    /// checkpoint is taken, `restore` gets those bytes back when a resumed
    /// run starts (after SETUP, before BEFORE_TRAIN). The callback's
    /// [`name`](Self::name) is its key in the checkpoint. Share the state
    /// with the event closure through an `Rc<Cell<..>>` or the like.
    ///
    /// ```
    /// use std::{cell::Cell, rc::Rc};
    /// use tptrain::{Callback, Events, Flow};
    ///
    /// let seen = Rc::new(Cell::new(0u64));
    /// let (a, b, c) = (seen.clone(), seen.clone(), seen.clone());
    /// let counter = Callback::on(Events::TRIGGER_STEP, move |_, _, _| {
    ///     a.set(a.get() + 1);
    ///     Ok(Flow::Continue)
    /// })
    /// .name("step counter")
    /// .state(move || Ok(b.get().to_le_bytes().to_vec()), move |bytes| {
    ///     let bytes = bytes.try_into().map_err(|_| tptrain::Error::new(tptrain::Code::InvalidArgument, "8 bytes expected"))?;
    ///     c.set(u64::from_le_bytes(bytes));
    ///     Ok(())
    /// })
    /// .build()?;
    /// # drop(counter);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn state<Sv, Rs>(mut self, save: Sv, restore: Rs) -> CallbackBuilder<'a>
    where
        Sv: FnMut() -> Result<Vec<u8>> + 'a,
        Rs: FnMut(&[u8]) -> Result<()> + 'a,
    {
        self.state = Some((Box::new(save), Box::new(restore)));
        self
    }

    /// Builds the callback and makes it trigger more often:
    /// [`Callback::periodic_trigger`].
    pub fn periodic_trigger(self, every: Every) -> Result<Callback<'a>> {
        self.build()?.periodic_trigger(every)
    }

    /// Builds the callback and makes it run less often: [`Callback::periodic`].
    pub fn periodic(self, every: Every) -> Result<Callback<'a>> {
        self.build()?.periodic(every)
    }

    /// Builds the callback and lets the loop's events reach it only when
    /// `predicate` says so: [`Callback::enable_if`].
    pub fn enable_if<P>(self, predicate: P) -> Result<Callback<'a>>
    where
        P: FnMut(&mut Context) -> bool + 'a,
    {
        self.build()?.enable_if(predicate)
    }

    /// Makes the callback (`tpt_callback_new`). Fails for a name with a NUL
    /// byte (the closure is dropped then).
    pub fn build(self) -> Result<Callback<'a>> {
        let CallbackBuilder { events, name, chief_only, f, state } = self;
        let stateful = state.is_some();
        let data = Box::new(CallbackData {
            name: name.clone().unwrap_or_else(|| "callback".to_owned()),
            f,
            state,
            busy: Cell::new(false),
            deferred: RefCell::new(VecDeque::new()),
        });
        let had = panic::pending();
        let mut out = ptr::null_mut();
        let make = |n: *const std::os::raw::c_char| {
            let mut desc = sys::TPT_CALLBACK_DESC_INIT;
            desc.events = events.bits();
            desc.name = n;
            desc.chief_only = chief_only as i32;
            desc.fn_ = Some(callback_trampoline::<CallbackFn<'a>, StateFns<'a>>);
            if stateful {
                desc.save = Some(state_save::<CallbackFn<'a>, StateFns<'a>>);
                desc.restore = Some(state_restore::<CallbackFn<'a>, StateFns<'a>>);
            }
            desc.user_data = Box::into_raw(data).cast::<c_void>();
            desc.destroy = Some(panic::drop_box::<CallbackData<CallbackFn<'a>, StateFns<'a>>>);
            // The library owns user_data from here on, also on failure.
            call!(sys::tpt_callback_new(&mut out, &desc))
        };
        let r = match &name {
            Some(name) => with_cstr(name, "name", make),
            None => Ok(make(ptr::null())),
        };
        // A NUL in the name: the box was dropped in Rust, never given to C.
        panic::resume_if_new(had);
        r??;
        Callback::wrap(out)
    }
}

impl fmt::Debug for CallbackBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackBuilder")
            .field("events", &self.events)
            .field("name", &self.name)
            .field("chief_only", &self.chief_only)
            .field("stateful", &self.state.is_some())
            .finish_non_exhaustive()
    }
}

/// Whatever goes where a callback goes: [`Trainer::add_callback`](crate::Trainer::add_callback),
/// [`Trainer::add_monitor`](crate::Trainer::add_monitor),
/// [`TrainConfig::callback`](crate::TrainConfig::callback) and
/// [`TrainConfig::monitor`](crate::TrainConfig::monitor) take a
/// [`Callback`], a [`CallbackBuilder`] from [`Callback::on`], any builder of
/// the catalogue ([`EarlyStopping`], [`ModelSaver`],
/// [`InferenceRunner`](crate::InferenceRunner), ...), or a `Result` of any of
/// them (what [`Callback::inference_runner`] and the wrappers return), and
/// build it there: no `.build()?` and no `?` needed.
///
/// Its provided methods wrap any of them as [`Callback`]'s methods do
/// ([`periodic`](Self::periodic), [`periodic_trigger`](Self::periodic_trigger),
/// [`enable_if`](Self::enable_if)); import the trait to call them on a
/// catalogue builder:
///
/// ```no_run
/// use tptrain::{Every, InferenceRunner, Inferencer, IntoCallback};
/// # fn f<'a>(model: &tptrain::Model<'a>, val: &tptrain::DataFlow<'a>, trainer: &mut tptrain::Trainer<'a>) -> tptrain::Result<()> {
/// let runner = InferenceRunner::new(model, val).inferencer(Inferencer::scalar_stats(&["cost"]));
/// trainer.add_callback(runner.periodic_trigger(Every::steps(500)))?;
/// # Ok(()) }
/// ```
pub trait IntoCallback<'a> {
    /// The callback, built if need be.
    fn into_callback(self) -> Result<Callback<'a>>;

    /// [`Callback::periodic`] of the callback.
    fn periodic(self, every: Every) -> Result<Callback<'a>>
    where
        Self: Sized,
    {
        self.into_callback()?.periodic(every)
    }

    /// [`Callback::periodic_trigger`] of the callback.
    fn periodic_trigger(self, every: Every) -> Result<Callback<'a>>
    where
        Self: Sized,
    {
        self.into_callback()?.periodic_trigger(every)
    }

    /// [`Callback::enable_if`] of the callback.
    fn enable_if<P>(self, predicate: P) -> Result<Callback<'a>>
    where
        Self: Sized,
        P: FnMut(&mut Context) -> bool + 'a,
    {
        self.into_callback()?.enable_if(predicate)
    }
}

impl<'a> IntoCallback<'a> for Callback<'a> {
    fn into_callback(self) -> Result<Callback<'a>> {
        Ok(self)
    }
}

impl<'a> IntoCallback<'a> for CallbackBuilder<'a> {
    fn into_callback(self) -> Result<Callback<'a>> {
        self.build()
    }
}

/// A callback, or a builder, that a fallible call made: its error comes out
/// where the callback is taken (`trainer.add_callback(Callback::inference_runner(..))?`).
impl<'a, T: IntoCallback<'a>> IntoCallback<'a> for Result<T> {
    fn into_callback(self) -> Result<Callback<'a>> {
        self?.into_callback()
    }
}

/// How often a periodic wrapper lets a callback run
/// ([`Callback::periodic`]) or trigger ([`Callback::periodic_trigger`]),
/// and how often a [`ModelSaver`] saves ([`ModelSaver::every`]): every
/// [`steps`](Self::steps) global steps, every [`epochs`](Self::epochs)
/// epochs, and (`periodic_trigger` only) [`before_train`](Self::before_train).
/// A condition left at 0 (`false`) is off; `Default` has them all off.
/// Spell it with the constructors rather than the numbers:
///
/// ```
/// use tptrain::Every;
///
/// assert_eq!(Every::steps(500), Every { steps: 500, ..Default::default() });
/// let both = Every::epochs(2).and_steps(1000).before_train();
/// assert_eq!((both.steps, both.epochs, both.before_train), (1000, 2, true));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Every {
    /// Every this many global steps (when `global_step` is a multiple of
    /// it); 0: not by steps.
    pub steps: i64,
    /// Every this many epochs (when `epoch_num` is a multiple of it); 0: not
    /// by epochs.
    pub epochs: i64,
    /// Also once in BEFORE_TRAIN ([`Callback::periodic_trigger`] only).
    pub before_train: bool,
}

impl Every {
    /// Every `n` global steps.
    pub const fn steps(n: i64) -> Every {
        Every { steps: n, epochs: 0, before_train: false }
    }

    /// Every `n` epochs.
    pub const fn epochs(n: i64) -> Every {
        Every { steps: 0, epochs: n, before_train: false }
    }

    /// The same, and also every `n` global steps.
    pub const fn and_steps(self, n: i64) -> Every {
        Every { steps: n, ..self }
    }

    /// The same, and also every `n` epochs.
    pub const fn and_epochs(self, n: i64) -> Every {
        Every { epochs: n, ..self }
    }

    /// The same, and also once in BEFORE_TRAIN ([`Callback::periodic_trigger`]
    /// only: tensorpack's `PeriodicTrigger(before_train=True)`).
    pub const fn before_train(self) -> Every {
        Every { before_train: true, ..self }
    }
}

impl Drop for Callback<'_> {
    fn drop(&mut self) {
        let had = panic::pending();
        // SAFETY: we own the handle; its destroy functions run here.
        unsafe { sys::tpt_callback_free(self.raw.as_ptr()) };
        panic::resume_if_new(had);
    }
}

impl fmt::Debug for Callback<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback").field("raw", &self.raw).finish()
    }
}

impl<'a> Binding for Callback<'a> {
    type Raw = sys::tpt_callback;
    const WHAT: &'static str = "callback";
    unsafe fn from_raw_handle(raw: *mut sys::tpt_callback) -> Option<Callback<'a>> {
        Callback::from_raw(raw)
    }
}

impl<'a> Callback<'a> {
    /// tensorpack's InferenceRunner, the short form (`tpt_inference_runner_new`):
    /// at every TRIGGER (the end of each epoch) it runs one pass of `df`
    /// (batches in signature order; it must be finite) through the model's
    /// inference tower and puts, for each name in `outputs`, the mean of
    /// that output over all rows as the scalar `"validation_<name>"` (one
    /// [`ScalarStats`](crate::ScalarStats); an
    /// [`InferenceRunner`](crate::InferenceRunner) takes any inferencers).
    /// It keeps references to the model and `df`, which it consumes.
    pub fn inference_runner(model: &Model<'a>, df: &DataFlow<'a>, outputs: &[&str]) -> Result<Callback<'a>> {
        crate::inference::short_runner(model, df, outputs)
    }
}
