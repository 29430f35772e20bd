//! The callback catalogue from Rust, each in a small training: inference
//! runners with custom inferencers, ScalarStats and ClassificationError
//! (checked against a hand count), and the data-parallel runner (the single
//! runner's numbers, on towers InferenceTower0..2); EarlyStopping and
//! TerminateOnNaN (their stop reasons); the hyper-parameter setters
//! (HyperParamFunc, StatMonitorParam, HumanHyperParam: the value before each
//! epoch, read back from the optimizer); the throughput and host memory trackers; the
//! step watchdog (Code::Timeout); put_image and the TensorBoard event file;
//! and the errors for bad arguments.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::error::Error as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::Duration;
use tptrain::{
    nn, Callback, CallbackBuilder, Code, DType, DataFlow, EarlyStopping, Error, Event, Events, Every, Flow,
    HostMemoryTracker, HumanHyperParam, HyperParamFunc, InferenceRunner, Inferencer, Input, InputSpec, IntoCallback,
    LayerOptions, LogdirAction, Model, Optimizer, Order, Progress, RecordKind, Remainder, Result, RunOutcome,
    StatMonitorParam, StepWatchdog, Tensor, TensorBoard, TerminateOnNaN, ThroughputTracker, Tower, Trainer,
    TrainerOptions,
};

// ------------------------------------------------------------ helpers

/// One test at a time: the leak check counts the process's tensor handles.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn quiet(epochs: i64, steps: i64) -> TrainerOptions {
    TrainerOptions {
        max_epoch: epochs,
        steps_per_epoch: Some(steps),
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        default_monitors: false,
        ..Default::default()
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpt-rust-catalogue-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A trainer whose steps are hooked steps with no work.
fn hooks_trainer<'a>(options: &TrainerOptions) -> Trainer<'a> {
    let mut t = Trainer::new(options).unwrap();
    t.set_run_step(|ctx| ctx.hooks_only()).unwrap();
    t
}

/// Puts `name` = values[epoch - 1] after each epoch.
fn put_each_epoch(name: &'static str, values: Vec<f64>) -> CallbackBuilder<'static> {
    Callback::on(Events::TRIGGER_EPOCH, move |ctx, _, _| {
        let i = (ctx.epoch_num() - 1) as usize;
        ctx.put_scalar(name, values[i.min(values.len() - 1)])?;
        Ok(Flow::Continue)
    })
    .name(name)
}

/// Notes the optimizer's learning rate before each epoch.
fn lr_before_each_epoch<'a>(optimizer: &'a Optimizer, seen: &Rc<RefCell<Vec<f64>>>) -> CallbackBuilder<'a> {
    let seen = Rc::clone(seen);
    Callback::on(Events::BEFORE_EPOCH, move |_, _, _| {
        seen.borrow_mut().push(optimizer.get("learning_rate")?);
        Ok(Flow::Continue)
    })
    .name("lr before each epoch")
}

fn values(t: &Trainer<'_>, name: &str) -> Vec<f64> {
    t.scalar_history(name).unwrap().iter().map(|s| s.value).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

// Ten rows of two "logits" and a label; the rows whose largest logit is not
// the label are wrong.
const LOGITS: [[f32; 2]; 10] = [
    [1.0, 0.0],
    [0.0, 1.0],
    [2.0, 1.0],
    [1.0, 3.0],
    [0.5, 0.2],
    [0.1, 0.9],
    [3.0, 2.0],
    [1.0, 1.5],
    [0.7, 0.3],
    [0.2, 0.4],
];
const LABELS: [i64; 10] = [0, 0, 0, 1, 1, 1, 0, 0, 1, 0];

fn hand_count_wrong() -> usize {
    LOGITS.iter().zip(LABELS).filter(|(row, label)| (if row[1] > row[0] { 1 } else { 0 }) != *label).count()
}

fn classification_data() -> (Tensor, Tensor) {
    let x: Vec<f32> = LOGITS.iter().flatten().copied().collect();
    (Tensor::from_vec(x, &[10, 2]).unwrap(), Tensor::from_slice(&LABELS, &[10]).unwrap())
}

/// A classifier whose outputs "wrong" and "miss" are computed from the input
/// rows themselves (so they do not change while it trains).
fn classifier<'a>() -> Model<'a> {
    classifier_with(|_| Ok(()))
}

/// The classifier, whose tower function first calls `note` with its tower.
fn classifier_with<'a>(note: impl Fn(&Tower) -> Result<()> + Send + Sync + 'a) -> Model<'a> {
    let model = Model::new(
        &[InputSpec::new("x", DType::F32, &[-1, 2]), InputSpec::new("y", DType::I64, &[-1])],
        move |tower, inputs| -> Result<()> {
            note(tower)?;
            let logits = tower.fc("fc", &inputs[0], 2, &LayerOptions::default())?;
            let cost = nn::softmax_cross_entropy(&logits, &inputs[1])?;
            tower.set_cost(&cost)?;
            tower.set_output("cost", &cost)?;
            let wrong = nn::wrong(&inputs[0], &inputs[1], 1)?;
            tower.set_output("wrong", &wrong)?;
            tower.set_output("miss", &wrong)
        },
    )
    .unwrap();
    let sgd = Optimizer::new("sgd").unwrap();
    sgd.set("learning_rate", 0.1).unwrap();
    model.set_optimizer(&sgd).unwrap();
    model
}

