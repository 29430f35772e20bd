//! Writing a trainer: train ops and the GAN trainers (the header section
//! "Writing a trainer: train ops and the GAN trainers"; tensorpack: "If your
//! task is fundamentally different from single-cost optimization, you will
//! need to write a trainer").
//!
//! A [`TrainOp`] is one optimisation of the model, tensorpack's
//! `opt.minimize(cost, var_list)`: a one-element output of the tower
//! function ([`Tower::set_output`](crate::Tower::set_output)) minimised over
//! the trainable variables under a scope, by an optimizer of its own. A
//! run_step of your own ([`Trainer::set_run_step`](crate::Trainer::set_run_step), after
//! [`Trainer::set_model`](crate::Trainer::set_model)) runs train ops by name with
//! [`StepContext::run_train_ops`](crate::StepContext::run_train_ops); the GAN trainers are such run_steps, made
//! by [`Trainer::set_gan`](crate::Trainer::set_gan) from a [`Gan`]; [`Trainer::set_train_ops`](crate::Trainer::set_train_ops) makes
//! a list of train ops the default step, without a run_step of your own.
//! The trainer keeps everything else: callbacks, monitors, checkpoints (each
//! op's optimizer state included, so a resumed run goes on exactly) and the
//! input. The simple trainer, the replicated and the parameter-server
//! strategies ([`Trainer::set_towers`](crate::Trainer::set_towers), each op's gradients averaged over
//! the towers) and distributed jobs run train ops; the async strategy does
//! not (docs/custom_trainers.md).
//!
//! ```no_run
//! use tptrain::{Flow, Input, Model, Run, TrainOp, Trainer, TrainerOptions};
//! # fn demo(model: &Model<'_>, input: Input<'_>) -> tptrain::Result<()> {
//! // The tower function publishes the outputs "g_loss" and "d_loss".
//! model.add_train_op(&TrainOp::new("g_op").cost("g_loss").scope("gen/"))?;
//! model.add_train_op(&TrainOp::new("d_op").cost("d_loss").scope("discrim/"))?;
//! let mut trainer = Trainer::new(&TrainerOptions { max_epoch: 10, ..Default::default() })?;
//! trainer.set_model(model, input)?;
//! // Then the iteration: D's update without the hooks, then G's as the step
//! // that callbacks see.
//! trainer.set_run_step(|ctx| -> tptrain::Result<Flow> {
//!     ctx.run_train_ops(&["d_op"], Run::Raw)?;
//!     ctx.run_train_ops(&["g_op"], Run::Hooked)
//! })?;
//! trainer.run()?;
//! # Ok(())
//! # }
//! ```

use crate::cstr::cstring;
use crate::error::{Code, Error, Result};
use crate::model::Optimizer;
use crate::towers::{RawTowers, Towers};
use std::ffi::CString;
use std::ptr;
use tptrain_sys as sys;

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

/// tensorpack's GAN trainers (`tpt_gan_options`), for [`Trainer::set_gan`](crate::Trainer::set_gan):
/// [`Gan::new`] (also `Default`) is GANTrainer, [`Gan::separate`] is
/// SeparateGANTrainer, and either with [`towers`](Self::towers) is
/// MultiGPUGANTrainer. They run the model's train ops "g_op" (the
/// generator's) and "d_op" (the discriminator's) unless [`ops`](Self::ops)
/// names others.
///
/// ```
/// use tptrain::{Gan, Towers};
///
/// // GANTrainer: every step updates G then D from one forward pass.
/// assert_eq!(Gan::new().periods(), None);
/// // SeparateGANTrainer: D every 3 global steps, G every one, with ops of
/// // other names.
/// let separate = Gan::separate(3, 1).ops("gen_op", "disc_op");
/// assert_eq!(separate.periods(), Some((3, 1)));
/// // MultiGPUGANTrainer: two replicated towers, each with a batch of its own.
/// let multi = Gan::new().towers(&Towers::replicated(2));
/// assert_eq!(multi.tower_count(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[must_use = "a Gan does nothing until it is given to Trainer::set_gan"]
pub struct Gan {
    periods: Option<(u64, u64)>,
    g_op: Option<String>,
    d_op: Option<String>,
    towers: Option<Towers>,
}

impl Default for Gan {
    fn default() -> Gan {
        Gan::new()
    }
}

