/*
 * tptrain/callback.h: tpt_callback: the callback type, scheduling wrappers,
 * and tensorpack's callback catalogue (hyper-parameter schedules, savers,
 * early stopping, TensorBoard, ...).
 *
 * Part of the C ABI; include <tptrain.h>, which includes every module.
 */
#ifndef TPTRAIN_CALLBACK_H
#define TPTRAIN_CALLBACK_H

#include "tensor.h"

TPT_BEGIN_DECL

/* ------------------------------------------------------------------------ */
/* Callbacks                                                                 */
/*                                                                           */
/* One callback type for everything: a function that receives an event from */
/* the set it asked for. Events and their order in one run:                  */
/*   SETUP, BEFORE_TRAIN,                                                    */
/*   per epoch: BEFORE_EPOCH, per step: [run_step: per hooked step           */
/*     BEFORE_RUN, step, AFTER_RUN], TRIGGER_STEP; then AFTER_EPOCH,         */
/*     TRIGGER_EPOCH,                                                        */
/*   AFTER_TRAIN (always, for every callback, whatever happened before).     */
/* TRIGGER is "do your thing": a callback that asks for TRIGGER but not      */
/* TRIGGER_EPOCH gets TRIGGER after each epoch; scheduling wrappers call it  */
/* at other times. RECORD is for monitors (tpt_trainer_add_monitor): it      */
/* brings each scalar put with tpt_trainer_put_scalar.                       */
/*                                                                           */
/* Each event is delivered to the callbacks in registration order:           */
/* input-source callbacks, trainer callbacks, the step counter, the user's   */
/* callbacks, the default callbacks, then the monitors. A callback that did  */
/* not ask for an event costs nothing for it (per-step events included).     */
/* ------------------------------------------------------------------------ */

typedef enum tpt_event {
  TPT_EVENT_SETUP = 1 << 0,
  TPT_EVENT_BEFORE_TRAIN = 1 << 1,
  TPT_EVENT_BEFORE_EPOCH = 1 << 2,
  TPT_EVENT_BEFORE_RUN = 1 << 3,
  TPT_EVENT_AFTER_RUN = 1 << 4,
  TPT_EVENT_TRIGGER_STEP = 1 << 5,
  TPT_EVENT_AFTER_EPOCH = 1 << 6,
  TPT_EVENT_TRIGGER_EPOCH = 1 << 7,
  TPT_EVENT_TRIGGER = 1 << 8,
  TPT_EVENT_AFTER_TRAIN = 1 << 9,
  TPT_EVENT_RECORD = 1 << 10,
  TPT_EVENT_ALL = (1 << 11) - 1,
  TPT_EVENT_FORCE32 = 0x7fffffff
} tpt_event;

/* Kinds of monitor records. Monitors ignore kinds they do not know
 * (histograms and text will be added as new kinds). */
typedef enum tpt_record_kind {
  TPT_RECORD_SCALAR = 1,
  TPT_RECORD_IMAGE = 2, /* tensor: uint8, N x H x W x C (C = 1, 3 or 4); value unused */
  TPT_RECORD_FORCE32 = 0x7fffffff
} tpt_record_kind;

/* A record brought to monitors by TPT_EVENT_RECORD. Borrowed: valid during
 * the callback only. `struct_size` is sizeof the struct the library filled:
 * fields past it do not exist (a newer header against an older library). */
typedef struct tpt_record {
  uint32_t struct_size;
  tpt_record_kind kind;
  const char *name;          /* as given to tpt_trainer_put_scalar */
  int64_t global_step;       /* when it was put */
  int64_t epoch_num;
  double value;              /* TPT_RECORD_SCALAR */
  const tpt_tensor *tensor;  /* TPT_RECORD_IMAGE; NULL for scalars */
} tpt_record;

/* The callback function. `record` is non-NULL only for TPT_EVENT_RECORD.
 * Return NULL to go on, a TPT_STOP status to end training gracefully, or any
 * other status to fail training with that code and message (the library takes
 * ownership). During AFTER_TRAIN a returned error is reported but the other
 * callbacks still run; TPT_STOP is ignored there. */
typedef tpt_status *(*tpt_callback_fn)(tpt_trainer *trainer, tpt_event event,
                                       const tpt_record *record, void *user_data);

