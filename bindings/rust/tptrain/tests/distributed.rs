//! Distributed training from Rust: two ranks as two threads of this
//! process, over TCP on 127.0.0.1, each with explicit options
//! (`Distributed::master` and `membership`, no environment). Rank 1 starts
//! from other initial values than rank 0; after a few steps of SGD both
//! ranks hold the same variables bit for bit, the variables of one process
//! with two replicated towers, whether the trainer joined through
//! `Trainer::set_distributed` or `TrainConfig::distributed`. Bad options are
//! errors naming the option, before any rendezvous; joining after the model
//! was set is a state error; a rank alone times out. A GAN (the GANTrainer's
//! two train ops) on two ranks equals one process with two towers. The C twin is
//! tests/c/dist_mlp.c (driven by tests/py/test_distributed.py).

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use tptrain::{
    nn, Activation, Code, DType, DataFlow, Distributed, Input, InputOptions, InputSpec, LayerOptions, Model, Optimizer,
    Order, Progress, Remainder, RunOutcome, Tensor, Towers, TrainConfig, Trainer, TrainerOptions, VariableOptions,
};

const ROWS: usize = 320;
const FEATURES: usize = 4;
const HIDDEN: i64 = 8;
const WORLD: usize = 2;
/// Steps per epoch; two epochs (the non-trainable variables are broadcast
/// after each).
const STEPS: i64 = 10;
const EPOCHS: i64 = 2;

fn signature() -> Vec<InputSpec> {
    vec![InputSpec::new("x", DType::F32, &[-1, FEATURES as i64]), InputSpec::new("y", DType::F32, &[-1, 1])]
}

/// relu(fc0(x)) · w1, mean squared error; SGD with momentum (tests/towers.rs's model).
fn model() -> Model<'static> {
    let m = Model::new(&signature(), |tower, inputs| -> tptrain::Result<()> {
        let relu = LayerOptions::default().activation(Activation::Relu);
        let h = tower.fc("fc0", &inputs[0], HIDDEN, &relu)?;
        let w = tower.variable("w1", &[HIDDEN, 1], &VariableOptions::default())?;
        let cost = nn::mse(&h.matmul(&w)?, &inputs[1])?;
        tower.set_cost(&cost)
    })
    .unwrap();
    let o = Optimizer::new("sgd").unwrap();
    o.set("learning_rate", 0.05).unwrap();
    o.set("momentum", 0.9).unwrap();
    m.set_optimizer(&o).unwrap();
    m
}

/// Builds `m` and gives it initial values of its own for each `rank`
/// (no random numbers: the two ranks' threads would race for the generator).
fn initialise(m: &Model<'_>, rank: usize) {
    m.build().unwrap();
    for (v, name) in m.variable_names().unwrap().iter().enumerate() {
        let shape = m.variable(name).unwrap().shape();
        let n: i64 = shape.iter().product();
        let values: Vec<f32> =
            (0..n).map(|i| (0.3 * ((7 * i + 3 * v as i64 + 1) as f64 * (1.0 + rank as f64)).sin()) as f32).collect();
        m.set_variable(name, &Tensor::from_vec(values, &shape).unwrap()).unwrap();
    }
}

/// ROWS rows in order, in batches of `batch`.
fn data(batch: i64) -> DataFlow<'static> {
    let mut xs = vec![0f32; ROWS * FEATURES];
    let mut ys = vec![0f32; ROWS];
    for i in 0..ROWS {
        let mut t = 0.0;
        for j in 0..FEATURES {
            xs[i * FEATURES + j] = (0.37 * i as f64 + 1.3 * j as f64).sin() as f32;
            t += (j + 1) as f64 * xs[i * FEATURES + j] as f64;
        }
        ys[i] = (0.5 * t + 0.1 * (0.11 * i as f64).cos()) as f32;
    }
    let x = Tensor::from_vec(xs, &[ROWS as i64, FEATURES as i64]).unwrap();
    let y = Tensor::from_vec(ys, &[ROWS as i64, 1]).unwrap();
    DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap().batch(batch, Remainder::Drop).unwrap()
}

