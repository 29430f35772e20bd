//! Writing a trainer from Rust (issue 16): train ops and the GAN trainers, on
//! a toy GAN (a linear generator "gen/" and a linear discriminator
//! "discrim/", least-squares losses published as the outputs "g_loss" and
//! "d_loss"):
//!   - GANTrainer (`Gan::new`): every run_step is one hooked run that
//!     updates both nets;
//!   - SeparateGANTrainer (`Gan::separate`): the exact order of D and G runs
//!     for d_period 3 and for g_period 2, with global_step moving on inside a
//!     run_step (tensorpack's rule simulated here);
//!   - a run_step of our own (`StepContext::run_train_ops`): a raw D run then
//!     a hooked G run advance global_step once per run_step and call
//!     BEFORE_RUN once; a run_step of "d_op" alone never changes gen/;
//!   - train ops as the default step (`Trainer::set_train_ops`): "d_op"
//!     alone changes only discrim/, one global step per run_step, also on
//!     replicated towers; async towers refuse to run them;
//!   - MultiGPUGANTrainer (`Gan::towers`): replicated and parameter-server
//!     towers update both nets every step; async towers are refused;
//!   - a run resumed from a checkpoint (momentum slots of both train ops'
//!     optimizers) ends bit-identical to an uninterrupted one;
//!   - errors name the op, the option or the missing output.
//!
//! The C twin is tests/c/test_custom_trainer.c.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tptrain::{
    manual_seed, nn, Callback, Code, Context, DType, Error, Event, Events, Every, Flow, Gan, Input, InputSpec,
    LogdirAction, Model, ModelSaver, Optimizer, Progress, Result, Run, RunOutcome, Tensor, Towers, TrainOp, Trainer,
    TrainerOptions, VariableOptions,
};

const ROWS: usize = 64;
const BATCH: i64 = 8;

// ------------------------------------------------------------ helpers

/// real, z: [B, 2]; ones, zeros: [B, 1].
fn signature() -> Vec<InputSpec> {
    vec![
        InputSpec::new("real", DType::F32, &[-1, 2]),
        InputSpec::new("z", DType::F32, &[-1, 2]),
        InputSpec::new("ones", DType::F32, &[-1, 1]),
        InputSpec::new("zeros", DType::F32, &[-1, 1]),
    ]
}

/// SGD with learning rate 0.05, with momentum 0.9 if `momentum`.
fn sgd(momentum: bool) -> Result<Optimizer> {
    let o = Optimizer::new("sgd")?;
    o.set("learning_rate", 0.05)?;
    if momentum {
        o.set("momentum", 0.9)?;
    }
    Ok(o)
}

/// The toy GAN with `optimizer`; the tower publishes "g_loss" only if
/// `with_g_loss`.
fn gan_model(optimizer: &Optimizer, with_g_loss: bool) -> Result<Model<'static>> {
    let m = Model::new(&signature(), move |tower, inputs| -> Result<()> {
        let defaults = VariableOptions::default();
        let gw = tower.variable("gen/w", &[2, 2], &defaults)?;
        let gb = tower.variable("gen/b", &[2], &defaults)?;
        let dw = tower.variable("discrim/w", &[2, 1], &defaults)?;
        let db = tower.variable("discrim/b", &[1], &defaults)?;
        let fake = (&inputs[1].matmul(&gw)? + &gb)?;
        let d_real = (&inputs[0].matmul(&dw)? + &db)?;
        let d_fake = (&fake.matmul(&dw)? + &db)?;
        let d_loss = (&nn::mse(&d_real, &inputs[2])? + &nn::mse(&d_fake, &inputs[3])?)?;
        let g_loss = nn::mse(&d_fake, &inputs[2])?;
        tower.set_output("d_loss", &d_loss)?;
        if with_g_loss {
            tower.set_output("g_loss", &g_loss)?;
        }
        Ok(())
    })?;
    m.set_optimizer(optimizer)?;
    Ok(m)
}

