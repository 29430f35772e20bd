//! Towers from Rust, on CPU towers: 2 replicated, parameter-server and
//! async towers fed batches of 4 end with the variables of 1 tower fed the
//! same rows in batches of 8; the reduce overlapped with the backward passes
//! or after them, in buckets of 1 MiB or 16 bytes, gives the same variables
//! bit for bit; the tower closure runs for towers 0 and 1, on
//! two threads; an error, a stop or a panic in tower 1 ends the run; bad
//! towers are errors that still drop the input. The C twin is
//! tests/c/test_towers.c.

use std::collections::BTreeSet;
use std::error::Error as _;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use tptrain::{
    manual_seed, nn, Activation, Code, DType, DataFlow, Input, InputOptions, InputSpec, LayerOptions, Model, Optimizer,
    Order, Progress, Remainder, RunOutcome, Strategy, Tensor, Towers, TrainConfig, Trainer, TrainerOptions,
    VariableOptions,
};

const ROWS: usize = 320;
const FEATURES: usize = 4;
const HIDDEN: i64 = 8;
const MAX_TOWERS: usize = 4;

/// What the tower closure does besides computing the cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Train,
    /// Returns a `Refused` error in this tower at this call.
    Fail {
        tower: i32,
        call: usize,
    },
    /// `Tower::stop` in this tower at this call.
    Stop {
        tower: i32,
        call: usize,
    },
    /// Panics in this tower at this call.
    Panic {
        tower: i32,
        call: usize,
    },
}

/// What the tower closure saw, per tower.
#[derive(Default)]
struct Probe {
    act: Mutex<Option<Act>>,
    calls: [AtomicUsize; MAX_TOWERS],
    /// Per tower, the sum of w1 at each training call.
    seen: Mutex<Vec<Vec<f64>>>,
    /// (index, name, device, thread) of each training call.
    who: Mutex<BTreeSet<(i32, String, String, ThreadIdKey)>>,
}

/// A `ThreadId` that sorts (by its `Debug` text).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ThreadIdKey(String);

impl From<ThreadId> for ThreadIdKey {
    fn from(id: ThreadId) -> ThreadIdKey {
        ThreadIdKey(format!("{id:?}"))
    }
}

impl Probe {
    fn new(act: Act) -> Arc<Probe> {
        let p = Probe::default();
        *p.act.lock().unwrap() = Some(act);
        p.seen.lock().unwrap().resize(MAX_TOWERS, Vec::new());
        Arc::new(p)
    }
    fn calls(&self, tower: usize) -> usize {
        self.calls[tower].load(Ordering::SeqCst)
    }
}

/// The error of a tower that refuses, a foreign error type.
#[derive(Debug)]
struct Refused {
    tower: i32,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tower {} refused", self.tower)
    }
}

impl std::error::Error for Refused {}

fn signature() -> Vec<InputSpec> {
    vec![InputSpec::new("x", DType::F32, &[-1, FEATURES as i64]), InputSpec::new("y", DType::F32, &[-1, 1])]
}

/// The optimizer's hyper-parameters, and the weight of an L2 term over
/// `fc0/W` and `w1` added to the cost (`Tower::regularize_l2`; 0: none).
#[derive(Debug, Clone, Copy)]
struct Sgd {
    learning_rate: f64,
    momentum: f64,
    l2: f64,
}

const PLAIN: Sgd = Sgd { learning_rate: 0.05, momentum: 0.0, l2: 0.0 };
const MOMENTUM: Sgd = Sgd { learning_rate: 0.05, momentum: 0.9, l2: 0.0 };

