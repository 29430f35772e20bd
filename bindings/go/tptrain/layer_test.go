package tptrain

import (
	"math"
	"reflect"
	"testing"
)

// closeLater collects the tensors a tower function makes, to close them
// when it returns.
type closeLater []*Tensor

func (c *closeLater) add(x *Tensor, err error) (*Tensor, error) {
	if x != nil {
		*c = append(*c, x)
	}
	return x, err
}

func (c *closeLater) close() { closeAll(*c) }

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-5+1e-4*math.Abs(b) }

func nearAll(got []float32, want ...float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !near(float64(got[i]), want[i]) {
			return false
		}
	}
	return true
}

func TestLayersBuildVariablesAndShapes(t *testing.T) {
	checkHandles(t)
	var shapes map[string][]int64
	type failed struct{ err error }
	m := must(NewModel([]InputSpec{{Name: "image", Shape: []int64{-1, 1, 8, 8}}}, func(tw *Tower, in []*Tensor) (err error) {
		var c closeLater
		defer c.close()
		defer func() {
			if p, isFailed := recover().(failed); isFailed {
				err = p.err
			}
		}()
		shapes = map[string][]int64{}
		step := func(name string) func(*Tensor, error) *Tensor {
			return func(x *Tensor, err error) *Tensor {
				if err != nil {
					panic(failed{err})
				}
				c.add(x, nil)
				shape, err := x.Shape()
				if err != nil {
					panic(failed{err})
				}
				shapes[name] = shape
				return x
			}
		}
		x := in[0]
		x = step("conv")(tw.Conv2D("conv", x, 4, &LayerOptions{Activation: ActReLU}))
		x = step("bn")(tw.BatchNorm("bn", x, 0.9, 1e-5))
		x = step("pool")(MaxPool(x, 2, 2, PaddingValid))
		x = step("wide")(tw.Conv2D("wide", x, 2, &LayerOptions{Kernel: [2]int64{3}, Stride: [2]int64{2}, NoBias: true}))
		up := step("deconv")(tw.Conv2DTranspose("deconv", x, 3, &LayerOptions{Kernel: [2]int64{2, 2}, Stride: [2]int64{2, 2}}))
		step("avg")(AvgPool(up, 2, 2, PaddingSame))
		g := step("gap")(GlobalAvgPool(up))
		f := step("flat")(Flatten(x))
		f = step("fc")(tw.FC("fc", f, 5, &LayerOptions{Activation: ActLeakyReLU, KernelInit: InitGlorotUniform}))
		f = step("ln")(tw.LayerNorm("ln", f, 1e-5))
		f = step("drop")(tw.Dropout(f, 0.5))
		both := step("concat")(Concat([]*Tensor{f, g}, 1))
		step("softmax")(Activation(both, ActSoftmax, 0))
		reg := step("reg")(tw.RegularizeL2("/W$", 1e-4))
		return tw.SetOutput("reg", reg)
	})).of(t)
	defer m.Close()
	ok(t, m.Build())
	want := map[string][]int64{
		"conv": {1, 4, 8, 8}, "bn": {1, 4, 8, 8}, "pool": {1, 4, 4, 4}, "wide": {1, 2, 2, 2},
		"deconv": {1, 3, 4, 4}, "avg": {1, 3, 2, 2}, "gap": {1, 3}, "flat": {1, 8}, "fc": {1, 5},
		"ln": {1, 5}, "drop": {1, 5}, "concat": {1, 8}, "softmax": {1, 8}, "reg": {},
	}
	if !reflect.DeepEqual(shapes, want) {
		t.Errorf("shapes\n%v\nwant\n%v", shapes, want)
	}
	names := must(m.VariableNames()).of(t)
	wantNames := []string{"conv/W", "conv/b", "bn/gamma", "bn/beta", "bn/mean/EMA", "bn/variance/EMA",
		"wide/W", "deconv/W", "deconv/b", "fc/W", "fc/b", "ln/gamma", "ln/beta"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("VariableNames()\n%q\nwant\n%q", names, wantNames)
	}
	for name, shape := range map[string][]int64{
		"conv/W": {4, 1, 3, 3}, "wide/W": {2, 4, 3, 3}, "deconv/W": {2, 3, 2, 2}, "fc/W": {5, 8}, "fc/b": {5},
	} {
		v := must(m.Variable(name)).of(t)
		if got := must(v.Shape()).of(t); !reflect.DeepEqual(got, shape) {
			t.Errorf("%s has shape %v, want %v", name, got, shape)
		}
		closeT(t, v)
	}
	// Inference through every layer, with a batch of 2.
	img := must(FromFloat32(make([]float32, 2*64), 2, 1, 8, 8)).of(t)
	defer closeT(t, img)
	outs := must(m.Infer([]*Tensor{img}, []string{"reg"})).of(t)
	defer closeAll(outs)
	if shapes["softmax"][0] != 2 {
		t.Errorf("softmax shape in inference: %v", shapes["softmax"])
	}
	if r := must(outs[0].Item()).of(t); !(r > 0) {
		t.Errorf("L2 regularisation %v", r)
	}
}

