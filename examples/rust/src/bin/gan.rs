//! A DCGAN on Fashion-MNIST with tensorpack's GANTrainer, trained by tptrain
//! (the Rust twin of examples/c/gan.c).
//!
//! Data: Debian's dataset-fashion-mnist (IDX files under
//! /usr/share/datasets/fashion-mnist): the 60,000 training images in a new
//! order each epoch, scaled to [-1, 1], each with a noise vector z drawn
//! uniformly from [-1, 1]^64 by the pipeline (seeded, and saved in
//! checkpoints like the rest of the pipeline), in batches of 64.
//!
//! The tower function builds tensorpack's GANModelDesc: a generator under
//! the variable scope "gen/" and a discriminator under "discrim/", and
//! publishes the outputs "g_loss" and "d_loss". Trainer::set_gan makes the
//! two train ops from them (each with a copy of the model's Adam) and the
//! GANTrainer: every step updates the generator, then the discriminator,
//! from one forward pass.
//!
//!   generator:     z -> fc 7x7x128 -> BN, ReLU -> deconv 4x4/2 64 (14x14)
//!                  -> BN, ReLU -> deconv 4x4/2 1 (28x28) -> tanh
//!   discriminator: image -> conv 4x4/2 64 (14x14), leaky ReLU 0.2
//!                  -> conv 4x4/2 128 (7x7) -> BN, leaky ReLU -> fc 1 (a logit)
//!   weights initialised normal with std 0.05, biases zero
//!   d_loss = (sigmoid CE of D(real) against 1 + of D(G(z)) against 0) / 2
//!   g_loss = sigmoid CE of D(G(z)) against 1
//!   Adam, learning rate 2e-4, beta1 0.5 (tensorpack's DCGAN)
//!
//! After every epoch a callback draws 64 samples from the same fixed noise
//! as the C program (the generator as an inference tower: BatchNorm's moving
//! averages), tiles them into an 8 x 8 grid (image::grid), writes it as
//! LOGDIR/samples-epochN.png and puts it as the image "samples"
//! (TensorBoard's event file). A ModelSaver checkpoints both nets and both
//! optimizers every epoch; run it again on the same LOGDIR and it goes on
//! where it stopped.
//!
//! --towers N trains on N replicated CPU towers (tensorpack's
//! MultiGPUGANTrainer: each tower its own batch of 64, each op's cost
//! averaged over the towers). --steps S makes an epoch S steps (default: one
//! pass).
//!
//!     cargo run --release --bin gan -- [--towers N] [--steps S] [LOGDIR] [DATA_DIR] [EPOCHS]
//!       (defaults: train_log/gan, /usr/share/datasets/fashion-mnist, 2)
use std::process::ExitCode;
use tptrain::image::{self, Grid};
use tptrain::nn::{self, Activation, LayerOptions};
use tptrain::ops::{self, Arg};
use tptrain::{
    Augmentor, Callback, Code, DType, DataFlow, Events, FakeOptions, Flow, Gan, Init, Input, InputSpec, LogdirAction,
    Model, ModelSaver, Optimizer, Order, Remainder, Result, StopOnSignals, Tensor, Tower, Towers, Trainer,
    TrainerOptions,
};

const BATCH: i64 = 64;
const Z: i64 = 64;
const SAMPLES: i64 = 64;
const NF: i64 = 64; // the nets' width

/// softplus(sign * x), averaged: the sigmoid cross-entropy of logits x
/// against the target 1 (sign -1) or 0 (sign +1).
fn sigmoid_ce(logits: &Tensor, sign: f64) -> Result<Tensor> {
    let x = (logits * sign)?;
    ops::call1("softplus", &[Arg::Tensor(&x)])?.mean()
}

/// z [N, Z] -> images [N, 1, 28, 28] in [-1, 1], under the scope "gen/"
/// (a layer's name is one scope level: "fc0" in "gen" makes "gen/fc0/W").
fn generator(tw: &mut Tower, z: &Tensor) -> Result<Tensor> {
    tw.scope("gen", |tw| {
        let fc = LayerOptions::default().kernel_init(Init::Normal).use_bias(false); // std 0.05; BatchNorm follows
        let up = fc.kernel(4).stride(2);
        let x = tw.fc("fc0", z, 7 * 7 * 2 * NF, &fc)?.reshape(&[-1, 2 * NF, 7, 7])?;
        let x = tw.batch_norm("bn0", &x, 0.9, 1e-5)?;
        let x = nn::activation(&x, Activation::Relu)?;
        let x = tw.conv2d_transpose("deconv1", &x, NF, &up)?;
        let x = tw.batch_norm("bn1", &x, 0.9, 1e-5)?;
        let x = nn::activation(&x, Activation::Relu)?;
        tw.conv2d_transpose("deconv2", &x, 1, &up.use_bias(true).activation(Activation::Tanh))
    })
}

