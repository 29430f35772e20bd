package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
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

// OptimizerSlot returns what the model's optimizer keeps for trainable
// variable `variable`: its slot as PyTorch names them ("momentum_buffer",
// "exp_avg", "exp_avg_sq", ...) or "step" (a 0-d int64 tensor), a copy
// (tpt_model_optimizer_slot). CodeNotFound names the slots there are (none
// before the first update). Close the tensor.
func (m *Model) OptimizerSlot(variable, slot string) (*Tensor, error) {
	ptr, err := m.rlock("OptimizerSlot")
	if err != nil {
		return nil, err
	}
	defer m.mu.RUnlock()
	cvar, cslot := C.CString(variable), C.CString(slot)
	defer C.free(unsafe.Pointer(cvar))
	defer C.free(unsafe.Pointer(cslot))
	var out *C.tpt_tensor
	st := C.tpt_model_optimizer_slot(&out, ptr, cvar, cslot)
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
	cnames, free := cStrings(names) // the library reads them during the call
	defer free()
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

// RestoreOptions say how Model.Restore matches variables
// (tpt_restore_options). nil or the zero value: every variable must be in the file
// with its shape, and tensors of the file that match no variable are
// skipped.
type RestoreOptions struct {
	// IgnoreMissing keeps the values of variables the file lacks.
	IgnoreMissing bool
	// StrictUnexpected makes tensors of the file that match no variable an
	// error.
	StrictUnexpected bool
	// IgnoreShapeMismatch skips variables whose shapes differ.
	IgnoreShapeMismatch bool
	// Prefix is put in front of every variable's name to find it in the file.
	Prefix string
	// NameMap finds a variable (the key) under another name in the file.
	NameMap map[string]string
}

// Restore copies tensors into the model's variables by name, building it
// first when it is not built yet (tpt_model_restore, tensorpack's
// SaverRestore) from a tptrain checkpoint
// (or a directory's latest), a state_dict saved by python3-torch (dotted
// names such as "fc.weight" are read as "fc/weight") or a TorchScript
// module. All or nothing: the error lists the missing and mismatched
// variables, and no variable changes. It returns how many variables were
// restored.
func (m *Model) Restore(path string, o *RestoreOptions) (int, error) {
	if o == nil {
		o = &RestoreOptions{}
	}
	ptr, err := m.rlock("Restore")
	if err != nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	cstr := func(s string) *C.char {
		p := C.CString(s)
		frees = append(frees, unsafe.Pointer(p))
		return p
	}
	c := defaultRestoreOptions()
	c.ignore_missing = cBool(o.IgnoreMissing)
	c.ignore_unexpected = cBool(!o.StrictUnexpected)
	c.ignore_shape_mismatch = cBool(o.IgnoreShapeMismatch)
	if o.Prefix != "" {
		c.prefix = cstr(o.Prefix)
	}
	if len(o.NameMap) > 0 {
		// The array of C string pointers lives in C memory: no Go pointer in C.
		mem := C.malloc(C.size_t(2*len(o.NameMap)) * C.size_t(unsafe.Sizeof((*C.char)(nil))))
		frees = append(frees, mem)
		arr := unsafe.Slice((**C.char)(mem), 2*len(o.NameMap))
		i := 0
		for k, v := range o.NameMap {
			arr[2*i], arr[2*i+1] = cstr(k), cstr(v)
			i++
		}
		c.name_map = &arr[0]
		c.n_name_map = C.size_t(len(o.NameMap))
	}
	cpath := cstr(path)
	var n C.size_t
	st := C.tpt_model_restore(&n, ptr, cpath, &c)
	runtime.KeepAlive(m)
	if err := m.st.result(st); err != nil {
		return 0, err
	}
	return int(n), nil
}

// AddTrainOp adds a train op to m, before training
// (tpt_model_add_train_op). Its variables are found when training starts: a
// Scope that matches no trainable variable, or a Cost the tower function
// does not set, fails Run then, naming the op. An empty Name, a name the
// model has already, and an Optimizer that is the model's or another op's
// are *Errors of CodeInvalidArgument naming the TrainOp field.
func (m *Model) AddTrainOp(op TrainOp) error {
	const who = "Model.AddTrainOp"
	for _, f := range []struct{ what, s string }{{"TrainOp.Name", op.Name}, {"TrainOp.Cost", op.Cost}, {"TrainOp.Scope", op.Scope}} {
		if err := noNUL(who, f.what, f.s); err != nil {
			return err
		}
	}
	ptr, err := m.rlock("AddTrainOp")
	if err != nil {
		return err
	}
	defer m.mu.RUnlock()
	cop := C.tpt_train_op{version: C.TPT_TRAIN_OP_VERSION}
	if op.Optimizer != nil {
		optr, err := op.Optimizer.lock(who + ": TrainOp.Optimizer")
		if err != nil {
			return err
		}
		defer op.Optimizer.mu.Unlock()
		cop.optimizer = optr
	}
	cop.name = C.CString(op.Name) // "" too: the library names the empty field
	defer C.free(unsafe.Pointer(cop.name))
	if op.Cost != "" {
		cop.cost = C.CString(op.Cost)
		defer C.free(unsafe.Pointer(cop.cost))
	}
	if op.Scope != "" {
		cop.scope = C.CString(op.Scope)
		defer C.free(unsafe.Pointer(cop.scope))
	}
	// Go memory holding C pointers only; the library copies the strings and
	// takes its own reference to the optimizer.
	st := C.tpt_model_add_train_op(ptr, &cop)
	runtime.KeepAlive(m)
	runtime.KeepAlive(op.Optimizer)
	err = statusError(st)
	var e *Error
	if errors.As(err, &e) {
		e.Message = trainOpFieldNames.Replace(e.Message)
	}
	return err
}

// TrainOp is one optimisation of a model, tensorpack's
// opt.minimize(cost, var_list) (tpt_train_op): a one-element output of the
// tower function, minimised over the trainable variables under a scope by an
// optimizer of its own. Model.AddTrainOp adds one; a run_step of your own
// runs ops by name with Context.RunTrainOps, and the GAN trainers
// (Trainer.SetGAN) are such run_steps. Only Name is required.
type TrainOp struct {
	// Name names the op in Context.RunTrainOps and in checkpoints (which
	// keep each op's optimizer state under it); unique in the model.
	Name string
	// Cost is the output of the tower function (Tower.SetOutput) to
	// minimise, one real number; "" means the tower's cost (Tower.SetCost).
	Cost string
	// Scope selects the trainable variables whose names start with it
	// ("discrim/"); "" means all of them. A scope that matches no variable
	// fails Run, naming the op.
	Scope string
	// Optimizer is the op's own optimizer; the model takes its own
	// reference (the caller still owns it, and may Close it or keep it to
	// change its hyper-parameters). It must be neither the model's nor
	// another op's. nil means a copy of the model's optimizer, with slots of
	// its own, that follows the model's hyper-parameters (a schedule on the
	// model's optimizer moves it too).
	Optimizer *Optimizer
}

// trainOpFieldNames spells the fields of tpt_train_op that the library's
// messages name as TrainOp does.
var trainOpFieldNames = strings.NewReplacer(
	"op->name", "TrainOp.Name",
	"op->cost", "TrainOp.Cost",
	"op->scope", "TrainOp.Scope",
	"op->optimizer", "TrainOp.Optimizer",
	"or NULL (a copy of the model's)", "or nil (a copy of the model's)",
)
