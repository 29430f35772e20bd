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
	"time"
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
	// on "cpu", and "" is "cpu". A tower on another device computes on a
	// copy of the variables, which stay on the CPU (docs/towers.md; not run
	// on a GPU yet, docs/gpu.md); a device this LibTorch lacks is an *Error
	// of CodeUnsupported.
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

// ---- Distributed training: several processes.

// Limits of DistributedOptions, the library's.
const (
	maxWorldSize   = 1 << 20
	maxDistTimeout = 24 * time.Hour
)

// DistributedOptions make a trainer one rank of a distributed job, for
// Trainer.SetDistributed and TrainConfig.Distributed
// (tpt_distributed_options). The zero value takes everything from torchrun's
// environment variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK,
// LOCAL_RANK), as tools/tptrain-run or torchrun set them, with the
// library's timeout of 60 s, each rank taking its share of the input and
// the monitors getting rank 0's cost and scalars.
type DistributedOptions struct {
	// MasterAddr is rank 0's host, the address of the job's rendezvous; ""
	// means MASTER_ADDR, else this machine in a one-process job.
	MasterAddr string
	// MasterPort is its port, 1 to 65535; 0 means MASTER_PORT, else (or
	// with MASTER_PORT=0) any free port in a one-process job.
	MasterPort int
	// WorldSize is the number of processes of the job, 1 to 2^20. 0 means
	// WORLD_SIZE, and then Rank and LocalRank come from RANK and LOCAL_RANK
	// (they must be 0 here). Non-zero, it makes Rank and LocalRank explicit:
	// the environment's are not read.
	WorldSize int
	// Rank is this process's rank, 0 to WorldSize-1, with WorldSize. Rank 0
	// is the chief: it alone keeps the log directory and runs the chief-only
	// callbacks, and its variables reach every rank before the first step.
	Rank int
	// LocalRank is this process's index among the processes of its
	// machine, 0 to Rank, with WorldSize. The library bounds it by
	// LOCAL_WORLD_SIZE too (1 when unset).
	LocalRank int
	// Timeout bounds the rendezvous and every collective: a rank that died
	// or hangs makes the others fail after at most this, with an error
	// naming it. It is a whole number of milliseconds from 1 ms to 24 h; 0
	// means the library's 60 s. It must exceed the longest chief-only work
	// between two steps (an inference pass on rank 0).
	Timeout time.Duration
	// NoShard says the input is already this rank's share. By default each
	// rank takes every WorldSize-th batch of the input (rank r the r-th of
	// every WorldSize), so the job's towers take the batches one process's
	// towers would.
	NoShard bool
	// AverageScalars makes the cost and the scalar outputs the monitors get
	// the average over the ranks (one more all-reduce per step) instead of
	// rank 0's.
	AverageScalars bool
}

