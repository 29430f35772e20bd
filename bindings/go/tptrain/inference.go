package tptrain

// Inference during training: the header section of that name. An
// InferenceRunner makes one pass of a dataflow through the model's
// inference tower at every TRIGGER, and its inferencers turn the outputs
// into scalars (tensorpack's InferenceRunner and Inferencer); the
// DataParallelInferenceRunner infers several batches at once, one on each
// of its inference towers.

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"math"
	"runtime"
	"strconv"
	"unsafe"
)

// Inferencer turns the outputs of the inference tower over one pass of an
// InferenceRunner into scalars (tpt_inferencer): ScalarStats,
// ClassificationError, or Go functions (NewInferencer).
// NewInferenceRunnerWith takes it over; Close releases one that was never
// given to a runner.
type Inferencer struct {
	handle[*C.tpt_inferencer]
	fn   *inferencerFunc // NewInferencer's; nil for the library's own
	name string
}

// InferencerFuncs are the functions of an inferencer written in Go
// (tpt_inferencer_desc), for NewInferencer. In each pass of the runner,
// Before runs, then OnOutputs once per batch, then After. They run on the
// goroutine of Run, inside the runner's callback.
//
// Each returns nil, Stop(reason) to end training gracefully, or an error
// that fails training: Run returns that very value. A panic fails training
// too, and Run panics again with the same value once training has ended.
// The Tensors a function makes go when it returns, as in callbacks (Keep one
// to hold it longer).
type InferencerFuncs struct {
	// Name is for errors; "" means "inferencer".
	Name string
	// Outputs are the names of the tower's outputs that OnOutputs gets, in
	// this order (the cost is "cost").
	Outputs []string
	// Before starts a pass, e.g. by resetting sums; nil: nothing.
	Before func() error
	// OnOutputs gets the outputs of one batch, in the order of Outputs,
	// and the batch's rows (its first dimension). The tensors are lent for
	// the call only (Keep one to hold it longer). Required.
	OnOutputs func(outputs []*Tensor, rows int64) error
	// After ends the pass and puts its results with ctx.PutScalar; nil:
	// nothing.
	After func(ctx *Context) error
}

// inferencerFunc is what the inferencer trampolines find behind their
// handle.
type inferencerFunc struct {
	name string
	fns  InferencerFuncs
	st   *stash
	// The runner's, set when a runner takes the inferencer: its ctx (set
	// when a trainer takes the runner) is the Context that After gets.
	owner *hostFunc
}

func (f *inferencerFunc) where(fn string) string {
	return "inferencer '" + f.name + "' " + fn
}

// NewInferencer makes an inferencer of Go functions (tpt_inferencer_new,
// tensorpack's Inferencer). Give it to NewInferenceRunnerWith.
func NewInferencer(fns InferencerFuncs) (*Inferencer, error) {
	if fns.OnOutputs == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "NewInferencer: InferencerFuncs.OnOutputs is nil"}
	}
	name := fns.Name
	var cname *C.char
	if name != "" {
		cname = C.CString(name)
		defer C.free(unsafe.Pointer(cname))
	} else {
		name = "inferencer"
	}
	fns.Outputs = append([]string(nil), fns.Outputs...)
	cs, free := cStrings(fns.Outputs)
	defer free()
	f := &inferencerFunc{name: name, fns: fns, st: &stash{}}
	h := newHandle(f)
	var out *C.tpt_inferencer
	// The library deletes h (also when this fails).
	st := C.tptgo_inferencer_new(&out, cname, firstString(cs), C.size_t(len(cs)),
		cBool(fns.Before != nil), cBool(fns.After != nil), C.uintptr_t(h))
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newInferencer(out, f, name), nil
}

func newInferencer(ptr *C.tpt_inferencer, f *inferencerFunc, name string) *Inferencer {
	inf := &Inferencer{fn: f, name: name}
	inf.ptr = ptr
	runtime.SetFinalizer(inf, (*Inferencer).Close)
	return inf
}

// ScalarStats makes tensorpack's ScalarStats (tpt_inferencer_scalar_stats):
// for each name in outputs, the mean over the pass as the scalar
// "<prefix>_<name>", or "<name>" when prefix is "". (tensorpack's default
// prefix, which NewInferenceRunner's scalars get, is "validation".) An
// output of one element per batch is weighted by the batch's rows, one of
// one element per row is averaged over rows.
func ScalarStats(prefix string, outputs ...string) (*Inferencer, error) {
	if len(outputs) == 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: "ScalarStats: no outputs (name at least one)"}
	}
	// "" is no prefix in C as well (NULL would mean "validation").
	cprefix := C.CString(prefix)
	defer C.free(unsafe.Pointer(cprefix))
	cs, free := cStrings(outputs)
	defer free()
	var out *C.tpt_inferencer
	if err := statusError(C.tpt_inferencer_scalar_stats(&out, firstString(cs), C.size_t(len(cs)), cprefix)); err != nil {
		return nil, err
	}
	return newInferencer(out, nil, "ScalarStats"), nil
}

