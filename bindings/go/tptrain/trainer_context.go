package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"strconv"
	"strings"
	"unsafe"
)

// ---- Context: the loop seen from run_step, steps and callbacks (the
// trainer's functions, tpt_trainer_*, called from inside the loop).

// Context is what run_step, hooked steps, callbacks and predicates receive:
// the trainer as seen from inside the loop. It is valid while the Trainer is
// open and is used on the goroutine that called Run.
type Context struct {
	ptr   *C.tpt_trainer // nil once the Trainer is closed
	self  cgo.Handle     // refers to this Context: user_data of hooked steps
	model *Model         // the model given by SetModel or a TrainConfig

	// The steps of the hooked steps in progress, innermost last.
	steps []func(*Context) error
	// The Go errors behind the statuses trampolines returned during Run.
	errs []stashedError
	// The first panic recovered by a trampoline and not yet passed on, and
	// where it happened ("callback 'name'").
	panicking  bool
	panicValue any
	panicWhere string
	// Where the panic HookedStep passed on to run_step happened.
	unwinding string
	// During Run, the stashes of the tower, feed and dataflow functions
	// (Trainer.stashes and cbStashes), which RunTrainOps consults.
	stashes []*stash
}

// EpochNum returns the epoch number: StartingEpoch-1 before training, the
// running epoch during it (also in TRIGGER_EPOCH) (tpt_trainer_epoch_num).
func (c *Context) EpochNum() int64 { return mustCount(epochNum(c.ptr)) }

// LocalStep returns the 0-based index of the step inside the epoch, -1
// before the first (tpt_trainer_local_step).
func (c *Context) LocalStep() int64 { return mustCount(localStep(c.ptr)) }

// GlobalStep returns the number of hooked steps run (tpt_trainer_global_step).
// It is already advanced in the AFTER_RUN of user callbacks and in
// TRIGGER_STEP.
func (c *Context) GlobalStep() int64 { return mustCount(globalStep(c.ptr)) }

// RequestStop asks the run to stop before its next step, as
// Trainer.RequestStop does (tpt_trainer_request_stop): the run is
// interrupted, and a rerun with AutoResume goes on from where it stopped.
// Returning Stop from a callback instead ends the run as stopped, which
// such a rerun leaves stopped (TrainerOptions.AutoResume).
func (c *Context) RequestStop() { C.tpt_status_free(C.tpt_trainer_request_stop(c.ptr)) }

// SetGlobalStep sets the global step from a SETUP or BEFORE_TRAIN callback,
// e.g. after restoring a checkpoint (tpt_trainer_set_global_step).
func (c *Context) SetGlobalStep(step int64) error {
	return statusError(C.tpt_trainer_set_global_step(c.ptr, C.int64_t(step)))
}

// Logdir returns the log directory in use, "" without one
// (tpt_trainer_logdir).
func (c *Context) Logdir() string { return logdir(c.ptr) }

// BestCheckpoint returns the best checkpoint the trainer's MinSaver or
// MaxSaver of stat has kept (Lightning's best_model_path), "" before one was
// kept; CodeNotFound when it has no best saver of stat
// (tpt_trainer_best_checkpoint).
func (c *Context) BestCheckpoint(stat string) (string, error) { return bestCheckpoint(c.ptr, stat) }

// StepsPerEpoch returns the steps per epoch the loop runs: the options', or
// the input's size (by the towers); -1 while neither has set it
// (tpt_trainer_steps_per_epoch).
func (c *Context) StepsPerEpoch() int64 { return mustCount(stepsPerEpoch(c.ptr)) }

// ResumedFrom returns the checkpoint the run resumes from (Trainer.Resume's
// path, or the one AutoResume found once the run has begun); "" when it
// starts afresh (tpt_trainer_resumed_from).
func (c *Context) ResumedFrom() string { return resumedFrom(c.ptr) }

// Log writes a line to the trainer's log: stdout when Console is on, and
// log.log in the log directory (tpt_trainer_log).
func (c *Context) Log(message string) error {
	cmsg := C.CString(message)
	defer C.free(unsafe.Pointer(cmsg))
	return statusError(C.tpt_trainer_log(c.ptr, cmsg))
}

