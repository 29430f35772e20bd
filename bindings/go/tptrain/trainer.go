package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"runtime/cgo"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"
)

// LogdirAction says what to do when the log directory exists and is not
// empty (tpt_logdir_action).
type LogdirAction int32

// The actions of tpt_logdir_action.
const (
	LogdirRefuse LogdirAction = C.TPT_LOGDIR_REFUSE // fail with an *Error of CodeIO (the default)
	LogdirKeep   LogdirAction = C.TPT_LOGDIR_KEEP   // use it as it is (resume: stats.json is appended to)
	LogdirDelete LogdirAction = C.TPT_LOGDIR_DELETE // delete its contents first
	LogdirBackup LogdirAction = C.TPT_LOGDIR_BACKUP // rename it to <dir><MMDD-HHMMSS>, start empty
	LogdirNew    LogdirAction = C.TPT_LOGDIR_NEW    // leave it, use <dir><MMDD-HHMMSS> instead
	LogdirAsk    LogdirAction = C.TPT_LOGDIR_ASK    // ask on the terminal; LogdirRefuse without one
)

// Role is a trainer's part in a job: the chief, or a worker
// (tpt_trainer_options.is_chief). The zero value is RoleChief.
type Role int32

// The roles of TrainerOptions.Role.
const (
	RoleChief  Role = iota // runs every callback (tensorpack's is_chief)
	RoleWorker             // drops the chief-only callbacks
)

// Progress says how progress is shown while an epoch runs (tpt_progress).
type Progress int32

// The modes of tpt_progress.
const (
	ProgressAuto  Progress = C.TPT_PROGRESS_AUTO  // a bar on a terminal (stderr), else one line per epoch
	ProgressBar   Progress = C.TPT_PROGRESS_BAR   // always a bar on stderr
	ProgressLines Progress = C.TPT_PROGRESS_LINES // one plain line per epoch, in the log
	ProgressOff   Progress = C.TPT_PROGRESS_OFF
)

// TrainerOptions are the options of NewTrainer (tpt_trainer_options). The
// zero value is the defaults: a chief trainer from epoch 1 with no epoch
// limit, StepsPerEpoch taken from the input, no log directory, log lines on
// stdout, the progress bar and the default monitors.
type TrainerOptions struct {
	// Role is whether this trainer is the chief, which runs the chief-only
	// callbacks (the savers, the monitors' files), or a worker, which drops
	// them (default RoleChief).
	Role Role
	// StartingEpoch is the first epoch number; 0 means 1.
	StartingEpoch int64
	// MaxEpoch is the last epoch number, inclusive; 0 means no limit
	// (99999999).
	MaxEpoch int64
	// StepsPerEpoch is the number of run_step calls per epoch; 0 means not
	// set: the input's size (divided by the number of towers with
	// SetTowers; a trainer without one must set it). NoSteps runs the
	// callbacks only.
	StepsPerEpoch int64
	// Logdir is the log directory (log.log, stats.json); "" means none.
	Logdir string
	// LogdirAction applies when Logdir exists and is not empty (default
	// LogdirRefuse).
	LogdirAction LogdirAction
	// Progress is how progress is shown (default ProgressAuto).
	Progress Progress
	// Quiet keeps log lines off stdout (they still go to log.log).
	Quiet bool
	// NoDefaultCallbacks leaves out the progress bar and the estimated time
	// left.
	NoDefaultCallbacks bool
	// NoDefaultMonitors leaves out the stats.json writer (with a Logdir) and
	// the per-epoch scalar printer.
	NoDefaultMonitors bool
	// SummaryPeriod: the cost and the tower's one-element outputs are
	// moving averages (tensorpack's add_moving_summary, decay 0.95) that
	// reach the monitors in each epoch's last step, and every SummaryPeriod
	// steps when > 0 (default 0).
	SummaryPeriod int64
	// AutoResume: when Logdir holds a checkpoint index (a ModelSaver's), the
	// run resumes exactly from its latest checkpoint; the directory is the
	// run's and kept whatever LogdirAction says, also before its first
	// checkpoint (a run killed early starts again from the beginning in it)
	// (tensorpack's AutoResumeTrainConfig). A run that ended stays ended
	// (its checkpoint records how): after a finished run nothing is left
	// unless MaxEpoch was raised; after a run a callback or the run step
	// stopped (EarlyStopping) the run trains nothing and ends with that
	// stop's reason, unless ContinueStopped. An interrupted run (a stop
	// request, a cancelled context, a signal, a failure) goes on.
	AutoResume bool
	// ContinueStopped: with AutoResume, train on after a run that a
	// callback or the run step stopped.
	ContinueStopped bool
	// StopOnSignals: whether SIGTERM and SIGINT stop a run gracefully, at
	// the next step boundary with a checkpoint from a ModelSaver there, so
	// that a preempted job loses no step (a second signal ends the process
	// at once). The zero value, SignalsFromEnvironment, turns it on when the
	// environment has TPTRAIN_STOP_ON_SIGNALS=1 (tools/tptrain-run sets
	// it). While the run runs, the library's handlers replace the Go
	// runtime's for these two signals (channels of os/signal.Notify do not
	// get them then); SignalsNever leaves them to Go.
	StopOnSignals StopOnSignals
	// Precision: the arithmetic of the tower functions' calls, in training
	// and in the inference runners (tpt_precision). The zero value,
	// PrecisionFP32, is float32 throughout.
	Precision Precision
	// LossScaling: dynamic loss scaling (tpt_loss_scaling). The zero value
	// is on for PrecisionFP16Mixed, off otherwise, with GradScaler's
	// defaults.
	LossScaling LossScaling
}

