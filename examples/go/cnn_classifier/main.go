// Command cnn_classifier trains a small convolutional network on synthetic
// 1x8x8 images of two classes with tptrain's model API: Conv2D, BatchNorm,
// ReLU, MaxPool and FC layers, the softmax cross-entropy, and a callback
// that reads the tower's "accuracy" output after each step.
//
// Class 0 images have a bright 3x3 square in the top-left quadrant, class 1
// in the bottom-right one (at a random offset inside the quadrant), both on
// Gaussian noise. After training, an inference pass over held-out images
// measures the accuracy; the program exits with status 1 below 90%.
//
//	cd examples/go && PKG_CONFIG_PATH=$BUILD/meson-uninstalled LD_LIBRARY_PATH=$BUILD go run ./cnn_classifier
package main

import (
	"fmt"
	"log"
	"math/rand"
	"os"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

const (
	side        = 8
	trainImages = 512
	testImages  = 256
	batchSize   = 32
	epochs      = 6
	minAccuracy = 0.9
)

// images returns n images [n, 1, 8, 8] and their labels [n].
func images(rng *rand.Rand, n int) (pixels []float32, labels []int64) {
	pixels = make([]float32, n*side*side)
	labels = make([]int64, n)
	for i := 0; i < n; i++ {
		img := pixels[i*side*side : (i+1)*side*side]
		for p := range img {
			img[p] = float32(rng.NormFloat64() * 0.6)
		}
		label := int64(rng.Intn(2))
		labels[i] = label
		// a 3x3 square inside the 4x4 quadrant
		r0, c0 := rng.Intn(2), rng.Intn(2)
		if label == 1 {
			r0, c0 = r0+4, c0+4
		}
		for r := r0; r < r0+3; r++ {
			for c := c0; c < c0+3; c++ {
				img[r*side+c] += 1
			}
		}
	}
	return pixels, labels
}

// tower: conv 3x3 (8) -> batch norm -> relu -> max pool 2 -> conv 3x3 (16)
// -> relu -> global average pool -> fc (2 logits); the cost is the softmax
// cross-entropy. Outputs: "logits" and "accuracy".
func tower(t *tptrain.Tower, in []*tptrain.Tensor) error {
	img, label := in[0], in[1]
	x, err := t.Conv2D("conv1", img, 8, &tptrain.LayerOptions{NoBias: true})
	if err != nil {
		return err
	}
	if x, err = t.BatchNorm("bn1", x, 0.9, 1e-5); err != nil {
		return err
	}
	if x, err = tptrain.Activation(x, tptrain.ActReLU, 0); err != nil {
		return err
	}
	if x, err = tptrain.MaxPool(x, 2, 2, tptrain.PaddingValid); err != nil { // 4x4
		return err
	}
	if x, err = t.Conv2D("conv2", x, 16, &tptrain.LayerOptions{Activation: tptrain.ActReLU}); err != nil {
		return err
	}
	if x, err = tptrain.Flatten(x); err != nil {
		return err
	}
	logits, err := t.FC("fc", x, 2, &tptrain.LayerOptions{KernelInit: tptrain.InitGlorotUniform})
	if err != nil {
		return err
	}
	cost, err := tptrain.SoftmaxCrossEntropy(logits, label)
	if err != nil {
		return err
	}
	acc, err := tptrain.Accuracy(logits, label)
	if err != nil {
		return err
	}
	if err := t.SetOutput("logits", logits); err != nil {
		return err
	}
	if err := t.SetOutput("accuracy", acc); err != nil {
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
	if err := tptrain.ManualSeed(3); err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(1))
	trainPixels, trainLabels := images(rng, trainImages)
	testPixels, testLabels := images(rng, testImages)

	x, err := tptrain.FromFloat32(trainPixels, trainImages, 1, side, side)
	if err != nil {
		return err
	}
	defer x.Close()
	y, err := tptrain.FromInt64(trainLabels)
	if err != nil {
		return err
	}
	defer y.Close()

	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "image", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 1, side, side}},
		{Name: "label", DType: tptrain.DTypeInt64, Shape: []int64{-1}},
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
	// StepsPerEpoch: the input's size
	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{MaxEpoch: epochs, Progress: tptrain.ProgressOff})
	if err != nil {
		input.Close()
		return err
	}
	defer trainer.Close()
	if err := trainer.SetModel(model, input); err != nil { // takes input
		return err
	}
	// The mean of the steps' "accuracy" outputs, put as a scalar after each
	// epoch (the scalar printer shows it with the cost).
	var sum float64
	var steps int
	cb, err := tptrain.NewCallback("train-accuracy", tptrain.EventAfterRun|tptrain.EventTriggerEpoch, nil,
		func(ctx *tptrain.Context, e tptrain.Event, _ *tptrain.Record) error {
			if e == tptrain.EventAfterRun {
				acc, err := ctx.OutputScalar("accuracy")
				sum, steps = sum+acc, steps+1
				return err
			}
			mean := sum / float64(steps)
			sum, steps = 0, 0
			return ctx.PutScalar("train_accuracy", mean)
		})
	if err != nil {
		return err
	}
	if err := trainer.AddCallback(cb); err != nil {
		return err
	}
	if err := trainer.Run(); err != nil {
		return err
	}

	// Held-out accuracy from an inference pass (BatchNorm uses its moving
	// averages there).
	tx, err := tptrain.FromFloat32(testPixels, testImages, 1, side, side)
	if err != nil {
		return err
	}
	defer tx.Close()
	ty, err := tptrain.FromInt64(testLabels)
	if err != nil {
		return err
	}
	defer ty.Close()
	outs, err := model.Infer([]*tptrain.Tensor{tx, ty}, []string{"accuracy", "cost"})
	if err != nil {
		return err
	}
	defer func() {
		for _, o := range outs {
			o.Close()
		}
	}()
	acc, err := outs[0].Item()
	if err != nil {
		return err
	}
	cost, err := outs[1].Item()
	if err != nil {
		return err
	}
	fmt.Printf("held-out accuracy %.2f%% on %d images (cost %.4f)\n", 100*acc, testImages, cost)
	if acc < minAccuracy {
		fmt.Fprintf(os.Stderr, "cnn_classifier: the accuracy %.2f%% is below %.0f%%\n", 100*acc, 100*minAccuracy)
		os.Exit(1)
	}
	return nil
}