fn classifier_trainer<'a>(model: &Model<'a>, epochs: i64) -> Trainer<'a> {
    let (x, y) = classification_data();
    let mut t = Trainer::new(&quiet(epochs, 2)).unwrap();
    t.set_model(model, Input::from_tensors(&[&x, &y], 5, Some(1)).unwrap()).unwrap();
    t
}

/// The ten rows in batches of `batch` (the short last one kept).
fn validation(batch: i64) -> DataFlow<'static> {
    let (x, y) = classification_data();
    DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap().batch(batch, Remainder::Keep).unwrap()
}

// ------------------------------------------------------------ inference

#[test]
fn custom_inferencer_sees_each_batch_and_puts_its_scalar_in_after() {
    let _serial = serial();
    assert_eq!(hand_count_wrong(), 5);
    let model = classifier();
    let df = validation(4); // batches of 4, 4, 2
    let befores = Rc::new(Cell::new(0));
    let batches = Rc::new(RefCell::new(Vec::new()));
    let sum = Rc::new(Cell::new(0.0));
    let rows = Rc::new(Cell::new(0i64));
    let (b1, b2, s1, s2, s3, r1, r2, r3) = (
        befores.clone(),
        batches.clone(),
        sum.clone(),
        sum.clone(),
        sum.clone(),
        rows.clone(),
        rows.clone(),
        rows.clone(),
    );
    let custom = Inferencer::custom("wrong counter", &["wrong", "cost"], move |outputs, n| -> Result<()> {
        assert_eq!(outputs.len(), 2);
        assert_eq!(outputs[0].shape(), vec![n]);
        b2.borrow_mut().push(n);
        s1.set(s1.get() + outputs[0].to_dtype(DType::F64)?.to_vec::<f64>()?.iter().sum::<f64>());
        r1.set(r1.get() + n);
        Ok(())
    })
    .before(move || -> Result<()> {
        b1.set(b1.get() + 1);
        s2.set(0.0);
        r2.set(0);
        Ok(())
    })
    .after(move |ctx| -> Result<()> {
        ctx.put_scalar("custom_wrong", s3.get())?;
        ctx.put_scalar("custom_rows", r3.get() as f64)
    });
    let runner = InferenceRunner::new(&model, &df)
        .inferencer(custom)
        .inferencer(Inferencer::scalar_stats(&["cost"]).prefix("val"))
        .inferencer(Inferencer::scalar_stats(&["wrong"]).prefix(""))
        .inferencer(Inferencer::classification_error());
    assert!(format!("{runner:?}").contains("inferencers: 4"));
    let mut t = classifier_trainer(&model, 2);
    t.add_callback(runner).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);

    assert_eq!(befores.get(), 2, "one pass per epoch");
    assert_eq!(*batches.borrow(), vec![4, 4, 2, 4, 4, 2]);
    assert_eq!(values(&t, "custom_rows"), vec![10.0, 10.0]);
    assert_eq!(values(&t, "custom_wrong"), vec![5.0, 5.0]);
    // Over rows, not batches: (1 + 2 + 2) / 10, not (1/4 + 2/4 + 2/2) / 3.
    for v in values(&t, "wrong").into_iter().chain(values(&t, "validation_error")) {
        assert!(close(v, 0.5), "{v}");
    }
    assert_eq!(t.scalar_history("val_cost").unwrap().len(), 2);
    assert!(t.scalar_latest("val_cost").unwrap().value > 0.0);
    assert_eq!(t.scalar_latest("custom_rows").unwrap().global_step, 4);
}

#[test]
fn classification_error_is_the_wrong_rows_over_all_rows() {
    let _serial = serial();
    let model = classifier();
    let df = validation(3); // 3, 3, 3, 1
    let mut t = classifier_trainer(&model, 1);
    let runner = InferenceRunner::new(&model, &df)
        .inferencer(Inferencer::classification_error().wrong_output("miss").summary_name("test_error"))
        .build()
        .unwrap();
    t.add_callback(runner).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    let v = t.scalar_latest("test_error").unwrap().value;
    assert!(close(v, hand_count_wrong() as f64 / 10.0), "{v}");
    assert_eq!(t.scalar_latest("validation_error").unwrap_err().code(), Code::NotFound);
}

#[test]
fn a_periodic_runner_and_early_stopping_on_its_stat() {
    let _serial = serial();
    // The error never improves (its output does not depend on the weights):
    // EarlyStopping, registered after the runner, stops after 1 + patience
    // passes. The runner runs every 2 steps: 1 pass per epoch here.
    let model = classifier();
    let df = validation(4);
    let mut t = classifier_trainer(&model, 20);
    let runner = InferenceRunner::new(&model, &df)
        .inferencer(Inferencer::classification_error())
        .periodic_trigger(Every::steps(2))
        .unwrap();
    t.add_callback(runner).unwrap();
    t.add_callback(EarlyStopping::new("validation_error").patience(2)).unwrap();
    let outcome = t.run().unwrap();
    let reason = outcome.stop_reason().expect("stopped early").to_owned();
    assert!(reason.contains("validation_error"), "{reason}");
    assert_eq!(t.epoch_num(), 3, "{reason}");
    assert_eq!(t.scalar_history("validation_error").unwrap().len(), 3);
}

