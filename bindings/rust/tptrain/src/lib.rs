#![doc = include_str!("../../README.md")]
//!
//! ## The pieces
//!
//! Tensors are [`Tensor`]s; element-wise arithmetic is on references
//! (`(&a + &b)?`), and any ATen operator is reachable through [`ops::call`].
//!
//! ```
//! let a = tptrain::Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let p = a.matmul(&a)?;
//! assert_eq!(p.shape(), vec![2, 2]);
//! assert_eq!(p.to_vec::<f32>()?, vec![7.0, 10.0, 15.0, 22.0]);
//! # Ok::<(), tptrain::Error>(())
//! ```
//!
//! The [`Trainer`] runs a closure again and again, with callbacks around it.
//! Closures return `Ok(Flow::Continue)`, `Ok(Flow::Stop(reason))` to end
//! training gracefully, or an error that ends it and comes back from
//! [`Trainer::run`]; a panic ends it too and is resumed by `run`. Every
//! closure the crate takes returns this crate's [`Result`], so a closure
//! that uses `?` needs no annotation of its result type; an error of
//! another type converts with `?` ([`std::io::Error`], a number's parse
//! error) or `.map_err(Error::wrap)`, which keeps it as the
//! [`source`](std::error::Error::source) ([`Error::wrap`];
//! [`Callback::on_fallible`] takes a callback closure with an error type of
//! its own). Callbacks are described with [`Callback::on`] and a
//! [`CallbackBuilder`]; they, the catalogue's builders (below) and a
//! `Result` of any of them go wherever a callback goes ([`IntoCallback`]).
//! Options that are usually the defaults are `impl Into<Option<&X>>`: pass
//! `None`, or `&X { .. }`; choices are enums ([`Order`], [`Remainder`],
//! [`InnerState`]) and periods an [`Every`], never a bare `bool` or `0`.
//!
//! ```
//! use tptrain::{Callback, Event, Events, Flow, Progress, RunOutcome, Trainer, TrainerOptions};
//!
//! let options = TrainerOptions {
//!     max_epoch: 3,
//!     steps_per_epoch: Some(10),
//!     console: false,
//!     progress: Progress::Off,
//!     ..Default::default()
//! };
//! let mut trainer = Trainer::new(&options)?;
//! trainer.set_run_step(|ctx| {
//!     ctx.hooked_step(|step| step.set_output_scalar("loss", 1.0).map(|()| Flow::Continue))?;
//!     let g = ctx.global_step();
//!     ctx.put_scalar("half_step", g as f64 / 2.0)?;
//!     Ok(if g == 25 { Flow::stop("enough") } else { Flow::Continue })
//! })?;
//! let report = Callback::on(Events::TRIGGER_EPOCH, |ctx, event, _| {
//!     assert_eq!(event, Event::TriggerEpoch);
//!     ctx.log(&format!("epoch {} done", ctx.epoch_num()))?;
//!     Ok(Flow::Continue)
//! });
//! trainer.add_callback(report.name("report"))?;
//! assert_eq!(trainer.run()?, RunOutcome::Stopped("enough".into()));
//! assert_eq!(trainer.scalar_latest("half_step")?.value, 12.5);
//! # Ok::<(), tptrain::Error>(())
//! ```
//!
//! Models put a tower function, variables and an optimizer behind the loop
//! (tensorpack's ModelDesc and SimpleTrainer): see [`Model`], [`Tower`],
//! [`Optimizer`], [`Input`] and [`Trainer::set_model`], or describe the
//! whole training in a [`TrainConfig`] for [`Trainer::from_config`] and
//! [`launch_train`]. [`Trainer::set_towers`] and [`TrainConfig::towers`]
//! train on several towers at once, each with its own batch (tensorpack's
//! multi-GPU trainers: [`Towers`] of a [`Strategy`], replicated, parameter
//! server or async; CPU towers only for now). [`Trainer::set_distributed`]
//! and [`TrainConfig::distributed`] make a trainer one rank of a job of
//! several processes, started by `tools/tptrain-run -n N` or torchrun
//! (tensorpack's HorovodTrainer, on c10d's Gloo over TCP: [`Distributed`],
//! from the launcher's environment or explicit; [`Context::rank`] and
//! [`Context::world_size`] say which rank of how many; docs/distributed.md).
//! A task that is not one cost minimised (a GAN) needs a trainer of its own
//! (tensorpack's "write a trainer"): [`Model::add_train_op`] adds a
//! [`TrainOp`], one cost minimised over the variables under a scope by an
//! optimizer of its own, and a run_step of your own runs ops by name with
//! [`StepContext::run_train_ops`], as one hooked step ([`Run::Hooked`]) or
//! without hooks ([`Run::Raw`]), or [`Trainer::set_train_ops`] makes a list
//! of ops the default step; [`Trainer::set_gan`] makes tensorpack's
//! GANTrainer, SeparateGANTrainer or (with [`Gan::towers`])
//! MultiGPUGANTrainer, as a [`Gan`] says (docs/custom_trainers.md).
//! [`image::grid`] tiles a batch of images into one (torchvision's
//! `make_grid`, for a generator's samples) and [`image::write_png`] writes
//! one to a PNG file.
//! [`Model::from_torchscript`]
//! trains a module saved with `torch.jit.save`,
//! [`Model::from_torchscript_source`] one compiled from TorchScript source. Layers, losses and metrics are in [`nn`], and any ATen
//! operator is reachable through [`ops::call`]. Input pipelines are
//! [`DataFlow`]s (tensorpack's DataFlow library), fed to a trainer through
//! [`Input::from_dataflow`] or [`TrainConfig::from_dataflow`], and validated
//! by an [`InferenceRunner`] with [`Inferencer`]s (or the short
//! [`Callback::inference_runner`]; [`InferenceRunner::towers`] infers
//! several batches at once, tensorpack's DataParallelInferenceRunner).
//! Checkpoints: [`ModelSaver`], [`BestSaver`], [`Trainer::resume`],
//! [`TrainerOptions::auto_resume`] and [`Model::restore`]
//! (docs/checkpoints.md).
//!
//! The rest of tensorpack's callbacks are builders given to
//! [`Trainer::add_callback`]: hyper-parameter setters
//! ([`ScheduledHyperParam`], [`HyperParamFunc`], [`StatMonitorParam`],
//! [`HumanHyperParam`]), [`EarlyStopping`], [`TerminateOnNaN`],
//! [`ThroughputTracker`], [`HostMemoryTracker`] and [`StepWatchdog`]; the
//! [`TensorBoard`] event writer is a monitor ([`Trainer::add_monitor`]) that
//! also writes the images of [`Context::put_image`].

