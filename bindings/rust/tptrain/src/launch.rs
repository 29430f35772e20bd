//! The run configuration of tensorpack's `launch_train_with_config`
//! (`tpt_train_config`, `tpt_launch_train`): [`TrainConfig`], its init hook
//! [`InitFn`] and [`launch_train`].

use crate::callback::{Callback, IntoCallback};
use crate::common::{Code, Error, Result};
use crate::dataflow::DataFlow;
use crate::input::{Input, InputOptions};
use crate::model::Model;
use crate::panic;
use crate::strategy::{Distributed, Towers};
use crate::trainer::{RunOutcome, Trainer, TrainerOptions};
use crate::Flow;
use std::fmt;
use std::os::raw::c_void;
use tptrain_sys as sys;

/// The init / restore hook of a [`TrainConfig`] (tensorpack's
/// `session_init`): it runs once on the chief, after the model's build call
/// and before BEFORE_TRAIN, e.g. to load weights with
/// [`Model::set_variable`](crate::Model::set_variable). Made by [`InitFn::new`].
pub struct InitFn<'a>(Box<InitClosure<'a>>);

/// The closure of an init hook, with its error turned into an [`Error`].
type InitClosure<'a> = dyn FnMut(&Model<'_>) -> Result<Flow> + 'a;

impl<'a> InitFn<'a> {
    /// An init hook that calls `f` with the model. It returns
    /// [`Flow::Continue`], [`Flow::Stop`] to end training gracefully, or an
    /// [`Error`] that fails training with its code and message (an error of
    /// another type: `.map_err(Error::wrap)`, which keeps it as the
    /// [`source`](std::error::Error::source)). The result type is this
    /// crate's [`Result<Flow>`](crate::Result), so `?` needs no annotation.
    pub fn new<F>(f: F) -> InitFn<'a>
    where
        F: FnMut(&Model<'_>) -> Result<Flow> + 'a,
    {
        InitFn(Box::new(f))
    }
}

impl fmt::Debug for InitFn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InitFn")
    }
}

/// The boxed user data of an init hook (one thin pointer for C).
pub(crate) struct InitHook<'a>(pub(crate) InitFn<'a>);

pub(crate) unsafe extern "C" fn init_trampoline(
    model: *mut sys::tpt_model,
    user_data: *mut c_void,
) -> *mut sys::tpt_status {
    // Tensors made in this call are Rust values that free themselves (Drop):
    // the library's scope for the call hands them over.
    crate::tensor::own_call_tensors();
    // SAFETY: user_data is the InitHook the trainer owns, alive while the C
    // trainer is; the hook runs once per run, never re-entered.
    let hook = &mut *user_data.cast::<InitHook<'_>>();
    panic::guard(&|| "the init hook".to_owned(), || {
        // SAFETY: the library lends its own live handle for the call.
        let model = Model::borrowed(model)
            .ok_or_else(|| Error::new(Code::Internal, "the init hook was called without a model"))?;
        (hook.0 .0)(&model)
    })
}