// LossScaling is TrainerOptions.LossScaling: dynamic loss scaling with the
// rules and defaults of PyTorch's torch.amp.GradScaler. Every step's cost is
// multiplied by the scale before the backward pass and the gradients are
// divided by it before the update. An update whose gradients are not all
// finite is skipped (the variables and the optimizer's state do not change)
// and the scale is multiplied by BackoffFactor; after GrowthInterval updates
// in a row without one it is multiplied by GrowthFactor. Towers and
// distributed ranks skip together. The scale is in checkpoints, in the step
// output "loss_scale" (Context.OutputScalar) and in the scalars "loss_scale"
// and "skipped_updates" (per epoch). A zero field takes the default.
type LossScaling struct {
	// Mode: LossScalingAuto (the zero value) is on for fp16-mixed only.
	Mode LossScalingMode
	// InitScale is the first scale (0: 65536).
	InitScale float64
	// GrowthFactor, > 1 (0: 2).
	GrowthFactor float64
	// BackoffFactor, in (0, 1) (0: 0.5).
	BackoffFactor float64
	// GrowthInterval, >= 1 (0: 2000).
	GrowthInterval int64
}

// LossScalingMode is LossScaling.Mode (tpt_loss_scaling_mode).
type LossScalingMode int

const (
	// LossScalingAuto: on with PrecisionFP16Mixed, off otherwise (the default).
	LossScalingAuto LossScalingMode = C.TPT_LOSS_SCALING_AUTO
	// LossScalingOn: on in every precision (float32 and bfloat16 need none).
	LossScalingOn LossScalingMode = C.TPT_LOSS_SCALING_ON
	// LossScalingOff: off, also in fp16-mixed (small gradients may underflow).
	LossScalingOff LossScalingMode = C.TPT_LOSS_SCALING_OFF
)

// String returns "auto", "on" or "off".
func (m LossScalingMode) String() string {
	switch m {
	case LossScalingAuto:
		return "auto"
	case LossScalingOn:
		return "on"
	case LossScalingOff:
		return "off"
	}
	return "LossScalingMode(" + strconv.Itoa(int(m)) + ")"
}

// Precision is TrainerOptions.Precision: mixed precision as PyTorch's
// autocast. Variables, the gradients the optimizer applies and its state
// stay float32 in every mode.
type Precision int

const (
	// PrecisionFP32: everything float32 (the default).
	PrecisionFP32 Precision = 0
	// PrecisionBF16Mixed: autocast to bfloat16: matmuls, convolutions and
	// linear layers in bfloat16, reductions, losses, softmax and
	// normalisations in float32 (LibTorch's per-operator policy); CPU and
	// CUDA towers. On a CPU with AVX-512 BF16 or AMX a step is several times
	// faster.
	PrecisionBF16Mixed Precision = 1
	// PrecisionFP16Mixed: autocast to float16 with dynamic loss scaling
	// (TrainerOptions.LossScaling); CUDA towers only (with a CPU tower Run
	// fails with CodeUnsupported: use PrecisionBF16Mixed there).
	PrecisionFP16Mixed Precision = 2
)

// String returns "fp32", "bf16-mixed" or "fp16-mixed".
func (p Precision) String() string {
	switch p {
	case PrecisionFP32:
		return "fp32"
	case PrecisionBF16Mixed:
		return "bf16-mixed"
	case PrecisionFP16Mixed:
		return "fp16-mixed"
	}
	return "Precision(" + strconv.Itoa(int(p)) + ")"
}

// StopOnSignals is TrainerOptions.StopOnSignals (tpt_trainer_options.stop_on_signals).
type StopOnSignals int

const (
	// SignalsFromEnvironment: on when TPTRAIN_STOP_ON_SIGNALS=1 (the default).
	SignalsFromEnvironment StopOnSignals = 0
	// SignalsAlways: on for every run.
	SignalsAlways StopOnSignals = 1
	// SignalsNever: the signals keep their dispositions.
	SignalsNever StopOnSignals = -1
)

// NoSteps as TrainerOptions.StepsPerEpoch runs epochs without steps: only
// the callbacks.
const NoSteps int64 = -1

