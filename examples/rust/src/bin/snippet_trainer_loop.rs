//! docs/trainer.md, "The loop": run_step, a hooked step, a callback, a stop.
//! The part between the [doc] markers is shown in the page (checked by the
//! doc-snippets test); the whole program is built and run by the examples test.

// [doc]
use std::cell::Cell;
use tptrain::{Callback, Events, Flow, Progress, Trainer, TrainerOptions};

fn main() -> tptrain::Result<()> {
    let options = TrainerOptions {
        max_epoch: 10,              // inclusive
        steps_per_epoch: Some(100), // Some(0) runs the callbacks only
        progress: Progress::Off,
        ..Default::default()
    };
    let total = Cell::new(0.0);
    let mut trainer = Trainer::new(&options)?;
    // The body of the loop; the hooked step runs between the callbacks'
    // BEFORE_RUN and AFTER_RUN.
    trainer.set_run_step(|ctx| {
        ctx.hooked_step(|step| {
            total.set(total.get() + 1.0);
            step.set_output_scalar("total", total.get())?;
            Ok(Flow::Continue)
        })?;
        if total.get() >= 250.0 {
            return Ok(Flow::stop("enough")); // a graceful stop
        }
        Ok(Flow::Continue)
    })?;
    // After each epoch: a scalar for the monitors (stats.json, the printer).
    let report = Callback::on(Events::TRIGGER, |ctx, _, _| {
        ctx.put_scalar("total", total.get())?;
        Ok(Flow::Continue)
    });
    trainer.add_callback(report.name("report"))?; // the trainer takes it
    let outcome = trainer.run()?;
    println!("stopped after {} steps: {}", trainer.global_step(), outcome.stop_reason().unwrap_or("-"));
    Ok(())
}
// [/doc]
