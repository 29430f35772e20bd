//! docs/towers.md: a model trained on 2 replicated CPU towers (tensorpack's
//! SyncMultiGPUTrainerReplicated). The part between the [doc] markers is
//! shown in the page (checked by the doc-snippets test); the whole program is
//! built and run by the examples test.

// [doc]
use tptrain::{
    nn, DType, DataFlow, InputSpec, Model, Optimizer, Progress, Towers, TrainConfig, Trainer, TrainerOptions,
};

fn train(batches: &DataFlow) -> tptrain::Result<()> {
    // y = w x + b. Both towers call it at once, each on a thread and a batch
    // of its own (tower.index() says which): it is Fn + Send + Sync.
    let spec = [InputSpec::new("x", DType::F32, &[-1, 1]), InputSpec::new("y", DType::F32, &[-1, 1])];
    let model = Model::new(&spec, |tower, inputs| {
        let y = tower.fc("fc", &inputs[0], 1, None)?;
        tower.set_cost(&nn::mse(&y, &inputs[1])?)
    })?;
    let sgd = Optimizer::new("sgd")?;
    sgd.set("learning_rate", 0.3)?;
    model.set_optimizer(&sgd)?;
    let config = TrainConfig {
        // steps_per_epoch: the batches / the towers
        options: Some(TrainerOptions { max_epoch: 5, progress: Progress::Off, ..Default::default() }),
        towers: Some(Towers::replicated(2)), // both on the CPU; None: the simple trainer
        ..TrainConfig::from_dataflow(&model, batches)
    };
    let mut trainer = Trainer::from_config(config)?;
    trainer.run()?;
    let v = |name: &str| -> tptrain::Result<f64> { model.variable(name)?.item() }; // tower 0's: the model's own
    println!("{} steps of 2 towers: y = {:.2} x + {:.2}", trainer.global_step(), v("fc/W")?, v("fc/b")?);
    Ok(())
}
// [/doc]

use tptrain::{Order, Remainder};

/// Rows of y = 3 x + 2, x spread evenly over [-1, 1), in batches of 16: 16
/// batches a pass, 8 steps of 2 towers.
fn main() -> tptrain::Result<()> {
    const ROWS: usize = 256;
    let xs: Vec<f32> = (0..ROWS).map(|i| (2 * i as i64 - ROWS as i64) as f32 / ROWS as f32).collect();
    let ys: Vec<f32> = xs.iter().map(|x| 3.0 * x + 2.0).collect();
    tptrain::manual_seed(0)?;
    let x = tptrain::Tensor::from_vec(xs, &[ROWS as i64, 1])?;
    let y = tptrain::Tensor::from_vec(ys, &[ROWS as i64, 1])?;
    train(&DataFlow::from_tensors(&[&x, &y], Order::Shuffled)?.batch(16, Remainder::Drop)?)
}