fn new_model(momentum: bool) -> Result<Model<'static>> {
    gan_model(&sgd(momentum)?, true)
}

fn new_input() -> Result<Input<'static>> {
    let mut real = Vec::with_capacity(ROWS * 2);
    let mut z = Vec::with_capacity(ROWS * 2);
    for i in 0..ROWS {
        real.push(1.0f32 + 0.01 * i as f32);
        real.push(-0.5f32 + 0.02 * (i % 7) as f32);
        z.push(((i * 37) % 11) as f32 / 11.0 - 0.5);
        z.push(((i * 53) % 13) as f32 / 13.0 - 0.5);
    }
    let real = Tensor::from_vec(real, &[ROWS as i64, 2])?;
    let z = Tensor::from_vec(z, &[ROWS as i64, 2])?;
    let ones = Tensor::from_vec(vec![1.0f32; ROWS], &[ROWS as i64, 1])?;
    let zeros = Tensor::from_vec(vec![0.0f32; ROWS], &[ROWS as i64, 1])?;
    Input::from_tensors(&[&real, &z, &ones, &zeros], BATCH, None)
}

fn options(steps: i64, logdir: Option<&Path>) -> TrainerOptions {
    TrainerOptions {
        max_epoch: 1,
        steps_per_epoch: Some(steps),
        console: false,
        progress: Progress::Off,
        logdir: logdir.map(Path::to_path_buf),
        logdir_action: LogdirAction::Keep,
        ..Default::default()
    }
}

fn sum_of(m: &Model<'_>, name: &str) -> Result<f64> {
    Ok(m.variable(name)?.to_vec::<f32>()?.iter().map(|&v| f64::from(v)).sum())
}

/// After every hooked run: which of the two nets changed ('G', 'D', 'B'oth,
/// '-'), and how many BEFORE_RUNs there were.
#[derive(Debug, Default)]
struct Watch {
    g: Vec<f32>,
    d: Vec<f32>,
    runs: String,
    before_runs: usize,
}

/// The values of gen/w and discrim/w (whole: a sum could stay put when two
/// elements move by opposite amounts, as Adam's first steps do).
fn nets(ctx: &Context) -> Result<(Vec<f32>, Vec<f32>)> {
    let m = ctx.model()?;
    Ok((m.variable("gen/w")?.to_vec::<f32>()?, m.variable("discrim/w")?.to_vec::<f32>()?))
}

fn add_watch(t: &mut Trainer<'_>) -> Result<Rc<RefCell<Watch>>> {
    let watch = Rc::new(RefCell::new(Watch::default()));
    let w = Rc::clone(&watch);
    t.add_callback(Callback::on(Events::BEFORE_RUN | Events::AFTER_RUN, move |ctx, event, _| {
        let mut w = w.borrow_mut();
        if event == Event::BeforeRun {
            w.before_runs += 1;
            return Ok(Flow::Continue);
        }
        let (g, d) = nets(ctx)?;
        let changed = match (g != w.g, d != w.d) {
            (true, true) => 'B',
            (true, false) => 'G',
            (false, true) => 'D',
            (false, false) => '-',
        };
        w.runs.push(changed);
        w.g = g;
        w.d = d;
        Ok(Flow::Continue)
    }))?;
    let w = Rc::clone(&watch);
    t.add_callback(Callback::on(Events::BEFORE_TRAIN, move |ctx, _, _| {
        let (g, d) = nets(ctx)?;
        let mut w = w.borrow_mut();
        w.g = g;
        w.d = d;
        Ok(Flow::Continue)
    }))?;
    Ok(watch)
}

/// Asserts that `result` failed with `code` and a message containing each of `parts`.
fn expect_error<T: std::fmt::Debug>(result: Result<T>, code: Code, parts: &[&str]) {
    let e: Error = result.expect_err("an error");
    assert_eq!(e.code(), code, "{e}");
    for part in parts {
        assert!(e.message().contains(part), "{:?} does not contain {part:?}", e.message());
    }
}

