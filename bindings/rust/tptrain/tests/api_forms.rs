//! The API's forms as the docs write them (issue 34, item 5): closures
//! return `tptrain::Result` and need no annotation of their result type;
//! builders, callbacks and `Result`s of them go wherever a callback goes;
//! options that are usually the defaults are `None`; choices are enums
//! (`Order`, `Remainder`, `InnerState`) and periods an `Every`, never a bare
//! `bool` or `0`. Each test also checks what the form does.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tptrain::{
    nn, Activation, Callback, Code, DType, DataFlow, EarlyStopping, Error, Events, Every, FakeOptions, Flow,
    HyperParamFunc, InferenceRunner, Inferencer, InitFn, InnerState, Input, InputSpec, IntoCallback, LayerOptions,
    Model, ModelSaver, Optimizer, Order, Progress, Remainder, RunOutcome, Tensor, ThroughputTracker, TrainConfig,
    Trainer, TrainerOptions,
};

fn quiet(steps_per_epoch: i64, max_epoch: i64) -> TrainerOptions {
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

fn signature() -> Vec<InputSpec> {
    vec![InputSpec::new("x", DType::F32, &[-1, 2]), InputSpec::new("y", DType::F32, &[-1, 1])]
}

/// 8 rows of x `[8, 2]` and y `[8, 1]`.
fn rows() -> (Tensor, Tensor) {
    let x: Vec<f32> = (0..16).map(|i| (i % 5) as f32 / 5.0).collect();
    let y: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
    (Tensor::from_vec(x, &[8, 2]).unwrap(), Tensor::from_vec(y, &[8, 1]).unwrap())
}

/// The values of the first component of one pass of `df`.
fn pass(df: &DataFlow<'_>) -> Vec<f64> {
    df.iter().map(|dp| dp.unwrap()[0].item().unwrap()).collect()
}

/// A model whose tower function uses `?` with no annotation, layers with
/// `None` options and a variable with `None` options.
fn model<'a>() -> Model<'a> {
    let model = Model::new(&signature(), |tower, inputs| {
        let h = tower.fc("fc0", &inputs[0], 4, &LayerOptions::default().activation(Activation::Relu))?;
        let p = tower.fc("fc1", &h, 1, None)?;
        let scale = tower.variable("scale", &[1], None)?;
        let p = p.mul(&scale)?;
        tower.set_output("prediction", &p)?;
        tower.set_cost(&nn::mse(&p, &inputs[1])?)
    })
    .unwrap();
    let sgd = Optimizer::new("sgd").unwrap();
    sgd.set("learning_rate", 0.05).unwrap();
    model.set_optimizer(&sgd).unwrap();
    model
}

#[test]
fn closures_of_every_kind_infer_their_result_type() {
    // The tower function (and fc/variable with None).
    let m = model();
    m.build().unwrap();
    assert_eq!(m.variable("fc1/W").unwrap().shape(), vec![1, 4]);
    assert_eq!(m.variable("scale").unwrap().shape(), vec![1]);

    // Dataflow closures: a source, a map, a component map, a parallel map
    // with the default options, a decoder.
    let mut i = 0i64;
    let counted = DataFlow::from_fn_sized(3, move || {
        i += 1;
        if i > 3 {
            i = 0;
            return Ok(None);
        }
        Ok(Some(vec![Tensor::from_slice(&[i as f32], &[])?]))
    })
    .unwrap();
    let doubled = counted
        .map(|dp| {
            let v = dp.get(0)?.item()?;
            dp.set(0, &Tensor::from_slice(&[(2.0 * v) as f32], &[])?)
        })
        .unwrap()
        .map_component(0, |t| Ok(Some(t.add(&Tensor::from_slice(&[1f32], &[])?)?)))
        .unwrap();
    assert_eq!(pass(&doubled), vec![3.0, 5.0, 7.0]);
    let (x, _) = rows();
    let mapped = DataFlow::from_tensors(&[&x], Order::Sequential)
        .unwrap()
        .parallel_map(None, |dp| {
            let row_sum = dp.get(0)?.sum()?;
            dp.set(0, &row_sum)
        })
        .unwrap();
    assert_eq!(mapped.iter().next().unwrap().unwrap()[0].shape(), Vec::<i64>::new());
    let dir = std::env::temp_dir().join(format!("tptrain-api-forms-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let paths: Vec<_> = (0..3).map(|i| dir.join(format!("{i}.txt"))).collect();
    for (i, p) in paths.iter().enumerate() {
        std::fs::write(p, format!("{}.5\n", i)).unwrap();
    }
    let decoded = DataFlow::from_files(&paths, Order::Sequential, 2, |dp, path, _| {
        let x: f32 = std::fs::read_to_string(path)?.trim().parse()?;
        dp.push(&Tensor::from_slice(&[x], &[])?)
    })
    .unwrap();
    assert_eq!(pass(&decoded), vec![0.5, 1.5, 2.5]);
    std::fs::remove_dir_all(&dir).unwrap();

    // A run_step with a hooked step, a callback, an enable_if predicate, a
    // hyper-parameter function, an inferencer and an init hook.
    let mut t = Trainer::new(&quiet(2, 3)).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|step| {
            step.set_output_scalar("loss", 0.5)?;
            Ok(Flow::Continue)
        })?;
        let step = ctx.global_step();
        ctx.put_scalar("step", step as f64)?;
        Ok(Flow::Continue)
    })
    .unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s = Rc::clone(&seen);
    t.add_callback(
        Callback::on(Events::TRIGGER_EPOCH, move |ctx, _, _| {
            let step = ctx.scalar_latest("step")?.value;
            s.borrow_mut().push(step);
            Ok(Flow::Continue)
        })
        .enable_if(|ctx| ctx.epoch_num() != 2),
    )
    .unwrap();
    let opt = Optimizer::new("sgd").unwrap();
    t.add_callback(HyperParamFunc::new(&opt, "learning_rate", |epochs, _| Ok(0.1 / (epochs + 1) as f64))).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(*seen.borrow(), vec![2.0, 6.0]);
    assert!((opt.get("learning_rate").unwrap() - 0.1 / 4.0).abs() < 1e-12);

    let m = model();
    let (x, y) = rows();
    let val = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap().batch(4, Remainder::Drop).unwrap();
    let batches = Rc::new(Cell::new(0));
    let (b1, b2, b3) = (Rc::clone(&batches), Rc::clone(&batches), Rc::clone(&batches));
    let counter = Inferencer::custom("counter", &["prediction"], move |outputs, rows| {
        assert_eq!(outputs[0].shape(), vec![rows, 1]);
        b1.set(b1.get() + 1);
        Ok(())
    })
    .before(move || {
        b2.set(0);
        Ok(())
    })
    .after(move |ctx| ctx.put_scalar("validation_batches", b3.get() as f64));
    let inits = Rc::new(Cell::new(0));
    let i2 = Rc::clone(&inits);
    let config = TrainConfig {
        options: Some(quiet(2, 2)),
        init: Some(InitFn::new(move |model| {
            model.set_variable("scale", &Tensor::from_slice(&[1f32], &[1])?)?;
            i2.set(i2.get() + 1);
            Ok(Flow::Continue)
        })),
        ..TrainConfig::new(&m, Input::from_tensors(&[&x, &y], 4, Some(1)).unwrap())
    }
    .callback(InferenceRunner::new(&m, &val).inferencer(counter))
    .unwrap();
    let mut t = Trainer::from_config(config).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(inits.get(), 1);
    assert_eq!(t.scalar_latest("validation_batches").unwrap().value, 2.0);

    // A feed input.
    let m = model();
    let mut fed = 0;
    let feed = Input::from_feed(move |n| {
        assert_eq!(n, 2);
        fed += 1;
        if fed > 3 {
            return Ok(None);
        }
        let (x, y) = rows();
        Ok(Some(vec![x, y]))
    })
    .unwrap();
    let mut t = Trainer::new(&quiet(10, 1)).unwrap();
    t.set_model(&m, feed).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped(tptrain::END_OF_DATA.into()));
    assert_eq!(t.global_step(), 3);
}