fn quiet(steps: Option<i64>) -> TrainerOptions {
    TrainerOptions {
        max_epoch: EPOCHS,
        steps_per_epoch: steps,
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        default_monitors: false,
        ..Default::default()
    }
}

/// A port nobody listens on now (bound, then freed).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Rank `rank` of a job of two whose rank 0 listens on `port`.
fn member(port: u16, rank: usize) -> Distributed {
    Distributed::from_env().master("127.0.0.1", port).membership(rank, WORLD).timeout(Duration::from_secs(20))
}

/// Every variable's name and values.
type Variables = Vec<(String, Vec<f32>)>;

/// The values' bits, to compare bit for bit.
fn bits(v: &Variables) -> Vec<(&str, Vec<u32>)> {
    v.iter().map(|(n, x)| (n.as_str(), x.iter().map(|f| f.to_bits()).collect())).collect()
}

fn variables(m: &Model<'_>) -> Variables {
    let names = m.variable_names().unwrap();
    assert_eq!(names.len(), 3, "{names:?}"); // fc0/W, fc0/b, w1
    names.into_iter().map(|n| (n.clone(), m.variable(&n).unwrap().to_vec::<f32>().unwrap())).collect()
}

/// How a rank joins its job.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// `TrainConfig::distributed`.
    Config,
    /// `Trainer::set_distributed`, then `Trainer::set_model`.
    Method,
}

/// What a rank ends with.
#[derive(Debug)]
struct Trained {
    rank: usize,
    world_size: usize,
    initial: Variables,
    variables: Variables,
    cost: f64,
}

/// One rank: its own model from its own initial values, batches of 4,
/// STEPS x EPOCHS steps.
fn rank_main(distributed: Distributed, rank: usize, path: Path) -> tptrain::Result<Trained> {
    let m = model();
    initialise(&m, rank);
    let initial = variables(&m);
    let df = data(4);
    let mut trainer = match path {
        Path::Config => Trainer::from_config(TrainConfig {
            options: Some(quiet(Some(STEPS))),
            distributed: Some(distributed),
            ..TrainConfig::from_dataflow(&m, &df)
        })?,
        Path::Method => {
            let mut t = Trainer::new(&quiet(Some(STEPS)))?;
            t.set_distributed(&distributed)?;
            t.set_model(&m, Input::from_dataflow(&df, &InputOptions::default())?)?;
            t
        }
    };
    let (joined_rank, world_size) = (trainer.rank()?, trainer.world_size()?);
    assert_eq!(trainer.run()?, RunOutcome::Finished);
    assert_eq!(trainer.global_step(), STEPS * EPOCHS);
    let cost = trainer.output_scalar("cost")?;
    drop(trainer);
    Ok(Trained { rank: joined_rank, world_size, initial, variables: variables(&m), cost })
}

/// Runs a job of two ranks on two threads; each rank's options come from
/// `options(port, rank)`.
fn job(path: Path, options: impl Fn(u16, usize) -> Distributed) -> Vec<Trained> {
    let port = free_port();
    let handles: Vec<_> = (0..WORLD)
        .map(|rank| {
            let distributed = options(port, rank);
            thread::Builder::new()
                .name(format!("rank{rank}"))
                .spawn(move || rank_main(distributed, rank, path))
                .unwrap()
        })
        .collect();
    handles
        .into_iter()
        .enumerate()
        .map(|(rank, h)| h.join().unwrap().unwrap_or_else(|e| panic!("{path:?}: rank {rank}: {e}")))
        .collect()
}

