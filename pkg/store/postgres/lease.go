package postgres

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/evfwd/evfwd/internal/gather"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/leasefloor"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
	"github.com/jackc/pgx/v5"
)

// leaseSQL locks up to $3 due, unleased deliveries of one destination
// ($9) of a source ($1), skipping rows another node is leasing right now,
// and leases them in the same statement, read in deliveries_due's order,
// so that another destination's backlog (one paused, a million pending)
// is never read to find them. A lease that ran out counts as none: that
// is how a dead node's work is taken over. Only deliveries after ($6,
// $7) in the due index's order are taken (a floor, see newFloors).
//
// The lease changes no indexed column, so the server updates the row in
// its page without touching an index (a HOT update; the table leaves room
// in each page for it): moving the next attempt to the lease's end, as
// leases did before, added an entry to each of the table's indexes and
// was most of a Lease's time in the server. Leased rows stay at the head
// of the due index, and the floor skips them.
//
// The picked rows are joined by primary key: leaseSettings leave the
// server's generic plan no other way (without them, not knowing $3, it
// hashed the whole deliveries table).
//
// What is due, $2, is the node's clock; whether a lease ran out, and when
// the new one does ($8 and $5 after the database's clock, see leaseClock),
// the database's.
const leaseSQL = leaseHead + `(SELECT id FROM deliveries
	WHERE status = 'pending' AND source = $1 AND destination = $9` + dueTail + `
	FOR UPDATE SKIP LOCKED) p` + leaseTail

// leaseEverySQL is leaseSQL for every destination of the source, in due
// order across them: deliveries_due keeps each destination's in order,
// not the source's, so it picks up to $3 of each destination's
// (destinationsCTE) and the first $3 of those (a sort of at most $3 per
// destination), then locks them, skipping any another node is leasing
// right now. It locks only what it leases, so a destination's own lane
// never skips a row it holds (and its floor never passes over one); it
// leases fewer than $3 when it skipped some. Off the forwarder's path:
// the forwarder leases a destination at a time.
const leaseEverySQL = leaseHead + `(WITH RECURSIVE ` + destinationsCTE + `,
	picked AS (SELECT e.id FROM dest, LATERAL (SELECT id, next_attempt_at FROM deliveries
			WHERE status = 'pending' AND source = $1 AND destination = dest.name` + dueTail + `) e
		ORDER BY e.next_attempt_at, e.id LIMIT $3)
	SELECT id FROM deliveries WHERE id IN (SELECT id FROM picked)
		AND status = 'pending' AND lease_expires_at < ` + clockSQL + ` + $8
	FOR UPDATE SKIP LOCKED) p` + leaseTail

// destinationsCTE is dest (name): the destinations of the source ($1)
// with pending deliveries, in order, and a last NULL: a seek in
// deliveries_due for each, the first after the last (min is an index
// seek, not a read of the entries between).
const destinationsCTE = `dest (name) AS (
	SELECT min(destination) FROM deliveries WHERE status = 'pending' AND source = $1
	UNION ALL
	SELECT (SELECT min(destination) FROM deliveries WHERE status = 'pending' AND source = $1 AND destination > dest.name)
	FROM dest WHERE dest.name IS NOT NULL)`

const (
	leaseHead = `UPDATE deliveries d SET lease_owner = $4, lease_expires_at = ` + clockSQL + ` + $5
FROM `
	dueTail = ` AND next_attempt_at <= $2 AND (next_attempt_at, id) > ($6, $7)
		AND lease_expires_at < ` + clockSQL + ` + $8
	ORDER BY next_attempt_at, id LIMIT $3`
	leaseTail = `, messages m
WHERE d.id = p.id AND m.id = d.message
RETURNING ` + rowscan.LeasedColumns
)

