package tptrain

// Input sources (include/tptrain/input.h): what feeds the towers their batches.

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"runtime"
	"strconv"
	"unsafe"
)

// ---- Inputs and the simple trainer.

// Input gives a model's tower its batches (tpt_input). SetModel takes it
// over; Close releases an Input that was never given away.
type Input struct {
	handle[*C.tpt_input]
	// The errors and panics of the feed function or of the dataflow's
	// functions; none for tensors.
	stashes []*stash
}

func newInput(ptr *C.tpt_input, stashes []*stash) *Input {
	in := &Input{stashes: stashes}
	in.ptr = ptr
	runtime.SetFinalizer(in, (*Input).Close)
	return in
}

// Close releases an input that was not given to a trainer
// (tpt_input_free). It is idempotent and always returns nil.
func (in *Input) Close() error {
	if in == nil {
		return nil
	}
	if in.release(func(p *C.tpt_input) { C.tpt_input_free(p) }) {
		runtime.SetFinalizer(in, nil)
	}
	return nil
}

// InputFromTensors makes batches of batchSize rows (dimension 0) from
// in-memory tensors, in order or shuffled each pass over the data (from
// seed; ignored when Sequential);
// the last incomplete batch is dropped; it repeats forever
// (tpt_input_from_tensors). All tensors need the same number of rows; they
// are shared, not copied (the caller may Close them). Its size (batches per
// pass) is the trainer's default StepsPerEpoch.
func InputFromTensors(tensors []*Tensor, batchSize int64, order Order, seed uint64) (*Input, error) {
	shuffle, err := order.shuffle("InputFromTensors")
	if err != nil {
		return nil, err
	}
	ptrs, unlock, err := lockTensors(tensors, false, func(i int) string { return "InputFromTensors: tensors[" + strconv.Itoa(i) + "]" })
	if err != nil {
		return nil, err
	}
	defer unlock()
	var first **C.tpt_tensor
	if len(ptrs) > 0 {
		first = &ptrs[0]
	}
	var out *C.tpt_input
	st := C.tpt_input_from_tensors(&out, first, C.size_t(len(ptrs)), C.int64_t(batchSize), shuffle, C.uint64_t(seed))
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newInput(out, nil), nil
}

// feedFunc is what the feed trampoline finds behind its handle.
type feedFunc struct {
	fn func(n int) ([]*Tensor, error)
	st *stash
}

// InputFromFeed makes an input that calls feed on the goroutine of Run for
// every step, with n the number of inputs of the model's signature
// (tensorpack's FeedInput; tpt_input_from_feed). feed returns n tensors in
// signature order, which the input takes over (they are closed for the
// caller; to feed one tensor several times, return a Share of it). To end
// the data, return Stop(reason) or io.EOF itself (as Stop("EOF")): training
// stops gracefully and Trainer.StopReason gives the reason. Any other error
// fails training and Run returns that very value; a panic makes Run panic
// again once training has ended.
func InputFromFeed(feed func(n int) ([]*Tensor, error)) (*Input, error) {
	if feed == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "InputFromFeed: feed is nil"}
	}
	st := &stash{}
	h := newHandle(&feedFunc{fn: feed, st: st})
	var out *C.tpt_input
	// The library deletes h (also when this fails).
	if err := statusError(C.tptgo_input_from_feed(&out, C.uintptr_t(h))); err != nil {
		return nil, err
	}
	return newInput(out, []*stash{st}), nil
}

// take hands the input over: the caller owns the handle from now on.
func (in *Input) take(who string) (*C.tpt_input, []*stash, error) {
	if in == nil {
		return nil, nil, &Error{Code: CodeInvalidArgument, Message: who + ": the Input is nil"}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.ptr == nil {
		return nil, nil, &Error{Code: CodeInvalidArgument, Message: who + ": the Input was closed or already given away"}
	}
	ptr := in.ptr
	in.ptr = nil
	runtime.SetFinalizer(in, nil)
	return ptr, in.stashes, nil
}

// ---- Inputs from dataflows.

// InputKind says how a dataflow feeds the towers (tpt_input_kind).
type InputKind int32

const (
	// InputQueue is tensorpack's QueueInput: a background thread fills a
	// bounded queue.
	InputQueue InputKind = C.TPT_INPUT_QUEUE
	// InputFeed is tensorpack's FeedInput: the training goroutine reads
	// the dataflow.
	InputFeed InputKind = C.TPT_INPUT_FEED
)

// InputOptions are the options of InputFromDataFlow (tpt_input_options).
// The zero value, like nil, is the default: a queue of 50 batches, pass
// after pass forever.
type InputOptions struct {
	Kind     InputKind // 0 means InputQueue
	Capacity int64     // queue capacity in batches; 0 means 50
	// Once makes the end of the first pass end training gracefully
	// (StopReason says why); otherwise the input repeats forever.
	Once bool
}

// cInputOptions: o (nil: the defaults) as the library takes them.
func cInputOptions(o *InputOptions) C.tpt_input_options {
	copts := defaultInputOptions()
	if o == nil {
		return copts
	}
	copts.repeat = cBool(!o.Once)
	if o.Kind != 0 {
		copts.kind = C.tpt_input_kind(o.Kind)
	}
	if o.Capacity != 0 {
		copts.capacity = C.int64_t(o.Capacity)
	}
	return copts
}

// InputFromDataFlow makes an input fed by a dataflow of batches, its
// components in signature order (usually a Batch) (tpt_input_from_dataflow).
// The input keeps a reference to df (the caller still owns df) and resets
// it at SETUP; a queue input's thread runs from BEFORE_TRAIN to AFTER_TRAIN
// and puts the scalar "QueueInput/queue_size" every step. An error of the
// dataflow's Go functions ends training and Run returns that very value; a
// pass that yields nothing ends it gracefully. Its size (the dataflow's) is
// the trainer's default StepsPerEpoch.
func InputFromDataFlow(df *DataFlow, opts *InputOptions) (*Input, error) {
	copts := cInputOptions(opts)
	ptr, err := df.lock("InputFromDataFlow")
	if err != nil {
		return nil, err
	}
	defer df.mu.Unlock()
	var out *C.tpt_input
	if err := statusError(C.tpt_input_from_dataflow(&out, ptr, &copts)); err != nil {
		return nil, err
	}
	return newInput(out, append([]*stash(nil), df.stashes...)), nil
}

// InputStaging is tensorpack's StagingInput: it copies the next batch of in
// to device ("" means the tower's device) ahead of time; a plain
// pass-through on the CPU (tpt_input_staging). It takes in over, also when
// it fails.
func InputStaging(in *Input, device string) (*Input, error) {
	iptr, stashes, err := in.take("InputStaging")
	if err != nil {
		return nil, err
	}
	var cdev *C.char
	if device != "" {
		cdev = C.CString(device)
		defer C.free(unsafe.Pointer(cdev))
	}
	var out *C.tpt_input
	if err := statusError(C.tpt_input_staging(&out, iptr, cdev)); err != nil {
		return nil, err
	}
	return newInput(out, stashes), nil
}

// InputDummy is tensorpack's DummyConstantInput: the same zero tensors of
// the signature's shapes (free dimensions become batchSize) every step, to
// benchmark a model without data (tpt_input_dummy).
func InputDummy(batchSize int64) (*Input, error) {
	var out *C.tpt_input
	if err := statusError(C.tpt_input_dummy(&out, C.int64_t(batchSize))); err != nil {
		return nil, err
	}
	return newInput(out, nil), nil
}
