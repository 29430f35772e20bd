//! Layers, losses and metrics from Rust: variables under the layer's name,
//! values by hand, options, the free functions, errors with the C message,
//! and small models trained with them. The C twin is tests/c/test_layers.c.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tptrain::nn::{self, Activation, LayerOptions, Padding};
use tptrain::{
    Code, DType, Init, Input, InputSpec, Model, Optimizer, Progress, Result, RunOutcome, Tensor, Tower, Trainer,
    TrainerOptions,
};

// ------------------------------------------------------------ helpers

/// A model with one input "x" of `shape` whose tower publishes `layer(x)` as "y".
fn harness<'a, F>(shape: &[i64], layer: F) -> Model<'a>
where
    F: Fn(&mut Tower, &Tensor) -> Result<Tensor> + Send + Sync + 'a,
{
    Model::new(&[InputSpec::new("x", DType::F32, shape)], move |tower, inputs| {
        let y = layer(tower, &inputs[0])?;
        tower.set_output("y", &y)
    })
    .unwrap()
}

fn infer(m: &Model<'_>, x: &Tensor) -> Tensor {
    m.infer(&[x], &["y"]).unwrap().pop().unwrap()
}

fn f32t(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

fn iota(shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    Tensor::from_vec((1..=n).map(|i| i as f32).collect(), shape).unwrap()
}

fn assert_close(got: &Tensor, want: &[f32], tol: f32) {
    let g = got.to_vec::<f32>().unwrap();
    assert_eq!(g.len(), want.len(), "{g:?} vs {want:?}");
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol, "element {i} is {a}, want {b} ({g:?})");
    }
}

fn quiet(steps: i64, epochs: i64) -> TrainerOptions {
    TrainerOptions {
        max_epoch: epochs,
        steps_per_epoch: Some(steps),
        console: false,
        progress: Progress::Off,
        default_callbacks: false,
        default_monitors: false,
        ..Default::default()
    }
}

// ------------------------------------------------------------ layers with weights

#[test]
fn fc_values_variables_and_activations() {
    let opts = Mutex::new(LayerOptions::default());
    let m = harness(&[-1, 3], |t, x| t.fc("fc1", x, 2, &*opts.lock().unwrap()));
    m.build().unwrap();
    assert_eq!(m.variable_names().unwrap(), vec!["fc1/W", "fc1/b"]);
    assert_eq!(m.variable("fc1/W").unwrap().shape(), vec![2, 3]);
    assert_eq!(m.variable("fc1/b").unwrap().to_vec::<f32>().unwrap(), vec![0.0, 0.0]); // zeros
    m.set_variable("fc1/W", &f32t(&[1.0, 0.0, -1.0, 0.5, 0.5, 0.5], &[2, 3])).unwrap();
    m.set_variable("fc1/b", &f32t(&[0.1, -0.2], &[2])).unwrap();
    let x = f32t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_close(&infer(&m, &x), &[-1.9, 2.8, -1.9, 7.3], 1e-5);
    // The same variables with other activations: reuse by name.
    *opts.lock().unwrap() = LayerOptions::default().activation(Activation::Relu);
    assert_close(&infer(&m, &x), &[0.0, 2.8, 0.0, 7.3], 1e-5);
    *opts.lock().unwrap() = LayerOptions { activation: Activation::LeakyRelu(0.5), ..Default::default() };
    assert_close(&infer(&m, &x), &[-0.95, 2.8, -0.95, 7.3], 1e-5);
    // A bad option comes back with the C message.
    *opts.lock().unwrap() = LayerOptions::default().kernel(0);
    let e = m.infer(&[&x], &["y"]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("options->kernel[0] is 0 (must be >= 1)"), "{e}");
}

#[test]
fn fc_flattens_and_goes_without_bias() {
    let m = harness(&[-1, 3, 2, 2], |t, x| t.fc("fc", x, 5, &LayerOptions::default().use_bias(false)));
    m.build().unwrap();
    assert_eq!(m.variable_names().unwrap(), vec!["fc/W"]);
    assert_eq!(m.variable("fc/W").unwrap().shape(), vec![5, 12]);
    assert_eq!(infer(&m, &iota(&[4, 3, 2, 2])).shape(), vec![4, 5]);
}

