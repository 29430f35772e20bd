package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// ---- Models: tower functions and variables.

// InputSpec is one input of a model's signature (tpt_input_spec): its name,
// element type (0 means DTypeFloat32) and shape, whose entries are >= 1 or
// -1 for a free dimension (the batch).
type InputSpec struct {
	Name  string
	DType DType
	Shape []int64
}

// Model is tensorpack's ModelDesc (tpt_model): an input signature, a tower
// function and an optimizer.
//
// The tower function computes the model for one step from the step's input
// tensors and sets the cost; it may publish named outputs. It "might get
// called multiple times": once when the model is built (the build call, on
// zero-filled inputs, without gradients), once per tower per step, and by
// Infer. Variables follow tensorpack's rules: Tower.Variable creates a
// variable only in the build call; every later call reuses it by name.
//
// Several towers may call the function at the same time from different
// threads (goroutines), so it must be safe for concurrent use. Close
// releases the caller's reference; trainers that use the model keep their
// own.
type Model struct {
	// borrowed: the handle belongs to the library (the init hook's model);
	// Close only forgets it.
	handle[*C.tpt_model]
	st *stash
}

// towerFunc is what the tower trampoline finds behind its handle.
type towerFunc struct {
	fn func(t *Tower, inputs []*Tensor) error
	st *stash
}

// NewModel makes a model (tpt_model_new). tower is called with a *Tower,
// valid during that call only, and the step's inputs in signature order:
// Tensors borrowed for the call (closing one is harmless; they are
// invalidated when tower returns; keep one with Share). tower returns nil, an
// error (the step fails with it; Run, Build and Infer return that very
// value), or Stop(reason) (training ends gracefully). A panic in tower fails
// the call like an error, and the call that ran it (Run, Build or Infer)
// panics again with the same value once the library has returned. tower
// must not call runtime.Goexit (so no t.FailNow in a test's tower).
//
// The Tensors that Tower methods and layer functions return belong to the
// call: their memory is released when tower returns (the library keeps its
// own references to the cost, the outputs and the autograd graph), so they
// need no Close (closing one early is allowed); keep one past the call with
// Share.
func NewModel(inputs []InputSpec, tower func(t *Tower, inputs []*Tensor) error) (*Model, error) {
	if tower == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "NewModel: tower is nil"}
	}
	specs, n, free := cSpecs(inputs)
	defer free()
	st := &stash{}
	h := newHandle(&towerFunc{fn: tower, st: st})
	var out *C.tpt_model
	// The library deletes h (also when this fails).
	if err := statusError(C.tptgo_model_new(&out, specs, n, C.uintptr_t(h))); err != nil {
		return nil, err
	}
	return newModel(out, st), nil
}

// newModel wraps a model handle owned by the caller.
func newModel(ptr *C.tpt_model, st *stash) *Model {
	m := &Model{st: st}
	m.ptr = ptr
	runtime.SetFinalizer(m, (*Model).Close)
	return m
}

// cSpecs copies a signature into C memory (it holds pointers) and returns
// the first spec (nil for none), their number, and the function that frees
// them once the library has copied them.
func cSpecs(inputs []InputSpec) (*C.tpt_input_spec, C.size_t, func()) {
	var size uintptr
	for _, in := range inputs {
		size += arenaSize(uintptr(len(in.Name))+1) + arenaSize(uintptr(len(in.Shape))*8)
	}
	size += arenaSize(uintptr(len(inputs)) * unsafe.Sizeof(C.tpt_input_spec{}))
	a := newArena(size)
	if len(inputs) == 0 {
		return nil, 0, a.free
	}
	specs := unsafe.Slice((*C.tpt_input_spec)(a.alloc(uintptr(len(inputs))*unsafe.Sizeof(C.tpt_input_spec{}))), len(inputs))
	for i, in := range inputs {
		d := in.DType
		if d == 0 {
			d = DTypeFloat32
		}
		specs[i] = C.tpt_input_spec{
			name:  a.str(in.Name),
			dtype: C.tpt_dtype(d),
			shape: a.int64s(in.Shape),
			ndim:  C.size_t(len(in.Shape)),
		}
	}
	return &specs[0], C.size_t(len(inputs)), a.free
}