/// A training described as tensorpack's `TrainConfig`
/// (`tpt_train_config`), for [`Trainer::from_config`](crate::Trainer::from_config) and [`launch_train`].
/// The batches come from an [`Input`] ([`TrainConfig::new`]) or from a
/// [`DataFlow`] of batches ([`TrainConfig::from_dataflow`]), one or the
/// other. The trainer is the simple one (one tower) unless
/// [`towers`](Self::towers) says otherwise, and trains in this process
/// alone unless [`distributed`](Self::distributed) makes it one rank of a
/// job.
///
/// The callbacks and monitors are added with [`callback`](Self::callback)
/// and [`monitor`](Self::monitor), which take whatever
/// [`Trainer::add_callback`](crate::Trainer::add_callback) takes (an
/// [`IntoCallback`]: a builder, a [`Callback`], or a `Result` of either) and
/// chain after the struct literal:
///
/// ```no_run
/// use tptrain::{launch_train, Callback, EarlyStopping, Events, Flow, InitFn, Input, Model, ModelSaver, Tensor,
///               TrainConfig, TrainerOptions};
/// # fn demo(model: &Model<'_>, x: &Tensor, y: &Tensor) -> tptrain::Result<()> {
/// let config = TrainConfig {
///     options: Some(TrainerOptions { max_epoch: 10, ..Default::default() }),
///     init: Some(InitFn::new(|model| {
///         model.set_variable("b", &Tensor::from_slice(&[1f32], &[1])?)?;
///         Ok(Flow::Continue)
///     })),
///     ..TrainConfig::new(model, Input::from_tensors(&[x, y], 16, Some(42))?)
/// }
/// .callback(ModelSaver::new())?
/// .callback(EarlyStopping::new("cost").patience(2))?
/// .callback(Callback::on(Events::TRIGGER_EPOCH, |ctx, _, _| {
///     ctx.log(&format!("epoch {} done", ctx.epoch_num()))?;
///     Ok(Flow::Continue)
/// }))?;
/// launch_train(config)?;
/// # Ok(())
/// # }
/// ```
///
/// With towers (tensorpack's `launch_train_with_config(config,
/// SyncMultiGPUTrainerReplicated(2))`):
///
/// ```no_run
/// use tptrain::{launch_train, DataFlow, Model, Towers, TrainConfig};
/// # fn demo(model: &Model<'_>, batches: &DataFlow<'_>) -> tptrain::Result<()> {
/// launch_train(TrainConfig { towers: Some(Towers::replicated(2)), ..TrainConfig::from_dataflow(model, batches) })?;
/// # Ok(())
/// # }
/// ```
///
/// As one rank of a distributed job started by `tptrain-run -n N`
/// (tensorpack's `launch_train_with_config(config, HorovodTrainer())`):
///
/// ```no_run
/// use tptrain::{launch_train, DataFlow, Distributed, Model, TrainConfig};
/// # fn demo(model: &Model<'_>, batches: &DataFlow<'_>) -> tptrain::Result<()> {
/// launch_train(TrainConfig {
///     distributed: Some(Distributed::from_env()),
///     ..TrainConfig::from_dataflow(model, batches)
/// })?;
/// # Ok(())
/// # }
/// ```
pub struct TrainConfig<'m, 'a> {
    /// `None`: the defaults, with steps_per_epoch from the input.
    pub options: Option<TrainerOptions>,
    /// The model; the trainer keeps its own reference.
    pub model: &'m Model<'a>,
    /// Where the batches come from; taken. This or `dataflow`.
    pub input: Option<Input<'a>>,
    /// This or `input`: a dataflow of batches in signature order, wrapped
    /// in a queue input (tensorpack's automatic QueueInput); the trainer
    /// keeps its own reference.
    pub dataflow: Option<&'m DataFlow<'a>>,
    /// With `dataflow`: the input made from it (its kind, queue capacity,
    /// whether it repeats), as [`Input::from_dataflow`](crate::Input::from_dataflow)
    /// takes them; `None`: the defaults (a queue of 50 batches that
    /// repeats). An error with `input`.
    pub input_options: Option<InputOptions>,
    /// Registered as user callbacks, in order; taken. Add to it with
    /// [`callback`](Self::callback), which takes builders too.
    pub callbacks: Vec<Callback<'a>>,
    /// Registered after the default monitors; taken. Add to it with
    /// [`monitor`](Self::monitor), which takes builders too.
    pub monitors: Vec<Callback<'a>>,
    /// The init / restore hook; `None`: none.
    pub init: Option<InitFn<'a>>,
    /// `None`: the simple trainer (one tower, as [`Trainer::set_model`](crate::Trainer::set_model));
    /// else the strategy and towers of a data-parallel trainer (as
    /// [`Trainer::set_towers`](crate::Trainer::set_towers)), whose default steps_per_epoch is the
    /// input's size / towers.
    pub towers: Option<Towers>,
    /// `None`: this process trains alone; else it is one rank of a
    /// distributed job (as [`Trainer::set_distributed`](crate::Trainer::set_distributed)), which it joins
    /// when the trainer is made.
    pub distributed: Option<Distributed>,
}

