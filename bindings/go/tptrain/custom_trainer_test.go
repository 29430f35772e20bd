package tptrain

// Writing a trainer from Go: train ops and the GAN trainers, on a toy GAN (a
// linear generator "gen/" and a linear discriminator "discrim/",
// least-squares losses published as the outputs "g_loss" and "d_loss"):
//   - GANTrainer: every run_step is one hooked run that updates both nets;
//   - SeparateGANTrainer: the exact order of D and G runs (tensorpack's rule
//     simulated here), the global step moving on inside a run_step;
//   - a run_step of our own: a raw D run then a hooked G run advance the
//     global step once per run_step; running only "d_op" never changes gen/;
//   - a resume (momentum slots of both ops' optimizers) ends bit-identical;
//   - errors and panics of the tower function and of callbacks come out of
//     RunTrainOps as the same value; bad ops and options give errors naming
//     them.
// The C twin is tests/c/test_custom_trainer.c.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

const ganRows, ganBatch = 64, 8

// ganTensors collects the tensors a tower function makes (to close them)
// and the first error, after which every call gets nil tensors and fails.
type ganTensors struct {
	made []*Tensor
	err  error
}

func (g *ganTensors) add(x *Tensor, err error) *Tensor {
	if err != nil {
		if g.err == nil {
			g.err = err
		}
		return nil
	}
	g.made = append(g.made, x)
	return x
}

func (g *ganTensors) close() {
	for _, x := range g.made {
		x.Close()
	}
}

// ganTower is the toy GAN; inputs real, z: [B, 2]; ones, zeros: [B, 1].
// Without gLoss it does not publish "g_loss"; hook, if not nil, runs first
// (to fail or panic).
func ganTower(gLoss bool, hook func() error) func(tw *Tower, in []*Tensor) error {
	return func(tw *Tower, in []*Tensor) error {
		if hook != nil && !tw.IsBuilding() {
			if err := hook(); err != nil {
				return err
			}
		}
		var g ganTensors
		defer g.close()
		gw := g.add(tw.Variable("gen/w", []int64{2, 2}, nil))
		gb := g.add(tw.Variable("gen/b", []int64{2}, nil))
		dw := g.add(tw.Variable("discrim/w", []int64{2, 1}, nil))
		db := g.add(tw.Variable("discrim/b", []int64{1}, nil))
		fake := g.add(g.add(in[1].Matmul(gw)).Add(gb))
		dReal := g.add(g.add(in[0].Matmul(dw)).Add(db))
		dFake := g.add(g.add(fake.Matmul(dw)).Add(db))
		dLoss := g.add(g.add(MSELoss(dReal, in[2])).Add(g.add(MSELoss(dFake, in[3]))))
		gl := g.add(MSELoss(dFake, in[2]))
		if g.err != nil {
			return g.err
		}
		if err := tw.SetOutput("d_loss", dLoss); err != nil {
			return err
		}
		if gLoss {
			return tw.SetOutput("g_loss", gl)
		}
		return nil
	}
}

func newGANModel(t *testing.T, momentum bool, tower func(*Tower, []*Tensor) error) *Model {
	t.Helper()
	m := must(NewModel([]InputSpec{
		{Name: "real", Shape: []int64{-1, 2}},
		{Name: "z", Shape: []int64{-1, 2}},
		{Name: "ones", Shape: []int64{-1, 1}},
		{Name: "zeros", Shape: []int64{-1, 1}},
	}, tower)).of(t)
	t.Cleanup(func() { m.Close() })
	opt := setOptimizer(t, m, "sgd", 0.05)
	if momentum {
		ok(t, opt.Set("momentum", 0.9))
		ok(t, m.SetOptimizer(opt))
	}
	return m
}

func newGANInput(t *testing.T) *Input {
	t.Helper()
	return newGANInputBatch(t, ganBatch)
}

// newGANInputBatch is newGANInput with batches of batch rows.
func newGANInputBatch(t *testing.T, batch int64) *Input {
	t.Helper()
	real, z := make([]float32, 2*ganRows), make([]float32, 2*ganRows)
	ones, zeros := make([]float32, ganRows), make([]float32, ganRows)
	for i := 0; i < ganRows; i++ {
		real[2*i], real[2*i+1] = 1+0.01*float32(i), -0.5+0.02*float32(i%7)
		z[2*i], z[2*i+1] = float32((i*37)%11)/11-0.5, float32((i*53)%13)/13-0.5
		ones[i] = 1
	}
	var ts []*Tensor
	for _, c := range []struct {
		data []float32
		cols int64
	}{{real, 2}, {z, 2}, {ones, 1}, {zeros, 1}} {
		x := must(FromFloat32(c.data, ganRows, c.cols)).of(t)
		defer x.Close()
		ts = append(ts, x)
	}
	in := must(InputFromTensors(ts, batch, Sequential, 0)).of(t)
	t.Cleanup(func() { in.Close() }) // a no-op once a trainer has taken it
	return in
}