// Close drops the caller's reference to the model (tpt_model_free); the
// tower function is released when the last reference (a trainer's) goes. It
// is idempotent, waits for calls in progress on m, and always returns nil.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	if m.release(func(p *C.tpt_model) { C.tpt_model_free(p) }) {
		runtime.SetFinalizer(m, nil)
	}
	return nil
}

// rlock read-locks m and returns its handle; the caller must call
// m.mu.RUnlock on success.
func (m *Model) rlock(method string) (*C.tpt_model, error) {
	if m == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "Model." + method + ": the Model is nil"}
	}
	m.mu.RLock()
	if m.ptr == nil {
		m.mu.RUnlock()
		return nil, &Error{Code: CodeInvalidArgument, Message: "Model." + method + ": use of closed Model"}
	}
	return m.ptr, nil
}

// Build builds the model now if it was not built yet: the build call, which
// creates the variables (tpt_model_build). Training and Infer build it when
// needed.
func (m *Model) Build() error {
	ptr, err := m.rlock("Build")
	if err != nil {
		return err
	}
	defer m.enter()() // runs after RUnlock: a Close from the tower function waits for it
	defer m.mu.RUnlock()
	st := C.tpt_model_build(ptr)
	runtime.KeepAlive(m)
	return m.st.result(st)
}

