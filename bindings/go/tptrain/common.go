package tptrain

/*
#cgo pkg-config: tptrain
#include <stdlib.h>
#include <tptrain.h>

#if TPT_VERSION_MAJOR != 0
#error "this version of the tptrain Go binding needs tptrain.h 0.x"
#endif
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"unsafe"
)

// Code is the kind of an error reported by the library (tpt_code). The
// values are those of the C enum and never change.
type Code int32

// The codes of tpt_code.
const (
	CodeOK              Code = C.TPT_OK
	CodeInvalidArgument Code = C.TPT_ERR_INVALID_ARGUMENT // the caller passed a bad value; nothing changed
	CodeOutOfMemory     Code = C.TPT_ERR_OUT_OF_MEMORY    // an allocation failed
	CodeBackend         Code = C.TPT_ERR_BACKEND          // LibTorch or the C++ runtime under it raised an error
	CodeInternal        Code = C.TPT_ERR_INTERNAL         // a broken invariant inside tptrain: a bug
	CodeUnknown         Code = C.TPT_ERR_UNKNOWN          // an exception of unknown type was caught
	CodeCallback        Code = C.TPT_ERR_CALLBACK         // a user callback reported an error
	CodeIO              Code = C.TPT_ERR_IO               // a file could not be read or written
	CodeState           Code = C.TPT_ERR_STATE            // the call is not allowed in the object's current state
	CodeUnsupported     Code = C.TPT_ERR_UNSUPPORTED      // not available in this build
	CodeNotFound        Code = C.TPT_ERR_NOT_FOUND        // a name (scalar, output, file) does not exist
	CodeTimeout         Code = C.TPT_ERR_TIMEOUT          // something took longer than its time limit (StepWatchdog)
)

// codeStop is TPT_STOP: not an error but a graceful end of training. In Go
// it is a *StopError (see Stop), never an *Error.
const codeStop Code = C.TPT_STOP

// String returns the C name of the code, e.g. "TPT_ERR_BACKEND", or
// "TPT_UNKNOWN_CODE" for a value outside the enum (tpt_code_name).
func (c Code) String() string {
	return C.GoString(C.tpt_code_name(C.tpt_code(c)))
}

// Error is an error reported by the library: the code and message of a
// tpt_status. The message begins with the function or method of this
// package that was called, and the C function that failed follows in
// parentheses: "DataFlow.Batch: ... (tpt_dataflow_batch)"; for a bad
// argument it names the argument or the options' field.
type Error struct {
	Code    Code
	Message string
}

// Error returns "tptrain: CODE: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return "tptrain: " + e.Code.String()
	}
	return "tptrain: " + e.Code.String() + ": " + e.Message
}

// Is makes errors.Is(err, ErrBackend) and the like true for every *Error of
// that code. A target with a message matches only the same message.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) || t == nil {
		return false
	}
	return e.Code == t.Code && (t.Message == "" || t.Message == e.Message)
}

// Sentinels for errors.Is: each matches every *Error of its code.
var (
	ErrInvalidArgument error = &Error{Code: CodeInvalidArgument}
	ErrOutOfMemory     error = &Error{Code: CodeOutOfMemory}
	ErrBackend         error = &Error{Code: CodeBackend}
	ErrInternal        error = &Error{Code: CodeInternal}
	ErrUnknown         error = &Error{Code: CodeUnknown}
	ErrCallback        error = &Error{Code: CodeCallback}
	ErrIO              error = &Error{Code: CodeIO}
	ErrState           error = &Error{Code: CodeState}
	ErrUnsupported     error = &Error{Code: CodeUnsupported}
	ErrNotFound        error = &Error{Code: CodeNotFound}
	ErrTimeout         error = &Error{Code: CodeTimeout}
)

// StopError ends training gracefully, as tensorpack's StopTraining: return
// one (made by Stop) from a run_step, a hooked step or a callback, and Run
// runs AFTER_TRAIN and returns nil; StopReason then gives Reason.
// Context.HookedStep returns a *StopError when its step or a callback asked
// to stop.
type StopError struct {
	Reason string
}

// Stop returns a *StopError with the given reason: the value a run_step,
// step or callback returns to end training gracefully (TPT_STOP).
func Stop(reason string) error {
	return &StopError{Reason: reason}
}

// Error returns "tptrain: stop: reason".
func (e *StopError) Error() string {
	return "tptrain: stop: " + e.Reason
}

// statusError takes ownership of st: it returns nil for NULL (success), a
// *StopError for TPT_STOP, otherwise an *Error with the status's code and
// message, and frees st.
func statusError(st *C.tpt_status) error {
	if st == nil {
		return nil
	}
	defer C.tpt_status_free(st)
	code, msg := Code(C.tpt_status_code(st)), C.GoString(C.tpt_status_message(st))
	if code == codeStop {
		return &StopError{Reason: msg}
	}
	return &Error{Code: code, Message: apiMessage(msg)}
}

// pkgPath is this package's path as the runtime names its functions.
var pkgPath = reflect.TypeOf(Error{}).PkgPath()

// apiMessage puts the name of the call the program made in front of a
// library message "tpt_fn: text": "Model.Restore: text (tpt_fn)". A
// message of another form, or one with no call of this package's API on the
// stack, stays as it is.
func apiMessage(msg string) string {
	colon := strings.Index(msg, ": ")
	if !strings.HasPrefix(msg, "tpt_") || colon < 0 || strings.Trim(msg[:colon], "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return msg
	}
	name := apiName()
	if name == "" {
		return msg
	}
	return name + ": " + msg[colon+2:] + " (" + msg[:colon] + ")"
}

// apiName returns the exported function or method of this package that the
// program called, as "Model.Restore" or "NewModel": the outermost of this
// package's frames at the top of the stack (those up to the first frame of
// another package: the caller, or the runtime under a callback). "" when
// there is none.
func apiName() string {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	name := ""
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, pkgPath+".") {
			break
		}
		if api := exportedName(f.Function[len(pkgPath)+1:]); api != "" {
			name = api
		}
		if !more {
			break
		}
	}
	return name
}

// exportedName turns the runtime's name of a function of this package into
// its API name: "(*Model).Restore" is "Model.Restore", "Order.String" and
// "NewModel" stay; closures, method values, unexported names and the tests'
// own functions are "".
func exportedName(fn string) string {
	typ := ""
	if strings.HasPrefix(fn, "(") {
		end := strings.Index(fn, ").")
		if end < 0 {
			return ""
		}
		typ, fn = strings.TrimPrefix(fn[1:end], "*"), fn[end+2:]
		if i := strings.IndexByte(typ, '['); i >= 0 {
			typ = typ[:i]
		}
	} else if i := strings.IndexByte(fn, '.'); i >= 0 {
		typ, fn = fn[:i], fn[i+1:]
	}
	exported := func(id string) bool { return id != "" && id[0] >= 'A' && id[0] <= 'Z' }
	if strings.ContainsAny(fn, ".-") || !exported(fn) || (typ != "" && !exported(typ)) {
		return ""
	}
	if typ != "" {
		return typ + "." + fn
	}
	for _, test := range []string{"Test", "Benchmark", "Example", "Fuzz"} {
		if strings.HasPrefix(fn, test) {
			return ""
		}
	}
	return fn
}

// newStatus turns a Go error into a C status for the library to own (a
// callback's result): nil becomes NULL, a *StopError (also wrapped) becomes
// TPT_STOP with its Reason, an *Error keeps its code and message, an error
// wrapping an *Error keeps the code and takes err.Error() as message, and any
// other error becomes TPT_ERR_CALLBACK with err.Error(). A code that would
// mean success or stop (CodeOK, TPT_STOP or a value outside the enum) also
// becomes TPT_ERR_CALLBACK, so an error is never lost.
func newStatus(err error) *C.tpt_status {
	if err == nil {
		return nil
	}
	code, msg := CodeCallback, err.Error()
	var stop *StopError
	if e, ok := err.(*Error); ok && e != nil {
		code, msg = e.Code, e.Message
	} else if errors.As(err, &stop) && stop != nil {
		return newCStatus(codeStop, stop.Reason)
	} else if errors.As(err, &e) && e != nil {
		code = e.Code
	}
	if code <= CodeOK || code > CodeTimeout {
		code = CodeCallback
	}
	return newCStatus(code, msg)
}

func newCStatus(code Code, msg string) *C.tpt_status {
	cmsg := C.CString(msg)
	defer C.free(unsafe.Pointer(cmsg))
	return C.tpt_status_new(C.tpt_code(code), cmsg)
}

// The version of tptrain.h this package was compiled against. Version,
// VersionString and ABIVersion report the library the program runs against.
const (
	VersionMajor  = C.TPT_VERSION_MAJOR
	VersionMinor  = C.TPT_VERSION_MINOR
	VersionPatch  = C.TPT_VERSION_PATCH
	VersionNumber = VersionMajor*10000 + VersionMinor*100 + VersionPatch
	ABI           = C.TPT_ABI_VERSION
)

// Version returns the library's version number, MAJOR*10000 + MINOR*100 +
// PATCH (tpt_version).
func Version() uint32 { return uint32(C.tpt_version()) }

// VersionString returns the library's version as "MAJOR.MINOR.PATCH"
// (tpt_version_string).
func VersionString() string { return C.GoString(C.tpt_version_string()) }

// ABIVersion returns the library's ABI version, the suffix of its SONAME
// (tpt_abi_version).
func ABIVersion() uint32 { return uint32(C.tpt_abi_version()) }

// CheckVersion reports whether the library loaded at run time can serve this
// package: same ABI version, same major version, and a version number at
// least that of the header the package was compiled against. The package
// calls it once at initialisation and panics if it fails.
func CheckVersion() error {
	return checkVersion(Version(), ABIVersion())
}

func checkVersion(version, abi uint32) error {
	switch {
	case abi != ABI:
		return fmt.Errorf("tptrain: libtptrain has ABI version %d, this package was built for ABI %d", abi, ABI)
	case version/10000 != VersionMajor:
		return fmt.Errorf("tptrain: libtptrain %d.%d.%d does not match the header's major version %d",
			version/10000, version/100%100, version%100, VersionMajor)
	case version < VersionNumber:
		return fmt.Errorf("tptrain: libtptrain %d.%d.%d is older than the header %d.%d.%d",
			version/10000, version/100%100, version%100, VersionMajor, VersionMinor, VersionPatch)
	}
	return nil
}

func init() {
	if err := CheckVersion(); err != nil {
		panic(err)
	}
}

// noNUL returns an error naming what when s holds a NUL byte, which would
// end the C string early.
func noNUL(who, what, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return &Error{Code: CodeInvalidArgument, Message: who + ": " + what + " is " + strconv.Quote(s) + ": it holds a NUL byte"}
	}
	return nil
}

// cStrings copies strs into C memory; the caller frees them with the
// function returned. (A Go slice of C pointers may be passed to C.)
func cStrings(strs []string) ([]*C.char, func()) {
	cs := make([]*C.char, len(strs))
	for i, s := range strs {
		cs[i] = C.CString(s)
	}
	return cs, func() {
		for _, p := range cs {
			C.free(unsafe.Pointer(p))
		}
	}
}
