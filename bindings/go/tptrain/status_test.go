package tptrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestCodeValues(t *testing.T) {
	// The values are part of the ABI and never change.
	codes := []struct {
		code  Code
		value int32
		name  string
	}{
		{CodeOK, 0, "TPT_OK"},
		{CodeInvalidArgument, 1, "TPT_ERR_INVALID_ARGUMENT"},
		{CodeOutOfMemory, 2, "TPT_ERR_OUT_OF_MEMORY"},
		{CodeBackend, 3, "TPT_ERR_BACKEND"},
		{CodeInternal, 4, "TPT_ERR_INTERNAL"},
		{CodeUnknown, 5, "TPT_ERR_UNKNOWN"},
		{CodeCallback, 6, "TPT_ERR_CALLBACK"},
		{CodeIO, 7, "TPT_ERR_IO"},
		{CodeState, 8, "TPT_ERR_STATE"},
		{CodeUnsupported, 9, "TPT_ERR_UNSUPPORTED"},
		{CodeNotFound, 10, "TPT_ERR_NOT_FOUND"},
		{CodeTimeout, 11, "TPT_ERR_TIMEOUT"},
		{codeStop, 100, "TPT_STOP"},
	}
	for _, c := range codes {
		if int32(c.code) != c.value {
			t.Errorf("%s = %d, want %d", c.name, int32(c.code), c.value)
		}
		if got := c.code.String(); got != c.name {
			t.Errorf("Code(%d).String() = %q, want %q", c.value, got, c.name)
		}
	}
	if got := Code(1234).String(); got != "TPT_UNKNOWN_CODE" {
		t.Errorf("Code(1234).String() = %q", got)
	}
}

// What each mode does to LibTorch's flags is checked in gtest-cpp (Runtime.*);
// here the Go surface: zero values, names, and the library's refusal of a
// value outside the enum.
func TestDeterminismAndFloat32Precision(t *testing.T) {
	var d Determinism
	var p Float32Precision
	if d != DeterminismDefault || p != Float32Default || DeterminismOn.String() != "On" || Float32IEEE.String() != "IEEE" {
		t.Errorf("zero values %v %v, names %v %v", d, p, DeterminismOn, Float32IEEE)
	}
	for _, mode := range []Determinism{DeterminismOn, DeterminismWarn, DeterminismDefault} {
		if err := SetDeterminism(mode); err != nil {
			t.Errorf("SetDeterminism(%v): %v", mode, err)
		}
	}
	for _, prec := range []Float32Precision{Float32IEEE, Float32TF32, Float32Default} {
		if err := SetFloat32Precision(prec); err != nil {
			t.Errorf("SetFloat32Precision(%v): %v", prec, err)
		}
	}
	e := wantError(t, SetDeterminism(Determinism(5)), CodeInvalidArgument, "got 5")
	if !strings.HasPrefix(e.Message, "SetDeterminism: ") {
		t.Errorf("message %q does not name SetDeterminism", e.Message)
	}
	wantError(t, SetFloat32Precision(Float32Precision(-2)), CodeInvalidArgument, "got -2")
	if got := Determinism(9).String(); got != "Determinism(9)" {
		t.Errorf("Determinism(9).String() = %q", got)
	}
}

func TestErrorFromLibrary(t *testing.T) {
	err := SetNumThreads(0)
	e := wantError(t, err, CodeInvalidArgument, "num_threads must be >= 1")
	if got, want := e.Error(), "tptrain: TPT_ERR_INVALID_ARGUMENT: "+e.Message; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalidArgument) {
		t.Error("errors.Is(err, ErrInvalidArgument) is false")
	}
	if errors.Is(err, ErrBackend) {
		t.Error("errors.Is(err, ErrBackend) is true")
	}
	wrapped := fmt.Errorf("configuring: %w", err)
	var e2 *Error
	if !errors.As(wrapped, &e2) || e2 != e {
		t.Errorf("errors.As through a wrapper = %v", e2)
	}
	if !errors.Is(wrapped, ErrInvalidArgument) {
		t.Error("errors.Is through a wrapper is false")
	}
	if !errors.Is(err, &Error{Code: CodeInvalidArgument, Message: e.Message}) {
		t.Error("errors.Is with the same code and message is false")
	}
	if errors.Is(err, &Error{Code: CodeInvalidArgument, Message: "another"}) {
		t.Error("errors.Is with another message is true")
	}
}

func TestStatusErrorNil(t *testing.T) {
	if err := statusError(nil); err != nil {
		t.Errorf("statusError(nil) = %v", err)
	}
	if st := newStatus(nil); st != nil {
		t.Error("newStatus(nil) is not NULL")
	}
}

