package tptrain

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// op1 calls an operator that returns one tensor.
func op1(t *testing.T, op string, args ...Arg) *Tensor {
	t.Helper()
	outs := must(OpCall(op, "", args...)).of(t)
	if len(outs) != 1 {
		t.Fatalf("%s returned %d outputs, want 1", op, len(outs))
	}
	t.Cleanup(func() { outs[0].Close() })
	return outs[0]
}

func closeAll(ts []*Tensor) {
	for _, x := range ts {
		x.Close()
	}
}

func TestOpCallAdd(t *testing.T) {
	a := must(FromFloat32([]float32{1, 2, 3, 4}, 2, 2)).of(t)
	defer closeT(t, a)
	b := must(FromFloat32([]float32{10, 20, 30, 40}, 2, 2)).of(t)
	defer closeT(t, b)

	sum := op1(t, "aten::add", TensorArg(a), TensorArg(b))
	checkMeta(t, sum, DTypeFloat32, 2, 2)
	if got := must(sum.Float32s()).of(t); !reflect.DeepEqual(got, []float32{11, 22, 33, 44}) {
		t.Errorf("add = %v", got)
	}
	// A keyword argument: a + alpha * b; a bare name means aten::.
	scaled := op1(t, "add", TensorArg(a), TensorArg(b), Named("alpha", IntArg(2)))
	if got := must(scaled.Float32s()).of(t); !reflect.DeepEqual(got, []float32{21, 42, 63, 84}) {
		t.Errorf("add alpha=2 = %v", got)
	}
	// A Scalar from a double, through the named overload.
	plus := must(OpCall("aten::add", "Scalar", TensorArg(a), DoubleArg(0.5))).of(t)
	defer closeAll(plus)
	if got := must(plus[0].Float32s()).of(t); !reflect.DeepEqual(got, []float32{1.5, 2.5, 3.5, 4.5}) {
		t.Errorf("add.Scalar = %v", got)
	}
	// The same tensor twice (locked once).
	twice := op1(t, "aten::mul", TensorArg(a), TensorArg(a))
	if got := must(twice.Float32s()).of(t); !reflect.DeepEqual(got, []float32{1, 4, 9, 16}) {
		t.Errorf("a*a = %v", got)
	}
}

func TestOpCallMatmulAndLists(t *testing.T) {
	a := must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, a)
	b := must(FromFloat32([]float32{7, 8, 9, 10, 11, 12}, 3, 2)).of(t)
	defer closeT(t, b)
	c := op1(t, "aten::matmul", TensorArg(a), TensorArg(b))
	if got := must(c.Float32s()).of(t); !reflect.DeepEqual(got, []float32{58, 64, 139, 154}) {
		t.Errorf("matmul = %v", got)
	}
	// int[]: permute; Tensor[]: cat; str: einsum; ScalarType: to.
	p := op1(t, "aten::permute", TensorArg(a), IntsArg(1, 0))
	checkMeta(t, p, DTypeFloat32, 3, 2)
	cat := op1(t, "aten::cat", TensorsArg(a, a), Named("dim", IntArg(0)))
	checkMeta(t, cat, DTypeFloat32, 4, 3)
	e := op1(t, "aten::einsum", StringArg("ij,jk->ik"), TensorsArg(a, b))
	if got := must(e.Float32s()).of(t); !reflect.DeepEqual(got, []float32{58, 64, 139, 154}) {
		t.Errorf("einsum = %v", got)
	}
	d := op1(t, "aten::_to_copy", TensorArg(a), Named("dtype", DTypeArg(DTypeFloat64)))
	checkMeta(t, d, DTypeFloat64, 2, 3)
	// double[]: upsample with scale factors; None for the output size.
	img := must(FromFloat32([]float32{1, 2, 3, 4}, 1, 1, 2, 2)).of(t)
	defer closeT(t, img)
	up := op1(t, "aten::upsample_nearest2d", TensorArg(img), NoneArg(), DoublesArg(2, 2))
	checkMeta(t, up, DTypeFloat32, 1, 1, 4, 4)
	// bool: sum with keepdim.
	s := op1(t, "aten::sum", TensorArg(a), IntsArg(1), BoolArg(true))
	checkMeta(t, s, DTypeFloat32, 2, 1)
	// Tensor?[] with a None entry: a[:, [2, 0]].
	idx := must(FromInt64([]int64{2, 0})).of(t)
	defer closeT(t, idx)
	sel := op1(t, "aten::index", TensorArg(a), TensorsArg(nil, idx))
	if got := must(sel.Float32s()).of(t); !reflect.DeepEqual(got, []float32{3, 1, 6, 4}) {
		t.Errorf("index = %v", got)
	}
	// A number result comes back as a 0-d tensor.
	n := op1(t, "aten::size", TensorArg(a), IntArg(1))
	if v := must(n.Item()).of(t); v != 3 {
		t.Errorf("size(1) = %v", v)
	}
}