/// One process with two replicated towers, from rank 0's initial values.
fn two_towers() -> Variables {
    let m = model();
    initialise(&m, 0);
    let df = data(4);
    let mut t = Trainer::new(&quiet(Some(STEPS))).unwrap();
    assert_eq!((t.rank().unwrap(), t.world_size().unwrap()), (0, 1)); // not distributed
    t.set_towers(&m, Input::from_dataflow(&df, &InputOptions::default()).unwrap(), &Towers::replicated(2)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    drop(t);
    variables(&m)
}

// ------------------------------------------------------------ two ranks

#[test]
fn two_ranks_end_bit_identical_to_two_towers() {
    let reference = two_towers();
    for path in [Path::Method, Path::Config] {
        let ranks = job(path, member);
        for (r, trained) in ranks.iter().enumerate() {
            assert_eq!((trained.rank, trained.world_size), (r, WORLD), "{path:?}");
        }
        let (r0, r1) = (&ranks[0], &ranks[1]);
        // Rank 1 started elsewhere: rank 0's variables reached it.
        assert_ne!(r0.initial, r1.initial, "{path:?}");
        assert_eq!(bits(&r0.variables), bits(&r1.variables), "{path:?}: the ranks' variables differ");
        assert_ne!(r0.variables, r0.initial, "{path:?}: nothing trained");
        assert_eq!(bits(&r0.variables), bits(&reference), "{path:?}: 2 ranks differ from 1 process with 2 towers");
        // Each rank reports its own cost (the default).
        assert!(r0.cost.is_finite() && r1.cost.is_finite());
        assert_ne!(r0.cost, r1.cost, "{path:?}: the ranks took the same batch");
    }
}

#[test]
fn averaged_scalars_are_the_same_on_every_rank() {
    let ranks = job(Path::Config, |port, rank| member(port, rank).average_scalars(true));
    assert_eq!(bits(&ranks[0].variables), bits(&ranks[1].variables));
    assert_eq!(ranks[0].cost.to_bits(), ranks[1].cost.to_bits());
}

// ------------------------------------------------------------ errors

/// An input whose feed closure counts its drop.
fn counted_input(drops: &Arc<AtomicUsize>) -> Input<'static> {
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let guard = Guard(Arc::clone(drops));
    Input::from_feed(move |_| -> tptrain::Result<Option<Vec<Tensor>>> {
        let _keep = &guard;
        Ok(None)
    })
    .unwrap()
}

#[test]
fn bad_options_are_errors_naming_the_option() {
    // Refused before any rendezvous: nobody listens on the port.
    let port = free_port();
    let at = |rank, world_size| Distributed::from_env().master("127.0.0.1", port).membership(rank, world_size);
    let cases: Vec<(Distributed, &str)> = vec![
        (at(5, 2), "rank is 5: it must be in [0, 1] (world_size is 2)"),
        (at(2, 2), "rank is 2"),
        (at(0, 0), "world_size is 0"),
        (at(usize::MAX, 2), "rank is 18446744073709551615"),
        (at(1, 2).local_rank(2), "local_rank is 2: it must be in [0, rank]"),
        (Distributed::from_env().local_rank(1), "local_rank is 1 without membership"),
        (at(0, 2).timeout(Duration::ZERO), "the timeout is 0"),
        (at(0, 2).timeout(Duration::from_secs(200_000)), "timeout_ms is 200000000"),
        (Distributed::from_env().master("local\0host", port), "the master address contains a NUL byte"),
    ];
    let m = model();
    let drops = Arc::new(AtomicUsize::new(0));
    for (i, (distributed, text)) in cases.into_iter().enumerate() {
        if usize::BITS < 64 && text.contains("18446744073709551615") {
            continue;
        }
        // Trainer::set_distributed: refused, and the trainer still trains alone.
        let mut t = Trainer::new(&quiet(Some(1))).unwrap();
        let e = t.set_distributed(&distributed).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{distributed:?}: {e}");
        assert!(e.message().contains(text), "{distributed:?}: {e}");
        assert_eq!((t.rank().unwrap(), t.world_size().unwrap()), (0, 1));
        // TrainConfig::distributed: refused, and the input dropped.
        let before = drops.load(Ordering::SeqCst);
        let e = Trainer::from_config(TrainConfig {
            options: Some(quiet(Some(1))),
            distributed: Some(distributed.clone()),
            ..TrainConfig::new(&m, counted_input(&drops))
        })
        .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{distributed:?}: {e}");
        assert!(e.message().contains(text), "{distributed:?}: {e}");
        assert_eq!(drops.load(Ordering::SeqCst), before + 1, "case {i}: the input was not dropped");
    }
    // Without the launcher's variables, the first missing one is named.
    if std::env::var_os("MASTER_ADDR").is_none() {
        let mut t = Trainer::new(&quiet(Some(1))).unwrap();
        let e = t.set_distributed(&Distributed::from_env()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("MASTER_ADDR"), "{e}");
    }
}

