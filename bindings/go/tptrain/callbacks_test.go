package tptrain

// The library's callback catalogue from Go (callback_catalogue.go, inference.go,
// PutImage and TensorBoard), each in a small real training: inferencers
// (Go functions, ScalarStats, ClassificationError) in an InferenceRunner
// and a DataParallelInferenceRunner, the hyper-parameter setters, early
// stopping, TerminateOnNaN, throughput, the step watchdog, host memory,
// images and the TensorBoard writer.

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Functions of inferencers and callbacks run under C frames: they report
// with t.Error, never t.Fatal.

// classifierData returns rows of 2-d points in [-1, 1)^2 labelled 1 when
// x0 + 2 x1 > 0, with every 7th label flipped, so that no linear classifier
// is right on all rows.
func classifierData(rows int) (x []float32, labels []int64) {
	r := uint32(777)
	x = make([]float32, rows*2)
	labels = make([]int64, rows)
	for i := 0; i < rows; i++ {
		for j := 0; j < 2; j++ {
			r = r*1664525 + 1013904223
			x[i*2+j] = float32(r>>8)/8388608.0 - 1
		}
		if x[i*2]+2*x[i*2+1] > 0 {
			labels[i] = 1
		}
		if i%7 == 3 {
			labels[i] = 1 - labels[i]
		}
	}
	return x, labels
}

func classifierTensors(t *testing.T, rows int) (x, labels *Tensor) {
	t.Helper()
	xs, ls := classifierData(rows)
	x = must(FromFloat32(xs, int64(rows), 2)).of(t)
	t.Cleanup(func() { x.Close() })
	labels = must(FromInt64(ls, int64(rows))).of(t)
	t.Cleanup(func() { labels.Close() })
	return x, labels
}

// newClassifier is a linear classifier of 2-d points into 2 classes, with
// the output "wrong" (1 for a row whose label is not the top logit).
func newClassifier(t *testing.T) *Model {
	t.Helper()
	return newClassifierWith(t, nil)
}

// newClassifierWith is newClassifier whose tower function first calls note
// (if not nil) with its tower.
func newClassifierWith(t *testing.T, note func(tw *Tower) error) *Model {
	t.Helper()
	m := must(NewModel([]InputSpec{
		{Name: "x", DType: DTypeFloat32, Shape: []int64{-1, 2}},
		{Name: "label", DType: DTypeInt64, Shape: []int64{-1}},
	}, func(tw *Tower, in []*Tensor) error {
		if note != nil {
			if err := note(tw); err != nil {
				return err
			}
		}
		// Closed at once, so that TestInferencers can count the handles
		// (the call's tensors would otherwise wait for their finalizers).
		logits, err := tw.FC("fc", in[0], 2, nil)
		if err != nil {
			return err
		}
		defer logits.Close()
		cost, err := SoftmaxCrossEntropy(logits, in[1])
		if err != nil {
			return err
		}
		defer cost.Close()
		wrong, err := Wrong(logits, in[1], 1)
		if err != nil {
			return err
		}
		defer wrong.Close()
		if err := tw.SetCost(cost); err != nil {
			return err
		}
		return tw.SetOutput("wrong", wrong)
	})).of(t)
	t.Cleanup(func() { m.Close() })
	return m
}

// classifierRun trains the classifier on 50 rows (5 steps of 10 per epoch)
// for epochs epochs, with the given callbacks.
func classifierRun(t *testing.T, m *Model, epochs int64, cbs ...*Callback) (*Trainer, error) {
	t.Helper()
	setOptimizer(t, m, "sgd", 0.5)
	x, labels := classifierTensors(t, 50)
	tr := newQuietTrainer(t, 1, epochs, -1)
	ok(t, tr.SetModel(m, must(InputFromTensors([]*Tensor{x, labels}, 10, Shuffled, 1)).of(t)))
	for _, cb := range cbs {
		ok(t, tr.AddCallback(cb))
	}
	return tr, tr.Run()
}

// validationFlow is one pass of the 50 rows in batches of 16, 16, 16 and 2.
func validationFlow(t *testing.T) *DataFlow {
	t.Helper()
	x, labels := classifierTensors(t, 50)
	src := closeDF(t, must(DataFlowFromTensors([]*Tensor{x, labels}, Sequential)).of(t))
	return closeDF(t, must(src.Batch(16, KeepRemainder)).of(t))
}

// wrongCounter is an inferencer of Go functions: it counts the wrong rows
// of a pass and puts "counted_error" and "counted_rows".
type wrongCounter struct {
	t            *testing.T
	befores      int
	batchRows    []int64
	wrong, rows  float64
	liveAtAfter  []int64
	onBatch      func(batch int) error // may fail or panic a batch
	after        func(ctx *Context) error
	batchInEpoch int
}

func (w *wrongCounter) inferencer() *Inferencer {
	return must(NewInferencer(InferencerFuncs{
		Name:    "counter",
		Outputs: []string{"wrong", "cost"},
		Before: func() error {
			w.befores++
			w.wrong, w.rows, w.batchInEpoch = 0, 0, 0
			return nil
		},
		OnOutputs: func(outs []*Tensor, rows int64) error {
			w.batchInEpoch++
			if w.onBatch != nil {
				if err := w.onBatch(w.batchInEpoch); err != nil {
					return err
				}
			}
			if len(outs) != 2 {
				w.t.Errorf("%d outputs, want wrong and cost", len(outs))
				return nil
			}
			wrong, err := outs[0].Float32s()
			if err != nil {
				return err
			}
			if int64(len(wrong)) != rows {
				w.t.Errorf("%d wrong values for %d rows", len(wrong), rows)
			}
			if n, err := outs[1].Numel(); err != nil || n != 1 {
				w.t.Errorf("the cost has %d elements (%v)", n, err)
			}
			col, err := outs[0].Reshape(rows, 1)
			if err != nil {
				return err
			}
			col.Close()
			for _, v := range wrong {
				w.wrong += float64(v)
			}
			w.rows += float64(rows)
			w.batchRows = append(w.batchRows, rows)
			return nil
		},
		After: func(ctx *Context) error {
			w.liveAtAfter = append(w.liveAtAfter, LiveTensorHandles())
			if w.after != nil {
				if err := w.after(ctx); err != nil {
					return err
				}
			}
			if err := ctx.PutScalar("counted_rows", w.rows); err != nil {
				return err
			}
			return ctx.PutScalar("counted_error", w.wrong/w.rows)
		},
	})).of(w.t)
}