// Lease implements store.Store.
func (s *Store) Lease(ctx context.Context, r store.LeaseRequest) ([]store.Delivery, error) {
	if r.Limit <= 0 {
		return nil, nil
	}
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	now := store.Millis(r.Now)
	var out, got []store.Delivery
	k := leasefloor.Key{Source: r.Source, Destination: r.Destination}
	floor, ok := s.floors.Get(k, now)
	head := !ok // this step reads the due index from its head
	for {
		err = retryTransient(func() error {
			got, err = s.lease(ctx, r, r.Limit-len(out), floor, head)
			return err
		})
		if err != nil {
			if len(out) > 0 {
				// The first step's leases stand; they are returned, the
				// error is not.
				break
			}
			return nil, classify(err)
		}
		out = append(out, got...)
		if len(out) == r.Limit || head {
			break
		}
		// Too few after the floor: read from the head for the rest.
		floor, head = leasefloor.Floor{}, true
	}
	if err == nil && len(out) == r.Limit {
		// Nothing due and unleased comes before the last row of the last
		// step: the floor. (When that step read from the head, rows
		// between its last and the old floor may be due: the steps
		// before it do not count.)
		last := got[0]
		for _, d := range got[1:] {
			if d.NextAttempt.After(last.NextAttempt) || d.NextAttempt.Equal(last.NextAttempt) && d.ID > last.ID {
				last = d
			}
		}
		s.floors.Set(k, leasefloor.Floor{Due: store.Millis(last.NextAttempt), ID: last.ID}, now, head)
	} else {
		s.floors.Forget(k)
	}
	// RETURNING has no order: callers get them in id order.
	slices.SortFunc(out, func(a, b store.Delivery) int { return cmp.Compare(a.ID, b.ID) })
	for i := range out {
		out[i].LeaseEnd = r.Now.Add(r.TTL)
	}
	return out, nil
}

// clockSQL is the database's clock in stored milliseconds, read once per
// statement (a scalar subquery is run once) when the statement runs:
// clock_timestamp(), not now(), which is the transaction's start. A lease
// then lasts from as late as the server can tell, the nearest to the
// commit that shows it to the other nodes; an ingest group's transaction
// may have started long before the statement that leases. Every lease's
// end is written and judged by this one clock, the same for every node,
// so neither a node's round trip nor its clock's error moves it.
const clockSQL = `(SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint)`

// leaseClock is what the caller's time t adds to the database's clock
// (clockSQL), in milliseconds: how far t is from the store's clock
// (Options.Now) now, just before the statement leaves. In production t is
// that clock read a moment earlier, so it takes off the moment: a lease
// made for TTL from t lasts in the database TTL from when the statement
// runs, less the time the caller took to send it, and so outlasts the
// caller's t+TTL by the trip to the server. A test's fixed times (the
// conformance suite's) move the database's clock with them, in step with
// the store's clock.
func (s *Store) leaseClock(t time.Time) int64 {
	return t.Sub(s.opts.Now()).Milliseconds()
}

// leaseSettings are leaseSQL's settings, local to its transaction.
//
// The planner's: only the plan wanted is possible, the due index read in
// order up to $3 rows, the leased rows by primary key and their messages
// by theirs, whatever the statistics say. Statistics taken while few
// deliveries were pending (a table filled since autovacuum last analyzed
// it: a backlog, a load test) otherwise make the server read every pending
// delivery of the source by the status index and sort them, at every
// Lease. With one plan possible, the generic plan is it, and it is made
// once per connection instead of at every Lease (a quarter of a Lease's
// time in the server under a backlog).
//
// The commit's: a lease is not waited on to reach the disk. It records no
// attempt; lost in a crash of the server, its deliveries are due again and
// made again, at least once, as after a crash of the node that held them.
// A completion, which is the record, commits synchronously, and so flushes
// the WAL of every lease before it. Waiting for the flush was half of a
// Lease's time, and a lane leases one group at a time.
const leaseSettings = `SELECT set_config('enable_sort', 'off', true), ` + planSettings

// planSettings are the settings both leaseSettings and leaseEverySettings
// take.
const planSettings = `set_config('enable_seqscan', 'off', true),
	set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true), set_config('synchronous_commit', 'off', true)`

// leaseEverySettings are leaseEverySQL's: leaseSettings, with the sort it
// needs (of what it picked) let be. A sort the settings disable costs
// more than all else, and the planner, taking plans within 1% of each
// other's cost as equal, then chose one by its order: it read the whole
// table by another index to join the rows picked.
const leaseEverySettings = `SELECT ` + planSettings

