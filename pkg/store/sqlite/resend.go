package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
)

// Resend implements store.Store, in one transaction through the writer:
// what it reports of the ids it left alone is their state when it ran.
// Finished deliveries hold no lease (Complete drops it), so none is in
// flight.
func (s *Store) Resend(ctx context.Context, ids []int64, f store.Filter, now time.Time) (store.Resent, error) {
	var r store.Resent
	set, args := sharedsql.Resend(store.Millis(now), sharedsql.Question)
	err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		if len(ids) == 0 {
			q, args := sharedsql.ResendSelected(f, store.Millis(now), sharedsql.Question)
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if r = (store.Resent{N: int(n)}); err != nil || f.Limit <= 0 || r.N < f.Limit {
				return err
			}
			q, args = sharedsql.ResendLeft(f, sharedsql.Question)
			return tx.QueryRowContext(ctx, q, args...).Scan(&r.Skipped)
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		const byID = ` WHERE d.id IN (SELECT value FROM json_each(?))`
		rows, err := tx.QueryContext(ctx, set+byID+sharedsql.Resendable+") RETURNING id", append(args, string(list))...)
		if err != nil {
			return err
		}
		resent, err := collect(rows, sharedsql.IDRow)
		if err != nil {
			return err
		}
		if rows, err = tx.QueryContext(ctx, sharedsql.ResendState(byID), string(list)); err != nil {
			return err
		}
		found, err := collect(rows, sharedsql.FoundRow)
		r = sharedsql.Report(ids, resent, found)
		return err
	})
	return r, err
}
