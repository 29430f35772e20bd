//! The trainer from Rust: exact event sequences, Stop and errors from every
//! kind of closure, panics, drops exactly once, stop requests from another
//! thread, scheduling wrappers, scalars and monitors, step outputs. The C
//! twin is tests/c/test_trainer.c.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;
use tptrain::{
    Callback, Code, Context, Error, Event, Events, Every, Flow, LogdirAction, Progress, RecordKind, RunOutcome, Scalar,
    StopOnSignals, Tensor, Trainer, TrainerOptions,
};

// ------------------------------------------------------------ helpers

fn options(start: i64, max: i64, steps_per_epoch: i64) -> TrainerOptions {
    TrainerOptions {
        starting_epoch: start,
        max_epoch: max,
        steps_per_epoch: Some(steps_per_epoch),
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        default_monitors: false,
        ..Default::default()
    }
}

/// One observed call: who ('A', 'B' callbacks, 'R' run_step, 'S' step),
/// which event (None for R and S) and the counters at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ev {
    who: char,
    event: Option<Event>,
    epoch: i64,
    local: i64,
    global: i64,
}

fn note(log: &RefCell<Vec<Ev>>, ctx: &Context, who: char, event: Option<Event>) {
    log.borrow_mut().push(Ev {
        who,
        event,
        epoch: ctx.epoch_num(),
        local: ctx.local_step(),
        global: ctx.global_step(),
    });
}

fn count(log: &RefCell<Vec<Ev>>, who: char, event: Event) -> usize {
    log.borrow().iter().filter(|e| e.who == who && e.event == Some(event)).count()
}

const LIFECYCLE: Events = Events::SETUP
    .union(Events::BEFORE_TRAIN)
    .union(Events::BEFORE_EPOCH)
    .union(Events::BEFORE_RUN)
    .union(Events::AFTER_RUN)
    .union(Events::TRIGGER_STEP)
    .union(Events::AFTER_EPOCH)
    .union(Events::TRIGGER_EPOCH)
    .union(Events::AFTER_TRAIN);

/// A callback that notes every event it gets into `log`.
fn recorder<'a>(log: &'a RefCell<Vec<Ev>>, who: char, events: Events) -> Callback<'a> {
    Callback::on(events, move |ctx, event, _| {
        note(log, ctx, who, Some(event));
        Ok(Flow::Continue)
    })
    .name("recorder")
    .build()
    .unwrap()
}

/// A run_step that notes itself ('R') and runs `hooks` hooked steps, each
/// noting itself ('S').
fn set_recording_run_step<'a>(t: &mut Trainer<'a>, log: &'a RefCell<Vec<Ev>>, hooks: usize) {
    t.set_run_step(move |ctx| {
        note(log, ctx, 'R', None);
        for _ in 0..hooks {
            let flow = ctx.hooked_step(|s| {
                note(log, s, 'S', None);
                Ok(Flow::Continue)
            })?;
            if flow.is_stop() {
                return Ok(flow);
            }
        }
        Ok(Flow::Continue)
    })
    .unwrap();
}

/// The reference: tensorpack's loop written out by hand for callback 'A'
/// subscribed to every lifecycle event, a TRIGGER-only callback 'B',
/// run_step 'R' and its hooked steps 'S'.
fn expected_sequence(start: i64, max: i64, spe: i64, hooks: usize) -> Vec<Ev> {
    let mut out = Vec::new();
    let (mut global, mut local) = (0i64, -1i64);
    let mut put = |who: char, event: Option<Event>, epoch: i64, local: i64, global: i64| {
        out.push(Ev { who, event, epoch, local, global })
    };
    put('A', Some(Event::Setup), start - 1, local, global);
    put('A', Some(Event::BeforeTrain), start - 1, local, global);
    for epoch in start..=max {
        put('A', Some(Event::BeforeEpoch), epoch, local, global);
        for k in 0..spe {
            local = k;
            put('R', None, epoch, local, global);
            for _ in 0..hooks {
                put('A', Some(Event::BeforeRun), epoch, local, global);
                put('S', None, epoch, local, global);
                global += 1; // the step counter runs before user callbacks' after_run
                put('A', Some(Event::AfterRun), epoch, local, global);
            }
            put('A', Some(Event::TriggerStep), epoch, local, global);
        }
        put('A', Some(Event::AfterEpoch), epoch, local, global);
        put('A', Some(Event::TriggerEpoch), epoch, local, global);
        put('B', Some(Event::Trigger), epoch, local, global);
    }
    put('A', Some(Event::AfterTrain), max, local, global);
    out
}

fn run_sequence(start: i64, max: i64, spe: i64, hooks: usize) {
    let log = RefCell::new(Vec::new());
    let mut t = Trainer::new(&options(start, max, spe)).unwrap();
    set_recording_run_step(&mut t, &log, hooks);
    t.add_callback(recorder(&log, 'A', LIFECYCLE)).unwrap();
    t.add_callback(recorder(&log, 'B', Events::TRIGGER)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(t.stop_reason(), None);
    let want = expected_sequence(start, max, spe, hooks);
    let got = log.borrow();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "event {i}");
    }
    assert_eq!(got.len(), want.len());
}

/// Counts drops of the closures that capture it.
struct DropGuard(Rc<Cell<u32>>);
impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

// ------------------------------------------------------------ sequences

#[test]
fn reference_sequence_by_hand() {
    // The generator itself, checked on the smallest loop.
    let ev = |who, event, epoch, local, global| Ev { who, event, epoch, local, global };
    assert_eq!(
        expected_sequence(1, 1, 1, 1),
        vec![
            ev('A', Some(Event::Setup), 0, -1, 0),
            ev('A', Some(Event::BeforeTrain), 0, -1, 0),
            ev('A', Some(Event::BeforeEpoch), 1, -1, 0),
            ev('R', None, 1, 0, 0),
            ev('A', Some(Event::BeforeRun), 1, 0, 0),
            ev('S', None, 1, 0, 0),
            ev('A', Some(Event::AfterRun), 1, 0, 1),
            ev('A', Some(Event::TriggerStep), 1, 0, 1),
            ev('A', Some(Event::AfterEpoch), 1, 0, 1),
            ev('A', Some(Event::TriggerEpoch), 1, 0, 1),
            ev('B', Some(Event::Trigger), 1, 0, 1),
            ev('A', Some(Event::AfterTrain), 1, 0, 1),
        ]
    );
}

