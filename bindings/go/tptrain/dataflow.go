package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"errors"
	"io"
	"runtime"
	"runtime/cgo"
	"sort"
	"strconv"
	"strings"
	"unsafe"
)

// ---- Dataflows: the input pipeline.
//
// tensorpack's DataFlow library. A DataFlow yields datapoints, each a list
// of components (tensors; a scalar is a 0-d tensor), pass after pass: Next
// returns io.EOF once at the end of a pass, and the call after that starts
// the next pass. Sources read tensors in memory, IDX files (MNIST), files
// through a decode function, or Go code (DataFlowFromFunc,
// DataFlowFromSource); combinators batch, map (also on several threads),
// prefetch, shuffle, cache, repeat, concatenate, join and augment them.
//
// Handles are shared: a combinator keeps its own reference to the dataflows
// it reads, so the caller may Close them at any time. A dataflow has one
// consumer: reading it with a second combinator or input, or iterating it
// once it has one, is an *Error of CodeInvalidArgument.
//
// The Go functions of a pipeline run where the library iterates: a source's
// and a map's on the thread that iterates (a background thread under
// Prefetch, a queue input or a ParallelMap), a ParallelMap's and a threaded
// decoder's on several threads at once (cgo brings those calls into Go).
// An error they return comes back unchanged (the same value) from the call
// that iterates (Next, ResetState, Trainer.Run); a panic fails the pipeline
// like an error, and that call panics again with the same value once the
// library has returned. Only a source ends a pass (io.EOF); Stop returned by
// a map, decode, Reset, SaveState or RestoreState function is an error.
// They must not call runtime.Goexit, nor methods of a DataFlow of their own
// pipeline (it is locked while it is iterated).

// Datapoint is a list of tensors (tpt_datapoint): what Next fills, and what
// map and decode functions change in place. A Datapoint lent to such a
// function is valid during the call only; afterwards its methods report an
// error. Its components are shared with the tensors given to Set, not copied.
type Datapoint struct {
	// borrowed: the library's (lent to a function for one call); Close only
	// forgets it.
	handle[*C.tpt_datapoint]
}

// lentDatapoint wraps a datapoint the library lends for one call.
func lentDatapoint(ptr *C.tpt_datapoint) *Datapoint {
	d := &Datapoint{}
	d.ptr, d.borrowed = ptr, true
	return d
}

// NewDatapoint makes a datapoint of the given components (shared, not
// copied), e.g. for NextInto (tpt_datapoint_new). Close it when done.
func NewDatapoint(components ...*Tensor) (*Datapoint, error) {
	var out *C.tpt_datapoint
	if err := statusError(C.tpt_datapoint_new(&out)); err != nil {
		return nil, err
	}
	dp := &Datapoint{}
	dp.ptr = out
	runtime.SetFinalizer(dp, (*Datapoint).Close)
	if err := dp.Append(components...); err != nil {
		dp.Close()
		return nil, err
	}
	return dp, nil
}

// Close releases the datapoint (tpt_datapoint_free). It is idempotent and
// always returns nil.
func (dp *Datapoint) Close() error {
	if dp == nil {
		return nil
	}
	if dp.release(func(p *C.tpt_datapoint) { C.tpt_datapoint_free(p) }) {
		runtime.SetFinalizer(dp, nil)
	}
	return nil
}

// lock locks dp and returns its handle; the caller must call dp.mu.Unlock
// on success.
func (dp *Datapoint) lock(method string) (*C.tpt_datapoint, error) {
	if dp == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "Datapoint." + method + ": the Datapoint is nil"}
	}
	dp.mu.Lock()
	if dp.ptr == nil {
		dp.mu.Unlock()
		msg := "use of closed Datapoint"
		if dp.borrowed {
			msg = "use of a Datapoint after the function it was lent to returned"
		}
		return nil, &Error{Code: CodeInvalidArgument, Message: "Datapoint." + method + ": " + msg}
	}
	return dp.ptr, nil
}

// Len returns the number of components (tpt_datapoint_size); 0 once closed.
func (dp *Datapoint) Len() int {
	ptr, err := dp.lock("Len")
	if err != nil {
		return 0
	}
	defer dp.mu.Unlock()
	return int(C.tpt_datapoint_size(ptr))
}

// Get returns a new Tensor on component i, owned by the caller
// (tpt_datapoint_get); an index past the end is an *Error of CodeNotFound.
func (dp *Datapoint) Get(i int) (*Tensor, error) {
	ptr, err := dp.lock("Get")
	if err != nil {
		return nil, err
	}
	defer dp.mu.Unlock()
	if i < 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "Datapoint.Get: index " + strconv.Itoa(i) + " is negative"}
	}
	var out *C.tpt_tensor
	if err := statusError(C.tpt_datapoint_get(&out, ptr, C.size_t(i))); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// Set sets component i to x, shared, not copied (the caller still owns x);
// i == Len() appends (tpt_datapoint_set).
func (dp *Datapoint) Set(i int, x *Tensor) error {
	ptr, err := dp.lock("Set")
	if err != nil {
		return err
	}
	defer dp.mu.Unlock()
	if i < 0 {
		return &Error{Code: CodeInvalidArgument, Message: "Datapoint.Set: index " + strconv.Itoa(i) + " is negative"}
	}
	return setComponents(ptr, i, []*Tensor{x}, "Datapoint.Set: the tensor")
}

// Append appends components (shared, not copied).
func (dp *Datapoint) Append(xs ...*Tensor) error {
	ptr, err := dp.lock("Append")
	if err != nil {
		return err
	}
	defer dp.mu.Unlock()
	return setComponents(ptr, int(C.tpt_datapoint_size(ptr)), xs, "Datapoint.Append: tensor")
}

