package tptrain

// Images: ImageGrid's layout, scaling and padding pixel by pixel; WritePNG
// read back with image/png; Tensor.Image; the errors naming the Go fields.

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// gridImages are 3 grey images of 2 x 2 (N x C x H x W); with Low 0 and
// High 25.5 a value v is drawn as 10 v, clamped to [0, 255].
func gridImages(t *testing.T, shape ...int64) *Tensor {
	t.Helper()
	x := must(FromFloat32([]float32{
		0, 1, 2, 3, // image 0: 0, 10, 20, 30
		4, 5, 6, 7, // image 1: 40, 50, 60, 70
		8, -3, 9, 30, // image 2: 80, 0 (clamped), 90, 255 (clamped)
	}, shape...)).of(t)
	t.Cleanup(func() { x.Close() })
	return x
}

// gridWant is the grid of gridImages with 2 columns, a padding of 1 and a
// pad value of 100: 7 x 7 pixels, the fourth place empty (padding).
var gridWant = []uint8{
	100, 100, 100, 100, 100, 100, 100,
	100, 0, 10, 100, 40, 50, 100,
	100, 20, 30, 100, 60, 70, 100,
	100, 100, 100, 100, 100, 100, 100,
	100, 80, 0, 100, 100, 100, 100,
	100, 90, 255, 100, 100, 100, 100,
	100, 100, 100, 100, 100, 100, 100,
}

func checkImage(t *testing.T, x *Tensor, shape []int64, pixels []uint8) {
	t.Helper()
	if got := must(x.Shape()).of(t); !reflect.DeepEqual(got, shape) {
		t.Fatalf("shape %v, want %v", got, shape)
	}
	if d := must(x.DType()).of(t); d != DTypeUint8 {
		t.Fatalf("dtype %v, want uint8", d)
	}
	if got := must(x.Uint8s()).of(t); pixels != nil && !reflect.DeepEqual(got, pixels) {
		t.Errorf("pixels\n%v\nwant\n%v", got, pixels)
	}
}

func TestImageGrid(t *testing.T) {
	o := &GridOptions{Columns: 2, Padding: 1, Low: 0, High: 25.5, PadValue: 100}
	for _, shape := range [][]int64{{3, 1, 2, 2}, {3, 2, 2}} { // N x C x H x W, N x H x W
		grid := must(ImageGrid(gridImages(t, shape...), o)).of(t)
		checkImage(t, grid, []int64{7, 7, 1}, gridWant)
		grid.Close()
	}

	// the defaults: 8 columns (here 3: no more than images), a padding of 2
	// in black, the images' own range (-3 black, 30 white)
	images := gridImages(t, 3, 1, 2, 2)
	grid := must(ImageGrid(images, nil)).of(t)
	checkImage(t, grid, []int64{6, 14, 1}, nil)
	px := must(grid.Uint8s()).of(t)
	if px[0] != 0 || px[2*14+2] != uint8(math.Round(3.0/33*255)) || px[3*14+11] != 255 || px[2*14+11] != 0 {
		t.Errorf("pixels %v: want black padding, 0 at %d, -3 black and 30 white", px, uint8(math.Round(3.0/33*255)))
	}
	grid.Close()
	zero := must(ImageGrid(images, &GridOptions{})).of(t)
	if got := must(zero.Uint8s()).of(t); !reflect.DeepEqual(got, px) {
		t.Errorf("GridOptions{} gives %v, nil %v", got, px)
	}
	zero.Close()

	// no padding: the images edge to edge, one column
	grid = must(ImageGrid(images, &GridOptions{Columns: 1, NoPadding: true, High: 25.5})).of(t)
	checkImage(t, grid, []int64{6, 2, 1}, []uint8{0, 10, 20, 30, 40, 50, 60, 70, 80, 0, 90, 255})
	grid.Close()

	// RGB: the channels go last; any real dtype
	rgb := must(FromInt64([]int64{1, 2, 3, 4, 5, 6}, 1, 3, 1, 2)).of(t) // R 1 2, G 3 4, B 5 6
	defer rgb.Close()
	grid = must(ImageGrid(rgb, &GridOptions{NoPadding: true, High: 25.5})).of(t)
	checkImage(t, grid, []int64{1, 2, 3}, []uint8{10, 30, 50, 20, 40, 60})
	grid.Close()
}