#[test]
fn conv2d_shapes_variables_and_values() {
    // (kernel, stride, dilation, groups, filters, padding, out) on [2, 3, 7, 7]
    let cases = [
        (3, 1, 1, 1, 4, Padding::Same, 7),
        (3, 1, 1, 1, 4, Padding::Valid, 5),
        (3, 2, 1, 1, 4, Padding::Same, 4),
        (3, 2, 1, 1, 4, Padding::Valid, 3),
        (3, 1, 2, 1, 4, Padding::Valid, 3),
        (5, 3, 1, 1, 6, Padding::Same, 3),
        (1, 1, 1, 3, 6, Padding::Same, 7),
    ];
    let x = iota(&[2, 3, 7, 7]);
    for (k, s, d, g, f, p, out) in cases {
        let o = LayerOptions::default().kernel(k).stride(s).dilation(d).groups(g).padding(p);
        let m = harness(&[-1, 3, 7, 7], move |t, x| t.conv2d("conv", x, f, &o));
        assert_eq!(infer(&m, &x).shape(), vec![2, f, out, out], "{o:?}");
    }
    // Rectangular kernel and stride, through the fields.
    let o = LayerOptions { kernel: [1, 3], stride: [2, 1], padding: Padding::Valid, ..Default::default() };
    let m = harness(&[-1, 3, 7, 7], move |t, x| t.conv2d("conv", x, 2, &o));
    assert_eq!(infer(&m, &x).shape(), vec![2, 2, 4, 5]);
    // Variables: [filters, in / groups, kh, kw].
    let o = LayerOptions { kernel: [5, 3], groups: 2, ..Default::default() };
    let m = harness(&[-1, 4, 8, 8], move |t, x| t.conv2d("conv1", x, 6, &o));
    m.build().unwrap();
    assert_eq!(m.variable_names().unwrap(), vec!["conv1/W", "conv1/b"]);
    assert_eq!(m.variable("conv1/W").unwrap().shape(), vec![6, 2, 5, 3]);
    // Values: x = 1..9 in 3x3, a kernel of ones, SAME: the 3x3 neighbourhood sums.
    let m = harness(&[-1, 1, 3, 3], |t, x| t.conv2d("c", x, 1, &LayerOptions::default()));
    m.build().unwrap();
    m.set_variable("c/W", &f32t(&[1.0; 9], &[1, 1, 3, 3])).unwrap();
    m.set_variable("c/b", &f32t(&[0.5], &[1])).unwrap();
    assert_close(&infer(&m, &iota(&[1, 1, 3, 3])), &[12.5, 21.5, 16.5, 27.5, 45.5, 33.5, 24.5, 39.5, 28.5], 1e-5);
}

#[test]
fn conv2d_transpose_shapes_and_variables() {
    let x = iota(&[1, 2, 3, 3]);
    for (k, s, p, out) in [(3, 2, Padding::Same, 6), (3, 2, Padding::Valid, 7), (3, 1, Padding::Same, 3)] {
        let o = LayerOptions::default().kernel(k).stride(s).padding(p);
        let m = harness(&[-1, 2, 3, 3], move |t, x| t.conv2d_transpose("deconv", x, 4, &o));
        assert_eq!(infer(&m, &x).shape(), vec![1, 4, out, out]);
        // [in, filters / groups, kh, kw]
        assert_eq!(m.variable("deconv/W").unwrap().shape(), vec![2, 4, k, k]);
    }
}

