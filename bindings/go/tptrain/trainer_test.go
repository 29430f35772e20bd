package tptrain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Callbacks run on the goroutine of Run, under C frames: they report with
// t.Error, never t.Fatal (runtime.Goexit must not unwind through C).

// quietOptions: stepsPerEpoch -1 means not set (from the input), 0 no steps.
func quietOptions(start, max, stepsPerEpoch int64) *TrainerOptions {
	steps := stepsPerEpoch
	switch stepsPerEpoch {
	case -1:
		steps = 0
	case 0:
		steps = NoSteps
	}
	return &TrainerOptions{StartingEpoch: start, MaxEpoch: max, StepsPerEpoch: steps, Quiet: true,
		Progress: ProgressOff, NoDefaultCallbacks: true, NoDefaultMonitors: true}
}

func newQuietTrainer(t *testing.T, start, max, stepsPerEpoch int64) *Trainer {
	t.Helper()
	tr := must(NewTrainer(quietOptions(start, max, stepsPerEpoch))).of(t)
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	return tr
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkHandles checks, when the test ends, that every handle the binding made
// during the test was deleted exactly once (a second deletion panics).
// settledHandles returns liveHandles once the finalizers of what earlier
// tests dropped have run: the count is process-wide, and a finalizer that
// deletes a handle in the middle of a test would upset its exact counts.
func settledHandles() int64 {
	runtime.GC()
	n, same := liveHandles.Load(), 0
	for i := 0; i < 200 && same < 3; i++ {
		time.Sleep(2 * time.Millisecond)
		if m := liveHandles.Load(); m == n {
			same++
		} else {
			n, same = m, 0
			runtime.GC()
		}
	}
	return n
}

func checkHandles(t *testing.T) {
	t.Helper()
	base := settledHandles()
	t.Cleanup(func() {
		if n := liveHandles.Load(); n != base {
			t.Errorf("%d cgo handles live after the test, want %d", n, base)
		}
	})
}

// seen is one observed event: who saw it and the counters at that time.
type seen struct {
	who                  string
	event                Event
	epoch, local, global int64
}

func (s seen) String() string {
	return fmt.Sprintf("%s/%v epoch %d local %d global %d", s.who, s.event, s.epoch, s.local, s.global)
}

type recorder struct{ events []seen }

func (r *recorder) note(ctx *Context, who string, e Event) {
	r.events = append(r.events, seen{who, e, ctx.EpochNum(), ctx.LocalStep(), ctx.GlobalStep()})
}

func (r *recorder) count(who string, e Event) int {
	n := 0
	for _, s := range r.events {
		if s.who == who && s.event == e {
			n++
		}
	}
	return n
}

const lifecycle = EventSetup | EventBeforeTrain | EventBeforeEpoch | EventBeforeRun | EventAfterRun |
	EventTriggerStep | EventAfterEpoch | EventTriggerEpoch | EventAfterTrain

// recordingCallback notes every event it receives; fail, if not nil, may
// return a stop or an error for an event.
func recordingCallback(t *testing.T, r *recorder, who string, events Event,
	fail func(ctx *Context, e Event) error) *Callback {
	t.Helper()
	return must(NewCallback(who, events, nil, func(ctx *Context, e Event, rec *Record) error {
		if rec != nil {
			t.Errorf("%s: record %v with event %v", who, rec, e)
		}
		r.note(ctx, who, e)
		if fail != nil {
			return fail(ctx, e)
		}
		return nil
	})).of(t)
}

// expectedSequence is tensorpack's loop written out by hand for a callback A
// that asked for every lifecycle event, a TRIGGER-only callback B, run_step R
// and a step S run `hooks` times per run_step.
func expectedSequence(start, max, stepsPerEpoch int64, hooks int) []seen {
	var out []seen
	g, local := int64(0), int64(-1)
	put := func(who string, e Event, epoch int64) { out = append(out, seen{who, e, epoch, local, g}) }
	put("A", EventSetup, start-1)
	put("A", EventBeforeTrain, start-1)
	for epoch := start; epoch <= max; epoch++ {
		put("A", EventBeforeEpoch, epoch)
		for k := int64(0); k < stepsPerEpoch; k++ {
			local = k
			put("R", 0, epoch)
			for i := 0; i < hooks; i++ {
				put("A", EventBeforeRun, epoch)
				put("S", 0, epoch)
				g++ // the step counter runs before the user callbacks' AFTER_RUN
				put("A", EventAfterRun, epoch)
			}
			put("A", EventTriggerStep, epoch)
		}
		put("A", EventAfterEpoch, epoch)
		put("A", EventTriggerEpoch, epoch)
		put("B", EventTrigger, epoch)
	}
	put("A", EventAfterTrain, max)
	return out
}

func compareEvents(t *testing.T, got, want []seen) {
	t.Helper()
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			t.Fatalf("event %d: got %v, want %v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
}

func TestTrainerEventSequence(t *testing.T) {
	for _, c := range []struct {
		start, max, spe int64
		hooks           int
	}{{3, 5, 4, 2}, {3, 5, 4, 1}, {3, 5, 4, 0}, {3, 5, 0, 1}, {6, 5, 4, 1}} {
		name := fmt.Sprintf("epochs %d-%d steps %d hooks %d", c.start, c.max, c.spe, c.hooks)
		t.Run(name, func(t *testing.T) {
			checkHandles(t)
			var r recorder
			tr := newQuietTrainer(t, c.start, c.max, c.spe)
			step := func(ctx *Context) error {
				r.note(ctx, "S", 0)
				return nil
			}
			ok(t, tr.SetRunStep(func(ctx *Context) error {
				r.note(ctx, "R", 0)
				for i := 0; i < c.hooks; i++ {
					if err := ctx.HookedStep(step); err != nil {
						return err
					}
				}
				return nil
			}))
			ok(t, tr.AddCallback(recordingCallback(t, &r, "A", lifecycle, nil)))
			ok(t, tr.AddCallback(recordingCallback(t, &r, "B", EventTrigger, nil)))
			ok(t, tr.Run())
			if reason, stopped := tr.StopReason(); stopped {
				t.Errorf("StopReason() = %q, true after a full run", reason)
			}
			compareEvents(t, r.events, expectedSequence(c.start, c.max, c.spe, c.hooks))
		})
	}
}

func TestStopFromCallback(t *testing.T) {
	checkHandles(t)
	var r recorder
	tr := newQuietTrainer(t, 3, 5, 4)
	runSteps := 0
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		runSteps++
		return ctx.HookedStep(nil)
	}))
	ok(t, tr.AddCallback(recordingCallback(t, &r, "A", lifecycle, func(ctx *Context, e Event) error {
		if e == EventBeforeEpoch && ctx.EpochNum() == 4 {
			return Stop("A stops in epoch 4")
		}
		return nil
	})))
	ok(t, tr.AddCallback(recordingCallback(t, &r, "B", lifecycle, nil)))
	if err := tr.Run(); err != nil {
		t.Fatalf("Run() = %v, want nil after a stop", err)
	}
	if reason, stopped := tr.StopReason(); !stopped || reason != "A stops in epoch 4" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
	// epoch 3 ran fully; epoch 4 stopped inside A's BEFORE_EPOCH: B never saw it
	if n := r.count("A", EventBeforeEpoch); n != 2 {
		t.Errorf("A got BEFORE_EPOCH %d times, want 2", n)
	}
	if n := r.count("B", EventBeforeEpoch); n != 1 {
		t.Errorf("B got BEFORE_EPOCH %d times, want 1", n)
	}
	if runSteps != 4 {
		t.Errorf("%d run_steps, want 4", runSteps)
	}
	if a, b := r.count("A", EventAfterTrain), r.count("B", EventAfterTrain); a != 1 || b != 1 {
		t.Errorf("AFTER_TRAIN: A %d, B %d times, want 1 each", a, b)
	}
	if e, g := tr.EpochNum(), tr.GlobalStep(); e != 4 || g != 4 {
		t.Errorf("EpochNum, GlobalStep = %d, %d, want 4, 4", e, g)
	}
}

