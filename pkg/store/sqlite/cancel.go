package sqlite

import (
	"context"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// cancelSQL cancels one step of a destination's pending deliveries, found
// in its due index, and returns their ids.
const cancelSQL = `UPDATE deliveries SET status = 'cancelled', lease_owner = NULL, lease_expires_at = 0,
	last_error = ?, updated_at = ?
	WHERE id IN (SELECT id FROM deliveries INDEXED BY deliveries_due
		WHERE source = ? AND destination = ? AND status = 'pending' LIMIT ?)
	RETURNING id`

// CancelPending implements store.Store: a step of at most
// store.ReleaseStep at a time, each its own transaction through the
// writer, so that ingest and completions go on between them. The leases
// of the deliveries it cancels go with them, as a deletion's cancel takes
// them on PostgreSQL: their holder's Complete then applies nothing but its
// attempts, and the delivery stays cancelled (completeTx applies only to
// pending ones, leased or not).
func (s *Store) CancelPending(ctx context.Context, source, destination, reason string, now time.Time) (int, error) {
	at := store.Millis(now)
	total := 0
	for {
		n := 0
		err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
			n = 0
			rows, err := tx.QueryContext(ctx, cancelSQL, reason, at, source, destination, store.ReleaseStep)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return err
				}
				s.leases.drop(id)
				n++
			}
			return rows.Err()
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < store.ReleaseStep {
			return total, nil
		}
	}
}
