package tptrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Tower and feed functions run under C frames: they report with t.Error,
// never t.Fatal.

// regression is the tower function of test_model.c: prediction = x W^T + b
// with W [1, 3] and b [1] (initialised to 0.5), cost = mse(prediction, y).
// hook, if not nil, runs after the variables are made and may end the call.
type regression struct {
	calls, builds, inference atomic.Int32
	mu                       sync.Mutex
	lastName                 string
	hook                     func(tw *Tower, w, b *Tensor) error
}

func (r *regression) tower(tw *Tower, in []*Tensor) error {
	if len(in) != 2 {
		return fmt.Errorf("%d inputs", len(in))
	}
	if tw.IsBuilding() != tw.CanCreateVariables() {
		return errors.New("IsBuilding and CanCreateVariables differ")
	}
	r.calls.Add(1)
	if tw.IsBuilding() {
		r.builds.Add(1)
	}
	if !tw.IsTraining() {
		r.inference.Add(1)
	}
	r.mu.Lock()
	r.lastName = tw.Name()
	r.mu.Unlock()
	w, err := tw.Variable("W", []int64{1, 3}, nil)
	if err != nil {
		return err
	}
	defer w.Close()
	b, err := tw.Variable("b", []int64{1}, &VariableOptions{Init: InitConstant, A: 0.5})
	if err != nil {
		return err
	}
	defer b.Close()
	if r.hook != nil {
		if err := r.hook(tw, w, b); err != nil {
			return err
		}
	}
	outs, err := OpCall("aten::linear", "", TensorArg(in[0]), TensorArg(w), TensorArg(b))
	if err != nil {
		return err
	}
	pred := outs[0]
	defer pred.Close()
	outs, err = OpCall("aten::mse_loss", "", TensorArg(pred), TensorArg(in[1]))
	if err != nil {
		return err
	}
	cost := outs[0]
	defer cost.Close()
	if err := tw.SetCost(cost); err != nil {
		return err
	}
	return tw.SetOutput("prediction", pred)
}

func (r *regression) name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastName
}

func regressionSpec() []InputSpec {
	return []InputSpec{
		{Name: "x", DType: DTypeFloat32, Shape: []int64{-1, 3}},
		{Name: "y", Shape: []int64{-1, 1}}, // DType 0: float32
	}
}

func newRegressionModel(t *testing.T, r *regression) *Model {
	t.Helper()
	m := must(NewModel(regressionSpec(), r.tower)).of(t)
	t.Cleanup(func() { m.Close() })
	return m
}

// regressionData returns rows of y = x . (1, -2, 3) + 1, x uniform in
// [-1, 1) (the LCG of test_model.c).
func regressionData(rows int) (x, y []float32) {
	r := uint32(12345)
	x = make([]float32, rows*3)
	y = make([]float32, rows)
	for i := 0; i < rows; i++ {
		for j := 0; j < 3; j++ {
			r = r*1664525 + 1013904223
			x[i*3+j] = float32(r>>8)/8388608.0 - 1
		}
		y[i] = x[i*3] - 2*x[i*3+1] + 3*x[i*3+2] + 1
	}
	return x, y
}

func regressionInput(t *testing.T, batch int64, rows int) *Input {
	t.Helper()
	xs, ys := regressionData(rows)
	x := must(FromFloat32(xs, int64(rows), 3)).of(t)
	defer x.Close()
	y := must(FromFloat32(ys, int64(rows), 1)).of(t)
	defer y.Close() // the input shares them
	return must(InputFromTensors([]*Tensor{x, y}, batch, Shuffled, 42)).of(t)
}

func setOptimizer(t *testing.T, m *Model, kind string, lr float64) *Optimizer {
	t.Helper()
	opt := must(NewOptimizer(kind)).of(t)
	t.Cleanup(func() { opt.Close() })
	ok(t, opt.Set("learning_rate", lr))
	ok(t, m.SetOptimizer(opt))
	return opt
}

func TestModelTrainsRegression(t *testing.T) {
	checkHandles(t)
	r := &regression{}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "sgd", 0.1)
	tr := newQuietTrainer(t, 1, 4, 50)
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	ok(t, tr.Run())
	if b := r.builds.Load(); b != 1 {
		t.Errorf("%d build calls, want 1", b)
	}
	if c := r.calls.Load(); c != 1+200 {
		t.Errorf("%d tower calls, want 201", c)
	}
	if n := r.name(); n != "tower0" {
		t.Errorf("tower name %q, want tower0", n)
	}
	cost, step, err := tr.ScalarLatest("cost")
	ok(t, err)
	if step != 200 || !(cost < 1e-3) {
		t.Errorf("cost %v at step %d", cost, step)
	}
	if names := must(m.VariableNames()).of(t); !reflect.DeepEqual(names, []string{"W", "b"}) {
		t.Errorf("VariableNames() = %q", names)
	}
	w := must(m.Variable("W")).of(t)
	defer closeT(t, w)
	b := must(m.Variable("b")).of(t)
	defer closeT(t, b)
	wv, bv := must(w.Float32s()).of(t), must(b.Float32s()).of(t)
	for i, want := range []float32{1, -2, 3} {
		if math.Abs(float64(wv[i]-want)) > 0.05 {
			t.Errorf("W = %v, want (1, -2, 3)", wv)
		}
	}
	if math.Abs(float64(bv[0]-1)) > 0.05 {
		t.Errorf("b = %v, want 1", bv)
	}
	_, err = m.Variable("nope")
	wantError(t, err, CodeNotFound, "no variable 'nope'")

	// Inference reuses the variables, creates none, publishes outputs.
	x := must(FromFloat32([]float32{1, 1, 1, 0, 0, 0}, 2, 3)).of(t)
	defer closeT(t, x)
	y := must(FromFloat32([]float32{0, 0}, 2, 1)).of(t)
	defer closeT(t, y)
	outs := must(m.Infer([]*Tensor{x, y}, []string{"prediction", "cost"})).of(t)
	defer closeAll(outs)
	if n := r.name(); n != "InferenceTower" {
		t.Errorf("tower name %q, want InferenceTower", n)
	}
	if n := r.inference.Load(); n != 1 {
		t.Errorf("%d inference calls, want 1", n)
	}
	pred := must(outs[0].Float32s()).of(t)
	if math.Abs(float64(pred[0]-3)) > 0.1 || math.Abs(float64(pred[1]-1)) > 0.1 {
		t.Errorf("prediction = %v, want (3, 1)", pred)
	}
	c := must(outs[1].Item()).of(t)
	if want := float64(pred[0]*pred[0]+pred[1]*pred[1]) / 2; math.Abs(c-want) > 1e-4 {
		t.Errorf("cost = %v, want %v", c, want)
	}
	_, err = m.Infer([]*Tensor{x, y}, []string{"logits"})
	wantError(t, err, CodeNotFound, "no output 'logits'")
	_, err = m.Infer([]*Tensor{y, x}, []string{"prediction"})
	wantError(t, err, CodeInvalidArgument, "input 'x' is Float [2, 1] but the signature says Float [-1, 3]")
	none := must(m.Infer([]*Tensor{x, y}, nil)).of(t)
	if len(none) != 0 {
		t.Errorf("Infer with no names: %d outputs", len(none))
	}
	ok(t, m.Close())
	_, err = m.Infer([]*Tensor{x, y}, nil)
	wantError(t, err, CodeInvalidArgument, "Model.Infer: use of closed Model")
}

