//! Benchmark loop-overhead (Rust part): nanoseconds per step of the trainer
//! loop itself, from Rust: default callbacks (console off, progress as lines,
//! no log directory), a run_step closure that runs one hooked step around an
//! empty step closure. Baseline: a bare for-loop calling the same kind of
//! run_step closure through `&mut dyn FnMut` (which calls the empty step the
//! same way). Best of 5. Last line: "rust: tptrain X ns/step, bare loop Y ns/step".
//!
//!     cargo run --release --bin loop_overhead [STEPS_PER_EPOCH]   (default 200000)
use std::hint::black_box;
use std::time::Instant;
use tptrain::{Flow, Progress, Trainer, TrainerOptions};

const EPOCHS: i64 = 5;
const REPEATS: usize = 5;

fn main() -> Result<(), tptrain::Error> {
    let steps: i64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let total = (steps * EPOCHS) as f64;
    let (mut best_tpt, mut best_bare) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..REPEATS {
        let options = TrainerOptions {
            steps_per_epoch: Some(steps),
            max_epoch: EPOCHS,
            console: false,
            progress: Progress::Lines,
            ..Default::default()
        };
        let mut sink = 0u64;
        {
            let mut trainer = Trainer::new(&options)?;
            trainer.set_run_step(|ctx| {
                ctx.hooked_step(|_| {
                    sink += 1;
                    Ok(Flow::Continue)
                })
            })?;
            let t0 = Instant::now();
            trainer.run()?;
            best_tpt = best_tpt.min(t0.elapsed().as_secs_f64() * 1e9 / total);
        }
        assert_eq!(sink, steps as u64 * EPOCHS as u64);

        // The same shape without tptrain: run_step calls the step through a
        // trait object, and the loop calls run_step through one.
        let mut empty_step = |s: &mut u64| -> tptrain::Result<Flow> {
            *s += 1;
            Ok(Flow::Continue)
        };
        let mut bare_run_step = |s: &mut u64| -> tptrain::Result<Flow> {
            let step: &mut dyn FnMut(&mut u64) -> tptrain::Result<Flow> = black_box(&mut empty_step);
            step(s)
        };
        let run_step: &mut dyn FnMut(&mut u64) -> tptrain::Result<Flow> = black_box(&mut bare_run_step);
        let mut bare_sink = 0u64;
        let t0 = Instant::now();
        for _ in 0..steps * EPOCHS {
            if let Flow::Stop(reason) = run_step(&mut bare_sink)? {
                println!("stopped: {reason}");
            }
        }
        best_bare = best_bare.min(t0.elapsed().as_secs_f64() * 1e9 / total);
        black_box(bare_sink);
    }
    println!("rust: tptrain {best_tpt:.1} ns/step, bare loop {best_bare:.1} ns/step");
    Ok(())
}
