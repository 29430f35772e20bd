// Command gan trains a DCGAN on Fashion-MNIST with tensorpack's GANTrainer,
// trained by tptrain (the Go twin of examples/c/gan.c; the Rust one is
// examples/rust/src/bin/gan.rs).
//
// Data: Debian's dataset-fashion-mnist (IDX files under
// /usr/share/datasets/fashion-mnist): the 60,000 training images in a new
// order each epoch, scaled to [-1, 1], each with a noise vector z drawn
// uniformly from [-1, 1]^64 by the pipeline (seeded, and saved in
// checkpoints like the rest of the pipeline), in batches of 64.
//
// The tower function builds tensorpack's GANModelDesc: a generator under
// the variable scope "gen/" and a discriminator under "discrim/", and
// publishes the outputs "g_loss" and "d_loss". Trainer.SetGAN makes the two
// train ops from them (each with a copy of the model's Adam) and the
// GANTrainer: every step updates the generator, then the discriminator,
// from one forward pass.
//
//	generator:     z -> fc 7x7x128 -> BN, ReLU -> deconv 4x4/2 64 (14x14)
//	               -> BN, ReLU -> deconv 4x4/2 1 (28x28) -> tanh
//	discriminator: image -> conv 4x4/2 64 (14x14), leaky ReLU 0.2
//	               -> conv 4x4/2 128 (7x7) -> BN, leaky ReLU -> fc 1 (a logit)
//	weights initialised normal with std 0.05, biases zero
//	d_loss = (sigmoid CE of D(real) against 1 + of D(G(z)) against 0) / 2
//	g_loss = sigmoid CE of D(G(z)) against 1
//	Adam, learning rate 2e-4, beta1 0.5 (tensorpack's DCGAN)
//
// After every epoch a callback draws 64 samples from the same fixed noise
// as the C program (the generator as an inference tower: BatchNorm's moving
// averages), tiles them into an 8 x 8 grid (ImageGrid), writes it as
// LOGDIR/samples-epochN.png and puts it as the image "samples"
// (TensorBoard's event file). A ModelSaver checkpoints both nets and both
// optimizers every epoch; run it again on the same LOGDIR and it goes on
// where it stopped.
//
// --towers N trains on N replicated CPU towers (tensorpack's
// MultiGPUGANTrainer: each tower its own batch of 64, each op's cost
// averaged over the towers). --steps S makes an epoch S steps (default: one
// pass).
//
//	cd examples/go && go run ./gan [--towers N] [--steps S] [LOGDIR] [DATA_DIR] [EPOCHS]
//	  (defaults: train_log/gan, /usr/share/datasets/fashion-mnist, 2)
package main

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

const (
	batch   = 64
	zDim    = 64
	samples = 64
	nf      = 64 // the nets' width
)

// layer is one stage of a network: a layer, an activation, a reshape.
type layer func(x *tptrain.Tensor) (*tptrain.Tensor, error)

// sequential runs x through layers in order and stops at the first error.
func sequential(x *tptrain.Tensor, layers ...layer) (*tptrain.Tensor, error) {
	for _, l := range layers {
		var err error
		if x, err = l(x); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// activation is act (alpha: the leaky ReLU slope) as a layer.
func activation(act tptrain.Act, alpha float64) layer {
	return func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return tptrain.Activation(x, act, alpha) }
}

// sigmoidCE is softplus(sign * x), averaged: the sigmoid cross-entropy of
// logits x against the target 1 (sign -1) or 0 (sign +1).
func sigmoidCE(logits *tptrain.Tensor, sign float64) (*tptrain.Tensor, error) {
	return sequential(logits,
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return x.MulScalar(sign) },
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return op1("softplus", x) },
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return op1("mean", x) })
}

