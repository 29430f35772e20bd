/*
 * tptrain/model.h: tpt_model: models (tensorpack's ModelDesc): tower
 * functions, variables, TorchScript models, train ops, restoring variables.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_MODEL_H
#define TPTRAIN_MODEL_H

#include "tower.h"

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Models: tower functions and variables                                     */
/*                                                                           */
/* A model (tensorpack's ModelDesc) is an input signature, a tower function  */
/* and an optimizer. The tower function computes the model for one step from */
/* the step's input tensors and sets the cost; it may publish named outputs. */
/* It "might get called multiple times": once per tower per step (several   */
/* towers may call it at the same time from different threads), by          */
/* inference, and once when the model is built. Variables follow            */
/* tensorpack's rules: tpt_tower_variable creates a variable only in the     */
/* first call of the first training tower (the build call); every later call */
/* (other steps, other towers, inference) reuses it by name. Creating one    */
/* anywhere else, a shape or dtype that differs from the existing variable,  */
/* and one name used twice in one call are errors.                           */
/*                                                                           */
/* The build call runs when training is set up (or at the first inference),  */
/* on zero-filled inputs of the signature's shapes (-1 becomes 1), without   */
/* gradients; tpt_tower_is_building tells it apart. Layers skip their state  */
/* updates (BatchNorm statistics) in it.                                     */
/* ------------------------------------------------------------------------ */

/* The tower function. `inputs` are the step's tensors in signature order
 * (borrowed). Return NULL, or a status (the step fails with it; TPT_STOP
 * ends training gracefully). */
typedef tpt_status *(*tpt_tower_fn)(tpt_tower *tower, const tpt_tensor *const *inputs,
                                    size_t n_inputs, void *user_data);

/* One input of the signature. shape entries are >= 1, or -1 for a free
 * dimension (the batch). */
typedef struct tpt_input_spec {
  const char *name;
  tpt_dtype dtype;
  const int64_t *shape;
  size_t ndim;
} tpt_input_spec;

/* Makes a model. The signature is copied. The library owns user_data from
 * this call on (destroy exactly once: when the model's last reference goes,
 * or at once on failure). The caller owns *out; trainers that use the model
 * keep their own reference. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_new(tpt_model **out, const tpt_input_spec *inputs,
                                                size_t n_inputs, tpt_tower_fn tower_fn,
                                                void *user_data, void (*destroy)(void *user_data));

/* Drops the caller's reference. NULL is a no-op, and so is the model lent to
 * a config's init hook (the library's handle). */
TPT_API void tpt_model_free(tpt_model *model);

/* Builds the model now if it was not built yet (the build call; see above). */
TPT_API TPT_NODISCARD tpt_status *tpt_model_build(tpt_model *model);

/* A new handle on a variable's tensor (the same storage: in-place changes
 * are seen by the model). Called from inside the model's tower function, it
 * is the running tower's variable (a replica's under the replicated
 * strategy), whose gradients reach that tower's update; elsewhere tower 0's,
 * the model's own. TPT_ERR_NOT_FOUND if there is no such variable. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_variable(tpt_tensor **out, const tpt_model *model,
                                                     const char *name);

/* Copies `value` into a variable (same shape; converted to its dtype), e.g.
 * to initialise or restore it. Not while a step runs. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_set_variable(tpt_model *model, const char *name,
                                                         const tpt_tensor *value);

/* The variables' names in creation order, one per line, into buf
 * (NUL-terminated; an error if it does not fit; *needed receives the size
 * needed when not NULL). */
TPT_API TPT_NODISCARD tpt_status *tpt_model_variable_names(char *buf, size_t size, size_t *needed,
                                                           const tpt_model *model);

/* The same names as an allocated array: *names receives *count
 * NUL-terminated strings in creation order (NULL when there are none); free
 * it with tpt_strings_free(*names, *count). */
TPT_API TPT_NODISCARD tpt_status *tpt_model_variable_list(char ***names, size_t *count, const tpt_model *model);

