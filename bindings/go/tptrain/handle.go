package tptrain

import "sync"

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
}

// release frees the handle with free unless it is borrowed, and forgets it.
// It reports whether it freed one. A released handle is left alone.
func (h *handle[T]) release(free func(*T)) (freed bool) {
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
