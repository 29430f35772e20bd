/*
 * tptrain/tower.h: tpt_tower: what a tower function may ask and do (its
 * context, scopes, variables).
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_TOWER_H
#define TPTRAIN_TOWER_H

#include "tensor.h"

TPT_BEGIN_DECL

/* ---- Inside a tower function ---------------------------------------------- */

TPT_API TPT_NODISCARD tpt_status *tpt_tower_is_training(int32_t *out, const tpt_tower *tower);
TPT_API TPT_NODISCARD tpt_status *tpt_tower_is_building(int32_t *out, const tpt_tower *tower);
/* The tower's index among the training towers (0 for inference towers). */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_index(int32_t *out, const tpt_tower *tower);
/* "tower0", "tower1", ... or "InferenceTower"; copied into buf. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_name(char *buf, size_t size, const tpt_tower *tower);
/* The tower's device ("cpu", "cuda:1"); copied into buf. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_device(char *buf, size_t size, const tpt_tower *tower);
/* 1 when tpt_tower_variable may create variables in this call. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_can_create_variables(int32_t *out,
                                                                 const tpt_tower *tower);

/* Sets the cost (a floating tensor of one element) that training minimises.
 * A training tower must set it. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_set_cost(tpt_tower *tower, const tpt_tensor *cost);

/* Publishes a named output (logits, accuracy, wrong counts): step outputs for
 * callbacks (tpt_trainer_output) and inference results. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_set_output(tpt_tower *tower, const char *name,
                                                       const tpt_tensor *value);

/* Name scopes: variables created inside get "scope/" in front of their name
 * (layers do this with their own name). pop closes the innermost scope. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_push_scope(tpt_tower *tower, const char *scope);
/* A scope whose variables one call of the tower function may use more than
 * once (tensorpack's auto_reuse_variable_scope): a net applied twice, e.g. a
 * GAN's discriminator on real and on generated images, shares its variables
 * (BatchNorm's moving averages are then updated by each application). */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_push_reuse_scope(tpt_tower *tower, const char *scope);
TPT_API TPT_NODISCARD tpt_status *tpt_tower_pop_scope(tpt_tower *tower);

/* Initializers of variables. */
typedef enum tpt_init {
  TPT_INIT_ZEROS = 1,
  TPT_INIT_CONSTANT = 2,         /* a */
  TPT_INIT_UNIFORM = 3,          /* in [a, b) */
  TPT_INIT_NORMAL = 4,           /* mean a, standard deviation b */
  TPT_INIT_TRUNCATED_NORMAL = 5, /* mean a, standard deviation b, redrawn beyond 2 b */
  TPT_INIT_GLOROT_UNIFORM = 6,   /* Xavier; a: gain (1 when 0) */
  TPT_INIT_GLOROT_NORMAL = 7,
  TPT_INIT_HE_UNIFORM = 8,       /* Kaiming, fan_in, ReLU gain; a: negative slope */
  TPT_INIT_HE_NORMAL = 9,
  TPT_INIT_FORCE32 = 0x7fffffff
} tpt_init;

/* Options of a variable. Initialise with TPT_VARIABLE_OPTIONS_INIT. */
#define TPT_VARIABLE_OPTIONS_VERSION 1
typedef struct tpt_variable_options {
  uint32_t version;   /* TPT_VARIABLE_OPTIONS_VERSION */
  tpt_dtype dtype;    /* default TPT_DTYPE_F32 (floating dtypes only when trainable) */
  tpt_init init;      /* default TPT_INIT_GLOROT_UNIFORM */
  int32_t trainable;  /* nonzero (default): trained; 0: model-only (saved, not trained) */
  double a, b;        /* initializer parameters (see tpt_init) */
} tpt_variable_options;
#define TPT_VARIABLE_OPTIONS_INIT \
  { TPT_VARIABLE_OPTIONS_VERSION, TPT_DTYPE_F32, TPT_INIT_GLOROT_UNIFORM, 1, 0.0, 0.0 }

/* Gets the variable `name` (prefixed by the current scopes), creating it in
 * the build call. *out is a new handle on the variable itself (trainable
 * variables carry gradients); the caller frees the handle. A full name
 * (scopes included) has at most 1024 characters. */
TPT_API TPT_NODISCARD tpt_status *tpt_tower_variable(tpt_tensor **out, tpt_tower *tower,
                                                     const char *name, const int64_t *shape,
                                                     size_t ndim,
                                                     const tpt_variable_options *options);

TPT_END_DECL

#endif /* TPTRAIN_TOWER_H */
