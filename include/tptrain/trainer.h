/*
 * tptrain/trainer.h: tpt_trainer: the epoch/step loop, its options,
 * run_step, step outputs, monitors, and how a trainer gets its model
 * (simple, towers, distributed, train ops, GAN), resume and checkpoints.
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_TRAINER_H
#define TPTRAIN_TRAINER_H

#include "strategy.h"
#include "tensor.h"
#include "callback.h"

TPT_BEGIN_DECL

/* tpt_train_config is defined in tptrain/launch.h, which includes this header. */
struct tpt_train_config;

/* ------------------------------------------------------------------------ */
/* Trainer: the epoch/step loop                                              */
/*                                                                           */
/* "Training is running something again and again." A trainer runs          */
/*   for epoch_num in [starting_epoch, max_epoch]:          (inclusive)      */
/*     for local_step in [0, steps_per_epoch): run_step()                    */
/* with callbacks around it. run_step may do anything; each time it calls    */
/* tpt_trainer_hooked_step, the callbacks' BEFORE_RUN / AFTER_RUN events run */
/* around the step and global_step advances by one.                          */
/*                                                                           */
/* Counters (tensorpack's): epoch_num is starting_epoch - 1 before training  */
/* and the running epoch during it (also in TRIGGER_EPOCH); local_step is    */
/* the 0-based index inside the epoch (-1 before the first step);            */
/* global_step counts hooked steps, not run_steps, and is already advanced   */
/* when the AFTER_RUN of user callbacks and TRIGGER_STEP run.                */
/*                                                                           */
/* Threads: a trainer is used from one thread at a time. tpt_trainer_run     */
/* runs on the caller's thread and every callback fires on that thread;      */
/* only tpt_trainer_request_stop may be called from any thread.              */
/* ------------------------------------------------------------------------ */

/* What to do when the log directory exists and is not empty. */
typedef enum tpt_logdir_action {
  TPT_LOGDIR_REFUSE = 0, /* fail with TPT_ERR_IO naming the other actions (default) */
  TPT_LOGDIR_KEEP = 1,   /* use it as it is (resume: stats.json is appended to) */
  TPT_LOGDIR_DELETE = 2, /* delete its contents first */
  TPT_LOGDIR_BACKUP = 3, /* rename it to <dir><MMDD-HHMMSS>, start empty */
  TPT_LOGDIR_NEW = 4,    /* leave it, use <dir><MMDD-HHMMSS> instead */
  TPT_LOGDIR_ASK = 5,    /* ask on the terminal (k/d/b/n/q); REFUSE without one */
  TPT_LOGDIR_FORCE32 = 0x7fffffff
} tpt_logdir_action;

/* How progress is shown while an epoch runs. */
typedef enum tpt_progress {
  TPT_PROGRESS_AUTO = 0, /* a bar on a terminal (stderr), else one line per epoch */
  TPT_PROGRESS_BAR = 1,  /* always a bar on stderr */
  TPT_PROGRESS_LINES = 2, /* one plain line per epoch, in the log */
  TPT_PROGRESS_OFF = 3,
  TPT_PROGRESS_FORCE32 = 0x7fffffff
} tpt_progress;

/* The arithmetic of the tower functions' calls (mixed precision, as
 * PyTorch's autocast): variables, the gradients the optimizer applies and its
 * state stay float32 (master weights) in every mode. */
typedef enum tpt_precision {
  TPT_PRECISION_FP32 = 0,       /* everything float32 (default) */
  TPT_PRECISION_BF16_MIXED = 1, /* autocast to bfloat16: matmuls, convolutions and linear
                                   layers in bfloat16; reductions, losses, softmax and
                                   normalisations in float32 (LibTorch's per-operator
                                   policy); CPU and CUDA towers */
  TPT_PRECISION_FP16_MIXED = 2, /* autocast to float16 with dynamic loss scaling
                                   (tpt_loss_scaling); CUDA towers only */
  TPT_PRECISION_FORCE32 = 0x7fffffff
} tpt_precision;

/* Whether gradients are computed from a scaled cost (tpt_loss_scaling.mode). */
typedef enum tpt_loss_scaling_mode {
  TPT_LOSS_SCALING_AUTO = 0, /* on with TPT_PRECISION_FP16_MIXED, off otherwise (default) */
  TPT_LOSS_SCALING_ON = 1,   /* on in every precision (float32 and bfloat16 need none) */
  TPT_LOSS_SCALING_OFF = 2,  /* off, also in fp16-mixed (gradients may underflow) */
  TPT_LOSS_SCALING_FORCE32 = 0x7fffffff
} tpt_loss_scaling_mode;