impl Gan {
    /// tensorpack's GANTrainer: every run_step is one hooked run of the
    /// generator's then the discriminator's update, both from one forward
    /// pass (tensorpack: `train_op = d_min` with a control dependency on
    /// `g_min`).
    pub fn new() -> Gan {
        Gan { periods: None, g_op: None, d_op: None, towers: None }
    }

    /// tensorpack's SeparateGANTrainer: each run_step makes a hooked run of
    /// the discriminator's update when global_step % `d_period` == 0, then
    /// one of the generator's when global_step % `g_period` == 0, with
    /// global_step as it is by then (so a run_step may make two hooked runs,
    /// each with a batch of its own). Both periods are at least 1 and one of
    /// them is 1; other periods are a [`Code::InvalidArgument`] error, naming
    /// them, when the trainer is set.
    pub fn separate(d_period: u64, g_period: u64) -> Gan {
        Gan { periods: Some((d_period, g_period)), ..Gan::new() }
    }

    /// The names of the generator's and the discriminator's train ops
    /// (default: "g_op" and "d_op"); two different names, else a
    /// [`Code::InvalidArgument`] error when the trainer is set.
    pub fn ops(mut self, g_op: &str, d_op: &str) -> Gan {
        self.g_op = Some(g_op.to_owned());
        self.d_op = Some(d_op.to_owned());
        self
    }

    /// Trains on `towers` (tensorpack's MultiGPUGANTrainer): every tower
    /// takes a batch of its own, runs the tower function, and each train op
    /// minimises its cost averaged over the towers (and over the ranks of a
    /// distributed job), with the towers' strategy:
    /// [`Strategy::Replicated`](crate::Strategy::Replicated) or
    /// [`Strategy::ParameterServer`](crate::Strategy::ParameterServer);
    /// [`Strategy::Async`](crate::Strategy::Async) is a
    /// [`Code::Unsupported`] error when the trainer is set. As with
    /// [`Trainer::set_towers`](crate::Trainer::set_towers), steps_per_epoch defaults to the input's size
    /// divided by the number of towers, and the reported outputs are tower
    /// 0's. Default: one tower (the simple trainer).
    pub fn towers(mut self, towers: &Towers) -> Gan {
        self.towers = Some(towers.clone());
        self
    }

    /// SeparateGANTrainer's (d_period, g_period); `None` for GANTrainer.
    pub fn periods(&self) -> Option<(u64, u64)> {
        self.periods
    }

    /// The number of towers: 1 unless [`towers`](Self::towers) gave some.
    pub fn tower_count(&self) -> usize {
        self.towers.as_ref().map_or(1, Towers::count)
    }

    /// The C options, with the op names and the towers they point into.
    pub(crate) fn to_raw(&self) -> Result<RawGan> {
        let invalid = |message: String| Error::new(Code::InvalidArgument, message);
        let period = |what: &str, n: u64| {
            i64::try_from(n).map_err(|_| invalid(format!("Gan: {what} is {n}: it does not fit in 63 bits")))
        };
        let g_op = self.g_op.as_deref().map(|g| cstring(g, "g_op")).transpose()?;
        let d_op = self.d_op.as_deref().map(|d| cstring(d, "d_op")).transpose()?;
        // Boxed: the options point at the towers' options, which must not
        // move when the RawGan does.
        let towers = match &self.towers {
            Some(t) => Some(Box::new(t.to_raw()?)),
            None => None,
        };
        let mut options = sys::TPT_GAN_OPTIONS_INIT;
        if let Some((d_period, g_period)) = self.periods {
            options.separate = 1;
            options.d_period = period("d_period", d_period)?;
            options.g_period = period("g_period", g_period)?;
        }
        // The CStrings' buffers do not move when the CStrings do.
        options.g_op = g_op.as_ref().map_or(ptr::null(), |g| g.as_ptr());
        options.d_op = d_op.as_ref().map_or(ptr::null(), |d| d.as_ptr());
        options.towers = towers.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        Ok(RawGan { options, _names: (g_op, d_op), _towers: towers })
    }
}

/// C GAN options and the op names and towers they point into.
pub(crate) struct RawGan {
    pub(crate) options: sys::tpt_gan_options,
    _names: (Option<CString>, Option<CString>),
    _towers: Option<Box<RawTowers>>,
}