/* Describes a callback. Initialise with TPT_CALLBACK_DESC_INIT. */
#define TPT_CALLBACK_DESC_VERSION 2
typedef struct tpt_callback_desc {
  uint32_t version;     /* TPT_CALLBACK_DESC_VERSION */
  uint32_t events;      /* a mask of tpt_event: the events to deliver */
  const char *name;     /* for logs and the slow-callback report; copied; NULL: "callback" */
  int32_t chief_only;   /* nonzero (default, as tensorpack): dropped on non-chief trainers */
  tpt_callback_fn fn;
  void *user_data;
  void (*destroy)(void *user_data); /* called exactly once; may be NULL */
  /* version 2: the callback's own state in checkpoints (both or neither).
   * save returns a new tensor of any dtype and shape (the library frees
   * it); restore gets it back, with the dtype and shape it had, when a
   * resumed run starts (after SETUP, before BEFORE_TRAIN). The callback's
   * name is its key in the checkpoint. A checkpoint made elsewhere can hold
   * any tensor of a tpt_dtype whose bytes fit its shape (the library checks
   * that much): check the shape you expect before you use it. */
  tpt_status *(*save)(tpt_tensor **out, void *user_data);
  tpt_status *(*restore)(const tpt_tensor *state, void *user_data);
} tpt_callback_desc;
#define TPT_CALLBACK_DESC_INIT { TPT_CALLBACK_DESC_VERSION, 0, NULL, 1, NULL, NULL, NULL, NULL, NULL }

/* Makes a callback from a description. The library owns desc->user_data from
 * this call on: destroy runs exactly once, when the callback is freed (by the
 * trainer that took it, or tpt_callback_free), or at once if this call fails.
 * The caller owns *out until it gives it to a trainer or a wrapper. Any thread. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_new(tpt_callback **out,
                                                   const tpt_callback_desc *desc);

/* Releases a callback that was not given away. NULL is a no-op. */
TPT_API void tpt_callback_free(tpt_callback *callback);

/* Scheduling wrappers (tensorpack's). Each takes ownership of `inner` (also on
 * failure) and gives a new callback in *out.
 *
 * periodic_trigger: every event passes through to inner, except TRIGGER_EPOCH
 * which is replaced: inner gets TRIGGER when global_step % every_k_steps == 0
 * (checked after each step), when epoch_num % every_k_epochs == 0 (after each
 * epoch) and, with before_train, in BEFORE_TRAIN. 0 disables a condition; at
 * least one must be set. Use it to make a callback trigger more often. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_periodic_trigger(tpt_callback **out,
                                                                tpt_callback *inner,
                                                                int64_t every_k_steps,
                                                                int64_t every_k_epochs,
                                                                int32_t before_train);

/* A predicate for tpt_callback_enable_if: 1 enables, 0 disables, a negative
 * value fails training (TPT_ERR_CALLBACK). */
typedef int32_t (*tpt_predicate_fn)(tpt_trainer *trainer, void *user_data);

/* enable_if: BEFORE/AFTER_EPOCH, BEFORE/AFTER_RUN, TRIGGER_STEP and
 * TRIGGER_EPOCH reach inner only when predicate(trainer) is true (for a run it
 * is asked in BEFORE_RUN and remembered for AFTER_RUN); other events always
 * pass. The library owns user_data (destroy exactly once, as above). */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_enable_if(tpt_callback **out, tpt_callback *inner,
                                                         tpt_predicate_fn predicate,
                                                         void *user_data,
                                                         void (*destroy)(void *user_data));

/* periodic: enable_if with the predicate "global_step % every_k_steps == 0, or
 * epoch_num % every_k_epochs == 0, or (with every_k_epochs) the last step of
 * the last epoch". 0 disables a condition; at least one must be set. It only
 * makes a callback run less often. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_periodic(tpt_callback **out, tpt_callback *inner,
                                                        int64_t every_k_steps,
                                                        int64_t every_k_epochs);

/* tensorpack's TFEventWriter: a monitor that writes the scalars and images
 * to a TensorFlow event file, events.out.tfevents.<unix time>.<host>, in
 * `dir` (NULL: the trainer's log directory; without either the monitor does
 * nothing), which TensorBoard reads. Scalars are float32 simple values,
 * images PNG (one as `name`, several as name/0, name/1, ...). The file is
 * flushed after each epoch and at the end; a resumed run starts a new file
 * with a SessionLog START event, so TensorBoard drops what the interrupted
 * run wrote after its checkpoint. Built in with default_monitors and a log
 * directory; add this one for another directory. docs/callbacks.md has the
 * format. The caller owns *out. */
