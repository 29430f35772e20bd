// docs/dataflow.md, "Dataflows": a source from a function, a map, a batch, a
// prefetch thread, one pass iterated by hand. The part between the [doc]
// markers is shown in the page (checked by the doc-snippets test); the whole
// program is built and run by the examples test.
package main

import (
	"fmt"
	"io"
	"log"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

// [doc]
func pipeline() error {
	// A source: the numbers 0..9, one per datapoint; io.EOF ends a pass. Its
	// size is a trainer's default StepsPerEpoch.
	i := 0
	raw, err := tptrain.DataFlowFromFuncSized(10, func() ([]*tptrain.Tensor, error) {
		if i == 10 {
			i = 0 // the next call starts the next pass
			return nil, io.EOF
		}
		i++
		x, err := tptrain.FromFloat32([]float32{float32(i - 1)}) // a scalar
		return []*tptrain.Tensor{x}, err                         // the dataflow takes x over
	})
	if err != nil {
		return err
	}
	defer raw.Close()
	// A map: appends x * x as a second component.
	mapped, err := raw.Map(func(dp *tptrain.Datapoint) error {
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
	})
	if err != nil {
		return err
	}
	defer mapped.Close()
	batched, err := mapped.Batch(4, tptrain.KeepRemainder) // 4, 4, 2
	if err != nil {
		return err
	}
	defer batched.Close()
	prefetched, err := batched.Prefetch(3) // a thread reads ahead
	if err != nil {
		return err
	}
	defer prefetched.Close()
	for {
		batch, err := prefetched.Next()
		if err == io.EOF { // the end of the pass
			return nil
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
		fmt.Printf("a batch of %d, last square %.0f\n", len(squares), squares[len(squares)-1])
	}
}

// [/doc]

func main() {
	if err := pipeline(); err != nil {
		log.Fatal(err)
	}
}