#[test]
fn inferencer_errors_and_panics_fail_training() {
    let _serial = serial();
    // An error: its code and text come back from run.
    let model = classifier();
    let df = validation(4);
    let failing = Inferencer::custom("failing", &["wrong"], |_, rows| {
        if rows == 2 {
            return Err(Error::new(Code::Io, "the short batch is bad"));
        }
        Ok(())
    });
    let mut t = classifier_trainer(&model, 1);
    t.add_callback(InferenceRunner::new(&model, &df).inferencer(failing)).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Io, "{e}");
    assert!(e.message().contains("the short batch is bad"), "{e}");

    // An error of another type, wrapped, is a Code::Callback error.
    let df = validation(4);
    let parsing = Inferencer::custom("parsing", &["wrong"], |_, _| Ok(()))
        .after(|_| "x1".parse::<i32>().map(|_| ()).map_err(Error::wrap));
    let mut t = classifier_trainer(&model, 1);
    t.add_callback(InferenceRunner::new(&model, &df).inferencer(parsing)).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Callback, "{e}");
    assert!(e.message().contains("invalid digit"), "{e}");

    // A panic is resumed by run.
    let df = validation(4);
    let panicking = Inferencer::custom("panicking", &["wrong"], |_, _| Ok(()))
        .before(|| -> Result<()> { panic!("before exploded") });
    let mut t = classifier_trainer(&model, 1);
    t.add_callback(InferenceRunner::new(&model, &df).inferencer(panicking)).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"before exploded"));

    // An output the tower does not publish.
    let df = validation(4);
    let mut t = classifier_trainer(&model, 1);
    t.add_callback(InferenceRunner::new(&model, &df).inferencer(Inferencer::scalar_stats(&["nope"]))).unwrap();
    let e = t.run().unwrap_err();
    assert!(e.message().contains("nope"), "{e}");
}

#[test]
fn inference_runners_leak_no_tensor_handles() {
    let _serial = serial();
    // The library's inferencers, then one in Rust that reads the lent
    // outputs and makes tensors of its own; then both with three inference
    // towers (the tower function's tensors made on the runner's threads).
    for (custom, towers) in [(false, 1), (true, 1), (true, 3)] {
        let before = Tensor::live_handles();
        {
            let model = classifier();
            let df = validation(4);
            let mut runner = InferenceRunner::new(&model, &df)
                .inferencer(Inferencer::scalar_stats(&["cost"]))
                .inferencer(Inferencer::classification_error())
                .towers(towers);
            if custom {
                runner =
                    runner.inferencer(Inferencer::custom("reader", &["wrong", "cost"], |outputs, _| -> Result<()> {
                        let doubled = (&outputs[0] * 2.0)?;
                        assert_eq!(doubled.numel(), outputs[0].numel());
                        outputs[1].item().map(|_| ())
                    }));
            }
            let mut t = classifier_trainer(&model, 2);
            t.add_callback(runner).unwrap();
            assert_eq!(t.run().unwrap(), RunOutcome::Finished);
        }
        assert_eq!(Tensor::live_handles(), before, "custom inferencer: {custom}, towers: {towers}");
    }
}

