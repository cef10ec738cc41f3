package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
	"github.com/jackc/pgx/v5"
)

// List implements store.Store.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Delivery, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	q, args := sharedsql.List(f, sharedsql.Numbered(1))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.DeliveryRow)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id int64) (*store.Detail, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	var d store.Detail
	if err := rowscan.DeliveryBody(s.pool.QueryRow(ctx, sharedsql.Delivery(sharedsql.Numbered(1)), id), &d.Delivery); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("delivery %d: %w", id, store.ErrNotFound)
		}
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sharedsql.Attempts(sharedsql.Numbered(1)), id)
	if err != nil {
		return nil, err
	}
	if d.Records, err = collect(rows, rowscan.Attempt); err != nil {
		return nil, err
	}
	return &d, nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) ([]store.Count, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	rows, err := s.pool.Query(ctx, `SELECT `+rowscan.CountColumns+` FROM deliveries GROUP BY source, status ORDER BY source COLLATE "C", status COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.Count)
}
