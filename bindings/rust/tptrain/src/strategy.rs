//! The options of the trainers that run more than one tower or process
//! (`include/tptrain/strategy.h`): [`Towers`] and its [`Strategy`],
//! [`Distributed`], and [`Gan`] for the GAN trainers.
//!
//! # Towers
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
//!
//! # Distributed training
//!
//! Every process (a rank) trains its towers (one by default) on its share of
//! the input, and before every update the gradients are summed over every
//! tower of every process, so N processes train as one process with N
//! towers would. Rank 0 is the chief: it alone keeps the log directory and
//! runs chief-only callbacks (checkpoints, monitors, inference runners); its
//! variables reach every rank before the first step, its non-trainable ones
//! after every epoch, and every rank resumes from its checkpoint.
//!
//! Start the processes with the launcher, `tools/tptrain-run -n 4 ./train
//! ...`, with torchrun, or with anything that sets torchrun's variables
//! (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK); each process
//! then joins the job with [`Distributed::from_env`] before its model is set
//! (docs/distributed.md).
//!
//! ```no_run
//! use tptrain::{Distributed, Input, Model, Trainer, TrainerOptions};
//! # fn demo(model: &Model<'_>, input: Input<'_>) -> tptrain::Result<()> {
//! let mut trainer = Trainer::new(&TrainerOptions { max_epoch: 10, ..Default::default() })?;
//! // Join the job started by tptrain-run (blocks until every rank has).
//! trainer.set_distributed(&Distributed::from_env())?;
//! // One replicated tower per rank; each rank takes every world_size-th batch.
//! trainer.set_model(model, input)?;
//! trainer.run()?;
//! if trainer.rank()? == 0 {
//!     println!("trained on {} processes", trainer.world_size()?);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Train ops and the GAN trainers
//!
//! A [`TrainOp`](crate::TrainOp) is one optimisation of the model, tensorpack's
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
//! use tptrain::{Input, Model, Run, TrainOp, Trainer, TrainerOptions};
//! # fn demo(model: &Model<'_>, input: Input<'_>) -> tptrain::Result<()> {
//! // The tower function publishes the outputs "g_loss" and "d_loss".
//! model.add_train_op(&TrainOp::new("g_op").cost("g_loss").scope("gen/"))?;
//! model.add_train_op(&TrainOp::new("d_op").cost("d_loss").scope("discrim/"))?;
//! let mut trainer = Trainer::new(&TrainerOptions { max_epoch: 10, ..Default::default() })?;
//! trainer.set_model(model, input)?;
//! // Then the iteration: D's update without the hooks, then G's as the step
//! // that callbacks see.
//! trainer.set_run_step(|ctx| {
//!     ctx.run_train_ops(&["d_op"], Run::Raw)?;
//!     ctx.run_train_ops(&["g_op"], Run::Hooked)
//! })?;
//! trainer.run()?;
//! # Ok(())
//! # }
//! ```

use crate::common::{Code, Error, Result};
use crate::cstr::cstring;
use std::ffi::CString;
use std::os::raw::c_char;
use std::ptr;
use std::time::Duration;
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
    /// default: every tower on "cpu". A tower on another device computes on
    /// a copy of the variables, which stay on the CPU (docs/towers.md; not
    /// run on a GPU yet, docs/gpu.md); a device this LibTorch lacks is a
    /// [`Code::Unsupported`] error when the towers are set, a name that is
    /// no device a [`Code::InvalidArgument`] one, and so is a list whose
    /// length is not the number of towers.
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

/// How this process joins a distributed job (`tpt_distributed_options`),
/// for [`Trainer::set_distributed`](crate::Trainer::set_distributed) and
/// [`TrainConfig::distributed`](crate::TrainConfig::distributed): where
/// rank 0 listens, which rank this process is among how many, how long a
/// rank waits for the others, and how the input is shared.
///
/// [`Distributed::from_env`] (also `Default`) takes everything from the
/// environment that the launcher sets (MASTER_ADDR, MASTER_PORT,
/// WORLD_SIZE, RANK, LOCAL_RANK); each setter overrides its part of it. The
/// other defaults are the C ones: a timeout of 60 s, every rank taking every
/// world_size-th batch of the input, the scalars the monitors see being
/// rank 0's.
///
/// ```
/// use std::time::Duration;
/// use tptrain::Distributed;
///
/// // Rank 1 of a job of 2 whose rank 0 listens on 127.0.0.1:29500.
/// let explicit = Distributed::from_env()
///     .master("127.0.0.1", 29500)
///     .membership(1, 2)
///     .timeout(Duration::from_secs(20));
/// assert_ne!(explicit, Distributed::default());
/// // From tptrain-run's variables, each rank already given its own share.
/// let pre_sharded = Distributed::from_env().shard(false).average_scalars(true);
/// # let _ = pre_sharded;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[must_use = "Distributed does nothing until it is given to Trainer::set_distributed or a TrainConfig"]
pub struct Distributed {
    master: Option<(String, u16)>,
    membership: Option<(usize, usize)>,
    local_rank: Option<usize>,
    timeout: Option<Duration>,
    shard: bool,
    average_scalars: bool,
}

impl Default for Distributed {
    fn default() -> Distributed {
        let c = sys::TPT_DISTRIBUTED_OPTIONS_INIT;
        Distributed {
            master: None,
            membership: None,
            local_rank: None,
            timeout: None,
            shard: c.shard != 0,
            average_scalars: c.average_scalars != 0,
        }
    }
}

