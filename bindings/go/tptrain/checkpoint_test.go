package tptrain

// Checkpoints from Go: ModelSaver and exact resume (a run stopped mid-epoch
// and resumed, with Resume and with AutoResume, ends with the variables of an
// uninterrupted run, bit for bit), a callback's own state across the resume,
// MinSaver, Model.Restore and its errors. The C twin is
// tests/c/test_checkpoint.c.

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func checkpointOptions(dir string, epochs int64) *TrainerOptions {
	return &TrainerOptions{MaxEpoch: epochs, StepsPerEpoch: 5, Logdir: dir, LogdirAction: LogdirKeep,
		Quiet: true, Progress: ProgressOff, NoDefaultCallbacks: true}
}

// stepCounter counts the steps it sees, across resumes (its state), and
// interrupts training at global step stopAt (a stop request: a rerun goes on).
type stepCounter struct {
	seen   uint64
	stopAt int64
}

func (s *stepCounter) SaveState() ([]byte, error) {
	return binary.LittleEndian.AppendUint64(nil, s.seen), nil
}

func (s *stepCounter) RestoreState(b []byte) error {
	if len(b) != 8 {
		return errors.New("8 bytes expected")
	}
	s.seen = binary.LittleEndian.Uint64(b)
	return nil
}

func (s *stepCounter) callback(t *testing.T) *Callback {
	return must(NewCallback("counter", EventTriggerStep, &CallbackOptions{AllWorkers: true, State: s}, func(ctx *Context, _ Event, _ *Record) error {
		s.seen++
		if ctx.GlobalStep() == s.stopAt {
			ctx.RequestStop()
		}
		return nil
	})).of(t)
}

func trainRegression(t *testing.T, opts *TrainerOptions, resume string, cbs ...*Callback) (*Model, *Trainer) {
	t.Helper()
	m := newRegressionModel(t, &regression{})
	setOptimizer(t, m, "adam", 0.05)
	tr := must(NewTrainer(opts)).of(t)
	t.Cleanup(func() { tr.Close() })
	ok(t, tr.SetModel(m, regressionInput(t, 4, 20)))
	for _, cb := range cbs {
		ok(t, tr.AddCallback(cb))
	}
	if resume != "" {
		ok(t, tr.Resume(resume))
	}
	ok(t, tr.Run())
	return m, tr
}

func weightsOf(t *testing.T, m *Model) []float32 {
	t.Helper()
	w := must(m.Variable("W")).of(t)
	defer w.Close()
	return must(w.Float32s()).of(t)
}

func TestResumeMidEpochEqualsUninterrupted(t *testing.T) {
	ok(t, ManualSeed(3))
	ref, _ := trainRegression(t, checkpointOptions(t.TempDir(), 3), "")
	want := weightsOf(t, ref)
	slot := func(m *Model, name string) []float32 {
		t.Helper()
		s := must(m.OptimizerSlot("W", name)).of(t)
		defer s.Close()
		return must(s.Float32s()).of(t)
	}
	wantMoment := slot(ref, "exp_avg")
	_, err := ref.OptimizerSlot("W", "momentum_buffer")
	wantError(t, err, CodeNotFound, "it keeps: exp_avg, exp_avg_sq, step")

	dir := t.TempDir()
	ok(t, ManualSeed(3))
	counter := &stepCounter{stopAt: 8}
	saver := must(ModelSaver(&ModelSaverOptions{EveryKSteps: 3})).of(t)
	_, tr := trainRegression(t, checkpointOptions(dir, 3), "", counter.callback(t), saver)
	if r, _ := tr.StopReason(); r != "tpt_trainer_request_stop" {
		t.Fatalf("stop reason %q", r)
	}
	for _, name := range []string{"model-6", "model-8"} { // every 3 steps, and where it was interrupted
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}

	ok(t, ManualSeed(77)) // the random state comes from the checkpoint
	counter2 := &stepCounter{seen: 1000, stopAt: -1}
	m, tr := trainRegression(t, checkpointOptions(dir, 3), dir, counter2.callback(t))
	if gs := tr.GlobalStep(); gs != 15 {
		t.Fatalf("global step %d", gs)
	}
	if counter2.seen != 15 {
		t.Fatalf("the callback's state: %d steps seen, want 8 + 7", counter2.seen)
	}
	if from := tr.ResumedFrom(); from != filepath.Join(dir, "model-8") {
		t.Fatalf("ResumedFrom() = %q, want the directory's latest checkpoint", from)
	}
	if spe := tr.StepsPerEpoch(); spe != 5 {
		t.Fatalf("StepsPerEpoch() = %d, want the options' 5", spe)
	}
	if got := weightsOf(t, m); !reflect.DeepEqual(got, want) {
		t.Fatalf("resumed %v, uninterrupted %v", got, want)
	}
	if got := slot(m, "exp_avg"); !reflect.DeepEqual(got, wantMoment) {
		t.Fatalf("the optimizer's state: resumed %v, uninterrupted %v", got, wantMoment)
	}

	// AutoResume from the interrupted run's checkpoint goes on (the resumed
	// run above had no saver).
	opts := checkpointOptions(dir, 3)
	opts.AutoResume = true
	saver = must(ModelSaver(&ModelSaverOptions{EveryKSteps: 3})).of(t)
	m, tr = trainRegression(t, opts, "", saver)
	if gs := tr.GlobalStep(); gs != 15 || !reflect.DeepEqual(weightsOf(t, m), want) {
		t.Fatalf("auto-resume: global step %d", gs)
	}
	if from := tr.ResumedFrom(); from != filepath.Join(dir, "model-8") { // the latest checkpoint
		t.Fatalf("ResumedFrom() after auto-resume = %q", from)
	}
	_, fresh := trainRegression(t, checkpointOptions(t.TempDir(), 1), "")
	if from := fresh.ResumedFrom(); from != "" {
		t.Fatalf("ResumedFrom() of a fresh run = %q", from)
	}
}

