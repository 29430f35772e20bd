//! tensorpack-style layers, losses and metrics for tower functions
//! (the C header's "Layers, losses and metrics").
//!
//! Layers with variables are methods of [`Tower`] ([`Tower::fc`],
//! [`Tower::conv2d`], [`Tower::conv2d_transpose`], [`Tower::batch_norm`],
//! [`Tower::layer_norm`], [`Tower::dropout`], [`Tower::regularize_l2`]); they
//! create their variables under their name ("fc1/W", "fc1/b") in the current
//! scope, with the tower's reuse rules. The rest are functions here. Tensors
//! use LibTorch's layouts: images NCHW; a fully-connected weight is
//! `[units, in]`; a convolution weight `[filters, in / groups, kh, kw]`; a
//! transposed convolution weight `[in, filters / groups, kh, kw]`. Every
//! result is a new tensor.

use crate::binding::Binding;
use crate::common::{call, Result};
use crate::cstr::with_cstr;
use crate::tensor::Tensor;
use crate::tower::{Init, Tower};
use std::ptr;
use tptrain_sys as sys;

/// Activations (`tpt_activation`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Activation {
    /// The identity.
    #[default]
    None,
    Relu,
    /// Leaky ReLU with this negative slope (tensorpack's default is 0.2).
    LeakyRelu(f64),
    Sigmoid,
    Tanh,
    Gelu,
    /// Softmax over dimension 1.
    Softmax,
}

impl Activation {
    /// The C value and the `alpha` that goes with it.
    pub fn to_raw(self) -> (sys::tpt_activation, f64) {
        let default_alpha = sys::TPT_LAYER_OPTIONS_INIT.alpha;
        match self {
            Activation::None => (sys::TPT_ACT_NONE, default_alpha),
            Activation::Relu => (sys::TPT_ACT_RELU, default_alpha),
            Activation::LeakyRelu(alpha) => (sys::TPT_ACT_LEAKY_RELU, alpha),
            Activation::Sigmoid => (sys::TPT_ACT_SIGMOID, default_alpha),
            Activation::Tanh => (sys::TPT_ACT_TANH, default_alpha),
            Activation::Gelu => (sys::TPT_ACT_GELU, default_alpha),
            Activation::Softmax => (sys::TPT_ACT_SOFTMAX, default_alpha),
        }
    }
}

/// Padding of convolutions and pooling (`tpt_padding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Padding {
    /// Output size `ceil(in / stride)`, as tensorpack.
    #[default]
    Same,
    /// No padding.
    Valid,
}

impl Padding {
    pub fn to_raw(self) -> sys::tpt_padding {
        match self {
            Padding::Same => sys::TPT_PADDING_SAME,
            Padding::Valid => sys::TPT_PADDING_VALID,
        }
    }
}

/// Options of layers with weights (`tpt_layer_options`); `Default` gives the
/// C defaults: a bias, no activation, He-normal kernels, zero biases, 3x3
/// kernels, stride 1, dilation 1, one group, SAME padding. Set fields
/// (`LayerOptions { activation: Activation::Relu, ..Default::default() }`)
/// or chain the setters (`LayerOptions::default().activation(Activation::Relu).kernel(5)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerOptions {
    pub use_bias: bool,
    pub activation: Activation,
    pub kernel_init: Init,
    pub bias_init: Init,
    /// Convolutions: kernel size (height, width).
    pub kernel: [i64; 2],
    pub stride: [i64; 2],
    pub dilation: [i64; 2],
    pub groups: i64,
    pub padding: Padding,
}

impl Default for LayerOptions {
    fn default() -> LayerOptions {
        let c = sys::TPT_LAYER_OPTIONS_INIT;
        LayerOptions {
            use_bias: c.use_bias != 0,
            activation: Activation::None,
            kernel_init: Init::HeNormal,
            bias_init: Init::Zeros,
            kernel: c.kernel,
            stride: c.stride,
            dilation: c.dilation,
            groups: c.groups,
            padding: Padding::Same,
        }
    }
}