func ganTrainer(t *testing.T, steps int64) *Trainer {
	t.Helper()
	tr := must(NewTrainer(&TrainerOptions{MaxEpoch: 1, StepsPerEpoch: steps, Quiet: true, Progress: ProgressOff})).of(t)
	t.Cleanup(func() { tr.Close() })
	return tr
}

func sumOf(t *testing.T, m *Model, name string) float64 {
	t.Helper()
	v := must(m.Variable(name)).of(t)
	defer v.Close()
	s := 0.0
	for _, x := range must(v.Float32s()).of(t) {
		s += float64(x)
	}
	return s
}

// ganWatch notes, after every hooked run, which of the two nets changed:
// 'G', 'D', 'B'oth or '-'.
type ganWatch struct {
	m          *Model
	g, d       float64
	runs       strings.Builder
	beforeRuns int
}

func (w *ganWatch) add(t *testing.T, tr *Trainer) {
	t.Helper()
	ok(t, tr.AddCallback(must(NewCallback("watch", EventBeforeTrain|EventBeforeRun|EventAfterRun, nil,
		func(ctx *Context, e Event, _ *Record) error {
			switch e {
			case EventBeforeRun:
				w.beforeRuns++
				return nil
			case EventBeforeTrain:
				w.g, w.d = sumOf(t, w.m, "gen/w"), sumOf(t, w.m, "discrim/w")
				return nil
			}
			g, d := sumOf(t, w.m, "gen/w"), sumOf(t, w.m, "discrim/w")
			switch gc, dc := g != w.g, d != w.d; {
			case gc && dc:
				w.runs.WriteByte('B')
			case gc:
				w.runs.WriteByte('G')
			case dc:
				w.runs.WriteByte('D')
			default:
				w.runs.WriteByte('-')
			}
			w.g, w.d = g, d
			return nil
		})).of(t)))
}

func TestGANTrainerUpdatesBothNetsEveryStep(t *testing.T) {
	checkHandles(t)
	ok(t, ManualSeed(1))
	m := newGANModel(t, false, ganTower(true, nil))
	tr := ganTrainer(t, 6)
	ok(t, tr.SetGAN(m, newGANInput(t), nil))
	w := &ganWatch{m: m}
	w.add(t, tr)
	ok(t, tr.Run())
	if gs := tr.GlobalStep(); gs != 6 || w.beforeRuns != 6 {
		t.Errorf("global step %d, %d BEFORE_RUNs; want 6 and 6", gs, w.beforeRuns)
	}
	if got := w.runs.String(); got != "BBBBBB" {
		t.Errorf("runs %q, want BBBBBB (both nets every step)", got)
	}
	// both losses reach the monitors (moving summaries, put at the epoch's end)
	if _, step, err := tr.ScalarLatest("g_loss"); err != nil || step != 6 {
		t.Errorf("g_loss: step %d, %v; want step 6", step, err)
	}
	if v, _, err := tr.ScalarLatest("d_loss"); err != nil || !(v > 0) {
		t.Errorf("d_loss: %v, %v; want > 0", v, err)
	}
}

// separateGANRuns is tensorpack's SeparateGANTrainer.run_step, simulated:
// the runs of runSteps run_steps and the global step at the end.
func separateGANRuns(runSteps int, dPeriod, gPeriod int64) (string, int64) {
	var runs strings.Builder
	gs := int64(0)
	for s := 0; s < runSteps; s++ {
		if gs%dPeriod == 0 {
			runs.WriteByte('D')
			gs++
		}
		if gs%gPeriod == 0 {
			runs.WriteByte('G')
			gs++
		}
	}
	return runs.String(), gs
}