impl<'m, 'a> TrainConfig<'m, 'a> {
    /// A config of `model` fed by `input`, with default options, no
    /// callbacks, no monitors, no init hook, no towers and no job.
    pub fn new(model: &'m Model<'a>, input: Input<'a>) -> TrainConfig<'m, 'a> {
        TrainConfig { input: Some(input), ..TrainConfig::new_empty(model) }
    }

    /// A config of `model` fed by `dataflow`, a dataflow of batches in
    /// signature order that the trainer wraps in a queue input (its size is
    /// the default steps_per_epoch), with default options, no callbacks, no
    /// monitors, no init hook, no towers and no job.
    pub fn from_dataflow(model: &'m Model<'a>, dataflow: &'m DataFlow<'a>) -> TrainConfig<'m, 'a> {
        TrainConfig { dataflow: Some(dataflow), ..TrainConfig::new_empty(model) }
    }

    /// Appends a callback to [`callbacks`](Self::callbacks): anything
    /// [`Trainer::add_callback`](crate::Trainer::add_callback) takes (a
    /// catalogue builder, a [`CallbackBuilder`](crate::CallbackBuilder), a
    /// [`Callback`], or a `Result` of one), built here. Returns the config,
    /// to chain; on failure the config and the callback are dropped.
    ///
    /// ```no_run
    /// use tptrain::{Callback, DataFlow, EarlyStopping, Model, TrainConfig};
    /// # fn demo(model: &Model<'_>, batches: &DataFlow<'_>, val: &DataFlow<'_>) -> tptrain::Result<()> {
    /// let config = TrainConfig::from_dataflow(model, batches)
    ///     .callback(Callback::inference_runner(model, val, &["accuracy"]))? // puts validation_accuracy
    ///     .callback(EarlyStopping::new("validation_accuracy").maximize())?;
    /// # let _ = config;
    /// # Ok(())
    /// # }
    /// ```
    pub fn callback(mut self, callback: impl IntoCallback<'a>) -> Result<TrainConfig<'m, 'a>> {
        self.callbacks.push(callback.into_callback()?);
        Ok(self)
    }

    /// Appends a monitor to [`monitors`](Self::monitors) (a
    /// [`TensorBoard`](crate::TensorBoard), or any callback that wants
    /// [`Event::Record`](crate::Event::Record)), as
    /// [`callback`](Self::callback) does.
    pub fn monitor(mut self, monitor: impl IntoCallback<'a>) -> Result<TrainConfig<'m, 'a>> {
        self.monitors.push(monitor.into_callback()?);
        Ok(self)
    }

    fn new_empty(model: &'m Model<'a>) -> TrainConfig<'m, 'a> {
        TrainConfig {
            options: None,
            model,
            input: None,
            dataflow: None,
            input_options: None,
            callbacks: Vec::new(),
            monitors: Vec::new(),
            init: None,
            towers: None,
            distributed: None,
        }
    }
}

impl fmt::Debug for TrainConfig<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrainConfig")
            .field("options", &self.options)
            .field("model", &self.model)
            .field("input", &self.input)
            .field("dataflow", &self.dataflow)
            .field("input_options", &self.input_options)
            .field("callbacks", &self.callbacks)
            .field("monitors", &self.monitors)
            .field("init", &self.init)
            .field("towers", &self.towers)
            .field("distributed", &self.distributed)
            .finish()
    }
}

/// tensorpack's `launch_train_with_config`: makes the trainer of `config`
/// ([`Trainer::from_config`](crate::Trainer::from_config)), runs it and frees it, as
/// `tpt_launch_train` does. Returns how the run ended, or the error that
/// ended it (a closure's error comes back unchanged).
///
/// # Panics
/// Resumes the panic of a closure (the init hook included) once the C loop
/// has returned, as [`Trainer::run`](crate::Trainer::run) does.
pub fn launch_train(config: TrainConfig<'_, '_>) -> Result<RunOutcome> {
    // Not a call of tpt_launch_train itself: that frees the trainer before
    // the stop reason can be read.
    Trainer::from_config(config)?.run()
}
