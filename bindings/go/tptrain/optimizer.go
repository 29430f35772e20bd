package tptrain

// Optimizers and their hyper-parameters (include/tptrain/optimizer.h).

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// ---- Optimizers.

// Optimizer is an optimizer made by kind and configured by hyper-parameter
// name (tpt_optimizer):
//
//	"sgd":     learning_rate (0.01), momentum (0), dampening (0),
//	           weight_decay (0), nesterov (0/1)
//	"adam", "adamw": learning_rate (0.001), beta1 (0.9), beta2 (0.999),
//	           eps (1e-8), weight_decay (0; adamw 0.01), amsgrad (0/1)
//	"rmsprop": learning_rate (0.01), alpha (0.99), eps (1e-8), momentum (0),
//	           weight_decay (0), centered (0/1)
//	"adagrad": learning_rate (0.01), lr_decay (0), weight_decay (0),
//	           initial_accumulator_value (0), eps (1e-10)
//
// and, for every kind, gradient processing: "clip_global_norm" (0: off),
// "clip_value" (0: off), "accumulate_steps" (1), "check_numerics" (1).
// Hyper-parameters can be read and set during training (schedules) from
// callbacks, on the goroutine of Run.
type Optimizer struct {
	handle[*C.tpt_optimizer]
}

// NewOptimizer makes an optimizer of the given kind with its default
// hyper-parameters (tpt_optimizer_new).
func NewOptimizer(kind string) (*Optimizer, error) {
	ckind := C.CString(kind)
	defer C.free(unsafe.Pointer(ckind))
	var out *C.tpt_optimizer
	if err := statusError(C.tpt_optimizer_new(&out, ckind)); err != nil {
		return nil, err
	}
	return newOptimizer(out), nil
}

func newOptimizer(ptr *C.tpt_optimizer) *Optimizer {
	o := &Optimizer{}
	o.ptr = ptr
	runtime.SetFinalizer(o, (*Optimizer).Close)
	return o
}

// Close drops the caller's reference (tpt_optimizer_free); models that use
// the optimizer keep theirs. It is idempotent and always returns nil.
func (o *Optimizer) Close() error {
	if o == nil {
		return nil
	}
	if o.release(func(p *C.tpt_optimizer) { C.tpt_optimizer_free(p) }) {
		runtime.SetFinalizer(o, nil)
	}
	return nil
}

func (o *Optimizer) lock(method string) (*C.tpt_optimizer, error) {
	if o == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: method + ": the Optimizer is nil"}
	}
	return o.acquire(false, "Optimizer", method)
}

// Set sets a hyper-parameter (tpt_optimizer_set).
func (o *Optimizer) Set(name string, value float64) error {
	ptr, err := o.lock("Optimizer.Set")
	if err != nil {
		return err
	}
	defer o.mu.Unlock()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return statusError(C.tpt_optimizer_set(ptr, cname, C.double(value)))
}

// Get reads a hyper-parameter (tpt_optimizer_get).
func (o *Optimizer) Get(name string) (float64, error) {
	ptr, err := o.lock("Optimizer.Get")
	if err != nil {
		return 0, err
	}
	defer o.mu.Unlock()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var v C.double
	if err := statusError(C.tpt_optimizer_get(&v, ptr, cname)); err != nil {
		return 0, err
	}
	return float64(v), nil
}

// ScaleGradients multiplies the gradients of the variables whose name
// matches pattern (an ECMAScript regular expression, searched) by factor,
// before clipping (tpt_optimizer_scale_gradients).
func (o *Optimizer) ScaleGradients(pattern string, factor float64) error {
	ptr, err := o.lock("Optimizer.ScaleGradients")
	if err != nil {
		return err
	}
	defer o.mu.Unlock()
	cp := C.CString(pattern)
	defer C.free(unsafe.Pointer(cp))
	return statusError(C.tpt_optimizer_scale_gradients(ptr, cp, C.double(factor)))
}