func TestStopFromRunStep(t *testing.T) {
	checkHandles(t)
	var r recorder
	tr := newQuietTrainer(t, 3, 5, 4)
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		if err := ctx.HookedStep(nil); err != nil {
			return err
		}
		if g := ctx.GlobalStep(); g >= 6 {
			return Stop(fmt.Sprintf("run_step stops at global step %d", g))
		}
		return nil
	}))
	ok(t, tr.AddCallback(recordingCallback(t, &r, "A", lifecycle, nil)))
	ok(t, tr.Run())
	if reason, stopped := tr.StopReason(); !stopped || reason != "run_step stops at global step 6" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
	// the stopping run_step's TRIGGER_STEP does not run
	if n := r.count("A", EventTriggerStep); n != 5 {
		t.Errorf("TRIGGER_STEP %d times, want 5", n)
	}
	last := r.events[len(r.events)-1]
	if want := (seen{"A", EventAfterTrain, 4, 1, 6}); last != want {
		t.Errorf("last event %v, want %v", last, want)
	}
}

func TestHookedStepReturnsTheStop(t *testing.T) {
	checkHandles(t)
	stop := Stop("enough")
	tr := newQuietTrainer(t, 1, 3, 4)
	var fromHooked error
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		fromHooked = ctx.HookedStep(func(ctx *Context) error { return nil })
		return fromHooked
	}))
	ok(t, tr.AddCallback(must(NewCallback("stopper", EventAfterRun, nil, func(ctx *Context, e Event, _ *Record) error {
		if ctx.GlobalStep() == 3 {
			return stop
		}
		return nil
	})).of(t)))
	ok(t, tr.Run())
	if fromHooked != stop {
		t.Errorf("HookedStep returned %#v, want the callback's %#v", fromHooked, stop)
	}
	var se *StopError
	if !errors.As(fromHooked, &se) || se.Reason != "enough" {
		t.Errorf("HookedStep's result %v is not the *StopError", fromHooked)
	}
	if reason, _ := tr.StopReason(); reason != "enough" {
		t.Errorf("StopReason() = %q", reason)
	}
	if g := tr.GlobalStep(); g != 3 {
		t.Errorf("GlobalStep() = %d, want 3", g)
	}
}

// A stop that run_step drops still stops training, as in C.
func TestStopDroppedByRunStepStillStops(t *testing.T) {
	checkHandles(t)
	tr := newQuietTrainer(t, 1, 3, 4)
	runSteps := 0
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		runSteps++
		_ = ctx.HookedStep(func(*Context) error { return Stop("step says stop") })
		return nil
	}))
	ok(t, tr.Run())
	if reason, stopped := tr.StopReason(); !stopped || reason != "step says stop" || runSteps != 1 {
		t.Errorf("StopReason() = %q, %v after %d run_steps", reason, stopped, runSteps)
	}
}

type codedError struct{ code int }

func (e *codedError) Error() string { return fmt.Sprintf("coded error %d", e.code) }

func TestCallbackErrorComesBackUnchanged(t *testing.T) {
	sentinel := errors.New("disk on fire")
	for _, event := range []Event{EventSetup, EventBeforeTrain, EventBeforeEpoch, EventBeforeRun, EventAfterRun,
		EventTriggerStep, EventAfterEpoch, EventTriggerEpoch, EventAfterTrain} {
		t.Run(event.String(), func(t *testing.T) {
			checkHandles(t)
			want := fmt.Errorf("callback A at %v: %w", event, sentinel)
			var r recorder
			tr := newQuietTrainer(t, 3, 5, 4)
			ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.HookedStep(nil) }))
			ok(t, tr.AddCallback(recordingCallback(t, &r, "A", lifecycle, func(ctx *Context, e Event) error {
				if e == event && (ctx.EpochNum() == 4 || e == EventSetup || e == EventBeforeTrain || e == EventAfterTrain) {
					return want
				}
				return nil
			})))
			ok(t, tr.AddCallback(recordingCallback(t, &r, "B", lifecycle, nil)))
			err := tr.Run()
			if err != want {
				t.Fatalf("Run() = %#v, want the callback's error %#v", err, want)
			}
			if !errors.Is(err, sentinel) {
				t.Error("errors.Is(err, sentinel) is false")
			}
			if a, b := r.count("A", EventAfterTrain), r.count("B", EventAfterTrain); a != 1 || b != 1 {
				t.Errorf("AFTER_TRAIN: A %d, B %d times, want 1 each", a, b)
			}
			if reason, stopped := tr.StopReason(); stopped {
				t.Errorf("StopReason() = %q after an error", reason)
			}
		})
	}
}