/// relu(fc0(x)) · w1, mean squared error; SGD.
fn model(probe: &Arc<Probe>, sgd: Sgd) -> Model<'static> {
    let probe = Arc::clone(probe);
    let m = Model::new(&signature(), move |tower, inputs| {
        let relu = LayerOptions::default().activation(Activation::Relu);
        let h = tower.fc("fc0", &inputs[0], HIDDEN, &relu)?;
        let w = tower.variable("w1", &[HIDDEN, 1], &VariableOptions::default())?;
        let mut cost = nn::mse(&h.matmul(&w)?, &inputs[1])?;
        if sgd.l2 > 0.0 {
            cost = cost.add(&tower.regularize_l2("W$|w1$", sgd.l2)?)?;
        }
        tower.set_cost(&cost)?;
        if tower.is_building() || !tower.is_training() {
            return Ok(());
        }
        let k = tower.index();
        assert!((0..MAX_TOWERS as i32).contains(&k), "tower index {k}");
        let call = probe.calls[k as usize].fetch_add(1, Ordering::SeqCst);
        probe.who.lock().unwrap().insert((k, tower.name(), tower.device(), std::thread::current().id().into()));
        let act = *probe.act.lock().unwrap();
        match act {
            Some(Act::Fail { tower: t, call: c }) if (t, c) == (k, call) => {
                return Err(tptrain::Error::wrap(Refused { tower: k }))
            }
            Some(Act::Stop { tower: t, call: c }) if (t, c) == (k, call) => {
                tower.stop(format!("tower {k} asked to stop"));
                return Ok(());
            }
            Some(Act::Panic { tower: t, call: c }) if (t, c) == (k, call) => panic!("tower {k} panicked"),
            _ => {}
        }
        let sum: f64 = w.to_vec::<f32>()?.iter().map(|&v| v as f64).sum();
        probe.seen.lock().unwrap()[k as usize].push(sum);
        Ok(())
    })
    .unwrap();
    let o = Optimizer::new("sgd").unwrap();
    o.set("learning_rate", sgd.learning_rate).unwrap();
    o.set("momentum", sgd.momentum).unwrap();
    m.set_optimizer(&o).unwrap();
    m
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
        max_epoch: 1,
        steps_per_epoch: steps,
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        default_monitors: false,
        ..Default::default()
    }
}

/// How a run gets its towers.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// `TrainConfig::towers` (`None`: the simple trainer).
    Config,
    /// `Trainer::set_towers` (`None`: `Trainer::set_model`).
    Method,
}

/// Trains a fresh model (seed 3) for `steps` steps on batches of `batch`.
fn train(
    probe: &Arc<Probe>,
    sgd: Sgd,
    towers: Option<Towers>,
    path: Path,
    batch: i64,
    steps: i64,
) -> (Model<'static>, tptrain::Result<RunOutcome>) {
    manual_seed(3).unwrap();
    let m = model(probe, sgd);
    let df = data(batch);
    let mut trainer = match path {
        Path::Config => Trainer::from_config(TrainConfig {
            options: Some(quiet(Some(steps))),
            towers,
            ..TrainConfig::from_dataflow(&m, &df)
        })
        .unwrap(),
        Path::Method => {
            let mut t = Trainer::new(&quiet(Some(steps))).unwrap();
            let input = Input::from_dataflow(&df, &InputOptions::default()).unwrap();
            match towers {
                Some(towers) => t.set_towers(&m, input, &towers).unwrap(),
                None => t.set_model(&m, input).unwrap(),
            }
            t
        }
    };
    let outcome = trainer.run();
    drop(trainer);
    (m, outcome)
}

/// max |a - b| / max |b| over every variable.
fn distance(a: &Model<'_>, b: &Model<'_>) -> f64 {
    let names = b.variable_names().unwrap();
    assert_eq!(a.variable_names().unwrap(), names);
    assert_eq!(names.len(), 3, "{names:?}"); // fc0/W, fc0/b, w1
    let mut worst = 0f64;
    for name in &names {
        let x = a.variable(name).unwrap().to_vec::<f32>().unwrap();
        let y = b.variable(name).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(x.len(), y.len(), "{name}");
        let diff = x.iter().zip(&y).map(|(p, q)| (*p as f64 - *q as f64).abs()).fold(0.0, f64::max);
        let scale = y.iter().map(|q| (*q as f64).abs()).fold(1e-12, f64::max);
        worst = worst.max(diff / scale);
    }
    worst
}

// ------------------------------------------------------------ equivalence

