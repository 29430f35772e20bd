package tptrain

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Dataflow functions run under C frames, often on the library's threads:
// they report with t.Error, never t.Fatal.

func scalarT(t testing.TB, v int64) *Tensor {
	t.Helper()
	return must(FromInt64([]int64{v})).of(t).reshaped(t)
}

// reshaped makes a one-element tensor a 0-d one.
func (x *Tensor) reshaped(t testing.TB) *Tensor {
	t.Helper()
	defer x.Close()
	return must(x.Reshape()).of(t)
}

// rowsT is the [n] int64 tensor 0, 1, ..., n-1.
func rowsT(t testing.TB, n int) *Tensor {
	t.Helper()
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(i)
	}
	return must(FromInt64(v, int64(n))).of(t)
}

func closeDF(t testing.TB, df *DataFlow) *DataFlow {
	t.Helper()
	t.Cleanup(func() { df.Close() })
	return df
}

// passValues returns the first component of each datapoint of one pass, as
// int64.
func passValues(t *testing.T, df *DataFlow) []int64 {
	t.Helper()
	out := []int64{}
	ok(t, df.Iterate(func(c []*Tensor) error {
		v, err := c[0].Item()
		out = append(out, int64(v))
		return err
	}))
	return out
}

// passBytes returns one pass, every component as bytes.
func passBytes(t *testing.T, df *DataFlow) [][][]byte {
	t.Helper()
	var out [][][]byte
	ok(t, df.Iterate(func(c []*Tensor) error {
		var dp [][]byte
		for _, x := range c {
			b, err := x.Bytes()
			if err != nil {
				return err
			}
			dp = append(dp, b)
		}
		out = append(out, dp)
		return nil
	}))
	return out
}

func int64Range(a, b int64) []int64 {
	v := []int64{}
	for i := a; i < b; i++ {
		v = append(v, i)
	}
	return v
}

func TestDatapoint(t *testing.T) {
	dp := must(NewDatapoint()).of(t)
	defer dp.Close()
	if dp.Len() != 0 {
		t.Errorf("Len() = %d", dp.Len())
	}
	one, two, ten := scalarT(t, 1), scalarT(t, 2), scalarT(t, 10)
	defer closeAll([]*Tensor{one, two, ten})
	ok(t, dp.Append(one))
	ok(t, dp.Set(1, two)) // index == Len appends
	ok(t, dp.Set(0, ten))
	if dp.Len() != 2 {
		t.Errorf("Len() = %d, want 2", dp.Len())
	}
	x := must(dp.Get(0)).of(t)
	if v := must(x.Item()).of(t); v != 10 {
		t.Errorf("Get(0) = %v", v)
	}
	x.Close()
	_, err := dp.Get(5)
	wantError(t, err, CodeNotFound, "out of range")
	wantError(t, dp.Set(3, one), CodeInvalidArgument, "past the end")
	ok(t, dp.Truncate(1))
	ok(t, dp.SetTensors(one, two, ten))
	ts := must(dp.Tensors()).of(t)
	if len(ts) != 3 {
		t.Errorf("Tensors() has %d", len(ts))
	}
	closeAll(ts)
	ok(t, dp.Close())
	wantError(t, dp.Append(one), CodeInvalidArgument, "use of closed Datapoint")
}

func TestDataFlowFromFunc(t *testing.T) {
	checkHandles(t)
	i := int64(0)
	df := closeDF(t, must(DataFlowFromFunc(func() ([]*Tensor, error) {
		i++
		if i%4 == 0 {
			return nil, io.EOF // passes of 3: 1 2 3, 5 6 7, ...
		}
		a, err := FromInt64([]int64{i})
		if err != nil {
			return nil, err
		}
		b, err := FromInt64([]int64{-i})
		return []*Tensor{a, b}, err
	})).of(t))
	if _, known := df.Size(); known {
		t.Error("Size() is known")
	}
	if got := passValues(t, df); !reflect.DeepEqual(got, []int64{1, 2, 3}) {
		t.Errorf("first pass %v", got)
	}
	if got := passValues(t, df); !reflect.DeepEqual(got, []int64{5, 6, 7}) {
		t.Errorf("second pass %v", got)
	}
	dp := must(NewDatapoint()).of(t)
	defer dp.Close()
	ok(t, df.NextInto(dp))
	if dp.Len() != 2 {
		t.Errorf("NextInto gave %d components", dp.Len())
	}
	ts := must(df.Next()).of(t)
	if v := must(ts[1].Item()).of(t); v != -10 {
		t.Errorf("Next()[1] = %v, want -10", v)
	}
	closeAll(ts)
	ok(t, df.Close())
	_, err := df.Next()
	wantError(t, err, CodeInvalidArgument, "use of closed DataFlow")
}

// seededSource has 4 datapoints per pass, made from its seed.
type seededSource struct {
	t     *testing.T
	mu    sync.Mutex
	seeds []uint64
	pos   int64
	value int64
}

func (s *seededSource) Next() ([]*Tensor, error) {
	if s.pos == 4 {
		s.pos = 0
		return nil, io.EOF
	}
	s.pos++
	x, err := FromInt64([]int64{s.value + s.pos})
	return []*Tensor{x}, err
}

func (s *seededSource) Reset(seed uint64) error {
	s.mu.Lock()
	s.seeds = append(s.seeds, seed)
	s.mu.Unlock()
	s.value, s.pos = int64(seed%1000)*10, 0
	return nil
}

func (s *seededSource) Size() int64 { return 4 }

func TestDataFlowFromSource(t *testing.T) {
	checkHandles(t)
	srcA, srcB := &seededSource{t: t}, &seededSource{t: t}
	a := closeDF(t, must(DataFlowFromSource(srcA)).of(t))
	b := closeDF(t, must(DataFlowFromSource(srcB)).of(t))
	if n, known := a.Size(); n != 4 || !known {
		t.Errorf("Size() = %d, %v", n, known)
	}
	ok(t, a.SetSeed(42))
	ok(t, b.SetSeed(42))
	pa, pb := passValues(t, a), passValues(t, b)
	if !reflect.DeepEqual(pa, pb) || len(pa) != 4 {
		t.Errorf("the same seed gave %v and %v", pa, pb)
	}
	ok(t, b.SetSeed(43))
	ok(t, b.ResetState())
	if srcA.seeds[0] != srcB.seeds[0] || srcB.seeds[0] == srcB.seeds[1] {
		t.Errorf("seeds %v and %v", srcA.seeds, srcB.seeds)
	}
	batched := closeDF(t, must(a.Batch(2, DropRemainder)).of(t))
	if n, _ := batched.Size(); n != 2 {
		t.Errorf("batched Size() = %d", n)
	}
}