func TestErrorFromRunStepAndStep(t *testing.T) {
	t.Run("run_step", func(t *testing.T) {
		checkHandles(t)
		want := &codedError{7}
		tr := newQuietTrainer(t, 1, 3, 4)
		ok(t, tr.SetRunStep(func(ctx *Context) error {
			if ctx.GlobalStep() == 5 {
				return want
			}
			return ctx.HookedStep(nil)
		}))
		err := tr.Run()
		var ce *codedError
		if err != want || !errors.As(err, &ce) || ce.code != 7 {
			t.Errorf("Run() = %#v, want %#v", err, want)
		}
	})
	t.Run("step", func(t *testing.T) {
		checkHandles(t)
		want := errors.New("step failed")
		var r recorder
		tr := newQuietTrainer(t, 1, 3, 4)
		var fromHooked error
		ok(t, tr.SetRunStep(func(ctx *Context) error {
			fromHooked = ctx.HookedStep(func(ctx *Context) error {
				if ctx.GlobalStep() == 5 {
					return want
				}
				return nil
			})
			return fromHooked
		}))
		ok(t, tr.AddCallback(recordingCallback(t, &r, "A", lifecycle, nil)))
		if err := tr.Run(); err != want {
			t.Errorf("Run() = %#v, want %#v", err, want)
		}
		if fromHooked != want {
			t.Errorf("HookedStep returned %#v, want %#v", fromHooked, want)
		}
		// the failing step's AFTER_RUN did not run
		if n := r.count("A", EventAfterRun); n != 5 {
			t.Errorf("AFTER_RUN %d times, want 5", n)
		}
	})
	t.Run("an *Error keeps its code", func(t *testing.T) {
		checkHandles(t)
		tr := newQuietTrainer(t, 1, 1, 1)
		var libErr error
		ok(t, tr.SetRunStep(func(ctx *Context) error {
			_, libErr = ctx.OutputScalar("nothing")
			return libErr
		}))
		err := tr.Run()
		if err == nil || err != libErr || !errors.Is(err, ErrNotFound) {
			t.Errorf("Run() = %#v, want the library's %#v", err, libErr)
		}
	})
	t.Run("dropped by run_step", func(t *testing.T) {
		checkHandles(t)
		want := errors.New("dropped")
		tr := newQuietTrainer(t, 1, 3, 4)
		ok(t, tr.SetRunStep(func(ctx *Context) error {
			_ = ctx.HookedStep(func(*Context) error { return want })
			return nil
		}))
		if err := tr.Run(); err != want {
			t.Errorf("Run() = %#v, want %#v", err, want)
		}
	})
}

type panicValue struct{ where string }

// runAndRecover runs tr and returns Run's result and the value it panicked
// with (nil if it did not).
func runAndRecover(tr *Trainer) (err error, panicked any) {
	defer func() { panicked = recover() }()
	return tr.Run(), nil
}

func TestPanicInCallback(t *testing.T) {
	checkHandles(t)
	var r recorder
	value := &panicValue{"callback"}
	tr := newQuietTrainer(t, 1, 3, 4)
	ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.HookedStep(nil) }))
	ok(t, tr.AddCallback(recordingCallback(t, &r, "A", lifecycle, func(ctx *Context, e Event) error {
		if e == EventTriggerStep && ctx.GlobalStep() == 6 {
			panic(value)
		}
		if e == EventAfterTrain {
			panic("a second panic does not replace the first")
		}
		return nil
	})))
	ok(t, tr.AddCallback(recordingCallback(t, &r, "B", lifecycle, nil)))
	_, p := runAndRecover(tr)
	if p != value {
		t.Fatalf("Run panicked with %#v, want %#v", p, value)
	}
	if a, b := r.count("A", EventAfterTrain), r.count("B", EventAfterTrain); a != 1 || b != 1 {
		t.Errorf("AFTER_TRAIN: A %d, B %d times, want 1 each", a, b)
	}
	if n := r.count("B", EventTriggerStep); n != 5 {
		t.Errorf("B got TRIGGER_STEP %d times, want 5 (A panicked before B's turn)", n)
	}
	if g := tr.GlobalStep(); g != 6 {
		t.Errorf("GlobalStep() = %d, want 6", g)
	}
}

func TestPanicInRunStep(t *testing.T) {
	checkHandles(t)
	var r recorder
	tr := newQuietTrainer(t, 1, 3, 4)
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		if ctx.GlobalStep() == 2 {
			var m map[string]int
			m["x"] = 1 // a runtime error
		}
		return ctx.HookedStep(nil)
	}))
	ok(t, tr.AddCallback(recordingCallback(t, &r, "A", EventAfterTrain, nil)))
	_, p := runAndRecover(tr)
	if rerr, isRuntime := p.(runtime.Error); !isRuntime || !strings.Contains(rerr.Error(), "nil map") {
		t.Fatalf("Run panicked with %#v, want the runtime error", p)
	}
	if n := r.count("A", EventAfterTrain); n != 1 {
		t.Errorf("AFTER_TRAIN %d times, want 1", n)
	}
}

func TestPanicInStepUnwindsRunStep(t *testing.T) {
	checkHandles(t)
	var r recorder
	tr := newQuietTrainer(t, 1, 3, 4)
	afterHooked := 0
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		err := ctx.HookedStep(func(ctx *Context) error {
			if ctx.GlobalStep() == 2 {
				panic(fmt.Errorf("step %d", ctx.GlobalStep()))
			}
			return nil
		})
		afterHooked++
		return err
	}))
	ok(t, tr.AddCallback(recordingCallback(t, &r, "A", lifecycle, nil)))
	_, p := runAndRecover(tr)
	if e, isErr := p.(error); !isErr || e.Error() != "step 2" {
		t.Fatalf("Run panicked with %#v, want the step's error value", p)
	}
	if afterHooked != 2 {
		t.Errorf("run_step went on after the panicking step: %d returns, want 2", afterHooked)
	}
	if n := r.count("A", EventAfterRun); n != 2 {
		t.Errorf("AFTER_RUN %d times, want 2", n)
	}
	if n := r.count("A", EventAfterTrain); n != 1 {
		t.Errorf("AFTER_TRAIN %d times, want 1", n)
	}
}

// A run_step that recovers a panic from HookedStep has handled it: Run does
// not panic, and returns the error of the failed step.
func TestPanicRecoveredInRunStep(t *testing.T) {
	checkHandles(t)
	tr := newQuietTrainer(t, 1, 3, 4)
	var caught any
	ok(t, tr.SetRunStep(func(ctx *Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				caught = p
			}
		}()
		return ctx.HookedStep(func(*Context) error { panic("in step") })
	}))
	err, p := runAndRecover(tr)
	if p != nil || caught != "in step" {
		t.Fatalf("Run panicked with %#v; run_step caught %#v", p, caught)
	}
	if !errors.Is(err, ErrCallback) || !strings.Contains(err.Error(), "panic in hooked step: in step") {
		t.Errorf("Run() = %v, want the failed step's *Error", err)
	}
}

