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
// finds them.
func (s *Store) Resend(ctx context.Context, ids []int64, f store.Filter, now time.Time) (store.Resent, error) {
	leave, err := s.enter()
	if err != nil {
		return store.Resent{}, err
	}
	defer leave()
	// Due at now, which may be before where a Lease last stopped in the
	// due index (pkg/store/internal/leasefloor).
	defer s.floors.Reset()
	set, args := sharedsql.Resend(store.Millis(now), sharedsql.Numbered(1))
	if len(ids) == 0 {
		clause, more := sharedsql.Where(f, sharedsql.Numbered(3))
		var n int64
		err = retryTransient(func() error {
			tag, err := s.pool.Exec(ctx, set+clause+sharedsql.Resendable+")", append(args, more...)...)
			n = tag.RowsAffected()
			return err
		})
		return store.Resent{N: int(n)}, err
	}
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
