// Command fashion_mnist trains tensorpack's mnist-convnet recipe on
// Fashion-MNIST with tptrain (the Go twin of examples/c/fashion_mnist.c; the
// Rust one is examples/rust/src/bin/fashion_mnist.rs).
//
// Data: Debian's dataset-fashion-mnist (IDX files under
// /usr/share/datasets/fashion-mnist). The training dataflow reads the 60,000
// images in a new order each epoch, normalises them to [-1, 1] and batches
// them by 128; the trainer wraps it in a queue input, so a background thread
// prepares batches while the model trains. After each epoch an inference
// runner measures accuracy and cost on the 10,000 test images
// (validation_accuracy and validation_cost in stats.json and TensorBoard's
// event file), a ModelSaver checkpoints the whole training (also every 200
// steps) and a MaxSaver keeps the best one as max-validation_accuracy. Run it
// again on the same LOGDIR and it goes on exactly where the last run stopped
// (killed mid-epoch included).
//
// --towers N trains data-parallel on N replicated CPU towers, tensorpack's
// SyncMultiGPUTrainerReplicated(N): one field of the train config
// (docs/towers.md). Each tower takes its own batch of 128, so a step trains on
// 128 x N images and an epoch has N times fewer steps. The towers' dropout
// draws from one generator in whatever order they reach it, so such a run
// (and its resume) is not bit-reproducible.
//
// --device D trains on device D ("cuda:0"; docs/gpu.md): every tower (one
// without --towers) computes there, on a copy of the variables, which stay on
// the CPU with Adam's update (docs/towers.md).
//
// --dist makes this process one rank of a distributed job (tensorpack's
// HorovodTrainer; docs/distributed.md): one field of the train config,
// TrainConfig.Distributed, whose zero value takes everything from
// torchrun's variables. Start it with the launcher,
//
//	tptrain-run -n 2 ./fashion_mnist --dist
//
// (or torchrun, or anything that sets torchrun's variables). Each rank takes
// every other batch, the gradients are averaged over the ranks, and rank 0
// alone writes the log directory, validates and checkpoints.
//
// The tower: conv 5x5 32 -> max pool 2 -> conv 3x3 32 -> conv 3x3 32 ->
// max pool 2 -> conv 3x3 32 -> fc 512 -> dropout 0.5 -> fc 10, ReLU after
// each conv and fc0; softmax cross-entropy (the validation "cost").
// Adam at 1e-3, times 0.6 after each epoch from the second on
// (ScheduledHyperParam).
//
//	cd examples/go && go run ./fashion_mnist [--towers N] [--device D] [--dist] [--bf16] [LOGDIR] [DATA_DIR] [EPOCHS]
//	  (defaults: no towers, train_log/fashion_mnist,
//	   /usr/share/datasets/fashion-mnist, 5; --help says more)
//
// Exits 0 when the final test accuracy is at least 90 % (a rank other than
// 0 of a distributed job: when its training succeeded).
package main

import (
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

const (
	batch   = 128
	classes = 10
)

// tower is the model for one step. The tensors it makes belong to the call
// and go when it returns: it closes nothing.
func tower(t *tptrain.Tower, in []*tptrain.Tensor) error {
	conv := &tptrain.LayerOptions{Activation: tptrain.ActReLU} // SAME padding, He init, bias
	conv5 := &tptrain.LayerOptions{Activation: tptrain.ActReLU, Kernel: [2]int64{5, 5}}
	fc := &tptrain.LayerOptions{Activation: tptrain.ActReLU}
	pool := func(x *tptrain.Tensor) (*tptrain.Tensor, error) {
		return tptrain.MaxPool(x, 2, 2, tptrain.PaddingValid)
	}
	steps := []func(x *tptrain.Tensor) (*tptrain.Tensor, error){
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Conv2D("conv0", x, 32, conv5) },
		pool,
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Conv2D("conv1", x, 32, conv) },
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Conv2D("conv2", x, 32, conv) },
		pool,
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Conv2D("conv3", x, 32, conv) },
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.FC("fc0", x, 512, fc) }, // flattens
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Dropout(x, 0.5) },
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.FC("fc1", x, classes, nil) },
	}
	x := in[0]
	for _, step := range steps {
		var err error
		if x, err = step(x); err != nil {
			return err
		}
	}
	xent, err := tptrain.SoftmaxCrossEntropy(x, in[1])
	if err != nil {
		return err
	}
	acc, err := tptrain.Accuracy(x, in[1])
	if err != nil {
		return err
	}
	if err := t.SetCost(xent); err != nil {
		return err
	}
	return t.SetOutput("accuracy", acc)
}