func TestPanicInPredicate(t *testing.T) {
	checkHandles(t)
	var r recorder
	tr := newQuietTrainer(t, 1, 3, 4)
	ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.HookedStep(nil) }))
	inner := recordingCallback(t, &r, "E", EventBeforeEpoch|EventAfterTrain, nil)
	ok(t, tr.AddCallback(must(EnableIf(inner, func(ctx *Context) bool {
		if ctx.EpochNum() == 2 {
			panic(42)
		}
		return true
	})).of(t)))
	_, p := runAndRecover(tr)
	if p != 42 {
		t.Fatalf("Run panicked with %#v, want 42", p)
	}
	if n := r.count("E", EventBeforeEpoch); n != 1 {
		t.Errorf("BEFORE_EPOCH %d times, want 1", n)
	}
	if n := r.count("E", EventAfterTrain); n != 1 {
		t.Errorf("AFTER_TRAIN %d times, want 1", n)
	}
}

func TestHandlesReleasedExactlyOnce(t *testing.T) {
	checkHandles(t)
	base := settledHandles()
	live := func(want int64) {
		t.Helper()
		if n := liveHandles.Load() - base; n != want {
			t.Errorf("%d live handles, want %d", n, want)
		}
	}
	noop := func(*Context, Event, *Record) error { return nil }

	// a callback never given away: Close releases it, once
	cb := must(NewCallback("lone", EventAll, nil, noop)).of(t)
	live(1)
	ok(t, cb.Close())
	ok(t, cb.Close())
	live(0)

	// invalid description: released at once
	if _, err := NewCallback("bad", Event(1<<20), nil, noop); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NewCallback with unknown events: %v", err)
	}
	if _, err := NewCallback("nil", EventAll, nil, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NewCallback(nil fn): %v", err)
	}
	live(0)

	// wrappers take inner over, also when they fail
	if _, err := PeriodicTrigger(must(NewCallback("p", EventTrigger, nil, noop)).of(t), Every{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("PeriodicTrigger(0, 0): %v", err)
	}
	if _, err := Periodic(must(NewCallback("q", EventTrigger, nil, noop)).of(t), Every{Steps: -1}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Periodic(-1, 0): %v", err)
	}
	if _, err := EnableIf(must(NewCallback("e", EventTrigger, nil, noop)).of(t), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("EnableIf(nil): %v", err)
	}
	live(0)
	wrapped := must(EnableIf(must(NewCallback("e", EventTrigger, nil, noop)).of(t),
		func(*Context) bool { return true })).of(t)
	live(2)
	ok(t, wrapped.Close())
	live(0)

	// a spent callback cannot be used again
	inner := must(NewCallback("inner", EventTrigger, nil, noop)).of(t)
	outer := must(Periodic(inner, Every{Steps: 2})).of(t)
	if _, err := Periodic(inner, Every{Steps: 2}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "already given away") {
		t.Errorf("wrapping a spent callback: %v", err)
	}
	ok(t, outer.Close())
	live(0)

	// run_step: replaced (the old one released), then released with the trainer
	tr := must(NewTrainer(quietOptions(1, 1, 0))).of(t)
	live(1) // the trainer's own
	ok(t, tr.SetRunStep(func(*Context) error { return nil }))
	ok(t, tr.SetRunStep(func(*Context) error { return nil }))
	live(2)
	if err := tr.SetRunStep(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("SetRunStep(nil): %v", err)
	}
	ok(t, tr.AddCallback(must(NewCallback("kept", EventAfterTrain, nil, noop)).of(t)))
	ok(t, tr.AddMonitor(must(NewCallback("monitor", EventRecord, nil, noop)).of(t)))
	live(4)
	ok(t, tr.Run())
	// the list is frozen: adding after Run fails and releases the callback
	late := must(NewCallback("late", EventAll, nil, noop)).of(t)
	if err := tr.AddCallback(late); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "frozen") {
		t.Errorf("AddCallback after Run: %v", err)
	}
	if err := tr.AddCallback(late); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("AddCallback of a spent callback: %v", err)
	}
	if err := tr.SetRunStep(func(*Context) error { return nil }); !errors.Is(err, ErrState) {
		t.Errorf("SetRunStep after Run: %v", err)
	}
	if err := tr.Run(); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "runs once") {
		t.Errorf("second Run: %v", err)
	}
	live(4)
	ok(t, tr.Close())
	ok(t, tr.Close())
	live(0)

	// a closed trainer releases what it is given
	if err := tr.AddCallback(must(NewCallback("x", EventAll, nil, noop)).of(t)); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "closed Trainer") {
		t.Errorf("AddCallback on a closed trainer: %v", err)
	}
	if err := tr.SetRunStep(func(*Context) error { return nil }); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("SetRunStep on a closed trainer: %v", err)
	}
	live(0)

	// chief-only callbacks are dropped, and released, by a non-chief trainer
	o := quietOptions(1, 1, 0)
	o.Role = RoleWorker
	tr = must(NewTrainer(o)).of(t)
	afterTrain := 0
	ok(t, tr.AddCallback(must(NewCallback("chief", EventAll, nil, noop)).of(t)))
	live(1)
	ok(t, tr.AddCallback(must(NewCallback("everyone", EventAfterTrain, &CallbackOptions{AllWorkers: true}, func(*Context, Event, *Record) error {
		afterTrain++
		return nil
	})).of(t)))
	live(2)
	ok(t, tr.Run())
	ok(t, tr.Close())
	live(0)
	if afterTrain != 1 {
		t.Errorf("the non-chief-only callback got AFTER_TRAIN %d times", afterTrain)
	}
}

func TestRequestStopFromAnotherGoroutine(t *testing.T) {
	checkHandles(t)
	var r recorder
	tr := newQuietTrainer(t, 1, 1000000, 1000)
	started := make(chan struct{})
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		if ctx.GlobalStep() == 0 {
			close(started)
		}
		time.Sleep(100 * time.Microsecond)
		return ctx.HookedStep(nil)
	}))
	ok(t, tr.AddCallback(recordingCallback(t, &r, "A", EventAfterTrain, nil)))
	done := make(chan error, 1)
	go func() {
		<-started
		time.Sleep(20 * time.Millisecond)
		if err := tr.Close(); !errors.Is(err, ErrState) {
			done <- fmt.Errorf("Close during Run: %v", err)
			return
		}
		done <- tr.RequestStop()
	}()
	ok(t, tr.Run())
	ok(t, <-done)
	if reason, stopped := tr.StopReason(); !stopped || reason != "tpt_trainer_request_stop" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
	if n := r.count("A", EventAfterTrain); n != 1 {
		t.Errorf("AFTER_TRAIN %d times", n)
	}
	if g := tr.GlobalStep(); g <= 0 || g >= 1000000 {
		t.Errorf("GlobalStep() = %d", g)
	}
}