#[test]
fn inferencer_closures_are_dropped_exactly_once() {
    let _serial = serial();
    struct Noisy(Rc<Cell<u32>>);
    impl Drop for Noisy {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    let drops = Rc::new(Cell::new(0));
    let make = |drops: &Rc<Cell<u32>>| {
        let n = Noisy(drops.clone());
        Inferencer::custom("noisy", &["wrong"], move |_, _| {
            let _ = &n;
            Ok(())
        })
    };
    // Built and dropped without a runner.
    drop(make(&drops).build().unwrap());
    assert_eq!(drops.get(), 1);
    // A NUL byte in an output: refused, the closure dropped.
    let n = Noisy(drops.clone());
    let e = Inferencer::custom("bad", &["a\0b"], move |_, _| {
        let _ = &n;
        Ok(())
    })
    .build()
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(drops.get(), 2);
    // A runner whose second inferencer fails: the first is dropped too.
    let model = classifier();
    let df = validation(4);
    let e = InferenceRunner::new(&model, &df)
        .inferencer(make(&drops))
        .inferencer(Inferencer::scalar_stats(&["a\0"]))
        .build()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(drops.get(), 3);
    // Given to a trainer: dropped with it.
    let mut t = classifier_trainer(&model, 1);
    t.add_callback(InferenceRunner::new(&model, &df).inferencer(make(&drops))).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(drops.get(), 3);
    drop(t);
    assert_eq!(drops.get(), 4);
}

/// The tower names and threads of the inference calls of a model's tower
/// function (the build and training calls left out).
type InferenceCalls = Arc<Mutex<Vec<(String, i32, ThreadId)>>>;

fn noting_classifier<'a>(calls: &InferenceCalls) -> Model<'a> {
    let calls = Arc::clone(calls);
    classifier_with(move |tower| {
        if !tower.is_training() && !tower.is_building() {
            calls.lock().unwrap().push((tower.name(), tower.index(), std::thread::current().id()));
        }
        Ok(())
    })
}

/// A runner with a ScalarStats, a ClassificationError and a custom
/// inferencer that notes the rows of each batch, all named after `prefix`.
fn named_runner<'r, 'a>(
    model: &'r Model<'a>,
    df: &'r DataFlow<'a>,
    prefix: &str,
    rows: &Rc<RefCell<Vec<i64>>>,
) -> InferenceRunner<'r, 'a> {
    let rows = Rc::clone(rows);
    InferenceRunner::new(model, df)
        .inferencer(Inferencer::scalar_stats(&["cost", "wrong"]).prefix(prefix))
        .inferencer(Inferencer::classification_error().summary_name(format!("{prefix}_error")))
        .inferencer(Inferencer::custom("rows", &["wrong"], move |_, n| -> Result<()> {
            rows.borrow_mut().push(n);
            Ok(())
        }))
}

#[test]
fn a_data_parallel_runner_gives_the_single_runners_scalars() {
    let _serial = serial();
    let calls = InferenceCalls::default();
    let model = noting_classifier(&calls);
    // Batches of 3, 3, 3, 1: one group of 3 towers, then one of 1.
    let (df1, df3) = (validation(3), validation(3));
    let (rows1, rows3) = (Rc::new(RefCell::new(Vec::new())), Rc::new(RefCell::new(Vec::new())));
    let parallel = named_runner(&model, &df3, "parallel", &rows3).towers(3);
    assert!(format!("{parallel:?}").contains("towers: 3"), "{parallel:?}");
    // Both runners in one training: each pass sees the same weights.
    let mut t = classifier_trainer(&model, 2);
    t.add_callback(named_runner(&model, &df1, "single", &rows1)).unwrap();
    t.add_callback(parallel).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);

    let costs = values(&t, "single_cost");
    assert_eq!(costs.len(), 2);
    assert_ne!(costs[0], costs[1], "the weights changed between the passes");
    for stat in ["cost", "wrong", "error"] {
        let (single, parallel) = (values(&t, &format!("single_{stat}")), values(&t, &format!("parallel_{stat}")));
        assert_eq!(single.len(), 2, "{stat}");
        assert_eq!(single, parallel, "{stat}: the same numbers, bit for bit");
    }
    assert!(close(values(&t, "parallel_error")[1], hand_count_wrong() as f64 / 10.0));
    // The inferencers get the batches in the dataflow's order.
    assert_eq!(*rows1.borrow(), vec![3, 3, 3, 1, 3, 3, 3, 1]);
    assert_eq!(*rows3.borrow(), *rows1.borrow());

    // Per tower name, how many calls and on which threads.
    let mut towers: BTreeMap<String, (usize, HashSet<ThreadId>)> = BTreeMap::new();
    for (name, index, thread) in calls.lock().unwrap().iter() {
        assert_eq!(*index, 0, "{name}: an inference tower has index 0");
        let entry = towers.entry(name.clone()).or_default();
        entry.0 += 1;
        entry.1.insert(*thread);
    }
    let counts: Vec<(&str, usize)> = towers.iter().map(|(n, (c, _))| (n.as_str(), *c)).collect();
    // Per pass: 4 batches on the single runner's tower; 2 groups, the second
    // of one batch, on the three towers.
    assert_eq!(
        counts,
        vec![("InferenceTower", 8), ("InferenceTower0", 4), ("InferenceTower1", 2), ("InferenceTower2", 2)]
    );
    let here = std::thread::current().id();
    assert_eq!(towers["InferenceTower"].1, HashSet::from([here]), "the single runner infers on the training thread");
    let (t1, t2) = (&towers["InferenceTower1"].1, &towers["InferenceTower2"].1);
    assert_eq!((t1.len(), t2.len()), (1, 1), "one thread per tower, kept from pass to pass");
    assert!(!t1.contains(&here) && !t2.contains(&here) && t1 != t2, "towers 1 and 2 on threads of their own");
}

