package tptrain

import (
	"sync"
	"sync/atomic"
)

// handle is what every wrapper of a library handle embeds: the pointer, the
// lock that calls hold while they use it (release takes it exclusively, so
// Close waits for calls in progress), whether the library owns the handle
// (borrowed: release only forgets it), and releasing it exactly once. The
// wrappers keep their own finalizer (runtime.SetFinalizer needs the outer
// pointer) and drop it when release reports that it freed the handle.
// P is the C pointer type (*C.tpt_model, ...): Go 1.24 and later refuse an
// incomplete C type itself as a type argument.
type handle[P comparable] struct {
	mu       sync.RWMutex
	ptr      P
	borrowed bool
	// Calls in progress that run Go code of the user's (a model's Build and
	// Infer run its tower function): a Close from inside one of them cannot
	// wait for it, so it is deferred to the end of the last such call.
	busy    atomic.Int32
	pending atomic.Pointer[func(P)]
}

// enter marks a call that may run the user's Go code; the function it
// returns ends it, and releases the handle if a Close came meanwhile. Call
// the returned function after unlocking h.mu.
func (h *handle[P]) enter() (leave func()) {
	h.busy.Add(1)
	return func() {
		if h.busy.Add(-1) == 0 {
			if free := h.pending.Swap(nil); free != nil {
				h.release(*free)
			}
		}
	}
}

// release frees the handle with free unless it is borrowed, and forgets it.
// It reports whether it freed one. A released handle is left alone. While a
// call marked by enter runs (Close from the tower function of the model's
// own Build), the release waits for its end instead and reports false.
func (h *handle[P]) release(free func(P)) (freed bool) {
	var none P
	if h.busy.Load() > 0 {
		h.pending.Store(&free)
		if h.busy.Load() > 0 {
			return false
		}
		if h.pending.Swap(nil) == nil {
			return false // the call ended and released it
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr == none {
		return false
	}
	if !h.borrowed {
		free(h.ptr)
		freed = true
	}
	h.ptr = none
	return freed
}

// acquire locks h, shared or exclusive, and returns its pointer; or, when
// the wrapper is nil or released, an *Error "method: use of closed kind"
// (CodeInvalidArgument) with nothing locked. On success the caller unlocks:
// h.mu.RUnlock when shared, h.mu.Unlock otherwise.
func (h *handle[P]) acquire(shared bool, kind, method string) (P, error) {
	var none P
	if h == nil {
		return none, &Error{Code: CodeInvalidArgument, Message: method + ": use of closed " + kind}
	}
	if shared {
		h.mu.RLock()
	} else {
		h.mu.Lock()
	}
	if h.ptr == none {
		if shared {
			h.mu.RUnlock()
		} else {
			h.mu.Unlock()
		}
		return none, &Error{Code: CodeInvalidArgument, Message: method + ": use of closed " + kind}
	}
	return h.ptr, nil
}
