package sqlite

import (
	"context"
	"database/sql"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
)

// collect reads every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(rowscan.Scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Delivery, error) {
	q, args := sharedsql.List(f, sharedsql.Question)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.DeliveryRow)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id int64) (*store.Detail, error) {
	row := s.read.QueryRowContext(ctx, sharedsql.Delivery(sharedsql.Question), id)
	return rowscan.Detail(id, row, sql.ErrNoRows, func() ([]store.Attempt, error) {
		rows, err := s.read.QueryContext(ctx, sharedsql.Attempts(sharedsql.Question), id)
		if err != nil {
			return nil, err
		}
		return collect(rows, rowscan.Attempt)
	})
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) ([]store.Count, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+rowscan.CountColumns+` FROM deliveries GROUP BY source, status ORDER BY source, status`)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.Count)
}
