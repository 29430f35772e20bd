//! Two moons, as a new user coming from PyTorch Lightning writes it (issue
//! 34's program): a 2-32-2 MLP on 2 replicated towers, validation accuracy
//! each epoch, a learning-rate schedule, early stopping, checkpoints with the
//! best kept and auto-resume, a logging callback, and a prediction on 5
//! points from the best checkpoint. Run it twice: the second run trains
//! nothing (the first one stopped early) and predicts the same.
//! (The C and Go twins: examples/c/two_moons.c, examples/go/two_moons.)
//!
//!     cargo run --bin two_moons -- [LOGDIR]
use tptrain::nn::{self, Activation, LayerOptions};
use tptrain::{
    BestSaver, Callback, DType, DataFlow, EarlyStopping, Events, Flow, InputSpec, Model, ModelSaver, Optimizer, Order,
    Predictor, Remainder, ScheduledHyperParam, Tensor, Towers, TrainConfig, Trainer, TrainerOptions,
};

/// `n` points of sklearn's make_moons (noise 0.1) and their labels.
fn moons(n: usize, mut seed: u64) -> tptrain::Result<(Tensor, Tensor)> {
    let mut uniform = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 40) as f32 / (1u64 << 24) as f32
    };
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for i in 0..n {
        let (t, label) = (std::f32::consts::PI * uniform(), (i % 2) as i64);
        let (x, y) = if label == 0 { (t.cos(), t.sin()) } else { (1.0 - t.cos(), 0.5 - t.sin()) };
        xs.extend([x + 0.2 * (uniform() - 0.5), y + 0.2 * (uniform() - 0.5)]);
        ys.push(label);
    }
    Ok((Tensor::from_vec(xs, &[n as i64, 2])?, Tensor::from_vec(ys, &[n as i64])?))
}

fn main() -> tptrain::Result<()> {
    let logdir = std::env::args().nth(1).unwrap_or_else(|| "train_log/two_moons".into());
    tptrain::manual_seed(0)?;
    let spec = [InputSpec::new("x", DType::F32, &[-1, 2]), InputSpec::new("label", DType::I64, &[-1])];
    let model = Model::new(&spec, |tower, inputs| {
        let hidden = tower.fc("fc0", &inputs[0], 32, &LayerOptions::default().activation(Activation::Relu))?;
        let logits = tower.fc("fc1", &hidden, 2, None)?;
        tower.set_output("logits", &logits)?;
        tower.set_output("accuracy", &nn::accuracy(&logits, &inputs[1])?)?;
        tower.set_cost(&nn::softmax_cross_entropy(&logits, &inputs[1])?)
    })?;
    let adam = Optimizer::new("adam")?;
    model.set_optimizer(&adam)?;

    let (x, y) = moons(1000, 1)?;
    let train = DataFlow::from_tensors(&[&x, &y], Order::Shuffled)?.batch(32, Remainder::Drop)?;
    let (vx, vy) = moons(200, 2)?;
    let val = DataFlow::from_tensors(&[&vx, &vy], Order::Sequential)?.batch(100, Remainder::Keep)?;

    let options =
        TrainerOptions { max_epoch: 30, logdir: Some(logdir.into()), auto_resume: true, ..Default::default() };
    let config = TrainConfig {
        options: Some(options),
        towers: Some(Towers::replicated(2)),
        ..TrainConfig::from_dataflow(&model, &train)
    }
    .callback(Callback::inference_runner(&model, &val, &["accuracy"]))? // validation_accuracy
    .callback(ScheduledHyperParam::new(&adam, "learning_rate", &[(0, 0.01), (10, 0.003)]))?
    .callback(EarlyStopping::new("validation_accuracy").maximize().patience(3))?
    .callback(ModelSaver::new())?
    .callback(BestSaver::max("validation_accuracy"))?
    .callback(Callback::on(Events::TRIGGER_EPOCH, |ctx, _, _| {
        let acc = ctx.scalar_latest("validation_accuracy")?.value;
        println!("epoch {}: validation accuracy {acc:.3}", ctx.epoch_num());
        Ok(Flow::Continue)
    }))?;
    let mut trainer = Trainer::from_config(config)?;
    match trainer.run()?.stop_reason() {
        Some(reason) => println!("stopped after epoch {}: {reason}", trainer.epoch_num()),
        None => println!("finished {} epochs", trainer.epoch_num()),
    }

    let best = trainer.best_checkpoint("validation_accuracy")?.expect("a best checkpoint");
    let predictor = Predictor::builder(&model).inputs(&["x"]).outputs(&["logits"]).checkpoint(&best).build()?;
    let points = Tensor::from_vec(vec![-1.0f32, 0.2, 0.0, 1.0, 1.0, -0.5, 2.0, 0.5, 0.5, 0.25], &[5, 2])?;
    let classes = predictor.predict(&[&points])?[0].argmax(1)?.to_vec::<i64>()?;
    println!("predicted classes from {}: {classes:?}", best.display());
    Ok(())
}
