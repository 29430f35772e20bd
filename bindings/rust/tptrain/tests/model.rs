//! Models from Rust: the tower closure, tensorpack's variable rules, scopes,
//! initializers, optimizers and schedules, in-memory and feed inputs,
//! inference, errors unchanged and panics resumed where the C call returns;
//! TrainConfig and launch with the init hook; TorchScript modules, loaded or
//! compiled from source. The C
//! twin is tests/c/test_model.c.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tptrain::ops::{self, Arg};
use tptrain::{
    launch_train, Callback, Code, DType, Error, Events, Flow, InitFn, Input, InputSpec, Model, Optimizer, Progress,
    Result, RunOutcome, Tensor, TorchScriptParam, Tower, TrainConfig, Trainer, TrainerOptions, VariableOptions,
};

// ------------------------------------------------------------ helpers

/// Each step's cost, as a user records it: read from the step's output after
/// each step (the monitors get only its moving average, once per epoch).
fn cost_log(costs: &RefCell<Vec<f64>>) -> Callback<'_> {
    Callback::on(Events::AFTER_RUN, move |ctx, _, _| {
        costs.borrow_mut().push(ctx.output_scalar("cost")?);
        Ok(Flow::Continue)
    })
    .name("cost_log")
    .build()
    .unwrap()
}

fn options(steps_per_epoch: i64, max_epoch: i64) -> TrainerOptions {
    TrainerOptions {
        max_epoch,
        steps_per_epoch: Some(steps_per_epoch),
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        default_monitors: false,
        ..Default::default()
    }
}

/// What the tower function of a test does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Plain,
    NewVariableLater,
    NameTwice,
    NoCost,
    Fails,
    Stops,
    Scopes,
}

/// What the tower function saw.
#[derive(Default)]
struct Probe {
    calls: AtomicUsize,
    builds: AtomicUsize,
    inference_calls: AtomicUsize,
    last_name: Mutex<String>,
}

/// Counts drops of the closures that capture it.
struct DropGuard(Arc<AtomicUsize>);
impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn signature() -> Vec<InputSpec> {
    vec![InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])]
}

/// cost = mean((x W^T + b - y)^2) with W [1, 3], b [1] (b starts at 0.5).
fn linear(tower: &mut Tower, inputs: &[Tensor], probe: &Probe, how: How) -> Result<()> {
    assert_eq!(inputs.len(), 2);
    let building = tower.is_building();
    assert_eq!(building, tower.can_create_variables());
    *probe.last_name.lock().unwrap() = tower.name();
    let call = probe.calls.fetch_add(1, Ordering::SeqCst) + 1;
    probe.builds.fetch_add(building as usize, Ordering::SeqCst);
    probe.inference_calls.fetch_add(!tower.is_training() as usize, Ordering::SeqCst);
    if how == How::Fails && !building {
        return Err(Error::new(Code::Io, "the tower could not read its lookup table"));
    }
    if how == How::Stops && call == 4 {
        tower.stop("the tower has seen enough");
        return Ok(());
    }
    let (w, b) = if how == How::Scopes {
        tower.push_scope("fc")?;
        let w = tower.scope("inner", |t| t.variable("W", &[1, 3], &VariableOptions::default()))?;
        let b = tower.variable("b", &[1], &VariableOptions::constant(0.5))?;
        tower.pop_scope()?;
        (w, b)
    } else {
        (
            tower.variable("W", &[1, 3], &VariableOptions::default())?,
            tower.variable("b", &[1], &VariableOptions::constant(0.5))?,
        )
    };
    if !building && how == How::NewVariableLater {
        tower.variable("late", &[1], &VariableOptions::default())?;
    }
    if how == How::NameTwice {
        tower.variable("b", &[1], &VariableOptions::constant(0.5))?;
    }
    let p = ops::call1("aten::linear", &[Arg::Tensor(&inputs[0]), Arg::Tensor(&w), Arg::Tensor(&b)])?;
    let cost = ops::call1("aten::mse_loss", &[Arg::Tensor(&p), Arg::Tensor(&inputs[1])])?;
    if how != How::NoCost {
        tower.set_cost(&cost)?;
    }
    tower.set_output("prediction", &p)
}

fn make_model(probe: &Probe, how: How) -> Model<'_> {
    Model::new(&signature(), move |tower, inputs| linear(tower, inputs, probe, how)).unwrap()
}

/// `rows` rows of y = x . (1, -2, 3) + 1, x uniform in [-1, 1) (the C test's LCG).
fn regression_data(rows: usize) -> (Tensor, Tensor) {
    let (mut x, mut y) = (Vec::with_capacity(rows * 3), Vec::with_capacity(rows));
    let mut r: u32 = 12345;
    for _ in 0..rows {
        let mut row = [0f32; 3];
        for v in &mut row {
            r = r.wrapping_mul(1664525).wrapping_add(1013904223);
            *v = (r >> 8) as f32 / 8388608.0 - 1.0;
        }
        x.extend_from_slice(&row);
        y.push(row[0] - 2.0 * row[1] + 3.0 * row[2] + 1.0);
    }
    (Tensor::from_vec(x, &[rows as i64, 3]).unwrap(), Tensor::from_vec(y, &[rows as i64, 1]).unwrap())
}

fn input(batch: i64) -> Input<'static> {
    let (x, y) = regression_data(64);
    Input::from_tensors(&[&x, &y], batch, Some(42)).unwrap()
}

fn sgd(lr: f64) -> Optimizer {
    let o = Optimizer::new("sgd").unwrap();
    o.set("learning_rate", lr).unwrap();
    o
}

/// Trains `model` with SGD(lr 0.1) on the regression data.
fn train(model: &Model<'_>, steps: i64, epochs: i64) -> Result<RunOutcome> {
    model.set_optimizer(&sgd(0.1))?;
    let mut t = Trainer::new(&options(steps, epochs))?;
    t.set_model(model, input(16))?;
    t.run()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

fn close(got: &[f32], want: &[f32], tol: f32) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() < tol)
}