func TestMinSaverAndRestore(t *testing.T) {
	dir := t.TempDir()
	vals := []float64{0, 2, 1, 3}
	put := must(NewCallback("val", EventTriggerEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		return ctx.PutScalar("val", vals[ctx.EpochNum()])
	})).of(t)
	saver := must(ModelSaver(nil)).of(t)
	best := must(MinSaver("val", nil)).of(t)
	_, tr := trainRegression(t, checkpointOptions(dir, 3), "", saver, put, best)
	if _, err := os.Stat(filepath.Join(dir, "min-val")); err != nil {
		t.Fatal(err)
	}
	if p, err := tr.BestCheckpoint("val"); err != nil || p != filepath.Join(dir, "min-val") {
		t.Fatalf("BestCheckpoint(\"val\") = %q, %v", p, err)
	}
	_, err := tr.BestCheckpoint("loss")
	wantError(t, err, CodeNotFound, "no MinSaver or MaxSaver of 'loss'")

	other := newRegressionModel(t, &regression{}) // not built: Restore builds it
	if n := must(other.Restore(filepath.Join(dir, "min-val"), nil)).of(t); n != 2 {
		t.Fatalf("restored %d variables", n)
	}
	before := weightsOf(t, other)
	_, err = other.Restore(dir, &RestoreOptions{Prefix: "tower1/"})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, "missing from the file: W (as 'tower1/W')") {
		t.Fatalf("got %v", err)
	}
	if !reflect.DeepEqual(weightsOf(t, other), before) {
		t.Fatal("a failed restore changed the model")
	}
	if n := must(other.Restore(dir, &RestoreOptions{NameMap: map[string]string{"W": "W", "b": "b"}})).of(t); n != 2 {
		t.Fatalf("restored %d variables", n)
	}
	if _, err := other.Restore(filepath.Join(dir, "nothing"), nil); !errors.As(err, &e) || e.Code != CodeIO {
		t.Fatalf("got %v", err)
	}
}

// TestCheckpointReadLimit: a file that needs more than its size plus the
// read limit is refused, naming the limit (the limit is process-wide: this
// test is not parallel, and puts the default back).
func TestCheckpointReadLimit(t *testing.T) {
	dir := t.TempDir()
	saver := must(ModelSaver(nil)).of(t)
	trainRegression(t, checkpointOptions(dir, 1), "", saver)
	m := newRegressionModel(t, &regression{})
	ok(t, m.Build())
	defer func() { ok(t, SetCheckpointReadLimit(256<<20)) }()
	ok(t, SetCheckpointReadLimit(0))
	var e *Error
	if _, err := m.Restore(dir, nil); !errors.As(err, &e) || e.Code != CodeInvalidArgument || !strings.Contains(e.Message, "read limit") {
		t.Fatalf("got %v", err)
	}
	if err := SetCheckpointReadLimit(1 << 63); !errors.As(err, &e) || e.Code != CodeInvalidArgument {
		t.Fatalf("got %v", err)
	}
	ok(t, SetCheckpointReadLimit(256<<20))
	if n := must(m.Restore(dir, nil)).of(t); n != 2 {
		t.Fatalf("restored %d variables", n)
	}
}