/* Dynamic loss scaling, with the rules and defaults of PyTorch's
 * torch.amp.GradScaler: every step's cost is multiplied by the scale before
 * the backward pass and the gradients are divided by it before the update
 * (before gradient clipping and the other processors). An update whose
 * gradients are not all finite is skipped (the variables and the optimizer's
 * state do not change; the global step goes on) and the scale is multiplied
 * by backoff_factor; after growth_interval updates in a row without one it is
 * multiplied by growth_factor. Towers and the processes of a job see the same
 * reduced gradients and skip together; the async strategy skips every tower's
 * update of a step when one overflowed; each train op skips on its own
 * gradients. The scale is in checkpoints, the step output "loss_scale" and
 * the scalars "loss_scale" and "skipped_updates" (per epoch). */
typedef struct tpt_loss_scaling {
  tpt_loss_scaling_mode mode; /* default TPT_LOSS_SCALING_AUTO */
  double init_scale;          /* > 0 and finite; default 65536 (2^16) */
  double growth_factor;       /* > 1; default 2 */
  double backoff_factor;      /* in (0, 1); default 0.5 */
  int64_t growth_interval;    /* >= 1; default 2000 */
} tpt_loss_scaling;
#define TPT_LOSS_SCALING_INIT { TPT_LOSS_SCALING_AUTO, 65536.0, 2.0, 0.5, 2000 }

/* Options of a trainer. Initialise with TPT_TRAINER_OPTIONS_INIT. */
#define TPT_TRAINER_OPTIONS_VERSION 7
typedef struct tpt_trainer_options {
  uint32_t version;            /* TPT_TRAINER_OPTIONS_VERSION */
  int32_t is_chief;            /* nonzero (default): chief-only callbacks are kept */
  int64_t starting_epoch;      /* first epoch number, >= 1 (default 1) */
  int64_t max_epoch;           /* last epoch number, inclusive (default 99999999) */
  int64_t steps_per_epoch;     /* >= 0; 0 runs the callbacks only; -1: not set (default) */
  const char *logdir;          /* NULL (default): no log directory, stats.json or log.log */
  tpt_logdir_action logdir_action; /* default TPT_LOGDIR_REFUSE */
  tpt_progress progress;       /* default TPT_PROGRESS_AUTO */
  int32_t console;             /* nonzero (default): log lines go to stdout too */
  int32_t default_callbacks;   /* nonzero (default): progress bar and estimated time left */
  int32_t default_monitors;    /* nonzero (default): stats.json writer (with a logdir) and
                                  the per-epoch scalar printer */
  /* version 2: */
  int64_t scalar_history;      /* entries of each scalar kept for tpt_trainer_scalar_history
                                  (the latest ones, so a long run's memory stays flat);
                                  default 1000; 0 keeps all */
  int64_t summary_period;      /* the cost and the tower's one-element outputs are moving
                                  averages (tensorpack's add_moving_summary, decay 0.95)
                                  that reach the monitors in each epoch's last step, and
                                  every summary_period steps when > 0; default 0 */
  /* version 3: */
  int32_t auto_resume;         /* nonzero: when logdir holds a checkpoint index (a ModelSaver's),
                                  the run resumes exactly from its latest checkpoint
                                  (tpt_trainer_resume); the directory is the run's and kept
                                  whatever logdir_action says, also when it holds no
                                  checkpoint yet (a run killed before its first one: the run
                                  starts from the beginning); tensorpack's
                                  AutoResumeTrainConfig. A run that ended stays ended (the
                                  checkpoint records how it ended, see "How a run ends" in
                                  docs/trainer.md): after a finished run nothing is left
                                  unless max_epoch was raised; after a run a callback or
                                  run_step stopped (EarlyStopping) tpt_trainer_run trains
                                  nothing and returns NULL with that stop's reason, unless
                                  continue_stopped; an interrupted run (a stop request, a
                                  signal, a failure) goes on. Default 0 */
  /* version 4: */
  int32_t stop_on_signals;     /* 1: while tpt_trainer_run runs, SIGTERM and SIGINT stop training
                                  gracefully at the next step boundary (stop reason "SIGTERM" /
                                  "SIGINT"), a ModelSaver saves a checkpoint there, and a second
                                  signal ends the process at once (the dispositions from before
                                  the run are put back at the first signal and at the run's end).
                                  In a distributed job every rank stops at the same step (one
                                  small all-reduce per step; every rank must have the same
                                  setting). 0 (default): on when the environment has
                                  TPTRAIN_STOP_ON_SIGNALS=1, which tools/tptrain-run sets; -1: never.
                                  A host with its own handlers keeps -1 and calls
                                  tpt_trainer_signal_stop from them */
  /* version 5: */
  tpt_precision precision;     /* the tower functions' arithmetic in training and in the
                                  inference runners (default TPT_PRECISION_FP32) */
  /* version 6: */
  tpt_loss_scaling loss_scaling; /* default TPT_LOSS_SCALING_INIT: on for fp16-mixed */
  /* version 7: */
  int32_t continue_stopped;    /* nonzero: auto_resume trains on after a run that a callback or
                                  run_step stopped (its checkpoint's run_end is "stopped");
                                  default 0: such a run stays stopped */
} tpt_trainer_options;
#define TPT_TRAINER_OPTIONS_INIT \
  { TPT_TRAINER_OPTIONS_VERSION, 1, 1, 99999999, -1, NULL, TPT_LOGDIR_REFUSE, \
    TPT_PROGRESS_AUTO, 1, 1, 1, 1000, 0, 0, 0, TPT_PRECISION_FP32, TPT_LOSS_SCALING_INIT, 0 }

