// Package leasefloor keeps, for each lease key (a source, or one
// destination of a source: see Key), the floor of its due index: a row
// (next_attempt_at, id) before which every due delivery was leased when a
// Lease last looked. The deliveries in flight stay at the head of the due
// index, so without a floor every Lease steps over all of them again; with
// one, the next Lease of the key reads on after it, and from the head when
// that finds too few.
//
// A floor is a guess that goes stale: a delivery can become due before it
// (a lease runs out, a retry, a row another writer made due at an older
// time). So a floor is used for at most TTL after the last Lease that read
// the index from its head, and never by a Lease whose clock went back
// before the one that set it. Both engines keep one; they differ only in
// the clock that ages a floor (see New).
package leasefloor

import (
	"cmp"
	"sync"
	"time"
)

// TTL bounds how long a floor is used after the last lease that read the
// due index from its head: a delivery due behind the floor waits at most
// this much longer than it would have.
const TTL = time.Second

// Floor is a row of the due index, in its order: (next_attempt_at, id).
type Floor struct{ Due, ID int64 }

// Compare is -1, 0 or +1 as f comes before, at or after g in due order.
func (f Floor) Compare(g Floor) int {
	if c := cmp.Compare(f.Due, g.Due); c != 0 {
		return c
	}
	return cmp.Compare(f.ID, g.ID)
}

// Key is what a floor belongs to: the deliveries one Lease reads, those
// of Source's Destination, or of every destination of Source when
// Destination is empty. Each has its own due order, and so its own floor:
// a destination's is its part of the due index (which leads with the
// destination), the source's the merge of its destinations' parts. A
// floor of the source holds for each destination's part (every due
// delivery before it, of any destination, was leased), so a Lease of
// every destination reads each part on from it.
type Key struct{ Source, Destination string }

// Floors are the floors of a store's keys. The zero value is not usable:
// see New.
type Floors struct {
	// clock ages the floors; nil ages them by the Now of the leases.
	clock func() time.Time
	mu    sync.Mutex
	// m holds the floors by source, then destination: what makes a
	// delivery of a source due lowers every floor of that source.
	m map[string]map[string]entry
}

type entry struct {
	Floor
	now  int64     // ms: the Now of the lease that set the floor
	head time.Time // on the ageing clock: when a lease last read from the head
}

// New returns empty floors aged by clock. A nil clock ages a floor by the
// Now of the leases themselves: where every lease is this process's (the
// SQLite file), the leases' clock is the one clock there is. A store that
// shares its rows with other nodes passes its own clock (time.Now, whose
// monotonic reading no wall-clock step moves), so that a floor expires
// however the Now of the leases jumps, and tests can move it alone.
func New(clock func() time.Time) *Floors {
	return &Floors{clock: clock, m: map[string]map[string]entry{}}
}

// get is k's floor; f.mu is held.
func (f *Floors) get(k Key) (entry, bool) {
	e, ok := f.m[k.Source][k.Destination]
	return e, ok
}

// put records k's floor; f.mu is held.
func (f *Floors) put(k Key, e entry) {
	byDest := f.m[k.Source]
	if byDest == nil {
		byDest = map[string]entry{}
		f.m[k.Source] = byDest
	}
	byDest[k.Destination] = e
}

// forget forgets k's floor; f.mu is held.
func (f *Floors) forget(k Key) {
	byDest := f.m[k.Source]
	delete(byDest, k.Destination)
	if len(byDest) == 0 {
		delete(f.m, k.Source)
	}
}

// at is the ageing clock's reading for a lease at now (ms).
func (f *Floors) at(now int64) time.Time {
	if f.clock == nil {
		return time.UnixMilli(now)
	}
	return f.clock()
}

// Get returns the floor of k for a lease at now (ms), and whether there
// is one to use: one set within TTL of the last head read, by a lease not
// after now. A stale floor is forgotten.
func (f *Floors) Get(k Key, now int64) (Floor, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.get(k)
	if !ok {
		return Floor{}, false
	}
	if now < e.now || f.at(now).Sub(e.head) >= TTL {
		f.forget(k)
		return Floor{}, false
	}
	return e.Floor, true
}

// Set records fl as the floor of k, found by a lease at now (ms) that
// read the index from its head or, when head is false, on from the floor
// Get returned. The floor's age counts from the last head read, so that a
// lease that ran out behind it is found within TTL even while every lease
// reads on from the floor; a floor forgotten meanwhile (see Lower) is not
// set again from a read after it.
func (f *Floors) Set(k Key, fl Floor, now int64, head bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := f.at(now)
	if !head {
		e, ok := f.get(k)
		if !ok {
			return
		}
		at = e.head
	}
	f.put(k, entry{Floor: fl, now: now, head: at})
}

// Lower forgets the floors of source (of each of its destinations, and of
// the source as a whole) not before due, when a delivery of it is made due
// at due (ms): the delivery's id may come before them.
func (f *Floors) Lower(source string, due int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for dest, e := range f.m[source] {
		if due <= e.Due {
			f.forget(Key{source, dest})
		}
	}
}

// LowerAll forgets every floor not before due: a delivery of a source not
// known was made due at due (ms).
func (f *Floors) LowerAll(due int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for src, byDest := range f.m {
		for dest, e := range byDest {
			if due <= e.Due {
				f.forget(Key{src, dest})
			}
		}
	}
}

// Forget forgets the floor of k.
func (f *Floors) Forget(k Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forget(k)
}

// Reset forgets every floor.
func (f *Floors) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.m)
}

// Saved is a key's floor as Save found it, for Restore.
type Saved struct {
	e  entry
	ok bool
}

// Save returns the floor of k as it is now, there or not, so that a
// change rolled back with its transaction can be undone.
func (f *Floors) Save(k Key) Saved {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.get(k)
	return Saved{e, ok}
}

// Restore puts back the floor of k that Save returned.
func (f *Floors) Restore(k Key, s Saved) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.ok {
		f.put(k, s.e)
	} else {
		f.forget(k)
	}
}
