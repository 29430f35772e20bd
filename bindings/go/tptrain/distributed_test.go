package tptrain

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// Distributed training through the Go binding: the ranks of a job are
// goroutines of the test process, each with its own trainer, talking over
// Gloo on loopback. The model and data are towers_test.go's. A rank's
// goroutine reports with errors sent back, never t.Fatal.

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// distModel is towers_test.go's model with SGD (momentum 0.9), built after
// seeding LibTorch with seed: its initial variables are made now.
func distModel(t *testing.T, seed uint64) *Model {
	t.Helper()
	ok(t, ManualSeed(seed))
	m := must(NewModel([]InputSpec{
		{Name: "x", Shape: []int64{-1, towerFeatures}},
		{Name: "y", Shape: []int64{-1, 1}},
	}, towersTower(nil))).of(t)
	t.Cleanup(func() { m.Close() })
	opt := setOptimizer(t, m, "sgd", 0.05)
	ok(t, opt.Set("momentum", 0.9))
	ok(t, m.Build())
	return m
}

// distCopy is a copy of m's variables (the Tensors of Model.Variable share
// their storage).
func distCopy(t *testing.T, m *Model) map[string][]float32 {
	t.Helper()
	vars := map[string][]float32{}
	for _, name := range must(m.VariableNames()).of(t) {
		v := must(m.Variable(name)).of(t)
		vars[name] = must(v.Float32s()).of(t)
		closeT(t, v)
	}
	return vars
}

// distSame says whether m's variables are a, bit for bit.
func distSame(t *testing.T, m *Model, a map[string][]float32) bool {
	t.Helper()
	b := distCopy(t, m)
	if len(a) != len(b) {
		return false
	}
	for name, x := range a {
		y, found := b[name]
		if !found || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] { // no NaN here: a NaN differs anyway
				return false
			}
		}
	}
	return true
}

// Two ranks, rank 1 starting from other values than rank 0's, train as one
// process fed both ranks' batches would, and end with the same variables bit
// for bit. Rank 0 is made with SetDistributed and SetModel, rank 1 from a
// TrainConfig.
func TestDistributedTwoRanksAreOneProcess(t *testing.T) {
	checkHandles(t)
	const steps = 10
	port := freePort(t)
	models := [2]*Model{distModel(t, 3), distModel(t, 4)}
	init0 := distCopy(t, models[0])
	if distSame(t, models[1], init0) {
		t.Fatal("rank 1 starts from rank 0's values: the broadcast would go unchecked")
	}
	opts := func(r int) *DistributedOptions {
		return &DistributedOptions{MasterAddr: "127.0.0.1", MasterPort: port, WorldSize: 2, Rank: r,
			Timeout: 20 * time.Second}
	}

	// Rank 0: SetDistributed, then SetModel.
	tr0 := must(NewTrainer(quietOptions(1, 1, steps))).of(t)
	t.Cleanup(func() {
		if err := tr0.Close(); err != nil {
			t.Error(err)
		}
	})
	if r, n := tr0.Rank(); r != 0 || n != 1 {
		t.Errorf("Rank() before SetDistributed = %d, %d; want 0, 1", r, n)
	}
	in0 := must(InputFromDataFlow(towersData(t, 4), nil)).of(t)
	// Rank 1: a TrainConfig (its rendezvous is in NewTrainerFromConfig).
	df1 := towersData(t, 4)

	type result struct {
		tr         *Trainer
		rank, size int
		step       int64
		err        error
	}
	results := make(chan result, 2)
	go func() {
		res := result{tr: tr0}
		defer func() { results <- res }()
		if res.err = tr0.SetDistributed(opts(0)); res.err != nil {
			return
		}
		res.rank, res.size = tr0.Rank()
		if res.err = tr0.SetModel(models[0], in0); res.err != nil {
			return
		}
		if res.err = tr0.Run(); res.err != nil {
			return
		}
		res.step = tr0.GlobalStep()
	}()
	go func() {
		res := result{}
		defer func() { results <- res }()
		if res.tr, res.err = NewTrainerFromConfig(&TrainConfig{Options: quietOptions(1, 1, steps),
			Model: models[1], DataFlow: df1, Distributed: opts(1)}); res.err != nil {
			return
		}
		res.rank, res.size = res.tr.Rank()
		if res.err = res.tr.Run(); res.err != nil {
			return
		}
		res.step = res.tr.GlobalStep()
	}()
	var byRank [2]*result
	for i := 0; i < 2; i++ {
		res := <-results
		if res.tr != nil && res.tr != tr0 {
			tr := res.tr
			t.Cleanup(func() {
				if err := tr.Close(); err != nil {
					t.Error(err)
				}
			})
		}
		who := "rank 1 (TrainConfig)"
		if res.tr == tr0 {
			who = "rank 0 (SetDistributed)"
		}
		if res.err != nil {
			t.Errorf("%s: %v", who, res.err)
			continue
		}
		if res.rank < 0 || res.rank > 1 || res.size != 2 || byRank[res.rank] != nil {
			t.Errorf("%s: Rank() = %d, %d; want its rank of 2", who, res.rank, res.size)
			continue
		}
		if (res.tr == tr0) != (res.rank == 0) {
			t.Errorf("%s: Rank() = %d", who, res.rank)
		}
		if res.step != steps {
			t.Errorf("%s: GlobalStep() = %d, want %d", who, res.step, steps)
		}
		r := res
		byRank[res.rank] = &r
	}
	if t.Failed() {
		return
	}

	// Both ranks end the same bit for bit, and they trained.
	end0 := distCopy(t, models[0])
	if !distSame(t, models[1], end0) {
		t.Errorf("the ranks' variables differ: relative distance %g", towersDistance(t, models[1], models[0]))
	}
	if distSame(t, models[0], init0) {
		t.Error("rank 0's variables did not change")
	}
	// One process from rank 0's initial values fed batches of 8 rows (rank
	// 0's 4 and rank 1's 4 of every step): the same training.
	ref := distModel(t, 3)
	if !distSame(t, ref, init0) {
		t.Fatal("seed 3 made other initial values the second time")
	}
	tr := must(NewTrainer(quietOptions(1, 1, steps))).of(t)
	defer closeTrainer(t, tr)
	ok(t, tr.SetModel(ref, must(InputFromDataFlow(towersData(t, 8), nil)).of(t)))
	ok(t, tr.Run())
	if d := towersDistance(t, models[0], ref); !(d <= 1e-5) {
		t.Errorf("2 ranks vs one process fed their batches: relative distance %g", d)
	}
}

