package forwarder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// cutStore is a real store whose link can be cut: while cut, Ping and
// Lease fail as a PostgreSQL store's do when nothing answers. It counts
// Leases and announces every Ping (the probe's steps) to the test.
type cutStore struct {
	store.Store
	t      *testing.T
	cut    atomic.Bool
	leases atomic.Int64
}

func (s *cutStore) Ping(ctx context.Context) error {
	defer changed(s.t).Fire()
	if s.cut.Load() {
		return fmt.Errorf("%w: timeout: %w", store.ErrUnavailable, context.DeadlineExceeded)
	}
	return nil
}

func (s *cutStore) Lease(ctx context.Context, r store.LeaseRequest) ([]store.Delivery, error) {
	s.leases.Add(1)
	if s.cut.Load() {
		return nil, fmt.Errorf("timeout: %w", context.DeadlineExceeded)
	}
	return s.Store.Lease(ctx, r)
}

// TestStoreDownPausesLeasing: a Lease that fails has the store probed at
// once; while the probe fails the lanes lease nothing, however often they
// are woken, and StoreHealth says why; once a probe answers, the lanes
// are woken and lease again within about a probe period (probeEveryDown).
func TestStoreDownPausesLeasing(t *testing.T) {
	t.Parallel()
	c := newClock()
	st := &cutStore{Store: openStore(t, c), t: t}
	h := newHook(t)
	r := start(t, c, Config{Store: st, Destinations: map[string]*webhook.Destination{"web": dest(h)}})

	st.cut.Store(true)
	ingest(t, st.Store, msg("web", "m1"))
	r.settle(t, "web") // its Lease fails: the probe runs at once
	waitFor(t, "the store reported unreachable", func() bool { _, err := r.StoreHealth().Unavailable(); return err != nil })
	if since, err := r.StoreHealth().Unavailable(); !errors.Is(err, store.ErrUnavailable) || since.IsZero() {
		t.Fatalf("Unavailable() = %v, %v; want store.ErrUnavailable and a time", err, since)
	}
	// A pass that began before the store was found down may still lease;
	// once one that began after has ended, every earlier one has too.
	r.settle(t, "web")
	before := st.leases.Load()
	for range 3 {
		r.settle(t, "web")
	}
	if n := st.leases.Load() - before; n != 0 {
		t.Fatalf("%d Leases while the store was unreachable, want none", n)
	}

	healed := time.Now()
	st.cut.Store(false)
	waitFor(t, "the delivery made after the heal", func() bool { return h.Count() == 1 })
	if took := time.Since(healed); took > probeEveryDown+store.CallTimeout {
		t.Errorf("delivered %v after the heal, want within a probe period (%v)", took, probeEveryDown)
	}
	if _, err := r.StoreHealth().Unavailable(); err != nil {
		t.Errorf("after the heal: Unavailable() = %v", err)
	}
}

// TestStaleSuccessLeavesStoreDown: a call that succeeds once the store was
// found unreachable marks it reachable only if it was made after that; an
// answer that was on its way before the link went says nothing of it now.
func TestStaleSuccessLeavesStoreDown(t *testing.T) {
	h := newStoreHealth(&cutStore{t: t}, time.Second, slog.New(slog.DiscardHandler))
	before := time.Now().Add(-time.Millisecond)
	h.set(fmt.Errorf("%w: reset", store.ErrUnavailable), time.Now())
	h.observe(context.Background(), before, nil)
	if _, err := h.Unavailable(); err == nil {
		t.Fatal("a success of a call made before the outage marked the store reachable")
	}
	h.observe(context.Background(), time.Now(), nil)
	if _, err := h.Unavailable(); err != nil {
		t.Fatalf("a success of a call made since the outage left the store unreachable: %v", err)
	}
}
