package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// TestSchemaNewerRefused opens a file a newer evfwd migrated (one version
// past this build's) and checks that Open refuses it, naming both
// versions, and leaves the file as it was.
func TestSchemaNewerRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	newer := sqlite.SchemaVersion() + 1
	schemaExec(t, path, fmt.Sprintf(`INSERT INTO schema_migrations (version, applied_at) VALUES (%d, 1)`, newer))
	before := schemaFiles(t, path)

	for _, opts := range []sqlite.Options{{}, {NoRecover: true}} {
		s, err := sqlite.Open(ctx, path, opts)
		if err == nil {
			s.Close()
			t.Fatalf("Open %+v: a newer schema was opened", opts)
		}
		checkSchemaError(t, err, path, newer)
		if after := schemaFiles(t, path); !bytes.Equal(after, before) {
			t.Errorf("Open %+v changed the file (%d bytes, were %d)", opts, len(after), len(before))
		}
	}
}

// TestSchemaNewerNothingApplied: a file that records only a version past
// this build's gets none of this build's migrations.
func TestSchemaNewerNothingApplied(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	newer := sqlite.SchemaVersion() + 1
	schemaExec(t, path, fmt.Sprintf(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
		INSERT INTO schema_migrations (version, applied_at) VALUES (%d, 1)`, newer))
	_, err := sqlite.Open(context.Background(), path, sqlite.Options{NoRecover: true})
	checkSchemaError(t, err, path, newer)
	db := schemaDB(t, path)
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	if fmt.Sprint(tables) != "[schema_migrations]" {
		t.Errorf("tables after the refusal: %v", tables)
	}
}

func checkSchemaError(t *testing.T, err error, path string, have int) {
	t.Helper()
	if !errors.Is(err, store.ErrSchemaNewer) {
		t.Fatalf("err %v: not ErrSchemaNewer", err)
	}
	var se *store.SchemaError
	if !errors.As(err, &se) || se.Have != have || se.Know != sqlite.SchemaVersion() {
		t.Fatalf("err %v: SchemaError %+v, want Have %d Know %d", err, se, have, sqlite.SchemaVersion())
	}
	want := fmt.Sprintf("store %s: schema version %d is newer than this evfwd knows (%d): ", path, have, sqlite.SchemaVersion())
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q, want it to start %q", err, want)
	}
}

func schemaDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func schemaExec(t *testing.T, path, query string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(query); err != nil {
		t.Fatal(err)
	}
}

// schemaFiles is the database file's bytes followed by its WAL's, if any.
func schemaFiles(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := os.ReadFile(path + "-wal"); err == nil {
		b = append(b, w...)
	}
	return b
}

// TestDeliveryWritesNeedNoTempTable: writing a delivery row evaluates the
// conditions of its partial indexes; an IN list there made SQLite build a
// temporary table for every row written. The index of settled deliveries
// must still serve the queries for one status.
func TestDeliveryWritesNeedNoTempTable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := schemaDB(t, path)
	for _, q := range []string{
		`UPDATE deliveries SET status = 'delivered', updated_at = 1 WHERE id = 1`,
		`INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
			VALUES (1, 's', 'webhooks', 'pending', 0, 0, 0)`,
	} {
		rows, err := db.Query("EXPLAIN " + q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			v := make([]any, len(cols))
			p := make([]any, len(cols))
			for i := range v {
				p[i] = &v[i]
			}
			if err := rows.Scan(p...); err != nil {
				t.Fatal(err)
			}
			if v[1] == "OpenEphemeral" {
				t.Errorf("%s: opens a temporary table (at %v)", q, v[0])
			}
		}
		rows.Close()
	}
	for _, status := range []string{"failed", "dead", "cancelled"} {
		var id, parent, notUsed int
		var plan string
		q := `EXPLAIN QUERY PLAN SELECT id FROM deliveries WHERE status = '` + status + `' AND source = 's' AND id > 0`
		if err := db.QueryRow(q).Scan(&id, &parent, &notUsed, &plan); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "deliveries_settled") {
			t.Errorf("deliveries of status %s: plan %q, want the index deliveries_settled", status, plan)
		}
	}
}

// TestNewFileSchemaAsMigrated: a new file gets at once the schema that the
// migrations build one by one — every table, column, index and its
// definition — with every version recorded; and a file migrated one
// migration at a time opens as up to date.
func TestNewFileSchemaAsMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	fresh, stepwise := filepath.Join(dir, "fresh.db"), filepath.Join(dir, "stepwise.db")
	s, err := sqlite.Open(ctx, fresh, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := sqlite.MigrateStepwise(stepwise); err != nil {
		t.Fatal(err)
	}
	describe := func(path string) string {
		db := schemaDB(t, path)
		var b strings.Builder
		for _, q := range []string{
			`SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`,
			`SELECT m.name || '.' || p.name || ' ' || p.type || ' notnull=' || p."notnull" || ' default=' || coalesce(p.dflt_value, 'NULL') || ' pk=' || p.pk
				FROM sqlite_schema m, pragma_table_xinfo(m.name) p WHERE m.type = 'table' ORDER BY m.name, p.cid`,
			`SELECT group_concat(version) FROM schema_migrations`,
		} {
			rows, err := db.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var line string
				rows.Scan(&line)
				b.WriteString(line + "\n")
			}
			rows.Close()
		}
		return b.String()
	}
	want := describe(stepwise)
	if !strings.Contains(want, "index deliveries_due on deliveries: CREATE INDEX deliveries_due ON deliveries (source, destination, next_attempt_at)") {
		t.Fatalf("the stepwise schema lacks the last migration's index:\n%s", want)
	}
	if got := describe(fresh); got != want {
		t.Errorf("a new file's schema differs from the migrated one\nnew:\n%s\nmigrated:\n%s", got, want)
	}
	s, err = sqlite.Open(ctx, stepwise, sqlite.Options{})
	if err != nil {
		t.Fatalf("Open of the stepwise-migrated file: %v", err)
	}
	s.Close()
	if got := describe(stepwise); got != want {
		t.Errorf("Open changed an up-to-date file's schema:\n%s", got)
	}
}
