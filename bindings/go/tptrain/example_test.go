package tptrain_test

import (
	"errors"
	"fmt"

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
	report, err := tptrain.NewCallback("report", tptrain.EventTriggerEpoch, true,
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