// Trainer runs the epoch/step loop with callbacks around it (tpt_trainer):
//
//	for epoch_num in [StartingEpoch, MaxEpoch]:
//	    for local_step in [0, StepsPerEpoch): run_step(ctx)
//
// A Trainer is used from one goroutine at a time; RequestStop is the
// exception and may be called from any goroutine. Run calls run_step and
// every callback on the goroutine that called it. Close releases the
// trainer, its run_step and its callbacks.
type Trainer struct {
	// mu guards ptr and running (Close and RequestStop may come from other
	// goroutines).
	handle[*C.tpt_trainer]
	running bool
	ctx     *Context
	// The stashes of the model's tower function and the input's feed
	// function (SetModel), which Run consults for the errors and panics
	// behind the status it gets back.
	stashes []*stash
	// The stashes of callbacks that run functions outside the Context (the
	// inference runner's dataflow and model), which Run consults too.
	cbStashes []*stash
	// The handle of the init hook of a trainer made from a config: the
	// library borrows it, so Close deletes it after freeing the trainer.
	initHandle cgo.Handle
}

// stashedError is a Go error returned to the library as a status with this
// code and message.
type stashedError struct {
	code Code
	msg  string
	err  error
}

// NewTrainer creates a trainer (tpt_trainer_new). opts may be nil: the
// defaults (the zero TrainerOptions). Close the trainer when done.
func NewTrainer(opts *TrainerOptions) (*Trainer, error) {
	var o TrainerOptions
	if opts != nil {
		o = *opts
	}
	copts, free, err := cTrainerOptions(&o)
	if err != nil {
		return nil, err
	}
	defer free()
	var ptr *C.tpt_trainer
	if err := statusError(C.tpt_trainer_new(&ptr, &copts)); err != nil {
		return nil, err
	}
	return newTrainer(ptr, &Context{}), nil
}

// cTrainerOptions returns the C options of o, and the function that frees
// the C string their logdir points to.
func cTrainerOptions(o *TrainerOptions) (C.tpt_trainer_options, func(), error) {
	steps := o.StepsPerEpoch
	switch {
	case steps == 0:
		steps = -1 // not set
	case steps == NoSteps:
		steps = 0
	case steps < 0:
		return C.tpt_trainer_options{}, nil, &Error{Code: CodeInvalidArgument,
			Message: "TrainerOptions.StepsPerEpoch must be >= 0 (0: from the input; NoSteps: callbacks only), got " +
				strconv.FormatInt(steps, 10)}
	}
	copts := defaultTrainerOptions()
	if o.StartingEpoch != 0 {
		copts.starting_epoch = C.int64_t(o.StartingEpoch)
	}
	if o.MaxEpoch != 0 {
		copts.max_epoch = C.int64_t(o.MaxEpoch)
	}
	switch o.Role {
	case RoleChief, RoleWorker:
	default:
		return C.tpt_trainer_options{}, nil, &Error{Code: CodeInvalidArgument,
			Message: "TrainerOptions.Role must be RoleChief or RoleWorker, got " + strconv.Itoa(int(o.Role))}
	}
	copts.is_chief = cBool(o.Role == RoleChief)
	copts.steps_per_epoch = C.int64_t(steps)
	copts.logdir_action = C.tpt_logdir_action(o.LogdirAction)
	copts.progress = C.tpt_progress(o.Progress)
	copts.console = cBool(!o.Quiet)
	copts.default_callbacks = cBool(!o.NoDefaultCallbacks)
	copts.default_monitors = cBool(!o.NoDefaultMonitors)
	copts.summary_period = C.int64_t(o.SummaryPeriod)
	copts.auto_resume = cBool(o.AutoResume)
	copts.continue_stopped = cBool(o.ContinueStopped)
	copts.stop_on_signals = C.int32_t(o.StopOnSignals)
	if o.Precision < PrecisionFP32 || o.Precision > PrecisionFP16Mixed {
		return C.tpt_trainer_options{}, nil, &Error{Code: CodeInvalidArgument,
			Message: "TrainerOptions.Precision is " + o.Precision.String() +
				": use PrecisionFP32, PrecisionBF16Mixed or PrecisionFP16Mixed"}
	}
	copts.precision = C.tpt_precision(o.Precision)
	ls := o.LossScaling
	if ls.Mode < LossScalingAuto || ls.Mode > LossScalingOff {
		return C.tpt_trainer_options{}, nil, &Error{Code: CodeInvalidArgument,
			Message: "TrainerOptions.LossScaling.Mode is " + ls.Mode.String() +
				": use LossScalingAuto, LossScalingOn or LossScalingOff"}
	}
	copts.loss_scaling.mode = C.tpt_loss_scaling_mode(ls.Mode)
	if ls.InitScale != 0 {
		copts.loss_scaling.init_scale = C.double(ls.InitScale)
	}
	if ls.GrowthFactor != 0 {
		copts.loss_scaling.growth_factor = C.double(ls.GrowthFactor)
	}
	if ls.BackoffFactor != 0 {
		copts.loss_scaling.backoff_factor = C.double(ls.BackoffFactor)
	}
	if ls.GrowthInterval != 0 {
		copts.loss_scaling.growth_interval = C.int64_t(ls.GrowthInterval)
	}
	if o.Logdir == "" {
		return copts, func() {}, nil
	}
	logdir := C.CString(o.Logdir)
	copts.logdir = logdir
	return copts, func() { C.free(unsafe.Pointer(logdir)) }, nil
}

