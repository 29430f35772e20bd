package tptrain

/*
#include <stdlib.h>
#include <tptrain.h>
*/
import "C"

import (
	"errors"
	"image"
	"math"
	"runtime"
	"strconv"
	"strings"
	"unsafe"
)

// ---- Images: grids of samples and PNG files.

// GridOptions are the options of ImageGrid (tpt_image_grid_options). The
// zero value, like a nil *GridOptions, is the library's defaults: 8 images
// per row, 2 pixels of black padding, and the images' own minimum and
// maximum drawn black and white.
type GridOptions struct {
	// Columns is the number of images per row, >= 1; 0 means 8. A grid
	// has no more columns than images.
	Columns int
	// Padding is the number of pixels between the images and around them,
	// up to 4096; 0 means 2. Set NoPadding for none.
	Padding int
	// NoPadding puts the images edge to edge, without padding; Padding
	// must then be 0.
	NoPadding bool
	// Low and High are the values drawn black and white, linear between
	// and clamped outside (Low: -1, High: 1 for a generator's tanh). Equal
	// values (both 0 by default) mean the images' own minimum and maximum,
	// as torchvision's make_grid with normalize=True. Otherwise Low must be
	// below High, both finite.
	Low, High float64
	// PadValue is the padding's grey level, from 0 (black, the default) to
	// 255 (white).
	PadValue float64
}

// gridFieldNames spells the fields of tpt_image_grid_options that the
// library's messages name as GridOptions does.
var gridFieldNames = strings.NewReplacer(
	"options->columns", "GridOptions.Columns",
	"options->padding", "GridOptions.Padding",
	"options->low and high", "GridOptions.Low and High",
	"options->pad_value", "GridOptions.PadValue",
)

// cGridOptions returns the C options of o (nil: the defaults).
func cGridOptions(o *GridOptions) (C.tpt_image_grid_options, error) {
	const who = "ImageGrid"
	copts := defaultGridOptions()
	if o == nil {
		return copts, nil
	}
	fail := func(msg string) (C.tpt_image_grid_options, error) {
		return C.tpt_image_grid_options{}, &Error{Code: CodeInvalidArgument, Message: who + ": GridOptions." + msg}
	}
	switch {
	case o.Columns < 0:
		return fail("Columns is " + strconv.Itoa(o.Columns) + ": it must be at least 1 (0: 8)")
	case o.Columns > math.MaxInt32: // as many: one row all the same
		copts.columns = math.MaxInt32
	case o.Columns > 0:
		copts.columns = C.int32_t(o.Columns)
	}
	switch {
	case o.NoPadding && o.Padding != 0:
		return fail("NoPadding is set but Padding is " + strconv.Itoa(o.Padding) + ": set one of them")
	case o.NoPadding:
		copts.padding = 0
	case o.Padding < 0 || o.Padding > math.MaxInt32:
		return fail("Padding is " + strconv.Itoa(o.Padding) + ": it must be in [0, 4096] (0: 2; NoPadding for none)")
	case o.Padding > 0:
		copts.padding = C.int32_t(o.Padding)
	}
	copts.low, copts.high, copts.pad_value = C.double(o.Low), C.double(o.High), C.double(o.PadValue)
	return copts, nil
}

// ImageGrid tiles a batch of images into one, as torchvision's make_grid
// (tpt_image_grid), e.g. a generator's samples to look at: images is
// N x C x H x W (LibTorch's layout, as a tower function computes them; C =
// 1 for grey, 3 for RGB or 4 for RGBA) or N x H x W (grey), of any real
// dtype, on any device. The result is a new uint8 CPU tensor of
// rows x cols x C, where with p pixels of padding and k columns (at most N)
// rows is ceil(N/k) x (H + p) + p and cols is k x (W + p) + p: the image
// that Context.PutImage, WritePNG and Tensor.Image take. o nil is the zero
// GridOptions.
//
// A bad option is an *Error of CodeInvalidArgument naming the GridOptions
// field, as are images of another shape, an empty batch and images with a
// value that is not finite (when their own range is used). The caller still
// owns images.
func ImageGrid(images *Tensor, o *GridOptions) (*Tensor, error) {
	if images == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "ImageGrid: images is nil"}
	}
	copts, err := cGridOptions(o)
	if err != nil {
		return nil, err
	}
	images.mu.RLock()
	defer images.mu.RUnlock()
	if images.ptr == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "ImageGrid: images: use of closed Tensor"}
	}
	var out *C.tpt_tensor
	st := C.tpt_image_grid(&out, images.ptr, &copts)
	runtime.KeepAlive(images)
	if err := statusError(st); err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Message = gridFieldNames.Replace(e.Message)
		}
		return nil, err
	}
	return newTensor(out), nil
}