/* Runs the tower function as an inference tower ("InferenceTower": not
 * training, no gradients, no variable is created or changed) on `inputs`
 * and returns the named outputs it published, in the order of `names`
 * (the cost is the output "cost"). The caller owns outputs[0..n_names)
 * (inside a tower function or callback: that call's scope does).
 * Several threads may call it at once on one model (the tower function then
 * runs on them at once: tptrain's layers allow that), but not while a
 * trainer trains the model. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_infer(tpt_tensor **outputs, tpt_model *model,
                                                  const tpt_tensor *const *inputs, size_t n_inputs,
                                                  const char *const *names, size_t n_names);

/* ---- TorchScript models ----------------------------------------------------
 * A module saved with torch.jit.save (for example from Python), trained as a
 * tower function: forward(*inputs) returns the cost, or a tuple (cost,
 * outputs) with outputs a Dict[str, Tensor] of named outputs. Its parameters
 * become trainable variables and its buffers model-only variables, named by
 * their path with "/" ("fc1.weight" -> "fc1/weight"); they are the module's
 * own tensors, so tpt_model_save_torchscript writes the trained module. The
 * module runs in train() mode in training towers and eval() mode in
 * inference. There is no build call: the variables exist from the start.
 * forward's arguments must take the signature's tensors (their number and
 * types are checked when the model is made). */

/* Loads `path` as a model with the given input signature (the signature is
 * checked against each batch, as for any model). */
TPT_API TPT_NODISCARD tpt_status *tpt_model_from_torchscript(tpt_model **out, const char *path,
                                                             const tpt_input_spec *inputs,
                                                             size_t n_inputs);

/* A parameter or buffer of a module compiled from source: a flat attribute
 * name (a TorchScript identifier, used as self.<name> in the source), its
 * shape, and how it is made (NULL: TPT_VARIABLE_OPTIONS_INIT; trainable
 * ones become parameters, model-only ones buffers). */
typedef struct tpt_torchscript_param {
  const char *name;
  const int64_t *shape;
  size_t ndim;
  const tpt_variable_options *options;
} tpt_torchscript_param;

/* Compiles TorchScript source into a model: `source` defines forward(self,
 * ...) (and any helper methods) over the attributes in params, which are
 * created and initialised first (with LibTorch's default generator, see
 * tpt_manual_seed). Same conventions as tpt_model_from_torchscript;
 * self.training is the train()/eval() flag. A compile error is
 * TPT_ERR_INVALID_ARGUMENT with the compiler's message, as are names that
 * are not identifiers, are reserved (Python's keywords, self, forward,
 * training) or repeated, and dimensions < 1. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_from_torchscript_source(
    tpt_model **out, const char *source, const tpt_torchscript_param *params, size_t n_params,
    const tpt_input_spec *inputs, size_t n_inputs);

/* Saves a TorchScript model's module, with its current (trained) values, for
 * torch.jit.load or tpt_model_from_torchscript. TPT_ERR_UNSUPPORTED for a
 * model made from a C tower function. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_save_torchscript(const tpt_model *model, const char *path);

/* The model's optimizer. The model takes its own reference. Before training. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_set_optimizer(tpt_model *model,
                                                          tpt_optimizer *optimizer);

/* What the model's optimizer keeps for trainable variable `variable`: its
 * slot `slot` as PyTorch's optimizers name them ("momentum_buffer",
 * "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "square_avg", "grad_avg",
 * "sum"), or "step" (a 0-d int64 tensor: the updates it took), as a new
 * tensor (a copy; tower 0's in the replicated strategy). TPT_ERR_NOT_FOUND
 * naming the slots there are when it has no such slot (none before the
 * first update) or no such variable. From the training thread (a callback)
 * or when no run runs. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_optimizer_slot(tpt_tensor **out, const tpt_model *model,
                                                           const char *variable, const char *slot);

/* ---- Writing a trainer: train ops and the GAN trainers ---------------------
 * tensorpack: "If your task is fundamentally different from single-cost
 * optimization, you will need to write a trainer." A train op is one
 * optimisation of the model (tensorpack's opt.minimize(cost, var_list)): a
 * scalar the tower function publishes, minimised over the trainable
 * variables under a scope, by an optimizer of its own. A run_step of your
 * own (tpt_trainer_set_run_step, after tpt_trainer_set_model) runs train
 * ops by name with tpt_trainer_run_train_ops; the GAN trainers are such
 * run_steps, made by tpt_trainer_set_gan; tpt_trainer_set_train_ops makes
 * train ops the default step. The simple trainer, the replicated and the
 * parameter-server strategies and distributed jobs run train ops (with
 * towers each op's gradients are averaged over the towers); the async
 * strategy does not. */