func TestDataFlowSources(t *testing.T) {
	checkHandles(t)
	x := must(FromFloat32([]float32{0, 1, 2, 3, 4, 5}, 3, 2)).of(t)
	defer x.Close()
	y := rowsT(t, 3)
	defer y.Close()
	df := closeDF(t, must(DataFlowFromTensors([]*Tensor{x, y}, Sequential)).of(t))
	first := must(df.Next()).of(t)
	if got := must(first[0].Float32s()).of(t); !reflect.DeepEqual(got, []float32{0, 1}) {
		t.Errorf("row 0 = %v", got)
	}
	checkMeta(t, first[1], DTypeInt64)
	closeAll(first)
	four := rowsT(t, 4)
	defer four.Close()
	_, err := DataFlowFromTensors([]*Tensor{x, four}, Sequential)
	wantError(t, err, CodeInvalidArgument, "rows")

	fake := closeDF(t, must(DataFlowFake([]InputSpec{
		{Name: "img", DType: DTypeFloat32, Shape: []int64{2, 3}},
		{Name: "label", DType: DTypeInt64, Shape: []int64{}},
	}, 5, &FakeOptions{Low: 0, High: 4})).of(t))
	n := 0
	ok(t, fake.Iterate(func(c []*Tensor) error {
		n++
		checkMeta(t, c[0], DTypeFloat32, 2, 3)
		if v := must(c[1].Item()).of(t); v < 0 || v >= 4 {
			t.Errorf("label %v", v)
		}
		return nil
	}))
	if n != 5 {
		t.Errorf("fake pass of %d", n)
	}

	// Files decoded by a Go function, on the iterating thread and on 2.
	dir := t.TempDir()
	var paths []string
	for i := 0; i < 6; i++ {
		p := filepath.Join(dir, fmt.Sprintf("f%d.txt", i))
		ok(t, os.WriteFile(p, []byte(strconv.Itoa(i*11)), 0o644))
		paths = append(paths, p)
	}
	for _, threads := range []int{0, 2} {
		df := closeDF(t, must(DataFlowFromFiles(paths, Sequential, threads, func(dp *Datapoint, path string, index int) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			v, err := strconv.Atoi(string(b))
			if err != nil {
				return err
			}
			a, ix := must(FromInt64([]int64{int64(v)})).of(t), must(FromInt64([]int64{int64(index)})).of(t)
			defer closeAll([]*Tensor{a, ix})
			return dp.Append(a, ix)
		})).of(t))
		if got := passValues(t, df); !reflect.DeepEqual(got, []int64{0, 11, 22, 33, 44, 55}) {
			t.Errorf("threads %d: %v", threads, got)
		}
	}
	// A missing file: the decoder's error, the same value.
	var readErr error
	df = closeDF(t, must(DataFlowFromFiles([]string{filepath.Join(dir, "missing.txt")}, Sequential, 0,
		func(dp *Datapoint, path string, index int) error {
			_, readErr = os.ReadFile(path)
			return readErr
		})).of(t))
	if _, err := df.Next(); err == nil || err != readErr || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Next() = %v, want the decoder's error %v", err, readErr)
	}
	_, err = DataFlowFromIDX([]string{filepath.Join(dir, "nope-idx1-ubyte")}, Sequential)
	wantError(t, err, CodeIO, "nope-idx1-ubyte")
}

const fashionMNIST = "/usr/share/datasets/fashion-mnist"

func TestDataFlowMNIST(t *testing.T) {
	if _, err := os.Stat(filepath.Join(fashionMNIST, "t10k-images-idx3-ubyte.gz")); err != nil {
		t.Skip(fashionMNIST + " is missing")
	}
	test := closeDF(t, must(DataFlowMNIST(fashionMNIST, "test", Sequential)).of(t))
	if n, _ := test.Size(); n != 10000 {
		t.Errorf("test Size() = %d", n)
	}
	first := must(test.Next()).of(t)
	checkMeta(t, first[0], DTypeFloat32, 1, 28, 28)
	checkMeta(t, first[1], DTypeInt64)
	for _, p := range must(first[0].Float32s()).of(t) {
		if p < 0 || p > 1 {
			t.Fatalf("pixel %v", p)
		}
	}
	closeAll(first)
	train := closeDF(t, must(DataFlowMNIST(fashionMNIST, "train", Shuffled)).of(t))
	if n, _ := train.Size(); n != 60000 {
		t.Errorf("train Size() = %d", n)
	}
	batched := closeDF(t, must(train.Batch(128, DropRemainder)).of(t))
	if n, _ := batched.Size(); n != 468 {
		t.Errorf("batched Size() = %d", n)
	}
	_, err := DataFlowMNIST(fashionMNIST, "validation", Sequential)
	wantError(t, err, CodeInvalidArgument, "validation")
}

func TestDataFlowBatch(t *testing.T) {
	checkHandles(t)
	x := must(FromFloat32([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 5, 2)).of(t)
	defer x.Close()
	r5 := rowsT(t, 5)
	defer r5.Close()
	src := closeDF(t, must(DataFlowFromTensors([]*Tensor{x, r5}, Sequential)).of(t))
	batched := closeDF(t, must(src.Batch(2, DropRemainder)).of(t))
	if n, _ := batched.Size(); n != 2 {
		t.Errorf("Size() = %d", n)
	}
	var shapes [][]int64
	ok(t, batched.Iterate(func(c []*Tensor) error {
		shapes = append(shapes, must(c[0].Shape()).of(t))
		return nil
	}))
	if !reflect.DeepEqual(shapes, [][]int64{{2, 2}, {2, 2}}) {
		t.Errorf("shapes %v", shapes)
	}
	// A remainder: the short batch comes last, and then the pass ends.
	src2 := closeDF(t, must(DataFlowFromTensors([]*Tensor{r5}, Sequential)).of(t))
	rest := closeDF(t, must(src2.Batch(2, KeepRemainder)).of(t))
	if n, _ := rest.Size(); n != 3 {
		t.Errorf("Size() with the remainder = %d", n)
	}
	for pass := 0; pass < 2; pass++ {
		var sizes []int64
		ok(t, rest.Iterate(func(c []*Tensor) error {
			sizes = append(sizes, must(c[0].Numel()).of(t))
			if len(sizes) > 3 {
				return errors.New("the pass does not end")
			}
			return nil
		}))
		if !reflect.DeepEqual(sizes, []int64{2, 2, 1}) {
			t.Errorf("pass %d: batch sizes %v", pass, sizes)
		}
	}
	// One consumer.
	_, err := src.Batch(2, DropRemainder)
	wantError(t, err, CodeInvalidArgument, "one consumer")
	_, err = src.Next()
	wantError(t, err, CodeInvalidArgument, "one consumer")
}

func TestDataFlowMap(t *testing.T) {
	checkHandles(t)
	r6 := rowsT(t, 6)
	defer r6.Close()
	src := closeDF(t, must(DataFlowFromTensors([]*Tensor{r6}, Sequential)).of(t))
	var lent *Datapoint
	df := closeDF(t, must(src.Map(func(dp *Datapoint) error {
		lent = dp
		x, err := dp.Get(0)
		if err != nil {
			return err
		}
		defer x.Close()
		v := int64(must(x.Item()).of(t))
		if v%2 == 1 {
			return dp.Truncate(0) // dropped
		}
		a, b := scalarT(t, v*10), scalarT(t, v+1)
		defer closeAll([]*Tensor{a, b})
		if err := dp.Set(0, a); err != nil {
			return err
		}
		return dp.Append(b)
	})).of(t))
	var got [][]int64
	ok(t, df.Iterate(func(c []*Tensor) error {
		row := []int64{}
		for _, x := range c {
			row = append(row, int64(must(x.Item()).of(t)))
		}
		got = append(got, row)
		return nil
	}))
	if !reflect.DeepEqual(got, [][]int64{{0, 1}, {20, 3}, {40, 5}}) {
		t.Errorf("mapped pass %v", got)
	}
	wantError(t, lent.Append(r6), CodeInvalidArgument, "after the function it was lent to returned")

	src2 := closeDF(t, must(DataFlowFromTensors([]*Tensor{r6, r6}, Sequential)).of(t))
	comp := closeDF(t, must(src2.MapComponent(1, func(x *Tensor) (*Tensor, error) {
		v := int64(must(x.Item()).of(t))
		switch v {
		case 2:
			return nil, nil // dropped
		case 4:
			return x, nil // the borrowed tensor itself
		}
		return FromInt64([]int64{-v})
	})).of(t))
	got = nil
	ok(t, comp.Iterate(func(c []*Tensor) error {
		got = append(got, []int64{int64(must(c[0].Item()).of(t)), int64(must(c[1].Item()).of(t))})
		return nil
	}))
	if !reflect.DeepEqual(got, [][]int64{{0, 0}, {1, -1}, {3, -3}, {4, 4}, {5, -5}}) {
		t.Errorf("component-mapped pass %v", got)
	}
}

func TestDataFlowParallelMapOrderedStrict(t *testing.T) {
	checkHandles(t)
	const n = 200
	r := rowsT(t, n)
	defer r.Close()
	src := closeDF(t, must(DataFlowFromTensors([]*Tensor{r}, Sequential)).of(t))
	var mu sync.Mutex
	calls := []int64{}
	var inFlight, maxInFlight atomic.Int32
	df := closeDF(t, must(src.ParallelMap(&ParallelMapOptions{Threads: 4, BufferSize: 16, Ordered: true, Strict: true},
		func(dp *Datapoint) error {
			now := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				m := maxInFlight.Load()
				if now <= m || maxInFlight.CompareAndSwap(m, now) {
					break
				}
			}
			x, err := dp.Get(0)
			if err != nil {
				return err
			}
			defer x.Close()
			v := int64(must(x.Item()).of(t))
			mu.Lock()
			calls = append(calls, v)
			mu.Unlock()
			sq, err := FromInt64([]int64{v * v})
			if err != nil {
				return err
			}
			defer sq.Close()
			return dp.SetTensors(sq)
		})).of(t))
	if size, _ := df.Size(); size != n {
		t.Errorf("Size() = %d", size)
	}
	want := []int64{}
	for i := int64(0); i < n; i++ {
		want = append(want, i*i)
	}
	for pass := 0; pass < 2; pass++ {
		if got := passValues(t, df); !reflect.DeepEqual(got, want) {
			t.Errorf("pass %d: %v", pass, got)
		}
		mu.Lock()
		seen := calls
		calls = []int64{}
		mu.Unlock()
		sort.Slice(seen, func(a, b int) bool { return seen[a] < seen[b] })
		if !reflect.DeepEqual(seen, int64Range(0, n)) {
			t.Errorf("pass %d: mapped %d datapoints, not each exactly once", pass, len(seen))
		}
	}
	t.Logf("up to %d calls at once", maxInFlight.Load())
}