TPT_API TPT_NODISCARD tpt_status *tpt_monitor_tensorboard(tpt_callback **out, const char *dir);

/* tensorpack's ScheduledHyperParamSetter: a callback (on every worker) that
 * sets the optimizer's hyper-parameter `param` on a schedule. Each point
 * sets its value after epoch `at` completes (at TRIGGER_EPOCH; at = 0:
 * before the first epoch, in BEFORE_TRAIN), or at global step `at` with
 * TPT_SCHEDULE_STEP_BASED (at TRIGGER_STEP). With TPT_SCHEDULE_LINEAR the
 * value is interpolated between points at every trigger (never before the
 * first point or after the last). In BEFORE_TRAIN the value that should hold
 * at the current epoch (or step) is worked out from the points up to it and,
 * when the optimizer's differs, a warning is logged and the value set (not
 * with TPT_SCHEDULE_NOT_AT_BEGINNING): a resumed run follows the schedule.
 * Points are sorted; they must be >= 0, distinct and finite. Keeps a
 * reference to the optimizer. */
typedef struct tpt_schedule_point {
  int64_t at;   /* an epoch number, or a global step */
  double value;
} tpt_schedule_point;
typedef enum tpt_schedule_flags {
  TPT_SCHEDULE_LINEAR = 1,
  TPT_SCHEDULE_STEP_BASED = 2,
  TPT_SCHEDULE_NOT_AT_BEGINNING = 4,
  TPT_SCHEDULE_FORCE32 = 0x7fffffff
} tpt_schedule_flags;
TPT_API TPT_NODISCARD tpt_status *tpt_callback_scheduled_hyperparam(tpt_callback **out,
                                                                    tpt_optimizer *optimizer,
                                                                    const char *param,
                                                                    const tpt_schedule_point *schedule,
                                                                    size_t n_points, uint32_t flags);

/* tensorpack's HyperParamSetterWithFunc: in BEFORE_TRAIN and at every
 * TRIGGER (after each epoch), fn(&value, epoch_num, current value) gives the
 * value to set; epoch_num is the number of finished epochs (starting_epoch - 1
 * in BEFORE_TRAIN, the resumed epoch - 1 after a resume). fn returns NULL, or
 * an error that fails training. The library owns user_data (destroy exactly
 * once, also when this call fails). Keeps a reference to the optimizer. */
typedef tpt_status *(*tpt_hyperparam_fn)(double *value, int64_t epoch_num, double current,
                                         void *user_data);
TPT_API TPT_NODISCARD tpt_status *tpt_callback_hyperparam_func(tpt_callback **out,
                                                               tpt_optimizer *optimizer,
                                                               const char *param,
                                                               tpt_hyperparam_fn fn, void *user_data,
                                                               void (*destroy)(void *user_data));

/* Options of tpt_callback_stat_monitor_param. Initialise with
 * TPT_STAT_MONITOR_OPTIONS_INIT. */
#define TPT_STAT_MONITOR_OPTIONS_VERSION 1
typedef struct tpt_stat_monitor_options {
  uint32_t version;   /* TPT_STAT_MONITOR_OPTIONS_VERSION */
  int64_t last_k;     /* the values compared, >= 2; default 5 */
  double threshold;   /* >= 0; default 0 */
  int32_t maximize;   /* nonzero: the stat should grow (tensorpack's reverse); default 0 */
  double factor;      /* the new value is current * factor; > 0, default 0.1 */
  double limit;       /* the value never goes past this: a floor when factor < 1, a
                         ceiling when factor > 1; default 0: no limit */
} tpt_stat_monitor_options;
#define TPT_STAT_MONITOR_OPTIONS_INIT { TPT_STAT_MONITOR_OPTIONS_VERSION, 5, 0.0, 0, 0.1, 0.0 }