// SetTensors replaces all components with xs (shared, not copied).
func (dp *Datapoint) SetTensors(xs ...*Tensor) error {
	ptr, err := dp.lock("SetTensors")
	if err != nil {
		return err
	}
	defer dp.mu.Unlock()
	if err := statusError(C.tpt_datapoint_truncate(ptr, 0)); err != nil {
		return err
	}
	return setComponents(ptr, 0, xs, "Datapoint.SetTensors: tensor")
}

// setComponents sets components first, first+1, ... of ptr to xs.
func setComponents(ptr *C.tpt_datapoint, first int, xs []*Tensor, what string) error {
	if len(xs) == 0 {
		return nil
	}
	ptrs, unlock, err := lockTensors(xs, false, func(i int) string {
		if len(xs) == 1 {
			return what
		}
		return what + " " + strconv.Itoa(i)
	})
	if err != nil {
		return err
	}
	defer unlock()
	for i, p := range ptrs {
		if err := statusError(C.tpt_datapoint_set(ptr, C.size_t(first+i), p)); err != nil {
			return err
		}
	}
	return nil
}

// Truncate keeps the first n components (tpt_datapoint_truncate). A map
// function that leaves its datapoint empty drops it.
func (dp *Datapoint) Truncate(n int) error {
	ptr, err := dp.lock("Truncate")
	if err != nil {
		return err
	}
	defer dp.mu.Unlock()
	if n < 0 {
		return &Error{Code: CodeInvalidArgument, Message: "Datapoint.Truncate: n " + strconv.Itoa(n) + " is negative"}
	}
	return statusError(C.tpt_datapoint_truncate(ptr, C.size_t(n)))
}

// Seed returns, in a map function (Map, ParallelMap), a seed for this
// datapoint's randomness, drawn in input order from the map's generator
// (which SetSeed seeds and checkpoints save): the results do not depend on
// the workers, and a resumed run draws what the uninterrupted one would.
// Seed a generator of your own with it (tpt_datapoint_seed). CodeState
// for a datapoint that is not a map function's.
func (dp *Datapoint) Seed() (uint64, error) {
	ptr, err := dp.lock("Seed")
	if err != nil {
		return 0, err
	}
	defer dp.mu.Unlock()
	var out C.uint64_t
	if err := statusError(C.tpt_datapoint_seed(&out, ptr)); err != nil {
		return 0, err
	}
	return uint64(out), nil
}

// Tensors returns new Tensors on all components, owned by the caller.
func (dp *Datapoint) Tensors() ([]*Tensor, error) {
	ptr, err := dp.lock("Tensors")
	if err != nil {
		return nil, err
	}
	defer dp.mu.Unlock()
	return datapointTensors(ptr)
}

func datapointTensors(ptr *C.tpt_datapoint) ([]*Tensor, error) {
	n := int(C.tpt_datapoint_size(ptr))
	ts := make([]*Tensor, 0, n)
	for i := 0; i < n; i++ {
		var out *C.tpt_tensor
		if err := statusError(C.tpt_datapoint_get(&out, ptr, C.size_t(i))); err != nil {
			closeTensors(ts)
			return nil, err
		}
		ts = append(ts, newTensor(out))
	}
	return ts, nil
}

func closeTensors(ts []*Tensor) {
	for _, x := range ts {
		x.Close()
	}
}

// fillDatapoint sets the components of an empty datapoint the library lent
// to ts, which it takes over (closes for the caller, as a feed's tensors).
func fillDatapoint(ptr *C.tpt_datapoint, ts []*Tensor, what string) error {
	defer closeTensors(ts)
	return setComponents(ptr, 0, ts, what)
}

// ---- Sources.

// Source is a source of datapoints written in Go, for DataFlowFromSource.
// Next returns the components of the next datapoint of the pass (at least
// one; the dataflow takes them over and closes them for the caller), or
// io.EOF at the end of the pass; the call after that starts the next pass.
// Any other error ends the consumer, which returns that very value.
//
// A Source may also implement SourceResetter, SourceSizer and
// SourceStater. Its methods are called on the thread that iterates, one
// call at a time, except Size, which may come from the consumer at any time.
type Source interface {
	Next() ([]*Tensor, error)
}

// SourceResetter is a Source with randomness: Reset is called by every
// reset of the dataflow with the seed to use (derived from SetSeed of the
// outermost dataflow, or from ManualSeed).
type SourceResetter interface {
	Reset(seed uint64) error
}

// SourceSizer is a Source that knows its size: the datapoints per pass, or
// -1 when unknown or infinite.
type SourceSizer interface {
	Size() int64
}

// SourceStater is a Source that can save and restore its position within a
// pass, so that DataFlow.State records it and a pipeline restored with
// SetState goes on with the datapoint after the last one given when the
// state was taken (version 2 of tpt_dataflow_callbacks: save and restore).
//
// SaveState returns the source's state after the last datapoint Next gave
// (or at the start of a pass): a position, and the generator state of its
// randomness if it has any. It is called by State, and after every
// datapoint when a thread reads ahead of the pipeline's consumer (Prefetch,
// ParallelMap, a queue input), on that thread: keep it cheap. The bytes are
// copied. RestoreState gets back what SaveState returned, right after Reset
// at the reset that continues from a restored state (ResetState, or the
// first Next), and makes the next Next continue from there; its argument is
// the source's own copy.
//
// Errors and panics of both come back like those of Next (SaveState's also
// from State). A source without SourceStater has no position: restored, it
// is reset with the seed it had and starts its first pass again, and a
// state that holds a source's position is refused by it.
type SourceStater interface {
	SaveState() ([]byte, error)
	RestoreState(state []byte) error
}