func TestOpCallSeveralOutputs(t *testing.T) {
	a := must(FromFloat32([]float32{1, 2, 4, 3}, 2, 2)).of(t)
	defer closeT(t, a)
	outs := must(OpCall("aten::max", "", TensorArg(a), IntArg(1))).of(t)
	defer closeAll(outs)
	if len(outs) != 2 {
		t.Fatalf("max.dim returned %d outputs, want 2", len(outs))
	}
	if got := must(outs[0].Float32s()).of(t); !reflect.DeepEqual(got, []float32{2, 4}) {
		t.Errorf("values = %v", got)
	}
	if got := must(outs[1].Int64s()).of(t); !reflect.DeepEqual(got, []int64{1, 0}) {
		t.Errorf("indices = %v", got)
	}
	// More outputs than the first guess of room: run again with room.
	long := must(FromFloat32(make([]float32, 100))).of(t)
	defer closeT(t, long)
	parts := must(OpCall("aten::split", "Tensor", TensorArg(long), IntArg(1))).of(t)
	defer closeAll(parts)
	if len(parts) != 100 {
		t.Fatalf("split returned %d outputs, want 100", len(parts))
	}
	checkMeta(t, parts[99], DTypeFloat32, 1)
}

func TestOpCallErrors(t *testing.T) {
	a := must(FromFloat32([]float32{1, 2, 3, 4}, 2, 2)).of(t)
	defer closeT(t, a)
	_, err := OpCall("aten::relux", "", TensorArg(a))
	e := wantError(t, err, CodeInvalidArgument, "OpCall: unknown operator 'aten::relux'")
	if !strings.Contains(e.Message, "aten::relu") {
		t.Errorf("no suggestion in %q", e.Message)
	}
	_, err = OpCall("aten::add", "", TensorArg(a), StringArg("x"))
	wantError(t, err, CodeInvalidArgument, "aten::add")
	b := must(FromFloat32([]float32{1, 2, 3}, 3)).of(t)
	defer closeT(t, b)
	_, err = OpCall("aten::add", "", TensorArg(a), TensorArg(b))
	if !errors.Is(err, ErrBackend) {
		t.Errorf("add of [2,2] and [3]: %v, want a backend error", err)
	}
	_, err = OpCall("aten::add", "", TensorArg(a), TensorArg(nil))
	wantError(t, err, CodeInvalidArgument, "OpCall: args[1] is a nil Tensor")
	closed := must(FromFloat32([]float32{1})).of(t)
	closed.Close()
	_, err = OpCall("aten::cat", "", TensorsArg(a, closed))
	wantError(t, err, CodeInvalidArgument, "use of closed Tensor")
	_, err = OpCall("aten::relu", "", Named("nosuch", TensorArg(a)))
	wantError(t, err, CodeInvalidArgument, "nosuch")
}

func TestOpSchemas(t *testing.T) {
	s := must(OpSchemas("aten::add")).of(t)
	found := false
	for _, line := range s {
		if strings.HasPrefix(line, "aten::add.Tensor(Tensor self, Tensor other") {
			found = true
		}
	}
	if !found {
		t.Errorf("schemas of aten::add: %q", s)
	}
	// More text than the first buffer holds: asked again with room.
	defer func(n int) { textBufferSize = n }(textBufferSize)
	textBufferSize = 16
	if again := must(OpSchemas("aten::add")).of(t); !reflect.DeepEqual(again, s) {
		t.Errorf("with a small first buffer: %q, want %q", again, s)
	}
	_, err := OpSchemas("aten::conv2dd")
	wantError(t, err, CodeNotFound, "no operator 'aten::conv2dd'")
}

func TestOpCallConcurrent(t *testing.T) {
	shared := must(FromFloat32([]float32{1, 2, 3, 4}, 2, 2)).of(t)
	defer closeT(t, shared)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				outs, err := OpCall("aten::add", "", TensorArg(shared), TensorArg(shared), Named("alpha", IntArg(1)))
				if err != nil {
					t.Error(err)
					return
				}
				got, err := outs[0].Float32s()
				if err != nil || !reflect.DeepEqual(got, []float32{2, 4, 6, 8}) {
					t.Errorf("%v %v", got, err)
				}
				closeAll(outs)
			}
		}()
	}
	wg.Wait()
}

