package forwarder

import (
	"sync"
	"sync/atomic"
	"time"
)

// Backoff of the completer's retries of outcomes the store refused: from
// retryFirst, doubling, to retryMax, so that a store that writes again (a
// disk with space again) has them within a second.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = time.Second
)

// retryDelay is the wait before the retry that follows fails failed
// retries in a row.
func retryDelay(fails int) time.Duration {
	if fails >= 5 { // retryFirst<<5 is past retryMax already
		return retryMax
	}
	return min(retryFirst<<fails, retryMax)
}

// unrecorded are the outcomes of deliveries that were made but that the
// store refused to record (a full disk, a database out of reach). They
// wait here, oldest first, until the completer records them; meanwhile
// the delivery is still leased to this process in the store, and Lease
// would hand it out again once that lease ran out, as if it had never been
// sent (the lane would drop it: it holds it, see inflight). So while one
// waits the forwarder leases nothing and starts no fresh delivery
// (Forwarder.paused), and what waits is bounded by what was in flight
// when the first one was refused (MaxInFlight).
//
// The completer alone takes outcomes out; the completer and hold (a
// delivery goroutine) put them in.
type unrecorded struct {
	mu   sync.Mutex
	list []finishing
	n    atomic.Int64 // len(list), for the lanes to read without the lock
	// kick wakes the completer when hold kept an outcome: the completer
	// then arms its retry.
	kick chan struct{}
}

func newUnrecorded() *unrecorded { return &unrecorded{kick: make(chan struct{}, 1)} }

// keep adds what the store refused to record, and wakes the completer.
func (u *unrecorded) keep(group []finishing) {
	u.mu.Lock()
	u.list = append(u.list, group...)
	u.n.Store(int64(len(u.list)))
	u.mu.Unlock()
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// waiting reports whether an outcome waits to be recorded.
func (u *unrecorded) waiting() bool { return u.n.Load() > 0 }

// len is how many outcomes wait.
func (u *unrecorded) len() int { return int(u.n.Load()) }

// first returns a copy of up to n of the oldest outcomes. They stay
// counted (waiting holds) until drop: a lane must not lease while they
// are being written.
func (u *unrecorded) first(n int) []finishing {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]finishing(nil), u.list[:min(n, len(u.list))]...)
}

// drop forgets the n oldest outcomes, now on record (or given up).
func (u *unrecorded) drop(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.list[:n]) // their attempts' excerpts go with them
	u.list = u.list[n:]
	if len(u.list) == 0 {
		u.list = nil
	}
	u.n.Store(int64(len(u.list)))
}
