package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
#include "trampoline.h"
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sort"
	"strconv"
	"unsafe"
)

// DType is the element type of a tensor (tpt_dtype).
type DType int32

// The element types of tpt_dtype.
const (
	DTypeFloat32  DType = C.TPT_DTYPE_F32
	DTypeFloat64  DType = C.TPT_DTYPE_F64
	DTypeFloat16  DType = C.TPT_DTYPE_F16
	DTypeBFloat16 DType = C.TPT_DTYPE_BF16
	DTypeInt64    DType = C.TPT_DTYPE_I64
	DTypeInt32    DType = C.TPT_DTYPE_I32
	DTypeUint8    DType = C.TPT_DTYPE_U8
	DTypeBool     DType = C.TPT_DTYPE_BOOL
)

// Size returns the size in bytes of one element; 0 for an unknown value
// (tpt_dtype_size).
func (d DType) Size() int {
	return int(C.tpt_dtype_size(C.tpt_dtype(d)))
}

// String returns the Go-style name of the type: "float32", "float64",
// "float16", "bfloat16", "int64", "int32", "uint8" or "bool".
func (d DType) String() string {
	switch d {
	case DTypeFloat32:
		return "float32"
	case DTypeFloat64:
		return "float64"
	case DTypeFloat16:
		return "float16"
	case DTypeBFloat16:
		return "bfloat16"
	case DTypeInt64:
		return "int64"
	case DTypeInt32:
		return "int32"
	case DTypeUint8:
		return "uint8"
	case DTypeBool:
		return "bool"
	}
	return "DType(" + strconv.Itoa(int(d)) + ")"
}

// TensorOptions are the options of FromBytes (tpt_tensor_options). The zero
// value, like a nil *TensorOptions, means a CPU tensor without gradients.
type TensorOptions struct {
	// Device is "cpu", "cuda" or "cuda:N"; "" means "cpu".
	Device string
	// RequiresGrad makes LibTorch track gradients (floating dtypes only).
	RequiresGrad bool
}

// Tensor owns a LibTorch tensor (tpt_tensor).
//
// A Tensor may be read from several goroutines at once. Close releases it;
// any later use returns an *Error with CodeInvalidArgument. Close waits for
// calls in progress on the same Tensor.
type Tensor struct {
	// borrowed: the handle belongs to the library (a tower function's
	// inputs); Close only forgets it.
	handle[*C.tpt_tensor]
}

// newTensor wraps a handle returned by the library; the finalizer frees a
// Tensor the program forgot to Close.
func newTensor(ptr *C.tpt_tensor) *Tensor {
	t := &Tensor{}
	t.ptr = ptr
	runtime.SetFinalizer(t, (*Tensor).Close)
	return t
}

// Close releases the tensor (tpt_tensor_free). It is idempotent and always
// returns nil; it returns an error only to satisfy io.Closer.
func (t *Tensor) Close() error {
	if t == nil {
		return nil
	}
	if t.release(func(p *C.tpt_tensor) { C.tpt_tensor_free(p) }) {
		runtime.SetFinalizer(t, nil)
	}
	return nil
}

// lentTensor wraps a handle the library lends for one call.
func lentTensor(ptr *C.tpt_tensor) *Tensor {
	t := &Tensor{}
	t.ptr, t.borrowed = ptr, true
	return t
}

func closedError(method string) error {
	return &Error{Code: CodeInvalidArgument, Message: "Tensor." + method + ": use of closed Tensor"}
}

// rlock read-locks t and returns its handle, or an error if t is nil or
// closed. On success the caller must call t.mu.RUnlock.
func (t *Tensor) rlock(method string) (*C.tpt_tensor, error) {
	if t == nil {
		return nil, closedError(method)
	}
	return t.acquire(true, "Tensor", "Tensor."+method)
}

// FromBytes creates a tensor by copying data, a C-contiguous array of the
// given shape and dtype in host byte order (tpt_tensor_from_data). len(data)
// must equal the product of shape times dtype.Size(); an empty shape makes a
// scalar. opts may be nil.
func FromBytes(data []byte, dtype DType, shape []int64, opts *TensorOptions) (*Tensor, error) {
	return fromSlice(data, dtype, shape, opts)
}

// FromFloat32 creates a float32 tensor from a copy of data. With no shape the
// tensor is one-dimensional with len(data) elements; otherwise the product
// of shape must equal len(data). (A 0-d scalar needs FromBytes with an empty
// shape.)
func FromFloat32(data []float32, shape ...int64) (*Tensor, error) {
	return fromSlice(data, DTypeFloat32, defaultShape(shape, len(data)), nil)
}

