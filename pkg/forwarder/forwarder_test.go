package forwarder_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// These tests use the real parts: a SQLite store in a temporary directory,
// a real webhook.Sender and httptest servers as endpoints. The clock given
// to the forwarder, the retry policy and the store is a fake one, so retry
// schedules and retry windows are crossed by moving it, never by sleeping.

const secret = "s3cr3t"

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// ---- clock ----

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (never backwards).
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// ---- endpoints ----

type request struct {
	body []byte
	hdr  http.Header
}

// gauge counts requests being handled, across any number of hooks.
type gauge struct {
	mu       sync.Mutex
	cur, max int
}

func (g *gauge) add(d int) {
	g.mu.Lock()
	g.cur += d
	g.max = max(g.max, g.cur)
	g.mu.Unlock()
}

func (g *gauge) get() (cur, max int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur, g.max
}

// hook is a webhook endpoint. It answers the statuses in script, in order,
// then the last one forever (200 when script is empty). With a gate it
// holds every request, once received, until the gate is opened or the
// client goes away.
type hook struct {
	*httptest.Server
	gauge *gauge // this hook's concurrency
	share *gauge // optional, shared with other hooks

	mu     sync.Mutex
	reqs   []request
	script []int

	gate     chan struct{}
	openOnce sync.Once
}

type hookOpt func(*hook)

func gated() hookOpt               { return func(h *hook) { h.gate = make(chan struct{}) } }
func shared(g *gauge) hookOpt      { return func(h *hook) { h.share = g } }
func answers(codes ...int) hookOpt { return func(h *hook) { h.script = codes } }

func newHook(t *testing.T, opts ...hookOpt) *hook {
	t.Helper()
	h := &hook{gauge: &gauge{}}
	for _, o := range opts {
		o(h)
	}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	// Cleanups run last first: the gate opens before the server closes,
	// so Close never waits on a held request.
	t.Cleanup(h.Close)
	t.Cleanup(h.open)
	return h
}

func (h *hook) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.gauge.add(1)
	if h.share != nil {
		h.share.add(1)
	}
	h.mu.Lock()
	n := len(h.reqs)
	h.reqs = append(h.reqs, request{body: body, hdr: r.Header.Clone()})
	code := http.StatusOK
	if len(h.script) > 0 {
		code = h.script[min(n, len(h.script)-1)]
	}
	h.mu.Unlock()
	if h.gate != nil {
		select {
		case <-h.gate:
		case <-r.Context().Done():
		}
	}
	h.gauge.add(-1)
	if h.share != nil {
		h.share.add(-1)
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, "answer %d", code)
}

func (h *hook) open() {
	if h.gate != nil {
		h.openOnce.Do(func() { close(h.gate) })
	}
}

func (h *hook) received() []request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]request(nil), h.reqs...)
}

func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.reqs)
}

// ---- observer ----

type attemptSeen struct {
	source   string
	endpoint int
	status   int
	outcome  webhook.Outcome
}

type finishSeen struct {
	source string
	status store.Status
	retry  bool
}

type observer struct {
	delay time.Duration // Finished takes this long (set before use)

	mu       sync.Mutex
	attempts []attemptSeen
	finished []finishSeen
}

func (o *observer) Attempt(source string, a webhook.Attempt) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts = append(o.attempts, attemptSeen{source, a.Endpoint, a.Status, a.Outcome})
}

func (o *observer) Finished(source string, status store.Status, retry bool) {
	time.Sleep(o.delay)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = append(o.finished, finishSeen{source, status, retry})
}

func (o *observer) seen() ([]attemptSeen, []finishSeen) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]attemptSeen(nil), o.attempts...), append([]finishSeen(nil), o.finished...)
}

// finishedN waits until the observer has seen n Finished calls: they come
// right after the store records the completion, so a test that saw the
// store change may be a moment early.
func (o *observer) finishedN(t *testing.T, n int) ([]attemptSeen, []finishSeen) {
	t.Helper()
	var a []attemptSeen
	var f []finishSeen
	waitFor(t, fmt.Sprintf("%d Finished calls", n), func() bool {
		a, f = o.seen()
		return len(f) >= n
	})
	return a, f
}

// ---- store, forwarder ----