// op1 calls the ATen operator op on x alone, for its one result.
func op1(op string, x *tptrain.Tensor) (*tptrain.Tensor, error) {
	out, err := tptrain.OpCall(op, "", tptrain.TensorArg(x))
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// The two nets under their variable scopes (tensorpack's
// tf.variable_scope), "gen/..." and "discrim/...": the train ops select
// their variables by these prefixes. A layer's name is one scope level:
// "fc0" in "gen" makes "gen/fc0/W". The discriminator is applied twice, to
// real and to generated images, under a reuse scope (tensorpack's
// auto_reuse_variable_scope): both applications share its variables.

// generator: z [N, Z] -> images [N, 1, 28, 28] in [-1, 1], under "gen/".
func generator(t *tptrain.Tower, z *tptrain.Tensor) (images *tptrain.Tensor, err error) {
	// Weights normal with std 0.05; no biases before BatchNorm.
	normal := tptrain.InitNormal
	fc := &tptrain.LayerOptions{NoBias: true, KernelInit: normal}
	up := &tptrain.LayerOptions{NoBias: true, KernelInit: normal, Kernel: [2]int64{4, 4}, Stride: [2]int64{2, 2}}
	out := &tptrain.LayerOptions{Activation: tptrain.ActTanh, KernelInit: normal, Kernel: [2]int64{4, 4}, Stride: [2]int64{2, 2}}
	err = t.Scope("gen", func() (err error) {
		images, err = sequential(z,
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.FC("fc0", x, 7*7*2*nf, fc) },
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return x.Reshape(-1, 2*nf, 7, 7) },
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.BatchNorm("bn0", x, 0.9, 1e-5) },
			activation(tptrain.ActReLU, 0),
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Conv2DTranspose("deconv1", x, nf, up) },
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.BatchNorm("bn1", x, 0.9, 1e-5) },
			activation(tptrain.ActReLU, 0),
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Conv2DTranspose("deconv2", x, 1, out) })
		return
	})
	return
}

// discriminator: images [N, 1, 28, 28] -> logits [N, 1], under "discrim/";
// applied twice, one set of variables.
func discriminator(t *tptrain.Tower, image *tptrain.Tensor) (logits *tptrain.Tensor, err error) {
	// Weights normal with std 0.05; leaky ReLU's slope 0.2.
	normal := tptrain.InitNormal
	conv0 := &tptrain.LayerOptions{Activation: tptrain.ActLeakyReLU, KernelInit: normal, Kernel: [2]int64{4, 4}, Stride: [2]int64{2, 2}}
	conv1 := &tptrain.LayerOptions{NoBias: true, KernelInit: normal, Kernel: [2]int64{4, 4}, Stride: [2]int64{2, 2}}
	fc := &tptrain.LayerOptions{KernelInit: normal}
	err = t.ReuseScope("discrim", func() (err error) {
		logits, err = sequential(image,
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Conv2D("conv0", x, nf, conv0) },
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.Conv2D("conv1", x, 2*nf, conv1) },
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.BatchNorm("bn1", x, 0.9, 1e-5) },
			activation(tptrain.ActLeakyReLU, 0.2),
			func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return t.FC("fc", x, 1, fc) })
		return
	})
	return
}

// tower is the tower function: inputs image [N, 1, 28, 28] in [-1, 1],
// z [N, Z]. The tensors it makes belong to the call and go when it
// returns: it closes nothing.
func tower(t *tptrain.Tower, in []*tptrain.Tensor) error {
	fake, err := generator(t, in[1])
	if err != nil {
		return err
	}
	realLogit, err := discriminator(t, in[0])
	if err != nil {
		return err
	}
	fakeLogit, err := discriminator(t, fake)
	if err != nil {
		return err
	}
	dReal, err := sigmoidCE(realLogit, -1) // against 1
	if err != nil {
		return err
	}
	dFake, err := sigmoidCE(fakeLogit, +1) // against 0
	if err != nil {
		return err
	}
	dLoss, err := sequential(dReal,
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return x.Add(dFake) },
		func(x *tptrain.Tensor) (*tptrain.Tensor, error) { return x.MulScalar(0.5) })
	if err != nil {
		return err
	}
	gLoss, err := sigmoidCE(fakeLogit, -1)
	if err != nil {
		return err
	}
	if err := t.SetOutput("d_loss", dLoss); err != nil {
		return err
	}
	if err := t.SetOutput("g_loss", gLoss); err != nil {
		return err
	}
	return t.SetOutput("gen", fake)
}