#[test]
fn data_parallel_runner_errors() {
    let _serial = serial();
    let model = classifier();
    let df = validation(4);
    let drops = Rc::new(Cell::new(0));
    struct Noisy(Rc<Cell<u32>>);
    impl Drop for Noisy {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    let noisy = |drops: &Rc<Cell<u32>>| {
        let n = Noisy(drops.clone());
        Inferencer::custom("noisy", &["wrong"], move |_, _| {
            let _ = &n;
            Ok(())
        })
    };
    // A count out of [1, 256]: an error, and the inferencers are dropped.
    for (i, towers) in [0, 257, usize::MAX].into_iter().enumerate() {
        let e = InferenceRunner::new(&model, &df).inferencer(noisy(&drops)).towers(towers).build().unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{towers}: {e}");
        assert!(e.message().contains(&format!("n_towers is {towers}")), "{e}");
        assert_eq!(drops.get(), i as u32 + 1);
    }
    // One tower is the single runner.
    let one = InferenceRunner::new(&model, &df).inferencer(Inferencer::classification_error()).towers(1).build();
    drop(one.unwrap());

    // An error of the tower function on one of the runner's own threads
    // fails training with its code and message.
    let model = classifier_with(|tower| {
        if tower.name() == "InferenceTower2" {
            return Err(Error::new(Code::Io, "tower 2 cannot read its batch"));
        }
        Ok(())
    });
    let mut t = classifier_trainer(&model, 1);
    t.add_callback(InferenceRunner::new(&model, &df).inferencer(Inferencer::classification_error()).towers(3)).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Io, "{e}");
    assert!(e.message().contains("tower 2 cannot read its batch"), "{e}");

    // A panic there fails training with its message (no Rust call waits on
    // that thread to resume it).
    let model = classifier_with(|tower| {
        if tower.name() == "InferenceTower1" {
            panic!("tower 1 exploded");
        }
        Ok(())
    });
    let df = validation(4);
    let mut t = classifier_trainer(&model, 1);
    t.add_callback(InferenceRunner::new(&model, &df).inferencer(Inferencer::classification_error()).towers(2)).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Callback, "{e}");
    assert!(e.message().contains("panic in the tower function: tower 1 exploded"), "{e}");
}

// ------------------------------------------------------------ stopping

#[test]
fn early_stopping_stops_a_run_whose_stat_never_improves() {
    let _serial = serial();
    let mut t = hooks_trainer(&quiet(10, 2));
    t.add_callback(put_each_epoch("val", vec![1.0])).unwrap();
    t.add_callback(EarlyStopping::new("val").patience(2)).unwrap();
    let outcome = t.run().unwrap();
    let reason = outcome.stop_reason().expect("stopped early");
    assert!(reason.contains("val"), "{reason}");
    assert_eq!(t.epoch_num(), 3, "the best, then 2 without improvement: {reason}");
    assert_eq!(t.stop_reason().as_deref(), Some(reason));

    // Improvements smaller than min_delta do not count.
    let mut t = hooks_trainer(&quiet(10, 2));
    t.add_callback(put_each_epoch("val", (0..10).map(|i| 1.0 - 0.01 * i as f64).collect())).unwrap();
    t.add_callback(EarlyStopping::new("val").patience(3).min_delta(0.1)).unwrap();
    assert!(matches!(t.run().unwrap(), RunOutcome::Stopped(_)));
    assert_eq!(t.epoch_num(), 4);

    // A growing stat with maximize, and a falling one by default: no stop.
    for (stat, maximize) in [(vec![1.0, 2.0, 3.0, 4.0, 5.0], true), (vec![5.0, 4.0, 3.0, 2.0, 1.0], false)] {
        let mut t = hooks_trainer(&quiet(5, 2));
        t.add_callback(put_each_epoch("val", stat)).unwrap();
        let es = EarlyStopping::new("val").patience(1);
        t.add_callback(if maximize { es.maximize() } else { es }).unwrap();
        assert_eq!(t.run().unwrap(), RunOutcome::Finished, "maximize {maximize}");
    }
    // The same growing stat without maximize stops after patience 1.
    let mut t = hooks_trainer(&quiet(5, 2));
    t.add_callback(put_each_epoch("val", vec![1.0, 2.0, 3.0, 4.0, 5.0])).unwrap();
    t.add_callback(EarlyStopping::new("val").patience(1)).unwrap();
    assert!(matches!(t.run().unwrap(), RunOutcome::Stopped(_)));
    assert_eq!(t.epoch_num(), 2);
}

/// A trainer whose hooked steps publish "cost" and "loss": the `nan_at`-th
/// step (1-based) publishes `bad` for `which`.
fn nan_trainer<'a>(which: &'static str, nan_at: u32, bad: f64) -> (Trainer<'a>, Rc<Cell<u32>>) {
    let steps = Rc::new(Cell::new(0u32));
    let s = steps.clone();
    let mut t = Trainer::new(&quiet(3, 5)).unwrap();
    t.set_run_step(move |ctx| {
        s.set(s.get() + 1);
        let n = s.get();
        ctx.hooked_step(|step| {
            for name in ["cost", "loss"] {
                step.set_output_scalar(name, if n == nan_at && name == which { bad } else { 1.0 / n as f64 })?;
            }
            Ok(Flow::Continue)
        })
    })
    .unwrap();
    (t, steps)
}