// funcSource is DataFlowFromFunc's Source.
type funcSource func() ([]*Tensor, error)

func (f funcSource) Next() ([]*Tensor, error) { return f() }

// dataflowFunc is what the dataflow trampolines find behind their handle.
type dataflowFunc struct {
	where     string // for panics: "map function", ...
	st        *stash
	source    Source
	mapFn     func(dp *Datapoint) error
	component func(x *Tensor) (*Tensor, error)
	decode    func(dp *Datapoint, path string, index int) error
}

// DataFlow is a dataflow (tpt_dataflow): a cursor over passes of
// datapoints. Close drops the caller's reference; combinators, inputs,
// inference runners and trainers that read it keep their own.
//
// A DataFlow is iterated by one goroutine at a time: its methods lock it,
// so Close (and other calls) wait for a Next in progress.
type DataFlow struct {
	handle[*C.tpt_dataflow]
	dp *C.tpt_datapoint // Next's, made on first use
	// The stashes of the Go functions of the pipeline up to here.
	stashes []*stash
}

func newDataFlow(ptr *C.tpt_dataflow, stashes []*stash) *DataFlow {
	df := &DataFlow{stashes: stashes}
	df.ptr = ptr
	runtime.SetFinalizer(df, (*DataFlow).Close)
	return df
}

// Close drops the caller's reference to the dataflow (tpt_dataflow_free);
// its Go functions are released with the last reference. It is idempotent,
// waits for calls in progress on df, and always returns nil.
func (df *DataFlow) Close() error {
	if df == nil {
		return nil
	}
	if df.release(func(p *C.tpt_dataflow) {
		C.tpt_dataflow_free(p)
		C.tpt_datapoint_free(df.dp) // under the handle's lock, as every use of dp
		df.dp = nil
	}) {
		runtime.SetFinalizer(df, nil)
	}
	return nil
}

// lock locks df and returns its handle; the caller must call df.mu.Unlock
// on success.
func (df *DataFlow) lock(who string) (*C.tpt_dataflow, error) {
	if df == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: who + ": the DataFlow is nil"}
	}
	return df.acquire(false, "DataFlow", who)
}

// result takes ownership of st: nil for success, io.EOF for the end of a
// pass, the Go error behind it (or a panic raised again), or an *Error.
func (df *DataFlow) result(st *C.tpt_status) error {
	return stashesResult(df.stashes, st)
}

func stashesResult(stashes []*stash, st *C.tpt_status) error {
	if st == nil {
		return nil
	}
	code, msg := Code(C.tpt_status_code(st)), C.GoString(C.tpt_status_message(st))
	if code == codeStop {
		C.tpt_status_free(st)
		return io.EOF
	}
	for _, s := range stashes {
		if err, v, panicked, found := s.take(code, msg); found {
			C.tpt_status_free(st)
			if panicked {
				panic(v)
			}
			return err
		}
	}
	return statusError(st)
}

// noStop turns a Stop returned by a function other than a source's Next
// into an error: the library would read its TPT_STOP as the end of the pass
// while the pass goes on.
func noStop(err error, where string) error {
	var stop *StopError
	if err != nil && errors.As(err, &stop) {
		return &Error{Code: CodeCallback, Message: where + " returned Stop(\"" + stop.Reason +
			"\"): only a source's Next ends a pass (io.EOF)"}
	}
	return err
}

// newFunc makes the stash and the handle of a Go function of a pipeline.
func newFunc(f *dataflowFunc) (cgo.Handle, *stash) {
	f.st = &stash{}
	return newHandle(f), f.st
}

// DataFlowFromSource makes a dataflow from a Source
// (tpt_dataflow_from_callbacks), with its Reset, Size, SaveState and
// RestoreState when it implements SourceResetter, SourceSizer and
// SourceStater. Close it when done.
func DataFlowFromSource(src Source) (*DataFlow, error) {
	if src == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlowFromSource: src is nil"}
	}
	_, hasReset := src.(SourceResetter)
	_, hasSize := src.(SourceSizer)
	_, hasState := src.(SourceStater)
	h, st := newFunc(&dataflowFunc{where: "dataflow source", source: src})
	var out *C.tpt_dataflow
	// The library deletes h (also when this fails).
	if err := statusError(C.tptgo_dataflow_from_callbacks(&out, C.uintptr_t(h), cBool(hasReset), cBool(hasSize), cBool(hasState))); err != nil {
		return nil, err
	}
	return newDataFlow(out, []*stash{st}), nil
}

// DataFlowFromFunc makes a dataflow whose datapoints next makes: it returns
// the components of the next one (which the dataflow takes over), io.EOF
// at the end of a pass (the call after that starts the next pass), or an
// error that ends the consumer. Its size is unknown, so a trainer fed by it
// needs TrainerOptions.StepsPerEpoch (see DataFlowFromFuncSized, or
// DataFlowFromSource for one that reseeds).
func DataFlowFromFunc(next func() ([]*Tensor, error)) (*DataFlow, error) {
	if next == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlowFromFunc: next is nil"}
	}
	return DataFlowFromSource(funcSource(next))
}

// DataFlowFromFuncSized is DataFlowFromFunc with a known size: size
// datapoints per pass (a trainer fed by it takes its StepsPerEpoch from it).
func DataFlowFromFuncSized(size int64, next func() ([]*Tensor, error)) (*DataFlow, error) {
	if next == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlowFromFuncSized: next is nil"}
	}
	if size < 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlowFromFuncSized: size must be >= 0, got " + strconv.FormatInt(size, 10)}
	}
	return DataFlowFromSource(sizedFuncSource{next, size})
}