func TestSeparateGANTrainerFollowsThePeriods(t *testing.T) {
	checkHandles(t)
	for _, o := range []GANOptions{
		{Separate: true, DPeriod: 3},             // GPeriod 0: 1
		{Separate: true, DPeriod: 1, GPeriod: 2}, // explicit 1
		{Separate: true, GPeriod: 3, DOp: "d_op"},
	} {
		t.Run(fmt.Sprintf("DPeriod %d GPeriod %d", o.DPeriod, o.GPeriod), func(t *testing.T) {
			ok(t, ManualSeed(1))
			m := newGANModel(t, false, ganTower(true, nil))
			tr := ganTrainer(t, 7)
			ok(t, tr.SetGAN(m, newGANInput(t), &o))
			w := &ganWatch{m: m}
			w.add(t, tr)
			ok(t, tr.Run())
			dp, gp := o.DPeriod, o.GPeriod
			if dp == 0 {
				dp = 1
			}
			if gp == 0 {
				gp = 1
			}
			wantRuns, wantGS := separateGANRuns(7, dp, gp)
			if got := w.runs.String(); got != wantRuns {
				t.Errorf("runs %q, want %q", got, wantRuns)
			}
			if gs := tr.GlobalStep(); gs != wantGS || int64(w.beforeRuns) != wantGS {
				t.Errorf("global step %d, %d BEFORE_RUNs; want %d", gs, w.beforeRuns, wantGS)
			}
		})
	}
	if runs, gs := separateGANRuns(7, 3, 1); runs != "DGGDGGDGGDG" || gs != 11 {
		t.Errorf("the simulation gives %q, %d", runs, gs) // the rule itself, spelt out once
	}
}

func addGANOps(t *testing.T, m *Model) {
	t.Helper()
	ok(t, m.AddTrainOp(TrainOp{Name: "g_op", Cost: "g_loss", Scope: "gen/"}))
	ok(t, m.AddTrainOp(TrainOp{Name: "d_op", Cost: "d_loss", Scope: "discrim/"}))
}

func TestCustomRunStepRawAndHookedRuns(t *testing.T) {
	checkHandles(t)
	ok(t, ManualSeed(1))
	m := newGANModel(t, false, ganTower(true, nil))
	addGANOps(t, m)

	// raw D, then hooked G: one global step per run_step; both nets move, but
	// a hooked run sees G's change and D's raw one made before it
	tr := ganTrainer(t, 5)
	ok(t, tr.SetModel(m, newGANInput(t)))
	runSteps := 0
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		runSteps++
		before := ctx.GlobalStep()
		if err := ctx.RunTrainOpsRaw("d_op"); err != nil {
			return err
		}
		if ctx.GlobalStep() != before {
			return fmt.Errorf("a raw run moved the global step from %d to %d", before, ctx.GlobalStep())
		}
		return ctx.RunTrainOps("g_op")
	}))
	w := &ganWatch{m: m}
	w.add(t, tr)
	ok(t, tr.Run())
	if gs := tr.GlobalStep(); gs != 5 || w.beforeRuns != 5 || runSteps != 5 {
		t.Errorf("global step %d, %d BEFORE_RUNs, %d run_steps; want 5 each", gs, w.beforeRuns, runSteps)
	}
	if got := w.runs.String(); got != "BBBBB" {
		t.Errorf("runs %q, want BBBBB", got)
	}
	ok(t, tr.Close())

	// only D: G's variables never change
	g0, gb0 := sumOf(t, m, "gen/w"), sumOf(t, m, "gen/b")
	tr = ganTrainer(t, 4)
	ok(t, tr.SetModel(m, newGANInput(t)))
	ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.RunTrainOps("d_op") }))
	w2 := &ganWatch{m: m}
	w2.add(t, tr)
	ok(t, tr.Run())
	if got := w2.runs.String(); got != "DDDD" {
		t.Errorf("runs %q, want DDDD", got)
	}
	if g, gb := sumOf(t, m, "gen/w"), sumOf(t, m, "gen/b"); g != g0 || gb != gb0 {
		t.Errorf("gen/ moved under d_op alone: %v %v, was %v %v", g, gb, g0, gb0)
	}
}

// An op with an optimizer of its own: the caller keeps using the Optimizer.
func TestTrainOpOwnOptimizer(t *testing.T) {
	checkHandles(t)
	ok(t, ManualSeed(1))
	m := newGANModel(t, false, ganTower(true, nil))
	frozen := must(NewOptimizer("sgd")).of(t)
	defer frozen.Close()
	ok(t, frozen.Set("learning_rate", 0))
	ok(t, m.AddTrainOp(TrainOp{Name: "g_op", Cost: "g_loss", Scope: "gen/", Optimizer: frozen}))
	tr := ganTrainer(t, 3)
	ok(t, tr.SetGAN(m, newGANInput(t), nil)) // makes d_op, finds g_op
	w := &ganWatch{m: m}
	w.add(t, tr)
	ok(t, tr.Run())
	if got := w.runs.String(); got != "DDD" {
		t.Errorf("runs %q, want DDD (G's own optimizer has learning rate 0)", got)
	}
}