func TestVariableRules(t *testing.T) {
	checkHandles(t)
	train := func(hook func(tw *Tower, w, b *Tensor) error) error {
		r := &regression{hook: hook}
		m := newRegressionModel(t, r)
		setOptimizer(t, m, "sgd", 0.1)
		tr := newQuietTrainer(t, 1, 1, 3)
		ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
		return tr.Run()
	}
	// Created outside the build call.
	err := train(func(tw *Tower, w, b *Tensor) error {
		if tw.IsBuilding() {
			return nil
		}
		late, err := tw.Variable("late", []int64{1}, nil)
		late.Close()
		return err
	})
	wantError(t, err, CodeInvalidArgument,
		"variable 'late' does not exist: variables are created by the first call of the first training tower")
	// One name twice in one call.
	err = train(func(tw *Tower, w, b *Tensor) error {
		again, err := tw.Variable("b", []int64{1}, &VariableOptions{Init: InitConstant, A: 0.5})
		again.Close()
		return err
	})
	wantError(t, err, CodeInvalidArgument, "variable 'b' is used twice in one call")
	// Under a reuse scope a net applied twice shares its variables; a plain
	// scope still refuses a third use, and Scope closes it after the error.
	err = train(func(tw *Tower, w, b *Tensor) error {
		if err := tw.PushReuseScope("d"); err != nil {
			return err
		}
		v, err := tw.Variable("v", []int64{1}, nil)
		if err != nil {
			return err
		}
		if err := tw.PopScope(); err != nil {
			return err
		}
		var again *Tensor
		if err := tw.ReuseScope("d", func() (err error) { again, err = tw.Variable("v", []int64{1}, nil); return }); err != nil {
			return err
		}
		first, err := v.Float32s()
		if err != nil {
			return err
		}
		second, err := again.Float32s()
		if err != nil {
			return err
		}
		if len(first) != 1 || len(second) != 1 || first[0] != second[0] {
			t.Errorf("the reuse scope gave another variable: %v, %v", first, second)
		}
		err = tw.Scope("d", func() error { _, err := tw.Variable("v", []int64{1}, nil); return err })
		wantError(t, err, CodeInvalidArgument, "variable 'd/v' is used twice")
		return tw.PopScope() // Scope popped its scope: there is none left
	})
	wantError(t, err, CodeState, "pop_scope without a scope")

	// Another shape or dtype than the existing variable; scopes.
	calls := 0
	m := must(NewModel([]InputSpec{{Name: "x", Shape: []int64{-1}}}, func(tw *Tower, in []*Tensor) error {
		if tw.IsBuilding() {
			if err := tw.PushScope("fc"); err != nil {
				return err
			}
			v, err := tw.Variable("v", []int64{3}, nil)
			v.Close()
			if err != nil {
				return err
			}
			if err := tw.PopScope(); err != nil {
				return err
			}
			steps, err := tw.Variable("steps", []int64{1}, &VariableOptions{DType: DTypeInt64, Init: InitZeros, ModelOnly: true})
			steps.Close()
			return err
		}
		calls++
		if err := tw.PushScope("fc"); err != nil {
			return err
		}
		_, err := tw.Variable("v", []int64{4}, nil)
		wantError(t, err, CodeInvalidArgument, "variable 'fc/v' exists with shape [3], asked for shape [4]")
		_, err = tw.Variable("v", []int64{3}, &VariableOptions{DType: DTypeFloat64})
		wantError(t, err, CodeInvalidArgument, "variable 'fc/v' exists with dtype Float, asked for Double")
		v, err := tw.Variable("v", []int64{3}, nil)
		if err != nil {
			return err
		}
		v.Close()
		ok(t, tw.PopScope())
		wantError(t, tw.PopScope(), CodeState, "pop_scope without a scope")
		wantError(t, tw.PushScope("a/b"), CodeInvalidArgument, "without '/'")
		return nil
	})).of(t)
	defer m.Close()
	x := must(FromFloat32([]float32{1, 2})).of(t)
	defer closeT(t, x)
	none := must(m.Infer([]*Tensor{x}, nil)).of(t) // builds first, then infers
	if len(none) != 0 || calls != 1 {
		t.Errorf("%d outputs, %d inference calls", len(none), calls)
	}
	if names := must(m.VariableNames()).of(t); !reflect.DeepEqual(names, []string{"fc/v", "steps"}) {
		t.Errorf("VariableNames() = %q", names)
	}
}

func TestModelBuildAndSetVariable(t *testing.T) {
	checkHandles(t)
	build := func(seed uint64) []float32 {
		ok(t, ManualSeed(seed))
		r := &regression{}
		m := newRegressionModel(t, r)
		if names := must(m.VariableNames()).of(t); len(names) != 0 {
			t.Errorf("variables before the build: %q", names)
		}
		ok(t, m.Build())
		ok(t, m.Build()) // once
		if n := r.builds.Load(); n != 1 {
			t.Errorf("%d build calls", n)
		}
		w := must(m.Variable("W")).of(t)
		defer closeT(t, w)
		b := must(m.Variable("b")).of(t)
		defer closeT(t, b)
		wv := must(w.Float32s()).of(t)
		bound := math.Sqrt(6.0 / 4.0) // glorot uniform of [1, 3]
		for _, v := range wv {
			if math.Abs(float64(v)) > bound {
				t.Errorf("W = %v beyond %v", wv, bound)
			}
		}
		if bv := must(b.Float32s()).of(t); bv[0] != 0.5 {
			t.Errorf("b = %v, want the constant 0.5", bv)
		}
		// SetVariable copies, converts the dtype, and checks the shape; the
		// handle sees the variable itself.
		nw := must(FromFloat64([]float64{9, 8, 7}, 1, 3)).of(t)
		defer closeT(t, nw)
		ok(t, m.SetVariable("W", nw))
		if got := must(w.Float32s()).of(t); !reflect.DeepEqual(got, []float32{9, 8, 7}) {
			t.Errorf("W after SetVariable = %v", got)
		}
		bad := must(FromFloat32([]float32{1, 2, 3})).of(t)
		defer closeT(t, bad)
		wantError(t, m.SetVariable("W", bad), CodeInvalidArgument, "has shape [1, 3], the value [3]")
		wantError(t, m.SetVariable("X", bad), CodeNotFound, "no variable 'X'")
		wantError(t, m.SetVariable("W", nil), CodeInvalidArgument, "Model.SetVariable: the value is nil")
		return wv
	}
	a, b, c := build(7), build(7), build(8)
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, c) {
		t.Errorf("ManualSeed: seed 7 gave %v and %v, seed 8 %v", a, b, c)
	}
}

