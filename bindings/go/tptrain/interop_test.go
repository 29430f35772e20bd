package tptrain

import (
	"math"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"
)

// mmapFloats maps anonymous memory (not Go memory, so the library may keep
// a pointer to it) holding n float32 values.
func mmapFloats(t *testing.T, n int) ([]byte, []float32) {
	t.Helper()
	mem, err := syscall.Mmap(-1, 0, 4*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	return mem, unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), n)
}

func TestFromBlobSharesMemoryAndDeletesOnce(t *testing.T) {
	checkHandles(t)
	mem, host := mmapFloats(t, 6)
	copy(host, []float32{1, 2, 3, 4, 5, 6})
	var deleted atomic.Int32
	x := must(FromBlob(unsafe.Pointer(&mem[0]), DTypeFloat32, []int64{2, 3}, nil, func() {
		deleted.Add(1)
		if err := syscall.Munmap(mem); err != nil {
			panic(err)
		}
	})).of(t)
	checkMeta(t, x, DTypeFloat32, 2, 3)
	host[4] = 50 // no copy: the tensor sees it
	if got := must(x.Float32s()).of(t); !reflect.DeepEqual(got, []float32{1, 2, 3, 4, 50, 6}) {
		t.Errorf("Float32s() = %v", got)
	}
	shared := must(x.Share()).of(t)
	view := must(x.Reshape(6)).of(t) // a view keeps the storage alive too
	closeT(t, x)
	closeT(t, shared)
	if n := deleted.Load(); n != 0 {
		t.Fatalf("deleter ran %d times while a view was alive", n)
	}
	if got := must(view.Float32s()).of(t); got[4] != 50 {
		t.Errorf("view = %v", got)
	}
	closeT(t, view)
	if n := deleted.Load(); n != 1 {
		t.Fatalf("deleter ran %d times, want 1", n)
	}

	// Failure: the deleter runs at once, and the handle is released.
	mem2, _ := mmapFloats(t, 6)
	var deleted2 atomic.Int32
	_, err := FromBlob(unsafe.Pointer(&mem2[0]), DTypeFloat32, []int64{2, 3}, &TensorOptions{Device: "cuda:0"}, func() {
		deleted2.Add(1)
		syscall.Munmap(mem2)
	})
	wantError(t, err, CodeInvalidArgument, `must be "cpu"`)
	if n := deleted2.Load(); n != 1 {
		t.Errorf("deleter ran %d times after a failure, want 1", n)
	}
	_, err = FromBlob(nil, DTypeFloat32, []int64{2}, nil, func() { deleted2.Add(1) })
	wantError(t, err, CodeInvalidArgument, "argument 'data' is NULL")
	if n := deleted2.Load(); n != 2 {
		t.Errorf("deleter ran %d times, want 2", n)
	}

	// No deleter: the caller keeps the memory.
	mem3, host3 := mmapFloats(t, 2)
	defer syscall.Munmap(mem3)
	host3[0], host3[1] = 7, 8
	y := must(FromBlob(unsafe.Pointer(&mem3[0]), DTypeFloat32, []int64{2}, nil, nil)).of(t)
	if got := must(y.Float32s()).of(t); !reflect.DeepEqual(got, []float32{7, 8}) {
		t.Errorf("Float32s() = %v", got)
	}
	closeT(t, y)
}

func TestShareToItemDevice(t *testing.T) {
	x := must(FromFloat32([]float32{1.5, -2.25})).of(t)
	defer closeT(t, x)
	if d := must(x.Device()).of(t); d != "cpu" {
		t.Errorf("Device() = %q", d)
	}
	s := must(x.Share()).of(t)
	// In place through one handle, seen through the other: the same tensor.
	outs := must(OpCall("aten::mul_", "", TensorArg(s), IntArg(2))).of(t)
	closeAll(outs)
	if got := must(x.Float32s()).of(t); !reflect.DeepEqual(got, []float32{3, -4.5}) {
		t.Errorf("after s *= 2, x = %v", got)
	}
	closeT(t, s)
	if _, err := x.Shape(); err != nil {
		t.Errorf("x after closing its Share: %v", err)
	}

	d := must(x.To("", DTypeFloat64)).of(t) // a copy with another dtype
	defer closeT(t, d)
	checkMeta(t, d, DTypeFloat64, 2)
	same := must(x.To("cpu", 0)).of(t) // a copy: changing it leaves x
	defer closeT(t, same)
	closeAll(must(OpCall("aten::zero_", "", TensorArg(same))).of(t))
	if got := must(x.Float32s()).of(t); got[0] != 3 {
		t.Errorf("x changed through a copy: %v", got)
	}
	if !HasFeature(FeatureCUDA) {
		_, err := x.To("cuda", 0)
		if _, ok := err.(*Error); !ok {
			t.Errorf("To(cuda) without CUDA: %T %v, want an *Error", err, err)
		}
	}
	_, err := x.To("tpu", 0)
	wantError(t, err, CodeBackend, "Tensor.To: ")

	one := must(FromFloat64([]float64{math.Pi})).of(t)
	defer closeT(t, one)
	if v := must(one.Item()).of(t); v != math.Pi {
		t.Errorf("Item() = %v", v)
	}
	i := must(FromInt64([]int64{42}, 1, 1)).of(t)
	defer closeT(t, i)
	if v := must(i.Item()).of(t); v != 42 {
		t.Errorf("Item() = %v", v)
	}
	_, err = x.Item() // two elements
	if err == nil {
		t.Error("Item() of two elements succeeded")
	}

	closed := must(FromFloat32([]float32{1})).of(t)
	closeT(t, closed)
	for name, err := range map[string]error{
		"Share":    second(closed.Share()),
		"Device":   second(closed.Device()),
		"To":       second(closed.To("", 0)),
		"Item":     second(closed.Item()),
		"ToDLPack": second(closed.ToDLPack()),
	} {
		if e := wantError(t, err, CodeInvalidArgument, "use of closed Tensor"); e.Message != "Tensor."+name+": use of closed Tensor" {
			t.Errorf("message = %q", e.Message)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestDLPackRoundTrip(t *testing.T) {
	x := must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, x)
	m := must(x.ToDLPack()).of(t)
	if m == nil {
		t.Fatal("ToDLPack returned nil")
	}
	back := must(FromDLPack(m)).of(t) // takes m: no copy
	defer closeT(t, back)
	checkMeta(t, back, DTypeFloat32, 2, 3)
	closeAll(must(OpCall("aten::add_", "", TensorArg(x), IntArg(10))).of(t))
	if got := must(back.Float32s()).of(t); !reflect.DeepEqual(got, []float32{11, 12, 13, 14, 15, 16}) {
		t.Errorf("back = %v, want x's memory", got)
	}

	// Exported and never consumed: released by its deleter.
	m2 := must(back.ToDLPack()).of(t)
	DeleteDLPack(m2)
	DeleteDLPack(nil)

	_, err := FromDLPack(nil)
	wantError(t, err, CodeInvalidArgument, "FromDLPack: argument 'src' is NULL (tpt_tensor_from_dlpack)")
}