func TestInferencers(t *testing.T) {
	checkHandles(t)
	ok(t, ManualSeed(5))
	m := newClassifier(t)
	counter := &wrongCounter{t: t}
	var lent *Tensor
	counter.onBatch = func(batch int) error { return nil }
	peek := must(NewInferencer(InferencerFuncs{Outputs: []string{"wrong"}, OnOutputs: func(outs []*Tensor, _ int64) error {
		lent = outs[0]
		return nil
	}})).of(t)
	classErr := must(ClassificationError(nil)).of(t)
	named := must(ClassificationError(&ClassificationErrorOptions{WrongOutput: "wrong", SummaryName: "err_rate"})).of(t)
	stats := must(ScalarStats("validation", "cost")).of(t)
	bare := must(ScalarStats("", "wrong")).of(t)
	prefixed := must(ScalarStats("test", "wrong", "cost")).of(t)
	runner := must(NewInferenceRunnerWith(m, validationFlow(t),
		counter.inferencer(), peek, classErr, named, stats, bare, prefixed)).of(t)
	if err := classErr.Close(); err != nil { // taken: Close does nothing
		t.Fatal(err)
	}
	tr, err := classifierRun(t, m, 3, runner)
	ok(t, err)

	if counter.befores != 3 {
		t.Errorf("Before ran %d times, want once per epoch", counter.befores)
	}
	if want := []int64{16, 16, 16, 2, 16, 16, 16, 2, 16, 16, 16, 2}; !reflect.DeepEqual(counter.batchRows, want) {
		t.Errorf("rows per batch %v, want %v", counter.batchRows, want)
	}
	if rows := history(t, tr, "counted_rows"); !reflect.DeepEqual(rows, []float64{50, 50, 50}) {
		t.Errorf("counted_rows %v, want 50 per epoch", rows)
	}
	// The outputs lent to OnOutputs and the tensors it made are released
	// with each call: no handle is left behind by a pass.
	if l := counter.liveAtAfter; len(l) != 3 || l[1] != l[2] {
		t.Errorf("live tensor handles at the end of each pass: %v", l)
	}
	if _, err := lent.Numel(); err == nil {
		t.Error("a tensor lent to OnOutputs is still usable after the call")
	}

	// ClassificationError is the hand count of wrong rows over all rows.
	x, labels := classifierTensors(t, 50)
	outs := must(m.Infer([]*Tensor{x, labels}, []string{"wrong"})).of(t)
	defer outs[0].Close()
	wrong := 0
	for _, v := range must(outs[0].Float32s()).of(t) {
		wrong += int(v)
	}
	if wrong == 0 {
		t.Fatal("no wrong row: the flipped labels should make some")
	}
	errs := history(t, tr, "validation_error")
	if len(errs) != 3 || errs[2] != float64(wrong)/50 {
		t.Errorf("validation_error %v, want %d/50 = %v at the end", errs, wrong, float64(wrong)/50)
	}
	if got := history(t, tr, "err_rate"); !reflect.DeepEqual(got, errs) {
		t.Errorf("err_rate %v, validation_error %v", got, errs)
	}
	if got := history(t, tr, "counted_error"); !reflect.DeepEqual(got, errs) {
		t.Errorf("the Go inferencer's count %v, ClassificationError %v", got, errs)
	}
	// ScalarStats: the mean of "wrong" over rows is the error rate too,
	// named "wrong" with the prefix "" and "test_wrong" with "test".
	for _, name := range []string{"wrong", "test_wrong"} {
		if got := history(t, tr, name); len(got) != 3 || math.Abs(got[2]-errs[2]) > 1e-12 {
			t.Errorf("%s %v, want %v at the end", name, got, errs[2])
		}
	}
	costs := history(t, tr, "validation_cost")
	if len(costs) != 3 || !(costs[2] > 0) {
		t.Errorf("validation_cost %v", costs)
	}
	if got := history(t, tr, "test_cost"); !reflect.DeepEqual(got, costs) {
		t.Errorf("test_cost %v, validation_cost %v", got, costs)
	}
}

func TestInferencerErrorsAndPanics(t *testing.T) {
	checkHandles(t)
	errBatch := errors.New("batch 3 is bad")
	m := newClassifier(t)

	// An error of OnOutputs comes back from Run as the same value.
	counter := &wrongCounter{t: t, onBatch: func(batch int) error {
		if batch == 3 {
			return errBatch
		}
		return nil
	}}
	runner := must(NewInferenceRunnerWith(m, validationFlow(t), counter.inferencer())).of(t)
	if _, err := classifierRun(t, m, 2, runner); err != errBatch {
		t.Errorf("Run() = %v, want OnOutputs' error", err)
	}

	// A panic in After makes Run panic again with the same value.
	value := &panicValue{"After"}
	counter = &wrongCounter{t: t, after: func(*Context) error { panic(value) }}
	runner = must(NewInferenceRunnerWith(m, validationFlow(t), counter.inferencer())).of(t)
	func() {
		defer func() {
			if p := recover(); p != value {
				t.Errorf("recovered %v, want After's panic", p)
			}
		}()
		classifierRun(t, m, 2, runner)
		t.Error("Run did not panic")
	}()

	// A panic in OnOutputs too.
	counter = &wrongCounter{t: t, onBatch: func(int) error { panic("OnOutputs") }}
	runner = must(NewInferenceRunnerWith(m, validationFlow(t), counter.inferencer())).of(t)
	func() {
		defer func() {
			if p := recover(); p != "OnOutputs" {
				t.Errorf("recovered %v, want OnOutputs' panic", p)
			}
		}()
		classifierRun(t, m, 2, runner)
		t.Error("Run did not panic")
	}()

	// Stop from After ends training gracefully.
	counter = &wrongCounter{t: t, after: func(ctx *Context) error {
		if ctx.EpochNum() == 2 {
			return Stop("good enough")
		}
		return nil
	}}
	runner = must(NewInferenceRunnerWith(m, validationFlow(t), counter.inferencer())).of(t)
	tr, err := classifierRun(t, m, 5, runner)
	ok(t, err)
	if reason, stopped := tr.StopReason(); !stopped || reason != "good enough" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
	if e := tr.EpochNum(); e != 2 {
		t.Errorf("stopped in epoch %d, want 2", e)
	}
}

