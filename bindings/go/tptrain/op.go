package tptrain

/*
#include <stdlib.h>
#include <string.h>
#include <tptrain.h>
*/
import "C"

import (
	"runtime"
	"strconv"
	"unsafe"
)

// ---- Operators: any ATen operator by name.

// Arg is one argument of OpCall (tpt_arg), made by TensorArg, IntArg,
// DoubleArg, BoolArg, IntsArg, DoublesArg, TensorsArg, StringArg, DTypeArg or
// NoneArg, and given a keyword with Named. The zero Arg is None.
type Arg struct {
	kind    C.tpt_arg_kind
	name    string
	tensor  *Tensor
	i       int64
	d       float64
	ints    []int64
	doubles []float64
	tensors []*Tensor
	str     string
}

// TensorArg is a Tensor argument.
func TensorArg(x *Tensor) Arg { return Arg{kind: C.TPT_ARG_TENSOR, tensor: x} }

// IntArg is an int argument; it also goes where the schema wants a Scalar,
// and one int fills an int[N].
func IntArg(v int64) Arg { return Arg{kind: C.TPT_ARG_INT, i: v} }

// DoubleArg is a float argument; it also goes where the schema wants a
// Scalar.
func DoubleArg(v float64) Arg { return Arg{kind: C.TPT_ARG_DOUBLE, d: v} }

// BoolArg is a bool argument.
func BoolArg(v bool) Arg {
	a := Arg{kind: C.TPT_ARG_BOOL}
	if v {
		a.i = 1
	}
	return a
}

// IntsArg is an int[] argument. The values are copied when OpCall runs.
func IntsArg(v ...int64) Arg { return Arg{kind: C.TPT_ARG_INT_LIST, ints: v} }

// DoublesArg is a float[] argument. The values are copied when OpCall runs.
func DoublesArg(v ...float64) Arg { return Arg{kind: C.TPT_ARG_DOUBLE_LIST, doubles: v} }

// TensorsArg is a Tensor[] argument; nil entries are None, for Tensor?[]
// arguments such as aten::index takes.
func TensorsArg(v ...*Tensor) Arg { return Arg{kind: C.TPT_ARG_TENSOR_LIST, tensors: v} }

// StringArg is a str argument (e.g. reduction modes, einsum equations).
func StringArg(s string) Arg { return Arg{kind: C.TPT_ARG_STRING, str: s} }

// DTypeArg is a ScalarType argument.
func DTypeArg(d DType) Arg { return Arg{kind: C.TPT_ARG_DTYPE, i: int64(d)} }

// NoneArg is None: an optional argument left out explicitly.
func NoneArg() Arg { return Arg{kind: C.TPT_ARG_NONE} }

// Named returns a as the keyword argument name (the schema's argument name).
func Named(name string, a Arg) Arg {
	a.name = name
	return a
}

// opCapacity is the number of outputs OpCall makes room for at first.
const opCapacity = 64

