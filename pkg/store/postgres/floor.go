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
// Every delivery in flight stays at the head of deliveries_due (a lease
// changes no indexed column), and every one completed leaves there an
// entry pointing at the row version it replaced, until a vacuum: while a
// backlog drains, each Lease stepped over all of them (half a millisecond
// a Lease at 100,000, growing with the drain, until autovacuum comes by).
// A lease that got all it asked for knows that nothing due and unleased
// comes before the newest row it took (the scan is in order, and took
// every row it did not skip as leased or locked); the next Lease of that
// source starts its scan after it (leaseSQL's $6, $7) and reads from the head
// only when that scan finds too few. A floor is forgotten
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
	due, id int64     // the last row the lease took, in the index's order
	now     int64     // the lease's Now
	at      time.Time // when it was set (monotonic)
}

// get returns the floor of source for a lease at now: the due index's
// (next_attempt_at, id) to read after, or (0, 0) for none.
func (f *floors) get(source string, now int64) (due, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.m[source]
	if !ok {
		return 0, 0
	}
	if now < fl.now || time.Since(fl.at) > floorTTL {
		delete(f.m, source)
		return 0, 0
	}
	return fl.due, fl.id
}

// set records (due, id) as the floor of source, set by a lease at now.
func (f *floors) set(source string, due, id, now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string]floor)
	}
	f.m[source] = floor{due: due, id: id, now: now, at: time.Now()}
}

// lower forgets the floor of source when a delivery is made due at due,
// not after it (the delivery's id may come before the floor's).
func (f *floors) lower(source string, due int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.m[source]; ok && due <= fl.due {
		delete(f.m, source)
	}
}

// forget forgets the floor of source.
func (f *floors) forget(source string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, source)
}

// lowerAll forgets every floor not before due: a delivery of a source
// not known was made due at due.
func (f *floors) lowerAll(due int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for src, fl := range f.m {
		if due <= fl.due {
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