#[test]
fn sequence_two_hooked_steps_per_run_step() {
    run_sequence(3, 5, 4, 2);
}

#[test]
fn sequence_without_hooked_steps_and_without_steps() {
    run_sequence(3, 5, 4, 0);
    run_sequence(3, 5, 0, 1);
    run_sequence(6, 5, 4, 1);
}

// ------------------------------------------------------------ Stop

#[test]
fn stop_from_a_callback() {
    let log = RefCell::new(Vec::new());
    let after_train = Cell::new(0);
    let mut t = Trainer::new(&options(3, 5, 4)).unwrap();
    set_recording_run_step(&mut t, &log, 1);
    let a = Callback::on(LIFECYCLE, |ctx, event, _| {
        note(&log, ctx, 'A', Some(event));
        match event {
            Event::BeforeEpoch if ctx.epoch_num() == 4 => Ok(Flow::stop("enough at epoch 4")),
            Event::AfterTrain => {
                after_train.set(after_train.get() + 1);
                Ok(Flow::stop("ignored in after_train"))
            }
            _ => Ok(Flow::Continue),
        }
    })
    .name("stopper")
    .build()
    .unwrap();
    t.add_callback(a).unwrap();
    t.add_callback(recorder(&log, 'B', LIFECYCLE)).unwrap();
    let outcome = t.run().unwrap();
    assert_eq!(outcome, RunOutcome::Stopped("enough at epoch 4".into()));
    assert_eq!(outcome.stop_reason(), Some("enough at epoch 4"));
    assert_eq!(t.stop_reason().as_deref(), Some("enough at epoch 4"));
    // epoch 3 ran fully; epoch 4 stopped inside A's before_epoch: B never saw it
    assert_eq!(count(&log, 'A', Event::BeforeEpoch), 2);
    assert_eq!(count(&log, 'B', Event::BeforeEpoch), 1);
    assert_eq!(count(&log, 'B', Event::AfterTrain), 1);
    assert_eq!(after_train.get(), 1);
    assert_eq!((t.epoch_num(), t.global_step()), (4, 4));
}

#[test]
fn stop_from_run_step() {
    let log = RefCell::new(Vec::new());
    let mut t = Trainer::new(&options(3, 5, 4)).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|_| Ok(Flow::Continue))?;
        Ok(if ctx.global_step() >= 6 { Flow::stop("run_step says stop") } else { Flow::Continue })
    })
    .unwrap();
    t.add_callback(recorder(&log, 'A', LIFECYCLE)).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("run_step says stop".into()));
    assert_eq!(t.stop_reason().as_deref(), Some("run_step says stop"));
    // the stopping run_step's trigger_step does not run
    assert_eq!(count(&log, 'A', Event::TriggerStep), 5);
    let last = *log.borrow().last().unwrap();
    assert_eq!(last, Ev { who: 'A', event: Some(Event::AfterTrain), epoch: 4, local: 1, global: 6 });
}

#[test]
fn stop_from_a_hooked_step_comes_back_from_hooked_step() {
    let seen = RefCell::new(Vec::new());
    let mut t = Trainer::new(&options(1, 3, 4)).unwrap();
    t.set_run_step(|ctx| {
        let flow = ctx.hooked_step(|s| {
            Ok::<_, Error>(if s.global_step() == 5 { Flow::stop("step 5") } else { Flow::Continue })
        })?;
        seen.borrow_mut().push(flow.clone());
        Ok(flow)
    })
    .unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("step 5".into()));
    assert_eq!(seen.borrow().len(), 6);
    assert_eq!(seen.borrow()[5], Flow::Stop("step 5".into()));
    // the failing step's after_run did not run, so global_step stayed at 5
    assert_eq!(t.global_step(), 5);
}

#[test]
fn stop_is_sticky_even_if_run_step_ignores_it() {
    let mut t = Trainer::new(&options(1, 3, 4)).unwrap();
    t.set_run_step(|ctx| {
        let _ignored = ctx.hooked_step(|_| Ok(Flow::Continue));
        Ok(Flow::Continue)
    })
    .unwrap();
    let cb = Callback::on(Events::AFTER_RUN, |ctx, _, _| {
        Ok(if ctx.global_step() == 2 { Flow::stop("after_run at 2") } else { Flow::Continue })
    })
    .name("stop at 2")
    .build()
    .unwrap();
    t.add_callback(cb).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("after_run at 2".into()));
    assert_eq!(t.global_step(), 2);
}

// ------------------------------------------------------------ errors

#[test]
fn an_error_from_a_callback_comes_back_unchanged() {
    for event in
        [Event::Setup, Event::BeforeEpoch, Event::BeforeRun, Event::AfterRun, Event::TriggerEpoch, Event::AfterTrain]
    {
        let after_train = Cell::new(0);
        let mut t = Trainer::new(&options(3, 5, 4)).unwrap();
        t.set_run_step(|ctx| ctx.hooked_step(|_| Ok(Flow::Continue))).unwrap();
        let failing = Callback::on(LIFECYCLE, |_, e, _| {
            if e == event {
                return Err(Error::new(Code::Io, format!("disk full at {e:?}")));
            }
            Ok(Flow::Continue)
        })
        .name("failing")
        .build()
        .unwrap();
        let watcher = Callback::on(Events::AFTER_TRAIN, |_, _, _| {
            after_train.set(after_train.get() + 1);
            Ok(Flow::Continue)
        })
        .name("watcher")
        .build()
        .unwrap();
        t.add_callback(failing).unwrap();
        t.add_callback(watcher).unwrap();
        let e = t.run().unwrap_err();
        assert_eq!(e, Error::new(Code::Io, format!("disk full at {event:?}")));
        assert_eq!(after_train.get(), 1, "{event:?}");
        assert_eq!(t.stop_reason(), None);
    }
}