func TestInferenceRunnerArguments(t *testing.T) {
	checkHandles(t)
	m := newClassifier(t)
	df := validationFlow(t)
	noop := func([]*Tensor, int64) error { return nil }

	_, err := NewInferencer(InferencerFuncs{Name: "x"})
	wantError(t, err, CodeInvalidArgument, "OnOutputs is nil")
	_, err = NewInferencer(InferencerFuncs{Outputs: []string{""}, OnOutputs: noop})
	wantError(t, err, CodeInvalidArgument, "")
	_, err = ScalarStats("validation")
	wantError(t, err, CodeInvalidArgument, "ScalarStats: no outputs")
	_, err = NewInferenceRunnerWith(m, df)
	wantError(t, err, CodeInvalidArgument, "needs an inferencer")
	_, err = NewInferenceRunnerWith(m, df, nil)
	wantError(t, err, CodeInvalidArgument, "inferencers[0] is nil")

	// Taken also on failure: a closed one, one given twice, a nil model.
	a := must(NewInferencer(InferencerFuncs{OnOutputs: noop})).of(t)
	b := must(ScalarStats("validation", "cost")).of(t)
	ok(t, b.Close())
	ok(t, b.Close()) // idempotent
	_, err = NewInferenceRunnerWith(m, df, a, b)
	wantError(t, err, CodeInvalidArgument, "inferencers[1]: the Inferencer 'ScalarStats' was closed or already given away")
	_, err = NewInferenceRunnerWith(m, df, a)
	wantError(t, err, CodeInvalidArgument, "inferencers[0]: the Inferencer 'inferencer' was closed or already given away")
	c := must(NewInferencer(InferencerFuncs{Name: "c", OnOutputs: noop})).of(t)
	_, err = NewInferenceRunnerWith(m, df, c, c)
	wantError(t, err, CodeInvalidArgument, "inferencers[1]: the Inferencer 'c' was closed or already given away")
	d := must(NewInferencer(InferencerFuncs{OnOutputs: noop})).of(t)
	_, err = NewInferenceRunnerWith(nil, df, d)
	wantError(t, err, CodeInvalidArgument, "the Model is nil")
	_, err = NewInferenceRunnerWith(m, df, d)
	wantError(t, err, CodeInvalidArgument, "already given away")
	// An inferencer never given away is released by Close (its handle too:
	// checkHandles).
	e := must(NewInferencer(InferencerFuncs{OnOutputs: noop})).of(t)
	ok(t, e.Close())
	// So is a runner never given to a trainer, with its inferencers.
	g := must(NewInferencer(InferencerFuncs{OnOutputs: noop})).of(t)
	ok(t, must(NewInferenceRunnerWith(m, validationFlow(t), g)).of(t).Close())

	// An output the tower does not have fails training at the first pass.
	f := must(ScalarStats("validation", "nope")).of(t)
	runner := must(NewInferenceRunnerWith(m, df, f)).of(t)
	_, err = classifierRun(t, m, 1, runner)
	wantError(t, err, CodeNotFound, "nope")
}

// namedInferencers are a ScalarStats of "cost" and "wrong", a
// ClassificationError and a Go inferencer that notes the rows of each batch,
// all named after prefix.
func namedInferencers(t *testing.T, prefix string, rows *[]int64) []*Inferencer {
	t.Helper()
	return []*Inferencer{
		must(ScalarStats(prefix, "cost", "wrong")).of(t),
		must(ClassificationError(&ClassificationErrorOptions{SummaryName: prefix + "_error"})).of(t),
		must(NewInferencer(InferencerFuncs{Name: prefix + " rows", Outputs: []string{"wrong"},
			OnOutputs: func(_ []*Tensor, n int64) error {
				*rows = append(*rows, n)
				return nil
			}})).of(t),
	}
}

func TestDataParallelInferenceRunner(t *testing.T) {
	checkHandles(t)
	ok(t, ManualSeed(5))
	// The inference calls of the tower function, per tower name (the build
	// and training calls left out); towers run at once.
	var mu sync.Mutex
	calls := map[string]int{}
	m := newClassifierWith(t, func(tw *Tower) error {
		if tw.IsTraining() || tw.IsBuilding() {
			return nil
		}
		name, index := tw.Name(), tw.Index()
		if index != 0 {
			t.Errorf("%s: index %d, want 0 for an inference tower", name, index)
		}
		mu.Lock()
		calls[name]++
		mu.Unlock()
		return nil
	})
	// Batches of 16, 16, 16, 2: a group of 3 towers, then a group of 1.
	var rows1, rows3 []int64
	single := must(NewInferenceRunnerWith(m, validationFlow(t), namedInferencers(t, "single", &rows1)...)).of(t)
	parallel := must(NewDataParallelInferenceRunner(m, validationFlow(t), 3,
		namedInferencers(t, "parallel", &rows3)...)).of(t)
	// Both runners in one training: each pass sees the same weights.
	tr, err := classifierRun(t, m, 2, single, parallel)
	ok(t, err)

	costs := history(t, tr, "single_cost")
	if len(costs) != 2 || costs[0] == costs[1] {
		t.Errorf("single_cost %v: want 2 passes on different weights", costs)
	}
	for _, stat := range []string{"cost", "wrong", "error"} {
		s, p := history(t, tr, "single_"+stat), history(t, tr, "parallel_"+stat)
		if len(s) != 2 || !reflect.DeepEqual(s, p) {
			t.Errorf("%s: the single runner's %v, the data-parallel one's %v: want the same numbers", stat, s, p)
		}
	}
	// The inferencers get the batches in the dataflow's order.
	if want := []int64{16, 16, 16, 2, 16, 16, 16, 2}; !reflect.DeepEqual(rows1, want) || !reflect.DeepEqual(rows3, want) {
		t.Errorf("rows per batch: single %v, data-parallel %v, want %v", rows1, rows3, want)
	}
	// Per pass: 4 batches on the single runner's tower; 2 groups, the second
	// of one batch, on the three towers.
	want := map[string]int{"InferenceTower": 8, "InferenceTower0": 4, "InferenceTower1": 2, "InferenceTower2": 2}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("inference calls per tower %v, want %v", calls, want)
	}
}