#[test]
fn batch_norm_trains_its_moving_averages_and_infers_with_them() {
    // A batch norm between an input and a trainable fc, so that there is a cost.
    let outputs = Mutex::new(Vec::new());
    let model = Model::new(&[InputSpec::new("x", DType::F32, &[-1, 2])], |tower, inputs| {
        let h = tower.batch_norm("bn", &inputs[0], nn::BATCH_NORM_MOMENTUM, nn::BATCH_NORM_EPS)?;
        if tower.is_training() && !tower.is_building() {
            *outputs.lock().unwrap() = h.to_vec::<f32>()?;
        }
        let y = tower.fc("fc", &h, 1, &LayerOptions::default())?;
        tower.set_cost(&y.mean()?)?;
        tower.set_output("y", &h)
    })
    .unwrap();
    model.build().unwrap();
    assert_eq!(
        model.variable_names().unwrap(),
        vec!["bn/gamma", "bn/beta", "bn/mean/EMA", "bn/variance/EMA", "fc/W", "fc/b"]
    );
    assert_eq!(model.variable("bn/variance/EMA").unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    // channel 0: 1, 2, 3, 4 (mean 2.5, variance 1.25, unbiased 5/3);
    // channel 1: 10, 10, 30, 30 (mean 20, variance 100, unbiased 400/3)
    let x = f32t(&[1.0, 10.0, 2.0, 10.0, 3.0, 30.0, 4.0, 30.0], &[4, 2]);
    let opt = Optimizer::new("sgd").unwrap();
    opt.set("learning_rate", 0.0).unwrap();
    model.set_optimizer(&opt).unwrap();
    let mut t = Trainer::new(&quiet(1, 1)).unwrap();
    t.set_model(&model, Input::from_tensors(&[&x], 4, None).unwrap()).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    let (s0, s1) = ((1.25f32 + 1e-5).sqrt(), (100f32 + 1e-5).sqrt());
    let got = f32t(&outputs.lock().unwrap(), &[8]);
    assert_close(&got, &[-1.5 / s0, -10.0 / s1, -0.5 / s0, -10.0 / s1, 0.5 / s0, 10.0 / s1, 1.5 / s0, 10.0 / s1], 1e-5);
    // ema = 0.9 ema + 0.1 batch (unbiased variance)
    assert_close(&model.variable("bn/mean/EMA").unwrap(), &[0.25, 2.0], 1e-6);
    let v = [0.9 + 0.1 * 5.0 / 3.0, 0.9 + 0.1 * 400.0 / 3.0];
    assert_close(&model.variable("bn/variance/EMA").unwrap(), &v, 1e-4);
    // Inference uses the moving averages.
    let y = model.infer(&[&x], &["y"]).unwrap().pop().unwrap();
    let want: Vec<f32> = [1.0f32, 10.0, 2.0, 10.0, 3.0, 30.0, 4.0, 30.0]
        .iter()
        .enumerate()
        .map(|(i, &xi)| (xi - [0.25, 2.0][i % 2]) / (v[i % 2] + 1e-5).sqrt())
        .collect();
    assert_close(&y, &want, 1e-4);
}

#[test]
fn layer_norm_and_dropout() {
    let m = harness(&[-1, 4], |t, x| t.layer_norm("ln", x, 1e-5));
    m.build().unwrap();
    assert_eq!(m.variable_names().unwrap(), vec!["ln/gamma", "ln/beta"]);
    m.set_variable("ln/beta", &f32t(&[0.0, 0.0, 0.0, 1.0], &[4])).unwrap();
    let sd = (1.25f32 + 1e-5).sqrt();
    let y = infer(&m, &f32t(&[1.0, 2.0, 3.0, 4.0, 2.0, 2.0, 2.0, 2.0], &[2, 4]));
    assert_close(&y, &[-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd + 1.0, 0.0, 0.0, 0.0, 1.0], 1e-5);
    // Over C, H, W with per-channel gamma and beta (tensorpack's LayerNorm of NCHW).
    let m = harness(&[-1, 2, 1, 2], |t, x| t.layer_norm_axes("ln", x, &[1, 2, 3], 1, 1e-5));
    m.build().unwrap();
    m.set_variable("ln/gamma", &f32t(&[2.0, 1.0], &[2])).unwrap();
    m.set_variable("ln/beta", &f32t(&[0.0, 10.0], &[2])).unwrap();
    let xs = [1.0f32, 2.0, 3.0, 6.0, 5.0, 5.0, 5.0, 5.0];
    let y = infer(&m, &f32t(&xs, &[2, 2, 1, 2]));
    let sd = (3.5f32 + 1e-5).sqrt(); // example 1: mean 3, biased variance 3.5
    let mut want: Vec<f32> = (0..4).map(|i| (xs[i] - 3.0) / sd * [2.0, 1.0][i / 2] + [0.0, 10.0][i / 2]).collect();
    want.extend_from_slice(&[0.0, 0.0, 10.0, 10.0]); // example 2 is constant
    assert_close(&y, &want, 1e-5);
    let m = harness(&[-1, 2, 1, 2], |t, x| t.layer_norm_axes("ln", x, &[1, 1], 1, 1e-5));
    let e = m.build().unwrap_err();
    assert!(e.message().contains("axis 1 is given twice"), "{e}");
    // Dropout is the identity in inference.
    let m = harness(&[-1, 4], |t, x| t.dropout(x, 0.5));
    let x = iota(&[3, 4]);
    assert_eq!(infer(&m, &x).to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    let m = harness(&[-1, 4], |t, x| t.dropout(x, 1.5));
    let e = m.infer(&[&x], &["y"]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

#[test]
fn regularize_l2_sums_the_matching_variables() {
    let m = Model::new(&[InputSpec::new("x", DType::F32, &[-1, 3])], |tower, inputs| {
        let h = tower.fc("fc1", &inputs[0], 2, &LayerOptions::default().bias_init(Init::Constant))?;
        let none = tower.regularize_l2("^nothing$", 1.0)?;
        assert_eq!(none.item()?, 0.0);
        let e = tower.regularize_l2("(", 1.0).unwrap_err();
        assert!(e.message().contains("pattern '(' is not a regular expression"), "{e}");
        let l2 = tower.regularize_l2("/W$", 0.5)?;
        tower.set_output("l2", &l2)?;
        tower.set_output("y", &h)
    })
    .unwrap();
    m.build().unwrap();
    m.set_variable("fc1/W", &f32t(&[1.0, 2.0, 3.0, 0.0, 0.0, 1.0], &[2, 3])).unwrap();
    let out = m.infer(&[&iota(&[1, 3])], &["l2"]).unwrap();
    assert_eq!(out[0].ndim(), 0);
    assert!((out[0].item().unwrap() - 0.5 * 15.0).abs() < 1e-6);
}

// ------------------------------------------------------------ free functions

#[test]
fn pooling_activations_flatten_and_concat() {
    let x = iota(&[1, 1, 3, 3]);
    assert_close(&nn::max_pool(&x, 2, 2, Padding::Same).unwrap(), &[5.0, 6.0, 8.0, 9.0], 0.0);
    assert_close(&nn::avg_pool(&x, 2, 2, Padding::Same).unwrap(), &[3.0, 4.5, 7.5, 9.0], 1e-6);
    assert_close(&nn::max_pool(&x, 2, 2, Padding::Valid).unwrap(), &[5.0], 0.0);
    let big = iota(&[2, 3, 7, 7]);
    let g = nn::global_avg_pool(&big).unwrap();
    assert_eq!(g.shape(), vec![2, 3]);
    assert_close(&g, &[25.0, 74.0, 123.0, 172.0, 221.0, 270.0], 1e-4);

    let v = f32t(&[-2.0, 0.0, 1.0, 3.0], &[2, 2]);
    assert_close(&nn::activation(&v, Activation::None).unwrap(), &[-2.0, 0.0, 1.0, 3.0], 0.0);
    assert_close(&nn::activation(&v, Activation::Relu).unwrap(), &[0.0, 0.0, 1.0, 3.0], 0.0);
    assert_close(&nn::activation(&v, Activation::LeakyRelu(0.1)).unwrap(), &[-0.2, 0.0, 1.0, 3.0], 1e-6);
    let sig = |z: f32| 1.0 / (1.0 + (-z).exp());
    assert_close(&nn::activation(&v, Activation::Sigmoid).unwrap(), &[sig(-2.0), 0.5, sig(1.0), sig(3.0)], 1e-6);
    assert_close(
        &nn::activation(&v, Activation::Tanh).unwrap(),
        &[(-2f32).tanh(), 0.0, 1f32.tanh(), 3f32.tanh()],
        1e-6,
    );
    let gelu = nn::activation(&v, Activation::Gelu).unwrap().to_vec::<f32>().unwrap();
    assert!(gelu[1] == 0.0 && (gelu[3] - 2.9960).abs() < 1e-3, "{gelu:?}");
    let sm = nn::activation(&v, Activation::Softmax).unwrap().to_vec::<f32>().unwrap();
    assert!((sm[0] + sm[1] - 1.0).abs() < 1e-6 && (sm[2] + sm[3] - 1.0).abs() < 1e-6 && sm[3] > sm[2]);
    let e = nn::activation(&f32t(&[1.0, 2.0], &[2]), Activation::Softmax).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("dimension 1"), "{e}");

    assert_eq!(nn::flatten(&iota(&[2, 3, 4])).unwrap().shape(), vec![2, 12]);
    let e = nn::flatten(&f32t(&[1.0], &[])).unwrap_err();
    assert!(e.message().contains("0-d"), "{e}");
    let a = f32t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = f32t(&[5.0, 6.0], &[2, 1]);
    let ab = nn::concat(&[&a, &b], 1).unwrap();
    assert_eq!(ab.shape(), vec![2, 3]);
    assert_close(&ab, &[1.0, 2.0, 5.0, 3.0, 4.0, 6.0], 0.0);
    let e = nn::concat(&[&a, &b], 0).unwrap_err();
    assert!(e.message().contains("only dimension 0 may differ"), "{e}");
    let e = nn::concat(&[], 0).unwrap_err();
    assert!(e.message().contains("n is 0"), "{e}");
}

#[test]
fn losses_and_metrics_by_hand() {
    let logits = f32t(&[1.0, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    let labels = Tensor::from_slice(&[2i64, 0], &[2]).unwrap();
    let ce = nn::softmax_cross_entropy(&logits, &labels).unwrap();
    assert_eq!(ce.ndim(), 0);
    let want = ((1.0 + (-1f64).exp() + (-2f64).exp()).ln() + 3f64.ln()) / 2.0;
    assert!((ce.item().unwrap() - want).abs() < 1e-6);
    let z = f32t(&[0.0, 2.0], &[2]);
    let t = f32t(&[1.0, 0.0], &[2]);
    let want = (2f64.ln() + 2.0 + (1.0 + (-2f64).exp()).ln()) / 2.0;
    assert!((nn::sigmoid_cross_entropy(&z, &t).unwrap().item().unwrap() - want).abs() < 1e-6);
    let p = f32t(&[1.0, 2.0, 3.0], &[3]);
    let q = f32t(&[1.0, 0.0, 0.0], &[3]);
    assert!((nn::mse(&p, &q).unwrap().item().unwrap() - 13.0 / 3.0).abs() < 1e-6);
    assert!((nn::l1(&p, &q).unwrap().item().unwrap() - 5.0 / 3.0).abs() < 1e-6);
    let e = nn::softmax_cross_entropy(&logits, &Tensor::from_slice(&[2i32, 0], &[2]).unwrap()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("labels must be i64 class indices, got i32 [2]"), "{e}");
    let e = nn::mse(&p, &z).unwrap_err();
    assert!(e.message().contains("target must have the shape of prediction [3], got [2]"), "{e}");

    let logits = f32t(&[0.1, 0.9, 0.8, 0.2, 0.3, 0.7], &[3, 2]);
    let labels = Tensor::from_slice(&[1i64, 1, 1], &[3]).unwrap();
    let acc = nn::accuracy(&logits, &labels).unwrap();
    assert_eq!(acc.dtype(), DType::F32);
    assert!((acc.item().unwrap() - 2.0 / 3.0).abs() < 1e-6);
    assert_close(&nn::wrong(&logits, &labels, 1).unwrap(), &[0.0, 1.0, 0.0], 0.0);
    assert_close(&nn::wrong(&logits, &labels, 2).unwrap(), &[0.0, 0.0, 0.0], 0.0);
    let e = nn::wrong(&logits, &labels, 0).unwrap_err();
    assert!(e.message().contains("k must be >= 1, got 0"), "{e}");
}

#[test]
fn layer_options_default_to_the_c_defaults() {
    let o = LayerOptions::default();
    assert!(o.use_bias);
    assert_eq!(o.activation, Activation::None);
    assert_eq!((o.kernel_init, o.bias_init), (Init::HeNormal, Init::Zeros));
    assert_eq!((o.kernel, o.stride, o.dilation, o.groups, o.padding), ([3, 3], [1, 1], [1, 1], 1, Padding::Same));
    let raw = LayerOptions::default().activation(Activation::LeakyRelu(0.3)).to_raw();
    assert_eq!((raw.activation, raw.alpha), (tptrain::sys::TPT_ACT_LEAKY_RELU, 0.3));
    assert_eq!(LayerOptions::default().to_raw().alpha, 0.2);
}

// ------------------------------------------------------------ training with layers

/// `rows` rows of y = x . (1, -2, 3) + 1 (the C test's LCG).
fn regression_data(rows: usize) -> (Tensor, Tensor) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut r: u32 = 12345;
    for _ in 0..rows {
        let mut row = [0f32; 3];
        for v in &mut row {
            r = r.wrapping_mul(1664525).wrapping_add(1013904223);
            *v = (r >> 8) as f32 / 8388608.0 - 1.0;
        }
        x.extend_from_slice(&row);
        y.push(row[0] - 2.0 * row[1] + 3.0 * row[2] + 1.0);
    }
    (Tensor::from_vec(x, &[rows as i64, 3]).unwrap(), Tensor::from_vec(y, &[rows as i64, 1]).unwrap())
}

#[test]
fn an_fc_layer_learns_the_regression() {
    tptrain::manual_seed(7).unwrap();
    let sig = [InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])];
    let model = Model::new(&sig, |tower, inputs| {
        let p = tower.fc("fc", &inputs[0], 1, &LayerOptions::default())?;
        tower.set_cost(&nn::mse(&p, &inputs[1])?)?;
        tower.set_output("prediction", &p)
    })
    .unwrap();
    let opt = Optimizer::new("sgd").unwrap();
    opt.set("learning_rate", 0.1).unwrap();
    model.set_optimizer(&opt).unwrap();
    let (x, y) = regression_data(64);
    let mut t = Trainer::new(&quiet(50, 4)).unwrap();
    t.set_model(&model, Input::from_tensors(&[&x, &y], 16, Some(42)).unwrap()).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_close(&model.variable("fc/W").unwrap(), &[1.0, -2.0, 3.0], 0.05);
    assert_close(&model.variable("fc/b").unwrap(), &[1.0], 0.05);
}

#[test]
fn an_mlp_learns_the_regression_with_adam() {
    tptrain::manual_seed(11).unwrap();
    let sig = [InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])];
    let steps = AtomicUsize::new(0);
    let model = Model::new(&sig, |tower, inputs| {
        steps.fetch_add(1, Ordering::Relaxed);
        let h = tower.fc("fc1", &inputs[0], 32, &LayerOptions::default().activation(Activation::Relu))?;
        let p = tower.fc("fc2", &h, 1, &LayerOptions::default())?;
        let cost = nn::mse(&p, &inputs[1])?;
        tower.set_cost(&cost)?;
        tower.set_output("prediction", &p)
    })
    .unwrap();
    let opt = Optimizer::new("adam").unwrap();
    opt.set("learning_rate", 0.01).unwrap();
    model.set_optimizer(&opt).unwrap();
    let (x, y) = regression_data(64);
    let mut t = Trainer::new(&quiet(4, 150)).unwrap();
    t.set_model(&model, Input::from_tensors(&[&x, &y], 16, Some(1)).unwrap()).unwrap();
    assert_eq!(t.run().unwrap(), RunOutcome::Finished);
    assert_eq!(steps.load(Ordering::Relaxed), 1 + 600);
    let p = model.infer(&[&x, &y], &["prediction", "cost"]).unwrap();
    let cost = p[1].item().unwrap();
    assert!(cost < 0.05, "inference cost {cost}");
    assert_eq!(model.variable_names().unwrap(), vec!["fc1/W", "fc1/b", "fc2/W", "fc2/b"]);
}

