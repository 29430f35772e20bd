// docs/models.md, "The tower function": a model, its optimizer, a trainer fed
// by a dataflow, a learning-rate schedule and inference. The part between the
// [doc] markers is shown in the page (checked by the doc-snippets test); the
// whole program is built and run by the examples test.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// [doc]
// tower is the model for one step: its tensors belong to the call, nothing
// to Close.
func tower(tw *tptrain.Tower, in []*tptrain.Tensor) error {
	h, err := tw.FC("fc1", in[0], 32, &tptrain.LayerOptions{Activation: tptrain.ActReLU}) // fc1/W, fc1/b
	if err != nil {
		return err
	}
	logits, err := tw.FC("fc2", h, 2, nil)
	if err != nil {
		return err
	}
	cost, err := tptrain.SoftmaxCrossEntropy(logits, in[1])
	if err != nil {
		return err
	}
	acc, err := tptrain.Accuracy(logits, in[1])
	if err != nil {
		return err
	}
	if err := tw.SetOutput("accuracy", acc); err != nil { // a moving summary
		return err
	}
	return tw.SetCost(cost)
}

func train(ctx context.Context, x, y *tptrain.Tensor) (float64, error) {
	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "x", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 2}},
		{Name: "label", DType: tptrain.DTypeInt64, Shape: []int64{-1}},
	}, tower)
	if err != nil {
		return 0, err
	}
	defer model.Close()
	adam, err := tptrain.NewOptimizer("adam")
	if err != nil {
		return 0, err
	}
	defer adam.Close()
	if err := adam.Set("learning_rate", 0.01); err != nil {
		return 0, err
	}
	if err := model.SetOptimizer(adam); err != nil {
		return 0, err
	}
	rows, err := tptrain.DataFlowFromTensors([]*tptrain.Tensor{x, y}, tptrain.Shuffled)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	batches, err := rows.Batch(32, tptrain.DropRemainder)
	if err != nil {
		return 0, err
	}
	defer batches.Close()
	// After each epoch: the learning rate times 0.5, the optimizer reached
	// through the trainer.
	decay, err := tptrain.NewCallback("lr_decay", tptrain.EventTrigger, nil,
		func(ctx *tptrain.Context, _ tptrain.Event, _ *tptrain.Record) error {
			opt, err := ctx.Optimizer()
			if err != nil {
				return err
			}
			defer opt.Close()
			lr, err := opt.Get("learning_rate")
			if err != nil {
				return err
			}
			return opt.Set("learning_rate", lr*0.5)
		})
	if err != nil {
		return 0, err
	}
	// tensorpack's TrainConfig and launch_train_with_config; StepsPerEpoch:
	// the dataflow's size; the dataflow is wrapped in a queue input.
	_, err = tptrain.LaunchTrain(ctx, &tptrain.TrainConfig{
		Options: &tptrain.TrainerOptions{MaxEpoch: 5, Progress: tptrain.ProgressOff},
		Model:   model, DataFlow: batches, Callbacks: []*tptrain.Callback{decay}})
	if err != nil {
		return 0, err
	}
	outs, err := model.Infer([]*tptrain.Tensor{x, y}, []string{"accuracy"}) // an inference tower
	if err != nil {
		return 0, err
	}
	defer outs[0].Close()
	return outs[0].Item()
}

// [/doc]

// Two classes: which side of the line x0 = x1 a point lies on.
func main() {
	const rows = 256
	xs, ys := make([]float32, 2*rows), make([]int64, rows)
	r := uint32(7)
	for i := 0; i < rows; i++ {
		for j := 0; j < 2; j++ {
			r = r*1664525 + 1013904223
			xs[2*i+j] = float32(r>>8)/8388608 - 1
		}
		if xs[2*i] > xs[2*i+1] {
			ys[i] = 1
		}
	}
	if err := tptrain.ManualSeed(0); err != nil {
		log.Fatal(err)
	}
	x, err := tptrain.FromFloat32(xs, rows, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	y, err := tptrain.FromInt64(ys, rows)
	if err != nil {
		log.Fatal(err)
	}
	defer y.Close()
	acc, err := train(context.Background(), x, y)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("training accuracy %.3f\n", acc)
	if acc <= 0.9 {
		os.Exit(1)
	}
}
