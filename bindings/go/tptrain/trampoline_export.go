package tptrain

// The Go functions the library calls back (through the adapters in
// trampoline.c). This file holds only //export functions: cgo forbids C
// definitions in the preamble of a file that exports to C.
//
// The trainer's trampolines run on the goroutine that called Run (the
// library calls back on the thread of tpt_trainer_run, and cgo brings the
// call back to that goroutine). None lets a panic unwind through C: it
// recovers, records the panic on the trainer's Context and returns an error
// status; Run panics again with the same value once tpt_trainer_run has
// returned.
//
// The tower trampoline may run on several threads at once (one per tower),
// and the feed and deleter trampolines on threads the library chose: they
// find their Go function through a runtime/cgo.Handle (safe for concurrent
// use) and record errors and panics in a mutex-guarded stash, which Run,
// Build and Infer consult when the status comes back.

/*
#include <stdint.h>
#include <tptrain.h>
*/
import "C"

import (
	"fmt"
	"io"
	"runtime/cgo"
	"strconv"
	"unsafe"
)

// Every trampoline below runs the user's code through hostCall
// (trampoline_helpers.go), which turns a panic into an error status.

//export tptgoRunStep
func tptgoRunStep(_ *C.tpt_trainer, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*hostFunc)
	c := f.ctx
	c.unwinding = ""
	return hostCall(runStepPanics{c}, "run_step", func() *C.tpt_status { return c.status(f.runStep(c)) })
}

//export tptgoStep
func tptgoStep(_ *C.tpt_trainer, handle C.uintptr_t) (st *C.tpt_status) {
	c := cgo.Handle(handle).Value().(*Context)
	step := c.steps[len(c.steps)-1]
	return hostCall(c, "hooked step", func() *C.tpt_status { return c.status(step(c)) })
}

//export tptgoCallback
func tptgoCallback(_ *C.tpt_trainer, event C.uint32_t, record *C.tpt_record, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*hostFunc)
	c := f.ctx
	if c == nil { // cannot happen: a callback fires only once a trainer has it
		return newStatus(&Error{Code: CodeInternal, Message: "callback '" + f.name + "' fired before it was added to a trainer"})
	}
	var rec *Record
	if record != nil {
		rec = recordFromC(record)
	}
	defer func() {
		if rec != nil && rec.Image != nil {
			rec.Image.Close() // the library's: lent for this call only
		}
	}()
	return hostCall(c, "callback '"+f.name+"'", func() *C.tpt_status { return c.status(f.callback(c, Event(event), rec)) })
}

//export tptgoCallbackSave
func tptgoCallbackSave(out **C.tpt_tensor, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*hostFunc)
	c := f.ctx
	where := "callback '" + f.name + "' saving its state"
	var state []byte
	if st := hostCall(c, where, func() *C.tpt_status {
		var err error
		state, err = f.state.SaveState()
		return c.status(noStop(err, where))
	}); st != nil {
		return st
	}
	x, err := FromUint8(state) // a copy: the callback may reuse its slice
	if err != nil {
		return c.status(err)
	}
	p, err := x.take("the callback's state") // the library takes the handle
	if err != nil {
		return c.status(err)
	}
	*out = p
	return nil
}

//export tptgoCallbackRestore
func tptgoCallbackRestore(state *C.tpt_tensor, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*hostFunc)
	c := f.ctx
	where := "callback '" + f.name + "' restoring its state"
	x := lentTensor(state)
	b, err := x.Bytes()
	x.Close() // the library's: lent for this call only
	if err != nil {
		return c.status(err)
	}
	return hostCall(c, where, func() *C.tpt_status { return c.status(noStop(f.state.RestoreState(b), where)) })
}

//export tptgoPredicate
func tptgoPredicate(_ *C.tpt_trainer, handle C.uintptr_t) (r C.int32_t) {
	f := cgo.Handle(handle).Value().(*hostFunc)
	c := f.ctx
	if c == nil {
		return -1
	}
	st := hostCall(c, "predicate of '"+f.name+"'", func() *C.tpt_status {
		if f.predicate(c) {
			r = 1
		}
		return nil
	})
	if st != nil { // a panic, recorded on c
		C.tpt_status_free(st)
		return -1 // the library fails training with TPT_ERR_CALLBACK
	}
	return r
}

//export tptgoInit
func tptgoInit(model *C.tpt_model, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*initFunc)
	c := f.ctx
	m := &Model{st: f.st}
	m.ptr, m.borrowed = model, true
	defer m.Close() // the handle is the library's: invalid from now on
	return hostCall(c, "init hook", func() *C.tpt_status { return c.status(f.fn(m)) })
}

//export tptgoDeleteHandle
func tptgoDeleteHandle(handle C.uintptr_t) {
	deleteHandle(cgo.Handle(handle))
}