func TestNewStatusRoundTrip(t *testing.T) {
	inner := &Error{Code: CodeState, Message: "not now"}
	cases := []struct {
		name string
		err  error
		code Code
		msg  string
	}{
		{"Error keeps code and message", &Error{Code: CodeIO, Message: "disk on fire"}, CodeIO, "disk on fire"},
		{"every code", &Error{Code: CodeUnsupported, Message: "m"}, CodeUnsupported, "m"},
		{"the last code", &Error{Code: CodeTimeout, Message: "too slow"}, CodeTimeout, "too slow"},
		{"TPT_STOP in an Error is no stop", &Error{Code: codeStop, Message: "halt"}, CodeCallback, "halt"},
		{"plain error", errors.New("boom"), CodeCallback, "boom"},
		{"io.EOF", io.EOF, CodeCallback, "EOF"},
		{"wrapped Error", fmt.Errorf("step 3: %w", inner), CodeState, "step 3: " + inner.Error()},
		{"CodeOK is not success", &Error{Code: CodeOK, Message: "oops"}, CodeCallback, "oops"},
		{"unknown code", &Error{Code: Code(77), Message: "odd"}, CodeCallback, "odd"},
		{"empty message", &Error{Code: CodeBackend}, CodeBackend, ""},
		{"UTF-8", errors.New("zu groß: ∞"), CodeCallback, "zu groß: ∞"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := statusError(newStatus(c.err))
			var e *Error
			if !errors.As(got, &e) {
				t.Fatalf("round trip gave %T %v", got, got)
			}
			if e.Code != c.code || e.Message != c.msg {
				t.Errorf("round trip = {%v %q}, want {%v %q}", e.Code, e.Message, c.code, c.msg)
			}
		})
	}
}

func TestStopRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		reason string
	}{
		{"Stop", Stop("converged"), "converged"},
		{"empty reason", Stop(""), ""},
		{"wrapped", fmt.Errorf("epoch 3: %w", Stop("patience")), "patience"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := statusError(newStatus(c.err)) // a *StopError only for TPT_STOP
			var stop *StopError
			if !errors.As(got, &stop) || stop.Reason != c.reason {
				t.Errorf("round trip gave %T %v, want a *StopError with reason %q", got, got, c.reason)
			}
			var e *Error
			if errors.As(got, &e) {
				t.Errorf("a stop came back as an *Error %v", e)
			}
		})
	}
	if got := Stop("done").Error(); got != "tptrain: stop: done" {
		t.Errorf("Stop(done).Error() = %q", got)
	}
}

// An error from the library names the Go call the program made, with the C
// function in parentheses: the function or method called (also through the
// package's own helpers and closures, or from inside a callback), not the
// package's internals, nor the test that called it.
func TestErrorsNameTheGoCall(t *testing.T) {
	checkHandles(t)
	named := func(err error, call, cfn string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("got %v, want an *Error", err)
		}
		if !strings.HasPrefix(e.Message, call+": ") || !strings.HasSuffix(e.Message, " ("+cfn+")") ||
			strings.Count(e.Message, "tpt_") != 1 {
			t.Errorf("message %q, want %q first and (%s) last", e.Message, call+": ", cfn)
		}
	}
	named(SetNumThreads(0), "SetNumThreads", "tpt_set_num_threads")
	m := newClassifier(t)
	_, err := m.Restore("/nonexistent/model-1", nil)
	named(err, "Model.Restore", "tpt_model_restore")
	x := rowsT(t, 4)
	defer x.Close()
	src := closeDF(t, must(DataFlowFromTensors([]*Tensor{x}, Sequential)).of(t))
	_, err = src.Batch(0, DropRemainder) // through DataFlow.derive and its closure
	named(err, "DataFlow.Batch", "tpt_dataflow_batch")
	// LaunchTrain makes its trainer with NewTrainerFromConfig: the call made
	// is LaunchTrain.
	_, err = LaunchTrain(context.Background(), &TrainConfig{Options: &TrainerOptions{StartingEpoch: -1}, Model: m,
		DataFlow: closeDF(t, must(DataFlowFromTensors([]*Tensor{x}, Sequential)).of(t))})
	named(err, "LaunchTrain", "tpt_trainer_from_config")
	// From a callback, the Context's method.
	var inCallback error
	cb := must(NewCallback("probe", EventTriggerEpoch, nil, func(ctx *Context, _ Event, _ *Record) error {
		_, inCallback = ctx.Output("no_such_output")
		return nil
	})).of(t)
	tr, err := classifierRun(t, m, 1, cb)
	ok(t, err)
	defer tr.Close()
	named(inCallback, "Context.Output", "tpt_trainer_output")

	for fn, want := range map[string]string{
		"(*Model).Restore":              "Model.Restore",
		"(*handle[...]).acquire":        "",
		"(*DataFlow).derive.func1":      "",
		"(*DataFlow).Batch.func1":       "",
		"(*Model).Restore-fm":           "",
		"NewModel":                      "NewModel",
		"NewModel.func2":                "",
		"Code.String":                   "Code.String",
		"statusError":                   "",
		"TestErrorsNameTheGoCall":       "",
		"TestErrorsNameTheGoCall.func1": "",
		"(*Context).Output":             "Context.Output",
		"(*stash).take":                 "",
	} {
		if got := exportedName(fn); got != want {
			t.Errorf("exportedName(%q) = %q, want %q", fn, got, want)
		}
	}
}