#[test]
fn two_towers_of_four_rows_equal_one_tower_of_eight() {
    const STEPS: i64 = 20;
    for sgd in [PLAIN, MOMENTUM] {
        let (reference, outcome) = train(&Probe::new(Act::Train), sgd, None, Path::Config, 8, STEPS);
        assert_eq!(outcome.unwrap(), RunOutcome::Finished);
        let runs = [
            (Towers::replicated(2), Path::Config),
            (Towers::parameter_server(2), Path::Method),
            (Towers::new(Strategy::Replicated, 2).devices(&["cpu", "cpu"]), Path::Method),
            (Towers::parameter_server(2).intra_op_threads(1), Path::Config),
        ];
        for (towers, path) in runs {
            let probe = Probe::new(Act::Train);
            let what = format!("{towers:?} through {path:?}, {sgd:?}");
            let (m, outcome) = train(&probe, sgd, Some(towers), path, 4, STEPS);
            assert_eq!(outcome.unwrap(), RunOutcome::Finished, "{what}");
            let d = distance(&m, &reference);
            assert!(d <= 1e-5, "{what}: relative distance {d:e} from 1 tower");
            // Every tower ran every step and saw the same weights.
            assert_eq!((probe.calls(0), probe.calls(1), probe.calls(2)), (STEPS as usize, STEPS as usize, 0), "{what}");
            let seen = probe.seen.lock().unwrap();
            assert_eq!(seen[0], seen[1], "{what}: the towers saw different weights");
        }
    }
}

#[test]
fn an_l2_term_reaches_every_towers_update() {
    // The L2 term of Tower::regularize_l2 is computed from each tower's own
    // variables, so its gradient is in every tower's update: the towers equal
    // one tower on the concatenated batches.
    let sgd = Sgd { l2: 0.05, ..MOMENTUM };
    let (reference, outcome) = train(&Probe::new(Act::Train), sgd, None, Path::Config, 8, 20);
    assert_eq!(outcome.unwrap(), RunOutcome::Finished);
    for towers in [Towers::replicated(2), Towers::parameter_server(2)] {
        let what = format!("{towers:?}");
        let (m, outcome) = train(&Probe::new(Act::Train), sgd, Some(towers), Path::Config, 4, 20);
        assert_eq!(outcome.unwrap(), RunOutcome::Finished, "{what}");
        let d = distance(&m, &reference);
        assert!(d <= 1e-5, "{what} with an L2 term: relative distance {d:e} from 1 tower");
    }
}

#[test]
fn average_scalars_reports_the_towers_mean_cost() {
    // At the first step every tower has the same weights: the towers' mean
    // cost is the cost of one tower fed their batches concatenated.
    let first_cost = |towers: Option<Towers>, batch: i64| -> f64 {
        manual_seed(3).unwrap();
        let m = model(&Probe::new(Act::Train), PLAIN);
        let df = data(batch);
        let mut trainer = Trainer::from_config(TrainConfig {
            options: Some(quiet(Some(1))),
            towers,
            ..TrainConfig::from_dataflow(&m, &df)
        })
        .unwrap();
        assert_eq!(trainer.run().unwrap(), RunOutcome::Finished);
        trainer.output_scalar("cost").unwrap()
    };
    let one = first_cost(None, 8);
    let tower0 = first_cost(Some(Towers::replicated(2)), 4);
    let mean = first_cost(Some(Towers::replicated(2).average_scalars(true)), 4);
    assert!((mean - one).abs() <= 1e-6 * one.abs(), "the towers' mean {mean} is not one tower's {one}");
    assert!((tower0 - one).abs() > 1e-6 * one.abs(), "tower 0's {tower0} equals the mean: the batches are alike");
}