/// tensorpack's SeparateGANTrainer.run_step, simulated: the runs ('D', 'G')
/// of `run_steps` run_steps, and global_step at the end.
fn expected_runs(run_steps: usize, d_period: i64, g_period: i64) -> (String, i64) {
    let (mut runs, mut global_step) = (String::new(), 0i64);
    for _ in 0..run_steps {
        if global_step % d_period == 0 {
            runs.push('D');
            global_step += 1;
        }
        if global_step % g_period == 0 {
            runs.push('G');
            global_step += 1;
        }
    }
    (runs, global_step)
}

// ------------------------------------------------------------ the GAN trainers

#[test]
fn gan_trainer_updates_both_nets_every_step() -> Result<()> {
    manual_seed(1)?;
    let m = new_model(false)?;
    let mut t = Trainer::new(&options(6, None))?;
    t.set_gan(&m, new_input()?, &Gan::new())?;
    let watch = add_watch(&mut t)?;
    assert_eq!(t.run()?, RunOutcome::Finished);
    assert_eq!(t.global_step(), 6);
    let w = watch.borrow();
    assert_eq!(w.before_runs, 6);
    assert_eq!(w.runs, "BBBBBB");
    // Both losses reach the monitors (moving summaries, put at the epoch's end).
    assert_eq!(t.scalar_latest("g_loss")?.global_step, 6);
    assert!(t.scalar_latest("d_loss")?.value > 0.0);
    Ok(())
}

#[test]
fn separate_gan_trainer_follows_the_periods() -> Result<()> {
    for (d_period, g_period) in [(3u64, 1u64), (1, 2)] {
        manual_seed(1)?;
        let m = new_model(false)?;
        let mut t = Trainer::new(&options(7, None))?;
        t.set_gan(&m, new_input()?, &Gan::separate(d_period, g_period))?;
        let watch = add_watch(&mut t)?;
        t.run()?;
        let (want, global_step) = expected_runs(7, d_period as i64, g_period as i64);
        let w = watch.borrow();
        assert_eq!(w.runs, want, "d_period {d_period}, g_period {g_period}");
        assert_eq!(t.global_step(), global_step);
        assert_eq!(w.before_runs as i64, global_step);
    }
    // (3, 1): D when global_step is 0, 3, 6, 9; G after it and at every
    // other run_step.
    assert_eq!(expected_runs(7, 3, 1), ("DGGDGGDGGDG".to_owned(), 11));
    Ok(())
}

#[test]
fn gan_ops_of_other_names() -> Result<()> {
    // Ops of the model's own, under other names, with an optimizer of D's own.
    manual_seed(1)?;
    let m = new_model(false)?;
    let adam = Optimizer::new("adam")?;
    adam.set("learning_rate", 0.01)?;
    m.add_train_op(&TrainOp::new("gen_step").cost("g_loss").scope("gen/"))?;
    m.add_train_op(&TrainOp::new("disc_step").cost("d_loss").scope("discrim/").optimizer(&adam))?;
    drop(adam); // the model keeps its own reference
    let mut t = Trainer::new(&options(3, None))?;
    t.set_gan(&m, new_input()?, &Gan::new().ops("gen_step", "disc_step"))?;
    let watch = add_watch(&mut t)?;
    t.run()?;
    assert_eq!(t.global_step(), 3);
    assert_eq!(watch.borrow().runs, "BBB");
    Ok(())
}

// ------------------------------------------------------------ a run_step of our own

fn with_gan_ops(m: &Model<'_>) -> Result<()> {
    m.add_train_op(&TrainOp::new("g_op").cost("g_loss").scope("gen/"))?;
    m.add_train_op(&TrainOp::new("d_op").cost("d_loss").scope("discrim/"))
}

