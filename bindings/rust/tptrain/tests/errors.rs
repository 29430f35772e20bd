//! Errors of any type from every kind of closure: a foreign error (through
//! `Callback::on_fallible`, or `Error::wrap` in the closures that return a
//! `tptrain::Result`) becomes a `Code::Callback` error with the error's text
//! as the message, and the original comes back, through the C library, as
//! the `source()` of the error the Rust call returns (run, build, a
//! dataflow's iteration). A `tptrain::Error` keeps its code and message; the
//! `From` impls keep the std error as the source.

use std::error::Error as StdError;
use std::fmt;
use std::num::{ParseFloatError, ParseIntError};
use tptrain::nn;
use tptrain::{
    Callback, Code, DType, DataFlow, Error, Events, Flow, InitFn, Input, InputSpec, LayerOptions, Model, Optimizer,
    Order, ParallelMapOptions, Progress, Remainder, Result, RunOutcome, Tensor, TrainConfig, Trainer, TrainerOptions,
};

type BoxError = Box<dyn StdError + Send + Sync>;

// ------------------------------------------------------------ helpers

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

/// A trainer whose run_step is one empty hooked step.
fn plain_trainer<'a>(steps_per_epoch: i64, max_epoch: i64) -> Trainer<'a> {
    let mut t = Trainer::new(&options(steps_per_epoch, max_epoch)).unwrap();
    t.set_run_step(|ctx| ctx.hooked_step(|_| Ok(Flow::Continue))).unwrap();
    t
}

/// The source of `e`, downcast to `T`; panics with the error if it is not one.
fn source_as<T: StdError + 'static>(e: &Error) -> &T {
    e.source()
        .unwrap_or_else(|| panic!("{e} has no source"))
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("the source of {e} is not a {}", std::any::type_name::<T>()))
}

fn io_error() -> std::io::Error {
    std::fs::read("/nonexistent/tptrain").unwrap_err()
}

fn parse_error() -> ParseFloatError {
    "x".parse::<f64>().unwrap_err()
}

fn signature() -> Vec<InputSpec> {
    vec![InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])]
}

fn data() -> (Tensor, Tensor) {
    let x: Vec<f32> = (0..48).map(|i| (i % 7) as f32 / 7.0).collect();
    let y: Vec<f32> = (0..16).map(|i| (i % 3) as f32).collect();
    (Tensor::from_vec(x, &[16, 3]).unwrap(), Tensor::from_vec(y, &[16, 1]).unwrap())
}

/// A linear model whose tower runs `fail` first (after the build call).
fn model<'a, F>(fail: F) -> Model<'a>
where
    F: Fn() -> std::result::Result<(), BoxError> + Send + Sync + 'a,
{
    let model = Model::new(&signature(), move |tower, inputs| {
        if !tower.is_building() {
            fail().map_err(Error::wrap)?;
        }
        let p = tower.fc("fc", &inputs[0], 1, &LayerOptions::default())?;
        tower.set_cost(&nn::mse(&p, &inputs[1])?)?;
        Ok(())
    })
    .unwrap();
    let sgd = Optimizer::new("sgd").unwrap();
    sgd.set("learning_rate", 0.1).unwrap();
    model.set_optimizer(&sgd).unwrap();
    model
}

fn train(model: &Model<'_>) -> Result<RunOutcome> {
    let (x, y) = data();
    let mut t = Trainer::new(&options(4, 2))?;
    t.set_model(model, Input::from_tensors(&[&x, &y], 4, None)?)?;
    t.run()
}

/// A foreign error of this test's own.
#[derive(Debug)]
struct Overheated {
    celsius: u32,
}

impl fmt::Display for Overheated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the GPU is at {} C", self.celsius)
    }
}

impl StdError for Overheated {}

// ------------------------------------------------------------ callbacks

#[test]
fn a_callback_fails_with_an_io_error_and_run_returns_it_as_the_source() {
    let mut t = plain_trainer(3, 2);
    t.add_callback(
        Callback::on_fallible(Events::TRIGGER_STEP, |ctx, _, _| -> std::result::Result<Flow, BoxError> {
            if ctx.global_step() == 2 {
                std::fs::read("/nonexistent/tptrain")?;
            }
            Ok(Flow::Continue)
        })
        .name("reader"),
    )
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(e.message(), io_error().to_string());
    assert_eq!(source_as::<std::io::Error>(&e).kind(), std::io::ErrorKind::NotFound);
    assert_eq!(t.global_step(), 2);
}