// ------------------------------------------------------------ training

#[test]
fn trains_the_regression_and_reuses_variables() {
    let probe = Probe::default();
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropGuard(Arc::clone(&drops));
    let model = Model::new(&signature(), {
        let probe = &probe;
        move |tower, inputs| {
            let _keep = &guard;
            linear(tower, inputs, probe, How::Plain)
        }
    })
    .unwrap();
    let opt = sgd(0.1);
    model.set_optimizer(&opt).unwrap();
    let mut t = Trainer::new(&options(50, 4)).unwrap();
    t.set_model(&model, input(16)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(probe.builds.load(Ordering::SeqCst), 1); // one build call
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1 + 200); // then one call per step
    assert_eq!(*probe.last_name.lock().unwrap(), "tower0");
    assert_eq!(t.scalar_history("cost").unwrap().len(), 4); // its moving average, once per epoch
    assert!(t.scalar_latest("cost").unwrap().value < 1e-3);
    assert_eq!(model.variable_names().unwrap(), vec!["W", "b"]);
    // learned y = x . (1, -2, 3) + 1
    let w = model.variable("W").unwrap();
    let b = model.variable("b").unwrap();
    assert!(close(&w.to_vec::<f32>().unwrap(), &[1.0, -2.0, 3.0], 0.05), "{:?}", w.to_vec::<f32>());
    assert!(close(&b.to_vec::<f32>().unwrap(), &[1.0], 0.05), "{:?}", b.to_vec::<f32>());
    let e = model.variable("nope").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("no variable 'nope'"), "{e}");

    // Inference reuses the variables, creates none, publishes outputs.
    let x = Tensor::from_slice(&[1f32, 1.0, 1.0, 0.0, 0.0, 0.0], &[2, 3]).unwrap();
    let y = Tensor::from_slice(&[0f32, 0.0], &[2, 1]).unwrap();
    let out = model.infer(&[&x, &y], &["prediction", "cost"]).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(*probe.last_name.lock().unwrap(), "InferenceTower");
    assert_eq!(probe.inference_calls.load(Ordering::SeqCst), 1);
    assert!(close(&out[0].to_vec::<f32>().unwrap(), &[3.0, 1.0], 0.1), "{:?}", out[0].to_vec::<f32>());
    assert!((out[1].item().unwrap() - 5.0).abs() < 0.5); // ((3 - 0)^2 + (1 - 0)^2) / 2
    assert!(model.infer(&[&x, &y], &[]).unwrap().is_empty());
    let e = model.infer(&[&x, &y], &["logits"]).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("no output 'logits'"), "{e}");
    let e = model.infer(&[&y, &x], &["prediction"]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("input 'x' is Float [2, 1] but the signature says Float [-1, 3]"), "{e}");

    // The closure lives as long as the last reference: the trainer's here.
    drop(model);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(t);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    // The optimizer outlives both and still works.
    assert_eq!(opt.get("learning_rate").unwrap(), 0.1);
}

#[test]
fn variable_rules_come_back_with_the_c_message() {
    let probe = Probe::default();
    let e = train(&make_model(&probe, How::NewVariableLater), 3, 1).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains(
            "variable 'late' does not exist: variables are created by the first call of the first training tower"
        ),
        "{e}"
    );
    let e = train(&make_model(&probe, How::NameTwice), 3, 1).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("variable 'b' is used twice in one call"), "{e}");
    // The same rule at build time: the build call fails, build says why.
    let e = make_model(&probe, How::NameTwice).build().unwrap_err();
    assert!(e.message().contains("variable 'b' is used twice in one call"), "{e}");

    // Scopes: push/pop and the scoped helper.
    let m = make_model(&probe, How::Scopes);
    assert_eq!(train(&m, 3, 1).unwrap(), RunOutcome::Finished);
    assert_eq!(m.variable_names().unwrap(), vec!["fc/inner/W", "fc/b"]);
}

