// docs/distributed.md: one rank of a job started by tools/tptrain-run
// (tensorpack's HorovodTrainer): `tptrain-run -n 2 distributed`. The part
// between the [doc] markers is shown in the page (checked by the
// doc-snippets test); the whole program is built and run by the examples
// test.
package main

import (
	"fmt"
	"log"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// [doc]
// train runs on every rank: the same model, data and seed.
func train(model *tptrain.Model, batches *tptrain.DataFlow) error {
	// NewTrainerFromConfig joins the job: it waits for every rank.
	trainer, err := tptrain.NewTrainerFromConfig(&tptrain.TrainConfig{
		Options:     &tptrain.TrainerOptions{MaxEpoch: 5, Progress: tptrain.ProgressOff},
		Model:       model,
		DataFlow:    batches,                        // each rank takes every WorldSize-th batch
		Distributed: &tptrain.DistributedOptions{}}) // all from tptrain-run's variables; nil: alone
	if err != nil {
		return err
	}
	defer trainer.Close()
	if err := trainer.Run(); err != nil { // gradients averaged over the ranks every step
		return err
	}
	var fit [2]float64
	for i, name := range []string{"fc/W", "fc/b"} {
		v, err := model.Variable(name)
		if err != nil {
			return err
		}
		fit[i], err = v.Item()
		v.Close()
		if err != nil {
			return err
		}
	}
	rank, size := trainer.Rank()
	steps := trainer.GlobalStep()
	// The same on every rank.
	fmt.Printf("rank %d of %d, %d steps: y = %.2f x + %.2f\n", rank, size, steps, fit[0], fit[1])
	return nil
}

// [/doc]

// tower is y = w x + b.
func tower(tw *tptrain.Tower, in []*tptrain.Tensor) error {
	y, err := tw.FC("fc", in[0], 1, nil)
	if err != nil {
		return err
	}
	cost, err := tptrain.MSELoss(y, in[1])
	if err != nil {
		return err
	}
	return tw.SetCost(cost)
}

// run trains on rows of y = 3 x + 2, x spread evenly over [-1, 1), in
// batches of 16.
func run() error {
	const rows = 256
	xs, ys := make([]float32, rows), make([]float32, rows)
	for i := range xs {
		xs[i] = float32(2*i-rows) / rows
		ys[i] = 3*xs[i] + 2
	}
	if err := tptrain.ManualSeed(0); err != nil {
		return err
	}
	x, err := tptrain.FromFloat32(xs, rows, 1)
	if err != nil {
		return err
	}
	defer x.Close()
	y, err := tptrain.FromFloat32(ys, rows, 1)
	if err != nil {
		return err
	}
	defer y.Close()
	data, err := tptrain.DataFlowFromTensors([]*tptrain.Tensor{x, y}, tptrain.Shuffled)
	if err != nil {
		return err
	}
	defer data.Close()
	batches, err := data.Batch(16, tptrain.DropRemainder)
	if err != nil {
		return err
	}
	defer batches.Close()
	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "x", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 1}},
		{Name: "y", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 1}},
	}, tower)
	if err != nil {
		return err
	}
	defer model.Close()
	sgd, err := tptrain.NewOptimizer("sgd")
	if err != nil {
		return err
	}
	defer sgd.Close()
	if err := sgd.Set("learning_rate", 0.3); err != nil {
		return err
	}
	if err := model.SetOptimizer(sgd); err != nil {
		return err
	}
	return train(model, batches)
}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}
