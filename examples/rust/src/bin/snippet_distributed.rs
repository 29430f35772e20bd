//! docs/distributed.md: one rank of a job started by tools/tptrain-run
//! (tensorpack's HorovodTrainer): `tptrain-run -n 2 snippet_distributed`.
//! The part between the [doc] markers is shown in the page (checked by the
//! doc-snippets test); the whole program is built and run by the examples
//! test.

use tptrain::{nn, DType, InputSpec, Optimizer, Order, Remainder, Tensor};

// [doc]
use tptrain::{DataFlow, Distributed, Model, Progress, TrainConfig, Trainer, TrainerOptions};

/// Every rank runs this program: the same model, data and seed.
fn train(model: &Model, batches: &DataFlow) -> tptrain::Result<()> {
    let config = TrainConfig {
        options: Some(TrainerOptions { max_epoch: 5, progress: Progress::Off, ..Default::default() }),
        distributed: Some(Distributed::from_env()), // all from tptrain-run's variables; None: alone
        ..TrainConfig::from_dataflow(model, batches)  // each rank takes every world_size-th batch
    };
    let mut trainer = Trainer::from_config(config)?; // joins the job: waits for every rank
    trainer.run()?; // gradients averaged over the ranks every step
    let v = |name: &str| -> tptrain::Result<f64> { model.variable(name)?.item() };
    println!(
        "rank {} of {}, {} steps: y = {:.2} x + {:.2}", // the same on every rank
        trainer.rank()?,
        trainer.world_size()?,
        trainer.global_step(),
        v("fc/W")?,
        v("fc/b")?
    );
    Ok(())
}
// [/doc]

/// Rows of y = 3 x + 2, x spread evenly over [-1, 1), in batches of 16, and
/// y = w x + b.
fn main() -> tptrain::Result<()> {
    const ROWS: usize = 256;
    let xs: Vec<f32> = (0..ROWS).map(|i| (2 * i as i64 - ROWS as i64) as f32 / ROWS as f32).collect();
    let ys: Vec<f32> = xs.iter().map(|x| 3.0 * x + 2.0).collect();
    tptrain::manual_seed(0)?;
    let x = Tensor::from_vec(xs, &[ROWS as i64, 1])?;
    let y = Tensor::from_vec(ys, &[ROWS as i64, 1])?;
    let batches = DataFlow::from_tensors(&[&x, &y], Order::Shuffled)?.batch(16, Remainder::Drop)?;
    let spec = [InputSpec::new("x", DType::F32, &[-1, 1]), InputSpec::new("y", DType::F32, &[-1, 1])];
    let model = Model::new(&spec, |tower, inputs| {
        let y = tower.fc("fc", &inputs[0], 1, None)?;
        tower.set_cost(&nn::mse(&y, &inputs[1])?)
    })?;
    let sgd = Optimizer::new("sgd")?;
    sgd.set("learning_rate", 0.3)?;
    model.set_optimizer(&sgd)?;
    train(&model, &batches)
}
