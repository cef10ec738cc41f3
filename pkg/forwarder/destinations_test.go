package forwarder

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/mapping"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/store"
)

// route is a destination name of source "web" sending to hooks.
func route(name string, hooks ...*webhooktest.Receiver) *destination.Destination {
	return &destination.Destination{Source: "web", Name: name, Webhook: *dest(hooks...)}
}

// to is msg for the named destinations.
func to(id string, names ...string) store.Message {
	m := msg("web", id)
	m.Destinations = names
	return m
}

// checkSigned fails unless r carries the X-Signature of its own body.
func checkSigned(t *testing.T, r webhooktest.Request) {
	t.Helper()
	if got, want := r.Header.Get(signature.Header), signature.Sign([]byte(secret), r.Body); got != want {
		t.Errorf("X-Signature %q, want %q (over the body as sent)", got, want)
	}
}

// Each destination of a source gets only its own deliveries, with its own
// method, headers and shape; the mapped body is what is signed.
func TestDestinationsGetTheirOwn(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	ha, hb := newHook(t), newHook(t)
	a := route("a", ha)
	b := route("b", hb)
	b.Webhook.Method = http.MethodPut
	var err error
	if b.Mapping, err = mapping.Parse([]byte(`{"name":{"@path":"$.event"},"who":{"@path":"$.userId"}}`)); err != nil {
		t.Fatal(err)
	}
	ingest(t, s, to("m1", "a", "b"), to("m2", "a"), to("m3", "b"))
	r := start(t, c, Config{Store: s, Routes: []*destination.Destination{a, b}})
	waitFor(t, "3 deliveries to a and b", func() bool { return ha.Count() >= 2 && hb.Count() >= 2 })
	r.stop(t)
	if n := ha.Count(); n != 2 {
		t.Errorf("a got %d requests, want 2", n)
	}
	for _, req := range ha.Requests() {
		if req.Method != http.MethodPost {
			t.Errorf("a: method %s, want POST", req.Method)
		}
		checkSigned(t, req)
	}
	got := hb.Requests()
	if len(got) != 2 {
		t.Fatalf("b got %d requests, want 2", len(got))
	}
	var bodies []string
	for _, req := range got {
		if req.Method != http.MethodPut {
			t.Errorf("b: method %s, want PUT", req.Method)
		}
		checkSigned(t, req)
		bodies = append(bodies, string(req.Body))
	}
	slices.Sort(bodies)
	want := []string{`{"name":"E","who":"u_m1"}`, `{"name":"E","who":"u_m3"}`}
	if !slices.Equal(bodies, want) {
		t.Errorf("b's bodies %q, want %q", bodies, want)
	}
	for _, d := range list(t, s, store.Filter{}) {
		if d.Status != store.Delivered {
			t.Errorf("delivery %d (%s) %s, want delivered", d.ID, d.Destination, d.Status)
		}
	}
}

// A batching destination sends its deliveries as JSON arrays of up to its
// size, one request each, signed over the array; each delivery records the
// attempt and ends delivered.
func TestBatchesAreOneRequestEach(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t)
	b := route("batched", h)
	b.Batch = destination.BatchConfig{Size: 5, MaxBytes: destination.DefaultBatchBytes}
	var msgs []store.Message
	for i := range 12 {
		msgs = append(msgs, to(fmt.Sprintf("m%02d", i), "batched"))
	}
	ingest(t, s, msgs...)
	// Past every message's batch wait: a batch short of its size goes at
	// once.
	c.Set(t0.Add(2 * batchWait))
	r := start(t, c, Config{Store: s, Routes: []*destination.Destination{b}})
	waitFor(t, "12 deliveries delivered", func() bool {
		n := 0
		for _, d := range list(t, s, store.Filter{Status: store.Delivered}) {
			if d.Destination == "batched" {
				n++
			}
		}
		return n == 12
	})
	r.stop(t)
	// The lane has room for batchesInFlight batches: the three are leased
	// in one Lease.
	r.tracer.mu.Lock()
	for _, p := range r.tracer.lanes["web"].passes {
		if p.leased > 0 {
			if p.leased != 12 {
				t.Errorf("the first Lease took %d deliveries, want all 12", p.leased)
			}
			break
		}
	}
	r.tracer.mu.Unlock()
	seen := map[string]int{}
	var sizes []int
	for _, req := range h.Requests() {
		checkSigned(t, req)
		var items []struct {
			MessageID string `json:"messageId"`
		}
		if err := json.Unmarshal(req.Body, &items); err != nil {
			t.Fatalf("body %q: not a JSON array: %v", req.Body, err)
		}
		sizes = append(sizes, len(items))
		for _, it := range items {
			seen[it.MessageID]++
		}
		if id := req.Header.Get("Content-Type"); id != "application/json" {
			t.Errorf("Content-Type %q", id)
		}
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{2, 5, 5}) {
		t.Errorf("batch sizes %v, want [2 5 5]", sizes)
	}
	if len(seen) != 12 {
		t.Errorf("%d messages sent, want 12", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s sent %d times", id, n)
		}
	}
	d := detail(t, s, list(t, s, store.Filter{})[0].ID)
	if len(d.Records) != 1 || d.Records[0].Status != 200 {
		t.Errorf("a batched delivery's records %s, want the batch's one 200", records(d))
	}
}