func TestDataFlowPrefetch(t *testing.T) {
	checkHandles(t)
	i := int64(0)
	src := closeDF(t, must(DataFlowFromFunc(func() ([]*Tensor, error) {
		if i == 20 {
			i = 0
			return nil, io.EOF
		}
		i++
		x, err := FromInt64([]int64{i - 1})
		return []*Tensor{x}, err
	})).of(t))
	df := closeDF(t, must(src.Prefetch(4)).of(t))
	for pass := 0; pass < 3; pass++ {
		if got := passValues(t, df); !reflect.DeepEqual(got, int64Range(0, 20)) {
			t.Errorf("pass %d: %v", pass, got)
		}
	}
}

func TestDataFlowCombinators(t *testing.T) {
	checkHandles(t)
	a, b := rowsT(t, 3), rowsT(t, 5)
	defer closeAll([]*Tensor{a, b})
	from := func(x *Tensor) *DataFlow {
		return closeDF(t, must(DataFlowFromTensors([]*Tensor{x}, Sequential)).of(t))
	}
	cat := closeDF(t, must(ConcatDataFlows(from(a), from(b))).of(t))
	if got := passValues(t, cat); !reflect.DeepEqual(got, []int64{0, 1, 2, 0, 1, 2, 3, 4}) {
		t.Errorf("concat %v", got)
	}
	joined := closeDF(t, must(JoinDataFlows(from(a), from(b))).of(t))
	sel := closeDF(t, must(joined.Select(1, 0, 1)).of(t))
	count := 0
	ok(t, sel.Iterate(func(c []*Tensor) error {
		count++
		if len(c) != 3 {
			t.Errorf("%d components", len(c))
		}
		return nil
	}))
	if count != 3 {
		t.Errorf("join: %d datapoints, want the shortest 3", count)
	}
	rep := closeDF(t, must(from(a).Repeat(2)).of(t))
	if got := passValues(t, rep); !reflect.DeepEqual(got, []int64{0, 1, 2, 0, 1, 2}) {
		t.Errorf("repeat %v", got)
	}
	if _, known := closeDF(t, must(from(a).Repeat(-1)).of(t)).Size(); known {
		t.Error("Repeat(-1) has a size")
	}
	fixed := closeDF(t, must(from(a).FixedSize(4, KeepInnerState)).of(t))
	if got := passValues(t, fixed); !reflect.DeepEqual(got, []int64{0, 1, 2, 0}) {
		t.Errorf("fixed size %v", got)
	}
	if got := passValues(t, fixed); !reflect.DeepEqual(got, []int64{1, 2, 0, 1}) {
		t.Errorf("fixed size, kept state %v", got)
	}
	ten := rowsT(t, 10)
	defer ten.Close()
	// A dataflow has one consumer: each shard reads its own source.
	even := closeDF(t, must(from(ten).Shard(0, 2)).of(t))
	odd := closeDF(t, must(from(ten).Shard(1, 2)).of(t))
	if n, _ := even.Size(); n != 5 {
		t.Errorf("Shard(0, 2) Size() = %d", n)
	}
	for pass := 0; pass < 2; pass++ {
		if got := passValues(t, even); !reflect.DeepEqual(got, []int64{0, 2, 4, 6, 8}) {
			t.Errorf("shard 0 of 2, pass %d: %v", pass, got)
		}
		if got := passValues(t, odd); !reflect.DeepEqual(got, []int64{1, 3, 5, 7, 9}) {
			t.Errorf("shard 1 of 2, pass %d: %v", pass, got)
		}
	}
	_, err := from(ten).Shard(0, 0)
	wantError(t, err, CodeInvalidArgument, "count must be from 1 to 2^20")
	_, err = from(ten).Shard(2, 2)
	wantError(t, err, CodeInvalidArgument, "index must be from 0 to count - 1")
	reads := 0
	src := closeDF(t, must(DataFlowFromFunc(func() ([]*Tensor, error) {
		reads++
		if reads%6 == 0 {
			return nil, io.EOF
		}
		x, err := FromInt64([]int64{int64(reads % 6)})
		return []*Tensor{x}, err
	})).of(t))
	cached := closeDF(t, must(src.Cache(Shuffled)).of(t))
	ok(t, cached.SetSeed(3))
	for pass := 0; pass < 3; pass++ {
		got := passValues(t, cached)
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		if !reflect.DeepEqual(got, []int64{1, 2, 3, 4, 5}) {
			t.Errorf("cache pass %d: %v", pass, got)
		}
	}
	if reads != 6 {
		t.Errorf("the cache read its input %d times", reads)
	}
	shuffled := closeDF(t, must(from(b).LocalShuffle(3, 2)).of(t))
	if n, _ := shuffled.Size(); n != 10 {
		t.Errorf("LocalShuffle Size() = %d", n)
	}
	for i := 0; i < 10; i++ {
		c := must(shuffled.Next()).of(t)
		if v := must(c[0].Item()).of(t); v < 0 || v > 4 {
			t.Errorf("shuffled %v", v)
		}
		closeAll(c)
	}
	_, err = ConcatDataFlows(from(a), nil)
	wantError(t, err, CodeInvalidArgument, "dfs[1] is nil")
}

// testImages returns n seeded u8 images [n, 1, 6, 6] and their labels.
func testImages(t *testing.T, n int) (*Tensor, *Tensor) {
	s := uint64(0x9E3779B97F4A7C15)
	px := make([]uint8, n*36)
	for i := range px {
		s ^= s >> 12
		s ^= s << 25
		s ^= s >> 27
		px[i] = uint8((s * 0x2545F4914F6CDD1D) >> 56)
	}
	return must(FromUint8(px, int64(n), 1, 6, 6)).of(t), rowsT(t, n)
}

