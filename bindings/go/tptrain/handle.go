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
type handle[T any] struct {
	mu       sync.RWMutex
	ptr      *T
	borrowed bool
	// Calls in progress that run Go code of the user's (a model's Build and
	// Infer run its tower function): a Close from inside one of them cannot
	// wait for it, so it is deferred to the end of the last such call.
	busy    atomic.Int32
	pending atomic.Pointer[func(*T)]
}

// enter marks a call that may run the user's Go code; the function it
// returns ends it, and releases the handle if a Close came meanwhile. Call
// the returned function after unlocking h.mu.
func (h *handle[T]) enter() (leave func()) {
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
func (h *handle[T]) release(free func(*T)) (freed bool) {
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
	if h.ptr == nil {
		return false
	}
	if !h.borrowed {
		free(h.ptr)
		freed = true
	}
	h.ptr = nil
	return freed
}

// acquire locks h, shared or exclusive, and returns its pointer; or, when
// the wrapper is nil or released, an *Error "method: use of closed kind"
// (CodeInvalidArgument) with nothing locked. On success the caller unlocks:
// h.mu.RUnlock when shared, h.mu.Unlock otherwise.
func (h *handle[T]) acquire(shared bool, kind, method string) (*T, error) {
	if h == nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: method + ": use of closed " + kind}
	}
	if shared {
		h.mu.RLock()
	} else {
		h.mu.Lock()
	}
	if h.ptr == nil {
		if shared {
			h.mu.RUnlock()
		} else {
			h.mu.Unlock()
		}
		return nil, &Error{Code: CodeInvalidArgument, Message: method + ": use of closed " + kind}
	}
	return h.ptr, nil
}
