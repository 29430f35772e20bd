//! A small MLP learns a non-linear regression with tptrain's simple trainer:
//! a model (input signature + tower closure with fc layers), Adam, in-memory
//! batches, a learning-rate schedule from a callback, and an inference pass.
//!
//! The data: 512 rows of x uniform in [-1, 1)^3 and
//! y = x0 - 2 x1 + 3 x2 + 1 + 0.5 x0 x1 (the product term needs the hidden
//! layer). Prints the cost now and then, and the final cost of an inference
//! pass over the data; exits with 1 if it is not below 0.01. (The Go twin is
//! examples/go/mlp_regression.)
//!
//!     cargo run --bin mlp_regression
use std::process::ExitCode;
use tptrain::nn::{self, Activation, LayerOptions};
use tptrain::{
    Callback, DType, Events, Flow, Input, InputSpec, Model, Optimizer, Progress, Tensor, Trainer, TrainerOptions,
};

const ROWS: usize = 512;
const BATCH: i64 = 32;
const EPOCHS: i64 = 60;
const THRESHOLD: f64 = 0.01;

/// The data set, from a fixed linear congruential generator.
fn data() -> Result<(Tensor, Tensor), tptrain::Error> {
    let mut r: u32 = 2024;
    let mut uniform = || {
        r = r.wrapping_mul(1664525).wrapping_add(1013904223);
        (r >> 8) as f32 / 8388608.0 - 1.0
    };
    let (mut x, mut y) = (Vec::with_capacity(ROWS * 3), Vec::with_capacity(ROWS));
    for _ in 0..ROWS {
        let (a, b, c) = (uniform(), uniform(), uniform());
        x.extend_from_slice(&[a, b, c]);
        y.push(a - 2.0 * b + 3.0 * c + 1.0 + 0.5 * a * b);
    }
    // from_vec moves the Vecs into the tensors: no copy.
    Ok((Tensor::from_vec(x, &[ROWS as i64, 3])?, Tensor::from_vec(y, &[ROWS as i64, 1])?))
}

fn main() -> Result<ExitCode, tptrain::Error> {
    tptrain::manual_seed(1)?;
    let signature = [InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])];
    // The tower function: called once to build the model (creating fc1/W,
    // fc1/b, fc2/W, fc2/b), then once per step, and by inference.
    let model = Model::new(&signature, |tower, inputs| {
        let (x, y) = (&inputs[0], &inputs[1]);
        let hidden = tower.fc("fc1", x, 32, &LayerOptions::default().activation(Activation::Relu))?;
        let prediction = tower.fc("fc2", &hidden, 1, None)?;
        tower.set_cost(&nn::mse(&prediction, y)?)?;
        tower.set_output("prediction", &prediction)
    })?;
    let optimizer = Optimizer::new("adam")?;
    optimizer.set("learning_rate", 0.01)?;
    model.set_optimizer(&optimizer)?;

    let (x, y) = data()?;
    let options = TrainerOptions {
        max_epoch: EPOCHS,
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        default_monitors: false,
        ..Default::default()
    };
    let mut trainer = Trainer::new(&options)?;
    // steps_per_epoch comes from the input: ROWS / BATCH batches per pass.
    trainer.set_model(&model, Input::from_tensors(&[&x, &y], BATCH, Some(7))?)?;
    let report = Callback::on(Events::TRIGGER_EPOCH, |ctx, _, _| {
        let epoch = ctx.epoch_num();
        if epoch % 10 == 0 {
            let cost = ctx.scalar_latest("cost")?.value;
            println!(
                "epoch {epoch:3}  step {:5}  cost {cost:.5}  lr {}",
                ctx.global_step(),
                optimizer.get("learning_rate")?
            );
        }
        // A schedule: the optimizer handle is shared with the model.
        if epoch == 40 {
            optimizer.set("learning_rate", optimizer.get("learning_rate")? / 5.0)?;
        }
        Ok(Flow::Continue)
    });
    trainer.add_callback(report.name("report"))?;
    trainer.run()?;

    let outputs = model.infer(&[&x, &y], &["prediction", "cost"])?;
    let cost = outputs[1].item()?;
    let p = outputs[0].to_vec::<f32>()?;
    let t = y.to_vec::<f32>()?;
    let xs = x.to_vec::<f32>()?;
    for i in 0..3 {
        let row = &xs[i * 3..i * 3 + 3];
        println!("x = ({:+.3}, {:+.3}, {:+.3})  y = {:+.4}  predicted {:+.4}", row[0], row[1], row[2], t[i], p[i]);
    }
    println!("variables: {}", model.variable_names()?.join(", "));
    println!("final cost (MSE over {ROWS} rows): {cost:.6}");
    if cost < THRESHOLD {
        println!("the final cost is below {THRESHOLD}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("mlp_regression: the final cost {cost:.6} is not below {THRESHOLD}");
        Ok(ExitCode::FAILURE)
    }
}
