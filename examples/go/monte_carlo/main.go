// Command monte_carlo is a training that is not gradient based: it estimates
// pi by Monte Carlo. It mirrors examples/c/monte_carlo.c.
//
// "Training is running something again and again": each step draws 10,000
// points in the unit square with a deterministic xorshift64* generator,
// refines the running estimate of pi and its standard error, and puts both
// as scalars (they land in stats.json and the per-epoch printout). A callback
// logs the estimate after each epoch; run_step stops training once the
// standard error falls below 0.0005.
//
//	cd examples/go && PKG_CONFIG_PATH=$BUILD/meson-uninstalled LD_LIBRARY_PATH=$BUILD go run ./monte_carlo [LOGDIR]
//
// LOGDIR defaults to train_log/monte_carlo_go.
package main

import (
	"fmt"
	"log"
	"math"
	"os"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

const (
	pointsPerStep = 10000
	targetError   = 0.0005
)

// xorshift64star is Vigna's xorshift64* generator.
type xorshift64star uint64

func (s *xorshift64star) next() uint64 {
	x := uint64(*s)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*s = xorshift64star(x)
	return x * 0x2545F4914F6CDD1D
}

// uniform returns a float64 in [0, 1) from the top 53 bits.
func (s *xorshift64star) uniform() float64 {
	return float64(s.next()>>11) * (1.0 / (1 << 53))
}

type monteCarlo struct {
	rng           xorshift64star
	inside, total uint64
	estimate      float64
	stdError      float64
}

// sample is one hooked step: the work whose outputs callbacks may read.
func (mc *monteCarlo) sample(ctx *tptrain.Context) error {
	for i := 0; i < pointsPerStep; i++ {
		x, y := mc.rng.uniform(), mc.rng.uniform()
		if x*x+y*y <= 1 {
			mc.inside++
		}
	}
	mc.total += pointsPerStep
	p := float64(mc.inside) / float64(mc.total)
	mc.estimate = 4 * p
	mc.stdError = 4 * math.Sqrt(p*(1-p)/float64(mc.total))
	return ctx.SetOutputScalar("pi_estimate", mc.estimate)
}

func (mc *monteCarlo) runStep(ctx *tptrain.Context) error {
	if err := ctx.HookedStep(mc.sample); err != nil {
		return err
	}
	if err := ctx.PutScalar("pi_estimate", mc.estimate); err != nil {
		return err
	}
	if err := ctx.PutScalar("std_error", mc.stdError); err != nil {
		return err
	}
	if mc.stdError < targetError {
		return tptrain.Stop(fmt.Sprintf("converged: standard error %.6f < %g", mc.stdError, targetError))
	}
	return nil
}

func main() {
	log.SetFlags(0)
	logdir := "train_log/monte_carlo_go"
	if len(os.Args) > 1 {
		logdir = os.Args[1]
	}
	mc := &monteCarlo{rng: 0x9E3779B97F4A7C15}

	trainer, err := tptrain.NewTrainer(&tptrain.TrainerOptions{
		StepsPerEpoch: 50, MaxEpoch: 100, Logdir: logdir, LogdirAction: tptrain.LogdirDelete})
	if err != nil {
		log.Fatal(err)
	}
	defer trainer.Close()
	if err := trainer.SetRunStep(mc.runStep); err != nil {
		log.Fatal(err)
	}

	// TRIGGER only: it comes after each epoch.
	report, err := tptrain.NewCallback("report", tptrain.EventTrigger, nil,
		func(ctx *tptrain.Context, _ tptrain.Event, _ *tptrain.Record) error {
			return ctx.Log(fmt.Sprintf("pi ~ %.6f +- %.6f after %d points", mc.estimate, mc.stdError, mc.total))
		})
	if err != nil {
		log.Fatal(err)
	}
	if err := trainer.AddCallback(report); err != nil {
		log.Fatal(err)
	}

	if err := trainer.Run(); err != nil {
		log.Fatal(err)
	}

	reason, stopped := trainer.StopReason()
	if !stopped {
		reason = "no (ran to max_epoch)"
	}
	steps := trainer.GlobalStep()
	fmt.Printf("pi ~ %.6f (error %.2e) after %d steps; stopped: %s; stats in %s/stats.json\n",
		mc.estimate, math.Abs(mc.estimate-math.Pi), steps, reason, trainer.Logdir())
	if !stopped {
		os.Exit(1)
	}
}