//export tptgoTower
func tptgoTower(tower *C.tpt_tower, inputs **C.tpt_tensor, n C.size_t, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*towerFunc)
	tw := &Tower{ptr: tower}
	ins := make([]*Tensor, int(n))
	if n > 0 {
		for i, p := range unsafe.Slice(inputs, int(n)) {
			ins[i] = lentTensor(p)
		}
	}
	defer func() {
		// The tower and the inputs are the library's: invalid from now on.
		tw.mu.Lock()
		tw.ptr = nil
		tw.mu.Unlock()
		for _, x := range ins {
			x.Close()
		}
	}()
	return hostCall(f.st, "tower function", func() *C.tpt_status { return f.st.status(f.fn(tw, ins)) })
}

//export tptgoFeed
func tptgoFeed(batch **C.tpt_tensor, n C.size_t, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*feedFunc)
	var ts []*Tensor
	var err error
	if st := hostCall(f.st, "feed function", func() *C.tpt_status {
		ts, err = f.fn(int(n))
		return nil
	}); st != nil {
		return st
	}
	if err == io.EOF {
		err = Stop("EOF")
	}
	if err != nil {
		return f.st.status(err)
	}
	if len(ts) != int(n) {
		for _, x := range ts {
			x.Close()
		}
		return f.st.status(&Error{Code: CodeCallback,
			Message: "the feed function returned " + strconv.Itoa(len(ts)) + " tensors for " + strconv.Itoa(int(n)) + " inputs"})
	}
	if n == 0 {
		return nil
	}
	// The library takes every handle stored in batch, also on error.
	slots := unsafe.Slice(batch, int(n))
	for i, x := range ts {
		p, err := x.take("the feed function's tensor " + strconv.Itoa(i))
		if err != nil {
			for _, rest := range ts[i+1:] {
				rest.Close()
			}
			return f.st.status(err)
		}
		slots[i] = p
	}
	return nil
}

//export tptgoBlobDelete
func tptgoBlobDelete(_ unsafe.Pointer, ctx C.uintptr_t) {
	h := cgo.Handle(ctx)
	deleter := h.Value().(func())
	deleteHandle(h)
	defer func() {
		if v := recover(); v != nil {
			// No caller to hand the panic to (the memory may be released
			// on any thread, from any call): crash, as a panic in a
			// finalizer does.
			msg := fmt.Sprintf("tptrain: panic in a FromBlob deleter: %v", v)
			go func() { panic(msg) }()
			select {}
		}
	}()
	deleter()
}

// ---- Dataflows. These run on the thread that iterates a dataflow, which
// may be one of the library's (prefetch, queue input, parallel map workers,
// several at once): errors and panics go to the function's stash, which the
// call that iterates (Next, ResetState, Run) consults.

//export tptgoSourceNext
func tptgoSourceNext(dp *C.tpt_datapoint, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*dataflowFunc)
	var ts []*Tensor
	var err error
	if st := hostCall(f.st, f.where, func() *C.tpt_status {
		ts, err = f.source.Next()
		return nil
	}); st != nil {
		return st
	}
	if err == io.EOF {
		closeTensors(ts)
		return newCStatus(codeStop, "end of the pass")
	}
	if err != nil {
		closeTensors(ts)
		return f.st.status(err)
	}
	return f.st.status(fillDatapoint(dp, ts, "the dataflow source's tensor"))
}

//export tptgoSourceReset
func tptgoSourceReset(seed C.uint64_t, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*dataflowFunc)
	where := f.where + "'s Reset"
	return hostCall(f.st, where, func() *C.tpt_status {
		return f.st.status(noStop(f.source.(SourceResetter).Reset(uint64(seed)), where))
	})
}

//export tptgoSourceSize
func tptgoSourceSize(handle C.uintptr_t) (n C.int64_t) {
	f := cgo.Handle(handle).Value().(*dataflowFunc)
	st := hostCall(f.st, f.where+"'s Size", func() *C.tpt_status {
		n = C.int64_t(f.source.(SourceSizer).Size())
		return nil
	})
	if st != nil {
		// C takes no error here: the size is unknown, and DataFlow.Size
		// raises the panic (recorded in the stash) again.
		C.tpt_status_free(st)
		return -1
	}
	return n
}

//export tptgoSourceSave
func tptgoSourceSave(out **C.tpt_tensor, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*dataflowFunc)
	where := f.where + "'s SaveState"
	var state []byte
	if st := hostCall(f.st, where, func() *C.tpt_status {
		var err error
		state, err = f.source.(SourceStater).SaveState()
		return f.st.status(noStop(err, where))
	}); st != nil {
		return st
	}
	x, err := FromUint8(state) // a copy: the source may reuse its slice
	if err != nil {
		return f.st.status(err)
	}
	// The library takes the handle.
	p, err := x.take("the dataflow source's state")
	if err != nil {
		return f.st.status(err)
	}
	*out = p
	return nil
}

