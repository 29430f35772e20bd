// docs/custom_trainers.md, "Train ops": a model of two parts, a train op for
// each (its own cost, variables and optimizer), and a run_step of our own
// that runs them. The part between the [doc] markers is shown in the page
// (checked by the doc-snippets test); the whole program is built and run by
// the examples test.
package main

import (
	"fmt"
	"log"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// [doc]
// tower has two parts on one input: "a" fits the target ya, "b" the target
// yb. Each publishes its own cost; the tower's cost is their sum.
func tower(tw *tptrain.Tower, in []*tptrain.Tensor) error {
	var losses [2]*tptrain.Tensor
	for i, part := range []string{"a", "b"} {
		p, err := tw.FC(part, in[0], 1, nil) // a/W, a/b, then b/W, b/b
		if err != nil {
			return err
		}
		if losses[i], err = tptrain.MSELoss(p, in[1+i]); err != nil {
			return err
		}
		if err := tw.SetOutput("loss_"+part, losses[i]); err != nil {
			return err
		}
	}
	cost, err := losses[0].Add(losses[1])
	if err != nil {
		return err
	}
	return tw.SetCost(cost)
}

func train(batches *tptrain.DataFlow) error {
	shape := []int64{-1, 1}
	model, err := tptrain.NewModel([]tptrain.InputSpec{{Name: "x", DType: tptrain.DTypeFloat32, Shape: shape},
		{Name: "ya", DType: tptrain.DTypeFloat32, Shape: shape}, {Name: "yb", DType: tptrain.DTypeFloat32, Shape: shape}},
		tower)
	if err != nil {
		return err
	}
	defer model.Close()
	sgd, err := tptrain.NewOptimizer("sgd")
	if err != nil {
		return err
	}
	defer sgd.Close()
	bSGD, err := tptrain.NewOptimizer("sgd")
	if err != nil {
		return err
	}
	defer bSGD.Close()
	if err := sgd.Set("learning_rate", 0.3); err != nil {
		return err
	}
	if err := model.SetOptimizer(sgd); err != nil {
		return err
	}
	if err := bSGD.Set("learning_rate", 0.2); err != nil {
		return err
	}
	// a: a copy of the model's optimizer; b: an optimizer of its own.
	if err := model.AddTrainOp(tptrain.TrainOp{Name: "a_op", Cost: "loss_a", Scope: "a/"}); err != nil {
		return err
	}
	if err := model.AddTrainOp(tptrain.TrainOp{Name: "b_op", Cost: "loss_b", Scope: "b/", Optimizer: bSGD}); err != nil {
		return err
	}
	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{MaxEpoch: 5, Progress: tptrain.ProgressOff})
	if err != nil {
		return err
	}
	defer trainer.Close()
	input, err := tptrain.InputFromDataFlow(batches, nil)
	if err != nil {
		return err
	}
	if err := trainer.SetModel(model, input); err != nil { // takes the input
		return err
	}
	// Each step: b's update without hooks (no callbacks, the global step
	// stays), then a's as the hooked step; each takes a batch of its own.
	err = trainer.SetRunStep(func(ctx *tptrain.Context) error {
		if err := ctx.RunTrainOpsRaw("b_op"); err != nil {
			return err
		}
		return ctx.RunTrainOps("a_op")
	})
	if err != nil {
		return err
	}
	if err := trainer.Run(); err != nil {
		return err
	}
	var fit [4]float64
	for i, name := range []string{"a/W", "a/b", "b/W", "b/b"} {
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
	fmt.Printf("global_step %d: a fits %.2f x + %.2f, b fits %.2f x + %.2f\n", steps, fit[0], fit[1], fit[2], fit[3])
	return nil
}

// [/doc]

// main trains on rows of x spread evenly over [-1, 1), ya = 3 x + 2 and
// yb = 0.5 - x, in batches of 32.
func main() {
	const rows = 256
	xs, ya, yb := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	for i := range xs {
		xs[i] = float32(2*i-rows) / rows
		ya[i] = 3*xs[i] + 2
		yb[i] = 0.5 - xs[i]
	}
	if err := tptrain.ManualSeed(0); err != nil {
		log.Fatal(err)
	}
	var columns []*tptrain.Tensor
	for _, v := range [][]float32{xs, ya, yb} {
		t, err := tptrain.FromFloat32(v, rows, 1)
		if err != nil {
			log.Fatal(err)
		}
		defer t.Close()
		columns = append(columns, t)
	}
	data, err := tptrain.DataFlowFromTensors(columns, tptrain.Shuffled)
	if err != nil {
		log.Fatal(err)
	}
	defer data.Close()
	batches, err := data.Batch(32, tptrain.DropRemainder)
	if err != nil {
		log.Fatal(err)
	}
	defer batches.Close()
	if err := train(batches); err != nil {
		log.Fatal(err)
	}
}