// ganRun trains steps GAN steps (momentum SGD), saving every 3 steps in dir;
// with resume it resumes from model-<resume> first. It returns the
// variables' sums.
func ganRun(t *testing.T, dir string, steps, resume int64) [4]float64 {
	t.Helper()
	ok(t, ManualSeed(2))
	m := newGANModel(t, true, ganTower(true, nil))
	tr := must(NewTrainer(&TrainerOptions{MaxEpoch: 1, StepsPerEpoch: steps, Logdir: dir, LogdirAction: LogdirKeep,
		Quiet: true, Progress: ProgressOff})).of(t)
	defer tr.Close()
	ok(t, tr.SetGAN(m, newGANInput(t), nil))
	ok(t, tr.AddCallback(must(ModelSaver(&ModelSaverOptions{EveryKSteps: 3, MaxToKeep: Unlimited})).of(t)))
	if resume > 0 {
		ok(t, tr.Resume(fmt.Sprintf("%s/model-%d", dir, resume)))
	}
	ok(t, tr.Run())
	var out [4]float64
	for i, name := range []string{"gen/w", "gen/b", "discrim/w", "discrim/b"} {
		out[i] = sumOf(t, m, name)
	}
	return out
}

func TestGANResumeIsExactWithBothOptimizers(t *testing.T) {
	checkHandles(t)
	dir := t.TempDir()
	whole := ganRun(t, dir, 9, 0)
	resumed := ganRun(t, dir, 9, 3) // from step 3: both momentum slots must come back
	if whole != resumed {
		t.Errorf("resumed %v, uninterrupted %v", resumed, whole)
	}
}

// Errors and panics come out of RunTrainOps as the same value, as from
// HookedStep.
func TestCustomRunStepErrorsComeBackUnchanged(t *testing.T) {
	checkHandles(t)
	type towerErr struct{ n int }
	boom := &towerErr{1}

	t.Run("tower error", func(t *testing.T) {
		fail := false
		m := newGANModel(t, false, ganTower(true, func() error {
			if fail {
				return fmt.Errorf("wrapped: %w", errors.New("the tower fails"))
			}
			return nil
		}))
		addGANOps(t, m)
		for _, hooked := range []bool{true, false} {
			tr := ganTrainer(t, 3)
			ok(t, tr.SetModel(m, newGANInput(t)))
			var fromOps error
			ok(t, tr.SetRunStep(func(ctx *Context) error {
				fail = ctx.LocalStep() == 1
				if hooked {
					fromOps = ctx.RunTrainOps("g_op", "d_op")
				} else {
					fromOps = ctx.RunTrainOpsRaw("g_op", "d_op")
				}
				return fromOps
			}))
			err := tr.Run()
			if err == nil || err != fromOps || err.Error() != "wrapped: the tower fails" {
				t.Errorf("hooked %v: Run returned %#v, RunTrainOps %#v; want the tower's error", hooked, err, fromOps)
			}
			fail = false
		}
	})

	t.Run("tower panic", func(t *testing.T) {
		m := newGANModel(t, false, ganTower(true, func() error { panic(boom) }))
		addGANOps(t, m)
		tr := ganTrainer(t, 2)
		ok(t, tr.SetModel(m, newGANInput(t)))
		var got any
		ok(t, tr.SetRunStep(func(ctx *Context) (err error) {
			defer func() {
				if got = recover(); got != nil {
					err = Stop("recovered")
				}
			}()
			return ctx.RunTrainOpsRaw("d_op")
		}))
		ok(t, tr.Run()) // run_step recovered: the panic is not raised again
		if got != boom {
			t.Errorf("run_step recovered %#v, want the tower's %#v", got, boom)
		}
		if reason, stopped := tr.StopReason(); !stopped || reason != "recovered" {
			t.Errorf("StopReason() = %q, %v", reason, stopped)
		}
	})

	t.Run("tower panic through Run", func(t *testing.T) {
		m := newGANModel(t, false, ganTower(true, func() error { panic(boom) }))
		tr := ganTrainer(t, 2)
		ok(t, tr.SetGAN(m, newGANInput(t), nil))
		ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.RunTrainOps("g_op") }))
		defer func() {
			if v := recover(); v != boom {
				t.Errorf("Run panicked with %#v, want %#v", v, boom)
			}
		}()
		_ = tr.Run()
		t.Error("Run did not panic")
	})

	t.Run("callback error and stop", func(t *testing.T) {
		m := newGANModel(t, false, ganTower(true, nil))
		cbErr := &Error{Code: CodeState, Message: "the callback's own (tpt_trainer_set_run_step)"}
		for _, want := range []error{cbErr, Stop("enough")} {
			tr := ganTrainer(t, 4)
			ok(t, tr.SetGAN(m, newGANInput(t), nil))
			ok(t, tr.AddCallback(must(NewCallback("after", EventAfterRun, nil, func(ctx *Context, _ Event, _ *Record) error {
				if ctx.GlobalStep() == 2 {
					return want
				}
				return nil
			})).of(t)))
			var fromOps error
			ok(t, tr.SetRunStep(func(ctx *Context) error {
				fromOps = ctx.RunTrainOps("d_op", "g_op")
				return fromOps
			}))
			err := tr.Run()
			if fromOps != want {
				t.Errorf("RunTrainOps returned %#v, want the callback's %#v", fromOps, want)
			}
			if _, stop := want.(*StopError); stop {
				if reason, stopped := tr.StopReason(); err != nil || !stopped || reason != "enough" {
					t.Errorf("Run() = %v, StopReason() = %q, %v", err, reason, stopped)
				}
			} else if err != cbErr || cbErr.Message != "the callback's own (tpt_trainer_set_run_step)" {
				t.Errorf("Run() = %#v, want the callback's unchanged %#v", err, cbErr)
			}
		}
	})
}

