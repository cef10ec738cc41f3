package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/jackc/pgx/v5"
)

// where builds the WHERE clause of a filter on deliveries d, its
// parameters numbered from n.
func where(f store.Filter, n int) (string, []any) {
	p := func() string { n++; return "$" + strconv.Itoa(n-1) }
	clause, args := " WHERE d.id > "+p(), []any{f.After}
	if f.Status.Valid() {
		// A literal, not a parameter: the planner then knows that the
		// partial indexes (deliveries_settled, deliveries_due) hold every
		// row the filter selects.
		clause += " AND d.status = '" + string(f.Status) + "'"
	} else if f.Status != "" {
		clause += " AND d.status = " + p()
		args = append(args, string(f.Status))
	}
	if f.Source != "" {
		clause += " AND d.source = " + p()
		args = append(args, f.Source)
	}
	if f.Before > 0 {
		clause += " AND d.id < " + p()
		args = append(args, f.Before)
	}
	if f.Endpoint != "" {
		// A semi-join probing attempts_delivery per delivery, in the
		// order the deliveries are walked: no index on attempts.url
		// (it would cost every attempt's insert), and a page stops at
		// Limit matches.
		clause += " AND EXISTS (SELECT 1 FROM attempts a WHERE a.delivery = d.id AND a.url = " + p() + ")"
		args = append(args, f.Endpoint)
	}
	return clause, args
}

// order is the ORDER BY of List.
func order(f store.Filter) string {
	if f.Desc {
		return " ORDER BY d.id DESC"
	}
	return " ORDER BY d.id"
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Delivery, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	clause, args := where(f, 1)
	q := `SELECT ` + rowscan.DeliveryColumns + ` FROM deliveries d JOIN messages m ON m.id = d.message` + clause + order(f)
	if f.Limit > 0 {
		q += " LIMIT $" + strconv.Itoa(len(args)+1)
		args = append(args, f.Limit)
	}
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
	row := s.pool.QueryRow(ctx, `SELECT `+rowscan.DeliveryColumns+`, `+rowscan.BodyColumns+` FROM deliveries d
		JOIN messages m ON m.id = d.message WHERE d.id = $1`, id)
	if err := rowscan.DeliveryBody(row, &d.Delivery); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("delivery %d: %w", id, store.ErrNotFound)
		}
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+rowscan.AttemptColumns+` FROM attempts WHERE delivery = $1 ORDER BY id`, id)
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
