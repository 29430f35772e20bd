package tptrain

// What a tower function asks and does (include/tptrain/tower.h): its context,
// scopes and variables.

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// ---- Inside a tower function.

// Tower is the tower a tower function runs in (tpt_tower): valid during that
// call only; afterwards its methods report an error (or the zero value). Its
// methods may be called from the goroutine running the tower function and
// goroutines it waits for.
type Tower struct {
	mu  sync.Mutex
	ptr *C.tpt_tower
}

func towerInvalid(method string) error {
	return &Error{Code: CodeInvalidArgument, Message: "Tower." + method + ": use of a Tower after its tower function returned"}
}

// lock locks tw and returns its handle; the caller must call tw.mu.Unlock
// on success.
func (tw *Tower) lock(method string) (*C.tpt_tower, error) {
	if tw == nil {
		return nil, towerInvalid(method)
	}
	tw.mu.Lock()
	if tw.ptr == nil {
		tw.mu.Unlock()
		return nil, towerInvalid(method)
	}
	return tw.ptr, nil
}

func (tw *Tower) flag(method string, get func(*C.int32_t, *C.tpt_tower) *C.tpt_status) bool {
	ptr, err := tw.lock(method)
	if err != nil {
		return false
	}
	defer tw.mu.Unlock()
	var v C.int32_t
	if statusError(get(&v, ptr)) != nil {
		return false
	}
	return v != 0
}

// IsTraining reports whether this is a training tower, not inference
// (tpt_tower_is_training).
func (tw *Tower) IsTraining() bool {
	return tw.flag("IsTraining", func(v *C.int32_t, p *C.tpt_tower) *C.tpt_status { return C.tpt_tower_is_training(v, p) })
}

// IsBuilding reports whether this is the build call (tpt_tower_is_building).
func (tw *Tower) IsBuilding() bool {
	return tw.flag("IsBuilding", func(v *C.int32_t, p *C.tpt_tower) *C.tpt_status { return C.tpt_tower_is_building(v, p) })
}

// CanCreateVariables reports whether Variable may create variables in this
// call (tpt_tower_can_create_variables).
func (tw *Tower) CanCreateVariables() bool {
	return tw.flag("CanCreateVariables", func(v *C.int32_t, p *C.tpt_tower) *C.tpt_status {
		return C.tpt_tower_can_create_variables(v, p)
	})
}

// Index returns the tower's index among the training towers; 0 for
// inference towers (tpt_tower_index).
func (tw *Tower) Index() int {
	ptr, err := tw.lock("Index")
	if err != nil {
		return 0
	}
	defer tw.mu.Unlock()
	var v C.int32_t
	if statusError(C.tpt_tower_index(&v, ptr)) != nil {
		return 0
	}
	return int(v)
}

func (tw *Tower) text(method string, get func(*C.char, C.size_t, *C.tpt_tower) *C.tpt_status) string {
	ptr, err := tw.lock(method)
	if err != nil {
		return ""
	}
	defer tw.mu.Unlock()
	var buf [256]C.char
	if statusError(get(&buf[0], C.size_t(len(buf)), ptr)) != nil {
		return ""
	}
	return C.GoString(&buf[0])
}

// Name returns "tower0", "tower1", ... or "InferenceTower" ("InferenceTower0",
// "InferenceTower1", ... in NewDataParallelInferenceRunner) (tpt_tower_name).
func (tw *Tower) Name() string {
	return tw.text("Name", func(b *C.char, n C.size_t, p *C.tpt_tower) *C.tpt_status { return C.tpt_tower_name(b, n, p) })
}

// Device returns the tower's device, e.g. "cpu" or "cuda:1"
// (tpt_tower_device).
func (tw *Tower) Device() string {
	return tw.text("Device", func(b *C.char, n C.size_t, p *C.tpt_tower) *C.tpt_status { return C.tpt_tower_device(b, n, p) })
}

// withTensor calls fn with tw's handle and x's, both locked.
func (tw *Tower) withTensor(method string, x *Tensor, fn func(*C.tpt_tower, *C.tpt_tensor) *C.tpt_status) error {
	ptr, err := tw.lock(method)
	if err != nil {
		return err
	}
	defer tw.mu.Unlock()
	xs, unlock, err := lockTensors([]*Tensor{x}, false, func(int) string { return "Tower." + method + ": the tensor" })
	if err != nil {
		return err
	}
	defer unlock()
	st := fn(ptr, xs[0])
	runtime.KeepAlive(x)
	return statusError(st)
}

// SetCost sets the cost (a floating tensor of one element) that training
// minimises (tpt_tower_set_cost). A training tower must set it. The tower
// keeps its own reference: the caller still owns cost.
func (tw *Tower) SetCost(cost *Tensor) error {
	return tw.withTensor("SetCost", cost, func(p *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_tower_set_cost(p, x)
	})
}

// SetOutput publishes a named output (logits, accuracy, ...): a step output
// for callbacks (Context.Output) and an inference result (Model.Infer)
// (tpt_tower_set_output). The caller still owns value.
func (tw *Tower) SetOutput(name string, value *Tensor) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return tw.withTensor("SetOutput", value, func(p *C.tpt_tower, x *C.tpt_tensor) *C.tpt_status {
		return C.tpt_tower_set_output(p, cname, x)
	})
}