func TestDataParallelInferenceRunnerErrors(t *testing.T) {
	checkHandles(t)
	m := newClassifier(t)
	df := validationFlow(t)
	noop := func([]*Tensor, int64) error { return nil }

	// A count out of [1, 256] is an error; the inferencers are taken all
	// the same.
	big := math.MaxInt32
	big++ // out of int32 where int has 64 bits
	for _, towers := range []int{0, -1, 257, big} {
		a := must(NewInferencer(InferencerFuncs{Name: "a", OnOutputs: noop})).of(t)
		_, err := NewDataParallelInferenceRunner(m, df, towers, a)
		wantError(t, err, CodeInvalidArgument, "n_towers is "+strconv.Itoa(towers))
		_, err = NewInferenceRunnerWith(m, df, a)
		wantError(t, err, CodeInvalidArgument, "inferencers[0]: the Inferencer 'a' was closed or already given away")
	}
	_, err := NewDataParallelInferenceRunner(m, df, 2)
	wantError(t, err, CodeInvalidArgument, "needs an inferencer")
	_, err = NewDataParallelInferenceRunner(nil, df, 2, must(ScalarStats("validation", "cost")).of(t))
	wantError(t, err, CodeInvalidArgument, "the Model is nil")
	// One tower is the single runner; a runner never given to a trainer is
	// released by Close.
	ok(t, must(NewDataParallelInferenceRunner(m, validationFlow(t), 1, must(ScalarStats("validation", "cost")).of(t))).of(t).Close())

	// An error of the tower function in tower 2 (a thread of the library's)
	// comes back from Run as the same value.
	errTower := errors.New("tower 2 cannot read its batch")
	m = newClassifierWith(t, func(tw *Tower) error {
		if tw.Name() == "InferenceTower2" {
			return errTower
		}
		return nil
	})
	runner := must(NewDataParallelInferenceRunner(m, validationFlow(t), 3, must(ClassificationError(nil)).of(t))).of(t)
	if _, err := classifierRun(t, m, 1, runner); err != errTower {
		t.Errorf("Run() = %v, want the tower function's error", err)
	}

	// A panic there makes Run panic again with the same value.
	value := &panicValue{"InferenceTower1"}
	m = newClassifierWith(t, func(tw *Tower) error {
		if tw.Name() == "InferenceTower1" {
			panic(value)
		}
		return nil
	})
	runner = must(NewDataParallelInferenceRunner(m, validationFlow(t), 2, must(ClassificationError(nil)).of(t))).of(t)
	func() {
		defer func() {
			if p := recover(); p != value {
				t.Errorf("recovered %v, want the tower function's panic", p)
			}
		}()
		classifierRun(t, m, 1, runner)
		t.Error("Run did not panic")
	}()
}

// lrByEpoch is a callback that reads the learning rate at the start of
// each epoch.
func lrByEpoch(t *testing.T, seen map[int64]float64) *Callback {
	t.Helper()
	return must(NewCallback("read_lr", EventBeforeEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		o, err := ctx.Optimizer()
		if err != nil {
			return err
		}
		defer o.Close()
		lr, err := o.Get("learning_rate")
		seen[ctx.EpochNum()] = lr
		return err
	})).of(t)
}

// regressionRun trains the regression model (lr 0.5, sgd) for epochs epochs
// of 2 steps, with opts' other fields, and returns the trainer and Run's
// result.
func regressionRun(t *testing.T, opts *TrainerOptions, cbs func(opt *Optimizer) []*Callback) (*Trainer, *Optimizer, error) {
	t.Helper()
	m := newRegressionModel(t, &regression{})
	opt := setOptimizer(t, m, "sgd", 0.5)
	tr := must(NewTrainer(opts)).of(t)
	t.Cleanup(func() { tr.Close() })
	ok(t, tr.SetModel(m, regressionInput(t, 4, 20)))
	for _, cb := range cbs(opt) {
		ok(t, tr.AddCallback(cb))
	}
	return tr, opt, tr.Run()
}

