// Two moons, as a new user coming from PyTorch Lightning writes it (issue
// 34's program): a 2-32-2 MLP on 2 replicated towers, validation accuracy
// each epoch, a learning-rate schedule, early stopping, checkpoints with the
// best kept and auto-resume, a logging callback, and a prediction on 5
// points from the best checkpoint. Run it twice: the second run trains
// nothing (the first one stopped early) and predicts the same.
// (The C and Rust twins: examples/c/two_moons.c, examples/rust/src/bin/two_moons.rs.)
//
//	go run ./two_moons [LOGDIR]
package main

import (
	"fmt"
	"log"
	"math"
	"os"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// moons returns n points of sklearn's make_moons (noise 0.1) and their labels.
func moons(n int, seed uint64) (*tptrain.Tensor, *tptrain.Tensor) {
	uniform := func() float32 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return float32(seed>>40) / (1 << 24)
	}
	xs, ys := make([]float32, 0, 2*n), make([]int64, n)
	for i := range ys {
		t, label := math.Pi*float64(uniform()), int64(i%2)
		x, y := float32(math.Cos(t)), float32(math.Sin(t))
		if label == 1 {
			x, y = 1-x, 0.5-y
		}
		xs = append(xs, x+0.2*(uniform()-0.5), y+0.2*(uniform()-0.5))
		ys[i] = label
	}
	x, err := tptrain.FromFloat32(xs, int64(n), 2)
	check(err)
	y, err := tptrain.FromInt64(ys, int64(n))
	check(err)
	return x, y
}

func tower(tw *tptrain.Tower, in []*tptrain.Tensor) error {
	hidden, err := tw.FC("fc0", in[0], 32, &tptrain.LayerOptions{Activation: tptrain.ActReLU})
	if err != nil {
		return err
	}
	logits, err := tw.FC("fc1", hidden, 2, nil)
	if err != nil {
		return err
	}
	accuracy, err := tptrain.Accuracy(logits, in[1])
	if err != nil {
		return err
	}
	cost, err := tptrain.SoftmaxCrossEntropy(logits, in[1])
	if err != nil {
		return err
	}
	check(tw.SetOutput("logits", logits))
	check(tw.SetOutput("accuracy", accuracy))
	return tw.SetCost(cost)
}

func main() {
	logdir := "train_log/two_moons"
	if len(os.Args) > 1 {
		logdir = os.Args[1]
	}
	check(tptrain.ManualSeed(0))
	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "x", Shape: []int64{-1, 2}}, {Name: "label", DType: tptrain.DTypeInt64, Shape: []int64{-1}}}, tower)
	check(err)
	defer model.Close()
	adam, err := tptrain.NewOptimizer("adam")
	check(err)
	check(model.SetOptimizer(adam))

	x, y := moons(1000, 1)
	train, err := tptrain.DataFlowFromTensors([]*tptrain.Tensor{x, y}, tptrain.Shuffled)
	check(err)
	train, err = train.Batch(32, tptrain.DropRemainder)
	check(err)
	vx, vy := moons(200, 2)
	val, err := tptrain.DataFlowFromTensors([]*tptrain.Tensor{vx, vy}, tptrain.Sequential)
	check(err)
	val, err = val.Batch(100, tptrain.KeepRemainder)
	check(err)

	runner, err := tptrain.NewInferenceRunner(model, val, "accuracy") // validation_accuracy
	check(err)
	schedule, err := tptrain.ScheduledHyperParam(adam, "learning_rate",
		[]tptrain.SchedulePoint{{At: 0, Value: 0.01}, {At: 10, Value: 0.003}}, nil)
	check(err)
	early, err := tptrain.EarlyStopping("validation_accuracy", &tptrain.EarlyStoppingOptions{Patience: 3, Maximize: true})
	check(err)
	saver, err := tptrain.ModelSaver(nil)
	check(err)
	best, err := tptrain.MaxSaver("validation_accuracy", nil)
	check(err)
	logger, err := tptrain.NewCallback("logger", tptrain.EventTriggerEpoch, nil,
		func(ctx *tptrain.Context, _ tptrain.Event, _ *tptrain.Record) error {
			acc, _, err := ctx.ScalarLatest("validation_accuracy")
			fmt.Printf("epoch %d: validation accuracy %.3f\n", ctx.EpochNum(), acc)
			return err
		})
	check(err)

	trainer, err := tptrain.NewTrainerFromConfig(&tptrain.TrainConfig{
		Options: &tptrain.TrainerOptions{MaxEpoch: 30, Logdir: logdir, AutoResume: true},
		Model:   model, DataFlow: train, Towers: &tptrain.TowersOptions{Towers: 2},
		Callbacks: []*tptrain.Callback{runner, schedule, early, saver, best, logger},
	})
	check(err)
	defer trainer.Close()
	check(trainer.Run())
	epoch := trainer.EpochNum()
	if reason, stopped := trainer.StopReason(); stopped {
		fmt.Printf("stopped after epoch %d: %s\n", epoch, reason)
	} else {
		fmt.Printf("finished %d epochs\n", epoch)
	}

	path, err := trainer.BestCheckpoint("validation_accuracy")
	check(err)
	predictor, err := tptrain.NewPredictor(model, []string{"logits"},
		&tptrain.PredictorOptions{Inputs: []string{"x"}, Checkpoint: path})
	check(err)
	defer predictor.Close()
	points, err := tptrain.FromFloat32([]float32{-1, 0.2, 0, 1, 1, -0.5, 2, 0.5, 0.5, 0.25}, 5, 2)
	check(err)
	logits, err := predictor.Predict(points)
	check(err)
	classes, err := logits[0].Argmax(1)
	check(err)
	predicted, err := classes.Int64s()
	check(err)
	fmt.Printf("predicted classes from %s: %v\n", path, predicted)
}