func TestFCValuesAndRegularizeL2(t *testing.T) {
	checkHandles(t)
	m := must(NewModel([]InputSpec{{Name: "x", Shape: []int64{-1, 2}}}, func(tw *Tower, in []*Tensor) error {
		var c closeLater
		defer c.close()
		y, err := c.add(tw.FC("fc", in[0], 2, nil))
		if err != nil {
			return err
		}
		r, err := c.add(tw.FC("relu", in[0], 1, &LayerOptions{NoBias: true, Activation: ActReLU}))
		if err != nil {
			return err
		}
		l2, err := c.add(tw.RegularizeL2("/W$", 0.5))
		if err != nil {
			return err
		}
		if err := tw.SetOutput("y", y); err != nil {
			return err
		}
		if err := tw.SetOutput("relu", r); err != nil {
			return err
		}
		return tw.SetOutput("l2", l2)
	})).of(t)
	defer m.Close()
	ok(t, m.Build())
	set := func(name string, v []float32, shape ...int64) {
		x := must(FromFloat32(v, shape...)).of(t)
		defer closeT(t, x)
		ok(t, m.SetVariable(name, x))
	}
	set("fc/W", []float32{1, 2, 3, 4}, 2, 2)
	set("fc/b", []float32{0.5, -0.5}, 2)
	set("relu/W", []float32{1, -1}, 1, 2)
	x := must(FromFloat32([]float32{1, 1, 2, 3}, 2, 2)).of(t)
	defer closeT(t, x)
	outs := must(m.Infer([]*Tensor{x}, []string{"y", "relu", "l2"})).of(t)
	defer closeAll(outs)
	// y = x W^T + b
	if got := must(outs[0].Float32s()).of(t); !nearAll(got, 3.5, 6.5, 8.5, 17.5) {
		t.Errorf("fc = %v", got)
	}
	if got := must(outs[1].Float32s()).of(t); !nearAll(got, 0, 0) { // relu(1-1), relu(2-3)
		t.Errorf("relu fc = %v", got)
	}
	if got := must(outs[2].Item()).of(t); !near(got, 0.5*(1+4+9+16+1+1)) {
		t.Errorf("l2 = %v, want 16", got)
	}
}

