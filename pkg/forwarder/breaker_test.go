package forwarder

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// ---- the state machine alone, on a fake clock ----

func testBreaker() *breaker {
	return newBreaker("web", "http://h/", BreakerConfig{Threshold: 3, ProbeInitial: time.Second, ProbeMax: 5 * time.Second,
		Jitter: -1}.withDefaults(webhook.Policy{}))
}

var (
	fail503 = webhook.Attempt{URL: "http://h/", Status: 503, Class: webhook.ClassServerError, Outcome: webhook.Retryable}
	ok200   = webhook.Attempt{URL: "http://h/", Status: 200, Class: webhook.ClassOK, Outcome: webhook.Delivered}
	fin404  = webhook.Attempt{URL: "http://h/", Status: 404, Class: webhook.ClassClientError, Outcome: webhook.Final}
)

func TestBreakerOpensAfterThresholdInARow(t *testing.T) {
	b := testBreaker()
	now := t0
	for range 2 {
		b.report(now, fail503, false)
	}
	b.report(now, fin404, false) // the endpoint answers: the run starts again
	for i := range 2 {
		if changed, _ := b.report(now, fail503, false); changed {
			t.Fatalf("opened after %d failures in a row, threshold 3", i+1)
		}
		if ok, _, _ := b.admit(now); !ok {
			t.Fatal("closed endpoint refused a request")
		}
	}
	if changed, _ := b.report(now, fail503, false); !changed || b.state != store.EndpointOpen {
		t.Fatalf("third failure in a row: state %s", b.state)
	}
	if ok, _, _ := b.admit(now.Add(999 * time.Millisecond)); ok {
		t.Fatal("open endpoint admitted a request before its probe was due")
	}
	// A request under way when it opened fails: nothing changes.
	if changed, _ := b.report(now, fail503, false); changed || !b.nextProbe().Equal(now.Add(time.Second)) {
		t.Fatalf("late failure changed the state: %s, next probe %v", b.state, b.nextProbe())
	}
}

func TestBreakerProbeScheduleOnePerInterval(t *testing.T) {
	b := testBreaker()
	now := t0
	for range 3 {
		b.report(now, fail503, false)
	}
	var gaps []time.Duration
	for range 6 {
		next := b.nextProbe()
		gaps = append(gaps, next.Sub(now))
		now = next
		ok, probe, changed := b.admit(now)
		if !ok || !probe || !changed || b.state != store.EndpointHalfOpen {
			t.Fatalf("at the probe time: ok %v probe %v changed %v state %s", ok, probe, changed, b.state)
		}
		if ok, _, _ := b.admit(now); ok {
			t.Fatal("a second request admitted while the probe is in flight")
		}
		if r, p := b.ready(now); r || p {
			t.Fatal("half-open endpoint ready")
		}
		b.report(now, fail503, true)
	}
	if want := "[1s 2s 4s 5s 5s 5s]"; fmt.Sprint(gaps) != want {
		t.Errorf("probe gaps %v, want %s", gaps, want)
	}
	// Retry-After longer than the schedule is honoured.
	now = b.nextProbe()
	b.admit(now)
	ra := fail503
	ra.RetryAfter = time.Minute
	b.report(now, ra, true)
	if got := b.nextProbe().Sub(now); got != time.Minute {
		t.Errorf("after Retry-After 60s the next probe is in %v", got)
	}
}

func TestBreakerJitterSpreadsProbes(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999} {
		b := newBreaker("web", "u", BreakerConfig{Threshold: 1, Rand: func() float64 { return r }}.withDefaults(webhook.Policy{}))
		b.report(t0, fail503, false)
		got := b.nextProbe().Sub(t0)
		if got < 800*time.Millisecond || got > 1200*time.Millisecond {
			t.Errorf("rand %v: first probe after %v, want 1s ±20%%", r, got)
		}
	}
}

