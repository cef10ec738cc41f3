package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// testStats checks Stats: pending deliveries per source (leased ones
// included), the creation time of each source's oldest, finished
// deliveries not counted, and a size on disk.
func testStats(t *testing.T, s store.Store) {
	ctx := context.Background()
	stats := func() store.Stats {
		t.Helper()
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		if st.SizeBytes <= 0 {
			t.Errorf("SizeBytes = %d, want > 0", st.SizeBytes)
		}
		return st
	}
	if st := stats(); len(st.Pending) != 0 {
		t.Errorf("empty store: Pending = %+v", st.Pending)
	}

	// Created in three steps a few milliseconds apart (times are stored in
	// milliseconds), so that the oldest is told from the others.
	ingest(t, s, Msg("web", "a", 0, true), Msg("app", "b", 0, true), Msg("web", "unforwarded", 0, false))
	time.Sleep(3 * time.Millisecond)
	ingest(t, s, Msg("web", "c", 0, true), Msg("app", "d", 0, true))
	time.Sleep(3 * time.Millisecond)
	ingest(t, s, Msg("web", "e", 0, true))
	ds, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]time.Time{}
	for _, d := range ds {
		created[d.MessageID] = d.CreatedAt
	}
	if !created["a"].Before(created["c"]) || !created["c"].Before(created["e"]) {
		t.Fatalf("creation times not increasing: %v", created)
	}
	check := func(when string, want ...store.SourcePending) {
		t.Helper()
		if diff := cmp.Diff(want, stats().Pending); diff != "" {
			t.Errorf("%s: Pending mismatch (-want +got):\n%s", when, diff)
		}
	}
	check("after ingest",
		store.SourcePending{Source: "app", N: 2, Oldest: created["b"]},
		store.SourcePending{Source: "web", N: 3, Oldest: created["a"]})

	// Leased deliveries are still pending; finished ones are not counted,
	// and the oldest is the oldest still pending.
	got := lease(t, s, "n1", "web", 2, t0)
	if diff := cmp.Diff([]string{"a", "c"}, ids(got)); diff != "" {
		t.Fatalf("lease mismatch (-want +got):\n%s", diff)
	}
	check("leased",
		store.SourcePending{Source: "app", N: 2, Oldest: created["b"]},
		store.SourcePending{Source: "web", N: 3, Oldest: created["a"]})
	if err := s.Complete(ctx, []store.Completion{
		{ID: got[0].ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t0},
		{ID: got[1].ID, Owner: "n1", Status: store.Pending, Attempts: 1, FirstAttempt: t0, NextAttempt: t0.Add(time.Minute)},
	}); err != nil {
		t.Fatal(err)
	}
	check("one delivered, one scheduled again",
		store.SourcePending{Source: "app", N: 2, Oldest: created["b"]},
		store.SourcePending{Source: "web", N: 2, Oldest: created["c"]})

	got = lease(t, s, "n1", "app", 2, t0)
	if err := s.Complete(ctx, []store.Completion{
		{ID: got[0].ID, Owner: "n1", Status: store.Failed, Attempts: 1, FirstAttempt: t0},
		{ID: got[1].ID, Owner: "n1", Status: store.Dead, Attempts: 9, FirstAttempt: t0},
	}); err != nil {
		t.Fatal(err)
	}
	check("app finished", store.SourcePending{Source: "web", N: 2, Oldest: created["c"]})

	// A retried delivery is pending again and keeps its creation time.
	if n, err := s.Retry(ctx, []int64{got[0].ID}, store.Filter{}, t0.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v; want 1", n, err)
	}
	check("app retried",
		store.SourcePending{Source: "app", N: 1, Oldest: created["b"]},
		store.SourcePending{Source: "web", N: 2, Oldest: created["c"]})
}