// ------------------------------------------------------------ precision

/// `TrainerOptions::precision`: with `Precision::Bf16Mixed` the tower
/// function runs under autocast (a linear layer in bfloat16, the MSE loss in
/// float32), the variables stay float32 and the model trains;
/// `Precision::Fp16Mixed` is refused when the run starts (a CPU tower: fp16
/// autocast is CUDA's).
#[test]
fn precision_runs_the_tower_under_autocast() {
    use tptrain::Precision;
    let train = |precision: Precision| -> (Mutex<Vec<(DType, DType)>>, Result<f64>) {
        let seen = Mutex::new(Vec::new());
        let result = (|| -> Result<f64> {
            let spec = [InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])];
            let model = Model::new(&spec, |tower, inputs| {
                let p = tower.fc("fc", &inputs[0], 1, &LayerOptions::default())?;
                let cost = nn::mse(&p, &inputs[1])?;
                if !tower.is_building() {
                    seen.lock().unwrap().push((p.dtype(), cost.dtype()));
                }
                tower.set_cost(&cost)
            })?;
            let opt = Optimizer::new("sgd")?;
            opt.set("learning_rate", 0.1)?;
            model.set_optimizer(&opt)?;
            // x uniform in [-1, 1) (an LCG), y = x . (1, -2, 3) + 1
            let mut r = 12345u32;
            let rows: Vec<f32> = (0..192)
                .map(|_| {
                    r = r.wrapping_mul(1664525).wrapping_add(1013904223);
                    (r >> 8) as f32 / 8388608.0 - 1.0
                })
                .collect();
            let ys: Vec<f32> = rows.chunks(3).map(|r| r[0] - 2.0 * r[1] + 3.0 * r[2] + 1.0).collect();
            let (x, y) = (f32t(&rows, &[64, 3]), f32t(&ys, &[64, 1]));
            let mut trainer = Trainer::new(&TrainerOptions { precision, ..quiet(50, 2) })?;
            trainer.set_model(&model, Input::from_tensors(&[&x, &y], 16, Some(3))?)?;
            trainer.run()?;
            assert_eq!(model.variable("fc/W")?.dtype(), DType::F32, "{precision:?}: the variable's dtype");
            Ok(trainer.scalar_latest("cost")?.value)
        })();
        (seen, result)
    };
    let (seen, cost) = train(Precision::Fp32);
    let cost = cost.unwrap();
    assert!(cost < 0.05, "fp32: cost {cost} after 100 steps");
    assert!(seen.lock().unwrap().iter().all(|&d| d == (DType::F32, DType::F32)));
    let (seen, cost) = train(Precision::Bf16Mixed);
    let cost = cost.unwrap();
    assert!(cost < 0.05, "bf16-mixed: cost {cost} after 100 steps");
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 100);
    assert!(seen.iter().all(|&d| d == (DType::BF16, DType::F32)), "{:?}", &seen[..2]);
    let (_, err) = train(Precision::Fp16Mixed);
    let e = err.unwrap_err();
    assert_eq!(e.code(), Code::Unsupported);
    assert!(e.message().contains("use precision bf16-mixed there"), "{}", e.message());
}