#[test]
fn a_callback_fails_with_a_parse_error_and_run_returns_it_as_the_source() {
    let mut t = plain_trainer(3, 2);
    t.add_callback(Callback::on_fallible(Events::TRIGGER_EPOCH, |_, _, _| -> std::result::Result<Flow, BoxError> {
        let _threshold: f64 = "x".parse()?;
        Ok(Flow::Continue)
    }))
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(e.message(), parse_error().to_string());
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());
}

#[test]
fn a_callback_that_returns_its_own_error_type() {
    let mut t = plain_trainer(3, 2);
    t.add_callback(Callback::on_fallible(Events::TRIGGER_STEP, |ctx, _, _| {
        if ctx.global_step() == 4 {
            return Err(Overheated { celsius: 97 });
        }
        Ok(Flow::Continue)
    }))
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::Callback, "the GPU is at 97 C"));
    assert_eq!(source_as::<Overheated>(&e).celsius, 97);
    // Display: the message and the code; the chain goes on through source().
    assert_eq!(e.to_string(), "the GPU is at 97 C (TPT_ERR_CALLBACK)");
}

#[test]
fn question_mark_on_std_errors_in_a_tptrain_result_closure_keeps_the_source() {
    // With tptrain::Error as the closure's error type (Callback::on's, no
    // annotation needed), the From impls apply: io errors are Code::Io,
    // parse errors Code::InvalidArgument.
    let mut t = plain_trainer(3, 2);
    t.add_callback(Callback::on(Events::TRIGGER_STEP, |_, _, _| {
        std::fs::read("/nonexistent/tptrain")?;
        Ok(Flow::Continue)
    }))
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::Io, io_error().to_string().as_str()));
    assert_eq!(source_as::<std::io::Error>(&e).kind(), std::io::ErrorKind::NotFound);

    let mut t = plain_trainer(3, 2);
    t.add_callback(Callback::on(Events::TRIGGER_STEP, |_, _, _| {
        let _n: i32 = "12x".parse()?;
        Ok(Flow::Continue)
    }))
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(source_as::<ParseIntError>(&e), &"12x".parse::<i32>().unwrap_err());
}

#[test]
fn a_tptrain_error_keeps_its_code_message_and_source() {
    let mut t = plain_trainer(3, 2);
    t.add_callback(Callback::on(Events::TRIGGER_STEP, |_, _, _| {
        Err(Error::new(Code::NotFound, "no labels for the step").with_source(io_error()))
    }))
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e, Error::new(Code::NotFound, "no labels for the step"));
    assert_eq!(source_as::<std::io::Error>(&e).kind(), std::io::ErrorKind::NotFound);

    // Without a source, none comes back.
    let mut t = plain_trainer(3, 2);
    t.add_callback(Callback::on(Events::TRIGGER_STEP, |_, _, _| Err(Error::new(Code::State, "plain")))).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e, Error::new(Code::State, "plain"));
    assert!(e.source().is_none());
}

#[test]
fn run_step_and_hooked_step_errors_keep_their_source() {
    let mut t = Trainer::new(&options(3, 2)).unwrap();
    t.set_run_step(|ctx| {
        if ctx.global_step() == 1 {
            let _: f64 = "x".parse().map_err(Error::wrap)?;
        }
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());

    // The hooked step's error comes back from hooked_step with its source,
    // and from run when run_step returns it.
    let mut t = Trainer::new(&options(3, 2)).unwrap();
    t.set_run_step(|ctx| {
        let r = ctx.hooked_step(|s| {
            if s.global_step() == 2 {
                return Err(Error::wrap(io_error()));
            }
            Ok(Flow::Continue)
        });
        if let Err(e) = &r {
            assert_eq!(source_as::<std::io::Error>(e).kind(), std::io::ErrorKind::NotFound);
        }
        r
    })
    .unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(source_as::<std::io::Error>(&e).kind(), std::io::ErrorKind::NotFound);
}

// ------------------------------------------------------------ models

#[test]
fn a_tower_fails_with_an_io_error_and_run_returns_it_as_the_source() {
    let m = model(|| {
        std::fs::read("/nonexistent/tptrain")?;
        Ok(())
    });
    let e = train(&m).unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(e.message(), io_error().to_string());
    assert_eq!(source_as::<std::io::Error>(&e).kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_tower_fails_with_a_parse_error_in_the_build_call_and_infer() {
    // The build call: Model::build returns it.
    let m = Model::new(&signature(), |_, _| {
        let _: f64 = "x".parse().map_err(Error::wrap)?;
        Ok(())
    })
    .unwrap();
    let e = m.build().unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());

    // Training: run returns it; inference: infer does.
    let m = model(|| Err(parse_error().into()));
    let e = train(&m).unwrap_err();
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());
    let (x, y) = data();
    let e = m.infer(&[&x, &y], &["cost"]).unwrap_err();
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());
}

