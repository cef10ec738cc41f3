package postgres

import (
	"context"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// cancelSQL cancels one step of a destination's pending deliveries, $3 at
// most, found in its due index (deliveries_due), leased or
// not: the lease goes with the status, as a deletion's cancel takes it, so
// its holder's Complete (which applies only while its owner holds the
// lease of a pending delivery) records its attempts and changes nothing
// else. The rows are locked in the index's order, waiting for a node that
// is completing one; a row it made anything but pending is passed over
// (FOR UPDATE reads the row again once it has it), so a step cancels as
// many as it can, and one that cancels fewer than $3 was the last.
const cancelSQL = `UPDATE deliveries SET status = 'cancelled', lease_owner = NULL, lease_expires_at = 0,
	last_error = $4, updated_at = $5
	WHERE status = 'pending' AND id IN (SELECT id FROM deliveries
		WHERE source = $1 AND destination = $2 AND status = 'pending' LIMIT $3 FOR UPDATE)`

// CancelPending implements store.Store, a step per statement: each is its
// own transaction, so a large destination's cancel never holds many rows
// for long.
func (s *Store) CancelPending(ctx context.Context, source, destination, reason string, now time.Time) (int, error) {
	leave, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	n, err := s.stepped(ctx, cancelSQL, source, destination, store.ReleaseStep, reason, store.Millis(now))
	return n, classify(err)
}

// stepped runs q, which changes up to store.ReleaseStep rows, until a run
// changes fewer, and reports how many rows the runs changed in all: each
// run is its own transaction, holding few rows for a short time.
func (s *Store) stepped(ctx context.Context, q string, args ...any) (int, error) {
	total := 0
	for {
		var n int64
		err := retryTransient(func() error {
			tag, err := s.pool.Exec(ctx, q, args...)
			n = tag.RowsAffected()
			return err
		})
		total += int(n)
		if err != nil || n < store.ReleaseStep {
			return total, err
		}
	}
}
