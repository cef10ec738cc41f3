package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
)

// TestLeaseUpdatesInPlace: a lease changes no indexed column, so its new
// row version stays on the row's page (a HOT update, no index entries) as
// long as the page has room. Ingest leaves that room (fillfactor); on
// pages it packed full, every lease moved its rows to other pages.
func TestLeaseUpdatesInPlace(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), pgtest.URL(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ingestAt(t, s, 1, 300, 0)
	blocks := func() map[int64]int64 {
		rows, err := s.pool.Query(context.Background(), `SELECT id, (ctid::text::point)[0]::bigint FROM deliveries`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[int64]int64{}
		for rows.Next() {
			var id, block int64
			if err := rows.Scan(&id, &block); err != nil {
				t.Fatal(err)
			}
			m[id] = block
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := blocks()
	ds, err := s.Lease(context.Background(), store.LeaseRequest{Owner: "n1", Source: "web", Limit: 300,
		Now: time.Now().Add(time.Hour), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 300 {
		t.Fatalf("leased %d, want 300", len(ds))
	}
	after := blocks()
	moved := 0
	for _, d := range ds {
		if after[d.ID] != before[d.ID] {
			moved++
		}
	}
	if moved > 0 {
		t.Errorf("%d of %d leased deliveries moved to another page (block %d -> %d for the first)", moved, len(ds),
			before[ds[0].ID], after[ds[0].ID])
	}
}

// TestLeasePlans: under leaseSettings, a lease of one destination reads
// that destination's due index and a lease of every destination the
// source's, each in order without a sort; a cancel reads the
// destination's.
func TestLeasePlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, tt := range []struct {
		name, q string
		args    []any
		index   string
	}{
		{"every destination", leaseSQL, []any{"web", 0, 64, "n1", 0, 0, 0, 0}, "deliveries_due "},
		{"one destination", leaseDestinationSQL, []any{"web", 0, 64, "n1", 0, 0, 0, 0, "hooks"}, "deliveries_due_destination"},
		{"cancel", cancelSQL, []any{"web", "hooks", 1000, "removed", 0}, "deliveries_due_destination"},
	} {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, leaseSettings); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+tt.q, tt.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan += line + "\n"
		}
		rows.Close()
		tx.Rollback(ctx)
		if !strings.Contains(plan, "Index Scan using "+tt.index) || strings.Contains(plan, "Sort") {
			t.Errorf("%s: plan reads %s in order? \n%s", tt.name, tt.index, plan)
		}
	}
}
