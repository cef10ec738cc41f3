package sqlite

import (
	"strconv"

	"github.com/evfwd/evfwd/pkg/store/internal/leasefloor"
)

// leases are the store's leases, in memory: one serve uses a file at a
// time (see Lock), and Reclaim releases every lease when the next one
// starts, so a lease need never reach the disk. Taking one is a read, and
// a group of only Lease calls commits nothing and waits for no fsync.
// Only the writer goroutine touches them, from inside ops, and what an op
// changed is undone when its part of the transaction is (journal).
//
// A tool that opens the file beside serve (evfwd deliveries) has its own,
// empty, leases: its Retry cannot see serve's, and resets a delivery in
// flight too; the outcome serve records for it then stands.
type leases struct {
	by map[int64]leaseOf // by delivery id
	// journal undoes, last first, the changes of the transaction under
	// way (see mark, undo, settle).
	journal []func()
	// floors are where each key's last Lease stopped in the due
	// index: the next one reads on from there instead of stepping again
	// over the leased rows at the index's head. Every lease of the file is
	// this process's, so a floor ages by the leases' own Now: a row due
	// before it (a retry, a lease run out, a row another process made
	// due) waits at most leasefloor.TTL of their clock.
	floors *leasefloor.Floors
}

type leaseOf struct {
	source, owner string
	until         int64 // ms; from then on it is no lease
}

func newLeases() leases {
	return leases{by: map[int64]leaseOf{}, floors: leasefloor.New(nil)}
}

// take records a lease of delivery id, replacing any.
func (ls *leases) take(id int64, l leaseOf) {
	ls.keep(id)
	ls.by[id] = l
}

// setFloor sets k's floor (leasefloor.Floors.Set), journaled.
func (ls *leases) setFloor(k leasefloor.Key, fl leasefloor.Floor, now int64, head bool) {
	old := ls.floors.Save(k)
	ls.journal = append(ls.journal, func() { ls.floors.Restore(k, old) })
	ls.floors.Set(k, fl, now, head)
}

// drop forgets the lease of delivery id.
func (ls *leases) drop(id int64) {
	ls.keep(id)
	delete(ls.by, id)
}

// keep journals delivery id's lease as it is now, there or not.
func (ls *leases) keep(id int64) {
	old, had := ls.by[id]
	ls.journal = append(ls.journal, func() {
		if had {
			ls.by[id] = old
		} else {
			delete(ls.by, id)
		}
	})
}

// mark is the journal's length, for undo.
func (ls *leases) mark() int { return len(ls.journal) }

// undo reverts the changes journaled since mark.
func (ls *leases) undo(mark int) {
	for i := len(ls.journal) - 1; i >= mark; i-- {
		ls.journal[i]()
	}
	ls.journal = ls.journal[:mark]
}

// settle keeps the changes journaled: their transaction is over.
func (ls *leases) settle() {
	clear(ls.journal)
	ls.journal = ls.journal[:0]
}

// leasedAt reports whether delivery id is under a lease that has not run
// out at now: whether a Lease must skip it.
func (ls *leases) leasedAt(id, now int64) bool {
	l, ok := ls.by[id]
	return ok && l.until > now
}

// ownedBy reports whether owner holds the lease of delivery id, run out
// or not: like a lease_owner column, it is the holder's until someone else
// takes it, and its completion applies.
func (ls *leases) ownedBy(id int64, owner string) bool {
	l, ok := ls.by[id]
	return ok && l.owner == owner
}

// live is a JSON array of the deliveries under a lease at now, for SQL's
// json_each.
func (ls *leases) live(now int64) string {
	b := []byte{'['}
	for id, l := range ls.by {
		if l.until > now {
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
		}
	}
	return string(append(b, ']'))
}

// clear drops every lease and reports how many there were.
func (ls *leases) clear() int {
	n := len(ls.by)
	clear(ls.by)
	ls.floors.Reset()
	return n
}