impl LayerOptions {
    pub fn activation(self, activation: Activation) -> LayerOptions {
        LayerOptions { activation, ..self }
    }
    pub fn use_bias(self, use_bias: bool) -> LayerOptions {
        LayerOptions { use_bias, ..self }
    }
    /// A square kernel.
    pub fn kernel(self, size: i64) -> LayerOptions {
        LayerOptions { kernel: [size, size], ..self }
    }
    /// The same stride in both dimensions.
    pub fn stride(self, stride: i64) -> LayerOptions {
        LayerOptions { stride: [stride, stride], ..self }
    }
    /// The same dilation in both dimensions.
    pub fn dilation(self, dilation: i64) -> LayerOptions {
        LayerOptions { dilation: [dilation, dilation], ..self }
    }
    pub fn groups(self, groups: i64) -> LayerOptions {
        LayerOptions { groups, ..self }
    }
    pub fn padding(self, padding: Padding) -> LayerOptions {
        LayerOptions { padding, ..self }
    }
    pub fn kernel_init(self, init: Init) -> LayerOptions {
        LayerOptions { kernel_init: init, ..self }
    }
    pub fn bias_init(self, init: Init) -> LayerOptions {
        LayerOptions { bias_init: init, ..self }
    }

    pub fn to_raw(&self) -> sys::tpt_layer_options {
        let (activation, alpha) = self.activation.to_raw();
        let mut o = sys::TPT_LAYER_OPTIONS_INIT;
        o.use_bias = self.use_bias as i32;
        o.activation = activation;
        o.alpha = alpha;
        o.kernel_init = self.kernel_init.to_raw();
        o.bias_init = self.bias_init.to_raw();
        o.kernel = self.kernel;
        o.stride = self.stride;
        o.dilation = self.dilation;
        o.groups = self.groups;
        o.padding = self.padding.to_raw();
        o
    }
}

/// batch_norm's defaults (tensorpack's and PyTorch's; PyTorch writes the
/// momentum as 1 - 0.9 = 0.1).
pub const BATCH_NORM_MOMENTUM: f64 = 0.9;
pub const BATCH_NORM_EPS: f64 = 1e-5;

/// Wraps a `(tpt_tensor **out, ...)` call.
fn out(f: impl FnOnce(*mut *mut sys::tpt_tensor) -> Result<()>) -> Result<Tensor> {
    let mut t = ptr::null_mut();
    f(&mut t)?;
    Tensor::wrap(t)
}

type WeightedLayer = unsafe extern "C" fn(
    *mut *mut sys::tpt_tensor,
    *mut sys::tpt_tower,
    *const std::os::raw::c_char,
    *const sys::tpt_tensor,
    i64,
    *const sys::tpt_layer_options,
) -> *mut sys::tpt_status;

impl Tower {
    fn weighted(
        &mut self,
        f: WeightedLayer,
        name: &str,
        x: &Tensor,
        n: i64,
        options: Option<&LayerOptions>,
    ) -> Result<Tensor> {
        let o = options.copied().unwrap_or_default().to_raw();
        out(|t| with_cstr(name, "name", |nm| call!(f(t, self.as_ptr(), nm, x.as_ptr(), n, &o)))?)
    }

