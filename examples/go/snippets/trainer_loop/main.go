// docs/trainer.md, "The loop": run_step, a hooked step, a callback, a stop.
// The part between the [doc] markers is shown in the page (checked by the
// doc-snippets test); the whole program is built and run by the examples test.
package main

import (
	"fmt"
	"log"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// [doc]
func main() {
	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{
		MaxEpoch: 10, StepsPerEpoch: 100, Progress: tptrain.ProgressOff}) // the zero value is the defaults
	if err != nil {
		log.Fatal(err)
	}
	defer trainer.Close()
	total := 0.0
	// The body of the loop; the hooked step runs between the callbacks'
	// BEFORE_RUN and AFTER_RUN.
	err = trainer.SetRunStep(func(ctx *tptrain.Context) error {
		if err := ctx.HookedStep(func(ctx *tptrain.Context) error {
			total++
			return ctx.SetOutputScalar("total", total)
		}); err != nil {
			return err
		}
		if total >= 250 {
			return tptrain.Stop("enough") // a graceful stop
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// After each epoch: a scalar for the monitors (stats.json, the printer).
	report, err := tptrain.NewCallback("report", tptrain.EventTrigger, nil,
		func(ctx *tptrain.Context, _ tptrain.Event, _ *tptrain.Record) error {
			return ctx.PutScalar("total", total)
		})
	if err != nil {
		log.Fatal(err)
	}
	if err := trainer.AddCallback(report); err != nil { // the trainer takes it
		log.Fatal(err)
	}
	if err := trainer.Run(); err != nil {
		log.Fatal(err)
	}
	reason, _ := trainer.StopReason()
	steps := trainer.GlobalStep()
	fmt.Printf("stopped after %d steps: %s\n", steps, reason)
}

// [/doc]