#[test]
fn a_tower_stops_training_with_tower_stop() {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let m = Model::new(&signature(), |tower, inputs| {
        if !tower.is_building() {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n == 2 || !tower.is_training() {
                tower.stop("three steps are enough");
                tower.stop("the first stop wins");
            }
        }
        let p = tower.fc("fc", &inputs[0], 1, &LayerOptions::default())?;
        tower.set_cost(&nn::mse(&p, &inputs[1])?)
    })
    .unwrap();
    m.set_optimizer(&Optimizer::new("sgd").unwrap()).unwrap();
    assert_eq!(train(&m).unwrap(), RunOutcome::Stopped("three steps are enough".into()));
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);
    // In inference (here: every inference call stops) the stop is an error with TPT_STOP's code.
    let (x, y) = data();
    let e = m.infer(&[&x, &y], &["cost"]).unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::Other(100), "three steps are enough"));
}

#[test]
fn feed_and_init_hook_errors_keep_their_source() {
    let m = model(|| Ok(()));
    let mut t = Trainer::new(&options(4, 2)).unwrap();
    let (x, y) = data();
    let mut calls = 0;
    let feed = Input::from_feed(move |_| {
        calls += 1;
        if calls == 3 {
            return Err(Error::wrap(Overheated { celsius: 90 }));
        }
        Ok(Some(vec![x.share().unwrap(), y.share().unwrap()]))
    })
    .unwrap();
    t.set_model(&m, feed).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(source_as::<Overheated>(&e).celsius, 90);

    let (x, y) = data();
    let config = TrainConfig {
        options: Some(options(4, 2)),
        init: Some(InitFn::new(|_| {
            std::fs::read("/nonexistent/tptrain").map_err(Error::wrap)?;
            Ok(Flow::Continue)
        })),
        ..TrainConfig::new(&m, Input::from_tensors(&[&x, &y], 4, None).unwrap())
    };
    let e = tptrain::launch_train(config).unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(source_as::<std::io::Error>(&e).kind(), std::io::ErrorKind::NotFound);
}

// ------------------------------------------------------------ dataflows

fn numbers(n: i64) -> DataFlow<'static> {
    DataFlow::from_iter(move || (0..n).map(|i| vec![Tensor::from_slice(&[i], &[]).unwrap()])).unwrap()
}

#[test]
fn a_dataflow_source_fails_with_an_io_error() {
    let mut i = 0;
    let df = DataFlow::from_fn(move || {
        i += 1;
        if i == 3 {
            std::fs::read("/nonexistent/tptrain").map_err(Error::wrap)?;
        }
        Ok(Some(vec![Tensor::from_slice(&[i], &[])?]))
    })
    .unwrap();
    let items: Vec<_> = df.iter().collect();
    assert_eq!(items.len(), 3);
    let e = items[2].as_ref().unwrap_err();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(source_as::<std::io::Error>(e).kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_map_fails_with_a_parse_error_also_on_a_prefetch_thread() {
    let parse = |dp: &mut tptrain::DatapointRef| -> Result<()> {
        if dp.get(0)?.item()? == 2.0 {
            let _: f64 = "x".parse().map_err(Error::wrap)?;
        }
        Ok(())
    };
    // On the iterating thread.
    let df = numbers(5).map(parse).unwrap();
    let e = df.iter().find_map(|r| r.err()).unwrap();
    assert_eq!(e.code(), Code::Callback);
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());
    // On a prefetch thread: the error crosses threads in the library.
    let df = numbers(5).map(parse).unwrap().prefetch(4).unwrap();
    let e = df.iter().find_map(|r| r.err()).unwrap();
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());
}

