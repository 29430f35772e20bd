//! Fashion-MNIST with tensorpack's mnist-convnet recipe, trained by tptrain
//! (the Rust twin of examples/c/fashion_mnist.c; the Go one is
//! examples/go/fashion_mnist).
//!
//! Data: Debian's dataset-fashion-mnist (IDX files under
//! /usr/share/datasets/fashion-mnist). The training dataflow reads the 60,000
//! images in a new order each epoch, normalises them to [-1, 1] and batches
//! them by 128; the trainer wraps it in a queue input, so a background thread
//! prepares batches while the model trains. After each epoch an inference
//! runner measures accuracy and cost on the 10,000 test images
//! (validation_accuracy and validation_cost in stats.json and TensorBoard's
//! event file), a ModelSaver checkpoints the whole training (also every 200
//! steps) and a MaxSaver keeps the best one as max-validation_accuracy. Run
//! it again on the same LOGDIR and it goes on exactly where the last run
//! stopped (killed mid-epoch included).
//!
//! --towers N trains data-parallel on N replicated CPU towers, tensorpack's
//! SyncMultiGPUTrainerReplicated(N): one field of the train config
//! (docs/towers.md). Each tower takes its own batch of 128, so a step trains
//! on 128 x N images and an epoch has N times fewer steps. The towers'
//! dropout draws from one generator in whatever order they reach it, so such
//! a run (and its resume) is not bit-reproducible.
//!
//! --device D trains on device D ("cuda:0"; docs/gpu.md): every tower (one
//! without --towers) computes there, on a copy of the variables, which stay
//! on the CPU with Adam's update (docs/towers.md).
//!
//! --dist makes this process one rank of a distributed job (tensorpack's
//! HorovodTrainer; docs/distributed.md): start it with the launcher,
//!     tptrain-run -n 2 target/release/fashion_mnist --dist
//! (or torchrun, or anything that sets torchrun's variables). Each rank takes
//! every other batch, the gradients are averaged over the ranks, and rank 0
//! alone writes the log directory, validates and checkpoints.
//!
//! The tower: conv 5x5 32 -> max pool 2 -> conv 3x3 32 -> conv 3x3 32 ->
//! max pool 2 -> conv 3x3 32 -> fc 512 -> dropout 0.5 -> fc 10, ReLU after
//! each conv and fc0; softmax cross-entropy (the validation "cost").
//! Adam at 1e-3, times 0.6 after each epoch from the second on
//! (ScheduledHyperParamSetter).
//!
//!     cargo run --release --bin fashion_mnist -- [--towers N] [--device D] [--dist] [--bf16] [LOGDIR] [DATA_DIR] [EPOCHS]
//!       (defaults: no towers, train_log/fashion_mnist,
//!        /usr/share/datasets/fashion-mnist, 5; --help says more)
//!
//! Exits 0 when the final test accuracy is at least 90 %.
use std::process::ExitCode;
use tptrain::nn::{self, Activation, LayerOptions, Padding};
use tptrain::{
    Augmentor, BestSaver, Callback, Code, DType, DataFlow, Distributed, Every, InputSpec, LogdirAction, Model,
    ModelSaver, Optimizer, Order, Precision, Remainder, Result, ScheduledHyperParam, StopOnSignals, Tensor, Tower,
    Towers, TrainConfig, Trainer, TrainerOptions,
};

const BATCH: i64 = 128;
const CLASSES: i64 = 10;

fn tower(tower: &mut Tower, inputs: &[Tensor]) -> Result<()> {
    let conv = LayerOptions::default().activation(Activation::Relu); // SAME padding, He init, bias
    let conv5 = conv.kernel(5);
    let fc = LayerOptions::default().activation(Activation::Relu);
    let c0 = tower.conv2d("conv0", &inputs[0], 32, &conv5)?;
    let p0 = nn::max_pool(&c0, 2, 2, Padding::Valid)?;
    let c1 = tower.conv2d("conv1", &p0, 32, &conv)?;
    let c2 = tower.conv2d("conv2", &c1, 32, &conv)?;
    let p1 = nn::max_pool(&c2, 2, 2, Padding::Valid)?;
    let c3 = tower.conv2d("conv3", &p1, 32, &conv)?;
    let f = nn::flatten(&c3)?;
    let fc0 = tower.fc("fc0", &f, 512, &fc)?;
    let d = tower.dropout(&fc0, 0.5)?;
    let logits = tower.fc("fc1", &d, CLASSES, None)?;
    let xent = nn::softmax_cross_entropy(&logits, &inputs[1])?;
    let acc = nn::accuracy(&logits, &inputs[1])?;
    tower.set_cost(&xent)?;
    tower.set_output("accuracy", &acc)
}

