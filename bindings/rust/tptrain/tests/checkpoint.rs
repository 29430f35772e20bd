//! Checkpoints from Rust: ModelSaver and exact resume (a run stopped
//! mid-epoch and resumed, with `Trainer::resume` and with `auto_resume`,
//! ends with the variables of an uninterrupted run, bit for bit), a
//! callback's own state across the resume, BestSaver, `Model::restore` and
//! its errors. The C twin is tests/c/test_checkpoint.c.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tptrain::ops::{self, Arg};
use tptrain::{
    manual_seed, BestSaver, Callback, CallbackBuilder, Code, DType, EarlyStopping, Events, Every, Flow, Input,
    InputSpec, Model, ModelSaver, Optimizer, Predictor, Progress, RestoreOptions, Result, RunOutcome,
    ScheduledHyperParam, Tensor, Trainer, TrainerOptions, VariableOptions,
};

fn signature() -> Vec<InputSpec> {
    vec![InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])]
}

fn model(width: i64) -> Model<'static> {
    let m = Model::new(&signature(), move |tower, inputs| -> Result<()> {
        let w = tower.variable("fc/W", &[width, 3], &VariableOptions::default())?;
        let b = tower.variable("fc/b", &[width], &VariableOptions::constant(0.1))?;
        let h = ops::call1("aten::linear", &[Arg::Tensor(&inputs[0]), Arg::Tensor(&w), Arg::Tensor(&b)])?;
        let h = tower.dropout(&h, 0.25)?;
        let p = ops::call1("aten::sum", &[Arg::Tensor(&h), Arg::IntList(&[1]), Arg::Bool(true)])?;
        let cost = ops::call1("aten::mse_loss", &[Arg::Tensor(&p), Arg::Tensor(&inputs[1])])?;
        tower.set_output("p", &p)?;
        tower.set_cost(&cost)
    })
    .unwrap();
    let o = Optimizer::new("adam").unwrap();
    o.set("learning_rate", 0.05).unwrap();
    m.set_optimizer(&o).unwrap();
    m
}

fn input() -> Input<'static> {
    let x: Vec<f32> = (0..60).map(|i| ((i * 7 % 13) as f32) / 13.0 - 0.5).collect();
    let y: Vec<f32> = (0..20).map(|i| ((i % 5) as f32) / 5.0).collect();
    let x = Tensor::from_vec(x, &[20, 3]).unwrap();
    let y = Tensor::from_vec(y, &[20, 1]).unwrap();
    Input::from_tensors(&[&x, &y], 4, Some(9)).unwrap()
}

fn options(dir: &Path, epochs: i64) -> TrainerOptions {
    TrainerOptions {
        max_epoch: epochs,
        steps_per_epoch: Some(5),
        logdir: Some(dir.to_path_buf()),
        logdir_action: tptrain::LogdirAction::Keep,
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        ..Default::default()
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpt-rust-ckpt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn weights(m: &Model<'_>) -> Vec<f32> {
    m.variable("fc/W").unwrap().to_vec::<f32>().unwrap()
}

/// A callback that puts the scalar "val" after each epoch: `vals[epoch]`.
fn put_val(vals: &[f64]) -> CallbackBuilder<'static> {
    let vals = vals.to_vec();
    Callback::on(Events::TRIGGER_EPOCH, move |ctx, _, _| {
        ctx.put_scalar("val", vals[ctx.epoch_num() as usize])?;
        Ok(Flow::Continue)
    })
}

/// A callback with state: the steps it saw, kept across resumes; it
/// interrupts the run at `stop_at` (a stop request: a rerun goes on).
fn counter(seen: &Rc<Cell<u64>>, stop_at: i64) -> Callback<'static> {
    let (a, b, c) = (seen.clone(), seen.clone(), seen.clone());
    Callback::on(Events::TRIGGER_STEP, move |ctx, _, _| {
        a.set(a.get() + 1);
        if ctx.global_step() == stop_at {
            ctx.request_stop();
        }
        Ok(Flow::Continue)
    })
    .name("counter")
    .all_workers()
    .state(
        move || Ok(b.get().to_le_bytes().to_vec()),
        move |bytes| {
            let bytes: [u8; 8] =
                bytes.try_into().map_err(|_| tptrain::Error::new(Code::InvalidArgument, "8 bytes expected"))?;
            c.set(u64::from_le_bytes(bytes));
            Ok(())
        },
    )
    .build()
    .unwrap()
}