func TestHyperParamFunc(t *testing.T) {
	checkHandles(t)
	type call struct {
		epoch   int64
		current float64
	}
	var calls []call
	seen := map[int64]float64{}
	lrAfter := func(epochs int64) float64 { return 0.1 * float64(epochs+1) }
	_, opt, err := regressionRun(t, quietOptions(1, 3, 2), func(opt *Optimizer) []*Callback {
		return []*Callback{
			must(HyperParamFunc(opt, "learning_rate", func(epoch int64, current float64) (float64, error) {
				calls = append(calls, call{epoch, current})
				return lrAfter(epoch), nil
			})).of(t),
			lrByEpoch(t, seen),
		}
	})
	ok(t, err)
	want := map[int64]float64{1: lrAfter(0), 2: lrAfter(1), 3: lrAfter(2)}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("learning rate by epoch %v, want %v", seen, want)
	}
	// BEFORE_TRAIN (0 epochs done), then after each epoch.
	if wantCalls := []call{{0, 0.5}, {1, lrAfter(0)}, {2, lrAfter(1)}, {3, lrAfter(2)}}; !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("calls %v, want %v", calls, wantCalls)
	}
	if lr := must(opt.Get("learning_rate")).of(t); lr != lrAfter(3) {
		t.Errorf("final learning rate %v, want %v", lr, lrAfter(3))
	}

	// An error comes back from Run as the same value, a panic as itself,
	// Stop ends training gracefully.
	errLR := errors.New("no learning rate for epoch 2")
	_, _, err = regressionRun(t, quietOptions(1, 3, 2), func(opt *Optimizer) []*Callback {
		return []*Callback{must(HyperParamFunc(opt, "learning_rate", func(epoch int64, _ float64) (float64, error) {
			if epoch == 2 {
				return 0, errLR
			}
			return 0.1, nil
		})).of(t)}
	})
	if err != errLR {
		t.Errorf("Run() = %v, want the function's error", err)
	}
	func() {
		defer func() {
			if p := recover(); p != "lr" {
				t.Errorf("recovered %v", p)
			}
		}()
		regressionRun(t, quietOptions(1, 3, 2), func(opt *Optimizer) []*Callback {
			return []*Callback{must(HyperParamFunc(opt, "learning_rate", func(int64, float64) (float64, error) {
				panic("lr")
			})).of(t)}
		})
		t.Error("Run did not panic")
	}()
	tr, _, err := regressionRun(t, quietOptions(1, 3, 2), func(opt *Optimizer) []*Callback {
		return []*Callback{must(HyperParamFunc(opt, "learning_rate", func(epoch int64, cur float64) (float64, error) {
			if epoch == 1 {
				return 0, Stop("lr schedule over")
			}
			return cur, nil
		})).of(t)}
	})
	ok(t, err)
	if reason, _ := tr.StopReason(); reason != "lr schedule over" {
		t.Errorf("StopReason() = %q", reason)
	}
	// A value that is not finite fails training.
	_, _, err = regressionRun(t, quietOptions(1, 3, 2), func(opt *Optimizer) []*Callback {
		return []*Callback{must(HyperParamFunc(opt, "learning_rate", func(int64, float64) (float64, error) {
			return math.NaN(), nil
		})).of(t)}
	})
	wantError(t, err, CodeCallback, "not finite")
}

// valueCallback puts the scalar name with vals[epoch] at the end of each
// epoch.
func valueCallback(t *testing.T, name string, vals map[int64]float64) *Callback {
	t.Helper()
	return must(NewCallback("put_"+name, EventTriggerEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		return ctx.PutScalar(name, vals[ctx.EpochNum()])
	})).of(t)
}

func TestStatMonitorParam(t *testing.T) {
	checkHandles(t)
	vals := map[int64]float64{1: 1, 2: 1, 3: 0.5, 4: 0.2}
	for _, c := range []struct {
		name string
		o    *StatMonitorOptions
		want map[int64]float64
	}{
		// Epochs 1 and 2 give a full window of 2 that did not fall: lr *
		// 0.5, and the window starts again; 0.5, 0.2 fell.
		{"factor", &StatMonitorOptions{LastK: 2, Factor: 0.5}, map[int64]float64{1: 0.5, 2: 0.5, 3: 0.25, 4: 0.25}},
		{"limit", &StatMonitorOptions{LastK: 2, Factor: 0.5, Limit: 0.4}, map[int64]float64{1: 0.5, 2: 0.5, 3: 0.4, 4: 0.4}},
		// 1 -> 0.5 is not a fall by more than 0.6: the plateau goes on.
		{"threshold", &StatMonitorOptions{LastK: 3, Threshold: 0.6, Factor: 0.5}, map[int64]float64{1: 0.5, 2: 0.5, 3: 0.5, 4: 0.25}},
		// The default window of 5 never fills in 4 epochs.
		{"defaults", nil, map[int64]float64{1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5}},
		// Maximizing: the stat never grows above its first value.
		{"maximize", &StatMonitorOptions{LastK: 2, Maximize: true, Factor: 2}, map[int64]float64{1: 0.5, 2: 0.5, 3: 1, 4: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := map[int64]float64{}
			_, _, err := regressionRun(t, quietOptions(1, 4, 2), func(opt *Optimizer) []*Callback {
				return []*Callback{valueCallback(t, "val", vals),
					must(StatMonitorParam(opt, "learning_rate", "val", c.o)).of(t), lrByEpoch(t, seen)}
			})
			ok(t, err)
			if !reflect.DeepEqual(seen, c.want) {
				t.Errorf("learning rate by epoch %v, want %v", seen, c.want)
			}
		})
	}
}

