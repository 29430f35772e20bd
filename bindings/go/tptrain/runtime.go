package tptrain

// #include <tptrain.h>
import "C"

import "strconv"

// Feature is an optional part of the build (tpt_feature).
type Feature int32

// The features of tpt_feature.
const (
	FeatureGloo Feature = C.TPT_FEATURE_GLOO // c10d's Gloo process group was compiled in
	FeatureCUDA Feature = C.TPT_FEATURE_CUDA // LibTorch has CUDA and sees at least one device
	FeatureNCCL Feature = C.TPT_FEATURE_NCCL // NCCL support was compiled in
)

// String returns the feature's name, e.g. "CUDA".
func (f Feature) String() string {
	switch f {
	case FeatureGloo:
		return "Gloo"
	case FeatureCUDA:
		return "CUDA"
	case FeatureNCCL:
		return "NCCL"
	}
	return "Feature(" + strconv.Itoa(int(f)) + ")"
}

// HasFeature reports whether the feature is available; false for an unknown
// feature (tpt_has_feature).
func HasFeature(f Feature) bool {
	return C.tpt_has_feature(C.tpt_feature(f)) != 0
}

// BuildInfo returns a human-readable, multi-line description of the build:
// tptrain and LibTorch versions, features, BLAS and parallel backend
// (tpt_build_info).
func BuildInfo() string {
	return C.GoString(C.tpt_build_info())
}

// SetNumThreads sets the number of threads LibTorch uses inside one operator
// (an OpenMP BLAS runs its products on them) (tpt_set_num_threads). Without a
// call: one thread per core the process may run on, unless OMP_NUM_THREADS
// says otherwise (docs/threading.md). n must be >= 1. The setting is
// process-wide: call it before training starts, from one goroutine.
func SetNumThreads(n int) error {
	if int(C.int(n)) != n {
		return &Error{Code: CodeInvalidArgument, Message: "SetNumThreads: num_threads " + strconv.Itoa(n) + " does not fit a C int"}
	}
	return statusError(C.tpt_set_num_threads(C.int(n)))
}

// NumThreads returns the number of intra-op threads LibTorch uses
// (tpt_get_num_threads).
func NumThreads() (int, error) {
	var n C.int
	if err := statusError(C.tpt_get_num_threads(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// SetCheckpointReadLimit sets the most a checkpoint, torch.save file or
// TorchScript module may make the reader allocate beyond its own size
// (tpt_set_checkpoint_read_limit): entries inflated past their compressed
// size, tensors wider than their records, the reader's tables. More is
// refused with an error naming the file. Default 256 MiB, at most 2^62;
// process-wide. Reading never trusts the file: see docs/checkpoints.md,
// "Checkpoints from others".
func SetCheckpointReadLimit(bytes uint64) error {
	return statusError(C.tpt_set_checkpoint_read_limit(C.uint64_t(bytes)))
}

// ManualSeed seeds LibTorch's default random generator: variable
// initializers, dropout, shuffling (tpt_manual_seed).
func ManualSeed(seed uint64) error {
	return statusError(C.tpt_manual_seed(C.uint64_t(seed)))
}

// Float32Precision is how float32 matrix products and convolutions compute on
// CUDA devices (tpt_float32_precision); it has no effect on the CPU. The zero
// value is LibTorch's default.
type Float32Precision int32

// The precisions of tpt_float32_precision.
const (
	// Float32Default: matrix products in full float32, cuDNN's float32
	// convolutions in TF32 on GPUs that have it.
	Float32Default Float32Precision = C.TPT_FLOAT32_DEFAULT
	// Float32IEEE: full float32 everywhere, TF32 off (what a comparison with
	// a CPU run wants).
	Float32IEEE Float32Precision = C.TPT_FLOAT32_IEEE
	// Float32TF32: TF32 for both, about 3 decimal digits, several times
	// faster on the GPU's matrix units.
	Float32TF32 Float32Precision = C.TPT_FLOAT32_TF32
)

// String returns the precision's name, e.g. "IEEE".
func (p Float32Precision) String() string {
	switch p {
	case Float32Default:
		return "Default"
	case Float32IEEE:
		return "IEEE"
	case Float32TF32:
		return "TF32"
	}
	return "Float32Precision(" + strconv.Itoa(int(p)) + ")"
}

// SetFloat32Precision sets the float32 precision of CUDA's matrix products
// and convolutions (tpt_set_float32_precision). Process-wide: call it before
// training starts, from one goroutine.
func SetFloat32Precision(p Float32Precision) error {
	return statusError(C.tpt_set_float32_precision(C.tpt_float32_precision(p)))
}

// Determinism says whether LibTorch picks deterministic kernels
// (tpt_determinism, PyTorch's torch.use_deterministic_algorithms). The zero
// value is LibTorch's default: the fastest kernels, which on CUDA may make two
// runs differ in the last bits.
type Determinism int32

// The modes of tpt_determinism.
const (
	DeterminismDefault Determinism = C.TPT_DETERMINISM_DEFAULT
	// DeterminismWarn: deterministic kernels where LibTorch has them; an
	// operator without one runs anyway and LibTorch warns.
	DeterminismWarn Determinism = C.TPT_DETERMINISM_WARN
	// DeterminismOn: deterministic kernels; an operator without one fails
	// the step.
	DeterminismOn Determinism = C.TPT_DETERMINISM_ON
)

// String returns the mode's name, e.g. "On".
func (d Determinism) String() string {
	switch d {
	case DeterminismDefault:
		return "Default"
	case DeterminismWarn:
		return "Warn"
	case DeterminismOn:
		return "On"
	}
	return "Determinism(" + strconv.Itoa(int(d)) + ")"
}

// SetDeterminism sets the determinism (tpt_set_determinism): DeterminismWarn
// and DeterminismOn also make cuDNN deterministic and set
// CUBLAS_WORKSPACE_CONFIG=:4096:8 in the environment when it is not set (call
// it before the first CUDA work). Process-wide: call it before training
// starts, from one goroutine (it may change the environment).
func SetDeterminism(mode Determinism) error {
	return statusError(C.tpt_set_determinism(C.tpt_determinism(mode)))
}