func TestDataFlowAugmentDeterministic(t *testing.T) {
	checkHandles(t)
	x, y := testImages(t, 40)
	defer closeAll([]*Tensor{x, y})
	augs := []Augmentor{
		{Kind: AugmentToFloat, Scale: 1.0 / 255},
		{Kind: AugmentNormalize, Mean: []float64{0.5}, Std: []float64{0.25}},
		{Kind: AugmentRandomCrop, Height: 4, Width: 4, Padding: 1},
		{Kind: AugmentFlip, Probability: 0.5},
	}
	run := func(threads int, seed uint64) [][][]byte {
		src := closeDF(t, must(DataFlowFromTensors([]*Tensor{x, y}, Shuffled)).of(t))
		df := closeDF(t, must(src.Augment(0, augs, threads)).of(t))
		ok(t, df.SetSeed(seed))
		pass := passBytes(t, df)
		if len(pass) != 40 || len(pass[0][0]) != 16*4 {
			t.Fatalf("%d datapoints, the first image of %d bytes", len(pass), len(pass[0][0]))
		}
		return pass
	}
	ref := run(0, 11)
	for _, threads := range []int{1, 3} {
		if !reflect.DeepEqual(run(threads, 11), ref) {
			t.Errorf("%d threads differ from 0", threads)
		}
	}
	if reflect.DeepEqual(run(3, 12), ref) {
		t.Error("another seed gave the same pass")
	}
	src := closeDF(t, must(DataFlowFromTensors([]*Tensor{x}, Sequential)).of(t))
	_, err := src.Augment(0, []Augmentor{{Kind: AugmentNormalize, Mean: []float64{0.5, 0.5}, Std: []float64{1}}}, 0)
	wantError(t, err, CodeInvalidArgument, "Mean has 2 values, Std 1")
}

func TestDataFlowStateRoundTrip(t *testing.T) {
	checkHandles(t)
	x, y := testImages(t, 12)
	defer closeAll([]*Tensor{x, y})
	pipeline := func() *DataFlow {
		src := closeDF(t, must(DataFlowFromTensors([]*Tensor{x, y}, Shuffled)).of(t))
		aug := closeDF(t, must(src.Augment(0, []Augmentor{{Kind: AugmentFlip, Probability: 0.5}}, 2)).of(t))
		return closeDF(t, must(aug.Batch(4, DropRemainder)).of(t))
	}
	a := pipeline()
	ok(t, a.SetSeed(99))
	passBytes(t, a)
	state := must(a.State()).of(t)
	defer state.Close()
	checkMeta(t, state, DTypeUint8, must(state.Numel()).of(t))
	later := [][][][]byte{passBytes(t, a), passBytes(t, a)}
	b := pipeline()
	ok(t, b.SetState(state))
	ok(t, b.ResetState())
	if got := [][][][]byte{passBytes(t, b), passBytes(t, b)}; !reflect.DeepEqual(got, later) {
		t.Error("the restored pipeline does not repeat the passes after the state")
	}
	// Mid-pass, with augmentation threads reading ahead: the restored
	// pipeline goes on with the datapoint after the last one given.
	closeAll(must(a.Next()).of(t))
	mid := must(a.State()).of(t)
	defer mid.Close()
	rest := [][][][]byte{passBytes(t, a), passBytes(t, a)}
	if len(rest[0]) != 2 {
		t.Fatalf("the rest of the pass has %d batches, want 2", len(rest[0]))
	}
	c := pipeline()
	ok(t, c.SetSeed(1234))
	ok(t, c.SetState(mid))
	ok(t, c.ResetState())
	if got := [][][][]byte{passBytes(t, c), passBytes(t, c)}; !reflect.DeepEqual(got, rest) {
		t.Error("the pipeline restored mid-pass does not go on after the last datapoint given")
	}
	other := closeDF(t, must(DataFlowFromTensors([]*Tensor{y}, Shuffled)).of(t))
	wantError(t, other.SetState(state), CodeInvalidArgument, "not a state of this dataflow")
}

// shuffledRows is a SourceStater: rows 0..n-1 (int64 [1] tensors), each
// pass in an order drawn from its generator, which Reset seeds and every
// pass end advances. Its state is the generator as of the start of the pass
// (the order derives from it) and the position in the pass: 16 bytes.
type shuffledRows struct {
	n        int
	onSave   func(pos int) error // called by SaveState when set
	mu       sync.Mutex
	gen      uint64
	order    []int64
	pos      int
	restored [][]byte // what RestoreState got
}

func (s *shuffledRows) draw() {
	s.order = make([]int64, s.n)
	for i := range s.order {
		s.order[i] = int64(i)
	}
	x := s.gen | 1
	for i := s.n - 1; i > 0; i-- { // Fisher-Yates with xorshift64
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		j := int(x % uint64(i+1))
		s.order[i], s.order[j] = s.order[j], s.order[i]
	}
}

func (s *shuffledRows) Reset(seed uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen, s.pos = seed^0x9E3779B97F4A7C15, 0
	s.draw()
	return nil
}

func (s *shuffledRows) Next() ([]*Tensor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.order == nil {
		return nil, errors.New("Next before Reset")
	}
	if s.pos == s.n {
		s.gen = s.gen*6364136223846793005 + 1442695040888963407
		s.pos = 0
		s.draw()
		return nil, io.EOF
	}
	s.pos++
	x, err := FromInt64([]int64{s.order[s.pos-1]})
	return []*Tensor{x}, err
}

func (s *shuffledRows) SaveState() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onSave != nil {
		if err := s.onSave(s.pos); err != nil {
			return nil, err
		}
	}
	b := binary.LittleEndian.AppendUint64(nil, s.gen)
	return binary.LittleEndian.AppendUint64(b, uint64(s.pos)), nil
}

func (s *shuffledRows) RestoreState(state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restored = append(s.restored, state)
	if len(state) != 16 {
		return fmt.Errorf("a state of %d bytes, want 16", len(state))
	}
	s.gen, s.pos = binary.LittleEndian.Uint64(state), int(binary.LittleEndian.Uint64(state[8:]))
	if s.pos > s.n {
		return fmt.Errorf("position %d past the end", s.pos)
	}
	s.draw()
	return nil
}

func (s *shuffledRows) restores() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restored
}

// nextN makes n Next calls: each gives the values of the batch, or "EOF".
func nextN(t *testing.T, df *DataFlow, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		c, err := df.Next()
		if err == io.EOF {
			out = append(out, "EOF")
			continue
		}
		ok(t, err)
		v := must(c[0].Int64s()).of(t)
		closeAll(c)
		out = append(out, fmt.Sprint(v))
	}
	return out
}