func TestTrainOpErrors(t *testing.T) {
	checkHandles(t)
	m := newGANModel(t, false, ganTower(true, nil))
	wantError(t, m.AddTrainOp(TrainOp{}), CodeInvalidArgument, "argument 'TrainOp.Name' is empty")
	wantError(t, m.AddTrainOp(TrainOp{Name: "a\x00b"}), CodeInvalidArgument, `Model.AddTrainOp: TrainOp.Name is "a\x00b": it holds a NUL byte`)
	wantError(t, m.AddTrainOp(TrainOp{Name: "a", Scope: "x\x00"}), CodeInvalidArgument, "TrainOp.Scope is")
	ok(t, m.AddTrainOp(TrainOp{Name: "a", Cost: "d_loss", Scope: "nothing/"}))
	wantError(t, m.AddTrainOp(TrainOp{Name: "a"}), CodeInvalidArgument, "a train op 'a' already")
	mine := must(NewOptimizer("adam")).of(t)
	ok(t, m.AddTrainOp(TrainOp{Name: "b", Cost: "d_loss", Optimizer: mine}))
	wantError(t, m.AddTrainOp(TrainOp{Name: "c", Optimizer: mine}), CodeInvalidArgument, "TrainOp.Optimizer is train op 'b''s already")
	ok(t, mine.Close())
	wantError(t, m.AddTrainOp(TrainOp{Name: "c", Optimizer: mine}), CodeInvalidArgument, "use of closed Optimizer")
	models := must(NewOptimizer("sgd")).of(t)
	defer models.Close()
	ok(t, m.SetOptimizer(models))
	e := wantError(t, m.AddTrainOp(TrainOp{Name: "c", Optimizer: models}), CodeInvalidArgument, "TrainOp.Optimizer is the model's")
	if e != nil && !strings.Contains(e.Message, "or nil (a copy of the model's)") {
		t.Errorf("message %q names NULL", e.Message)
	}
	var nilModel *Model
	wantError(t, nilModel.AddTrainOp(TrainOp{Name: "x"}), CodeInvalidArgument, "Model.AddTrainOp: the Model is nil")

	// an op whose scope matches nothing fails when training starts
	tr := ganTrainer(t, 2)
	ok(t, tr.SetModel(m, newGANInput(t)))
	ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.RunTrainOps("b") }))
	wantError(t, tr.Run(), CodeInvalidArgument, "train op 'a': no trainable variable's name starts with 'nothing/'")

	// unknown ops, no ops, a NUL; outside run_step; without a model
	m = newGANModel(t, false, ganTower(true, nil))
	for _, c := range []struct {
		names  []string
		code   Code
		substr string
	}{
		{[]string{"d_op", "nope"}, CodeInvalidArgument, "the model has no train op 'nope' (it has 'g_op', 'd_op')"},
		{nil, CodeInvalidArgument, "Context.RunTrainOps: no train op to run"},
		{[]string{""}, CodeInvalidArgument, "argument 'names[0]' is empty"},
		{[]string{"d_op", "g\x00op"}, CodeInvalidArgument, `Context.RunTrainOps: names[1] is "g\x00op": it holds a NUL byte`},
	} {
		tr := ganTrainer(t, 2)
		ok(t, tr.SetGAN(m, newGANInput(t), nil))
		var fromOps error
		ok(t, tr.SetRunStep(func(ctx *Context) error {
			fromOps = ctx.RunTrainOps(c.names...)
			return fromOps
		}))
		err := tr.Run()
		wantError(t, err, c.code, c.substr)
		if err != fromOps {
			t.Errorf("Run returned %#v, RunTrainOps %#v", err, fromOps)
		}
	}
	tr = ganTrainer(t, 2)
	ok(t, tr.SetGAN(m, newGANInput(t), nil))
	var outside error
	ok(t, tr.AddCallback(must(NewCallback("early", EventBeforeTrain, nil, func(ctx *Context, _ Event, _ *Record) error {
		outside = ctx.RunTrainOpsRaw("d_op")
		return nil
	})).of(t)))
	ok(t, tr.Run())
	wantError(t, outside, CodeState, "train ops run inside run_step (Trainer.SetRunStep)")
	tr = ganTrainer(t, 1)
	ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.RunTrainOps("d_op") }))
	wantError(t, tr.Run(), CodeState, "the trainer has no model (Trainer.SetModel or Trainer.SetGAN)")

	// the async strategy does not run train ops
	tr = ganTrainer(t, 1)
	ok(t, tr.SetTowers(m, newGANInput(t), &TowersOptions{Strategy: StrategyAsync}))
	ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.RunTrainOps("d_op") }))
	wantError(t, tr.Run(), CodeUnsupported, "the async strategy does not run train ops")

	// a missing output
	m = newGANModel(t, false, ganTower(false, nil))
	tr = ganTrainer(t, 2)
	ok(t, tr.SetGAN(m, newGANInput(t), nil))
	e = wantError(t, tr.Run(), CodeState, "train op 'g_op'")
	if e != nil && !strings.Contains(e.Message, "did not set the output 'g_loss'") {
		t.Errorf("message %q does not name the output", e.Message)
	}
}