// sizedFuncSource is a funcSource that knows its size.
type sizedFuncSource struct {
	next func() ([]*Tensor, error)
	size int64
}

func (s sizedFuncSource) Next() ([]*Tensor, error) { return s.next() }
func (s sizedFuncSource) Size() int64              { return s.size }

// Order is whether a dataflow gives its datapoints in order or reshuffled
// every pass (from the pipeline's seeded generator). The zero value is
// Sequential.
type Order int32

// The orders of DataFlowFromTensors, DataFlowFromIDX, DataFlowMNIST,
// DataFlowFromFiles, DataFlow.Cache and InputFromTensors.
const (
	Sequential Order = iota // in order, the same every pass
	Shuffled                // reshuffled every pass
)

// shuffle is o as the C functions' shuffle flag; who names the caller in
// the error for a value outside the enum.
func (o Order) shuffle(who string) (C.int32_t, error) {
	switch o {
	case Sequential:
		return 0, nil
	case Shuffled:
		return 1, nil
	}
	return 0, &Error{Code: CodeInvalidArgument, Message: who + ": the order must be Sequential or Shuffled, got " + strconv.Itoa(int(o))}
}

// DataFlowFromTensors makes a dataflow of the rows (dimension 0) of
// in-memory tensors: datapoint i is (tensors[0][i], tensors[1][i], ...), in
// order or reshuffled every pass (tpt_dataflow_from_tensors). The tensors
// are shared, not copied (the caller may Close them).
func DataFlowFromTensors(tensors []*Tensor, order Order) (*DataFlow, error) {
	shuffle, err := order.shuffle("DataFlowFromTensors")
	if err != nil {
		return nil, err
	}
	ptrs, unlock, err := lockTensors(tensors, false, func(i int) string { return "DataFlowFromTensors: tensors[" + strconv.Itoa(i) + "]" })
	if err != nil {
		return nil, err
	}
	defer unlock()
	var first **C.tpt_tensor
	if len(ptrs) > 0 {
		first = &ptrs[0]
	}
	var out *C.tpt_dataflow
	if err := statusError(C.tpt_dataflow_from_tensors(&out, first, C.size_t(len(ptrs)), shuffle)); err != nil {
		return nil, err
	}
	return newDataFlow(out, nil), nil
}

func firstString(cs []*C.char) **C.char {
	if len(cs) == 0 {
		return nil
	}
	return &cs[0]
}

// DataFlowFromIDX makes a dataflow of the rows of IDX files (the MNIST
// format; gzip when the name ends in .gz): datapoint i is (row i of
// paths[0], row i of paths[1], ...) in the files' element types
// (tpt_dataflow_from_idx). The files are read now; a missing, truncated or
// malformed file is an *Error of CodeIO or CodeInvalidArgument naming it.
func DataFlowFromIDX(paths []string, order Order) (*DataFlow, error) {
	shuffle, err := order.shuffle("DataFlowFromIDX")
	if err != nil {
		return nil, err
	}
	cs, free := cStrings(paths)
	defer free()
	var out *C.tpt_dataflow
	if err := statusError(C.tpt_dataflow_from_idx(&out, firstString(cs), C.size_t(len(cs)), shuffle)); err != nil {
		return nil, err
	}
	return newDataFlow(out, nil), nil
}

// DataFlowMNIST makes a dataflow of MNIST or Fashion-MNIST (the same files)
// in dir, split "train" (60,000) or "test" (10,000): datapoints (image
// float32 [1, 28, 28] in [0, 1], label int64 scalar) (tpt_dataflow_mnist).
func DataFlowMNIST(dir, split string, order Order) (*DataFlow, error) {
	shuffle, err := order.shuffle("DataFlowMNIST")
	if err != nil {
		return nil, err
	}
	cdir, csplit := C.CString(dir), C.CString(split)
	defer C.free(unsafe.Pointer(cdir))
	defer C.free(unsafe.Pointer(csplit))
	var out *C.tpt_dataflow
	if err := statusError(C.tpt_dataflow_mnist(&out, cdir, csplit, shuffle)); err != nil {
		return nil, err
	}
	return newDataFlow(out, nil), nil
}

// DataFlowFromFiles makes a dataflow of a list of files that decode turns
// into datapoints (filling the empty dp, lent for the call), in order or
// shuffled every pass; with threads > 0 they are decoded by that many
// threads at once, in order, so decode must then be safe for concurrent use
// (tpt_dataflow_from_files).
func DataFlowFromFiles(paths []string, order Order, threads int,
	decode func(dp *Datapoint, path string, index int) error) (*DataFlow, error) {
	shuffle, err := order.shuffle("DataFlowFromFiles")
	if err != nil {
		return nil, err
	}
	if decode == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlowFromFiles: decode is nil"}
	}
	cs, free := cStrings(paths)
	defer free()
	h, st := newFunc(&dataflowFunc{where: "decode function", decode: decode})
	var out *C.tpt_dataflow
	// The library copies the paths and deletes h (also when this fails).
	s := C.tptgo_dataflow_from_files(&out, firstString(cs), C.size_t(len(cs)), shuffle, C.int32_t(threads), C.uintptr_t(h))
	if err := statusError(s); err != nil {
		return nil, err
	}
	return newDataFlow(out, []*stash{st}), nil
}

