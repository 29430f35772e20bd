//! A small convolutional classifier with tptrain's layers: conv2d, batch
//! norm, ReLU, max pooling, a fully-connected layer and softmax
//! cross-entropy, trained with Adam; accuracy from an inference pass on
//! images it never saw.
//!
//! The data: 1x8x8 images with noise in [0, 0.8) and a brighter (+0.8) 3x3
//! square near the top-left corner (class 0) or near the bottom-right one
//! (class 1), its position jittered by up to two pixels (the two regions
//! overlap in the middle). Exits with 1 if the accuracy on held-out images
//! is below 90%. (The Go twin is examples/go/cnn_classifier.)
//!
//!     cargo run --bin cnn_classifier
use std::process::ExitCode;
use tptrain::nn::{self, Activation, LayerOptions, Padding};
use tptrain::{DType, Input, InputSpec, Model, Optimizer, Progress, Tensor, Trainer, TrainerOptions};

const SIDE: usize = 8;
const TRAIN: usize = 512;
const TEST: usize = 256;
const BATCH: i64 = 32;
const EPOCHS: i64 = 4;
const MIN_ACCURACY: f64 = 0.9;

/// xorshift64*: uniform in [0, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// `n` images [n, 1, 8, 8] and their labels [n] (i64).
fn images(n: usize, rng: &mut Rng) -> Result<(Tensor, Tensor), tptrain::Error> {
    let mut pixels = Vec::with_capacity(n * SIDE * SIDE);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let label = (rng.next() < 0.5) as i64;
        let jitter = |v: f32| (v * 2.0) as usize; // 0 or 1
        let (top, left) = if label == 0 {
            (jitter(rng.next()), jitter(rng.next()))
        } else {
            (4 + jitter(rng.next()), 4 + jitter(rng.next()))
        };
        for r in 0..SIDE {
            for c in 0..SIDE {
                let inside = (top..top + 3).contains(&r) && (left..left + 3).contains(&c);
                pixels.push(0.8 * rng.next() + if inside { 0.8 } else { 0.0 });
            }
        }
        labels.push(label);
    }
    Ok((Tensor::from_vec(pixels, &[n as i64, 1, SIDE as i64, SIDE as i64])?, Tensor::from_vec(labels, &[n as i64])?))
}

fn main() -> Result<ExitCode, tptrain::Error> {
    tptrain::manual_seed(3)?;
    let signature = [InputSpec::new("image", DType::F32, &[-1, 1, 8, 8]), InputSpec::new("label", DType::I64, &[-1])];
    let model = Model::new(&signature, |tower, inputs| {
        let (image, label) = (&inputs[0], &inputs[1]);
        let conv = tower.conv2d("conv1", image, 8, &LayerOptions::default().kernel(3).use_bias(false))?;
        let bn = tower.batch_norm("bn1", &conv, nn::BATCH_NORM_MOMENTUM, nn::BATCH_NORM_EPS)?;
        let relu = nn::activation(&bn, Activation::Relu)?;
        let pooled = nn::max_pool(&relu, 2, 2, Padding::Same)?; // [N, 8, 4, 4]
        let logits = tower.fc("fc", &pooled, 2, None)?; // flattens
        let cost = nn::softmax_cross_entropy(&logits, label)?;
        tower.set_cost(&cost)?;
        tower.set_output("logits", &logits)?;
        tower.set_output("accuracy", &nn::accuracy(&logits, label)?)
    })?;
    let optimizer = Optimizer::new("adam")?;
    optimizer.set("learning_rate", 0.01)?;
    model.set_optimizer(&optimizer)?;

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (train_x, train_y) = images(TRAIN, &mut rng)?;
    let (test_x, test_y) = images(TEST, &mut rng)?;
    let options = TrainerOptions {
        max_epoch: EPOCHS,
        console: true, // the per-epoch scalar printer shows the cost
        progress: Progress::Off,
        default_callbacks: false,
        ..Default::default()
    };
    let mut trainer = Trainer::new(&options)?;
    trainer.set_model(&model, Input::from_tensors(&[&train_x, &train_y], BATCH, Some(5))?)?;
    trainer.run()?;
    println!("last training cost: {:.4}", trainer.scalar_latest("cost")?.value);
    println!("variables: {}", model.variable_names()?.join(", "));

    // Inference: batch norm uses its moving averages, nothing is trained.
    let out = model.infer(&[&test_x, &test_y], &["accuracy", "cost", "logits"])?;
    let (accuracy, cost) = (out[0].item()?, out[1].item()?);
    let wrong = nn::wrong(&out[2], &test_y, 1)?.sum()?.item()?;
    println!("{wrong} of {TEST} held-out images misclassified");
    println!("held-out accuracy {:.2}% on {TEST} images (cost {cost:.4})", 100.0 * accuracy);
    if accuracy >= MIN_ACCURACY {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("cnn_classifier: the accuracy {:.2}% is below {:.0}%", 100.0 * accuracy, 100.0 * MIN_ACCURACY);
        Ok(ExitCode::FAILURE)
    }
}