// newTrainer wraps a new trainer handle, with ctx (whose functions may
// already refer to it) as its Context.
func newTrainer(ptr *C.tpt_trainer, ctx *Context) *Trainer {
	ctx.ptr = ptr
	ctx.self = newHandle(ctx)
	t := &Trainer{ctx: ctx}
	t.ptr = ptr
	runtime.SetFinalizer(t, (*Trainer).Close)
	return t
}

func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// Close releases the trainer, its run_step, its callbacks and its init hook
// (tpt_trainer_free); each Go function given to it is released exactly once.
// It is idempotent. It fails, changing nothing, while Run is in progress.
func (t *Trainer) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running {
		return &Error{Code: CodeState, Message: "Trainer.Close: Run is in progress"}
	}
	if t.ptr != nil {
		C.tpt_trainer_free(t.ptr)
		t.ptr = nil
		t.ctx.ptr = nil
		deleteHandle(t.ctx.self)
		if t.initHandle != 0 {
			deleteHandle(t.initHandle)
			t.initHandle = 0
		}
		runtime.SetFinalizer(t, nil)
	}
	return nil
}

// lock locks t.mu and returns the handle, or an error if t is nil or closed.
// On success the caller must call t.mu.Unlock.
func (t *Trainer) lock(method string) (*C.tpt_trainer, error) {
	if t == nil {
		return nil, trainerClosedError(method)
	}
	ptr, err := t.acquire(false, "Trainer", "Trainer."+method)
	if err != nil {
		return nil, trainerClosedError(method)
	}
	return ptr, nil
}

func trainerClosedError(method string) error {
	return &Error{Code: CodeInvalidArgument, Message: "Trainer." + method + ": use of closed Trainer"}
}

// SetRunStep sets the body of the loop, called StepsPerEpoch times per epoch
// (tpt_trainer_set_run_step); it replaces an earlier one. runStep returns nil
// to go on, Stop(reason) to end training gracefully, or an error to fail it:
// Run then returns that very error. It may do anything; each call to
// ctx.HookedStep runs the callbacks' BEFORE_RUN and AFTER_RUN around a step
// and advances the global step, and so does each ctx.RunTrainOps, which runs
// the model's train ops (after SetModel). Before Run only.
func (t *Trainer) SetRunStep(runStep func(ctx *Context) error) error {
	if runStep == nil {
		return &Error{Code: CodeInvalidArgument, Message: "Trainer.SetRunStep: runStep is nil"}
	}
	ptr, err := t.lock("SetRunStep")
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	h := newHandle(&hostFunc{name: "run_step", ctx: t.ctx, runStep: runStep})
	// The library deletes h (also when this fails).
	return statusError(C.tptgo_set_run_step(ptr, C.uintptr_t(h)))
}

// Run runs the training (tpt_trainer_run): callbacks SETUP, BEFORE_TRAIN,
// the epochs, and always AFTER_TRAIN. It returns nil when training finished
// or was stopped (see StopReason), or the error that ended it: an error
// returned by run_step, a step or a callback comes back unchanged (the same
// value), one from the library is an *Error. The same holds for the tower
// function of a model (in any tower) and the feed function of an input
// (SetModel, SetTowers). If run_step, a step, a callback, a predicate, a
// tower or a feed function panicked, training fails as if it had returned
// an error, AFTER_TRAIN still runs, and Run then panics with the value of
// the panic that ended training (or else the first one). A trainer runs
// once.
func (t *Trainer) Run() error {
	ptr, err := t.lock("Run")
	if err != nil {
		return err
	}
	if t.running {
		t.mu.Unlock()
		return &Error{Code: CodeState, Message: "Trainer.Run: Run is already in progress"}
	}
	t.running = true
	stashes := append(append([]*stash(nil), t.stashes...), t.cbStashes...)
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.running = false
		t.mu.Unlock()
	}()
	c := t.ctx
	c.errs = nil
	c.stashes = stashes
	st := C.tpt_trainer_run(ptr)
	runtime.KeepAlive(t)
	c.stashes = nil
	var towerPanic any
	towerPanicked := false
	if st != nil && len(stashes) > 0 {
		// An error or panic of the tower or feed function (these may have
		// run on other threads, so they are kept apart from c's).
		code, msg := Code(C.tpt_status_code(st)), C.GoString(C.tpt_status_message(st))
		for _, s := range stashes {
			if e, v, panicked, found := s.take(code, msg); found {
				C.tpt_status_free(st)
				st = nil
				err, towerPanic, towerPanicked = e, v, panicked
				break
			}
		}
	}
	if st != nil {
		err = c.result(st, false)
	}
	c.errs = nil
	if towerPanicked { // the panic that ended training comes first
		c.panicking, c.panicValue, c.panicWhere = false, nil, ""
		panic(towerPanic)
	}
	if c.panicking {
		v := c.panicValue
		c.panicking, c.panicValue, c.panicWhere = false, nil, ""
		panic(v)
	}
	return err
}