// FakeOptions are the options of DataFlowFake; nil or the zero value is
// tensorpack's FakeData defaults: a new random datapoint every time, uniform
// in [0, 1).
type FakeOptions struct {
	// Constant repeats one datapoint (tensorpack's random=False).
	Constant bool
	// Low and High bound the values, [Low, High) (integers rounded down);
	// both 0 means [0, 1).
	Low, High float64
}

// DataFlowFake makes size datapoints per pass of the given shapes and dtypes
// (names are ignored; no -1), for benchmarks (tpt_dataflow_fake); o nil
// means the defaults (FakeOptions).
func DataFlowFake(components []InputSpec, size int64, o *FakeOptions) (*DataFlow, error) {
	if o == nil {
		o = &FakeOptions{}
	}
	low, high := o.Low, o.High
	if low == 0 && high == 0 {
		high = 1
	}
	specs, n, free := cSpecs(components)
	defer free()
	var out *C.tpt_dataflow
	st := C.tpt_dataflow_fake(&out, specs, n, C.int64_t(size), cBool(!o.Constant), C.double(low), C.double(high))
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newDataFlow(out, nil), nil
}

// ---- Combinators.

// derive makes a dataflow that reads df: call calls the library with df's
// handle (df is locked meanwhile); st, if not nil, is the stash of the new
// node's Go function.
func (df *DataFlow) derive(who string, call func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash)) (*DataFlow, error) {
	ptr, err := df.lock("DataFlow." + who)
	if err != nil {
		return nil, err
	}
	defer df.mu.Unlock()
	var out *C.tpt_dataflow
	st, own := call(ptr, &out)
	if err := statusError(st); err != nil {
		return nil, err
	}
	stashes := append([]*stash(nil), df.stashes...)
	if own != nil {
		stashes = append(stashes, own)
	}
	return newDataFlow(out, stashes), nil
}

// Remainder is what Batch does with the datapoints at the end of a pass
// that do not fill a batch. The zero value is DropRemainder.
type Remainder int32

// The remainders of Batch.
const (
	DropRemainder Remainder = iota // dropped (tensorpack's remainder=False, PyTorch's drop_last=True)
	KeepRemainder                  // emitted as a shorter last batch
)

// Batch stacks batchSize datapoints into one along a new dimension 0 (each
// component; shapes and dtypes must agree); a short last batch is dropped
// or kept as r says (tpt_dataflow_batch).
func (df *DataFlow) Batch(batchSize int64, r Remainder) (*DataFlow, error) {
	if r != DropRemainder && r != KeepRemainder {
		return nil, &Error{Code: CodeInvalidArgument,
			Message: "DataFlow.Batch: the remainder must be DropRemainder or KeepRemainder, got " + strconv.Itoa(int(r))}
	}
	return df.derive("Batch", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		return C.tpt_dataflow_batch(out, in, C.int64_t(batchSize), cBool(r == KeepRemainder)), nil
	})
}

// Map applies fn to every datapoint in place, on the thread that iterates
// (tpt_dataflow_map). dp is lent for the call; leaving it empty drops the
// datapoint.
func (df *DataFlow) Map(fn func(dp *Datapoint) error) (*DataFlow, error) {
	if fn == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlow.Map: fn is nil"}
	}
	return df.derive("Map", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		h, st := newFunc(&dataflowFunc{where: "map function", mapFn: fn})
		// The library deletes h (also when this fails).
		return C.tptgo_dataflow_map(out, in, C.uintptr_t(h)), st
	})
}

// MapComponent replaces component index with what fn makes of it
// (tpt_dataflow_map_component): x is lent for the call; the result is taken
// over (closed for the caller; returning x itself is fine); a nil result
// drops the datapoint.
func (df *DataFlow) MapComponent(index int, fn func(x *Tensor) (*Tensor, error)) (*DataFlow, error) {
	if fn == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlow.MapComponent: fn is nil"}
	}
	if index < 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlow.MapComponent: index " + strconv.Itoa(index) + " is negative"}
	}
	return df.derive("MapComponent", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		h, st := newFunc(&dataflowFunc{where: "component map function", component: fn})
		return C.tptgo_dataflow_map_component(out, in, C.size_t(index), C.uintptr_t(h)), st
	})
}

// ParallelMapOptions are the options of ParallelMap
// (tpt_parallel_map_options). The zero value, like nil, is the default.
type ParallelMapOptions struct {
	Threads    int  // worker threads; 0 means 2
	BufferSize int  // datapoints in flight; 0 means 200
	Ordered    bool // outputs in input order
	// Strict: each pass maps exactly the input's pass (the buffer drains at
	// its end; a drop is an error). Otherwise the input repeats forever and
	// passes blend (tensorpack's default).
	Strict bool
}

// ParallelMap is tensorpack's MultiThreadMapData: fn runs on several
// worker threads at once, which start at reset, so it must be safe for
// concurrent use (tpt_dataflow_parallel_map). dp is lent for the call.
func (df *DataFlow) ParallelMap(opts *ParallelMapOptions, fn func(dp *Datapoint) error) (*DataFlow, error) {
	if fn == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlow.ParallelMap: fn is nil"}
	}
	o := ParallelMapOptions{}
	if opts != nil {
		o = *opts
	}
	copts := defaultParallelMapOptions()
	copts.ordered, copts.strict = cBool(o.Ordered), cBool(o.Strict)
	if o.Threads != 0 {
		copts.n_threads = C.int32_t(o.Threads)
	}
	if o.BufferSize != 0 {
		copts.buffer_size = C.int32_t(o.BufferSize)
	}
	return df.derive("ParallelMap", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		h, st := newFunc(&dataflowFunc{where: "parallel map function", mapFn: fn})
		return C.tptgo_dataflow_parallel_map(out, in, C.uintptr_t(h), &copts), st
	})
}

