package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
*/
import "C"

import (
	"runtime"
	"strconv"
	"unsafe"
)

// ---- Layers, losses and metrics.
//
// tensorpack-style helpers for tower functions. A layer with variables is a
// Tower method and creates them under its name in the current scope
// (FC("fc1", ...) makes "fc1/W" and "fc1/b"), with the tower's reuse rules.
// Tensors use LibTorch's layouts: images NCHW; a fully-connected weight is
// [units, in]; a convolution weight [filters, in / groups, kh, kw]; a
// transposed convolution weight [in, filters / groups, kh, kw]. Every
// result is a new Tensor owned by the caller.

// Act is an activation function (tpt_activation).
type Act int32

// The activations of tpt_activation.
const (
	ActNone      Act = C.TPT_ACT_NONE
	ActReLU      Act = C.TPT_ACT_RELU
	ActLeakyReLU Act = C.TPT_ACT_LEAKY_RELU // slope alpha
	ActSigmoid   Act = C.TPT_ACT_SIGMOID
	ActTanh      Act = C.TPT_ACT_TANH
	ActGELU      Act = C.TPT_ACT_GELU
	ActSoftmax   Act = C.TPT_ACT_SOFTMAX // over dimension 1
)

// Padding is the padding of convolutions and pooling (tpt_padding).
type Padding int32

// The paddings of tpt_padding.
const (
	PaddingSame  Padding = C.TPT_PADDING_SAME  // output size ceil(in / stride), as tensorpack
	PaddingValid Padding = C.TPT_PADDING_VALID // no padding
)

// LayerOptions are the options of FC, Conv2D and Conv2DTranspose
// (tpt_layer_options). The zero value, like nil, is the default of
// TPT_LAYER_OPTIONS_INIT: a bias, no activation, He-normal kernels, zero
// biases, 3x3 kernels, stride 1, dilation 1, one group, SAME padding.
type LayerOptions struct {
	NoBias     bool    // no bias variable
	Activation Act     // ActNone by default
	Alpha      float64 // the leaky ReLU slope; 0 means 0.2 (ActReLU is slope 0)
	KernelInit Init    // 0 means InitHeNormal
	BiasInit   Init    // 0 means InitZeros
	// Kernel, Stride and Dilation are [height, width]; {0, 0} means the
	// default ({3, 3}, {1, 1}, {1, 1}); {k, 0} or {0, k} means {k, k}.
	Kernel, Stride, Dilation [2]int64
	Groups                   int64   // 0 means 1
	Padding                  Padding // PaddingSame by default
}

func pair(v [2]int64, def int64) [2]C.int64_t {
	switch {
	case v[0] == 0 && v[1] == 0:
		v = [2]int64{def, def}
	case v[1] == 0:
		v[1] = v[0]
	case v[0] == 0:
		v[0] = v[1]
	}
	return [2]C.int64_t{C.int64_t(v[0]), C.int64_t(v[1])}
}

func (o *LayerOptions) c() C.tpt_layer_options {
	var opts LayerOptions
	if o != nil {
		opts = *o
	}
	c := defaultLayerOptions()
	c.use_bias = cBool(!opts.NoBias)
	c.activation = C.tpt_activation(opts.Activation)
	if opts.Alpha != 0 {
		c.alpha = C.double(opts.Alpha)
	}
	c.kernel = pair(opts.Kernel, int64(c.kernel[0]))
	c.stride = pair(opts.Stride, int64(c.stride[0]))
	c.dilation = pair(opts.Dilation, int64(c.dilation[0]))
	if opts.Groups != 0 {
		c.groups = C.int64_t(opts.Groups)
	}
	c.padding = C.tpt_padding(opts.Padding)
	if opts.KernelInit != 0 {
		c.kernel_init = C.tpt_init(opts.KernelInit)
	}
	if opts.BiasInit != 0 {
		c.bias_init = C.tpt_init(opts.BiasInit)
	}
	return c
}

