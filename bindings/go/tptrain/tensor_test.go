package tptrain

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
)

// must(f()).of(t) returns f's value or stops the test on f's error.
func must[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) of(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func closeT(t testing.TB, x *Tensor) {
	t.Helper()
	if err := x.Close(); err != nil {
		t.Error(err)
	}
}

// checkMeta checks the shape, number of dimensions, element count and dtype.
func checkMeta(t *testing.T, x *Tensor, dtype DType, shape ...int64) {
	t.Helper()
	gotShape := must(x.Shape()).of(t)
	if len(shape) == 0 {
		shape = []int64{}
	}
	if !reflect.DeepEqual(gotShape, shape) {
		t.Errorf("Shape() = %v, want %v", gotShape, shape)
	}
	if n := must(x.NDim()).of(t); n != len(shape) {
		t.Errorf("NDim() = %d, want %d", n, len(shape))
	}
	numel := int64(1)
	for _, d := range shape {
		numel *= d
	}
	if n := must(x.Numel()).of(t); n != numel {
		t.Errorf("Numel() = %d, want %d", n, numel)
	}
	if d := must(x.DType()).of(t); d != dtype {
		t.Errorf("DType() = %v, want %v", d, dtype)
	}
}

func TestDType(t *testing.T) {
	cases := []struct {
		d     DType
		value int32
		size  int
		name  string
	}{
		{DTypeFloat32, 1, 4, "float32"},
		{DTypeFloat64, 2, 8, "float64"},
		{DTypeFloat16, 3, 2, "float16"},
		{DTypeBFloat16, 4, 2, "bfloat16"},
		{DTypeInt64, 5, 8, "int64"},
		{DTypeInt32, 6, 4, "int32"},
		{DTypeUint8, 7, 1, "uint8"},
		{DTypeBool, 8, 1, "bool"},
	}
	for _, c := range cases {
		if int32(c.d) != c.value || c.d.Size() != c.size || c.d.String() != c.name {
			t.Errorf("%s: value %d size %d name %q, want %d %d %q",
				c.name, int32(c.d), c.d.Size(), c.d.String(), c.value, c.size, c.name)
		}
	}
	if DType(99).Size() != 0 || DType(99).String() != "DType(99)" {
		t.Errorf("DType(99): size %d name %q", DType(99).Size(), DType(99).String())
	}
}

func TestRoundTrip(t *testing.T) {
	t.Run("float32", func(t *testing.T) {
		in := []float32{1.5, -2, float32(math.Inf(1)), 0, math.MaxFloat32, math.SmallestNonzeroFloat32}
		x := must(FromFloat32(in, 2, 3)).of(t)
		defer closeT(t, x)
		checkMeta(t, x, DTypeFloat32, 2, 3)
		if got := must(x.Float32s()).of(t); !reflect.DeepEqual(got, in) {
			t.Errorf("got %v, want %v", got, in)
		}
	})
	t.Run("float64", func(t *testing.T) {
		in := []float64{math.Pi, -math.E, math.MaxFloat64, math.SmallestNonzeroFloat64}
		x := must(FromFloat64(in)).of(t)
		defer closeT(t, x)
		checkMeta(t, x, DTypeFloat64, 4)
		if got := must(x.Float64s()).of(t); !reflect.DeepEqual(got, in) {
			t.Errorf("got %v, want %v", got, in)
		}
	})
	t.Run("int64", func(t *testing.T) {
		in := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64, 42}
		x := must(FromInt64(in, 3, 1, 2)).of(t)
		defer closeT(t, x)
		checkMeta(t, x, DTypeInt64, 3, 1, 2)
		if got := must(x.Int64s()).of(t); !reflect.DeepEqual(got, in) {
			t.Errorf("got %v, want %v", got, in)
		}
	})
	t.Run("int32", func(t *testing.T) {
		in := []int32{math.MinInt32, -7, 0, math.MaxInt32}
		x := must(FromInt32(in, 2, 2)).of(t)
		defer closeT(t, x)
		checkMeta(t, x, DTypeInt32, 2, 2)
		if got := must(x.Int32s()).of(t); !reflect.DeepEqual(got, in) {
			t.Errorf("got %v, want %v", got, in)
		}
	})
	t.Run("uint8", func(t *testing.T) {
		in := []uint8{0, 1, 127, 128, 255}
		x := must(FromUint8(in)).of(t)
		defer closeT(t, x)
		checkMeta(t, x, DTypeUint8, 5)
		if got := must(x.Uint8s()).of(t); !reflect.DeepEqual(got, in) {
			t.Errorf("got %v, want %v", got, in)
		}
		if got := must(x.Bytes()).of(t); !reflect.DeepEqual(got, in) {
			t.Errorf("Bytes() = %v, want %v", got, in)
		}
	})
	t.Run("bool", func(t *testing.T) {
		in := []bool{true, false, false, true, true, false}
		x := must(FromBool(in, 3, 2)).of(t)
		defer closeT(t, x)
		checkMeta(t, x, DTypeBool, 3, 2)
		if got := must(x.Bools()).of(t); !reflect.DeepEqual(got, in) {
			t.Errorf("got %v, want %v", got, in)
		}
		if got := must(x.Bytes()).of(t); !reflect.DeepEqual(got, []byte{1, 0, 0, 1, 1, 0}) {
			t.Errorf("Bytes() = %v", got)
		}
	})
	// float16 and bfloat16 have no Go type: raw bytes in host order.
	for _, c := range []struct {
		dtype DType
		bits  []uint16 // 1.0, -2.0, +Inf, 0.5
	}{
		{DTypeFloat16, []uint16{0x3c00, 0xc000, 0x7c00, 0x3800}},
		{DTypeBFloat16, []uint16{0x3f80, 0xc000, 0x7f80, 0x3f00}},
	} {
		c := c
		t.Run(c.dtype.String(), func(t *testing.T) {
			in := make([]byte, 2*len(c.bits))
			for i, b := range c.bits {
				binary.LittleEndian.PutUint16(in[2*i:], b) // the test machines are little-endian
			}
			x := must(FromBytes(in, c.dtype, []int64{2, 2}, nil)).of(t)
			defer closeT(t, x)
			checkMeta(t, x, c.dtype, 2, 2)
			if got := must(x.Bytes()).of(t); !reflect.DeepEqual(got, in) {
				t.Errorf("Bytes() = %x, want %x", got, in)
			}
		})
	}
	t.Run("float32 via FromBytes", func(t *testing.T) {
		in := make([]byte, 8)
		binary.LittleEndian.PutUint32(in, math.Float32bits(2.5))
		binary.LittleEndian.PutUint32(in[4:], math.Float32bits(-1))
		x := must(FromBytes(in, DTypeFloat32, []int64{2}, &TensorOptions{Device: "cpu"})).of(t)
		defer closeT(t, x)
		if got := must(x.Float32s()).of(t); !reflect.DeepEqual(got, []float32{2.5, -1}) {
			t.Errorf("got %v", got)
		}
	})
}