#[test]
fn errors_from_run_step_and_from_a_step_come_back_unchanged() {
    let mut t = Trainer::new(&options(1, 3, 4)).unwrap();
    t.set_run_step(|ctx| {
        if ctx.global_step() == 3 {
            return Err(Error::new(Code::InvalidArgument, "run_step failed"));
        }
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    assert_eq!(t.run().unwrap_err(), Error::new(Code::InvalidArgument, "run_step failed"));

    let after_runs = Cell::new(0);
    let mut t = Trainer::new(&options(1, 3, 4)).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|s| {
            if s.global_step() == 5 {
                return Err(Error::new(Code::Other(4242), "a host code"));
            }
            Ok(Flow::Continue)
        })
    })
    .unwrap();
    let cb = Callback::on(Events::AFTER_RUN, |_, _, _| {
        after_runs.set(after_runs.get() + 1);
        Ok(Flow::Continue)
    })
    .name("count")
    .build()
    .unwrap();
    t.add_callback(cb).unwrap();
    assert_eq!(t.run().unwrap_err(), Error::new(Code::Other(4242), "a host code"));
    assert_eq!(after_runs.get(), 5); // the failing step's after_run did not run
}

#[test]
fn trainer_state_errors() {
    let mut t = Trainer::new(&options(1, 1, 3)).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::State);
    assert!(e.message().contains("no run_step"), "{e}");
    let e = t.put_scalar("x", 1.0).unwrap_err();
    assert_eq!(e.code(), Code::State);
    assert!(e.message().contains("while training runs"), "{e}");
    let e = t.scalar_latest("nope").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Trainer derefs to Context, where the method is.
    assert_eq!(e.message(), "Context::scalar_latest: no scalar 'nope' was put (tpt_trainer_scalar_latest)");
    let e = t.output_scalar("loss").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("no hooked step has run"), "{e}");

    let mut t = Trainer::new(&TrainerOptions { console: false, ..Default::default() }).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("steps_per_epoch is not set"), "{e}");
}

#[test]
fn options_default_to_the_c_defaults_and_are_checked() {
    let o = TrainerOptions::default();
    assert!(o.is_chief && o.console && o.default_callbacks && o.default_monitors);
    assert_eq!((o.starting_epoch, o.max_epoch, o.steps_per_epoch), (1, 99999999, None));
    assert_eq!((o.logdir_action, o.progress, o.logdir), (LogdirAction::Refuse, Progress::Auto, None));
    let bad = |o: TrainerOptions, code: Code, fragment: &str| {
        let e = Trainer::new(&o).unwrap_err();
        assert_eq!(e.code(), code);
        assert!(e.message().contains(fragment), "{e}");
    };
    bad(TrainerOptions { starting_epoch: 0, ..options(1, 1, 1) }, Code::InvalidArgument, "starting_epoch must be >= 1");
    bad(TrainerOptions { max_epoch: -1, ..options(1, 1, 1) }, Code::InvalidArgument, "max_epoch");
    bad(TrainerOptions { steps_per_epoch: Some(-1), ..options(1, 1, 1) }, Code::InvalidArgument, "steps_per_epoch");
    bad(TrainerOptions { logdir: Some("".into()), ..options(1, 1, 1) }, Code::InvalidArgument, "logdir is empty");
    bad(TrainerOptions { logdir: Some("a\0b".into()), ..options(1, 1, 1) }, Code::InvalidArgument, "NUL");
}