#[test]
fn terminate_on_nan_stops_at_the_first_bad_cost() {
    let _serial = serial();
    let (mut t, steps) = nan_trainer("cost", 4, f64::NAN);
    t.add_callback(TerminateOnNaN::new()).unwrap();
    let outcome = t.run().unwrap();
    let reason = outcome.stop_reason().expect("stopped");
    assert!(reason.contains("cost"), "{reason}");
    assert_eq!(steps.get(), 4, "{reason}");
    assert_eq!(t.global_step(), 4);

    // Other outputs; infinity counts.
    let (mut t, steps) = nan_trainer("loss", 7, f64::INFINITY);
    t.add_callback(TerminateOnNaN::new().outputs(&["loss", "cost"])).unwrap();
    let reason = t.run().unwrap().stop_reason().expect("stopped").to_owned();
    assert!(reason.contains("loss"), "{reason}");
    assert_eq!(steps.get(), 7);

    // "loss" is not checked by default.
    let (mut t, steps) = nan_trainer("loss", 7, f64::NAN);
    t.add_callback(TerminateOnNaN::new()).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(steps.get(), 15);
}

#[test]
fn step_watchdog_fails_a_slow_step_with_timeout() {
    let _serial = serial();
    let steps = Rc::new(Cell::new(0u32));
    let s = steps.clone();
    let mut t = Trainer::new(&quiet(1, 4)).unwrap();
    t.set_run_step(move |ctx| {
        s.set(s.get() + 1);
        if s.get() == 2 {
            std::thread::sleep(Duration::from_millis(800));
        }
        ctx.hooks_only()
    })
    .unwrap();
    t.add_callback(StepWatchdog::new(Duration::from_millis(200))).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Timeout, "{e}");
    assert_eq!(steps.get(), 2, "no step after the slow one: {e}");
    assert_eq!(Code::Timeout.name(), "TPT_ERR_TIMEOUT");

    // A slow callback counts too; fast steps pass.
    let mut t = hooks_trainer(&quiet(1, 4));
    t.add_callback(Callback::on(Events::TRIGGER_STEP, |ctx, _, _| {
        if ctx.global_step() == 3 {
            std::thread::sleep(Duration::from_millis(800));
        }
        Ok(Flow::Continue)
    }))
    .unwrap();
    t.add_callback(StepWatchdog::new(Duration::from_millis(200))).unwrap();
    assert_eq!(t.run().unwrap_err().code(), Code::Timeout);
    let mut t = hooks_trainer(&quiet(2, 4));
    t.add_callback(StepWatchdog::new(Duration::from_secs(5))).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
}

// ------------------------------------------------------------ hyper-parameters

#[test]
fn hyper_param_func_sets_the_value_for_each_epoch() {
    let _serial = serial();
    let sgd = Optimizer::new("sgd").unwrap();
    sgd.set("learning_rate", 0.5).unwrap();
    let calls = Rc::new(RefCell::new(Vec::new()));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let c = calls.clone();
    let mut t = hooks_trainer(&quiet(3, 2));
    t.add_callback(HyperParamFunc::new(&sgd, "learning_rate", move |epochs, current| -> Result<f64> {
        c.borrow_mut().push((epochs, current));
        Ok(0.1 * (epochs + 1) as f64)
    }))
    .unwrap();
    t.add_callback(lr_before_each_epoch(&sgd, &seen)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    let calls = calls.borrow();
    assert_eq!(calls.len(), 4, "BEFORE_TRAIN and after each epoch: {calls:?}");
    for (i, &(epochs, current)) in calls.iter().enumerate() {
        assert_eq!(epochs, i as i64, "{calls:?}");
        let want = if i == 0 { 0.5 } else { 0.1 * i as f64 };
        assert!(close(current, want), "{calls:?}");
    }
    let seen = seen.borrow();
    assert_eq!(seen.len(), 3);
    for (i, &lr) in seen.iter().enumerate() {
        assert!(close(lr, 0.1 * (i + 1) as f64), "{seen:?}");
    }
    assert!(close(sgd.get("learning_rate").unwrap(), 0.4));

    // Its error fails training, with the error as the source.
    let mut t = hooks_trainer(&quiet(3, 2));
    t.add_callback(HyperParamFunc::new(&sgd, "learning_rate", |epochs, _| {
        if epochs == 1 {
            "fast".parse::<f64>().map_err(Error::wrap)
        } else {
            Ok(0.1)
        }
    }))
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Callback, "{e}");
    assert!(e.message().contains("invalid float literal"), "{e}");
    assert!(e.source().and_then(|s| s.downcast_ref::<std::num::ParseFloatError>()).is_some(), "{e:?}");
    assert_eq!(t.epoch_num(), 1);
}