func TestArithmeticMethods(t *testing.T) {
	checkHandles(t)
	x := must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, x)
	row := must(FromFloat32([]float32{10, 20, 40}, 3)).of(t)
	defer closeT(t, row)
	col := must(FromFloat32([]float32{2, 4}, 2, 1)).of(t)
	defer closeT(t, col)
	check := func(name string, got *Tensor, err error, want []float32) {
		t.Helper()
		ok(t, err)
		defer closeT(t, got)
		if v := must(got.Float32s()).of(t); !reflect.DeepEqual(v, want) {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	y, err := x.Add(row)
	check("x.Add(row)", y, err, []float32{11, 22, 43, 14, 25, 46})
	y, err = x.Sub(col)
	check("x.Sub(col)", y, err, []float32{-1, 0, 1, 0, 1, 2})
	y, err = col.Mul(row)
	check("col.Mul(row)", y, err, []float32{20, 40, 80, 40, 80, 160})
	y, err = x.Div(col)
	check("x.Div(col)", y, err, []float32{0.5, 1, 1.5, 1, 1.25, 1.5})
	y, err = row.AddScalar(0.5)
	check("row.AddScalar(0.5)", y, err, []float32{10.5, 20.5, 40.5})
	y, err = row.SubScalar(10)
	check("row.SubScalar(10)", y, err, []float32{0, 10, 30})
	y, err = row.MulScalar(-0.5)
	check("row.MulScalar(-0.5)", y, err, []float32{-5, -10, -20})
	y, err = row.DivScalar(4)
	check("row.DivScalar(4)", y, err, []float32{2.5, 5, 10})
	y, err = x.Mul(x)
	check("x.Mul(x)", y, err, []float32{1, 4, 9, 16, 25, 36})
	four := must(FromFloat32([]float32{1, 2, 3, 4}, 4)).of(t)
	defer closeT(t, four)
	_, err = x.Add(four)
	wantError(t, err, CodeInvalidArgument, "Tensor.Add: a is [2, 3] and b is [4]: the shapes do not broadcast (tpt_op_add)")
	_, err = x.Add(nil)
	wantError(t, err, CodeInvalidArgument, "Add: b is nil")
}

func TestComparisonsAndWhere(t *testing.T) {
	checkHandles(t)
	x := must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)).of(t)
	defer closeT(t, x)
	row := must(FromFloat32([]float32{2, 2, 5}, 3)).of(t)
	defer closeT(t, row)
	check := func(name string, got *Tensor, err error, want []bool) {
		t.Helper()
		ok(t, err)
		defer closeT(t, got)
		if d := must(got.DType()).of(t); d != DTypeBool {
			t.Errorf("%s: dtype %v, want bool", name, d)
		}
		if v := must(got.Bools()).of(t); !reflect.DeepEqual(v, want) {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	y, err := x.Eq(row)
	check("x.Eq(row)", y, err, []bool{false, true, false, false, false, false})
	y, err = x.Gt(row)
	check("x.Gt(row)", y, err, []bool{false, false, false, true, true, true})
	y, err = x.Ge(row)
	check("x.Ge(row)", y, err, []bool{false, true, false, true, true, true})
	y, err = x.Lt(row)
	check("x.Lt(row)", y, err, []bool{true, false, true, false, false, false})
	y, err = x.Le(row)
	check("x.Le(row)", y, err, []bool{true, true, true, false, false, false})
	y, err = x.EqScalar(3)
	check("x.EqScalar(3)", y, err, []bool{false, false, true, false, false, false})
	y, err = x.GtScalar(3)
	check("x.GtScalar(3)", y, err, []bool{false, false, false, true, true, true})
	y, err = x.GeScalar(3)
	check("x.GeScalar(3)", y, err, []bool{false, false, true, true, true, true})
	y, err = x.LtScalar(3)
	check("x.LtScalar(3)", y, err, []bool{true, true, false, false, false, false})
	small := must(x.LeScalar(3)).of(t)
	defer closeT(t, small)
	w := must(Where(small, x, row)).of(t)
	defer closeT(t, w)
	if v := must(w.Float32s()).of(t); !reflect.DeepEqual(v, []float32{1, 2, 3, 2, 2, 5}) {
		t.Errorf("Where(x <= 3, x, row) = %v", v)
	}
	_, err = Where(x, x, row)
	wantError(t, err, CodeInvalidArgument, "where takes a bool one")
	_, err = Where(nil, x, row)
	wantError(t, err, CodeInvalidArgument, "Where: cond is nil")
}

// TestArgmax: the classes of logits, by row, as int64.
func TestArgmax(t *testing.T) {
	logits := must(FromFloat32([]float32{0.1, 2, -1, 3, 0, 1, -2, -1, -3}, 3, 3)).of(t)
	defer logits.Close()
	classes := must(logits.Argmax(1)).of(t)
	defer classes.Close()
	if got := must(classes.Int64s()).of(t); !reflect.DeepEqual(got, []int64{1, 0, 1}) {
		t.Fatalf("Argmax(1) = %v", got)
	}
	_, err := logits.Argmax(5)
	wantError(t, err, CodeBackend, "Dimension out of range")
}