// RunContext is Run with a context: when ctx is done, training stops at the
// next step boundary as after RequestStop (AFTER_TRAIN runs as always), with
// ctx.Err()'s text as the stop reason ("context canceled", "context deadline
// exceeded"; StopReason and the log say it), and RunContext returns
// ctx.Err(). A ctx already done returns its error without running.
func (t *Trainer) RunContext(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil { // never done (context.Background)
		return t.Run()
	}
	var byCtx atomic.Bool
	finished := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			byCtx.Store(true)
			t.requestStop(ctx.Err().Error()) // no-op once Run has returned
		case <-finished:
		}
	}()
	err := t.Run()
	close(finished)
	<-watched
	if err == nil && byCtx.Load() {
		if reason, stopped := t.StopReason(); stopped && reason == ctx.Err().Error() {
			return ctx.Err()
		}
	}
	return err
}

// RequestStop asks the trainer to stop before its next step, a graceful stop:
// AFTER_TRAIN runs and Run returns nil, and StopReason gives
// "tpt_trainer_request_stop" (tpt_trainer_request_stop). Safe from any
// goroutine, also while Run is in progress.
func (t *Trainer) RequestStop() error {
	ptr, err := t.lock("RequestStop")
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	return statusError(C.tpt_trainer_request_stop(ptr))
}

// requestStop is RequestStop with a reason, for RunContext's watcher, which
// may come after Close: there is nothing left to stop then
// (tpt_trainer_request_stop_because).
func (t *Trainer) requestStop(reason string) {
	ptr, err := t.lock("RunContext")
	if err != nil {
		return
	}
	defer t.mu.Unlock()
	creason := C.CString(reason)
	defer C.free(unsafe.Pointer(creason))
	_ = statusError(C.tpt_trainer_request_stop_because(ptr, creason))
}

// StopReason says why the last run stopped early: the reason given to Stop,
// or "tpt_trainer_request_stop" after RequestStop (tpt_trainer_stop_reason).
// ok is false when training ran to MaxEpoch, failed, or has not run.
func (t *Trainer) StopReason() (reason string, ok bool) {
	ptr, err := t.lock("StopReason")
	if err != nil {
		return "", false
	}
	defer t.mu.Unlock()
	var out *C.char
	if statusError(C.tpt_trainer_stop_reason(&out, ptr)) != nil || out == nil {
		return "", false
	}
	return C.GoString(out), true
}

// EpochNum returns the epoch number: StartingEpoch-1 before training, the
// running epoch during it (tpt_trainer_epoch_num). The counters of a
// Trainer are those of its Context: plain values, 0 on a closed trainer.
func (t *Trainer) EpochNum() int64 {
	return t.counter("EpochNum", epochNum)
}

// LocalStep returns the 0-based index of the step inside the epoch, -1
// before the first (tpt_trainer_local_step).
func (t *Trainer) LocalStep() int64 {
	return t.counter("LocalStep", localStep)
}

// GlobalStep returns the number of hooked steps run, counting from the value
// set by SetGlobalStep (tpt_trainer_global_step).
func (t *Trainer) GlobalStep() int64 {
	return t.counter("GlobalStep", globalStep)
}

func (t *Trainer) counter(method string, get func(*C.tpt_trainer) (int64, error)) int64 {
	ptr, err := t.lock(method)
	if err != nil {
		return 0
	}
	defer t.mu.Unlock()
	v, err := get(ptr)
	if err != nil {
		return 0
	}
	return v
}

// SetGlobalStep sets the global step, e.g. after restoring a checkpoint
// (tpt_trainer_set_global_step). Before Run; during Run use
// Context.SetGlobalStep from a SETUP or BEFORE_TRAIN callback.
func (t *Trainer) SetGlobalStep(step int64) error {
	ptr, err := t.lock("SetGlobalStep")
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	return statusError(C.tpt_trainer_set_global_step(ptr, C.int64_t(step)))
}

// Logdir returns the log directory in use: the one given, or the one
// LogdirNew chose (tpt_trainer_logdir). "" without a log directory, before
// Run has set it up, or on a closed trainer.
func (t *Trainer) Logdir() string {
	ptr, err := t.lock("Logdir")
	if err != nil {
		return ""
	}
	defer t.mu.Unlock()
	return logdir(ptr)
}

// StepsPerEpoch is Context.StepsPerEpoch (tpt_trainer_steps_per_epoch); 0
// on a closed trainer.
func (t *Trainer) StepsPerEpoch() int64 {
	return t.counter("StepsPerEpoch", stepsPerEpoch)
}

// ResumedFrom is Context.ResumedFrom, e.g. after Run (tpt_trainer_resumed_from).
func (t *Trainer) ResumedFrom() string {
	ptr, err := t.lock("ResumedFrom")
	if err != nil {
		return ""
	}
	defer t.mu.Unlock()
	return resumedFrom(ptr)
}

// BestCheckpoint is Context.BestCheckpoint, e.g. after Run.
func (t *Trainer) BestCheckpoint(stat string) (string, error) {
	ptr, err := t.lock("BestCheckpoint")
	if err != nil {
		return "", err
	}
	defer t.mu.Unlock()
	return bestCheckpoint(ptr, stat)
}

func bestCheckpoint(ptr *C.tpt_trainer, stat string) (string, error) {
	cstat := C.CString(stat)
	defer C.free(unsafe.Pointer(cstat))
	var out *C.char
	if err := statusError(C.tpt_trainer_best_checkpoint(&out, ptr, cstat)); err != nil || out == nil {
		return "", err
	}
	return C.GoString(out), nil
}