#[test]
fn raw_d_then_hooked_g_is_one_global_step() -> Result<()> {
    // Both nets move, but a hooked run sees only G's change (D changed
    // before it, raw): D's raw change shows at the next hooked run's end.
    manual_seed(1)?;
    let m = new_model(false)?;
    with_gan_ops(&m)?;
    let mut t = Trainer::new(&options(5, None))?;
    t.set_model(&m, new_input()?)?;
    let run_steps = Rc::new(RefCell::new(Vec::new()));
    let seen = Rc::clone(&run_steps);
    t.set_run_step(move |ctx| {
        let before = ctx.global_step();
        ctx.run_train_ops(&["d_op"], Run::Raw)?;
        // A raw run is no step.
        assert_eq!(ctx.global_step(), before);
        let flow = ctx.run_train_ops(&["g_op"], Run::Hooked)?;
        seen.borrow_mut().push(ctx.global_step() - before);
        Ok(flow)
    })?;
    let watch = add_watch(&mut t)?;
    t.run()?;
    assert_eq!(t.global_step(), 5);
    assert_eq!(*run_steps.borrow(), vec![1; 5]);
    let w = watch.borrow();
    assert_eq!(w.before_runs, 5);
    assert_eq!(w.runs, "BBBBB");
    // The hooked runs published the tower's outputs.
    assert_eq!(t.scalar_latest("g_loss")?.global_step, 5);
    Ok(())
}

#[test]
fn only_d_never_changes_the_generator() -> Result<()> {
    manual_seed(1)?;
    let m = new_model(false)?;
    with_gan_ops(&m)?;
    m.build()?;
    let (gw, gb, dw) = (sum_of(&m, "gen/w")?, sum_of(&m, "gen/b")?, sum_of(&m, "discrim/w")?);
    let mut t = Trainer::new(&options(4, None))?;
    t.set_model(&m, new_input()?)?;
    t.set_run_step(|ctx| ctx.run_train_ops(&["d_op"], Run::Hooked))?;
    let watch = add_watch(&mut t)?;
    t.run()?;
    assert_eq!(watch.borrow().runs, "DDDD");
    assert_eq!((sum_of(&m, "gen/w")?, sum_of(&m, "gen/b")?), (gw, gb));
    assert_ne!(sum_of(&m, "discrim/w")?, dw);
    Ok(())
}

// ------------------------------------------------------------ train ops as the default step

#[test]
fn set_train_ops_runs_only_the_named_ops() -> Result<()> {
    manual_seed(1)?;
    let m = new_model(false)?;
    with_gan_ops(&m)?;
    m.build()?;
    let (gw, gb) = (m.variable("gen/w")?.to_vec::<f32>()?, m.variable("gen/b")?.to_vec::<f32>()?);
    let (dw, db) = (m.variable("discrim/w")?.to_vec::<f32>()?, m.variable("discrim/b")?.to_vec::<f32>()?);
    let mut t = Trainer::new(&options(4, None))?;
    t.set_model(&m, new_input()?)?;
    t.set_train_ops(&["d_op"])?;
    let watch = add_watch(&mut t)?;
    assert_eq!(t.run()?, RunOutcome::Finished);
    // One hooked run, so one global step, per run_step; only D moves.
    assert_eq!(t.global_step(), 4);
    let w = watch.borrow();
    assert_eq!(w.before_runs, 4);
    assert_eq!(w.runs, "DDDD");
    assert_eq!(m.variable("gen/w")?.to_vec::<f32>()?, gw);
    assert_eq!(m.variable("gen/b")?.to_vec::<f32>()?, gb);
    assert_ne!(m.variable("discrim/w")?.to_vec::<f32>()?, dw);
    assert_ne!(m.variable("discrim/b")?.to_vec::<f32>()?, db);
    // The hooked runs published the tower's outputs.
    assert_eq!(t.scalar_latest("d_loss")?.global_step, 4);
    Ok(())
}

