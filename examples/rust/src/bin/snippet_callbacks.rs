//! docs/callbacks.md: a trainer with validation (an InferenceRunner), a
//! learning-rate schedule and a callback of our own that stops training when
//! the validation cost is low enough. The part between the [doc] markers is
//! shown in the page (checked by the doc-snippets test); the whole program is
//! built and run by the examples test.

// [doc]
use tptrain::{
    nn, Callback, DType, DataFlow, Events, Flow, InputSpec, Model, Optimizer, Progress, ScheduledHyperParam,
    TrainConfig, Trainer, TrainerOptions,
};

fn train(batches: &DataFlow, validation: &DataFlow) -> tptrain::Result<()> {
    // y = w x + b: one fully-connected unit, the mean squared error as the
    // cost (which is also the output "cost").
    let spec = [InputSpec::new("x", DType::F32, &[-1, 1]), InputSpec::new("y", DType::F32, &[-1, 1])];
    let model = Model::new(&spec, |tower, inputs| {
        let y = tower.fc("fc", &inputs[0], 1, None)?;
        tower.set_cost(&nn::mse(&y, &inputs[1])?)
    })?;
    let sgd = Optimizer::new("sgd")?;
    model.set_optimizer(&sgd)?;
    // A callback of our own: after each epoch, after the InferenceRunner has
    // put validation_cost, a graceful stop once it is small enough.
    let good_enough = Callback::on(Events::TRIGGER, |ctx, _, _| {
        let cost = ctx.scalar_latest("validation_cost")?.value;
        Ok(if cost < 1e-4 { Flow::stop("validation_cost < 1e-4") } else { Flow::Continue })
    });
    let options = TrainerOptions { max_epoch: 20, progress: Progress::Off, ..Default::default() };
    let config = TrainConfig { options: Some(options), ..TrainConfig::from_dataflow(&model, batches) }
        .callback(Callback::inference_runner(&model, validation, &["cost"]))?
        // 0.3 from the start, 0.1 after epoch 2
        .callback(ScheduledHyperParam::new(&sgd, "learning_rate", &[(0, 0.3), (2, 0.1)]))?
        .callback(good_enough.name("good_enough"))?; // after the runner: it reads its scalar
    let mut trainer = Trainer::from_config(config)?;
    let outcome = trainer.run()?;
    println!(
        "stopped after epoch {} ({}) at learning_rate {}",
        trainer.epoch_num(),
        outcome.stop_reason().unwrap_or("-"),
        sgd.get("learning_rate")?
    );
    Ok(())
}
// [/doc]

use tptrain::{Order, Remainder};

/// Rows of y = 3 x + 2 with n values of x spread evenly over [-1, 1).
fn line(n: usize) -> tptrain::Result<(tptrain::Tensor, tptrain::Tensor)> {
    let xs: Vec<f32> = (0..n).map(|i| (2 * i as i64 - n as i64) as f32 / n as f32).collect();
    let ys: Vec<f32> = xs.iter().map(|x| 3.0 * x + 2.0).collect();
    Ok((tptrain::Tensor::from_vec(xs, &[n as i64, 1])?, tptrain::Tensor::from_vec(ys, &[n as i64, 1])?))
}

fn main() -> tptrain::Result<()> {
    tptrain::manual_seed(0)?;
    let (x, y) = line(256)?;
    let (vx, vy) = line(64)?;
    let batches = DataFlow::from_tensors(&[&x, &y], Order::Shuffled)?.batch(32, Remainder::Drop)?;
    let validation = DataFlow::from_tensors(&[&vx, &vy], Order::Sequential)?.batch(32, Remainder::Keep)?;
    train(&batches, &validation)
}
