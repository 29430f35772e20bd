// docs/callbacks.md: a trainer with validation (an InferenceRunner), a
// learning-rate schedule and a callback of our own that stops training when
// the validation cost is low enough. The part between the [doc] markers is
// shown in the page (checked by the doc-snippets test); the whole program is
// built and run by the examples test.
package main

import (
	"fmt"
	"log"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// [doc]
// tower is y = w x + b: one fully-connected unit, the mean squared error as
// the cost (which is also the output "cost").
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

// goodEnough is a callback of our own: after each epoch, after the
// InferenceRunner has put validation_cost, a graceful stop once it is small
// enough.
func goodEnough(ctx *tptrain.Context, _ tptrain.Event, _ *tptrain.Record) error {
	cost, _, err := ctx.ScalarLatest("validation_cost")
	if err != nil {
		return err
	}
	if cost < 1e-4 {
		return tptrain.Stop("validation_cost < 1e-4")
	}
	return nil
}

func train(batches, validation *tptrain.DataFlow) error {
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
	if err := model.SetOptimizer(sgd); err != nil {
		return err
	}
	runner, err := tptrain.NewInferenceRunner(model, validation, "cost")
	if err != nil {
		return err
	}
	defer runner.Close() // a no-op once the trainer took it
	schedule, err := tptrain.ScheduledHyperParam(sgd, "learning_rate",
		[]tptrain.SchedulePoint{{At: 0, Value: 0.3}, {At: 2, Value: 0.1}}, // from the start; after epoch 2
		nil)
	if err != nil {
		return err
	}
	defer schedule.Close()
	stop, err := tptrain.NewCallback("good_enough", tptrain.EventTrigger, nil, goodEnough)
	if err != nil {
		return err
	}
	defer stop.Close()
	trainer, err := tptrain.NewTrainerFromConfig(&tptrain.TrainConfig{
		Options: &tptrain.TrainerOptions{MaxEpoch: 20, Progress: tptrain.ProgressOff},
		Model:   model, DataFlow: batches,
		Callbacks: []*tptrain.Callback{runner, schedule, stop}}) // stop after the runner: it reads its scalar
	if err != nil {
		return err
	}
	defer trainer.Close()
	if err := trainer.Run(); err != nil {
		return err
	}
	reason, ok := trainer.StopReason()
	if !ok {
		reason = "-"
	}
	epoch := trainer.EpochNum()
	rate, err := sgd.Get("learning_rate")
	if err != nil {
		return err
	}
	fmt.Printf("stopped after epoch %d (%s) at learning_rate %g\n", epoch, reason, rate)
	return nil
}

// [/doc]

// line gives rows of y = 3 x + 2 with n values of x spread evenly over
// [-1, 1).
func line(n int) (x, y *tptrain.Tensor, err error) {
	xs, ys := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i] = float32(2*i-n) / float32(n)
		ys[i] = 3*xs[i] + 2
	}
	if x, err = tptrain.FromFloat32(xs, int64(n), 1); err != nil {
		return nil, nil, err
	}
	if y, err = tptrain.FromFloat32(ys, int64(n), 1); err != nil {
		x.Close()
		return nil, nil, err
	}
	return x, y, nil
}

// batches makes a dataflow of batches of 32 rows of y = 3 x + 2.
func batches(n int, order tptrain.Order, remainder tptrain.Remainder) (*tptrain.DataFlow, error) {
	x, y, err := line(n)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	defer y.Close()
	rows, err := tptrain.DataFlowFromTensors([]*tptrain.Tensor{x, y}, order)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rows.Batch(32, remainder)
}

func main() {
	if err := tptrain.ManualSeed(0); err != nil {
		log.Fatal(err)
	}
	data, err := batches(256, tptrain.Shuffled, tptrain.DropRemainder)
	if err != nil {
		log.Fatal(err)
	}
	defer data.Close()
	validation, err := batches(64, tptrain.Sequential, tptrain.KeepRemainder)
	if err != nil {
		log.Fatal(err)
	}
	defer validation.Close()
	if err := train(data, validation); err != nil {
		log.Fatal(err)
	}
}