func TestTowerMethods(t *testing.T) {
	checkHandles(t)
	var kept *Tower
	var keptInput *Tensor
	type seen struct {
		training, building, canCreate bool
		index                         int
		name, device                  string
	}
	var got []seen
	m := must(NewModel([]InputSpec{{Name: "x", Shape: []int64{2}}}, func(tw *Tower, in []*Tensor) error {
		got = append(got, seen{tw.IsTraining(), tw.IsBuilding(), tw.CanCreateVariables(), tw.Index(), tw.Name(), tw.Device()})
		kept, keptInput = tw, in[0]
		// Closing a borrowed input is harmless.
		if err := in[0].Close(); err != nil {
			return err
		}
		return nil
	})).of(t)
	defer m.Close()
	x := must(FromFloat32([]float32{1, 2})).of(t)
	defer closeT(t, x)
	must(m.Infer([]*Tensor{x}, nil)).of(t)
	want := []seen{
		{true, true, true, 0, "tower0", "cpu"},
		{false, false, false, 0, "InferenceTower", "cpu"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("towers seen:\n%+v\nwant\n%+v", got, want)
	}
	if _, err := x.Shape(); err != nil {
		t.Errorf("the caller's input after the tower closed its borrowed one: %v", err)
	}
	// The tower and its inputs are invalid once the call returned.
	if kept.IsTraining() || kept.Name() != "" || kept.Index() != 0 {
		t.Error("a stale Tower answered")
	}
	wantError(t, kept.SetCost(x), CodeInvalidArgument, "Tower.SetCost: use of a Tower after its tower function returned")
	_, err := kept.Variable("v", nil, nil)
	wantError(t, err, CodeInvalidArgument, "Tower.Variable: use of a Tower after")
	wantError(t, kept.PushScope("s"), CodeInvalidArgument, "Tower.PushScope")
	_, err = keptInput.Shape()
	wantError(t, err, CodeInvalidArgument, "use of closed Tensor")
}

type towerError struct{ step int64 }

func (e *towerError) Error() string { return fmt.Sprintf("tower error at %d", e.step) }

func TestTowerErrorsComeBackUnchanged(t *testing.T) {
	checkHandles(t)
	want := &towerError{3}
	var step atomic.Int64
	r := &regression{hook: func(tw *Tower, w, b *Tensor) error {
		if tw.IsBuilding() {
			return nil
		}
		if step.Add(1) == 3 {
			return want
		}
		return nil
	}}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "adam", 0.01)
	tr := newQuietTrainer(t, 1, 2, 5)
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	if err := tr.Run(); err != want {
		t.Errorf("Run() = %#v, want the tower's error %#v", err, want)
	}
	if g := tr.GlobalStep(); g != 2 {
		t.Errorf("GlobalStep() = %d, want 2", g)
	}

	// An *Error keeps its code; a Stop in inference is a *StopError.
	r2 := &regression{hook: func(tw *Tower, w, b *Tensor) error {
		if tw.IsBuilding() {
			return nil
		}
		return &Error{Code: CodeIO, Message: "the tower could not read its lookup table"}
	}}
	m2 := newRegressionModel(t, r2)
	x := must(FromFloat32([]float32{1, 1, 1}, 1, 3)).of(t)
	defer closeT(t, x)
	y := must(FromFloat32([]float32{1}, 1, 1)).of(t)
	defer closeT(t, y)
	_, err := m2.Infer([]*Tensor{x, y}, nil)
	if e, isErr := err.(*Error); !isErr || e.Code != CodeIO || e.Message != "the tower could not read its lookup table" {
		t.Errorf("Infer() = %#v", err)
	}
	stop := Stop("enough")
	m3 := must(NewModel(regressionSpec(), func(tw *Tower, in []*Tensor) error {
		if tw.IsBuilding() {
			return nil
		}
		return stop
	})).of(t)
	defer m3.Close()
	if _, err := m3.Infer([]*Tensor{x, y}, nil); err != stop {
		t.Errorf("Infer() = %#v, want the Stop", err)
	}
	// A build call that fails: Build returns the error, and again later.
	bad := errors.New("no build today")
	m4 := must(NewModel(nil, func(tw *Tower, in []*Tensor) error { return bad })).of(t)
	defer m4.Close()
	if err := m4.Build(); err != bad {
		t.Errorf("Build() = %#v, want %#v", err, bad)
	}
	if err := m4.Build(); err != bad {
		t.Errorf("second Build() = %#v, want %#v", err, bad)
	}
}

func TestStopFromTower(t *testing.T) {
	checkHandles(t)
	var calls atomic.Int32
	r := &regression{hook: func(tw *Tower, w, b *Tensor) error {
		if !tw.IsBuilding() && calls.Add(1) == 4 {
			return Stop("the tower has seen enough")
		}
		return nil
	}}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "sgd", 0.1)
	tr := newQuietTrainer(t, 1, 3, 10)
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	ok(t, tr.Run())
	if reason, stopped := tr.StopReason(); !stopped || reason != "the tower has seen enough" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
}

func TestPanicInTower(t *testing.T) {
	checkHandles(t)
	value := &panicValue{"tower"}
	var calls atomic.Int32
	r := &regression{hook: func(tw *Tower, w, b *Tensor) error {
		if !tw.IsBuilding() && calls.Add(1) == 3 {
			panic(value)
		}
		return nil
	}}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "sgd", 0.1)
	tr := newQuietTrainer(t, 1, 3, 10)
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	var rec recorder
	ok(t, tr.AddCallback(recordingCallback(t, &rec, "A", EventAfterTrain, nil)))
	_, p := runAndRecover(tr)
	if p != value {
		t.Fatalf("Run panicked with %#v, want %#v", p, value)
	}
	if n := rec.count("A", EventAfterTrain); n != 1 {
		t.Errorf("AFTER_TRAIN ran %d times, want 1", n)
	}
	if g := tr.GlobalStep(); g != 2 {
		t.Errorf("GlobalStep() = %d, want 2", g)
	}

	// Infer and Build panic again when they return.
	inferPanic := func(m *Model, in []*Tensor) (p any) {
		defer func() { p = recover() }()
		m.Infer(in, nil)
		return nil
	}
	x := must(FromFloat32([]float32{1, 1, 1}, 1, 3)).of(t)
	defer closeT(t, x)
	y := must(FromFloat32([]float32{1}, 1, 1)).of(t)
	defer closeT(t, y)
	if p := inferPanic(m, []*Tensor{x, y}); p != nil { // the hook is quiet now
		t.Errorf("Infer panicked with %#v: Run did not take its panic", p)
	}
	pm := must(NewModel(regressionSpec(), func(tw *Tower, in []*Tensor) error {
		var s []int
		_ = s[len(in)] // a runtime error
		return nil
	})).of(t)
	defer pm.Close()
	buildPanic := func() (p any) {
		defer func() { p = recover() }()
		pm.Build()
		return nil
	}
	if p, isRuntime := buildPanic().(interface{ RuntimeError() }); !isRuntime {
		t.Errorf("Build panicked with %#v, want the runtime error", p)
	}
	if p := inferPanic(pm, []*Tensor{x, y}); p == nil {
		t.Error("Infer did not panic")
	}
}