// tensorCall read-locks the tensors, calls fn with their handles and wraps
// the tensor it makes. method names the Go function in errors; names the
// tensor arguments.
func tensorCall(method string, names []string, ts []*Tensor,
	fn func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status) (*Tensor, error) {
	ptrs, unlock, err := lockTensors(ts, false, func(i int) string { return method + ": " + names[i] })
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out *C.tpt_tensor
	st := fn(&out, ptrs)
	runtime.KeepAlive(ts)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// towerCall is tensorCall for a Tower method: tw is locked too.
func (tw *Tower) towerCall(method string, x *Tensor,
	fn func(out **C.tpt_tensor, tower *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status) (*Tensor, error) {
	ptr, err := tw.lock(method)
	if err != nil {
		return nil, err
	}
	defer tw.mu.Unlock()
	return tensorCall("Tower."+method, []string{"x"}, []*Tensor{x}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return fn(out, ptr, xs[0])
	})
}

// FC is a fully-connected layer, y = act(x W^T + b), with variables
// "name/W" [units, in] and "name/b" [units]; x is [N, in] (more dimensions
// are flattened) (tpt_layer_fc). opts may be nil.
func (tw *Tower) FC(name string, x *Tensor, units int64, opts *LayerOptions) (*Tensor, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	co := opts.c()
	return tw.towerCall("FC", x, func(out **C.tpt_tensor, t *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_fc(out, t, cname, x, C.int64_t(units), &co)
	})
}

// Conv2D is a 2-D convolution of x [N, C, H, W] into filters channels, with
// variables "name/W" [filters, C / groups, kh, kw] and "name/b"
// (tpt_layer_conv2d). opts may be nil.
func (tw *Tower) Conv2D(name string, x *Tensor, filters int64, opts *LayerOptions) (*Tensor, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	co := opts.c()
	return tw.towerCall("Conv2D", x, func(out **C.tpt_tensor, t *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_conv2d(out, t, cname, x, C.int64_t(filters), &co)
	})
}

// Conv2DTranspose is a 2-D transposed convolution of x [N, C, H, W] into
// filters channels (with SAME padding the output size is in * stride), with
// variables "name/W" [C, filters / groups, kh, kw] and "name/b"
// (tpt_layer_conv2d_transpose). opts may be nil.
func (tw *Tower) Conv2DTranspose(name string, x *Tensor, filters int64, opts *LayerOptions) (*Tensor, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	co := opts.c()
	return tw.towerCall("Conv2DTranspose", x, func(out **C.tpt_tensor, t *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_conv2d_transpose(out, t, cname, x, C.int64_t(filters), &co)
	})
}

// BatchNorm normalises x ([N, C] or [N, C, H, W]) over dimension 1
// (tpt_layer_batch_norm), with variables "name/gamma", "name/beta"
// (trainable) and "name/mean/EMA", "name/variance/EMA" (model-only).
// Training towers normalise with the batch statistics; only the first
// training tower updates the moving averages (ema = momentum * ema + (1 -
// momentum) * batch), never in the build call; inference towers use the
// moving averages. tensorpack's and PyTorch's defaults are momentum 0.9 and
// eps 1e-5 (PyTorch writes the momentum as 1 - 0.9 = 0.1).
func (tw *Tower) BatchNorm(name string, x *Tensor, momentum, eps float64) (*Tensor, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return tw.towerCall("BatchNorm", x, func(out **C.tpt_tensor, t *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_batch_norm(out, t, cname, x, C.double(momentum), C.double(eps))
	})
}

// LayerNorm normalises x over its last dimension, with variables
// "name/gamma" and "name/beta" (tpt_layer_layer_norm); eps is typically
// 1e-5.
func (tw *Tower) LayerNorm(name string, x *Tensor, eps float64) (*Tensor, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return tw.towerCall("LayerNorm", x, func(out **C.tpt_tensor, t *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_layer_norm(out, t, cname, x, C.double(eps))
	})
}

// LayerNormAxes normalises x over axes (negative: from the end), with
// variables "name/gamma" and "name/beta" of size x's channelAxis dimension,
// broadcast along it (tpt_layer_layer_norm_axes); axes {1, 2, 3} with
// channelAxis 1 is tensorpack's LayerNorm of an NCHW tensor.
func (tw *Tower) LayerNormAxes(name string, x *Tensor, axes []int64, channelAxis int64, eps float64) (*Tensor, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var ap *C.int64_t
	if len(axes) > 0 {
		ap = (*C.int64_t)(unsafe.Pointer(&axes[0]))
	}
	return tw.towerCall("LayerNormAxes", x, func(out **C.tpt_tensor, t *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_layer_norm_axes(out, t, cname, x, ap, C.size_t(len(axes)), C.int64_t(channelAxis), C.double(eps))
	})
}

// Dropout drops elements with probability rate in training towers (and
// scales the rest by 1 / (1 - rate)); it is the identity in inference
// towers and in the build call (tpt_layer_dropout).
func (tw *Tower) Dropout(x *Tensor, rate float64) (*Tensor, error) {
	return tw.towerCall("Dropout", x, func(out **C.tpt_tensor, t *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_dropout(out, t, x, C.double(rate))
	})
}

// RegularizeL2 returns weight * Σ sum(w²) over the trainable variables w
// whose name matches pattern (an ECMAScript regular expression, searched),
// e.g. "/W$": L2 regularisation as PyTorch's weight decay counts it, a 0-d
// tensor to add to the cost (tpt_regularize_l2). tensorpack's recipes use
// TensorFlow's wd * sum(w²) / 2 (tf.nn.l2_loss): pass weight = wd / 2 to
// port them.
func (tw *Tower) RegularizeL2(pattern string, weight float64) (*Tensor, error) {
	ptr, err := tw.lock("RegularizeL2")
	if err != nil {
		return nil, err
	}
	defer tw.mu.Unlock()
	cp := C.CString(pattern)
	defer C.free(unsafe.Pointer(cp))
	var out *C.tpt_tensor
	if err := statusError(C.tpt_regularize_l2(&out, ptr, cp, C.double(weight))); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// MaxPool is max pooling of x [N, C, H, W] with a square window
// (tpt_layer_max_pool).
func MaxPool(x *Tensor, kernel, stride int64, padding Padding) (*Tensor, error) {
	return tensorCall("MaxPool", []string{"x"}, []*Tensor{x}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_max_pool(out, xs[0], C.int64_t(kernel), C.int64_t(stride), C.tpt_padding(padding))
	})
}

// AvgPool is average pooling of x [N, C, H, W] with a square window
// (tpt_layer_avg_pool).
func AvgPool(x *Tensor, kernel, stride int64, padding Padding) (*Tensor, error) {
	return tensorCall("AvgPool", []string{"x"}, []*Tensor{x}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_avg_pool(out, xs[0], C.int64_t(kernel), C.int64_t(stride), C.tpt_padding(padding))
	})
}

