package tptrain_test

import (
	"errors"
	"fmt"

	tptrain "github.com/tptrain/tptrain/bindings/go"
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
