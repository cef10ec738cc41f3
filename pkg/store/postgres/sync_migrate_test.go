package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestSyncListsMigrate stores a list the way schema version 2 kept it
// (sync_values by kind and key) and checks that the next sync after the
// upgrade diffs against it.
func TestSyncListsMigrate(t *testing.T) {
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
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE schema_migrations (version int PRIMARY KEY, applied_at bigint NOT NULL)`); err != nil {
			return err
		}
		for v := 1; v <= 2; v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations VALUES ($1, 0)`, v); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO syncs (kind, key, name, created_at, synced_at) VALUES ('audience', 'vip', 'VIP', 1, 1);
			INSERT INTO sync_values (kind, key, user_id, value) VALUES ('audience', 'vip', 'a', 'true'), ('audience', 'vip', 'b', 'true')`)
		return err
	})
	pool.Close()
	if err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var sent []string
	sy := store.Sync{Kind: store.KindAudience, Key: "vip", Name: "VIP", Now: time.Now(), Removed: []byte("false"),
		Messages: func(user string, value []byte) []store.Message {
			sent = append(sent, user+"="+string(value))
			return []store.Message{{Source: "web", MessageID: fmt.Sprint(len(sent)), Type: "identify", UserID: user,
				ReceivedAt: time.Now(), Body: []byte("{}")}}
		}}
	res, err := s.Sync(ctx, sy, func(yield func(store.Value, error) bool) {
		for _, u := range []string{"b", "c"} {
			if !yield(store.Value{UserID: u, Value: []byte("true")}, nil) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.SyncResult{Added: 1, Removed: 1, Unchanged: 1, Messages: 2}); *res != want {
		t.Errorf("result %+v, want %+v", *res, want)
	}
	if fmt.Sprint(sent) != "[c=true a=false]" {
		t.Errorf("sent %v", sent)
	}
	if n, err := s.SyncLeftovers(ctx); err != nil || n != 0 {
		t.Errorf("leftovers %d, %v", n, err)
	}
}