/* tensorpack's StatMonitorParamSetter (reduce on plateau): at every TRIGGER
 * (after each epoch) it takes the newest value of the scalar `stat` (a step
 * it has seen is skipped with a warning) into a window of the last last_k
 * values. When the window is full and its first value was not beaten by more
 * than threshold (min >= first - threshold; maximize: max <= first +
 * threshold), it sets current * factor and empties the window. Nothing in
 * BEFORE_TRAIN. The window is saved in checkpoints. `options` may be NULL.
 * It runs after the callbacks that put scalars, whatever the order they were
 * added in; a `stat` never put by the end of an epoch it runs at fails the
 * run (TPT_ERR_NOT_FOUND, naming the scalars put, the closest first). */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_stat_monitor_param(
    tpt_callback **out, tpt_optimizer *optimizer, const char *param, const char *stat,
    const tpt_stat_monitor_options *options);

/* tensorpack's HumanHyperParamSetter: in BEFORE_TRAIN and at every TRIGGER
 * (after each epoch) it reads `file` (NULL: "hyper.txt"; a relative name is in
 * the log directory), lines of the form name:value, and sets the value of
 * `param` when it is there. A missing file or name changes nothing; a line
 * that does not parse is logged and skipped. Edit the file while training
 * runs to change the learning rate by hand. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_human_hyperparam(tpt_callback **out,
                                                                tpt_optimizer *optimizer,
                                                                const char *param,
                                                                const char *file);

/* ---- Checkpoints and resume ------------------------------------------------
 * A checkpoint holds everything a training needs to go on exactly where it
 * was: every variable, the optimizer's slots and hyper-parameters, the loop
 * counters and where the loop goes on, LibTorch's CPU random state, the
 * input's position (its dataflow's, mid-pass), the moving summaries, and the
 * state of callbacks that have one (MinSaver/MaxSaver, tpt_callback_desc's
 * save/restore). The file is a torch.save archive of a dict, so
 * python3-torch's torch.load opens it; docs/checkpoints.md has its fields.
 * Files are written atomically (temporary file, fsync, rename, fsync of
 * the directory), so a process killed at any moment leaves only whole ones. */

/* tensorpack's ModelSaver. Initialise with TPT_MODEL_SAVER_OPTIONS_INIT. */
#define TPT_MODEL_SAVER_OPTIONS_VERSION 1
typedef struct tpt_model_saver_options {
  uint32_t version;            /* TPT_MODEL_SAVER_OPTIONS_VERSION */
  int32_t max_to_keep;         /* >= 0; default 10; 0 keeps all */
  double keep_every_n_hours;   /* one checkpoint per this many hours is never deleted;
                                  default 0.5; 0: none */
  int64_t every_k_steps;       /* also save every k global steps (at trigger_step);
                                  default 0: not step-based */
  int64_t every_k_epochs;      /* save after every k-th epoch; default 1; 0: never */
  const char *dir;             /* NULL (default): the trainer's log directory; copied */
} tpt_model_saver_options;
#define TPT_MODEL_SAVER_OPTIONS_INIT { TPT_MODEL_SAVER_OPTIONS_VERSION, 10, 0.5, 0, 1, NULL }

/* A callback (chief only) that writes model-<global_step> and the index file
 * `checkpoint` naming the latest (tensorpack's layout), deleting the oldest
 * beyond max_to_keep. An IO error while saving is logged and training goes
 * on. `options` may be NULL (defaults). The caller owns *out. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_model_saver(tpt_callback **out,
                                                           const tpt_model_saver_options *options);

/* tensorpack's MinSaver / MaxSaver: when the latest value of the scalar
 * `stat` is the lowest (highest) so far, the newest checkpoint, which must
 * be of that step, is copied to `filename` (NULL: min-<stat> / max-<stat>) in
 * `dir` (NULL: the log directory). The best value is saved in checkpoints.
 * Whatever the order they were added in, a trainer runs its callbacks that
 * put scalars first, then those that read them (EarlyStopping), then the
 * ModelSaver, then the best savers (docs/callbacks.md, "Order"); a `stat`
 * never put by the end of an epoch it runs at fails the run
 * (TPT_ERR_NOT_FOUND, naming the scalars put, the closest first). */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_min_saver(tpt_callback **out, const char *stat,
                                                         const char *filename, const char *dir);
TPT_API TPT_NODISCARD tpt_status *tpt_callback_max_saver(tpt_callback **out, const char *stat,
                                                         const char *filename, const char *dir);