#[test]
fn reuse_mismatch_and_scope_errors_inside_the_tower() {
    let checked = AtomicUsize::new(0);
    let model = Model::new(&[InputSpec::new("x", DType::F32, &[-1])], |tower, _| -> Result<()> {
        if tower.is_building() {
            tower.variable("v", &[3], &VariableOptions::default())?;
            return Ok(());
        }
        let e = tower.variable("v", &[4], &VariableOptions::default()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("variable 'v' exists with shape [3], asked for shape [4]"), "{e}");
        let e = tower.variable("v", &[3], &VariableOptions::default().with_dtype(DType::F64)).unwrap_err();
        assert!(e.message().contains("variable 'v' exists with dtype Float, asked for Double"), "{e}");
        let e = tower.variable("ints", &[3], &VariableOptions::zeros().with_dtype(DType::I64)).unwrap_err();
        assert!(e.message().contains("does not exist"), "{e}");
        let e = tower.pop_scope().unwrap_err();
        assert_eq!(e.code(), Code::State);
        assert!(e.message().contains("pop_scope without a scope"), "{e}");
        let e = tower.push_scope("a/b").unwrap_err();
        assert!(e.message().contains("without '/'"), "{e}");
        // The scoped helper closes its scope after an error too.
        let e = tower.scope("s", |t| t.variable("new", &[1], &VariableOptions::default())).unwrap_err();
        assert!(e.message().contains("does not exist"), "{e}");
        assert_eq!(tower.pop_scope().unwrap_err().code(), Code::State);
        checked.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    let x = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    model.infer(&[&x], &[]).unwrap(); // builds first, then infers
    assert_eq!(checked.load(Ordering::SeqCst), 1);
}

#[test]
fn a_reuse_scope_shares_a_net_applied_twice() {
    let checked = AtomicUsize::new(0);
    let model = Model::new(&[InputSpec::new("x", DType::F32, &[-1])], |tower, _| -> Result<()> {
        // Twice under the reuse scope "d": one variable d/w, in the build
        // call and in every later one.
        let a = tower.reuse_scope("d", |t| t.variable("w", &[2], &VariableOptions::constant(0.25)))?;
        let b = tower.reuse_scope("d", |t| t.variable("w", &[2], &VariableOptions::constant(0.25)))?;
        assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
        // A plain scope still refuses a third use.
        let e = tower.scope("d", |t| t.variable("w", &[2], &VariableOptions::default())).unwrap_err();
        assert!(e.message().contains("variable 'd/w' is used twice"), "{e}");
        checked.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    let x = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    model.infer(&[&x], &[]).unwrap(); // the build call, then the inference call
    assert_eq!(checked.load(Ordering::SeqCst), 2);
    assert_eq!(model.variable_names().unwrap(), vec!["d/w".to_string()]);
}

#[test]
fn initializers_build_once_and_set_variable() {
    tptrain::manual_seed(123).unwrap();
    let probe = Probe::default();
    let model = make_model(&probe, How::Plain);
    let e = model.variable("W").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("(the model is not built yet)"), "{e}");
    model.build().unwrap();
    model.build().unwrap(); // once
    assert_eq!(probe.builds.load(Ordering::SeqCst), 1);
    let w = model.variable("W").unwrap();
    let b = model.variable("b").unwrap();
    // Glorot uniform for [1, 3]: fan_in 3, fan_out 1, bound sqrt(6 / 4).
    let bound = (6.0f32 / 4.0).sqrt();
    assert!(w.to_vec::<f32>().unwrap().iter().all(|v| v.abs() <= bound));
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![0.5]); // constant
                                                       // set_variable copies, and checks the shape; the handle sees the variable.
    model.set_variable("W", &Tensor::from_slice(&[9f32, 8.0, 7.0], &[1, 3]).unwrap()).unwrap();
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![9.0, 8.0, 7.0]);
    model.set_variable("b", &Tensor::from_slice(&[2f64], &[1]).unwrap()).unwrap(); // converted
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0]);
    let bad = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let e = model.set_variable("W", &bad).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("has shape [1, 3], the value [3]"), "{e}");
    let e = model.set_variable("X", &bad).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("no variable 'X'"), "{e}");
    // The same seed, the same initial values.
    tptrain::manual_seed(123).unwrap();
    let again = make_model(&probe, How::Plain);
    again.build().unwrap();
    tptrain::manual_seed(123).unwrap();
    let third = make_model(&probe, How::Plain);
    third.build().unwrap();
    assert_eq!(again.variable("W").unwrap().to_vec::<f32>(), third.variable("W").unwrap().to_vec::<f32>());
}

#[test]
fn tower_queries_in_build_training_and_inference() {
    type Seen = (bool, bool, i32, String, String, bool);
    let seen: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
    let model = Model::new(&signature(), |tower, inputs| {
        seen.lock().unwrap().push((
            tower.is_training(),
            tower.is_building(),
            tower.index(),
            tower.name(),
            tower.device(),
            tower.can_create_variables(),
        ));
        assert!(format!("{tower:?}").starts_with("Tower { name: "));
        linear(tower, inputs, &Probe::default(), How::Plain)
    })
    .unwrap();
    assert_eq!(train(&model, 1, 1).unwrap(), RunOutcome::Finished);
    let (x, y) = regression_data(4);
    model.infer(&[&x, &y], &["prediction"]).unwrap();
    drop(model); // the closure borrows `seen`
    let seen = seen.into_inner().unwrap();
    let s = |t, b, i, n: &str, c| (t, b, i, n.to_owned(), "cpu".to_owned(), c);
    assert_eq!(
        seen,
        vec![
            s(true, true, 0, "tower0", true),
            s(true, false, 0, "tower0", false),
            s(false, false, 0, "InferenceTower", false)
        ]
    );
}

// ------------------------------------------------------------ errors and stops

#[test]
fn tower_errors_and_stops_come_back_unchanged() {
    let probe = Probe::default();
    let e = train(&make_model(&probe, How::Fails), 3, 1).unwrap_err();
    assert_eq!(e, Error::new(Code::Io, "the tower could not read its lookup table"));
    let e = train(&make_model(&probe, How::NoCost), 3, 1).unwrap_err();
    assert_eq!(e.code(), Code::State);
    assert!(e.message().contains("did not set a cost"), "{e}");
    // A Stop ends training gracefully: the build call and two steps ran.
    let stops = Probe::default();
    let m = make_model(&stops, How::Stops);
    assert_eq!(train(&m, 10, 1).unwrap(), RunOutcome::Stopped("the tower has seen enough".into()));
    assert_eq!(stops.calls.load(Ordering::SeqCst), 4);
    // Without an optimizer.
    let m = make_model(&probe, How::Plain);
    let mut t = Trainer::new(&options(2, 1)).unwrap();
    t.set_model(&m, input(16)).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::State);
    assert!(e.message().contains("no optimizer"), "{e}");
    // A trainer runs once; set_model afterwards takes (and drops) the input.
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropGuard(Arc::clone(&drops));
    let feed = Input::from_feed(move |_| -> Result<_> {
        let _keep = &guard;
        Ok(None)
    })
    .unwrap();
    let e = t.set_model(&m, feed).unwrap_err();
    assert_eq!(e.code(), Code::State);
    assert!(e.message().contains("the trainer has already run"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_panic_in_the_tower_is_resumed_by_run() {
    let calls = AtomicUsize::new(0);
    let after_train = AtomicUsize::new(0);
    let model = Model::new(&signature(), |tower, inputs| {
        if calls.fetch_add(1, Ordering::SeqCst) == 3 {
            panic!("tower boom");
        }
        linear(tower, inputs, &Probe::default(), How::Plain)
    })
    .unwrap();
    model.set_optimizer(&sgd(0.1)).unwrap();
    let mut t = Trainer::new(&options(10, 2)).unwrap();
    t.set_model(&model, input(16)).unwrap();
    t.add_callback(
        Callback::on(Events::AFTER_TRAIN, |_, _, _| {
            after_train.fetch_add(1, Ordering::SeqCst);
            Ok(Flow::Continue)
        })
        .name("after")
        .build()
        .unwrap(),
    )
    .unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "tower boom");
    assert_eq!(calls.load(Ordering::SeqCst), 4); // training ended there
    assert_eq!(after_train.load(Ordering::SeqCst), 1); // AFTER_TRAIN still ran
    assert_eq!(t.global_step(), 2);
    // Nothing is left pending: the model still infers.
    let (x, y) = regression_data(4);
    assert_eq!(model.infer(&[&x, &y], &["prediction"]).unwrap().len(), 1);
}

#[test]
fn a_panic_in_the_tower_is_resumed_by_build_and_infer() {
    let builds = AtomicUsize::new(0);
    let model = Model::new(&signature(), |tower, inputs| -> Result<()> {
        if tower.is_building() && builds.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("build boom");
        }
        if !tower.is_training() {
            panic!("infer boom {}", inputs.len());
        }
        linear(tower, inputs, &Probe::default(), How::Plain)
    })
    .unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| model.build())).unwrap_err();
    assert_eq!(panic_message(&*payload), "build boom");
    model.build().unwrap(); // the failed build left the model unbuilt
    let (x, y) = regression_data(4);
    let payload = catch_unwind(AssertUnwindSafe(|| model.infer(&[&x, &y], &["prediction"]))).unwrap_err();
    assert_eq!(panic_message(&*payload), "infer boom 2");
}

