/*
 * tptrain/inference.h: inference during training: tpt_inferencer and
 * tpt_inference_runner.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_INFERENCE_H
#define TPTRAIN_INFERENCE_H

#include "common.h"

TPT_BEGIN_DECL

/* ---- Inference during training -------------------------------------------
 * tensorpack's InferenceRunner and inferencers: at every TRIGGER (after each
 * epoch; wrap it in tpt_callback_periodic_trigger to run it every k steps or
 * epochs) the runner makes one pass of a finite dataflow of batches (in
 * signature order) through the model's inference tower, on the training
 * thread, and each inferencer turns the outputs it asked for into scalars,
 * put as monitors' scalars (stats.json, TensorBoard, MinSaver/MaxSaver,
 * StatMonitorParamSetter read them). */

/* tensorpack's ScalarStats: for each name in outputs, the mean over the pass
 * as the scalar "<prefix>_<name>" (prefix NULL: "validation"; "": just the
 * name). An output of one element per batch is weighted by the batch's rows
 * (tensorpack weighs batches equally: docs/trainer.md), one of one element per
 * row is averaged over rows. */
TPT_API TPT_NODISCARD tpt_status *tpt_inferencer_scalar_stats(tpt_inferencer **out,
                                                              const char *const *outputs,
                                                              size_t n_outputs, const char *prefix);

/* tensorpack's ClassificationError: `wrong_output` (NULL: "wrong", what
 * tpt_metric_wrong gives) holds one 0/1 value per row; the scalar
 * `summary_name` (NULL: "validation_error") is the wrong rows over all rows of
 * the pass, whatever the batch sizes. */
TPT_API TPT_NODISCARD tpt_status *tpt_inferencer_classification_error(tpt_inferencer **out,
                                                                      const char *wrong_output,
                                                                      const char *summary_name);

/* An inferencer written by the host (tensorpack's Inferencer). Initialise
 * with TPT_INFERENCER_DESC_INIT. In one pass: before, then on_outputs once per
 * batch with the outputs named in `outputs` (borrowed tensors, in that order;
 * `rows` is the batch's first dimension), then after, which puts its results
 * with tpt_trainer_put_scalar. Each returns NULL or an error that fails
 * training (its message keeps the batch's number). */
#define TPT_INFERENCER_DESC_VERSION 1
typedef struct tpt_inferencer_desc {
  uint32_t version;             /* TPT_INFERENCER_DESC_VERSION */
  const char *name;             /* for errors; copied; NULL: "inferencer" */
  const char *const *outputs;   /* the tower's outputs it needs; copied */
  size_t n_outputs;
  tpt_status *(*before)(void *user_data);                       /* may be NULL */
  tpt_status *(*on_outputs)(const tpt_tensor *const *outputs, size_t n_outputs, int64_t rows,
                            void *user_data);                   /* required */
  tpt_status *(*after)(tpt_trainer *trainer, void *user_data);  /* may be NULL */
  void *user_data;
  void (*destroy)(void *user_data); /* called exactly once; may be NULL */
} tpt_inferencer_desc;
#define TPT_INFERENCER_DESC_INIT { TPT_INFERENCER_DESC_VERSION, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL }

/* Makes an inferencer from a description. The library owns desc->user_data
 * from this call on (destroy exactly once, also when this call fails). */
TPT_API TPT_NODISCARD tpt_status *tpt_inferencer_new(tpt_inferencer **out,
                                                     const tpt_inferencer_desc *desc);

/* Releases an inferencer that was not given to a runner. NULL is a no-op. */
TPT_API void tpt_inferencer_free(tpt_inferencer *inferencer);

/* An InferenceRunner (chief only) of `model` over `df` with the given
 * inferencers, which it takes (also on failure). Keeps references to model
 * and df. */
TPT_API TPT_NODISCARD tpt_status *tpt_inference_runner(tpt_callback **out, tpt_model *model,
                                                       tpt_dataflow *df,
                                                       tpt_inferencer *const *inferencers,
                                                       size_t n_inferencers);

