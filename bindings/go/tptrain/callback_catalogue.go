package tptrain

// The library's callbacks that are not in a section of their own:
// hyper-parameter setters (next to ScheduledHyperParam in the header) and
// the header section "More callbacks" (early stopping, TerminateOnNaN,
// throughput, the step watchdog, host memory). Each returns a new *Callback
// for AddCallback or TrainConfig.Callbacks.

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"strconv"
	"time"
	"unsafe"
)

// ---- Hyper-parameter setters.

// hyperParamFunc is what the hyper-parameter trampoline finds behind its
// handle.
type hyperParamFunc struct {
	where string // for panics: "HyperParamSetterWithFunc(learning_rate)"
	fn    func(epoch int64, current float64) (float64, error)
	st    *stash
}

// HyperParamFunc makes tensorpack's HyperParamSetterWithFunc
// (tpt_callback_hyperparam_func): in BEFORE_TRAIN and after each epoch it
// sets the optimizer's hyper-parameter param to fn(epoch, current), where
// epoch is the number of finished epochs (StartingEpoch-1 in BEFORE_TRAIN,
// so a resumed run follows the function) and current the value in force.
// fn runs on the goroutine of Run; an error it returns fails training and
// Run returns that very value; a panic makes Run panic again with the same
// value. It keeps a reference to the optimizer.
func HyperParamFunc(opt *Optimizer, param string, fn func(epoch int64, current float64) (float64, error)) (*Callback, error) {
	if fn == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "HyperParamFunc: fn is nil"}
	}
	ptr, err := opt.lock("HyperParamFunc")
	if err != nil {
		return nil, err
	}
	defer opt.mu.Unlock()
	name := "HyperParamSetterWithFunc(" + param + ")"
	f := &hyperParamFunc{where: name, fn: fn, st: &stash{}}
	h := newHandle(f)
	cparam := C.CString(param)
	defer C.free(unsafe.Pointer(cparam))
	var out *C.tpt_callback
	// The library deletes h (also when this fails).
	if err := statusError(C.tptgo_callback_hyperparam_func(&out, ptr, cparam, C.uintptr_t(h))); err != nil {
		return nil, err
	}
	// The trainer that takes the callback consults the stash in Run.
	return newCallback(out, []*hostFunc{{name: name, stashes: []*stash{f.st}}}, name), nil
}

// StatMonitorOptions are the options of StatMonitorParam
// (tpt_stat_monitor_options). nil or the zero value is the defaults: compare the
// last 5 values, threshold 0, lower is better, multiply by 0.1, no limit.
type StatMonitorOptions struct {
	// LastK is how many values are compared, >= 2; 0 means 5.
	LastK int64
	// Threshold an improvement must exceed, >= 0.
	Threshold float64
	// Maximize: the stat should grow (tensorpack's reverse).
	Maximize bool
	// Factor is what the value is multiplied by, > 0; 0 means 0.1.
	Factor float64
	// Limit is a bound the value never passes: a floor when Factor < 1, a
	// ceiling when Factor > 1; 0 means no limit.
	Limit float64
}

// StatMonitorParam makes tensorpack's StatMonitorParamSetter (reduce on
// plateau; tpt_callback_stat_monitor_param): after each epoch it takes the
// newest value of the scalar stat (a step it has already seen is skipped)
// into a window of the last LastK values; when the window is full and its
// first value was not beaten by more than Threshold, it multiplies the
// optimizer's hyper-parameter param by Factor and empties the window. The
// window is kept in checkpoints. Register it after the callback that puts
// stat.
func StatMonitorParam(opt *Optimizer, param, stat string, o *StatMonitorOptions) (*Callback, error) {
	if o == nil {
		o = &StatMonitorOptions{}
	}
	ptr, err := opt.lock("StatMonitorParam")
	if err != nil {
		return nil, err
	}
	defer opt.mu.Unlock()
	c := defaultStatMonitorOptions()
	c.threshold, c.maximize, c.limit = C.double(o.Threshold), cBool(o.Maximize), C.double(o.Limit)
	if o.LastK != 0 {
		c.last_k = C.int64_t(o.LastK)
	}
	if o.Factor != 0 {
		c.factor = C.double(o.Factor)
	}
	cparam := C.CString(param)
	defer C.free(unsafe.Pointer(cparam))
	cstat := C.CString(stat)
	defer C.free(unsafe.Pointer(cstat))
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_stat_monitor_param(&out, ptr, cparam, cstat, &c)); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "StatMonitorParamSetter("+param+")"), nil
}