#[test]
fn overlap_and_bucket_size_leave_the_variables_bit_identical() {
    // The reduce overlapped with the backward passes in buckets of 1 MiB
    // (the default: every variable in one bucket), overlapped in buckets of
    // 16 bytes (every variable a bucket of its own or more), and after the
    // backward passes: the same sums in the same order, bit for bit.
    const STEPS: i64 = 20;
    for count in [2usize, 4] {
        let (reference, outcome) =
            train(&Probe::new(Act::Train), MOMENTUM, None, Path::Method, 4 * count as i64, STEPS);
        assert_eq!(outcome.unwrap(), RunOutcome::Finished);
        for strategy in [Strategy::Replicated, Strategy::ParameterServer] {
            let default = Towers::new(strategy, count);
            let (first, outcome) =
                train(&Probe::new(Act::Train), MOMENTUM, Some(default.clone()), Path::Config, 4, STEPS);
            assert_eq!(outcome.unwrap(), RunOutcome::Finished);
            let d = distance(&first, &reference);
            // Close to 1 tower of the whole batch, but not the same run by accident.
            assert!(d <= 1e-5 && d > 0.0, "{default:?}: relative distance {d:e} from 1 tower");
            let runs = [
                (default.clone().overlap(false), Path::Config),
                (default.clone().overlap(false), Path::Method),
                (default.clone().bucket_bytes(16), Path::Config),
                (default.clone().bucket_bytes(16), Path::Method),
                (default.clone().overlap(false).bucket_bytes(16), Path::Method),
                (default.clone().overlap(true).bucket_bytes(1 << 20), Path::Config),
            ];
            for (towers, path) in runs {
                let probe = Probe::new(Act::Train);
                let what = format!("{towers:?} through {path:?}");
                let (m, outcome) = train(&probe, MOMENTUM, Some(towers), path, 4, STEPS);
                assert_eq!(outcome.unwrap(), RunOutcome::Finished, "{what}");
                let d = distance(&m, &first);
                assert!(d == 0.0, "{what}: relative distance {d:e} from the default towers, want 0");
                // Every tower ran every step and saw the same weights.
                for k in 0..count {
                    assert_eq!(probe.calls(k), STEPS as usize, "{what}: tower {k}");
                }
                let seen = probe.seen.lock().unwrap();
                for k in 1..count {
                    assert_eq!(seen[k], seen[0], "{what}: towers {k} and 0 saw different weights");
                }
            }
        }
    }
}

#[test]
fn summed_gradients_are_a_learning_rate_times_the_towers() {
    let double = Sgd { learning_rate: 2.0 * MOMENTUM.learning_rate, ..MOMENTUM };
    let (reference, outcome) = train(&Probe::new(Act::Train), double, None, Path::Method, 8, 20);
    assert_eq!(outcome.unwrap(), RunOutcome::Finished);
    let (summed, outcome) =
        train(&Probe::new(Act::Train), MOMENTUM, Some(Towers::replicated(2).sum_gradients()), Path::Config, 4, 20);
    assert_eq!(outcome.unwrap(), RunOutcome::Finished);
    let d = distance(&summed, &reference);
    assert!(d <= 1e-5, "summed gradients: relative distance {d:e} from 1 tower at twice the learning rate");
    let (averaged, _) = train(&Probe::new(Act::Train), MOMENTUM, Some(Towers::replicated(2)), Path::Config, 4, 20);
    assert!(distance(&averaged, &reference) > 1e-3);
}

#[test]
fn async_towers_with_plain_sgd_equal_one_tower() {
    // Each tower's gradient, computed at the step's weights, times 1/2,
    // applied on its own: with plain SGD, the averaged update.
    let (reference, outcome) = train(&Probe::new(Act::Train), PLAIN, None, Path::Method, 8, 20);
    assert_eq!(outcome.unwrap(), RunOutcome::Finished);
    let probe = Probe::new(Act::Train);
    let (m, outcome) = train(&probe, PLAIN, Some(Towers::asynchronous(2)), Path::Method, 4, 20);
    assert_eq!(outcome.unwrap(), RunOutcome::Finished);
    let d = distance(&m, &reference);
    assert!(d <= 1e-5, "async: relative distance {d:e} from 1 tower");
    assert_eq!((probe.calls(0), probe.calls(1)), (20, 20));
    // And one async tower is the simple trainer, bit for bit.
    let (reference, _) = train(&Probe::new(Act::Train), MOMENTUM, None, Path::Method, 4, 20);
    let (one, outcome) = train(&Probe::new(Act::Train), MOMENTUM, Some(Towers::asynchronous(1)), Path::Config, 4, 20);
    assert_eq!(outcome.unwrap(), RunOutcome::Finished);
    assert_eq!(distance(&one, &reference), 0.0);
}

// ------------------------------------------------------------ towers and threads