func openStore(t *testing.T, c *clock) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "evfwd.db"), sqlite.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// msg is a collected track message of source, due at t0.
func msg(source, id string) store.Message {
	return store.Message{
		Source: source, MessageID: id, Type: "track", UserID: "u_" + id, ReceivedAt: t0,
		Body: []byte(fmt.Sprintf(`{"type":"track","event":"E","userId":"u_%s","messageId":%q,"writeKey":"wk","receivedAt":"2024-05-01T12:00:00.000Z"}`,
			id, id)),
		Destinations: []string{store.DestinationWebhooks},
	}
}

func ingest(t *testing.T, s store.Store, msgs ...store.Message) {
	t.Helper()
	if err := s.Ingest(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
}

func dest(hooks ...*hook) *webhook.Destination {
	d := &webhook.Destination{SharedSecret: secret}
	for _, h := range hooks {
		d.Endpoints = append(d.Endpoints, webhook.Endpoint{URL: h.URL, Headers: map[string]string{"X-Env": "test"}})
	}
	return d
}

// running is a forwarder whose Run is in progress.
type running struct {
	*forwarder.Forwarder
	cancel context.CancelFunc
	done   chan struct{}
}

// start makes a forwarder with cfg (filling in the sender, the owner, a
// short poll and grace, and the clock) and runs it until the test ends or
// stop is called.
func start(t *testing.T, c *clock, cfg forwarder.Config) *running {
	t.Helper()
	if cfg.Sender == nil {
		sender, err := webhook.NewSender(webhook.Options{Timeout: 5 * time.Second, Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sender.CloseIdleConnections)
		cfg.Sender = sender
	}
	if cfg.Owner == "" {
		cfg.Owner = "test-" + t.Name()
	}
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	if cfg.Grace == 0 {
		cfg.Grace = 200 * time.Millisecond
	}
	cfg.Now = c.Now
	if cfg.Policy.Jitter == 0 {
		cfg.Policy.Jitter = -1
	}
	f, err := forwarder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Forwarder: f, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := f.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { r.stop(t, 10*time.Second) })
	return r
}

// stop cancels Run's context and returns how long Run took to return.
func (r *running) stop(t *testing.T, limit time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(limit):
		t.Fatalf("Run did not return within %v of its context ending", limit)
	}
	return time.Since(begin)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func list(t *testing.T, s store.Store, f store.Filter) []store.Delivery {
	t.Helper()
	ds, err := s.List(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func only(t *testing.T, s store.Store) store.Delivery {
	t.Helper()
	ds := list(t, s, store.Filter{})
	if len(ds) != 1 {
		t.Fatalf("%d deliveries, want 1", len(ds))
	}
	return ds[0]
}

func detail(t *testing.T, s store.Store, id int64) *store.Detail {
	t.Helper()
	d, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// records is a compact form of the attempts on record:
// "delivery:endpoint:status:outcome".
func records(d *store.Detail) string {
	var out []string
	for _, a := range d.Records {
		out = append(out, fmt.Sprintf("%d:%d:%d:%s", a.Delivery, a.Endpoint, a.Status, a.Outcome))
	}
	return strings.Join(out, " ")
}

// waitAttempts waits until the only delivery has made n deliveries (or
// left pending) and returns it.
func waitAttempts(t *testing.T, s store.Store, n int) store.Delivery {
	t.Helper()
	var d store.Delivery
	waitFor(t, fmt.Sprintf("delivery %d on record", n), func() bool {
		d = only(t, s)
		return d.Attempts >= n || d.Status != store.Pending
	})
	return d
}

// ---- tests ----

// A stored message goes out as a signed POST of its webhook body; the
// endpoints are tried in order until one answers 2xx, each getting the same
// signed bytes, and the ones after it are not called.
func TestDeliversSignedPOSTInEndpointOrder(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e0, e1, e2 := newHook(t, answers(503)), newHook(t), newHook(t)
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	start(t, c, forwarder.Config{Store: s, Destinations: map[string]*webhook.Destination{"web": dest(e0, e1, e2)}, Observer: obs})

	waitFor(t, "delivered", func() bool { return only(t, s).Status == store.Delivered })

	d := only(t, s)
	det := detail(t, s, d.ID)
	obj, err := message.ParseObject(det.Body)
	if err != nil {
		t.Fatal(err)
	}
	want, err := webhook.Body(obj)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range []*hook{e0, e1} {
		got := e.received()
		if len(got) != 1 {
			t.Fatalf("endpoint %d got %d requests, want 1", i, len(got))
		}
		r := got[0]
		if string(r.body) != string(want) {
			t.Errorf("endpoint %d body\n got %s\nwant %s", i, r.body, want)
		}
		if strings.Contains(string(r.body), "writeKey") {
			t.Errorf("endpoint %d: the write key was forwarded: %s", i, r.body)
		}
		if err := signature.Verify([]byte(secret), r.body, r.hdr.Get(signature.Header)); err != nil {
			t.Errorf("endpoint %d: %s %q: %v", i, signature.Header, r.hdr.Get(signature.Header), err)
		}
		if ct, env := r.hdr.Get("Content-Type"), r.hdr.Get("X-Env"); ct != "application/json" || env != "test" {
			t.Errorf("endpoint %d: Content-Type %q, X-Env %q", i, ct, env)
		}
	}
	if n := e2.count(); n != 0 {
		t.Errorf("endpoint after the one that answered 2xx got %d requests", n)
	}
	if d.Attempts != 1 || !d.FirstAttempt.Equal(t0) || d.LastError != "" {
		t.Errorf("attempts %d, first %v, last error %q; want 1, %v, none", d.Attempts, d.FirstAttempt, d.LastError, t0)
	}
	if got, want := records(det), "1:0:503:retryable 1:1:200:delivered"; got != want {
		t.Errorf("records %q, want %q", got, want)
	}
	if det.Records[0].URL != e0.URL || det.Records[1].URL != e1.URL || string(det.Records[0].Excerpt) != "answer 503" {
		t.Errorf("records %+v", det.Records)
	}
	// The lease was given back with the completion.
	if ds, err := s.Lease(context.Background(), store.LeaseRequest{Owner: "other", Source: "web", Limit: 10, Now: c.Now().Add(time.Hour), TTL: time.Minute}); err != nil || len(ds) != 0 {
		t.Errorf("a delivered delivery can be leased: %v %v", ds, err)
	}
	_, fin := obs.finishedN(t, 1)
	if fin[0] != (finishSeen{"web", store.Delivered, false}) {
		t.Errorf("Finished %+v", fin)
	}
}

// An endpoint that answers 500 and then 200: the failed delivery is on
// record, the next is scheduled by the policy and not made before it is
// due, and once the clock gets there the message is delivered.
func TestRetryAfter500ThenDelivered(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e := newHook(t, answers(500, 200))
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	f := start(t, c, forwarder.Config{
		Store: s, Destinations: map[string]*webhook.Destination{"web": dest(e)}, Observer: obs,
		Policy: webhook.Policy{Initial: 30 * time.Second},
	})

	d := waitAttempts(t, s, 1)
	if d.Status != store.Pending || !d.NextAttempt.Equal(t0.Add(30*time.Second)) || d.LastError != e.URL+": HTTP 500" {
		t.Fatalf("after the 500: %s, next %v, error %q", d.Status, d.NextAttempt, d.LastError)
	}
	if got, want := records(detail(t, s, d.ID)), "1:0:500:retryable"; got != want {
		t.Errorf("records %q, want %q", got, want)
	}
	// Not due yet: polls and a wake-up do not send it again.
	f.Notify("web")
	time.Sleep(50 * time.Millisecond)
	if n := e.count(); n != 1 {
		t.Fatalf("%d requests before the retry was due", n)
	}
	c.Set(d.NextAttempt.Add(-time.Millisecond))
	f.Notify("web")
	time.Sleep(30 * time.Millisecond)
	if n := e.count(); n != 1 {
		t.Fatalf("%d requests a millisecond before the retry was due", n)
	}

	c.Set(d.NextAttempt)
	f.Notify("web")
	waitFor(t, "delivered", func() bool { return only(t, s).Status == store.Delivered })
	d = only(t, s)
	if d.Attempts != 2 || !d.FirstAttempt.Equal(t0) {
		t.Errorf("attempts %d, first %v; want 2, %v", d.Attempts, d.FirstAttempt, t0)
	}
	if got, want := records(detail(t, s, d.ID)), "1:0:500:retryable 2:0:200:delivered"; got != want {
		t.Errorf("records %q, want %q", got, want)
	}
	got := e.received()
	if len(got) != 2 || string(got[0].body) != string(got[1].body) || got[0].hdr.Get(signature.Header) != got[1].hdr.Get(signature.Header) {
		t.Errorf("%d requests; a retry must send the same signed bytes", len(got))
	}
	att, fin := obs.finishedN(t, 2)
	wantAtt := []attemptSeen{{"web", 0, 500, webhook.Retryable}, {"web", 0, 200, webhook.Delivered}}
	wantFin := []finishSeen{{"web", store.Pending, true}, {"web", store.Delivered, false}}
	if fmt.Sprint(att) != fmt.Sprint(wantAtt) || fmt.Sprint(fin) != fmt.Sprint(wantFin) {
		t.Errorf("observer saw\n attempts %v\n finished %v\nwant\n attempts %v\n finished %v", att, fin, wantAtt, wantFin)
	}
}

// An endpoint that always answers 500 is retried on the policy's schedule
// until the next attempt would start after the window; then the delivery is
// dead. Each retry is reached by moving the clock to its due time.
func TestPermanentFailureEndsDeadAfterWindow(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e := newHook(t, answers(500))
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	f := start(t, c, forwarder.Config{
		Store: s, Destinations: map[string]*webhook.Destination{"web": dest(e)}, Observer: obs,
		// Backoff 10s, 20s, 40s, 40s...; window 100s: deliveries start at
		// t0, +10s, +30s, +70s; the next would be +110s, past the window.
		Policy: webhook.Policy{Initial: 10 * time.Second, Max: 40 * time.Second, Window: 100 * time.Second},
	})
	wantNext := []time.Duration{10 * time.Second, 30 * time.Second, 70 * time.Second}
	var d store.Delivery
	for n := 1; ; n++ {
		if n > 10 {
			t.Fatal("never dead")
		}
		d = waitAttempts(t, s, n)
		if d.Attempts != n {
			t.Fatalf("attempts %d, want %d", d.Attempts, n)
		}
		if d.Status != store.Pending {
			break
		}
		if n > len(wantNext) || !d.NextAttempt.Equal(t0.Add(wantNext[n-1])) {
			t.Fatalf("after delivery %d: next attempt at t0+%v", n, d.NextAttempt.Sub(t0))
		}
		c.Set(d.NextAttempt)
		f.Notify("web")
	}
	if d.Status != store.Dead || d.Attempts != 4 || !d.FirstAttempt.Equal(t0) || d.LastError != e.URL+": HTTP 500" {
		t.Errorf("ended %s after %d deliveries (first %v, error %q); want dead after 4", d.Status, d.Attempts, d.FirstAttempt, d.LastError)
	}
	if n := e.count(); n != 4 {
		t.Errorf("endpoint got %d requests, want 4", n)
	}
	// Dead is final: a much later clock does not bring it back.
	c.Set(t0.Add(time.Hour))
	f.Notify("web")
	time.Sleep(30 * time.Millisecond)
	if n := e.count(); n != 4 {
		t.Errorf("a dead delivery was sent again (%d requests)", n)
	}
	if got, want := records(detail(t, s, d.ID)), "1:0:500:retryable 2:0:500:retryable 3:0:500:retryable 4:0:500:retryable"; got != want {
		t.Errorf("records %q, want %q", got, want)
	}
	att, fin := obs.finishedN(t, 4)
	wantFin := []finishSeen{{"web", store.Pending, true}, {"web", store.Pending, true}, {"web", store.Pending, true}, {"web", store.Dead, false}}
	if len(att) != 4 || fmt.Sprint(fin) != fmt.Sprint(wantFin) {
		t.Errorf("observer saw %d attempts, finished %v; want 4, %v", len(att), fin, wantFin)
	}
}

// Final outcomes are not retried: a 4xx from every endpoint, and a stored
// message that cannot become a webhook body (no request is made at all).
func TestFinalOutcomesFail(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e := newHook(t, answers(400))
	bad := msg("bad", "m2")
	bad.Body = []byte(`{"event":"no type"}`)
	ingest(t, s, msg("web", "m1"), bad)
	obs := &observer{}
	f := start(t, c, forwarder.Config{
		Store: s, Observer: obs,
		Destinations: map[string]*webhook.Destination{"web": dest(e), "bad": dest(e)},
	})
	waitFor(t, "both failed", func() bool { return len(list(t, s, store.Filter{Status: store.Failed})) == 2 })
	c.Set(t0.Add(time.Hour))
	f.Notify("web")
	f.Notify("bad")
	time.Sleep(30 * time.Millisecond)
	if n := e.count(); n != 1 {
		t.Errorf("endpoint got %d requests, want 1 (no retry, nothing for the bad message)", n)
	}
	for _, d := range list(t, s, store.Filter{}) {
		det := detail(t, s, d.ID)
		switch d.Source {
		case "web":
			if d.LastError != e.URL+": HTTP 400" || records(det) != "1:0:400:final" {
				t.Errorf("web: error %q, records %q", d.LastError, records(det))
			}
		case "bad":
			if !strings.Contains(d.LastError, "type") || len(det.Records) != 0 {
				t.Errorf("bad: error %q, records %q", d.LastError, records(det))
			}
		}
	}
	att, fin := obs.finishedN(t, 2)
	if len(att) != 1 || att[0] != (attemptSeen{"web", 0, 400, webhook.Final}) {
		t.Errorf("observer attempts %v", att)
	}
	for _, x := range fin {
		if x.status != store.Failed || x.retry {
			t.Errorf("observer finished %v", fin)
		}
	}
}

// The observer sees every attempt of every endpoint, in order, and one
// Finished per delivery, matching what the store recorded.
func TestObserverMatchesRecords(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e0, e1 := newHook(t, answers(500)), newHook(t, answers(404, 200))
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	f := start(t, c, forwarder.Config{
		Store: s, Destinations: map[string]*webhook.Destination{"web": dest(e0, e1)}, Observer: obs,
		Policy: webhook.Policy{Initial: time.Minute},
	})
	d := waitAttempts(t, s, 1)
	if d.Status != store.Pending {
		t.Fatalf("500 then 404 must be retried (one endpoint may recover); got %s", d.Status)
	}
	c.Set(d.NextAttempt)
	f.Notify("web")
	waitFor(t, "delivered", func() bool { return only(t, s).Status == store.Delivered })
	att, fin := obs.finishedN(t, 2)

	det := detail(t, s, d.ID)
	if len(att) != len(det.Records) {
		t.Fatalf("observer saw %d attempts, store has %d", len(att), len(det.Records))
	}
	for i, r := range det.Records {
		a := att[i]
		if a.source != "web" || a.endpoint != r.Endpoint || a.status != r.Status || a.outcome.String() != r.Outcome {
			t.Errorf("attempt %d: observer %+v, store %+v", i, a, r)
		}
	}
	if got, want := records(det), "1:0:500:retryable 1:1:404:final 2:0:500:retryable 2:1:200:delivered"; got != want {
		t.Errorf("records %q, want %q", got, want)
	}
	wantFin := []finishSeen{{"web", store.Pending, true}, {"web", store.Delivered, false}}
	if fmt.Sprint(fin) != fmt.Sprint(wantFin) {
		t.Errorf("finished %v, want %v", fin, wantFin)
	}
}

// A source whose endpoint hangs fills its own lane (PerSource) and no
// more; another source's deliveries go through meanwhile.
func TestHungSourceDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	slow, fast := newHook(t, gated()), newHook(t)
	var msgs []store.Message
	for i := range 5 {
		msgs = append(msgs, msg("slow", fmt.Sprint("s", i)))
	}
	for i := range 4 {
		msgs = append(msgs, msg("fast", fmt.Sprint("f", i)))
	}
	ingest(t, s, msgs...)
	start(t, c, forwarder.Config{
		Store: s, PerSource: 2, MaxInFlight: 8,
		Destinations: map[string]*webhook.Destination{"slow": dest(slow), "fast": dest(fast)},
	})

	waitFor(t, "fast source delivered", func() bool {
		return len(list(t, s, store.Filter{Source: "fast", Status: store.Delivered})) == 4
	})
	waitFor(t, "slow lane full", func() bool { cur, _ := slow.gauge.get(); return cur >= 2 })
	time.Sleep(30 * time.Millisecond) // a few polls: the lane must not take a third
	if cur, peak := slow.gauge.get(); cur != 2 || peak != 2 || slow.count() != 2 {
		t.Fatalf("hung source: %d in flight, peak %d, %d requests; want 2, 2, 2", cur, peak, slow.count())
	}
	if n := len(list(t, s, store.Filter{Source: "slow", Status: store.Pending})); n != 5 {
		t.Errorf("%d slow deliveries pending, want 5", n)
	}

	slow.open()
	waitFor(t, "slow source delivered", func() bool {
		return len(list(t, s, store.Filter{Source: "slow", Status: store.Delivered})) == 5
	})
	if _, peak := slow.gauge.get(); peak > 2 {
		t.Errorf("slow source peaked at %d concurrent requests, bound 2", peak)
	}
	if n := fast.count(); n != 4 {
		t.Errorf("fast endpoint got %d requests, want 4", n)
	}
}

// The process-wide bound holds across lanes: never more than MaxInFlight
// requests at the endpoints together, and the bound is reached.
func TestMaxInFlightAcrossSources(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	all := &gauge{}
	dests := map[string]*webhook.Destination{}
	var hooks []*hook
	var msgs []store.Message
	for i := range 3 {
		src := fmt.Sprint("src", i)
		h := newHook(t, gated(), shared(all))
		hooks = append(hooks, h)
		dests[src] = dest(h)
		for j := range 4 {
			msgs = append(msgs, msg(src, fmt.Sprint(src, "-", j)))
		}
	}
	ingest(t, s, msgs...)
	start(t, c, forwarder.Config{Store: s, PerSource: 10, MaxInFlight: 3, Destinations: dests})

	waitFor(t, "the process bound reached", func() bool { cur, _ := all.get(); return cur >= 3 })
	time.Sleep(30 * time.Millisecond)
	if cur, peak := all.get(); cur != 3 || peak != 3 {
		t.Fatalf("%d in flight, peak %d, bound 3", cur, peak)
	}
	for _, h := range hooks {
		h.open()
	}
	waitFor(t, "all delivered", func() bool { return len(list(t, s, store.Filter{Status: store.Delivered})) == 12 })
	if _, peak := all.get(); peak != 3 {
		t.Errorf("peak %d concurrent requests, bound 3", peak)
	}
	total := 0
	for _, h := range hooks {
		total += h.count()
	}
	if total != 12 {
		t.Errorf("%d requests, want 12", total)
	}
}

// Stopping with a delivery that outlasts the grace period: Run returns
// soon after the grace period, the attempt is on record as interrupted,
// and the delivery is pending, unleased and uncounted, so the next
// forwarder delivers it.
func TestShutdownInterruptsAfterGraceAndKeepsDelivery(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	hung := newHook(t, gated())
	ingest(t, s, msg("web", "m1"))
	// A slow observer: Run must wait for the interrupted delivery to be
	// recorded and reported, not just interrupted.
	obs := &observer{delay: 100 * time.Millisecond}
	const grace = 150 * time.Millisecond
	f := start(t, c, forwarder.Config{
		Store: s, Destinations: map[string]*webhook.Destination{"web": dest(hung)}, Observer: obs,
		Grace: grace, LeaseTTL: time.Hour,
	})
	waitFor(t, "request in flight", func() bool { return hung.count() == 1 })

	took := f.stop(t, 5*time.Second)
	if took < grace+obs.delay || took > grace+3*time.Second {
		t.Errorf("Run returned %v after its context ended; grace %v", took, grace)
	}
	d := only(t, s)
	if d.Status != store.Pending || d.Attempts != 0 || !d.FirstAttempt.IsZero() || d.NextAttempt.After(c.Now()) {
		t.Errorf("after shutdown: %s, attempts %d, first %v, next %v; want pending, 0, none, due now",
			d.Status, d.Attempts, d.FirstAttempt, d.NextAttempt)
	}
	det := detail(t, s, d.ID)
	if len(det.Records) != 1 || det.Records[0].Outcome != "interrupted" || det.Records[0].Class != string(webhook.ClassCanceled) {
		t.Errorf("records %+v; want one interrupted attempt", det.Records)
	}
	if _, fin := obs.seen(); fmt.Sprint(fin) != fmt.Sprint([]finishSeen{{"web", store.Pending, false}}) {
		t.Errorf("finished %v", fin)
	}

	// The lease was given back (it was taken for an hour): a new forwarder
	// delivers it right away, as its first counted delivery.
	good := newHook(t)
	start(t, c, forwarder.Config{Store: s, Owner: "next", Destinations: map[string]*webhook.Destination{"web": dest(good)}})
	waitFor(t, "delivered by the next forwarder", func() bool { return only(t, s).Status == store.Delivered })
	d = only(t, s)
	if d.Attempts != 1 || good.count() != 1 {
		t.Errorf("attempts %d, requests %d; want 1, 1", d.Attempts, good.count())
	}
	if got, want := records(detail(t, s, d.ID)), "1:0:0:interrupted 1:0:200:delivered"; got != want {
		t.Errorf("records %q, want %q", got, want)
	}
}

// Stopping with a delivery that finishes within the grace period: Run
// waits for it, and it ends delivered; nothing new is leased meanwhile.
func TestShutdownWaitsForDeliveryWithinGrace(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e := newHook(t, gated())
	ingest(t, s, msg("web", "m1"))
	f := start(t, c, forwarder.Config{
		Store: s, Destinations: map[string]*webhook.Destination{"web": dest(e)}, Grace: 5 * time.Second,
	})
	waitFor(t, "request in flight", func() bool { return e.count() == 1 })

	f.cancel()
	select {
	case <-f.done:
		t.Fatal("Run returned with a delivery in flight, inside the grace period")
	case <-time.After(50 * time.Millisecond):
	}
	// The lanes have stopped: a message stored now stays pending.
	ingest(t, s, msg("web", "m2"))
	f.Notify("web")
	time.Sleep(30 * time.Millisecond)
	e.open()
	select {
	case <-f.done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return once the delivery in flight finished")
	}
	ds := list(t, s, store.Filter{})
	if len(ds) != 2 || ds[0].Status != store.Delivered || ds[0].Attempts != 1 || ds[1].Status != store.Pending || ds[1].Attempts != 0 {
		t.Errorf("deliveries after shutdown: %+v", ds)
	}
	if n := e.count(); n != 1 {
		t.Errorf("%d requests; nothing may be leased after the context ends", n)
	}
}

// With a Poll far longer than the test, lanes move only on wake-ups: their
// own completions (PerSource room) and Notify. Idle lanes woken at the same
// time take the process's tokens for their Lease and give them back; the
// lane with due work must still get one, not sleep until its next poll.
func TestWakeupsDriveLanesWithoutPolling(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t)
	dests := map[string]*webhook.Destination{"busy": dest(h)}
	for i := range 6 {
		dests[fmt.Sprint("idle", i)] = dest(h)
	}
	ingest(t, s, msg("busy", "a"), msg("busy", "b"), msg("busy", "c"))
	f := start(t, c, forwarder.Config{Store: s, MaxInFlight: 2, PerSource: 1, Poll: time.Hour, Destinations: dests})
	delivered := func(n int) func() bool {
		return func() bool { return len(list(t, s, store.Filter{Status: store.Delivered})) == n }
	}
	waitFor(t, "the first three, one at a time", delivered(3))
	for i := range 20 {
		ingest(t, s, msg("busy", fmt.Sprint("m", i)))
		for src := range dests {
			f.Notify(src)
		}
		waitFor(t, fmt.Sprintf("round %d delivered after Notify", i), delivered(4+i))
	}
	if n := h.count(); n != 23 {
		t.Errorf("%d requests, want 23", n)
	}
}

func TestNewRequiresStoreSenderOwner(t *testing.T) {
	t.Parallel()
	sender, err := webhook.NewSender(webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	s := openStore(t, c)
	for _, cfg := range []forwarder.Config{
		{Sender: sender, Owner: "o"},
		{Store: s, Owner: "o"},
		{Store: s, Sender: sender},
	} {
		if _, err := forwarder.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}