func TestDataFlowSourceStateRoundTrip(t *testing.T) {
	checkHandles(t)
	// 21 rows in batches of 3: a pass is 7 batches, then io.EOF.
	pipeline := func(src Source) *DataFlow {
		df := closeDF(t, must(DataFlowFromSource(src)).of(t))
		pre := closeDF(t, must(df.Prefetch(4)).of(t))
		return closeDF(t, must(pre.Batch(3, DropRemainder)).of(t))
	}
	// The source's order comes from its seed and changes every pass.
	ref := pipeline(&shuffledRows{n: 21})
	ok(t, ref.SetSeed(7))
	passes := [][]int64{}
	for p := 0; p < 2; p++ {
		var rows []int64
		ok(t, ref.Iterate(func(c []*Tensor) error {
			v, err := c[0].Int64s()
			rows = append(rows, v...)
			return err
		}))
		passes = append(passes, rows)
		sorted := append([]int64(nil), rows...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		if !reflect.DeepEqual(sorted, int64Range(0, 21)) {
			t.Fatalf("pass %d is not a permutation of 0..20: %v", p, rows)
		}
	}
	if reflect.DeepEqual(passes[0], passes[1]) || reflect.DeepEqual(passes[0], int64Range(0, 21)) {
		t.Fatalf("the order does not change: %v", passes)
	}
	// k Next calls (io.EOF included), State, the next 10 calls: a pipeline
	// seeded otherwise repeats those 10 after SetState and ResetState, in
	// mid-pass, at the end of a pass (before and after its io.EOF) and in
	// later passes.
	for _, k := range []int{0, 1, 4, 7, 8, 9, 13, 16, 19} {
		a := pipeline(&shuffledRows{n: 21})
		ok(t, a.SetSeed(7))
		ok(t, a.ResetState())
		nextN(t, a, k)
		state := must(a.State()).of(t)
		want := nextN(t, a, 10)
		srcB := &shuffledRows{n: 21}
		b := pipeline(srcB)
		ok(t, b.SetSeed(8))
		if k == 4 {
			// Unrestored, seed 8 gives other batches.
			if reflect.DeepEqual(nextN(t, b, 10), want) {
				t.Errorf("k=%d: seed 8 repeats seed 7", k)
			}
		}
		ok(t, b.SetState(state))
		ok(t, b.ResetState())
		if got := nextN(t, b, 10); !reflect.DeepEqual(got, want) {
			t.Errorf("k=%d: restored %v, want %v", k, got, want)
		}
		if r := srcB.restores(); len(r) != 1 || len(r[0]) != 16 {
			t.Errorf("k=%d: RestoreState got %v", k, r)
		}
		state.Close()
	}
	// Without a thread reading ahead, State calls SaveState itself.
	src := &shuffledRows{n: 5}
	plain := closeDF(t, must(DataFlowFromSource(src)).of(t))
	ok(t, plain.SetSeed(3))
	nextN(t, plain, 2)
	state := must(plain.State()).of(t)
	defer state.Close()
	want := nextN(t, plain, 6)
	again := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 5})).of(t))
	ok(t, again.SetState(state))
	if got := nextN(t, again, 6); !reflect.DeepEqual(got, want) { // Next resets
		t.Errorf("restored %v, want %v", got, want)
	}
}

// emptyStater saves an empty state.
type emptyStater struct {
	mu  sync.Mutex
	got [][]byte
}

func (*emptyStater) Next() ([]*Tensor, error) {
	x, err := FromInt64([]int64{1})
	return []*Tensor{x}, err
}
func (*emptyStater) SaveState() ([]byte, error) { return nil, nil }
func (s *emptyStater) RestoreState(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, b)
	return nil
}

func TestDataFlowSourceStateErrors(t *testing.T) {
	checkHandles(t)
	errSave := errors.New("the position is lost")
	failFrom2 := func(pos int) error {
		if pos >= 2 {
			return errSave
		}
		return nil
	}
	// From State, when it calls SaveState.
	plain := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6, onSave: failFrom2})).of(t))
	nextN(t, plain, 1)
	closeT(t, must(plain.State()).of(t))
	nextN(t, plain, 1)
	if _, err := plain.State(); err != errSave {
		t.Errorf("State() = %v, want SaveState's error", err)
	}
	// Under Prefetch SaveState runs on its thread after every datapoint: the
	// error ends the consumer's iteration.
	src := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6, onSave: failFrom2})).of(t))
	pre := closeDF(t, must(src.Prefetch(2)).of(t))
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		var c []*Tensor
		c, err = pre.Next()
		closeAll(c)
	}
	if err != errSave {
		t.Errorf("Next() under Prefetch = %v, want SaveState's error", err)
	}
	// A Stop from SaveState is an error.
	stopping := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6, onSave: func(int) error { return Stop("halt") }})).of(t))
	ok(t, stopping.ResetState())
	_, err = stopping.State()
	wantError(t, err, CodeCallback, `SaveState returned Stop("halt")`)
	// RestoreState's error comes back from the reset that restores; an
	// empty state goes through as an empty slice.
	emptyA := &emptyStater{}
	emptyDF := closeDF(t, must(DataFlowFromSource(emptyA)).of(t))
	ok(t, emptyDF.ResetState())
	emptyState := must(emptyDF.State()).of(t)
	defer emptyState.Close()
	checkMeta(t, emptyState, DTypeUint8, must(emptyState.Numel()).of(t))
	rows := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6})).of(t))
	ok(t, rows.SetState(emptyState))
	err = rows.ResetState()
	if _, isError := err.(*Error); err == nil || isError || err.Error() != "a state of 0 bytes, want 16" {
		t.Errorf("ResetState() = %#v, want RestoreState's error", err)
	}
	emptyB := &emptyStater{}
	restored := closeDF(t, must(DataFlowFromSource(emptyB)).of(t))
	ok(t, restored.SetState(emptyState))
	ok(t, restored.ResetState())
	emptyB.mu.Lock()
	if len(emptyB.got) != 1 || emptyB.got[0] == nil || len(emptyB.got[0]) != 0 {
		t.Errorf("RestoreState got %#v, want one empty slice", emptyB.got)
	}
	emptyB.mu.Unlock()
	// A source without SourceStater refuses a state with a position.
	good := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6})).of(t))
	nextN(t, good, 2)
	state := must(good.State()).of(t)
	defer state.Close()
	// A source without SourceStater refuses a state with a position.
	fromFunc := closeDF(t, must(DataFlowFromFunc(func() ([]*Tensor, error) { return nil, io.EOF })).of(t))
	wantError(t, fromFunc.SetState(state), CodeInvalidArgument, "cannot restore one")
}

type boomSave struct{ pos int }

func TestDataFlowSourceStatePanics(t *testing.T) {
	checkHandles(t)
	panicFrom2 := func(pos int) error {
		if pos >= 2 {
			panic(boomSave{pos})
		}
		return nil
	}
	recovered := func(f func()) (p any) {
		defer func() { p = recover() }()
		f()
		return nil
	}
	plain := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6, onSave: panicFrom2})).of(t))
	nextN(t, plain, 2)
	if p := recovered(func() { plain.State() }); p != (boomSave{2}) {
		t.Errorf("State(): recovered %v, want boomSave{2}", p)
	}
	src := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6, onSave: panicFrom2})).of(t))
	pre := closeDF(t, must(src.Prefetch(2)).of(t))
	p := recovered(func() {
		for i := 0; i < 10; i++ {
			c, err := pre.Next()
			if err != nil {
				t.Errorf("Next() = %v, want a panic", err)
				return
			}
			closeAll(c)
		}
	})
	if p != (boomSave{2}) {
		t.Errorf("Next() under Prefetch: recovered %v, want boomSave{2}", p)
	}
	// Nothing is left over: a clean pipeline works and keeps its position.
	clean := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6})).of(t))
	nextN(t, clean, 3)
	state := must(clean.State()).of(t)
	defer state.Close()
	want := nextN(t, clean, 4)
	other := closeDF(t, must(DataFlowFromSource(&shuffledRows{n: 6})).of(t))
	ok(t, other.SetState(state))
	if got := nextN(t, other, 4); !reflect.DeepEqual(got, want) {
		t.Errorf("restored %v, want %v", got, want)
	}
}

var errCorrupt = errors.New("record 5 is corrupt")

func failAt5(dp *Datapoint) error {
	x, err := dp.Get(0)
	if err != nil {
		return err
	}
	defer x.Close()
	if v, _ := x.Item(); v == 5 {
		return errCorrupt
	}
	return nil
}