func TestConcurrentInference(t *testing.T) {
	// Several goroutines run the tower function at once (each Infer on its
	// own thread); errors and panics come back to the call that caused them.
	checkHandles(t)
	m := must(NewModel([]InputSpec{{Name: "x", Shape: []int64{1}}}, func(tw *Tower, in []*Tensor) error {
		v, err := in[0].Item()
		if err != nil {
			return err
		}
		switch {
		case v < 0:
			return &towerError{int64(-v)}
		case v >= 1000:
			panic(int(v))
		}
		outs, err := OpCall("aten::mul", "", TensorArg(in[0]), IntArg(2))
		if err != nil {
			return err
		}
		defer closeAll(outs)
		return tw.SetOutput("double", outs[0])
	})).of(t)
	defer m.Close()
	ok(t, m.Build())
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				v := float32(w*100 + i)
				switch i % 4 {
				case 1:
					v = -v - 1
				case 2:
					v += 1000
				}
				x, err := FromFloat32([]float32{v})
				if err != nil {
					t.Error(err)
					return
				}
				func() {
					defer x.Close()
					defer func() {
						p := recover()
						if (p != nil) != (i%4 == 2) || (p != nil && p != int(v)) {
							t.Errorf("worker %d round %d: panic %v", w, i, p)
						}
					}()
					outs, err := m.Infer([]*Tensor{x}, []string{"double"})
					switch {
					case i%4 == 1:
						if e, isTower := err.(*towerError); !isTower || e.step != int64(-v) {
							t.Errorf("worker %d round %d: %v", w, i, err)
						}
					case err != nil:
						t.Errorf("worker %d round %d: %v", w, i, err)
					default:
						got, _ := outs[0].Float32s()
						if got[0] != 2*v {
							t.Errorf("worker %d round %d: %v", w, i, got)
						}
						closeAll(outs)
					}
				}()
			}
		}(w)
	}
	wg.Wait()
}

// feeder serves limit batches of 4 rows, then ends with end.
type feeder struct {
	served, limit int
	badShape      bool
	end           error
}

func (f *feeder) feed(n int) ([]*Tensor, error) {
	if n != 2 {
		return nil, fmt.Errorf("feed asked for %d tensors", n)
	}
	if f.served == f.limit {
		return nil, f.end
	}
	f.served++
	cols := int64(3)
	if f.badShape {
		cols = 2
	}
	x, err := FromFloat32(make([]float32, 4*cols), 4, cols)
	if err != nil {
		return nil, err
	}
	y, err := FromFloat32([]float32{1, 1, 1, 1}, 4, 1)
	if err != nil {
		return nil, err
	}
	return []*Tensor{x, y}, nil
}

func TestFeedInput(t *testing.T) {
	checkHandles(t)
	r := &regression{}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "rmsprop", 0.01)
	run := func(feed func(int) ([]*Tensor, error)) (*Trainer, error) {
		in := must(InputFromFeed(feed)).of(t)
		tr := newQuietTrainer(t, 1, 1, 100)
		ok(t, tr.SetModel(m, in))
		if err := in.Close(); err != nil { // spent: Close does nothing
			t.Error(err)
		}
		return tr, tr.Run()
	}
	f := &feeder{limit: 5, end: Stop("end of data")}
	tr, err := run(f.feed)
	ok(t, err)
	if reason, stopped := tr.StopReason(); !stopped || reason != "end of data" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
	if g := tr.GlobalStep(); g != 5 {
		t.Errorf("GlobalStep() = %d, want 5", g)
	}
	if _, _, err := tr.ScalarLatest("cost"); err != nil {
		t.Error(err)
	}
	// io.EOF ends the data too.
	tr, err = run((&feeder{limit: 2, end: io.EOF}).feed)
	ok(t, err)
	if reason, stopped := tr.StopReason(); !stopped || reason != "EOF" || tr.GlobalStep() != 2 {
		t.Errorf("StopReason() = %q, %v after %d steps", reason, stopped, tr.GlobalStep())
	}
	// Any other error fails training and comes back unchanged.
	bad := errors.New("the disk is gone")
	_, err = run((&feeder{limit: 1, end: bad}).feed)
	if err != bad {
		t.Errorf("Run() = %#v, want %#v", err, bad)
	}
	// A batch of the wrong shape: a clear error.
	_, err = run((&feeder{limit: 5, badShape: true}).feed)
	wantError(t, err, CodeInvalidArgument, "input 'x' is Float [4, 2] but the signature says Float [-1, 3]")
	// The wrong number of tensors, a nil one.
	_, err = run(func(n int) ([]*Tensor, error) {
		x, _ := FromFloat32([]float32{1})
		return []*Tensor{x}, nil
	})
	wantError(t, err, CodeCallback, "the feed function returned 1 tensors for 2 inputs")
	_, err = run(func(n int) ([]*Tensor, error) {
		x, _ := FromFloat32(make([]float32, 3), 1, 3)
		return []*Tensor{x, nil}, nil
	})
	wantError(t, err, CodeInvalidArgument, "the feed function's tensor 1 is nil")
	// The feed takes the tensors over; a Share feeds one tensor again.
	y := must(FromFloat32([]float32{1, 1, 1, 1}, 4, 1)).of(t)
	defer closeT(t, y)
	var xs []*Tensor
	steps := 0
	tr, err = run(func(n int) ([]*Tensor, error) {
		if steps == 3 {
			return nil, Stop("three")
		}
		steps++
		x, err := FromFloat32(make([]float32, 12), 4, 3)
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
		ys, err := y.Share()
		return []*Tensor{x, ys}, err
	})
	ok(t, err)
	if tr.GlobalStep() != 3 {
		t.Errorf("GlobalStep() = %d", tr.GlobalStep())
	}
	for _, x := range xs {
		if _, err := x.Shape(); err == nil {
			t.Error("a tensor the feed returned is still open")
		}
	}
	if _, err := y.Shape(); err != nil {
		t.Errorf("the shared tensor: %v", err)
	}
}

func TestPanicInFeed(t *testing.T) {
	checkHandles(t)
	m := newRegressionModel(t, &regression{})
	setOptimizer(t, m, "sgd", 0.1)
	f := &feeder{limit: 100}
	in := must(InputFromFeed(func(n int) ([]*Tensor, error) {
		if f.served == 2 {
			panic("the feed broke")
		}
		return f.feed(n)
	})).of(t)
	tr := newQuietTrainer(t, 1, 1, 10)
	ok(t, tr.SetModel(m, in))
	_, p := runAndRecover(tr)
	if p != "the feed broke" {
		t.Errorf("Run panicked with %#v", p)
	}
}

