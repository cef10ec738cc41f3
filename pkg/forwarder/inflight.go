package forwarder

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// tokens bound the deliveries in flight in the whole process: each holds
// one (MaxInFlight in all) from when its lane or Ingest takes it until its
// attempt is over. Taking is a send, so a full channel is a busy process.
type tokens chan struct{}

// tryTake takes a token if one is free now.
func (t tokens) tryTake() bool {
	select {
	case t <- struct{}{}:
		return true
	default:
		return false
	}
}

// take waits for a token; false when ctx ended first.
func (t tokens) take(ctx context.Context) bool {
	select {
	case t <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// takeUpTo takes up to n tokens, as many as are free now.
func (t tokens) takeUpTo(n int) int {
	got := 0
	for got < n && t.tryTake() {
		got++
	}
	return got
}

// handBack returns n tokens.
func (t tokens) handBack(n int) {
	for range n {
		<-t
	}
}

// waitIdle returns once no delivery holds a token: it takes every token,
// which it can only then, and hands them back. Run calls it after the
// lanes stopped and Ingest stopped claiming, so none is taken meanwhile.
func (t tokens) waitIdle() {
	for range cap(t) {
		t <- struct{}{}
	}
	t.handBack(cap(t))
}

// inflight is all a lane holds: its slots in use (leased deliveries being
// sent, or sent and waiting for their outcome to be on record), the fresh
// deliveries Ingest handed it (the same, in a bound of their own), and the
// deliveries it leased ahead of a free slot, under the process's tokens,
// which each delivery holds one of while it is being sent. The lane's
// passes, its sends, the completer and Ingest change it only through these
// methods.
//
// A slot is free once its outcome is on record, not when its requests
// end: what a crash can make go out twice is what a lane holds in its
// slots, never more (PerSource a lane, leased and fresh together,
// MaxInFlight in all), and outcomes waiting for a commit hold back new
// sends rather than pile up. While fresh deliveries arrive, leased ones
// take at most PerSource-freshReserve, so a lane draining a backlog keeps
// room for fresh ones, which go out at once instead of behind it; and
// fresh ones always have freshReserve, so the first of them go out at once
// too, the lane holding at most PerSource+freshReserve for the moment its
// leased ones take to drop to their share.
//
// held is every delivery the lane holds, by id: leased (ahead, being
// sent, or waiting for its record) or fresh. A lease that runs out while
// its delivery is still here (a slow endpoint, a store that refuses the
// outcome for longer than the lease) makes it due again in the store, and
// this node's next Lease may return it: it is dropped there (admit), since
// this node is sending it already. Its lease is this node's again, and the
// outcome recorded under it. held[id] is true once that happened ("let
// again"): a Lease that ran while the outcome was being committed may
// also have returned it after the commit, due again (a retry), and then
// nobody would use that lease until it ran out; the forwarder hands it
// back when the delivery leaves held (Forwarder.handBack).
type inflight struct {
	tokens    tokens // the process's, shared by every lane
	perSource int    // the bound on slots and fresh ones together
	mu        sync.Mutex
	slots     int              // leased deliveries being sent or recorded
	sending   int              // of slots, those being sent (a token each)
	fresh     int              // fresh deliveries being sent or recorded
	ahead     []store.Delivery // leased ahead, waiting for a slot; no token
	held      map[int64]bool   // true: let again while held
	freshAt   time.Time        // when Ingest last asked for fresh room
}

// freshWindow is how long after fresh deliveries last arrived a lane keeps
// freshReserve for them: with none arriving, a backlog drains on all of
// PerSource (a fifth faster, bench/serve's forward row).
const freshWindow = time.Second

// freshReserve is the share of a lane's bound that leased deliveries
// leave to fresh ones: half (a quarter let a commit that took long fill
// it, and fresh ones waited seconds behind the backlog in bench/serve's
// latency row), a quarter in a lane too small to halve.
func freshReserve(perSource int) int {
	if perSource < 8 {
		return perSource / 4
	}
	return perSource / 2
}

// look is what a pass starts from: the lane's free slots, how many it
// holds leased ahead, and whether a slot is in use.
func (in *inflight) look() (room, queued int, busy bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.roomLocked(), len(in.ahead), in.slots > 0
}

// roomLocked is how many more leased deliveries may take a slot now.
func (in *inflight) roomLocked() int {
	reserve := 0
	if time.Since(in.freshAt) < freshWindow {
		reserve = freshReserve(in.perSource)
	}
	return min(in.perSource-reserve-in.slots, in.perSource-in.slots-in.fresh)
}

// takeAhead takes up to n of the deliveries leased ahead, oldest first,
// for slots whose tokens the caller holds.
func (in *inflight) takeAhead(n int) []store.Delivery {
	in.mu.Lock()
	defer in.mu.Unlock()
	n = min(n, len(in.ahead))
	ds := append([]store.Delivery(nil), in.ahead[:n]...)
	in.ahead = in.ahead[n:]
	return ds
}

// dropAhead takes every delivery leased ahead, to give back to the store.
func (in *inflight) dropAhead() []store.Delivery {
	in.mu.Lock()
	defer in.mu.Unlock()
	ds := in.ahead
	in.ahead = nil
	return ds
}

// start fills slots for a pass that holds n tokens: first (taken from
// ahead) and then as many of leased as the tokens and the room cover
// (fresh deliveries may have taken some since the pass looked); the rest
// waits ahead, first in front, and tokens left over go back. It returns
// the deliveries to send, each now in a slot.
func (in *inflight) start(n int, first, leased []store.Delivery) []store.Delivery {
	in.mu.Lock()
	k := max(0, min(n, in.roomLocked()))
	kf := min(k, len(first))
	kl := min(k-kf, len(leased))
	ds := slices.Concat(first[:kf], leased[:kl])
	in.ahead = slices.Concat(first[kf:], in.ahead, leased[kl:])
	in.slots += len(ds)
	in.sending += len(ds)
	in.mu.Unlock()
	in.tokens.handBack(n - len(ds))
	return ds
}

// next gives the token of a delivery whose requests are over (its slot
// stays taken until its outcome is on record: free) to the next delivery
// leased ahead, in a slot of its own, and says how many are left ahead
// then. With none, no free slot, or when stop is set, the token goes back
// and ok is false.
func (in *inflight) next(stop bool) (d store.Delivery, left int, ok bool) {
	in.mu.Lock()
	in.sending--
	if !stop && len(in.ahead) > 0 && in.roomLocked() > 0 {
		d, in.ahead = in.ahead[0], in.ahead[1:]
		in.slots++
		in.sending++
		left = len(in.ahead)
		in.mu.Unlock()
		return d, left, true
	}
	in.mu.Unlock()
	in.tokens.handBack(1)
	return store.Delivery{}, 0, false
}

// admit takes what a Lease returned into held, and drops from it what the
// lane holds already (see inflight): it returns the rest, in order, and
// how many it dropped.
func (in *inflight) admit(ds []store.Delivery) ([]store.Delivery, int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.held == nil {
		in.held = map[int64]bool{}
	}
	kept := ds[:0:0]
	for _, d := range ds {
		if _, ok := in.held[d.ID]; ok {
			in.held[d.ID] = true
			continue
		}
		in.held[d.ID] = false
		kept = append(kept, d)
	}
	return kept, len(ds) - len(kept)
}

// free ends what the lane holds of delivery id: its outcome is on record
// (or will never be), so its slot, or its fresh room, is free. It reports
// whether a Lease returned it again meanwhile.
func (in *inflight) free(id int64, fresh bool) (letAgain bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	letAgain = in.held[id]
	delete(in.held, id)
	if fresh {
		in.fresh--
	} else {
		in.slots--
	}
	return letAgain
}

// forget drops ds from held without a slot: given back, or left to lapse
// before a slot was theirs. It returns those a Lease returned again
// meanwhile.
func (in *inflight) forget(ds []store.Delivery) (letAgain []store.Delivery) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, d := range ds {
		if in.held[d.ID] {
			letAgain = append(letAgain, d)
		}
		delete(in.held, d.ID)
	}
	return letAgain
}

// sent reports whether no leased delivery of the lane is being sent:
// what its slots hold waits for its record, if anything.
func (in *inflight) sent() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sending == 0
}