func TestPoolingActivationsShapes(t *testing.T) {
	iota := make([]float32, 16)
	for i := range iota {
		iota[i] = float32(i + 1)
	}
	img := must(FromFloat32(iota, 1, 1, 4, 4)).of(t)
	defer closeT(t, img)
	mp := must(MaxPool(img, 2, 2, PaddingValid)).of(t)
	defer closeT(t, mp)
	if got := must(mp.Float32s()).of(t); !nearAll(got, 6, 8, 14, 16) {
		t.Errorf("max pool = %v", got)
	}
	ap := must(AvgPool(img, 2, 2, PaddingValid)).of(t)
	defer closeT(t, ap)
	if got := must(ap.Float32s()).of(t); !nearAll(got, 3.5, 5.5, 11.5, 13.5) {
		t.Errorf("avg pool = %v", got)
	}
	g := must(GlobalAvgPool(img)).of(t)
	defer closeT(t, g)
	checkMeta(t, g, DTypeFloat32, 1, 1)
	if v := must(g.Item()).of(t); !near(v, 8.5) {
		t.Errorf("global avg pool = %v", v)
	}
	f := must(Flatten(img)).of(t)
	defer closeT(t, f)
	checkMeta(t, f, DTypeFloat32, 1, 16)

	v := must(FromFloat32([]float32{-2, 0, 3}, 1, 3)).of(t)
	defer closeT(t, v)
	for _, c := range []struct {
		act   Act
		alpha float64
		want  []float64
	}{
		{ActNone, 0, []float64{-2, 0, 3}},
		{ActReLU, 0, []float64{0, 0, 3}},
		{ActLeakyReLU, 0.1, []float64{-0.2, 0, 3}},
		{ActTanh, 0, []float64{math.Tanh(-2), 0, math.Tanh(3)}},
		{ActSigmoid, 0, []float64{1 / (1 + math.Exp(2)), 0.5, 1 / (1 + math.Exp(-3))}},
	} {
		y := must(Activation(v, c.act, c.alpha)).of(t)
		if got := must(y.Float32s()).of(t); !nearAll(got, c.want...) {
			t.Errorf("activation %d: %v, want %v", c.act, got, c.want)
		}
		closeT(t, y)
	}
	sm := must(Activation(v, ActSoftmax, 0)).of(t)
	defer closeT(t, sm)
	if got := must(sm.Float32s()).of(t); !near(float64(got[0]+got[1]+got[2]), 1) {
		t.Errorf("softmax = %v", got)
	}
	_, err := Activation(v, Act(42), 0)
	wantError(t, err, CodeInvalidArgument, "42")

	a := must(FromFloat32([]float32{1, 2}, 1, 2)).of(t)
	defer closeT(t, a)
	b := must(FromFloat32([]float32{3, 4, 5, 6}, 2, 2)).of(t)
	defer closeT(t, b)
	cat := must(Concat([]*Tensor{a, b, a}, 0)).of(t)
	defer closeT(t, cat)
	if got := must(cat.Float32s()).of(t); !nearAll(got, 1, 2, 3, 4, 5, 6, 1, 2) {
		t.Errorf("concat = %v", got)
	}
	_, err = Concat([]*Tensor{a, b}, 1)
	wantError(t, err, CodeInvalidArgument, "only dimension 1 may differ")
	_, err = Concat(nil, 0)
	wantError(t, err, CodeInvalidArgument, "n is 0")
	_, err = Concat([]*Tensor{a, nil}, 0)
	wantError(t, err, CodeInvalidArgument, "Concat: xs[1] is nil")
	_, err = MaxPool(nil, 2, 2, PaddingSame)
	wantError(t, err, CodeInvalidArgument, "MaxPool: x is nil")
}