    /// Fully connected: `act(x W^T + b)` with variables "name/W" `[units, in]`
    /// and "name/b"; x is `[N, in]` (more dimensions are flattened)
    /// (`tpt_layer_fc`). `options`: `None` for the defaults (a bias, no
    /// activation), or a [`LayerOptions`].
    ///
    /// ```
    /// use tptrain::{Activation, DType, InputSpec, LayerOptions, Model};
    /// let model = Model::new(&[InputSpec::new("x", DType::F32, &[-1, 3])], |tower, inputs| {
    ///     let h = tower.fc("fc0", &inputs[0], 8, &LayerOptions::default().activation(Activation::Relu))?;
    ///     let y = tower.fc("fc1", &h, 1, None)?;
    ///     tower.set_cost(&y.mean()?)
    /// })?;
    /// model.build()?;
    /// assert_eq!(model.variable("fc1/W")?.shape(), vec![1, 8]);
    /// # Ok::<(), tptrain::Error>(())
    /// ```
    pub fn fc<'o>(
        &mut self,
        name: &str,
        x: &Tensor,
        units: i64,
        options: impl Into<Option<&'o LayerOptions>>,
    ) -> Result<Tensor> {
        self.weighted(sys::tpt_layer_fc, name, x, units, options.into())
    }

    /// 2-D convolution of x `[N, C, H, W]` into `filters` channels
    /// (`tpt_layer_conv2d`); `options`: `None` for the defaults (3x3, stride
    /// 1, SAME), or a [`LayerOptions`].
    pub fn conv2d<'o>(
        &mut self,
        name: &str,
        x: &Tensor,
        filters: i64,
        options: impl Into<Option<&'o LayerOptions>>,
    ) -> Result<Tensor> {
        self.weighted(sys::tpt_layer_conv2d, name, x, filters, options.into())
    }

    /// 2-D transposed convolution (SAME: output size `in * stride`)
    /// (`tpt_layer_conv2d_transpose`); `options` as for
    /// [`conv2d`](Self::conv2d).
    pub fn conv2d_transpose<'o>(
        &mut self,
        name: &str,
        x: &Tensor,
        filters: i64,
        options: impl Into<Option<&'o LayerOptions>>,
    ) -> Result<Tensor> {
        self.weighted(sys::tpt_layer_conv2d_transpose, name, x, filters, options.into())
    }

    /// Batch normalisation over dimension 1 of x (`[N, C]` or `[N, C, H, W]`)
    /// with "name/gamma", "name/beta" (trainable) and "name/mean/EMA",
    /// "name/variance/EMA" (model-only). Training towers use the batch
    /// statistics and the first one updates the moving averages
    /// (`ema = momentum * ema + (1 - momentum) * batch`; not in the build
    /// call); inference towers use the moving averages. See
    /// [`BATCH_NORM_MOMENTUM`] and [`BATCH_NORM_EPS`] (`tpt_layer_batch_norm`).
    pub fn batch_norm(&mut self, name: &str, x: &Tensor, momentum: f64, eps: f64) -> Result<Tensor> {
        out(|t| {
            with_cstr(name, "name", |n| {
                call!(sys::tpt_layer_batch_norm(t, self.as_ptr(), n, x.as_ptr(), momentum, eps))
            })?
        })
    }

    /// Layer normalisation over the last dimension, with "name/gamma" and
    /// "name/beta" (`tpt_layer_layer_norm`).
    pub fn layer_norm(&mut self, name: &str, x: &Tensor, eps: f64) -> Result<Tensor> {
        out(|t| with_cstr(name, "name", |n| call!(sys::tpt_layer_layer_norm(t, self.as_ptr(), n, x.as_ptr(), eps)))?)
    }

    /// Layer normalisation over `axes` (negative: from the end) with
    /// "name/gamma" and "name/beta" of size `x.shape[channel_axis]`
    /// broadcast along it (`tpt_layer_layer_norm_axes`); `&[1, 2, 3]` with
    /// channel axis 1 is tensorpack's LayerNorm of an NCHW tensor.
    pub fn layer_norm_axes(
        &mut self,
        name: &str,
        x: &Tensor,
        axes: &[i64],
        channel_axis: i64,
        eps: f64,
    ) -> Result<Tensor> {
        out(|t| {
            with_cstr(name, "name", |n| {
                call!(sys::tpt_layer_layer_norm_axes(
                    t,
                    self.as_ptr(),
                    n,
                    x.as_ptr(),
                    axes.as_ptr(),
                    axes.len(),
                    channel_axis,
                    eps
                ))
            })?
        })
    }

    /// Dropout with drop probability `rate` in training towers; the identity
    /// in inference towers and in the build call (`tpt_layer_dropout`).
    pub fn dropout(&self, x: &Tensor, rate: f64) -> Result<Tensor> {
        out(|t| call!(sys::tpt_layer_dropout(t, self.as_ptr(), x.as_ptr(), rate)))
    }

    /// `weight * Σ sum(w²)` over the trainable variables `w` whose name
    /// matches `pattern` (ECMAScript regular expression, searched), e.g.
    /// "/W$": L2 regularisation as PyTorch's weight decay counts it; a 0-d
    /// tensor to add to the cost (`tpt_regularize_l2`). tensorpack's recipes
    /// use TensorFlow's `wd * sum(w²) / 2` (`tf.nn.l2_loss`): pass
    /// `weight = wd / 2` to port them.
    pub fn regularize_l2(&mut self, pattern: &str, weight: f64) -> Result<Tensor> {
        out(|t| with_cstr(pattern, "pattern", |p| call!(sys::tpt_regularize_l2(t, self.as_ptr(), p, weight)))?)
    }
}