// holding reports how many deliveries the lane holds.
func (in *inflight) holding() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.held)
}

// claimFresh takes room for up to want fresh deliveries: what leased ones
// leave of the lane's bound, and at least freshReserve, within the tokens
// free now. It returns how many.
func (in *inflight) claimFresh(want int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.freshAt = time.Now()
	room := max(in.perSource-in.slots-in.fresh, freshReserve(in.perSource)-in.fresh)
	n := in.tokens.takeUpTo(max(0, min(want, room)))
	in.fresh += n
	return n
}

// endFresh frees n fresh deliveries' room and tokens: never handed in.
func (in *inflight) endFresh(n int) {
	in.tokens.handBack(n)
	in.mu.Lock()
	in.fresh -= n
	in.mu.Unlock()
}

// leasePlan is what one pass of a lane leases: deliveries to send now, one
// per free slot (each needs a token), and more to hold ahead of a slot.
type leasePlan struct {
	slots int
	ahead int
}

// planLease decides how much a pass of a lane leases, from its endpoints'
// mode, its free slots (room), what it holds leased ahead (queued), whether
// a slot is in use (busy), the lease-ahead depth and the least group a
// busy lane leases. A zero plan leases nothing.
func planLease(m mode, room, queued int, busy bool, depth, group int) leasePlan {
	// A busy lane leases ahead, so that a slot that frees takes its next
	// delivery at once instead of waiting for a Lease round trip, which
	// on PostgreSQL is a large part of a delivery's time.
	p := leasePlan{slots: room}
	if busy {
		p.ahead = max(0, depth-queued)
	}
	switch m {
	case modeNone:
		// Every endpoint is open and no probe is due.
		return leasePlan{}
	case modeProbe:
		// One delivery, to make the probe with.
		p = leasePlan{slots: min(room, 1)}
	}
	p.slots = max(p.slots, 0)
	// A busy lane waits until it can lease a group: a Lease costs about
	// as much for one delivery as for many.
	if busy && p.slots+p.ahead < group {
		return leasePlan{}
	}
	return p
}

// startBatch puts a batch of n leased deliveries in slots, sent on one
// token the caller holds.
func (in *inflight) startBatch(n int) {
	in.mu.Lock()
	in.slots += n
	in.sending++
	in.mu.Unlock()
}

// batchSent says a batch's request is over: its slots stay taken until
// each outcome is on record (free).
func (in *inflight) batchSent() {
	in.mu.Lock()
	in.sending--
	in.mu.Unlock()
}
