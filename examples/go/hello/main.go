// Command hello is the smallest real tptrain program in Go: check the
// library, then fit a line by least squares with tensors that live in
// LibTorch. It mirrors examples/c/hello.c.
//
// The normal equations for y = a*x + b are solved through the matrix
// product: X^T X and X^T y are computed by LibTorch, the 2x2 solve is done
// here.
//
//	cd examples/go && PKG_CONFIG_PATH=$BUILD/meson-uninstalled LD_LIBRARY_PATH=$BUILD go run ./hello
package main

import (
	"fmt"
	"log"
	"os"

	"github.com/tptrain/tptrain/bindings/go/tptrain"
)

func main() {
	log.SetFlags(0)
	fmt.Println(tptrain.BuildInfo())
	// The package already refuses to start against an incompatible library;
	// this is the same check hello.c makes.
	if err := tptrain.CheckVersion(); err != nil {
		log.Fatal(err)
	}

	const n = 8
	xDesign := make([]float32, 0, 2*n) // rows (x, 1)
	xt := make([]float32, 2*n)         // X transposed
	y := make([]float32, n)
	for i := 0; i < n; i++ {
		x := float32(i)
		xDesign = append(xDesign, x, 1)
		xt[i], xt[n+i] = x, 1
		noise := float32(-0.25) // a line with alternating noise
		if i%2 == 1 {
			noise = 0.25
		}
		y[i] = 3*x - 2 + noise
	}

	X := check(tptrain.FromFloat32(xDesign, n, 2))
	defer X.Close()
	Xt := check(tptrain.FromFloat32(xt, 2, n))
	defer Xt.Close()
	Y := check(tptrain.FromFloat32(y, n, 1))
	defer Y.Close()
	XtX := check(Xt.Matmul(X))
	defer XtX.Close()
	XtY := check(Xt.Matmul(Y))
	defer XtY.Close()

	m := check(XtX.Float32s())
	v := check(XtY.Float32s())
	fmt.Printf("X^T X = %v\nX^T y = %v\n", m, v)
	det := float64(m[0])*float64(m[3]) - float64(m[1])*float64(m[2])
	a := (float64(m[3])*float64(v[0]) - float64(m[1])*float64(v[1])) / det
	b := (float64(m[0])*float64(v[1]) - float64(m[2])*float64(v[0])) / det
	fmt.Printf("least squares fit: y = %.4f * x + %.4f (data drawn from y = 3 x - 2)\n", a, b)
	if !(a > 2.9 && a < 3.1 && b > -2.3 && b < -1.7) {
		os.Exit(1)
	}
}

// check returns v or exits with err's message.
func check[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