func TestGANOptionsErrors(t *testing.T) {
	checkHandles(t)
	m := newGANModel(t, false, ganTower(true, nil))
	for _, c := range []struct {
		o      GANOptions
		substr string
	}{
		{GANOptions{Separate: true, DPeriod: 2, GPeriod: 3}, "one of GANOptions.DPeriod and GPeriod must be 1 (they are 2 and 3)"},
		{GANOptions{Separate: true, DPeriod: -1}, "Trainer.SetGAN: GANOptions.DPeriod is -1: it must be >= 1 (0: 1)"},
		{GANOptions{Separate: true, GPeriod: -2}, "Trainer.SetGAN: GANOptions.GPeriod is -2"},
		{GANOptions{DPeriod: 3}, "GANOptions.DPeriod is 3 but Separate is false"},
		{GANOptions{GOp: "same", DOp: "same"}, "two different names (GANOptions.GOp 'same', GANOptions.DOp 'same')"},
		{GANOptions{GOp: "d_op"}, "(GANOptions.GOp 'd_op', GANOptions.DOp 'd_op')"},
		{GANOptions{DOp: "d\x00"}, `GANOptions.DOp is "d\x00": it holds a NUL byte`},
	} {
		// SetGAN takes the input, also when it fails.
		tr := ganTrainer(t, 2)
		in := newGANInput(t)
		wantError(t, tr.SetGAN(m, in, &c.o), CodeInvalidArgument, c.substr)
		wantError(t, tr.SetModel(m, in), CodeInvalidArgument, "the Input was closed or already given away")
	}
	tr := ganTrainer(t, 2)
	wantError(t, tr.SetGAN(nil, newGANInput(t), nil), CodeInvalidArgument, "the Model is nil")
	wantError(t, tr.SetGAN(m, nil, nil), CodeInvalidArgument, "Trainer.SetGAN: the Input is nil")
	ok(t, tr.Close())
	wantError(t, tr.SetGAN(m, newGANInput(t), nil), CodeInvalidArgument, "Trainer.SetGAN: use of closed Trainer")
	// periods of 1 (or 0) are fine without Separate: GANTrainer
	tr = ganTrainer(t, 1)
	ok(t, tr.SetGAN(m, newGANInput(t), &GANOptions{DPeriod: 1, GPeriod: 0}))
	ok(t, tr.Run())
}

// ganVarNames and ganVarShapes are the toy GAN's variables.
var (
	ganVarNames  = []string{"gen/w", "gen/b", "discrim/w", "discrim/b"}
	ganVarShapes = [][]int64{{2, 2}, {2}, {2, 1}, {1}}
)

// ganVars returns the values of the toy GAN's variables, in ganVarNames'
// order.
func ganVars(t *testing.T, m *Model) [][]float32 {
	t.Helper()
	out := make([][]float32, len(ganVarNames))
	for i, name := range ganVarNames {
		v := must(m.Variable(name)).of(t)
		out[i] = must(v.Float32s()).of(t)
		v.Close()
	}
	return out
}

// snapshotAtStart returns the model's variables as they are when training
// starts (the model is built by then), filled in by a callback of tr.
func snapshotAtStart(t *testing.T, tr *Trainer, m *Model) *[][]float32 {
	t.Helper()
	var at [][]float32
	ok(t, tr.AddCallback(must(NewCallback("snapshot", EventBeforeTrain, nil, func(*Context, Event, *Record) error {
		at = ganVars(t, m)
		return nil
	})).of(t)))
	return &at
}

