//! docs/checkpoints.md: a training that a ModelSaver checkpoints, stopped
//! after epoch 2, then started again on the same log directory: auto_resume
//! goes on exactly from the latest checkpoint. The part between the [doc]
//! markers is shown in the page (checked by the doc-snippets test); the whole
//! program is built and run by the examples test.
//!
//!     snippet_checkpoints [LOGDIR]   (default train_log/snippet_checkpoints)

use tptrain::{nn, DType, InputSpec};

/// y = w x + b.
fn line_model<'a>() -> tptrain::Result<Model<'a>> {
    let spec = [InputSpec::new("x", DType::F32, &[-1, 1]), InputSpec::new("y", DType::F32, &[-1, 1])];
    Model::new(&spec, |tower, inputs| {
        let y = tower.fc("fc", &inputs[0], 1, None)?;
        tower.set_cost(&nn::mse(&y, &inputs[1])?)
    })
}

// [doc]
use std::cell::Cell;
use std::path::Path;
use tptrain::{
    Callback, DataFlow, Events, Flow, LogdirAction, Model, ModelSaver, Optimizer, Order, Progress, Remainder, Tensor,
    TrainConfig, Trainer, TrainerOptions,
};

/// One run of the program, as if started anew: its model, data and trainer.
fn run(logdir: &Path, xy: &[&Tensor], max_epoch: i64, first: bool) -> tptrain::Result<()> {
    let model = line_model()?;
    let adam = Optimizer::new("adam")?;
    adam.set("learning_rate", 0.1)?;
    model.set_optimizer(&adam)?;
    let batches = DataFlow::from_tensors(xy, Order::Shuffled)?.batch(32, Remainder::Drop)?;
    // Before training (after a resume's restore): where this run starts.
    let start = Cell::new(0);
    let starts_at = Callback::on(Events::BEFORE_TRAIN, |ctx, _, _| {
        start.set(ctx.global_step());
        Ok(Flow::Continue)
    });
    let options = TrainerOptions {
        max_epoch,
        progress: Progress::Off,
        logdir: Some(logdir.to_path_buf()),
        // The first run starts afresh; the next goes on from the latest checkpoint in logdir.
        logdir_action: if first { LogdirAction::Delete } else { LogdirAction::Keep },
        auto_resume: !first,
        ..Default::default()
    };
    let config = TrainConfig { options: Some(options), ..TrainConfig::from_dataflow(&model, &batches) }
        .callback(ModelSaver::new())? // after every epoch, into logdir
        .callback(starts_at)?;
    let mut trainer = Trainer::from_config(config)?;
    trainer.run()?;
    let run = if first { "first run" } else { "resumed" };
    println!("{run}: global_step {} to {}", start.get(), trainer.global_step());
    Ok(())
}
// [/doc]

/// Rows of y = 3 x + 2, x spread evenly over [-1, 1): 8 batches of 32 an
/// epoch. Two runs: to epoch 2, then on to epoch 4.
fn main() -> tptrain::Result<()> {
    let logdir = std::env::args().nth(1).unwrap_or_else(|| "train_log/snippet_checkpoints".to_owned());
    const ROWS: usize = 256;
    let xs: Vec<f32> = (0..ROWS).map(|i| (2 * i as i64 - ROWS as i64) as f32 / ROWS as f32).collect();
    let ys: Vec<f32> = xs.iter().map(|x| 3.0 * x + 2.0).collect();
    tptrain::manual_seed(0)?;
    let x = Tensor::from_vec(xs, &[ROWS as i64, 1])?;
    let y = Tensor::from_vec(ys, &[ROWS as i64, 1])?;
    run(Path::new(&logdir), &[&x, &y], 2, true)?;
    run(Path::new(&logdir), &[&x, &y], 4, false)
}
