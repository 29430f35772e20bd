package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"
)

// Event is a set of loop events (tpt_event): a callback asks for some and
// receives them one at a time. In one run they come in this order:
//
//	SETUP, BEFORE_TRAIN,
//	per epoch: BEFORE_EPOCH,
//	    per step: [per hooked step: BEFORE_RUN, step, AFTER_RUN], TRIGGER_STEP;
//	    AFTER_EPOCH, TRIGGER_EPOCH,
//	AFTER_TRAIN (always, for every callback, whatever happened before).
//
// TRIGGER is "do your thing": a callback that asks for EventTrigger but not
// EventTriggerEpoch gets it after each epoch; PeriodicTrigger calls it at
// other times. RECORD brings monitors each scalar put with PutScalar and
// each image put with PutImage.
type Event uint32

// The events of tpt_event.
const (
	EventSetup        Event = C.TPT_EVENT_SETUP
	EventBeforeTrain  Event = C.TPT_EVENT_BEFORE_TRAIN
	EventBeforeEpoch  Event = C.TPT_EVENT_BEFORE_EPOCH
	EventBeforeRun    Event = C.TPT_EVENT_BEFORE_RUN
	EventAfterRun     Event = C.TPT_EVENT_AFTER_RUN
	EventTriggerStep  Event = C.TPT_EVENT_TRIGGER_STEP
	EventAfterEpoch   Event = C.TPT_EVENT_AFTER_EPOCH
	EventTriggerEpoch Event = C.TPT_EVENT_TRIGGER_EPOCH
	EventTrigger      Event = C.TPT_EVENT_TRIGGER
	EventAfterTrain   Event = C.TPT_EVENT_AFTER_TRAIN
	EventRecord       Event = C.TPT_EVENT_RECORD
	EventAll          Event = C.TPT_EVENT_ALL
)

var eventNames = [...]string{
	"SETUP", "BEFORE_TRAIN", "BEFORE_EPOCH", "BEFORE_RUN", "AFTER_RUN", "TRIGGER_STEP",
	"AFTER_EPOCH", "TRIGGER_EPOCH", "TRIGGER", "AFTER_TRAIN", "RECORD",
}

// String returns the names of the events in the set, joined by "|", e.g.
// "BEFORE_RUN|AFTER_RUN"; "0" for the empty set. Unknown bits are shown in
// hexadecimal.
func (e Event) String() string {
	if e == 0 {
		return "0"
	}
	var parts []string
	for i, name := range eventNames {
		if e&(1<<i) != 0 {
			parts = append(parts, name)
			e &^= 1 << i
		}
	}
	if e != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(e), 16))
	}
	return strings.Join(parts, "|")
}

// RecordKind is the kind of a monitor record (tpt_record_kind). Monitors
// ignore kinds they do not know: histograms and text will come.
type RecordKind int32

// The kinds of tpt_record_kind.
const (
	RecordScalar RecordKind = C.TPT_RECORD_SCALAR // PutScalar: Value
	RecordImage  RecordKind = C.TPT_RECORD_IMAGE  // PutImage: Image
)

// Record is what a monitor receives with EventRecord (tpt_record): a copy,
// which the monitor may keep, except for Image.
type Record struct {
	Kind       RecordKind
	Name       string // as given to PutScalar or PutImage
	GlobalStep int64  // when it was put
	EpochNum   int64
	Value      float64 // RecordScalar
	// Image is the RecordImage's tensor, uint8 N x H x W x C; nil for other
	// kinds. It is lent for the call only (closed when the monitor returns):
	// Keep or Share it to use it later.
	Image *Tensor
}

// recordFromC copies the fields of r that the library filled (those within
// r.struct_size); the image tensor is lent (the caller closes it when the
// call ends).
func recordFromC(r *C.tpt_record) *Record {
	size := uintptr(r.struct_size)
	has := func(offset, fieldSize uintptr) bool { return size >= offset+fieldSize }
	rec := &Record{}
	if has(unsafe.Offsetof(r.kind), unsafe.Sizeof(r.kind)) {
		rec.Kind = RecordKind(r.kind)
	}
	if has(unsafe.Offsetof(r.name), unsafe.Sizeof(r.name)) && r.name != nil {
		rec.Name = C.GoString(r.name)
	}
	if has(unsafe.Offsetof(r.global_step), unsafe.Sizeof(r.global_step)) {
		rec.GlobalStep = int64(r.global_step)
	}
	if has(unsafe.Offsetof(r.epoch_num), unsafe.Sizeof(r.epoch_num)) {
		rec.EpochNum = int64(r.epoch_num)
	}
	if has(unsafe.Offsetof(r.value), unsafe.Sizeof(r.value)) {
		rec.Value = float64(r.value)
	}
	if rec.Kind == RecordImage && has(unsafe.Offsetof(r.tensor), unsafe.Sizeof(r.tensor)) && r.tensor != nil {
		rec.Image = lentTensor((*C.tpt_tensor)(unsafe.Pointer(r.tensor)))
	}
	return rec
}

