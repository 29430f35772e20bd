package tptrain

// tensorpack's TrainConfig and launch_train_with_config (include/tptrain/launch.h).

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
)

// ---- TrainConfig and launch.

// TrainConfig describes a training, as tensorpack's TrainConfig
// (tpt_train_config), for NewTrainerFromConfig and LaunchTrain.
type TrainConfig struct {
	// Options are the trainer's options; nil means the defaults, with
	// StepsPerEpoch from the input.
	Options *TrainerOptions
	// Model is the model to train (required); the trainer takes its own
	// reference: the caller still owns Model.
	Model *Model
	// Input gives the batches; it is taken over. Give Input or DataFlow,
	// not both.
	Input *Input
	// DataFlow gives the batches (its components in signature order,
	// usually a Batch) through a queue input, as tensorpack wraps a
	// DataFlow in a QueueInput; the trainer keeps its own reference (the
	// caller still owns DataFlow). Its size is the default StepsPerEpoch.
	DataFlow *DataFlow
	// InputOptions, with DataFlow, shape the input made from it (its kind,
	// the queue's capacity, Once), as InputFromDataFlow takes them; nil
	// means the defaults (a queue of 50 batches that repeats). An error
	// with Input.
	InputOptions *InputOptions
	// Callbacks are registered as user callbacks, in order; taken over.
	Callbacks []*Callback
	// Monitors are registered after the default monitors; taken over.
	Monitors []*Callback
	// Towers, if not nil, are the strategy and towers of a multi-tower
	// trainer (as Trainer.SetTowers; &TowersOptions{} is 2 replicated CPU
	// towers); nil means the simple trainer (one tower, as
	// Trainer.SetModel). With towers, the default StepsPerEpoch is the
	// input's size divided by the number of towers.
	Towers *TowersOptions
	// Distributed, if not nil, makes this process one rank of a distributed
	// job (as Trainer.SetDistributed; &DistributedOptions{} takes everything
	// from torchrun's environment variables): NewTrainerFromConfig joins the
	// job, blocking until every rank has, and the trainer (simple, or with
	// Towers) trains across the ranks. nil means one process.
	Distributed *DistributedOptions
	// Init, if not nil, is the init / restore hook (tensorpack's
	// session_init): it runs once on the chief, after the model's build call
	// and before BEFORE_TRAIN, e.g. to load weights with Model.SetVariable.
	// Its *Model is the library's handle on the model, valid during the
	// call only. It returns nil, Stop(reason) to end training gracefully,
	// or an error that fails it: Run returns that very value. A panic makes
	// Run panic again with the same value, as for callbacks.
	Init func(m *Model) error
}

// initFunc is what the init trampoline finds behind its handle.
type initFunc struct {
	ctx *Context
	fn  func(*Model) error
	st  *stash // the model's: errors and panics of its tower function
}

