package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestSchemaNewerRefused opens a schema a newer evfwd migrated (one
// version past this build's) and checks that Open refuses it, naming both
// versions, and applies nothing.
func TestSchemaNewerRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url, postgres.Options{})
	newer := postgres.SchemaVersion() + 1
	if _, err := s.Pool().Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 1)`, newer); err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn := schemaConn(t, url)
	before := schemaState(t, conn, schemaOf(t, url))

	for _, opts := range []postgres.Options{{}, {NoRecover: true}} {
		s, err := postgres.Open(ctx, url, opts)
		if err == nil {
			s.Close()
			t.Fatalf("Open %+v: a newer schema was opened", opts)
		}
		checkSchemaError(t, err, newer)
	}
	if after := schemaState(t, conn, schemaOf(t, url)); after != before {
		t.Errorf("the refusal changed the schema:\n%s\nwas\n%s", after, before)
	}
}

// TestSchemaNewerNothingApplied: a schema that records only a version past
// this build's gets none of this build's migrations.
func TestSchemaNewerNothingApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	schema := schemaOf(t, url)
	conn := schemaConn(t, url)
	newer := postgres.SchemaVersion() + 1
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %s;
		CREATE TABLE schema_migrations (version int PRIMARY KEY, applied_at bigint NOT NULL);
		INSERT INTO schema_migrations VALUES (%d, 1)`, pgx.Identifier{schema}.Sanitize(), newer)); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(ctx, url, postgres.Options{})
	checkSchemaError(t, err, newer)
	var tables []string
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tables) != "[schema_migrations]" {
		t.Errorf("tables after the refusal: %v", tables)
	}
}

// TestSchemaNewerUnderLock: a newer node that migrates while this one
// waits for the migration lock is seen once the lock is free, as the check
// runs under it.
func TestSchemaNewerUnderLock(t *testing.T) {
	// Not parallel: it holds the migration lock, which is per database,
	// and would count another test's Open as its own waiting.
	ctx := context.Background()
	url := pgtest.URL(t)
	open(t, url, postgres.Options{}).Close()
	conn := schemaConn(t, url) // the newer node
	const migrateLock = 0x657666776d6967
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLock)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	// Go on once Open is queued behind the lock.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND (classid::bigint << 32 | objid::bigint) = $1`, int64(migrateLock)).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Open never waited for the migration lock")
		}
		runtime.Gosched()
	}
	newer := postgres.SchemaVersion() + 1
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations VALUES ($1, 1)`, newer); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(migrateLock)); err != nil {
		t.Fatal(err)
	}
	checkSchemaError(t, <-done, newer)
}

func checkSchemaError(t *testing.T, err error, have int) {
	t.Helper()
	if !errors.Is(err, store.ErrSchemaNewer) {
		t.Fatalf("err %v: not ErrSchemaNewer", err)
	}
	var se *store.SchemaError
	if !errors.As(err, &se) || se.Have != have || se.Know != postgres.SchemaVersion() {
		t.Fatalf("err %v: SchemaError %+v, want Have %d Know %d", err, se, have, postgres.SchemaVersion())
	}
	want := fmt.Sprintf(": schema version %d is newer than this evfwd knows (%d): ", have, postgres.SchemaVersion())
	if !strings.HasPrefix(err.Error(), "store postgres://") || !strings.Contains(err.Error(), want) {
		t.Errorf("message %q, want it to name the store and contain %q", err, want)
	}
}

func schemaOf(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.RuntimeParams["search_path"]
}

func schemaConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// schemaState describes schema: its tables and columns, and the versions
// its schema_migrations records.
func schemaState(t *testing.T, conn *pgx.Conn, schema string) string {
	t.Helper()
	ctx := context.Background()
	var cols, versions string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(table_name || '.' || column_name || ' ' || data_type, ', ' ORDER BY table_name, column_name), '')
		FROM information_schema.columns WHERE table_schema = $1`, schema).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT string_agg(version::text || '@' || applied_at::text, ',' ORDER BY version) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	return "columns: " + cols + "\nversions: " + versions
}