// WritePNG writes image to the PNG file path, replacing it
// (tpt_image_write_png). image is as Context.PutImage takes it, one image:
// H x W or H x W x C with C = 1 (grey), 3 (RGB) or 4 (RGBA), of dtype uint8,
// or floating point in [0, 255] (rounded and clamped); ImageGrid makes one.
// The file is written beside path (as path + ".tmp") and renamed over it, so
// a reader never sees half an image.
//
// A file that cannot be written (a missing directory, no permission) is an
// *Error of CodeIO naming it; an image of another shape or dtype, an empty
// path or one holding a NUL byte, one of CodeInvalidArgument. The caller
// still owns image.
func WritePNG(image *Tensor, path string) error {
	const who = "WritePNG"
	if image == nil {
		return &Error{Code: CodeInvalidArgument, Message: who + ": the image is nil"}
	}
	if err := noNUL(who, "path", path); err != nil {
		return err
	}
	image.mu.RLock()
	defer image.mu.RUnlock()
	if image.ptr == nil {
		return &Error{Code: CodeInvalidArgument, Message: who + ": use of closed Tensor"}
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	st := C.tpt_image_write_png(image.ptr, cpath)
	runtime.KeepAlive(image)
	return statusError(st)
}

// Image returns a copy of t as an image.Image, for the image packages of
// the standard library (png.Encode, draw.Draw): t is a uint8 image of
// H x W or H x W x C, as ImageGrid makes them. C = 1 (or no C) gives an
// *image.Gray, C = 3 an opaque *image.RGBA and C = 4 an *image.NRGBA (the
// alpha not premultiplied, as PNG files store it). Another shape or dtype
// is an *Error of CodeInvalidArgument (WritePNG also takes floating-point
// images).
func (t *Tensor) Image() (image.Image, error) {
	const who = "Tensor.Image"
	ptr, err := t.rlock("Image")
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	d, err := tensorDType(t, ptr)
	if err != nil {
		return nil, err
	}
	shape, err := tensorShape(t, ptr)
	if err != nil {
		return nil, err
	}
	if d != DTypeUint8 {
		return nil, &Error{Code: CodeInvalidArgument, Message: who + ": the tensor's dtype is " + d.String() + ", not uint8"}
	}
	c := int64(1)
	switch {
	case len(shape) == 3 && (shape[2] == 1 || shape[2] == 3 || shape[2] == 4):
		c = shape[2]
	case len(shape) != 2:
		return nil, &Error{Code: CodeInvalidArgument, Message: who + ": the tensor's shape is " + shapeString(shape) +
			": H x W or H x W x C (C = 1, 3 or 4) expected"}
	}
	h, w := shape[0], shape[1]
	if h > math.MaxInt32 || w > math.MaxInt32 {
		return nil, &Error{Code: CodeInvalidArgument, Message: who + ": the tensor's shape is " + shapeString(shape) +
			": too large for an image.Image"}
	}
	px, err := copyOut[byte](t, ptr, 1)
	if err != nil {
		return nil, err
	}
	r := image.Rect(0, 0, int(w), int(h))
	switch c {
	case 1:
		return &image.Gray{Pix: px, Stride: int(w), Rect: r}, nil
	case 4:
		return &image.NRGBA{Pix: px, Stride: 4 * int(w), Rect: r}, nil
	}
	img := image.NewRGBA(r)
	for i, j := 0, 0; i < len(px); i, j = i+3, j+4 {
		img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = px[i], px[i+1], px[i+2], 0xff
	}
	return img, nil
}

// shapeString spells a shape as "2 x 3 x 4"; "scalar" for none.
func shapeString(shape []int64) string {
	if len(shape) == 0 {
		return "scalar"
	}
	s := make([]string, len(shape))
	for i, n := range shape {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, " x ")
}
