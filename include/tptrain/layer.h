/*
 * tptrain/layer.h: layers, losses and metrics (tpt_layer, tpt_loss,
 * tpt_metric, tpt_regularize).
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_LAYER_H
#define TPTRAIN_LAYER_H

#include "tower.h"

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Layers, losses and metrics                                                */
/*                                                                           */
/* tensorpack-style helpers for tower functions. A layer with variables     */
/* creates them under its name (tpt_layer_fc(.., "fc1", ..) makes "fc1/W"    */
/* and "fc1/b") in the current scope, with the tower's reuse rules. Tensors  */
/* use LibTorch's layouts: images NCHW; a fully-connected weight is          */
/* [units, in]; a convolution weight [filters, in / groups, kh, kw]; a       */
/* transposed convolution weight [in, filters / groups, kh, kw]. Every       */
/* result is a new tensor owned by the caller. Options may be NULL.          */
/* ------------------------------------------------------------------------ */

typedef enum tpt_activation {
  TPT_ACT_NONE = 0,
  TPT_ACT_RELU = 1,
  TPT_ACT_LEAKY_RELU = 2, /* slope `alpha` */
  TPT_ACT_SIGMOID = 3,
  TPT_ACT_TANH = 4,
  TPT_ACT_GELU = 5,
  TPT_ACT_SOFTMAX = 6,    /* over dimension 1 */
  TPT_ACT_FORCE32 = 0x7fffffff
} tpt_activation;

typedef enum tpt_padding {
  TPT_PADDING_SAME = 0,  /* output size ceil(in / stride), as tensorpack */
  TPT_PADDING_VALID = 1, /* no padding */
  TPT_PADDING_FORCE32 = 0x7fffffff
} tpt_padding;

/* Options of layers with weights. Initialise with TPT_LAYER_OPTIONS_INIT. */
#define TPT_LAYER_OPTIONS_VERSION 1
typedef struct tpt_layer_options {
  uint32_t version;          /* TPT_LAYER_OPTIONS_VERSION */
  int32_t use_bias;          /* 1 */
  tpt_activation activation; /* TPT_ACT_NONE */
  double alpha;              /* leaky ReLU slope (0.2) */
  tpt_init kernel_init;      /* TPT_INIT_HE_NORMAL (He uses alpha with leaky ReLU; uniform
                                is [-0.05, 0.05), normal and truncated normal std 0.05) */
  tpt_init bias_init;        /* TPT_INIT_ZEROS */
  /* convolutions */
  int64_t kernel[2];         /* {3, 3} */
  int64_t stride[2];         /* {1, 1} */
  int64_t dilation[2];       /* {1, 1} */
  int64_t groups;            /* 1 */
  tpt_padding padding;       /* TPT_PADDING_SAME */
} tpt_layer_options;
#define TPT_LAYER_OPTIONS_INIT                                                             \
  { TPT_LAYER_OPTIONS_VERSION, 1, TPT_ACT_NONE, 0.2, TPT_INIT_HE_NORMAL, TPT_INIT_ZEROS, \
    {3, 3}, {1, 1}, {1, 1}, 1, TPT_PADDING_SAME }

