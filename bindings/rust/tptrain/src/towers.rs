//! Towers: data-parallel training on several devices (the header section
//! "Towers"; tensorpack's multi-GPU trainers).
//!
//! Every step each tower takes its own batch from the input (the total batch
//! is batch × towers) and runs the model's tower function at the same time
//! as the others: tower 0 on the thread that called
//! [`Trainer::run`](crate::Trainer::run), the others on threads of the library's own, each with
//! its share of LibTorch's intra-op threads. That is why a tower function
//! is `Fn + Send + Sync` ([`Model::new`](crate::Model::new)); [`Tower::index`](crate::Tower::index)
//! and [`Tower::name`](crate::Tower::name) say which tower a call is for. The
//! cost and outputs the loop reports are tower 0's; checkpoints hold tower
//! 0's variables, as tensorpack's. steps_per_epoch counts steps, and its
//! default is the input's size / towers.
//!
//! Only CPU towers are implemented yet (docs/towers.md).
//!
//! ```no_run
//! use tptrain::{Input, Model, Towers, Trainer, TrainerOptions};
//! # fn demo(model: &Model<'_>, input: Input<'_>) -> tptrain::Result<()> {
//! let mut trainer = Trainer::new(&TrainerOptions { max_epoch: 10, ..Default::default() })?;
//! // Two replicas of the variables, gradients all-reduced every step.
//! trainer.set_towers(model, input, &Towers::replicated(2))?;
//! trainer.run()?;
//! # Ok(())
//! # }
//! ```

use crate::error::{Code, Error, Result};
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;
use tptrain_sys as sys;

/// How the towers share the variables and combine their gradients
/// (`tpt_strategy`). One tower without a strategy is the simple trainer
/// ([`Trainer::set_model`](crate::Trainer::set_model)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Strategy {
    /// tensorpack's SyncMultiGPUTrainerReplicated: a copy of the variables
    /// per tower, gradients all-reduced (averaged unless
    /// [`Towers::sum_gradients`]), every copy updated; non-trainable
    /// variables copied from tower 0 after every epoch. The default.
    #[default]
    Replicated,
    /// tensorpack's SyncMultiGPUTrainerParameterServer: shared variables,
    /// the towers' gradients averaged and applied once.
    ParameterServer,
    /// tensorpack's AsyncMultiGPUTrainer: shared variables, each tower's
    /// gradients times 1/N applied as an update of their own.
    Async,
}

impl Strategy {
    pub fn to_raw(self) -> sys::tpt_strategy {
        match self {
            Strategy::Replicated => sys::TPT_STRATEGY_REPLICATED,
            Strategy::ParameterServer => sys::TPT_STRATEGY_PARAMETER_SERVER,
            Strategy::Async => sys::TPT_STRATEGY_ASYNC,
        }
    }
}

/// The towers of a data-parallel trainer (`tpt_towers_options`), for
/// [`Trainer::set_towers`](crate::Trainer::set_towers) and [`TrainConfig::towers`](crate::TrainConfig::towers):
/// a strategy, how many towers, where they run, and how their gradients
/// are reduced. `Default` gives the C defaults: 2 replicated CPU towers,
/// gradients averaged, LibTorch's intra-op threads shared out evenly, each
/// bucket of gradients reduced during the backward passes, buckets of 1 MiB.
///
/// ```
/// use tptrain::{Strategy, Towers};
///
/// let towers = Towers::replicated(4).sum_gradients().intra_op_threads(2);
/// assert_eq!((towers.strategy(), towers.count()), (Strategy::Replicated, 4));
/// let on_cpu = Towers::parameter_server(2).devices(&["cpu", "cpu"]);
/// # let _ = on_cpu;
/// // Reduce after the backward passes, in buckets of 64 KiB.
/// let tuned = Towers::replicated(2).overlap(false).bucket_bytes(64 << 10);
/// # let _ = tuned;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[must_use = "Towers do nothing until they are given to Trainer::set_towers or a TrainConfig"]
pub struct Towers {
    strategy: Strategy,
    count: usize,
    devices: Option<Vec<String>>,
    average: bool,
    intra_op_threads: usize,
    overlap: bool,
    bucket_bytes: usize,
    average_scalars: bool,
}

impl Default for Towers {
    fn default() -> Towers {
        let c = sys::TPT_TOWERS_OPTIONS_INIT;
        Towers {
            strategy: Strategy::default(),
            count: c.n_towers as usize,
            devices: None,
            average: c.average != 0,
            intra_op_threads: c.intra_op_threads as usize,
            overlap: c.overlap != 0,
            bucket_bytes: c.bucket_bytes,
            average_scalars: c.average_scalars != 0,
        }
    }
}

impl Towers {
    /// `count` towers (1 to 256) of `strategy`, every one on the CPU.
    pub fn new(strategy: Strategy, count: usize) -> Towers {
        Towers { strategy, count, ..Towers::default() }
    }

    /// `count` towers with [`Strategy::Replicated`].
    pub fn replicated(count: usize) -> Towers {
        Towers::new(Strategy::Replicated, count)
    }