#[test]
fn resume_mid_epoch_equals_an_uninterrupted_run() {
    let dir = tempdir("exact");
    manual_seed(3).unwrap();
    let a = model(4);
    let mut t = Trainer::new(&options(&tempdir("exact-ref"), 3)).unwrap();
    t.set_model(&a, input()).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    let want = weights(&a);
    let slot = |m: &Model<'_>, s: &str| m.optimizer_slot("fc/W", s).unwrap().to_vec::<f32>().unwrap();
    let want_moment = slot(&a, "exp_avg");
    assert_eq!(a.optimizer_slot("fc/W", "step").unwrap().to_vec::<i64>().unwrap(), vec![15]);
    let e = a.optimizer_slot("fc/W", "momentum_buffer").unwrap_err();
    assert_eq!(e.code(), tptrain::Code::NotFound);
    assert!(e.message().contains("it keeps: exp_avg, exp_avg_sq, step"), "{e}");

    // Interrupted at step 8, with a checkpoint every 3 steps (6) and one at
    // the interruption (8).
    manual_seed(3).unwrap();
    let seen = Rc::new(Cell::new(0));
    let b = model(4);
    let mut t = Trainer::new(&options(&dir, 3)).unwrap();
    t.set_model(&b, input()).unwrap();
    t.add_callback(counter(&seen, 8)).unwrap();
    t.add_callback(ModelSaver::new().every(Every::epochs(1).and_steps(3))).unwrap();
    assert!(matches!(t.run().unwrap(), RunOutcome::Stopped(_)));
    assert!(dir.join("model-6").exists() && dir.join("model-8").exists() && dir.join("checkpoint").exists());
    drop(t);

    // A new process would start here: resume from the directory.
    manual_seed(77).unwrap(); // the random state comes from the checkpoint
    seen.set(1000); // and so does the callback's
    let c = model(4);
    let mut t = Trainer::new(&options(&dir, 3)).unwrap();
    t.set_model(&c, input()).unwrap();
    t.add_callback(counter(&seen, -1)).unwrap();
    assert_eq!(t.steps_per_epoch(), 5, "the options'");
    assert_eq!(t.resumed_from(), None);
    t.resume(&dir).unwrap();
    assert_eq!(t.resumed_from(), Some(dir.join("model-8")), "the directory's latest checkpoint");
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(t.global_step(), 15);
    assert_eq!(seen.get(), 15, "8 steps before the checkpoint, 7 after");
    assert_eq!(weights(&c), want, "bit for bit");
    assert_eq!(slot(&c, "exp_avg"), want_moment, "the optimizer's state too");
    drop(t);

    // auto_resume from the interrupted run's checkpoint (the resumed run had
    // no saver) goes on to the same end.
    let d = model(4);
    let mut t = Trainer::new(&TrainerOptions { auto_resume: true, ..options(&dir, 3) }).unwrap();
    t.set_model(&d, input()).unwrap();
    t.add_callback(ModelSaver::new().every(Every::epochs(1).and_steps(3))).unwrap();
    t.run().unwrap();
    assert_eq!(t.global_step(), 15);
    assert_eq!(weights(&d), want);
    assert_eq!(t.resumed_from(), Some(dir.join("model-8")), "auto_resume's: the latest checkpoint");
}