/// Images normalised to [-1, 1], batched; shuffled each epoch for training.
fn pipeline<'a>(dir: &str, split: &str, train: bool) -> Result<DataFlow<'a>> {
    let order = if train { Order::Shuffled } else { Order::Sequential };
    let raw = DataFlow::mnist(dir, split, order)?;
    let norm = raw.augment(0, &[Augmentor::Normalize { mean: vec![0.5], std: vec![0.5] }], 0)?;
    // Training drops the short last batch; the test pass keeps every image.
    norm.batch(if train { BATCH } else { 500 }, if train { Remainder::Drop } else { Remainder::Keep })
}

const USAGE: &str = "\
usage: fashion_mnist [--towers N] [--device D] [--dist] [--bf16] [LOGDIR] [DATA_DIR] [EPOCHS]
  LOGDIR      the log directory (default train_log/fashion_mnist); one that
              holds checkpoints goes on from the latest
  DATA_DIR    the IDX files (default /usr/share/datasets/fashion-mnist)
  EPOCHS      the epochs to train (default 5)
  --towers N  train on N replicated CPU towers, 1 to 256 (tensorpack's
              SyncMultiGPUTrainerReplicated(N)). Each tower takes its own
              batch of 128: a step trains on 128 x N images, an epoch has N
              times fewer steps. Default: no towers, the simple trainer (a
              batch of 128 per step)
  --device D  train on device D (\"cuda:0\"; default the CPU): every tower
              (one without --towers) computes there, on a copy of the
              variables, which stay on the CPU with Adam's update
  --dist      this process is one rank of a distributed job started by
              tptrain-run -n N (or torchrun): each rank takes every N-th
              batch, rank 0 alone writes LOGDIR
  --bf16      mixed precision: the network's convolutions and matmuls in
              bfloat16 (autocast), variables and updates in float32; several
              times faster on a CPU with AVX-512 BF16 or AMX
  -h, --help  this text
";

/// --towers' value: a whole number from 1 to 256.
fn parse_towers(s: &str) -> Option<usize> {
    if !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| (1..=256).contains(n))
}

/// A bad command line: what is wrong, then the usage; exit status 2.
fn usage_error(what: &str, arg: Option<&str>) -> Result<ExitCode> {
    let arg = arg.map_or(String::new(), |a| format!(" '{a}'"));
    eprint!("fashion_mnist: {what}{arg}\n{USAGE}");
    Ok(ExitCode::from(2))
}

