package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
*/
import "C"

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// ---- Towers: data-parallel training on several devices.

// Strategy is how several towers share the training: tensorpack's
// multi-GPU trainers (tpt_strategy). The zero value is StrategyReplicated,
// the library's default. The values are the binding's own, not
// tpt_strategy's numbers; the simple (one-tower) trainer is Trainer.SetModel
// or a TrainConfig without Towers.
type Strategy int32

// The strategies of tpt_strategy.
const (
	// StrategyReplicated is SyncMultiGPUTrainerReplicated: a copy of the
	// variables per tower, the gradients all-reduced (averaged, or summed
	// with TowersOptions.SumGradients), every copy updated; non-trainable
	// variables are copied from tower 0 after every epoch.
	StrategyReplicated Strategy = iota
	// StrategyParameterServer is SyncMultiGPUTrainerParameterServer: shared
	// variables, the towers' gradients averaged and applied once.
	StrategyParameterServer
	// StrategyAsync is AsyncMultiGPUTrainer: shared variables, each tower's
	// gradients times 1/N applied as an update of their own.
	StrategyAsync
)

// String returns "replicated", "parameter server", "async", or
// "Strategy(N)" for a value that is none of them.
func (s Strategy) String() string {
	switch s {
	case StrategyReplicated:
		return "replicated"
	case StrategyParameterServer:
		return "parameter server"
	case StrategyAsync:
		return "async"
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

func (s Strategy) c() (C.tpt_strategy, bool) {
	switch s {
	case StrategyReplicated:
		return C.TPT_STRATEGY_REPLICATED, true
	case StrategyParameterServer:
		return C.TPT_STRATEGY_PARAMETER_SERVER, true
	case StrategyAsync:
		return C.TPT_STRATEGY_ASYNC, true
	}
	return 0, false
}

// TowersOptions are the strategy and the towers of Trainer.SetTowers and
// TrainConfig.Towers (tpt_towers_options). The zero value is the library's
// defaults: 2 replicated CPU towers that average their gradients, each with
// its share of LibTorch's intra-op threads, reducing each 1 MiB bucket of
// gradients while the backward passes go on.
type TowersOptions struct {
	// Strategy is how the towers share the training (default
	// StrategyReplicated).
	Strategy Strategy
	// Towers is the number of towers, 1 to 256; 0 means len(Devices), or 2
	// without Devices. With both set they must agree.
	Towers int
	// Devices are the towers' devices, one per tower; nil means every tower
	// on "cpu", and "" is "cpu". Only CPU towers are implemented yet: a
	// CUDA device is an *Error of CodeUnsupported.
	Devices []string
	// SumGradients makes the replicated strategy sum the towers' gradients
	// instead of averaging them.
	SumGradients bool
	// IntraOpThreads is the number of LibTorch intra-op threads of each
	// tower; 0 means the process's (GetNumThreads) divided by the number of
	// towers, at least 1.
	IntraOpThreads int
	// NoOverlap makes the replicated and parameter-server strategies reduce
	// every bucket of gradients after all the towers' backward passes. By
	// default each bucket is reduced as soon as every tower's backward pass
	// has produced it, while the backward passes go on (PyTorch DDP's
	// reducer). The variables come out the same bit for bit either way;
	// only the time differs.
	NoOverlap bool
	// BucketBytes is about how many bytes of gradients go into each flat
	// bucket (in the order backward produces them), the unit of the
	// reductions; 0 means 1 MiB, and at most 2^40. The variables come out
	// the same bit for bit whatever the size.
	BucketBytes int
	// AverageScalars reports the cost and the scalar outputs (what the
	// monitors and the step outputs get) averaged over the towers, in tower
	// order, instead of tower 0's (tensorpack's rule, the default). In a
	// distributed job DistributedOptions.AverageScalars averages them over
	// the ranks as well.
	AverageScalars bool
}

// cTowersOptions returns the C options of o, whose device names live in C
// memory until the returned function frees them. who prefixes the errors
// found here.
func cTowersOptions(o *TowersOptions, who string) (C.tpt_towers_options, func(), error) {
	fail := func(msg string) (C.tpt_towers_options, func(), error) {
		return C.tpt_towers_options{}, nil, &Error{Code: CodeInvalidArgument, Message: who + ": TowersOptions." + msg}
	}
	strategy, ok := o.Strategy.c()
	if !ok {
		return fail("Strategy is " + o.Strategy.String() + ": not a strategy")
	}
	n := o.Towers
	switch {
	case n == 0 && len(o.Devices) > 0:
		n = len(o.Devices)
	case n == 0:
		n = 2
	case len(o.Devices) > 0 && n != len(o.Devices):
		return fail("Towers is " + strconv.Itoa(n) + " but Devices has " + strconv.Itoa(len(o.Devices)) + " entries")
	case n < math.MinInt32 || n > math.MaxInt32:
		return fail("Towers is " + strconv.Itoa(n) + ": it must be in [1, 256]")
	}
	if o.IntraOpThreads < math.MinInt32 || o.IntraOpThreads > math.MaxInt32 {
		return fail("IntraOpThreads is " + strconv.Itoa(o.IntraOpThreads) + ": it must be in [0, 1024]")
	}
	if o.BucketBytes < 0 {
		return fail("BucketBytes is " + strconv.Itoa(o.BucketBytes) + ": it must be in [0, 2^40] (0: 1 MiB)")
	}
	copts := defaultTowersOptions()
	copts.strategy = strategy
	copts.n_towers = C.int32_t(n)
	copts.average = cBool(!o.SumGradients)
	copts.intra_op_threads = C.int32_t(o.IntraOpThreads)
	copts.overlap = cBool(!o.NoOverlap)
	copts.bucket_bytes = C.size_t(o.BucketBytes)
	copts.average_scalars = cBool(o.AverageScalars)
	if len(o.Devices) == 0 {
		return copts, func() {}, nil
	}
	// The array of names holds pointers: C memory, as the names.
	size := arenaSize(uintptr(len(o.Devices)) * unsafe.Sizeof((*C.char)(nil)))
	for _, d := range o.Devices {
		if d == "" {
			d = "cpu"
		}
		size += arenaSize(uintptr(len(d)) + 1)
	}
	a := newArena(size)
	names := unsafe.Slice((**C.char)(a.alloc(uintptr(len(o.Devices))*unsafe.Sizeof((*C.char)(nil)))), len(o.Devices))
	for i, d := range o.Devices {
		if d == "" {
			d = "cpu"
		}
		names[i] = a.str(d)
	}
	copts.devices = &names[0]
	return copts, a.free, nil
}

// towersFieldNames spells the fields of tpt_towers_options that the
// library's messages name as TowersOptions does.
var towersFieldNames = strings.NewReplacer(
	"options->n_towers", "TowersOptions.Towers",
	"options->devices", "TowersOptions.Devices",
	"options->intra_op_threads", "TowersOptions.IntraOpThreads",
	"options->bucket_bytes", "TowersOptions.BucketBytes",
	"intra_op_threads is", "TowersOptions.IntraOpThreads is",
)

// goTowersError rewrites the field names in a library error about the
// towers' options.
func goTowersError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.Message = towersFieldNames.Replace(e.Message)
	}
	return err
}
