/*
 * tptrain/input.h: tpt_input: input sources, what feeds the towers their
 * batches.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_INPUT_H
#define TPTRAIN_INPUT_H

#include "common.h"

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Inputs and the simple trainer                                             */
/*                                                                           */
/* An input gives the tower its batches: tensors in memory, a C feed        */
/* callback, or a dataflow (queued or fed). tpt_trainer_set_model            */
/* turns a trainer into tensorpack's SimpleTrainer: each run_step is one     */
/* hooked step that takes a batch, runs the tower function, back-propagates  */
/* the cost and applies the optimizer; the cost is the step output "cost"    */
/* and the scalar "cost" is put each step.                                   */
/* ------------------------------------------------------------------------ */

/* Batches of `batch_size` rows (dimension 0) from in-memory tensors, in
 * order or shuffled each epoch of the data (seeded); the last incomplete
 * batch is dropped; repeats forever. All tensors need the same number of
 * rows. The tensors are shared, not copied. Its size (batches per pass) is
 * the default steps_per_epoch. */
TPT_API TPT_NODISCARD tpt_status *tpt_input_from_tensors(tpt_input **out,
                                                         const tpt_tensor *const *tensors,
                                                         size_t n_tensors, int64_t batch_size,
                                                         int32_t shuffle, uint64_t seed);

/* The feed callback: fill batch[0..n_inputs) with new tensors (the library
 * takes them). Return NULL, TPT_STOP for the end of data (training stops
 * gracefully), or an error. */
typedef tpt_status *(*tpt_feed_fn)(tpt_tensor **batch, size_t n_inputs, void *user_data);

/* An input that calls `feed` on the training thread for every step
 * (tensorpack's FeedInput). The library owns user_data (destroy exactly
 * once, also on failure). */
TPT_API TPT_NODISCARD tpt_status *tpt_input_from_feed(tpt_input **out, tpt_feed_fn feed,
                                                      void *user_data,
                                                      void (*destroy)(void *user_data));

/* How a dataflow feeds the towers. */
typedef enum tpt_input_kind {
  TPT_INPUT_QUEUE = 1, /* QueueInput: a background thread fills a bounded queue */
  TPT_INPUT_FEED = 2,  /* FeedInput: the training thread reads the dataflow */
  TPT_INPUT_KIND_FORCE32 = 0x7fffffff
} tpt_input_kind;

/* Options of tpt_input_from_dataflow. Initialise with TPT_INPUT_OPTIONS_INIT. */
#define TPT_INPUT_OPTIONS_VERSION 1
typedef struct tpt_input_options {
  uint32_t version;    /* TPT_INPUT_OPTIONS_VERSION */
  tpt_input_kind kind; /* default TPT_INPUT_QUEUE */
  int64_t capacity;    /* queue capacity in batches; default 50 */
  int32_t repeat;      /* nonzero (default): pass after pass, forever; 0: the
                          end of the first pass ends training gracefully */
} tpt_input_options;
#define TPT_INPUT_OPTIONS_INIT { TPT_INPUT_OPTIONS_VERSION, TPT_INPUT_QUEUE, 50, 1 }

/* An input fed by a dataflow of batches (its components in signature order;
 * usually a tpt_dataflow_batch). The input keeps a reference to `df` and
 * resets it at SETUP. The queue's thread starts at BEFORE_TRAIN and is joined
 * at AFTER_TRAIN (also when training fails or stops); the queue input puts
 * the scalar "QueueInput/queue_size" (an EMA of the queue's fill, decay 0.5,
 * tensorpack's throughput diagnostic) every step. A dataflow error ends
 * training with its message. A pass that yields nothing ends training
 * gracefully (end of data). Its size (the dataflow's) is the default
 * steps_per_epoch. */
TPT_API TPT_NODISCARD tpt_status *tpt_input_from_dataflow(tpt_input **out, tpt_dataflow *df,
                                                          const tpt_input_options *options);

/* tensorpack's StagingInput: copies the next batch of `input` to `device`
 * (NULL: the tower's device) ahead of time, on a side stream with events on
 * CUDA; a plain pass-through on the CPU. TPT_ERR_UNSUPPORTED for a device
 * this LibTorch has no support for. Takes `input` (also on failure). */
TPT_API TPT_NODISCARD tpt_status *tpt_input_staging(tpt_input **out, tpt_input *input,
                                                    const char *device);

/* tensorpack's DummyConstantInput: the same zero tensors of the signature's
 * shapes (free dimensions become batch_size) every step, to benchmark the
 * model without data. */
TPT_API TPT_NODISCARD tpt_status *tpt_input_dummy(tpt_input **out, int64_t batch_size);

TPT_API void tpt_input_free(tpt_input *input);

TPT_END_DECL

#endif /* TPTRAIN_INPUT_H */