// lease runs leaseSQL for r, up to limit, under leaseSettings, in one
// round trip: the batch's statements are one implicit transaction. It
// reads after floor, or from the head, and returns the leased deliveries.
func (s *Store) lease(ctx context.Context, r store.LeaseRequest, limit int, floor leasefloor.Floor, head bool) ([]store.Delivery, error) {
	b := &pgx.Batch{}
	if r.Destination == "" {
		b.Queue(leaseEverySettings)
	} else {
		b.Queue(leaseSettings)
	}
	if head {
		floor = leasefloor.Floor{Due: math.MinInt64, ID: math.MinInt64}
	}
	shift := s.leaseClock(r.Now)
	args := []any{r.Source, store.Millis(r.Now), limit, r.Owner, shift + r.TTL.Milliseconds(), floor.Due, floor.ID, shift}
	if r.Destination == "" {
		b.Queue(leaseEverySQL, args...)
	} else {
		b.Queue(leaseSQL, append(args, r.Destination)...)
	}
	br := s.pool.SendBatch(ctx, b)
	out, err := func() ([]store.Delivery, error) {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		return collect(rows, rowscan.Leased(r.Source))
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Complete implements store.Store. Completions of concurrent callers are
// gathered (see completer) and applied together: the forwarder completes
// one delivery at a time from many goroutines, and one commit for many
// of them is what keeps forwarding from waiting on the WAL flush.
func (s *Store) Complete(ctx context.Context, cs []store.Completion) error {
	if len(cs) == 0 {
		return nil
	}
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	// Applied even when ctx is cancelled once its group has it: the
	// attempts were made and must be on record. Only ctx's deadline bounds
	// the group: a link that answers nothing fails it then
	// (store.ErrUnavailable), and the caller keeps the outcomes to try
	// again. The caller waits only while ctx lasts (a stopping forwarder
	// gives up): it keeps them as not recorded, and a second Complete of
	// one the group applied after all changes nothing. Close cancels a
	// group still running once no call waits.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(callTimeout)
	}
	req := completion{cs: cs, deadline: deadline, done: make(chan error, 1)}
	select {
	case s.completions <- req:
	case <-ctx.Done():
		return classify(ctx.Err())
	}
	select {
	case err = <-req.done:
	case <-ctx.Done():
		return classify(ctx.Err())
	}
	for _, c := range cs {
		if c.Status == store.Pending {
			s.floors.LowerAll(store.Millis(c.NextAttempt))
		}
	}
	return err
}

type completion struct {
	cs       []store.Completion
	deadline time.Time // the caller's, or callTimeout from the call
	done     chan error
}

// maxGroup bounds the completions applied in one transaction.
const maxGroup = 512

// completer applies the completions queued while the previous group was
// committing, as one group, until quit is closed (Close does, once no call
// is in progress).
func (s *Store) completer() {
	g := gather.Gatherer[completion]{In: s.completions, Stop: s.quit, Max: maxGroup,
		Weight: func(c completion) int { return len(c.cs) }}
	g.Run(s.completeGroup)
}

// completeGroup applies group's completions in one transaction and gives
// each caller its outcome.
func (s *Store) completeGroup(group []completion) {
	var (
		all  []store.Completion
		last time.Time
	)
	for _, c := range group {
		all = append(all, c.cs...)
		if c.deadline.After(last) {
			last = c.deadline
		}
	}
	// The group's statements end by its callers' latest deadline, as an
	// ingest group's do (groupDeadline): none fails before its own.
	ctx, cancel := context.WithDeadline(s.stop, last)
	defer cancel()
	err := classify(retryTransient(func() error { return s.complete(ctx, all) }))
	for _, c := range group {
		c.done <- err
	}
}

// completeSettings fix the plans of complete's statements as leaseSettings
// do Lease's: each row by primary key, whatever the statistics, and the
// generic plan made once per connection instead of two plans at every
// Complete. The commit is waited on, as always.
const completeSettings = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`

// complete applies cs in one batch of two statements, which the server
// runs as one implicit transaction: each update applies only while its
// owner holds the lease; the attempts are recorded either way.
func (s *Store) complete(ctx context.Context, cs []store.Completion) error {
	now := store.Millis(s.opts.Now())
	var (
		id, first, next                []int64
		owner, status, lastErr         []string
		attempts                       []int32
		del, start, lat                []int64
		aOwner, url, class, errs, outc []string
		no, endpoint, code             []int32
		excerpt                        [][]byte
	)
	for _, c := range cs {
		id, owner, status, attempts = append(id, c.ID), append(owner, c.Owner), append(status, string(c.Status)), append(attempts, int32(c.Attempts))
		first, next, lastErr = append(first, store.Millis(c.FirstAttempt)), append(next, store.Millis(c.NextAttempt)), append(lastErr, c.LastError)
		for _, a := range c.Records {
			del, aOwner, no, endpoint = append(del, c.ID), append(aOwner, c.Owner), append(no, int32(a.Delivery)), append(endpoint, int32(a.Endpoint))
			url, start, lat = append(url, a.URL), append(start, store.Millis(a.Start)), append(lat, a.Latency.Microseconds())
			code, class, errs = append(code, int32(a.Status)), append(class, a.Class), append(errs, a.Error)
			excerpt, outc = append(excerpt, a.Excerpt), append(outc, a.Outcome)
		}
	}
	b := &pgx.Batch{}
	b.Queue(completeSettings)
	b.Queue(`UPDATE deliveries d SET status = c.status, attempts = c.attempts, first_attempt_at = c.first,
		next_attempt_at = c.next, last_error = c.err, lease_owner = NULL, lease_expires_at = 0, updated_at = $8
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[], $7::text[])
			AS c (id, owner, status, attempts, first, next, err)
		WHERE d.id = c.id AND d.lease_owner = c.owner AND d.status = 'pending'`,
		id, owner, status, attempts, first, next, lastErr, now)
	if len(del) > 0 {
		b.Queue(`INSERT INTO attempts (delivery, owner, delivery_no, endpoint, url, started_at, latency_us, status, class,
			error, excerpt, outcome)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::int[], $5::text[], $6::bigint[], $7::bigint[],
				$8::int[], $9::text[], $10::text[], $11::bytea[], $12::text[])`,
			del, aOwner, no, endpoint, url, start, lat, code, class, errs, excerpt, outc)
	}
	return s.pool.SendBatch(ctx, b).Close()
}

// Reclaim implements store.Store: other nodes may hold live leases, so only
// expired ones are released.
func (s *Store) Reclaim(ctx context.Context, now time.Time) (int, error) {
	leave, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	defer s.floors.Reset()
	tag, err := s.pool.Exec(ctx, `UPDATE deliveries SET lease_owner = NULL, lease_expires_at = 0
		WHERE lease_owner IS NOT NULL AND lease_expires_at < `+clockSQL+` + $1`, s.leaseClock(now))
	return int(tag.RowsAffected()), err
}

// Retry implements store.Store. A pending delivery under a live lease is
// left to its holder.
func (s *Store) Retry(ctx context.Context, ids []int64, f store.Filter, now time.Time) (int, error) {
	leave, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	defer s.floors.Reset()
	p := sharedsql.Numbered(1)
	set, args := sharedsql.Retry(store.Millis(now), p)
	var clause string
	if len(ids) > 0 {
		clause, args = ` WHERE d.id = ANY(`+p()+`)`, append(args, ids)
	} else {
		var more []any
		clause, more = sharedsql.Where(f, p)
		args = append(args, more...)
	}
	// Not under a live lease: one is the database's clock's (leaseSQL).
	keep := sharedsql.Retryable + ` AND NOT (d.status = 'pending' AND d.lease_expires_at >= ` + clockSQL + ` + ` + p() + `))`
	args = append(args, s.leaseClock(now))
	var n int64
	err = retryTransient(func() error {
		tag, err := s.pool.Exec(ctx, set+clause+keep, args...)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}