#[test]
fn the_tower_closure_runs_for_towers_zero_and_one_on_two_threads() {
    let probe = Probe::new(Act::Train);
    manual_seed(3).unwrap();
    let m = model(&probe, MOMENTUM);
    let df = data(4);
    // No steps_per_epoch: 80 batches / 2 towers.
    let mut t = Trainer::new(&quiet(None)).unwrap();
    t.set_towers(&m, Input::from_dataflow(&df, &InputOptions::default()).unwrap(), &Towers::default()).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(t.global_step(), 40);
    assert!(t.scalar_latest("cost").unwrap().value.is_finite());
    assert_eq!((probe.calls(0), probe.calls(1)), (40, 40));
    let who = probe.who.lock().unwrap();
    let towers: BTreeSet<(i32, String, String)> = who.iter().map(|(k, n, d, _)| (*k, n.clone(), d.clone())).collect();
    assert_eq!(towers, [(0, "tower0".to_owned(), "cpu".to_owned()), (1, "tower1".to_owned(), "cpu".to_owned())].into());
    // Tower 0 on the thread that runs the trainer, tower 1 on one of its own.
    let threads = |k: i32| who.iter().filter(|w| w.0 == k).map(|w| w.3.clone()).collect::<BTreeSet<_>>();
    let here: ThreadIdKey = std::thread::current().id().into();
    assert_eq!(threads(0), [here.clone()].into());
    assert_eq!(threads(1).len(), 1);
    assert!(!threads(1).contains(&here));
}

// ------------------------------------------------------------ errors in a tower

#[test]
fn an_error_in_tower_one_ends_the_run_with_that_error() {
    for path in [Path::Config, Path::Method] {
        let probe = Probe::new(Act::Fail { tower: 1, call: 5 });
        let (_m, outcome) = train(&probe, MOMENTUM, Some(Towers::replicated(2)), path, 4, 20);
        let e = outcome.unwrap_err();
        assert_eq!(e.code(), Code::Callback, "{e}");
        assert_eq!(e.message(), "tower 1 refused");
        let source = e.source().expect("the closure's error as the source");
        assert_eq!(source.downcast_ref::<Refused>().map(|r| r.tower), Some(1));
        // The failing step's other tower finished its call; no step after it.
        assert_eq!((probe.calls(0), probe.calls(1)), (6, 6));
    }
}

#[test]
fn a_stop_in_tower_one_ends_the_run_gracefully() {
    let probe = Probe::new(Act::Stop { tower: 1, call: 3 });
    let (_m, outcome) = train(&probe, MOMENTUM, Some(Towers::parameter_server(2)), Path::Method, 4, 20);
    assert_eq!(outcome.unwrap(), RunOutcome::Stopped("tower 1 asked to stop".into()));
    assert_eq!(probe.calls(0), 4);
}

#[test]
fn panics_in_towers_end_the_run() {
    // Tower 1 runs on a thread of the library's: its message travels.
    let probe = Probe::new(Act::Panic { tower: 1, call: 2 });
    let (_m, outcome) = train(&probe, MOMENTUM, Some(Towers::replicated(2)), Path::Method, 4, 20);
    let e = outcome.unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert!(e.message().contains("panic in the tower function: tower 1 panicked"), "{e}");
    // Tower 0 runs on this thread: run resumes the panic.
    let probe = Probe::new(Act::Panic { tower: 0, call: 2 });
    let payload = catch_unwind(AssertUnwindSafe(|| {
        let _ = train(&probe, MOMENTUM, Some(Towers::replicated(2)), Path::Method, 4, 20);
    }))
    .unwrap_err();
    assert_eq!(payload.downcast_ref::<String>().map(String::as_str), Some("tower 0 panicked"));
}