// ClassificationErrorOptions are the options of ClassificationError; the
// zero value (or nil) is the defaults.
type ClassificationErrorOptions struct {
	// WrongOutput is the tower's output of one 0/1 value per row (1: the
	// row is wrong); "" means "wrong", the name Wrong's result usually has.
	WrongOutput string
	// SummaryName is the scalar's name; "" means "validation_error".
	SummaryName string
}

// ClassificationError makes tensorpack's ClassificationError
// (tpt_inferencer_classification_error): the scalar SummaryName is the
// wrong rows over all rows of the pass, whatever the batch sizes.
func ClassificationError(o *ClassificationErrorOptions) (*Inferencer, error) {
	if o == nil {
		o = &ClassificationErrorOptions{}
	}
	var wrong, summary *C.char
	if o.WrongOutput != "" {
		wrong = C.CString(o.WrongOutput)
		defer C.free(unsafe.Pointer(wrong))
	}
	if o.SummaryName != "" {
		summary = C.CString(o.SummaryName)
		defer C.free(unsafe.Pointer(summary))
	}
	var out *C.tpt_inferencer
	if err := statusError(C.tpt_inferencer_classification_error(&out, wrong, summary)); err != nil {
		return nil, err
	}
	return newInferencer(out, nil, "ClassificationError"), nil
}

// Close releases an inferencer that was not given to a runner
// (tpt_inferencer_free); its Go functions are released with it. It is
// idempotent, does nothing to an inferencer given away, and always returns
// nil.
func (inf *Inferencer) Close() error {
	if inf == nil {
		return nil
	}
	if inf.release(func(p *C.tpt_inferencer) { C.tpt_inferencer_free(p) }) {
		runtime.SetFinalizer(inf, nil)
	}
	return nil
}