func TestStopOnSignals(t *testing.T) {
	// SIGTERM to the process during a run with StopOnSignals: a graceful
	// stop before the next step, named by the signal; afterwards the Go
	// runtime has its handler back (a later SIGTERM would be Go's).
	checkHandles(t)
	opts := quietOptions(1, 3, 5)
	opts.StopOnSignals = SignalsAlways
	tr := must(NewTrainer(opts)).of(t)
	defer tr.Close()
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		if ctx.GlobalStep() == 3 {
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond) // the signal is delivered meanwhile
		}
		return ctx.HookedStep(nil)
	}))
	ok(t, tr.Run())
	if reason, stopped := tr.StopReason(); !stopped || reason != "SIGTERM" {
		t.Errorf("StopReason() = %q, %v", reason, stopped)
	}
	if g := tr.GlobalStep(); g != 4 {
		t.Errorf("GlobalStep() = %d, want 4 (the step that was running finished)", g)
	}
	// Out of range values are refused by the library.
	bad := quietOptions(1, 3, 5)
	bad.StopOnSignals = 5
	_, err := NewTrainer(bad)
	wantError(t, err, CodeInvalidArgument, "stop_on_signals")
}

func TestSchedulingWrappers(t *testing.T) {
	checkHandles(t)
	var r recorder
	tr := newQuietTrainer(t, 1, 4, 5) // global steps 1..20
	ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.HookedStep(nil) }))
	// P: TRIGGER every 3 steps and before training
	ok(t, tr.AddCallback(must(PeriodicTrigger(recordingCallback(t, &r, "P", EventTrigger|EventTriggerEpoch, nil), Every{Steps: 3, BeforeTrain: true})).of(t)))
	// Q: TRIGGER every 2 epochs (its own TRIGGER_EPOCH is replaced)
	ok(t, tr.AddCallback(must(PeriodicTrigger(recordingCallback(t, &r, "Q", EventTrigger|EventTriggerEpoch, nil), Every{Epochs: 2})).of(t)))
	// C: TRIGGER_STEP and AFTER_RUN only when global_step % 4 == 0
	ok(t, tr.AddCallback(must(Periodic(recordingCallback(t, &r, "C", EventTriggerStep|EventAfterRun, nil), Every{Steps: 4})).of(t)))
	// E: BEFORE/AFTER_EPOCH in odd epochs only; AFTER_TRAIN always
	ok(t, tr.AddCallback(must(EnableIf(recordingCallback(t, &r, "E", EventBeforeEpoch|EventAfterEpoch|EventAfterTrain, nil),
		func(ctx *Context) bool { return ctx.EpochNum()%2 == 1 })).of(t)))
	ok(t, tr.Run())

	var gotP, gotQ, gotCSteps, gotCRuns, gotE []int64
	for _, s := range r.events {
		switch {
		case s.who == "P" && s.event == EventTrigger:
			gotP = append(gotP, s.global)
		case s.who == "Q" && s.event == EventTrigger:
			gotQ = append(gotQ, s.epoch)
		case s.who == "C" && s.event == EventTriggerStep:
			gotCSteps = append(gotCSteps, s.global)
		case s.who == "C" && s.event == EventAfterRun:
			gotCRuns = append(gotCRuns, s.global)
		case s.who == "E" && s.event != EventAfterTrain:
			gotE = append(gotE, s.epoch)
		case s.who == "E":
		default:
			t.Errorf("unexpected event %v", s)
		}
	}
	check := func(what string, got, want []int64) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("P triggers at global steps", gotP, []int64{0, 3, 6, 9, 12, 15, 18})
	check("Q triggers in epochs", gotQ, []int64{2, 4})
	check("C TRIGGER_STEP at global steps", gotCSteps, []int64{4, 8, 12, 16, 20})
	// AFTER_RUN: decided in BEFORE_RUN, when global_step was one less
	check("C AFTER_RUN at global steps", gotCRuns, []int64{1, 5, 9, 13, 17})
	check("E epoch events in epochs", gotE, []int64{1, 1, 3, 3})
	if n := r.count("E", EventAfterTrain); n != 1 {
		t.Errorf("E got AFTER_TRAIN %d times", n)
	}
}

func TestScalarsAndMonitor(t *testing.T) {
	checkHandles(t)
	tr := newQuietTrainer(t, 1, 3, 4)
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		if err := ctx.HookedStep(nil); err != nil {
			return err
		}
		return ctx.PutScalar("metric", float64(ctx.GlobalStep())*0.5)
	}))
	var records []Record
	triggerEpochs := 0
	ok(t, tr.AddMonitor(must(NewCallback("monitor", EventRecord|EventTriggerEpoch, nil,
		func(ctx *Context, e Event, rec *Record) error {
			switch e {
			case EventRecord:
				records = append(records, *rec)
			case EventTriggerEpoch:
				triggerEpochs++
				if v, step, err := ctx.ScalarLatest("metric"); err != nil || step != ctx.GlobalStep() || v != 0.5*float64(step) {
					t.Errorf("ScalarLatest in TRIGGER_EPOCH = %v, %d, %v", v, step, err)
				}
			default:
				t.Errorf("monitor got %v", e)
			}
			return nil
		})).of(t)))
	if err := tr.Run(); err != nil {
		t.Fatal(err)
	}
	if len(records) != 12 || triggerEpochs != 3 {
		t.Fatalf("%d records, %d TRIGGER_EPOCH; want 12, 3", len(records), triggerEpochs)
	}
	for i, rec := range records {
		g := int64(i + 1)
		want := Record{Kind: RecordScalar, Name: "metric", GlobalStep: g, EpochNum: (g-1)/4 + 1, Value: 0.5 * float64(g)}
		if rec != want {
			t.Errorf("record %d = %+v, want %+v", i, rec, want)
		}
	}
	v, step, err := tr.ScalarLatest("metric")
	if err != nil || v != 6 || step != 12 {
		t.Errorf("ScalarLatest = %v, %d, %v; want 6, 12", v, step, err)
	}
	steps, values, err := tr.ScalarHistory("metric")
	ok(t, err)
	if len(steps) != 12 || len(values) != 12 {
		t.Fatalf("ScalarHistory has %d steps and %d values", len(steps), len(values))
	}
	for i := range steps {
		if steps[i] != int64(i+1) || values[i] != 0.5*float64(i+1) {
			t.Errorf("history %d = (%d, %v)", i, steps[i], values[i])
		}
	}
	if _, _, err := tr.ScalarLatest("other"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no scalar 'other'") {
		t.Errorf("ScalarLatest(other): %v", err)
	}
	if _, _, err := tr.ScalarHistory("other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ScalarHistory(other): %v", err)
	}
}