/* Initialise with TPT_TRAIN_OP_INIT. */
#define TPT_TRAIN_OP_VERSION 1
typedef struct tpt_train_op {
  uint32_t version;         /* TPT_TRAIN_OP_VERSION */
  const char *name;         /* required, unique in the model; copied */
  const char *cost;         /* the tower's one-element output to minimise (tpt_tower_set_output);
                               NULL (default): the tower's cost (tpt_tower_set_cost); copied */
  const char *scope;        /* the trainable variables whose names start with it ("discrim/");
                               NULL or "" (default): all of them; copied */
  tpt_optimizer *optimizer; /* its own (a reference is taken; not the model's, not another
                               op's); NULL (default): a copy of the model's optimizer, with
                               slots of its own, that follows the model's hyper-parameters
                               (so tpt_callback_scheduled_hyperparam on the model's moves it) */
} tpt_train_op;
#define TPT_TRAIN_OP_INIT { TPT_TRAIN_OP_VERSION, NULL, NULL, NULL, NULL }

/* Adds a train op to `model`, before training. Its variables are resolved
 * when training starts (an op with none fails then, naming it). Each op's
 * optimizer state is saved in checkpoints under the op's name and restored
 * on resume. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_add_train_op(tpt_model *model, const tpt_train_op *op);

/* How tpt_model_restore matches variables. Initialise with
 * TPT_RESTORE_OPTIONS_INIT. */
#define TPT_RESTORE_OPTIONS_VERSION 1
typedef struct tpt_restore_options {
  uint32_t version;                 /* TPT_RESTORE_OPTIONS_VERSION */
  int32_t ignore_missing;           /* nonzero: model variables the file lacks keep their values
                                       (default 0: an error listing them) */
  int32_t ignore_unexpected;        /* nonzero (default): tensors of the file that match no
                                       variable are skipped; 0: an error listing them */
  int32_t ignore_shape_mismatch;    /* nonzero: variables whose shapes differ are skipped
                                       (default 0: an error listing them) */
  const char *prefix;               /* NULL (default), or put in front of every variable name
                                       to find it in the file */
  const char *const *name_map;      /* n_name_map pairs: a variable's name, then its name in
                                       the file */
  size_t n_name_map;
} tpt_restore_options;
#define TPT_RESTORE_OPTIONS_INIT { TPT_RESTORE_OPTIONS_VERSION, 0, 1, 0, NULL, NULL, 0 }

/* Restores a model's variables by name (building it first when it is not
 * built yet, as tpt_model_infer does) from a tptrain checkpoint (or a
 * directory's latest), a state_dict saved with torch.save (PyTorch's dotted
 * names, "fc.weight", are read as "fc/weight"), or a TorchScript module's
 * parameters and buffers: tensorpack's SaverRestore. All or nothing: on any
 * error, which names the variables or the file, no variable changes.
 * `options` may be NULL (defaults). *n_restored (may be NULL) receives the
 * number of variables restored. Not while the model trains. */
TPT_API TPT_NODISCARD tpt_status *tpt_model_restore(size_t *n_restored, tpt_model *model, const char *path,
                                                    const tpt_restore_options *options);

TPT_END_DECL

#endif /* TPTRAIN_MODEL_H */