// OpCall calls the operator op ("namespace::name"; a bare name means
// "aten::name") registered with LibTorch's dispatcher, with the overload
// ("Tensor", "Scalar", "out", ...; "" picks the first that fits) (tpt_op_call).
// Arguments are matched against the operator's schemas as TorchScript does:
// positionally, then by keyword (Named); missing arguments take the schema's
// defaults. The results come back as new Tensors owned by the caller: a
// Tensor result as it is, a tuple or list of tensors as several results, a
// number or bool as a 0-d tensor; an undefined optional tensor result is
// nil. Unknown operators and arguments that fit no schema are *Error of
// CodeInvalidArgument with a message listing the schemas tried; errors of the
// operator itself are CodeBackend. (An operator that returns a list of more
// than 64 tensors is run a second time with room for them all.) OpCall may be
// called from any goroutine; the operator's own rules apply.
func OpCall(op, overload string, args ...Arg) ([]*Tensor, error) {
	// Lock every tensor the arguments name, each once.
	var ts []*Tensor
	for i, a := range args {
		switch a.kind {
		case C.TPT_ARG_TENSOR:
			if a.tensor == nil {
				return nil, &Error{Code: CodeInvalidArgument, Message: "OpCall: args[" + strconv.Itoa(i) + "] is a nil Tensor"}
			}
			ts = append(ts, a.tensor)
		case C.TPT_ARG_TENSOR_LIST:
			ts = append(ts, a.tensors...)
		}
	}
	_, unlock, err := lockTensors(ts, true, func(k int) string { return "OpCall: tensor argument #" + strconv.Itoa(k) })
	if err != nil {
		return nil, err
	}
	defer unlock()

	// Everything the library reads lives in one C allocation: a tpt_arg
	// holds pointers, and C memory must not hold Go pointers.
	size := arenaSize(uintptr(len(args))*unsafe.Sizeof(C.tpt_arg{})) +
		arenaSize(uintptr(len(op))+1) + arenaSize(uintptr(len(overload))+1)
	for _, a := range args {
		if a.name != "" {
			size += arenaSize(uintptr(len(a.name)) + 1)
		}
		switch a.kind {
		case C.TPT_ARG_INT_LIST:
			size += arenaSize(uintptr(len(a.ints)) * 8)
		case C.TPT_ARG_DOUBLE_LIST:
			size += arenaSize(uintptr(len(a.doubles)) * 8)
		case C.TPT_ARG_TENSOR_LIST:
			size += arenaSize(uintptr(len(a.tensors)) * unsafe.Sizeof(uintptr(0)))
		case C.TPT_ARG_STRING:
			size += arenaSize(uintptr(len(a.str)) + 1)
		}
	}
	ar := newArena(size)
	defer ar.free()
	cop := ar.str(op)
	var coverload *C.char
	if overload != "" {
		coverload = ar.str(overload)
	}
	var cargs *C.tpt_arg
	if len(args) > 0 {
		cargs = (*C.tpt_arg)(ar.alloc(uintptr(len(args)) * unsafe.Sizeof(C.tpt_arg{})))
		cslice := unsafe.Slice(cargs, len(args))
		for i := range args {
			src := &args[i]
			ca := C.tpt_arg{kind: src.kind, i: C.int64_t(src.i), d: C.double(src.d)}
			if src.name != "" {
				ca.name = ar.str(src.name)
			}
			switch src.kind {
			case C.TPT_ARG_TENSOR:
				ca.tensor = src.tensor.ptr // read-locked above
			case C.TPT_ARG_INT_LIST:
				ca.list = unsafe.Pointer(ar.int64s(src.ints))
				ca.len = C.size_t(len(src.ints))
			case C.TPT_ARG_DOUBLE_LIST:
				p := ar.alloc(uintptr(len(src.doubles)) * 8)
				if len(src.doubles) > 0 {
					copy(unsafe.Slice((*float64)(p), len(src.doubles)), src.doubles)
				}
				ca.list = p
				ca.len = C.size_t(len(src.doubles))
			case C.TPT_ARG_TENSOR_LIST:
				p := ar.alloc(uintptr(len(src.tensors)) * unsafe.Sizeof(uintptr(0)))
				if len(src.tensors) > 0 {
					list := unsafe.Slice((**C.tpt_tensor)(p), len(src.tensors))
					for k, x := range src.tensors {
						if x != nil {
							list[k] = x.ptr // read-locked above
						} else {
							list[k] = nil
						}
					}
				}
				ca.list = p
				ca.len = C.size_t(len(src.tensors))
			case C.TPT_ARG_STRING:
				ca.list = unsafe.Pointer(ar.str(src.str))
			}
			cslice[i] = ca
		}
	}

	capacity := opCapacity
	for {
		// Go memory that the library fills with C pointers.
		outs := make([]*C.tpt_tensor, capacity)
		var n C.size_t
		st := C.tpt_op_call(&outs[0], C.size_t(capacity), &n, cop, coverload, cargs, C.size_t(len(args)))
		runtime.KeepAlive(ts)
		if st != nil && int(n) > capacity {
			C.tpt_status_free(st)
			capacity = int(n)
			continue
		}
		if err := statusError(st); err != nil {
			return nil, err
		}
		res := make([]*Tensor, int(n))
		for i, p := range outs[:int(n)] {
			if p != nil {
				res[i] = newTensor(p)
			}
		}
		return res, nil
	}
}