// HumanHyperParam makes tensorpack's HumanHyperParamSetter
// (tpt_callback_human_hyperparam): in BEFORE_TRAIN and after each epoch it
// reads file, lines of the form name:value, and sets the optimizer's
// hyper-parameter param to its value there. file "" means "hyper.txt"; a
// relative name is in the log directory. A missing file or name changes
// nothing; a line that does not parse is logged and skipped. Edit the file
// while training runs to change the learning rate by hand.
func HumanHyperParam(opt *Optimizer, param, file string) (*Callback, error) {
	ptr, err := opt.lock("HumanHyperParam")
	if err != nil {
		return nil, err
	}
	defer opt.mu.Unlock()
	cparam := C.CString(param)
	defer C.free(unsafe.Pointer(cparam))
	var cfile *C.char
	if file != "" {
		cfile = C.CString(file)
		defer C.free(unsafe.Pointer(cfile))
	}
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_human_hyperparam(&out, ptr, cparam, cfile)); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "HumanHyperParamSetter("+param+")"), nil
}

// ---- More callbacks.

// EarlyStoppingOptions are the options of EarlyStopping
// (tpt_early_stopping_options). nil or the zero value is the defaults: a patience
// of 3, any improvement counts, lower is better.
type EarlyStoppingOptions struct {
	// Patience is how many new values without an improvement end
	// training, >= 1; 0 means 3.
	Patience int64
	// MinDelta: an improvement is by more than this, >= 0.
	MinDelta float64
	// Maximize: higher is better.
	Maximize bool
}

// EarlyStopping makes an early-stopping callback (Keras' EarlyStopping;
// tpt_callback_early_stopping): after each epoch it reads the newest value
// of the scalar stat (a step it has already seen does not count). After
// Patience new values without an improvement on the best by more than
// MinDelta, training stops gracefully: Run returns nil and StopReason names
// the stat, its best value and the step of the best. The savers still save
// that epoch, and its checkpoint records the stop, so a rerun with
// AutoResume leaves the run stopped. Its best value and count are kept in
// checkpoints. It runs after the callbacks that put scalars, whatever the
// order they were added in; a stat nobody has put by the end of an epoch
// it runs at (a misspelt name) fails the run with CodeNotFound, naming the
// scalars put, the closest first.
func EarlyStopping(stat string, o *EarlyStoppingOptions) (*Callback, error) {
	if o == nil {
		o = &EarlyStoppingOptions{}
	}
	c := defaultEarlyStoppingOptions()
	c.min_delta, c.maximize = C.double(o.MinDelta), cBool(o.Maximize)
	if o.Patience != 0 {
		c.patience = C.int64_t(o.Patience)
	}
	cstat := C.CString(stat)
	defer C.free(unsafe.Pointer(cstat))
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_early_stopping(&out, cstat, &c)); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "EarlyStopping("+stat+")"), nil
}

// TerminateOnNaN makes tensorpack's TerminateOnNaN
// (tpt_callback_terminate_on_nan): after every hooked step it checks the
// step's scalar outputs named in outputs (none: "cost") and stops training
// gracefully when one is NaN or infinite, with a reason naming it and the
// step. It comes before any checkpoint of that step, and a ModelSaver never
// writes variables that are not finite, so the last checkpoint is a good
// one.
func TerminateOnNaN(outputs ...string) (*Callback, error) {
	cs, free := cStrings(outputs)
	defer free()
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_terminate_on_nan(&out, firstString(cs), C.size_t(len(cs)))); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "TerminateOnNaN"), nil
}

// ThroughputTracker makes tensorpack's ThroughputTracker
// (tpt_callback_throughput): it times the steps of each epoch (without the
// epoch's callbacks) and at every TRIGGER puts the scalar
// "Throughput (steps/sec)", or with samplesPerStep > 0
// "Throughput (samples/sec)", over the steps since the last trigger.
func ThroughputTracker(samplesPerStep int64) (*Callback, error) {
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_throughput(&out, C.int64_t(samplesPerStep))); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "ThroughputTracker"), nil
}