/* ---- More callbacks ---------------------------------------------------------
 * The rest of tensorpack's catalogue that does not belong to a section above,
 * and the two every long run wants (early stopping, TerminateOnNaN). Each
 * gives a new callback the caller owns until it gives it to a trainer. */

/* Options of tpt_callback_early_stopping. Initialise with
 * TPT_EARLY_STOPPING_OPTIONS_INIT. */
#define TPT_EARLY_STOPPING_OPTIONS_VERSION 1
typedef struct tpt_early_stopping_options {
  uint32_t version;   /* TPT_EARLY_STOPPING_OPTIONS_VERSION */
  int64_t patience;   /* checks without improvement before stopping, >= 1; default 3 */
  double min_delta;   /* an improvement is by more than this, >= 0; default 0 */
  int32_t maximize;   /* nonzero: higher is better; default 0 (lower is better) */
} tpt_early_stopping_options;
#define TPT_EARLY_STOPPING_OPTIONS_INIT { TPT_EARLY_STOPPING_OPTIONS_VERSION, 3, 0.0, 0 }

/* Early stopping (Keras' EarlyStopping; tensorpack has none): at every
 * TRIGGER (after each epoch) it reads the newest value of the scalar `stat`
 * (a step it has seen does not count). After `patience` new values without
 * an improvement on the best by more than min_delta, training stops
 * gracefully with a reason that names the stat, its best value and the step
 * of the best; the savers of that epoch still save it, and the checkpoint
 * records the stop, so auto_resume leaves the run stopped. Its best value
 * and count are saved in checkpoints. `options` may be NULL. It runs after
 * the callbacks that put scalars, whatever the order they were added in; a
 * `stat` never put by the end of an epoch it runs at fails the run
 * (TPT_ERR_NOT_FOUND, naming the scalars put, the closest first: a
 * misspelt name). */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_early_stopping(
    tpt_callback **out, const char *stat, const tpt_early_stopping_options *options);

/* TerminateOnNaN: after every hooked step (AFTER_RUN; at TRIGGER_STEP for a
 * run_step without hooked steps) it checks the step's scalar outputs named in
 * `outputs` (NULL or none: "cost"), and stops training gracefully when one is
 * NaN or infinite, with a reason naming it and the step. It comes before any
 * checkpoint of that step; a ModelSaver also never writes a checkpoint whose
 * variables are not finite, so the last checkpoint is a good one. (The
 * optimizer's check_numerics, on by default, already fails a step whose cost
 * is not finite, before its update; TerminateOnNaN is for check_numerics 0
 * and for a run_step of the host's own, and ends training gracefully.) */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_terminate_on_nan(tpt_callback **out,
                                                                const char *const *outputs,
                                                                size_t n_outputs);

/* tensorpack's ThroughputTracker: times the steps of each epoch (between
 * BEFORE_EPOCH and AFTER_EPOCH, without the epoch's callbacks) and at every
 * TRIGGER puts "Throughput (steps/sec)", or with samples_per_step > 0
 * "Throughput (samples/sec)", over the steps since the last trigger. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_throughput(tpt_callback **out,
                                                          int64_t samples_per_step);

/* A step watchdog (tensorpack's SessionRunTimeout, for a whole step): a
 * thread of its own, started in BEFORE_TRAIN and joined in AFTER_TRAIN,
 * watches each step (run_step with its input wait, and the per-step
 * callbacks; not the epoch's callbacks). A step still running after
 * timeout_seconds (> 0, at most 1e9) is logged as an error at once, and when
 * the step returns training fails with TPT_ERR_TIMEOUT naming the step and its
 * time. A step that never returns cannot be interrupted: the log line is then
 * what says why. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_step_watchdog(tpt_callback **out,
                                                             double timeout_seconds);

/* tensorpack's HostMemoryTracker: logs the host's available memory in SETUP
 * and BEFORE_TRAIN, and at every TRIGGER puts "HostFreeMemory (GB)" (the
 * kernel's MemAvailable) and "HostResidentMemory (MB)" (this process's
 * resident set). Linux only: TPT_ERR_UNSUPPORTED where /proc/meminfo is
 * missing. */
TPT_API TPT_NODISCARD tpt_status *tpt_callback_host_memory(tpt_callback **out);

TPT_END_DECL

#endif /* TPTRAIN_CALLBACK_H */
