/*
 * tptrain/launch.h: tensorpack's TrainConfig and launch_train_with_config.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_LAUNCH_H
#define TPTRAIN_LAUNCH_H

#include "trainer.h"
#include "input.h"
#include "strategy.h"

TPT_BEGIN_DECL

/* ---- TrainConfig and launch ------------------------------------------------
 * tensorpack's high-level interface: describe the training in a config and
 * launch it with the simple trainer. */

/* An initializer / restore hook (tensorpack's session_init): runs once on the
 * chief, after the model's build call and before BEFORE_TRAIN, e.g. to load
 * weights with tpt_model_set_variable. `model` is lent for the call (freeing
 * it is a no-op). Same return convention as callbacks. */
typedef tpt_status *(*tpt_init_fn)(tpt_model *model, void *user_data);

/* Initialise with TPT_TRAIN_CONFIG_INIT. */
#define TPT_TRAIN_CONFIG_VERSION 5
typedef struct tpt_train_config {
  uint32_t version;                      /* TPT_TRAIN_CONFIG_VERSION */
  const tpt_trainer_options *options;    /* NULL: defaults (steps_per_epoch from the input) */
  tpt_model *model;                      /* required; the trainer takes a reference */
  tpt_input *input;                      /* this or dataflow; taken */
  tpt_callback *const *callbacks;        /* taken; registered as user callbacks, in order */
  size_t n_callbacks;
  tpt_callback *const *monitors;         /* taken; registered after the default monitors */
  size_t n_monitors;
  tpt_init_fn init;                      /* NULL: none */
  void *init_user_data;                  /* borrowed: must outlive the trainer */
  /* version 2: */
  tpt_dataflow *dataflow;                /* this or input: batches in signature order,
                                            wrapped in a queue input (tensorpack's automatic
                                            QueueInput); the trainer takes a reference */
  /* version 3: */
  const tpt_towers_options *towers;      /* NULL: the simple trainer (one tower); else the
                                            strategy and towers (tpt_trainer_set_towers) */
  /* version 4: */
  const tpt_distributed_options *distributed; /* NULL: one process; else this process is one
                                            rank of a job (tpt_trainer_set_distributed) */
  /* version 5: */
  const tpt_input_options *input_options; /* with dataflow: the input made from it (its kind,
                                            queue capacity in batches, repeat), as
                                            tpt_input_from_dataflow takes them; NULL: the
                                            defaults (a queue of 50 that repeats). An error
                                            with input */
} tpt_train_config;
#define TPT_TRAIN_CONFIG_INIT \
  { TPT_TRAIN_CONFIG_VERSION, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL }

/* tensorpack's launch_train_with_config: tpt_trainer_from_config, run, free.
 * Returns what the run returned. */
TPT_API TPT_NODISCARD tpt_status *tpt_launch_train(const tpt_train_config *config);

TPT_END_DECL

#endif /* TPTRAIN_LAUNCH_H */
