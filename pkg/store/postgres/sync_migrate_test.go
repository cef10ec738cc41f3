package postgres

import (
	"context"
	"testing"

	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestSyncListsMigrate stores a list the way schema version 2 kept it
// (sync_values by kind and key) and checks that the next sync after the
// upgrade diffs against it.
func TestSyncListsMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := oldSchema(t, 2, `INSERT INTO syncs (kind, key, name, created_at, synced_at) VALUES ('audience', 'vip', 'VIP', 1, 1);
		INSERT INTO sync_values (kind, key, user_id, value) VALUES ('audience', 'vip', 'a', 'true'), ('audience', 'vip', 'b', 'true')`)

	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckSyncListMigrated(t, s)
}

// oldSchema makes a database of its own at schema version upto, as an
// older evfwd left it, with the rows seed (SQL, its parameters args)
// inserts, and returns its URL.
func oldSchema(t *testing.T, upto int, seed string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	schema := cfg.ConnConfig.RuntimeParams["search_path"]
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE schema_migrations (version int PRIMARY KEY, applied_at bigint NOT NULL)`); err != nil {
			return err
		}
		for v := 1; v <= upto; v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations VALUES ($1, 0)`, v); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, seed, args...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// TestCollectedRowsMigrate stores a message as the schema before body_form
// kept it, its collected JSON, and checks that after the upgrade it is
// leased as that and sent as the same webhook body.
func TestCollectedRowsMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := oldSchema(t, SchemaVersion()-1, `WITH m AS (
		INSERT INTO messages (source, message_id, type, user_id, received_at, body)
		VALUES ('web', 'm1', 'alias', 'u_2', 1714564802000, $1) RETURNING id)
		INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
		SELECT id, 'web', 'webhooks', 'pending', 1714564802000, 1714564802000, 1714564802000 FROM m`, []byte(storetest.CollectedBody))
	s, err := Open(ctx, url, Options{})
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
	url := oldSchema(t, SchemaVersion()-2, `WITH m AS (
		INSERT INTO messages (source, message_id, type, user_id, received_at, body)
		VALUES ('web', 'm1', 'track', 'u', $1, '{}'), ('web', 'm2', 'track', 'u', $1, '{}') RETURNING id, message_id)
		INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
		SELECT m.id, 'web', d.dest, 'pending', $1 + d.off, $1, $1
		FROM m JOIN (VALUES ('m1', 'hooks', 0), ('m1', 'crm', 0), ('m2', 'crm', 1)) AS d (mid, dest, off) ON d.mid = m.message_id`,
		int64(storetest.DestinationsSeedDue))
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckDestinationsMigrated(t, s)
}