// hostFunc is the Go side of a function the library calls back: a
// runtime/cgo.Handle to it is the user_data, and the library's destroy
// deletes the handle. ctx is the trainer's Context, set when the function is
// given to a trainer.
type hostFunc struct {
	name      string
	ctx       *Context
	runStep   func(*Context) error
	callback  func(*Context, Event, *Record) error
	predicate func(*Context) bool
	state     CallbackStater // a callback's own state in checkpoints, or nil
	// stashes: where functions the callback runs outside this Context (a
	// dataflow's, a tower function's) keep their errors and panics; the
	// trainer that takes the callback consults them in Run.
	stashes []*stash
}

// liveHandles counts the handles made by newHandle and not yet deleted; the
// tests check with it that the library deletes each exactly once.
var liveHandles atomic.Int64

func newHandle(v any) cgo.Handle {
	liveHandles.Add(1)
	return cgo.NewHandle(v)
}

func deleteHandle(h cgo.Handle) {
	h.Delete()
	liveHandles.Add(-1)
}

// Callback is a callback that is not yet given to a trainer (tpt_callback).
// AddCallback, AddMonitor and the wrappers (PeriodicTrigger, Periodic,
// EnableIf) take it over, also when they fail; after that the Callback is
// spent and using it again is an error. Close releases a Callback that was
// never given away.
type Callback struct {
	handle[*C.tpt_callback]
	// The Go functions inside, the wrapped callbacks' included: the trainer
	// that takes the callback binds them to its Context.
	funcs []*hostFunc
	name  string
}

// CallbackOptions are the options of NewCallback; nil or the zero value is
// the defaults: a chief-only callback (tensorpack's chief_only=True) without
// state of its own.
type CallbackOptions struct {
	// AllWorkers runs the callback in every trainer, workers included; by
	// default a trainer whose TrainerOptions.Role is RoleWorker drops it.
	AllWorkers bool
	// State is the callback's own state that checkpoints keep
	// (tpt_callback_desc's save and restore): its SaveState runs when a
	// checkpoint is taken, its RestoreState when a resumed run starts. The
	// callback's name is its key in the checkpoint. nil: no state.
	State CallbackStater
}

// NewCallback makes a callback (tpt_callback_new). fn receives each event of
// the set events it asked for, with record non-nil for EventRecord only. It
// returns nil to go on, Stop(reason) to end training gracefully, or an error
// to fail training: Run returns that very error. (An error in AFTER_TRAIN is
// logged and returned by Run if nothing failed before, and the other
// callbacks still run; a stop there is ignored.) name is for logs and
// messages ("" means "callback"); o nil means the defaults (CallbackOptions).
func NewCallback(name string, events Event, o *CallbackOptions,
	fn func(ctx *Context, event Event, record *Record) error) (*Callback, error) {
	if o == nil {
		o = &CallbackOptions{}
	}
	if fn == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "NewCallback: fn is nil"}
	}
	var cname *C.char
	if name != "" {
		cname = C.CString(name)
		defer C.free(unsafe.Pointer(cname))
	} else {
		name = "callback"
	}
	f := &hostFunc{name: name, callback: fn, state: o.State}
	h := newHandle(f)
	var out *C.tpt_callback
	// The library deletes h (also when this fails).
	st := C.tptgo_callback_new(&out, C.uint32_t(events), cname, cBool(!o.AllWorkers), C.uintptr_t(h), cBool(o.State != nil))
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newCallback(out, []*hostFunc{f}, name), nil
}

func newCallback(ptr *C.tpt_callback, funcs []*hostFunc, name string) *Callback {
	cb := &Callback{funcs: funcs, name: name}
	cb.ptr = ptr
	runtime.SetFinalizer(cb, (*Callback).Close)
	return cb
}

// Close releases a callback that was never given away (tpt_callback_free).
// It is idempotent, does nothing to a callback given away, and always returns
// nil.
func (cb *Callback) Close() error {
	if cb == nil {
		return nil
	}
	if cb.release(func(p *C.tpt_callback) {
		C.tpt_callback_free(p)
		cb.funcs = nil
	}) {
		runtime.SetFinalizer(cb, nil)
	}
	return nil
}