// GlobalAvgPool is the mean over H and W: [N, C, H, W] -> [N, C]
// (tpt_layer_global_avg_pool).
func GlobalAvgPool(x *Tensor) (*Tensor, error) {
	return tensorCall("GlobalAvgPool", []string{"x"}, []*Tensor{x}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_global_avg_pool(out, xs[0])
	})
}

// Activation applies an activation function; alpha is the leaky ReLU slope
// (tpt_layer_activation).
func Activation(x *Tensor, act Act, alpha float64) (*Tensor, error) {
	return tensorCall("Activation", []string{"x"}, []*Tensor{x}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_activation(out, xs[0], C.tpt_activation(act), C.double(alpha))
	})
}

// Flatten reshapes [N, ...] to [N, product of the rest]
// (tpt_layer_flatten).
func Flatten(x *Tensor) (*Tensor, error) {
	return tensorCall("Flatten", []string{"x"}, []*Tensor{x}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_layer_flatten(out, xs[0])
	})
}

// Concat concatenates xs along dim (tpt_layer_concat).
func Concat(xs []*Tensor, dim int64) (*Tensor, error) {
	names := make([]string, len(xs))
	for i := range xs {
		names[i] = "xs[" + strconv.Itoa(i) + "]"
	}
	return tensorCall("Concat", names, xs, func(out **C.tpt_tensor, ps []*C.tpt_tensor) *C.tpt_status {
		var first **C.tpt_tensor
		if len(ps) > 0 {
			first = &ps[0] // Go memory holding C pointers, read during the call
		}
		return C.tpt_layer_concat(out, first, C.size_t(len(ps)), C.int64_t(dim))
	})
}