// PushScope opens a name scope: variables created inside get "scope/" in
// front of their name (tpt_tower_push_scope). scope must not contain '/'.
func (tw *Tower) PushScope(scope string) error {
	ptr, err := tw.lock("PushScope")
	if err != nil {
		return err
	}
	defer tw.mu.Unlock()
	cs := C.CString(scope)
	defer C.free(unsafe.Pointer(cs))
	return statusError(C.tpt_tower_push_scope(ptr, cs))
}

// PushReuseScope opens a name scope whose variables this call may use more
// than once (tpt_tower_push_reuse_scope, tensorpack's
// auto_reuse_variable_scope): a net applied twice, such as a GAN's
// discriminator on real and on generated images, shares its variables.
// Close it with PopScope.
func (tw *Tower) PushReuseScope(scope string) error {
	ptr, err := tw.lock("PushReuseScope")
	if err != nil {
		return err
	}
	defer tw.mu.Unlock()
	cs := C.CString(scope)
	defer C.free(unsafe.Pointer(cs))
	return statusError(C.tpt_tower_push_reuse_scope(ptr, cs))
}

// Scope runs fn inside the name scope scope (PushScope, then PopScope, also
// when fn fails): variables created by fn get "scope/" in front of their
// names. fn's error comes first, else PopScope's.
func (tw *Tower) Scope(scope string, fn func() error) error {
	return tw.scoped(scope, false, fn)
}

// ReuseScope is Scope with a reuse scope (PushReuseScope): call it once per
// application of a net that is applied twice, e.g. a GAN's discriminator:
//
//	err := tw.ReuseScope("discrim", func() (err error) { real, err = discriminator(tw, image); return })
//	err = tw.ReuseScope("discrim", func() (err error) { fake, err = discriminator(tw, generated); return })
func (tw *Tower) ReuseScope(scope string, fn func() error) error {
	return tw.scoped(scope, true, fn)
}

func (tw *Tower) scoped(scope string, reuse bool, fn func() error) error {
	var err error
	if reuse {
		err = tw.PushReuseScope(scope)
	} else {
		err = tw.PushScope(scope)
	}
	if err != nil {
		return err
	}
	ferr := fn()
	perr := tw.PopScope()
	if ferr != nil {
		return ferr
	}
	return perr
}

// PopScope closes the innermost name scope (tpt_tower_pop_scope).
func (tw *Tower) PopScope() error {
	ptr, err := tw.lock("PopScope")
	if err != nil {
		return err
	}
	defer tw.mu.Unlock()
	return statusError(C.tpt_tower_pop_scope(ptr))
}

// Init is a variable initializer (tpt_init).
type Init int32

// The initializers of tpt_init; A and B are VariableOptions' parameters.
const (
	InitZeros           Init = C.TPT_INIT_ZEROS
	InitConstant        Init = C.TPT_INIT_CONSTANT         // A
	InitUniform         Init = C.TPT_INIT_UNIFORM          // in [A, B)
	InitNormal          Init = C.TPT_INIT_NORMAL           // mean A, standard deviation B
	InitTruncatedNormal Init = C.TPT_INIT_TRUNCATED_NORMAL // mean A, standard deviation B, redrawn beyond 2 B
	InitGlorotUniform   Init = C.TPT_INIT_GLOROT_UNIFORM   // Xavier; A: gain (1 when 0)
	InitGlorotNormal    Init = C.TPT_INIT_GLOROT_NORMAL
	InitHeUniform       Init = C.TPT_INIT_HE_UNIFORM // Kaiming, fan_in, ReLU gain; A: negative slope
	InitHeNormal        Init = C.TPT_INIT_HE_NORMAL
)

// VariableOptions are the options of Tower.Variable (tpt_variable_options).
// The zero value, like nil, is the default: a trainable float32 variable
// initialised with InitGlorotUniform.
type VariableOptions struct {
	DType DType // 0 means DTypeFloat32 (floating dtypes only when trainable)
	Init  Init  // 0 means InitGlorotUniform
	// ModelOnly makes the variable model-only: saved with the model but
	// not trained (tensorpack's trainable=False).
	ModelOnly bool
	A, B      float64 // the initializer's parameters
}

// c is the C form of o; nil gives the defaults.
func (o *VariableOptions) c() C.tpt_variable_options {
	v := VariableOptions{}
	if o != nil {
		v = *o
	}
	copts := defaultVariableOptions()
	copts.trainable = cBool(!v.ModelOnly)
	copts.a = C.double(v.A)
	copts.b = C.double(v.B)
	if v.DType != 0 {
		copts.dtype = C.tpt_dtype(v.DType)
	}
	if v.Init != 0 {
		copts.init = C.tpt_init(v.Init)
	}
	return copts
}

// Variable gets the variable name (prefixed by the current scopes), creating
// it in the build call with the given shape and options
// (tpt_tower_variable). The result is a new Tensor on the variable itself
// (trainable variables carry gradients), owned by the caller. Creating a
// variable outside the build call, a shape or dtype that differs from the
// existing variable, and one name used twice in one call are errors (*Error
// of CodeInvalidArgument). opts may be nil.
func (tw *Tower) Variable(name string, shape []int64, opts *VariableOptions) (*Tensor, error) {
	ptr, err := tw.lock("Variable")
	if err != nil {
		return nil, err
	}
	defer tw.mu.Unlock()
	copts := opts.c()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var out *C.tpt_tensor
	st := C.tpt_tower_variable(&out, ptr, cname, shapePtr(shape), C.size_t(len(shape)), &copts)
	runtime.KeepAlive(shape)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}