func TestDataFlowErrorsComeBackUnchanged(t *testing.T) {
	checkHandles(t)
	r := rowsT(t, 8)
	defer r.Close()
	src := func() *DataFlow { return closeDF(t, must(DataFlowFromTensors([]*Tensor{r}, Sequential)).of(t)) }
	firstError := func(df *DataFlow) error {
		for {
			c, err := df.Next()
			if err != nil {
				return err
			}
			closeAll(c)
		}
	}
	mapped := closeDF(t, must(src().Map(failAt5)).of(t))
	if err := firstError(mapped); err != errCorrupt {
		t.Errorf("Map: %v", err)
	}
	par := closeDF(t, must(src().ParallelMap(&ParallelMapOptions{Threads: 3, Ordered: true, Strict: true}, failAt5)).of(t))
	if err := firstError(par); err != errCorrupt {
		t.Errorf("ParallelMap: %v", err)
	}
	pre := closeDF(t, must(closeDF(t, must(src().Map(failAt5)).of(t)).Prefetch(2)).of(t))
	if err := firstError(pre); err != errCorrupt {
		t.Errorf("Map behind Prefetch: %v", err)
	}
	wrapped := fmt.Errorf("shard 3: %w", errCorrupt)
	fromFunc := closeDF(t, must(DataFlowFromFunc(func() ([]*Tensor, error) { return nil, wrapped })).of(t))
	if err := firstError(fromFunc); err != wrapped || !errors.Is(err, errCorrupt) {
		t.Errorf("source: %v", err)
	}
	// After the error the pass goes on (rows 6 and 7).
	if got := passValues(t, mapped); !reflect.DeepEqual(got, []int64{6, 7}) {
		t.Errorf("the rest of the pass: %v", got)
	}
	again := closeDF(t, must(src().Map(failAt5)).of(t))
	if err := again.Iterate(func([]*Tensor) error { return nil }); err != errCorrupt {
		t.Errorf("Iterate: %v", err)
	}
	stopErr := errors.New("enough")
	n := 0
	if err := closeDF(t, must(src().Batch(1, DropRemainder)).of(t)).Iterate(func([]*Tensor) error {
		n++
		if n == 2 {
			return stopErr
		}
		return nil
	}); err != stopErr || n != 2 {
		t.Errorf("Iterate's own error: %v after %d", err, n)
	}
	// A Stop from a map function is an error (the library would take it
	// for the end of a pass that goes on).
	stopping := closeDF(t, must(src().Map(func(*Datapoint) error { return Stop("halt") })).of(t))
	_, err := stopping.Next()
	wantError(t, err, CodeCallback, `map function returned Stop("halt")`)
	empty := closeDF(t, must(DataFlowFromFunc(func() ([]*Tensor, error) { return nil, nil })).of(t))
	_, err = empty.Next()
	wantError(t, err, CodeCallback, "no component")
}

func TestDataFlowPanics(t *testing.T) {
	checkHandles(t)
	r := rowsT(t, 4)
	defer r.Close()
	type boom struct{ at float64 }
	panicAt2 := func(dp *Datapoint) error {
		x, err := dp.Get(0)
		if err != nil {
			return err
		}
		defer x.Close()
		if v, _ := x.Item(); v == 2 {
			panic(boom{v})
		}
		return nil
	}
	recovered := func(df *DataFlow) (p any) {
		defer func() { p = recover() }()
		for {
			c, err := df.Next()
			if err != nil {
				t.Errorf("Next() = %v, want a panic", err)
				return nil
			}
			closeAll(c)
		}
	}
	src := func() *DataFlow { return closeDF(t, must(DataFlowFromTensors([]*Tensor{r}, Sequential)).of(t)) }
	for name, df := range map[string]*DataFlow{
		"Map":          closeDF(t, must(src().Map(panicAt2)).of(t)),
		"ParallelMap":  closeDF(t, must(src().ParallelMap(&ParallelMapOptions{Ordered: true, Strict: true}, panicAt2)).of(t)),
		"Map+Prefetch": closeDF(t, must(closeDF(t, must(src().Map(panicAt2)).of(t)).Prefetch(2)).of(t)),
	} {
		if p := recovered(df); p != (boom{2}) {
			t.Errorf("%s: recovered %v, want boom{2}", name, p)
		}
	}
	sized := closeDF(t, must(DataFlowFromSource(panickySizer{})).of(t))
	func() {
		defer func() {
			if p := recover(); p != "no size" {
				t.Errorf("Size(): recovered %v", p)
			}
		}()
		sized.Size()
	}()
	// Nothing is left over: a clean pipeline works.
	if got := passValues(t, src()); !reflect.DeepEqual(got, []int64{0, 1, 2, 3}) {
		t.Errorf("clean pass %v", got)
	}
}

type panickySizer struct{}

func (panickySizer) Next() ([]*Tensor, error) { return nil, io.EOF }
func (panickySizer) Size() int64              { panic("no size") }

func TestDataFlowHandlesReleased(t *testing.T) {
	base := settledHandles()
	r := rowsT(t, 3)
	defer r.Close()
	src := must(DataFlowFromFunc(func() ([]*Tensor, error) { return nil, io.EOF })).of(t)
	mapped := must(src.Map(func(*Datapoint) error { return nil })).of(t)
	par := must(mapped.ParallelMap(nil, func(*Datapoint) error { return nil })).of(t)
	comp := must(par.MapComponent(0, func(x *Tensor) (*Tensor, error) { return x, nil })).of(t)
	src.Close()
	mapped.Close()
	par.Close()
	if n := liveHandles.Load() - base; n != 4 {
		t.Errorf("%d handles live, want 4 (comp keeps them)", n)
	}
	comp.Close()
	if n := liveHandles.Load() - base; n != 0 {
		t.Errorf("%d handles live after the last Close", n)
	}
	// A combinator the library refuses deletes its handle at once.
	df := must(DataFlowFromTensors([]*Tensor{r}, Sequential)).of(t)
	defer df.Close()
	consumer := must(df.Batch(1, DropRemainder)).of(t)
	defer consumer.Close()
	_, err := df.Map(func(*Datapoint) error { return nil })
	wantError(t, err, CodeInvalidArgument, "one consumer")
	if n := liveHandles.Load() - base; n != 0 {
		t.Errorf("%d handles live after a refused Map", n)
	}
}

// regressionDataFlow returns the dataflow of batches of 16 rows of
// regressionData(256), in the order given.
func regressionDataFlow(t *testing.T, rows int, batch int64, order Order) *DataFlow {
	t.Helper()
	xs, ys := regressionData(rows)
	x := must(FromFloat32(xs, int64(rows), 3)).of(t)
	defer x.Close()
	y := must(FromFloat32(ys, int64(rows), 1)).of(t)
	defer y.Close()
	src := closeDF(t, must(DataFlowFromTensors([]*Tensor{x, y}, order)).of(t))
	return closeDF(t, must(src.Batch(batch, DropRemainder)).of(t))
}

// A config fed by a function source: with a size the trainer takes its
// StepsPerEpoch from it; without one it is refused at once, naming the option
// as Go spells it.
func TestTrainConfigStepsFromSizedFunc(t *testing.T) {
	checkHandles(t)
	m := newRegressionModel(t, &regression{})
	setOptimizer(t, m, "sgd", 0.1)
	i := 0
	next := func() ([]*Tensor, error) {
		if i++; i > 4 {
			i = 0
			return nil, io.EOF
		}
		x, err := FromFloat32(make([]float32, 48), 16, 3)
		if err != nil {
			return nil, err
		}
		y, err := FromFloat32(make([]float32, 16), 16, 1)
		return []*Tensor{x, y}, err
	}
	df := must(DataFlowFromFunc(next)).of(t)
	_, err := NewTrainerFromConfig(&TrainConfig{Options: quietOptions(1, 3, -1), Model: m, DataFlow: df})
	wantError(t, err, CodeInvalidArgument, "NewTrainerFromConfig: TrainerOptions.StepsPerEpoch is not set")
	if !strings.Contains(err.Error(), "DataFlowFromFuncSized") {
		t.Errorf("%v does not point at DataFlowFromFuncSized", err)
	}
	df.Close()
	df = must(DataFlowFromFuncSized(4, next)).of(t)
	defer df.Close()
	tr := must(NewTrainerFromConfig(&TrainConfig{Options: quietOptions(1, 3, -1), Model: m, DataFlow: df})).of(t)
	defer tr.Close()
	ok(t, tr.Run())
	if g := tr.GlobalStep(); g != 12 {
		t.Errorf("GlobalStep() = %d, want 12 (3 epochs of the source's 4)", g)
	}
	_, err = DataFlowFromFuncSized(-1, next)
	wantError(t, err, CodeInvalidArgument, "size must be >= 0")
}