//export tptgoSourceRestore
func tptgoSourceRestore(state *C.tpt_tensor, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*dataflowFunc)
	where := f.where + "'s RestoreState"
	x := lentTensor(state)
	b, err := x.Bytes()
	x.Close() // the library's: lent for this call only
	if err != nil {
		return f.st.status(err)
	}
	return hostCall(f.st, where, func() *C.tpt_status {
		return f.st.status(noStop(f.source.(SourceStater).RestoreState(b), where))
	})
}

//export tptgoMap
func tptgoMap(dp *C.tpt_datapoint, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*dataflowFunc)
	d := lentDatapoint(dp)
	defer d.Close() // the library's: invalid from now on
	return hostCall(f.st, f.where, func() *C.tpt_status { return f.st.status(noStop(f.mapFn(d), f.where)) })
}

//export tptgoComponent
func tptgoComponent(out **C.tpt_tensor, value *C.tpt_tensor, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*dataflowFunc)
	x := lentTensor(value)
	defer x.Close() // the library's: invalid from now on
	var y *Tensor
	var err error
	if st := hostCall(f.st, f.where, func() *C.tpt_status {
		y, err = f.component(x)
		return nil
	}); st != nil {
		return st
	}
	if err != nil {
		if y != x {
			y.Close()
		}
		return f.st.status(noStop(err, f.where))
	}
	if y == nil {
		return nil // *out stays NULL: the datapoint is dropped
	}
	// The library takes the result (a borrowed x is shared).
	p, err := y.take("the component map function's result")
	if err != nil {
		return f.st.status(err)
	}
	*out = p
	return nil
}

//export tptgoDecode
func tptgoDecode(dp *C.tpt_datapoint, path *C.char, index C.size_t, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*dataflowFunc)
	d := lentDatapoint(dp)
	defer d.Close() // the library's: invalid from now on
	return hostCall(f.st, f.where, func() *C.tpt_status {
		return f.st.status(noStop(f.decode(d, C.GoString(path), int(index)), f.where))
	})
}

// ---- Inference and hyper-parameter functions. These run inside a trainer
// callback (the inference runner's, a hyper-parameter setter's) on the
// goroutine of Run; their errors and panics go to the function's stash,
// which Run consults.

//export tptgoInferencerBefore
func tptgoInferencerBefore(handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*inferencerFunc)
	where := f.where("Before")
	return hostCall(f.st, where, func() *C.tpt_status { return f.st.status(f.fns.Before()) })
}

//export tptgoInferencerOutputs
func tptgoInferencerOutputs(outputs **C.tpt_tensor, n C.size_t, rows C.int64_t, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*inferencerFunc)
	where := f.where("OnOutputs")
	var ptrs []*C.tpt_tensor
	if n > 0 {
		ptrs = unsafe.Slice(outputs, int(n))
	}
	outs := make([]*Tensor, len(ptrs))
	for i, p := range ptrs {
		outs[i] = lentTensor(p)
	}
	defer func() {
		// Lent for this call only. The library makes the handles in the
		// call's tensor scope, which the trampoline made TPT_SCOPE_EXPIRE:
		// free them, or they would wait for a tpt_tensor_free that never
		// comes (a borrowed handle would ignore it).
		for i, x := range outs {
			x.Close()
			C.tpt_tensor_free(ptrs[i])
		}
	}()
	return hostCall(f.st, where, func() *C.tpt_status { return f.st.status(f.fns.OnOutputs(outs, int64(rows))) })
}

//export tptgoInferencerAfter
func tptgoInferencerAfter(_ *C.tpt_trainer, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*inferencerFunc)
	where := f.where("After")
	var c *Context
	if f.owner != nil {
		c = f.owner.ctx
	}
	if c == nil { // cannot happen: a runner runs only once a trainer has it
		return newStatus(&Error{Code: CodeInternal, Message: where + " ran outside a trainer"})
	}
	return hostCall(f.st, where, func() *C.tpt_status { return f.st.status(f.fns.After(c)) })
}

//export tptgoHyperParam
func tptgoHyperParam(value *C.double, epoch C.int64_t, current C.double, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*hyperParamFunc)
	var v float64
	var err error
	if st := hostCall(f.st, f.where, func() *C.tpt_status {
		v, err = f.fn(int64(epoch), float64(current))
		return nil
	}); st != nil {
		return st
	}
	if err != nil {
		return f.st.status(err)
	}
	*value = C.double(v)
	return nil
}