func TestOptimizer(t *testing.T) {
	checkHandles(t)
	_, err := NewOptimizer("lion")
	wantError(t, err, CodeInvalidArgument, "unknown optimizer kind 'lion'")
	for kind, lr := range map[string]float64{"sgd": 0.01, "adam": 0.001, "adamw": 0.001, "rmsprop": 0.01, "adagrad": 0.01} {
		o := must(NewOptimizer(kind)).of(t)
		if v := must(o.Get("learning_rate")).of(t); v != lr {
			t.Errorf("%s: learning_rate %v, want %v", kind, v, lr)
		}
		if v := must(o.Get("accumulate_steps")).of(t); v != 1 {
			t.Errorf("%s: accumulate_steps %v", kind, v)
		}
		wantError(t, o.Set("learnin_rate", 1), CodeInvalidArgument, "has no hyper-parameter 'learnin_rate'")
		wantError(t, o.Set("learning_rate", -1), CodeInvalidArgument, "must be >= 0")
		wantError(t, o.ScaleGradients("([", 2), CodeInvalidArgument, "not a regular expression")
		ok(t, o.Close())
		ok(t, o.Close())
		wantError(t, o.Set("momentum", 1), CodeInvalidArgument, "Optimizer.Set: use of closed Optimizer")
	}

	// A schedule: halve the learning rate after every epoch, from a callback.
	m := newRegressionModel(t, &regression{})
	o := must(NewOptimizer("sgd")).of(t)
	defer o.Close()
	ok(t, o.Set("learning_rate", 0.08))
	ok(t, o.Set("clip_global_norm", 1))
	ok(t, o.Set("accumulate_steps", 2))
	ok(t, o.ScaleGradients("^b$", 0.5))
	ok(t, m.SetOptimizer(o))
	tr := newQuietTrainer(t, 1, 3, 8)
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	// The optimizer (and the model) through the trainer: nothing captured.
	cb := must(NewCallback("halve", EventTrigger, nil, func(ctx *Context, e Event, r *Record) error {
		if ctx.Model() != m {
			t.Errorf("ctx.Model() = %p, want the model given to SetModel %p", ctx.Model(), m)
		}
		opt, err := ctx.Optimizer()
		if err != nil {
			return err
		}
		defer opt.Close()
		lr, err := opt.Get("learning_rate")
		if err != nil {
			return err
		}
		return opt.Set("learning_rate", lr/2)
	})).of(t)
	ok(t, tr.AddCallback(cb))
	ok(t, tr.Run())
	if v := must(o.Get("learning_rate")).of(t); math.Abs(v-0.01) > 1e-12 {
		t.Errorf("learning_rate %v, want 0.01", v)
	}
	steps, _, err := tr.ScalarHistory("cost")
	ok(t, err)
	if len(steps) != 3 {
		t.Errorf("%d costs, want 3 (the moving average, once per epoch)", len(steps))
	}

	// No optimizer.
	m2 := newRegressionModel(t, &regression{})
	tr2 := newQuietTrainer(t, 1, 1, 2)
	ok(t, tr2.SetModel(m2, regressionInput(t, 16, 64)))
	wantError(t, tr2.Run(), CodeState, "no optimizer")
}

func TestModelAndInputErrors(t *testing.T) {
	checkHandles(t)
	tower := func(*Tower, []*Tensor) error { return nil }
	_, err := NewModel([]InputSpec{{Name: "x", Shape: []int64{-1, 0}}}, tower)
	wantError(t, err, CodeInvalidArgument, "dimensions are >= 1 or -1")
	_, err = NewModel([]InputSpec{{Name: "x"}, {Name: "x"}}, tower)
	wantError(t, err, CodeInvalidArgument, "is used twice")
	_, err = NewModel(nil, nil)
	wantError(t, err, CodeInvalidArgument, "NewModel: tower is nil")

	a := must(FromFloat32([]float32{1, 2, 3})).of(t)
	defer closeT(t, a)
	b := must(FromFloat32([]float32{1, 2})).of(t)
	defer closeT(t, b)
	_, err = InputFromTensors([]*Tensor{a, b}, 1, Sequential, 0)
	wantError(t, err, CodeInvalidArgument, "tensors[1] has 2 rows")
	_, err = InputFromTensors([]*Tensor{a}, 4, Sequential, 0)
	wantError(t, err, CodeInvalidArgument, "batch_size 4 is larger")
	_, err = InputFromTensors(nil, 1, Sequential, 0)
	wantError(t, err, CodeInvalidArgument, "n_tensors is 0")
	_, err = InputFromTensors([]*Tensor{nil}, 1, Sequential, 0)
	wantError(t, err, CodeInvalidArgument, "InputFromTensors: tensors[0] is nil")
	_, err = InputFromFeed(nil)
	wantError(t, err, CodeInvalidArgument, "InputFromFeed: feed is nil")

	// SetModel takes the input also when it fails; a spent input is refused.
	m := must(NewModel(nil, tower)).of(t)
	in := must(InputFromTensors([]*Tensor{a}, 1, Sequential, 0)).of(t)
	tr := newQuietTrainer(t, 1, 1, 1)
	ok(t, m.Close())
	wantError(t, tr.SetModel(m, in), CodeInvalidArgument, "Model.SetModel: use of closed Model")
	wantError(t, tr.SetModel(newRegressionModel(t, &regression{}), in), CodeInvalidArgument,
		"Trainer.SetModel: the Input was closed or already given away")
	feedIn := must(InputFromFeed((&feeder{}).feed)).of(t)
	ok(t, feedIn.Close()) // releases the feed function's handle
	ok(t, feedIn.Close())
}