func TestCheckpointErrors(t *testing.T) {
	var e *Error
	if _, err := ModelSaver(&ModelSaverOptions{EveryKEpochs: Never}); !errors.As(err, &e) || !strings.Contains(e.Message, "never save") {
		t.Fatalf("got %v", err)
	}
	if _, err := MaxSaver("acc", &BestSaverOptions{Filename: "a/b"}); err == nil {
		t.Fatal("a file name with a slash was taken")
	}
	tr := must(NewTrainer(&TrainerOptions{StepsPerEpoch: 1})).of(t)
	defer tr.Close()
	if err := tr.Resume("/nonexistent/model-1"); !errors.As(err, &e) || e.Code != CodeIO {
		t.Fatalf("got %v", err)
	}
}

func TestScheduledHyperParam(t *testing.T) {
	m := newRegressionModel(t, &regression{})
	opt := setOptimizer(t, m, "sgd", 0.5)
	sched := must(ScheduledHyperParam(opt, "learning_rate",
		[]SchedulePoint{{At: 2, Value: 0.25}, {At: 0, Value: 0.125}}, nil)).of(t)
	seen := map[int64]float64{}
	read := must(NewCallback("read", EventBeforeEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		o, err := ctx.Optimizer()
		if err != nil {
			return err
		}
		defer o.Close()
		lr, err := o.Get("learning_rate")
		seen[ctx.EpochNum()] = lr
		return err
	})).of(t)
	tr := must(NewTrainer(&TrainerOptions{MaxEpoch: 3, StepsPerEpoch: 2, Quiet: true, Progress: ProgressOff})).of(t)
	defer tr.Close()
	ok(t, tr.SetModel(m, regressionInput(t, 4, 20)))
	ok(t, tr.AddCallback(sched))
	ok(t, tr.AddCallback(read))
	ok(t, tr.Run())
	if want := map[int64]float64{1: 0.125, 2: 0.125, 3: 0.25}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("learning rate by epoch %v, want %v", seen, want)
	}
	if _, err := ScheduledHyperParam(opt, "lr", []SchedulePoint{{1, 0.1}}, nil); err == nil {
		t.Fatal("an unknown hyper-parameter was taken")
	}
}

// TestStoppedRunStaysStopped: EarlyStopping ends a run at epoch 3 of 5 and
// the epoch is saved whatever the callbacks' order (MaxSaver and
// EarlyStopping added before the ModelSaver and the producer of "val"); a
// rerun with AutoResume trains nothing and gives the same stop reason;
// ContinueStopped trains on. The C twin is a_stopped_run_stays_stopped.
func TestStoppedRunStaysStopped(t *testing.T) {
	dir := t.TempDir()
	vals := []float64{0, 0.5, 0.4, 0.45, 0.9, 0.9, 0.9}
	run := func(continueStopped bool) (*Trainer, error) {
		put := must(NewCallback("val", EventTriggerEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
			return ctx.PutScalar("val", vals[ctx.EpochNum()])
		})).of(t)
		early := must(EarlyStopping("val", &EarlyStoppingOptions{Patience: 2, Maximize: true})).of(t)
		best := must(MaxSaver("val", nil)).of(t)
		saver := must(ModelSaver(nil)).of(t)
		opts := checkpointOptions(dir, 5)
		opts.AutoResume, opts.ContinueStopped = true, continueStopped
		m := newRegressionModel(t, &regression{})
		setOptimizer(t, m, "adam", 0.05)
		tr := must(NewTrainer(opts)).of(t)
		t.Cleanup(func() { tr.Close() })
		ok(t, tr.SetModel(m, regressionInput(t, 4, 20)))
		for _, cb := range []*Callback{early, best, saver, put} {
			ok(t, tr.AddCallback(cb))
		}
		return tr, tr.Run()
	}
	tr, err := run(false)
	ok(t, err)
	reason, stopped := tr.StopReason()
	if gs := tr.GlobalStep(); gs != 15 || !stopped || !strings.Contains(reason, "EarlyStopping: val has not risen above its best, 0.5") {
		t.Fatalf("first run: global step %d, stop reason %q", gs, reason)
	}
	if _, err := os.Stat(filepath.Join(dir, "model-15")); err != nil { // the stopping epoch was saved
		t.Fatal(err)
	}
	tr, err = run(false)
	ok(t, err)
	if r, _ := tr.StopReason(); tr.GlobalStep() != 15 || r != reason {
		t.Fatalf("rerun: global step %d, stop reason %q, want 15 and %q", tr.GlobalStep(), r, reason)
	}
	if from := tr.ResumedFrom(); from != filepath.Join(dir, "model-15") {
		t.Fatalf("ResumedFrom() = %q", from)
	}
	tr, err = run(true)
	ok(t, err)
	if r, stopped := tr.StopReason(); tr.GlobalStep() != 25 || stopped {
		t.Fatalf("continued: global step %d, stop reason %q", tr.GlobalStep(), r)
	}
	if p, err := tr.BestCheckpoint("val"); err != nil || p != filepath.Join(dir, "max-val") {
		t.Fatalf("BestCheckpoint(\"val\") = %q, %v", p, err)
	}

	// A misspelt watched name fails the run at the first epoch's end.
	typo := must(EarlyStopping("vall", nil)).of(t)
	put := must(NewCallback("val", EventTriggerEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		return ctx.PutScalar("val", 1)
	})).of(t)
	m := newRegressionModel(t, &regression{})
	setOptimizer(t, m, "adam", 0.05)
	tr = must(NewTrainer(checkpointOptions(t.TempDir(), 3))).of(t)
	t.Cleanup(func() { tr.Close() })
	ok(t, tr.SetModel(m, regressionInput(t, 4, 20)))
	ok(t, tr.AddCallback(typo))
	ok(t, tr.AddCallback(put))
	wantError(t, tr.Run(), CodeNotFound, "no callback or monitor has put the scalar 'vall' by the end of epoch 1; the scalars put are: val")
}