impl Distributed {
    /// Everything from the environment that tptrain-run and torchrun set:
    /// MASTER_ADDR and MASTER_PORT (rank 0's address), WORLD_SIZE, RANK and
    /// LOCAL_RANK. A variable that is missing or bad is a
    /// [`Code::InvalidArgument`] error naming it when the trainer joins; a
    /// one-process job (world size 1) needs no address or port (this
    /// machine, any free port). The same as `Distributed::default()`.
    pub fn from_env() -> Distributed {
        Distributed::default()
    }

    /// Rank 0's host and port, instead of MASTER_ADDR and MASTER_PORT (a
    /// port of 0 still takes MASTER_PORT, else any free port in a
    /// one-process job). Rank 0 serves the rendezvous there; the others
    /// connect to it.
    pub fn master(mut self, addr: &str, port: u16) -> Distributed {
        self.master = Some((addr.to_owned(), port));
        self
    }

    /// This process's rank (0 to `world_size` - 1) in a job of `world_size`
    /// processes, instead of RANK and WORLD_SIZE (and LOCAL_RANK, which is
    /// then 0 unless [`local_rank`](Self::local_rank) says otherwise). A
    /// rank out of range is a [`Code::InvalidArgument`] error naming it
    /// when the trainer joins.
    pub fn membership(mut self, rank: usize, world_size: usize) -> Distributed {
        self.membership = Some((rank, world_size));
        self
    }

    /// With [`membership`](Self::membership): this process's index among the
    /// processes of its machine (0 to rank; default 0). Without it
    /// LOCAL_RANK comes from the environment, and setting this is a
    /// [`Code::InvalidArgument`] error when the trainer joins.
    pub fn local_rank(mut self, local_rank: usize) -> Distributed {
        self.local_rank = Some(local_rank);
        self
    }

    /// How long the rendezvous and every collective may wait (default 60
    /// s; at least 1 ms, at most 24 h, rounded up to whole milliseconds): a
    /// rank that died or hangs makes the others fail after at most this,
    /// with a [`Code::Backend`] error naming it. It must exceed the longest
    /// chief-only work between two steps (an inference pass on rank 0).
    pub fn timeout(mut self, timeout: Duration) -> Distributed {
        self.timeout = Some(timeout);
        self
    }

    /// `true`, the default: each rank takes every world_size-th batch of the
    /// input (rank r the r-th of every world_size), so the job's towers take
    /// the batches one process's towers would. `false`: the input is
    /// already this rank's share.
    pub fn shard(mut self, shard: bool) -> Distributed {
        self.shard = shard;
        self
    }

    /// `true`: the cost and the scalar outputs the monitors get are
    /// averaged over the ranks (one more all-reduce per step). `false`, the
    /// default: rank 0's.
    pub fn average_scalars(mut self, average: bool) -> Distributed {
        self.average_scalars = average;
        self
    }

    /// The C options, with the address they point into.
    pub(crate) fn to_raw(&self) -> Result<RawDistributed> {
        let invalid = |message: String| Error::new(Code::InvalidArgument, message);
        let int = |what: &str, n: usize| {
            i32::try_from(n).map_err(|_| invalid(format!("Distributed: {what} is {n}: it does not fit in 32 bits")))
        };
        let mut options = sys::TPT_DISTRIBUTED_OPTIONS_INIT;
        let addr = match &self.master {
            None => None,
            Some((addr, port)) => {
                let c = CString::new(addr.as_str())
                    .map_err(|_| invalid(format!("Distributed: the master address contains a NUL byte: {addr:?}")))?;
                options.master_port = i32::from(*port);
                Some(c)
            }
        };
        match (self.membership, self.local_rank) {
            (Some((rank, world_size)), local_rank) => {
                if world_size == 0 {
                    return Err(invalid(format!(
                        "Distributed: world_size is 0 (rank {rank}): a job has at least 1 process"
                    )));
                }
                options.world_size = int("world_size", world_size)?;
                options.rank = int("rank", rank)?;
                options.local_rank = int("local_rank", local_rank.unwrap_or(0))?;
            }
            (None, Some(local_rank)) => {
                return Err(invalid(format!(
                    "Distributed: local_rank is {local_rank} without membership (rank, world_size): \
                     give both, or neither to take all three from LOCAL_RANK, RANK and WORLD_SIZE"
                )))
            }
            (None, None) => {}
        }
        if let Some(timeout) = self.timeout {
            if timeout.is_zero() {
                return Err(invalid("Distributed: the timeout is 0: it must be at least 1 ms".to_owned()));
            }
            // Rounded up to whole milliseconds; the library checks the upper bound.
            let ms = (timeout.as_nanos() + 999_999) / 1_000_000;
            options.timeout_ms = i64::try_from(ms)
                .map_err(|_| invalid(format!("Distributed: the timeout is {timeout:?}: it must be at most 24 h")))?;
        }
        options.master_addr = addr.as_ref().map_or(ptr::null(), |a| a.as_ptr());
        options.shard = self.shard as i32;
        options.average_scalars = self.average_scalars as i32;
        Ok(RawDistributed { options, _addr: addr })
    }
}

/// C distributed options and the address they point into.
pub(crate) struct RawDistributed {
    options: sys::tpt_distributed_options,
    _addr: Option<CString>,
}

impl RawDistributed {
    /// The options, valid while `self` lives.
    pub(crate) fn as_ptr(&self) -> *const sys::tpt_distributed_options {
        &self.options
    }
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
