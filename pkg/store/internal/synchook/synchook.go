// Package synchook is the test hook both stores call between the steps of
// an audience or trait sync, and the names of those steps, so that the
// conformance suite can stop a sync where a crash would.
package synchook

import "sync/atomic"

// The steps of a sync at which the hook is called.
const (
	Staged  = "staged"  // the whole list is staged
	Diffed  = "diffed"  // every message is in the outbox; the switch is next
	Flipped = "flipped" // the new list is current: the sync is committed
	Moved   = "moved"   // after each chunk of messages moved into the queue
	Dropped = "dropped" // after each chunk of the replaced list deleted
)

// Hook holds the function a store's SetSyncHook sets; the zero Hook calls
// nothing. It is safe to set while a sync runs.
type Hook struct {
	fn atomic.Pointer[func(step string) error]
}

// Set makes fn the hook; nil removes it.
func (h *Hook) Set(fn func(step string) error) {
	if fn == nil {
		h.fn.Store(nil)
		return
	}
	h.fn.Store(&fn)
}

// Call calls the hook for step; its error stops the sync at once.
func (h *Hook) Call(step string) error {
	if fn := h.fn.Load(); fn != nil {
		return (*fn)(step)
	}
	return nil
}
