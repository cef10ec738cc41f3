package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/jackc/pgx/v5"
)

// where builds the WHERE clause of a filter on deliveries d, its
// parameters numbered from n.
func where(f store.Filter, n int) (string, []any) {
	p := func() string { n++; return "$" + strconv.Itoa(n-1) }
	clause, args := " WHERE d.id > "+p(), []any{f.After}
	if f.Status != "" {
		clause += " AND d.status = " + p()
		args = append(args, string(f.Status))
	}
	if f.Source != "" {
		clause += " AND d.source = " + p()
		args = append(args, f.Source)
	}
	return clause, args
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Delivery, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	clause, args := where(f, 1)
	q := `SELECT ` + deliveryColumns + ` FROM deliveries d JOIN messages m ON m.id = d.message` + clause + ` ORDER BY d.id`
	if f.Limit > 0 {
		q += " LIMIT $" + strconv.Itoa(len(args)+1)
		args = append(args, f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		var d store.Delivery
		if err := scanDelivery(rows, &d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id int64) (*store.Detail, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	var d store.Detail
	row := s.pool.QueryRow(ctx, `SELECT `+deliveryColumns+`, m.body FROM deliveries d
		JOIN messages m ON m.id = d.message WHERE d.id = $1`, id)
	if err := scanDelivery(row, &d.Delivery, &d.Body); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("delivery %d: %w", id, store.ErrNotFound)
		}
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT delivery_no, endpoint, url, started_at, latency_us, status, class,
		error, excerpt, outcome FROM attempts WHERE delivery = $1 ORDER BY id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var a store.Attempt
		var start, lat int64
		if err := rows.Scan(&a.Delivery, &a.Endpoint, &a.URL, &start, &lat, &a.Status, &a.Class, &a.Error, &a.Excerpt, &a.Outcome); err != nil {
			return nil, err
		}
		a.Start, a.Latency = store.FromMillis(start), time.Duration(lat)*time.Microsecond
		d.Records = append(d.Records, a)
	}
	return &d, rows.Err()
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) ([]store.Count, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	rows, err := s.pool.Query(ctx, `SELECT source, status, count(*) FROM deliveries GROUP BY source, status ORDER BY source COLLATE "C", status COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Count
	for rows.Next() {
		var c store.Count
		var status string
		if err := rows.Scan(&c.Source, &status, &c.N); err != nil {
			return nil, err
		}
		c.Status = store.Status(status)
		out = append(out, c)
	}
	return out, rows.Err()
}