#[test]
fn a_closure_with_an_error_of_its_own_goes_through_on_fallible_or_error_wrap() {
    #[derive(Debug)]
    struct Hot;
    impl std::fmt::Display for Hot {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("too hot")
        }
    }
    impl std::error::Error for Hot {}

    let mut t = Trainer::new(&quiet(2, 2)).unwrap();
    t.set_run_step(|ctx| ctx.hooked_step(|_| Ok(Flow::Continue))).unwrap();
    t.add_callback(Callback::on_fallible(Events::TRIGGER_EPOCH, |_, _, _| Err(Hot))).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::Callback, "too hot"));
    assert!(std::error::Error::source(&e).unwrap().is::<Hot>());

    let mut t = Trainer::new(&quiet(2, 2)).unwrap();
    t.set_run_step(|ctx| {
        if ctx.global_step() == 1 {
            return Err(Error::wrap(Hot));
        }
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::Callback, "too hot"));
}

#[test]
fn builders_callbacks_and_results_go_wherever_a_callback_goes() {
    let m = model();
    let (x, y) = rows();
    let train = DataFlow::from_tensors(&[&x, &y], Order::Shuffled).unwrap().batch(4, Remainder::Drop).unwrap();
    let val = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap().batch(4, Remainder::Keep).unwrap();
    let epochs = Rc::new(Cell::new(0));
    let e2 = Rc::clone(&epochs);
    let records = Rc::new(Cell::new(0));
    let r2 = Rc::clone(&records);
    let config = TrainConfig { options: Some(quiet(2, 3)), ..TrainConfig::from_dataflow(&m, &train) }
        // A Result<Callback>, a catalogue builder, a CallbackBuilder, a Callback.
        .callback(Callback::inference_runner(&m, &val, &["cost"]))
        .unwrap()
        .callback(EarlyStopping::new("validation_cost").patience(10))
        .unwrap()
        .callback(Callback::on(Events::TRIGGER_EPOCH, move |_, _, _| {
            e2.set(e2.get() + 1);
            Ok(Flow::Continue)
        }))
        .unwrap()
        .callback(Callback::on(Events::TRIGGER_EPOCH, |_, _, _| Ok(Flow::Continue)).build())
        .unwrap()
        .monitor(Callback::on(Events::RECORD, move |_, _, record| {
            if record.is_some() {
                r2.set(r2.get() + 1);
            }
            Ok(Flow::Continue)
        }))
        .unwrap();
    assert_eq!((config.callbacks.len(), config.monitors.len()), (4, 1));
    let mut t = Trainer::from_config(config).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(epochs.get(), 3);
    assert!(records.get() > 0);
    assert_eq!(t.scalar_history("validation_cost").unwrap().len(), 3);

    // The error of a Result comes out where the callback is taken.
    let m = model();
    let failed = TrainConfig::from_dataflow(&m, &train)
        .callback(Err::<Callback, _>(Error::new(Code::State, "no callback")))
        .unwrap_err();
    assert_eq!(failed, Error::new(Code::State, "no callback"));
    let mut t = Trainer::new(&quiet(1, 1)).unwrap();
    let e = t.add_callback(ModelSaver::new().every(Every::steps(1).before_train())).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("before_train"), "{e}");
}

