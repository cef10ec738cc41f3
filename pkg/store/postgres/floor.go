package postgres

import (
	"sync"
	"time"
)

// floorTTL bounds how long a floor (see floors) is used after the last
// lease that read the due index from its head: a delivery behind it (one
// another node made due before it, as clocks differ between nodes; a
// lease that ran out) waits at most this much longer than it would have.
const floorTTL = time.Second

// floors spare Lease the head of the due index under a backlog.
//
// Every delivery in flight stays at the head of deliveries_due (a lease
// changes no indexed column), and every one completed leaves there an
// entry pointing at the row version it replaced, until a vacuum: while a
// backlog drains, each Lease stepped over all of them (half a millisecond
// a Lease at 100,000, growing with the drain, until autovacuum comes by).
// A lease that got all it asked for knows that nothing due and unleased
// comes before the last row its last scan took (the scan is in order, and
// took every row it did not skip as leased or locked); the next Lease of
// that source starts its scan after it (leaseSQL's $6, $7) and reads from
// the head when that scan finds too few. A floor is forgotten floorTTL
// after the last lease that read from the head, when the clock given to
// Lease goes back, and whenever this Store makes a delivery of the source
// due at or before it (an ingest, a completion to retry, Retry, Release,
// Reclaim); the others make deliveries due at their own now, after every
// floor of a live node as long as their clocks agree within floorTTL.
// What else a floor can pass over, a lease that ran out, a due row that
// another transaction held locked (SKIP LOCKED) and then let go
// unchanged, or one committed late with an older time, waits at most
// floorTTL longer.
type floors struct {
	mu    sync.Mutex
	m     map[string]floor // by source
	clock func() time.Time // nil: time.Now (a test's seam)
}

func (f *floors) now() time.Time {
	if f.clock != nil {
		return f.clock()
	}
	return time.Now()
}

type floor struct {
	due, id int64     // the last row a lease took, in the index's order
	now     int64     // the lease's Now
	at      time.Time // when a lease last read the index from its head (monotonic)
}

// get returns the floor of source for a lease at now: the due index's
// (next_attempt_at, id) to read after, or (0, 0) to read from the head.
func (f *floors) get(source string, now int64) (due, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.m[source]
	if !ok {
		return 0, 0
	}
	if now < fl.now || f.now().Sub(fl.at) > floorTTL {
		delete(f.m, source)
		return 0, 0
	}
	return fl.due, fl.id
}

// set records (due, id) as the floor of source, set by a full lease at
// now that read the index from its head or, when head is false, from the
// floor before. A floor is read from the head once every floorTTL at
// least: its age counts from the last lease that did, so a lease that ran
// out behind it (its holder is gone) is taken over within floorTTL, even
// while a backlog keeps every lease full. A floor forgotten meanwhile
// (see lower) is not set again from one read after it.
func (f *floors) set(source string, due, id, now int64, head bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := f.now()
	if !head {
		fl, ok := f.m[source]
		if !ok {
			return
		}
		at = fl.at
	}
	if f.m == nil {
		f.m = make(map[string]floor)
	}
	f.m[source] = floor{due: due, id: id, now: now, at: at}
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