/* y = act(x W^T + b); x is [N, in] (more dimensions are flattened). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_fc(tpt_tensor **out, tpt_tower *tower, const char *name,
                                               const tpt_tensor *x, int64_t units,
                                               const tpt_layer_options *options);

/* 2-D convolution of x [N, C, H, W] into `filters` channels. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_conv2d(tpt_tensor **out, tpt_tower *tower,
                                                   const char *name, const tpt_tensor *x,
                                                   int64_t filters,
                                                   const tpt_layer_options *options);

/* 2-D transposed convolution (SAME: output size in * stride). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_conv2d_transpose(tpt_tensor **out, tpt_tower *tower,
                                                             const char *name, const tpt_tensor *x,
                                                             int64_t filters,
                                                             const tpt_layer_options *options);

/* Max or average pooling of x [N, C, H, W] with a square window. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_max_pool(tpt_tensor **out, const tpt_tensor *x,
                                                     int64_t kernel, int64_t stride,
                                                     tpt_padding padding);
TPT_API TPT_NODISCARD tpt_status *tpt_layer_avg_pool(tpt_tensor **out, const tpt_tensor *x,
                                                     int64_t kernel, int64_t stride,
                                                     tpt_padding padding);
/* Mean over H and W: [N, C, H, W] -> [N, C]. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_global_avg_pool(tpt_tensor **out, const tpt_tensor *x);

/* Batch normalisation over dimension 1 of x ([N, C] or [N, C, H, W]), with
 * variables "name/gamma", "name/beta" (trainable) and "name/mean/EMA",
 * "name/variance/EMA" (model-only). Training towers normalise with the batch
 * statistics; only the first training tower (index 0) updates the moving
 * averages (ema = momentum * ema + (1 - momentum) * batch, unbiased batch
 * variance, as PyTorch), and never in the build call. Inference towers use
 * the moving averages. momentum 0.9 and eps 1e-5 are tensorpack's and
 * PyTorch's defaults (PyTorch writes momentum as 1 - 0.9 = 0.1). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_batch_norm(tpt_tensor **out, tpt_tower *tower,
                                                       const char *name, const tpt_tensor *x,
                                                       double momentum, double eps);

/* Layer normalisation over the last dimension, with "name/gamma", "name/beta"
 * of that dimension's size (PyTorch's LayerNorm(d)). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_layer_norm(tpt_tensor **out, tpt_tower *tower,
                                                       const char *name, const tpt_tensor *x,
                                                       double eps);

/* Layer normalisation over the dimensions `axes` (negative: from the end):
 * (x - mean) / sqrt(var + eps) * gamma + beta, mean and the biased variance
 * per example over `axes`, "name/gamma" and "name/beta" of size
 * x.shape[channel_axis] broadcast along it. axes {1, 2, 3} with
 * channel_axis 1 is tensorpack's LayerNorm of an NCHW tensor. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_layer_norm_axes(tpt_tensor **out, tpt_tower *tower,
                                                            const char *name, const tpt_tensor *x,
                                                            const int64_t *axes, size_t n_axes,
                                                            int64_t channel_axis, double eps);

/* Dropout with drop probability `rate` in training towers; the identity in
 * inference towers and in the build call. The simple trainer draws the mask
 * from LibTorch's default generator; under the multi-tower strategies and in
 * distributed jobs each tower draws from its own, reseeded every step from
 * the seed, the rank, the tower and the step (docs/towers.md), so runs are
 * reproducible and resume exactly. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_dropout(tpt_tensor **out, const tpt_tower *tower,
                                                    const tpt_tensor *x, double rate);

/* An activation (alpha: the leaky ReLU slope). */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_activation(tpt_tensor **out, const tpt_tensor *x,
                                                       tpt_activation activation, double alpha);

/* [N, ...] -> [N, product of the rest]. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_flatten(tpt_tensor **out, const tpt_tensor *x);

/* Concatenation along `dim`. */
TPT_API TPT_NODISCARD tpt_status *tpt_layer_concat(tpt_tensor **out, const tpt_tensor *const *xs,
                                                   size_t n, int64_t dim);

/* Losses, averaged over the batch: softmax cross-entropy of logits [N, K]
 * with integer labels [N] (i64); sigmoid cross-entropy of logits with
 * targets of the same shape; mean squared error; mean absolute error. */
TPT_API TPT_NODISCARD tpt_status *tpt_loss_softmax_cross_entropy(tpt_tensor **out,
                                                                 const tpt_tensor *logits,
                                                                 const tpt_tensor *labels);
TPT_API TPT_NODISCARD tpt_status *tpt_loss_sigmoid_cross_entropy(tpt_tensor **out,
                                                                 const tpt_tensor *logits,
                                                                 const tpt_tensor *targets);
TPT_API TPT_NODISCARD tpt_status *tpt_loss_mse(tpt_tensor **out, const tpt_tensor *prediction,
                                               const tpt_tensor *target);
TPT_API TPT_NODISCARD tpt_status *tpt_loss_l1(tpt_tensor **out, const tpt_tensor *prediction,
                                              const tpt_tensor *target);

/* weight * sum over the trainable variables w whose name matches `pattern`
 * (ECMAScript regular expression, searched), e.g. "/W$", of sum(w^2): L2
 * regularisation as PyTorch's weight decay counts it. A 0-d tensor, to add
 * to the cost. The variables are the calling tower's own: with towers, each
 * tower's term sends its gradient into that tower's update, as a term
 * computed from the tower's layers would. tensorpack's recipes use TensorFlow's
 * regularize_cost(pattern, l2_regularizer(wd)) = wd * sum(w^2) / 2
 * (tf.nn.l2_loss): pass weight = wd / 2 to port them. */
TPT_API TPT_NODISCARD tpt_status *tpt_regularize_l2(tpt_tensor **out, tpt_tower *tower,
                                                    const char *pattern, double weight);

/* Metrics of logits [N, K] against integer labels [N]: accuracy (a 0-d f32
 * tensor), and the wrong vector of top-k classification (a [N] f32 tensor of
 * 0/1: 1 where the label is not among the k largest logits; tensorpack's
 * prediction_incorrect, whose mean is the error rate). */
TPT_API TPT_NODISCARD tpt_status *tpt_metric_accuracy(tpt_tensor **out, const tpt_tensor *logits,
                                                      const tpt_tensor *labels);
TPT_API TPT_NODISCARD tpt_status *tpt_metric_wrong(tpt_tensor **out, const tpt_tensor *logits,
                                                   const tpt_tensor *labels, int64_t k);

TPT_END_DECL

#endif /* TPTRAIN_LAYER_H */