// ------------------------------------------------------------ bad towers

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
fn bad_towers_are_errors_and_the_input_is_dropped() {
    let probe = Probe::new(Act::Train);
    let m = model(&probe, PLAIN);
    let drops = Arc::new(AtomicUsize::new(0));
    let mut cases: Vec<(Towers, Code, &str)> = vec![
        (Towers::replicated(0), Code::InvalidArgument, "options->n_towers is 0"),
        (Towers::parameter_server(257), Code::InvalidArgument, "options->n_towers is 257"),
        (Towers::asynchronous(usize::MAX), Code::InvalidArgument, "the count must be in [1, 256]"),
        (Towers::replicated(2).devices(&["cpu"]), Code::InvalidArgument, "1 device names for 2 towers"),
        (Towers::replicated(2).devices(&["cpu", "toaster"]), Code::InvalidArgument, "devices[1] is \"toaster\""),
        (Towers::replicated(2).devices(&["cpu", "c\0pu"]), Code::InvalidArgument, "devices[1] contains a NUL byte"),
        (Towers::replicated(2).devices(&["cpu", "cuda:0"]), Code::Unsupported, "tower 1 is on cuda:0"),
        (Towers::replicated(2).intra_op_threads(5000), Code::InvalidArgument, "intra_op_threads is 5000"),
    ];
    if usize::BITS == 64 {
        // More than 2^40 bytes (a size that a 32-bit usize cannot hold).
        let bytes = (1u64 << 41) as usize;
        let towers = Towers::parameter_server(2).bucket_bytes(bytes);
        cases.push((towers, Code::InvalidArgument, "options->bucket_bytes is 2199023255552: it must be at most 2^40"));
    }
    for (i, (towers, code, text)) in cases.into_iter().enumerate() {
        // Trainer::set_towers
        let mut t = Trainer::new(&quiet(Some(1))).unwrap();
        let e = t.set_towers(&m, counted_input(&drops), &towers).unwrap_err();
        assert_eq!(e.code(), code, "{towers:?}: {e}");
        assert!(e.message().contains(text), "{towers:?}: {e}");
        assert_eq!(drops.load(Ordering::SeqCst), 2 * i + 1, "{towers:?}: the input was not dropped");
        // TrainConfig::towers
        let e = Trainer::from_config(TrainConfig {
            options: Some(quiet(Some(1))),
            towers: Some(towers.clone()),
            ..TrainConfig::new(&m, counted_input(&drops))
        })
        .unwrap_err();
        assert_eq!(e.code(), code, "{towers:?}: {e}");
        assert!(e.message().contains(text), "{towers:?}: {e}");
        assert_eq!(drops.load(Ordering::SeqCst), 2 * i + 2, "{towers:?}: the input was not dropped");
    }
    // The trainer still takes good towers after a refusal, and only before run.
    let mut t = Trainer::new(&quiet(Some(1))).unwrap();
    assert!(t.set_towers(&m, counted_input(&drops), &Towers::replicated(0)).is_err());
    t.set_towers(&m, counted_input(&drops), &Towers::replicated(2)).unwrap();
    let outcome = t.run().unwrap();
    assert_eq!(outcome.stop_reason(), Some(tptrain::END_OF_DATA));
    let e = t.set_towers(&m, counted_input(&drops), &Towers::replicated(2)).unwrap_err();
    assert_eq!(e.code(), Code::State, "{e}");
}

#[test]
fn towers_default_to_the_c_defaults() {
    let t = Towers::default();
    assert_eq!((t.strategy(), t.count()), (Strategy::Replicated, 2));
    assert_eq!(t, Towers::replicated(2));
    assert_ne!(Towers::replicated(2).sum_gradients(), Towers::replicated(2));
    // Reduced during the backward passes, buckets of the library's size (0: 1 MiB).
    assert_eq!(Towers::replicated(2).overlap(true).bucket_bytes(0), Towers::default());
    assert_ne!(Towers::replicated(2).overlap(false), Towers::default());
    assert_ne!(Towers::replicated(2).bucket_bytes(1 << 20), Towers::default());
    let c = tptrain::sys::TPT_TOWERS_OPTIONS_INIT;
    assert_eq!((c.version, c.overlap, c.bucket_bytes, c.average_scalars), (3, 1, 0, 0));
    assert!(format!("{t:?}").ends_with("overlap: true, bucket_bytes: 0, average_scalars: false }"), "{t:?}");
    assert_ne!(Towers::replicated(2).average_scalars(true), Towers::default());
    assert_eq!(Towers::new(Strategy::Async, 3), Towers::asynchronous(3));
    assert_eq!(Strategy::ParameterServer.to_raw(), tptrain::sys::TPT_STRATEGY_PARAMETER_SERVER);
    let (m, df) = (model(&Probe::new(Act::Train), PLAIN), data(4));
    let config = TrainConfig { towers: Some(Towers::parameter_server(2)), ..TrainConfig::from_dataflow(&m, &df) };
    assert!(format!("{config:?}").contains("towers: Some(Towers { strategy: ParameterServer, count: 2"), "{config:?}");
}
