//! A training that is not gradient based: estimate pi by Monte Carlo (twin of
//! examples/c/monte_carlo.c).
//!
//! "Training is running something again and again": each step draws 10,000
//! points in the unit square (a deterministic xorshift64* generator), refines
//! the running estimate of pi and its standard error, and puts both as
//! scalars (they land in stats.json and the per-epoch printout). A callback
//! logs the estimate after each epoch; run_step stops training once the
//! standard error falls below 0.0005.
//!
//!     cargo run --bin monte_carlo [LOGDIR]      (default train_log/monte_carlo_rust)
use std::cell::RefCell;
use std::process::ExitCode;
use tptrain::{Callback, Events, Flow, LogdirAction, RunOutcome, Trainer, TrainerOptions};

const POINTS_PER_STEP: u64 = 10_000;
const TARGET_STD_ERROR: f64 = 0.0005;

struct MonteCarlo {
    rng: u64,
    inside: u64,
    total: u64,
    estimate: f64,
    std_error: f64,
}

impl MonteCarlo {
    fn xorshift64star(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1) with 53 random bits.
    fn uniform(&mut self) -> f64 {
        (self.xorshift64star() >> 11) as f64 * (1.0 / 9007199254740992.0)
    }

    fn sample(&mut self) {
        for _ in 0..POINTS_PER_STEP {
            let (x, y) = (self.uniform(), self.uniform());
            self.inside += (x * x + y * y <= 1.0) as u64;
        }
        self.total += POINTS_PER_STEP;
        let p = self.inside as f64 / self.total as f64;
        self.estimate = 4.0 * p;
        self.std_error = 4.0 * (p * (1.0 - p) / self.total as f64).sqrt();
    }
}

fn main() -> Result<ExitCode, tptrain::Error> {
    let logdir = std::env::args().nth(1).unwrap_or_else(|| "train_log/monte_carlo_rust".to_owned());
    let mc =
        RefCell::new(MonteCarlo { rng: 0x9E37_79B9_7F4A_7C15, inside: 0, total: 0, estimate: 0.0, std_error: 0.0 });

    let options = TrainerOptions {
        steps_per_epoch: Some(50),
        max_epoch: 100,
        logdir: Some(logdir.into()),
        logdir_action: LogdirAction::Delete,
        ..Default::default()
    };
    let mut trainer = Trainer::new(&options)?;
    trainer.set_run_step(|ctx| {
        // One hooked step: the work whose outputs callbacks may read.
        let flow = ctx.hooked_step(|step| {
            let mut mc = mc.borrow_mut();
            mc.sample();
            step.set_output_scalar("pi_estimate", mc.estimate)?;
            Ok(Flow::Continue)
        })?;
        if flow.is_stop() {
            return Ok(flow);
        }
        let (estimate, std_error) = {
            let mc = mc.borrow();
            (mc.estimate, mc.std_error)
        };
        ctx.put_scalar("pi_estimate", estimate)?;
        ctx.put_scalar("std_error", std_error)?;
        if std_error < TARGET_STD_ERROR {
            return Ok(Flow::stop(format!("converged: standard error {std_error:.6} < {TARGET_STD_ERROR}")));
        }
        Ok(Flow::Continue)
    })?;

    // TRIGGER without TRIGGER_EPOCH: after each epoch.
    let report = Callback::on(Events::TRIGGER, |ctx, _, _| {
        let mc = mc.borrow();
        ctx.log(&format!("pi ~ {:.6} +- {:.6} after {} points", mc.estimate, mc.std_error, mc.total))?;
        Ok(Flow::Continue)
    });
    trainer.add_callback(report.name("report"))?;

    let outcome = trainer.run()?;
    let estimate = mc.borrow().estimate;
    let logdir = trainer.logdir().map(|d| d.display().to_string()).unwrap_or_default();
    let stopped = match &outcome {
        RunOutcome::Stopped(reason) => reason.as_str(),
        RunOutcome::Finished => "no (ran to max_epoch)",
    };
    println!(
        "pi ~ {estimate:.6} (error {:.2e}) after {} steps; stopped: {stopped}; stats in {logdir}/stats.json",
        (estimate - std::f64::consts::PI).abs(),
        trainer.global_step(),
    );
    Ok(if outcome.stop_reason().is_some() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