func closeTrainer(t *testing.T, tr *Trainer) {
	t.Helper()
	if err := tr.Close(); err != nil {
		t.Error(err)
	}
}

func TestDistributedOptionErrors(t *testing.T) {
	checkHandles(t)
	base := settledHandles()
	m := must(NewModel([]InputSpec{
		{Name: "x", Shape: []int64{-1, towerFeatures}},
		{Name: "y", Shape: []int64{-1, 1}},
	}, towersTower(nil))).of(t)
	defer m.Close()
	setOptimizer(t, m, "sgd", 0.05)
	df := towersData(t, 4)
	// The environment's variables, as a launcher sets them, are not read
	// when WorldSize is set; without it they are: none here.
	for _, v := range []string{"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"} {
		t.Setenv(v, "")
	}
	huge := DistributedOptions{WorldSize: 2, Rank: 1, MasterPort: 1 << 20}
	hugeMessage := "DistributedOptions.MasterPort is 1048576: it must be in [1, 65535] (0: MASTER_PORT)"
	if strconv.IntSize == 64 { // more than an int32 holds
		huge = DistributedOptions{WorldSize: 1 << 33}
		hugeMessage = "DistributedOptions.WorldSize is 8589934592: it must be in [1, 2^20] (0: WORLD_SIZE)"
	}
	for _, c := range []struct {
		opts   DistributedOptions
		substr string
	}{
		{DistributedOptions{MasterAddr: "127.0.0.1", MasterPort: 29500, WorldSize: 2, Rank: 5},
			"Trainer.SetDistributed: DistributedOptions.Rank is 5: it must be in [0, 1] (WorldSize is 2)"},
		{DistributedOptions{WorldSize: 2, Rank: -1}, "DistributedOptions.Rank is -1: it must be in [0, 1]"},
		{DistributedOptions{WorldSize: 2, Rank: 2}, "DistributedOptions.Rank is 2: it must be in [0, 1]"},
		{DistributedOptions{WorldSize: 2, Rank: 1, LocalRank: 2}, "DistributedOptions.LocalRank is 2: it must be in [0, Rank] (Rank is 1)"},
		{DistributedOptions{WorldSize: 2, LocalRank: -1}, "DistributedOptions.LocalRank is -1"},
		{DistributedOptions{Rank: 1}, "DistributedOptions.Rank is 1 but WorldSize is 0: set WorldSize with Rank"},
		{DistributedOptions{LocalRank: 1}, "DistributedOptions.LocalRank is 1 but WorldSize is 0"},
		{DistributedOptions{WorldSize: -2}, "DistributedOptions.WorldSize is -2: it must be in [1, 2^20] (0: WORLD_SIZE)"},
		{DistributedOptions{WorldSize: 1<<20 + 1}, "DistributedOptions.WorldSize is 1048577"},
		{DistributedOptions{MasterPort: -1}, "DistributedOptions.MasterPort is -1: it must be in [1, 65535] (0: MASTER_PORT)"},
		{DistributedOptions{MasterPort: 65536}, "DistributedOptions.MasterPort is 65536"},
		{huge, hugeMessage},
		{DistributedOptions{MasterAddr: "127.0.0.1\x00evil"}, `DistributedOptions.MasterAddr is "127.0.0.1\x00evil": it holds a NUL byte`},
		{DistributedOptions{Timeout: -time.Second}, "DistributedOptions.Timeout is -1s: it must be a whole number of milliseconds in [1ms, 24h] (0: 60s)"},
		{DistributedOptions{Timeout: 1500 * time.Microsecond}, "DistributedOptions.Timeout is 1.5ms: it must be a whole number of milliseconds"},
		{DistributedOptions{Timeout: 25 * time.Hour}, "DistributedOptions.Timeout is 25h0m0s"},
		// Found by the library, its names rewritten: nothing in the
		// environment.
		{DistributedOptions{}, "the master address is not known: set MASTER_ADDR (tools/tptrain-run and torchrun set it) or DistributedOptions.MasterAddr"},
		{DistributedOptions{MasterAddr: "127.0.0.1"}, "the master port is not known: set MASTER_PORT (tools/tptrain-run and torchrun set it) or DistributedOptions.MasterPort"},
		{DistributedOptions{MasterAddr: "127.0.0.1", MasterPort: 29500}, "the world size is not known: set WORLD_SIZE (tools/tptrain-run and torchrun set it) or DistributedOptions.WorldSize"},
	} {
		tr := must(NewTrainer(quietOptions(1, 1, 2))).of(t)
		o := c.opts
		wantError(t, tr.SetDistributed(&o), CodeInvalidArgument, c.substr)
		// A refused SetDistributed changed nothing: the trainer is not
		// distributed and takes a model.
		if r, n := tr.Rank(); r != 0 || n != 1 {
			t.Errorf("%+v: Rank() after a refused SetDistributed = %d, %d", c.opts, r, n)
		}
		ok(t, tr.SetModel(m, must(InputFromDataFlow(df, nil)).of(t)))
		ok(t, tr.Close())
		// A TrainConfig releases what it was given.
		cb := must(NewCallback("a", EventAll, nil, func(*Context, Event, *Record) error { return nil })).of(t)
		_, err := NewTrainerFromConfig(&TrainConfig{Options: quietOptions(1, 1, 2), Model: m, DataFlow: df,
			Callbacks: []*Callback{cb}, Distributed: &o})
		wantError(t, err, CodeInvalidArgument, trimWho(c.substr))
		if n := liveHandles.Load() - base; n != 1 { // the model's tower function
			t.Errorf("%+v: %d handles live after a refused config, want 1", c.opts, n)
		}
	}
	// The library's own rendezvous errors from the environment keep naming
	// the variables.
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	t.Setenv("MASTER_PORT", "29500")
	t.Setenv("WORLD_SIZE", "two")
	tr := must(NewTrainer(nil)).of(t)
	wantError(t, tr.SetDistributed(nil), CodeInvalidArgument, `WORLD_SIZE is "two": it must be a whole number from 1 to 1048576`)
	ok(t, tr.Close())
	wantError(t, tr.SetDistributed(nil), CodeInvalidArgument, "Trainer.SetDistributed: use of closed Trainer")
	if r, n := tr.Rank(); r != 0 || n != 0 {
		t.Errorf("Rank() of a closed trainer = %d, %d; want 0, 0", r, n)
	}
}