func stepsPerEpoch(ptr *C.tpt_trainer) (int64, error) {
	var v C.int64_t
	err := statusError(C.tpt_trainer_steps_per_epoch(&v, ptr))
	return int64(v), err
}

func resumedFrom(ptr *C.tpt_trainer) string {
	var out *C.char
	if statusError(C.tpt_trainer_resumed_from(&out, ptr)) != nil || out == nil {
		return ""
	}
	return C.GoString(out)
}

func epochNum(ptr *C.tpt_trainer) (int64, error) {
	var v C.int64_t
	err := statusError(C.tpt_trainer_epoch_num(&v, ptr))
	return int64(v), err
}

func localStep(ptr *C.tpt_trainer) (int64, error) {
	var v C.int64_t
	err := statusError(C.tpt_trainer_local_step(&v, ptr))
	return int64(v), err
}

func globalStep(ptr *C.tpt_trainer) (int64, error) {
	var v C.int64_t
	err := statusError(C.tpt_trainer_global_step(&v, ptr))
	return int64(v), err
}

// must is for the Context's counters, which cannot fail while the Context
// is in use (during Run): a failure means a Context kept past its Trainer's
// Close, a programming error.
func mustCount(v int64, err error) int64 {
	if err != nil {
		panic("tptrain: Context used after its Trainer was closed: " + err.Error())
	}
	return v
}

func logdir(ptr *C.tpt_trainer) string {
	var out *C.char
	if statusError(C.tpt_trainer_logdir(&out, ptr)) != nil || out == nil {
		return ""
	}
	return C.GoString(out)
}

// ---- Models, towers, distributed jobs and train ops.

// SetModel makes t tensorpack's SimpleTrainer of model fed by input
// (tpt_trainer_set_model): each step takes a batch, runs the tower function,
// back-propagates the cost and applies the model's optimizer; the cost is
// the step output "cost" and the scalar "cost" is put each step. It replaces
// the run_step. It takes input over (also when it fails) and a reference to
// the model (the caller still owns model). If StepsPerEpoch is not set, the
// input's size is used. Batches are checked against the signature. Before
// Run.
func (t *Trainer) SetModel(model *Model, input *Input) error {
	iptr, ist, err := input.take("Trainer.SetModel")
	if err != nil {
		return err
	}
	mptr, err := model.rlock("SetModel")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer model.mu.RUnlock()
	ptr, err := t.lock("SetModel")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer t.mu.Unlock()
	st := C.tpt_trainer_set_model(ptr, mptr, iptr)
	runtime.KeepAlive(model)
	if err := statusError(st); err != nil {
		return err
	}
	t.stashes = append([]*stash{model.st}, ist...)
	t.ctx.model = model
	return nil
}

// Resume makes the run go on exactly from the checkpoint at path, a
// checkpoint file or a directory whose index names its latest
// (tpt_trainer_resume): variables, optimizer state, counters, random state,
// the input's position and callbacks' state. Before Run. The file is read
// and checked now; whether it fits the model is checked when Run starts,
// which then fails naming the variables.
func (t *Trainer) Resume(path string) error {
	ptr, err := t.lock("Resume")
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	st := C.tpt_trainer_resume(ptr, cpath)
	runtime.KeepAlive(t)
	return statusError(st)
}

// SetTowers makes t one of tensorpack's multi-GPU trainers of model fed by
// input, with the strategy and towers of opts (tpt_trainer_set_towers); the
// zero TowersOptions is 2 replicated CPU towers. It is SetModel with towers:
// every step each tower takes its own batch from input (the total batch is
// the input's batch times the number of towers) and runs the tower function
// at the same time as the others: tower 0 on the goroutine of Run, the
// others on threads of the library's own. The tower function must therefore
// be safe for concurrent use; Tower.Index and Tower.Name ("tower0",
// "tower1", ...) say which tower calls it. An error it returns in any tower
// fails the step and Run returns that very value (Stop ends training
// gracefully), a panic makes Run panic again, as with SetModel.
//
// The cost and outputs the loop reports are tower 0's; checkpoints hold
// tower 0's variables, as tensorpack's. If StepsPerEpoch is not set, it is
// the input's size divided by the number of towers (an epoch counts steps of
// all towers together), at least 1.
//
// It takes input over (also when it fails) and a reference to the model (the
// caller still owns model). Before Run. opts nil is the zero TowersOptions.
func (t *Trainer) SetTowers(model *Model, input *Input, opts *TowersOptions) error {
	if opts == nil {
		opts = &TowersOptions{}
	}
	iptr, ist, err := input.take("Trainer.SetTowers")
	if err != nil {
		return err
	}
	copts, free, err := cTowersOptions(opts, "Trainer.SetTowers")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer free()
	mptr, err := model.rlock("SetTowers")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer model.mu.RUnlock()
	ptr, err := t.lock("SetTowers")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer t.mu.Unlock()
	// Go memory holding C pointers only; the library reads it during the
	// call.
	st := C.tpt_trainer_set_towers(ptr, mptr, iptr, &copts)
	runtime.KeepAlive(model)
	if err := statusError(st); err != nil {
		return goTowersError(err)
	}
	t.stashes = append([]*stash{model.st}, ist...)
	t.ctx.model = model
	return nil
}