// pipeline is the training dataflow: (image in [-1, 1], z) batched by
// batch.
func pipeline(dir string) (*tptrain.DataFlow, error) {
	// Each dataflow keeps its own reference to those it reads: the
	// intermediate ones are closed on return.
	mnist, err := tptrain.DataFlowMNIST(dir, "train", tptrain.Shuffled)
	if err != nil {
		return nil, err
	}
	defer mnist.Close()
	norm, err := mnist.Augment(0, []tptrain.Augmentor{
		{Kind: tptrain.AugmentNormalize, Mean: []float64{0.5}, Std: []float64{0.5}},
	}, 0)
	if err != nil {
		return nil, err
	}
	defer norm.Close()
	zSpec := []tptrain.InputSpec{{Name: "z", DType: tptrain.DTypeFloat32, Shape: []int64{zDim}}}
	noise, err := tptrain.DataFlowFake(zSpec, 60000, &tptrain.FakeOptions{Low: -1, High: 1})
	if err != nil {
		return nil, err
	}
	defer noise.Close()
	joined, err := tptrain.JoinDataFlows(norm, noise) // (image, label, z)
	if err != nil {
		return nil, err
	}
	defer joined.Close()
	picked, err := joined.Select(0, 2)
	if err != nil {
		return nil, err
	}
	defer picked.Close()
	return picked.Batch(batch, tptrain.DropRemainder)
}

// fixedNoise is the samples' noise: samples x Z values uniform in [-1, 1)
// from xorshift64, the same as the C program's.
func fixedNoise() []float32 {
	z := make([]float32, samples*zDim)
	r := uint64(0x9e3779b97f4a7c15)
	for i := range z {
		r ^= r << 13
		r ^= r >> 7
		r ^= r << 17
		z[i] = float32(float64(r>>11)/9007199254740992.0*2 - 1)
	}
	return z
}

// drawSamples is the sampler callback: after every epoch, the generator on
// the fixed noise z. The tensors it makes are the call's: they go when it
// returns.
func drawSamples(model *tptrain.Model, z []float32) func(*tptrain.Context, tptrain.Event, *tptrain.Record) error {
	blankData := make([]float32, samples*28*28) // the discriminator's input, unused here
	return func(ctx *tptrain.Context, _ tptrain.Event, _ *tptrain.Record) error {
		noise, err := tptrain.FromFloat32(z, samples, zDim)
		if err != nil {
			return err
		}
		blank, err := tptrain.FromFloat32(blankData, samples, 1, 28, 28)
		if err != nil {
			return err
		}
		images, err := model.Infer([]*tptrain.Tensor{blank, noise}, []string{"gen"})
		if err != nil {
			return err
		}
		// 8 columns, padding 2
		grid, err := tptrain.ImageGrid(images[0], &tptrain.GridOptions{Low: -1, High: 1})
		if err != nil {
			return err
		}
		if err := ctx.PutImage("samples", grid); err != nil {
			return err
		}
		logdir := ctx.Logdir()
		if logdir == "" {
			return nil
		}
		return tptrain.WritePNG(grid, filepath.Join(logdir, fmt.Sprintf("samples-epoch%d.png", ctx.EpochNum())))
	}
}

const usage = `usage: gan [--towers N] [--steps S] [LOGDIR] [DATA_DIR] [EPOCHS]
  LOGDIR      the log directory (default train_log/gan): samples-epochN.png,
              checkpoints, stats.json; one that holds checkpoints goes on
              from the latest
  DATA_DIR    the IDX files (default /usr/share/datasets/fashion-mnist)
  EPOCHS      the epochs to train (default 2)
  --towers N  train on N replicated CPU towers, 1 to 256 (tensorpack's
              MultiGPUGANTrainer(N)); each takes its own batch of 64
  --steps S   S steps per epoch (default: one pass over the 60,000 images)
  -h, --help  this text
`