/* Creates a trainer. `options` may be NULL (defaults; steps_per_epoch must then
 * be given before run through a later section's input). The strings in
 * options are copied. The caller owns *out. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_new(tpt_trainer **out,
                                                  const tpt_trainer_options *options);

/* Releases a trainer, its callbacks (each destroy runs once) and its run_step.
 * NULL is a no-op, and so is the trainer of tpt_launch_train (the library's).
 * While tpt_trainer_run runs (a free from one of the run's own callbacks,
 * run_step, step, feed or predicate) the free is deferred: the run stops at
 * the next step boundary as on tpt_trainer_request_stop (stop reason
 * "tpt_trainer_free"; after_train runs, the handle stays usable by the run's
 * callbacks) and tpt_trainer_run releases the trainer as it returns. */
TPT_API void tpt_trainer_free(tpt_trainer *trainer);

/* The body of the loop: called steps_per_epoch times per epoch. Return NULL to
 * go on, tpt_status_new(TPT_STOP, reason) to end training gracefully, or any
 * other status to fail it (tpt_trainer_run returns that code and message). The
 * library takes ownership of the returned status. */
typedef tpt_status *(*tpt_run_step_fn)(tpt_trainer *trainer, void *user_data);

/* Sets run_step, replacing an earlier one (whose destroy then runs). The
 * library owns user_data from this call on and calls destroy(user_data)
 * exactly once, when the trainer is freed or run_step is replaced, and at
 * once if this call fails. destroy may be NULL. Before run only. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_run_step(tpt_trainer *trainer,
                                                           tpt_run_step_fn run_step,
                                                           void *user_data,
                                                           void (*destroy)(void *user_data));

/* The work of one hooked step, run between the callbacks' BEFORE_RUN and
 * AFTER_RUN. It may publish named outputs (tpt_trainer_set_output*). Same
 * return convention as tpt_run_step_fn. */
typedef tpt_status *(*tpt_step_fn)(tpt_trainer *trainer, void *user_data);

/* Runs one hooked step from inside run_step: BEFORE_RUN of every callback
 * that asked for it, then step(trainer, user_data) (step may be NULL: hooks
 * only), then AFTER_RUN; global_step advances by one. Returns what the step or
 * a callback returned (TPT_STOP included): run_step should return it as it is.
 * Only during run_step, on the training thread, and not nested: from a step
 * function or a BEFORE_RUN / AFTER_RUN callback it is TPT_ERR_STATE. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_hooked_step(tpt_trainer *trainer, tpt_step_fn step,
                                                          void *user_data);

/* Runs the training: callbacks SETUP, BEFORE_TRAIN, the epochs, and always
 * AFTER_TRAIN for every callback. Returns NULL when training finished or was
 * stopped (see tpt_trainer_stop_reason), or the error that ended it: a
 * callback's or run_step's status keeps its code and message. A trainer runs
 * once: from inside its own run this is TPT_ERR_STATE. On the caller's
 * thread; callbacks fire on it. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_run(tpt_trainer *trainer);

/* Asks the trainer to stop before its next step (a graceful stop: AFTER_TRAIN
 * runs, run returns NULL). Safe from any thread and from a signal handler. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_request_stop(tpt_trainer *trainer);

/* The same stop with a reason of the caller's (copied, not empty): what
 * tpt_trainer_stop_reason and the log's "Training was stopped by:" give, e.g.
 * "context canceled" for a host's cancelled context. Any thread, not a
 * signal handler; the first stop request of a run wins. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_request_stop_because(tpt_trainer *trainer, const char *reason);

/* The same stop for the signal `signo`, as stop_on_signals makes it: the stop
 * reason is the signal's name ("SIGTERM") and a ModelSaver saves a checkpoint
 * at the stop. For hosts with signal handlers of their own: call it from the
 * handler (async-signal-safe; a NULL or dead handle is ignored). Single
 * process only: in a distributed job use stop_on_signals, which makes every
 * rank stop at the same step. */