func TestMonitorErrorComesBackFromPutScalar(t *testing.T) {
	checkHandles(t)
	want := errors.New("monitor is full")
	tr := newQuietTrainer(t, 1, 1, 3)
	var fromPut []error
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		fromPut = append(fromPut, ctx.PutScalar("x", 1))
		return ctx.HookedStep(nil)
	}))
	ok(t, tr.AddMonitor(must(NewCallback("full", EventRecord, nil, func(*Context, Event, *Record) error {
		return want
	})).of(t)))
	ok(t, tr.Run()) // run_step dropped the errors: training goes on
	if len(fromPut) != 3 {
		t.Fatalf("%d puts", len(fromPut))
	}
	for i, err := range fromPut {
		if err != want {
			t.Errorf("PutScalar %d = %#v, want %#v", i, err, want)
		}
	}
	if n := len(tr.ctx.errs); n != 0 {
		t.Errorf("%d errors still kept after Run", n)
	}
}

func TestStepOutputs(t *testing.T) {
	checkHandles(t)
	tr := newQuietTrainer(t, 1, 2, 3)
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		return ctx.HookedStep(func(ctx *Context) error {
			g := ctx.GlobalStep()
			if err := ctx.SetOutputScalar("loss", 1/float64(g+1)); err != nil {
				return err
			}
			x, err := FromFloat32([]float32{float32(g), 1, 2})
			if err != nil {
				return err
			}
			defer x.Close() // the trainer keeps its own reference
			return ctx.SetOutput("logits", x)
		})
	}))
	checked := 0
	ok(t, tr.AddCallback(must(NewCallback("reader", EventAfterRun, nil, func(ctx *Context, _ Event, _ *Record) error {
		g := ctx.GlobalStep()
		loss, err := ctx.OutputScalar("loss")
		if err != nil || loss != 1/float64(g) { // put when global_step was g-1
			t.Errorf("OutputScalar(loss) = %v, %v at global step %d", loss, err, g)
		}
		logits, err := ctx.Output("logits")
		if err != nil {
			return err
		}
		defer logits.Close()
		if v, err := logits.Float32s(); err != nil || !reflect.DeepEqual(v, []float32{float32(g - 1), 1, 2}) {
			t.Errorf("Output(logits) = %v, %v", v, err)
		}
		asTensor, err := ctx.Output("loss")
		if err != nil {
			return err
		}
		defer asTensor.Close()
		if v, err := asTensor.Float64s(); err != nil || len(v) != 1 || v[0] != loss {
			t.Errorf("Output(loss) = %v, %v", v, err)
		}
		if _, err := ctx.OutputScalar("logits"); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("OutputScalar(logits): %v", err)
		}
		if _, err := ctx.OutputScalar("nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("OutputScalar(nope): %v", err)
		}
		if err := ctx.SetOutputScalar("late", 1); !errors.Is(err, ErrState) {
			t.Errorf("SetOutputScalar outside a step: %v", err)
		}
		closed := must(FromFloat32([]float32{1})).of(t)
		closed.Close()
		if err := ctx.SetOutput("closed", closed); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SetOutput of a closed tensor: %v", err)
		}
		checked++
		return nil
	})).of(t)))
	ok(t, tr.Run())
	if checked != 6 {
		t.Errorf("outputs checked %d times, want 6", checked)
	}
}

func TestSetGlobalStepInBeforeTrain(t *testing.T) {
	checkHandles(t)
	tr := newQuietTrainer(t, 1, 2, 3)
	ok(t, tr.SetRunStep(func(ctx *Context) error { return ctx.HookedStep(nil) }))
	if err := tr.SetGlobalStep(-1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("SetGlobalStep(-1): %v", err)
	}
	ok(t, tr.SetGlobalStep(50))
	ok(t, tr.AddCallback(must(NewCallback("restore", EventBeforeTrain|EventBeforeEpoch, nil,
		func(ctx *Context, e Event, _ *Record) error {
			if e == EventBeforeTrain {
				return ctx.SetGlobalStep(100)
			}
			if err := ctx.SetGlobalStep(5); !errors.Is(err, ErrState) {
				t.Errorf("SetGlobalStep in BEFORE_EPOCH: %v", err)
			}
			return nil
		})).of(t)))
	ok(t, tr.Run())
	if g := tr.GlobalStep(); g != 106 {
		t.Errorf("GlobalStep() = %d, want 106", g)
	}
}

func TestTrainerOptions(t *testing.T) {
	checkHandles(t)
	// The zero value is the defaults: what the C library's
	// TPT_TRAINER_OPTIONS_INIT gives (NewTrainer(nil) passes it).
	copts, free, err := cTrainerOptions(&TrainerOptions{})
	ok(t, err)
	free()
	if copts.is_chief != 1 || copts.starting_epoch != 1 || copts.max_epoch != 99999999 ||
		copts.steps_per_epoch != -1 || copts.console != 1 || copts.default_callbacks != 1 ||
		copts.default_monitors != 1 || copts.summary_period != 0 || copts.logdir != nil {
		t.Errorf("the C options of the zero TrainerOptions: %+v", copts)
	}
	if copts, free, _ := cTrainerOptions(&TrainerOptions{StepsPerEpoch: NoSteps}); copts.steps_per_epoch != 0 {
		t.Errorf("NoSteps gives steps_per_epoch %d, want 0", copts.steps_per_epoch)
	} else {
		free()
	}
	bad := []struct {
		edit func(*TrainerOptions)
		msg  string
	}{
		{func(o *TrainerOptions) { o.StartingEpoch = -1 }, "starting_epoch must be >= 1"},
		{func(o *TrainerOptions) { o.StepsPerEpoch = -2 }, "TrainerOptions.StepsPerEpoch must be >= 0"},
		{func(o *TrainerOptions) { o.Role = 2 }, "TrainerOptions.Role must be RoleChief or RoleWorker, got 2"},
		{func(o *TrainerOptions) { o.MaxEpoch = -1 }, "max_epoch"},
		{func(o *TrainerOptions) { o.LogdirAction = 9 }, "logdir_action 9"},
		{func(o *TrainerOptions) { o.Progress = 9 }, "progress 9"},
		{func(o *TrainerOptions) { o.SummaryPeriod = -1 }, "summary_period must be >= 0"},
	}
	for _, b := range bad {
		var o TrainerOptions
		b.edit(&o)
		tr, err := NewTrainer(&o)
		if tr != nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("NewTrainer(%+v) = %v, %v; want an error with %q", o, tr, err, b.msg)
		}
	}
	// defaults: steps_per_epoch is not set
	tr := must(NewTrainer(nil)).of(t)
	if err := tr.Run(); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "steps_per_epoch is not set") {
		t.Errorf("Run with default options: %v", err)
	}
	ok(t, tr.Close())
	tr = must(NewTrainer(quietOptions(1, 1, 3))).of(t)
	if err := tr.Run(); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "no run_step") {
		t.Errorf("Run without run_step: %v", err)
	}
	ok(t, tr.Close())

	// a closed trainer
	if err := tr.Run(); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "Trainer.Run: use of closed Trainer") {
		t.Errorf("Run on a closed trainer: %v", err)
	}
	if err := tr.RequestStop(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("RequestStop on a closed trainer: %v", err)
	}
	if _, stopped := tr.StopReason(); stopped || tr.Logdir() != "" {
		t.Error("a closed trainer reports state")
	}
	if g, e, l, s := tr.GlobalStep(), tr.EpochNum(), tr.LocalStep(), tr.StepsPerEpoch(); g != 0 || e != 0 || l != 0 || s != 0 {
		t.Errorf("the counters of a closed trainer: %d, %d, %d, %d; want 0s", g, e, l, s)
	}
	var nilTrainer *Trainer
	if err := nilTrainer.Close(); err != nil {
		t.Errorf("(*Trainer)(nil).Close() = %v", err)
	}
}