func TestScalarAndEmpty(t *testing.T) {
	in := make([]byte, 8)
	binary.LittleEndian.PutUint64(in, uint64(1<<40+3))
	s := must(FromBytes(in, DTypeInt64, nil, nil)).of(t)
	defer closeT(t, s)
	checkMeta(t, s, DTypeInt64)
	if got := must(s.Int64s()).of(t); !reflect.DeepEqual(got, []int64{1<<40 + 3}) {
		t.Errorf("scalar = %v", got)
	}

	e := must(FromFloat32(nil)).of(t)
	defer closeT(t, e)
	checkMeta(t, e, DTypeFloat32, 0)
	if got := must(e.Float32s()).of(t); len(got) != 0 {
		t.Errorf("empty tensor gave %v", got)
	}
	e2 := must(FromFloat32([]float32{}, 0, 3)).of(t)
	defer closeT(t, e2)
	checkMeta(t, e2, DTypeFloat32, 0, 3)
	if got := must(e2.Bytes()).of(t); len(got) != 0 {
		t.Errorf("empty tensor gave %v", got)
	}
}

func TestCreationErrors(t *testing.T) {
	_, err := FromFloat32([]float32{1, 2, 3}, 2, 2)
	wantError(t, err, CodeInvalidArgument, "nbytes is 12")
	_, err = FromBytes([]byte{1, 2, 3}, DTypeFloat32, []int64{1}, nil)
	wantError(t, err, CodeInvalidArgument, "nbytes is 3")
	_, err = FromFloat32(nil, -1)
	wantError(t, err, CodeInvalidArgument, "dimensions must be >= 0")
	_, err = FromBytes(nil, DType(42), []int64{0}, nil)
	wantError(t, err, CodeInvalidArgument, "not a tpt_dtype")
	_, err = FromBytes(make([]byte, 8), DTypeInt64, []int64{1}, &TensorOptions{RequiresGrad: true})
	wantError(t, err, CodeInvalidArgument, "requires_grad needs a floating dtype")
	_, err = FromBytes(make([]byte, 4), DTypeFloat32, []int64{1}, &TensorOptions{Device: "no-such-device"})
	wantError(t, err, CodeBackend, "")

	g := must(FromBytes(make([]byte, 8), DTypeFloat32, []int64{2}, &TensorOptions{RequiresGrad: true})).of(t)
	closeT(t, g)
}