// One module per C API module header (include/tptrain/<module>.h), named
// as the header; binding, cstr and panic are the plumbing under them
// (docs/ARCHITECTURE.md). The public modules keep their names: `nn` is the
// layer header's module, `ops` the op header's.
mod binding;
mod callback;
mod common;
mod cstr;
mod dataflow;
pub mod image;
mod inference;
mod input;
mod launch;
mod model;
#[path = "layer.rs"]
pub mod nn;
#[path = "op.rs"]
pub mod ops;
mod optimizer;
mod panic;
mod runtime;
mod strategy;
mod tensor;
mod tower;
mod trainer;

#[allow(deprecated)]
pub use callback::HyperParamSchedule;
pub use callback::{
    BestSaver, Callback, CallbackBuilder, EarlyStopping, Event, Events, Every, Flow, HostMemoryTracker,
    HumanHyperParam, HyperParamFunc, IntoCallback, ModelSaver, Record, RecordKind, ScheduledHyperParam,
    StatMonitorParam, StepWatchdog, TensorBoard, TerminateOnNaN, ThroughputTracker,
};
pub use common::{abi_version, version, version_string, Code, Error, Result};
pub use dataflow::{
    Augmentor, DataFlow, DataFlowIter, Datapoint, DatapointRef, FakeOptions, InnerState, IterItem, Order,
    ParallelMapOptions, Remainder, Source, StatefulSource,
};
pub use inference::{
    ClassificationError, InferenceRunner, Inferencer, InferencerBuilder, IntoInferencer, Predictor, PredictorBuilder,
    ScalarStats,
};
pub use input::{Input, InputKind, InputOptions, END_OF_DATA};
pub use launch::{launch_train, InitFn, TrainConfig};
pub use model::{InputSpec, Model, RestoreOptions, TorchScriptParam, TrainOp};
pub use nn::{Activation, LayerOptions, Padding};
pub use optimizer::Optimizer;
pub use runtime::{
    build_info, has_feature, manual_seed, num_threads, set_checkpoint_read_limit, set_determinism,
    set_float32_precision, set_num_threads, Determinism, Feature, Float32Precision,
};
pub use strategy::{Distributed, Gan, Strategy, Towers};
pub use tensor::{DType, Element, Tensor, TensorOptions};
pub use tower::{Init, Tower, VariableOptions};
pub use trainer::{
    Context, HookedContext, LogdirAction, LossScaling, LossScalingMode, Precision, Progress, Run, RunOutcome, Scalar,
    StepContext, StopHandle, StopOnSignals, Trainer, TrainerOptions,
};

/// The raw FFI crate, for what the safe API does not cover yet.
pub use tptrain_sys as sys;