func TestModelFinalizers(t *testing.T) {
	// Models, optimizers and inputs never closed are released by their
	// finalizers, and so are the handles of their Go functions.
	checkHandles(t)
	base := settledHandles()
	for i := 0; i < 20; i++ {
		m, err := NewModel(regressionSpec(), (&regression{}).tower)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			ok(t, m.Build())
		}
		if _, err := NewOptimizer("adam"); err != nil {
			t.Fatal(err)
		}
		if _, err := InputFromFeed((&feeder{}).feed); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 200 && liveHandles.Load() > base; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTowerErrorMessages(t *testing.T) {
	// Errors inside the tower keep the library's messages.
	m := must(NewModel(nil, func(tw *Tower, in []*Tensor) error {
		x, err := FromFloat32([]float32{1, 2})
		if err != nil {
			return err
		}
		defer x.Close()
		err = tw.SetCost(x)
		if !strings.Contains(fmt.Sprint(err), "tpt_tower_set_cost") {
			t.Errorf("SetCost of two elements: %v", err)
		}
		return nil
	})).of(t)
	defer m.Close()
	ok(t, m.Build())
}

// ---- TrainConfig and launch.

func float32Value(m *Model, name string) (float32, error) {
	v, err := m.Variable(name)
	if err != nil {
		return 0, err
	}
	defer v.Close()
	vals, err := v.Float32s()
	if err != nil {
		return 0, err
	}
	return vals[0], nil
}

func TestTrainConfigAndLaunch(t *testing.T) {
	checkHandles(t)
	r := &regression{}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "adam", 0.001)
	var seen []string
	initCalls := 0
	// The init hook sets b to 7; the BEFORE_TRAIN callback must see it.
	init := func(hm *Model) error {
		initCalls++
		if b := r.builds.Load(); b != 1 {
			t.Errorf("the init hook ran after %d build calls, want 1", b)
		}
		names, err := hm.VariableNames()
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(names, []string{"W", "b"}) {
			t.Errorf("the init hook's model has variables %q", names)
		}
		seven, err := FromFloat32([]float32{7}, 1)
		if err != nil {
			return err
		}
		defer seven.Close()
		seen = append(seen, "init")
		return hm.SetVariable("b", seven)
	}
	checkB := func() *Callback {
		return must(NewCallback("check_b", EventSetup|EventBeforeTrain, nil, func(ctx *Context, e Event, _ *Record) error {
			b, err := float32Value(m, "b")
			seen = append(seen, fmt.Sprintf("%v b=%v", e, b))
			return err
		})).of(t)
	}
	records := 0
	monitor := must(NewCallback("count_costs", EventRecord, nil, func(ctx *Context, e Event, rec *Record) error {
		if rec != nil && rec.Name == "cost" {
			records++
		}
		return nil
	})).of(t)
	tr := must(NewTrainerFromConfig(&TrainConfig{
		Options:   quietOptions(1, 2, -1), // StepsPerEpoch from the input: 64 / 16 = 4
		Model:     m,
		Input:     regressionInput(t, 16, 64),
		Callbacks: []*Callback{checkB()},
		Monitors:  []*Callback{monitor},
		Init:      init,
	})).of(t)
	t.Cleanup(func() { tr.Close() })
	if initCalls != 0 {
		t.Errorf("the init hook ran %d times before Run", initCalls)
	}
	ok(t, tr.Run())
	if g := tr.GlobalStep(); g != 8 {
		t.Errorf("GlobalStep() = %d, want 8", g)
	}
	if initCalls != 1 {
		t.Errorf("the init hook ran %d times, want 1", initCalls)
	}
	if want := []string{"SETUP b=0.5", "init", "BEFORE_TRAIN b=7"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("seen %q, want %q", seen, want)
	}
	if records != 2 {
		t.Errorf("the monitor got %d cost records, want 2 (its moving average after each epoch)", records)
	}
	// Close releases the Context, the two callbacks and the init hook.
	before := settledHandles()
	ok(t, tr.Close())
	if n := before - liveHandles.Load(); n != 4 {
		t.Errorf("Close released %d handles, want 4", n)
	}

	// LaunchTrain: the same in one call.
	stopper := must(NewCallback("stop", EventTriggerEpoch, nil, func(*Context, Event, *Record) error {
		return Stop("one epoch is enough")
	})).of(t)
	outcome, err := LaunchTrain(context.Background(), &TrainConfig{Options: quietOptions(1, 5, -1), Model: m,
		Input: regressionInput(t, 16, 64), Callbacks: []*Callback{stopper}, Init: init})
	ok(t, err)
	if want := (Outcome{Stopped: true, Reason: "one epoch is enough", GlobalStep: 4, EpochNum: 1}); outcome != want {
		t.Errorf("LaunchTrain() = %+v, want %+v", outcome, want)
	}
	if initCalls != 2 {
		t.Errorf("the init hook ran %d times, want 2", initCalls)
	}
	// Without options (the defaults) and without a hook: made, not run (the
	// default console would write into the test's output).
	tr = must(NewTrainerFromConfig(&TrainConfig{Model: m, Input: regressionInput(t, 32, 64)})).of(t)
	if e, g := tr.EpochNum(), tr.GlobalStep(); e != 0 || g != 0 {
		t.Errorf("EpochNum(), GlobalStep() = %d, %d", e, g)
	}
	ok(t, tr.Close())

	// The hook's error comes back unchanged, after AFTER_TRAIN.
	afterTrain := 0
	after := func() *Callback {
		return must(NewCallback("after", EventAfterTrain, nil, func(*Context, Event, *Record) error {
			afterTrain++
			return nil
		})).of(t)
	}
	noCheckpoint := errors.New("no checkpoint to restore")
	_, err = LaunchTrain(context.Background(), &TrainConfig{Options: quietOptions(1, 3, -1), Model: m,
		Input: regressionInput(t, 16, 64), Callbacks: []*Callback{after()}, Init: func(*Model) error { return noCheckpoint }})
	if err != noCheckpoint {
		t.Errorf("LaunchTrain() = %#v, want %#v", err, noCheckpoint)
	}
	if afterTrain != 1 {
		t.Errorf("AFTER_TRAIN ran %d times, want 1", afterTrain)
	}
	// A stop from the hook ends training gracefully.
	tr = must(NewTrainerFromConfig(&TrainConfig{Options: quietOptions(1, 3, -1), Model: m,
		Input: regressionInput(t, 16, 64), Callbacks: []*Callback{after()},
		Init: func(*Model) error { return Stop("nothing to train") }})).of(t)
	defer tr.Close()
	ok(t, tr.Run())
	if reason, stopped := tr.StopReason(); !stopped || reason != "nothing to train" || tr.GlobalStep() != 0 {
		t.Errorf("StopReason() = %q, %v after %d steps", reason, stopped, tr.GlobalStep())
	}
}

func TestBadTrainConfigReleasesEverything(t *testing.T) {
	checkHandles(t)
	base := settledHandles()
	initCalled := false
	parts := func() (*Input, *Callback, *Callback) {
		in := must(InputFromFeed(func(int) ([]*Tensor, error) { return nil, io.EOF })).of(t)
		cb := must(NewCallback("a", EventAll, nil, func(*Context, Event, *Record) error { return nil })).of(t)
		mon := must(NewCallback("m", EventRecord, nil, func(*Context, Event, *Record) error { return nil })).of(t)
		return in, cb, mon
	}
	hook := func(*Model) error { initCalled = true; return nil }
	// No model: the library says so, and releases the input and the callbacks.
	in, cb, mon := parts()
	_, err := LaunchTrain(context.Background(), &TrainConfig{Input: in, Callbacks: []*Callback{cb}, Monitors: []*Callback{mon}, Init: hook})
	wantError(t, err, CodeInvalidArgument, "argument 'config->model' is NULL")
	if n := liveHandles.Load() - base; n != 0 {
		t.Errorf("%d handles live after a config without a model, want 0", n)
	}
	// They are spent.
	other := must(NewTrainer(nil)).of(t)
	wantError(t, other.AddCallback(cb), CodeInvalidArgument, "the Callback 'a' was closed or already given away")
	ok(t, other.Close())
	_, err = NewTrainerFromConfig(&TrainConfig{Input: in})
	wantError(t, err, CodeInvalidArgument, "NewTrainerFromConfig: the Input was closed or already given away")

	m := newRegressionModel(t, &regression{})
	// Refused by the library with a model: the same.
	in, cb, mon = parts()
	o := quietOptions(-1, 1, -1)
	_, err = NewTrainerFromConfig(&TrainConfig{Options: o, Model: m, Input: in, Callbacks: []*Callback{cb},
		Monitors: []*Callback{mon}, Init: hook})
	wantError(t, err, CodeInvalidArgument, "starting_epoch")
	if n := liveHandles.Load() - base; n != 1 { // the model's tower function
		t.Errorf("%d handles live after a refused config, want 1", n)
	}
	// Refused by the binding (a spent callback, a nil one): what could be
	// taken is released.
	in, cb, mon = parts()
	_, err = NewTrainerFromConfig(&TrainConfig{Model: m, Input: in, Callbacks: []*Callback{cb, cb},
		Monitors: []*Callback{mon, nil}, Init: hook})
	wantError(t, err, CodeInvalidArgument, "NewTrainerFromConfig: Callbacks[1]: the Callback 'a' was closed or already given away")
	if n := liveHandles.Load() - base; n != 1 {
		t.Errorf("%d handles live after a spent callback, want 1", n)
	}
	closed := must(NewModel(regressionSpec(), (&regression{}).tower)).of(t)
	closed.Close()
	in, cb, mon = parts()
	_, err = NewTrainerFromConfig(&TrainConfig{Model: closed, Input: in, Callbacks: []*Callback{cb}})
	wantError(t, err, CodeInvalidArgument, "NewTrainerFromConfig: use of closed Model")
	if n := liveHandles.Load() - base; n != 2 { // and the monitor not handed over
		t.Errorf("%d handles live after a closed model, want 2", n)
	}
	ok(t, mon.Close())
	_, err = NewTrainerFromConfig(nil)
	wantError(t, err, CodeInvalidArgument, "cfg is nil")
	if initCalled {
		t.Error("the init hook ran")
	}
}

