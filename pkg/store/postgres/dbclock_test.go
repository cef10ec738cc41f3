package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/faultproxy"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// TestSlowLeaseLastsFromDatabaseClock: a node whose statement takes longer
// to reach the server than its lease lasts (2 s each way, a lease of
// 1.5 s) still gets a lease that holds
// once it is there. The lease runs from the database's clock when the
// statement runs; had it run from the node's clock before it left, it
// would have ended before it was even written, and another node would
// take the delivery while the first one sends it.
//
// The test waits on real time: the clock under test is the server's.
func TestSlowLeaseLastsFromDatabaseClock(t *testing.T) {
	t.Parallel()
	const delay, ttl = 2 * time.Second, 1500 * time.Millisecond
	ctx := context.Background()
	base := pgtest.URL(t) // with a query (its schema's search_path)
	// One connection: the one the warm-up prepares is the Lease's.
	slowURL, proxy := faultproxy.InFront(t, base+"&pool_max_conns=1")
	fast, slow := openURL(t, base), openURL(t, slowURL)
	if err := fast.Ingest(ctx, []store.Message{storetest.Msg("web", "a", 0, true)}); err != nil {
		t.Fatal(err)
	}
	leaseAt := func(s *Store, owner string, now time.Time) []store.Delivery {
		ds, err := s.Lease(ctx, store.LeaseRequest{Owner: owner, Source: "web", Limit: 1, Now: now, TTL: ttl})
		if err != nil {
			t.Fatalf("Lease %s: %v", owner, err)
		}
		return ds
	}
	// Nothing of source none: the statements are prepared, and the Lease
	// below is one write each way through the proxy.
	if _, err := slow.Lease(ctx, store.LeaseRequest{Owner: "slow", Source: "none", Limit: 1, Now: time.Now(), TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	proxy.SetDelay(delay)

	sent := time.Now()
	type leased struct {
		ds  []store.Delivery
		err error
	}
	got := make(chan leased, 1)
	go func() {
		ds, err := slow.Lease(ctx, store.LeaseRequest{Owner: "slow", Source: "web", Limit: 1, Now: sent, TTL: ttl})
		got <- leased{ds, err}
	}()
	// The statement reaches the server no sooner than delay after sent
	// (later on a loaded machine: the bound is for failing, not timing).
	leaseEnd := waitOwner(t, fast, "slow", sent.Add(4*delay+10*time.Second))
	// The lease runs TTL from when the statement ran, by the server's
	// clock (this machine's): not from sent, the node's.
	if min := sent.Add(delay + ttl - 50*time.Millisecond); leaseEnd.Before(min) {
		t.Fatalf("the slow lease ends %v after it was sent, want at least %v (TTL from when the server ran it)", leaseEnd.Sub(sent), min.Sub(sent))
	}
	// Past the lease's end on the slow node's clock, before its end on
	// the server's.
	time.Sleep(time.Until(sent.Add(ttl + 100*time.Millisecond)))
	taken := len(leaseAt(fast, "fast", time.Now())) != 0
	if late := time.Now(); !late.Before(leaseEnd) {
		t.Skipf("the check ended %v after the slow lease's end in the server: too late to tell (a loaded machine)", late.Sub(leaseEnd))
	}
	if taken {
		t.Fatalf("another node leased the delivery %v after the slow lease was sent, while it held", time.Since(sent))
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Lease slow: %v", r.err)
	}
	ds := r.ds
	t.Logf("the slow Lease took %v; its lease held past its TTL on the node's clock", time.Since(sent).Round(time.Millisecond))
	if len(ds) != 1 || !ds[0].LeaseEnd.Equal(sent.Add(ttl)) {
		t.Fatalf("slow Lease = %+v, want one delivery with LeaseEnd %v (its Now+TTL)", ds, sent.Add(ttl))
	}
	// And it ends: TTL after the statement ran, the other node takes it.
	deadline := time.Now().Add(10 * time.Second)
	for len(leaseAt(fast, "fast", time.Now())) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the slow lease still held %v after it was sent", time.Since(sent))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOwner waits until the delivery's lease is owner's, as s reads it,
// failing the test at deadline, and returns when that lease ends.
func waitOwner(t *testing.T, s *Store, owner string, deadline time.Time) time.Time {
	t.Helper()
	for {
		var got *string
		var end int64
		if err := s.pool.QueryRow(context.Background(), `SELECT lease_owner, lease_expires_at FROM deliveries`).Scan(&got, &end); err != nil {
			t.Fatal(err)
		}
		if got != nil && *got == owner {
			return time.UnixMilli(end)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery was not leased to %s by %v", owner, deadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