// take hands the callback over: the caller owns the handle from now on.
func (cb *Callback) take(who string) (*C.tpt_callback, []*hostFunc, string, error) {
	if cb == nil {
		return nil, nil, "", &Error{Code: CodeInvalidArgument, Message: who + ": the Callback is nil"}
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.ptr == nil {
		return nil, nil, "", &Error{Code: CodeInvalidArgument,
			Message: who + ": the Callback '" + cb.name + "' was closed or already given away"}
	}
	ptr, funcs := cb.ptr, cb.funcs
	cb.ptr, cb.funcs = nil, nil
	runtime.SetFinalizer(cb, nil)
	return ptr, funcs, cb.name, nil
}

// Every says when Periodic and PeriodicTrigger let a callback run: every
// Steps global steps, every Epochs epochs, and (PeriodicTrigger only)
// before training. The conditions add up; a condition left 0 (or false) is
// off, and at least one must be on.
type Every struct {
	Steps       int64
	Epochs      int64
	BeforeTrain bool
}

// PeriodicTrigger wraps inner so that it gets EventTrigger every e.Steps
// global steps (checked after each step), every e.Epochs epochs, and, with
// e.BeforeTrain, in BEFORE_TRAIN (tpt_callback_periodic_trigger). Every
// other event passes through, except TRIGGER_EPOCH, which this replaces. It
// takes inner over, also when it fails.
func PeriodicTrigger(inner *Callback, e Every) (*Callback, error) {
	ptr, funcs, name, err := inner.take("PeriodicTrigger")
	if err != nil {
		return nil, err
	}
	var out *C.tpt_callback
	st := C.tpt_callback_periodic_trigger(&out, ptr, C.int64_t(e.Steps), C.int64_t(e.Epochs), cBool(e.BeforeTrain))
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newCallback(out, funcs, name), nil
}

// Periodic wraps inner so that it runs less often: its per-epoch and per-step
// events reach it only when the global step is a multiple of e.Steps, or
// the epoch number one of e.Epochs, or (with e.Epochs) at the last step of
// the last epoch (tpt_callback_periodic). e.BeforeTrain is refused (that is
// PeriodicTrigger's). It takes inner over, also when it fails.
func Periodic(inner *Callback, e Every) (*Callback, error) {
	ptr, funcs, name, err := inner.take("Periodic")
	if err != nil {
		return nil, err
	}
	if e.BeforeTrain {
		C.tpt_callback_free(ptr)
		return nil, &Error{Code: CodeInvalidArgument,
			Message: "Periodic: Every.BeforeTrain is PeriodicTrigger's (Periodic only thins out the events inner gets)"}
	}
	var out *C.tpt_callback
	if err := statusError(C.tpt_callback_periodic(&out, ptr, C.int64_t(e.Steps), C.int64_t(e.Epochs))); err != nil {
		return nil, err
	}
	return newCallback(out, funcs, name), nil
}

// EnableIf wraps inner so that BEFORE/AFTER_EPOCH, BEFORE/AFTER_RUN,
// TRIGGER_STEP and TRIGGER_EPOCH reach it only when pred returns true (for a
// run, pred is asked in BEFORE_RUN and the answer kept for AFTER_RUN); other
// events always pass (tpt_callback_enable_if). A panic in pred fails training
// as one in a callback does. It takes inner over, also when it fails.
func EnableIf(inner *Callback, pred func(ctx *Context) bool) (*Callback, error) {
	ptr, funcs, name, err := inner.take("EnableIf")
	if err != nil {
		return nil, err
	}
	if pred == nil {
		C.tpt_callback_free(ptr)
		return nil, &Error{Code: CodeInvalidArgument, Message: "EnableIf: pred is nil"}
	}
	f := &hostFunc{name: name, predicate: pred}
	h := newHandle(f)
	var out *C.tpt_callback
	// The library deletes h and frees inner (also when this fails).
	if err := statusError(C.tptgo_enable_if(&out, ptr, C.uintptr_t(h))); err != nil {
		return nil, err
	}
	return newCallback(out, append(funcs, f), name), nil
}

// ---- Monitors: scalars and images.

// TensorBoard makes tensorpack's TFEventWriter (tpt_monitor_tensorboard): a
// monitor that writes the scalars and images to a TensorFlow event file,
// events.out.tfevents.<unix time>.<host>, in dir, which TensorBoard reads.
// dir "" means the trainer's log directory (without one the monitor does
// nothing). Scalars are float32 values, images PNG (one as its name,
// several as name/0, name/1, ...). The file is flushed after each epoch and
// at the end. A trainer with a Logdir and the default monitors already has
// one there: add this one (with AddMonitor or TrainConfig.Monitors) for
// another directory.
func TensorBoard(dir string) (*Callback, error) {
	var cdir *C.char
	if dir != "" {
		cdir = C.CString(dir)
		defer C.free(unsafe.Pointer(cdir))
	}
	var out *C.tpt_callback
	if err := statusError(C.tpt_monitor_tensorboard(&out, cdir)); err != nil {
		return nil, err
	}
	return newCallback(out, nil, "TFEventWriter"), nil
}

// CallbackStater is the state of a callback of its own that checkpoints
// keep (a schedule's position, a best value): SaveState when a checkpoint
// is taken, RestoreState with those bytes when a resumed run starts (after
// SETUP, before BEFORE_TRAIN). See CallbackOptions.State.
type CallbackStater interface {
	SaveState() ([]byte, error)
	RestoreState(state []byte) error
}