func TestLossesAndMetrics(t *testing.T) {
	logits := must(FromFloat32([]float32{0, 0, 2, 1, 0, 3}, 2, 3)).of(t)
	defer closeT(t, logits)
	labels := must(FromInt64([]int64{0, 1})).of(t)
	defer closeT(t, labels)
	ce := must(SoftmaxCrossEntropy(logits, labels)).of(t)
	defer closeT(t, ce)
	lse := func(v ...float64) float64 {
		s := 0.0
		for _, x := range v {
			s += math.Exp(x)
		}
		return math.Log(s)
	}
	want := ((lse(0, 0, 2) - 0) + (lse(1, 0, 3) - 0)) / 2
	if got := must(ce.Item()).of(t); !near(got, want) {
		t.Errorf("softmax cross-entropy = %v, want %v", got, want)
	}
	acc := must(Accuracy(logits, labels)).of(t)
	defer closeT(t, acc)
	checkMeta(t, acc, DTypeFloat32)
	if got := must(acc.Item()).of(t); got != 0 {
		t.Errorf("accuracy = %v, want 0", got)
	}
	w1 := must(Wrong(logits, labels, 1)).of(t)
	defer closeT(t, w1)
	if got := must(w1.Float32s()).of(t); !nearAll(got, 1, 1) {
		t.Errorf("wrong@1 = %v", got)
	}
	w2 := must(Wrong(logits, labels, 2)).of(t)
	defer closeT(t, w2)
	if got := must(w2.Float32s()).of(t); !nearAll(got, 0, 1) { // label 0 ties 2nd; label 1 is last
		t.Errorf("wrong@2 = %v", got)
	}
	_, err := Wrong(logits, labels, 0)
	wantError(t, err, CodeInvalidArgument, "k must be >= 1, got 0")

	p := must(FromFloat32([]float32{1, 2, 3})).of(t)
	defer closeT(t, p)
	q := must(FromFloat32([]float32{1, 0, 5})).of(t)
	defer closeT(t, q)
	mse := must(MSELoss(p, q)).of(t)
	defer closeT(t, mse)
	if got := must(mse.Item()).of(t); !near(got, 8.0/3) {
		t.Errorf("mse = %v", got)
	}
	l1 := must(L1Loss(p, q)).of(t)
	defer closeT(t, l1)
	if got := must(l1.Item()).of(t); !near(got, 4.0/3) {
		t.Errorf("l1 = %v", got)
	}
	z := must(FromFloat32([]float32{0, 0, 0})).of(t)
	defer closeT(t, z)
	bce := must(SigmoidCrossEntropy(z, q)).of(t) // any targets: -t log .5 - (1-t) log .5
	defer closeT(t, bce)
	if got := must(bce.Item()).of(t); !near(got, math.Log(2)) {
		t.Errorf("sigmoid cross-entropy = %v", got)
	}
	_, err = SoftmaxCrossEntropy(logits, p)
	wantError(t, err, CodeInvalidArgument, "labels must be i64")
	_, err = MSELoss(p, labels)
	wantError(t, err, CodeInvalidArgument, "target must have the shape of prediction [3], got [2]")
	_, err = SoftmaxCrossEntropy(logits, nil)
	wantError(t, err, CodeInvalidArgument, "SoftmaxCrossEntropy: labels is nil")
}

func TestLayerErrorsAndStaleTower(t *testing.T) {
	checkHandles(t)
	var kept *Tower
	m := must(NewModel([]InputSpec{{Name: "x", Shape: []int64{-1, 2}}}, func(tw *Tower, in []*Tensor) error {
		kept = tw
		_, err := tw.FC("", in[0], 2, nil)
		wantError(t, err, CodeInvalidArgument, "argument 'name' is empty")
		_, err = tw.FC("fc", in[0], 0, nil)
		wantError(t, err, CodeInvalidArgument, "units is 0")
		_, err = tw.FC("fc", nil, 2, nil)
		wantError(t, err, CodeInvalidArgument, "Tower.FC: x is nil")
		_, err = tw.BatchNorm("bn", in[0], 1.5, 1e-5)
		wantError(t, err, CodeInvalidArgument, "momentum must be in [0, 1], got 1.5")
		_, err = tw.LayerNorm("ln", in[0], -1)
		wantError(t, err, CodeInvalidArgument, "eps must be > 0")
		_, err = tw.Conv2D("conv", in[0], 2, &LayerOptions{Stride: [2]int64{-1, 1}})
		wantError(t, err, CodeInvalidArgument, "options->stride[0] is -1")
		_, err = tw.RegularizeL2("(", 1)
		wantError(t, err, CodeInvalidArgument, "pattern '(' is not a regular expression")
		return nil
	})).of(t)
	defer m.Close()
	ok(t, m.Build())
	x := must(FromFloat32([]float32{1, 2}, 1, 2)).of(t)
	defer closeT(t, x)
	_, err := kept.FC("fc", x, 2, nil)
	wantError(t, err, CodeInvalidArgument, "Tower.FC: use of a Tower after its tower function returned")
	_, err = kept.Dropout(x, 0.5)
	wantError(t, err, CodeInvalidArgument, "Tower.Dropout: use of a Tower after")
	_, err = kept.RegularizeL2("W", 1)
	wantError(t, err, CodeInvalidArgument, "Tower.RegularizeL2: use of a Tower after")
}