// Variable returns a new Tensor on a variable (tpt_model_variable): the same
// storage, so in-place changes are seen by the model. A name that does not
// exist is an *Error of CodeNotFound.
func (m *Model) Variable(name string) (*Tensor, error) {
	ptr, err := m.rlock("Variable")
	if err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var out *C.tpt_tensor
	st := C.tpt_model_variable(&out, ptr, cname)
	runtime.KeepAlive(m)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// SetVariable copies value into a variable, e.g. to initialise or restore it
// (tpt_model_set_variable). The shape must match; the dtype is converted.
// Not while a step runs.
func (m *Model) SetVariable(name string, value *Tensor) error {
	ptr, err := m.rlock("SetVariable")
	if err != nil {
		return err
	}
	defer m.mu.RUnlock()
	vals, unlock, err := lockTensors([]*Tensor{value}, false, func(int) string { return "Model.SetVariable: the value" })
	if err != nil {
		return err
	}
	defer unlock()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	st := C.tpt_model_set_variable(ptr, cname, vals[0])
	runtime.KeepAlive(m)
	return statusError(st)
}

// VariableNames returns the names of the variables in creation order
// (tpt_model_variable_names); none before the model is built.
func (m *Model) VariableNames() ([]string, error) {
	ptr, err := m.rlock("VariableNames")
	if err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	text, err := readText(func(buf *C.char, size C.size_t, needed *C.size_t) *C.tpt_status {
		return C.tpt_model_variable_names(buf, size, needed, ptr)
	})
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	return splitLines(text), nil
}

// textBufferSize is the first guess of readText (a variable for the tests).
var textBufferSize = 1024

// readText calls a function of the library that copies text into a buffer
// and reports the size it needs, growing the buffer once if needed.
func readText(call func(buf *C.char, size C.size_t, needed *C.size_t) *C.tpt_status) (string, error) {
	buf := make([]byte, textBufferSize)
	for {
		var needed C.size_t
		st := call((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &needed)
		if st != nil && int(needed) > len(buf) {
			C.tpt_status_free(st)
			buf = make([]byte, int(needed))
			continue
		}
		if err := statusError(st); err != nil {
			return "", err
		}
		return C.GoString((*C.char)(unsafe.Pointer(&buf[0]))), nil
	}
}

// splitLines splits newline-separated text into lines, without empty ones.
func splitLines(text string) []string {
	lines := []string{}
	for _, l := range strings.Split(text, "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// Infer runs the tower function as an inference tower ("InferenceTower": not
// training, no gradients, no variable created or changed) on inputs, in
// signature order, and returns the named outputs it published, in the order
// of names; the cost is the output "cost" (tpt_model_infer). The model is
// built first if needed. The caller owns the results. An error or panic of
// the tower function comes back as described at NewModel.
func (m *Model) Infer(inputs []*Tensor, names []string) ([]*Tensor, error) {
	ptr, err := m.rlock("Infer")
	if err != nil {
		return nil, err
	}
	defer m.enter()() // see Build
	defer m.mu.RUnlock()
	ins, unlock, err := lockTensors(inputs, false, func(i int) string { return "Model.Infer: inputs[" + strconv.Itoa(i) + "]" })
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Go memory holding C pointers only: the library reads them during the
	// call.
	cnames := make([]*C.char, len(names))
	for i, n := range names {
		cnames[i] = C.CString(n)
	}
	defer func() {
		for _, p := range cnames {
			C.free(unsafe.Pointer(p))
		}
	}()
	outs := make([]*C.tpt_tensor, len(names))
	var outp, inp **C.tpt_tensor
	var namep **C.char
	if len(outs) > 0 {
		outp, namep = &outs[0], &cnames[0]
	}
	if len(ins) > 0 {
		inp = &ins[0]
	}
	st := C.tpt_model_infer(outp, ptr, inp, C.size_t(len(ins)), namep, C.size_t(len(names)))
	runtime.KeepAlive(m)
	if err := m.st.result(st); err != nil {
		return nil, err
	}
	res := make([]*Tensor, len(outs))
	for i, p := range outs {
		res[i] = newTensor(p)
	}
	return res, nil
}

// SetOptimizer sets the model's optimizer (tpt_model_set_optimizer). The
// model takes its own reference: the caller still owns opt, may Close it, or
// keep using it to change hyper-parameters during training. Before training.
func (m *Model) SetOptimizer(opt *Optimizer) error {
	ptr, err := m.rlock("SetOptimizer")
	if err != nil {
		return err
	}
	defer m.mu.RUnlock()
	optr, err := opt.lock("Model.SetOptimizer")
	if err != nil {
		return err
	}
	defer opt.mu.Unlock()
	st := C.tpt_model_set_optimizer(ptr, optr)
	runtime.KeepAlive(m)
	runtime.KeepAlive(opt)
	return statusError(st)
}

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

// ManualSeed seeds LibTorch's default random generator: variable
// initializers, dropout, shuffling (tpt_manual_seed).
func ManualSeed(seed uint64) error {
	return statusError(C.tpt_manual_seed(C.uint64_t(seed)))
}

// ---- TorchScript models.

// ModelFromTorchScript loads a module saved with torch.jit.save (for
// example from Python) as a model with the signature inputs
// (tpt_model_from_torchscript). Its forward(*inputs) returns the cost, or a
// tuple (cost, outputs) with outputs a Dict[str, Tensor] of named outputs.
// Its parameters become trainable variables and its buffers model-only
// variables, named by their path with "/" ("fc1.weight" -> "fc1/weight");
// they exist from the start (there is no build call). The module runs in
// train() mode in training towers and eval() mode in inference. A file that
// cannot be read or is not a TorchScript archive is an *Error of CodeIO.
// Close the model when done.
func ModelFromTorchScript(path string, inputs []InputSpec) (*Model, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	specs, n, free := cSpecs(inputs)
	defer free()
	var out *C.tpt_model
	if err := statusError(C.tpt_model_from_torchscript(&out, cpath, specs, n)); err != nil {
		return nil, err
	}
	return newModel(out, &stash{}), nil
}

// TorchScriptParam is an attribute of a module compiled by
// ModelFromTorchScriptSource (tpt_torchscript_param): a flat name (a
// TorchScript identifier, self.<Name> in the source), a shape whose entries
// are >= 1, and how it is made (nil Options: the defaults). Trainable ones
// become parameters, model-only ones buffers.
type TorchScriptParam struct {
	Name    string
	Shape   []int64
	Options *VariableOptions
}

// ModelFromTorchScriptSource compiles TorchScript source into a model with
// the signature inputs (tpt_model_from_torchscript_source): source defines
// forward(self, ...) (and any helper methods) over the attributes in params,
// which are created and initialised first, in order, from LibTorch's default
// generator (ManualSeed). Otherwise as ModelFromTorchScript: the attributes
// are the model's variables from the start, and SaveTorchScript writes the
// module. Bad params and compile errors (with the compiler's message) are
// *Errors of CodeInvalidArgument. Close the model when done.
func ModelFromTorchScriptSource(source string, params []TorchScriptParam, inputs []InputSpec) (*Model, error) {
	csource := C.CString(source)
	defer C.free(unsafe.Pointer(csource))
	// The params hold pointers: all of them live in C memory.
	size := arenaSize(uintptr(len(params)) * unsafe.Sizeof(C.tpt_torchscript_param{}))
	for _, p := range params {
		size += arenaSize(uintptr(len(p.Name))+1) + arenaSize(uintptr(len(p.Shape))*8) +
			arenaSize(unsafe.Sizeof(C.tpt_variable_options{}))
	}
	a := newArena(size)
	defer a.free()
	var cparams *C.tpt_torchscript_param
	if len(params) > 0 {
		raw := unsafe.Slice((*C.tpt_torchscript_param)(a.alloc(uintptr(len(params))*unsafe.Sizeof(C.tpt_torchscript_param{}))), len(params))
		for i, p := range params {
			o := (*C.tpt_variable_options)(a.alloc(unsafe.Sizeof(C.tpt_variable_options{})))
			*o = p.Options.c()
			raw[i] = C.tpt_torchscript_param{
				name:    a.str(p.Name),
				shape:   a.int64s(p.Shape),
				ndim:    C.size_t(len(p.Shape)),
				options: o,
			}
		}
		cparams = &raw[0]
	}
	specs, n, free := cSpecs(inputs)
	defer free()
	var out *C.tpt_model
	st := C.tpt_model_from_torchscript_source(&out, csource, cparams, C.size_t(len(params)), specs, n)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newModel(out, &stash{}), nil
}

// SaveTorchScript saves the module of a model made by ModelFromTorchScript
// or ModelFromTorchScriptSource, with its current (trained) values, for
// torch.jit.load or ModelFromTorchScript (tpt_model_save_torchscript). A
// model made by NewModel is an *Error of CodeUnsupported.
func (m *Model) SaveTorchScript(path string) error {
	ptr, err := m.rlock("SaveTorchScript")
	if err != nil {
		return err
	}
	defer m.mu.RUnlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	st := C.tpt_model_save_torchscript(ptr, cpath)
	runtime.KeepAlive(m)
	return statusError(st)
}

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
// in-memory tensors, in order or shuffled each pass over the data (seeded);
// the last incomplete batch is dropped; it repeats forever
// (tpt_input_from_tensors). All tensors need the same number of rows; they
// are shared, not copied (the caller may Close them). Its size (batches per
// pass) is the trainer's default StepsPerEpoch.
func InputFromTensors(tensors []*Tensor, batchSize int64, shuffle bool, seed uint64) (*Input, error) {
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
	st := C.tpt_input_from_tensors(&out, first, C.size_t(len(ptrs)), C.int64_t(batchSize), cBool(shuffle), C.uint64_t(seed))
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

// SetModel makes t tensorpack's SimpleTrainer of model fed by input
// (tpt_trainer_set_model): each step takes a batch, runs the tower function,
// back-propagates the cost and applies the model's optimizer; the cost is
// the step output "cost" and the scalar "cost" is put each step. It replaces
// the run_step. It takes input over (also when it fails) and a reference to
// the model (the caller still owns model). If StepsPerEpoch is not set, the
// input's size is used. Batches are checked against the signature. Before
// Run.
func (t *Trainer) SetModel(model *Model, input *Input) error {
	iptr, ist, err := input.take("Trainer.SetModel")
	if err != nil {
		return err
	}
	mptr, err := model.rlock("SetModel")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer model.mu.RUnlock()
	ptr, err := t.lock("SetModel")
	if err != nil {
		C.tpt_input_free(iptr)
		return err
	}
	defer t.mu.Unlock()
	st := C.tpt_trainer_set_model(ptr, mptr, iptr)
	runtime.KeepAlive(model)
	if err := statusError(st); err != nil {
		return err
	}
	t.stashes = append([]*stash{model.st}, ist...)
	t.ctx.model = model
	return nil
}

// ---- TrainConfig and launch.

// TrainConfig describes a training, as tensorpack's TrainConfig
// (tpt_train_config), for NewTrainerFromConfig and LaunchTrain.
type TrainConfig struct {
	// Options are the trainer's options; nil means the defaults, with
	// StepsPerEpoch from the input.
	Options *TrainerOptions
	// Model is the model to train (required); the trainer takes its own
	// reference: the caller still owns Model.
	Model *Model
	// Input gives the batches; it is taken over. Give Input or DataFlow,
	// not both.
	Input *Input
	// DataFlow gives the batches (its components in signature order,
	// usually a Batch) through a queue input, as tensorpack wraps a
	// DataFlow in a QueueInput; the trainer keeps its own reference (the
	// caller still owns DataFlow). Its size is the default StepsPerEpoch.
	DataFlow *DataFlow
	// Callbacks are registered as user callbacks, in order; taken over.
	Callbacks []*Callback
	// Monitors are registered after the default monitors; taken over.
	Monitors []*Callback
	// Towers, if not nil, are the strategy and towers of a multi-tower
	// trainer (as Trainer.SetTowers; &TowersOptions{} is 2 replicated CPU
	// towers); nil means the simple trainer (one tower, as
	// Trainer.SetModel). With towers, the default StepsPerEpoch is the
	// input's size divided by the number of towers.
	Towers *TowersOptions
	// Distributed, if not nil, makes this process one rank of a distributed
	// job (as Trainer.SetDistributed; &DistributedOptions{} takes everything
	// from torchrun's environment variables): NewTrainerFromConfig joins the
	// job, blocking until every rank has, and the trainer (simple, or with
	// Towers) trains across the ranks. nil means one process.
	Distributed *DistributedOptions
	// Init, if not nil, is the init / restore hook (tensorpack's
	// session_init): it runs once on the chief, after the model's build call
	// and before BEFORE_TRAIN, e.g. to load weights with Model.SetVariable.
	// Its *Model is the library's handle on the model, valid during the
	// call only. It returns nil, Stop(reason) to end training gracefully,
	// or an error that fails it: Run returns that very value. A panic makes
	// Run panic again with the same value, as for callbacks.
	Init func(m *Model) error
}

// initFunc is what the init trampoline finds behind its handle.
type initFunc struct {
	ctx *Context
	fn  func(*Model) error
	st  *stash // the model's: errors and panics of its tower function
}

// NewTrainerFromConfig makes tensorpack's simple trainer, or with cfg.Towers
// a multi-tower trainer, from a config without running it
// (tpt_trainer_from_config): the trainer of cfg.Model (as SetModel, or
// SetTowers) fed by cfg.Input or by cfg.DataFlow in a queue input (one of
// the two; both or neither is an *Error of CodeInvalidArgument), with
// cfg.Callbacks registered in order, then cfg.Monitors, and the init hook.
// With cfg.Distributed it first joins the job, as Trainer.SetDistributed
// (blocking until every rank has joined). Add more callbacks if needed, then
// Run; Close the trainer when done.
//
// The input, the callbacks and the monitors are taken over, also when it
// fails: a nil Model, or neither Input nor DataFlow, is reported by the
// library, and everything else handed over is still released. The trainer
// keeps the init hook until it is closed.
func NewTrainerFromConfig(cfg *TrainConfig) (*Trainer, error) {
	if cfg == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "NewTrainerFromConfig: cfg is nil"}
	}
	const who = "NewTrainerFromConfig"
	var firstErr error
	note := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	// Take everything handed over first: it is released whatever happens.
	var iptr *C.tpt_input
	var ist []*stash
	if cfg.Input != nil { // nil (with a DataFlow, or none: the library says so)
		var err error
		if iptr, ist, err = cfg.Input.take(who); err != nil {
			note(err)
		}
	}
	var dptr *C.tpt_dataflow
	var dst []*stash
	if df := cfg.DataFlow; df != nil {
		var err error
		if dptr, err = df.lock(who + ": DataFlow"); err != nil {
			note(err)
		} else {
			defer df.mu.Unlock()
			dst = df.stashes
		}
	}
	var funcs []*hostFunc
	takeAll := func(cbs []*Callback, what string) []*C.tpt_callback {
		ptrs := make([]*C.tpt_callback, 0, len(cbs))
		for i, cb := range cbs {
			ptr, fs, _, err := cb.take(who + ": " + what + "[" + strconv.Itoa(i) + "]")
			if err != nil {
				note(err)
				continue
			}
			ptrs = append(ptrs, ptr)
			funcs = append(funcs, fs...)
		}
		return ptrs
	}
	callbacks := takeAll(cfg.Callbacks, "Callbacks")
	monitors := takeAll(cfg.Monitors, "Monitors")
	var mptr *C.tpt_model
	var mst *stash
	if m := cfg.Model; m != nil { // nil: the library says so
		m.mu.RLock()
		defer m.mu.RUnlock()
		if mptr, mst = m.ptr, m.st; mptr == nil {
			note(&Error{Code: CodeInvalidArgument, Message: who + ": use of closed Model"})
		}
	}
	releaseAll := func() {
		C.tpt_input_free(iptr)
		for _, p := range append(callbacks, monitors...) {
			C.tpt_callback_free(p)
		}
	}
	if firstErr != nil {
		releaseAll()
		return nil, firstErr
	}
	var optp *C.tpt_trainer_options
	if cfg.Options != nil {
		copts, free, err := cTrainerOptions(cfg.Options)
		if err != nil {
			releaseAll()
			return nil, err
		}
		defer free()
		optp = &copts
	}
	var towersp *C.tpt_towers_options
	if cfg.Towers != nil {
		ctowers, free, err := cTowersOptions(cfg.Towers, who)
		if err != nil {
			releaseAll()
			return nil, err
		}
		defer free()
		towersp = &ctowers
	}
	var distp *C.tpt_distributed_options
	if cfg.Distributed != nil {
		cdist, free, err := cDistributedOptions(cfg.Distributed, who)
		if err != nil {
			releaseAll()
			return nil, err
		}
		defer free()
		distp = &cdist
	}
	ctx := &Context{model: cfg.Model}
	for _, f := range funcs {
		f.ctx = ctx
	}
	var h cgo.Handle
	if cfg.Init != nil {
		h = newHandle(&initFunc{ctx: ctx, fn: cfg.Init, st: mst})
	}
	var out *C.tpt_trainer
	// Go memory holding C pointers only: the library reads the arrays and
	// options during the call and takes the input and every callback (also
	// when it fails). It only borrows h, which the trainer deletes when
	// closed.
	st := C.tptgo_trainer_from_config(&out, optp, mptr, iptr, dptr, firstCallback(callbacks), C.size_t(len(callbacks)),
		firstCallback(monitors), C.size_t(len(monitors)), C.uintptr_t(h), towersp, distp)
	runtime.KeepAlive(cfg.Model)
	runtime.KeepAlive(cfg.DataFlow)
	if err := statusError(st); err != nil {
		if h != 0 {
			deleteHandle(h) // no trainer refers to it any more
		}
		var e *Error
		if errors.As(err, &e) && strings.Contains(e.Message, "options->steps_per_epoch is not set") {
			// The option as Go spells it.
			e.Message = strings.NewReplacer(
				"tpt_trainer_from_config: ", who+": ",
				"options->steps_per_epoch", "TrainerOptions.StepsPerEpoch",
				"give the source a size", "make the source with a size (DataFlowFromFuncSized)").Replace(e.Message)
		}
		if cfg.Towers != nil {
			err = goTowersError(err)
		}
		if cfg.Distributed != nil {
			err = goDistributedError(err)
		}
		return nil, err
	}
	t := newTrainer(out, ctx)
	t.initHandle = h
	t.stashes = append(append([]*stash{mst}, ist...), dst...)
	for _, f := range funcs {
		t.cbStashes = append(t.cbStashes, f.stashes...)
	}
	return t, nil
}

func firstCallback(ptrs []*C.tpt_callback) **C.tpt_callback {
	if len(ptrs) == 0 {
		return nil
	}
	return &ptrs[0]
}

// Outcome says how a training that did not fail ended, as Rust's RunOutcome.
type Outcome struct {
	// Stopped is false when training ran to MaxEpoch; true when a stop
	// ended it first: a function returned a *StopError (Stop), RequestStop
	// was called, the input's data ended, or the context was done.
	Stopped bool
	// Reason is why it stopped (StopReason; "" when it ran to MaxEpoch).
	Reason string
}

// LaunchTrain is tensorpack's launch_train_with_config: it makes the trainer
// of cfg (NewTrainerFromConfig), runs it with RunContext(ctx) and closes it,
// as tpt_launch_train does. It returns how training ended and nil, or the
// error that ended it (an error returned by a callback, the init hook, the
// tower or the feed function comes back unchanged; ctx.Err() when ctx ended
// it, with the Outcome filled in). A panic in one of them makes LaunchTrain
// panic again with the same value once training has ended. It takes cfg's
// input, callbacks and monitors over, also when it fails.
func LaunchTrain(ctx context.Context, cfg *TrainConfig) (Outcome, error) {
	// Not a call of tpt_launch_train itself: the Go side of the trainer
	// (its Context, the stashes of errors and panics) is Trainer's.
	t, err := NewTrainerFromConfig(cfg)
	if err != nil {
		return Outcome{}, err
	}
	defer t.Close()
	err = t.RunContext(ctx)
	var out Outcome
	if err == nil || err == ctx.Err() {
		out.Reason, out.Stopped = t.StopReason()
	}
	if err == ctx.Err() && err != nil {
		out.Stopped, out.Reason = true, err.Error()
	}
	return out, err
}

// ---- Errors and panics of functions that may run on other threads.

// stash remembers, for tower and feed functions (which may run on several
// threads at once), the Go errors behind the statuses they returned and the
// panics they recovered, so that the call that gets the status back (Run,
// Build, Infer) returns the same error value or panics again with the same
// value. Entries that no call claims are dropped beyond stashLimit.
type stash struct {
	mu     sync.Mutex
	errs   []stashedError
	panics []stashedPanic
}

type stashedPanic struct {
	msg   string
	value any
	where string
}

const stashLimit = 64

// status turns a Go function's result into a status for the library and
// remembers err.
func (s *stash) status(err error) *C.tpt_status {
	if err == nil {
		return nil
	}
	st := newStatus(err)
	e := stashedError{code: Code(C.tpt_status_code(st)), msg: C.GoString(C.tpt_status_message(st)), err: err}
	s.mu.Lock()
	if len(s.errs) == stashLimit {
		s.errs = append(s.errs[:0], s.errs[1:]...)
	}
	s.errs = append(s.errs, e)
	s.mu.Unlock()
	return st
}

// recovered records a recovered panic and returns the status that fails
// the call.
func (s *stash) recovered(v any, where string) *C.tpt_status {
	msg := "panic in " + where + ": " + fmt.Sprint(v)
	s.mu.Lock()
	if len(s.panics) == stashLimit {
		s.panics = append(s.panics[:0], s.panics[1:]...)
	}
	s.panics = append(s.panics, stashedPanic{msg: msg, value: v, where: where})
	s.mu.Unlock()
	return newStatus(&Error{Code: CodeCallback, Message: msg})
}

// take finds and forgets the panic or error behind a status of this code
// and message.
func (s *stash) take(code Code, msg string) (err error, panicValue any, panicked, found bool) {
	err, panicValue, _, panicked, found = s.takeAt(code, msg)
	return err, panicValue, panicked, found
}

// takeAt is take that also says where the panic happened ("tower
// function").
func (s *stash) takeAt(code Code, msg string) (err error, panicValue any, where string, panicked, found bool) {
	if s == nil {
		return nil, nil, "", false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == CodeCallback {
		for i, p := range s.panics {
			if p.msg == msg {
				s.panics = append(s.panics[:i], s.panics[i+1:]...)
				return nil, p.value, p.where, true, true
			}
		}
	}
	for i := len(s.errs) - 1; i >= 0; i-- {
		if e := s.errs[i]; e.code == code && e.msg == msg {
			s.errs = append(s.errs[:i], s.errs[i+1:]...)
			return e.err, nil, "", false, true
		}
	}
	return nil, nil, "", false, false
}

// result takes ownership of st: nil for success; the stashed error behind
// it; or the panic behind it, raised again; or what statusError makes of it.
func (s *stash) result(st *C.tpt_status) error {
	if st == nil {
		return nil
	}
	code, msg := Code(C.tpt_status_code(st)), C.GoString(C.tpt_status_message(st))
	err, v, panicked, found := s.take(code, msg)
	if !found {
		return statusError(st)
	}
	C.tpt_status_free(st)
	if panicked {
		panic(v)
	}
	return err
}