// parseCount is a whole number from 1 to max, else 0.
func parseCount(s string, max int64) int64 {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > max {
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
	fmt.Fprintf(os.Stderr, "gan: %s\n%s", what, usage)
	os.Exit(2)
}

func main() {
	log.SetFlags(0)
	// The options go anywhere; the other arguments are LOGDIR DATA_DIR
	// EPOCHS, in that order (more are ignored). Not the flag package: it
	// stops at the first positional argument.
	var positional []string
	var nTowers, steps int64 // 0: no towers; one pass per epoch
	for i := 1; i < len(os.Args); i++ {
		a := os.Args[i]
		switch {
		case a == "-h" || a == "--help":
			fmt.Print(usage)
			return
		case a == "--towers" || a == "--steps":
			if i+1 == len(os.Args) {
				usageError("a value is missing after", &a)
			}
			i++
			into, max := &nTowers, int64(256)
			if a == "--steps" {
				into, max = &steps, 1000000000
			}
			if *into = parseCount(os.Args[i], max); *into == 0 {
				usageError("not a whole number in range:", &os.Args[i])
			}
		case strings.HasPrefix(a, "--"):
			usageError("unknown option", &a)
		default:
			positional = append(positional, a)
		}
	}
	if err := run(positional, int(nTowers), steps); err != nil {
		log.Fatal(err)
	}
}

// run trains and prints the final losses.
func run(positional []string, nTowers int, steps int64) error {
	logdir, dir, epochs := "train_log/gan", "/usr/share/datasets/fashion-mnist", int64(2)
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
		return err
	}

	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "image", DType: tptrain.DTypeFloat32, Shape: []int64{-1, 1, 28, 28}},
		{Name: "z", DType: tptrain.DTypeFloat32, Shape: []int64{-1, zDim}},
	}, tower)
	if err != nil {
		return err
	}
	defer model.Close()
	adam, err := tptrain.NewOptimizer("adam")
	if err != nil {
		return err
	}
	defer adam.Close()
	if err := adam.Set("learning_rate", 2e-4); err != nil {
		return err
	}
	if err := adam.Set("beta1", 0.5); err != nil {
		return err
	}
	if err := model.SetOptimizer(adam); err != nil { // each train op gets a copy
		return err
	}

	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{
		MaxEpoch:      epochs,
		Logdir:        logdir,
		LogdirAction:  tptrain.LogdirDelete,  // a run without checkpoints starts afresh
		AutoResume:    true,                  // one with checkpoints goes on from the latest
		StopOnSignals: tptrain.SignalsAlways, // SIGTERM/Ctrl-C: stop at a step, save, resume later
		StepsPerEpoch: steps,                 // 0: one pass
	})
	if err != nil {
		return err
	}
	defer trainer.Close()

	train, err := pipeline(dir)
	if err != nil {
		return err
	}
	defer train.Close()
	input, err := tptrain.InputFromDataFlow(train, nil) // a prefetching queue
	if err != nil {
		return err
	}
	gan := &tptrain.GANOptions{} // GANTrainer: g_op then d_op every step
	if nTowers > 0 {
		gan.Towers = &tptrain.TowersOptions{Towers: nTowers}
	}
	if err := trainer.SetGAN(model, input, gan); err != nil {
		return err
	}

	// The samples: 64 fixed noise vectors, the same every epoch.
	sampler, err := tptrain.NewCallback("Samples", tptrain.EventTrigger, nil, // chief only (the default), after every epoch
		drawSamples(model, fixedNoise()))
	if err != nil {
		return err
	}
	if err := trainer.AddCallback(sampler); err != nil {
		return err
	}
	saver, err := tptrain.ModelSaver(nil) // every epoch: both nets, both optimizers
	if err != nil {
		return err
	}
	if err := trainer.AddCallback(saver); err != nil {
		return err
	}

	if err := trainer.Run(); err != nil {
		return err
	}
	gLoss, step, err := trainer.ScalarLatest("g_loss")
	if errors.Is(err, tptrain.ErrNotFound) { // resumed after the last epoch: nothing ran
		fmt.Printf("%s already holds a finished run of %d epochs: nothing to train (give more EPOCHS, or another LOGDIR)\n",
			logdir, epochs)
		return nil
	}
	if err != nil {
		return err
	}
	dLoss, _, err := trainer.ScalarLatest("d_loss")
	if err != nil {
		return err
	}
	fmt.Printf("after %d steps: g_loss %.4f, d_loss %.4f; samples in %s/samples-epoch%d.png\n",
		step, gLoss, dLoss, logdir, epochs)
	return nil
}
