//! Distributed training: several processes (the header section
//! "Distributed training"; tensorpack's HorovodTrainer on LibTorch's c10d,
//! Gloo over TCP).
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

use crate::error::{Code, Error, Result};
use std::ffi::CString;
use std::ptr;
use std::time::Duration;
use tptrain_sys as sys;

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
    /// [`Code::InvalidArgument`] error naming it when the trainer joins.
    /// The same as `Distributed::default()`.
    pub fn from_env() -> Distributed {
        Distributed::default()
    }

    /// Rank 0's host and port, instead of MASTER_ADDR and MASTER_PORT (a
    /// port of 0 still takes MASTER_PORT). Rank 0 serves the rendezvous
    /// there; the others connect to it.
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
