// Command mlp_regression trains a small multi-layer perceptron on synthetic
// data with tptrain's model API: a tower function built from FC layers, an
// in-memory input, Adam, and the simple trainer.
//
// The target is y = x . (1, -2, 3) + 1 + 0.5 x0 x1 (a plane with a twist,
// which a linear model cannot fit) for x uniform in [-1, 1)^3. After
// training, an inference pass over the whole data set computes the final
// mean squared error; the program exits with status 1 if it is not below
// 0.01.
//
//	cd examples/go && PKG_CONFIG_PATH=$BUILD/meson-uninstalled LD_LIBRARY_PATH=$BUILD go run ./mlp_regression
package main

import (
	"fmt"
	"log"
	"math/rand"
	"os"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

const (
	rows      = 512
	batchSize = 32
	epochs    = 60
	threshold = 0.01
)

// data returns rows of x and y.
func data(rng *rand.Rand) (x, y []float32) {
	x = make([]float32, rows*3)
	y = make([]float32, rows)
	for i := 0; i < rows; i++ {
		for j := 0; j < 3; j++ {
			x[i*3+j] = rng.Float32()*2 - 1
		}
		x0, x1, x2 := x[i*3], x[i*3+1], x[i*3+2]
		y[i] = x0 - 2*x1 + 3*x2 + 1 + 0.5*x0*x1
	}
	return x, y
}

// tower is the model: two hidden layers of 32 tanh units and a linear
// output; the cost is the mean squared error. It may run on several threads
// at once, so it keeps no state of its own.
func tower(t *tptrain.Tower, in []*tptrain.Tensor) error {
	x, y := in[0], in[1]
	h, err := t.FC("fc1", x, 32, &tptrain.LayerOptions{Activation: tptrain.ActTanh, KernelInit: tptrain.InitGlorotUniform})
	if err != nil {
		return err
	}
	h, err = t.FC("fc2", h, 32, &tptrain.LayerOptions{Activation: tptrain.ActTanh, KernelInit: tptrain.InitGlorotUniform})
	if err != nil {
		return err
	}
	pred, err := t.FC("out", h, 1, &tptrain.LayerOptions{KernelInit: tptrain.InitGlorotUniform})
	if err != nil {
		return err
	}
	cost, err := tptrain.MSELoss(pred, y)
	if err != nil {
		return err
	}
	if err := t.SetOutput("prediction", pred); err != nil {
		return err
	}
	return t.SetCost(cost)
}

func main() {
	log.SetFlags(0)
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	if err := tptrain.ManualSeed(7); err != nil {
		return err
	}
	xs, ys := data(rand.New(rand.NewSource(1)))
	x, err := tptrain.FromFloat32(xs, rows, 3)
	if err != nil {
		return err
	}
	defer x.Close()
	y, err := tptrain.FromFloat32(ys, rows, 1)
	if err != nil {
		return err
	}
	defer y.Close()

	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "x", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 3}},
		{Name: "y", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 1}},
	}, tower)
	if err != nil {
		return err
	}
	defer model.Close()
	opt, err := tptrain.NewOptimizer("adam")
	if err != nil {
		return err
	}
	defer opt.Close()
	if err := opt.Set("learning_rate", 0.01); err != nil {
		return err
	}
	if err := model.SetOptimizer(opt); err != nil {
		return err
	}

	input, err := tptrain.InputFromTensors([]*tptrain.Tensor{x, y}, batchSize, tptrain.Shuffled, 42)
	if err != nil {
		return err
	}
	// StepsPerEpoch: the input's size, rows / batchSize
	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{MaxEpoch: epochs, Progress: tptrain.ProgressOff})
	if err != nil {
		input.Close()
		return err
	}
	defer trainer.Close()
	if err := trainer.SetModel(model, input); err != nil { // takes input
		return err
	}
	if err := trainer.Run(); err != nil {
		return err
	}
	last, step, err := trainer.ScalarLatest("cost")
	if err != nil {
		return err
	}
	fmt.Printf("last batch cost %.6f at step %d\n", last, step)

	// The final cost over the whole data set, from an inference pass.
	outs, err := model.Infer([]*tptrain.Tensor{x, y}, []string{"cost", "prediction"})
	if err != nil {
		return err
	}
	defer func() {
		for _, o := range outs {
			o.Close()
		}
	}()
	cost, err := outs[0].Item()
	if err != nil {
		return err
	}
	pred, err := outs[1].Float32s()
	if err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		fmt.Printf("x = (%+.3f, %+.3f, %+.3f)  y = %+.4f  predicted %+.4f\n", xs[i*3], xs[i*3+1], xs[i*3+2], ys[i], pred[i])
	}
	fmt.Printf("final cost (MSE over %d rows): %.6f\n", rows, cost)
	if !(cost < threshold) {
		fmt.Fprintf(os.Stderr, "mlp_regression: the final cost %.6f is not below %g\n", cost, threshold)
		os.Exit(1)
	}
	return nil
}
