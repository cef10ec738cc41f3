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
	base := os.Getenv(Env)
	if base == "" {
		t.Skip("set EVFWD_TEST_POSTGRES=postgres://... to run the PostgreSQL store tests")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "evfwd_test_" + hex.EncodeToString(b)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	return u.String()
}

// Database returns a connection URL to a new, empty database of t's own
// (dropped afterwards), or skips t when Env is unset: for a test that
// reads the server's statistics of its database (pg_stat_database), which
// the other tests' schemas in the shared one would add to. The role in
// Env must be allowed to create databases.
func Database(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skip("set EVFWD_TEST_POSTGRES=postgres://... to run the PostgreSQL store tests")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "evfwd_test_" + hex.EncodeToString(b)
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