// HookedStep runs one hooked step from inside run_step
// (tpt_trainer_hooked_step): BEFORE_RUN of every callback that asked for it,
// then step(ctx), then AFTER_RUN; the global step advances by one. step may
// be nil: the hooks only. It returns nil, a *StopError when the step or a
// callback asked to stop, or the error that failed the step (the very value
// the step or callback returned); run_step should return it as it is. (A stop
// or an error ends training after run_step returns even if run_step drops it.)
// A panic in the step or a callback comes out of HookedStep with its value,
// as if the step had been called directly. Only during run_step.
func (c *Context) HookedStep(step func(ctx *Context) error) error {
	var h C.uintptr_t
	if step != nil {
		c.steps = append(c.steps, step)
		h = C.uintptr_t(c.self)
	}
	wasPanicking := c.panicking
	st := C.tptgo_hooked_step(c.ptr, h)
	if step != nil {
		c.steps[len(c.steps)-1] = nil
		c.steps = c.steps[:len(c.steps)-1]
	}
	if c.panicking && !wasPanicking {
		C.tpt_status_free(st)
		v := c.panicValue
		c.unwinding = c.panicWhere
		c.panicking, c.panicValue, c.panicWhere = false, nil, ""
		panic(v)
	}
	return c.result(st, false)
}

// SetOutputScalar publishes a scalar output of the hooked step in progress
// (tpt_trainer_set_output_scalar): AFTER_RUN callbacks, and anything until
// the next hooked step begins, read it with OutputScalar. Inside a step only.
func (c *Context) SetOutputScalar(name string, value float64) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return statusError(C.tpt_trainer_set_output_scalar(c.ptr, cname, C.double(value)))
}

