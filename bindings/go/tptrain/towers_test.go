package tptrain

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The towers of test_towers.c, through the Go binding. Tower functions run
// on the library's threads, several at once: what they record is guarded,
// and they report with t.Error, never t.Fatal.

const (
	towerRows     = 320
	towerFeatures = 4
	towerHidden   = 8
)

// towersData is test_towers.c's data: towerRows rows in order, in batches
// of batch (so the towers' batches of a step, concatenated, are the simple
// trainer's batch of towers x batch rows).
func towersData(t *testing.T, batch int64) *DataFlow {
	t.Helper()
	xs := make([]float32, towerRows*towerFeatures)
	ys := make([]float32, towerRows)
	for i := 0; i < towerRows; i++ {
		s := 0.0
		for j := 0; j < towerFeatures; j++ {
			xs[i*towerFeatures+j] = float32(math.Sin(0.37*float64(i) + 1.3*float64(j)))
			s += float64(j+1) * float64(xs[i*towerFeatures+j])
		}
		ys[i] = float32(0.5*s + 0.1*math.Cos(0.11*float64(i)))
	}
	x := must(FromFloat32(xs, towerRows, towerFeatures)).of(t)
	defer closeT(t, x)
	y := must(FromFloat32(ys, towerRows, 1)).of(t)
	defer closeT(t, y)
	rows := must(DataFlowFromTensors([]*Tensor{x, y}, Sequential)).of(t)
	defer rows.Close()
	b := must(rows.Batch(batch, DropRemainder)).of(t)
	t.Cleanup(func() { b.Close() })
	return b
}

// towersTower is test_towers.c's tower function: relu(fc0(x)) w1, its mean
// squared error to y. hook, if not nil, runs in the training calls after the
// cost is set, and its result is the call's.
func towersTower(hook func(tw *Tower) error) func(tw *Tower, in []*Tensor) error {
	return towersTowerL2(0, hook)
}

// towersTowerL2 is towersTower with l2 x the L2 term of fc0/W and w1
// (RegularizeL2) added to the cost; 0: none.
func towersTowerL2(l2 float64, hook func(tw *Tower) error) func(tw *Tower, in []*Tensor) error {
	return func(tw *Tower, in []*Tensor) error {
		h, err := tw.FC("fc0", in[0], towerHidden, &LayerOptions{Activation: ActReLU})
		if err != nil {
			return err
		}
		defer h.Close()
		w, err := tw.Variable("w1", []int64{towerHidden, 1}, nil)
		if err != nil {
			return err
		}
		defer w.Close()
		y, err := h.Matmul(w)
		if err != nil {
			return err
		}
		defer y.Close()
		cost, err := MSELoss(y, in[1])
		if err != nil {
			return err
		}
		defer cost.Close()
		if l2 > 0 {
			reg, err := tw.RegularizeL2("W$|w1$", l2)
			if err != nil {
				return err
			}
			defer reg.Close()
			if cost, err = cost.Add(reg); err != nil {
				return err
			}
			defer cost.Close()
		}
		if err := tw.SetCost(cost); err != nil {
			return err
		}
		if hook == nil || tw.IsBuilding() || !tw.IsTraining() {
			return nil
		}
		return hook(tw)
	}
}

func towersTowerOf(r towersRun) func(tw *Tower, in []*Tensor) error {
	if r.tower != nil {
		return r.tower
	}
	return towersTower(r.hook)
}

// towersRun says how trainTowers makes its trainer.
type towersRun struct {
	towers    *TowersOptions // nil: the simple trainer
	setTowers bool           // Trainer.SetTowers (else a TrainConfig with a DataFlow)
	batch     int64
	steps     int64 // 0: StepsPerEpoch from the input
	lr        float64
	momentum  float64
	hook      func(tw *Tower) error
	tower     func(tw *Tower, in []*Tensor) error // nil: towersTower(hook)
}