func TestTrainConfigDataFlow(t *testing.T) {
	checkHandles(t)
	ok(t, ManualSeed(1))
	r := &regression{}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "sgd", 0.1)
	train := regressionDataFlow(t, 256, 16, Shuffled)
	test := regressionDataFlow(t, 256, 64, Sequential)
	runner := must(NewInferenceRunner(m, test, "cost")).of(t)
	var costs []float64
	tr := must(NewTrainerFromConfig(&TrainConfig{
		Options:   quietOptions(1, 4, -1),
		Model:     m,
		DataFlow:  train,
		Callbacks: []*Callback{runner, costLog(t, &costs)},
	})).of(t)
	defer tr.Close()
	ok(t, tr.Run())
	if g := tr.GlobalStep(); g != 4*16 {
		t.Errorf("GlobalStep() = %d, want 64 (16 steps per epoch from the dataflow)", g)
	}
	if n := len(history(t, tr, "cost")); n != 4 {
		t.Errorf("%d entries of the cost's moving average, want 4 (one per epoch)", n)
	}
	if len(costs) != 64 {
		t.Fatalf("%d step costs, want 64", len(costs))
	}
	first, last := mean(costs[:8]), mean(costs[len(costs)-8:])
	if !(last < first/10) {
		t.Errorf("the cost fell from %v to %v only", first, last)
	}
	val := history(t, tr, "validation_cost")
	if len(val) != 4 || !(val[3] < val[0]) || !(val[3] < 0.05) {
		t.Errorf("validation_cost %v", val)
	}
	if _, _, err := tr.ScalarLatest("QueueInput/queue_size"); err != nil {
		t.Error(err)
	}
	// The trainer consumed train.
	_, err := train.Next()
	wantError(t, err, CodeInvalidArgument, "one consumer")
	// Both, and neither.
	_, err = NewTrainerFromConfig(&TrainConfig{Options: quietOptions(1, 1, -1), Model: m,
		Input: must(InputDummy(4)).of(t), DataFlow: regressionDataFlow(t, 64, 16, Sequential)})
	wantError(t, err, CodeInvalidArgument, "")
	_, err = NewTrainerFromConfig(&TrainConfig{Options: quietOptions(1, 1, -1), Model: m})
	wantError(t, err, CodeInvalidArgument, "")
}

// costLog records each step's cost, as a user does: read from the step's
// output after each step (the monitors get only its moving average, once per
// epoch).
func costLog(t *testing.T, costs *[]float64) *Callback {
	t.Helper()
	return must(NewCallback("cost_log", EventAfterRun, nil, func(ctx *Context, _ Event, _ *Record) error {
		c, err := ctx.OutputScalar("cost")
		*costs = append(*costs, c)
		return err
	})).of(t)
}

func history(t *testing.T, tr *Trainer, name string) []float64 {
	t.Helper()
	_, values, err := tr.ScalarHistory(name)
	ok(t, err)
	return values
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func TestDataFlowErrorsEndTraining(t *testing.T) {
	checkHandles(t)
	r := &regression{}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "sgd", 0.1)
	failing := func(kind InputKind, panics bool) *Input {
		var step atomic.Int32
		df := closeDF(t, must(regressionDataFlow(t, 256, 16, Sequential).Map(func(*Datapoint) error {
			if step.Add(1) == 6 {
				if panics {
					panic("the reader crashed")
				}
				return errCorrupt
			}
			return nil
		})).of(t))
		return must(InputFromDataFlow(df, &InputOptions{Kind: kind})).of(t)
	}
	for _, kind := range []InputKind{InputQueue, InputFeed} {
		tr := newQuietTrainer(t, 1, 3, -1)
		ok(t, tr.SetModel(m, failing(kind, false)))
		if err := tr.Run(); err != errCorrupt {
			t.Errorf("kind %d: Run() = %v, want the map function's error", kind, err)
		}
		tr = newQuietTrainer(t, 1, 3, -1)
		ok(t, tr.SetModel(m, failing(kind, true)))
		if err, p := runAndRecover(tr); p != "the reader crashed" {
			t.Errorf("kind %d: Run() = %v, recovered %v", kind, err, p)
		}
	}
	// Through a config and an inference runner too.
	bad := closeDF(t, must(regressionDataFlow(t, 64, 16, Sequential).Map(func(*Datapoint) error { return errCorrupt })).of(t))
	runner := must(NewInferenceRunner(m, bad, "cost")).of(t)
	_, err := LaunchTrain(context.Background(), &TrainConfig{Options: quietOptions(1, 2, 2), Model: m,
		DataFlow: regressionDataFlow(t, 64, 16, Sequential), Callbacks: []*Callback{runner}})
	if err != errCorrupt {
		t.Errorf("LaunchTrain with a failing inference runner: %v", err)
	}
}

func TestInputFeedStagingDummy(t *testing.T) {
	checkHandles(t)
	r := &regression{}
	m := newRegressionModel(t, r)
	setOptimizer(t, m, "sgd", 0.1)
	df := regressionDataFlow(t, 256, 16, Sequential)
	in := must(InputFromDataFlow(df, &InputOptions{Kind: InputFeed, Once: true})).of(t)
	staged := must(InputStaging(in, "")).of(t)
	ok(t, in.Close()) // taken: Close does nothing
	tr := newQuietTrainer(t, 1, 5, 10)
	ok(t, tr.SetModel(m, staged))
	ok(t, tr.Run())
	if reason, stopped := tr.StopReason(); !stopped || reason == "" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
	if g := tr.GlobalStep(); g != 16 {
		t.Errorf("GlobalStep() = %d, want the 16 batches of one pass", g)
	}
	_, err := InputStaging(must(InputDummy(4)).of(t), "gpu:7")
	wantError(t, err, CodeInvalidArgument, "gpu:7")
	tr = newQuietTrainer(t, 1, 2, 3)
	ok(t, tr.SetModel(m, must(InputDummy(8)).of(t)))
	ok(t, tr.Run())
	if g := tr.GlobalStep(); g != 6 {
		t.Errorf("GlobalStep() = %d", g)
	}
}