/// Max pooling of x `[N, C, H, W]` with a square window (`tpt_layer_max_pool`).
pub fn max_pool(x: &Tensor, kernel: i64, stride: i64, padding: Padding) -> Result<Tensor> {
    out(|t| call!(sys::tpt_layer_max_pool(t, x.as_ptr(), kernel, stride, padding.to_raw())))
}

/// Average pooling of x `[N, C, H, W]` with a square window (`tpt_layer_avg_pool`).
pub fn avg_pool(x: &Tensor, kernel: i64, stride: i64, padding: Padding) -> Result<Tensor> {
    out(|t| call!(sys::tpt_layer_avg_pool(t, x.as_ptr(), kernel, stride, padding.to_raw())))
}

/// The mean over H and W: `[N, C, H, W] -> [N, C]` (`tpt_layer_global_avg_pool`).
pub fn global_avg_pool(x: &Tensor) -> Result<Tensor> {
    out(|t| call!(sys::tpt_layer_global_avg_pool(t, x.as_ptr())))
}

/// An activation (`tpt_layer_activation`).
pub fn activation(x: &Tensor, activation: Activation) -> Result<Tensor> {
    let (act, alpha) = activation.to_raw();
    out(|t| call!(sys::tpt_layer_activation(t, x.as_ptr(), act, alpha)))
}

/// `[N, ...] -> [N, product of the rest]` (`tpt_layer_flatten`).
pub fn flatten(x: &Tensor) -> Result<Tensor> {
    out(|t| call!(sys::tpt_layer_flatten(t, x.as_ptr())))
}

/// Concatenation along `dim` (`tpt_layer_concat`).
pub fn concat(xs: &[&Tensor], dim: i64) -> Result<Tensor> {
    let ptrs: Vec<*const sys::tpt_tensor> = xs.iter().map(|x| x.as_ptr()).collect();
    out(|t| call!(sys::tpt_layer_concat(t, ptrs.as_ptr(), ptrs.len(), dim)))
}

/// Softmax cross-entropy of logits `[N, K]` with integer labels `[N]` (i64),
/// averaged over the batch (`tpt_loss_softmax_cross_entropy`).
pub fn softmax_cross_entropy(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    out(|t| call!(sys::tpt_loss_softmax_cross_entropy(t, logits.as_ptr(), labels.as_ptr())))
}

/// Sigmoid cross-entropy of logits with targets of the same shape, averaged
/// (`tpt_loss_sigmoid_cross_entropy`).
pub fn sigmoid_cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    out(|t| call!(sys::tpt_loss_sigmoid_cross_entropy(t, logits.as_ptr(), targets.as_ptr())))
}

/// Mean squared error (`tpt_loss_mse`).
pub fn mse(prediction: &Tensor, target: &Tensor) -> Result<Tensor> {
    out(|t| call!(sys::tpt_loss_mse(t, prediction.as_ptr(), target.as_ptr())))
}

/// Mean absolute error (`tpt_loss_l1`).
pub fn l1(prediction: &Tensor, target: &Tensor) -> Result<Tensor> {
    out(|t| call!(sys::tpt_loss_l1(t, prediction.as_ptr(), target.as_ptr())))
}

/// Accuracy of logits `[N, K]` against integer labels `[N]`: a 0-d f32
/// tensor (`tpt_metric_accuracy`).
pub fn accuracy(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    out(|t| call!(sys::tpt_metric_accuracy(t, logits.as_ptr(), labels.as_ptr())))
}

/// The wrong vector of top-k classification: a `[N]` f32 tensor, 1 where the
/// label is not among the k largest logits (tensorpack's
/// prediction_incorrect; its mean is the error rate) (`tpt_metric_wrong`).
pub fn wrong(logits: &Tensor, labels: &Tensor, k: i64) -> Result<Tensor> {
    out(|t| call!(sys::tpt_metric_wrong(t, logits.as_ptr(), labels.as_ptr(), k)))
}