#[test]
fn component_maps_parallel_maps_decoders_and_iterators_keep_the_source() {
    let e = numbers(4)
        .map_component(0, |t| {
            if t.item().unwrap() == 1.0 {
                return Err(Error::wrap(Overheated { celsius: 80 }));
            }
            Ok(Some(t.share().unwrap()))
        })
        .unwrap()
        .iter()
        .find_map(|r| r.err())
        .unwrap();
    assert_eq!(source_as::<Overheated>(&e).celsius, 80);

    // Worker threads of a parallel map.
    let options = ParallelMapOptions { n_threads: 3, strict: true, ..Default::default() };
    let df = numbers(8)
        .parallel_map(&options, |dp| {
            if dp.get(0)?.item()? == 5.0 {
                let _: f64 = "x".parse().map_err(Error::wrap)?;
            }
            Ok(())
        })
        .unwrap();
    let e = df.iter().find_map(|r| r.err()).unwrap();
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());

    // A decoder that reads the file it is given: `?` keeps the io::Error.
    let paths = ["/nonexistent/tptrain/a.bin"];
    let df = DataFlow::from_files(&paths, Order::Sequential, 2, |dp, path, _| {
        let bytes = std::fs::read(path)?;
        let n = bytes.len() as i64;
        dp.push(&Tensor::from_vec(bytes, &[n])?)?;
        Ok(())
    })
    .unwrap();
    let e = df.iter().find_map(|r| r.err()).unwrap();
    assert_eq!(source_as::<std::io::Error>(&e).kind(), std::io::ErrorKind::NotFound);

    // An iterator of Results.
    let df = DataFlow::from_iter(|| {
        ["1.5", "oops"].into_iter().map(|s| -> std::result::Result<Vec<Tensor>, BoxError> {
            Ok(vec![Tensor::from_slice(&[s.parse::<f64>()?], &[])?])
        })
    })
    .unwrap();
    let items: Vec<_> = df.iter().collect();
    assert_eq!(items[0].as_ref().unwrap()[0].item().unwrap(), 1.5);
    let e = items[1].as_ref().unwrap_err();
    assert_eq!(source_as::<ParseFloatError>(e), &parse_error());
}

#[test]
fn a_dataflow_error_ends_training_with_its_source() {
    let m = model(|| Ok(()));
    let (x, y) = data();
    let rows = DataFlow::from_tensors(&[&x, &y], Order::Sequential).unwrap();
    let mut seen = 0;
    let checked = rows
        .map(move |_| {
            seen += 1;
            if seen == 6 {
                return Err(Error::wrap(Overheated { celsius: 85 }));
            }
            Ok(())
        })
        .unwrap()
        .batch(2, Remainder::Drop)
        .unwrap();
    let config = TrainConfig { options: Some(options(4, 3)), ..TrainConfig::from_dataflow(&m, &checked) };
    let e = tptrain::launch_train(config).unwrap_err();
    assert_eq!(e.message(), "the GPU is at 85 C");
    assert_eq!(source_as::<Overheated>(&e).celsius, 85);
}

// ------------------------------------------------------------ the Error type

#[test]
fn from_impls_choose_codes_and_keep_the_source() {
    let e = Error::from(io_error());
    assert_eq!((e.code(), e.message()), (Code::Io, io_error().to_string().as_str()));
    assert!(source_as::<std::io::Error>(&e).kind() == std::io::ErrorKind::NotFound);

    let e = Error::from(parse_error());
    assert_eq!((e.code(), e.message()), (Code::InvalidArgument, "invalid float literal"));
    assert_eq!(source_as::<ParseFloatError>(&e), &parse_error());

    let e = Error::from("300".parse::<u8>().unwrap_err());
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.source().unwrap().is::<ParseIntError>());

    let e = Error::from(fmt::Error);
    assert_eq!(e.code(), Code::Callback);
    assert!(e.source().unwrap().is::<fmt::Error>());
}

#[test]
fn wrap_equality_and_clone() {
    // wrap keeps an Error as it is, and wraps anything else.
    let original = Error::new(Code::Io, "disk").with_source(Overheated { celsius: 1 });
    let same = Error::wrap(original.clone());
    assert_eq!(same, original);
    assert_eq!(source_as::<Overheated>(&same).celsius, 1);
    let e = Error::wrap("a plain message");
    assert_eq!((e.code(), e.message()), (Code::Callback, "a plain message"));
    assert!(e.source().is_some());
    // Equality is code and message; a clone shares the source.
    assert_eq!(Error::new(Code::Io, "disk"), original);
    assert_ne!(Error::new(Code::Backend, "disk"), original);
    let copy = original.clone();
    assert!(std::ptr::eq(copy.source().unwrap(), original.source().unwrap()));
    // Debug shows the source.
    assert!(format!("{original:?}").contains("Overheated"), "{original:?}");
    // Error is Send + Sync + 'static, so it converts into a boxed error.
    let boxed: BoxError = original.into();
    assert!(boxed.downcast_ref::<Error>().is_some());
}