TPT_API void tpt_trainer_signal_stop(tpt_trainer *trainer, int signo);

/* Why the last run stopped early: the message of the TPT_STOP status, or
 * "tpt_trainer_request_stop" for a request. *out is NULL when training ran to
 * max_epoch or failed. The string lives as long as the trainer. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_stop_reason(const char **out,
                                                          const tpt_trainer *trainer);

/* The best checkpoint the trainer's MinSaver or MaxSaver of `stat` has kept
 * (tpt_callback_min_saver / _max_saver; PyTorch Lightning's
 * best_model_path): its path, or *out NULL before one was kept; after a
 * resume, the earlier run's. TPT_ERR_NOT_FOUND, naming the stats of the best
 * savers it has, when it has none of `stat`. The string lives as long as the
 * trainer. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_best_checkpoint(const char **out, const tpt_trainer *trainer,
                                                              const char *stat);

/* The loop counters (see above). Readable at any time from the training thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_epoch_num(int64_t *out, const tpt_trainer *trainer);
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_local_step(int64_t *out, const tpt_trainer *trainer);
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_global_step(int64_t *out, const tpt_trainer *trainer);

/* The steps per epoch the loop runs: the options', or the input's size (by
 * the towers) that tpt_trainer_set_model and the like filled in; -1 while
 * neither has set it. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_steps_per_epoch(int64_t *out, const tpt_trainer *trainer);

/* The checkpoint the run resumes from: the path given to tpt_trainer_resume
 * (a directory resolved to its latest checkpoint) or the one auto_resume
 * found (known once tpt_trainer_run has begun); "rank 0's checkpoint" on
 * the other ranks of a distributed job. *out is NULL when the run starts
 * afresh. The string lives as long as the trainer. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_resumed_from(const char **out, const tpt_trainer *trainer);

/* Sets global_step, e.g. after restoring a checkpoint. Before run, or from a
 * SETUP or BEFORE_TRAIN callback (the loop reads it again after BEFORE_TRAIN). */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_global_step(tpt_trainer *trainer, int64_t step);

/* The log directory in use: the one given, or the new one TPT_LOGDIR_NEW
 * chose. *out is NULL without a log directory, or before run set it up.
 * The string lives as long as the trainer. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_logdir(const char **out, const tpt_trainer *trainer);

/* Writes a line to the trainer's log (stdout when console is on, and
 * log.log in the log directory), prefixed like the trainer's own lines. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_log(tpt_trainer *trainer, const char *message);

/* ---- Step outputs --------------------------------------------------------
 * A hooked step may publish named outputs; AFTER_RUN callbacks (and anything
 * until the next hooked step begins) read them. Names are copied. */