// take hands the inferencer over: the caller owns the handle from now on.
func (inf *Inferencer) take(who string) (*C.tpt_inferencer, *inferencerFunc, error) {
	if inf == nil {
		return nil, nil, &Error{Code: CodeInvalidArgument, Message: who + " is nil"}
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.ptr == nil {
		return nil, nil, &Error{Code: CodeInvalidArgument,
			Message: who + ": the Inferencer '" + inf.name + "' was closed or already given away"}
	}
	ptr := inf.ptr
	inf.ptr = nil
	runtime.SetFinalizer(inf, nil)
	return ptr, inf.fn, nil
}

// NewInferenceRunnerWith makes tensorpack's InferenceRunner with the given
// inferencers (tpt_inference_runner): at every TRIGGER (after each epoch;
// wrap it in PeriodicTrigger to run it every k steps or epochs) it makes one
// pass of df (batches in signature order; it must be finite) through the
// model's inference tower, and each inferencer puts its scalars, which
// monitors, MinSaver, MaxSaver, StatMonitorParam and EarlyStopping read. It
// takes the inferencers over, also when it fails, and keeps references to
// model and df (which it consumes); the caller still owns both. The runner
// is chief-only. Give the callback to a trainer (AddCallback, TrainConfig).
// NewDataParallelInferenceRunner infers several batches at once.
func NewInferenceRunnerWith(model *Model, df *DataFlow, inferencers ...*Inferencer) (*Callback, error) {
	return newInferenceRunner("NewInferenceRunnerWith", "InferenceRunner", model, df, false, 0, inferencers)
}

// NewDataParallelInferenceRunner makes tensorpack's
// DataParallelInferenceRunner (tpt_inference_runner_data_parallel): the
// InferenceRunner of NewInferenceRunnerWith with towers (1 to 256) CPU
// inference towers, "InferenceTower0", "InferenceTower1", ... (Tower.Name),
// that each infer a batch of df at once: tower 0 on the goroutine of Run,
// the others on threads of the library's own, started before training and
// joined after it, with a share of the intra-op threads. The tower function
// must therefore be safe for concurrent use (as for Trainer.SetTowers); an
// error it returns in any tower fails training and Run returns that very
// value, a panic makes Run panic again. The inferencers still run on the
// goroutine of Run and get the batches in the dataflow's order, so the
// results are NewInferenceRunnerWith's. A count of towers out of range is
// an error (CodeInvalidArgument); the inferencers are taken over all the
// same.
func NewDataParallelInferenceRunner(model *Model, df *DataFlow, towers int, inferencers ...*Inferencer) (*Callback, error) {
	return newInferenceRunner("NewDataParallelInferenceRunner", "DataParallelInferenceRunner", model, df, true, towers,
		inferencers)
}

// newInferenceRunner is tpt_inference_runner, or with dataParallel
// tpt_inference_runner_data_parallel of towers towers.
func newInferenceRunner(who, name string, model *Model, df *DataFlow, dataParallel bool, towers int,
	inferencers []*Inferencer) (*Callback, error) {
	// Take them all first: they are released whatever happens.
	ptrs := make([]*C.tpt_inferencer, 0, len(inferencers))
	var fns []*inferencerFunc
	var firstErr error
	for i, inf := range inferencers {
		ptr, f, err := inf.take(who + ": inferencers[" + strconv.Itoa(i) + "]")
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		ptrs = append(ptrs, ptr)
		if f != nil {
			fns = append(fns, f)
		}
	}
	freeAll := func() {
		for _, p := range ptrs {
			C.tpt_inferencer_free(p)
		}
	}
	if firstErr == nil && dataParallel && (towers < math.MinInt32 || towers > math.MaxInt32) {
		// Out of the C argument's range: the library's message for a count
		// out of range (it checks the rest).
		firstErr = &Error{Code: CodeInvalidArgument,
			Message: who + ": n_towers is " + strconv.Itoa(towers) + ": it must be in [1, 256]"}
	}
	if firstErr != nil {
		freeAll()
		return nil, firstErr
	}
	mptr, err := model.rlock(who)
	if err != nil {
		freeAll()
		return nil, err
	}
	defer model.mu.RUnlock()
	dptr, err := df.lock(who)
	if err != nil {
		freeAll()
		return nil, err
	}
	defer df.mu.Unlock()
	var first **C.tpt_inferencer
	if len(ptrs) > 0 {
		first = &ptrs[0]
	}
	var out *C.tpt_callback
	// Go memory holding C pointers only; the library takes every inferencer
	// (also when it fails).
	var st *C.tpt_status
	if !dataParallel {
		st = C.tpt_inference_runner(&out, mptr, dptr, first, C.size_t(len(ptrs)))
	} else {
		st = C.tpt_inference_runner_data_parallel(&out, mptr, dptr, first, C.size_t(len(ptrs)), C.int32_t(towers))
	}
	runtime.KeepAlive(model)
	if err := statusError(st); err != nil {
		return nil, err
	}
	f := &hostFunc{name: name, stashes: append([]*stash{model.st}, df.stashes...)}
	for _, fn := range fns {
		fn.owner = f
		f.stashes = append(f.stashes, fn.st)
	}
	return newCallback(out, []*hostFunc{f}, name), nil
}

// NewInferenceRunner makes tensorpack's InferenceRunner, minimal
// (tpt_inference_runner_new): at every TRIGGER (the end of each epoch) it
// runs one pass of df (batches in signature order; it must be finite)
// through the model's inference tower and puts, for each name in outputs,
// the mean of that output over all rows as the scalar "validation_<name>".
// It keeps references to model and df (which it consumes); the caller still
// owns both. Give the callback to a trainer (AddCallback, TrainConfig). It is
// the short form of NewInferenceRunnerWith with one ScalarStats("validation", outputs...).
func NewInferenceRunner(model *Model, df *DataFlow, outputs ...string) (*Callback, error) {
	mptr, err := model.rlock("NewInferenceRunner")
	if err != nil {
		return nil, err
	}
	defer model.mu.RUnlock()
	dptr, err := df.lock("NewInferenceRunner")
	if err != nil {
		return nil, err
	}
	defer df.mu.Unlock()
	cs, free := cStrings(outputs)
	defer free()
	var out *C.tpt_callback
	st := C.tpt_inference_runner_new(&out, mptr, dptr, firstString(cs), C.size_t(len(cs)))
	runtime.KeepAlive(model)
	if err := statusError(st); err != nil {
		return nil, err
	}
	f := &hostFunc{name: "InferenceRunner", stashes: append([]*stash{model.st}, df.stashes...)}
	return newCallback(out, []*hostFunc{f}, "InferenceRunner"), nil
}

// ---- predictors

// Predictor is tensorpack's OfflinePredictor (tpt_predictor): the model's
// tower function run as an inference tower on some of its inputs, by name,
// returning some of its outputs, by name. The inputs it is not given (the
// labels) reach the tower function as zeros of the batch's size, so a
// tower function that computes its loss runs unchanged. Any number of
// goroutines may call Predict at once (not while a trainer trains the
// model); the Model must stay open. Close releases it.
type Predictor struct {
	handle[*C.tpt_predictor]
	model   *Model
	outputs int
}

// PredictorOptions are the options of NewPredictor; nil, or the zero
// value, means every input of the signature and the model's variables as
// they are.
type PredictorOptions struct {
	// Inputs are the inputs Predict takes, by name, in its order; nil:
	// every input of the signature, in its order.
	Inputs []string
	// Checkpoint is a checkpoint file or directory (its latest), or a
	// state_dict, whose variables are restored now, as Model.Restore does
	// with its defaults (the model is built first): e.g. a MaxSaver's file,
	// Trainer.BestCheckpoint. "": the model's variables as they are.
	Checkpoint string
}

// NewPredictor makes a predictor of m that returns the outputs named in
// outputs (at least one; "cost" is the cost), building m when it is not
// built (tpt_predictor_new). An unknown input name, an input left out whose
// shape past the batch is not known, or an unreadable checkpoint is an
// *Error that names it.
func NewPredictor(m *Model, outputs []string, o *PredictorOptions) (*Predictor, error) {
	if o == nil {
		o = &PredictorOptions{}
	}
	ptr, err := m.rlock("NewPredictor")
	if err != nil {
		return nil, err
	}
	defer m.enter()() // the build call runs the tower function
	defer m.mu.RUnlock()
	// Every string and array the library reads lives in C memory: the
	// options struct holds pointers to them.
	size := arenaSize(uintptr(len(outputs)+len(o.Inputs))*unsafe.Sizeof((*C.char)(nil))) + arenaSize(uintptr(len(o.Checkpoint))+1)
	for _, s := range append(append([]string(nil), outputs...), o.Inputs...) {
		size += arenaSize(uintptr(len(s)) + 1)
	}
	a := newArena(size)
	defer a.free()
	strs := func(names []string) **C.char {
		if len(names) == 0 {
			return nil
		}
		arr := unsafe.Slice((**C.char)(a.alloc(uintptr(len(names))*unsafe.Sizeof((*C.char)(nil)))), len(names))
		for i, s := range names {
			arr[i] = a.str(s)
		}
		return &arr[0]
	}
	c := defaultPredictorOptions()
	c.input_names, c.n_input_names = strs(o.Inputs), C.size_t(len(o.Inputs))
	if o.Checkpoint != "" {
		c.checkpoint = a.str(o.Checkpoint)
	}
	outp := strs(outputs)
	var out *C.tpt_predictor
	st := C.tpt_predictor_new(&out, ptr, outp, C.size_t(len(outputs)), &c)
	runtime.KeepAlive(m)
	if err := m.st.result(st); err != nil {
		return nil, err
	}
	p := &Predictor{model: m, outputs: len(outputs)}
	p.ptr = out
	runtime.SetFinalizer(p, (*Predictor).Close)
	return p, nil
}

// Predict runs the tower function on inputs (in the order of
// PredictorOptions.Inputs, all with the same first dimension) and returns
// the outputs, in the order NewPredictor was given them
// (tpt_predictor_run). Close each.
func (p *Predictor) Predict(inputs ...*Tensor) ([]*Tensor, error) {
	ptr, err := p.acquire(true, "Predictor", "Predictor.Predict")
	if err != nil {
		return nil, err
	}
	defer p.mu.RUnlock()
	m := p.model
	if _, err := m.rlock("Predict (the Predictor's model)"); err != nil {
		return nil, err
	}
	defer m.enter()()
	defer m.mu.RUnlock()
	ins, unlock, err := lockTensors(inputs, false, func(i int) string { return "Predictor.Predict: inputs[" + strconv.Itoa(i) + "]" })
	if err != nil {
		return nil, err
	}
	defer unlock()
	outs := make([]*C.tpt_tensor, p.outputs)
	var inp **C.tpt_tensor
	if len(ins) > 0 {
		inp = &ins[0]
	}
	st := C.tpt_predictor_run(&outs[0], ptr, inp, C.size_t(len(ins)))
	runtime.KeepAlive(p)
	if err := m.st.result(st); err != nil {
		return nil, err
	}
	res := make([]*Tensor, len(outs))
	for i, o := range outs {
		res[i] = newTensor(o)
	}
	return res, nil
}

// Close releases the predictor (tpt_predictor_free), not its model. It is
// idempotent, waits for calls in progress, and always returns nil.
func (p *Predictor) Close() error {
	if p == nil {
		return nil
	}
	if p.release(func(c *C.tpt_predictor) { C.tpt_predictor_free(c) }) {
		runtime.SetFinalizer(p, nil)
	}
	return nil
}