func TestTrainMLPWithLayers(t *testing.T) {
	// y = x . (1, -2, 3) + 1 with two FC layers, Adam: the cost falls.
	checkHandles(t)
	ok(t, ManualSeed(1))
	m := must(NewModel(regressionSpec(), func(tw *Tower, in []*Tensor) error {
		var c closeLater
		defer c.close()
		h, err := c.add(tw.FC("fc1", in[0], 16, &LayerOptions{Activation: ActTanh}))
		if err != nil {
			return err
		}
		y, err := c.add(tw.FC("fc2", h, 1, &LayerOptions{KernelInit: InitGlorotUniform}))
		if err != nil {
			return err
		}
		cost, err := c.add(MSELoss(y, in[1]))
		if err != nil {
			return err
		}
		return tw.SetCost(cost)
	})).of(t)
	defer m.Close()
	setOptimizer(t, m, "adam", 0.01)
	tr := newQuietTrainer(t, 1, 10, 32)
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	var costs []float64
	ok(t, tr.AddCallback(costLog(t, &costs)))
	ok(t, tr.Run())
	if len(costs) != 320 || !(costs[len(costs)-1] < costs[0]/10) {
		t.Errorf("%d costs, first %v, last %v", len(costs), costs[0], costs[len(costs)-1])
	}
}

// LayerNormAxes over C, H, W with per-channel gamma and beta (tensorpack's
// LayerNorm of NCHW), against a hand computation.
func TestLayerNormAxes(t *testing.T) {
	checkHandles(t)
	m := must(NewModel([]InputSpec{{Name: "x", Shape: []int64{-1, 2, 1, 2}}}, func(tw *Tower, in []*Tensor) error {
		y, err := tw.LayerNormAxes("ln", in[0], []int64{1, 2, 3}, 1, 1e-5)
		if err != nil {
			return err
		}
		return tw.SetOutput("y", y)
	})).of(t)
	defer m.Close()
	ok(t, m.Build())
	for name, v := range map[string][]float32{"ln/gamma": {2, 1}, "ln/beta": {0, 10}} {
		x := must(FromFloat32(v, 2)).of(t)
		ok(t, m.SetVariable(name, x))
		x.Close()
	}
	xs := []float32{1, 2, 3, 6, 5, 5, 5, 5}
	x := must(FromFloat32(xs, 2, 2, 1, 2)).of(t)
	defer x.Close()
	outs := must(m.Infer([]*Tensor{x}, []string{"y"})).of(t)
	defer closeAll(outs)
	got := must(outs[0].Float32s()).of(t)
	sd := math.Sqrt(3.5 + 1e-5) // example 1: mean 3, biased variance 3.5
	gamma, beta := []float64{2, 1}, []float64{0, 10}
	for i, g := range got {
		want := beta[(i%4)/2] // example 2 is constant
		if i < 4 {
			want = (float64(xs[i])-3)/sd*gamma[i/2] + beta[i/2]
		}
		if math.Abs(float64(g)-want) > 1e-5 {
			t.Errorf("y[%d] = %v, want %v", i, g, want)
		}
	}
	bad := must(NewModel([]InputSpec{{Name: "x", Shape: []int64{-1, 2, 1, 2}}}, func(tw *Tower, in []*Tensor) error {
		_, err := tw.LayerNormAxes("ln", in[0], []int64{1, 1}, 1, 1e-5)
		wantError(t, err, CodeInvalidArgument, "axis 1 is given twice")
		return nil
	})).of(t)
	defer bad.Close()
	ok(t, bad.Build())
}