func TestHumanHyperParam(t *testing.T) {
	checkHandles(t)
	dir := t.TempDir()
	hyper := filepath.Join(dir, "hyper.txt")
	ok(t, os.WriteFile(hyper, []byte("# by hand\nmomentum: 0.9\nlearning_rate: 0.125\n"), 0o644))
	other := filepath.Join(t.TempDir(), "lr.txt") // an absolute path, outside the log directory
	ok(t, os.WriteFile(other, []byte("learning_rate:0.25\n"), 0o644))
	opts := quietOptions(1, 3, 2)
	opts.Logdir, opts.LogdirAction = dir, LogdirKeep
	seen := map[int64]float64{}
	var otherOpt *Optimizer
	edit := must(NewCallback("edit", EventAfterEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		text := map[int64]string{1: "learning_rate:0.0625\n", 2: "learning_rate: fast\n"}[ctx.EpochNum()]
		return os.WriteFile(hyper, []byte(text), 0o644)
	})).of(t)
	_, _, err := regressionRun(t, opts, func(opt *Optimizer) []*Callback {
		otherOpt = must(NewOptimizer("sgd")).of(t)
		t.Cleanup(func() { otherOpt.Close() })
		return []*Callback{edit, must(HumanHyperParam(opt, "learning_rate", "")).of(t),
			must(HumanHyperParam(otherOpt, "learning_rate", other)).of(t), lrByEpoch(t, seen)}
	})
	ok(t, err)
	// The file's value from BEFORE_TRAIN on; the edit after epoch 1 is read
	// at its trigger; the line that does not parse changes nothing.
	if want := map[int64]float64{1: 0.125, 2: 0.0625, 3: 0.0625}; !reflect.DeepEqual(seen, want) {
		t.Errorf("learning rate by epoch %v, want %v", seen, want)
	}
	if lr := must(otherOpt.Get("learning_rate")).of(t); lr != 0.25 {
		t.Errorf("the other optimizer's learning rate %v, want 0.25 from %s", lr, other)
	}
	// A relative file needs a log directory.
	_, _, err = regressionRun(t, quietOptions(1, 1, 2), func(opt *Optimizer) []*Callback {
		return []*Callback{must(HumanHyperParam(opt, "learning_rate", "")).of(t)}
	})
	wantError(t, err, CodeState, "log directory")
}

func TestEarlyStopping(t *testing.T) {
	checkHandles(t)
	// A stat that never improves on its first value stops after Patience
	// more epochs.
	flat := map[int64]float64{1: 1, 2: 1, 3: 1.5, 4: 1, 5: 1, 6: 1}
	tr, _, err := regressionRun(t, quietOptions(1, 6, 2), func(*Optimizer) []*Callback {
		return []*Callback{valueCallback(t, "val", flat), must(EarlyStopping("val", &EarlyStoppingOptions{Patience: 2})).of(t)}
	})
	ok(t, err)
	reason, stopped := tr.StopReason()
	if !stopped || !strings.Contains(reason, "EarlyStopping: val") || !strings.Contains(reason, "1 at global_step 2") {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
	if e := tr.EpochNum(); e != 3 {
		t.Errorf("stopped in epoch %d, want 3", e)
	}
	// Growing with Maximize, by more than MinDelta: it runs to the end.
	rising := map[int64]float64{1: 1, 2: 2, 3: 3, 4: 4}
	tr, _, err = regressionRun(t, quietOptions(1, 4, 2), func(*Optimizer) []*Callback {
		return []*Callback{valueCallback(t, "acc", rising),
			must(EarlyStopping("acc", &EarlyStoppingOptions{Patience: 1, MinDelta: 0.5, Maximize: true})).of(t)}
	})
	ok(t, err)
	if reason, stopped := tr.StopReason(); stopped {
		t.Errorf("stopped: %q", reason)
	}
	// Improvements smaller than MinDelta do not count.
	slow := map[int64]float64{1: 1, 2: 0.95, 3: 0.9, 4: 0.85, 5: 0.8}
	tr, _, err = regressionRun(t, quietOptions(1, 5, 2), func(*Optimizer) []*Callback {
		return []*Callback{valueCallback(t, "loss", slow),
			must(EarlyStopping("loss", &EarlyStoppingOptions{MinDelta: 0.15})).of(t)}
	})
	ok(t, err)
	if reason, _ := tr.StopReason(); !strings.Contains(reason, "in 3 new values") {
		t.Errorf("StopReason() = %q, want a stop after the default patience of 3", reason)
	}
	if e := tr.EpochNum(); e != 4 {
		t.Errorf("stopped in epoch %d, want 4", e)
	}
}

func TestTerminateOnNaN(t *testing.T) {
	checkHandles(t)
	for _, c := range []struct {
		name    string
		outputs []string
		bad     string // the output that goes bad at the 6th step
		value   float64
		want    string
	}{
		{"cost", nil, "cost", math.NaN(), "the output cost is nan at global_step 6"},
		{"named", []string{"loss", "cost"}, "loss", math.Inf(1), "the output loss is inf at global_step 6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newQuietTrainer(t, 1, 5, 4)
			n := 0
			ok(t, tr.SetRunStep(func(ctx *Context) error {
				return ctx.HookedStep(func(ctx *Context) error {
					n++
					v := 1.0
					if n == 6 {
						v = c.value
					}
					for _, name := range []string{"cost", "loss"} {
						x := 1.0
						if name == c.bad {
							x = v
						}
						if err := ctx.SetOutputScalar(name, x); err != nil {
							return err
						}
					}
					return nil
				})
			}))
			ok(t, tr.AddCallback(must(TerminateOnNaN(c.outputs...)).of(t)))
			ok(t, tr.Run())
			if reason, stopped := tr.StopReason(); !stopped || !strings.Contains(reason, c.want) {
				t.Errorf("StopReason() = %q, %v; want it to contain %q", reason, stopped, c.want)
			}
			if g := tr.GlobalStep(); g != 6 {
				t.Errorf("GlobalStep() = %d, want 6", g)
			}
		})
	}
}

func TestThroughputTracker(t *testing.T) {
	checkHandles(t)
	for _, c := range []struct {
		samples int64
		scalar  string
	}{{0, "Throughput (steps/sec)"}, {32, "Throughput (samples/sec)"}} {
		tr, _, err := regressionRun(t, quietOptions(1, 2, 5), func(*Optimizer) []*Callback {
			return []*Callback{must(ThroughputTracker(c.samples)).of(t)}
		})
		ok(t, err)
		if v := history(t, tr, c.scalar); len(v) != 2 || !(v[0] > 0) || !(v[1] > 0) {
			t.Errorf("%s %v, want 2 positive values", c.scalar, v)
		}
	}
	_, err := ThroughputTracker(-1)
	wantError(t, err, CodeInvalidArgument, "samples_per_step")
}