/// EarlyStopping ends a run at epoch 3 of 5 and that epoch is saved, with
/// the best saver and EarlyStopping added before the ModelSaver and the
/// producer of "val"; a rerun with `auto_resume` trains nothing and ends
/// with the same reason; `continue_stopped` trains on; a misspelt watched
/// name fails at the first epoch's end. The C twin is
/// a_stopped_run_stays_stopped.
#[test]
fn a_stopped_run_stays_stopped() {
    let dir = tempdir("stopped");
    let run = |continue_stopped: bool| -> (Trainer<'static>, RunOutcome, Model<'static>) {
        let m = model(4);
        let mut t = Trainer::new(&TrainerOptions { auto_resume: true, continue_stopped, ..options(&dir, 5) }).unwrap();
        t.set_model(&m, input()).unwrap();
        let vals = [0.0, 0.5, 0.4, 0.45, 0.9, 0.9];
        t.add_callback(EarlyStopping::new("val").patience(2).maximize()).unwrap();
        t.add_callback(BestSaver::max("val")).unwrap();
        t.add_callback(ModelSaver::new()).unwrap();
        t.add_callback(put_val(&vals)).unwrap();
        let outcome = t.run().unwrap();
        (t, outcome, m)
    };
    let (t, first, _m) = run(false);
    let reason = first.stop_reason().expect("stopped").to_string();
    assert!(reason.contains("EarlyStopping: val has not risen above its best, 0.5"), "{reason}");
    assert_eq!(t.global_step(), 15);
    assert!(dir.join("model-15").exists(), "the stopping epoch was saved");
    drop(t);
    let (t, again, _m) = run(false);
    assert_eq!(again, first, "the rerun trains nothing and gives the same reason");
    assert_eq!(t.global_step(), 15);
    assert_eq!(t.resumed_from(), Some(dir.join("model-15")));
    drop(t);
    let (t, on, _m) = run(true);
    assert_eq!(on, RunOutcome::Finished);
    assert_eq!(t.global_step(), 25);
    assert_eq!(t.best_checkpoint("val").unwrap(), Some(dir.join("max-val")));
    drop(t);

    let m = model(4);
    let mut t = Trainer::new(&options(&tempdir("typo"), 3)).unwrap();
    t.set_model(&m, input()).unwrap();
    t.add_callback(EarlyStopping::new("vall")).unwrap();
    t.add_callback(Callback::on(Events::TRIGGER_EPOCH, |ctx, _, _| {
        ctx.put_scalar("val", 1.0)?;
        Ok(Flow::Continue)
    }))
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message().contains(
            "no callback or monitor has put the scalar 'vall' by the end of epoch 1; the scalars put are: val"
        ),
        "{}",
        e.message()
    );
}

/// A predictor of x alone, made from the best checkpoint on a model not
/// built yet, equals `restore` + `infer` with the labels, and gives the same
/// from several threads at once. The C twin is
/// predictor_from_the_best_checkpoint.
#[test]
fn predictor_from_the_best_checkpoint() {
    let dir = tempdir("predictor");
    let m = model(4);
    let mut t = Trainer::new(&options(&dir, 3)).unwrap();
    t.set_model(&m, input()).unwrap();
    let vals = [0.0, 3.0, 1.0, 2.0];
    t.add_callback(BestSaver::max("val")).unwrap();
    t.add_callback(ModelSaver::new()).unwrap();
    t.add_callback(put_val(&vals)).unwrap();
    t.run().unwrap();
    let best = t.best_checkpoint("val").unwrap().expect("kept");

    let x = Tensor::from_vec((0..15).map(|i| (i as f32) / 15.0 - 0.3).collect(), &[5, 3]).unwrap();
    let y = Tensor::from_vec(vec![0.0f32; 5], &[5, 1]).unwrap();
    let reference = model(4);
    reference.restore(&best, &RestoreOptions::new()).unwrap();
    let want = reference.infer(&[&x, &y], &["p"]).unwrap()[0].to_vec::<f32>().unwrap();
    let last = m.infer(&[&x, &y], &["p"]).unwrap()[0].to_vec::<f32>().unwrap();
    assert_ne!(want, last, "the best checkpoint (epoch 1) is not the last");

    let fresh = model(4);
    let p = Predictor::builder(&fresh).inputs(&["x"]).outputs(&["p"]).checkpoint(&best).build().unwrap();
    assert_eq!(p.predict(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(), want);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..10 {
                    assert_eq!(p.predict(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(), want);
                }
            });
        }
    });
    let e = p.predict(&[&x, &y]).unwrap_err();
    assert!(e.message().contains("n_inputs is 2; the predictor takes 1 (x)"), "{}", e.message());
    let e = Predictor::builder(&fresh).inputs(&["z"]).outputs(&["p"]).build().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("the model has no input 'z'; its inputs: x, y"), "{}", e.message());
    let e = Predictor::builder(&fresh).build().unwrap_err();
    assert!(e.message().contains("n_outputs is 0"), "{}", e.message());
}

