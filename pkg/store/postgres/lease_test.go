package postgres

import (
	"context"
	"slices"
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

// TestLeasePlans: what reads pending deliveries reads deliveries_due, the
// one index of them (source, destination, next_attempt_at, id), never the
// table. Under leaseSettings, a lease of one destination reads its part
// in order, without a sort, as does a cancel; a lease of every
// destination reads each destination's part (a seek per destination)
// and sorts only what it picked from them. Under the server's own
// choice, on a table of mostly settled deliveries that autovacuum
// analyzed, a cancel seeks its destination's part, Release each
// destination's entries scheduled after now (the server may fetch the
// rows they point to as a bitmap: those rows, not the table), and Stats
// reads the index alone, sorting only its one row per source.
func TestLeasePlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// 20,000 deliveries of two sources, one in 50 pending, of three
	// destinations.
	if _, err := s.pool.Exec(ctx, `WITH m AS (
		INSERT INTO messages (source, message_id, type, received_at, body)
		SELECT CASE WHEN i % 2 = 0 THEN 'web' ELSE 'app' END, i::text, 'track', i, '{}' FROM generate_series(1, 20000) AS i
		RETURNING id, source)
		INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
		SELECT id, source, (ARRAY['hooks', 'crm', 'ads'])[id % 3 + 1], CASE WHEN id % 50 = 0 THEN 'pending' ELSE 'delivered' END,
			id, id, id FROM m`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE deliveries`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, q  string
		args     []any
		settings bool     // under leaseSettings
		want     []string // one of them in the plan
		sort     bool     // a Sort allowed
	}{
		{"one destination", leaseSQL, []any{"web", 0, 64, "n1", 0, 0, 0, 0, "hooks"}, true,
			[]string{"Index Scan using deliveries_due on deliveries"}, false},
		{"every destination", leaseEverySQL, []any{"web", 0, 64, "n1", 0, 0, 0, 0}, true,
			[]string{"Index Scan using deliveries_due on deliveries"}, true},
		{"cancel", cancelSQL, []any{"web", "hooks", 1000, "removed", 0}, false,
			[]string{"Index Cond: ((source = 'web'::text) AND (destination = 'hooks'::text))"}, false},
		{"release", releaseSQL, []any{"web", 10000, []string{"breaker"}, 1000, 0}, false,
			[]string{"Index Cond: ((source = 'web'::text) AND (destination = dest.name) AND (next_attempt_at > '10000'::bigint))"}, false},
		// Index only once VACUUM could mark the pages all-visible; a
		// transaction of another test open on the server meanwhile holds
		// that back, and the planner reads the same entries as a bitmap,
		// then just those rows: pending ones either way.
		{"stats", statsSQL, nil, false, []string{"Index Only Scan using deliveries_due", "Bitmap Index Scan on deliveries_due"}, true},
	} {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tt.settings {
			settings := leaseSettings
			if tt.q == leaseEverySQL {
				settings = leaseEverySettings
			}
			if _, err := tx.Exec(ctx, settings); err != nil {
				t.Fatal(err)
			}
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
		// Nor the table, nor another index of it read through (the
		// deliveries of a message, the settled ones).
		if !slices.ContainsFunc(tt.want, func(w string) bool { return strings.Contains(plan, w) }) || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "deliveries_message") ||
			strings.Contains(plan, "deliveries_settled") || !tt.sort && strings.Contains(plan, "Sort") {
			t.Errorf("%s: plan reads deliveries_due (%s)? \n%s", tt.name, tt.want, plan)
		}
	}
}
