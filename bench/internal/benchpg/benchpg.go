// Package benchpg gives a benchmark run a PostgreSQL schema of its own, so
// runs never see each other's rows, and drops it afterwards.
package benchpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// SchemaURL is base with a new schema (search_path) for one run named
// name; the store creates the schema.
func SchemaURL(base, name string) string {
	b := make([]byte, 4)
	rand.Read(b)
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set("search_path", "evfwd_bench_"+name+"_"+hex.EncodeToString(b))
	u.RawQuery = q.Encode()
	return u.String()
}

// Drop drops the schema of schemaURL, connecting through base.
func Drop(base, schemaURL string) {
	u, _ := url.Parse(schemaURL)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{u.Query().Get("search_path")}.Sanitize()+" CASCADE")
}

// Database creates a database of its own for one run named name and
// returns its URL, and the function that drops it: for a row that reads
// the server's statistics of its database (pg_stat_database), which other
// work in a shared database would add to. base's role must be allowed to
// create databases.
func Database(base, name string) (string, func(), error) {
	b := make([]byte, 4)
	rand.Read(b)
	db := "evfwd_bench_" + name + "_" + hex.EncodeToString(b)
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()+" TEMPLATE template0"); err != nil {
		return "", nil, err
	}
	drop := func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
	}
	u.Path = "/" + db
	return u.String(), drop, nil
}

// Deadlocks is pg_stat_database.deadlocks of dbURL's database once no
// other session is connected to it (a session reports its count when it
// goes idle, at most once a second, and when it ends at the latest), or
// an error after timeout.
func Deadlocks(dbURL string, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	for {
		var others int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			return 0, err
		}
		if others == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%d other sessions still on the database: %w", others, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, err
	}
	var n int64
	err = conn.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}
