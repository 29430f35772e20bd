package tptrain_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

func ExampleTensor_Matmul() {
	a, err := tptrain.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := tptrain.FromFloat32([]float32{7, 8, 9, 10, 11, 12}, 3, 2)
	if err != nil {
		panic(err)
	}
	defer b.Close()
	c, err := a.Matmul(b)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	shape, _ := c.Shape()
	values, _ := c.Float32s()
	fmt.Println(shape, values)

	_, err = a.Matmul(a) // 2x3 by 2x3
	fmt.Println(errors.Is(err, tptrain.ErrBackend))
	// Output:
	// [2 2] [58 64 139 154]
	// true
}

func ExampleTrainer() {
	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{
		MaxEpoch: 3, StepsPerEpoch: 4, Quiet: true, Progress: tptrain.ProgressOff})
	if err != nil {
		panic(err)
	}
	defer trainer.Close()

	sum := 0.0
	err = trainer.SetRunStep(func(ctx *tptrain.Context) error {
		err := ctx.HookedStep(func(ctx *tptrain.Context) error {
			sum += float64(ctx.GlobalStep())
			return nil
		})
		if err != nil {
			return err
		}
		if sum > 20 {
			return tptrain.Stop(fmt.Sprintf("sum %.0f > 20", sum))
		}
		return ctx.PutScalar("sum", sum)
	})
	if err != nil {
		panic(err)
	}
	report, err := tptrain.NewCallback("report", tptrain.EventTriggerEpoch, nil,
		func(ctx *tptrain.Context, _ tptrain.Event, _ *tptrain.Record) error {
			fmt.Printf("epoch %d: global step %d, sum %.0f\n", ctx.EpochNum(), ctx.GlobalStep(), sum)
			return nil
		})
	if err != nil {
		panic(err)
	}
	if err := trainer.AddCallback(report); err != nil {
		panic(err)
	}

	if err := trainer.Run(); err != nil {
		panic(err)
	}
	reason, stopped := trainer.StopReason()
	_, values, _ := trainer.ScalarHistory("sum")
	fmt.Println(stopped, reason, values)
	// Output:
	// epoch 1: global step 4, sum 6
	// true sum 21 > 20 [0 1 3 6 10 15]
}

// Each process of a job started by tools/tptrain-run (tptrain-run -n 2
// ./train) or torchrun runs this: the zero DistributedOptions (nil) takes
// the job from their environment variables. Every rank trains on its share
// of the batches, rank 0's initial variables reach the others, and the
// gradients are averaged over the ranks, so every rank ends with the same
// variables. (No output checked: it needs a job.)
func ExampleTrainer_SetDistributed() {
	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{MaxEpoch: 2, Quiet: true, Progress: tptrain.ProgressOff})
	if err != nil {
		panic(err)
	}
	defer trainer.Close()
	if err := trainer.SetDistributed(nil); err != nil { // blocks until every rank has joined
		panic(err)
	}
	rank, worldSize := trainer.Rank()

	// y = 2x: a linear model fitted by SGD.
	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "x", Shape: []int64{-1, 1}},
		{Name: "y", Shape: []int64{-1, 1}},
	}, func(t *tptrain.Tower, in []*tptrain.Tensor) error {
		pred, err := t.FC("fc", in[0], 1, nil)
		if err != nil {
			return err
		}
		cost, err := tptrain.MSELoss(pred, in[1])
		if err != nil {
			return err
		}
		return t.SetCost(cost)
	})
	if err != nil {
		panic(err)
	}
	defer model.Close()
	sgd, err := tptrain.NewOptimizer("sgd")
	if err != nil {
		panic(err)
	}
	defer sgd.Close()
	if err := sgd.Set("learning_rate", 0.1); err != nil {
		panic(err)
	}
	if err := model.SetOptimizer(sgd); err != nil {
		panic(err)
	}
	xs, ys := make([]float32, 64), make([]float32, 64)
	for i := range xs {
		xs[i] = float32(i)/32 - 1
		ys[i] = 2 * xs[i]
	}
	x, err := tptrain.FromFloat32(xs, 64, 1)
	if err != nil {
		panic(err)
	}
	defer x.Close()
	y, err := tptrain.FromFloat32(ys, 64, 1)
	if err != nil {
		panic(err)
	}
	defer y.Close()
	// Every rank gives the same input: rank r takes the r-th batch of every
	// worldSize.
	input, err := tptrain.InputFromTensors([]*tptrain.Tensor{x, y}, 8, tptrain.Sequential, 0)
	if err != nil {
		panic(err)
	}
	if err := trainer.SetModel(model, input); err != nil { // after SetDistributed
		panic(err)
	}
	if err := trainer.Run(); err != nil {
		panic(err)
	}
	if rank == 0 {
		w, err := model.Variable("fc/W")
		if err != nil {
			panic(err)
		}
		defer w.Close()
		values, _ := w.Float32s()
		fmt.Printf("rank 0 of %d: w = %.2f\n", worldSize, values[0])
	}
}