/* tensorpack's DataParallelInferenceRunner: tpt_inference_runner with
 * n_towers (1 to 256) CPU inference towers ("InferenceTower0", ...) that
 * each infer a batch at once, on threads of their own (started in
 * BEFORE_TRAIN, joined in AFTER_TRAIN) with a share of the intra-op threads;
 * the inferencers get the batches in the dataflow's order, so the results
 * are the single runner's. The tower function must be safe to call from
 * several threads at once. */
TPT_API TPT_NODISCARD tpt_status *tpt_inference_runner_data_parallel(tpt_callback **out, tpt_model *model,
                                                                     tpt_dataflow *df,
                                                                     tpt_inferencer *const *inferencers,
                                                                     size_t n_inferencers, int32_t n_towers);

/* The short form: an InferenceRunner with one ScalarStats of `outputs`
 * (scalars "validation_<name>"). */
TPT_API TPT_NODISCARD tpt_status *tpt_inference_runner_new(tpt_callback **out, tpt_model *model,
                                                           tpt_dataflow *df,
                                                           const char *const *outputs,
                                                           size_t n_outputs);

/* ---- Predictors ------------------------------------------------------------
 * tensorpack's OfflinePredictor and its PredictConfig(input_names,
 * output_names, session_init): a model's tower function run as an inference
 * tower on some of its inputs, by name, returning some of its outputs, by
 * name. The inputs a predictor is not given (the labels) reach the tower
 * function as zeros of the batch's size, so a tower function that computes
 * its loss from them runs unchanged (the loss is computed and dropped). */

/* Options of tpt_predictor_new. Initialise with TPT_PREDICTOR_OPTIONS_INIT. */
#define TPT_PREDICTOR_OPTIONS_VERSION 1
typedef struct tpt_predictor_options {
  uint32_t version;                /* TPT_PREDICTOR_OPTIONS_VERSION */
  const char *const *input_names;  /* the inputs tpt_predictor_run takes, in its order; NULL
                                      (default, with n_input_names 0): every input of the
                                      signature, in its order */
  size_t n_input_names;
  const char *checkpoint;          /* NULL (default): the model's variables as they are; else
                                      a checkpoint file or directory (its latest) or a
                                      state_dict, restored now as tpt_model_restore does
                                      (building the model first), e.g. a MaxSaver's file */
} tpt_predictor_options;
#define TPT_PREDICTOR_OPTIONS_INIT { TPT_PREDICTOR_OPTIONS_VERSION, NULL, 0, NULL }

/* Makes a predictor of `model` returning the outputs `output_names` (at
 * least one; "cost" is the cost). Builds the model when it is not built.
 * Each input left out must have a known shape past its first (batch)
 * dimension: TPT_ERR_INVALID_ARGUMENT names one that has not, as it names
 * an input name the model lacks (with the ones it has); an output the tower
 * function does not publish fails tpt_predictor_run (TPT_ERR_NOT_FOUND,
 * naming it). The predictor keeps a reference to the model; the caller
 * owns *out. */
TPT_API TPT_NODISCARD tpt_status *tpt_predictor_new(tpt_predictor **out, tpt_model *model,
                                                    const char *const *output_names, size_t n_outputs,
                                                    const tpt_predictor_options *options);

/* Runs the predictor on `inputs` (n_inputs of them, in the predictor's input
 * order, with the same first dimension) and stores its outputs, in the order
 * of output_names, in outputs[0..n_outputs), which the caller owns. Any
 * number of threads may run one predictor at once (the tower function must
 * allow that, as tptrain's layers do), but not while a trainer trains the
 * model. */
TPT_API TPT_NODISCARD tpt_status *tpt_predictor_run(tpt_tensor **outputs, const tpt_predictor *predictor,
                                                    const tpt_tensor *const *inputs, size_t n_inputs);

/* Releases a predictor (not its model). NULL is a no-op. */
TPT_API void tpt_predictor_free(tpt_predictor *predictor);

TPT_END_DECL

#endif /* TPTRAIN_INFERENCE_H */