// changed reports, for each of ganVarNames, whether it differs between a
// and b.
func changed(a, b [][]float32) []bool {
	out := make([]bool, len(a))
	for i := range a {
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				out[i] = true
			}
		}
	}
	return out
}

func TestSetTrainOpsTrainsOnlyTheirVariables(t *testing.T) {
	checkHandles(t)
	for _, c := range []struct {
		name   string
		towers *TowersOptions
	}{
		{"simple", nil},
		{"replicated", &TowersOptions{Towers: 2}},
		{"parameter server", &TowersOptions{Strategy: StrategyParameterServer, Towers: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok(t, ManualSeed(1))
			m := newGANModel(t, false, ganTower(true, nil))
			addGANOps(t, m)
			tr := ganTrainer(t, 4)
			if c.towers != nil {
				ok(t, tr.SetTowers(m, newGANInput(t), c.towers))
			} else {
				ok(t, tr.SetModel(m, newGANInput(t)))
			}
			ok(t, tr.SetTrainOps("d_op"))
			at := snapshotAtStart(t, tr, m)
			w := &ganWatch{m: m}
			w.add(t, tr)
			ok(t, tr.Run())
			if gs := tr.GlobalStep(); gs != 4 || w.beforeRuns != 4 {
				t.Errorf("global step %d, %d BEFORE_RUNs; want 4 and 4 (one hooked run per step)", gs, w.beforeRuns)
			}
			if got := w.runs.String(); got != "DDDD" {
				t.Errorf("runs %q, want DDDD", got)
			}
			if got, want := fmt.Sprint(changed(*at, ganVars(t, m))), "[false false true true]"; got != want {
				t.Errorf("changed %v = %s, want %s (discrim/ only)", ganVarNames, got, want)
			}
			// a hooked run publishes the tower's outputs: d_loss is summarised
			if v, step, err := tr.ScalarLatest("d_loss"); err != nil || step != 4 || !(v > 0) {
				t.Errorf("d_loss: %v at step %d, %v; want > 0 at step 4", v, step, err)
			}
		})
	}

	// both ops, after SetGAN: they replace the GAN's run_step
	ok(t, ManualSeed(1))
	m := newGANModel(t, false, ganTower(true, nil))
	tr := ganTrainer(t, 3)
	ok(t, tr.SetGAN(m, newGANInput(t), &GANOptions{Separate: true, DPeriod: 2}))
	ok(t, tr.SetTrainOps("g_op"))
	w := &ganWatch{m: m}
	w.add(t, tr)
	ok(t, tr.Run())
	if got := w.runs.String(); got != "GGG" {
		t.Errorf("runs %q, want GGG (SetTrainOps replaces the GAN's run_step)", got)
	}
}

func TestSetTrainOpsErrors(t *testing.T) {
	checkHandles(t)
	m := newGANModel(t, false, ganTower(true, nil))
	tr := ganTrainer(t, 2)
	wantError(t, tr.SetTrainOps("d_op"), CodeState,
		"the trainer has no model yet (Trainer.SetModel, Trainer.SetTowers or Trainer.SetGAN first)")
	ok(t, tr.SetModel(m, newGANInput(t)))
	wantError(t, tr.SetTrainOps("d_op"), CodeInvalidArgument, "names[0] is 'd_op', not a train op of the model (it has none: Model.AddTrainOp)")
	addGANOps(t, m)
	for _, c := range []struct {
		names  []string
		substr string
	}{
		{[]string{"d_op", "nope"}, "names[1] is 'nope', not a train op of the model (it has 'g_op', 'd_op')"},
		{nil, "Trainer.SetTrainOps: no train op: give their names"},
		{[]string{""}, "argument 'names[0]' is empty"},
		{[]string{"g\x00op"}, `Trainer.SetTrainOps: names[0] is "g\x00op": it holds a NUL byte`},
	} {
		wantError(t, tr.SetTrainOps(c.names...), CodeInvalidArgument, c.substr)
	}
	// the failed calls changed nothing
	ok(t, tr.SetTrainOps("g_op", "d_op"))
	ok(t, tr.Run())
	if gs := tr.GlobalStep(); gs != 2 {
		t.Errorf("global step %d, want 2", gs)
	}
	wantError(t, tr.SetTrainOps("d_op"), CodeState, "the trainer has already run")
	ok(t, tr.Close())
	wantError(t, tr.SetTrainOps("d_op"), CodeInvalidArgument, "Trainer.SetTrainOps: use of closed Trainer")

	// the async strategy does not run train ops: refused when they are set
	tr = ganTrainer(t, 2)
	ok(t, tr.SetTowers(m, newGANInput(t), &TowersOptions{Strategy: StrategyAsync}))
	wantError(t, tr.SetTrainOps("d_op"), CodeUnsupported, "strategy (async towers) does not run train ops")
}