func TestBreakerProbeOutcomes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		a     webhook.Attempt
		state store.Health
	}{
		{"2xx closes", ok200, store.EndpointClosed},
		{"final 4xx closes: the endpoint answers", fin404, store.EndpointClosed},
		{"retryable opens again", fail503, store.EndpointOpen},
		{"interrupted gives the probe back", webhook.Attempt{Outcome: webhook.Interrupted}, store.EndpointOpen},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := testBreaker()
			for range 3 {
				b.report(t0, fail503, false)
			}
			now := b.nextProbe()
			b.admit(now)
			closes := b.closings()
			changed, closed := b.report(now, tt.a, true)
			if !changed || b.state != tt.state || closed != (tt.state == store.EndpointClosed) {
				t.Fatalf("changed %v closed %v state %s, want %s", changed, closed, b.state, tt.state)
			}
			if closed && (b.closings() != closes+1 || b.fails != 0 || !b.nextProbe().IsZero()) {
				t.Errorf("closed: closings %d, fails %d, next probe %v", b.closings(), b.fails, b.nextProbe())
			}
			if tt.a.Outcome == webhook.Interrupted {
				if ok, probe, _ := b.admit(now); !ok || !probe {
					t.Error("an interrupted probe's slot was not given back")
				}
			}
		})
	}
}

func TestBreakerUnusedProbeAndLateSuccess(t *testing.T) {
	b := testBreaker()
	for range 3 {
		b.report(t0, fail503, false)
	}
	now := b.nextProbe()
	b.admit(now)
	if !b.unused(now) || b.state != store.EndpointOpen {
		t.Fatalf("unused probe: state %s", b.state)
	}
	if ok, probe, _ := b.admit(now); !ok || !probe {
		t.Fatal("the probe was not due again at once")
	}
	// A request under way since before it opened answers 2xx: it closes.
	if _, closed := b.report(now, ok200, false); !closed {
		t.Fatalf("late success: state %s", b.state)
	}
	b.postpone(now) // closed: no effect
	if b.state != store.EndpointClosed {
		t.Fatal("postpone changed a closed endpoint")
	}
}

// ---- the forwarder with a dead endpoint, on a real store ----

// breakerCfg is a breaker opening after 3 failures, probing 1 s after
// opening, doubling to 4 s, without jitter.
var breakerCfg = BreakerConfig{Threshold: 3, ProbeInitial: time.Second, ProbeMax: 4 * time.Second, Jitter: -1}

// After Threshold failures no request reaches the dead URL except one probe
// per probe interval; the deliveries wait without spending attempts, and a
// healthy source is not held back meanwhile.
func TestDeadEndpointGetsOnlyProbes(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	dead, ok := newHook(t, webhooktest.Statuses(503)), newHook(t)
	var msgs []store.Message
	for i := range 10 {
		msgs = append(msgs, msg("web", fmt.Sprint("w", i)))
	}
	ingest(t, s, msgs...)
	obs := &observer{}
	f := start(t, c, Config{
		Store: s, PerSource: 1, Breaker: breakerCfg, Observer: obs,
		Destinations: map[string]*webhook.Destination{"web": dest(dead), "ok": dest(ok)},
		Policy:       webhook.Policy{Initial: time.Minute},
	})
	obs.finishedN(t, 3)
	drained(t, f, "web")
	if n := f.settle(t, "web"); n != 0 || dead.Count() != 3 {
		t.Fatalf("open endpoint: %d leased, %d requests; want 0, 3", n, dead.Count())
	}
	// Health is the breakers' live state: the dead URL open, its probe
	// due in a second; the other source's closed.
	h := f.Health()
	if len(h) != 2 || h[0].Source != "ok" || h[0].State != store.EndpointClosed || h[1].Source != "web" || h[1].URL != dead.URL ||
		h[1].State != store.EndpointOpen || h[1].Failures != 3 || !h[1].NextProbe.Equal(t0.Add(time.Second)) || h[1].LastError == "" {
		t.Errorf("Health() = %+v", h)
	}
	ingest(t, s, msg("ok", "o1"))
	f.Notify("ok")
	waitFor(t, "the other source delivered", func() bool {
		return len(list(t, s, store.Filter{Source: "ok", Status: store.Delivered})) == 1
	})

	probes := []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second, 15 * time.Second}
	for i, at := range probes {
		c.Set(t0.Add(at - time.Millisecond))
		if n := f.settle(t, "web"); n != 0 {
			t.Fatalf("probe %d: leased %d before it was due", i+1, n)
		}
		c.Set(t0.Add(at))
		if n := f.settle(t, "web"); n != 1 {
			t.Fatalf("probe %d: leased %d, want 1", i+1, n)
		}
		obs.finishedN(t, 4+i+1)
		drained(t, f, "web")
		if n := f.settle(t, "web"); n != 0 {
			t.Fatalf("after probe %d: leased %d more", i+1, n)
		}
		if got := dead.Count(); got != 3+i+1 {
			t.Fatalf("after probe %d: %d requests, want %d", i+1, got, 3+i+1)
		}
	}
	attempts := 0
	for _, d := range list(t, s, store.Filter{Source: "web"}) {
		if d.Status != store.Pending {
			t.Errorf("delivery %s: %s", d.MessageID, d.Status)
		}
		attempts += d.Attempts
	}
	if attempts != dead.Count() {
		t.Errorf("%d attempts counted for %d requests", attempts, dead.Count())
	}
}