// Prefetch iterates df on a background thread, up to capacity datapoints
// ahead (tensorpack's PrefetchData; tpt_dataflow_prefetch).
func (df *DataFlow) Prefetch(capacity int64) (*DataFlow, error) {
	return df.derive("Prefetch", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		return C.tpt_dataflow_prefetch(out, in, C.int64_t(capacity)), nil
	})
}

// LocalShuffle shuffles within a buffer of bufferSize datapoints, each read
// nReuse times; it reads df over and over, so it is infinite (tensorpack's
// LocallyShuffleData; tpt_dataflow_local_shuffle).
func (df *DataFlow) LocalShuffle(bufferSize, nReuse int64) (*DataFlow, error) {
	return df.derive("LocalShuffle", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		return C.tpt_dataflow_local_shuffle(out, in, C.int64_t(bufferSize), C.int64_t(nReuse)), nil
	})
}

// Cache keeps the first pass of df in memory and replays it, in order or
// reshuffled every pass (tensorpack's CacheData; tpt_dataflow_cache).
func (df *DataFlow) Cache(order Order) (*DataFlow, error) {
	shuffle, err := order.shuffle("DataFlow.Cache")
	if err != nil {
		return nil, err
	}
	return df.derive("Cache", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		return C.tpt_dataflow_cache(out, in, shuffle), nil
	})
}

// Repeat makes n passes of df one pass; n = -1: forever (infinite)
// (tpt_dataflow_repeat).
func (df *DataFlow) Repeat(n int64) (*DataFlow, error) {
	return df.derive("Repeat", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		return C.tpt_dataflow_repeat(out, in, C.int64_t(n)), nil
	})
}

// InnerState is where FixedSize's next pass starts in the dataflow it
// reads. The zero value is KeepInnerState.
type InnerState int32

// The states of FixedSize.
const (
	KeepInnerState  InnerState = iota // where the last pass stopped (tensorpack's keep_state=True)
	ResetInnerState                   // at the start of a new pass of it
)

// FixedSize makes exactly size datapoints per pass, restarting df when it
// ends; the next pass goes on where this one stopped, or starts df over,
// as s says (tpt_dataflow_fixed_size).
func (df *DataFlow) FixedSize(size int64, s InnerState) (*DataFlow, error) {
	if s != KeepInnerState && s != ResetInnerState {
		return nil, &Error{Code: CodeInvalidArgument,
			Message: "DataFlow.FixedSize: the state must be KeepInnerState or ResetInnerState, got " + strconv.Itoa(int(s))}
	}
	return df.derive("FixedSize", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		return C.tpt_dataflow_fixed_size(out, in, C.int64_t(size), cBool(s == KeepInnerState)), nil
	})
}

// Shard keeps every count-th datapoint of df, from the index-th on: a rank's
// share of the data of a distributed job (index: the rank, count: the world
// size). Put it near the source so that the expensive steps after it run on
// the share only, and set DistributedOptions.NoShard, since the input is
// then already this rank's share. Each datapoint given reads count of df's
// and drops all but one, so every share's pipeline is in the same state; a
// pass's last datapoints that do not make count are dropped. Its size is
// df's / count. count must be from 1 to 2^20 and index from 0 to count - 1,
// else it is a CodeInvalidArgument error (tpt_dataflow_shard).
func (df *DataFlow) Shard(index, count int64) (*DataFlow, error) {
	return df.derive("Shard", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		return C.tpt_dataflow_shard(out, in, C.int64_t(index), C.int64_t(count)), nil
	})
}

// Select keeps components indices[0], indices[1], ... in that order
// (repeats allowed) (tpt_dataflow_select).
func (df *DataFlow) Select(indices ...int) (*DataFlow, error) {
	cidx := make([]C.size_t, len(indices))
	for i, v := range indices {
		if v < 0 {
			return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlow.Select: indices[" + strconv.Itoa(i) + "] is negative"}
		}
		cidx[i] = C.size_t(v)
	}
	return df.derive("Select", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		var p *C.size_t
		if len(cidx) > 0 {
			p = &cidx[0]
		}
		return C.tpt_dataflow_select(out, in, p, C.size_t(len(cidx))), nil
	})
}

// lockDataFlows locks every distinct dataflow of dfs in address order (so
// that concurrent calls on overlapping sets cannot deadlock) and returns
// their handles in the order of dfs, and their stashes.
func lockDataFlows(dfs []*DataFlow, who string) ([]*C.tpt_dataflow, []*stash, func(), error) {
	order := make([]*DataFlow, 0, len(dfs))
	for i, d := range dfs {
		if d == nil {
			return nil, nil, nil, &Error{Code: CodeInvalidArgument, Message: who + ": dfs[" + strconv.Itoa(i) + "] is nil"}
		}
		order = append(order, d)
	}
	sort.Slice(order, func(a, b int) bool {
		return uintptr(unsafe.Pointer(order[a])) < uintptr(unsafe.Pointer(order[b]))
	})
	locked := make([]*DataFlow, 0, len(order))
	for i, d := range order {
		if i > 0 && d == order[i-1] {
			continue
		}
		d.mu.Lock()
		locked = append(locked, d)
	}
	unlock := func() {
		for _, d := range locked {
			d.mu.Unlock()
		}
	}
	ptrs := make([]*C.tpt_dataflow, len(dfs))
	var stashes []*stash
	for i, d := range dfs {
		if d.ptr == nil {
			unlock()
			return nil, nil, nil, &Error{Code: CodeInvalidArgument, Message: who + ": dfs[" + strconv.Itoa(i) + "]: use of closed DataFlow"}
		}
		ptrs[i] = d.ptr
		stashes = append(stashes, d.stashes...)
	}
	return ptrs, stashes, unlock, nil
}