#[test]
fn logdir_is_set_up_by_run() {
    let dir = std::env::temp_dir().join(format!("tptrain-rust-logdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = TrainerOptions { logdir: Some(dir.clone()), default_monitors: true, ..options(1, 2, 2) };
    let mut t = Trainer::new(&o).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|_| Ok(Flow::Continue))?;
        ctx.put_scalar("loss", 0.5)?;
        Ok(Flow::Continue)
    })
    .unwrap();
    assert_eq!(t.logdir(), None);
    t.run().unwrap();
    assert_eq!(t.logdir().as_deref(), Some(dir.as_path()));
    let stats = std::fs::read_to_string(dir.join("stats.json")).unwrap();
    assert!(stats.contains("\"loss\""), "{stats}");
    assert!(dir.join("log.log").exists());
    drop(t);
    // the directory is not empty now: the default action refuses it
    let e = Trainer::new(&TrainerOptions { logdir: Some(dir.clone()), ..options(1, 1, 0) }).unwrap().run().unwrap_err();
    assert_eq!(e.code(), Code::Io);
    let mut t = Trainer::new(&TrainerOptions {
        logdir: Some(dir.clone()),
        logdir_action: LogdirAction::Delete,
        ..options(1, 1, 0)
    })
    .unwrap();
    t.run().unwrap();
    assert!(!dir.join("stats.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------ panics

#[test]
fn a_panic_in_a_callback_ends_training_and_is_resumed_by_run() {
    let after_train = Cell::new(0);
    let steps = Cell::new(0);
    let mut t = Trainer::new(&options(1, 5, 4)).unwrap();
    t.set_run_step(|ctx| {
        steps.set(steps.get() + 1);
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    let boom = Callback::on(Events::AFTER_RUN | Events::AFTER_TRAIN, |ctx, e, _| {
        if e == Event::AfterTrain {
            after_train.set(after_train.get() + 1);
        } else if ctx.global_step() == 6 {
            panic!("boom at step {}", ctx.global_step());
        }
        Ok(Flow::Continue)
    })
    .name("boom")
    .build()
    .unwrap();
    t.add_callback(boom).unwrap();
    let watcher = Callback::on(Events::AFTER_TRAIN, |_, _, _| {
        after_train.set(after_train.get() + 10);
        Ok(Flow::Continue)
    })
    .name("watcher")
    .build()
    .unwrap();
    t.add_callback(watcher).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "boom at step 6");
    assert_eq!(after_train.get(), 11); // both callbacks, the panicking one included
    assert_eq!(steps.get(), 6);
    assert_eq!(t.global_step(), 6);
    // the trainer is still usable for queries, and runs once
    assert_eq!(t.run().unwrap_err().code(), Code::State);
}

#[test]
fn a_panic_in_run_step_or_a_step_is_resumed_by_run() {
    for in_step in [false, true] {
        let after_train = Cell::new(false);
        let mut t = Trainer::new(&options(1, 5, 4)).unwrap();
        t.set_run_step(move |ctx| {
            if !in_step && ctx.global_step() == 3 {
                panic!("run_step panicked");
            }
            ctx.hooked_step(|s| {
                if s.global_step() == 3 {
                    std::panic::panic_any(String::from("step panicked"));
                }
                Ok(Flow::Continue)
            })
        })
        .unwrap();
        let watcher = Callback::on(Events::AFTER_TRAIN, |_, _, _| {
            after_train.set(true);
            Ok(Flow::Continue)
        })
        .name("watcher")
        .build()
        .unwrap();
        t.add_callback(watcher).unwrap();
        let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
        let want = if in_step { "step panicked" } else { "run_step panicked" };
        assert_eq!(panic_message(&*payload), want);
        assert!(after_train.get());
        assert_eq!(t.global_step(), 3);
    }
}

#[test]
fn a_panic_in_a_monitor_is_not_lost_when_run_step_ignores_the_error() {
    let puts = Cell::new(0);
    let mut t = Trainer::new(&options(1, 5, 4)).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|_| Ok(Flow::Continue))?;
        let r = ctx.put_scalar("metric", 1.0);
        if ctx.global_step() == 2 {
            let e = r.unwrap_err();
            assert_eq!(e.code(), Code::Callback);
            assert_eq!(e.message(), "panic in callback 'touchy': no metric at 2");
        }
        puts.set(puts.get() + 1);
        Ok(Flow::Continue) // swallowed: the run still fails here
    })
    .unwrap();
    let touchy = Callback::on(Events::RECORD, |ctx, _, _| {
        if ctx.global_step() == 2 {
            panic!("no metric at 2");
        }
        Ok(Flow::Continue)
    })
    .name("touchy")
    .all_workers()
    .build()
    .unwrap();
    t.add_monitor(touchy).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "no metric at 2");
    assert_eq!(puts.get(), 2);
}

#[test]
fn a_panic_in_a_predicate_is_resumed_by_run() {
    let mut t = Trainer::new(&options(1, 5, 4)).unwrap();
    t.set_run_step(|ctx| ctx.hooked_step(|_| Ok(Flow::Continue))).unwrap();
    let inner = Callback::on(Events::BEFORE_EPOCH, |_, _, _| Ok(Flow::Continue)).name("inner").build().unwrap();
    let cb = inner
        .enable_if(|ctx| {
            if ctx.epoch_num() == 2 {
                panic!("predicate panicked");
            }
            true
        })
        .unwrap();
    t.add_callback(cb).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "predicate panicked");
    assert_eq!(t.epoch_num(), 2);
}

#[test]
fn a_panic_while_dropping_a_closure_is_resumed_where_the_drop_happened() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("bomb dropped");
        }
    }
    let bomb = Bomb;
    let cb = Callback::on(Events::AFTER_TRAIN, move |_, _, _| {
        let _ = &bomb;
        Ok(Flow::Continue)
    })
    .name("bomb")
    .build()
    .unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| drop(cb))).unwrap_err();
    assert_eq!(panic_message(&*payload), "bomb dropped");

    let mut t = Trainer::new(&options(1, 1, 1)).unwrap();
    let bomb = Bomb;
    t.set_run_step(move |_| {
        let _ = &bomb;
        Ok(Flow::Continue)
    })
    .unwrap();
    // replacing run_step drops the old closure
    let payload = catch_unwind(AssertUnwindSafe(|| t.set_run_step(|_| Ok(Flow::Continue)))).unwrap_err();
    assert_eq!(panic_message(&*payload), "bomb dropped");
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
}

// ------------------------------------------------------------ drops exactly once