#[test]
fn set_train_ops_with_both_ops_is_a_gan_trainer() -> Result<()> {
    // "g_op" then "d_op" from one forward pass, one hooked run: the same
    // variables as GANTrainer's, bit for bit.
    let train = |gan: bool| -> Result<Vec<f64>> {
        manual_seed(3)?;
        let m = new_model(false)?;
        with_gan_ops(&m)?;
        let mut t = Trainer::new(&options(5, None))?;
        if gan {
            t.set_gan(&m, new_input()?, &Gan::new())?;
        } else {
            t.set_model(&m, new_input()?)?;
            t.set_train_ops(&["g_op".to_owned(), "d_op".to_owned()])?;
        }
        let watch = add_watch(&mut t)?;
        t.run()?;
        assert_eq!(t.global_step(), 5);
        assert_eq!(watch.borrow().runs, "BBBBB");
        ["gen/w", "gen/b", "discrim/w", "discrim/b"].iter().map(|n| sum_of(&m, n)).collect()
    };
    assert_eq!(train(false)?, train(true)?);
    Ok(())
}

#[test]
fn set_train_ops_errors_are_named() -> Result<()> {
    let m = new_model(false)?;
    with_gan_ops(&m)?;
    // Before the model: no strategy to run the ops yet.
    let mut t = Trainer::new(&options(2, None))?;
    expect_error(t.set_train_ops(&["d_op"]), Code::State, &["no model"]);
    t.set_model(&m, new_input()?)?;
    // An unknown op is named, with the model's ops.
    expect_error(t.set_train_ops(&["d_op", "nope"]), Code::InvalidArgument, &["names[1]", "'nope'", "'g_op', 'd_op'"]);
    // No op at all, and a name with a NUL byte (refused before the library).
    expect_error(t.set_train_ops::<&str>(&[]), Code::InvalidArgument, &["at least one train op"]);
    expect_error(t.set_train_ops(&["d\0op"]), Code::InvalidArgument, &["names[0] contains a NUL byte"]);
    // After the failures the trainer still takes a list, and trains with it.
    t.set_train_ops(&["g_op"])?;
    let watch = add_watch(&mut t)?;
    assert_eq!(t.run()?, RunOutcome::Finished);
    assert_eq!(watch.borrow().runs, "GG");
    // After run: too late.
    expect_error(t.set_train_ops(&["d_op"]), Code::State, &["already run"]);
    Ok(())
}

#[test]
fn set_train_ops_on_towers() -> Result<()> {
    // Replicated towers: each op's gradients averaged over the towers, one
    // global step per run_step, only D moves.
    manual_seed(1)?;
    let m = new_model(false)?;
    with_gan_ops(&m)?;
    let mut t = Trainer::new(&options(3, None))?;
    t.set_towers(&m, new_input()?, &Towers::replicated(2))?;
    t.set_train_ops(&["d_op"])?;
    let watch = add_watch(&mut t)?;
    assert_eq!(t.run()?, RunOutcome::Finished);
    assert_eq!(t.global_step(), 3);
    assert_eq!(watch.borrow().runs, "DDD");

    // The async strategy does not run train ops: refused when they are set.
    let m = new_model(false)?;
    with_gan_ops(&m)?;
    let mut t = Trainer::new(&options(3, None))?;
    t.set_towers(&m, new_input()?, &Towers::asynchronous(2))?;
    expect_error(t.set_train_ops(&["d_op"]), Code::Unsupported, &["async"]);
    Ok(())
}

// ------------------------------------------------------------ MultiGPUGANTrainer