// FromFloat64 creates a float64 tensor from a copy of data; see FromFloat32
// for shape.
func FromFloat64(data []float64, shape ...int64) (*Tensor, error) {
	return fromSlice(data, DTypeFloat64, defaultShape(shape, len(data)), nil)
}

// FromInt64 creates an int64 tensor from a copy of data; see FromFloat32 for
// shape.
func FromInt64(data []int64, shape ...int64) (*Tensor, error) {
	return fromSlice(data, DTypeInt64, defaultShape(shape, len(data)), nil)
}

// FromInt32 creates an int32 tensor from a copy of data; see FromFloat32 for
// shape.
func FromInt32(data []int32, shape ...int64) (*Tensor, error) {
	return fromSlice(data, DTypeInt32, defaultShape(shape, len(data)), nil)
}

// FromUint8 creates a uint8 tensor from a copy of data; see FromFloat32 for
// shape.
func FromUint8(data []uint8, shape ...int64) (*Tensor, error) {
	return fromSlice(data, DTypeUint8, defaultShape(shape, len(data)), nil)
}

// FromBool creates a bool tensor from a copy of data; see FromFloat32 for
// shape.
func FromBool(data []bool, shape ...int64) (*Tensor, error) {
	return fromSlice(data, DTypeBool, defaultShape(shape, len(data)), nil)
}

func defaultShape(shape []int64, n int) []int64 {
	if len(shape) == 0 {
		return []int64{int64(n)}
	}
	return shape
}

// element lists the Go types whose memory layout matches a tpt_dtype.
type element interface {
	~byte | ~bool | ~int32 | ~int64 | ~float32 | ~float64
}

// fromSlice hands the library a pointer into data for the duration of the
// call only; the library copies the elements before it returns.
func fromSlice[T element](data []T, dtype DType, shape []int64, opts *TensorOptions) (*Tensor, error) {
	copts := C.tpt_tensor_options{
		version: C.TPT_TENSOR_OPTIONS_VERSION,
		dtype:   C.tpt_dtype(dtype),
	}
	if opts != nil {
		if opts.Device != "" {
			device := C.CString(opts.Device)
			defer C.free(unsafe.Pointer(device))
			copts.device = device
		}
		if opts.RequiresGrad {
			copts.requires_grad = 1
		}
	}
	var ptr unsafe.Pointer
	var nbytes uintptr
	if len(data) > 0 {
		ptr = unsafe.Pointer(&data[0])
		nbytes = uintptr(len(data)) * unsafe.Sizeof(data[0])
	}
	var out *C.tpt_tensor
	st := C.tpt_tensor_from_data(&out, ptr, C.size_t(nbytes), shapePtr(shape), C.size_t(len(shape)), &copts)
	runtime.KeepAlive(data)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

func shapePtr(shape []int64) *C.int64_t {
	if len(shape) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&shape[0]))
}

