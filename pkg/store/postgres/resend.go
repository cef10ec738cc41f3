package postgres

import (
	"context"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
)

// Resend implements store.Store. Finished deliveries hold no lease
// (Complete clears it), so none is in flight on any node. By ids, it
// reports the ids it left alone in the state a read just after its update
// finds them; by filter with a limit, Skipped is what a read just after
// counts.
func (s *Store) Resend(ctx context.Context, ids []int64, f store.Filter, now time.Time) (store.Resent, error) {
	leave, err := s.enter()
	if err != nil {
		return store.Resent{}, err
	}
	defer leave()
	// Due at now, which may be before where a Lease last stopped in the
	// due index (pkg/store/internal/leasefloor).
	defer s.floors.Reset()
	if len(ids) == 0 {
		q, args := sharedsql.ResendSelected(f, store.Millis(now), sharedsql.Numbered(1))
		var n int64
		err = retryTransient(func() error {
			tag, err := s.pool.Exec(ctx, q, args...)
			n = tag.RowsAffected()
			return err
		})
		r := store.Resent{N: int(n)}
		if err != nil || f.Limit <= 0 || r.N < f.Limit {
			return r, err
		}
		// What the filter selects once the update is done: those that
		// finished meanwhile count as left too.
		q, args = sharedsql.ResendLeft(f, sharedsql.Numbered(1))
		err = retryTransient(func() error { return s.pool.QueryRow(ctx, q, args...).Scan(&r.Skipped) })
		return r, err
	}
	set, args := sharedsql.Resend(store.Millis(now), sharedsql.Numbered(1))
	var resent []int64
	err = retryTransient(func() error {
		rows, err := s.pool.Query(ctx, set+` WHERE d.id = ANY($3)`+sharedsql.Resendable+") RETURNING id", append(args, ids)...)
		if err != nil {
			return err
		}
		resent, err = collect(rows, sharedsql.IDRow)
		return err
	})
	if err != nil {
		return store.Resent{}, err
	}
	rows, err := s.pool.Query(ctx, sharedsql.ResendState(` WHERE d.id = ANY($1)`), ids)
	if err != nil {
		return store.Resent{}, err
	}
	found, err := collect(rows, sharedsql.FoundRow)
	return sharedsql.Report(ids, resent, found), err
}