// A failed batch is retried: every delivery in it stays pending with its
// attempt counted, and goes again in a later batch.
func TestFailedBatchIsRetried(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t, webhooktest.Statuses(503, 200))
	b := route("batched", h)
	b.Batch = destination.BatchConfig{Size: 10, MaxBytes: destination.DefaultBatchBytes}
	ingest(t, s, to("m1", "batched"), to("m2", "batched"), to("m3", "batched"))
	c.Set(t0.Add(2 * batchWait))
	r := start(t, c, Config{Store: s, Routes: []*destination.Destination{b}})
	waitFor(t, "the failed batch on record", func() bool {
		ds := list(t, s, store.Filter{})
		return len(ds) == 3 && !slices.ContainsFunc(ds, func(d store.Delivery) bool { return d.Attempts != 1 })
	})
	c.Set(t0.Add(time.Hour))
	r.Notify("web")
	waitFor(t, "the batch delivered on its second attempt", func() bool {
		return len(list(t, s, store.Filter{Status: store.Delivered})) == 3
	})
	r.stop(t)
	if n := h.Count(); n != 2 {
		t.Errorf("%d requests, want 2 (the batch, then again)", n)
	}
}

// A paused destination sends nothing and keeps every delivery; resumed, it
// sends them. Its source's other destinations go on meanwhile.
func TestPausedDestinationKeepsItsDeliveries(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	ha, hb := newHook(t), newHook(t)
	a, b := route("a", ha), route("b", hb)
	a.Paused = true
	ingest(t, s, to("m1", "a", "b"), to("m2", "a", "b"))
	r := start(t, c, Config{Store: s, Routes: []*destination.Destination{a, b}})
	waitFor(t, "b's deliveries on record", func() bool {
		return len(list(t, s, store.Filter{Destination: "b", Status: store.Delivered})) == 2
	})
	r.quiet(t, "web")
	if n := ha.Count(); n != 0 {
		t.Fatalf("paused destination got %d requests", n)
	}
	if n := len(list(t, s, store.Filter{Status: store.Pending})); n != 2 {
		t.Fatalf("%d pending, want a's 2", n)
	}
	// A paused destination with work waiting is not a stalled forwarder.
	c.Set(t0.Add(2 * StallAfter))
	pa := r.lanes().find("web", "a")
	r.fill(context.Background(), context.Background(), pa) // a pass of the paused lane: it leases nothing
	if _, why := r.Stalled(); strings.Contains(why, "web/a") {
		t.Errorf("paused destination reported as stalled: %s", why)
	}
	if !r.Resume("web", "a") {
		t.Fatal("Resume: unknown destination")
	}
	waitFor(t, "a's deliveries after resume", func() bool { return ha.Count() == 2 })
	if r.Pause("web", "nope") {
		t.Error("Pause of an unknown destination reported true")
	}
}

// A rate-limited destination never sends faster than its rate: n requests
// at r a second take at least (n-1)/r.
func TestRateLimitHoldsThePace(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t)
	d := route("paced", h)
	d.Rate = destination.RateConfig{PerSecond: 40, Burst: 1}
	const n = 9
	var msgs []store.Message
	for i := range n {
		msgs = append(msgs, to(fmt.Sprintf("m%d", i), "paced"))
	}
	ingest(t, s, msgs...)
	begin := time.Now()
	start(t, c, Config{Store: s, Routes: []*destination.Destination{d}})
	waitFor(t, "every request", func() bool { return h.Count() == n })
	if took, least := time.Since(begin), time.Duration(n-1)*time.Second/40; took < least {
		t.Errorf("%d requests in %v, faster than 40/s allows (%v)", n, took, least)
	}
}

// Reconfigure starts an added destination at once and stops a removed
// one, cancelling its pending deliveries.
func TestReconfigureAddsAndRemoves(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	ha, hb := newHook(t, held), newHook(t)
	a, b := route("a", ha), route("b", hb)
	ingest(t, s, to("m1", "a", "b"), to("m2", "a", "b"))
	r := start(t, c, Config{Store: s, Routes: []*destination.Destination{a}})
	waitFor(t, "a's first request", func() bool { return ha.Count() >= 1 })
	if n := hb.Count(); n != 0 {
		t.Fatalf("b, not configured, got %d requests", n)
	}
	// a's requests are held open: removing it lets them finish, then
	// cancels the rest.
	done := make(chan Reconfigured)
	go func() {
		res, err := r.Reconfigure(context.Background(), []*destination.Destination{b})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "b's deliveries", func() bool { return hb.Count() == 2 })
	ha.Release()
	res := recv(t, "Reconfigure", done)
	if !slices.Equal(res.Added, []string{"web/b"}) || !slices.Equal(res.Removed, []string{"web/a"}) {
		t.Errorf("Reconfigure %+v, want web/b added, web/a removed", res)
	}
	var delivered, cancelled int
	for _, d := range list(t, s, store.Filter{Destination: "a"}) {
		switch d.Status {
		case store.Delivered:
			delivered++
		case store.Cancelled:
			cancelled++
		}
	}
	if delivered+cancelled != 2 || res.Cancelled["web/a"] != cancelled || delivered == 0 {
		t.Errorf("a: %d delivered, %d cancelled (reported %d); want the ones in flight delivered, the rest cancelled",
			delivered, cancelled, res.Cancelled["web/a"])
	}
}

// The in-process pace releases turns at least its interval apart as they
// are taken, however late a waiter wakes: never a bunch after a delay.
func TestMemPaceNeverBunches(t *testing.T) {
	t.Parallel()
	p := &memPace{every: 5 * time.Millisecond, burst: 1}
	var mu sync.Mutex
	var at []time.Time
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := p.wait(context.Background()); err != nil {
				t.Error(err)
			}
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	if took, least := at[len(at)-1].Sub(at[0]), 19*p.every; took < least-time.Millisecond {
		t.Errorf("20 turns in %v, want at least %v", took, least)
	}
}
