package cmd

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// TestSchemaNewerRefusedByCommands: serve and evfwd deliveries, pointed at
// a store a newer evfwd migrated, exit 1 with one error line that names
// the store and both schema versions and says what to do.
func TestSchemaNewerRefusedByCommands(t *testing.T) {
	ctx := context.Background()
	cfg := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")

	path := filepath.Join(t.TempDir(), "evfwd.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 1)`, sqlite.SchemaVersion()+1)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"deliveries", "list", "--store", "sqlite://" + path},
		{"serve", "--config", cfg, "--store", path, "--addr", "127.0.0.1:0"},
	} {
		res := execute(t, testFactory(t, "", false, nil), args...)
		t.Logf("evfwd %s: exit %d\n%s", args[0], res.Code, res.Stderr)
		want := fmt.Sprintf("store %s: schema version %d is newer than this evfwd knows (%d): a newer evfwd migrated this store",
			path, sqlite.SchemaVersion()+1, sqlite.SchemaVersion())
		checkSchemaRefusal(t, args, res, want)
	}

	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		st, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Pool().Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 1)`, postgres.SchemaVersion()+1)
		name := st.Path()
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"deliveries", "list", "--store", url},
			{"serve", "--config", cfg, "--store", url, "--addr", "127.0.0.1:0"},
		} {
			res := execute(t, testFactory(t, "", false, nil), args...)
			t.Logf("evfwd %s: exit %d\n%s", args[0], res.Code, res.Stderr)
			want := fmt.Sprintf("store %s: schema version %d is newer than this evfwd knows (%d): a newer evfwd migrated this store",
				name, postgres.SchemaVersion()+1, postgres.SchemaVersion())
			checkSchemaRefusal(t, args, res, want)
		}
	})
}

func checkSchemaRefusal(t *testing.T, args []string, res result, want string) {
	t.Helper()
	if res.Code != 1 {
		t.Errorf("evfwd %s: exit %d, want 1", args[0], res.Code)
	}
	if n := strings.Count(res.Stderr, want); n != 1 {
		t.Errorf("evfwd %s: stderr has %q %d times, want once:\n%s", args[0], want, n, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "upgrade evfwd") || strings.Count(res.Stderr, "error: ") != 1 {
		t.Errorf("evfwd %s: want one error line that says to upgrade evfwd:\n%s", args[0], res.Stderr)
	}
	if res.Stdout != "" {
		t.Errorf("evfwd %s: stdout %q", args[0], res.Stdout)
	}
}
