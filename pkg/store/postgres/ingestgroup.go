package postgres

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/internal/gather"
	"github.com/evfwd/evfwd/pkg/store"
)

// Group commit of ingests: concurrent IngestLeased calls are queued and
// ingesters apply what was queued while they were busy as one statement
// (ingestSQL: one round trip, one transaction, one commit and so one WAL
// flush for them all), its messages in one order whatever calls they came
// from, so that groups sharing messages never deadlock. Each call keeps its
// own leases and returned deliveries; a message two calls of the group
// share is stored for the first, as a call's message another node stored
// is skipped; each learns the outcome only once the group committed.

// ingesters is the number of groups applied at once: enough that the
// server works on several (a group is one backend, so one core), few
// enough that each gathers the requests that arrive meanwhile. The node's
// cores stand for the server's; half the pool at most, the rest being for
// leases, completions and reads.
func ingesters(maxConns int32) int {
	return max(1, min(max(2, runtime.GOMAXPROCS(0)), int(maxConns)/2))
}

// maxIngestGroup bounds the messages of one group.
const maxIngestGroup = 2000

type ingestReq struct {
	ctx   context.Context
	in    *ingest
	done  chan ingestDone // buffered: the ingester never waits on the caller
	state atomic.Int32    // reqQueued, then reqStarted (by the ingester) or reqAbandoned (by the caller)
}

const (
	reqQueued int32 = iota
	reqStarted
	reqAbandoned
)

// start takes r into a group, unless its caller gave up first.
func (r *ingestReq) start() bool { return r.state.CompareAndSwap(reqQueued, reqStarted) }

// abandon withdraws r before a group takes it, and reports whether it did:
// once started, the caller waits for the outcome.
func (r *ingestReq) abandon() bool { return r.state.CompareAndSwap(reqQueued, reqAbandoned) }

// callTimeout bounds a group's statements when one of its callers has no
// deadline of its own: on a cut link nothing answers, and without a
// deadline a statement waits for the kernel to give up on the connection
// (many minutes). Collected requests carry a shorter deadline
// (store.CallTimeout).
const callTimeout = 30 * time.Second

// groupDeadline is when group's statements give up: the latest of its
// callers' deadlines, so no caller is failed before its own deadline
// (a slow but healthy server still commits them), and none waits much
// past it.
func groupDeadline(group []*ingestReq) time.Time {
	var last time.Time
	for _, r := range group {
		d, ok := r.ctx.Deadline()
		if !ok {
			d = time.Now().Add(callTimeout)
		}
		if d.After(last) {
			last = d
		}
	}
	return last
}

type ingestDone struct {
	leased []store.Delivery
	err    error
}

// ingester applies the queued ingests in groups until quit is closed (Close
// does, once no call is in progress: what is queued then was abandoned).
func (s *Store) ingester() {
	g := gather.Gatherer[*ingestReq]{In: s.ingests, Stop: s.quit, Max: maxIngestGroup,
		Weight: func(r *ingestReq) int { return len(r.in.keep) }}
	g.Run(s.ingestGroup)
}

// ingestGroup applies group and answers each request.
func (s *Store) ingestGroup(group []*ingestReq) {
	// A caller that gave up before its group started is not applied.
	live := group[:0]
	for _, r := range group {
		if !r.start() {
			continue // its caller left; nobody reads done
		}
		if err := r.ctx.Err(); err != nil {
			r.done <- ingestDone{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(s.stop, groupDeadline(live))
	defer cancel()
	if len(live) == 1 {
		r := live[0]
		leased, err := s.ingestOne(ctx, r.in)
		s.orphaned(r.in, err)
		r.done <- ingestDone{leased, err}
		return
	}
	ins := make([]*ingest, len(live))
	for i, r := range live {
		ins[i] = r.in
	}
	var leased [][]store.Delivery
	// The group runs to its end (or its deadline) whatever its callers'
	// contexts: it is theirs together, and each waits for its answer.
	err := retryTransient(func() error {
		var err error
		leased, err = s.ingestBatch(ctx, ins)
		return err
	})
	if err == nil {
		for i, r := range live {
			r.done <- ingestDone{leased: leased[i]}
		}
		return
	}
	// Nothing of the group was committed (one transaction). One request
	// the server refuses (a NUL byte in a text, say) must not fail the
	// others: each runs alone, with its own outcome. A server that
	// cannot be reached fails them all alike, at once.
	groupErr := err
	for _, r := range live {
		if unreachable(groupErr) {
			s.orphaned(r.in, groupErr)
			r.done <- ingestDone{err: groupErr}
			continue
		}
		leased, err := s.ingestOne(ctx, r.in)
		s.orphaned(r.in, err)
		r.done <- ingestDone{leased, err}
	}
}

// ingestOne runs one request's statement, which commits on its own.
func (s *Store) ingestOne(ctx context.Context, in *ingest) ([]store.Delivery, error) {
	var leased [][]store.Delivery
	err := retryTransient(func() error {
		var err error
		leased, err = s.ingestBatch(ctx, []*ingest{in})
		return err
	})
	if err != nil {
		return nil, err
	}
	return leased[0], nil
}

// ingestBatch runs the calls' one statement (ingestSQL), which commits
// them together or not at all, and returns each call's leased deliveries.
func (s *Store) ingestBatch(ctx context.Context, group []*ingest) ([][]store.Delivery, error) {
	until := make([]int64, len(group))
	for i, in := range group {
		until[i] = s.leaseClock(in.lease.Until)
	}
	st := newIngestStmt(group, until)
	rows, err := s.pool.Query(ctx, ingestSQL, st.args...)
	if err != nil {
		return nil, err
	}
	return st.read(rows)
}
