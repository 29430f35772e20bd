//! docs/models.md, "The tower function": a model, its optimizer, a trainer
//! fed by a dataflow, a learning-rate schedule and inference. The part
//! between the [doc] markers is shown in the page (checked by the
//! doc-snippets test); the whole program is built and run by the examples test.

use std::process::ExitCode;

// [doc]
use tptrain::{
    nn, Activation, Callback, DType, DataFlow, Events, Flow, InputSpec, LayerOptions, Model, Optimizer, Order,
    Progress, Remainder, Tensor, TrainConfig, Trainer, TrainerOptions,
};

fn train(x: &Tensor, y: &Tensor) -> tptrain::Result<f64> {
    // The model for one step: its tensors are dropped when it returns.
    let model = Model::new(
        &[InputSpec::new("x", DType::F32, &[-1, 2]), InputSpec::new("label", DType::I64, &[-1])],
        |tower, inputs| {
            let relu = LayerOptions::default().activation(Activation::Relu);
            let h = tower.fc("fc1", &inputs[0], 32, &relu)?; // fc1/W, fc1/b
            let logits = tower.fc("fc2", &h, 2, None)?;
            tower.set_output("accuracy", &nn::accuracy(&logits, &inputs[1])?)?; // a moving summary
            tower.set_cost(&nn::softmax_cross_entropy(&logits, &inputs[1])?)
        },
    )?;
    let adam = Optimizer::new("adam")?;
    adam.set("learning_rate", 0.01)?;
    model.set_optimizer(&adam)?;
    let batches = DataFlow::from_tensors(&[x, y], Order::Shuffled)?.batch(32, Remainder::Drop)?;
    // After each epoch: the learning rate times 0.5, the optimizer reached
    // through the trainer.
    let decay = Callback::on(Events::TRIGGER, |ctx, _, _| {
        let opt = ctx.optimizer()?;
        opt.set("learning_rate", opt.get("learning_rate")? * 0.5)?;
        Ok(Flow::Continue)
    });
    // tensorpack's TrainConfig; steps_per_epoch: the dataflow's size; the
    // dataflow is wrapped in a queue input.
    let options = TrainerOptions { max_epoch: 5, progress: Progress::Off, ..Default::default() };
    let config = TrainConfig { options: Some(options), ..TrainConfig::from_dataflow(&model, &batches) }
        .callback(decay.name("lr_decay"))?;
    Trainer::from_config(config)?.run()?;
    let outputs = model.infer(&[x, y], &["accuracy"])?; // an inference tower
    outputs[0].item()
}
// [/doc]

/// Two classes: which side of the line x0 = x1 a point lies on.
fn main() -> tptrain::Result<ExitCode> {
    const ROWS: usize = 256;
    let (mut xs, mut ys) = (Vec::with_capacity(2 * ROWS), Vec::with_capacity(ROWS));
    let mut r = 7u32;
    for _ in 0..ROWS {
        for _ in 0..2 {
            r = r.wrapping_mul(1664525).wrapping_add(1013904223);
            xs.push((r >> 8) as f32 / 8388608.0 - 1.0);
        }
        ys.push((xs[xs.len() - 2] > xs[xs.len() - 1]) as i64);
    }
    tptrain::manual_seed(0)?;
    let x = Tensor::from_vec(xs, &[ROWS as i64, 2])?;
    let y = Tensor::from_vec(ys, &[ROWS as i64])?;
    let accuracy = train(&x, &y)?;
    println!("training accuracy {accuracy:.3}");
    Ok(if accuracy > 0.9 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
