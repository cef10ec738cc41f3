package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"

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

// The statements of Get, prepared once (per connection of the read pool):
// parsing them was three quarters of a Get's time.
var (
	getDelivery = sharedsql.Delivery(sharedsql.Question)
	getAttempts = sharedsql.Attempts(sharedsql.Question)
)

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id int64) (*store.Detail, error) {
	delivery, err := s.prepared.get(ctx, s.read, getDelivery)
	if err != nil {
		return nil, err
	}
	row := delivery.QueryRowContext(ctx, id)
	d, err := rowscan.Detail(id, row, sql.ErrNoRows, func() ([]store.Attempt, error) {
		attempts, err := s.prepared.get(ctx, s.read, getAttempts)
		if err != nil {
			return nil, err
		}
		rows, err := attempts.QueryContext(ctx, id)
		if err != nil {
			return nil, err
		}
		return collect(rows, rowscan.Attempt)
	})
	if err != nil {
		return nil, err
	}
	return d, s.hideHeld(ctx, d)
}

// hideHeld empties the body of d when a deletion under way purges it
// (recover.go): a reader sees it as it will be, not as it was.
func (s *Store) hideHeld(ctx context.Context, d *store.Detail) error {
	if len(d.Body) == 0 || !s.held.covers(d.Source, d.UserID, d.Type, 0) {
		return nil
	}
	var msg int64
	if err := s.read.QueryRowContext(ctx, `SELECT message FROM deliveries WHERE id = ?`, d.ID).Scan(&msg); err != nil {
		return err
	}
	if s.held.covers(d.Source, d.UserID, d.Type, msg) {
		d.Body = []byte{}
	}
	return nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) ([]store.Count, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+rowscan.CountColumns+` FROM deliveries GROUP BY source, status ORDER BY source, status`)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.Count)
}

// statements are the read pool's prepared statements, by query.
type statements struct {
	m sync.Map // string → *sql.Stmt
}

// get returns q prepared on db, preparing it the first time.
func (st *statements) get(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	if v, ok := st.m.Load(q); ok {
		return v.(*sql.Stmt), nil
	}
	stmt, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if v, loaded := st.m.LoadOrStore(q, stmt); loaded {
		stmt.Close() // another caller prepared it first
		return v.(*sql.Stmt), nil
	}
	return stmt, nil
}

// close closes every statement.
func (st *statements) close() error {
	var errs []error
	st.m.Range(func(_, v any) bool {
		errs = append(errs, v.(*sql.Stmt).Close())
		return true
	})
	return errors.Join(errs...)
}
