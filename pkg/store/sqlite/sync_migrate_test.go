package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// TestSyncListsMigrate stores a list the way schema version 2 kept it
// (sync_values by kind and key) and checks that the next sync after the
// upgrade diffs against it.
func TestSyncListsMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := oldStore(t, 2, `INSERT INTO syncs (kind, key, name, created_at, synced_at) VALUES ('audience', 'vip', 'VIP', 1, 1);
		INSERT INTO sync_values (kind, key, user_id, value) VALUES ('audience', 'vip', 'a', 'true'), ('audience', 'vip', 'b', 'true');`)

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckSyncListMigrated(t, s)
}

// oldStore makes a file at schema version upto, as an older evfwd left
// it, with the rows seed (SQL, its parameters args) inserts, and returns
// its path.
func oldStore(t *testing.T, upto int, seed string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= upto; v++ {
		if err := apply(ctx, db, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, seed, args...); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCollectedRowsMigrate stores a message as the schema before body_form
// kept it, its collected JSON, and checks that after the upgrade it is
// leased as that and sent as the same webhook body.
func TestCollectedRowsMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := oldStore(t, SchemaVersion()-1, `INSERT INTO messages (id, source, message_id, type, user_id, received_at, body)
			VALUES (1, 'web', 'm1', 'alias', 'u_2', 1714564802000, ?);
		INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
			VALUES (1, 'web', 'webhooks', 'pending', 1714564802000, 1714564802000, 1714564802000)`, []byte(storetest.CollectedBody))
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckCollectedRow(t, s, "web")
}

// TestDestinationsMigrate stores pending deliveries of two destinations
// as the schema before destinations' own due index kept them, and checks
// that after the upgrade each destination leases its own and one's can be
// cancelled.
func TestDestinationsMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := oldStore(t, SchemaVersion()-1, `INSERT INTO messages (id, source, message_id, type, user_id, received_at, body)
			VALUES (1, 'web', 'm1', 'track', 'u', ?1, '{}'), (2, 'web', 'm2', 'track', 'u', ?1, '{}');
		INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
			VALUES (1, 'web', 'hooks', 'pending', ?1, ?1, ?1), (1, 'web', 'crm', 'pending', ?1, ?1, ?1),
				(2, 'web', 'crm', 'pending', ?1 + 1, ?1, ?1)`, int64(storetest.DestinationsSeedDue))
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckDestinationsMigrated(t, s)
}