#[test]
fn joining_after_the_model_was_set_is_a_state_error() {
    let m = model();
    let drops = Arc::new(AtomicUsize::new(0));
    let mut t = Trainer::new(&quiet(Some(1))).unwrap();
    t.set_model(&m, counted_input(&drops)).unwrap();
    // Refused before it looks at the options or the environment.
    let e = t.set_distributed(&member(free_port(), 0)).unwrap_err();
    assert_eq!(e.code(), Code::State, "{e}");
    assert!(e.message().contains("call tpt_trainer_set_distributed before"), "{e}");
    assert_eq!((t.rank().unwrap(), t.world_size().unwrap()), (0, 1));
    // The trainer is unharmed: it still runs, alone.
    assert_eq!(t.run().unwrap().stop_reason(), Some(tptrain::END_OF_DATA));
    let e = t.set_distributed(&Distributed::from_env()).unwrap_err();
    assert_eq!(e.code(), Code::State, "{e}");
}

#[test]
fn a_rank_alone_times_out_naming_the_address() {
    // Rank 1 of 2 with no rank 0 to meet.
    let port = free_port();
    let lonely = Distributed::from_env().master("127.0.0.1", port).membership(1, 2).timeout(Duration::from_secs(1));
    let mut t = Trainer::new(&quiet(Some(1))).unwrap();
    let started = Instant::now();
    let e = t.set_distributed(&lonely).unwrap_err();
    assert_eq!(e.code(), Code::Backend, "{e}");
    assert!(e.message().contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    assert_eq!((t.rank().unwrap(), t.world_size().unwrap()), (0, 1));
}

#[test]
fn distributed_defaults_to_the_c_defaults() {
    assert_eq!(Distributed::from_env(), Distributed::default());
    assert_eq!(Distributed::default().shard(true).average_scalars(false), Distributed::default());
    assert_ne!(Distributed::default().shard(false), Distributed::default());
    assert_ne!(Distributed::default().average_scalars(true), Distributed::default());
    let c = tptrain::sys::TPT_DISTRIBUTED_OPTIONS_INIT;
    assert_eq!((c.version, c.shard, c.average_scalars, c.timeout_ms), (1, 1, 0, 0));
    let d = member(29500, 1);
    assert!(
        format!("{d:?}").starts_with("Distributed { master: Some((\"127.0.0.1\", 29500)), membership: Some((1, 2))"),
        "{d:?}"
    );
    let (m, df) = (model(), data(4));
    let config = TrainConfig { distributed: Some(d), ..TrainConfig::from_dataflow(&m, &df) };
    assert!(format!("{config:?}").contains("distributed: Some(Distributed {"), "{config:?}");
}

// ------------------------------------------------------------ a GAN

/// A tiny GAN on the same data: G maps y (as the noise) to FEATURES values,
/// D is linear, applied to the real x and to G's output under a reuse
/// scope; tensorpack's losses (sigmoid cross-entropies, as softplus).
fn gan_model() -> Model<'static> {
    fn sigmoid_ce(logits: &Tensor, sign: f64) -> tptrain::Result<Tensor> {
        tptrain::ops::call1("softplus", &[tptrain::ops::Arg::Tensor(&(logits * sign)?)])?.mean()
    }
    let m = Model::new(&signature(), |tower, inputs| -> tptrain::Result<()> {
        let plain = LayerOptions::default();
        let fake = tower.scope("gen", |t| t.fc("fc", &inputs[1], FEATURES as i64, &plain))?;
        let real_logit = tower.reuse_scope("discrim", |t| t.fc("fc", &inputs[0], 1, &plain))?;
        let fake_logit = tower.reuse_scope("discrim", |t| t.fc("fc", &fake, 1, &plain))?;
        let d_loss = ((&sigmoid_ce(&real_logit, -1.0)? + &sigmoid_ce(&fake_logit, 1.0)?)? * 0.5)?;
        tower.set_output("d_loss", &d_loss)?;
        tower.set_output("g_loss", &sigmoid_ce(&fake_logit, -1.0)?)
    })
    .unwrap();
    let o = Optimizer::new("sgd").unwrap();
    o.set("learning_rate", 0.05).unwrap();
    o.set("momentum", 0.9).unwrap();
    m.set_optimizer(&o).unwrap();
    m
}

