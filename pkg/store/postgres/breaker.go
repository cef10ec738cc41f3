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
// after it. deliveries_due keeps a source's pending deliveries by
// destination: for each destination (destinationsCTE, of $1 there) it
// seeks that destination's entries scheduled after now, not the ones due
// before, a backlog as they may be. (As one condition, destination =
// ANY of them, the server read every entry of the source instead.) A row
// is locked as the step takes it: no more than the step.
const releaseSQL = `UPDATE deliveries SET next_attempt_at = $2, updated_at = $2 WHERE id IN (
	WITH RECURSIVE ` + destinationsCTE + `
	SELECT r.id FROM dest, LATERAL (SELECT id FROM deliveries
		WHERE source = $1 AND destination = dest.name AND status = 'pending' AND next_attempt_at > $2
			AND lease_expires_at < ` + clockSQL + ` + $5
			AND EXISTS (SELECT 1 FROM unnest($3::text[]) AS p WHERE starts_with(last_error, p))
		FOR UPDATE SKIP LOCKED) r
	LIMIT $4)`

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
	return s.stepped(ctx, releaseSQL, source, store.Millis(now), prefixes, store.ReleaseStep, s.leaseClock(now))
}
