package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/leasefloor"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// twoNodes opens two stores on one schema, the second with a floor clock
// the test moves, and ingests n messages due at t0, m1 … mn.
func twoNodes(t *testing.T, n int) (a, b *Store, clock *time.Time, t0 time.Time) {
	t.Helper()
	url := pgtest.URL(t)
	var err error
	if a, err = Open(context.Background(), url, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if b, err = Open(context.Background(), url, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	now := time.Unix(1_000_000, 0)
	clock = &now
	b.floors = leasefloor.New(func() time.Time { return *clock })
	t0 = storetest.Msg("web", "x", 0, true).ReceivedAt
	ingestAt(t, a, 1, n, 0)
	return a, b, clock, t0
}

// ingestAt ingests messages m<from> … m<to> due at offset after t0.
func ingestAt(t *testing.T, s *Store, from, to int, offset time.Duration) {
	t.Helper()
	var msgs []store.Message
	for i := from; i <= to; i++ {
		msgs = append(msgs, storetest.Msg("web", fmt.Sprint("m", i), offset, true))
	}
	if err := s.Ingest(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
}

// leaseIDs leases for "gone", whose leases last a minute, or for "live",
// whose leases outlast the test.
func leaseIDs(t *testing.T, s *Store, owner string, limit int, now time.Time) []string {
	t.Helper()
	ttl := time.Hour
	if owner == "gone" {
		ttl = time.Minute
	}
	ds, err := s.Lease(context.Background(), store.LeaseRequest{Owner: owner, Source: "web", Limit: limit, Now: now, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.MessageID)
	}
	slices.Sort(ids)
	return ids
}

// A lease that ran out behind the floor (its node is gone) is taken over
// within leasefloor.TTL, although every lease meanwhile is full: the floor's age
// counts from the last lease that read from the head.
func TestFloorTakesOverARunOutLeaseBehindIt(t *testing.T) {
	a, b, clock, t0 := twoNodes(t, 10)
	leaseIDs(t, a, "gone", 5, t0) // m1 … m5, until t0+1m; a is never heard of again
	if got := leaseIDs(t, b, "live", 5, t0); !slices.Equal(got, []string{"m10", "m6", "m7", "m8", "m9"}) {
		t.Fatalf("b leased %v", got)
	}
	for round := 1; round <= 3; round++ {
		ingestAt(t, b, 10+5*round-4, 10+5*round, time.Duration(round)*time.Minute)
		*clock = clock.Add(300 * time.Millisecond)
		got := leaseIDs(t, b, "live", 5, t0.Add(2*time.Minute+time.Duration(round)*time.Minute))
		// Within leasefloor.TTL the floor passes m1 … m5 over; each lease is
		// the round's new messages.
		if want := 10 + 5*round; len(got) != 5 || got[0] != fmt.Sprint("m", want-4) {
			t.Fatalf("round %d: leased %v, want m%d … m%d", round, got, want-4, want)
		}
	}
	*clock = clock.Add(leasefloor.TTL)
	ingestAt(t, b, 26, 30, 4*time.Minute)
	if got := leaseIDs(t, b, "live", 5, t0.Add(6*time.Minute)); !slices.Equal(got, []string{"m1", "m2", "m3", "m4", "m5"}) {
		t.Errorf("a floor older than leasefloor.TTL since its last head scan: leased %v, want m1 … m5, whose lease ran out", got)
	}
}

// When a lease reads on from the head because the floor had too few
// after it, the new floor is the last row of that head scan: the rows
// between it and the old floor are leased next, not passed over.
func TestFloorFromTheHeadScan(t *testing.T) {
	a, b, _, t0 := twoNodes(t, 10)
	leaseIDs(t, a, "gone", 5, t0) // m1 … m5, until t0+1m
	leaseIDs(t, b, "live", 5, t0) // m6 … m10: the floor
	ingestAt(t, b, 11, 12, time.Minute)
	if got := leaseIDs(t, b, "live", 5, t0.Add(2*time.Minute)); !slices.Equal(got, []string{"m1", "m11", "m12", "m2", "m3"}) {
		t.Fatalf("after the floor m11, m12, then from the head m1 … m3: leased %v", got)
	}
	ingestAt(t, b, 13, 17, 3*time.Minute)
	if got := leaseIDs(t, b, "live", 5, t0.Add(3*time.Minute)); !slices.Equal(got, []string{"m13", "m14", "m15", "m4", "m5"}) {
		t.Errorf("leased %v, want m4, m5 (due since t0, unleased) before m13 … m15", got)
	}
}
