package tptrain

// The Go functions the library calls back (through the adapters in
// trampoline.c). This file holds only //export functions: cgo forbids C
// definitions in the preamble of a file that exports to C.
//
// Each trampoline runs on the goroutine that called Run (the library calls
// back on the thread of tpt_trainer_run, and cgo brings the call back to that
// goroutine). None lets a panic unwind through C: it recovers, records the
// panic on the trainer's Context and returns an error status; Run panics
// again with the same value once tpt_trainer_run has returned.

/*
#include <stdint.h>
#include <tptrain.h>
*/
import "C"

import "runtime/cgo"

//export tptgoRunStep
func tptgoRunStep(_ *C.tpt_trainer, handle C.uintptr_t) (st *C.tpt_status) {
	f := cgo.Handle(handle).Value().(*hostFunc)
	c := f.ctx
	c.unwinding = ""
	returned := false
	defer func() {
		if !returned {
			where := "run_step"
			if c.unwinding != "" { // a panic HookedStep passed on
				where = c.unwinding
			}
			st = c.recovered(recover(), where)
		}
	}()
	st = c.status(f.runStep(c))
	returned = true
	return st
}

//export tptgoStep
func tptgoStep(_ *C.tpt_trainer, handle C.uintptr_t) (st *C.tpt_status) {
	c := cgo.Handle(handle).Value().(*Context)
	step := c.steps[len(c.steps)-1]
	returned := false
	defer func() {
		if !returned {
			st = c.recovered(recover(), "hooked step")
		}
	}()
	st = c.status(step(c))
	returned = true
	return st
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
	returned := false
	defer func() {
		if !returned {
			st = c.recovered(recover(), "callback '"+f.name+"'")
		}
	}()
	st = c.status(f.callback(c, Event(event), rec))
	returned = true
	return st
}

//export tptgoPredicate
func tptgoPredicate(_ *C.tpt_trainer, handle C.uintptr_t) (r C.int32_t) {
	f := cgo.Handle(handle).Value().(*hostFunc)
	c := f.ctx
	if c == nil {
		return -1
	}
	returned := false
	defer func() {
		if !returned {
			c.notePanic(recover(), "predicate of '"+f.name+"'")
			r = -1 // the library fails training with TPT_ERR_CALLBACK
		}
	}()
	if f.predicate(c) {
		r = 1
	}
	returned = true
	return r
}

//export tptgoDeleteHandle
func tptgoDeleteHandle(handle C.uintptr_t) {
	deleteHandle(cgo.Handle(handle))
}