#[test]
fn closures_are_dropped_exactly_once() {
    let drops = Rc::new(Cell::new(0u32));
    let guard = || DropGuard(drops.clone());

    // 1. with the trainer
    let mut t = Trainer::new(&options(1, 2, 2)).unwrap();
    let g = guard();
    t.set_run_step(move |ctx| {
        let _ = &g;
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    let g = guard();
    t.add_callback(
        Callback::on(LIFECYCLE, move |_, _, _| {
            let _ = &g;
            Ok(Flow::Continue)
        })
        .name("c")
        .build()
        .unwrap(),
    )
    .unwrap();
    let (g, p) = (guard(), guard());
    let m = Callback::on(Events::RECORD, move |_, _, _| {
        let _ = &g;
        Ok(Flow::Continue)
    })
    .name("m")
    .all_workers()
    .build()
    .unwrap()
    .enable_if(move |_| {
        let _ = &p;
        true
    })
    .unwrap()
    .periodic(Every::steps(1))
    .unwrap();
    t.add_monitor(m).unwrap();
    t.run().unwrap();
    assert_eq!(drops.get(), 0);
    drop(t);
    assert_eq!(drops.get(), 4);

    // 2. a replaced run_step at once
    let mut t = Trainer::new(&options(1, 1, 1)).unwrap();
    let g = guard();
    t.set_run_step(move |_| {
        let _ = &g;
        Ok(Flow::Continue)
    })
    .unwrap();
    t.set_run_step(|_| Ok(Flow::Continue)).unwrap();
    assert_eq!(drops.get(), 5);

    // 3. registration after run fails, and drops the closure
    t.run().unwrap();
    let g = guard();
    let cb = Callback::on(LIFECYCLE, move |_, _, _| {
        let _ = &g;
        Ok(Flow::Continue)
    })
    .name("late")
    .build()
    .unwrap();
    let e = t.add_callback(cb).unwrap_err();
    assert_eq!(e.code(), Code::State);
    assert!(e.message().contains("frozen"), "{e}");
    assert_eq!(drops.get(), 6);
    let g = guard();
    let e = t
        .set_run_step(move |_| {
            let _ = &g;
            Ok(Flow::Continue)
        })
        .unwrap_err();
    assert_eq!(e.code(), Code::State);
    assert_eq!(drops.get(), 7);
    drop(t);
    assert_eq!(drops.get(), 7);

    // 4. a callback never given away; wrappers that fail consume the inner one
    let g = guard();
    drop(
        Callback::on(LIFECYCLE, move |_, _, _| {
            let _ = &g;
            Ok(Flow::Continue)
        })
        .name("lone")
        .build()
        .unwrap(),
    );
    assert_eq!(drops.get(), 8);
    let g = guard();
    let e = Callback::on(Events::TRIGGER, move |_, _, _| {
        let _ = &g;
        Ok(Flow::Continue)
    })
    .name("p")
    .build()
    .unwrap()
    .periodic_trigger(Every::default())
    .unwrap_err();
    assert!(e.message().contains("every_k_steps or every_k_epochs"), "{e}");
    assert_eq!(drops.get(), 9);
    let (g, p) = (guard(), guard());
    let e = Callback::on(Events::TRIGGER, move |_, _, _| {
        let _ = &g;
        Ok(Flow::Continue)
    })
    .name("q")
    .build()
    .unwrap()
    .enable_if(move |_| {
        let _ = &p;
        true
    })
    .unwrap()
    .periodic(Every::steps(-1))
    .unwrap_err();
    assert!(e.message().contains("every_k_steps must be >= 0"), "{e}");
    assert_eq!(drops.get(), 11);

    // 5. a bad description: the closure is dropped, never leaked
    let g = guard();
    let e = Callback::on(LIFECYCLE, move |_, _, _| {
        let _ = &g;
        Ok(Flow::Continue)
    })
    .name("bad\0name")
    .build()
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(drops.get(), 12);

    // 6. a chief-only callback on a non-chief trainer is dropped at once
    let mut t = Trainer::new(&TrainerOptions { is_chief: false, ..options(1, 1, 0) }).unwrap();
    let ran = Rc::new(Cell::new(0));
    let (g, r) = (guard(), ran.clone());
    t.add_callback(
        Callback::on(LIFECYCLE, move |_, _, _| {
            let _ = &g;
            r.set(r.get() + 1);
            Ok(Flow::Continue)
        })
        .name("chief")
        .build()
        .unwrap(),
    )
    .unwrap();
    assert_eq!(drops.get(), 13);
    let (g, r) = (guard(), ran.clone());
    t.add_callback(
        Callback::on(Events::AFTER_TRAIN, move |_, _, _| {
            let _ = &g;
            r.set(r.get() + 100);
            Ok(Flow::Continue)
        })
        .name("anyone")
        .all_workers()
        .build()
        .unwrap(),
    )
    .unwrap();
    t.run().unwrap();
    assert_eq!(ran.get(), 100);
    drop(t);
    assert_eq!(drops.get(), 14);
}

// ------------------------------------------------------------ request_stop

#[test]
fn request_stop_from_another_thread() {
    let after_train = Cell::new(false);
    let mut t = Trainer::new(&options(1, 1_000_000, 1000)).unwrap();
    t.set_run_step(|ctx| {
        std::thread::sleep(Duration::from_millis(1));
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    t.add_callback(
        Callback::on(Events::AFTER_TRAIN, |_, _, _| {
            after_train.set(true);
            Ok(Flow::Continue)
        })
        .name("watcher")
        .build()
        .unwrap(),
    )
    .unwrap();
    let handle = t.stop_handle();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        handle.request_stop()
    });
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("tpt_trainer_request_stop".into()));
    assert!(stopper.join().unwrap());
    assert!(after_train.get());
    let g = t.global_step();
    assert!(g > 0 && g < 1_000_000, "{g}");
    // a handle may outlive its trainer; it then does nothing
    let late = t.stop_handle();
    let clone = late.clone();
    drop(t);
    assert!(!late.request_stop());
    assert!(!std::thread::spawn(move || clone.request_stop()).join().unwrap());
    assert_eq!(late.request_stop_because("gone").unwrap(), false);
}

/// `StopHandle::request_stop_because`: the run's stop reason is the one given.
#[test]
fn stop_handle_with_a_reason() {
    let mut t = Trainer::new(&options(1, 1_000_000, 1000)).unwrap();
    t.set_run_step(|ctx| {
        std::thread::sleep(Duration::from_millis(1));
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    let handle = t.stop_handle();
    assert_eq!(handle.request_stop_because("").unwrap_err().code(), Code::InvalidArgument);
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        handle.request_stop_because("preempted").unwrap()
    });
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("preempted".into()));
    assert!(stopper.join().unwrap());
}