func combine(who string, dfs []*DataFlow, call func(out **C.tpt_dataflow, dfs **C.tpt_dataflow, n C.size_t) *C.tpt_status) (*DataFlow, error) {
	ptrs, stashes, unlock, err := lockDataFlows(dfs, who)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var first **C.tpt_dataflow
	if len(ptrs) > 0 {
		first = &ptrs[0]
	}
	var out *C.tpt_dataflow
	// Go memory holding C pointers only.
	if err := statusError(call(&out, first, C.size_t(len(ptrs)))); err != nil {
		return nil, err
	}
	return newDataFlow(out, stashes), nil
}

// ConcatDataFlows makes a dataflow of dfs one after the other
// (tpt_dataflow_concat).
func ConcatDataFlows(dfs ...*DataFlow) (*DataFlow, error) {
	return combine("ConcatDataFlows", dfs, func(out **C.tpt_dataflow, p **C.tpt_dataflow, n C.size_t) *C.tpt_status {
		return C.tpt_dataflow_concat(out, p, n)
	})
}

// JoinDataFlows makes a dataflow of dfs side by side: the components of
// dfs[0], then of dfs[1], ...; a pass ends with the shortest
// (tpt_dataflow_join).
func JoinDataFlows(dfs ...*DataFlow) (*DataFlow, error) {
	return combine("JoinDataFlows", dfs, func(out **C.tpt_dataflow, p **C.tpt_dataflow, n C.size_t) *C.tpt_status {
		return C.tpt_dataflow_join(out, p, n)
	})
}

// ---- Image augmentation.

// AugmentKind is the kind of an image augmentor (tpt_augment_kind).
type AugmentKind int32

// The augmentors of tpt_augment_kind, with the Augmentor fields they use.
const (
	AugmentToFloat    AugmentKind = C.TPT_AUGMENT_TO_FLOAT    // float32, times Scale (e.g. 1/255)
	AugmentNormalize  AugmentKind = C.TPT_AUGMENT_NORMALIZE   // (x - Mean[c]) / Std[c]; one value applies to all channels
	AugmentRandomCrop AugmentKind = C.TPT_AUGMENT_RANDOM_CROP // pad by Padding zeros, crop Height x Width at random
	AugmentFlip       AugmentKind = C.TPT_AUGMENT_FLIP        // flip horizontally with Probability
)

// Augmentor is one image augmentor of Augment (tpt_augmentor): the fields
// its Kind uses.
type Augmentor struct {
	Kind                   AugmentKind
	Scale                  float64
	Mean, Std              []float64 // the same length
	Height, Width, Padding int64
	Probability            float64
}

// Augment applies augmentors, in order, to the image component index
// ([C, H, W] or [H, W]) of every datapoint (tensorpack's
// AugmentImageComponent; tpt_dataflow_augment). Each datapoint's randomness
// is drawn in input order, so the result does not depend on threads (0: on
// the iterating thread).
func (df *DataFlow) Augment(index int, augmentors []Augmentor, threads int) (*DataFlow, error) {
	if index < 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlow.Augment: index " + strconv.Itoa(index) + " is negative"}
	}
	// The augmentors hold pointers: C memory.
	size := arenaSize(uintptr(len(augmentors)) * unsafe.Sizeof(C.tpt_augmentor{}))
	for i, a := range augmentors {
		if len(a.Mean) != len(a.Std) {
			return nil, &Error{Code: CodeInvalidArgument, Message: "DataFlow.Augment: augmentors[" + strconv.Itoa(i) +
				"]: Mean has " + strconv.Itoa(len(a.Mean)) + " values, Std " + strconv.Itoa(len(a.Std))}
		}
		size += 2 * arenaSize(uintptr(len(a.Mean))*8)
	}
	arena := newArena(size)
	defer arena.free()
	var first *C.tpt_augmentor
	if len(augmentors) > 0 {
		cs := unsafe.Slice((*C.tpt_augmentor)(arena.alloc(uintptr(len(augmentors))*unsafe.Sizeof(C.tpt_augmentor{}))), len(augmentors))
		for i, a := range augmentors {
			c := defaultAugmentor() // the version
			c.kind, c.scale = C.tpt_augment_kind(a.Kind), C.double(a.Scale)
			c.mean, c.std, c.n_channels = doubles(arena, a.Mean), doubles(arena, a.Std), C.size_t(len(a.Mean))
			c.height, c.width, c.padding = C.int64_t(a.Height), C.int64_t(a.Width), C.int64_t(a.Padding)
			c.probability = C.double(a.Probability)
			cs[i] = c
		}
		first = &cs[0]
	}
	return df.derive("Augment", func(in *C.tpt_dataflow, out **C.tpt_dataflow) (*C.tpt_status, *stash) {
		return C.tpt_dataflow_augment(out, in, C.size_t(index), first, C.size_t(len(augmentors)), C.int32_t(threads)), nil
	})
}

// doubles copies v into the arena; nil for an empty v.
func doubles(a *cArena, v []float64) *C.double {
	if len(v) == 0 {
		return nil
	}
	p := a.alloc(uintptr(len(v)) * 8)
	copy(unsafe.Slice((*float64)(p), len(v)), v)
	return (*C.double)(p)
}

// ---- Iterating, seeds and state.