// SetOutput publishes a tensor output of the hooked step in progress
// (tpt_trainer_set_output). The trainer keeps its own reference: the caller
// still owns x and may Close it at once. Inside a step only.
func (c *Context) SetOutput(name string, x *Tensor) error {
	if x == nil {
		return &Error{Code: CodeInvalidArgument, Message: "Context.SetOutput: the tensor is nil"}
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ptr == nil {
		return &Error{Code: CodeInvalidArgument, Message: "Context.SetOutput: use of closed Tensor"}
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	st := C.tpt_trainer_set_output(c.ptr, cname, x.ptr)
	runtime.KeepAlive(x)
	return statusError(st)
}

// OutputScalar reads a scalar output of the latest hooked step; a tensor
// output of one element is converted (tpt_trainer_output_scalar). An output
// the step did not publish is an *Error of CodeNotFound.
func (c *Context) OutputScalar(name string) (float64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var v C.double
	if err := statusError(C.tpt_trainer_output_scalar(&v, c.ptr, cname)); err != nil {
		return 0, err
	}
	return float64(v), nil
}

// Model returns the trainer's model, the one given to SetModel or in the
// TrainConfig (the same *Model value: its tower function's errors come back
// unchanged from Infer); nil when the trainer has none. The trainer does not
// own it: do not Close it here.
func (c *Context) Model() *Model { return c.model }

// Optimizer returns the optimizer of the trainer's model
// (tpt_trainer_optimizer), e.g. to set the learning rate from a callback;
// an *Error of CodeNotFound when there is none. The model keeps its own
// reference: nothing needs closing (the garbage collector releases this
// one; Close releases it at once).
func (c *Context) Optimizer() (*Optimizer, error) {
	var out *C.tpt_optimizer
	if err := statusError(C.tpt_trainer_optimizer(&out, c.ptr)); err != nil {
		return nil, err
	}
	return newOptimizer(out), nil
}

// Output returns a new Tensor on an output of the latest hooked step; a
// scalar output comes back as a 0-d float64 tensor (tpt_trainer_output).
// The caller owns it.
func (c *Context) Output(name string) (*Tensor, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var out *C.tpt_tensor
	if err := statusError(C.tpt_trainer_output(&out, c.ptr, cname)); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// status turns the result of a Go function into a status for the library
// and remembers err, so that the status coming back (from HookedStep,
// PutScalar or Run) can be turned into the same value.
func (c *Context) status(err error) *C.tpt_status {
	if err == nil {
		return nil
	}
	st := newStatus(err)
	c.errs = append(c.errs, stashedError{
		code: Code(C.tpt_status_code(st)),
		msg:  C.GoString(C.tpt_status_message(st)),
		err:  err,
	})
	return st
}

// result takes ownership of st and returns the Go error it stands for: the
// error a trampoline returned with the same code and message (the latest
// such; forgotten if consume), or else what statusError makes of it.
func (c *Context) result(st *C.tpt_status, consume bool) error {
	if st == nil {
		return nil
	}
	if len(c.errs) == 0 {
		return statusError(st)
	}
	code, msg := Code(C.tpt_status_code(st)), C.GoString(C.tpt_status_message(st))
	for i := len(c.errs) - 1; i >= 0; i-- {
		e := c.errs[i]
		if e.code == code && e.msg == msg {
			C.tpt_status_free(st)
			if consume {
				c.errs = append(c.errs[:i], c.errs[i+1:]...)
			}
			return e.err
		}
	}
	return statusError(st)
}

// recovered records a panic a trampoline recovered (the first one counts)
// and returns the status that fails training.
func (c *Context) recovered(v any, where string) *C.tpt_status {
	return newStatus(&Error{Code: CodeCallback, Message: c.notePanic(v, where)})
}

// notePanic records a panic (the first one counts) and returns the message
// for the library.
func (c *Context) notePanic(v any, where string) string {
	if !c.panicking {
		c.panicking, c.panicValue, c.panicWhere = true, v, where
	}
	return "panic in " + where + ": " + fmt.Sprint(v)
}

// SaveCheckpoint writes the trainer's whole state to path now, atomically
// (tpt_trainer_save_checkpoint): from a callback between steps
// (EventTriggerStep, the epoch events, before or after training); inside
// run_step it is an *Error of CodeState.
func (c *Context) SaveCheckpoint(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	return statusError(C.tpt_trainer_save_checkpoint(c.ptr, cpath))
}

// PutScalar records a scalar in the history with the current global step and
// brings it to every monitor at once (tpt_trainer_put_scalar). An error a
// monitor returned comes back unchanged. From run_step, steps and callbacks.
func (c *Context) PutScalar(name string, value float64) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return c.result(C.tpt_trainer_put_scalar(c.ptr, cname, C.double(value)), true)
}

// PutImage brings an image to every monitor at once as a RecordImage record
// (tpt_trainer_put_image, tensorpack's put_image): image is H x W, H x W x C
// or N x H x W x C with C = 1 (grey), 3 (RGB) or 4 (RGBA), of dtype uint8, or
// floating point in [0, 255] (rounded and clamped). Images are not kept in
// the scalar history nor in stats.json; the TensorBoard monitor writes them.
// The caller still owns image. An error a monitor returned comes back
// unchanged. From run_step, steps and callbacks.
func (c *Context) PutImage(name string, image *Tensor) error {
	if image == nil {
		return &Error{Code: CodeInvalidArgument, Message: "Context.PutImage: the image is nil"}
	}
	image.mu.RLock()
	defer image.mu.RUnlock()
	if image.ptr == nil {
		return &Error{Code: CodeInvalidArgument, Message: "Context.PutImage: use of closed Tensor"}
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	st := C.tpt_trainer_put_image(c.ptr, cname, image.ptr)
	runtime.KeepAlive(image)
	return c.result(st, true)
}

// ScalarLatest returns the latest value of a scalar and the global step it
// was put at (tpt_trainer_scalar_latest). A scalar never put is an *Error of
// CodeNotFound.
func (c *Context) ScalarLatest(name string) (value float64, step int64, err error) {
	return scalarLatest(c.ptr, name)
}

// ScalarHistory returns the history of a scalar: the global step and value of
// each put, oldest first (tpt_trainer_scalar_history). A scalar never put is
// an *Error of CodeNotFound.
func (c *Context) ScalarHistory(name string) (steps []int64, values []float64, err error) {
	return scalarHistory(c.ptr, name)
}

// RunTrainOps runs the model's train ops names, in order, as one hooked
// step, tensorpack's hooked_sess.run (tpt_trainer_run_train_ops with
// hooked): BEFORE_RUN of every callback that asked for it, one forward pass
// of the tower function on the input's next batch, every op's gradients
// from that one pass, then each op's update in order, then AFTER_RUN; the
// global step advances by one, and the tower's outputs are published (step
// outputs, and moving summaries that reach the monitors: "g_loss",
// "d_loss").
//
// It returns what HookedStep returns, and run_step should return it as it
// is: nil, a *StopError when a callback or the input asked to stop, or the
// error that failed the run. An error returned by a callback, the tower
// function or a feed function is that very value; a panic in one of them
// comes out of RunTrainOps with its value, as if it had been called
// directly. An unknown op is an *Error of CodeInvalidArgument naming it (and
// the ops the model has); a call outside run_step (SetRunStep, after
// SetModel, SetTowers or SetGAN) one of CodeState.
//
// The simple trainer, the replicated and the parameter-server strategies
// (SetTowers) and distributed jobs run train ops: with towers every tower
// takes its own batch and each op's gradients are averaged over the
// towers. The async strategy runs none: an *Error of CodeUnsupported.
func (c *Context) RunTrainOps(names ...string) error {
	return c.runTrainOps("Context.RunTrainOps", names, true)
}

// RunTrainOpsRaw runs the model's train ops names, in order, as
// RunTrainOps does but without hooks, tensorpack's sess.run: no callback
// runs, the global step stays, and no output is published
// (tpt_trainer_run_train_ops without hooked). It takes a batch from the
// input all the same. Its results are RunTrainOps'.
func (c *Context) RunTrainOpsRaw(names ...string) error {
	return c.runTrainOps("Context.RunTrainOpsRaw", names, false)
}

func (c *Context) runTrainOps(who string, names []string, hooked bool) error {
	if len(names) == 0 {
		return &Error{Code: CodeInvalidArgument, Message: who + ": no train op to run: give their names"}
	}
	for i, n := range names {
		if err := noNUL(who, "names["+strconv.Itoa(i)+"]", n); err != nil {
			return err
		}
	}
	cnames, free := cStrings(names) // the library reads them during the call
	defer free()
	wasPanicking := c.panicking
	st := C.tpt_trainer_run_train_ops(c.ptr, &cnames[0], C.size_t(len(cnames)), cBool(hooked))
	if c.panicking && !wasPanicking { // a callback's panic: out of here, as HookedStep
		C.tpt_status_free(st)
		v := c.panicValue
		c.unwinding = c.panicWhere
		c.panicking, c.panicValue, c.panicWhere = false, nil, ""
		panic(v)
	}
	if st == nil {
		return nil
	}
	// The tower and feed functions' errors and panics are in their stashes.
	code, msg := Code(C.tpt_status_code(st)), C.GoString(C.tpt_status_message(st))
	for _, s := range c.stashes {
		if err, v, where, panicked, found := s.takeAt(code, msg); found {
			C.tpt_status_free(st)
			if panicked {
				c.unwinding = where
				panic(v)
			}
			return err
		}
	}
	// A callback's error, or a stop, of the hooked run.
	for i := len(c.errs) - 1; i >= 0; i-- {
		if e := c.errs[i]; e.code == code && e.msg == msg {
			C.tpt_status_free(st)
			return e.err
		}
	}
	err := statusError(st)
	if e, ok := err.(*Error); ok && (e.Code == CodeInvalidArgument || e.Code == CodeState) {
		e.Message = runTrainOpsNames.Replace(e.Message)
	}
	return err
}

// runTrainOpsNames spells the C functions that the library's messages about
// running train ops name as this package does.
var runTrainOpsNames = strings.NewReplacer(
	"(tpt_trainer_set_run_step)", "(Trainer.SetRunStep)",
	"(tpt_trainer_set_model)", "(Trainer.SetModel or Trainer.SetGAN)",
	"(tpt_model_add_train_op)", "(Model.AddTrainOp)",
)
