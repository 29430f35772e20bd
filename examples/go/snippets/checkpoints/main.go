// docs/checkpoints.md: a training that a ModelSaver checkpoints, stopped
// after epoch 2, then started again on the same log directory: AutoResume
// goes on exactly from the latest checkpoint. The part between the [doc]
// markers is shown in the page (checked by the doc-snippets test); the whole
// program is built and run by the examples test.
//
//	checkpoints [LOGDIR]   (default train_log/snippet_checkpoints)
package main

import (
	"fmt"
	"log"
	"os"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// lineModel is y = w x + b.
func lineModel() (*tptrain.Model, error) {
	return tptrain.NewModel([]tptrain.InputSpec{
		{Name: "x", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 1}},
		{Name: "y", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 1}},
	}, func(tw *tptrain.Tower, in []*tptrain.Tensor) error {
		y, err := tw.FC("fc", in[0], 1, nil)
		if err != nil {
			return err
		}
		cost, err := tptrain.MSELoss(y, in[1])
		if err != nil {
			return err
		}
		return tw.SetCost(cost)
	})
}

// [doc]
// run is one run of the program, as if started anew: its model, data and
// trainer.
func run(logdir string, xy []*tptrain.Tensor, maxEpoch int64, first bool) error {
	model, err := lineModel()
	if err != nil {
		return err
	}
	defer model.Close()
	adam, err := tptrain.NewOptimizer("adam")
	if err != nil {
		return err
	}
	defer adam.Close()
	if err := adam.Set("learning_rate", 0.1); err != nil {
		return err
	}
	if err := model.SetOptimizer(adam); err != nil {
		return err
	}
	rows, err := tptrain.DataFlowFromTensors(xy, tptrain.Shuffled)
	if err != nil {
		return err
	}
	defer rows.Close()
	batches, err := rows.Batch(32, tptrain.DropRemainder)
	if err != nil {
		return err
	}
	defer batches.Close()
	saver, err := tptrain.ModelSaver(nil) // after every epoch, into logdir
	if err != nil {
		return err
	}
	defer saver.Close() // a no-op once the trainer took it
	// Before training (after a resume's restore): where this run starts.
	var start int64
	startsAt, err := tptrain.NewCallback("starts_at", tptrain.EventBeforeTrain, nil,
		func(ctx *tptrain.Context, _ tptrain.Event, _ *tptrain.Record) error {
			start = ctx.GlobalStep()
			return nil
		})
	if err != nil {
		return err
	}
	defer startsAt.Close()
	// The first run starts afresh; the next goes on from the latest
	// checkpoint in logdir.
	action := tptrain.LogdirDelete
	if !first {
		action = tptrain.LogdirKeep
	}
	options := &tptrain.TrainerOptions{MaxEpoch: maxEpoch, Progress: tptrain.ProgressOff,
		Logdir: logdir, LogdirAction: action, AutoResume: !first}
	trainer, err := tptrain.NewTrainerFromConfig(&tptrain.TrainConfig{Options: options, Model: model,
		DataFlow: batches, Callbacks: []*tptrain.Callback{saver, startsAt}})
	if err != nil {
		return err
	}
	defer trainer.Close()
	if err := trainer.Run(); err != nil {
		return err
	}
	end := trainer.GlobalStep()
	what := "resumed"
	if first {
		what = "first run"
	}
	fmt.Printf("%s: global_step %d to %d\n", what, start, end)
	return nil
}

// [/doc]

// main trains on rows of y = 3 x + 2, x spread evenly over [-1, 1): 8
// batches of 32 an epoch. Two runs: to epoch 2, then on to epoch 4.
func main() {
	logdir := "train_log/snippet_checkpoints"
	if len(os.Args) > 1 {
		logdir = os.Args[1]
	}
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
	xy := []*tptrain.Tensor{x, y}
	if err := run(logdir, xy, 2, true); err != nil {
		log.Fatal(err)
	}
	if err := run(logdir, xy, 4, false); err != nil {
		log.Fatal(err)
	}
}
