package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
)

// SaveEndpoint implements store.Store.
func (s *Store) SaveEndpoint(ctx context.Context, st store.EndpointState) error {
	q, args := sharedsql.SaveEndpoint(st, sharedsql.Question)
	return s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
}

// Endpoints implements store.Store.
func (s *Store) Endpoints(ctx context.Context) ([]store.EndpointState, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+rowscan.EndpointColumns+` FROM endpoint_states ORDER BY source, url`)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.Endpoint)
}

// Release implements store.Store: a step at a time, each its own
// transaction, so ingest and completions interleave with a large release.
// The rows it changes are due at now and no longer match, so it ends.
func (s *Store) Release(ctx context.Context, source string, prefixes []string, now time.Time) (int, error) {
	if len(prefixes) == 0 {
		return 0, nil
	}
	at := store.Millis(now)
	var match []string
	args := []any{at, at, source, at}
	for _, p := range prefixes {
		match = append(match, `substr(last_error, 1, length(?)) = ?`)
		args = append(args, p, p)
	}
	args = append(args, store.ReleaseStep)
	q := `UPDATE deliveries SET next_attempt_at = ?, updated_at = ? WHERE id IN (SELECT id FROM deliveries
		INDEXED BY deliveries_due WHERE source = ? AND status = 'pending' AND next_attempt_at > ? AND (` +
		strings.Join(match, " OR ") + `) LIMIT ?)`
	total := 0
	for {
		var n int64
		err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += int(n)
		if err != nil || n < store.ReleaseStep {
			return total, err
		}
	}
}
