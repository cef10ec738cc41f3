package sqlite

import (
	"context"
	"strconv"
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

// releaseSQL makes one step of source's (?2) pending deliveries due at
// ?1 that are scheduled after it and whose last error starts with one of
// prefixes (?4 on, the match): ?3 at most. deliveries_due keeps them by
// destination: it seeks each destination's (destinationsCTE) and reads
// from there on its entries scheduled after ?1 (the rows of those whose
// last error matches), not the ones due before, a backlog as it may be.
func releaseSQL(match string) string {
	return `UPDATE deliveries SET next_attempt_at = ?1, updated_at = ?1 WHERE id IN (
	WITH RECURSIVE ` + destinationsCTE("?2") + `
	SELECT id FROM deliveries INDEXED BY deliveries_due
		WHERE source = ?2 AND destination IN (SELECT name FROM dest) AND status = 'pending' AND next_attempt_at > ?1
			AND (` + match + `)
		LIMIT ?3)`
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
	args := []any{at, source, store.ReleaseStep}
	for _, p := range prefixes {
		args = append(args, p)
		n := "?" + strconv.Itoa(len(args))
		match = append(match, `substr(last_error, 1, length(`+n+`)) = `+n)
	}
	q := releaseSQL(strings.Join(match, " OR "))
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
