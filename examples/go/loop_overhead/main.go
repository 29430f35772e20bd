// Command loop_overhead measures what the trainer loop costs a Go program
// per step: a trainer with the default callbacks (progress and console off,
// no log directory) runs an empty run_step that makes one hooked step with
// an empty step function. The baseline is a bare for loop calling the same
// run_step function value as many times, with a stand-in for the Context
// whose HookedStep calls the step directly.
//
//	cd examples/go && PKG_CONFIG_PATH=$BUILD/meson-uninstalled LD_LIBRARY_PATH=$BUILD go run ./loop_overhead [STEPS_PER_EPOCH]
//
// STEPS_PER_EPOCH defaults to 200000, with 5 epochs. Each side is timed 5
// times and the best is kept. The last line reads "go: tptrain X ns/step,
// bare loop Y ns/step" (benchmarks/loop_overhead.sh prints it next to C's and
// Rust's).
package main

import (
	"fmt"
	"log"
	"math"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

const (
	maxEpoch = 5
	repeats  = 5 // the best of these is reported, as benchmarks/loop_overhead.c does
)

// hooker is what run_step needs of its context: *tptrain.Context in the
// trainer, *bareContext in the baseline.
type hooker interface {
	HookedStep(step func(ctx *tptrain.Context) error) error
}

// bareContext runs a "hooked step" as a plain call.
type bareContext struct{ globalStep int64 }

func (b *bareContext) HookedStep(step func(ctx *tptrain.Context) error) error {
	b.globalStep++
	return step(nil)
}

func emptyStep(*tptrain.Context) error { return nil }

// runStep is the loop body measured both ways.
var runStep = func(ctx hooker) error { return ctx.HookedStep(emptyStep) }

func main() {
	log.SetFlags(0)
	stepsPerEpoch := int64(200000)
	if len(os.Args) > 1 {
		n, err := strconv.ParseInt(os.Args[1], 10, 64)
		if err != nil || n < 1 {
			log.Fatalf("usage: loop_overhead [STEPS_PER_EPOCH]")
		}
		stepsPerEpoch = n
	}
	steps := stepsPerEpoch * maxEpoch
	bestTrainer, bestBare := math.Inf(1), math.Inf(1)
	for r := 0; r < repeats; r++ {
		bestTrainer = math.Min(bestTrainer, timeTrainer(stepsPerEpoch))
		bestBare = math.Min(bestBare, timeBareLoop(steps))
	}
	fmt.Printf("%d steps (%d epochs of %d), best of %d, %s, tptrain %s\n", steps, maxEpoch, stepsPerEpoch,
		repeats, runtime.Version(), tptrain.VersionString())
	fmt.Printf("go: tptrain %.1f ns/step, bare loop %.1f ns/step\n", bestTrainer, bestBare)
}

// timeTrainer returns the nanoseconds per step of Run.
func timeTrainer(stepsPerEpoch int64) float64 {
	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{
		StepsPerEpoch: stepsPerEpoch, MaxEpoch: maxEpoch, Progress: tptrain.ProgressOff, Quiet: true})
	if err != nil {
		log.Fatal(err)
	}
	defer trainer.Close()
	if err := trainer.SetRunStep(func(ctx *tptrain.Context) error { return runStep(ctx) }); err != nil {
		log.Fatal(err)
	}
	steps := stepsPerEpoch * maxEpoch
	t0 := time.Now()
	if err := trainer.Run(); err != nil {
		log.Fatal(err)
	}
	ns := float64(time.Since(t0).Nanoseconds()) / float64(steps)
	if g := trainer.GlobalStep(); g != steps {
		log.Fatalf("the trainer ran %d hooked steps, want %d", g, steps)
	}
	return ns
}

// timeBareLoop returns the nanoseconds per step of a for loop calling
// runStep.
func timeBareLoop(steps int64) float64 {
	bare := &bareContext{}
	t0 := time.Now()
	for i := int64(0); i < steps; i++ {
		if err := runStep(bare); err != nil {
			log.Fatal(err)
		}
	}
	ns := float64(time.Since(t0).Nanoseconds()) / float64(steps)
	if bare.globalStep != steps {
		log.Fatalf("the bare loop ran %d steps, want %d", bare.globalStep, steps)
	}
	return ns
}
