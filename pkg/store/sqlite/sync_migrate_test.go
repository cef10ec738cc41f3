package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// TestSyncListsMigrate stores a list the way schema version 2 kept it
// (sync_values by kind and key) and checks that the next sync after the
// upgrade diffs against it.
func TestSyncListsMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 2; v++ {
		if err := apply(ctx, db, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO syncs (kind, key, name, created_at, synced_at) VALUES ('audience', 'vip', 'VIP', 1, 1);
		INSERT INTO sync_values (kind, key, user_id, value) VALUES ('audience', 'vip', 'a', 'true'), ('audience', 'vip', 'b', 'true');`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(ctx, path, Options{})
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

func TestPacer(t *testing.T) {
	p := newPacer(1000, 100, 4000)
	p.took(1000, 4*stepTarget) // slow: toward 250
	if p.size() >= 1000 || p.size() < 100 {
		t.Errorf("after a slow step: %d", p.size())
	}
	for range 20 {
		p.took(p.size(), 8*stepTarget)
	}
	if p.size() != 100 {
		t.Errorf("after slow steps: %d, want the least, 100", p.size())
	}
	p.took(10, time.Millisecond) // a short last step: no change
	if p.size() != 100 {
		t.Errorf("after a short step: %d, want 100", p.size())
	}
	for range 20 {
		p.took(p.size(), stepTarget/10)
	}
	if p.size() != 4000 {
		t.Errorf("after quick steps: %d, want the most, 4000", p.size())
	}
	for range 20 {
		p.took(p.size(), time.Duration(p.size())*stepTarget/2000)
	}
	if p.size() < 1800 || p.size() > 2200 {
		t.Errorf("at 2000 rows per stepTarget: %d", p.size())
	}
}