// cDistributedOptions returns the C options of o, whose master address
// lives in C memory until the returned function frees it. who prefixes the
// errors found here.
func cDistributedOptions(o *DistributedOptions, who string) (C.tpt_distributed_options, func(), error) {
	fail := func(msg string) (C.tpt_distributed_options, func(), error) {
		return C.tpt_distributed_options{}, nil, &Error{Code: CodeInvalidArgument, Message: who + ": DistributedOptions." + msg}
	}
	itoa := strconv.Itoa
	if strings.IndexByte(o.MasterAddr, 0) >= 0 {
		return fail("MasterAddr is " + strconv.Quote(o.MasterAddr) + ": it holds a NUL byte")
	}
	if o.MasterPort < 0 || o.MasterPort > 65535 {
		return fail("MasterPort is " + itoa(o.MasterPort) + ": it must be in [1, 65535] (0: MASTER_PORT)")
	}
	switch {
	case o.WorldSize < 0 || o.WorldSize > maxWorldSize:
		return fail("WorldSize is " + itoa(o.WorldSize) + ": it must be in [1, 2^20] (0: WORLD_SIZE)")
	case o.WorldSize == 0 && o.Rank != 0:
		return fail("Rank is " + itoa(o.Rank) + " but WorldSize is 0: set WorldSize with Rank (WorldSize 0: all from WORLD_SIZE, RANK and LOCAL_RANK)")
	case o.WorldSize == 0 && o.LocalRank != 0:
		return fail("LocalRank is " + itoa(o.LocalRank) + " but WorldSize is 0: set WorldSize with LocalRank (WorldSize 0: all from WORLD_SIZE, RANK and LOCAL_RANK)")
	case o.Rank < 0 || (o.WorldSize > 0 && o.Rank >= o.WorldSize):
		return fail("Rank is " + itoa(o.Rank) + ": it must be in [0, " + itoa(o.WorldSize-1) + "] (WorldSize is " + itoa(o.WorldSize) + ")")
	case o.LocalRank < 0 || o.LocalRank > o.Rank:
		return fail("LocalRank is " + itoa(o.LocalRank) + ": it must be in [0, Rank] (Rank is " + itoa(o.Rank) + ")")
	}
	if o.Timeout < 0 || o.Timeout > maxDistTimeout || o.Timeout%time.Millisecond != 0 {
		return fail("Timeout is " + o.Timeout.String() + ": it must be a whole number of milliseconds in [1ms, 24h] (0: 60s)")
	}
	copts := defaultDistributedOptions()
	copts.master_port = C.int32_t(o.MasterPort)
	copts.world_size = C.int32_t(o.WorldSize)
	copts.rank = C.int32_t(o.Rank)
	copts.local_rank = C.int32_t(o.LocalRank)
	copts.timeout_ms = C.int64_t(o.Timeout / time.Millisecond)
	copts.shard = cBool(!o.NoShard)
	copts.average_scalars = cBool(o.AverageScalars)
	if o.MasterAddr == "" {
		return copts, func() {}, nil
	}
	addr := C.CString(o.MasterAddr)
	copts.master_addr = addr
	return copts, func() { C.free(unsafe.Pointer(addr)) }, nil
}

// distributedFieldNames spells the fields of tpt_distributed_options that
// the library's messages name as DistributedOptions does: the options'
// ("options->rank is 5"), and the rendezvous's, which names the option next
// to its environment variable ("set MASTER_PORT ... or the option
// master_port").
var distributedFieldNames = strings.NewReplacer(
	"options->master_addr", "DistributedOptions.MasterAddr",
	"options->master_port", "DistributedOptions.MasterPort",
	"options->world_size", "DistributedOptions.WorldSize",
	"options->rank", "DistributedOptions.Rank",
	"options->local_rank", "DistributedOptions.LocalRank",
	"options->timeout_ms", "DistributedOptions.Timeout (in ms)",
	"the option master_addr", "DistributedOptions.MasterAddr",
	"the option master_port", "DistributedOptions.MasterPort",
	"the option world_size", "DistributedOptions.WorldSize",
	"the option rank", "DistributedOptions.WorldSize and Rank",
	"the option local_rank", "DistributedOptions.WorldSize and LocalRank",
	"the master_port is not known", "the master port is not known",
	"the world_size is not known", "the world size is not known",
	"(world_size is", "(DistributedOptions.WorldSize is",
	"local_rank is", "DistributedOptions.LocalRank is",
	"tpt_trainer_set_distributed before", "Trainer.SetDistributed (or TrainConfig.Distributed) before",
	"tpt_trainer_set_model or tpt_trainer_set_towers", "Trainer.SetModel or Trainer.SetTowers",
)

// goDistributedError rewrites the field names in a library error about the
// distributed options (only in errors of bad arguments and states: the
// rendezvous's others quote c10d).
func goDistributedError(err error) error {
	var e *Error
	if errors.As(err, &e) && (e.Code == CodeInvalidArgument || e.Code == CodeState) {
		e.Message = distributedFieldNames.Replace(e.Message)
	}
	return err
}

// ---- The GAN trainers.