// A source that closes its own dataflow: the Close waits for the Next in
// progress (no deadlock on the handle's lock), which returns its datapoint;
// the dataflow is closed afterwards.
func TestSourceClosesItsDataFlow(t *testing.T) {
	checkHandles(t)
	var df *DataFlow
	calls := 0
	df = must(DataFlowFromFunc(func() ([]*Tensor, error) {
		calls++
		if calls == 2 {
			if err := df.Close(); err != nil {
				return nil, err
			}
		}
		x, err := FromFloat32([]float32{float32(calls)}, 1)
		return []*Tensor{x}, err
	})).of(t)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 2; i++ {
			ts, err := df.Next()
			if err != nil {
				done <- err
				return
			}
			for _, x := range ts {
				x.Close()
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		ok(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Close from the dataflow's own source hung")
	}
	_, err := df.Next()
	wantError(t, err, CodeInvalidArgument, "use of closed")
}

// TestMapSeeds: Datapoint.Seed gives a map function a seed per datapoint,
// drawn in input order from the map's seeded generator: the same for the
// same seed, and for each datapoint whatever the workers of a parallel map.
// The C twin is test_map_seeds.
func TestMapSeeds(t *testing.T) {
	r8 := rowsT(t, 8)
	defer r8.Close()
	seeds := func(threads int, seed uint64) []uint64 {
		var mu sync.Mutex
		got := make([]uint64, 8)
		fn := func(dp *Datapoint) error {
			x, err := dp.Get(0)
			if err != nil {
				return err
			}
			defer x.Close()
			v, err := x.Item()
			if err != nil {
				return err
			}
			s, err := dp.Seed()
			mu.Lock()
			got[int(v)] = s
			mu.Unlock()
			return err
		}
		src := closeDF(t, must(DataFlowFromTensors([]*Tensor{r8}, Sequential)).of(t))
		var df *DataFlow
		if threads == 0 {
			df = closeDF(t, must(src.Map(fn)).of(t))
		} else {
			df = closeDF(t, must(src.ParallelMap(&ParallelMapOptions{Threads: threads, BufferSize: 4, Strict: true}, fn)).of(t))
		}
		ok(t, df.SetSeed(seed))
		if n := len(passValues(t, df)); n != 8 {
			t.Fatalf("a pass of %d", n)
		}
		return got
	}
	if a, b := seeds(0, 7), seeds(0, 7); !reflect.DeepEqual(a, b) {
		t.Errorf("the same seed: %v and %v", a, b)
	}
	if a, b := seeds(0, 7), seeds(0, 8); reflect.DeepEqual(a, b) {
		t.Errorf("another seed, the same seeds %v", a)
	}
	if a, b := seeds(1, 7), seeds(3, 7); !reflect.DeepEqual(a, b) {
		t.Errorf("1 worker %v, 3 workers %v", a, b)
	}
	dp := must(NewDatapoint()).of(t)
	defer dp.Close()
	_, err := dp.Seed()
	wantError(t, err, CodeState, "only the datapoint a map function")
}

// TestTrainConfigInputOptions: InputOptions shape the input made from the
// config's DataFlow: a queue that does not repeat ends the run after one
// pass; with an Input they are an error.
func TestTrainConfigInputOptions(t *testing.T) {
	m := newRegressionModel(t, &regression{})
	setOptimizer(t, m, "sgd", 0.01)
	df := regressionDataFlow(t, 64, 16, Sequential)
	out, err := LaunchTrain(context.Background(), &TrainConfig{Options: quietOptions(1, 3, -1), Model: m, DataFlow: df,
		InputOptions: &InputOptions{Capacity: 2, Once: true}})
	ok(t, err)
	if !out.Stopped || !strings.Contains(out.Reason, "the input does not repeat") || out.GlobalStep != 4 {
		t.Errorf("LaunchTrain() = %+v, want a stop after the first pass of 4 batches", out)
	}
	_, err = NewTrainerFromConfig(&TrainConfig{Model: m, Input: regressionInput(t, 16, 64),
		InputOptions: &InputOptions{Capacity: 2}})
	wantError(t, err, CodeInvalidArgument, "config->input_options is set with config->input")
}

// The dataflow's choices are named values, not positional bools: each one
// does what its name says, and a value outside its enum is refused.
func TestDataFlowNamedChoices(t *testing.T) {
	checkHandles(t)
	x := rowsT(t, 5)
	defer x.Close()
	sizes := func(df *DataFlow) []int64 {
		var out []int64
		ok(t, df.Iterate(func(c []*Tensor) error {
			shape, err := c[0].Shape()
			if err == nil {
				out = append(out, shape[0])
			}
			return err
		}))
		return out
	}
	// A dataflow has one consumer: a new source for each.
	src := func() *DataFlow { return closeDF(t, must(DataFlowFromTensors([]*Tensor{x}, Sequential)).of(t)) }
	if got := passValues(t, src()); !reflect.DeepEqual(got, []int64{0, 1, 2, 3, 4}) {
		t.Errorf("Sequential: %v", got)
	}
	shuffled := closeDF(t, must(DataFlowFromTensors([]*Tensor{x}, Shuffled)).of(t))
	ok(t, shuffled.SetSeed(3))
	first, second := passValues(t, shuffled), passValues(t, shuffled)
	if reflect.DeepEqual(first, second) && reflect.DeepEqual(first, []int64{0, 1, 2, 3, 4}) {
		t.Errorf("Shuffled gave the rows in order twice: %v", first)
	}
	if got := sizes(closeDF(t, must(src().Batch(2, DropRemainder)).of(t))); !reflect.DeepEqual(got, []int64{2, 2}) {
		t.Errorf("DropRemainder: batch sizes %v, want [2 2]", got)
	}
	if got := sizes(closeDF(t, must(src().Batch(2, KeepRemainder)).of(t))); !reflect.DeepEqual(got, []int64{2, 2, 1}) {
		t.Errorf("KeepRemainder: batch sizes %v, want [2 2 1]", got)
	}
	keep := closeDF(t, must(src().FixedSize(3, KeepInnerState)).of(t))
	if a, b := passValues(t, keep), passValues(t, keep); !reflect.DeepEqual(a, []int64{0, 1, 2}) || !reflect.DeepEqual(b, []int64{3, 4, 0}) {
		t.Errorf("KeepInnerState: passes %v, %v; want [0 1 2], [3 4 0]", a, b)
	}
	reset := closeDF(t, must(src().FixedSize(3, ResetInnerState)).of(t))
	if a, b := passValues(t, reset), passValues(t, reset); !reflect.DeepEqual(a, []int64{0, 1, 2}) || !reflect.DeepEqual(b, []int64{0, 1, 2}) {
		t.Errorf("ResetInnerState: passes %v, %v; want [0 1 2] twice", a, b)
	}
	cached := closeDF(t, must(src().Cache(Sequential)).of(t))
	if got := passValues(t, cached); !reflect.DeepEqual(got, []int64{0, 1, 2, 3, 4}) {
		t.Errorf("Cache(Sequential): %v", got)
	}

	// Fake data: nil is tensorpack's FakeData (random in [0, 1)); Constant
	// repeats one datapoint.
	spec := []InputSpec{{Name: "v", DType: DTypeFloat32, Shape: []int64{4}}}
	values := func(o *FakeOptions) [][]float32 {
		var out [][]float32
		df := closeDF(t, must(DataFlowFake(spec, 3, o)).of(t))
		ok(t, df.Iterate(func(c []*Tensor) error {
			v, err := c[0].Float32s()
			out = append(out, v)
			return err
		}))
		return out
	}
	random := values(nil)
	for _, dp := range random {
		for _, v := range dp {
			if v < 0 || v >= 1 {
				t.Errorf("DataFlowFake(nil): %v outside [0, 1)", v)
			}
		}
	}
	if reflect.DeepEqual(random[0], random[1]) {
		t.Errorf("DataFlowFake(nil) repeated a datapoint: %v", random)
	}
	constant := values(&FakeOptions{Constant: true, Low: -3, High: -2})
	if !reflect.DeepEqual(constant[0], constant[1]) || !reflect.DeepEqual(constant[1], constant[2]) || constant[0][0] < -3 || constant[0][0] >= -2 {
		t.Errorf("DataFlowFake(Constant in [-3, -2)): %v", constant)
	}

	wantError(t, must(DataFlowFromTensors([]*Tensor{x}, Order(2))).err, CodeInvalidArgument,
		"DataFlowFromTensors: the order must be Sequential or Shuffled, got 2")
	wantError(t, must(src().Cache(Order(-1))).err, CodeInvalidArgument, "DataFlow.Cache: the order must be Sequential or Shuffled")
	wantError(t, must(InputFromTensors([]*Tensor{x}, 2, Order(5), 0)).err, CodeInvalidArgument, "InputFromTensors: the order")
	wantError(t, must(DataFlowMNIST("/nonexistent", "train", Order(9))).err, CodeInvalidArgument, "DataFlowMNIST: the order")
	wantError(t, must(src().Batch(2, Remainder(2))).err, CodeInvalidArgument,
		"DataFlow.Batch: the remainder must be DropRemainder or KeepRemainder, got 2")
	wantError(t, must(src().FixedSize(3, InnerState(3))).err, CodeInvalidArgument,
		"DataFlow.FixedSize: the state must be KeepInnerState or ResetInnerState, got 3")
}