#[test]
fn a_panic_on_a_thread_without_a_rust_caller_fails_with_its_message() {
    // tpt_model_build called directly (as the library's own threads would
    // call the tower): only the message travels, nothing is left pending.
    let model = Model::new(&signature(), |_, _| -> Result<()> { panic!("detached boom") }).unwrap();
    let st = unsafe { tptrain::sys::tpt_model_build(model.as_ptr()) };
    let e = unsafe { Error::check(st) }.unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert!(e.message().contains("panic in the tower function: detached boom"), "{e}");
    let payload = catch_unwind(AssertUnwindSafe(|| model.build())).unwrap_err();
    assert_eq!(panic_message(&*payload), "detached boom");
}

// ------------------------------------------------------------ inputs

#[test]
fn a_feed_that_returns_none_stops_training() {
    let served = AtomicUsize::new(0);
    let drops = Arc::new(AtomicUsize::new(0));
    let probe = Probe::default();
    let model = make_model(&probe, How::Plain);
    let opt = Optimizer::new("rmsprop").unwrap();
    model.set_optimizer(&opt).unwrap();
    let guard = DropGuard(Arc::clone(&drops));
    let served = &served;
    let feed = Input::from_feed(move |n| -> Result<_> {
        let _keep = &guard;
        assert_eq!(n, 2);
        if served.fetch_add(1, Ordering::SeqCst) == 5 {
            return Ok(None);
        }
        Ok(Some(vec![Tensor::from_vec(vec![0f32; 12], &[4, 3])?, Tensor::from_vec(vec![1f32; 4], &[4, 1])?]))
    })
    .unwrap();
    let mut t = Trainer::new(&options(100, 1)).unwrap();
    t.set_model(&model, feed).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped(tptrain::END_OF_DATA.into()));
    assert_eq!(t.stop_reason().as_deref(), Some("end of data"));
    assert_eq!(t.global_step(), 5);
    assert!(t.scalar_latest("cost").is_ok());
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(t);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

fn run_feed<'a>(model: &Model<'a>, feed: Input<'a>) -> Result<RunOutcome> {
    let mut t = Trainer::new(&options(100, 1))?;
    t.set_model(model, feed)?;
    t.run()
}