// newTowersTrainer seeds LibTorch (variables are made at Run, in the build
// call) and makes a model and its trainer for one epoch.
func newTowersTrainer(t *testing.T, r towersRun) (*Trainer, *Model) {
	t.Helper()
	ok(t, ManualSeed(3))
	m := must(NewModel([]InputSpec{
		{Name: "x", Shape: []int64{-1, towerFeatures}},
		{Name: "y", Shape: []int64{-1, 1}},
	}, towersTowerOf(r))).of(t)
	t.Cleanup(func() { m.Close() })
	opt := setOptimizer(t, m, "sgd", r.lr)
	ok(t, opt.Set("momentum", r.momentum))
	steps := r.steps
	if steps == 0 {
		steps = -1
	}
	o := quietOptions(1, 1, steps)
	df := towersData(t, r.batch)
	var tr *Trainer
	if r.setTowers {
		tr = must(NewTrainer(o)).of(t)
		in := must(InputFromDataFlow(df, nil)).of(t)
		if r.towers != nil {
			ok(t, tr.SetTowers(m, in, r.towers))
		} else {
			ok(t, tr.SetModel(m, in))
		}
	} else {
		tr = must(NewTrainerFromConfig(&TrainConfig{Options: o, Model: m, DataFlow: df, Towers: r.towers})).of(t)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	return tr, m
}

func trainTowers(t *testing.T, r towersRun) *Model {
	t.Helper()
	tr, m := newTowersTrainer(t, r)
	ok(t, tr.Run())
	if g, want := tr.GlobalStep(), r.steps; g != want {
		t.Errorf("GlobalStep() = %d, want %d", g, want)
	}
	return m
}

// towersDistance is max |a - b| / max |b| over the variables of b.
func towersDistance(t *testing.T, a, b *Model) float64 {
	t.Helper()
	names := must(b.VariableNames()).of(t)
	if len(names) != 3 {
		t.Fatalf("variables %q, want fc0/W, fc0/b and w1", names)
	}
	worst := 0.0
	for _, name := range names {
		va := must(a.Variable(name)).of(t)
		x := must(va.Float32s()).of(t)
		closeT(t, va)
		vb := must(b.Variable(name)).of(t)
		y := must(vb.Float32s()).of(t)
		closeT(t, vb)
		if len(x) != len(y) {
			t.Fatalf("%s has %d and %d values", name, len(x), len(y))
		}
		diff, scale := 0.0, 1e-12
		for i := range x {
			diff = math.Max(diff, math.Abs(float64(x[i])-float64(y[i])))
			scale = math.Max(scale, math.Abs(float64(y[i])))
		}
		worst = math.Max(worst, diff/scale)
	}
	return worst
}

func TestTowersEqualOneTowerOfTheWholeBatch(t *testing.T) {
	checkHandles(t)
	const steps = 20
	// One tower fed batches of 8 rows: what 2 towers of 4 rows must give.
	ref := trainTowers(t, towersRun{batch: 8, steps: steps, lr: 0.05, momentum: 0.9})
	for _, c := range []struct {
		name string
		run  towersRun
	}{
		{"replicated, TrainConfig", towersRun{towers: &TowersOptions{}}},
		{"replicated, SetTowers", towersRun{towers: &TowersOptions{Towers: 2}, setTowers: true}},
		{"parameter server, TrainConfig", towersRun{towers: &TowersOptions{Strategy: StrategyParameterServer}}},
		{"parameter server, SetTowers", towersRun{towers: &TowersOptions{Strategy: StrategyParameterServer, Devices: []string{"cpu", "cpu"}}, setTowers: true}},
		// Summed gradients are twice the average: half the learning rate
		// makes the same updates (SGD with momentum is linear in them).
		{"replicated, summed, half the learning rate", towersRun{towers: &TowersOptions{SumGradients: true}, lr: 0.025}},
	} {
		r := c.run
		r.batch, r.steps, r.momentum = 4, steps, 0.9
		if r.lr == 0 {
			r.lr = 0.05
		}
		m := trainTowers(t, r)
		if d := towersDistance(t, m, ref); !(d <= 1e-5) {
			t.Errorf("%s: relative distance %g from one tower of the whole batch", c.name, d)
		}
	}
	// Async: each tower's gradient times 1/2 applied on its own; with plain
	// SGD that is the parameter server's update.
	ps := trainTowers(t, towersRun{towers: &TowersOptions{Strategy: StrategyParameterServer}, batch: 4, steps: steps, lr: 0.05})
	async := trainTowers(t, towersRun{towers: &TowersOptions{Strategy: StrategyAsync}, batch: 4, steps: steps, lr: 0.05})
	if d := towersDistance(t, async, ps); !(d <= 1e-5) {
		t.Errorf("async vs parameter server with plain SGD: relative distance %g", d)
	}
	// And one async tower is the simple trainer.
	async1 := trainTowers(t, towersRun{towers: &TowersOptions{Strategy: StrategyAsync, Towers: 1}, batch: 4, steps: steps, lr: 0.05})
	simple := trainTowers(t, towersRun{batch: 4, steps: steps, lr: 0.05, setTowers: true})
	if d := towersDistance(t, async1, simple); d != 0 {
		t.Errorf("one async tower vs the simple trainer: relative distance %g, want 0", d)
	}
}

// The reduce overlapped with the backward passes in buckets of 1 MiB (the
// default: every variable in one bucket), in buckets of 16 bytes (every
// variable a bucket of its own or more), and after the backward passes: the
// same sums in the same order, so the same variables bit for bit.
// The L2 term of RegularizeL2 is computed from each tower's own variables,
// so its gradient is in every tower's update: the towers equal one tower on
// the concatenated batches.
func TestTowersL2TermReachesEveryTower(t *testing.T) {
	l2Tower := towersTowerL2(0.05, nil)
	ref := trainTowers(t, towersRun{batch: 8, steps: 20, lr: 0.05, momentum: 0.9, tower: l2Tower})
	for _, s := range []Strategy{StrategyReplicated, StrategyParameterServer} {
		m := trainTowers(t, towersRun{towers: &TowersOptions{Strategy: s, Towers: 2}, batch: 4, steps: 20, lr: 0.05,
			momentum: 0.9, tower: l2Tower})
		if d := towersDistance(t, m, ref); !(d <= 1e-5) {
			t.Errorf("%v with an L2 term: relative distance %g from 1 tower", s, d)
		}
	}
}

// At the first step every tower has the same weights: with AverageScalars
// the reported cost is the towers' mean, one tower's cost on their batches
// concatenated; by default it is tower 0's.
func TestTowersAverageScalars(t *testing.T) {
	firstCost := func(towers *TowersOptions, batch int64) float64 {
		tr, _ := newTowersTrainer(t, towersRun{towers: towers, batch: batch, steps: 2, lr: 0.05})
		var costs []float64
		ok(t, tr.AddCallback(costLog(t, &costs)))
		ok(t, tr.Run())
		if len(costs) != 2 {
			t.Fatalf("%d costs recorded, want 2", len(costs))
		}
		return costs[0]
	}
	one := firstCost(nil, 8)
	tower0 := firstCost(&TowersOptions{Strategy: StrategyReplicated, Towers: 2}, 4)
	mean := firstCost(&TowersOptions{Strategy: StrategyReplicated, Towers: 2, AverageScalars: true}, 4)
	if math.Abs(mean-one) > 1e-6*math.Abs(one) {
		t.Errorf("the towers' mean cost %v is not one tower's %v", mean, one)
	}
	if math.Abs(tower0-one) <= 1e-6*math.Abs(one) {
		t.Errorf("tower 0's cost %v equals the mean %v: the batches do not tell them apart", tower0, one)
	}
}

func TestTowersOverlapAndBucketsAreBitIdentical(t *testing.T) {
	checkHandles(t)
	const steps = 20
	for _, n := range []int{2, 4} {
		ref := trainTowers(t, towersRun{batch: 4 * int64(n), steps: steps, lr: 0.05, momentum: 0.9})
		for _, strategy := range []Strategy{StrategyReplicated, StrategyParameterServer} {
			run := func(o TowersOptions, setTowers bool) (*Model, []int32) {
				// The training calls of each tower.
				calls := make([]atomic.Int32, n)
				hook := func(tw *Tower) error {
					if k := tw.Index(); k >= 0 && k < n {
						calls[k].Add(1)
						return nil
					}
					return fmt.Errorf("tower index %d", tw.Index())
				}
				o.Strategy, o.Towers = strategy, n
				m := trainTowers(t, towersRun{towers: &o, setTowers: setTowers, batch: 4, steps: steps,
					lr: 0.05, momentum: 0.9, hook: hook})
				counts := make([]int32, n)
				for k := range calls {
					counts[k] = calls[k].Load()
				}
				return m, counts
			}
			first, _ := run(TowersOptions{}, false)
			// Close to one tower of the whole batch, but not the same run by accident.
			if d := towersDistance(t, first, ref); !(d <= 1e-5 && d > 0) {
				t.Errorf("%v, %d towers: relative distance %g from one tower of the whole batch", strategy, n, d)
			}
			for _, c := range []struct {
				opts      TowersOptions
				setTowers bool
			}{
				{TowersOptions{NoOverlap: true}, false},
				{TowersOptions{NoOverlap: true}, true},
				{TowersOptions{BucketBytes: 16}, false},
				{TowersOptions{BucketBytes: 16}, true},
				{TowersOptions{NoOverlap: true, BucketBytes: 16}, true},
				{TowersOptions{BucketBytes: 1 << 20}, false},
			} {
				m, calls := run(c.opts, c.setTowers)
				what := fmt.Sprintf("%v, %d towers, %+v (SetTowers %v)", strategy, n, c.opts, c.setTowers)
				if d := towersDistance(t, m, first); d != 0 {
					t.Errorf("%s: relative distance %g from the default towers, want 0", what, d)
				}
				// Every tower ran every step.
				for k, c := range calls {
					if c != steps {
						t.Errorf("%s: tower %d made %d training calls, want %d", what, k, c, steps)
					}
				}
			}
		}
	}
}

func TestTowerIndicesAndConcurrency(t *testing.T) {
	checkHandles(t)
	var mu sync.Mutex
	calls := map[int]int{}
	names := map[int]string{}
	devices := map[int]string{}
	// The first training call of each tower waits for the other's: the two
	// run at the same time.
	arrived := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var first [2]sync.Once
	hook := func(tw *Tower) error {
		k := tw.Index()
		mu.Lock()
		calls[k]++
		names[k] = tw.Name()
		devices[k] = tw.Device()
		mu.Unlock()
		if k != 0 && k != 1 {
			return fmt.Errorf("tower index %d", k)
		}
		first[k].Do(func() {
			close(arrived[k])
			select {
			case <-arrived[1-k]:
			case <-time.After(20 * time.Second):
				t.Errorf("tower %d ran its first step alone for 20 s: the towers do not run at the same time", k)
			}
		})
		return nil
	}
	// StepsPerEpoch from the input: 80 batches of 4 rows / 2 towers.
	tr, _ := newTowersTrainer(t, towersRun{
		towers: &TowersOptions{Devices: []string{"cpu", ""}, IntraOpThreads: 1},
		batch:  4, lr: 0.05, hook: hook})
	ok(t, tr.Run())
	if g := tr.GlobalStep(); g != 40 {
		t.Errorf("GlobalStep() = %d, want 40 (80 batches / 2 towers)", g)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0] != 40 || calls[1] != 40 {
		t.Errorf("training calls per tower index: %v, want 40 for 0 and 1", calls)
	}
	if names[0] != "tower0" || names[1] != "tower1" {
		t.Errorf("tower names %q", names)
	}
	if devices[0] != "cpu" || devices[1] != "cpu" {
		t.Errorf("tower devices %q", devices)
	}
}

// towersTooBigBuckets has buckets of more than 2^40 bytes where an int holds
// them (the library refuses them), else of -1 (refused here).
func towersTooBigBuckets() TowersOptions {
	if strconv.IntSize == 64 {
		huge := int64(1) << 41
		return TowersOptions{Strategy: StrategyParameterServer, BucketBytes: int(huge)}
	}
	return TowersOptions{BucketBytes: -1}
}

func towersTooBigBucketsMessage() string {
	if strconv.IntSize == 64 {
		return "TowersOptions.BucketBytes is 2199023255552: it must be at most 2^40"
	}
	return "TowersOptions.BucketBytes is -1"
}

type towerFailure struct{ call int32 }

func (e *towerFailure) Error() string { return fmt.Sprintf("tower 1 refused its call %d", e.call) }

func TestTowerErrorsEndRun(t *testing.T) {
	checkHandles(t)
	// An error in tower 1 comes back from Run unchanged.
	var calls [2]atomic.Int32
	want := &towerFailure{call: 3}
	hook := func(tw *Tower) error {
		k := tw.Index()
		if n := calls[k].Add(1); k == 1 && n == want.call {
			return want
		}
		return nil
	}
	for _, setTowers := range []bool{false, true} {
		calls[0].Store(0)
		calls[1].Store(0)
		tr, _ := newTowersTrainer(t, towersRun{towers: &TowersOptions{}, setTowers: setTowers,
			batch: 4, steps: 10, lr: 0.05, hook: hook})
		if err := tr.Run(); err != want {
			t.Errorf("SetTowers %v: Run() = %#v, want %#v", setTowers, err, want)
		}
		if n := calls[0].Load(); n != want.call {
			t.Errorf("SetTowers %v: tower 0 ran %d times, want %d (the failing step's included)", setTowers, n, want.call)
		}
		if _, stopped := tr.StopReason(); stopped {
			t.Errorf("SetTowers %v: a failed run has a stop reason", setTowers)
		}
	}

	// A stop from tower 1 ends training gracefully.
	var stopCalls atomic.Int32
	tr, _ := newTowersTrainer(t, towersRun{towers: &TowersOptions{Strategy: StrategyParameterServer},
		batch: 4, steps: 10, lr: 0.05, hook: func(tw *Tower) error {
			if tw.Index() == 1 && stopCalls.Add(1) == 2 {
				return Stop("tower 1 has seen enough")
			}
			return nil
		}})
	ok(t, tr.Run())
	if reason, stopped := tr.StopReason(); !stopped || reason != "tower 1 has seen enough" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}

	// A panic in tower 1 (a thread of the library's) makes Run panic again.
	value := &panicValue{"tower 1"}
	tr, _ = newTowersTrainer(t, towersRun{towers: &TowersOptions{Strategy: StrategyAsync}, setTowers: true,
		batch: 4, steps: 10, lr: 0.05, hook: func(tw *Tower) error {
			if tw.Index() == 1 {
				panic(value)
			}
			return nil
		}})
	if err, p := runAndRecover(tr); p != value {
		t.Errorf("Run() = %v and panicked with %#v, want a panic with %#v", err, p, value)
	}
}