// NDim returns the number of dimensions (tpt_tensor_ndim).
func (t *Tensor) NDim() (int, error) {
	ptr, err := t.rlock("NDim")
	if err != nil {
		return 0, err
	}
	defer t.mu.RUnlock()
	var n C.size_t
	st := C.tpt_tensor_ndim(&n, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Shape returns the size of each dimension; empty for a scalar
// (tpt_tensor_ndim, tpt_tensor_shape).
func (t *Tensor) Shape() ([]int64, error) {
	ptr, err := t.rlock("Shape")
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	return tensorShape(t, ptr)
}

// tensorShape returns the shape of ptr, t's handle. The caller holds t.mu.
func tensorShape(t *Tensor, ptr *C.tpt_tensor) ([]int64, error) {
	var n C.size_t
	st := C.tpt_tensor_ndim(&n, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return nil, err
	}
	dims := make([]int64, int(n))
	st = C.tpt_tensor_shape(shapePtr(dims), n, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return dims, nil
}

// Numel returns the number of elements (tpt_tensor_numel).
func (t *Tensor) Numel() (int64, error) {
	ptr, err := t.rlock("Numel")
	if err != nil {
		return 0, err
	}
	defer t.mu.RUnlock()
	var n C.int64_t
	st := C.tpt_tensor_numel(&n, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// DType returns the element type (tpt_tensor_dtype).
func (t *Tensor) DType() (DType, error) {
	ptr, err := t.rlock("DType")
	if err != nil {
		return 0, err
	}
	defer t.mu.RUnlock()
	return tensorDType(t, ptr)
}

func tensorDType(t *Tensor, ptr *C.tpt_tensor) (DType, error) {
	var d C.tpt_dtype
	st := C.tpt_tensor_dtype(&d, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return 0, err
	}
	return DType(d), nil
}

// Bytes returns a copy of the elements, C-contiguous, in host byte order
// (tpt_tensor_copy_to). It works for every dtype and device.
func (t *Tensor) Bytes() ([]byte, error) {
	ptr, err := t.rlock("Bytes")
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	d, err := tensorDType(t, ptr)
	if err != nil {
		return nil, err
	}
	return copyOut[byte](t, ptr, d.Size())
}

// Float32s returns a copy of the elements of a float32 tensor.
func (t *Tensor) Float32s() ([]float32, error) {
	return typedCopy[float32](t, "Float32s", DTypeFloat32)
}

// Float64s returns a copy of the elements of a float64 tensor.
func (t *Tensor) Float64s() ([]float64, error) {
	return typedCopy[float64](t, "Float64s", DTypeFloat64)
}

// Int64s returns a copy of the elements of an int64 tensor.
func (t *Tensor) Int64s() ([]int64, error) {
	return typedCopy[int64](t, "Int64s", DTypeInt64)
}

// Int32s returns a copy of the elements of an int32 tensor.
func (t *Tensor) Int32s() ([]int32, error) {
	return typedCopy[int32](t, "Int32s", DTypeInt32)
}

// Uint8s returns a copy of the elements of a uint8 tensor.
func (t *Tensor) Uint8s() ([]uint8, error) {
	return typedCopy[uint8](t, "Uint8s", DTypeUint8)
}

// Bools returns a copy of the elements of a bool tensor; any nonzero byte
// reads as true.
func (t *Tensor) Bools() ([]bool, error) {
	// Copied as bytes first: a Go bool must hold exactly 0 or 1.
	raw, err := typedCopy[uint8](t, "Bools", DTypeBool)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(raw))
	for i, b := range raw {
		out[i] = b != 0
	}
	return out, nil
}

// typedCopy copies the elements out after checking that the tensor's dtype
// is want.
func typedCopy[T element](t *Tensor, method string, want DType) ([]T, error) {
	ptr, err := t.rlock(method)
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	d, err := tensorDType(t, ptr)
	if err != nil {
		return nil, err
	}
	if d != want {
		return nil, &Error{Code: CodeInvalidArgument,
			Message: "Tensor." + method + ": the tensor's dtype is " + d.String() + ", not " + want.String()}
	}
	var zero T
	return copyOut[T](t, ptr, int(unsafe.Sizeof(zero)))
}

// copyOut copies numel elements of elemSize bytes each into a new []T; for
// T = byte the result holds numel*elemSize bytes. The caller holds t.mu.
func copyOut[T element](t *Tensor, ptr *C.tpt_tensor, elemSize int) ([]T, error) {
	var n C.int64_t
	st := C.tpt_tensor_numel(&n, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return nil, err
	}
	var zero T
	nbytes := uintptr(n) * uintptr(elemSize)
	out := make([]T, nbytes/unsafe.Sizeof(zero))
	var dst unsafe.Pointer
	if len(out) > 0 {
		dst = unsafe.Pointer(&out[0])
	}
	st = C.tpt_tensor_copy_to(dst, C.size_t(nbytes), ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return out, nil
}

// Reshape returns a tensor with the same elements and a new shape; one entry
// may be -1 (tpt_tensor_reshape). As in LibTorch the result may share
// storage with t. An impossible shape is an *Error with CodeBackend.
func (t *Tensor) Reshape(shape ...int64) (*Tensor, error) {
	ptr, err := t.rlock("Reshape")
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	var out *C.tpt_tensor
	st := C.tpt_tensor_reshape(&out, ptr, shapePtr(shape), C.size_t(len(shape)))
	runtime.KeepAlive(t)
	runtime.KeepAlive(shape)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// Matmul returns the matrix product t × b with LibTorch's matmul broadcasting
// rules (tpt_tensor_matmul). Shapes that cannot be multiplied give an *Error
// with CodeBackend.
func (t *Tensor) Matmul(b *Tensor) (*Tensor, error) {
	if t == nil {
		return nil, closedError("Matmul")
	}
	if b == nil {
		return nil, closedError("Matmul (argument b)")
	}
	// Read-lock both in address order so that two goroutines multiplying the
	// same pair while a third closes one cannot deadlock; a self-product
	// takes the lock once.
	first, second := t, b
	if uintptr(unsafe.Pointer(second)) < uintptr(unsafe.Pointer(first)) {
		first, second = second, first
	}
	first.mu.RLock()
	defer first.mu.RUnlock()
	if second != first {
		second.mu.RLock()
		defer second.mu.RUnlock()
	}
	if t.ptr == nil {
		return nil, closedError("Matmul")
	}
	if b.ptr == nil {
		return nil, closedError("Matmul (argument b)")
	}
	var out *C.tpt_tensor
	st := C.tpt_tensor_matmul(&out, t.ptr, b.ptr)
	runtime.KeepAlive(t)
	runtime.KeepAlive(b)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// ---- Sharing memory, devices, DLPack.

// FromBlob wraps memory that Go does not manage, without copying
// (tpt_tensor_from_blob): the tensor uses data in place as a CPU tensor laid
// out C-contiguous with the given shape and dtype. deleter runs exactly once,
// when LibTorch releases the memory (after the last tensor using it, views
// and Shares included, is gone), or before FromBlob returns if it fails; it
// may run on any goroutine or thread, and a panic in it crashes the program
// (there is no caller to return it to). deleter may be nil: the caller then
// keeps data valid longer than every tensor made from it.
//
// data must not point into Go memory: the library keeps the pointer, which
// the cgo rules forbid for Go pointers (the garbage collector may move or
// free Go memory). Use memory from C (malloc), from syscall.Mmap, or from
// another library. For Go slices use FromBytes and the typed constructors,
// which copy. opts.Device must be "" or "cpu"; opts may be nil.
func FromBlob(data unsafe.Pointer, dtype DType, shape []int64, opts *TensorOptions, deleter func()) (*Tensor, error) {
	copts := C.tpt_tensor_options{
		version: C.TPT_TENSOR_OPTIONS_VERSION,
		dtype:   C.tpt_dtype(dtype),
	}
	if opts != nil {
		if opts.Device != "" {
			device := C.CString(opts.Device)
			defer C.free(unsafe.Pointer(device))
			copts.device = device
		}
		if opts.RequiresGrad {
			copts.requires_grad = 1
		}
	}
	var h cgo.Handle
	if deleter != nil {
		h = newHandle(deleter)
	}
	var out *C.tpt_tensor
	// The library runs the deleter, and so deletes h, also when this fails.
	st := C.tptgo_tensor_from_blob(&out, data, shapePtr(shape), C.size_t(len(shape)), &copts, C.uintptr_t(h))
	runtime.KeepAlive(shape)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// Share returns a new Tensor on the same LibTorch tensor, without copying
// (tpt_tensor_share). Both must be closed; closing one leaves the other
// valid. Share also makes an owned tensor from a tower function's input.
func (t *Tensor) Share() (*Tensor, error) {
	ptr, err := t.rlock("Share")
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	var out *C.tpt_tensor
	st := C.tpt_tensor_share(&out, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// Keep returns a new handle on the same values, detached from autograd's
// graph and sharing the storage (tpt_tensor_keep). Inside a tower function
// or callback it is the way to keep a tensor after the call returns: the
// call's other tensors are released then.
func (t *Tensor) Keep() (*Tensor, error) {
	ptr, err := t.rlock("Keep")
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	var out *C.tpt_tensor
	st := C.tpt_tensor_keep(&out, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// LiveTensorHandles is the number of tensor handles alive in the process
// (tpt_tensor_live_handles), for leak checks.
func LiveTensorHandles() int64 { return int64(C.tpt_tensor_live_handles()) }

// Device returns the tensor's device as text, e.g. "cpu" or "cuda:0"
// (tpt_tensor_device).
func (t *Tensor) Device() (string, error) {
	ptr, err := t.rlock("Device")
	if err != nil {
		return "", err
	}
	defer t.mu.RUnlock()
	var buf [64]C.char
	st := C.tpt_tensor_device(&buf[0], C.size_t(len(buf)), ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// To returns a copy of the tensor on another device and/or with another
// dtype (tpt_tensor_to): device "" keeps the device, dtype 0 keeps the dtype.
func (t *Tensor) To(device string, dtype DType) (*Tensor, error) {
	ptr, err := t.rlock("To")
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	var cdev *C.char
	if device != "" {
		cdev = C.CString(device)
		defer C.free(unsafe.Pointer(cdev))
	}
	var out *C.tpt_tensor
	st := C.tpt_tensor_to(&out, ptr, cdev, C.tpt_dtype(dtype))
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// Item returns the value of a one-element tensor as a float64
// (tpt_tensor_item).
func (t *Tensor) Item() (float64, error) {
	ptr, err := t.rlock("Item")
	if err != nil {
		return 0, err
	}
	defer t.mu.RUnlock()
	var v C.double
	st := C.tpt_tensor_item(&v, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return 0, err
	}
	return float64(v), nil
}

// ToDLPack exports the tensor for another framework without copying
// (tpt_tensor_to_dlpack). The result is a *DLManagedTensor (dlpack.h,
// DLPACK_VERSION 0.6) that the consumer owns: hand it to a consumer that
// calls its deleter (FromDLPack does), or release it with DeleteDLPack. The
// memory stays valid after t is closed.
func (t *Tensor) ToDLPack() (unsafe.Pointer, error) {
	ptr, err := t.rlock("ToDLPack")
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	var out *C.struct_DLManagedTensor
	st := C.tpt_tensor_to_dlpack(&out, ptr)
	runtime.KeepAlive(t)
	if err := statusError(st); err != nil {
		return nil, err
	}
	return unsafe.Pointer(out), nil
}

// FromDLPack imports a *DLManagedTensor (dlpack.h, DLPACK_VERSION 0.6) from
// another framework without copying (tpt_tensor_from_dlpack). It takes
// ownership of src, also when it fails: src's deleter runs when the tensor is
// released, or before FromDLPack returns an error.
func FromDLPack(src unsafe.Pointer) (*Tensor, error) {
	var out *C.tpt_tensor
	st := C.tpt_tensor_from_dlpack(&out, (*C.struct_DLManagedTensor)(src))
	if err := statusError(st); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// DeleteDLPack releases a *DLManagedTensor that was never handed to a
// consumer, by calling its deleter (if it has one). nil is a no-op.
func DeleteDLPack(src unsafe.Pointer) {
	C.tptgo_dlpack_delete(src)
}

// take hands the tensor's handle over to the library (a feed's batch): t is
// closed for the caller. A borrowed tensor is shared instead.
func (t *Tensor) take(what string) (*C.tpt_tensor, error) {
	if t == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: what + " is nil"}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: what + ": use of closed Tensor"}
	}
	if t.borrowed {
		var out *C.tpt_tensor
		st := C.tpt_tensor_share(&out, t.ptr)
		if err := statusError(st); err != nil {
			return nil, err
		}
		return out, nil
	}
	ptr := t.ptr
	t.ptr = nil
	runtime.SetFinalizer(t, nil)
	return ptr, nil
}

// lockTensors read-locks every distinct non-nil tensor of ts, in address
// order (so that goroutines locking overlapping sets while others close them
// cannot deadlock), and returns their handles in the order of ts (nil for a
// nil entry). what(i) names entry i in errors. A nil entry is an error
// unless allowNil; a closed one always is. On success the caller must call
// unlock.
func lockTensors(ts []*Tensor, allowNil bool, what func(i int) string) (ptrs []*C.tpt_tensor, unlock func(), err error) {
	order := make([]*Tensor, 0, len(ts))
	for i, x := range ts {
		if x == nil {
			if !allowNil {
				return nil, nil, &Error{Code: CodeInvalidArgument, Message: what(i) + " is nil"}
			}
			continue
		}
		order = append(order, x)
	}
	sort.Slice(order, func(a, b int) bool {
		return uintptr(unsafe.Pointer(order[a])) < uintptr(unsafe.Pointer(order[b]))
	})
	locked := make([]*Tensor, 0, len(order))
	for i, x := range order {
		if i > 0 && x == order[i-1] {
			continue
		}
		x.mu.RLock()
		locked = append(locked, x)
	}
	unlock = func() {
		for _, x := range locked {
			x.mu.RUnlock()
		}
	}
	ptrs = make([]*C.tpt_tensor, len(ts))
	for i, x := range ts {
		if x == nil {
			continue
		}
		if x.ptr == nil {
			unlock()
			return nil, nil, &Error{Code: CodeInvalidArgument, Message: what(i) + ": use of closed Tensor"}
		}
		ptrs[i] = x.ptr
	}
	return ptrs, unlock, nil
}
