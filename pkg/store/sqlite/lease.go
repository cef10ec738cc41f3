package sqlite

import (
	"strconv"
)

// leases are the store's leases, in memory: one process uses a file at a
// time (see Lock), and Reclaim releases every lease when the next one
// starts, so a lease need never reach the disk. Taking one is a read, and
// a group of only Lease calls commits nothing and waits for no fsync.
// Only the writer goroutine touches them, from inside ops: a lease taken
// or dropped in a transaction that then fails is at worst a delivery made
// twice, which at-least-once allows.
type leases struct {
	by       map[int64]leaseOf // by delivery id
	inSource map[string]int    // entries of by per source
	// cursors are where each source's last Lease stopped in the due
	// index: the next one reads on from there instead of stepping again
	// over the leased rows at the index's head.
	cursors map[string]cursor
}

// cursor is a place in the due index: after the row (at, id).
type cursor struct {
	at, id int64
	// scanned is when Lease last read the index from its start, which it
	// does at least once a second, so that a row due before the cursor (a
	// retry, a lease run out) waits no longer than that.
	scanned int64
}

// start is the cursor before every row.
var start = cursor{at: -1}

type leaseOf struct {
	source, owner string
	until         int64 // ms; from then on it is no lease
}

func newLeases() leases {
	return leases{by: map[int64]leaseOf{}, inSource: map[string]int{}, cursors: map[string]cursor{}}
}

// take records a lease of delivery id, replacing any.
func (ls *leases) take(id int64, l leaseOf) {
	if old, ok := ls.by[id]; ok {
		ls.inSource[old.source]--
	}
	ls.by[id] = l
	ls.inSource[l.source]++
}

// drop forgets the lease of delivery id.
func (ls *leases) drop(id int64) {
	if old, ok := ls.by[id]; ok {
		ls.inSource[old.source]--
		delete(ls.by, id)
	}
}

// held reports whether delivery id is under a lease that has not run out
// at now.
func (ls *leases) held(id, now int64) bool {
	l, ok := ls.by[id]
	return ok && l.until > now
}

// holds reports whether owner holds the lease of delivery id, run out or
// not: like a lease_owner column, it is the holder's until someone else
// takes it.
func (ls *leases) holds(id int64, owner string) bool {
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
	clear(ls.inSource)
	clear(ls.cursors)
	return n
}

// jsonIDs is ids as a JSON array, for SQL's json_each.
func jsonIDs(ids []int64) string {
	b := []byte{'['}
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}
