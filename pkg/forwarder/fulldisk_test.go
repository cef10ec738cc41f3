package forwarder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/broadcast"
	"github.com/evfwd/evfwd/internal/fullfs"
	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// watchedStore is the real store; it counts the Complete calls that
// failed and fires changed at each, so the test knows the disk refused an
// outcome. With fail set, Complete fails without calling the store, as on
// a full disk.
type watchedStore struct {
	store.Store
	changed *broadcast.Signal
	failed  atomic.Int64
	fail    atomic.Bool
}

func (s *watchedStore) Complete(ctx context.Context, cs []store.Completion) error {
	err := store.ErrFull
	if !s.fail.Load() {
		err = s.Store.Complete(ctx, cs)
	}
	if err != nil {
		s.failed.Add(1)
		s.changed.Fire()
	}
	return err
}

// deliveredIDs is an observer of the deliveries recorded delivered.
type deliveredIDs struct {
	mu  sync.Mutex
	ids map[int64]bool
}

func (o *deliveredIDs) Attempt(string, int64, webhook.Attempt) {}

func (o *deliveredIDs) Finished(_ string, id int64, status store.Status, _ bool) {
	if status != store.Delivered {
		return
	}
	o.mu.Lock()
	o.ids[id] = true
	o.mu.Unlock()
}

func (o *deliveredIDs) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids)
}

// TestFullDiskSendsOnce: a forwarder over a SQLite file on a file system
// that fills up while its deliveries go out. Outcomes the store cannot
// write wait in memory, the lane leases nothing more meanwhile, and their
// deliveries are not sent again when their leases run out; once space is
// freed every outcome is recorded and every message has gone out exactly
// once.
func TestFullDiskSendsOnce(t *testing.T) {
	t.Parallel()
	n := testsize.Pick(4000, 1500) // the race detector slows SQLite tenfold
	const ttl = time.Minute
	c := newClock()
	dir := fullfs.Mount(t, "8m")
	s, err := sqlite.Open(context.Background(), filepath.Join(dir, "evfwd.db"), sqlite.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var msgs []store.Message
	for i := range n {
		msgs = append(msgs, msg("web", fmt.Sprint("m", i)))
	}
	ingest(t, s, msgs...)

	// The first tenth is answered; the rest is held until released.
	recv := webhooktest.NewIDCounter(t, webhooktest.Notify(changed(t)),
		webhooktest.Script(append(make([]webhooktest.Reply, n/10), webhooktest.Reply{Hang: true})...))
	watched := &watchedStore{Store: s, changed: changed(t)}
	seen := &deliveredIDs{ids: map[int64]bool{}}
	r := start(t, c, Config{Store: watched, LeaseTTL: ttl, Observer: seen,
		Destinations: map[string]*webhook.Destination{"web": {SharedSecret: secret,
			Endpoints: []webhook.Endpoint{{URL: recv.URL}}}}})

	// A tenth went out and was recorded; the rest is held at the
	// receiver while the disk fills.
	waitFor(t, fmt.Sprint(n/10, " requests"), func() bool { return recv.Count() >= n/10 })
	ballast := filepath.Join(dir, "ballast")
	fullfs.Fill(t, ballast, 0)
	recv.Release()
	// SQLite records outcomes into the room its WAL file has, then fails.
	// Two retries fail too.
	waitFor(t, "three Completes to fail on the full disk", func() bool {
		d, _ := recv.Tally()
		return watched.failed.Load() >= 3 || d == n && seen.len() == n
	})
	if watched.failed.Load() < 3 {
		t.Fatalf("%d Completes failed: the disk never filled", watched.failed.Load())
	}
	// The leases of what was sent run out, three times over, while the
	// disk stays full; each time the lane looks at the store.
	for range 3 {
		r.drained(t, "web")
		c.Set(c.Now().Add(ttl + time.Second))
		r.settle(t, "web")
	}
	r.drained(t, "web")
	distinct, dups := recv.Tally()
	t.Logf("disk full: %d of %d messages sent, %d duplicates, %d failed Completes, %d recorded delivered",
		distinct, n, dups, watched.failed.Load(), seen.len())
	if dups != 0 {
		t.Errorf("%d duplicates while the disk was full", dups)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	c.Set(c.Now().Add(ttl + time.Second))
	waitFor(t, "every delivery recorded delivered after space was freed", func() bool {
		r.Notify("web")
		return seen.len() == n
	})
	distinct, dups = recv.Tally()
	t.Logf("space freed: %d of %d messages sent, %d duplicates", distinct, n, dups)
	if distinct != n || dups != 0 {
		t.Errorf("%d of %d messages sent, %d duplicates; want all, none", distinct, n, dups)
	}
	for _, d := range list(t, s, store.Filter{}) {
		if d.Status != store.Delivered || d.Attempts != 1 {
			t.Fatalf("delivery %d: %s after %d attempts, want delivered after 1", d.ID, d.Status, d.Attempts)
		}
	}
}

// drained waits until source's lane waits for a wake-up with nothing in
// flight (what it leased ahead it keeps while paused): then nothing wakes
// it but the test.
func (r *running) drained(t *testing.T, source string) {
	t.Helper()
	l := r.lane(source)
	tr := r.tracer
	webhooktest.Await(t, &tr.changed, "lane "+source+" to finish what it sent", func() bool {
		tr.mu.Lock()
		idle := tr.lanes[source] != nil && tr.lanes[source].last == laneIdle
		tr.mu.Unlock()
		return idle && l.inflight.sent()
	})
}