#[test]
fn gan_on_towers_updates_both_nets() -> Result<()> {
    for towers in [Towers::replicated(2), Towers::parameter_server(2)] {
        manual_seed(1)?;
        let m = new_model(false)?;
        let mut t = Trainer::new(&options(3, None))?;
        let gan = Gan::new().towers(&towers);
        assert_eq!(gan.tower_count(), 2);
        t.set_gan(&m, new_input()?, &gan)?;
        let watch = add_watch(&mut t)?;
        assert_eq!(t.run()?, RunOutcome::Finished, "{towers:?}");
        assert_eq!(t.global_step(), 3, "{towers:?}");
        let w = watch.borrow();
        assert_eq!(w.before_runs, 3, "{towers:?}");
        assert_eq!(w.runs, "BBB", "{towers:?}");
        assert!(t.scalar_latest("g_loss")?.value.is_finite());
    }
    Ok(())
}

#[test]
fn separate_gan_on_towers_follows_the_periods() -> Result<()> {
    manual_seed(1)?;
    let m = new_model(false)?;
    let mut t = Trainer::new(&options(5, None))?;
    t.set_gan(&m, new_input()?, &Gan::separate(1, 2).towers(&Towers::replicated(2)))?;
    let watch = add_watch(&mut t)?;
    t.run()?;
    let (want, global_step) = expected_runs(5, 1, 2);
    assert_eq!(watch.borrow().runs, want);
    assert_eq!(t.global_step(), global_step);
    Ok(())
}

#[test]
fn gan_on_async_towers_is_unsupported() -> Result<()> {
    let m = new_model(false)?;
    let mut t = Trainer::new(&options(2, None))?;
    expect_error(
        t.set_gan(&m, new_input()?, &Gan::new().towers(&Towers::asynchronous(2))),
        Code::Unsupported,
        &["async"],
    );
    // Invalid towers are named.
    expect_error(t.set_gan(&m, new_input()?, &Gan::new().towers(&Towers::replicated(0))), Code::InvalidArgument, &[]);
    // The trainer still takes a GAN on good towers.
    t.set_gan(&m, new_input()?, &Gan::new().towers(&Towers::replicated(2)))?;
    assert_eq!(t.run()?, RunOutcome::Finished);
    assert_eq!(t.global_step(), 2);
    Ok(())
}

// ------------------------------------------------------------ resume

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpt-rust-custom-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Trains `steps` GAN steps (momentum SGD), saving every 3 steps in `dir`;
/// with `resume` it resumes from model-<resume> in `dir` first. Returns the
/// variables' sums.
fn gan_run(dir: &Path, steps: i64, resume: Option<i64>) -> Result<Vec<f64>> {
    manual_seed(2)?;
    let m = new_model(true)?;
    let mut t = Trainer::new(&options(steps, Some(dir)))?;
    t.set_gan(&m, new_input()?, &Gan::new())?;
    t.add_callback(ModelSaver::new().every(Every::epochs(1).and_steps(3)).keep_all())?;
    if let Some(step) = resume {
        t.resume(dir.join(format!("model-{step}")))?;
    }
    t.run()?;
    ["gen/w", "gen/b", "discrim/w", "discrim/b"].iter().map(|n| sum_of(&m, n)).collect()
}

#[test]
fn resume_is_exact_with_both_optimizers() -> Result<()> {
    let dir = tempdir("resume");
    let whole = gan_run(&dir, 9, None)?;
    // From step 3: both ops' momentum slots must come back.
    let resumed = gan_run(&dir, 9, Some(3))?;
    assert_eq!(whole, resumed);
    std::fs::remove_dir_all(&dir).unwrap();
    Ok(())
}

// ------------------------------------------------------------ errors

