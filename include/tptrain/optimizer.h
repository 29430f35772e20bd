/*
 * tptrain/optimizer.h: tpt_optimizer: optimizers and their
 * hyper-parameters.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_OPTIMIZER_H
#define TPTRAIN_OPTIMIZER_H

#include "common.h"

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Optimizers                                                                */
/*                                                                           */
/* Made by kind, configured by hyper-parameter name; names can be read and   */
/* set during training (schedules), from the training thread.                */
/*   "sgd":     learning_rate (0.01), momentum (0), dampening (0),           */
/*              weight_decay (0), nesterov (0/1)                              */
/*   "adam", "adamw": learning_rate (0.001), beta1 (0.9), beta2 (0.999),     */
/*              eps (1e-8), weight_decay (0; adamw 0.01), amsgrad (0/1)       */
/*   "rmsprop": learning_rate (0.01), alpha (0.99), eps (1e-8), momentum (0),*/
/*              weight_decay (0), centered (0/1)                              */
/*   "adagrad": learning_rate (0.01), lr_decay (0), weight_decay (0),        */
/*              initial_accumulator_value (0), eps (1e-10)                    */
/* Gradient processing, for every kind:                                      */
/*   "clip_global_norm" (0: off): when > 0, after accumulation and scaling,  */
/*     PyTorch's clip_grad_norm_ bit for bit (float32 steps): norm = the     */
/*     2-norm of the stacked 2-norms of the gradients, every gradient times  */
/*     min(1, clip_global_norm / (norm + 1e-6));                              */
/*   "clip_global_norm_tf" (0; 1: TensorFlow's clip_by_global_norm instead,  */
/*     tensorpack's GlobalNormClip: g * clip / max(norm, clip));              */
/*   "clip_value" (0: off; every gradient element clamped to +-clip_value,  */
/*     before the global-norm clip),                                          */
/*   "accumulate_steps" (1: apply every step; N: average N micro-steps),     */
/*   "check_numerics" (1, the default: a NaN or Inf cost fails the step;    */
/*   2: a NaN or Inf gradient too, at the price of one more sync per step;   */
/*   0: no check).                                                            */
/* ------------------------------------------------------------------------ */

TPT_API TPT_NODISCARD tpt_status *tpt_optimizer_new(tpt_optimizer **out, const char *kind);
/* Drops the caller's reference. NULL is a no-op. */
TPT_API void tpt_optimizer_free(tpt_optimizer *optimizer);
TPT_API TPT_NODISCARD tpt_status *tpt_optimizer_set(tpt_optimizer *optimizer, const char *name,
                                                    double value);
TPT_API TPT_NODISCARD tpt_status *tpt_optimizer_get(double *out, const tpt_optimizer *optimizer,
                                                    const char *name);
/* Multiplies the gradients of the variables whose name matches `pattern`
 * (an ECMAScript regular expression, searched) by `factor`, before clipping. */
TPT_API TPT_NODISCARD tpt_status *tpt_optimizer_scale_gradients(tpt_optimizer *optimizer,
                                                                const char *pattern, double factor);

TPT_END_DECL

#endif /* TPTRAIN_OPTIMIZER_H */