// StepWatchdog makes a step watchdog (tensorpack's SessionRunTimeout, for a
// whole step; tpt_callback_step_watchdog): a thread of its own watches each
// step (run_step with its wait for input, and the per-step callbacks). A
// step still running after timeout is logged as an error at once and a stop
// is requested; when the step returns, training fails with an *Error of
// CodeTimeout (errors.Is(err, ErrTimeout)) naming the step and its time. A
// step that never returns cannot be interrupted: the log line then says
// why. timeout must be > 0.
func StepWatchdog(timeout time.Duration) (*Callback, error) {
	if timeout <= 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "StepWatchdog: the timeout must be > 0, got " + timeout.String()}
	}
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_step_watchdog(&out, C.double(timeout.Seconds()))); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "StepWatchdog"), nil
}

// HostMemoryTracker makes tensorpack's HostMemoryTracker
// (tpt_callback_host_memory): it logs the host's available memory in SETUP
// and BEFORE_TRAIN, and at every TRIGGER puts the scalars
// "HostFreeMemory (GB)" (the kernel's MemAvailable) and
// "HostResidentMemory (MB)" (this process's resident set). Linux only:
// elsewhere an *Error of CodeUnsupported.
func HostMemoryTracker() (*Callback, error) {
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_host_memory(&out)); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "HostMemoryTracker"), nil
}

// Unlimited as ModelSaverOptions.MaxToKeep keeps every checkpoint.
const Unlimited = -1

// Never as ModelSaverOptions.KeepEveryNHours keeps no checkpoint for its
// age; as ModelSaverOptions.EveryKEpochs it saves at no epoch's end.
const Never = -1

// ModelSaverOptions are the options of ModelSaver
// (tpt_model_saver_options). nil or the zero value is tensorpack's
// defaults: save after every epoch into the log directory, keep the newest
// 10, and keep one per half hour beyond them.
type ModelSaverOptions struct {
	// MaxToKeep is how many of the newest checkpoints stay; 0 means 10,
	// Unlimited keeps every one.
	MaxToKeep int
	// KeepEveryNHours: one checkpoint per this many hours is never deleted;
	// 0 means 0.5, Never keeps none for its age.
	KeepEveryNHours float64
	// EveryKSteps also saves every k global steps (0: not step-based).
	EveryKSteps int64
	// EveryKEpochs saves after every k-th epoch; 0 means 1, Never saves at
	// no epoch's end (then EveryKSteps must be set).
	EveryKEpochs int64
	// Dir is the checkpoint directory; "" means the trainer's log directory.
	Dir string
}

// ModelSaver makes tensorpack's ModelSaver (tpt_callback_model_saver): a
// chief-only callback that writes model-<global_step> and the index file
// "checkpoint" atomically, deleting the oldest beyond MaxToKeep. An IO error
// while saving is logged and training goes on. o nil means the defaults.
func ModelSaver(o *ModelSaverOptions) (*Callback, error) {
	if o == nil {
		o = &ModelSaverOptions{}
	}
	c := defaultModelSaverOptions()
	c.every_k_steps = C.int64_t(o.EveryKSteps)
	switch {
	case o.MaxToKeep == Unlimited:
		c.max_to_keep = 0
	case o.MaxToKeep < 0 || o.MaxToKeep > 1<<30:
		return nil, &Error{Code: CodeInvalidArgument,
			Message: "ModelSaverOptions.MaxToKeep must be from 0 to 2^30, or Unlimited, got " + strconv.Itoa(o.MaxToKeep)}
	case o.MaxToKeep != 0:
		c.max_to_keep = C.int32_t(o.MaxToKeep)
	}
	switch {
	case o.KeepEveryNHours == Never:
		c.keep_every_n_hours = 0
	case o.KeepEveryNHours != 0:
		c.keep_every_n_hours = C.double(o.KeepEveryNHours)
	}
	switch {
	case o.EveryKEpochs == Never:
		c.every_k_epochs = 0
	case o.EveryKEpochs != 0:
		c.every_k_epochs = C.int64_t(o.EveryKEpochs)
	}
	if o.Dir != "" {
		c.dir = C.CString(o.Dir)
		defer C.free(unsafe.Pointer(c.dir))
	}
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_model_saver(&out, &c)); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "ModelSaver"), nil
}

// BestSaverOptions are the options of MinSaver and MaxSaver; nil or the zero value
// is the defaults.
type BestSaverOptions struct {
	// Filename of the copy; "" means min-<stat> / max-<stat>.
	Filename string
	// Dir of the checkpoints; "" means the log directory.
	Dir string
}