// MultiGPUGANTrainer: 2 towers of 8 rows each train as one tower of 16 rows
// (each op's cost averaged over the towers), with both strategies, and
// SeparateGANTrainer's periods still hold.
func TestGANTrainerWithTowers(t *testing.T) {
	checkHandles(t)
	// the reference: one tower, batches of 16, from the same variables
	ok(t, ManualSeed(3))
	ref := newGANModel(t, false, ganTower(true, nil))
	ok(t, ref.Build())
	start := ganVars(t, ref)
	tr := ganTrainer(t, 4)
	ok(t, tr.SetGAN(ref, newGANInputBatch(t, 2*ganBatch), nil))
	ok(t, tr.Run())
	want := ganVars(t, ref)

	for _, s := range []Strategy{StrategyReplicated, StrategyParameterServer} {
		t.Run(s.String(), func(t *testing.T) {
			m := newGANModel(t, false, ganTower(true, nil))
			ok(t, m.Build())
			for i, name := range ganVarNames {
				v := must(FromFloat32(start[i], ganVarShapes[i]...)).of(t)
				ok(t, m.SetVariable(name, v))
				v.Close()
			}
			tr := ganTrainer(t, 4)
			ok(t, tr.SetGAN(m, newGANInput(t), &GANOptions{Towers: &TowersOptions{Strategy: s, Towers: 2}}))
			w := &ganWatch{m: m}
			w.add(t, tr)
			ok(t, tr.Run())
			if gs := tr.GlobalStep(); gs != 4 || w.beforeRuns != 4 {
				t.Errorf("global step %d, %d BEFORE_RUNs; want 4 and 4", gs, w.beforeRuns)
			}
			if got := w.runs.String(); got != "BBBB" {
				t.Errorf("runs %q, want BBBB (both nets every step)", got)
			}
			got := ganVars(t, m)
			for i := range got {
				for j := range got[i] {
					if d := math.Abs(float64(got[i][j] - want[i][j])); d > 1e-5*(1+math.Abs(float64(want[i][j]))) {
						t.Errorf("%s[%d] = %v, one tower of 16 rows gives %v", ganVarNames[i], j, got[i][j], want[i][j])
					}
				}
			}
			for _, name := range []string{"g_loss", "d_loss"} {
				if v, step, err := tr.ScalarLatest(name); err != nil || step != 4 || !(v > 0) {
					t.Errorf("%s: %v at step %d, %v; want > 0 at step 4", name, v, step, err)
				}
			}
		})
	}

	t.Run("separate", func(t *testing.T) {
		ok(t, ManualSeed(1))
		m := newGANModel(t, false, ganTower(true, nil))
		tr := ganTrainer(t, 5)
		ok(t, tr.SetGAN(m, newGANInput(t), &GANOptions{Separate: true, DPeriod: 2, Towers: &TowersOptions{}}))
		w := &ganWatch{m: m}
		w.add(t, tr)
		ok(t, tr.Run())
		wantRuns, wantGS := separateGANRuns(5, 2, 1)
		if got := w.runs.String(); got != wantRuns {
			t.Errorf("runs %q, want %q", got, wantRuns)
		}
		if gs := tr.GlobalStep(); gs != wantGS {
			t.Errorf("global step %d, want %d", gs, wantGS)
		}
	})

	t.Run("errors", func(t *testing.T) {
		m := newGANModel(t, false, ganTower(true, nil))
		for _, c := range []struct {
			towers TowersOptions
			code   Code
			substr string
		}{
			{TowersOptions{Strategy: StrategyAsync}, CodeUnsupported, "the GAN trainers run on the replicated or the parameter-server strategy, not the async one"},
			{TowersOptions{Towers: 300}, CodeInvalidArgument, "GANOptions.Towers.Towers is 300: it must be in [1, 256]"},
			{TowersOptions{Towers: 3, Devices: []string{"cpu", "cpu"}}, CodeInvalidArgument,
				"Trainer.SetGAN: GANOptions.Towers.Towers is 3 but Devices has 2 entries"},
			{TowersOptions{Devices: []string{"cpu", "nodevice"}}, CodeInvalidArgument, `GANOptions.Towers.Devices[1] is "nodevice"`},
		} {
			tr := ganTrainer(t, 1)
			towers := c.towers
			e := wantError(t, tr.SetGAN(m, newGANInput(t), &GANOptions{Towers: &towers}), c.code, c.substr)
			if e != nil && strings.Contains(e.Message, "options->") {
				t.Errorf("message %q names a C field", e.Message)
			}
		}
	})
}