#[test]
fn feed_errors_come_back_unchanged() {
    let probe = Probe::default();
    let model = make_model(&probe, How::Plain);
    model.set_optimizer(&sgd(0.1)).unwrap();
    // A batch of the wrong shape: the signature check.
    let feed = Input::from_feed(|_| -> Result<_> {
        Ok(Some(vec![Tensor::from_vec(vec![0f32; 8], &[4, 2])?, Tensor::from_vec(vec![1f32; 4], &[4, 1])?]))
    })
    .unwrap();
    let e = run_feed(&model, feed).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("input 'x' is Float [4, 2] but the signature says Float [-1, 3]"), "{e}");
    // The wrong number of tensors.
    let feed = Input::from_feed(|_| Ok::<_, Error>(Some(vec![Tensor::from_vec(vec![0f32; 12], &[4, 3])?]))).unwrap();
    let e = run_feed(&model, feed).unwrap_err();
    assert_eq!(e, Error::new(Code::InvalidArgument, "the input feed returned 1 tensors for 2 inputs"));
    // The feed's own error.
    let feed = Input::from_feed(|_| Err(Error::new(Code::Io, "the data file is gone"))).unwrap();
    assert_eq!(run_feed(&model, feed).unwrap_err(), Error::new(Code::Io, "the data file is gone"));
    // A panic: resumed by run.
    let feed = Input::from_feed(|_| -> Result<Option<Vec<Tensor>>> { panic!("feed boom") }).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| run_feed(&model, feed))).unwrap_err();
    assert_eq!(panic_message(&*payload), "feed boom");
    // An input that is never used is dropped with its closure.
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropGuard(Arc::clone(&drops));
    drop(
        Input::from_feed(move |_| -> Result<_> {
            let _keep = &guard;
            Ok(None)
        })
        .unwrap(),
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn input_and_signature_validation() {
    let a = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    let b = Tensor::from_slice(&[1f32, 2.0], &[2]).unwrap();
    let msg = |r: Result<Input<'static>>| r.unwrap_err().message().to_owned();
    assert!(msg(Input::from_tensors(&[&a, &b], 1, None)).contains("tensors[1] has 2 rows"));
    assert!(msg(Input::from_tensors(&[&a], 4, None)).contains("batch_size 4 is larger"));
    assert!(msg(Input::from_tensors(&[&a], 0, None)).contains("batch_size must be >= 1"));
    assert!(msg(Input::from_tensors(&[], 1, None)).contains("n_tensors is 0"));
    // Bad signatures: an error, and the closure is dropped at once.
    let drops = Arc::new(AtomicUsize::new(0));
    let tower = |guard: DropGuard| {
        move |_: &mut Tower, _: &[Tensor]| -> Result<()> {
            let _keep = &guard;
            Ok(())
        }
    };
    let e = Model::new(&[InputSpec::new("x", DType::F32, &[-1, 0])], tower(DropGuard(drops.clone()))).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("dimensions are >= 1 or -1"), "{e}");
    let twice = [InputSpec::new("x", DType::F32, &[3]), InputSpec::new("x", DType::F32, &[3])];
    let e = Model::new(&twice, tower(DropGuard(drops.clone()))).unwrap_err();
    assert!(e.message().contains("is used twice"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    let e = Model::new(&[InputSpec::new("x\0", DType::F32, &[3])], tower(DropGuard(drops.clone()))).unwrap_err();
    assert!(e.message().contains("contains a NUL byte"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    // A model without inputs is fine.
    let m = Model::new(&[], tower(DropGuard(drops.clone()))).unwrap();
    m.build().unwrap();
    assert!(m.variable_names().unwrap().is_empty());
    drop(m);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

// ------------------------------------------------------------ optimizers

#[test]
fn optimizer_hyperparameters_and_a_schedule() {
    let e = Optimizer::new("lion").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("unknown optimizer kind 'lion'"), "{e}");
    for (kind, lr) in [("sgd", 0.01), ("adam", 0.001), ("adamw", 0.001), ("rmsprop", 0.01), ("adagrad", 0.01)] {
        let o = Optimizer::new(kind).unwrap();
        assert_eq!(o.get("learning_rate").unwrap(), lr, "{kind}");
        assert_eq!(o.get("accumulate_steps").unwrap(), 1.0);
        let e = o.set("learnin_rate", 1.0).unwrap_err();
        assert!(e.message().contains("has no hyper-parameter 'learnin_rate'"), "{e}");
        assert!(o.set("learning_rate", -1.0).unwrap_err().message().contains("must be >= 0"));
        assert!(o.set("accumulate_steps", 1.5).unwrap_err().message().contains("integer >= 1"));
        assert!(o.scale_gradients("([", 2.0).unwrap_err().message().contains("not a regular expression"));
        assert!(o.get("bogus").is_err());
    }
    // A schedule from a callback: halve the learning rate after every epoch.
    let probe = Probe::default();
    let model = make_model(&probe, How::Plain);
    let o = Optimizer::new("sgd").unwrap();
    o.set("learning_rate", 0.08).unwrap();
    o.set("clip_global_norm", 1.0).unwrap();
    o.set("accumulate_steps", 2.0).unwrap();
    o.scale_gradients("^b$", 0.5).unwrap();
    model.set_optimizer(&o).unwrap();
    let mut t = Trainer::new(&options(8, 3)).unwrap();
    t.set_model(&model, input(16)).unwrap();
    t.add_callback(
        // The optimizer and the model through the trainer: nothing captured.
        Callback::on(Events::TRIGGER, |ctx, _, _| {
            let opt = ctx.optimizer()?;
            opt.set("learning_rate", opt.get("learning_rate")? / 2.0)?;
            assert_eq!(ctx.model()?.variable_names()?, vec!["W", "b"]);
            Ok(Flow::Continue)
        })
        .name("halve_lr")
        .build()
        .unwrap(),
    )
    .unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert!((o.get("learning_rate").unwrap() - 0.01).abs() < 1e-12);
    assert_eq!(t.scalar_history("cost").unwrap().len(), 3); // once per epoch
    assert!(format!("{o:?}").contains("learning_rate"));
}

#[test]
fn value_types_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Tensor>();
    send_sync::<InputSpec>();
    send_sync::<VariableOptions>();
    send_sync::<tptrain::LayerOptions>();
    send_sync::<tptrain::ops::Arg<'static>>();
}

// ------------------------------------------------------------ TrainConfig and launch

/// Quiet options whose steps_per_epoch comes from the input.
fn config_options(max_epoch: i64) -> Option<TrainerOptions> {
    Some(TrainerOptions { steps_per_epoch: None, ..options(0, max_epoch) })
}

fn drop_counting_feed(drops: &Arc<AtomicUsize>) -> Input<'static> {
    let guard = DropGuard(Arc::clone(drops));
    Input::from_feed(move |_| -> Result<_> {
        let _keep = &guard;
        Ok(None)
    })
    .unwrap()
}

fn drop_counting_callback<'a>(drops: &Arc<AtomicUsize>, name: &str, events: Events) -> Callback<'a> {
    let guard = DropGuard(Arc::clone(drops));
    Callback::on(events, move |_, _, _| {
        let _keep = &guard;
        Ok(Flow::Continue)
    })
    .name(name)
    .build()
    .unwrap()
}

#[test]
fn a_train_config_runs_the_init_hook_once_before_before_train() {
    let probe = Probe::default();
    let model = make_model(&probe, How::Plain);
    model.set_optimizer(&Optimizer::new("adam").unwrap()).unwrap();
    let seen = RefCell::new(Vec::<String>::new());
    let records = Cell::new(0usize);
    let init_calls = Cell::new(0usize);
    let drops = Arc::new(AtomicUsize::new(0));
    // The init hook sets b to 7; the BEFORE_TRAIN callback must see it.
    let init = || -> InitFn<'_> {
        let guard = DropGuard(Arc::clone(&drops));
        let (seen, init_calls, probe) = (&seen, &init_calls, &probe);
        InitFn::new(move |m| {
            let _keep = &guard;
            init_calls.set(init_calls.get() + 1);
            assert_eq!(probe.builds.load(Ordering::SeqCst), 1, "the hook runs after the build call");
            assert_eq!(m.variable_names()?, vec!["W", "b"]);
            m.set_variable("b", &Tensor::from_slice(&[7f32], &[1])?)?;
            seen.borrow_mut().push("init".to_owned());
            Ok(Flow::Continue)
        })
    };
    let callback = Callback::on(Events::SETUP | Events::BEFORE_TRAIN, |_, event, _| {
        let b = model.variable("b")?.to_vec::<f32>()?;
        seen.borrow_mut().push(format!("{event:?} b={}", b[0]));
        Ok(Flow::Continue)
    })
    .name("check_b")
    .build()
    .unwrap();
    let monitor = Callback::on(Events::RECORD, |_, _, record| {
        if record.is_some_and(|r| r.name == "cost") {
            records.set(records.get() + 1);
        }
        Ok(Flow::Continue)
    })
    .name("count_costs")
    .build()
    .unwrap();
    let config = TrainConfig {
        options: config_options(2),
        callbacks: vec![callback],
        monitors: vec![monitor],
        init: Some(init()),
        ..TrainConfig::new(&model, input(16))
    };
    assert!(format!("{config:?}").starts_with("TrainConfig { options: Some("));
    let mut t = Trainer::from_config(config).unwrap();
    assert_eq!(init_calls.get(), 0); // not before run
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(t.global_step(), 8); // steps_per_epoch from the input: 64 / 16 = 4
    assert_eq!(init_calls.get(), 1);
    assert_eq!(*seen.borrow(), vec!["Setup b=0.5", "init", "BeforeTrain b=7"]);
    assert_eq!(records.get(), 2); // the monitor got the cost's moving average after each epoch
    assert_eq!(drops.load(Ordering::SeqCst), 0); // the trainer owns the hook
    drop(t);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    // launch_train: the same in one call; a stop comes back as the outcome.
    let stopper = Callback::on(Events::TRIGGER_EPOCH, |_, _, _| Ok::<_, Error>(Flow::stop("one epoch is enough")))
        .name("stop")
        .build()
        .unwrap();
    let config = TrainConfig {
        options: config_options(5),
        callbacks: vec![stopper],
        init: Some(init()),
        ..TrainConfig::new(&model, input(16))
    };
    assert_eq!(launch_train(config).unwrap(), RunOutcome::Stopped("one epoch is enough".into()));
    assert_eq!(init_calls.get(), 2);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    // Without options (the defaults) and without a hook: made, not run
    // (the default console would write into the test's output).
    let t = Trainer::from_config(TrainConfig::new(&model, input(32))).unwrap();
    assert_eq!((t.epoch_num(), t.global_step()), (0, 0));
    drop(t);
    assert_eq!(init_calls.get(), 2);
}

#[test]
fn the_init_hook_error_and_stop_come_back_unchanged() {
    let probe = Probe::default();
    let model = make_model(&probe, How::Plain);
    model.set_optimizer(&sgd(0.1)).unwrap();
    let after_train = Cell::new(0usize);
    let after = || {
        Callback::on(Events::AFTER_TRAIN, |_, _, _| {
            after_train.set(after_train.get() + 1);
            Ok(Flow::Continue)
        })
        .name("after")
        .build()
        .unwrap()
    };
    let config = TrainConfig {
        options: config_options(3),
        callbacks: vec![after()],
        init: Some(InitFn::new(|_| Err(Error::new(Code::Io, "no checkpoint to restore")))),
        ..TrainConfig::new(&model, input(16))
    };
    assert_eq!(launch_train(config).unwrap_err(), Error::new(Code::Io, "no checkpoint to restore"));
    assert_eq!(after_train.get(), 1);
    let config = TrainConfig {
        options: config_options(3),
        callbacks: vec![after()],
        init: Some(InitFn::new(|_| Ok::<_, Error>(Flow::stop("nothing to train")))),
        ..TrainConfig::new(&model, input(16))
    };
    let mut t = Trainer::from_config(config).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("nothing to train".into()));
    assert_eq!(t.global_step(), 0);
    assert_eq!(after_train.get(), 2);
}