// While the first URL is open, messages go straight to the second, without
// a request to the first; its probe still comes on schedule. The first URL
// is configured last too: one breaker, skipped at both places.
func TestOpenURLSkippedForTheNext(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e0, e1 := newHook(t, webhooktest.Statuses(503)), newHook(t)
	for i := range 8 {
		ingest(t, s, msg("web", fmt.Sprint("m", i)))
	}
	obs := &observer{}
	f := start(t, c, Config{
		Store: s, PerSource: 1, Breaker: breakerCfg, Observer: obs,
		Destinations: map[string]*webhook.Destination{"web": dest(e0, e1, e0)},
	})
	waitFor(t, "all delivered", func() bool { return len(list(t, s, store.Filter{Status: store.Delivered})) == 8 })
	if e0.Count() != 3 || e1.Count() != 8 {
		t.Fatalf("requests: first URL %d, second %d; want 3, 8", e0.Count(), e1.Count())
	}
	if h := f.Health(); len(h) != 2 || h[0].URL != e0.URL || h[0].State != store.EndpointOpen || h[1].State != store.EndpointClosed {
		t.Errorf("Health() = %+v, want the first URL open and the second closed, once each", h)
	}
	for _, d := range list(t, s, store.Filter{}) {
		det := detail(t, s, d.ID)
		want := "1:1:200:delivered"
		if d.MessageID < "m3" {
			want = "1:0:503:retryable " + want
		}
		if got := records(det); got != want {
			t.Errorf("%s: records %q, want %q", d.MessageID, got, want)
		}
	}
	c.Set(t0.Add(time.Second))
	ingest(t, s, msg("web", "late"))
	f.Notify("web")
	waitFor(t, "the late one delivered", func() bool { return len(list(t, s, store.Filter{Status: store.Delivered})) == 9 })
	if e0.Count() != 4 {
		t.Errorf("first URL got %d requests; want its probe (4)", e0.Count())
	}
}

// One URL at two endpoints, not side by side, and in two lanes of its
// source is one breaker: kept once by the lane and by the forwarder.
func TestBreakerSharedOnce(t *testing.T) {
	a, b := testBreaker(), testBreaker()
	var l1, l2 lane
	for _, x := range []*breaker{a, b, a} {
		l1.addBreaker(x)
	}
	l2.addBreaker(b)
	if !slices.Equal(l1.breakers, []*breaker{a, b}) || !slices.Equal(l1.breakerOf, []int{0, 1, 0}) {
		t.Errorf("lane of A, B, A: breakers %v, of %v; want [A B], [0 1 0]", l1.breakers, l1.breakerOf)
	}
	set := laneSet{all: []*lane{&l1, &l2}}
	if got := set.breakers(); !slices.Equal(got, []*breaker{a, b}) {
		t.Errorf("every lane's breakers: %v, want [A B]", got)
	}
}

// When a probe succeeds, the backlog drains at once: what waited without a
// request and what sat in its own backoff after failing at the endpoint,
// all without the clock moving further.
func TestRecoveryDrainsBacklogAtOnce(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t, webhooktest.Statuses(503, 503, 503, 200))
	var msgs []store.Message
	for i := range 20 {
		msgs = append(msgs, msg("web", fmt.Sprintf("m%02d", i)))
	}
	ingest(t, s, msgs...)
	obs := &observer{}
	f := start(t, c, Config{
		Store: s, PerSource: 1, Breaker: breakerCfg, Observer: obs,
		Destinations: map[string]*webhook.Destination{"web": dest(h)},
		Policy:       webhook.Policy{Initial: time.Hour},
	})
	obs.finishedN(t, 3)
	if n := f.settle(t, "web"); n != 0 {
		t.Fatalf("leased %d while open", n)
	}
	c.Set(t0.Add(time.Second))
	f.Notify("web")
	waitFor(t, "all delivered", func() bool { return len(list(t, s, store.Filter{Status: store.Delivered})) == 20 })
	if h.Count() != 23 {
		t.Errorf("%d requests, want 3 failures and 20 deliveries", h.Count())
	}
	if got := c.Now(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("clock moved to %v", got)
	}
}

