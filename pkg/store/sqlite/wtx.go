package sqlite

import (
	"context"
	"database/sql"
)

// maxStmts bounds the statements a connection keeps prepared. Ops build a
// few hundred distinct statements at most (multi-row inserts differ by row
// count); past the bound a statement is parsed each time, as before.
const maxStmts = 1024

// wtx is a write transaction on one connection, begun and ended with SQL
// (BEGIN IMMEDIATE, COMMIT) rather than database/sql's Tx, so that the
// connection's prepared statements outlive it: the writer keeps its
// connection, and every statement an op runs is parsed once for the
// life of the store. Parsing SQL was a fifth of serve's CPU.
type wtx struct {
	c     *sql.Conn
	stmts map[string]*sql.Stmt
}

func newWtx(c *sql.Conn) *wtx { return &wtx{c: c, stmts: map[string]*sql.Stmt{}} }

// stmt returns q prepared, preparing it the first time; nil once the
// cache is full and q is not in it.
func (t *wtx) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st := t.stmts[q]; st != nil || len(t.stmts) >= maxStmts {
		return st, nil
	}
	st, err := t.c.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	t.stmts[q] = st
	return st, nil
}

// ExecContext runs q as a prepared statement.
func (t *wtx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, q)
	if err != nil || st == nil {
		return t.c.ExecContext(ctx, q, args...)
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext runs q as a prepared statement.
func (t *wtx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(ctx, q)
	if err != nil || st == nil {
		return t.c.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs q as a prepared statement.
func (t *wtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := t.stmt(ctx, q)
	if err != nil || st == nil {
		return t.c.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// run runs fn in a transaction on t, committing when it returns nil.
func (t *wtx) run(ctx context.Context, fn func() error) error {
	if _, err := t.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		// SQLite may have rolled back already (it does on SQLITE_FULL);
		// then this ROLLBACK fails, harmlessly.
		t.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := t.ExecContext(ctx, "COMMIT"); err != nil {
		t.ExecContext(ctx, "ROLLBACK")
		return err
	}
	return nil
}

// close releases the prepared statements and the connection.
func (t *wtx) close() error {
	for _, st := range t.stmts {
		st.Close()
	}
	clear(t.stmts)
	return t.c.Close()
}