func TestLogdir(t *testing.T) {
	checkHandles(t)
	dir := filepath.Join(t.TempDir(), "run")
	o := quietOptions(1, 2, 2)
	o.Logdir = dir
	o.NoDefaultMonitors = false
	tr := must(NewTrainer(o)).of(t)
	defer tr.Close()
	if got := tr.Logdir(); got != "" {
		t.Errorf("Logdir() before Run = %q", got)
	}
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		if got := ctx.Logdir(); got != dir {
			t.Errorf("ctx.Logdir() = %q, want %q", got, dir)
		}
		if err := ctx.HookedStep(nil); err != nil {
			return err
		}
		if err := ctx.Log(fmt.Sprintf("hello from step %d", ctx.GlobalStep())); err != nil {
			return err
		}
		return ctx.PutScalar("x", float64(ctx.GlobalStep()))
	}))
	ok(t, tr.Run())
	if got := tr.Logdir(); got != dir {
		t.Errorf("Logdir() = %q, want %q", got, dir)
	}
	log, err := os.ReadFile(filepath.Join(dir, "log.log"))
	ok(t, err)
	if !strings.Contains(string(log), "hello from step 4") {
		t.Errorf("log.log lacks the line from Log:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(dir, "stats.json")); err != nil {
		t.Error(err)
	}
	// the directory is not empty now: LogdirRefuse fails with CodeIO
	o.LogdirAction = LogdirRefuse
	again := must(NewTrainer(o)).of(t)
	defer again.Close()
	ok(t, again.SetRunStep(func(ctx *Context) error { return ctx.HookedStep(nil) }))
	if err := again.Run(); !errors.Is(err, ErrIO) {
		t.Errorf("Run into a used log directory: %v", err)
	}
}

func TestRunFromACallbackIsRefused(t *testing.T) {
	checkHandles(t)
	tr := newQuietTrainer(t, 1, 1, 1)
	ok(t, tr.SetRunStep(func(ctx *Context) error {
		if err := tr.Run(); !errors.Is(err, ErrState) {
			t.Errorf("Run inside run_step: %v", err)
		}
		if err := tr.Close(); !errors.Is(err, ErrState) {
			t.Errorf("Close inside run_step: %v", err)
		}
		return ctx.HookedStep(nil)
	}))
	ok(t, tr.Run())
}

func TestEventString(t *testing.T) {
	for _, c := range []struct {
		e    Event
		want string
	}{
		{0, "0"},
		{EventSetup, "SETUP"},
		{EventBeforeRun | EventAfterRun, "BEFORE_RUN|AFTER_RUN"},
		{EventRecord, "RECORD"},
		{EventAll, "SETUP|BEFORE_TRAIN|BEFORE_EPOCH|BEFORE_RUN|AFTER_RUN|TRIGGER_STEP|AFTER_EPOCH|TRIGGER_EPOCH|TRIGGER|AFTER_TRAIN|RECORD"},
		{EventTrigger | 1<<12, "TRIGGER|0x1000"},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("Event(%#x).String() = %q, want %q", uint32(c.e), got, c.want)
		}
	}
	if EventAll != 1<<11-1 {
		t.Errorf("EventAll = %#x", uint32(EventAll))
	}
}

