package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/jackc/pgx/v5"
)

// Fresh leases of an ingest whose answer never came. When the server goes
// away (a restart) or stops answering after an ingest's statement was
// sent, the store cannot tell whether it committed, and answers an error:
// the forwarder starts none of the deliveries it would have returned, and
// the client sends the request again, whose messages, if the first try
// did commit, are skipped as stored. Those deliveries are then leased to
// this process for nothing until the lease runs out (the forwarder's
// default two minutes): in TestPostgresRestartImmediate, 10 restarts
// under three nodes left a few dozen acknowledged messages undelivered
// for 2 min 1 s after their restart, when every other one was on its way
// within a second.
//
// So the store keeps what such an ingest leased (owner, messages) and,
// once the server answers, releases those deliveries: due as they were,
// never attempted, for any node to lease. Only leases that have not run
// out are released, and only until orphanMargin before the lease's end on
// this process's clock: until then no Lease can have taken them (it takes
// only leases that ran out), so the lease released is the one the lost
// ingest made, which nobody is sending. After it, they go out once the
// lease runs out, as before.

// releaseTimeout bounds one try at releasing orphans: a small statement,
// tried again and again while the link is still down, so that the first
// try after it is back comes soon.
const releaseTimeout = time.Second

// orphanMargin is how long before its lease's end an orphan is no longer
// released: more than a try's deadline, so the statement ends before the
// lease could run out.
const orphanMargin = releaseTimeout + 4*time.Second

type orphan struct {
	owner    string
	src, mid []string
	until    time.Time // the lease's end (IngestLease.Until)
}

// orphans are the leases waiting to be released, and whether a goroutine
// is releasing them.
type orphans struct {
	mu      sync.Mutex
	list    []orphan
	running bool
}

// orphaned records what in leased, when its outcome is unknown (err says
// the server went away or did not answer: the statement may have
// committed), and starts releasing.
func (s *Store) orphaned(in *ingest, err error) {
	if err == nil || !unreachable(err) || in.lease.Limit <= 0 {
		return
	}
	o := orphan{owner: in.lease.Owner, until: in.lease.Until}
	for _, i := range in.keep {
		if m := &in.msgs[i]; len(m.Destinations) > 0 {
			o.src, o.mid = append(o.src, m.Source), append(o.mid, m.MessageID)
		}
	}
	if len(o.src) == 0 {
		return
	}
	s.orphans.mu.Lock()
	defer s.orphans.mu.Unlock()
	s.orphans.list = append(s.orphans.list, o)
	if !s.orphans.running {
		s.orphans.running = true
		go s.releaseOrphans()
	}
}

// releaseOrphans releases the orphans' leases, trying again after a
// failure (50 ms, doubling to a second), until none is left or the store
// closes.
func (s *Store) releaseOrphans() {
	wait := 50 * time.Millisecond
	for {
		s.orphans.mu.Lock()
		now := s.opts.Now()
		live := s.orphans.list[:0]
		for _, o := range s.orphans.list {
			if now.Before(o.until.Add(-orphanMargin)) {
				live = append(live, o)
			}
		}
		clear(s.orphans.list[len(live):])
		s.orphans.list = live
		if len(live) == 0 {
			s.orphans.running = false
			s.orphans.mu.Unlock()
			return
		}
		batch := append([]orphan(nil), live...)
		s.orphans.mu.Unlock()

		err := s.releaseLeases(batch)
		if err == store.ErrClosed {
			return
		}
		if err == nil {
			s.orphans.mu.Lock()
			n := copy(s.orphans.list, s.orphans.list[len(batch):])
			clear(s.orphans.list[n:])
			s.orphans.list = s.orphans.list[:n]
			s.orphans.mu.Unlock()
			wait = 50 * time.Millisecond
			continue
		}
		select {
		case <-s.background.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// releaseOrphansSQL releases the deliveries of messages ($1, $2) leased to $3
// whose lease has not run out ($4: leaseClock of now) and that were never
// attempted, and returns them.
const releaseOrphansSQL = `UPDATE deliveries d SET lease_owner = NULL, lease_expires_at = 0
	FROM messages m, unnest($1::text[], $2::text[], $3::text[]) AS k (source, message_id, owner)
	WHERE m.source = k.source AND m.message_id = k.message_id AND d.message = m.id AND d.lease_owner = k.owner
		AND d.status = 'pending' AND d.attempts = 0 AND d.lease_expires_at >= ` + clockSQL + ` + $4
	RETURNING d.source, d.next_attempt_at`

// releaseLeases runs releaseOrphansSQL for batch, within releaseTimeout,
// and lowers the floors of what it released.
func (s *Store) releaseLeases(batch []orphan) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	var src, mid, owner []string
	for _, o := range batch {
		src, mid = append(src, o.src...), append(mid, o.mid...)
		for range o.src {
			owner = append(owner, o.owner)
		}
	}
	ctx, cancel := context.WithTimeout(s.background, releaseTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, releaseOrphansSQL, src, mid, owner, s.leaseClock(s.opts.Now()))
	if err != nil {
		return err
	}
	type due struct {
		source string
		at     int64
	}
	released, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (due, error) {
		var d due
		return d, r.Scan(&d.source, &d.at)
	})
	if err != nil {
		return err
	}
	for _, d := range released {
		s.floors.Lower(d.source, d.at)
	}
	if len(released) > 0 {
		s.opts.Logger.Info("store: released the deliveries leased by ingests whose answer was lost", "n", len(released))
	}
	return nil
}