// SetDistributed makes t one rank of a distributed job: tensorpack's
// HorovodTrainer on LibTorch's c10d, Gloo over TCP
// (tpt_trainer_set_distributed). o nil is the zero DistributedOptions:
// everything from torchrun's environment variables, as tools/tptrain-run
// (tptrain-run -n 4 ./train ...) or torchrun set them. It joins the job
// now: it blocks until every rank has joined, at most the timeout.
//
// Call it before SetModel or SetTowers, which then train across the ranks:
// every rank trains its towers (the simple trainer becomes one replicated
// tower per rank; the async strategy cannot be distributed) on its share of
// the input, and before every update the gradients are summed over every
// tower of every rank, so N processes train as one process with N towers
// would. Rank 0 is the chief: it alone keeps the log directory and runs the
// chief-only callbacks (checkpoints, monitors, inference runners); its
// variables reach every rank before the first step, its non-trainable ones
// after every epoch, and every rank resumes from its checkpoint.
//
// A bad option or environment variable is an *Error of CodeInvalidArgument
// naming it, a failed rendezvous one of CodeBackend naming the address and
// the rank, a call after SetModel or SetTowers, or a second one, one of
// CodeState, and a build without c10d's Gloo one of CodeUnsupported.
func (t *Trainer) SetDistributed(o *DistributedOptions) error {
	const who = "Trainer.SetDistributed"
	var opts DistributedOptions
	if o != nil {
		opts = *o
	}
	copts, free, err := cDistributedOptions(&opts, who)
	if err != nil {
		return err
	}
	defer free()
	ptr, err := t.lock("SetDistributed")
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	// Go memory holding a C pointer only; the library reads it during the
	// call.
	return goDistributedError(statusError(C.tpt_trainer_set_distributed(ptr, &copts)))
}

// Rank returns this process's rank and the job's number of ranks: 0 and 1
// for a trainer that is not distributed (tpt_trainer_rank). Any time, also
// during Run; 0 and 0 on a closed trainer.
func (t *Trainer) Rank() (rank, worldSize int) {
	ptr, err := t.lock("Rank")
	if err != nil {
		return 0, 0
	}
	defer t.mu.Unlock()
	var r, n C.int32_t
	if statusError(C.tpt_trainer_rank(&r, &n, ptr)) != nil {
		return 0, 0
	}
	return int(r), int(n)
}

// SetGAN makes t tensorpack's GANTrainer of model fed by input, or with
// o.Separate its SeparateGANTrainer, or with o.Towers its
// MultiGPUGANTrainer (tpt_trainer_set_gan); o nil is the zero GANOptions, a
// GANTrainer. It is SetModel (SetTowers with o.Towers) followed by the
// GAN's run_step, made of the model's train ops o.GOp and o.DOp ("g_op" and
// "d_op"): when the model lacks them they are made as tensorpack's
// GANModelDesc does, the tower's output "g_loss" minimised over the
// variables under "gen/" and "d_loss" over those under "discrim/", each by
// a copy of the model's optimizer (add them with Model.AddTrainOp first to
// choose otherwise). Every hooked run publishes the tower's outputs, so
// "g_loss" and "d_loss" reach the monitors.
//
// With o.Towers every tower takes its own batch and runs the tower function
// at the same time as the others (see SetTowers), and each op minimises its
// cost averaged over the towers. A trainer made a rank of a distributed job
// (SetDistributed) trains the GAN across the ranks, each op's cost averaged
// over every tower of every rank.
//
// A bad option is an *Error of CodeInvalidArgument naming the GANOptions
// field; o.Towers with StrategyAsync is one of CodeUnsupported. It takes
// input over (also when it fails) and a reference to the model (the caller
// still owns model). A later SetRunStep or SetTrainOps replaces the GAN's
// run_step (Context.RunTrainOps runs the ops). Before Run.
func (t *Trainer) SetGAN(model *Model, input *Input, o *GANOptions) error {
	const who = "Trainer.SetGAN"
	iptr, ist, err := input.take(who)
	if err != nil {
		return err
	}
	var opts GANOptions
	if o != nil {
		opts = *o
	}
	copts, free, err := cGANOptions(&opts, who)
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer free()
	mptr, err := model.rlock("SetGAN")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer model.mu.RUnlock()
	ptr, err := t.lock("SetGAN")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer t.mu.Unlock()
	// Go memory holding C pointers only; the library reads it during the
	// call and takes the input.
	st := C.tpt_trainer_set_gan(ptr, mptr, iptr, &copts)
	runtime.KeepAlive(model)
	if err := statusError(st); err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Message = ganFieldNames.Replace(e.Message)
		}
		return err
	}
	t.stashes = append([]*stash{model.st}, ist...)
	t.ctx.model = model
	return nil
}