#[test]
fn a_bad_train_config_still_takes_the_input_callbacks_monitors_and_hook() {
    let probe = Probe::default();
    let model = make_model(&probe, How::Plain);
    let drops = Arc::new(AtomicUsize::new(0));
    let init_calls = Cell::new(0usize);
    let config = |options: TrainerOptions| {
        let guard = DropGuard(Arc::clone(&drops));
        let init_calls = &init_calls;
        TrainConfig {
            options: Some(options),
            callbacks: vec![drop_counting_callback(&drops, "a", Events::ALL)],
            monitors: vec![drop_counting_callback(&drops, "m", Events::RECORD)],
            init: Some(InitFn::new(move |_| {
                let _keep = &guard;
                init_calls.set(init_calls.get() + 1);
                Ok(Flow::Continue)
            })),
            ..TrainConfig::new(&model, drop_counting_feed(&drops))
        }
    };
    // Refused by the library (tpt_trainer_new): everything is freed.
    let e = Trainer::from_config(config(TrainerOptions { starting_epoch: 0, ..options(1, 1) })).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("starting_epoch"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    let e = launch_train(config(TrainerOptions { starting_epoch: 0, ..options(1, 1) })).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(drops.load(Ordering::SeqCst), 8);
    // Refused by the binding before any C call: dropped the same.
    let e = Trainer::from_config(config(options(-1, 1))).unwrap_err();
    assert!(e.message().contains("steps_per_epoch must be >= 0"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 12);
    assert_eq!(init_calls.get(), 0);

    // No model (only the raw API can say that): tpt_launch_train takes the
    // input and the callbacks all the same.
    let drops = Arc::new(AtomicUsize::new(0));
    let callbacks = [drop_counting_callback(&drops, "a", Events::ALL).into_raw()];
    let mut c = tptrain::sys::TPT_TRAIN_CONFIG_INIT;
    c.input = drop_counting_feed(&drops).into_raw();
    c.callbacks = callbacks.as_ptr();
    c.n_callbacks = 1;
    let e = unsafe { Error::check(tptrain::sys::tpt_launch_train(&c)) }.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("argument 'config->model' is NULL"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[test]
fn a_panic_in_the_init_hook_is_resumed() {
    let probe = Probe::default();
    let model = make_model(&probe, How::Plain);
    model.set_optimizer(&sgd(0.1)).unwrap();
    let after_train = Cell::new(0usize);
    let config = || TrainConfig {
        options: config_options(3),
        callbacks: vec![Callback::on(Events::AFTER_TRAIN, |_, _, _| {
            after_train.set(after_train.get() + 1);
            Ok(Flow::Continue)
        })
        .name("after")
        .build()
        .unwrap()],
        init: Some(InitFn::new(|m| panic!("init boom with {} variables", m.variable_names().unwrap().len()))),
        ..TrainConfig::new(&model, input(16))
    };
    let mut t = Trainer::from_config(config()).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "init boom with 2 variables");
    assert_eq!(after_train.get(), 1); // AFTER_TRAIN still ran
    assert_eq!(t.global_step(), 0);
    drop(t);
    let payload = catch_unwind(AssertUnwindSafe(|| launch_train(config()))).unwrap_err();
    assert_eq!(panic_message(&*payload), "init boom with 2 variables");
    assert_eq!(after_train.get(), 2);
    // Nothing is left pending.
    assert_eq!(train(&model, 2, 1).unwrap(), RunOutcome::Finished);
}

// ------------------------------------------------------------ TorchScript models

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("tptrain-rs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The module of tests/py/test_torchscript.py, smaller: y ~ fc(x) with a
/// buffer, forward returning (cost, {"prediction": p}).
const SCRIPT: &str = r#"
import sys
from typing import Dict, Tuple

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 1)
        self.register_buffer("scale", torch.ones(1))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        p = self.fc(x) * self.scale
        return torch.nn.functional.mse_loss(p, y), {"prediction": p}


torch.manual_seed(0)
torch.jit.save(torch.jit.script(Net()), sys.argv[1])
"#;

const PYTHON: &str = "/usr/bin/python3";

/// Scripts and saves the module into `dir` with Debian's python3-torch;
/// `None` (the test is skipped) when /usr/bin/python3 cannot import torch.
fn scripted_module(dir: &Path) -> Option<PathBuf> {
    match std::process::Command::new(PYTHON).args(["-c", "import torch"]).output() {
        Ok(o) if o.status.success() => {}
        _ => {
            eprintln!("skipped: {PYTHON} cannot import torch (install python3-torch)");
            return None;
        }
    }
    let script = dir.join("make_module.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let path = dir.join("module.pt");
    let out = std::process::Command::new(PYTHON).arg(&script).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(path)
}

#[test]
fn a_torchscript_module_trains_saves_and_loads_again() {
    let dir = TempDir::new("torchscript");
    let Some(path) = scripted_module(&dir.0) else { return };
    let model = Model::from_torchscript(&path, &signature()).unwrap();
    let mut names = model.variable_names().unwrap(); // no build call needed
    names.sort();
    assert_eq!(names, vec!["fc/bias", "fc/weight", "scale"]);
    let before = model.variable("fc/weight").unwrap().to_vec::<f32>().unwrap();
    model.set_optimizer(&sgd(0.1)).unwrap();
    let costs = RefCell::new(Vec::new());
    let mut t = Trainer::new(&options(4, 5)).unwrap();
    t.set_model(&model, input(16)).unwrap();
    t.add_callback(cost_log(&costs)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    drop(t);
    let costs = costs.into_inner();
    assert_eq!(costs.len(), 20);
    assert!(costs[19] < costs[0], "{costs:?}");
    let trained = model.variable("fc/weight").unwrap().to_vec::<f32>().unwrap();
    assert_ne!(trained, before);
    assert_eq!(model.variable("scale").unwrap().to_vec::<f32>().unwrap(), vec![1.0]); // a buffer: not trained

    let saved = dir.0.join("trained.pt");
    model.save_torchscript(&saved).unwrap();
    let again = Model::from_torchscript(&saved, &signature()).unwrap();
    assert_eq!(again.variable("fc/weight").unwrap().to_vec::<f32>().unwrap(), trained);
    assert_eq!(
        again.variable("fc/bias").unwrap().to_vec::<f32>().unwrap(),
        model.variable("fc/bias").unwrap().to_vec::<f32>().unwrap()
    );
    // Both infer the same, with the outputs of the Dict.
    let (x, y) = regression_data(4);
    let a = model.infer(&[&x, &y], &["prediction", "cost"]).unwrap();
    let b = again.infer(&[&x, &y], &["prediction", "cost"]).unwrap();
    assert_eq!(a[0].shape(), vec![4, 1]);
    assert_eq!(a[0].to_vec::<f32>().unwrap(), b[0].to_vec::<f32>().unwrap());
    assert_eq!(a[1].item().unwrap(), b[1].item().unwrap());
    // The signature is checked as for any model.
    let e = again.infer(&[&y, &x], &["prediction"]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

#[test]
fn torchscript_errors() {
    let e = Model::from_torchscript("/nonexistent/model.pt", &signature()).unwrap_err();
    assert_eq!(e.code(), Code::Io);
    assert!(e.message().contains("cannot load the TorchScript module /nonexistent/model.pt"), "{e}");
    let dir = TempDir::new("torchscript-errors");
    let garbage = dir.0.join("garbage.pt");
    std::fs::write(&garbage, b"garbage").unwrap();
    assert_eq!(Model::from_torchscript(&garbage, &signature()).unwrap_err().code(), Code::Io);
    let e = Model::from_torchscript("a\0b.pt", &signature()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("contains a NUL byte"), "{e}");
    let probe = Probe::default();
    let m = make_model(&probe, How::Plain);
    let e = m.save_torchscript(dir.0.join("x.pt")).unwrap_err();
    assert_eq!(e.code(), Code::Unsupported);
    assert!(e.message().contains("not made from TorchScript"), "{e}");
}

/// The linear regression as TorchScript source: a helper method, a
/// trainable weight and bias, a model-only buffer.
const SOURCE: &str = "
def forward(self, x, y):
    p = self.predict(x) * self.scale
    return torch.mean((p - y) * (p - y)), {'prediction': p}

def predict(self, x):
    return torch.matmul(x, self.w.t()) + self.b
";

fn source_params() -> Vec<TorchScriptParam> {
    vec![
        TorchScriptParam::new("w", &[1, 3], VariableOptions::zeros()),
        TorchScriptParam::new("b", &[1], VariableOptions::constant(0.5)),
        TorchScriptParam::new("scale", &[1], VariableOptions::constant(1.0).model_only()),
    ]
}

#[test]
fn a_model_compiled_from_torchscript_source_trains_saves_and_loads_again() {
    let model = Model::from_torchscript_source(SOURCE, &source_params(), &signature()).unwrap();
    assert_eq!(model.variable_names().unwrap(), vec!["w", "b", "scale"]); // parameters, then buffers
    assert_eq!(model.variable("w").unwrap().shape(), vec![1, 3]);
    assert_eq!(model.variable("w").unwrap().to_vec::<f32>().unwrap(), vec![0.0; 3]);
    assert_eq!(model.variable("b").unwrap().to_vec::<f32>().unwrap(), vec![0.5]);
    model.set_optimizer(&sgd(0.1)).unwrap();
    let costs = RefCell::new(Vec::new());
    let mut t = Trainer::new(&options(4, 25)).unwrap();
    t.set_model(&model, input(16)).unwrap();
    t.add_callback(cost_log(&costs)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    drop(t);
    let costs = costs.into_inner();
    assert_eq!(costs.len(), 100);
    assert!(costs[99] < 0.1 * costs[0], "{costs:?}");
    // y = x . (1, -2, 3) + 1, learned
    let w = model.variable("w").unwrap().to_vec::<f32>().unwrap();
    assert!(close(&w, &[1.0, -2.0, 3.0], 0.1), "{w:?}");
    assert_eq!(model.variable("scale").unwrap().to_vec::<f32>().unwrap(), vec![1.0]); // a buffer: not trained

    let dir = TempDir::new("torchscript-source");
    let saved = dir.0.join("trained.pt");
    model.save_torchscript(&saved).unwrap();
    let again = Model::from_torchscript(&saved, &signature()).unwrap();
    for name in ["w", "b", "scale"] {
        assert_eq!(
            again.variable(name).unwrap().to_vec::<f32>().unwrap(),
            model.variable(name).unwrap().to_vec::<f32>().unwrap(),
            "{name}"
        );
    }
    let (x, y) = regression_data(4);
    let a = model.infer(&[&x, &y], &["prediction"]).unwrap();
    let b = again.infer(&[&x, &y], &["prediction"]).unwrap();
    assert_eq!(a[0].to_vec::<f32>().unwrap(), b[0].to_vec::<f32>().unwrap());
}

#[test]
fn torchscript_source_errors() {
    let bad = |source: &str, params: &[TorchScriptParam], inputs: &[InputSpec], code: Code, fragment: &str| {
        let e = Model::from_torchscript_source(source, params, inputs).unwrap_err();
        assert_eq!(e.code(), code, "{e}");
        assert!(e.message().contains(fragment), "{e} lacks {fragment:?}");
    };
    let inv = Code::InvalidArgument;
    bad(
        "def forward(self, x, y):\n    return x +\n",
        &source_params(),
        &signature(),
        inv,
        "Model::from_torchscript_source: cannot compile the TorchScript source: ",
    );
    bad("def forward(self, x, y):\n    return self.nope\n", &[], &signature(), inv, "nope");
    bad("def helper(self, x):\n    return x\n", &[], &signature(), inv, "the TorchScript source has no forward method");
    bad(SOURCE, &source_params(), &signature()[..1], inv, "takes 2 inputs, the input signature has 1");
    let one = |name: &str, shape: &[i64], o: VariableOptions| vec![TorchScriptParam::new(name, shape, o)];
    let d = VariableOptions::default();
    bad(SOURCE, &one("a b", &[1], d), &signature(), inv, "params[0].name 'a b' is not a TorchScript identifier");
    bad(SOURCE, &one("def", &[1], d), &signature(), inv, "params[0].name 'def' is a reserved word");
    bad(SOURCE, &one("w", &[0], d), &signature(), inv, "params[0].shape [0] ('w'): dimensions are >= 1");
    bad(
        SOURCE,
        &one("w", &[1], d.with_dtype(DType::I64)),
        &signature(),
        inv,
        "params[0] ('w') is trainable and needs a floating dtype, got Long",
    );
    let twice = [TorchScriptParam::new("w", &[1], d), TorchScriptParam::new("w", &[1], d)];
    bad(SOURCE, &twice, &signature(), inv, "params[1].name 'w' is used twice");
    bad("def forward(self, x, y):\0", &[], &signature(), inv, "argument 'source' contains a NUL byte");
    bad(SOURCE, &one("a\0b", &[1], d), &signature(), inv, "params[0].name contains a NUL byte");
}