func TestTypedCopyChecksDType(t *testing.T) {
	x := must(FromInt32([]int32{1, 2})).of(t)
	defer closeT(t, x)
	_, err := x.Float32s()
	wantError(t, err, CodeInvalidArgument, "Tensor.Float32s: the tensor's dtype is int32, not float32")
	_, err = x.Int64s()
	wantError(t, err, CodeInvalidArgument, "not int64")
	_, err = x.Bools()
	wantError(t, err, CodeInvalidArgument, "not bool")
	u := must(FromUint8([]uint8{0, 2})).of(t)
	defer closeT(t, u)
	_, err = u.Bools()
	wantError(t, err, CodeInvalidArgument, "is uint8, not bool")
}

func TestBoolsNormalise(t *testing.T) {
	// A bool tensor built from raw bytes may hold values other than 0 and 1;
	// Bools must still return valid Go bools.
	x := must(FromBytes([]byte{0, 1, 2, 255}, DTypeBool, []int64{4}, nil)).of(t)
	defer closeT(t, x)
	got := must(x.Bools()).of(t)
	for i, want := range []bool{false, true, true, true} {
		if got[i] != want {
			t.Errorf("Bools()[%d] = %v, want %v", i, got[i], want)
		}
	}
}

func TestMatmul(t *testing.T) {
	a := must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, a)
	b := must(FromFloat32([]float32{7, 8, 9, 10, 11, 12}, 3, 2)).of(t)
	defer closeT(t, b)
	c := must(a.Matmul(b)).of(t)
	defer closeT(t, c)
	checkMeta(t, c, DTypeFloat32, 2, 2)
	// [1 2 3; 4 5 6] x [7 8; 9 10; 11 12] by hand:
	// 1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64, 4*7+5*9+6*11 = 139, 4*8+5*10+6*12 = 154.
	if got, want := must(c.Float32s()).of(t), []float32{58, 64, 139, 154}; !reflect.DeepEqual(got, want) {
		t.Errorf("a x b = %v, want %v", got, want)
	}

	// Integer matmul and a self-product (one tensor as both arguments).
	m := must(FromInt64([]int64{1, 1, 1, 0}, 2, 2)).of(t)
	defer closeT(t, m)
	m2 := must(m.Matmul(m)).of(t)
	defer closeT(t, m2)
	if got, want := must(m2.Int64s()).of(t), []int64{2, 1, 1, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("m x m = %v, want %v", got, want)
	}
}

func TestMatmulBackendError(t *testing.T) {
	a := must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, a)
	b := must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, b)
	c, err := a.Matmul(b)
	if c != nil {
		t.Error("a failed Matmul returned a tensor")
	}
	e := wantError(t, err, CodeBackend, "cannot be multiplied")
	t.Logf("message: %s", e.Message)
	// The operands are untouched.
	checkMeta(t, a, DTypeFloat32, 2, 3)
}

func TestReshape(t *testing.T) {
	x := must(FromInt32([]int32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, x)
	y := must(x.Reshape(3, 2)).of(t)
	defer closeT(t, y)
	checkMeta(t, y, DTypeInt32, 3, 2)
	if got := must(y.Int32s()).of(t); !reflect.DeepEqual(got, []int32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("reshaped = %v", got)
	}
	z := must(x.Reshape(-1)).of(t)
	defer closeT(t, z)
	checkMeta(t, z, DTypeInt32, 6)
	w := must(x.Reshape(1, -1, 2)).of(t)
	defer closeT(t, w)
	checkMeta(t, w, DTypeInt32, 1, 3, 2)
	// The result is a handle of its own: closing the source leaves it valid.
	v := must(x.Reshape(6)).of(t)
	closeT(t, x)
	if got := must(v.Int32s()).of(t); !reflect.DeepEqual(got, []int32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("after closing the source: %v", got)
	}
	closeT(t, v)
}

func TestReshapeErrors(t *testing.T) {
	x := must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, x)
	_, err := x.Reshape(4, 2)
	wantError(t, err, CodeBackend, "invalid for input of size 6")
	_, err = x.Reshape(-1, -1)
	wantError(t, err, CodeBackend, "")
	_, err = x.Reshape(-2, 3)
	wantError(t, err, CodeInvalidArgument, "dimensions must be >= 0")
}