// trimWho drops "Trainer.SetDistributed: " from a message: what a
// TrainConfig's error holds too.
func trimWho(msg string) string {
	const who = "Trainer.SetDistributed: "
	if len(msg) >= len(who) && msg[:len(who)] == who {
		return msg[len(who):]
	}
	return msg
}

// SetDistributed comes before the model; once only. A job of one rank needs
// no other process.
func TestDistributedState(t *testing.T) {
	checkHandles(t)
	m := must(NewModel([]InputSpec{
		{Name: "x", Shape: []int64{-1, towerFeatures}},
		{Name: "y", Shape: []int64{-1, 1}},
	}, towersTower(nil))).of(t)
	defer m.Close()
	setOptimizer(t, m, "sgd", 0.05)
	df := towersData(t, 4)
	one := &DistributedOptions{MasterAddr: "127.0.0.1", MasterPort: freePort(t), WorldSize: 1, Timeout: 20 * time.Second}

	// After SetModel (or SetTowers): an error of state, naming the Go calls.
	for _, towers := range []bool{false, true} {
		tr := must(NewTrainer(quietOptions(1, 1, 2))).of(t)
		in := must(InputFromDataFlow(df, nil)).of(t)
		if towers {
			ok(t, tr.SetTowers(m, in, nil))
		} else {
			ok(t, tr.SetModel(m, in))
		}
		wantError(t, tr.SetDistributed(one), CodeState,
			"call Trainer.SetDistributed (or TrainConfig.Distributed) before Trainer.SetModel or Trainer.SetTowers")
		closeTrainer(t, tr)
	}

	// A job of one: rank 0 of 1; a second SetDistributed is an error of
	// state; it trains.
	tr := must(NewTrainer(quietOptions(1, 1, 3))).of(t)
	defer closeTrainer(t, tr)
	ok(t, tr.SetDistributed(one))
	if r, n := tr.Rank(); r != 0 || n != 1 {
		t.Errorf("Rank() in a job of one = %d, %d; want 0, 1", r, n)
	}
	wantError(t, tr.SetDistributed(one), CodeState, "the trainer is already one rank of a job")
	ok(t, tr.SetModel(m, must(InputFromDataFlow(df, nil)).of(t)))
	ok(t, tr.Run())
	if g := tr.GlobalStep(); g != 3 {
		t.Errorf("GlobalStep() = %d, want 3", g)
	}
}
