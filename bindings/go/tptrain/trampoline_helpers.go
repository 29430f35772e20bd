package tptrain

/*
#include <tptrain.h>
*/
import "C"

// panicSink records a panic of the user's code called from C and makes the
// status that fails the call: a trainer's Context (Run panics again with
// the value once tpt_trainer_run has returned), or a function's stash (the
// call that iterates, builds or infers consults it).
type panicSink interface {
	recovered(v any, where string) *C.tpt_status
}

// hostCall runs fn, a call of the user's code from a trampoline, and
// returns its status. A panic in fn, panic(nil) included, does not unwind
// into C: sink records it, naming where, and its status is returned.
func hostCall(sink panicSink, where string, fn func() *C.tpt_status) (st *C.tpt_status) {
	returned := false
	defer func() {
		if !returned {
			st = sink.recovered(recover(), where)
		}
	}()
	st = fn()
	returned = true
	return st
}

// runStepPanics names a panic that HookedStep passed on (the hooked step's,
// "hooked step") rather than run_step.
type runStepPanics struct{ c *Context }

func (r runStepPanics) recovered(v any, where string) *C.tpt_status {
	if r.c.unwinding != "" {
		where = r.c.unwinding
	}
	return r.c.recovered(v, where)
}