// ResetState prepares df (and what it reads) for iteration: seeds its
// randomness (or restores the state set), starts its threads and a new
// pass (tpt_dataflow_reset_state). Next resets a dataflow that never was; a
// later reset starts over.
func (df *DataFlow) ResetState() error {
	ptr, err := df.lock("DataFlow.ResetState")
	if err != nil {
		return err
	}
	defer df.enter()() // after Unlock: a Close from the dataflow's own callbacks waits for this call
	defer df.mu.Unlock()
	st := C.tpt_dataflow_reset_state(ptr)
	return df.result(st)
}

// Next returns the components of the next datapoint of the pass, owned by
// the caller, or io.EOF at the end of the pass; the call after that starts
// the next pass (tpt_dataflow_next).
func (df *DataFlow) Next() ([]*Tensor, error) {
	ptr, err := df.lock("DataFlow.Next")
	if err != nil {
		return nil, err
	}
	defer df.enter()() // after Unlock: a Close from the dataflow's own callbacks waits for this call
	defer df.mu.Unlock()
	if df.dp == nil {
		if err := statusError(C.tpt_datapoint_new(&df.dp)); err != nil {
			return nil, err
		}
	}
	if err := df.result(C.tpt_dataflow_next(ptr, df.dp)); err != nil {
		return nil, err
	}
	return datapointTensors(df.dp)
}

// NextInto is Next into dp (its components are replaced), without making
// Tensors: it returns io.EOF at the end of the pass.
func (df *DataFlow) NextInto(dp *Datapoint) error {
	ptr, err := df.lock("DataFlow.NextInto")
	if err != nil {
		return err
	}
	defer df.enter()() // after Unlock: a Close from the dataflow's own callbacks waits for this call
	defer df.mu.Unlock()
	dptr, err := dp.lock("NextInto")
	if err != nil {
		return err
	}
	defer dp.mu.Unlock()
	return df.result(C.tpt_dataflow_next(ptr, dptr))
}

// Iterate runs fn on every datapoint of one pass (the rest of the pass, if
// one is under way) and returns nil at its end, or the first error of the
// dataflow or of fn. The tensors are closed when fn returns (keep one with
// Share).
func (df *DataFlow) Iterate(fn func(components []*Tensor) error) error {
	for {
		ts, err := df.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		err = fn(ts)
		closeTensors(ts)
		if err != nil {
			return err
		}
	}
}

// Size returns the datapoints per pass, and false when that is unknown or
// infinite (tpt_dataflow_size). A panic in a SourceSizer's Size makes the
// size unknown for the library and is raised again here.
func (df *DataFlow) Size() (int64, bool) {
	ptr, err := df.lock("DataFlow.Size")
	if err != nil {
		return -1, false
	}
	defer df.mu.Unlock()
	var n C.int64_t
	st := C.tpt_dataflow_size(&n, ptr)
	for _, s := range df.stashes {
		if v, ok := s.takePanicIn("dataflow source's Size"); ok {
			C.tpt_status_free(st)
			panic(v)
		}
	}
	if statusError(st) != nil || n < 0 {
		return -1, false
	}
	return int64(n), true
}

// takePanicIn finds and forgets a panic recorded as happening in where.
func (s *stash) takePanicIn(where string) (any, bool) {
	prefix := "panic in " + where + ": "
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.panics {
		if strings.HasPrefix(p.msg, prefix) {
			s.panics = append(s.panics[:i], s.panics[i+1:]...)
			return p.value, true
		}
	}
	return nil, false
}

// SetSeed seeds every random part of the pipeline at its next reset (each
// gets its own stream, mixed from seed and its place in the pipeline); call
// it on the outermost dataflow (tpt_dataflow_set_seed). Without it the seed
// comes from ManualSeed.
func (df *DataFlow) SetSeed(seed uint64) error {
	ptr, err := df.lock("DataFlow.SetSeed")
	if err != nil {
		return err
	}
	defer df.mu.Unlock()
	return statusError(C.tpt_dataflow_set_seed(ptr, C.uint64_t(seed)))
}

// State returns the pipeline's state as of the last datapoint it gave
// (generators, seeds, the position in the pass) as a uint8 tensor, to save
// with a checkpoint (tpt_dataflow_get_state). Threads that read ahead do not
// change it. Not saved: a local shuffle's buffer, the order of an unordered
// parallel map, and the position of a Go source that does not implement
// SourceStater (DataFlowFromFunc's included); a SourceStater's SaveState
// runs here unless a thread reads ahead of it, and its error or panic comes
// back from State as from Next.
func (df *DataFlow) State() (*Tensor, error) {
	ptr, err := df.lock("DataFlow.State")
	if err != nil {
		return nil, err
	}
	defer df.mu.Unlock()
	var out *C.tpt_tensor
	if err := df.result(C.tpt_dataflow_get_state(&out, ptr)); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// SetState restores a state from State of a pipeline of the same shape; the
// next reset continues with the datapoint after the last one given when the
// state was taken, mid-pass or not (tpt_dataflow_set_state); a SourceStater
// gets its position back through RestoreState at that reset. A state of a
// pipeline of another shape, or one holding a source's position for a
// source that does not implement SourceStater, is an *Error of
// CodeInvalidArgument (nothing changes).
func (df *DataFlow) SetState(state *Tensor) error {
	ptr, err := df.lock("DataFlow.SetState")
	if err != nil {
		return err
	}
	defer df.mu.Unlock()
	ts, unlock, err := lockTensors([]*Tensor{state}, false, func(int) string { return "DataFlow.SetState: the state" })
	if err != nil {
		return err
	}
	defer unlock()
	return statusError(C.tpt_dataflow_set_state(ptr, ts[0]))
}