/// images [N, 1, 28, 28] -> logits [N, 1], under the scope "discrim/". It
/// is applied twice, to real and to generated images: a reuse scope
/// (tensorpack's auto_reuse_variable_scope) lets both share its variables.
fn discriminator(tw: &mut Tower, image: &Tensor) -> Result<Tensor> {
    tw.reuse_scope("discrim", |tw| {
        let conv = LayerOptions::default().kernel_init(Init::Normal).kernel(4).stride(2); // std 0.05
        let x = tw.conv2d("conv0", image, NF, &conv.activation(Activation::LeakyRelu(0.2)))?;
        let x = tw.conv2d("conv1", &x, 2 * NF, &conv.use_bias(false))?;
        let x = tw.batch_norm("bn1", &x, 0.9, 1e-5)?;
        let x = nn::activation(&x, Activation::LeakyRelu(0.2))?;
        tw.fc("fc", &x, 1, &LayerOptions::default().kernel_init(Init::Normal))
    })
}

/// The tower function: inputs image [N, 1, 28, 28] in [-1, 1], z [N, Z].
fn tower(tw: &mut Tower, inputs: &[Tensor]) -> Result<()> {
    let fake = generator(tw, &inputs[1])?;
    let real_logit = discriminator(tw, &inputs[0])?;
    let fake_logit = discriminator(tw, &fake)?;
    let d_real = sigmoid_ce(&real_logit, -1.0)?; // against 1
    let d_fake = sigmoid_ce(&fake_logit, 1.0)?; // against 0
    let d_loss = ((&d_real + &d_fake)? * 0.5)?;
    let g_loss = sigmoid_ce(&fake_logit, -1.0)?;
    tw.set_output("d_loss", &d_loss)?;
    tw.set_output("g_loss", &g_loss)?;
    tw.set_output("gen", &fake)
}

/// The training pipeline: (image in [-1, 1], z) batched by BATCH.
fn pipeline<'a>(dir: &str) -> Result<DataFlow<'a>> {
    let mnist = DataFlow::mnist(dir, "train", Order::Shuffled)?;
    let norm = mnist.augment(0, &[Augmentor::Normalize { mean: vec![0.5], std: vec![0.5] }], 0)?;
    let z_options = FakeOptions::default().range(-1.0, 1.0); // new every datapoint
    let noise = DataFlow::fake(&[InputSpec::new("z", DType::F32, &[Z])], 60000, &z_options)?;
    let joined = DataFlow::join(&[&norm, &noise])?; // (image, label, z)
    joined.select(&[0, 2])?.batch(BATCH, Remainder::Drop)
}

const USAGE: &str = "\
usage: gan [--towers N] [--steps S] [LOGDIR] [DATA_DIR] [EPOCHS]
  LOGDIR      the log directory (default train_log/gan): samples-epochN.png,
              checkpoints, stats.json; one that holds checkpoints goes on
              from the latest
  DATA_DIR    the IDX files (default /usr/share/datasets/fashion-mnist)
  EPOCHS      the epochs to train (default 2)
  --towers N  train on N replicated CPU towers, 1 to 256 (tensorpack's
              MultiGPUGANTrainer(N)); each takes its own batch of 64
  --steps S   S steps per epoch (default: one pass over the 60,000 images)
  -h, --help  this text
";

/// A whole number from 1 to max, else None.
fn parse_count(s: &str, max: u64) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| (1..=max).contains(n))
}

/// A bad command line: what is wrong, then the usage; exit status 2.
fn usage_error(what: &str, arg: Option<&str>) -> Result<ExitCode> {
    let arg = arg.map_or(String::new(), |a| format!(" '{a}'"));
    eprint!("gan: {what}{arg}\n{USAGE}");
    Ok(ExitCode::from(2))
}