/// `TrainerOptions::loss_scaling` reaches the trainer: with scaling on and
/// growth_interval 2, four updates without overflow double the scale twice
/// (the epoch's scalar "loss_scale"), and an option out of range is refused
/// with its name.
#[test]
fn loss_scaling_options_reach_the_trainer() -> Result<()> {
    use tptrain::{LossScaling, LossScalingMode};
    let spec = [InputSpec::new("x", DType::F32, &[-1, 3]), InputSpec::new("y", DType::F32, &[-1, 1])];
    let model = Model::new(&spec, |tower, inputs| {
        let p = tower.fc("fc", &inputs[0], 1, &LayerOptions::default())?;
        tower.set_cost(&nn::mse(&p, &inputs[1])?)
    })?;
    let opt = Optimizer::new("sgd")?;
    model.set_optimizer(&opt)?;
    let x = f32t(&[0.5; 48], &[16, 3]);
    let y = f32t(&[1.0; 16], &[16, 1]);
    let loss_scaling = LossScaling { mode: LossScalingMode::On, growth_interval: 2, ..Default::default() };
    let mut trainer = Trainer::new(&TrainerOptions { loss_scaling, ..quiet(4, 1) })?;
    trainer.set_model(&model, Input::from_tensors(&[&x, &y], 4, None)?)?;
    trainer.run()?;
    assert_eq!(trainer.scalar_latest("loss_scale")?.value, 65536.0 * 4.0);
    assert_eq!(trainer.scalar_latest("skipped_updates")?.value, 0.0);
    let bad = LossScaling { backoff_factor: 1.5, ..Default::default() };
    let e = Trainer::new(&TrainerOptions { loss_scaling: bad, ..quiet(4, 1) }).err().expect("refused");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("backoff_factor"), "{}", e.message());
    Ok(())
}