/* Publishes a scalar output. Inside a hooked step only. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_output_scalar(tpt_trainer *trainer,
                                                                const char *name, double value);

/* Publishes a tensor output; the trainer keeps its own reference (the caller
 * still owns and frees `tensor`). Inside a hooked step only. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_output(tpt_trainer *trainer, const char *name,
                                                         const tpt_tensor *tensor);

/* Reads a scalar output of the latest hooked step (a tensor output of one
 * element is converted). TPT_ERR_NOT_FOUND if the step did not publish it. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_output_scalar(double *out,
                                                            const tpt_trainer *trainer,
                                                            const char *name);

/* A new handle on a tensor output of the latest hooked step (a scalar output
 * comes back as a 0-d f64 tensor). The caller owns *out. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_output(tpt_tensor **out, const tpt_trainer *trainer,
                                                     const char *name);

/* Registers a user callback. Takes ownership of `callback` (also on failure).
 * A chief-only callback on a non-chief trainer is dropped (and freed), with a
 * log line. Before run only: the list is frozen once run starts. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_add_callback(tpt_trainer *trainer,
                                                           tpt_callback *callback);

/* ---- Monitors -------------------------------------------------------------
 * Monitors are callbacks registered last that also receive RECORD events.
 * Built in (default_monitors): the TensorBoard writer (with a log directory,
 * see tpt_monitor_tensorboard), the stats.json writer (with a log directory:
 * one entry per epoch, and one per step where scalars were put mid-epoch,
 * each with epoch_num and global_step; rewritten atomically after each epoch
 * and at most every 5 s mid-epoch; appended to when
 * starting_epoch continues its last epoch_num, else the old file is kept as
 * stats.json.<MMDD-HHMMSS>) and the scalar printer (the latest value of each
 * scalar, sorted by name, after each epoch). NaN and infinities are written to
 * stats.json as null. */

