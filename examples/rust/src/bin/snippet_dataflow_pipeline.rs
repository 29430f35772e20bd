//! docs/dataflow.md, "Dataflows": a source from a function, a map, a batch, a
//! prefetch thread, one pass iterated by hand. The part between the [doc]
//! markers is shown in the page (checked by the doc-snippets test); the whole
//! program is built and run by the examples test.

// [doc]
use tptrain::{DataFlow, Remainder, Tensor};

fn main() -> tptrain::Result<()> {
    // A source: the numbers 0..9, one per datapoint; None ends a pass. Its
    // size is a trainer's default steps_per_epoch.
    let mut i = 0;
    let raw = DataFlow::from_fn_sized(10, move || {
        if i == 10 {
            i = 0; // the next call starts the next pass
            return Ok(None);
        }
        i += 1;
        Ok(Some(vec![Tensor::from_slice(&[(i - 1) as f32], &[])?]))
    })?;
    // A map: appends x * x as a second component.
    let mapped = raw.map(|dp| {
        let x = dp.get(0)?;
        dp.push(&(&x * &x)?)
    })?;
    let batched = mapped.batch(4, Remainder::Keep)?; // 4, 4, 2: the short last batch kept
    let prefetched = batched.prefetch(3)?; // a thread reads ahead
    for batch in prefetched.iter() {
        let squares = batch?[1].to_vec::<f32>()?;
        println!("a batch of {}, last square {}", squares.len(), squares[squares.len() - 1]);
    }
    Ok(())
}
// [/doc]