fn main() -> Result<ExitCode> {
    // The options go anywhere; the other arguments are LOGDIR DATA_DIR
    // EPOCHS, in that order (more are ignored).
    let mut positional: Vec<String> = Vec::new();
    let mut n_towers = 0; // 0: no towers, the simple trainer
    let mut dist = false;
    let mut bf16 = false;
    let mut device: Option<String> = None; // None: the CPU
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = if a == "-h" || a == "--help" {
            print!("{USAGE}");
            return Ok(ExitCode::SUCCESS);
        } else if a == "--towers" {
            match args.next() {
                Some(v) => v,
                None => return usage_error("--towers needs a value N", None),
            }
        } else if let Some(v) = a.strip_prefix("--towers=") {
            v.to_owned()
        } else if a == "--device" || a.starts_with("--device=") {
            let d = match a.strip_prefix("--device=") {
                Some(d) => Some(d.to_owned()),
                None => args.next(),
            };
            match d {
                Some(d) if !d.is_empty() => device = Some(d),
                _ => return usage_error("--device needs a device name D", None),
            }
            continue;
        } else if a == "--dist" {
            dist = true;
            continue;
        } else if a == "--bf16" {
            bf16 = true;
            continue;
        } else if a.starts_with("--") {
            return usage_error("unknown option", Some(&a));
        } else {
            positional.push(a);
            continue;
        };
        n_towers = match parse_towers(&value) {
            Some(n) => n,
            None => return usage_error("--towers wants a whole number from 1 to 256, not", Some(&value)),
        };
    }
    let logdir = positional.first().map_or("train_log/fashion_mnist", String::as_str);
    let dir = positional.get(1).map_or("/usr/share/datasets/fashion-mnist", String::as_str);
    let epochs: i64 = positional.get(2).map_or(5, |e| e.parse().unwrap_or(0));
    tptrain::manual_seed(1)?;

    let signature = [InputSpec::new("image", DType::F32, &[-1, 1, 28, 28]), InputSpec::new("label", DType::I64, &[-1])];
    let model = Model::new(&signature, tower)?;
    let adam = Optimizer::new("adam")?;
    adam.set("learning_rate", 1e-3)?;
    model.set_optimizer(&adam)?;

    let (train, test) = (pipeline(dir, "train", true)?, pipeline(dir, "test", false)?);

    // The learning rate: 1e-3, then times 0.6 after each epoch from the 2nd.
    let mut lr = vec![(0, 1e-3)];
    for e in 2..=epochs {
        lr.push((e, lr[lr.len() - 1].1 * 0.6));
    }
    let options = TrainerOptions {
        max_epoch: epochs,
        logdir: Some(logdir.into()),
        logdir_action: LogdirAction::Delete, // a run without checkpoints starts afresh
        auto_resume: true,                   // one with checkpoints goes on from the latest
        stop_on_signals: StopOnSignals::Always, // SIGTERM/Ctrl-C: stop at a step, save, resume later
        precision: if bf16 { Precision::Bf16Mixed } else { Precision::Fp32 }, // autocast; variables stay f32
        ..Default::default()
    };
    if device.is_some() && n_towers == 0 {
        n_towers = 1; // one tower on the device
    }
    if n_towers > 0 {
        println!(
            "training on {n_towers} replicated {} tower{}, a batch of {BATCH} each: {} images per step",
            device.as_deref().unwrap_or("CPU"),
            if n_towers > 1 { "s" } else { "" },
            n_towers as i64 * BATCH
        );
    }
    let config = TrainConfig {
        options: Some(options),
        // SyncMultiGPUTrainerReplicated(n_towers); None: SimpleTrainer
        towers: (n_towers > 0).then(|| match &device {
            Some(d) => Towers::replicated(n_towers).devices(&vec![d.as_str(); n_towers]),
            None => Towers::replicated(n_towers),
        }),
        // HorovodTrainer: one rank of the job tptrain-run started; None: alone
        distributed: dist.then(Distributed::from_env),
        ..TrainConfig::from_dataflow(&model, &train) // wrapped in a queue input
    }
    .callback(Callback::inference_runner(&model, &test, &["accuracy", "cost"]))?
    .callback(ScheduledHyperParam::new(&adam, "learning_rate", &lr))?
    .callback(ModelSaver::new().every(Every::epochs(1).and_steps(200)))?
    .callback(BestSaver::max("validation_accuracy"))?;
    let mut trainer = Trainer::from_config(config)?;
    trainer.run()?;
    if trainer.rank()? != 0 {
        return Ok(ExitCode::SUCCESS); // the chief validates and reports
    }

    let accuracy = match trainer.scalar_latest("validation_accuracy") {
        Err(e) if e.code() == Code::NotFound => {
            // resumed after the last epoch: nothing ran
            println!("{logdir} already holds a finished run of {epochs} epochs: nothing to train (give more EPOCHS, or another LOGDIR)");
            return Ok(ExitCode::SUCCESS);
        }
        result => result?,
    };
    println!(
        "test accuracy: {:.2} % on the 10,000 Fashion-MNIST test images (step {})",
        100.0 * accuracy.value,
        accuracy.global_step
    );
    Ok(if accuracy.value >= 0.9 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