// MinSaver makes tensorpack's MinSaver (tpt_callback_min_saver): when the
// latest value of the scalar stat is the lowest so far, the newest
// checkpoint, which must be of that step, is copied to min-<stat>. The
// trainer runs it after the ModelSaver and the callbacks that put scalars,
// whatever the order they were added in; a stat nobody has put by the end
// of an epoch it runs at fails the run with CodeNotFound.
func MinSaver(stat string, o *BestSaverOptions) (*Callback, error) { return bestSaver(stat, o, false) }

// MaxSaver is MinSaver for the highest value, copied to max-<stat>
// (tpt_callback_max_saver).
func MaxSaver(stat string, o *BestSaverOptions) (*Callback, error) { return bestSaver(stat, o, true) }

func bestSaver(stat string, o *BestSaverOptions, maximize bool) (*Callback, error) {
	if o == nil {
		o = &BestSaverOptions{}
	}
	cstat := C.CString(stat)
	defer C.free(unsafe.Pointer(cstat))
	var file, dir *C.char
	if o.Filename != "" {
		file = C.CString(o.Filename)
		defer C.free(unsafe.Pointer(file))
	}
	if o.Dir != "" {
		dir = C.CString(o.Dir)
		defer C.free(unsafe.Pointer(dir))
	}
	var out *C.tpt_callback
	var st *C.tpt_status
	name := "MinSaver"
	if maximize {
		name = "MaxSaver"
		st = C.tpt_callback_max_saver(&out, cstat, file, dir)
	} else {
		st = C.tpt_callback_min_saver(&out, cstat, file, dir)
	}
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newCallback(out, nil, name), nil
}

// SchedulePoint is one point of a hyper-parameter schedule: from epoch (or
// global step) At on, Value (tpt_schedule_point).
type SchedulePoint struct {
	At    int64
	Value float64
}

// ScheduleOptions are the options of ScheduledHyperParam; nil or the zero value is
// tensorpack's defaults (epoch-based, no interpolation, set at the
// beginning).
type ScheduleOptions struct {
	Linear         bool // interpolate between points at every trigger
	StepBased      bool // points are global steps, checked at every step
	NotAtBeginning bool // do not set the schedule's value in BEFORE_TRAIN
}

// ScheduledHyperParam makes tensorpack's ScheduledHyperParamSetter
// (tpt_callback_scheduled_hyperparam): it sets the optimizer's
// hyper-parameter param after epoch At completes (0: before the first
// epoch), or at global step At with StepBased; in BEFORE_TRAIN it sets what
// the schedule says for the epochs completed, so a resumed run follows it.
func ScheduledHyperParam(opt *Optimizer, param string, schedule []SchedulePoint, o *ScheduleOptions) (*Callback, error) {
	if o == nil {
		o = &ScheduleOptions{}
	}
	ptr, err := opt.lock("ScheduledHyperParam")
	if err != nil {
		return nil, err
	}
	defer opt.mu.Unlock()
	if len(schedule) == 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "ScheduledHyperParam: the schedule is empty"}
	}
	// The points in C memory: no Go pointer is passed to C inside another.
	mem := C.malloc(C.size_t(len(schedule)) * C.size_t(unsafe.Sizeof(C.tpt_schedule_point{})))
	defer C.free(mem)
	pts := unsafe.Slice((*C.tpt_schedule_point)(mem), len(schedule))
	for i, p := range schedule {
		pts[i] = C.tpt_schedule_point{at: C.int64_t(p.At), value: C.double(p.Value)}
	}
	var flags C.uint32_t
	if o.Linear {
		flags |= C.TPT_SCHEDULE_LINEAR
	}
	if o.StepBased {
		flags |= C.TPT_SCHEDULE_STEP_BASED
	}
	if o.NotAtBeginning {
		flags |= C.TPT_SCHEDULE_NOT_AT_BEGINNING
	}
	cparam := C.CString(param)
	defer C.free(unsafe.Pointer(cparam))
	var out *C.tpt_callback
	st := C.tpt_callback_scheduled_hyperparam(&out, ptr, cparam, &pts[0], C.size_t(len(schedule)), flags)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "ScheduledHyperParamSetter("+param+")"), nil
}