#[test]
fn every_spells_the_periods_of_the_wrappers() {
    assert_eq!(Every::default(), Every { steps: 0, epochs: 0, before_train: false });
    assert_eq!(Every::steps(25), Every { steps: 25, ..Default::default() });
    assert_eq!(Every::epochs(2).and_steps(10).before_train(), Every { steps: 10, epochs: 2, before_train: true });
    assert_eq!(Every::steps(3).and_epochs(4), Every { steps: 3, epochs: 4, before_train: false });

    // Global steps 1..8 (2 epochs of 4): the wrappers on a builder, and the
    // trait's methods on a catalogue builder.
    let log = Rc::new(RefCell::new(Vec::new()));
    let recorder = |tag: char, events: Events| {
        let log = Rc::clone(&log);
        Callback::on(events, move |ctx, event, _| {
            log.borrow_mut().push(format!("{tag}{:?}@{}", event, ctx.global_step()));
            Ok(Flow::Continue)
        })
    };
    let mut t = Trainer::new(&quiet(4, 2)).unwrap();
    t.set_run_step(|ctx| ctx.hooked_step(|_| Ok(Flow::Continue))).unwrap();
    t.add_callback(recorder('P', Events::TRIGGER).periodic_trigger(Every::steps(3).before_train())).unwrap();
    t.add_callback(recorder('C', Events::TRIGGER_STEP).periodic(Every::steps(4))).unwrap();
    t.add_callback(ThroughputTracker::new().periodic_trigger(Every::epochs(2))).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(t.scalar_history("Throughput (steps/sec)").unwrap().len(), 1);
    assert_eq!(
        *log.borrow(),
        ["PTrigger@0", "PTrigger@3", "CTriggerStep@4", "PTrigger@6", "CTriggerStep@8"].map(String::from)
    );

    // periodic lets events through and makes none: before_train is refused,
    // and the callback is dropped with its closure.
    let drops = Rc::new(AtomicUsize::new(0));
    struct Guard(Rc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let g = Guard(Rc::clone(&drops));
    let e = Callback::on(Events::TRIGGER_STEP, move |_, _, _| {
        let _ = &g;
        Ok(Flow::Continue)
    })
    .periodic(Every::steps(2).before_train())
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("before_train"), "{e}");
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    // No condition at all: the library's error.
    let e = Callback::on(Events::TRIGGER, |_, _, _| Ok(Flow::Continue)).periodic_trigger(Every::default()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

#[test]
fn order_remainder_inner_state_and_fake_options() {
    let five = Tensor::from_slice(&[0f32, 1., 2., 3., 4.], &[5]).unwrap();
    assert_eq!(
        (Order::default(), Remainder::default(), InnerState::default()),
        (Order::Sequential, Remainder::Drop, InnerState::Keep)
    );

    // Order: the same pass every time, or a permutation.
    let seq = DataFlow::from_tensors(&[&five], Order::Sequential).unwrap();
    assert_eq!(pass(&seq), vec![0., 1., 2., 3., 4.]);
    let shuffled = DataFlow::from_tensors(&[&five], Order::Shuffled).unwrap();
    shuffled.set_seed(3).unwrap();
    let passes: Vec<Vec<f64>> = (0..4).map(|_| pass(&shuffled)).collect();
    for p in &passes {
        let mut sorted = p.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(sorted, vec![0., 1., 2., 3., 4.]);
    }
    assert!(passes.iter().any(|p| *p != vec![0., 1., 2., 3., 4.]), "{passes:?}");
    let cached = DataFlow::from_tensors(&[&five], Order::Sequential).unwrap().cache(Order::Sequential).unwrap();
    assert_eq!(pass(&cached), pass(&cached));

    // Remainder: tensorpack's remainder=False (PyTorch's drop_last=True) by default.
    let sizes = |r: Remainder| {
        let b = DataFlow::from_tensors(&[&five], Order::Sequential).unwrap().batch(2, r).unwrap();
        b.iter().map(|dp| dp.unwrap()[0].shape()[0]).collect::<Vec<_>>()
    };
    assert_eq!(sizes(Remainder::Drop), vec![2, 2]);
    assert_eq!(sizes(Remainder::Keep), vec![2, 2, 1]);

    // InnerState: the next pass goes on, or starts over.
    let keep = DataFlow::from_tensors(&[&five], Order::Sequential).unwrap().fixed_size(3, InnerState::Keep).unwrap();
    assert_eq!((pass(&keep), pass(&keep)), (vec![0., 1., 2.], vec![3., 4., 0.]));
    let reset = DataFlow::from_tensors(&[&five], Order::Sequential).unwrap().fixed_size(3, InnerState::Reset).unwrap();
    assert_eq!((pass(&reset), pass(&reset)), (vec![0., 1., 2.], vec![0., 1., 2.]));

    // FakeOptions: tensorpack's FakeData defaults (random, [0, 1)).
    assert_eq!(FakeOptions::default(), FakeOptions { random: true, low: 0.0, high: 1.0 });
    let spec = [InputSpec::new("x", DType::F32, &[])];
    let random = DataFlow::fake(&spec, 6, None).unwrap();
    let values = pass(&random);
    assert!(values.iter().all(|v| (0.0..1.0).contains(v)), "{values:?}");
    assert!(values.windows(2).any(|w| w[0] != w[1]), "{values:?}");
    let constant = DataFlow::fake(&spec, 6, &FakeOptions::default().random(false).range(5.0, 6.0)).unwrap();
    let values = pass(&constant);
    assert!(values.iter().all(|&v| v == values[0] && (5.0..6.0).contains(&v)), "{values:?}");
    let explicit = FakeOptions { random: false, ..Default::default() };
    assert_eq!(DataFlow::fake(&spec, 2, &explicit).unwrap().size(), Some(2));
}

/// Issue 34, item 4: an error from the library names the Rust call, the C
/// function in parentheses at the end; ModelSaver's extremes are named
/// (`keep_all`, `keep_every_n_hours(None)`), not a bare 0.
#[test]
fn errors_name_the_rust_call() {
    let named = |e: Error, call: &str, c: &str| {
        let m = e.message();
        assert!(m.starts_with(&format!("{call}: ")) && m.ends_with(&format!(" ({c})")), "{m}");
        assert_eq!(m.matches("tpt_").count(), 1, "{m}");
    };
    named(tptrain::set_num_threads(0).unwrap_err(), "set_num_threads", "tpt_set_num_threads");
    let m = model();
    named(m.restore("/nonexistent/model-1", None).unwrap_err(), "Model::restore", "tpt_model_restore");
    let (x, y) = rows();
    let src = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap();
    named(src.batch(0, Remainder::Drop).unwrap_err(), "DataFlow::batch", "tpt_dataflow_batch");
    let ops_error = tptrain::ops::call("aten::relux", None, &[]).unwrap_err();
    named(ops_error, "ops::call", "tpt_op_call");
    // A wrapper that hands the C function on (`Tower::fc`), from a tower
    // function: its error comes out of the build unchanged.
    let zero_units = Model::new(&signature(), |tower, inputs| {
        let y = tower.fc("fc", &inputs[0], 0, None)?;
        tower.set_cost(&y.mean()?)
    })
    .unwrap();
    named(zero_units.build().unwrap_err(), "Tower::fc", "tpt_layer_fc");
    let train = DataFlow::from_tensors(&[&x, &y], Order::Shuffled).unwrap().batch(4, Remainder::Drop).unwrap();
    let bad = TrainerOptions { starting_epoch: -1, ..quiet(2, 1) };
    let e = Trainer::from_config(TrainConfig { options: Some(bad), ..TrainConfig::from_dataflow(&m, &train) });
    named(e.err().expect("starting_epoch -1 refused"), "Trainer::from_config", "tpt_trainer_from_config");

    // From a callback: the Context's method.
    let seen = Rc::new(RefCell::new(None));
    let s2 = Rc::clone(&seen);
    let dir = std::env::temp_dir().join(format!("tptrain-api-forms-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = TrainConfig { options: Some(quiet(2, 12)), ..TrainConfig::from_dataflow(&m, &train) }
        .callback(Callback::on(Events::TRIGGER_EPOCH, move |ctx, _, _| {
            *s2.borrow_mut() = ctx.output("no_such_output").err();
            Ok(Flow::Continue)
        }))
        .unwrap()
        .callback(ModelSaver::new().keep_all().keep_every_n_hours(None).dir(&dir))
        .unwrap();
    let mut t = Trainer::from_config(config).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    named(seen.borrow_mut().take().expect("the callback ran"), "Context::output", "tpt_trainer_output");
    // keep_all: the 12 epochs' checkpoints stay (the default keeps 10).
    let kept = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("model-"))
        .count();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(kept, 12);
}