// GANOptions choose between tensorpack's GAN trainers, for Trainer.SetGAN
// (tpt_gan_options). The zero value (or nil) is GANTrainer with the train
// ops "g_op" and "d_op".
type GANOptions struct {
	// Separate makes SeparateGANTrainer: each run_step is a hooked run of
	// the discriminator's op when the global step is a multiple of DPeriod,
	// then one of the generator's when the global step (as it is by then)
	// is a multiple of GPeriod; a run_step may thus make two hooked runs,
	// each with a batch of its own. Without it, GANTrainer: every run_step
	// is one hooked run of the generator's op then the discriminator's,
	// from one forward pass.
	Separate bool
	// DPeriod and GPeriod are SeparateGANTrainer's periods, >= 1; 0 means 1.
	// One of them must be 1. Without Separate they must be 0 or 1.
	DPeriod, GPeriod int64
	// GOp and DOp are the names of the generator's and the discriminator's
	// train ops; "" means "g_op" and "d_op". They must differ.
	GOp, DOp string
	// Towers, if not nil, makes tensorpack's MultiGPUGANTrainer: SetGAN is
	// then SetTowers with these options, every tower takes its own batch,
	// and each op minimises its cost averaged over the towers. The
	// strategy must be StrategyReplicated or StrategyParameterServer
	// (StrategyAsync is an *Error of CodeUnsupported). nil means one tower,
	// the simple trainer.
	Towers *TowersOptions
}

// cGANOptions returns the C options of o, whose op names and towers options
// live in C memory until the returned function frees them.
func cGANOptions(o *GANOptions, who string) (C.tpt_gan_options, func(), error) {
	fail := func(msg string) (C.tpt_gan_options, func(), error) {
		return C.tpt_gan_options{}, nil, &Error{Code: CodeInvalidArgument, Message: who + ": GANOptions." + msg}
	}
	dp, gp := o.DPeriod, o.GPeriod
	for _, p := range []struct {
		name string
		v    *int64
	}{{"DPeriod", &dp}, {"GPeriod", &gp}} {
		switch v := *p.v; {
		case v < 0:
			return fail(p.name + " is " + strconv.FormatInt(v, 10) + ": it must be >= 1 (0: 1)")
		case v > 1 && !o.Separate:
			return fail(p.name + " is " + strconv.FormatInt(v, 10) +
				" but Separate is false: the periods are SeparateGANTrainer's (set Separate)")
		case v == 0:
			*p.v = 1
		}
	}
	for _, f := range []struct{ what, s string }{{"GOp", o.GOp}, {"DOp", o.DOp}} {
		if err := noNUL(who, "GANOptions."+f.what, f.s); err != nil {
			return C.tpt_gan_options{}, nil, err
		}
	}
	copts := defaultGANOptions()
	copts.separate = cBool(o.Separate)
	copts.d_period = C.int64_t(dp)
	copts.g_period = C.int64_t(gp)
	towersFree := func() {}
	if o.Towers != nil {
		tw, twFree, err := cTowersOptions(o.Towers, who)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Message = strings.Replace(e.Message, who+": TowersOptions.", who+": GANOptions.Towers.", 1)
			}
			return C.tpt_gan_options{}, nil, err
		}
		// C memory (cgo's C.malloc does not return nil): copts, Go memory
		// passed to C, may hold C pointers only.
		p := (*C.tpt_towers_options)(C.malloc(C.size_t(unsafe.Sizeof(tw))))
		*p = tw
		copts.towers = p
		towersFree = func() {
			C.free(unsafe.Pointer(p))
			twFree()
		}
	}
	var frees []unsafe.Pointer
	if o.GOp != "" {
		copts.g_op = C.CString(o.GOp)
		frees = append(frees, unsafe.Pointer(copts.g_op))
	}
	if o.DOp != "" {
		copts.d_op = C.CString(o.DOp)
		frees = append(frees, unsafe.Pointer(copts.d_op))
	}
	return copts, func() {
		for _, p := range frees {
			C.free(p)
		}
		towersFree()
	}, nil
}

// ganFieldNames spells the fields of tpt_gan_options that the library's
// messages name as GANOptions does.
var ganFieldNames = strings.NewReplacer(
	"options->g_op", "GANOptions.GOp",
	"options->d_op", "GANOptions.DOp",
	"(g_op '", "(GANOptions.GOp '",
	", d_op '", ", GANOptions.DOp '",
	"d_period and g_period", "GANOptions.DPeriod and GPeriod",
	"options->towers->n_towers", "GANOptions.Towers.Towers",
	"options->towers->devices", "GANOptions.Towers.Devices",
	"options->towers->intra_op_threads", "GANOptions.Towers.IntraOpThreads",
	"options->towers->bucket_bytes", "GANOptions.Towers.BucketBytes",
	"intra_op_threads is", "GANOptions.Towers.IntraOpThreads is",
	"options->towers", "GANOptions.Towers",
)