fn main() -> Result<ExitCode> {
    // The options go anywhere; the other arguments are LOGDIR DATA_DIR
    // EPOCHS, in that order (more are ignored).
    let mut positional: Vec<String> = Vec::new();
    let (mut n_towers, mut steps) = (0, 0); // 0: no towers; one pass per epoch
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            print!("{USAGE}");
            return Ok(ExitCode::SUCCESS);
        } else if a == "--towers" || a == "--steps" {
            let value = match args.next() {
                Some(v) => v,
                None => return usage_error("a value is missing after", Some(&a)),
            };
            let (into, max) = if a == "--towers" { (&mut n_towers, 256) } else { (&mut steps, 1_000_000_000) };
            *into = match parse_count(&value, max) {
                Some(n) => n,
                None => return usage_error("not a whole number in range:", Some(&value)),
            };
        } else if a.starts_with("--") {
            return usage_error("unknown option", Some(&a));
        } else {
            positional.push(a);
        }
    }
    let logdir = positional.first().map_or("train_log/gan", String::as_str);
    let dir = positional.get(1).map_or("/usr/share/datasets/fashion-mnist", String::as_str);
    let epochs: i64 = positional.get(2).map_or(2, |e| e.parse().unwrap_or(0));
    tptrain::manual_seed(1)?;

    let signature = [InputSpec::new("image", DType::F32, &[-1, 1, 28, 28]), InputSpec::new("z", DType::F32, &[-1, Z])];
    let model = Model::new(&signature, tower)?;
    let adam = Optimizer::new("adam")?;
    adam.set("learning_rate", 2e-4)?;
    adam.set("beta1", 0.5)?;
    model.set_optimizer(&adam)?; // each train op gets a copy

    let options = TrainerOptions {
        max_epoch: epochs,
        logdir: Some(logdir.into()),
        logdir_action: LogdirAction::Delete, // a run without checkpoints starts afresh
        auto_resume: true,                   // one with checkpoints goes on from the latest
        stop_on_signals: StopOnSignals::Always, // SIGTERM/Ctrl-C: stop at a step, save, resume later
        steps_per_epoch: (steps > 0).then_some(steps as i64),
        ..Default::default()
    };
    let mut trainer = Trainer::new(&options)?;
    let input = Input::from_dataflow(&pipeline(dir)?, None)?; // a prefetching queue
    let mut gan = Gan::new(); // GANTrainer: g_op then d_op every step
    if n_towers > 0 {
        gan = gan.towers(&Towers::replicated(n_towers as usize));
    }
    trainer.set_gan(&model, input, &gan)?;

    // The samples: 64 fixed noise vectors, the same every epoch.
    let mut r: u64 = 0x9e3779b97f4a7c15;
    let z: Vec<f32> = (0..SAMPLES * Z)
        .map(|_| {
            // xorshift64: uniform in [-1, 1)
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            ((r >> 11) as f64 / 9007199254740992.0 * 2.0 - 1.0) as f32
        })
        .collect();
    let z = Tensor::from_vec(z, &[SAMPLES, Z])?;
    let blank = Tensor::from_vec(vec![0f32; (SAMPLES * 28 * 28) as usize], &[SAMPLES, 1, 28, 28])?; // unused here
    let samples = Callback::on(Events::TRIGGER, move |ctx, _, _| {
        let images = ctx.model()?.infer(&[&blank, &z], &["gen"])?.remove(0); // the generator's output
        let grid = image::grid(&images, &Grid::new().range(-1.0, 1.0))?; // 8 columns, padding 2
        ctx.put_image("samples", &grid)?;
        if let Some(logdir) = ctx.logdir() {
            image::write_png(&grid, logdir.join(format!("samples-epoch{}.png", ctx.epoch_num())))?;
        }
        Ok(Flow::Continue)
    });
    trainer.add_callback(samples.name("Samples"))?; // chief only, after every epoch
    trainer.add_callback(ModelSaver::new())?; // every epoch: both nets, both optimizers

    trainer.run()?;
    let g_loss = match trainer.scalar_latest("g_loss") {
        Err(e) if e.code() == Code::NotFound => {
            println!("{logdir} already holds a finished run of {epochs} epochs: nothing to train (give more EPOCHS, or another LOGDIR)");
            return Ok(ExitCode::SUCCESS);
        }
        result => result?,
    };
    let d_loss = trainer.scalar_latest("d_loss")?;
    println!(
        "after {} steps: g_loss {:.4}, d_loss {:.4}; samples in {logdir}/samples-epoch{epochs}.png",
        g_loss.global_step, g_loss.value, d_loss.value
    );
    Ok(ExitCode::SUCCESS)
}