func TestCloseAndUseAfterClose(t *testing.T) {
	x := must(FromFloat32([]float32{1, 2})).of(t)
	other := must(FromFloat32([]float32{3, 4})).of(t)
	defer closeT(t, other)
	for i := 0; i < 3; i++ {
		if err := x.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	check := func(name string, err error) {
		t.Helper()
		if e := wantError(t, err, CodeInvalidArgument, "use of closed Tensor"); e.Message != "Tensor."+name+": use of closed Tensor" {
			t.Errorf("message = %q", e.Message)
		}
	}
	_, err := x.Shape()
	check("Shape", err)
	_, err = x.NDim()
	check("NDim", err)
	_, err = x.Numel()
	check("Numel", err)
	_, err = x.DType()
	check("DType", err)
	_, err = x.Bytes()
	check("Bytes", err)
	_, err = x.Float32s()
	check("Float32s", err)
	_, err = x.Bools()
	check("Bools", err)
	_, err = x.Reshape(2)
	check("Reshape", err)
	_, err = x.Matmul(other)
	check("Matmul", err)
	_, err = other.Matmul(x)
	wantError(t, err, CodeInvalidArgument, "argument b")
	_, err = other.Matmul(nil)
	wantError(t, err, CodeInvalidArgument, "argument b")

	var nilT *Tensor
	if err := nilT.Close(); err != nil {
		t.Errorf("(*Tensor)(nil).Close() = %v", err)
	}
	_, err = nilT.Shape()
	check("Shape", err)
}

func TestFinalizer(t *testing.T) {
	// Tensors that are never closed are freed by the finalizer. Nothing to
	// observe but the absence of a crash or a double free (the ones closed
	// explicitly have their finalizer cleared).
	data := make([]float32, 1024)
	for i := 0; i < 2000; i++ {
		x, err := FromFloat32(data, 32, 32)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			y, err := x.Matmul(x)
			if err != nil {
				t.Fatal(err)
			}
			_ = y // left to the finalizer
		}
		if i%2 == 0 {
			closeT(t, x)
		}
		if i%500 == 0 {
			runtime.GC()
		}
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
}

func TestConcurrent(t *testing.T) {
	// A shared tensor is read from every goroutine (reading is allowed);
	// every goroutine also creates, multiplies and closes tensors of its own.
	shared := must(FromFloat32([]float32{1, 0, 0, 1}, 2, 2)).of(t)
	defer closeT(t, shared)
	const workers, rounds = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- func() error {
				for r := 0; r < rounds; r++ {
					v := float32(w*rounds + r)
					a, err := FromFloat32([]float32{v, 1, 2, v}, 2, 2)
					if err != nil {
						return err
					}
					c, err := a.Matmul(shared) // a x I = a
					if err != nil {
						return err
					}
					got, err := c.Float32s()
					if err != nil {
						return err
					}
					if want := []float32{v, 1, 2, v}; !reflect.DeepEqual(got, want) {
						return fmt.Errorf("worker %d round %d: %v, want %v", w, r, got, want)
					}
					if _, err := shared.Shape(); err != nil {
						return err
					}
					a.Close()
					c.Close()
				}
				return nil
			}()
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestCloseWhileInUse(t *testing.T) {
	// Closing a tensor that other goroutines are reading is a program bug,
	// but it must not crash: each read either succeeds or reports the
	// closed tensor.
	x := must(FromFloat32(make([]float32, 64*64), 64, 64)).of(t)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				y, err := x.Matmul(x)
				if err != nil {
					if !isClosedError(err) {
						t.Errorf("Matmul: %v", err)
					}
					return
				}
				y.Close()
			}
		}()
	}
	runtime.Gosched()
	closeT(t, x)
	wg.Wait()
}

func isClosedError(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == CodeInvalidArgument && e.Message == "Tensor.Matmul: use of closed Tensor"
}

func TestKeepAndLiveHandles(t *testing.T) {
	x, err := FromFloat32([]float32{1, 2, 3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	// The count is process-wide: finalizers of tensors that earlier tests
	// dropped may release handles at any moment (they only lower it), so
	// one of a few tries must see Keep's handle come and go.
	runtime.GC()
	var seen string
	for try := 0; try < 50; try++ {
		before := LiveTensorHandles()
		k, err := x.Keep()
		if err != nil {
			t.Fatal(err)
		}
		during := LiveTensorHandles()
		k.Close()
		after := LiveTensorHandles()
		if during == before+1 && after == before {
			seen = ""
			break
		}
		seen = fmt.Sprintf("live handles %d, %d after Keep, %d after Close", before, during, after)
		time.Sleep(10 * time.Millisecond)
	}
	if seen != "" {
		t.Errorf("Keep's handle never counted exactly: %s", seen)
	}
	k, err := x.Keep()
	if err != nil {
		t.Fatal(err)
	}
	v, err := k.Float32s()
	if err != nil || len(v) != 3 || v[2] != 3 {
		t.Errorf("kept values %v, %v", v, err)
	}
	k.Close()
	x.Close()
	if _, err := x.Keep(); err == nil {
		t.Error("Keep of a closed tensor succeeded")
	}
}
