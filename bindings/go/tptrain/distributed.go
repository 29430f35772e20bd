package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
*/
import "C"

import (
	"errors"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

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
	// means MASTER_ADDR.
	MasterAddr string
	// MasterPort is its port, 1 to 65535; 0 means MASTER_PORT.
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
