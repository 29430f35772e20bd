//! docs/dataflow.md, "Efficient dataflows": a cheap source, the expensive
//! work in a parallel map on worker threads, batches, a prefetch thread, and
//! the speed of one pass measured (tensorpack's "Efficient DataFlow"). The
//! part between the [doc] markers is shown in the page (checked by the
//! doc-snippets test); the whole program is built and run by the examples
//! test.

// [doc]
use std::time::Instant;
use tptrain::{DataFlow, Order, ParallelMapOptions, Remainder, Tensor};

fn pipeline(records: &Tensor) -> tptrain::Result<()> {
    let options = ParallelMapOptions {
        n_threads: 2,
        ordered: true, // in the source's order (else as the threads finish)
        strict: true,  // each pass maps exactly one pass of the source
        ..Default::default()
    };
    // The expensive part ("decoding"), on the map's worker threads, several
    // at once: appends x * x to the record x.
    let decoded = DataFlow::from_tensors(&[records], Order::Sequential)?.parallel_map(&options, |dp| {
        let x = dp.get(0)?;
        dp.push(&(&x * &x)?)
    })?;
    let prefetched = decoded.batch(64, Remainder::Drop)?.prefetch(4)?; // batches while the model trains

    // tensorpack's TestDataSpeed: one pass, timed.
    prefetched.reset_state()?; // starts the threads
    let (mut batches, mut sum, mut last) = (0, 0.0, 0.0);
    let start = Instant::now();
    for batch in prefetched.iter() {
        let squares = batch?[1].to_vec::<f32>()?;
        sum += squares.iter().map(|&v| v as f64).sum::<f64>();
        last = squares[63];
        batches += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!("{batches} batches of 64, sum of squares {sum}, last {last}");
    println!("{:.0} datapoints/s", (batches * 64) as f64 / seconds);
    Ok(())
}
// [/doc]

/// The records: the numbers 0 .. 1023, one per datapoint.
fn main() -> tptrain::Result<()> {
    let records: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    pipeline(&Tensor::from_vec(records, &[1024])?)
}
