package postgres

import (
	"context"

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
	row := s.pool.QueryRow(ctx, sharedsql.Delivery(sharedsql.Numbered(1)), id)
	return rowscan.Detail(id, row, pgx.ErrNoRows, func() ([]store.Attempt, error) {
		rows, err := s.pool.Query(ctx, sharedsql.Attempts(sharedsql.Numbered(1)), id)
		if err != nil {
			return nil, err
		}
		return collect(rows, rowscan.Attempt)
	})
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
