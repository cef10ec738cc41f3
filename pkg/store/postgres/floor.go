package postgres

import (
	"sync"
	"time"
)

// floorTTL bounds how long a floor (see floors) is used: a delivery that
// another node made due before it (clocks differ between nodes) waits at
// most this much longer than it would have for its lease.
const floorTTL = time.Second

// floors spare Lease the dead head of the due index under a backlog.
//
// Every lease leaves an entry of deliveries_due pointing at the row
// version it replaced (a lease changes next_attempt_at, so it is no HOT
// update), at the head of the index, where it stays until a vacuum: while
// a backlog drains, each Lease stepped over every entry of every delivery
// leased before it (half a millisecond a Lease at 100,000, growing with
// the drain, until autovacuum comes by). A lease that got all it asked
// for knows that nothing due comes before the oldest row it took; the next
// Lease of that source starts its scan there (leaseSQL's $6) and reads
// from the head only when that scan finds too few. A floor is forgotten
// once it is older than floorTTL, when the clock given to Lease goes back,
// and whenever this Store makes a delivery of the source due before it
// (an ingest, a completion to retry, Retry, Release, Reclaim); the others
// make deliveries due at their own now, after every floor of a live node
// as long as their clocks agree within floorTTL. What else a floor can
// pass over, a due row that another transaction held locked (SKIP LOCKED)
// and then let go unchanged, or one committed late with an older time,
// waits at most floorTTL longer.
type floors struct {
	mu sync.Mutex
	m  map[string]floor // by source
}

type floor struct {
	due int64     // the oldest next attempt the lease took
	now int64     // the lease's Now
	at  time.Time // when it was set (monotonic)
}

// get returns the floor of source for a lease at now, or 0 (none).
func (f *floors) get(source string, now int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.m[source]
	if !ok {
		return 0
	}
	if now < fl.now || time.Since(fl.at) > floorTTL {
		delete(f.m, source)
		return 0
	}
	return fl.due
}

// set records due as the floor of source, set by a lease at now.
func (f *floors) set(source string, due, now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string]floor)
	}
	f.m[source] = floor{due: due, now: now, at: time.Now()}
}

// lower forgets the floor of source when a delivery is made due at due
// before it.
func (f *floors) lower(source string, due int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.m[source]; ok && due < fl.due {
		delete(f.m, source)
	}
}

// forget forgets the floor of source.
func (f *floors) forget(source string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, source)
}

// lowerAll forgets every floor after due: a delivery of a source not
// known was made due at due.
func (f *floors) lowerAll(due int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for src, fl := range f.m {
		if due < fl.due {
			delete(f.m, src)
		}
	}
}

// reset forgets every floor.
func (f *floors) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.m)
}