#[test]
fn stat_monitor_param_reduces_on_a_plateau() {
    let _serial = serial();
    // A flat stat, a window of 2: halved after epochs 2 and 4.
    let sgd = Optimizer::new("sgd").unwrap();
    sgd.set("learning_rate", 0.1).unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let mut t = hooks_trainer(&quiet(4, 2));
    t.add_callback(put_each_epoch("val", vec![1.0])).unwrap();
    t.add_callback(StatMonitorParam::new(&sgd, "learning_rate", "val").last_k(2).factor(0.5)).unwrap();
    t.add_callback(lr_before_each_epoch(&sgd, &seen)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(*seen.borrow(), vec![0.1, 0.1, 0.05, 0.05]);
    assert!(close(sgd.get("learning_rate").unwrap(), 0.025));

    // Not below the limit.
    sgd.set("learning_rate", 0.1).unwrap();
    let mut t = hooks_trainer(&quiet(4, 2));
    t.add_callback(put_each_epoch("val", vec![1.0])).unwrap();
    t.add_callback(StatMonitorParam::new(&sgd, "learning_rate", "val").last_k(2).factor(0.5).limit(0.04)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert!(close(sgd.get("learning_rate").unwrap(), 0.04));

    // An improving stat changes nothing: falling (default), growing (maximize),
    // and falling by less than the threshold does not count.
    for (stat, maximize, threshold, want) in [
        (vec![1.0, 0.9, 0.8, 0.7], false, 0.0, 0.1),
        (vec![1.0, 1.1, 1.2, 1.3], true, 0.0, 0.1),
        (vec![1.0, 0.99, 0.98, 0.97], false, 0.05, 0.025),
    ] {
        sgd.set("learning_rate", 0.1).unwrap();
        let mut t = hooks_trainer(&quiet(4, 2));
        t.add_callback(put_each_epoch("val", stat.clone())).unwrap();
        let s = StatMonitorParam::new(&sgd, "learning_rate", "val").last_k(2).factor(0.5).threshold(threshold);
        t.add_callback(if maximize { s.maximize() } else { s }).unwrap();
        assert_eq!(t.run().unwrap(), RunOutcome::Finished);
        let lr = sgd.get("learning_rate").unwrap();
        assert!(close(lr, want), "{stat:?} maximize {maximize} threshold {threshold}: {lr}");
    }
}

#[test]
fn human_hyper_param_reads_the_file_in_the_logdir() {
    let _serial = serial();
    let dir = tempdir("human");
    std::fs::write(dir.join("hyper.txt"), "momentum:0.9\nlearning_rate:0.25\n").unwrap();
    let sgd = Optimizer::new("sgd").unwrap();
    sgd.set("learning_rate", 0.5).unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let options = TrainerOptions { logdir: Some(dir.clone()), logdir_action: LogdirAction::Keep, ..quiet(3, 2) };
    let mut t = hooks_trainer(&options);
    // Edited by hand after epoch 1; a line that does not parse after epoch 2.
    let file = dir.join("hyper.txt");
    t.add_callback(Callback::on(Events::TRIGGER_EPOCH, move |ctx, _, _| {
        match ctx.epoch_num() {
            1 => std::fs::write(&file, "learning_rate:0.125\n")?,
            2 => std::fs::write(&file, "learning_rate:fast\n")?,
            _ => {}
        }
        Ok(Flow::Continue)
    }))
    .unwrap();
    t.add_callback(HumanHyperParam::new(&sgd, "learning_rate")).unwrap();
    t.add_callback(lr_before_each_epoch(&sgd, &seen)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(*seen.borrow(), vec![0.25, 0.125, 0.125]);

    // Another file, by absolute path; a missing one changes nothing.
    let other = tempdir("human-other").join("lr.txt");
    std::fs::write(&other, "learning_rate:0.0625\n").unwrap();
    let mut t = hooks_trainer(&quiet(1, 2));
    t.add_callback(HumanHyperParam::new(&sgd, "learning_rate").file(&other)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(sgd.get("learning_rate").unwrap(), 0.0625);
    let mut t = hooks_trainer(&quiet(1, 2));
    t.add_callback(HumanHyperParam::new(&sgd, "learning_rate").file(other.with_file_name("missing.txt"))).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(sgd.get("learning_rate").unwrap(), 0.0625);
}

// ------------------------------------------------------------ trackers

#[test]
fn throughput_and_host_memory_trackers_put_their_scalars() {
    let _serial = serial();
    let mut t = hooks_trainer(&quiet(2, 5));
    t.add_callback(ThroughputTracker::new()).unwrap();
    t.add_callback(HostMemoryTracker::new()).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    let steps = values(&t, "Throughput (steps/sec)");
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|&v| v > 0.0 && v.is_finite()), "{steps:?}");
    assert_eq!(t.scalar_latest("Throughput (samples/sec)").unwrap_err().code(), Code::NotFound);
    let free = values(&t, "HostFreeMemory (GB)");
    let resident = values(&t, "HostResidentMemory (MB)");
    assert_eq!((free.len(), resident.len()), (2, 2));
    assert!(free[0] > 0.0 && resident[0] > 1.0, "{free:?} {resident:?}");

    let mut t = hooks_trainer(&quiet(2, 5));
    t.add_callback(ThroughputTracker::new().samples_per_step(32)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    let samples = values(&t, "Throughput (samples/sec)");
    assert_eq!(samples.len(), 2);
    assert!(samples.iter().all(|&v| v > 0.0), "{samples:?}");
    assert_eq!(t.scalar_latest("Throughput (steps/sec)").unwrap_err().code(), Code::NotFound);
}

// ------------------------------------------------------------ images and TensorBoard

fn event_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents."))
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn put_image_reaches_monitors_and_tensorboard_writes_event_files() {
    let _serial = serial();
    let logdir = tempdir("tb");
    let other = tempdir("tb-other");
    let options = TrainerOptions { logdir: Some(logdir.clone()), default_monitors: true, ..quiet(2, 3) };
    let mut t = hooks_trainer(&options);
    let refused = Rc::new(RefCell::new(Vec::new()));
    let r = refused.clone();
    t.add_callback(Callback::on(Events::TRIGGER_EPOCH, move |ctx, _, _| {
        // An RGB image of uint8, and two grey ones of floats in [0, 255].
        let rgb: Vec<u8> = (0..4 * 4 * 3).map(|i| (i * 5) as u8).collect();
        ctx.put_image("sample", &Tensor::from_vec(rgb, &[4, 4, 3])?)?;
        let grey: Vec<f32> = (0..2 * 4 * 4).map(|i| i as f32 * 8.0).collect();
        ctx.put_image("pair", &Tensor::from_vec(grey, &[2, 4, 4, 1])?)?;
        ctx.put_scalar("a_scalar", ctx.epoch_num() as f64)?;
        // Two channels, and integers that are not uint8: refused.
        let two = Tensor::from_vec(vec![0u8; 4 * 4 * 2], &[4, 4, 2])?;
        r.borrow_mut().push(ctx.put_image("two", &two).unwrap_err().code());
        let ints = Tensor::from_vec(vec![0i64; 16], &[4, 4])?;
        r.borrow_mut().push(ctx.put_image("ints", &ints).unwrap_err().code());
        Ok(Flow::Continue)
    }))
    .unwrap();
    let images = Rc::new(RefCell::new(Vec::new()));
    let i = images.clone();
    t.add_monitor(Callback::on(Events::RECORD, move |_, event, record| {
        assert_eq!(event, Event::Record);
        let record = record.unwrap();
        if record.kind == RecordKind::Image {
            i.borrow_mut().push((record.name.into_owned(), record.epoch_num));
        }
        Ok(Flow::Continue)
    }))
    .unwrap();
    t.add_monitor(TensorBoard::new().dir(&other)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);

    let want: Vec<(String, i64)> =
        vec![("sample".into(), 1), ("pair".into(), 1), ("sample".into(), 2), ("pair".into(), 2)];
    assert_eq!(*images.borrow(), want);
    assert_eq!(*refused.borrow(), vec![Code::InvalidArgument; 4]);
    // Images are not scalars.
    assert_eq!(t.scalar_latest("sample").unwrap_err().code(), Code::NotFound);
    // Outside training.
    assert!(t.put_image("late", &Tensor::from_vec(vec![0u8; 16], &[4, 4]).unwrap()).is_err());

    for dir in [&logdir, &other] {
        let files = event_files(dir);
        assert_eq!(files.len(), 1, "{dir:?}: {files:?}");
        let bytes = std::fs::read(&files[0]).unwrap();
        assert!(contains(&bytes, b"sample"), "{dir:?}");
        assert!(contains(&bytes, b"pair/1"), "{dir:?}");
        assert!(contains(&bytes, b"a_scalar"), "{dir:?}");
        assert!(contains(&bytes, b"\x89PNG"), "{dir:?}");
    }
}

// ------------------------------------------------------------ bad arguments

#[test]
fn bad_arguments_are_errors() {
    let _serial = serial();
    let sgd = Optimizer::new("sgd").unwrap();
    let invalid = |r: Result<Callback<'_>>| assert_eq!(r.unwrap_err().code(), Code::InvalidArgument);
    invalid(EarlyStopping::new("val").patience(0).build());
    invalid(EarlyStopping::new("val").min_delta(-1.0).build());
    invalid(EarlyStopping::new("v\0al").build());
    invalid(StatMonitorParam::new(&sgd, "learning_rate", "val").last_k(1).build());
    invalid(StatMonitorParam::new(&sgd, "learning_rate", "val").factor(0.0).build());
    invalid(StatMonitorParam::new(&sgd, "learning_rate", "val").threshold(-1.0).build());
    invalid(StatMonitorParam::new(&sgd, "learning_rate", "va\0l").build());
    invalid(HumanHyperParam::new(&sgd, "learning\0rate").build());
    invalid(StepWatchdog::new(Duration::ZERO).build());
    invalid(TerminateOnNaN::new().outputs(&["co\0st"]).build());
    invalid(TensorBoard::new().dir("a\0b").build());
    invalid(ThroughputTracker::new().samples_per_step(u64::MAX).build());

    // A HyperParamFunc refused here drops its closure.
    let dropped = Rc::new(Cell::new(false));
    struct Flag(Rc<Cell<bool>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    let flag = Flag(dropped.clone());
    let e = HyperParamFunc::new(&sgd, "learning\0rate", move |_, v| {
        let _ = &flag;
        Ok::<f64, Error>(v)
    })
    .build()
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(dropped.get());

    // Code::Timeout survives the trip through a C status.
    let e = Error::new(Code::Timeout, "too slow");
    assert_eq!(Code::Timeout.to_raw(), tptrain::sys::TPT_ERR_TIMEOUT);
    assert_eq!(unsafe { Error::check(e.into_raw_status()) }.unwrap_err(), e);
}