// NewTrainerFromConfig makes tensorpack's simple trainer, or with cfg.Towers
// a multi-tower trainer, from a config without running it
// (tpt_trainer_from_config): the trainer of cfg.Model (as SetModel, or
// SetTowers) fed by cfg.Input or by cfg.DataFlow in a queue input (one of
// the two; both or neither is an *Error of CodeInvalidArgument), with
// cfg.Callbacks registered in order, then cfg.Monitors, and the init hook.
// With cfg.Distributed it first joins the job, as Trainer.SetDistributed
// (blocking until every rank has joined). Add more callbacks if needed, then
// Run; Close the trainer when done.
//
// The input, the callbacks and the monitors are taken over, also when it
// fails: a nil Model, or neither Input nor DataFlow, is reported by the
// library, and everything else handed over is still released. The trainer
// keeps the init hook until it is closed.
func NewTrainerFromConfig(cfg *TrainConfig) (*Trainer, error) {
	if cfg == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "NewTrainerFromConfig: cfg is nil"}
	}
	const who = "NewTrainerFromConfig"
	var firstErr error
	note := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	// Take everything handed over first: it is released whatever happens.
	var iptr *C.tpt_input
	var ist []*stash
	if cfg.Input != nil { // nil (with a DataFlow, or none: the library says so)
		var err error
		if iptr, ist, err = cfg.Input.take(who); err != nil {
			note(err)
		}
	}
	var dptr *C.tpt_dataflow
	var dst []*stash
	if df := cfg.DataFlow; df != nil {
		var err error
		if dptr, err = df.lock(who + ": DataFlow"); err != nil {
			note(err)
		} else {
			defer df.mu.Unlock()
			dst = df.stashes
		}
	}
	var funcs []*hostFunc
	takeAll := func(cbs []*Callback, what string) []*C.tpt_callback {
		ptrs := make([]*C.tpt_callback, 0, len(cbs))
		for i, cb := range cbs {
			ptr, fs, _, err := cb.take(who + ": " + what + "[" + strconv.Itoa(i) + "]")
			if err != nil {
				note(err)
				continue
			}
			ptrs = append(ptrs, ptr)
			funcs = append(funcs, fs...)
		}
		return ptrs
	}
	callbacks := takeAll(cfg.Callbacks, "Callbacks")
	monitors := takeAll(cfg.Monitors, "Monitors")
	var mptr *C.tpt_model
	var mst *stash
	if m := cfg.Model; m != nil { // nil: the library says so
		m.mu.RLock()
		defer m.mu.RUnlock()
		if mptr, mst = m.ptr, m.st; mptr == nil {
			note(&Error{Code: CodeInvalidArgument, Message: who + ": use of closed Model"})
		}
	}
	releaseAll := func() {
		C.tpt_input_free(iptr)
		for _, p := range append(callbacks, monitors...) {
			C.tpt_callback_free(p)
		}
	}
	if firstErr != nil {
		releaseAll()
		return nil, firstErr
	}
	var optp *C.tpt_trainer_options
	if cfg.Options != nil {
		copts, free, err := cTrainerOptions(cfg.Options)
		if err != nil {
			releaseAll()
			return nil, err
		}
		defer free()
		optp = &copts
	}
	var towersp *C.tpt_towers_options
	if cfg.Towers != nil {
		ctowers, free, err := cTowersOptions(cfg.Towers, who)
		if err != nil {
			releaseAll()
			return nil, err
		}
		defer free()
		towersp = &ctowers
	}
	var distp *C.tpt_distributed_options
	if cfg.Distributed != nil {
		cdist, free, err := cDistributedOptions(cfg.Distributed, who)
		if err != nil {
			releaseAll()
			return nil, err
		}
		defer free()
		distp = &cdist
	}
	var inputp *C.tpt_input_options
	if cfg.InputOptions != nil {
		copts := cInputOptions(cfg.InputOptions)
		inputp = &copts
	}
	ctx := &Context{model: cfg.Model}
	for _, f := range funcs {
		f.ctx = ctx
	}
	var h cgo.Handle
	if cfg.Init != nil {
		h = newHandle(&initFunc{ctx: ctx, fn: cfg.Init, st: mst})
	}
	var out *C.tpt_trainer
	// Go memory holding C pointers only: the library reads the arrays and
	// options during the call and takes the input and every callback (also
	// when it fails). It only borrows h, which the trainer deletes when
	// closed.
	st := C.tptgo_trainer_from_config(&out, optp, mptr, iptr, dptr, firstCallback(callbacks), C.size_t(len(callbacks)),
		firstCallback(monitors), C.size_t(len(monitors)), C.uintptr_t(h), towersp, distp, inputp)
	runtime.KeepAlive(cfg.Model)
	runtime.KeepAlive(cfg.DataFlow)
	if err := statusError(st); err != nil {
		if h != 0 {
			deleteHandle(h) // no trainer refers to it any more
		}
		var e *Error
		if errors.As(err, &e) && strings.Contains(e.Message, "options->steps_per_epoch is not set") {
			// The option as Go spells it.
			e.Message = strings.NewReplacer(
				"tpt_trainer_from_config: ", who+": ",
				"options->steps_per_epoch", "TrainerOptions.StepsPerEpoch",
				"give the source a size", "make the source with a size (DataFlowFromFuncSized)").Replace(e.Message)
		}
		if cfg.Towers != nil {
			err = goTowersError(err)
		}
		if cfg.Distributed != nil {
			err = goDistributedError(err)
		}
		return nil, err
	}
	t := newTrainer(out, ctx)
	t.initHandle = h
	t.stashes = append(append([]*stash{mst}, ist...), dst...)
	for _, f := range funcs {
		t.cbStashes = append(t.cbStashes, f.stashes...)
	}
	return t, nil
}

func firstCallback(ptrs []*C.tpt_callback) **C.tpt_callback {
	if len(ptrs) == 0 {
		return nil
	}
	return &ptrs[0]
}

// Outcome says how a training that did not fail ended, as Rust's RunOutcome.
type Outcome struct {
	// Stopped is false when training ran to MaxEpoch; true when a stop
	// ended it first: a function returned a *StopError (Stop), RequestStop
	// was called, the input's data ended, or the context was done.
	Stopped bool
	// Reason is why it stopped (StopReason; "" when it ran to MaxEpoch).
	Reason string
	// GlobalStep and EpochNum are the trainer's counters at the end (also
	// when an error ended the run): the steps run, and the last epoch.
	GlobalStep, EpochNum int64
	// ResumedFrom is the checkpoint the run resumed from (ResumedFrom);
	// "" for a fresh start.
	ResumedFrom string
}

// LaunchTrain is tensorpack's launch_train_with_config: it makes the trainer
// of cfg (NewTrainerFromConfig), runs it with RunContext(ctx) and closes it,
// as tpt_launch_train does. It returns how training ended and nil, or the
// error that ended it (an error returned by a callback, the init hook, the
// tower or the feed function comes back unchanged; ctx.Err() when ctx ended
// it, with the Outcome filled in). A panic in one of them makes LaunchTrain
// panic again with the same value once training has ended. It takes cfg's
// input, callbacks and monitors over, also when it fails.
func LaunchTrain(ctx context.Context, cfg *TrainConfig) (Outcome, error) {
	// Not a call of tpt_launch_train itself: the Go side of the trainer
	// (its Context, the stashes of errors and panics) is Trainer's.
	t, err := NewTrainerFromConfig(cfg)
	if err != nil {
		return Outcome{}, err
	}
	defer t.Close()
	err = t.RunContext(ctx)
	var out Outcome
	out.GlobalStep = t.GlobalStep()
	out.EpochNum = t.EpochNum()
	out.ResumedFrom = t.ResumedFrom()
	if err == nil || err == ctx.Err() {
		out.Reason, out.Stopped = t.StopReason()
	}
	if err == ctx.Err() && err != nil {
		out.Stopped, out.Reason = true, err.Error()
	}
	return out, err
}
