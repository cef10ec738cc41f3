package postgres

import (
	"time"

	"github.com/evfwd/evfwd/pkg/store/internal/leasefloor"
)

// newFloors returns the floors that spare Lease the head of the due index
// under a backlog (leasefloor).
//
// Every delivery in flight stays at the head of deliveries_due (a lease
// changes no indexed column), and every one completed leaves there an
// entry pointing at the row version it replaced, until a vacuum: while a
// backlog drains, each Lease stepped over all of them (half a millisecond
// a Lease at 100,000, growing with the drain, until autovacuum comes by).
// A lease that got all it asked for knows that nothing due and unleased
// comes before the last row its last scan took (the scan is in order, and
// took every row it did not skip as leased or locked); the next Lease of
// that key (one destination of the source, which reads its part of the
// due index, or the source as a whole, which reads every destination's
// after it and merges them: leaseEverySQL) starts its scan after it
// (leaseSQL's $6, $7) and reads from the head when that scan finds too
// few.
//
// Other nodes lease and make rows due too, so a floor ages by this node's
// clock (leasefloor.TTL), whatever the Now of the leases. It is forgotten
// whenever this Store makes a delivery of the source due at or before it
// (an ingest, a completion to retry, Retry, Release, Reclaim, a sync run,
// a deletion); the others make deliveries due at their own now, after
// every floor of a live node as long as their clocks agree within the TTL.
// What else a floor can pass over, a lease that ran out, a due row that
// another transaction held locked (SKIP LOCKED) and then let go
// unchanged, or one committed late with an older time, waits at most the
// TTL longer.
func newFloors() *leasefloor.Floors { return leasefloor.New(time.Now) }
