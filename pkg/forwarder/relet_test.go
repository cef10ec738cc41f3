package forwarder

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// reletStore leases for f once, right after the first outcome that leaves
// a delivery pending is on record and before the forwarder knows it: the
// delivery is due again by then, and the Lease returns it while the lane
// still holds it.
type reletStore struct {
	store.Store
	c     *webhooktest.Clock
	f     atomic.Pointer[Forwarder]
	once  sync.Once
	again atomic.Int64 // deliveries the lane dropped as held
}

func (s *reletStore) Complete(ctx context.Context, cs []store.Completion) error {
	err := s.Store.Complete(ctx, cs)
	if err != nil || cs[0].Status != store.Pending || cs[0].Attempts != 1 {
		return err
	}
	s.once.Do(func() {
		s.c.Set(cs[0].NextAttempt.Add(time.Second))
		f := s.f.Load()
		leased, n := f.lease(ctx, f.lane("web"), 10)
		s.again.Store(int64(n - len(leased)))
	})
	return err
}

// A Lease that returns a delivery after its retry was recorded and before
// the lane let go of it must not leave it leased and unsent until the
// lease runs out: the lane gives that lease back, and the retry goes out
// when it is due.
func TestLeasedAgainWhileRecordedGoesBack(t *testing.T) {
	c := newClock()
	s := &reletStore{Store: openStore(t, c), c: c}
	h := newHook(t, webhooktest.Statuses(503, 200))
	ingest(t, s.Store, msg("web", "m1"))
	r := start(t, c, Config{Store: s, LeaseTTL: time.Hour, Policy: webhook.Policy{Initial: time.Millisecond},
		Destinations: map[string]*webhook.Destination{"web": dest(h)}}, func(f *Forwarder) { s.f.Store(f) })
	waitFor(t, "the retry recorded and let go", func() bool {
		return s.again.Load() > 0 && r.lane("web").inflight.holding() == 0
	})
	if s.again.Load() != 1 {
		t.Fatalf("the Lease returned %d deliveries the lane held, want 1: the test tests nothing", s.again.Load())
	}
	// Past the floor of the store's due index (leasefloor.TTL), well
	// within the lease.
	c.Set(c.Now().Add(2 * time.Second))
	waitFor(t, "the retry delivered", func() bool {
		r.Notify("web")
		return only(t, s.Store).Status == store.Delivered
	})
	if h.Count() != 2 {
		t.Errorf("%d requests, want 2 (the 503 and its retry)", h.Count())
	}
}