// A toy GAN in one dimension, trained by tensorpack's GANTrainer: the
// generator "gen/" maps noise to fakes, the discriminator "discrim/" scores
// reals and fakes, and the tower publishes the least-squares losses
// "g_loss" and "d_loss". SetGAN makes the train ops "g_op" (g_loss over
// gen/) and "d_op" (d_loss over discrim/) and a run_step that runs both from
// one forward pass as one hooked step. (A run_step of your own runs ops with
// Context.RunTrainOps; GANOptions{Separate: true, DPeriod: 3} is the
// SeparateGANTrainer, GANOptions{Towers: &TowersOptions{Towers: 2}} the
// MultiGPUGANTrainer on two replicated towers.)
func ExampleTrainer_SetGAN() {
	model, err := tptrain.NewModel([]tptrain.InputSpec{
		{Name: "real", Shape: []int64{-1, 1}},
		{Name: "z", Shape: []int64{-1, 1}},
		{Name: "ones", Shape: []int64{-1, 1}},
		{Name: "zeros", Shape: []int64{-1, 1}},
	}, func(t *tptrain.Tower, in []*tptrain.Tensor) error {
		var made []*tptrain.Tensor // closed when the tower function returns
		defer func() {
			for _, x := range made {
				x.Close()
			}
		}()
		var first error
		keep := func(x *tptrain.Tensor, err error) *tptrain.Tensor {
			if err != nil && first == nil {
				first = err
			}
			if x != nil {
				made = append(made, x)
			}
			return x // nil after an error: the next calls fail too
		}
		gw, gb := keep(t.Variable("gen/w", []int64{1, 1}, nil)), keep(t.Variable("gen/b", []int64{1}, nil))
		dw, db := keep(t.Variable("discrim/w", []int64{1, 1}, nil)), keep(t.Variable("discrim/b", []int64{1}, nil))
		fake := keep(keep(in[1].Matmul(gw)).Add(gb))
		dReal := keep(keep(in[0].Matmul(dw)).Add(db))
		dFake := keep(keep(fake.Matmul(dw)).Add(db))
		// D wants 1 for reals and 0 for fakes; G wants 1 for its fakes
		dLoss := keep(keep(tptrain.MSELoss(dReal, in[2])).Add(keep(tptrain.MSELoss(dFake, in[3]))))
		gLoss := keep(tptrain.MSELoss(dFake, in[2]))
		if first != nil {
			return first
		}
		if err := t.SetOutput("d_loss", dLoss); err != nil {
			return err
		}
		return t.SetOutput("g_loss", gLoss)
	})
	if err != nil {
		panic(err)
	}
	defer model.Close()
	sgd, err := tptrain.NewOptimizer("sgd") // each train op gets a copy
	if err != nil {
		panic(err)
	}
	defer sgd.Close()
	if err := sgd.Set("learning_rate", 0.05); err != nil {
		panic(err)
	}
	if err := model.SetOptimizer(sgd); err != nil {
		panic(err)
	}

	const rows = 32
	real, z, ones, zeros := make([]float32, rows), make([]float32, rows), make([]float32, rows), make([]float32, rows)
	for i := range real {
		real[i], z[i], ones[i] = 2+float32(i%4)/8, float32(i%8)/8-0.5, 1
	}
	var data []*tptrain.Tensor
	for _, d := range [][]float32{real, z, ones, zeros} {
		x, err := tptrain.FromFloat32(d, rows, 1)
		if err != nil {
			panic(err)
		}
		defer x.Close()
		data = append(data, x)
	}
	input, err := tptrain.InputFromTensors(data, 8, tptrain.Shuffled, 1)
	if err != nil {
		panic(err)
	}

	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{MaxEpoch: 2, Quiet: true, Progress: tptrain.ProgressOff})
	if err != nil {
		panic(err)
	}
	defer trainer.Close()
	if err := trainer.SetGAN(model, input, nil); err != nil { // nil: GANTrainer
		panic(err)
	}
	if err := trainer.Run(); err != nil {
		panic(err)
	}
	steps := trainer.GlobalStep()
	_, step, err := trainer.ScalarLatest("g_loss") // a moving summary, put at each epoch's end
	fmt.Println(steps, "steps; g_loss reached the monitors at step", step, err)
	// Output: 8 steps; g_loss reached the monitors at step 8 <nil>
}

// A batch of four 2 x 2 grey images (as a generator's tower computes them,
// N x C x H x W, values in [-1, 1]) tiled two per row with a pixel of white
// padding, then written to a PNG file. Tensor.Image gives the grid to the
// standard library's image packages instead.
func ExampleImageGrid() {
	samples, err := tptrain.FromFloat32([]float32{
		-1, 1, 1, -1,
		0.6, 0.6, 0.6, 0.6,
		1, 1, 1, 1,
		-1, -0.5, 0.5, 1,
	}, 4, 1, 2, 2)
	if err != nil {
		panic(err)
	}
	defer samples.Close()
	grid, err := tptrain.ImageGrid(samples, &tptrain.GridOptions{Columns: 2, Padding: 1, Low: -1, High: 1, PadValue: 255})
	if err != nil {
		panic(err)
	}
	defer grid.Close()
	shape, _ := grid.Shape()
	pixels, _ := grid.Uint8s()
	fmt.Println(shape, pixels[8:13]) // the top rows of the first two images, with the padding between

	dir, err := os.MkdirTemp("", "grid")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := tptrain.WritePNG(grid, filepath.Join(dir, "samples.png")); err != nil {
		panic(err)
	}
	err = tptrain.WritePNG(grid, filepath.Join(dir, "missing", "samples.png"))
	fmt.Println(errors.Is(err, tptrain.ErrIO))
	// Output:
	// [7 7 1] [0 255 255 204 204]
	// true
}
