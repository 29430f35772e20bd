// docs/towers.md: a model trained on 2 replicated CPU towers (tensorpack's
// SyncMultiGPUTrainerReplicated). The part between the [doc] markers is shown
// in the page (checked by the doc-snippets test); the whole program is built
// and run by the examples test.
package main

import (
	"fmt"
	"log"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// [doc]
// tower is y = w x + b. Both towers call it at once, each on a thread and a
// batch of its own (tw.Index() says which), so it keeps no state.
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

func train(batches *tptrain.DataFlow) error {
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
	trainer, err := tptrain.NewTrainerFromConfig(&tptrain.TrainConfig{
		Options: &tptrain.TrainerOptions{MaxEpoch: 5, Progress: tptrain.ProgressOff}, // StepsPerEpoch: batches / towers
		Model:   model, DataFlow: batches,
		Towers: &tptrain.TowersOptions{Strategy: tptrain.StrategyReplicated, Towers: 2}}) // nil: the simple trainer
	if err != nil {
		return err
	}
	defer trainer.Close()
	if err := trainer.Run(); err != nil {
		return err
	}
	var fit [2]float64
	for i, name := range []string{"fc/W", "fc/b"} { // tower 0's: the model's own
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
	steps := trainer.GlobalStep()
	fmt.Printf("%d steps of 2 towers: y = %.2f x + %.2f\n", steps, fit[0], fit[1])
	return nil
}

// [/doc]

// main trains on rows of y = 3 x + 2, x spread evenly over [-1, 1), in
// batches of 16: 16 batches a pass, 8 steps of 2 towers.
func main() {
	const rows = 256
	xs, ys := make([]float32, rows), make([]float32, rows)
	for i := range xs {
		xs[i] = float32(2*i-rows) / rows
		ys[i] = 3*xs[i] + 2
	}
	if err := tptrain.ManualSeed(0); err != nil {
		log.Fatal(err)
	}
	x, err := tptrain.FromFloat32(xs, rows, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	y, err := tptrain.FromFloat32(ys, rows, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer y.Close()
	data, err := tptrain.DataFlowFromTensors([]*tptrain.Tensor{x, y}, tptrain.Shuffled)
	if err != nil {
		log.Fatal(err)
	}
	defer data.Close()
	batches, err := data.Batch(16, tptrain.DropRemainder)
	if err != nil {
		log.Fatal(err)
	}
	defer batches.Close()
	if err := train(batches); err != nil {
		log.Fatal(err)
	}
}
