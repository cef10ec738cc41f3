package forwarder

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/faultproxy"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// TestSlowDatabaseNoDuplicates is issue 31's third case at a smaller
// scale: two nodes share one PostgreSQL queue, and one of them reaches it
// through a proxy that delays every chunk, so its round trip (2 × 700 ms)
// outlasts its lease (1 s). Its leases come back when, by its own clock,
// they have run out; were they valid from its clock before it sent the
// Lease, the other node would take them too and both would send them. The
// receiver counts each messageId: every one must come exactly once.
func TestSlowDatabaseNoDuplicates(t *testing.T) {
	// The fast node's leases last a minute: with a second, as the slow
	// node's, a delivery goroutine starved of CPU by the other tests
	// under -race could finish past its own lease, which that node then
	// took again (201 of 1,200 sent twice in one run of the whole
	// suite). Only the slow node's leases need to run out in flight.
	t.Parallel()
	const (
		n     = 1200
		batch = 20
		ttl   = time.Second
		delay = 700 * time.Millisecond // each way: a round trip of 1.4 s
	)
	base := pgtest.URL(t) // with a query (its schema's search_path)
	// A pool that keeps a few connections open from the start: a
	// connection made through the delay takes several of its round trips.
	slowURL, proxy := faultproxy.InFront(t, base+"&pool_min_conns=4")
	fast := openPostgres(t, base)
	slow := openPostgres(t, slowURL)
	recv := newIDCount(t)
	proxy.SetDelay(delay) // after Open: the schema and the pool's connections came fast

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fastSent, slowSent sentCount
	slowLog := newLogCount()
	runs := []<-chan struct{}{runNode(t, ctx, fast, "fast", 2, time.Minute, recv.url, &fastSent, newLogCount()),
		runNode(t, ctx, slow, "slow", 64, ttl, recv.url, &slowSent, slowLog)}
	start := time.Now()
	for i := 0; i < n; i += batch {
		msgs := make([]store.Message, batch)
		for j := range msgs {
			msgs[j] = msg("web", fmt.Sprintf("m%04d", i+j))
			msgs[j].ReceivedAt = time.Now()
		}
		ingest(t, fast, msgs...)
	}
	recv.waitAll(t, n)
	delivered := time.Since(start)
	// Both nodes stop; a late second send would be in flight by now or
	// never, and Run returns after its deliveries in flight.
	cancel()
	for _, done := range runs {
		<-done
	}
	dups := recv.duplicates()
	late := slowLog.count(msgTooLate)
	t.Logf("%d messages delivered in %v (fast node %d requests, slow node %d; slow node's leases too late %d times); "+
		"%d sent more than once (%d extra requests)",
		n, delivered.Round(time.Millisecond), fastSent.Load(), slowSent.Load(), late, len(dups), recv.extra())
	if late == 0 {
		t.Errorf("the slow node's leases never came back too late: the test tests nothing")
	}
	if len(dups) > 0 {
		t.Errorf("%d of %d messages sent more than once, e.g. %v", len(dups), n, dups[:min(5, len(dups))])
	}
}

// runNode runs a forwarder on real time over s, sending source web to
// endpoint, until ctx ends; the channel closes when Run returned.
func runNode(t *testing.T, ctx context.Context, s store.Store, owner string, perSource int, ttl time.Duration, endpoint string, sent *sentCount, log *logCount) <-chan struct{} {
	t.Helper()
	sender, err := webhook.NewSender(webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.CloseIdleConnections)
	f, err := New(Config{
		Store: s, Sender: sender, Owner: owner, LeaseTTL: ttl, PerSource: perSource, Poll: 20 * time.Millisecond, Grace: 5 * time.Second,
		Destinations: map[string]*webhook.Destination{"web": {SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: endpoint}}}},
		Policy:       webhook.Policy{Jitter: -1}, Observer: sent, Logger: slog.New(log),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.Run(ctx); err != nil {
			t.Errorf("Run %s: %v", owner, err)
		}
	}()
	return done
}

// sentCount is an Observer that counts a node's requests.
type sentCount struct{ atomic.Int64 }

func (c *sentCount) Attempt(string, int64, webhook.Attempt)     { c.Add(1) }
func (c *sentCount) Finished(string, int64, store.Status, bool) {}