#[test]
fn an_unknown_op_is_named() -> Result<()> {
    let m = new_model(false)?;
    with_gan_ops(&m)?;
    let mut t = Trainer::new(&options(2, None))?;
    t.set_model(&m, new_input()?)?;
    t.set_run_step(|ctx| ctx.run_train_ops(&["d_op", "nope"], Run::Hooked))?;
    expect_error(t.run(), Code::InvalidArgument, &["no train op 'nope'", "'g_op', 'd_op'"]);
    assert_eq!(t.global_step(), 0);

    // No op at all, and a name with a NUL byte (refused before the library).
    let mut t = Trainer::new(&options(2, None))?;
    t.set_model(&m, new_input()?)?;
    t.set_run_step(|ctx| ctx.run_train_ops::<&str>(&[], Run::Raw))?;
    expect_error(t.run(), Code::InvalidArgument, &["no train op to run"]);
    let mut t = Trainer::new(&options(2, None))?;
    t.set_model(&m, new_input()?)?;
    t.set_run_step(|ctx| ctx.run_train_ops(&["d\0op"], Run::Raw))?;
    expect_error(t.run(), Code::InvalidArgument, &["names[0] contains a NUL byte"]);
    Ok(())
}

#[test]
fn bad_gan_options_are_named() -> Result<()> {
    let m = new_model(false)?;
    let mut t = Trainer::new(&options(2, None))?;
    expect_error(
        t.set_gan(&m, new_input()?, &Gan::separate(2, 3)),
        Code::InvalidArgument,
        &["one of d_period and g_period must be 1", "2 and 3"],
    );
    expect_error(t.set_gan(&m, new_input()?, &Gan::separate(0, 1)), Code::InvalidArgument, &["at least 1"]);
    expect_error(t.set_gan(&m, new_input()?, &Gan::separate(1, u64::MAX)), Code::InvalidArgument, &["g_period"]);
    expect_error(
        t.set_gan(&m, new_input()?, &Gan::new().ops("same", "same")),
        Code::InvalidArgument,
        &["two different names"],
    );
    expect_error(t.set_gan(&m, new_input()?, &Gan::new().ops("g", "d\0")), Code::InvalidArgument, &["d_op"]);
    // After all those failures the trainer still takes a GAN.
    t.set_gan(&m, new_input()?, &Gan::separate(1, 1))?;
    assert_eq!(t.run()?, RunOutcome::Finished);
    assert_eq!(t.global_step(), 4);
    Ok(())
}

#[test]
fn bad_train_ops_are_named() -> Result<()> {
    let model_sgd = sgd(false)?;
    let m = gan_model(&model_sgd, true)?;
    expect_error(m.add_train_op(&TrainOp::new("")), Code::InvalidArgument, &["op->name"]);
    expect_error(m.add_train_op(&TrainOp::new("a\0b")), Code::InvalidArgument, &["name"]);
    let a = TrainOp::new("a").cost("d_loss").scope("nothing/");
    m.add_train_op(&a)?;
    expect_error(m.add_train_op(&a), Code::InvalidArgument, &["a train op 'a' already"]);
    let mine = Optimizer::new("adam")?;
    m.add_train_op(&TrainOp::new("b").optimizer(&mine))?;
    expect_error(
        m.add_train_op(&TrainOp::new("c").optimizer(&mine)),
        Code::InvalidArgument,
        &["train op 'b''s already"],
    );
    expect_error(m.add_train_op(&TrainOp::new("c").optimizer(&model_sgd)), Code::InvalidArgument, &["the model's"]);

    // An op whose scope matches nothing fails when training starts.
    let mut t = Trainer::new(&options(2, None))?;
    t.set_model(&m, new_input()?)?;
    t.set_run_step(|ctx| ctx.run_train_ops(&["a"], Run::Hooked))?;
    expect_error(
        t.run(),
        Code::InvalidArgument,
        &["train op 'a': no trainable variable's name starts with 'nothing/'"],
    );

    // A missing output.
    let m = gan_model(&sgd(false)?, false)?;
    let mut t = Trainer::new(&options(2, None))?;
    t.set_gan(&m, new_input()?, &Gan::new())?;
    expect_error(t.run(), Code::State, &["train op 'g_op'", "did not set the output 'g_loss'"]);
    Ok(())
}