func TestStepWatchdog(t *testing.T) {
	checkHandles(t)
	run := func(timeout, slow time.Duration) (*Trainer, error) {
		tr := newQuietTrainer(t, 1, 2, 3)
		ok(t, tr.SetRunStep(func(ctx *Context) error {
			if ctx.GlobalStep() == 1 {
				time.Sleep(slow)
			}
			return ctx.HookedStep(nil)
		}))
		ok(t, tr.AddCallback(must(StepWatchdog(timeout)).of(t)))
		return tr, tr.Run()
	}
	tr, err := run(50*time.Millisecond, 400*time.Millisecond)
	e := wantError(t, err, CodeTimeout, "StepWatchdog: the step to global_step 2 took")
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("errors.Is(%v, ErrTimeout) is false", e)
	}
	if g := tr.GlobalStep(); g != 2 {
		t.Errorf("GlobalStep() = %d, want 2 (the slow step)", g)
	}
	_, err = run(10*time.Second, 0)
	ok(t, err)
	for _, d := range []time.Duration{0, -time.Second} {
		_, err = StepWatchdog(d)
		wantError(t, err, CodeInvalidArgument, "timeout must be > 0")
	}
}

func TestHostMemoryTracker(t *testing.T) {
	checkHandles(t)
	cb, err := HostMemoryTracker()
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	ok(t, err)
	tr, _, err := regressionRun(t, quietOptions(1, 2, 2), func(*Optimizer) []*Callback { return []*Callback{cb} })
	ok(t, err)
	for _, name := range []string{"HostFreeMemory (GB)", "HostResidentMemory (MB)"} {
		if v := history(t, tr, name); len(v) != 2 || !(v[1] > 0) {
			t.Errorf("%s %v", name, v)
		}
	}
}

// eventFiles returns the contents of the TensorFlow event files in dir.
func eventFiles(t *testing.T, dir string) [][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	ok(t, err)
	var out [][]byte
	for _, p := range paths {
		out = append(out, must(os.ReadFile(p)).of(t))
	}
	return out
}

func TestPutImageAndTensorBoard(t *testing.T) {
	checkHandles(t)
	logdir, other := t.TempDir(), t.TempDir()
	opts := &TrainerOptions{MaxEpoch: 2, StepsPerEpoch: 2, Logdir: logdir, LogdirAction: LogdirKeep, Quiet: true,
		Progress: ProgressOff, NoDefaultCallbacks: true} // the default monitors: TensorBoard in logdir
	pixels := make([]uint8, 4*4*3)
	for i := range pixels {
		pixels[i] = uint8(i * 5)
	}
	type image struct {
		name  string
		shape []int64
	}
	var images []image
	monitor := must(NewCallback("images", EventRecord, nil, func(_ *Context, _ Event, rec *Record) error {
		if rec.Kind != RecordImage {
			return nil
		}
		im := image{name: rec.Name}
		if rec.Image != nil {
			shape, err := rec.Image.Shape()
			if err != nil {
				return err
			}
			im.shape = shape
		}
		images = append(images, im)
		return nil
	})).of(t)
	put := must(NewCallback("put", EventTriggerEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		rgb, err := FromUint8(pixels, 4, 4, 3)
		if err != nil {
			return err
		}
		defer rgb.Close()
		if err := ctx.PutImage("rgb", rgb); err != nil {
			return err
		}
		grey, err := FromFloat32([]float32{0, 63.7, 127, 255, 300, -4, 0, 1, 2, 3, 4, 5}, 2, 3, 2, 1) // two images
		if err != nil {
			return err
		}
		defer grey.Close()
		if err := ctx.PutImage("grey", grey); err != nil {
			return err
		}
		// Errors: a dtype, a channel count, a closed tensor, nil.
		bad, err := FromInt64([]int64{1, 2, 3, 4}, 2, 2)
		if err != nil {
			return err
		}
		defer bad.Close()
		for _, c := range []struct {
			x    *Tensor
			want string
		}{{bad, "dtype"}, {must(FromUint8(make([]uint8, 8), 2, 2, 2)).of(t), "channels"}, {nil, "the image is nil"}} {
			err := ctx.PutImage("bad", c.x)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, c.want) {
				t.Errorf("PutImage(%v) = %v, want an error containing %q", c.want, err, c.want)
			}
		}
		closed := must(FromUint8(make([]uint8, 4), 2, 2)).of(t)
		closed.Close()
		if err := ctx.PutImage("bad", closed); err == nil || !strings.Contains(err.Error(), "use of closed Tensor") {
			t.Errorf("PutImage(closed) = %v", err)
		}
		return ctx.PutScalar("brightness", 0.5)
	})).of(t)
	tr := must(NewTrainer(opts)).of(t)
	defer tr.Close()
	m := newRegressionModel(t, &regression{})
	setOptimizer(t, m, "sgd", 0.1)
	ok(t, tr.SetModel(m, regressionInput(t, 4, 20)))
	ok(t, tr.AddCallback(put))
	ok(t, tr.AddMonitor(monitor))
	ok(t, tr.AddMonitor(must(TensorBoard(other)).of(t)))
	ok(t, tr.Run())

	want := []image{{"rgb", []int64{1, 4, 4, 3}}, {"grey", []int64{2, 3, 2, 1}}}
	want = append(want, want...)
	if !reflect.DeepEqual(images, want) {
		t.Errorf("the monitor's image records %v, want %v", images, want)
	}
	// Images are not scalars: no history, not in stats.json.
	if _, _, err := tr.ScalarLatest("rgb"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ScalarLatest(rgb) = %v", err)
	}
	if stats := must(os.ReadFile(filepath.Join(logdir, "stats.json"))).of(t); bytes.Contains(stats, []byte("rgb")) {
		t.Errorf("stats.json has the image: %s", stats)
	}
	// An event file in the log directory (the default monitor's) and one in
	// the other directory, each with the scalar, the images as PNG (grey's
	// two as grey/0 and grey/1).
	for _, dir := range []string{logdir, other} {
		files := eventFiles(t, dir)
		if len(files) != 1 {
			t.Fatalf("%d event files in %s, want 1", len(files), dir)
		}
		for _, s := range []string{"brightness", "rgb", "grey/0", "grey/1", "\x89PNG", "cost"} {
			if !bytes.Contains(files[0], []byte(s)) {
				t.Errorf("the event file in %s lacks %q", dir, s)
			}
		}
	}

	// Without a log directory, TensorBoard("") writes nothing.
	tr2 := newQuietTrainer(t, 1, 1, 0)
	ok(t, tr2.AddMonitor(must(TensorBoard("")).of(t)))
	ok(t, tr2.Run())
	cb := must(TensorBoard("")).of(t)
	ok(t, cb.Close())
}