/* Registers a monitor (a callback that asked for TPT_EVENT_RECORD, and any
 * other events it wants). Takes ownership of `monitor` (also on failure).
 * Before run only. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_add_monitor(tpt_trainer *trainer,
                                                          tpt_callback *monitor);

/* Puts a scalar: recorded in the history with the current global_step and
 * brought to every monitor at once. From run_step, steps and callbacks, on
 * the training thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_put_scalar(tpt_trainer *trainer, const char *name,
                                                         double value);

/* tensorpack's put_image: `image` is H x W, H x W x C or N x H x W x C with
 * C = 1 (grey), 3 (RGB) or 4 (RGBA), of dtype uint8, or floating point in
 * [0, 255] (rounded and clamped; NaN or infinite values are an error). Brought to every monitor at once as a
 * TPT_RECORD_IMAGE record of uint8 N x H x W x C; not kept in the history,
 * not in stats.json. Same threads and times as tpt_trainer_put_scalar. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_put_image(tpt_trainer *trainer, const char *name,
                                                        const tpt_tensor *image);

/* The latest value of a scalar and the global_step it was put at (step_out
 * may be NULL). TPT_ERR_NOT_FOUND if it was never put. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_scalar_latest(double *value_out, int64_t *step_out,
                                                            const tpt_trainer *trainer,
                                                            const char *name);

/* The history of a scalar: *count_out receives the number of entries; the
 * first min(count, capacity) (global_step, value) pairs are copied to steps
 * and values (either may be NULL). Capacity 0 queries the count.
 * TPT_ERR_NOT_FOUND if it was never put. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_scalar_history(size_t *count_out, int64_t *steps,
                                                             double *values, size_t capacity,
                                                             const tpt_trainer *trainer,
                                                             const char *name);

/* Makes `trainer` a simple (single-tower) trainer of `model` fed by
 * `input`. Takes a reference to the model and ownership of `input` (also on
 * failure). Replaces run_step. If the trainer's steps_per_epoch is not set,
 * the input's size is used. Batches are checked against the signature
 * (dtype, rank, fixed dimensions). Before run. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_model(tpt_trainer *trainer, tpt_model *model,
                                                        tpt_input *input);

/* tpt_trainer_set_model with towers: makes `trainer` train `model` with the
 * strategy and towers of `options` (NULL: the defaults, 2 replicated CPU
 * towers), fed by `input`, which it takes (also on failure). Before run. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_towers(tpt_trainer *trainer, tpt_model *model,
                                                         tpt_input *input,
                                                         const tpt_towers_options *options);

/* Joins the job (the rendezvous: blocks until every rank has joined, at most
 * the timeout) and makes `trainer` one rank of it (NULL options: the
 * defaults, all from the environment). Call it before tpt_trainer_set_model
 * or tpt_trainer_set_towers, which then train across the ranks (the simple
 * trainer becomes one replicated tower per rank; the async strategy cannot
 * be distributed). Errors: TPT_ERR_INVALID_ARGUMENT naming a missing or bad
 * variable or option, TPT_ERR_BACKEND when the rendezvous fails (naming the
 * address and the rank), TPT_ERR_STATE after a model was set or a second
 * time, TPT_ERR_UNSUPPORTED in a build without c10d's Gloo. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_distributed(tpt_trainer *trainer,
                                                              const tpt_distributed_options *options);

/* This process's rank and the job's size: 0 and 1 for a trainer that is not
 * distributed. Any time. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_rank(int32_t *rank, int32_t *world_size,
                                                   const tpt_trainer *trainer);

/* From run_step: one forward pass of the tower function on the input's next
 * batch (with towers: one per tower, each on a batch of its own), then the
 * train ops names[0..n), in order: each op's gradients, all from that one
 * pass (as TensorFlow runs several minimize ops; with towers averaged over
 * the towers, and over the ranks of a job), then each op's update in
 * order. hooked (nonzero): as one hooked step
 * (tensorpack's hooked_sess.run: BEFORE_RUN / AFTER_RUN callbacks,
 * global_step + 1, the tower's outputs published and their moving
 * summaries); 0: a raw run (no callbacks, no counter, no outputs). Returns
 * what a hooked step returns: run_step should return it as it is.
 * TPT_ERR_INVALID_ARGUMENT naming an unknown op; TPT_ERR_STATE outside
 * run_step or without a model set; TPT_ERR_UNSUPPORTED with async towers. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_run_train_ops(tpt_trainer *trainer,
                                                            const char *const *names, size_t n,
                                                            int32_t hooked);

/* Replaces the default step (tensorpack's trainer.train_op) without a
 * run_step of your own: every run_step is then one hooked run of the train
 * ops names[0..n) (tpt_trainer_run_train_ops with hooked = 1). After
 * tpt_trainer_set_model or tpt_trainer_set_towers (or a config), before
 * run; an unknown op is named, and async towers are TPT_ERR_UNSUPPORTED.
 * Like tpt_trainer_set_run_step it replaces the trainer's run_step: the
 * last of the two calls (or tpt_trainer_set_gan) wins. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_train_ops(tpt_trainer *trainer,
                                                            const char *const *names, size_t n);

/* tensorpack's GANTrainer / SeparateGANTrainer / MultiGPUGANTrainer
 * (`options` NULL: the defaults, a GANTrainer): tpt_trainer_set_model (or
 * tpt_trainer_set_towers with options->towers), then the GAN's run_step.
 * When the model lacks the train ops g_op and d_op they are made as
 * tensorpack's GANModelDesc: the tower's outputs "g_loss" over the variables
 * under "gen/" and "d_loss" over those under "discrim/", each with a copy of
 * the model's optimizer. Takes `input` (also on failure). Before run. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_set_gan(tpt_trainer *trainer, tpt_model *model,
                                                      tpt_input *input,
                                                      const tpt_gan_options *options);

/* The model of a trainer (set by tpt_trainer_set_model or a config), and
 * that model's optimizer, as new handles the caller frees: a callback can
 * reach them without user_data, e.g. to set the learning rate
 * (tpt_optimizer_set). TPT_ERR_NOT_FOUND when there is none. Any time. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_model(tpt_model **out, const tpt_trainer *trainer);
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_optimizer(tpt_optimizer **out,
                                                        const tpt_trainer *trainer);

/* Makes a simple trainer from a config without running it (add callbacks,
 * then tpt_trainer_run). The input and every callback and monitor are taken,
 * also on failure. steps_per_epoch comes from the options or else from the
 * input's size; with neither, this fails (TPT_ERR_INVALID_ARGUMENT naming
 * options->steps_per_epoch) rather than the later run. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_from_config(tpt_trainer **out,
                                                          const struct tpt_train_config *config);

/* Before tpt_trainer_run: the run goes on exactly from the checkpoint at
 * `path` (a checkpoint file, or a directory whose index names its latest).
 * The file is read and every field checked now, never trusted (TPT_ERR_IO,
 * TPT_ERR_INVALID_ARGUMENT naming the file and field; see
 * tpt_set_checkpoint_read_limit); what only the run knows (the model's
 * variables, the input's and the callbacks' states, steps_per_epoch) is
 * checked when the run starts, before anything is restored: a mismatch
 * fails the run naming it, and changes nothing. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_resume(tpt_trainer *trainer, const char *path);

/* Writes the trainer's checkpoint to `path` now, atomically. From a
 * callback between steps (trigger_step, the epoch events, before_train,
 * after_train); TPT_ERR_STATE inside run_step. */
TPT_API TPT_NODISCARD tpt_status *tpt_trainer_save_checkpoint(tpt_trainer *trainer, const char *path);

TPT_END_DECL

#endif /* TPTRAIN_TRAINER_H */