// SetTrainOps replaces t's default step by the model's train ops names,
// tensorpack's trainer.train_op (tpt_trainer_set_train_ops): every run_step
// is then one hooked run of the ops in order, as a run_step
// (SetRunStep) that returns Context.RunTrainOps(names...) would be, without
// crossing into Go each step. Each step takes a batch, runs the tower
// function once (once per tower), computes every named op's gradients from
// that pass, then applies each op's update in order; the global step
// advances by one and the tower's outputs are published.
//
// Call it after SetModel, SetTowers, SetGAN (whose run_step it replaces) or
// NewTrainerFromConfig, and before Run; a later SetRunStep replaces it. With
// towers each op's gradients are averaged over the towers; the async
// strategy runs no train ops, and Run then fails with an *Error of
// CodeUnsupported.
//
// No name, an empty name, one holding a NUL byte, or one that is not a
// train op of the model is an *Error of CodeInvalidArgument naming it (and
// the ops the model has); a call before a model is set, or after Run, one
// of CodeState.
func (t *Trainer) SetTrainOps(names ...string) error {
	const who = "Trainer.SetTrainOps"
	if len(names) == 0 {
		return &Error{Code: CodeInvalidArgument, Message: who + ": no train op: give their names"}
	}
	for i, n := range names {
		if err := noNUL(who, "names["+strconv.Itoa(i)+"]", n); err != nil {
			return err
		}
	}
	ptr, err := t.lock("SetTrainOps")
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	cnames, free := cStrings(names) // the library reads them during the call
	defer free()
	err = statusError(C.tpt_trainer_set_train_ops(ptr, &cnames[0], C.size_t(len(cnames))))
	var e *Error
	if errors.As(err, &e) {
		e.Message = setTrainOpsNames.Replace(e.Message)
	}
	return err
}

// AddCallback registers a user callback (tpt_trainer_add_callback). It takes
// cb over, also when it fails. A chief-only callback on a trainer that is not
// the chief is dropped (and released) with a log line. Before Run only.
func (t *Trainer) AddCallback(cb *Callback) error {
	return t.add("AddCallback", cb, false)
}

// AddMonitor registers a monitor: a callback that asked for EventRecord (and
// any other events it wants), registered after every other callback
// (tpt_trainer_add_monitor). It takes monitor over, also when it fails.
// Before Run only.
func (t *Trainer) AddMonitor(monitor *Callback) error {
	return t.add("AddMonitor", monitor, true)
}

func (t *Trainer) add(method string, cb *Callback, monitor bool) error {
	cptr, funcs, _, err := cb.take("Trainer." + method)
	if err != nil {
		return err
	}
	ptr, err := t.lock(method)
	if err != nil {
		C.tpt_callback_free(cptr)
		return err
	}
	defer t.mu.Unlock()
	for _, f := range funcs {
		f.ctx = t.ctx
		t.cbStashes = append(t.cbStashes, f.stashes...)
	}
	if monitor {
		return statusError(C.tpt_trainer_add_monitor(ptr, cptr))
	}
	return statusError(C.tpt_trainer_add_callback(ptr, cptr))
}

// ScalarLatest is Context.ScalarLatest, e.g. after Run.
func (t *Trainer) ScalarLatest(name string) (value float64, step int64, err error) {
	ptr, err := t.lock("ScalarLatest")
	if err != nil {
		return 0, 0, err
	}
	defer t.mu.Unlock()
	return scalarLatest(ptr, name)
}

// ScalarHistory is Context.ScalarHistory, e.g. after Run.
func (t *Trainer) ScalarHistory(name string) (steps []int64, values []float64, err error) {
	ptr, err := t.lock("ScalarHistory")
	if err != nil {
		return nil, nil, err
	}
	defer t.mu.Unlock()
	return scalarHistory(ptr, name)
}

// setTrainOpsNames spells the C functions and fields that the library's
// messages about SetTrainOps name as this package does.
var setTrainOpsNames = strings.NewReplacer(
	"(tpt_trainer_set_model or tpt_trainer_set_towers first)", "(Trainer.SetModel, Trainer.SetTowers or Trainer.SetGAN first)",
	"none: tpt_model_add_train_op", "none: Model.AddTrainOp",
)

func scalarLatest(ptr *C.tpt_trainer, name string) (float64, int64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var v C.double
	var step C.int64_t
	if err := statusError(C.tpt_trainer_scalar_latest(&v, &step, ptr, cname)); err != nil {
		return 0, 0, err
	}
	return float64(v), int64(step), nil
}

func scalarHistory(ptr *C.tpt_trainer, name string) ([]int64, []float64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var n C.size_t
	if err := statusError(C.tpt_trainer_scalar_history(&n, nil, nil, 0, ptr, cname)); err != nil {
		return nil, nil, err
	}
	steps := make([]int64, int(n))
	values := make([]float64, int(n))
	if n == 0 {
		return steps, values, nil
	}
	st := C.tpt_trainer_scalar_history(&n, (*C.int64_t)(unsafe.Pointer(&steps[0])),
		(*C.double)(unsafe.Pointer(&values[0])), C.size_t(len(steps)), ptr, cname)
	if err := statusError(st); err != nil {
		return nil, nil, err
	}
	return steps, values, nil
}
