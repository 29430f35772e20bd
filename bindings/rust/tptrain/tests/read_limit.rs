//! The checkpoint read limit (`set_checkpoint_read_limit`), in a test binary
//! of its own: the limit is process-wide, and the other tests restore in
//! parallel threads. The C twin is tests/misuse/gen_crafted.py's zip bomb.

use tptrain::ops::{self, Arg};
use tptrain::{
    set_checkpoint_read_limit, Code, DType, Input, InputSpec, Model, ModelSaver, Optimizer, Progress, RestoreOptions,
    Result, Tensor, Trainer, TrainerOptions, VariableOptions,
};

fn model() -> Model<'static> {
    let signature = [InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])];
    let m = Model::new(&signature, |tower, inputs| -> Result<()> {
        let w = tower.variable("fc/W", &[1, 3], &VariableOptions::default())?;
        let h = ops::call1("aten::linear", &[Arg::Tensor(&inputs[0]), Arg::Tensor(&w)])?;
        let cost = ops::call1("aten::mse_loss", &[Arg::Tensor(&h), Arg::Tensor(&inputs[1])])?;
        tower.set_cost(&cost)
    })
    .unwrap();
    m.set_optimizer(&Optimizer::new("sgd").unwrap()).unwrap();
    m
}

#[test]
fn a_file_that_needs_more_than_the_limit_is_refused() {
    let dir = std::env::temp_dir().join(format!("tpt-rust-read-limit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut t = Trainer::new(&TrainerOptions {
        max_epoch: 1,
        steps_per_epoch: Some(2),
        logdir: Some(dir.clone()),
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        ..Default::default()
    })
    .unwrap();
    let x = Tensor::from_vec(vec![0.5f32; 12], &[4, 3]).unwrap();
    let y = Tensor::from_vec(vec![1.0f32; 4], &[4, 1]).unwrap();
    t.set_model(&model(), Input::from_tensors(&[&x, &y], 2, None).unwrap()).unwrap();
    t.add_callback(ModelSaver::new()).unwrap();
    t.run().unwrap();

    let m = model();
    m.build().unwrap();
    // No room beyond the file's own size: the reader's tables alone need more.
    set_checkpoint_read_limit(0).unwrap();
    let e = m.restore(&dir, &RestoreOptions::new()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("read limit"), "{}", e.message());
    let e = set_checkpoint_read_limit(u64::MAX).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    set_checkpoint_read_limit(256 << 20).unwrap();
    assert_eq!(m.restore(&dir, &RestoreOptions::new()).unwrap(), 1);
}