func openPostgres(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// idCount is a webhook receiver that counts the requests of each
// messageId.
type idCount struct {
	url     string
	latency time.Duration // of each answer
	mu      sync.Mutex
	seen    map[string]int
	more    chan struct{} // a value after each new id
}

func newIDCount(t *testing.T) *idCount {
	c := &idCount{latency: 10 * time.Millisecond, seen: map[string]int{}, more: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var m struct {
			MessageID string `json:"messageId"`
		}
		if err == nil {
			err = json.Unmarshal(body, &m)
		}
		if err != nil || m.MessageID == "" {
			t.Errorf("receiver: a body without messageId (%v): %s", err, body)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		time.Sleep(c.latency)
		c.mu.Lock()
		c.seen[m.MessageID]++
		c.mu.Unlock()
		select {
		case c.more <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// waitAll waits until n distinct ids arrived, within waitLimit.
func (c *idCount) waitAll(t *testing.T, n int) {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		c.mu.Lock()
		got := len(c.seen)
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-c.more:
		case <-limit:
			t.Fatalf("%v passed with %d of %d messages delivered", waitLimit, got, n)
		}
	}
}

// duplicates lists the ids that arrived more than once.
func (c *idCount) duplicates() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id, k := range c.seen {
		if k > 1 {
			out = append(out, id)
		}
	}
	return out
}

// extra is the number of requests beyond one per id.
func (c *idCount) extra() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.seen {
		n += k - 1
	}
	return n
}

// The messages counted.
const (
	msgTooLate = "leases came back too late to use; left to lapse"
	msgLapse   = "lease ends before the delivery could; left to lapse"
)

// logCount is a slog.Handler that counts the records of each message, and
// passes each message on to seen while it has room.
type logCount struct {
	mu   sync.Mutex
	n    map[string]int
	seen chan string
}

func newLogCount() *logCount { return &logCount{n: map[string]int{}, seen: make(chan string, 64)} }

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCount) WithGroup(string) slog.Handler            { return l }

func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.n[r.Message]++
	l.mu.Unlock()
	select {
	case l.seen <- r.Message:
	default:
	}
	return nil
}

func (l *logCount) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[msg]
}

// waitFor waits for msg to be logged, within waitLimit.
func (l *logCount) waitFor(t *testing.T, msg string) {
	t.Helper()
	limit := time.After(waitLimit)
	for l.count(msg) == 0 {
		select {
		case <-l.seen:
		case <-limit:
			t.Fatalf("%v passed waiting for the log line %q", waitLimit, msg)
		}
	}
}

// A lease that comes back when its end, less the longest delivery, has
// passed on the node's clock is not used: its delivery is not made, the
// lease lapses, and the lease taken after its end makes the delivery once.
func TestLeaseBackTooLateIsNotUsed(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t)
	ingest(t, s, msg("web", "m1"))
	const ttl = time.Minute // the margin: half of it (the request timeout is an hour)
	var once sync.Once
	slowLease := func(f *Forwarder) {
		next := f.trace
		f.trace = func(source string, ev laneEvent, leased int) {
			if ev == laneLeased && leased > 0 {
				// The first Lease took half its TTL: no delivery may start.
				once.Do(func() { c.Set(t0.Add(ttl / 2)) })
			}
			next(source, ev, leased)
		}
	}
	log := newLogCount()
	r := start(t, c, Config{Store: s, LeaseTTL: ttl, Logger: slog.New(log),
		Destinations: map[string]*webhook.Destination{"web": dest(h)}}, slowLease)

	log.waitFor(t, msgLapse)
	if n := h.Count(); n != 0 {
		t.Fatalf("the endpoint got %d requests under a lease too short to make them", n)
	}
	if got := r.settle(t, "web"); got != 0 {
		t.Fatalf("leased %d deliveries again under the lapsing lease", got)
	}
	c.Set(t0.Add(ttl + time.Millisecond)) // past the lease's end
	r.Notify("web")
	waitFor(t, "delivered", func() bool { return only(t, s).Status == store.Delivered })
	if n := h.Count(); n != 1 {
		t.Errorf("the endpoint got %d requests, want 1", n)
	}
}