// OpSchemas returns the schemas of an operator, one per overload, e.g.
// "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
// (tpt_op_schemas). An unknown operator is an *Error of CodeNotFound, whose
// message suggests similar names.
func OpSchemas(op string) ([]string, error) {
	cop := C.CString(op)
	defer C.free(unsafe.Pointer(cop))
	text, err := readText(func(buf *C.char, size C.size_t, needed *C.size_t) *C.tpt_status {
		return C.tpt_op_schemas(buf, size, needed, cop)
	})
	if err != nil {
		return nil, err
	}
	return splitLines(text), nil
}

// Argmax returns the indices (int64) of the largest values of t along dim
// (aten::argmax, through OpCall), e.g. the classes of logits.
func (t *Tensor) Argmax(dim int64) (*Tensor, error) {
	outs, err := OpCall("aten::argmax", "", TensorArg(t), IntArg(dim))
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// ---- Element-wise arithmetic (tpt_op_add, ...), with LibTorch's
// broadcasting and type promotion; shapes that do not broadcast are an
// error naming both.

// Add returns t + b, element-wise.
func (t *Tensor) Add(b *Tensor) (*Tensor, error) {
	return tensorCall("Add", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_add(out, xs[0], xs[1])
	})
}

// Sub returns t - b, element-wise.
func (t *Tensor) Sub(b *Tensor) (*Tensor, error) {
	return tensorCall("Sub", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_sub(out, xs[0], xs[1])
	})
}

// Mul returns t * b, element-wise.
func (t *Tensor) Mul(b *Tensor) (*Tensor, error) {
	return tensorCall("Mul", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_mul(out, xs[0], xs[1])
	})
}

// Div returns t / b, element-wise (true division: integers give floats).
func (t *Tensor) Div(b *Tensor) (*Tensor, error) {
	return tensorCall("Div", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_div(out, xs[0], xs[1])
	})
}

// AddScalar returns t + x.
func (t *Tensor) AddScalar(x float64) (*Tensor, error) {
	return tensorCall("AddScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_add_scalar(out, xs[0], C.double(x))
	})
}

// SubScalar returns t - x.
func (t *Tensor) SubScalar(x float64) (*Tensor, error) {
	return tensorCall("SubScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_sub_scalar(out, xs[0], C.double(x))
	})
}

// MulScalar returns t * x.
func (t *Tensor) MulScalar(x float64) (*Tensor, error) {
	return tensorCall("MulScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_mul_scalar(out, xs[0], C.double(x))
	})
}

// DivScalar returns t / x.
func (t *Tensor) DivScalar(x float64) (*Tensor, error) {
	return tensorCall("DivScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_div_scalar(out, xs[0], C.double(x))
	})
}

// ---- Element-wise comparisons (tpt_op_eq, ...): bool tensors, with
// broadcasting; and Where.

// Eq returns the bool tensor t == b, element-wise.
func (t *Tensor) Eq(b *Tensor) (*Tensor, error) {
	return tensorCall("Eq", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_eq(out, xs[0], xs[1])
	})
}

// EqScalar returns the bool tensor t == x, element-wise.
func (t *Tensor) EqScalar(x float64) (*Tensor, error) {
	return tensorCall("EqScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_eq_scalar(out, xs[0], C.double(x))
	})
}

// Gt returns the bool tensor t > b, element-wise.
func (t *Tensor) Gt(b *Tensor) (*Tensor, error) {
	return tensorCall("Gt", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_gt(out, xs[0], xs[1])
	})
}

