// docs/dataflow.md, "Efficient dataflows": a cheap source, the expensive
// work in a parallel map on worker threads, batches, a prefetch thread, and
// the speed of one pass measured (tensorpack's "Efficient DataFlow"). The
// part between the [doc] markers is shown in the page (checked by the
// doc-snippets test); the whole program is built and run by the examples
// test.
package main

import (
	"fmt"
	"io"
	"log"
	"time"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// [doc]
// decode is the expensive part ("decoding"), on the map's worker threads,
// several at once: it appends x * x to the record x.
func decode(dp *tptrain.Datapoint) error {
	x, err := dp.Get(0)
	if err != nil {
		return err
	}
	defer x.Close()
	xx, err := x.Mul(x)
	if err != nil {
		return err
	}
	defer xx.Close()
	return dp.Set(1, xx)
}

func pipeline(records *tptrain.Tensor) error {
	source, err := tptrain.DataFlowFromTensors([]*tptrain.Tensor{records}, tptrain.Sequential)
	if err != nil {
		return err
	}
	defer source.Close()
	decoded, err := source.ParallelMap(&tptrain.ParallelMapOptions{
		Threads: 2,
		Ordered: true, // in the source's order (else as the threads finish)
		Strict:  true, // each pass maps exactly one pass of the source
	}, decode)
	if err != nil {
		return err
	}
	defer decoded.Close()
	batched, err := decoded.Batch(64, tptrain.DropRemainder)
	if err != nil {
		return err
	}
	defer batched.Close()
	prefetched, err := batched.Prefetch(4) // batches while the model trains
	if err != nil {
		return err
	}
	defer prefetched.Close()

	// tensorpack's TestDataSpeed: one pass, timed.
	if err := prefetched.ResetState(); err != nil { // starts the threads
		return err
	}
	batches, sum, last := 0, 0.0, float32(0)
	start := time.Now()
	for {
		batch, err := prefetched.Next()
		if err == io.EOF { // the end of the pass
			break
		}
		if err != nil {
			return err
		}
		squares, err := batch[1].Float32s()
		for _, t := range batch {
			t.Close()
		}
		if err != nil {
			return err
		}
		for _, v := range squares {
			sum += float64(v)
		}
		last = squares[63]
		batches++
	}
	seconds := time.Since(start).Seconds()
	fmt.Printf("%d batches of 64, sum of squares %.0f, last %.0f\n", batches, sum, last)
	fmt.Printf("%.0f datapoints/s\n", float64(batches*64)/seconds)
	return nil
}

// [/doc]

// main makes the records: the numbers 0 .. 1023, one per datapoint.
func main() {
	v := make([]float32, 1024)
	for i := range v {
		v[i] = float32(i)
	}
	records, err := tptrain.FromFloat32(v, 1024)
	if err != nil {
		log.Fatal(err)
	}
	defer records.Close()
	if err := pipeline(records); err != nil {
		log.Fatal(err)
	}
}