// A delivery leased before its endpoint opened and started after waits
// without a request or an attempt ("held"), and goes as soon as the
// endpoint closes.
func TestHeldDeliveryReleasedOnRecovery(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t, webhooktest.Statuses(503, 503, 503, 200))
	ingest(t, s, msg("web", "a"), msg("web", "b"), msg("web", "c"), msg("web", "d"))
	obs := &observer{}
	f := start(t, c, Config{
		Store: s, PerSource: 1, Breaker: breakerCfg, Observer: obs,
		Destinations: map[string]*webhook.Destination{"web": dest(h)},
		Policy:       webhook.Policy{Initial: time.Hour},
	})
	obs.finishedN(t, 3)
	// Open now; hold d by hand as a lane would if it had leased it just
	// before the third failure: lease it and run it through deliver.
	ds, err := s.Lease(t.Context(), store.LeaseRequest{Owner: f.cfg.Owner, Source: "web", Limit: 1, Now: c.Now(), TTL: time.Hour})
	if err != nil || len(ds) != 1 {
		t.Fatalf("lease: %v %v", ds, err)
	}
	// In a slot of the lane, as a pass takes it (deliver frees it).
	l := f.lane("web")
	l.inflight.admit(ds)
	l.inflight.mu.Lock()
	l.inflight.slots++
	l.inflight.mu.Unlock()
	f.deliver(t.Context(), l, ds[0], nil, false)
	d := detail(t, s, ds[0].ID)
	if d.Status != store.Pending || d.Attempts != 0 || len(d.Records) != 0 || !d.NextAttempt.After(c.Now().Add(time.Hour)) {
		t.Fatalf("held: %s, %d attempts, %d records, next %v", d.Status, d.Attempts, len(d.Records), d.NextAttempt)
	}
	c.Set(t0.Add(time.Second))
	f.Notify("web")
	waitFor(t, "all delivered", func() bool { return len(list(t, s, store.Filter{Status: store.Delivered})) == 4 })
	if h.Count() != 7 {
		t.Errorf("%d requests, want 3 failures and 4 deliveries", h.Count())
	}
	if d := detail(t, s, ds[0].ID); d.Attempts != 1 || records(d) != "1:0:200:delivered" {
		t.Errorf("held delivery: %d attempts, records %q; want 1 request", d.Attempts, records(d))
	}
}

// The retry window is unchanged: a message whose endpoint stays dead dies
// 4 h after its first attempt.
func TestWindowStillKillsWhileOpen(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t, webhooktest.Statuses(503))
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	f := start(t, c, Config{
		Store: s, Breaker: BreakerConfig{Threshold: 1, Jitter: -1}, Observer: obs,
		Destinations: map[string]*webhook.Destination{"web": dest(h)},
	})
	obs.finishedN(t, 1)
	c.Set(t0.Add(4*time.Hour - time.Minute))
	f.settle(t, "web")
	obs.finishedN(t, 2)
	if d := only(t, s); d.Status != store.Pending {
		t.Fatalf("before the window closed: %s", d.Status)
	}
	c.Set(t0.Add(4*time.Hour + time.Second))
	f.settle(t, "web")
	waitFor(t, "dead", func() bool { return only(t, s).Status == store.Dead })
	if h.Count() != 3 {
		t.Errorf("%d requests, want the first, a probe, and the last", h.Count())
	}
}

// drained waits until source's lane has no delivery in flight: a delivery
// is reported Finished a moment before it gives its room in the lane back
// (and then wakes the lanes, which the tracer hears).
func drained(t *testing.T, r *running, source string) {
	t.Helper()
	l := r.lane(source)
	webhooktest.Await(t, &r.tracer.changed, "no delivery of "+source+" in flight", func() bool {
		_, _, busy := l.inflight.look()
		return !busy
	})
}