// GtScalar returns the bool tensor t > x, element-wise.
func (t *Tensor) GtScalar(x float64) (*Tensor, error) {
	return tensorCall("GtScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_gt_scalar(out, xs[0], C.double(x))
	})
}

// Ge returns the bool tensor t >= b, element-wise.
func (t *Tensor) Ge(b *Tensor) (*Tensor, error) {
	return tensorCall("Ge", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_ge(out, xs[0], xs[1])
	})
}

// GeScalar returns the bool tensor t >= x, element-wise.
func (t *Tensor) GeScalar(x float64) (*Tensor, error) {
	return tensorCall("GeScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_ge_scalar(out, xs[0], C.double(x))
	})
}

// Lt returns the bool tensor t < b, element-wise.
func (t *Tensor) Lt(b *Tensor) (*Tensor, error) {
	return tensorCall("Lt", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_lt(out, xs[0], xs[1])
	})
}

// LtScalar returns the bool tensor t < x, element-wise.
func (t *Tensor) LtScalar(x float64) (*Tensor, error) {
	return tensorCall("LtScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_lt_scalar(out, xs[0], C.double(x))
	})
}

// Le returns the bool tensor t <= b, element-wise.
func (t *Tensor) Le(b *Tensor) (*Tensor, error) {
	return tensorCall("Le", []string{"t", "b"}, []*Tensor{t, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_le(out, xs[0], xs[1])
	})
}

// LeScalar returns the bool tensor t <= x, element-wise.
func (t *Tensor) LeScalar(x float64) (*Tensor, error) {
	return tensorCall("LeScalar", []string{"t"}, []*Tensor{t}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_le_scalar(out, xs[0], C.double(x))
	})
}

// Where returns cond ? a : b element-wise (tpt_op_where, torch.where): cond
// is a bool tensor (a comparison's result), the three broadcast.
func Where(cond, a, b *Tensor) (*Tensor, error) {
	return tensorCall("Where", []string{"cond", "a", "b"}, []*Tensor{cond, a, b}, func(out **C.tpt_tensor, xs []*C.tpt_tensor) *C.tpt_status {
		return C.tpt_op_where(out, xs[0], xs[1], xs[2])
	})
}

// ---- C memory for argument structures.

// cArena is one C allocation carved into 8-byte aligned pieces: argument
// structures that hold pointers must live in C memory.
type cArena struct {
	base      unsafe.Pointer
	size, off uintptr
}

// arenaSize is the room a piece of n bytes takes in an arena.
func arenaSize(n uintptr) uintptr { return (n + 7) &^ 7 }

// newArena allocates size bytes (which the caller computed with arenaSize);
// it panics if C runs out of memory, as Go's own allocations do.
func newArena(size uintptr) *cArena {
	p := C.malloc(C.size_t(size + 8))
	if p == nil {
		panic("tptrain: out of C memory")
	}
	return &cArena{base: p, size: size + 8}
}

func (a *cArena) alloc(n uintptr) unsafe.Pointer {
	n = arenaSize(n)
	if a.off+n > a.size {
		panic("tptrain: internal error: arena too small")
	}
	p := unsafe.Add(a.base, a.off)
	a.off += n
	return p
}

// str copies s, NUL-terminated. (A NUL inside s ends the C string, as with
// C.CString.)
func (a *cArena) str(s string) *C.char {
	p := a.alloc(uintptr(len(s)) + 1)
	b := unsafe.Slice((*byte)(p), len(s)+1)
	copy(b, s)
	b[len(s)] = 0
	return (*C.char)(p)
}

// int64s copies v; nil for an empty v.
func (a *cArena) int64s(v []int64) *C.int64_t {
	if len(v) == 0 {
		return nil
	}
	p := a.alloc(uintptr(len(v)) * 8)
	copy(unsafe.Slice((*int64)(p), len(v)), v)
	return (*C.int64_t)(p)
}

func (a *cArena) free() {
	C.free(a.base)
	a.base = nil
}