#[test]
fn sigterm_stops_a_run_with_stop_on_signals() {
    // SIGTERM to the process during a run with StopOnSignals::Always: a
    // graceful stop before the next step, named by the signal.
    let mut o = options(1, 3, 5);
    o.stop_on_signals = StopOnSignals::Always;
    let mut t = Trainer::new(&o).unwrap();
    t.set_run_step(|ctx| {
        if ctx.global_step() == 3 {
            let kill = format!("kill -TERM {}", std::process::id());
            assert!(std::process::Command::new("sh").args(["-c", &kill]).status().unwrap().success());
            std::thread::sleep(Duration::from_millis(20)); // delivered meanwhile
        }
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("SIGTERM".into()));
    assert_eq!(t.global_step(), 4);
    assert_eq!(TrainerOptions::default().stop_on_signals, StopOnSignals::FromEnvironment);
}

#[test]
fn request_stop_from_a_callback_and_before_run() {
    let mut t = Trainer::new(&options(1, 10, 10)).unwrap();
    t.set_run_step(|ctx| {
        if ctx.global_step() == 7 {
            ctx.request_stop();
        }
        ctx.hooked_step(|_| Ok(Flow::Continue))
    })
    .unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("tpt_trainer_request_stop".into()));
    assert_eq!(t.global_step(), 8);

    let mut t = Trainer::new(&options(1, 10, 10)).unwrap();
    t.set_run_step(|ctx| ctx.hooked_step(|_| Ok(Flow::Continue))).unwrap();
    assert!(t.stop_handle().request_stop());
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("tpt_trainer_request_stop".into()));
    assert_eq!(t.global_step(), 0);
}

// ------------------------------------------------------------ wrappers

#[test]
fn wrappers_schedule_as_tensorpack() {
    let log = RefCell::new(Vec::new());
    let mut t = Trainer::new(&options(1, 4, 5)).unwrap(); // global steps 1..20
    t.set_run_step(|ctx| ctx.hooked_step(|_| Ok(Flow::Continue))).unwrap();
    // P: trigger every 3 steps and before training
    let p = recorder(&log, 'P', Events::TRIGGER | Events::TRIGGER_EPOCH)
        .periodic_trigger(Every::steps(3).before_train())
        .unwrap();
    // Q: trigger every 2 epochs (its own trigger_epoch is replaced)
    let q = recorder(&log, 'Q', Events::TRIGGER | Events::TRIGGER_EPOCH).periodic_trigger(Every::epochs(2)).unwrap();
    // C: trigger_step and after_run only when global_step % 4 == 0
    let c = recorder(&log, 'C', Events::TRIGGER_STEP | Events::AFTER_RUN).periodic(Every::steps(4)).unwrap();
    // E: before/after epoch only in odd epochs; after_train always
    let e = recorder(&log, 'E', Events::BEFORE_EPOCH | Events::AFTER_EPOCH | Events::AFTER_TRAIN)
        .enable_if(|ctx| ctx.epoch_num() % 2 == 1)
        .unwrap();
    for cb in [p, q, c, e] {
        t.add_callback(cb).unwrap();
    }
    t.run().unwrap();
    drop(t);
    let log = log.into_inner();
    let of = |who: char| log.iter().filter(|e| e.who == who).copied().collect::<Vec<_>>();
    let steps =
        |who: char, ev: Event| of(who).iter().filter(|e| e.event == Some(ev)).map(|e| e.global).collect::<Vec<_>>();
    assert!(of('P').iter().all(|e| e.event == Some(Event::Trigger)));
    assert_eq!(steps('P', Event::Trigger), vec![0, 3, 6, 9, 12, 15, 18]);
    assert!(of('Q').iter().all(|e| e.event == Some(Event::Trigger)));
    assert_eq!(of('Q').iter().map(|e| e.epoch).collect::<Vec<_>>(), vec![2, 4]);
    assert_eq!(steps('C', Event::TriggerStep), vec![4, 8, 12, 16, 20]);
    // after_run: decided in before_run, when global_step was one less
    assert_eq!(steps('C', Event::AfterRun), vec![1, 5, 9, 13, 17]);
    let e_events = of('E').iter().map(|e| (e.event.unwrap(), e.epoch)).collect::<Vec<_>>();
    assert_eq!(
        e_events,
        vec![
            (Event::BeforeEpoch, 1),
            (Event::AfterEpoch, 1),
            (Event::BeforeEpoch, 3),
            (Event::AfterEpoch, 3),
            (Event::AfterTrain, 4)
        ]
    );
}

// ------------------------------------------------------------ scalars and monitors

#[test]
fn put_scalar_reaches_a_rust_monitor_and_the_history() {
    let records = RefCell::new(Vec::new());
    let trigger_epochs = Cell::new(0);
    let mut t = Trainer::new(&options(1, 3, 4)).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|_| Ok(Flow::Continue))?;
        let g = ctx.global_step();
        ctx.put_scalar("metric", g as f64 * 0.5)?;
        Ok(Flow::Continue)
    })
    .unwrap();
    let monitor = Callback::on(Events::RECORD | Events::TRIGGER_EPOCH, |_, event, record| {
        match (event, record) {
            (Event::Record, Some(r)) => {
                assert_eq!(r.kind, RecordKind::Scalar);
                records.borrow_mut().push((r.name.into_owned(), r.global_step, r.epoch_num, r.value));
            }
            (Event::TriggerEpoch, None) => trigger_epochs.set(trigger_epochs.get() + 1),
            other => panic!("unexpected {other:?}"),
        }
        Ok(Flow::Continue)
    })
    .name("monitor")
    .all_workers()
    .build()
    .unwrap();
    t.add_monitor(monitor).unwrap();
    t.run().unwrap();
    let records = records.borrow().clone();
    assert_eq!(records.len(), 12);
    for (i, (name, step, epoch, value)) in records.iter().enumerate() {
        let g = i as i64 + 1;
        assert_eq!((name.as_str(), *step, *epoch, *value), ("metric", g, (g - 1) / 4 + 1, g as f64 * 0.5));
    }
    assert_eq!(trigger_epochs.get(), 3);
    assert_eq!(t.scalar_latest("metric").unwrap(), Scalar { global_step: 12, value: 6.0 });
    let history = t.scalar_history("metric").unwrap();
    assert_eq!(history.len(), 12);
    assert_eq!(history[4], Scalar { global_step: 5, value: 2.5 });
    let e = t.scalar_history("other").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("no scalar 'other'"), "{e}");
    assert_eq!(t.scalar_latest("a\0b").unwrap_err().code(), Code::InvalidArgument);
}