func TestCallbackArguments(t *testing.T) {
	checkHandles(t)
	opt := must(NewOptimizer("sgd")).of(t)
	defer opt.Close()
	lr := func(int64, float64) (float64, error) { return 0.1, nil }
	noop := func(*Context, Event, *Record) error { return nil }
	for _, c := range []struct {
		name string
		make func() (*Callback, error)
		code Code
		want string
	}{
		{"HyperParamFunc nil fn", func() (*Callback, error) { return HyperParamFunc(opt, "learning_rate", nil) }, CodeInvalidArgument, "fn is nil"},
		{"HyperParamFunc nil optimizer", func() (*Callback, error) { return HyperParamFunc(nil, "learning_rate", lr) }, CodeInvalidArgument, "the Optimizer is nil"},
		{"HyperParamFunc unknown", func() (*Callback, error) { return HyperParamFunc(opt, "nope", lr) }, CodeInvalidArgument, "nope"},
		{"StatMonitorParam last_k", func() (*Callback, error) {
			return StatMonitorParam(opt, "learning_rate", "val", &StatMonitorOptions{LastK: 1})
		}, CodeInvalidArgument, "last_k"},
		{"StatMonitorParam factor", func() (*Callback, error) {
			return StatMonitorParam(opt, "learning_rate", "val", &StatMonitorOptions{Factor: -1})
		}, CodeInvalidArgument, "factor"},
		{"StatMonitorParam threshold", func() (*Callback, error) {
			return StatMonitorParam(opt, "learning_rate", "val", &StatMonitorOptions{Threshold: -1})
		}, CodeInvalidArgument, "threshold"},
		{"StatMonitorParam stat", func() (*Callback, error) {
			return StatMonitorParam(opt, "learning_rate", "", nil)
		}, CodeInvalidArgument, ""},
		{"HumanHyperParam nil optimizer", func() (*Callback, error) { return HumanHyperParam(nil, "learning_rate", "") }, CodeInvalidArgument, "the Optimizer is nil"},
		{"HumanHyperParam unknown", func() (*Callback, error) { return HumanHyperParam(opt, "nope", "") }, CodeInvalidArgument, "nope"},
		{"EarlyStopping stat", func() (*Callback, error) { return EarlyStopping("", nil) }, CodeInvalidArgument, ""},
		{"EarlyStopping patience", func() (*Callback, error) { return EarlyStopping("val", &EarlyStoppingOptions{Patience: -1}) }, CodeInvalidArgument, "patience"},
		{"EarlyStopping min_delta", func() (*Callback, error) { return EarlyStopping("val", &EarlyStoppingOptions{MinDelta: -1}) }, CodeInvalidArgument, "min_delta"},
		{"TerminateOnNaN empty name", func() (*Callback, error) { return TerminateOnNaN("") }, CodeInvalidArgument, ""},
		{"Periodic BeforeTrain", func() (*Callback, error) {
			return Periodic(must(NewCallback("x", EventTrigger, nil, noop)).of(t), Every{Epochs: 1, BeforeTrain: true})
		}, CodeInvalidArgument, "Periodic: Every.BeforeTrain is PeriodicTrigger's"},
		{"Periodic no condition", func() (*Callback, error) {
			return Periodic(must(NewCallback("x", EventTrigger, nil, noop)).of(t), Every{})
		}, CodeInvalidArgument, ""},
		{"PeriodicTrigger no condition", func() (*Callback, error) {
			return PeriodicTrigger(must(NewCallback("x", EventTrigger, nil, noop)).of(t), Every{})
		}, CodeInvalidArgument, ""},
		{"ModelSaver MaxToKeep", func() (*Callback, error) { return ModelSaver(&ModelSaverOptions{MaxToKeep: -2}) },
			CodeInvalidArgument, "ModelSaverOptions.MaxToKeep must be from 0 to 2^30, or Unlimited, got -2"},
		{"ModelSaver Never", func() (*Callback, error) {
			return ModelSaver(&ModelSaverOptions{EveryKEpochs: Never, EveryKSteps: 5, MaxToKeep: Unlimited, KeepEveryNHours: Never})
		}, CodeOK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cb, err := c.make()
			if err == nil {
				cb.Close()
			}
			if c.code == CodeOK {
				ok(t, err)
				return
			}
			wantError(t, err, c.code, c.want)
		})
	}
	closed := must(NewOptimizer("sgd")).of(t)
	closed.Close()
	_, err := HyperParamFunc(closed, "learning_rate", lr)
	wantError(t, err, CodeInvalidArgument, "use of closed Optimizer")
	// A callback never given away is released by Close, its function's
	// handle too (checkHandles).
	cb := must(HyperParamFunc(opt, "learning_rate", lr)).of(t)
	ok(t, cb.Close())
	for _, mk := range []func() (*Callback, error){
		func() (*Callback, error) { return StatMonitorParam(opt, "learning_rate", "val", nil) },
		func() (*Callback, error) { return HumanHyperParam(opt, "learning_rate", "lr.txt") },
		func() (*Callback, error) { return EarlyStopping("val", nil) },
		func() (*Callback, error) { return TerminateOnNaN() },
		func() (*Callback, error) { return ThroughputTracker(0) },
		func() (*Callback, error) { return StepWatchdog(time.Second) },
	} {
		ok(t, must(mk()).of(t).Close())
	}
}