func TestTowersOptionErrors(t *testing.T) {
	checkHandles(t)
	base := settledHandles()
	m := must(NewModel([]InputSpec{
		{Name: "x", Shape: []int64{-1, towerFeatures}},
		{Name: "y", Shape: []int64{-1, 1}},
	}, towersTower(nil))).of(t)
	defer m.Close()
	setOptimizer(t, m, "sgd", 0.05)
	df := towersData(t, 4)
	for _, c := range []struct {
		opts   TowersOptions
		code   Code
		substr string
	}{
		{TowersOptions{Devices: []string{"cpu", "toaster"}}, CodeInvalidArgument, `TowersOptions.Devices[1] is "toaster", not a device`},
		{TowersOptions{Devices: []string{"cpu", "cuda:0"}}, CodeUnsupported, "tower 1 is on cuda:0"},
		{TowersOptions{Towers: 3, Devices: []string{"cpu", "cpu"}}, CodeInvalidArgument, "TowersOptions.Towers is 3 but Devices has 2 entries"},
		{TowersOptions{Towers: 300}, CodeInvalidArgument, "TowersOptions.Towers is 300: it must be in [1, 256]"},
		{TowersOptions{Towers: -1}, CodeInvalidArgument, "TowersOptions.Towers is -1"},
		{TowersOptions{Strategy: Strategy(7)}, CodeInvalidArgument, "TowersOptions.Strategy is Strategy(7): not a strategy"},
		{TowersOptions{IntraOpThreads: -1}, CodeInvalidArgument, "TowersOptions.IntraOpThreads is -1"},
		{TowersOptions{BucketBytes: -1}, CodeInvalidArgument, "TowersOptions.BucketBytes is -1: it must be in [0, 2^40]"},
		{towersTooBigBuckets(), CodeInvalidArgument, towersTooBigBucketsMessage()},
	} {
		// SetTowers takes the input, also when it fails.
		tr := must(NewTrainer(quietOptions(1, 1, 2))).of(t)
		in := must(InputFromDataFlow(df, nil)).of(t)
		wantError(t, tr.SetTowers(m, in, &c.opts), c.code, c.substr)
		wantError(t, tr.SetModel(m, in), CodeInvalidArgument, "the Input was closed or already given away")
		ok(t, tr.Close())
		// A TrainConfig releases what it was given.
		cb := must(NewCallback("a", EventAll, nil, func(*Context, Event, *Record) error { return nil })).of(t)
		_, err := NewTrainerFromConfig(&TrainConfig{Options: quietOptions(1, 1, 2), Model: m, DataFlow: df,
			Callbacks: []*Callback{cb}, Towers: &c.opts})
		e := wantError(t, err, c.code, c.substr)
		if e != nil && c.code == CodeInvalidArgument && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("errors.Is(%v, ErrInvalidArgument) is false", err)
		}
		if n := liveHandles.Load() - base; n != 1 { // the model's tower function
			t.Errorf("%+v: %d handles live after a refused config, want 1", c.opts, n)
		}
	}
	if got := fmt.Sprint(StrategyReplicated, ", ", StrategyParameterServer, ", ", StrategyAsync); got != "replicated, parameter server, async" {
		t.Errorf("the strategies print as %q", got)
	}
}