// pipeline: images normalised to [-1, 1], batched; shuffled each epoch for
// training.
func pipeline(dir, split string, train bool) (*tptrain.DataFlow, error) {
	order, remainder := tptrain.Sequential, tptrain.KeepRemainder
	if train {
		order, remainder = tptrain.Shuffled, tptrain.DropRemainder
	}
	raw, err := tptrain.DataFlowMNIST(dir, split, order)
	if err != nil {
		return nil, err
	}
	defer raw.Close() // the next dataflow keeps its own reference
	norm, err := raw.Augment(0, []tptrain.Augmentor{
		{Kind: tptrain.AugmentNormalize, Mean: []float64{0.5}, Std: []float64{0.5}},
	}, 0)
	if err != nil {
		return nil, err
	}
	defer norm.Close()
	size := int64(batch)
	if !train {
		size = 500
	}
	return norm.Batch(size, remainder)
}

const usage = `usage: fashion_mnist [--towers N] [--device D] [--dist] [--bf16] [LOGDIR] [DATA_DIR] [EPOCHS]
  LOGDIR      the log directory (default train_log/fashion_mnist); one that
              holds checkpoints goes on from the latest
  DATA_DIR    the IDX files (default /usr/share/datasets/fashion-mnist)
  EPOCHS      the epochs to train (default 5)
  --towers N  train on N replicated CPU towers, 1 to 256 (tensorpack's
              SyncMultiGPUTrainerReplicated(N)). Each tower takes its own
              batch of 128: a step trains on 128 x N images, an epoch has N
              times fewer steps. Default: no towers, the simple trainer (a
              batch of 128 per step)
  --device D  train on device D ("cuda:0"; default the CPU): every tower
              (one without --towers) computes there, on a copy of the
              variables, which stay on the CPU with Adam's update
  --dist      this process is one rank of a distributed job started by
              tptrain-run -n N (or torchrun): each rank takes every N-th
              batch, rank 0 alone writes LOGDIR
  --bf16      mixed precision: the network's convolutions and matmuls in
              bfloat16 (autocast), variables and updates in float32; several
              times faster on a CPU with AVX-512 BF16 or AMX
  -h, --help  this text
`

// parseTowers is --towers' value: a whole number from 1 to 256, else 0.
func parseTowers(s string) int {
	if strings.Trim(s, "0123456789") != "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 256 {
		return 0
	}
	return n
}

// usageError reports a bad command line: what is wrong (with arg, if not
// nil), then the usage; exit status 2.
func usageError(what string, arg *string) {
	if arg != nil {
		what += " '" + *arg + "'"
	}
	fmt.Fprintf(os.Stderr, "fashion_mnist: %s\n%s", what, usage)
	os.Exit(2)
}

func main() {
	log.SetFlags(0)
	// The options go anywhere; the other arguments are LOGDIR DATA_DIR
	// EPOCHS, in that order (more are ignored). Not the flag package: it
	// stops at the first positional argument.
	var positional []string
	nTowers := 0 // 0: no towers, the simple trainer
	dist, bf16 := false, false
	device := "" // "": the CPU
	for i := 1; i < len(os.Args); i++ {
		a := os.Args[i]
		var value string
		switch {
		case a == "-h" || a == "--help":
			fmt.Print(usage)
			return
		case a == "--towers":
			if i++; i == len(os.Args) {
				usageError("--towers needs a value N", nil)
			}
			value = os.Args[i]
		case strings.HasPrefix(a, "--towers="):
			value = strings.TrimPrefix(a, "--towers=")
		case a == "--device" || a == "-device":
			if i++; i == len(os.Args) || os.Args[i] == "" {
				usageError("--device needs a device name D", nil)
			}
			device = os.Args[i]
			continue
		case strings.HasPrefix(a, "--device="):
			if device = strings.TrimPrefix(a, "--device="); device == "" {
				usageError("--device needs a device name D", nil)
			}
			continue
		case a == "--dist" || a == "-dist":
			dist = true
			continue
		case a == "--bf16" || a == "-bf16":
			bf16 = true
			continue
		case strings.HasPrefix(a, "--"):
			usageError("unknown option", &a)
		default:
			positional = append(positional, a)
			continue
		}
		if nTowers = parseTowers(value); nTowers == 0 {
			usageError("--towers wants a whole number from 1 to 256, not", &value)
		}
	}
	accuracy, chief, err := run(positional, nTowers, device, dist, bf16)
	if err != nil {
		log.Fatal(err)
	}
	if chief && accuracy < 0.9 {
		os.Exit(1)
	}
}

