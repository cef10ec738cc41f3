package postgres

import (
	"context"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
)

// SaveEndpoint implements store.Store: the last writer wins, whichever
// node it is.
func (s *Store) SaveEndpoint(ctx context.Context, st store.EndpointState) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	q, args := sharedsql.SaveEndpoint(st, sharedsql.Numbered(1))
	return retryTransient(func() error {
		_, err := s.pool.Exec(ctx, q, args...)
		return err
	})
}

// Endpoints implements store.Store.
func (s *Store) Endpoints(ctx context.Context) ([]store.EndpointState, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	rows, err := s.pool.Query(ctx, `SELECT `+rowscan.EndpointColumns+` FROM endpoint_states ORDER BY source COLLATE "C", url COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.Endpoint)
}

// releaseSQL makes one step of deliveries due; rows another node holds
// locked (completing them) are skipped: their completion decides, and so
// are leased ones, whose lease is the database's clock's (leaseSQL), $5
// after it.
const releaseSQL = `UPDATE deliveries SET next_attempt_at = $1, updated_at = $1 WHERE id IN (
	SELECT id FROM deliveries WHERE source = $2 AND status = 'pending' AND next_attempt_at > $1
		AND lease_expires_at < ` + clockSQL + ` + $5
		AND EXISTS (SELECT 1 FROM unnest($3::text[]) AS p WHERE starts_with(last_error, p))
	LIMIT $4 FOR UPDATE SKIP LOCKED)`

// Release implements store.Store, a step per statement.
func (s *Store) Release(ctx context.Context, source string, prefixes []string, now time.Time) (int, error) {
	if len(prefixes) == 0 {
		return 0, nil
	}
	leave, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer s.floors.Reset()
	defer leave()
	at := store.Millis(now)
	total := 0
	for {
		var n int64
		err := retryTransient(func() error {
			tag, err := s.pool.Exec(ctx, releaseSQL, at, source, prefixes, store.ReleaseStep, s.leaseClock(now))
			n = tag.RowsAffected()
			return err
		})
		total += int(n)
		if err != nil || n < store.ReleaseStep {
			return total, err
		}
	}
}