func TestImageGridErrors(t *testing.T) {
	images := gridImages(t, 3, 1, 2, 2)
	for _, c := range []struct {
		o      GridOptions
		substr string
	}{
		{GridOptions{Columns: -1}, "ImageGrid: GridOptions.Columns is -1: it must be at least 1 (0: 8)"},
		{GridOptions{Padding: -1}, "ImageGrid: GridOptions.Padding is -1: it must be in [0, 4096]"},
		{GridOptions{Padding: 5000}, "GridOptions.Padding is 5000: it must be in [0, 4096]"},
		{GridOptions{Padding: 3, NoPadding: true}, "ImageGrid: GridOptions.NoPadding is set but Padding is 3"},
		{GridOptions{PadValue: 256}, "GridOptions.PadValue is 256"},
		{GridOptions{PadValue: math.NaN()}, "GridOptions.PadValue is"},
		{GridOptions{Low: 2, High: 1}, "GridOptions.Low and High are 2"},
		{GridOptions{Low: math.Inf(-1)}, "GridOptions.Low and High are"},
	} {
		_, err := ImageGrid(images, &c.o)
		e := wantError(t, err, CodeInvalidArgument, c.substr)
		if e != nil && strings.Contains(e.Message, "options->") {
			t.Errorf("message %q names a C field", e.Message)
		}
	}
	for _, c := range []struct {
		shape  []int64
		substr string
	}{
		{[]int64{12}, "images has 1 dimensions"},
		{[]int64{1, 2, 3, 2}, "images has 2 channels in dimension 1"},
		{[]int64{1, 1, 1, 3, 4}, "images has 5 dimensions"},
	} {
		_, err := ImageGrid(gridImages(t, c.shape...), nil)
		wantError(t, err, CodeInvalidArgument, c.substr)
	}
	inf := must(FromFloat32([]float32{0, float32(math.Inf(1))}, 1, 1, 2)).of(t)
	defer inf.Close()
	_, err := ImageGrid(inf, nil)
	wantError(t, err, CodeInvalidArgument, "images has values that are NaN or infinite")
	_, err = ImageGrid(nil, nil)
	wantError(t, err, CodeInvalidArgument, "ImageGrid: images is nil")
	closed := gridImages(t, 3, 2, 2)
	closed.Close()
	_, err = ImageGrid(closed, nil)
	wantError(t, err, CodeInvalidArgument, "ImageGrid: images: use of closed Tensor")
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

func TestWritePNG(t *testing.T) {
	dir := t.TempDir()

	// the grid, grey
	grid := must(ImageGrid(gridImages(t, 3, 1, 2, 2), &GridOptions{Columns: 2, Padding: 1, High: 25.5, PadValue: 100})).of(t)
	defer grid.Close()
	path := filepath.Join(dir, "grid.png")
	ok(t, WritePNG(grid, path))
	img := readPNG(t, path)
	if b := img.Bounds(); b != image.Rect(0, 0, 7, 7) {
		t.Fatalf("bounds %v, want 7 x 7", b)
	}
	for y := 0; y < 7; y++ {
		for x := 0; x < 7; x++ {
			if g := color.GrayModel.Convert(img.At(x, y)).(color.Gray).Y; g != gridWant[7*y+x] {
				t.Errorf("pixel (%d, %d) = %d, want %d", x, y, g, gridWant[7*y+x])
			}
		}
	}

	// RGBA from floating point in [0, 255]: rounded and clamped; the file is
	// replaced
	rgba := must(FromFloat32([]float32{
		0, 10.4, 254.6, 255, 300, -5, 128, 64, // row 0: 2 pixels
		1, 2, 3, 4, 5, 6, 7, 8, // row 1
	}, 2, 2, 4)).of(t)
	defer rgba.Close()
	ok(t, WritePNG(rgba, path))
	img = readPNG(t, path)
	if b := img.Bounds(); b != image.Rect(0, 0, 2, 2) {
		t.Fatalf("bounds %v, want 2 x 2", b)
	}
	want := []color.NRGBA{{0, 10, 255, 255}, {255, 0, 128, 64}, {1, 2, 3, 4}, {5, 6, 7, 8}}
	for i, w := range want {
		if got := color.NRGBAModel.Convert(img.At(i%2, i/2)).(color.NRGBA); got != w {
			t.Errorf("pixel (%d, %d) = %v, want %v", i%2, i/2, got, w)
		}
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp is left: %v", path, err)
	}

	// errors
	missing := filepath.Join(dir, "no such dir", "x.png")
	e := wantError(t, WritePNG(grid, missing), CodeIO, "cannot write "+missing)
	if e != nil && !errors.Is(e, ErrIO) {
		t.Errorf("errors.Is(%v, ErrIO) is false", e)
	}
	four := gridImages(t, 3, 1, 2, 2)
	wantError(t, WritePNG(four, path), CodeInvalidArgument, "image has 4 dimensions: H x W, H x W x C expected")
	wantError(t, WritePNG(grid, ""), CodeInvalidArgument, "argument 'path' is empty")
	wantError(t, WritePNG(grid, "a\x00b.png"), CodeInvalidArgument, `WritePNG: path is "a\x00b.png": it holds a NUL byte`)
	wantError(t, WritePNG(nil, path), CodeInvalidArgument, "WritePNG: the image is nil")
	ints := must(FromInt64([]int64{1, 2}, 1, 2)).of(t)
	defer ints.Close()
	wantError(t, WritePNG(ints, path), CodeInvalidArgument, "image has dtype Long")
}

func TestTensorImage(t *testing.T) {
	grid := must(ImageGrid(gridImages(t, 3, 1, 2, 2), &GridOptions{Columns: 2, Padding: 1, High: 25.5, PadValue: 100})).of(t)
	defer grid.Close()
	img := must(grid.Image()).of(t)
	gray, isGray := img.(*image.Gray)
	if !isGray || gray.Bounds() != image.Rect(0, 0, 7, 7) || !bytes.Equal(gray.Pix, gridWant) {
		t.Errorf("Image() = %#v, want a 7 x 7 *image.Gray of the grid", img)
	}
	// png.Encode of it reads back the same as WritePNG's file
	var buf bytes.Buffer
	ok(t, png.Encode(&buf, img))
	path := filepath.Join(t.TempDir(), "grid.png")
	ok(t, WritePNG(grid, path))
	fromFile, fromGo := readPNG(t, path), must(png.Decode(&buf)).of(t)
	for y := 0; y < 7; y++ {
		for x := 0; x < 7; x++ {
			if a, b := fromFile.At(x, y), fromGo.At(x, y); color.GrayModel.Convert(a) != color.GrayModel.Convert(b) {
				t.Errorf("pixel (%d, %d): %v from WritePNG, %v from png.Encode", x, y, a, b)
			}
		}
	}

	rgb := must(FromUint8([]uint8{1, 2, 3, 4, 5, 6}, 1, 2, 3)).of(t)
	defer rgb.Close()
	img = must(rgb.Image()).of(t)
	if c := img.At(1, 0); !isRGBA(img) || c != (color.RGBA{4, 5, 6, 255}) {
		t.Errorf("Image() of RGB is %T with (1, 0) = %v, want *image.RGBA with {4 5 6 255}", img, c)
	}
	rgba := must(FromUint8([]uint8{1, 2, 3, 4}, 1, 1, 4)).of(t)
	defer rgba.Close()
	img = must(rgba.Image()).of(t)
	if c := img.At(0, 0); c != (color.NRGBA{1, 2, 3, 4}) {
		t.Errorf("Image() of RGBA (0, 0) = %#v, want NRGBA{1 2 3 4}", c)
	}
	grey3 := must(FromUint8([]uint8{7, 8}, 2, 1, 1)).of(t)
	defer grey3.Close()
	if g, isGray := must(grey3.Image()).of(t).(*image.Gray); !isGray || g.Bounds() != image.Rect(0, 0, 1, 2) || g.GrayAt(0, 1).Y != 8 {
		t.Errorf("Image() of 2 x 1 x 1 = %#v", g)
	}

	f := must(FromFloat32([]float32{1, 2}, 1, 2)).of(t)
	defer f.Close()
	_, err := f.Image()
	wantError(t, err, CodeInvalidArgument, "Tensor.Image: the tensor's dtype is float32, not uint8")
	bad := must(FromUint8([]uint8{1, 2}, 1, 1, 2)).of(t)
	defer bad.Close()
	_, err = bad.Image()
	wantError(t, err, CodeInvalidArgument, "Tensor.Image: the tensor's shape is 1 x 1 x 2: H x W or H x W x C (C = 1, 3 or 4) expected")
	var none *Tensor
	_, err = none.Image()
	wantError(t, err, CodeInvalidArgument, "Tensor.Image: use of closed Tensor")
}

func isRGBA(img image.Image) bool {
	_, is := img.(*image.RGBA)
	return is
}
