//! docs/custom_trainers.md, "Train ops": a model of two parts, a train op for
//! each (its own cost, variables and optimizer), and a run_step of our own
//! that runs them. The part between the [doc] markers is shown in the page
//! (checked by the doc-snippets test); the whole program is built and run by
//! the examples test.

// [doc]
use tptrain::{
    nn, DType, DataFlow, Input, InputSpec, Model, Optimizer, Progress, Run, TrainOp, Trainer, TrainerOptions,
};

fn train(batches: &DataFlow) -> tptrain::Result<()> {
    // Two parts on one input: "a" fits the target ya, "b" the target yb. Each
    // publishes its own cost; the tower's cost is their sum.
    let spec = [
        InputSpec::new("x", DType::F32, &[-1, 1]),
        InputSpec::new("ya", DType::F32, &[-1, 1]),
        InputSpec::new("yb", DType::F32, &[-1, 1]),
    ];
    let model = Model::new(&spec, |tower, inputs| {
        let pa = tower.fc("a", &inputs[0], 1, None)?; // a/W, a/b
        let pb = tower.fc("b", &inputs[0], 1, None)?; // b/W, b/b
        let (loss_a, loss_b) = (nn::mse(&pa, &inputs[1])?, nn::mse(&pb, &inputs[2])?);
        tower.set_output("loss_a", &loss_a)?;
        tower.set_output("loss_b", &loss_b)?;
        tower.set_cost(&(&loss_a + &loss_b)?)
    })?;
    let sgd = Optimizer::new("sgd")?;
    sgd.set("learning_rate", 0.3)?;
    model.set_optimizer(&sgd)?;
    let b_sgd = Optimizer::new("sgd")?;
    b_sgd.set("learning_rate", 0.2)?;
    // a: a copy of the model's optimizer; b: an optimizer of its own.
    model.add_train_op(&TrainOp::new("a_op").cost("loss_a").scope("a/"))?;
    model.add_train_op(&TrainOp::new("b_op").cost("loss_b").scope("b/").optimizer(&b_sgd))?;

    let mut trainer = Trainer::new(&TrainerOptions { max_epoch: 5, progress: Progress::Off, ..Default::default() })?;
    trainer.set_model(&model, Input::from_dataflow(batches, None)?)?;
    // Each step: b's update without hooks (no callbacks, global_step stays),
    // then a's as the hooked step; each takes a batch of its own.
    trainer.set_run_step(|ctx| {
        ctx.run_train_ops(&["b_op"], Run::Raw)?;
        ctx.run_train_ops(&["a_op"], Run::Hooked)
    })?;
    trainer.run()?;
    let v = |name: &str| -> tptrain::Result<f64> { model.variable(name)?.item() };
    println!(
        "global_step {}: a fits {:.2} x + {:.2}, b fits {:.2} x + {:.2}",
        trainer.global_step(),
        v("a/W")?,
        v("a/b")?,
        v("b/W")?,
        v("b/b")?
    );
    Ok(())
}
// [/doc]

use tptrain::{Order, Remainder};

/// Rows of x spread evenly over [-1, 1), ya = 3 x + 2 and yb = 0.5 - x, in
/// batches of 32.
fn main() -> tptrain::Result<()> {
    const ROWS: usize = 256;
    let xs: Vec<f32> = (0..ROWS).map(|i| (2 * i as i64 - ROWS as i64) as f32 / ROWS as f32).collect();
    let ya: Vec<f32> = xs.iter().map(|x| 3.0 * x + 2.0).collect();
    let yb: Vec<f32> = xs.iter().map(|x| 0.5 - x).collect();
    tptrain::manual_seed(0)?;
    let shape = [ROWS as i64, 1];
    let (x, a, b) = (
        tptrain::Tensor::from_vec(xs, &shape)?,
        tptrain::Tensor::from_vec(ya, &shape)?,
        tptrain::Tensor::from_vec(yb, &shape)?,
    );
    train(&DataFlow::from_tensors(&[&x, &a, &b], Order::Shuffled)?.batch(32, Remainder::Drop)?)
}