#[test]
fn best_saver_and_restore_by_name() {
    let dir = tempdir("best");
    let m = model(4);
    let mut t = Trainer::new(&options(&dir, 3)).unwrap();
    t.set_model(&m, input()).unwrap();
    let vals = [0.0, 2.0, 1.0, 3.0];
    t.add_callback(ModelSaver::new()).unwrap();
    t.add_callback(put_val(&vals)).unwrap();
    t.add_callback(BestSaver::min("val")).unwrap();
    t.run().unwrap();
    assert!(dir.join("min-val").exists());
    assert_eq!(t.best_checkpoint("val").unwrap(), Some(dir.join("min-val")), "Lightning's best_model_path");
    assert_eq!(t.best_checkpoint("loss").unwrap_err().code(), Code::NotFound);

    // the best checkpoint (epoch 2, step 10) restores into a model, which the
    // restore builds first
    let other = model(4);
    assert_eq!(other.restore(dir.join("min-val"), None).unwrap(), 2, "None: the defaults");
    assert_eq!(other.restore(dir.join("min-val"), &RestoreOptions::new()).unwrap(), 2);
    // another architecture: an error naming the variable, nothing changed
    let wide = model(5);
    wide.build().unwrap();
    let before = weights(&wide);
    let e = wide.restore(&dir, &RestoreOptions::new()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("shapes differ: fc/W"), "{}", e.message());
    assert_eq!(weights(&wide), before);
    // asked to skip mismatches: only what fits
    assert_eq!(wide.restore(&dir, &RestoreOptions::new().ignore_shape_mismatch(true)).unwrap(), 0);
    let e = other.restore(dir.join("nothing"), &RestoreOptions::new()).unwrap_err();
    assert_eq!(e.code(), Code::Io);
    let e = other.restore(&dir, &RestoreOptions::new().prefix("tower1/")).unwrap_err();
    assert!(e.message().contains("missing from the file: fc/W (as 'tower1/fc/W')"), "{}", e.message());
    assert_eq!(other.restore(&dir, &RestoreOptions::new().map("fc/W", "fc/W").map("fc/b", "fc/b")).unwrap(), 2);
}

#[test]
fn saver_options_and_misplaced_saves_are_errors() {
    let e = ModelSaver::new().every(Every::default()).build().unwrap_err();
    assert!(e.message().contains("never save"), "{}", e.message());
    let e = BestSaver::max("acc").filename("a/b").build().unwrap_err();
    assert!(e.message().contains("a/b"), "{}", e.message());
    let mut t = Trainer::new(&TrainerOptions { steps_per_epoch: Some(1), ..Default::default() }).unwrap();
    let e = t.save_checkpoint("/tmp/never").unwrap_err();
    assert_eq!(e.code(), Code::State);
    let e = t.resume("/nonexistent/model-1").unwrap_err();
    assert_eq!(e.code(), Code::Io);
}

#[test]
fn a_schedule_sets_the_learning_rate_after_its_epochs() {
    let m = model(2);
    let o = Optimizer::new("sgd").unwrap();
    o.set("learning_rate", 0.5).unwrap();
    m.set_optimizer(&o).unwrap();
    let seen = Rc::new(std::cell::RefCell::new(Vec::new()));
    let s2 = seen.clone();
    let mut t = Trainer::new(&TrainerOptions {
        max_epoch: 3,
        steps_per_epoch: Some(2),
        console: false,
        progress: Progress::Off,
        ..Default::default()
    })
    .unwrap();
    t.set_model(&m, input()).unwrap();
    t.add_callback(ScheduledHyperParam::new(&o, "learning_rate", &[(2, 0.25), (0, 0.125)])).unwrap();
    t.add_callback(Callback::on(Events::BEFORE_EPOCH, move |ctx, _, _| {
        s2.borrow_mut().push(ctx.optimizer()?.get("learning_rate")?);
        Ok(Flow::Continue)
    }))
    .unwrap();
    t.run().unwrap();
    assert_eq!(*seen.borrow(), vec![0.125, 0.125, 0.25]);
    let e = ScheduledHyperParam::new(&o, "lr", &[(1, 0.1)]).build().unwrap_err();
    assert!(e.message().contains("learning_rate"), "{}", e.message());
    let e = ScheduledHyperParam::new(&o, "learning_rate", &[]).build().unwrap_err();
    assert!(e.message().contains("n_points"), "{}", e.message());
    // The name the type had first still builds the same callback.
    #[allow(deprecated)]
    let e = tptrain::HyperParamSchedule::new(&o, "lr", &[(1, 0.1)]).build().unwrap_err();
    assert!(e.message().contains("learning_rate"), "{}", e.message());
}
