package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// OpenShared returns two handles on one new, empty store, as two nodes
// would have; the suite closes them.
type OpenShared func(t *testing.T) (a, b store.Store)

// RunShared runs the cases of a store that several processes use at once
// (PostgreSQL): leases are exclusive across handles, a dead holder's lease
// is taken over after it expires, and a message ingested through both is
// stored once.
func RunShared(t *testing.T, open OpenShared) {
	tests := []struct {
		name string
		fn   func(t *testing.T, a, b store.Store)
	}{
		{"ExpiredLeaseTakenOver", testTakeover},
		{"ConcurrentLeasesDisjoint", testLeasesDisjoint},
		{"SameMessageThroughBoth", testIngestBoth},
		{"ReclaimKeepsLiveLeases", testReclaimShared},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case has a store of its own
			a, b := open(t)
			t.Cleanup(func() { a.Close(); b.Close() })
			tt.fn(t, a, b)
		})
	}
}

func testTakeover(t *testing.T, a, b store.Store) {
	ctx := context.Background()
	ingest(t, a, Msg("web", "x", 0, true), Msg("web", "y", 0, true))
	held := lease(t, a, "dead", "web", 2, t0)
	if len(held) != 2 {
		t.Fatalf("leased %d, want 2", len(held))
	}
	a.Close() // the holder is gone without completing
	if got := lease(t, b, "alive", "web", 5, t0.Add(59*time.Second)); len(got) != 0 {
		t.Fatalf("taken over before the lease ran out: %v", ids(got))
	}
	got := lease(t, b, "alive", "web", 5, t0.Add(61*time.Second))
	if len(got) != 2 {
		t.Fatalf("after expiry leased %v, want both", ids(got))
	}
	err := b.Complete(ctx, []store.Completion{{ID: got[0].ID, Owner: "alive", Status: store.Delivered, Attempts: 1, FirstAttempt: t0}})
	if err != nil {
		t.Fatal(err)
	}
	// The dead holder's late completion (a node that was only slow) does
	// not undo the new holder's.
	err = b.Complete(ctx, []store.Completion{{ID: got[0].ID, Owner: "dead", Status: store.Failed, Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := b.Get(ctx, got[0].ID); d.Status != store.Delivered {
		t.Errorf("status = %s, want delivered", d.Status)
	}
}

func testLeasesDisjoint(t *testing.T, a, b store.Store) {
	const n = 400
	msgs := make([]store.Message, n)
	for i := range msgs {
		msgs[i] = Msg("web", fmt.Sprintf("m%03d", i), 0, true)
	}
	ingest(t, a, msgs...)
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for w := range 8 {
		s := a
		if w%2 == 1 {
			s = b
		}
		owner := fmt.Sprintf("n%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := s.Lease(context.Background(), store.LeaseRequest{Owner: owner, Source: "web", Limit: 7, Now: t0, TTL: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, d := range ds {
					if prev, dup := seen[d.ID]; dup {
						t.Errorf("delivery %d leased by %s and %s", d.ID, prev, owner)
					}
					seen[d.ID] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("leased %d distinct deliveries, want %d", len(seen), n)
	}
}

func testIngestBoth(t *testing.T, a, b store.Store) {
	msgs := make([]store.Message, 200)
	for i := range msgs {
		msgs[i] = Msg("web", fmt.Sprintf("m%03d", i), 0, true)
	}
	// Reversed on one side: the two requests meet in opposite orders.
	rev := make([]store.Message, len(msgs))
	for i := range msgs {
		rev[len(msgs)-1-i] = msgs[i]
	}
	var wg sync.WaitGroup
	for _, side := range []struct {
		s    store.Store
		msgs []store.Message
	}{{a, msgs}, {b, rev}, {a, rev}, {b, msgs}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := side.s.Ingest(context.Background(), side.msgs); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ds, err := b.List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(msgs) {
		t.Errorf("got %d deliveries, want %d (one per message)", len(ds), len(msgs))
	}
}

func testReclaimShared(t *testing.T, a, b store.Store) {
	ingest(t, a, Msg("web", "x", 0, true))
	lease(t, a, "live", "web", 1, t0)
	n, err := b.Reclaim(context.Background(), t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("Reclaim released %d live leases of another node", n)
	}
	if got := lease(t, b, "other", "web", 1, t0.Add(time.Second)); len(got) != 0 {
		t.Errorf("leased a delivery under another node's live lease: %v", ids(got))
	}
}