// The finalizers release a trainer and a callback that were never closed, and
// with them every handle.
func TestFinalizersRelease(t *testing.T) {
	base := settledHandles()
	func() {
		tr := must(NewTrainer(quietOptions(1, 1, 1))).of(t)
		if err := tr.SetRunStep(func(*Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := tr.AddCallback(must(NewCallback("a", EventAll, nil, func(*Context, Event, *Record) error { return nil })).of(t)); err != nil {
			t.Fatal(err)
		}
		must(NewCallback("b", EventAll, nil, func(*Context, Event, *Record) error { return nil })).of(t)
	}()
	if liveHandles.Load()-base != 4 {
		t.Fatalf("%d live handles, want 4", liveHandles.Load()-base)
	}
	deadline := time.Now().Add(10 * time.Second)
	for liveHandles.Load() != base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := liveHandles.Load() - base; n != 0 {
		t.Errorf("%d handles still live after GC", n)
	}
}

// RunContext: cancelling the context stops training at the next step
// boundary; RunContext returns context.Canceled and AFTER_TRAIN has run.
func TestRunContextCancel(t *testing.T) {
	checkHandles(t)
	tr := newQuietTrainer(t, 1, 100, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	steps := 0
	ok(t, tr.SetRunStep(func(c *Context) error {
		steps++
		if steps == 15 {
			cancel()
		}
		time.Sleep(2 * time.Millisecond) // a step takes a while
		return nil
	}))
	afterTrain := 0
	ok(t, tr.AddCallback(must(NewCallback("after", EventAfterTrain, nil, func(*Context, Event, *Record) error {
		afterTrain++
		return nil
	})).of(t)))
	if err := tr.RunContext(ctx); err != context.Canceled {
		t.Fatalf("RunContext() = %v, want context.Canceled", err)
	}
	if steps != 15 && steps != 16 {
		t.Errorf("%d steps ran, want 15 (or 16: one more step at most)", steps)
	}
	if afterTrain != 1 {
		t.Errorf("AFTER_TRAIN ran %d times, want 1", afterTrain)
	}
	if r, stopped := tr.StopReason(); !stopped || r != "context canceled" {
		t.Errorf("StopReason() = %q, %v; want the context's error as the reason", r, stopped)
	}
	// A context already done: nothing runs.
	tr2 := newQuietTrainer(t, 1, 1, 1)
	ok(t, tr2.SetRunStep(func(*Context) error { t.Error("ran"); return nil }))
	if err := tr2.RunContext(ctx); err != context.Canceled {
		t.Errorf("RunContext(done) = %v", err)
	}
	// A deadline, through LaunchTrain: the outcome says why.
	m := newRegressionModel(t, &regression{})
	setOptimizer(t, m, "sgd", 0.01)
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	slow := must(NewCallback("slow", EventTriggerStep, nil, func(*Context, Event, *Record) error {
		time.Sleep(time.Millisecond)
		return nil
	})).of(t)
	outcome, err := LaunchTrain(dctx, &TrainConfig{Options: quietOptions(1, 0, -1), Model: m,
		Input: regressionInput(t, 16, 64), Callbacks: []*Callback{slow}})
	if err != context.DeadlineExceeded || !outcome.Stopped || outcome.Reason != context.DeadlineExceeded.Error() {
		t.Errorf("LaunchTrain with a deadline = %+v, %v", outcome, err)
	}
	// Without a deadline it runs to MaxEpoch: not stopped.
	outcome, err = LaunchTrain(context.Background(), &TrainConfig{Options: quietOptions(1, 2, -1), Model: m,
		Input: regressionInput(t, 16, 64)})
	ok(t, err)
	if want := (Outcome{GlobalStep: 8, EpochNum: 2}); outcome != want {
		t.Errorf("LaunchTrain to MaxEpoch = %+v, want %+v (not stopped)", outcome, want)
	}
}

// Closing the trainer from inside its own Run is refused (CodeState) and
// the run goes on to its end; Close after Run releases it.
func TestCloseInsideRun(t *testing.T) {
	checkHandles(t)
	tr := newQuietTrainer(t, 1, 2, 3)
	ok(t, tr.SetRunStep(func(*Context) error { return nil }))
	var closeErr error
	triggers := 0
	ok(t, tr.AddCallback(must(NewCallback("closer", EventTriggerStep, nil, func(*Context, Event, *Record) error {
		triggers++
		if closeErr == nil {
			closeErr = tr.Close()
		}
		return nil
	})).of(t)))
	ok(t, tr.Run())
	wantError(t, closeErr, CodeState, "Run is in progress")
	if triggers != 6 {
		t.Errorf("%d steps after a refused Close, want 6 (2 epochs x 3)", triggers)
	}
	ok(t, tr.Close())
}

// TestPrecision: TrainerOptions.Precision runs the tower function under
// autocast: with PrecisionBF16Mixed a linear layer computes in bfloat16 and
// the MSE loss in float32, the variables stay float32 and the model trains;
// PrecisionFP16Mixed is refused when the run starts (no loss scaler in this
// build), an unknown value at once.
// fcRegressionModel is one FC layer with an MSE cost on regressionSpec;
// seen (may be nil) gets the layer's output and the cost of every call.
func fcRegressionModel(t *testing.T, seen func(tw *Tower, y, cost *Tensor)) *Model {
	t.Helper()
	return must(NewModel(regressionSpec(), func(tw *Tower, in []*Tensor) error {
		y, err := tw.FC("fc", in[0], 1, nil)
		if err != nil {
			return err
		}
		defer y.Close()
		c, err := MSELoss(y, in[1])
		if err != nil {
			return err
		}
		defer c.Close()
		if seen != nil {
			seen(tw, y, c)
		}
		return tw.SetCost(c)
	})).of(t)
}

func TestPrecision(t *testing.T) {
	checkHandles(t)
	train := func(p Precision) (fc, cost DType, err error) {
		m := fcRegressionModel(t, func(tw *Tower, y, c *Tensor) {
			if !tw.IsBuilding() {
				fc, _ = y.DType()
				cost, _ = c.DType()
			}
		})
		defer m.Close()
		setOptimizer(t, m, "sgd", 0.1)
		o := quietOptions(1, 2, 50)
		o.Precision = p
		tr := must(NewTrainer(o)).of(t)
		defer tr.Close()
		ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
		if err := tr.Run(); err != nil {
			return fc, cost, err
		}
		if c, _, err := tr.ScalarLatest("cost"); err != nil || !(c < 0.05) {
			t.Errorf("%v: cost %v (%v) after 100 steps, want < 0.05", p, c, err)
		}
		w := must(m.Variable("fc/W")).of(t)
		defer w.Close()
		if d := must(w.DType()).of(t); d != DTypeFloat32 {
			t.Errorf("%v: the variable is %v, want float32", p, d)
		}
		return fc, cost, nil
	}
	if fc, cost, err := train(PrecisionFP32); err != nil || fc != DTypeFloat32 || cost != DTypeFloat32 {
		t.Errorf("fp32: layer %v, cost %v, %v", fc, cost, err)
	}
	if fc, cost, err := train(PrecisionBF16Mixed); err != nil || fc != DTypeBFloat16 || cost != DTypeFloat32 {
		t.Errorf("bf16-mixed: layer %v, cost %v (want bfloat16, float32), %v", fc, cost, err)
	}
	_, _, err := train(PrecisionFP16Mixed)
	wantError(t, err, CodeUnsupported, "use precision bf16-mixed there")
	_, err = NewTrainer(&TrainerOptions{Precision: 7})
	wantError(t, err, CodeInvalidArgument, "TrainerOptions.Precision is Precision(7)")
	if s := PrecisionBF16Mixed.String(); s != "bf16-mixed" {
		t.Errorf("String() = %q", s)
	}
}

// TrainerOptions.LossScaling reaches the trainer: with scaling on and
// GrowthInterval 2, four updates without overflow double the scale twice (the
// epoch's scalar "loss_scale"); zero fields take GradScaler's defaults (the
// first scale 65536); a field out of range is refused with its name.
func TestLossScaling(t *testing.T) {
	checkHandles(t)
	m := fcRegressionModel(t, nil)
	defer m.Close()
	setOptimizer(t, m, "sgd", 0.1)
	o := quietOptions(1, 1, 4)
	o.LossScaling = LossScaling{Mode: LossScalingOn, GrowthInterval: 2}
	tr := must(NewTrainer(o)).of(t)
	defer tr.Close()
	ok(t, tr.SetModel(m, regressionInput(t, 16, 64)))
	ok(t, tr.Run())
	if s, _, err := tr.ScalarLatest("loss_scale"); err != nil || s != 65536*4 {
		t.Errorf("loss_scale %v (%v) after 4 updates with GrowthInterval 2, want %v", s, err, 65536*4)
	}
	if s, _, err := tr.ScalarLatest("skipped_updates"); err != nil || s != 0 {
		t.Errorf("skipped_updates %v (%v), want 0", s, err)
	}
	_, err := NewTrainer(&TrainerOptions{LossScaling: LossScaling{Mode: LossScalingOn, BackoffFactor: 1.5}})
	wantError(t, err, CodeInvalidArgument, "backoff_factor")
	_, err = NewTrainer(&TrainerOptions{LossScaling: LossScaling{Mode: 9}})
	wantError(t, err, CodeInvalidArgument, "LossScaling.Mode is LossScalingMode(9)")
}