#[test]
fn a_monitor_that_stops_stops_training_through_put_scalar() {
    let after_put = Cell::new(0);
    let mut t = Trainer::new(&options(1, 10, 10)).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|_| Ok(Flow::Continue))?;
        let g = ctx.global_step();
        ctx.put_scalar("loss", 1.0 / g as f64)?;
        after_put.set(after_put.get() + 1); // run_step goes on after the put
        Ok(Flow::Continue)
    })
    .unwrap();
    let early = Callback::on(Events::RECORD, |_, _, r| {
        let r = r.expect("a record");
        Ok(if r.value < 0.1 {
            Flow::stop(format!("loss {:.3} at step {}", r.value, r.global_step))
        } else {
            Flow::Continue
        })
    })
    .name("early stopping")
    .all_workers()
    .build()
    .unwrap();
    t.add_monitor(early).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Stopped("loss 0.091 at step 11".into()));
    assert_eq!(after_put.get(), 11);
    assert_eq!(t.global_step(), 11);
}

#[test]
fn a_monitor_receives_the_scalars_it_puts_itself_after_returning() {
    let seen = RefCell::new(Vec::new());
    let mut t = Trainer::new(&options(1, 1, 3)).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|_| Ok(Flow::Continue))?;
        let g = ctx.global_step();
        ctx.put_scalar("loss", g as f64)?;
        Ok(Flow::Continue)
    })
    .unwrap();
    let mut ema = None::<f64>;
    let smoother = Callback::on(Events::RECORD, move |ctx, _, r| {
        let r = r.unwrap();
        if r.name == "loss" {
            let v = ema.map_or(r.value, |e| 0.5 * e + 0.5 * r.value);
            ema = Some(v);
            ctx.put_scalar("loss_ema", v)?; // reaches this monitor once it returns
        }
        Ok(Flow::Continue)
    })
    .name("ema")
    .all_workers()
    .build()
    .unwrap();
    let watcher = Callback::on(Events::RECORD, |_, _, r| {
        seen.borrow_mut().push(r.unwrap().name.into_owned());
        Ok(Flow::Continue)
    })
    .name("watcher")
    .all_workers()
    .build()
    .unwrap();
    t.add_monitor(smoother).unwrap();
    t.add_monitor(watcher).unwrap();
    t.run().unwrap();
    // the other monitor sees loss_ema inside the first put, before "loss" reaches it
    assert_eq!(seen.borrow().iter().filter(|n| *n == "loss_ema").count(), 3);
    assert_eq!(seen.borrow()[..2], ["loss_ema".to_string(), "loss".to_string()]);
    let h = t.scalar_history("loss_ema").unwrap();
    assert_eq!(h.iter().map(|s| s.value).collect::<Vec<_>>(), vec![1.0, 1.5, 2.25]);
}

// ------------------------------------------------------------ step outputs

#[test]
fn step_outputs_scalar_and_tensor() {
    let checked = Cell::new(0);
    let mut t = Trainer::new(&options(1, 2, 3)).unwrap();
    t.set_run_step(|ctx| {
        ctx.hooked_step(|s| {
            let g = s.global_step();
            s.set_output_scalar("loss", 1.0 / (g + 1) as f64)?;
            let logits = Tensor::from_slice(&[g as f32, 1.0, 2.0], &[3])?;
            s.set_output("logits", &logits)?; // the trainer keeps its own reference
            Ok(Flow::Continue)
        })
    })
    .unwrap();
    let reader = Callback::on(Events::AFTER_RUN, |ctx, _, _| {
        let g = ctx.global_step();
        let loss = ctx.output_scalar("loss")?;
        assert_eq!(loss, 1.0 / g as f64); // set when global_step was g - 1
        assert_eq!(ctx.output("logits")?.to_vec::<f32>()?, vec![(g - 1) as f32, 1.0, 2.0]);
        let as_tensor = ctx.output("loss")?;
        assert_eq!(as_tensor.ndim(), 0);
        assert_eq!(as_tensor.to_vec::<f64>()?, vec![loss]);
        let e = ctx.output_scalar("logits").unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("3 elements"), "{e}");
        let e = ctx.output_scalar("nope").unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        assert!(e.message().contains("no output 'nope'"), "{e}");
        checked.set(checked.get() + 1);
        Ok(Flow::Continue)
    })
    .name("reader")
    .build()
    .unwrap();
    t.add_callback(reader).unwrap();
    t.run().unwrap();
    assert_eq!(checked.get(), 6);
    assert_eq!(t.output_scalar("loss").unwrap(), 1.0 / 6.0);
}

#[test]
fn set_global_step_in_before_train() {
    let mut t = Trainer::new(&options(1, 2, 3)).unwrap();
    t.set_run_step(|ctx| ctx.hooked_step(|_| Ok(Flow::Continue))).unwrap();
    assert_eq!(t.set_global_step(-1).unwrap_err().code(), Code::InvalidArgument);
    let restore = Callback::on(Events::BEFORE_TRAIN | Events::BEFORE_EPOCH, |ctx, e, _| {
        if e == Event::BeforeTrain {
            ctx.set_global_step(100)?;
        } else {
            let err = ctx.set_global_step(5).unwrap_err();
            assert_eq!(err.code(), Code::State);
        }
        ctx.log(&format!("global_step is {}", ctx.global_step()))?;
        Ok(Flow::Continue)
    })
    .name("restore")
    .build()
    .unwrap();
    t.add_callback(restore).unwrap();
    t.run().unwrap();
    assert_eq!(t.global_step(), 106);
}

// ------------------------------------------------------------ small types