// TestPredictorFromTheBestCheckpoint: a predictor of x alone, made from the
// MinSaver's file on a model not built yet, equals Restore + Infer with the
// labels, also from several goroutines at once. The C twin is
// predictor_from_the_best_checkpoint.
func TestPredictorFromTheBestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	vals := []float64{0, 1, 2, 3} // the best (lowest): epoch 1
	put := must(NewCallback("val", EventTriggerEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		return ctx.PutScalar("val", vals[ctx.EpochNum()])
	})).of(t)
	best := must(MinSaver("val", nil)).of(t)
	saver := must(ModelSaver(nil)).of(t)
	last, tr := trainRegression(t, checkpointOptions(dir, 3), "", best, saver, put)
	path := must(tr.BestCheckpoint("val")).of(t)

	xs, ys := regressionData(6)
	x := must(FromFloat32(xs, 6, 3)).of(t)
	defer x.Close()
	y := must(FromFloat32(ys, 6, 1)).of(t)
	defer y.Close()
	infer := func(m *Model) []float32 {
		outs := must(m.Infer([]*Tensor{x, y}, []string{"prediction"})).of(t)
		defer outs[0].Close()
		return must(outs[0].Float32s()).of(t)
	}
	ref := newRegressionModel(t, &regression{})
	must(ref.Restore(path, nil)).of(t)
	want := infer(ref)
	if reflect.DeepEqual(want, infer(last)) {
		t.Fatal("the best checkpoint (epoch 1) predicts as the last")
	}

	m := newRegressionModel(t, &regression{}) // not built: NewPredictor builds it
	p := must(NewPredictor(m, []string{"prediction"}, &PredictorOptions{Inputs: []string{"x"}, Checkpoint: path})).of(t)
	defer p.Close()
	done := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 10; i++ {
				outs, err := p.Predict(x)
				if err != nil {
					done <- err
					return
				}
				got, err := outs[0].Float32s()
				outs[0].Close()
				if err == nil && !reflect.DeepEqual(got, want) {
					err = errors.New("a prediction differs from Restore + Infer")
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		ok(t, <-done)
	}
	_, err := p.Predict(x, y)
	wantError(t, err, CodeInvalidArgument, "n_inputs is 2; the predictor takes 1 (x)")
	_, err = NewPredictor(m, []string{"prediction"}, &PredictorOptions{Inputs: []string{"z"}})
	wantError(t, err, CodeInvalidArgument, "the model has no input 'z'; its inputs: x, y")
	_, err = NewPredictor(m, nil, nil)
	wantError(t, err, CodeInvalidArgument, "n_outputs is 0")
	ok(t, p.Close())
	_, err = p.Predict(x)
	wantError(t, err, CodeInvalidArgument, "Predictor.Predict: use of closed Predictor")
}