func TestPanicInInitHook(t *testing.T) {
	checkHandles(t)
	m := newRegressionModel(t, &regression{})
	setOptimizer(t, m, "sgd", 0.1)
	value := &panicValue{"init"}
	var r recorder
	cfg := func() *TrainConfig {
		return &TrainConfig{Options: quietOptions(1, 3, -1), Model: m, Input: regressionInput(t, 16, 64),
			Callbacks: []*Callback{recordingCallback(t, &r, "A", EventAfterTrain, nil)},
			Init:      func(*Model) error { panic(value) }}
	}
	tr := must(NewTrainerFromConfig(cfg())).of(t)
	defer tr.Close()
	_, p := runAndRecover(tr)
	if p != value {
		t.Fatalf("Run panicked with %#v, want %#v", p, value)
	}
	if n := r.count("A", EventAfterTrain); n != 1 {
		t.Errorf("AFTER_TRAIN %d times, want 1", n)
	}
	if g := tr.GlobalStep(); g != 0 {
		t.Errorf("GlobalStep() = %d, want 0", g)
	}
	p = func() (p any) {
		defer func() { p = recover() }()
		_, err := LaunchTrain(context.Background(), cfg())
		return err
	}()
	if p != value {
		t.Fatalf("LaunchTrain panicked with %#v, want %#v", p, value)
	}
	if n := r.count("A", EventAfterTrain); n != 2 {
		t.Errorf("AFTER_TRAIN %d times, want 2", n)
	}
}

// ---- TorchScript models.

const python = "/usr/bin/python3"

// torchScriptSource is the module of tests/py/test_torchscript.py, smaller:
// y ~ fc(x) with a buffer, forward returning (cost, {"prediction": p}).
const torchScriptSource = `
import sys
from typing import Dict, Tuple

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 1)
        self.register_buffer("scale", torch.ones(1))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        p = self.fc(x) * self.scale
        return torch.nn.functional.mse_loss(p, y), {"prediction": p}


torch.manual_seed(0)
torch.jit.save(torch.jit.script(Net()), sys.argv[1])
`

// scriptedModule scripts and saves the module into dir with Debian's
// python3-torch, and skips the test when /usr/bin/python3 cannot import torch.
func scriptedModule(t *testing.T, dir string) string {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import torch (install python3-torch): %v: %s", python, err, out)
	}
	script := filepath.Join(dir, "make_module.py")
	ok(t, os.WriteFile(script, []byte(torchScriptSource), 0o644))
	path := filepath.Join(dir, "module.pt")
	if out, err := exec.Command(python, script, path).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", python, script, err, out)
	}
	return path
}

func TestTorchScriptTrainSaveLoad(t *testing.T) {
	checkHandles(t)
	dir := t.TempDir()
	path := scriptedModule(t, dir)
	m := must(ModelFromTorchScript(path, regressionSpec())).of(t)
	defer m.Close()
	names := must(m.VariableNames()).of(t) // no build call needed
	sort.Strings(names)
	if want := []string{"fc/bias", "fc/weight", "scale"}; !reflect.DeepEqual(names, want) {
		t.Errorf("VariableNames() = %q, want %q", names, want)
	}
	weight := func(m *Model, name string) []float32 {
		t.Helper()
		v := must(m.Variable(name)).of(t)
		defer closeT(t, v)
		return must(v.Float32s()).of(t)
	}
	before := weight(m, "fc/weight")
	setOptimizer(t, m, "sgd", 0.1)
	tr := newQuietTrainer(t, 1, 5, 4)
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	var costs []float64
	ok(t, tr.AddCallback(costLog(t, &costs)))
	ok(t, tr.Run())
	if len(costs) != 20 || !(costs[19] < costs[0]) {
		t.Errorf("costs %v: want 20, decreasing", costs)
	}
	trained := weight(m, "fc/weight")
	if reflect.DeepEqual(trained, before) {
		t.Error("training did not change fc/weight")
	}
	if s := weight(m, "scale"); !reflect.DeepEqual(s, []float32{1}) {
		t.Errorf("the buffer changed: %v", s)
	}

	saved := filepath.Join(dir, "trained.pt")
	ok(t, m.SaveTorchScript(saved))
	again := must(ModelFromTorchScript(saved, regressionSpec())).of(t)
	defer again.Close()
	if w := weight(again, "fc/weight"); !reflect.DeepEqual(w, trained) {
		t.Errorf("the saved fc/weight is %v, want %v", w, trained)
	}
	if b, want := weight(again, "fc/bias"), weight(m, "fc/bias"); !reflect.DeepEqual(b, want) {
		t.Errorf("the saved fc/bias is %v, want %v", b, want)
	}
	// Both infer the same, with the outputs of the Dict.
	xs, ys := regressionData(4)
	x := must(FromFloat32(xs, 4, 3)).of(t)
	defer closeT(t, x)
	y := must(FromFloat32(ys, 4, 1)).of(t)
	defer closeT(t, y)
	a := must(m.Infer([]*Tensor{x, y}, []string{"prediction", "cost"})).of(t)
	defer closeAll(a)
	b := must(again.Infer([]*Tensor{x, y}, []string{"prediction", "cost"})).of(t)
	defer closeAll(b)
	if pa, pb := must(a[0].Float32s()).of(t), must(b[0].Float32s()).of(t); len(pa) != 4 || !reflect.DeepEqual(pa, pb) {
		t.Errorf("predictions %v and %v", pa, pb)
	}
	if ca, cb := must(a[1].Item()).of(t), must(b[1].Item()).of(t); ca != cb {
		t.Errorf("costs %v and %v", ca, cb)
	}
	// The signature is checked as for any model.
	_, err := again.Infer([]*Tensor{y, x}, []string{"prediction"})
	wantError(t, err, CodeInvalidArgument, "input 'x'")
}