#[test]
fn events_and_flow() {
    let e = Events::SETUP | Events::AFTER_TRAIN;
    assert_eq!(e.bits(), 1 | 1 << 9);
    assert!(e.contains(Events::SETUP) && !e.contains(Events::RECORD));
    assert_eq!(e & Events::SETUP, Events::SETUP);
    assert_eq!(format!("{e:?}"), "Events(SETUP | AFTER_TRAIN)");
    assert_eq!(format!("{:?}", Events::NONE), "Events(NONE)");
    assert_eq!(e.iter().collect::<Vec<_>>(), vec![Event::Setup, Event::AfterTrain]);
    assert_eq!(Events::ALL.iter().count(), 11);
    assert_eq!(Events::from_bits_truncate(u32::MAX), Events::ALL);
    for ev in Events::ALL.iter() {
        assert_eq!(Event::from_raw(ev.to_raw()), Some(ev));
        assert_eq!(Events::from(ev).bits(), ev.to_raw() as u32);
    }
    assert_eq!(Event::from_raw(0), None);
    assert_eq!(Event::from_raw(3), None);
    assert_eq!(Event::from_raw(1 << 11), None);
    let mut m = Events::NONE;
    m |= Events::RECORD;
    assert!(!m.is_empty());
    assert_eq!(Flow::default(), Flow::Continue);
    assert!(Flow::stop("x").is_stop());
}

#[test]
fn an_error_with_a_non_error_code_still_fails_training() {
    let mut t = Trainer::new(&options(1, 1, 1)).unwrap();
    t.set_run_step(|_| Err(Error::new(Code::Other(0), "zero is not success here"))).unwrap();
    let e = t.run().unwrap_err();
    assert_eq!(e, Error::new(Code::Callback, "zero is not success here"));
}

#[test]
fn hooks_only_runs_the_callbacks_around_no_work() {
    let log = RefCell::new(Vec::new());
    let mut t = Trainer::new(&options(1, 1, 3)).unwrap();
    t.set_run_step(|ctx| ctx.hooks_only()).unwrap();
    t.add_callback(recorder(&log, 'A', Events::BEFORE_RUN | Events::AFTER_RUN)).unwrap();
    t.run().unwrap();
    let got = log.borrow().iter().map(|e| (e.event.unwrap(), e.global)).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (Event::BeforeRun, 0),
            (Event::AfterRun, 1),
            (Event::BeforeRun, 1),
            (Event::AfterRun, 2),
            (Event::BeforeRun, 2),
            (Event::AfterRun, 3)
        ]
    );
}

#[test]
fn nested_runs_keep_their_panics_apart() {
    // An inner trainer run from an outer closure: its panic unwinds the outer
    // closure, which the outer run resumes.
    let mut outer = Trainer::new(&options(1, 1, 2)).unwrap();
    outer
        .set_run_step(|_| {
            let mut inner = Trainer::new(&options(1, 1, 1)).unwrap();
            inner.set_run_step(|_| panic!("inner panic")).unwrap();
            inner.run()?;
            Ok(Flow::Continue)
        })
        .unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| outer.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "inner panic");

    // After the outer run caught a panic, an inner run in AFTER_TRAIN runs
    // normally and leaves the outer panic to the outer run.
    let inner_outcome = RefCell::new(None);
    let mut outer = Trainer::new(&options(1, 1, 2)).unwrap();
    outer.set_run_step(|_| panic!("outer panic")).unwrap();
    let cb = Callback::on(Events::AFTER_TRAIN, |_, _, _| {
        let mut inner = Trainer::new(&options(1, 2, 2)).unwrap();
        inner.set_run_step(|ctx| ctx.hooks_only())?;
        *inner_outcome.borrow_mut() = Some(inner.run()?);
        Ok(Flow::Continue)
    })
    .name("inner runner")
    .build()
    .unwrap();
    outer.add_callback(cb).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| outer.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "outer panic");
    assert_eq!(*inner_outcome.borrow(), Some(RunOutcome::Finished));
}

#[test]
fn handles_and_types_cross_threads_as_documented() {
    fn send_sync_static<T: Send + Sync + Clone + 'static>() {}
    send_sync_static::<tptrain::StopHandle>();
    send_sync_static::<Error>();
    send_sync_static::<TrainerOptions>();
    send_sync_static::<Events>();
}

#[test]
fn callback_builders_name_and_place_callbacks() {
    // Unnamed, the default is chief-only: a non-chief trainer drops it; one
    // for all workers runs. Builders go to add_callback / add_monitor as they are.
    let ran = Cell::new(0);
    let mut t = Trainer::new(&TrainerOptions { is_chief: false, ..options(1, 1, 1) }).unwrap();
    t.set_run_step(|ctx| ctx.hooks_only()).unwrap();
    let count = |n: i32| {
        let ran = &ran;
        move |_: &mut Context, _: Event, _: Option<tptrain::Record<'_>>| {
            ran.set(ran.get() + n);
            Ok(Flow::Continue)
        }
    };
    t.add_callback(Callback::on(Events::BEFORE_TRAIN, count(1))).unwrap();
    t.add_callback(Callback::on(Events::BEFORE_TRAIN, count(10)).all_workers().chief_only()).unwrap();
    t.add_callback(Callback::on(Events::BEFORE_TRAIN, count(100)).chief_only().all_workers()).unwrap();
    t.add_monitor(Callback::on(Events::BEFORE_TRAIN, count(1000)).name("monitor").all_workers()).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(ran.get(), 1100);

    // A NUL in the name fails add_callback, which drops the closure.
    let mut t = Trainer::new(&options(1, 1, 1)).unwrap();
    let e = t.add_callback(Callback::on(Events::BEFORE_TRAIN, count(1)).name("a\0b")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(format!("{:?}", Callback::on(Events::RECORD, count(1)).name("dbg")).contains("\"dbg\""));

    // An unnamed callback ("callback" in logs) panics as any other.
    t.set_run_step(|ctx| ctx.hooks_only()).unwrap();
    t.add_callback(Callback::on(Events::BEFORE_TRAIN, |_, _, _| panic!("unnamed"))).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| t.run())).unwrap_err();
    assert_eq!(panic_message(&*payload), "unnamed");
}
