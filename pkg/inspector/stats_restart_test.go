package inspector_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// TestServeStatsAfterRestart: the chart of an inspector just started shows
// the attempts the store recorded in the hour before (issue 41: empty
// after a restart though deliveries happened minutes before), each once,
// next to the ones the forwarder reports from then on.
func TestServeStatsAfterRestart(t *testing.T) {
	created := serveT0.Add(-40 * time.Minute) // 09:20:30
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "evfwd.db"), sqlite.Options{Now: func() time.Time { return created }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if err := st.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true), storetest.Msg("web", "m3", 0, true)}); err != nil {
		t.Fatal(err)
	}
	ds, err := st.Lease(ctx, store.LeaseRequest{Owner: "before", Source: "web", Limit: 3, Now: created, TTL: time.Hour})
	if err != nil || len(ds) != 3 {
		t.Fatalf("Lease: %v, %d", err, len(ds))
	}
	at := func(hhmmss string) time.Time {
		tm, err := time.Parse("15:04:05", hhmmss)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 11, 23, tm.Hour(), tm.Minute(), tm.Second(), 0, time.UTC)
	}
	rec := func(endpoint int, url, start string, status int, outcome webhook.Outcome) store.Attempt {
		return store.Attempt{Delivery: 1, Endpoint: endpoint, URL: url, Start: at(start), Latency: 5 * time.Millisecond, Status: status, Outcome: outcome.String()}
	}
	var cs []store.Completion
	for _, d := range ds {
		c := store.Completion{ID: d.ID, Owner: "before", Attempts: 1, FirstAttempt: created, Status: store.Delivered}
		switch d.MessageID {
		case "m1":
			c.Records = []store.Attempt{rec(0, okURL, "09:21:10", 200, webhook.Delivered)}
		case "m2": // dead after both URLs failed
			c.Status = store.Dead
			c.Records = []store.Attempt{rec(0, deadURL, "09:30:05", 500, webhook.Retryable), rec(1, okURL, "09:30:06", 503, webhook.Retryable)}
		case "m3": // its first try is over an hour old
			c.Records = []store.Attempt{rec(0, okURL, "08:59:00", 500, webhook.Retryable), rec(0, okURL, "09:59:59", 200, webhook.Delivered)}
		}
		cs = append(cs, c)
	}
	if err := st.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}

	b := newServeBenchWith(t, nil, func(cfg *inspector.ServeConfig) { cfg.Store = st })
	b.insp.Attempt("web", 4, webhook.Attempt{URL: okURL, Status: 200, Outcome: webhook.Delivered, Then: webhook.ThenDone, Latency: time.Millisecond, Start: serveT0})
	last := inspector.StatsMinutes - 1 // 10:00
	for range 2 {                      // the store is read once
		var s statsAnswer
		b.bearerJSON(t, "/api/stats", &s)
		ok, dead := s.Endpoints[0], s.Endpoints[1]
		for _, c := range []struct {
			name string
			got  inspector.Minute
			want inspector.Minute
		}{
			{"ok 09:21", ok.Minutes[last-39], inspector.Minute{T: "2026-11-23T09:21:00.000Z", Delivered: 1, Latency: inspector.Latency{Avg: 5, Max: 5}}},
			{"ok 09:30", ok.Minutes[last-30], inspector.Minute{T: "2026-11-23T09:30:00.000Z", Failed: 1, Latency: inspector.Latency{Avg: 5, Max: 5}}},
			{"dead 09:30", dead.Minutes[last-30], inspector.Minute{T: "2026-11-23T09:30:00.000Z", Retried: 1, Latency: inspector.Latency{Avg: 5, Max: 5}}},
			{"ok 09:59", ok.Minutes[last-1], inspector.Minute{T: "2026-11-23T09:59:00.000Z", Delivered: 1, Latency: inspector.Latency{Avg: 5, Max: 5}}},
			{"ok 10:00, live", ok.Minutes[last], inspector.Minute{T: "2026-11-23T10:00:00.000Z", Delivered: 1, Latency: inspector.Latency{Avg: 1, Max: 1}}},
		} {
			if c.got != c.want {
				t.Errorf("%s: %+v, want %+v", c.name, c.got, c.want)
			}
		}
		total := 0
		for _, m := range append(ok.Minutes, dead.Minutes...) {
			total += m.Delivered + m.Retried + m.Failed
		}
		if total != 5 {
			t.Errorf("%d attempts counted, want 5 (the one over an hour old left out)", total)
		}
		// The destination's chart: each delivery's round once, at its end.
		if len(s.Destinations) != 1 {
			t.Fatalf("destinations %+v, want the webhooks block's", s.Destinations)
		}
		dm := s.Destinations[0].Minutes
		for _, c := range []struct {
			name      string
			got, want inspector.Counts
		}{
			{"09:21", dm[last-39], inspector.Counts{T: "2026-11-23T09:21:00.000Z", Delivered: 1}},
			{"09:30", dm[last-30], inspector.Counts{T: "2026-11-23T09:30:00.000Z", Failed: 1}},
			{"09:59", dm[last-1], inspector.Counts{T: "2026-11-23T09:59:00.000Z", Delivered: 1}},
		} {
			if c.got != c.want {
				t.Errorf("destination %s: %+v, want %+v", c.name, c.got, c.want)
			}
		}
		settled := 0
		for _, m := range dm {
			settled += m.Delivered + m.Retried + m.Failed
		}
		if settled != 3 {
			t.Errorf("%d rounds settled on the destination's chart, want 3", settled)
		}
	}
}
