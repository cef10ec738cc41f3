// Package pgtest gives tests a PostgreSQL database of their own: a fresh
// schema in the database EVFWD_TEST_POSTGRES names, dropped afterwards, so
// test runs (and parallel tests) never see each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env is the variable that enables the PostgreSQL tests.
const Env = "EVFWD_TEST_POSTGRES"

// URL returns a connection URL whose search_path is a new, empty schema
// (the store creates it), or skips t when Env is unset.
func URL(t testing.TB) string {
	t.Helper()
	base, u, schema := fresh(t)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Cleanup(func() { drop(t, base, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`) })
	return u.String()
}

// Database returns a connection URL to a new, empty database of t's own
// (dropped afterwards), or skips t when Env is unset: for a test that
// reads the server's statistics of its database (pg_stat_database), which
// the other tests' schemas in the shared one would add to. The role in
// Env must be allowed to create databases.
func Database(t testing.TB) string {
	t.Helper()
	base, u, name := fresh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	defer conn.Close(ctx)
	// template0: nothing another test left in template1 comes along, and
	// no other session can hold it open (CREATE DATABASE would wait).
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE template0`); err != nil {
		t.Skipf("create database %s (the role in %s may not create databases): %v", name, Env, err)
	}
	t.Cleanup(func() { drop(t, base, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`) })
	u.Path = "/" + name
	return u.String()
}

// fresh returns Env's URL, as it is and parsed, and a new name for a
// schema or database; it skips t when Env is unset.
func fresh(t testing.TB) (base string, u *url.URL, name string) {
	t.Helper()
	base = os.Getenv(Env)
	if base == "" {
		t.Skip("set EVFWD_TEST_POSTGRES=postgres://... to run the PostgreSQL store tests")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	return base, u, "evfwd_test_" + hex.EncodeToString(b)
}

// drop runs stmt (a DROP) on base, logging what fails: a test's leftovers
// do not fail it.
func drop(t testing.TB, base, stmt string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Logf("%s: %v", stmt, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		t.Logf("%s: %v", stmt, err)
	}
}