// run trains and returns the final test accuracy, and whether this process
// is the chief (rank 0, or not distributed), the only one that validates.
func run(positional []string, nTowers int, device string, dist, bf16 bool) (accuracy float64, chief bool, err error) {
	logdir, dir, epochs := "train_log/fashion_mnist", "/usr/share/datasets/fashion-mnist", int64(5)
	if len(positional) > 0 {
		logdir = positional[0]
	}
	if len(positional) > 1 {
		dir = positional[1]
	}
	if len(positional) > 2 {
		epochs, _ = strconv.ParseInt(positional[2], 10, 64)
	}
	if err := tptrain.ManualSeed(1); err != nil {
		return 0, false, err
	}

	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "image", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 1, 28, 28}},
		{Name: "label", DType: tptrain.DTypeInt64, Shape: []int64{-1}},
	}, tower)
	if err != nil {
		return 0, false, err
	}
	defer model.Close()
	adam, err := tptrain.NewOptimizer("adam")
	if err != nil {
		return 0, false, err
	}
	defer adam.Close()
	if err := adam.Set("learning_rate", 1e-3); err != nil {
		return 0, false, err
	}
	if err := model.SetOptimizer(adam); err != nil {
		return 0, false, err
	}

	train, err := pipeline(dir, "train", true)
	if err != nil {
		return 0, false, err
	}
	defer train.Close()
	test, err := pipeline(dir, "test", false)
	if err != nil {
		return 0, false, err
	}
	defer test.Close()

	// The learning rate: 1e-3, then times 0.6 after each epoch from the 2nd.
	lr := []tptrain.SchedulePoint{{At: 0, Value: 1e-3}}
	for e := int64(2); e <= epochs; e++ {
		lr = append(lr, tptrain.SchedulePoint{At: e, Value: lr[len(lr)-1].Value * 0.6})
	}
	// Callbacks not given to a trainer are the caller's to Close; on these
	// error paths the process exits anyway.
	runner, err := tptrain.NewInferenceRunner(model, test, "accuracy", "cost")
	if err != nil {
		return 0, false, err
	}
	schedule, err := tptrain.ScheduledHyperParam(adam, "learning_rate", lr, nil)
	if err != nil {
		return 0, false, err
	}
	saver, err := tptrain.ModelSaver(&tptrain.ModelSaverOptions{EveryKSteps: 200})
	if err != nil {
		return 0, false, err
	}
	best, err := tptrain.MaxSaver("validation_accuracy", nil)
	if err != nil {
		return 0, false, err
	}

	opts := tptrain.TrainerOptions{
		MaxEpoch:      epochs,
		Logdir:        logdir,
		LogdirAction:  tptrain.LogdirDelete,  // a run without checkpoints starts afresh
		AutoResume:    true,                  // one with checkpoints goes on from the latest
		StopOnSignals: tptrain.SignalsAlways, // SIGTERM/Ctrl-C: stop at a step, save, resume later
	}
	if bf16 {
		opts.Precision = tptrain.PrecisionBF16Mixed // autocast; variables stay float32
	}
	config := &tptrain.TrainConfig{
		Options:   &opts,
		Model:     model,
		DataFlow:  train, // wrapped in a queue input
		Callbacks: []*tptrain.Callback{runner, schedule, saver, best},
	}
	if device != "" && nTowers == 0 {
		nTowers = 1 // one tower on the device
	}
	if nTowers > 0 { // SyncMultiGPUTrainerReplicated(nTowers); without: SimpleTrainer
		config.Towers = &tptrain.TowersOptions{Towers: nTowers}
		where, plural := "CPU", "s"
		if device != "" {
			where = device
			for k := 0; k < nTowers; k++ {
				config.Towers.Devices = append(config.Towers.Devices, device)
			}
		}
		if nTowers == 1 {
			plural = ""
		}
		fmt.Printf("training on %d replicated %s tower%s, a batch of %d each: %d images per step\n",
			nTowers, where, plural, batch, nTowers*batch)
	}
	if dist { // HorovodTrainer: one rank of the job tptrain-run started; without: alone
		config.Distributed = &tptrain.DistributedOptions{} // all from torchrun's variables
	}
	trainer, err := tptrain.NewTrainerFromConfig(config) // with dist: joins the job
	if err != nil {
		return 0, false, err
	}
	defer trainer.Close()
	if err := trainer.Run(); err != nil {
		return 0, false, err
	}
	if rank, _ := trainer.Rank(); rank != 0 {
		return 0, false, nil // the chief validates and reports
	}

	accuracy, step, err := trainer.ScalarLatest("validation_accuracy")
	if errors.Is(err, tptrain.ErrNotFound) { // resumed after the last epoch: nothing ran
		fmt.Printf("%s already holds a finished run of %d epochs: nothing to train (give more EPOCHS, or another LOGDIR)\n",
			logdir, epochs)
		return 1, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	fmt.Printf("test accuracy: %.2f %% on the 10,000 Fashion-MNIST test images (step %d)\n", 100*accuracy, step)
	return accuracy, true, nil
}