func binaryCall(method, a, b string, x, y *Tensor,
	fn func(out **C.tpt_tensor, x, y *C.tpt_tensor) *C.tpt_status) (*Tensor, error) {
	return tensorCall(method, []string{a, b}, []*Tensor{x, y}, func(out **C.tpt_tensor, ps []*C.tpt_tensor) *C.tpt_status {
		return fn(out, ps[0], ps[1])
	})
}

// SoftmaxCrossEntropy is the softmax cross-entropy of logits [N, K] with
// integer labels [N] (int64), averaged over the batch
// (tpt_loss_softmax_cross_entropy).
func SoftmaxCrossEntropy(logits, labels *Tensor) (*Tensor, error) {
	return binaryCall("SoftmaxCrossEntropy", "logits", "labels", logits, labels,
		func(out **C.tpt_tensor, x, y *C.tpt_tensor) *C.tpt_status {
			return C.tpt_loss_softmax_cross_entropy(out, x, y)
		})
}

// SigmoidCrossEntropy is the sigmoid cross-entropy of logits with targets
// of the same shape, averaged (tpt_loss_sigmoid_cross_entropy).
func SigmoidCrossEntropy(logits, targets *Tensor) (*Tensor, error) {
	return binaryCall("SigmoidCrossEntropy", "logits", "targets", logits, targets,
		func(out **C.tpt_tensor, x, y *C.tpt_tensor) *C.tpt_status {
			return C.tpt_loss_sigmoid_cross_entropy(out, x, y)
		})
}

// MSELoss is the mean squared error (tpt_loss_mse).
func MSELoss(prediction, target *Tensor) (*Tensor, error) {
	return binaryCall("MSELoss", "prediction", "target", prediction, target,
		func(out **C.tpt_tensor, x, y *C.tpt_tensor) *C.tpt_status { return C.tpt_loss_mse(out, x, y) })
}

// L1Loss is the mean absolute error (tpt_loss_l1).
func L1Loss(prediction, target *Tensor) (*Tensor, error) {
	return binaryCall("L1Loss", "prediction", "target", prediction, target,
		func(out **C.tpt_tensor, x, y *C.tpt_tensor) *C.tpt_status { return C.tpt_loss_l1(out, x, y) })
}

// Accuracy is the accuracy of logits [N, K] against integer labels [N], a
// 0-d float32 tensor (tpt_metric_accuracy).
func Accuracy(logits, labels *Tensor) (*Tensor, error) {
	return binaryCall("Accuracy", "logits", "labels", logits, labels,
		func(out **C.tpt_tensor, x, y *C.tpt_tensor) *C.tpt_status { return C.tpt_metric_accuracy(out, x, y) })
}

// Wrong is the wrong vector of top-k classification: a [N] float32 tensor
// of 0/1, 1 where the label is not among the k largest logits; its mean is
// the error rate (tensorpack's prediction_incorrect; tpt_metric_wrong).
func Wrong(logits, labels *Tensor, k int64) (*Tensor, error) {
	return binaryCall("Wrong", "logits", "labels", logits, labels,
		func(out **C.tpt_tensor, x, y *C.tpt_tensor) *C.tpt_status {
			return C.tpt_metric_wrong(out, x, y, C.int64_t(k))
		})
}