    /// `count` towers with [`Strategy::ParameterServer`].
    pub fn parameter_server(count: usize) -> Towers {
        Towers::new(Strategy::ParameterServer, count)
    }

    /// `count` towers with [`Strategy::Async`].
    pub fn asynchronous(count: usize) -> Towers {
        Towers::new(Strategy::Async, count)
    }

    /// The device of each tower, one name per tower ("cpu", "cuda:0", ...);
    /// default: every tower on "cpu". Only CPU towers are implemented yet:
    /// another device is a [`Code::Unsupported`] error when the towers are
    /// set, a name that is no device a [`Code::InvalidArgument`] one, and so
    /// is a list whose length is not the number of towers.
    pub fn devices<S: AsRef<str>>(mut self, devices: &[S]) -> Towers {
        self.devices = Some(devices.iter().map(|d| d.as_ref().to_owned()).collect());
        self
    }

    /// [`Strategy::Replicated`]: sums the towers' gradients instead of
    /// averaging them (the default), as if the learning rate were multiplied
    /// by the number of towers. The other strategies always scale by 1/N and
    /// ignore this.
    pub fn sum_gradients(mut self) -> Towers {
        self.average = false;
        self
    }

    /// LibTorch intra-op threads per tower (at most 1024); 0, the default:
    /// the process's ([`num_threads`](crate::num_threads)) divided by the
    /// number of towers, at least 1.
    pub fn intra_op_threads(mut self, threads: usize) -> Towers {
        self.intra_op_threads = threads;
        self
    }

    /// [`Strategy::Replicated`] and [`Strategy::ParameterServer`]: `true`,
    /// the default, reduces each bucket of gradients as soon as every
    /// tower's backward pass has produced it, while the backward passes go
    /// on (PyTorch DDP's reducer); `false` reduces every bucket after all
    /// the backward passes. The variables come out the same bit for bit
    /// either way; only the time differs.
    pub fn overlap(mut self, overlap: bool) -> Towers {
        self.overlap = overlap;
        self
    }

    /// The gradients are packed into flat buckets of about `bytes` bytes
    /// each (in the order backward produces them), the unit of
    /// [`overlap`](Self::overlap)'s reductions; 0, the default: 1 MiB. More
    /// than 2^40 is a [`Code::InvalidArgument`] error when the towers are
    /// set. The variables come out the same bit for bit whatever the size.
    pub fn bucket_bytes(mut self, bytes: usize) -> Towers {
        self.bucket_bytes = bytes;
        self
    }

    /// Reports the cost and the scalar outputs (what the monitors and the
    /// step outputs get) averaged over the towers, in tower order, instead of
    /// tower 0's, tensorpack's rule and the default. In a distributed job,
    /// [`Distributed::average_scalars`](crate::Distributed::average_scalars)
    /// averages them over the ranks as well.
    pub fn average_scalars(mut self, average: bool) -> Towers {
        self.average_scalars = average;
        self
    }

    /// The strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The number of towers.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The C options, with the device names they point into.
    pub(crate) fn to_raw(&self) -> Result<RawTowers> {
        let invalid = |message: String| Error::new(Code::InvalidArgument, message);
        let n_towers = i32::try_from(self.count)
            .map_err(|_| invalid(format!("Towers: {} towers: the count must be in [1, 256]", self.count)))?;
        let intra_op_threads = i32::try_from(self.intra_op_threads).map_err(|_| {
            invalid(format!("Towers: intra_op_threads is {}: it must be in [0, 1024]", self.intra_op_threads))
        })?;
        let names = match &self.devices {
            None => None,
            Some(devices) => {
                if devices.len() != self.count {
                    return Err(invalid(format!(
                        "Towers: {} device names for {} towers (give one per tower)",
                        devices.len(),
                        self.count
                    )));
                }
                let names = devices
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        CString::new(d.as_str())
                            .map_err(|_| invalid(format!("Towers: devices[{i}] contains a NUL byte: {d:?}")))
                    })
                    .collect::<Result<Vec<CString>>>()?;
                let pointers: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
                Some((names, pointers))
            }
        };
        let mut options = sys::TPT_TOWERS_OPTIONS_INIT;
        options.strategy = self.strategy.to_raw();
        options.n_towers = n_towers;
        // The vectors' buffers do not move when the vectors do.
        options.devices = names.as_ref().map_or(ptr::null(), |(_, p)| p.as_ptr());
        options.average = self.average as i32;
        options.intra_op_threads = intra_op_threads;
        options.overlap = self.overlap as i32;
        options.bucket_bytes = self.bucket_bytes;
        options.average_scalars = self.average_scalars as i32;
        Ok(RawTowers { options, _names: names })
    }
}

/// C towers options and the device names they point into.
pub(crate) struct RawTowers {
    options: sys::tpt_towers_options,
    _names: Option<(Vec<CString>, Vec<*const c_char>)>,
}

impl RawTowers {
    /// The options, valid while `self` lives.
    pub(crate) fn as_ptr(&self) -> *const sys::tpt_towers_options {
        &self.options
    }
}
