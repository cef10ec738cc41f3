package collector

import (
	"sync/atomic"
)

// The memory of bodies in flight (issue 43). A body is read into a buffer
// that starts small and doubles as its bytes arrive, never sized by the
// Content-Length a client declares: 8,000 connections that each declared
// 501 KiB and sent one byte made the Go heap 4.2 GB, with no write key
// needed. Each buffer, and the inflater of a gzip body, is reserved from
// one budget for the whole Handler before it is allocated, and held until
// the request is answered; past the budget a request is answered 503 with
// Retry-After, at once, and its connection closed.

const (
	// DefaultBodyBudget is Config.BodyBudget's default: some 130 bodies
	// at MaxBatchBytes at once, or 16,384 requests whose first bytes have
	// arrived (bodyStart each; their connections cost net/http some 14
	// KiB of heap each besides).
	DefaultBodyBudget = 64 << 20
	// bodyStart is the most a body's buffer starts with, whatever length
	// the request declares: what net/http's own buffer of a connection
	// holds. A body that declares less starts at its length, plus one byte
	// to see its end, and is read with one allocation.
	bodyStart = 4 << 10
	// gzipState is what reading a gzip body holds besides its buffer:
	// compress/gzip's reader and its 32 KiB window, with room to spare
	// (docs/PERFORMANCE.md, "Figures behind the code").
	gzipState = 48 << 10
	// minBodyBudget is the least budget that reads a batch at the limit,
	// gzipped: its buffer at MaxBatchBytes+1 and the inflater. (What a
	// request holds is its buffer's capacity; the smaller one a doubling
	// leaves is garbage.)
	minBodyBudget = MaxBatchBytes + 1 + gzipState
)

// budget is the bytes of request bodies the Handler may hold at once.
type budget struct {
	limit int64
	used  atomic.Int64
	// full is set by the refusal that reports the budget spent, and
	// cleared once half of it is free again: one report an episode.
	full atomic.Bool
}

// take reserves n bytes, unless that would exceed the limit.
func (b *budget) take(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// give returns n bytes taken.
func (b *budget) give(n int64) {
	if b.used.Add(-n) <= b.limit/2 && b.full.Load() {
		b.full.Store(false)
	}
}

// firstRefusal says whether a refusal is the first since the budget was
// last half free (to be reported; the others are not).
func (b *budget) firstRefusal() bool { return b.full.CompareAndSwap(false, true) }

// reservation is what one request holds of the budget.
type reservation struct {
	budget *budget
	held   int64
}

// grow reserves n bytes more; false when the budget has no room.
func (r *reservation) grow(n int64) bool {
	if !r.budget.take(n) {
		return false
	}
	r.held += n
	return true
}

// release gives back everything the request holds.
func (r *reservation) release() {
	if r.held > 0 {
		r.budget.give(r.held)
		r.held = 0
	}
}