func must2[A, B any](a A, b B, err error) func(testing.TB) (A, B) {
	return func(t testing.TB) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

func TestTorchScriptErrors(t *testing.T) {
	checkHandles(t)
	_, err := ModelFromTorchScript("/nonexistent/model.pt", regressionSpec())
	wantError(t, err, CodeIO, "cannot load the TorchScript module /nonexistent/model.pt")
	garbage := filepath.Join(t.TempDir(), "garbage.pt")
	ok(t, os.WriteFile(garbage, []byte("garbage"), 0o644))
	_, err = ModelFromTorchScript(garbage, regressionSpec())
	wantError(t, err, CodeIO, "cannot load the TorchScript module")
	m := must(NewModel(regressionSpec(), (&regression{}).tower)).of(t)
	err = m.SaveTorchScript(filepath.Join(t.TempDir(), "x.pt"))
	wantError(t, err, CodeUnsupported, "not made from TorchScript")
	m.Close()
	wantError(t, m.SaveTorchScript("x.pt"), CodeInvalidArgument, "use of closed Model")
}

// tsSource is the linear regression as TorchScript source: a helper method,
// a trainable weight and bias, a model-only buffer.
const tsSource = `
def forward(self, x, y):
    p = self.predict(x) * self.scale
    return torch.mean((p - y) * (p - y)), {"prediction": p}

def predict(self, x):
    return torch.matmul(x, self.w.t()) + self.b
`

func tsParams() []TorchScriptParam {
	return []TorchScriptParam{
		{Name: "w", Shape: []int64{1, 3}, Options: &VariableOptions{Init: InitZeros}},
		{Name: "b", Shape: []int64{1}, Options: &VariableOptions{Init: InitConstant, A: 0.5}},
		{Name: "scale", Shape: []int64{1}, Options: &VariableOptions{Init: InitConstant, A: 1, ModelOnly: true}},
	}
}

func TestTorchScriptSourceTrainSaveLoad(t *testing.T) {
	checkHandles(t)
	m := must(ModelFromTorchScriptSource(tsSource, tsParams(), regressionSpec())).of(t)
	defer m.Close()
	names := must(m.VariableNames()).of(t) // no build call needed
	if want := []string{"w", "b", "scale"}; !reflect.DeepEqual(names, want) {
		t.Errorf("VariableNames() = %q, want %q (parameters, then buffers)", names, want)
	}
	values := func(m *Model, name string) []float32 {
		t.Helper()
		v := must(m.Variable(name)).of(t)
		defer closeT(t, v)
		return must(v.Float32s()).of(t)
	}
	if w, b := values(m, "w"), values(m, "b"); !reflect.DeepEqual(w, []float32{0, 0, 0}) || !reflect.DeepEqual(b, []float32{0.5}) {
		t.Errorf("initial w %v (want zeros), b %v (want 0.5)", w, b)
	}
	setOptimizer(t, m, "sgd", 0.1)
	tr := newQuietTrainer(t, 1, 25, 4)
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	var costs []float64
	ok(t, tr.AddCallback(costLog(t, &costs)))
	ok(t, tr.Run())
	if len(costs) != 100 || !(costs[99] < 0.1*costs[0]) {
		t.Errorf("costs %v: want 100, falling tenfold", costs)
	}
	w := values(m, "w") // y = x . (1, -2, 3) + 1
	for i, want := range []float32{1, -2, 3} {
		if d := w[i] - want; d > 0.1 || d < -0.1 {
			t.Errorf("w = %v, want about [1 -2 3]", w)
			break
		}
	}
	if s := values(m, "scale"); !reflect.DeepEqual(s, []float32{1}) {
		t.Errorf("the buffer changed: %v", s)
	}

	saved := filepath.Join(t.TempDir(), "trained.pt")
	ok(t, m.SaveTorchScript(saved))
	again := must(ModelFromTorchScript(saved, regressionSpec())).of(t)
	defer again.Close()
	for _, name := range []string{"w", "b", "scale"} {
		if got, want := values(again, name), values(m, name); !reflect.DeepEqual(got, want) {
			t.Errorf("the saved %s is %v, want %v", name, got, want)
		}
	}
}

func TestTorchScriptSourceErrors(t *testing.T) {
	checkHandles(t)
	bad := func(source string, params []TorchScriptParam, inputs []InputSpec, substr string) {
		t.Helper()
		m, err := ModelFromTorchScriptSource(source, params, inputs)
		if m != nil {
			t.Errorf("got a model with the error")
		}
		wantError(t, err, CodeInvalidArgument, substr)
	}
	bad("def forward(self, x, y):\n    return x +\n", tsParams(), regressionSpec(),
		"ModelFromTorchScriptSource: cannot compile the TorchScript source: ")
	bad("def forward(self, x, y):\n    return self.nope\n", nil, regressionSpec(), "nope")
	bad("def helper(self, x):\n    return x\n", nil, regressionSpec(), "the TorchScript source has no forward method")
	bad(tsSource, tsParams(), regressionSpec()[:1], "takes 2 inputs, the input signature has 1")
	one := func(name string, shape []int64, o *VariableOptions) []TorchScriptParam {
		return []TorchScriptParam{{Name: name, Shape: shape, Options: o}}
	}
	bad(tsSource, one("a b", []int64{1}, nil), regressionSpec(), "params[0].name 'a b' is not a TorchScript identifier")
	bad(tsSource, one("def", []int64{1}, nil), regressionSpec(), "params[0].name 'def' is a reserved word")
	bad(tsSource, one("w", []int64{0}, nil), regressionSpec(), "params[0].shape [0] ('w'): dimensions are >= 1")
	bad(tsSource, one("w", []int64{1}, &VariableOptions{DType: DTypeInt64}), regressionSpec(),
		"params[0] ('w') is trainable and needs a floating dtype, got Long")
	twice := []TorchScriptParam{{Name: "w", Shape: []int64{1}}, {Name: "w", Shape: []int64{1}}}
	bad(tsSource, twice, regressionSpec(), "params[1].name 'w' is used twice")
	// No params at all, and a scalar (0-d) attribute.
	m := must(ModelFromTorchScriptSource("def forward(self, x, y):\n    return torch.sum(x) * self.s\n",
		one("s", nil, &VariableOptions{Init: InitConstant, A: 2}), regressionSpec())).of(t)
	v := must(m.Variable("s")).of(t)
	if shape := must(v.Shape()).of(t); len(shape) != 0 {
		t.Errorf("s has shape %v, want []", shape)
	}
	closeT(t, v)
	m.Close()
}

// A tower function that calls back into its own model: Build and Infer from
// inside are refused (CodeState), Close from inside is deferred to the end
// of the call (the model goes when Build returns), and nothing hangs.
func TestTowerCallsBackIntoItsModel(t *testing.T) {
	checkHandles(t)
	var m *Model
	var buildErr, inferErr error
	closeInside := false
	m = must(NewModel([]InputSpec{{Name: "x", Shape: []int64{-1, 3}}}, func(tw *Tower, in []*Tensor) error {
		y, err := tw.FC("fc", in[0], 2, nil)
		if err != nil {
			return err
		}
		buildErr = m.Build()
		_, inferErr = m.Infer(in, []string{"y"})
		if closeInside {
			if err := m.Close(); err != nil {
				return err
			}
		}
		return tw.SetOutput("y", y)
	})).of(t)
	done := make(chan error, 1)
	go func() { done <- m.Build() }()
	select {
	case err := <-done:
		ok(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Build from inside the tower function hung")
	}
	wantError(t, buildErr, CodeState, "inside this model's own tower function")
	wantError(t, inferErr, CodeState, "inside this model's own tower function")

	closeInside = true
	x := must(FromFloat32([]float32{1, 2, 3}, 1, 3)).of(t)
	defer closeT(t, x)
	go func() {
		_, err := m.Infer([]*Tensor{x}, []string{"y"})
		done <- err
	}()
	select {
	case err := <-done:
		ok(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Close from inside Infer's tower function hung")
	}
	wantError(t, m.Build(), CodeInvalidArgument, "use of closed")
}