fn gan_variables(m: &Model<'_>) -> Variables {
    let names = m.variable_names().unwrap();
    assert_eq!(names.len(), 4, "{names:?}"); // gen/fc/{W,b}, discrim/fc/{W,b}
    names.into_iter().map(|n| (n.clone(), m.variable(&n).unwrap().to_vec::<f32>().unwrap())).collect()
}

/// tensorpack's MultiGPUGANTrainer across processes: two ranks of the
/// GANTrainer end bit-identical to each other and to one process with two
/// replicated towers (each op's gradients averaged over every tower of the
/// job).
#[test]
fn a_gan_on_two_ranks_equals_two_towers() {
    let reference = {
        let m = gan_model();
        initialise(&m, 0);
        let df = data(4);
        let mut t = Trainer::new(&quiet(Some(STEPS))).unwrap();
        let input = Input::from_dataflow(&df, &InputOptions::default()).unwrap();
        t.set_gan(&m, input, &tptrain::Gan::new().towers(&Towers::replicated(2))).unwrap();
        assert_eq!(t.run().unwrap(), RunOutcome::Finished);
        drop(t);
        gan_variables(&m)
    };
    let port = free_port();
    let handles: Vec<_> = (0..WORLD)
        .map(|rank| {
            thread::spawn(move || -> tptrain::Result<(Variables, Variables)> {
                let m = gan_model();
                initialise(&m, rank);
                let initial = gan_variables(&m);
                let df = data(4);
                let mut t = Trainer::new(&quiet(Some(STEPS)))?;
                t.set_distributed(&member(port, rank))?;
                t.set_gan(&m, Input::from_dataflow(&df, &InputOptions::default())?, &tptrain::Gan::new())?;
                assert_eq!(t.run()?, RunOutcome::Finished);
                assert_eq!(t.global_step(), STEPS * EPOCHS);
                drop(t);
                Ok((initial, gan_variables(&m)))
            })
        })
        .collect();
    let ranks: Vec<_> = handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect();
    assert_ne!(ranks[0].0, ranks[1].0); // rank 1 started elsewhere
    assert_ne!(ranks[0].1, ranks[0].0, "nothing trained");
    assert_eq!(bits(&ranks[0].1), bits(&ranks[1].1), "the ranks' variables differ");
    for ((name, got), (_, want)) in ranks[0].1.iter().zip(&reference) {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-6 * (1.0 + w.abs()), "{name}: 2 ranks {g}, 2 towers {w}");
        }
    }
}
