package forwarder

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evfwd/evfwd/internal/broadcast"
	"github.com/evfwd/evfwd/internal/webhooktest"

	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// Most of these tests use the real parts: a SQLite store in a temporary
// directory, a real webhook.Sender and httptest servers on loopback as
// endpoints. Real sockets rule out testing/synctest (a bubble whose
// goroutines wait on the network never advances its clock), so the tests
// are deterministic by construction instead:
//
//   - The clock given to the forwarder, the retry policy and the store is a
//     fake one that only the test moves, and lanes poll once an hour: a
//     delivery becomes due only when the test says so, and a lane looks at
//     the store only on a wake-up (its start, Notify, a finished delivery).
//   - Nothing waits by sleeping. waitFor re-checks its condition each time
//     something happens (an endpoint got a request, the observer heard of
//     an attempt or a finished delivery; see changed). The lanes' steps come
//     through the forwarder's trace seam, so a test can wait for "this lane
//     has looked at the store since I moved the clock" (settle) or "no lane
//     can take more" (quiet), and then state what did not happen.
//   - The grace period of Run ends when the test says (graceByHand).
//
// TestLaneTimingOnFakeTime, which needs no network, runs in a synctest
// bubble to check the lanes' own timing: polls, wake-ups, draining a
// backlog.

const secret = "s3cr3t"

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const waitLimit = webhooktest.WaitLimit

// ---- clock ----

func newClock() *webhooktest.Clock { return webhooktest.NewClock(t0) }

// ---- waiting on events ----

var (
	signalsMu sync.Mutex
	signals   = map[*testing.T]*broadcast.Signal{}
)

// changed is t's signal: it fires whenever something the test may wait
// for has happened: one of its endpoints got a request, or its forwarder's
// observer heard of an attempt or a finished delivery (which the store has
// recorded by then).
func changed(t *testing.T) *broadcast.Signal {
	signalsMu.Lock()
	defer signalsMu.Unlock()
	s := signals[t]
	if s == nil {
		s = &broadcast.Signal{}
		signals[t] = s
		t.Cleanup(func() {
			signalsMu.Lock()
			delete(signals, t)
			signalsMu.Unlock()
		})
	}
	return s
}

// waitFor returns once cond holds, checking it now and after each change
// of t's; it fails the test when waitLimit passes first.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	webhooktest.Await(t, changed(t), what, cond)
}

// recv receives from ch, failing the test when waitLimit passes first.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("%v passed waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}

// ---- endpoints ----

// newHook is a webhook endpoint that fires t's signal at each request
// (see webhooktest.Receiver: 200 without a script).
func newHook(t *testing.T, opts ...webhooktest.Option) *webhooktest.Receiver {
	t.Helper()
	return webhooktest.New(t, append(opts, webhooktest.Notify(changed(t)))...)
}

// held holds every request, once received, until the hook is released
// or the client goes away.
var held = webhooktest.Script(webhooktest.Reply{Hang: true})

// ---- observer ----

type attemptSeen struct {
	source   string
	delivery int64
	endpoint int
	status   int
	outcome  webhook.Outcome
	then     webhook.Then
}

type finishSeen struct {
	source string
	status store.Status
	retry  bool
}

type observer struct {
	// With hold set (before use), Finished says so on entered (buffered)
	// and returns only once hold is closed.
	hold    chan struct{}
	entered chan struct{}

	mu       sync.Mutex
	attempts []attemptSeen
	finished []finishSeen
}

func (o *observer) Attempt(source string, delivery int64, a webhook.Attempt) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts = append(o.attempts, attemptSeen{source, delivery, a.Endpoint, a.Status, a.Outcome, a.Then})
}

func (o *observer) Finished(source string, _ int64, status store.Status, retry bool) {
	if o.hold != nil {
		o.entered <- struct{}{}
		<-o.hold
	}
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

// announcer passes what the forwarder observes on to the test's observer,
// if any, and then fires the test's signal: by then the store has the
// completion.
type announcer struct {
	next    Observer
	changed *broadcast.Signal
}

func (a announcer) Attempt(source string, delivery int64, at webhook.Attempt) {
	if a.next != nil {
		a.next.Attempt(source, delivery, at)
	}
	a.changed.Fire()
}

func (a announcer) Finished(source string, delivery int64, status store.Status, retry bool) {
	if a.next != nil {
		a.next.Finished(source, delivery, status, retry)
	}
	a.changed.Fire()
}

// ---- lanes ----

// tracer keeps what the lanes of one forwarder told its trace seam, and
// fires changed at each step (its own signal: the conditions of waitFor
// need not be checked again at every step of every lane).
type tracer struct {
	changed broadcast.Signal
	mu      sync.Mutex
	mark    uint64 // raised by settle; each pass remembers its value at the start
	lanes   map[string]*laneLog
}

type laneLog struct {
	last   laneEvent
	passes []passLog
}

type passLog struct {
	mark   uint64
	leased int
	idle   bool // the pass ended and the lane waited
}

func (tr *tracer) trace(source string, ev laneEvent, leased int) {
	tr.mu.Lock()
	l := tr.lanes[source]
	if l == nil {
		l = &laneLog{}
		tr.lanes[source] = l
	}
	l.last = ev
	switch ev {
	case lanePass:
		l.passes = append(l.passes, passLog{mark: tr.mark})
	case laneLeased:
		l.passes[len(l.passes)-1].leased += leased
	case laneIdle:
		l.passes[len(l.passes)-1].idle = true
	}
	tr.mu.Unlock()
	tr.changed.Fire()
}

// leased is how many deliveries source's lane leased in passes that began
// at mark or later.
func (tr *tracer) leased(source string, mark uint64) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	if l := tr.lanes[source]; l != nil {
		for _, p := range l.passes {
			if p.mark >= mark {
				n += p.leased
			}
		}
	}
	return n
}

// settle wakes source's lane and waits until it has made a whole pass that
// began after the call, so it has seen the store and the clock as they are
// now; it returns how many deliveries the lane leased since the call.
//
// A pass that begins after the mark is raised began after the wake-up
// below was sent or found pending, and the lane always makes a pass after
// taking a wake-up: so such a pass comes, and nothing the test did before
// the call is hidden from it.
func (r *running) settle(t *testing.T, source string) int {
	t.Helper()
	tr := r.tracer
	tr.mu.Lock()
	tr.mark++
	mark := tr.mark
	tr.mu.Unlock()
	r.Notify(source)
	webhooktest.Await(t, &tr.changed, "lane "+source+" to look at the store again", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		l := tr.lanes[source]
		if l == nil {
			return false
		}
		for _, p := range l.passes {
			if p.mark >= mark && p.idle {
				return true
			}
		}
		return false
	})
	return tr.leased(source, mark)
}

// quiet waits until every lane named waits: for a wake-up or for a process
// token. It means "no lane can take more" only while nothing can wake them
// (no delivery finishes, no Notify, no poll).
func (r *running) quiet(t *testing.T, sources ...string) {
	t.Helper()
	tr := r.tracer
	webhooktest.Await(t, &tr.changed, "the lanes to wait", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, src := range sources {
			l := tr.lanes[src]
			if l == nil || (l.last != laneIdle && l.last != laneStarved) {
				return false
			}
		}
		return true
	})
}

// ---- grace period by hand ----

// graceByHand replaces the timer of Run's grace period: armed says that
// Run started waiting (and for how long it means to), and the grace period
// is over when the test closes end.
type graceByHand struct {
	armed chan time.Duration
	end   chan time.Time
}

func newGraceByHand() *graceByHand {
	return &graceByHand{armed: make(chan time.Duration, 1), end: make(chan time.Time)}
}

func (g *graceByHand) install(f *Forwarder) {
	f.after = func(d time.Duration) <-chan time.Time {
		g.armed <- d
		return g.end
	}
}

// ---- store, forwarder ----

func openStore(t *testing.T, c *webhooktest.Clock) store.Store {
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

func dest(hooks ...*webhooktest.Receiver) *webhook.Destination {
	d := &webhook.Destination{SharedSecret: secret}
	for _, h := range hooks {
		d.Endpoints = append(d.Endpoints, webhook.Endpoint{URL: h.URL, Headers: map[string]string{"X-Env": "test"}})
	}
	return d
}

// running is a forwarder whose Run is in progress.
type running struct {
	*Forwarder
	tracer *tracer
	cancel context.CancelFunc
	done   chan struct{}
}

// start makes a forwarder with cfg and runs it until the test ends or
// stop is called. It fills in the sender (with an attempt deadline no
// test reaches: a held request must not time out on a slow machine), the
// owner, the clock, a poll of an hour (lanes move on wake-ups only), a
// grace period, and no jitter; it listens to the observer and the lanes'
// trace. setup, if given, may set more seams before Run starts.
func start(t *testing.T, c *webhooktest.Clock, cfg Config, setup ...func(*Forwarder)) *running {
	t.Helper()
	if cfg.Sender == nil {
		sender, err := webhook.NewSender(webhook.Options{Timeout: time.Hour, Now: c.Now})
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
		cfg.Poll = time.Hour
	}
	if cfg.Grace == 0 {
		cfg.Grace = 200 * time.Millisecond
	}
	cfg.Now = c.Now
	if cfg.Policy.Jitter == 0 {
		cfg.Policy.Jitter = -1
	}
	cfg.Observer = announcer{next: cfg.Observer, changed: changed(t)}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracer{lanes: map[string]*laneLog{}}
	f.trace = tr.trace
	for _, s := range setup {
		s(f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Forwarder: f, tracer: tr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := f.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run's context and waits for Run to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(waitLimit):
		t.Errorf("Run did not return within %v of its context ending", waitLimit)
	}
}

// returned waits for Run to return.
func (r *running) returned(t *testing.T) {
	t.Helper()
	recv(t, "Run to return", r.done)
}

// stillRunning fails the test if Run has returned.
func (r *running) stillRunning(t *testing.T, when string) {
	t.Helper()
	select {
	case <-r.done:
		t.Fatalf("Run returned %s", when)
	default:
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
	e0, e1, e2 := newHook(t, webhooktest.Statuses(503)), newHook(t), newHook(t)
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	start(t, c, Config{Store: s, Destinations: map[string]*webhook.Destination{"web": dest(e0, e1, e2)}, Observer: obs})

	waitFor(t, "delivered", func() bool { return only(t, s).Status == store.Delivered })

	d := only(t, s)
	det := detail(t, s, d.ID)
	obj, err := rawjson.ParseObject(det.Body)
	if err != nil {
		t.Fatal(err)
	}
	want, err := webhook.Body(obj)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range []*webhooktest.Receiver{e0, e1} {
		got := e.Requests()
		if len(got) != 1 {
			t.Fatalf("endpoint %d got %d requests, want 1", i, len(got))
		}
		r := got[0]
		if string(r.Body) != string(want) {
			t.Errorf("endpoint %d body\n got %s\nwant %s", i, r.Body, want)
		}
		if strings.Contains(string(r.Body), "writeKey") {
			t.Errorf("endpoint %d: the write key was forwarded: %s", i, r.Body)
		}
		if err := signature.Verify([]byte(secret), r.Body, r.Header.Get(signature.Header)); err != nil {
			t.Errorf("endpoint %d: %s %q: %v", i, signature.Header, r.Header.Get(signature.Header), err)
		}
		if ct, env := r.Header.Get("Content-Type"), r.Header.Get("X-Env"); ct != "application/json" || env != "test" {
			t.Errorf("endpoint %d: Content-Type %q, X-Env %q", i, ct, env)
		}
	}
	if n := e2.Count(); n != 0 {
		t.Errorf("endpoint after the one that answered 2xx got %d requests", n)
	}
	if d.Attempts != 1 || !d.FirstAttempt.Equal(t0) || d.LastError != "" {
		t.Errorf("attempts %d, first %v, last error %q; want 1, %v, none", d.Attempts, d.FirstAttempt, d.LastError, t0)
	}
	if got, want := records(det), "1:0:503:retryable 1:1:200:delivered"; got != want {
		t.Errorf("records %q, want %q", got, want)
	}
	if det.Records[0].URL != e0.URL || det.Records[1].URL != e1.URL || string(det.Records[0].Excerpt) != "Service Unavailable" {
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
	e := newHook(t, webhooktest.Statuses(500, 200))
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	f := start(t, c, Config{
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
	// Not due yet: a wake-up does not send it again, nor one a millisecond
	// before it is due. settle returns once the lane has looked.
	if n := f.settle(t, "web"); n != 0 || e.Count() != 1 {
		t.Fatalf("before the retry was due: %d leased, %d requests", n, e.Count())
	}
	c.Set(d.NextAttempt.Add(-time.Millisecond))
	if n := f.settle(t, "web"); n != 0 || e.Count() != 1 {
		t.Fatalf("a millisecond before the retry was due: %d leased, %d requests", n, e.Count())
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
	got := e.Requests()
	if len(got) != 2 || string(got[0].Body) != string(got[1].Body) || got[0].Header.Get(signature.Header) != got[1].Header.Get(signature.Header) {
		t.Errorf("%d requests; a retry must send the same signed bytes", len(got))
	}
	att, fin := obs.finishedN(t, 2)
	wantAtt := []attemptSeen{{"web", d.ID, 0, 500, webhook.Retryable, webhook.ThenRetry}, {"web", d.ID, 0, 200, webhook.Delivered, webhook.ThenDone}}
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
	e := newHook(t, webhooktest.Statuses(500))
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	f := start(t, c, Config{
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
	if n := e.Count(); n != 4 {
		t.Errorf("endpoint got %d requests, want 4", n)
	}
	// Dead is final: a much later clock does not bring it back.
	c.Set(t0.Add(time.Hour))
	if n := f.settle(t, "web"); n != 0 || e.Count() != 4 {
		t.Errorf("a dead delivery was leased again (%d leased, %d requests)", n, e.Count())
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

// A message stored as its webhook body is sent as it is, and one a store
// held before in the collected form is sent as the same bytes, signed.
func TestSendsBothFormsAlike(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	old, cur := newHook(t), newHook(t)
	collected := msg("old", "m1")
	wire := msg("cur", "m1")
	body, err := queued.Body(collected.Body, store.FormCollected)
	if err != nil {
		t.Fatal(err)
	}
	wire.Body, wire.Form = body, store.FormWire
	ingest(t, s, collected, wire)
	start(t, c, Config{Store: s, Destinations: map[string]*webhook.Destination{"old": dest(old), "cur": dest(cur)}})
	waitFor(t, "both delivered", func() bool { return len(list(t, s, store.Filter{Status: store.Delivered})) == 2 })
	for name, h := range map[string]*webhooktest.Receiver{"old": old, "cur": cur} {
		got := h.Requests()
		if len(got) != 1 {
			t.Fatalf("%s: got %d requests, want 1", name, len(got))
		}
		if string(got[0].Body) != string(body) {
			t.Errorf("%s: body\n got %s\nwant %s", name, got[0].Body, body)
		}
		if err := signature.Verify([]byte(secret), got[0].Body, got[0].Header.Get(signature.Header)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A message a deletion request purged (its body emptied) while its
// delivery was failed or dead, then retried, is failed again without a
// request: an empty POST is not the message.
func TestPurgedBodyIsNotSent(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e := newHook(t)
	purged := msg("web", "m1")
	purged.Body, purged.Form = []byte{}, store.FormWire
	ingest(t, s, purged)
	start(t, c, Config{Store: s, Destinations: map[string]*webhook.Destination{"web": dest(e)}})
	waitFor(t, "failed", func() bool { return len(list(t, s, store.Filter{Status: store.Failed})) == 1 })
	if n := e.Count(); n != 0 {
		t.Errorf("endpoint got %d requests, want none", n)
	}
	if d := list(t, s, store.Filter{})[0]; d.LastError != queued.ErrPurged.Error() {
		t.Errorf("last error %q, want %q", d.LastError, queued.ErrPurged)
	}
}

// Final outcomes are not retried: a 4xx from every endpoint, and a stored
// message that cannot become a webhook body (no request is made at all).
func TestFinalOutcomesFail(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e := newHook(t, webhooktest.Statuses(400))
	bad := msg("bad", "m2")
	bad.Body = []byte(`{"event":"no type"}`)
	ingest(t, s, msg("web", "m1"), bad)
	obs := &observer{}
	f := start(t, c, Config{
		Store: s, Observer: obs,
		Destinations: map[string]*webhook.Destination{"web": dest(e), "bad": dest(e)},
	})
	waitFor(t, "both failed", func() bool { return len(list(t, s, store.Filter{Status: store.Failed})) == 2 })
	c.Set(t0.Add(time.Hour))
	for _, src := range []string{"web", "bad"} {
		if n := f.settle(t, src); n != 0 {
			t.Errorf("%s: a failed delivery was leased again (%d)", src, n)
		}
	}
	if n := e.Count(); n != 1 {
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
	if len(att) != 1 || att[0].delivery == 0 || att[0] != (attemptSeen{"web", att[0].delivery, 0, 400, webhook.Final, webhook.ThenGiveUp}) {
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
	e0, e1 := newHook(t, webhooktest.Statuses(500)), newHook(t, webhooktest.Statuses(404, 200))
	ingest(t, s, msg("web", "m1"))
	obs := &observer{}
	f := start(t, c, Config{
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
		if a.source != "web" || a.delivery != d.ID || a.endpoint != r.Endpoint || a.status != r.Status || a.outcome.String() != r.Outcome {
			t.Errorf("attempt %d: observer %+v, store %+v", i, a, r)
		}
	}
	// The last attempt of the failed first delivery says what followed.
	var then []string
	for _, a := range att {
		then = append(then, a.then.String())
	}
	if got, want := strings.Join(then, " "), "next_url retry next_url done"; got != want {
		t.Errorf("observer's Then %q, want %q", got, want)
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
	slow, fast := newHook(t, held), newHook(t)
	var msgs []store.Message
	for i := range 5 {
		msgs = append(msgs, msg("slow", fmt.Sprint("s", i)))
	}
	for i := range 4 {
		msgs = append(msgs, msg("fast", fmt.Sprint("f", i)))
	}
	ingest(t, s, msgs...)
	f := start(t, c, Config{
		Store: s, PerSource: 2, MaxInFlight: 8,
		Destinations: map[string]*webhook.Destination{"slow": dest(slow), "fast": dest(fast)},
	})

	waitFor(t, "fast source delivered", func() bool {
		return len(list(t, s, store.Filter{Source: "fast", Status: store.Delivered})) == 4
	})
	waitFor(t, "slow lane full", func() bool { cur, _ := slow.InFlight(); return cur >= 2 })
	// Woken again (as each of fast's deliveries woke it), the full lane
	// must not take a third.
	if n := f.settle(t, "slow"); n != 0 {
		t.Fatalf("the full lane leased %d more", n)
	}
	if n, bound := f.tracer.leased("slow", 0), 2+f.readAhead(); n > bound {
		t.Fatalf("the hung source leased %d deliveries, bound %d (2 in flight, the rest leased ahead)", n, bound)
	}
	if cur, peak := slow.InFlight(); cur != 2 || peak != 2 || slow.Count() != 2 {
		t.Fatalf("hung source: %d in flight, peak %d, %d requests; want 2, 2, 2", cur, peak, slow.Count())
	}
	if n := len(list(t, s, store.Filter{Source: "slow", Status: store.Pending})); n != 5 {
		t.Errorf("%d slow deliveries pending, want 5", n)
	}

	slow.Release()
	waitFor(t, "slow source delivered", func() bool {
		return len(list(t, s, store.Filter{Source: "slow", Status: store.Delivered})) == 5
	})
	if _, peak := slow.InFlight(); peak > 2 {
		t.Errorf("slow source peaked at %d concurrent requests, bound 2", peak)
	}
	if n := fast.Count(); n != 4 {
		t.Errorf("fast endpoint got %d requests, want 4", n)
	}
}

// The process-wide bound holds across lanes: never more than MaxInFlight
// requests at the endpoints together, and the bound is reached.
func TestMaxInFlightAcrossSources(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	all := &webhooktest.Gauge{}
	dests := map[string]*webhook.Destination{}
	var hooks []*webhooktest.Receiver
	var msgs []store.Message
	for i := range 3 {
		src := fmt.Sprint("src", i)
		h := newHook(t, held, webhooktest.Share(all))
		hooks = append(hooks, h)
		dests[src] = dest(h)
		for j := range 4 {
			msgs = append(msgs, msg(src, fmt.Sprint(src, "-", j)))
		}
	}
	ingest(t, s, msgs...)
	f := start(t, c, Config{Store: s, PerSource: 10, MaxInFlight: 3, Destinations: dests})

	waitFor(t, "the process bound reached", func() bool { cur, _ := all.Get(); return cur >= 3 })
	// The three in flight hold every token and none can finish, so once
	// each lane waits (for a token, or idle) no lane can take more.
	f.quiet(t, "src0", "src1", "src2")
	leased := 0
	for src := range dests {
		leased += f.tracer.leased(src, 0)
	}
	// Leased: the three in flight, and at most what the busy lanes lease
	// ahead.
	if cur, peak := all.Get(); cur != 3 || peak != 3 || leased < 3 || leased > 3+3*f.readAhead() {
		t.Fatalf("%d in flight, peak %d, %d leased; bound 3 in flight, and %d leased ahead", cur, peak, leased, 3*f.readAhead())
	}
	for _, h := range hooks {
		h.Release()
	}
	waitFor(t, "all delivered", func() bool { return len(list(t, s, store.Filter{Status: store.Delivered})) == 12 })
	if _, peak := all.Get(); peak != 3 {
		t.Errorf("peak %d concurrent requests, bound 3", peak)
	}
	total := 0
	for _, h := range hooks {
		total += h.Count()
	}
	if total != 12 {
		t.Errorf("%d requests, want 12", total)
	}
}

// Stopping with a delivery that outlasts the grace period: Run waits the
// grace period out, then interrupts the delivery, and returns only once the
// interrupted attempt is recorded and reported; the delivery is pending,
// unleased and uncounted, so the next forwarder delivers it. The test ends
// the grace period itself and holds the observer's Finished, so each "Run
// has not returned yet" below is a fact, not a race against a timer.
func TestShutdownInterruptsAfterGraceAndKeepsDelivery(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	hung := newHook(t, held)
	ingest(t, s, msg("web", "m1"))
	obs := &observer{hold: make(chan struct{}), entered: make(chan struct{}, 1)}
	const grace = 150 * time.Millisecond
	g := newGraceByHand()
	f := start(t, c, Config{
		Store: s, Destinations: map[string]*webhook.Destination{"web": dest(hung)}, Observer: obs,
		Grace: grace, LeaseTTL: time.Hour,
	}, g.install)
	waitFor(t, "request in flight", func() bool { return hung.Count() == 1 })

	f.cancel()
	if d := recv(t, "Run to start its grace period", g.armed); d != grace {
		t.Errorf("grace period %v, want %v", d, grace)
	}
	f.stillRunning(t, "before its grace period was over, with a delivery in flight")
	close(g.end)
	recv(t, "the interrupted delivery to be reported", obs.entered)
	f.stillRunning(t, "before the interrupted delivery was reported")
	close(obs.hold)
	f.returned(t)

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
	start(t, c, Config{Store: s, Owner: "next", Destinations: map[string]*webhook.Destination{"web": dest(good)}})
	waitFor(t, "delivered by the next forwarder", func() bool { return only(t, s).Status == store.Delivered })
	d = only(t, s)
	if d.Attempts != 1 || good.Count() != 1 {
		t.Errorf("attempts %d, requests %d; want 1, 1", d.Attempts, good.Count())
	}
	if got, want := records(detail(t, s, d.ID)), "1:0:0:interrupted 1:0:200:delivered"; got != want {
		t.Errorf("records %q, want %q", got, want)
	}
}

// Stopping with a delivery that finishes within the grace period: Run
// waits for it, and it ends delivered; nothing new is leased meanwhile.
// The grace period never ends here: Run returns because the delivery did.
func TestShutdownWaitsForDeliveryWithinGrace(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	e := newHook(t, held)
	ingest(t, s, msg("web", "m1"))
	g := newGraceByHand()
	f := start(t, c, Config{
		Store: s, Destinations: map[string]*webhook.Destination{"web": dest(e)}, Grace: 5 * time.Second,
	}, g.install)
	waitFor(t, "request in flight", func() bool { return e.Count() == 1 })

	f.cancel()
	// Run starts the grace period once its lanes have stopped.
	recv(t, "Run to start its grace period", g.armed)
	f.stillRunning(t, "with a delivery in flight, inside the grace period")
	// The lanes have stopped: a message stored now stays pending.
	ingest(t, s, msg("web", "m2"))
	f.Notify("web")
	e.Release()
	f.returned(t)
	ds := list(t, s, store.Filter{})
	if len(ds) != 2 || ds[0].Status != store.Delivered || ds[0].Attempts != 1 || ds[1].Status != store.Pending || ds[1].Attempts != 0 {
		t.Errorf("deliveries after shutdown: %+v", ds)
	}
	if n := e.Count(); n != 1 {
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
	f := start(t, c, Config{Store: s, MaxInFlight: 2, PerSource: 1, Poll: time.Hour, Destinations: dests})
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
	if n := h.Count(); n != 23 {
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
	for _, cfg := range []Config{
		{Sender: sender, Owner: "o"},
		{Store: s, Owner: "o"},
		{Store: s, Sender: sender},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// ---- the lanes' own timing, on fake time ----

// memStore stands in for the store calls a lane makes, in memory, so a
// forwarder can run in a synctest bubble: Lease hands out what is due, in
// order, and notes when (on the bubble's clock) it was called; Complete
// notes what it was told. Every other method is the nil Store's: a call
// panics.
type memStore struct {
	store.Store
	mu        sync.Mutex
	due       []store.Delivery
	leases    []time.Time
	completed map[int64]time.Time
}

func (m *memStore) Lease(ctx context.Context, r store.LeaseRequest) ([]store.Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leases = append(m.leases, time.Now())
	n := min(r.Limit, len(m.due))
	out := m.due[:n:n]
	m.due = m.due[n:]
	return out, nil
}

func (m *memStore) Complete(ctx context.Context, cs []store.Completion) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range cs {
		m.completed[c.ID] = time.Now()
	}
	return nil
}

// since returns the times of the leases from the i-th on, as offsets from
// base, and how many leases there were in all.
func (m *memStore) since(i int, base time.Time) ([]time.Duration, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []time.Duration
	for _, at := range m.leases[min(i, len(m.leases)):] {
		out = append(out, at.Sub(base))
	}
	return out, len(m.leases)
}

// The lane's own timing, which needs no network, checked on the fake clock
// of a synctest bubble (time moves only when every goroutine of the test
// waits): an idle lane looks at the store at once and then every Poll; a
// wake-up makes it look at once and starts a new Poll; a backlog is worked
// off at once, PerSource at a time, each finished delivery waking the lane
// for the next, never waiting for a poll. The deliveries' stored messages
// cannot become webhook bodies, so each fails at once, without a request.
func TestLaneTimingOnFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Now()
		ms := &memStore{completed: map[int64]time.Time{}}
		sender, err := webhook.NewSender(webhook.Options{})
		if err != nil {
			t.Fatal(err)
		}
		const poll = time.Second
		f, err := New(Config{Store: ms, Sender: sender, Owner: "o", PerSource: 2, Poll: poll,
			Destinations: map[string]*webhook.Destination{"web": {}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.Run(ctx)
		}()
		check := func(what string, from int, want ...time.Duration) int {
			t.Helper()
			synctest.Wait() // the lane has done all it can without time moving
			got, n := ms.since(from, base)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: leases at %v, want %v", what, got, want)
			}
			return n
		}

		time.Sleep(3*poll + poll/2)
		n := check("idle", 0, 0, poll, 2*poll, 3*poll)
		f.Notify("web")
		n = check("woken", n, 3*poll+poll/2)
		time.Sleep(poll)
		n = check("a Poll after the wake-up", n, 4*poll+poll/2)

		const backlog = 7
		ms.mu.Lock()
		for id := range int64(backlog) {
			ms.due = append(ms.due, store.Delivery{ID: id + 1, Source: "web", Body: []byte(`{"event":"no type"}`)})
		}
		ms.mu.Unlock()
		f.Notify("web")
		synctest.Wait()
		now := time.Now()
		got, _ := ms.since(n, base)
		for _, at := range got {
			if at != now.Sub(base) {
				t.Errorf("working off the backlog: leases at %v, all want %v", got, now.Sub(base))
				break
			}
		}
		ms.mu.Lock()
		if len(ms.completed) != backlog || len(ms.due) != 0 {
			t.Errorf("%d of %d deliveries completed, %d left", len(ms.completed), backlog, len(ms.due))
		}
		for id, at := range ms.completed {
			if !at.Equal(now) {
				t.Errorf("delivery %d completed at %v, want at once (%v)", id, at.Sub(base), now.Sub(base))
			}
		}
		ms.mu.Unlock()

		cancel()
		<-done
	})
}

// BenchmarkForwardAttempt is what an attempt costs the forwarder before
// the request: the stored message to the bytes it sends, for a row stored
// as its webhook body and for one a store held before (collected).
func BenchmarkForwardAttempt(b *testing.B) {
	collected := []byte(`{"type":"track","event":"Order Completed","userId":"u_42","messageId":"9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",` +
		`"timestamp":"2024-05-01T12:00:03.000Z","properties":{"order_id":"o_1001","revenue":99.90,"currency":"EUR",` +
		`"products":[{"sku":"sku-1","quantity":2,"price":49.95}]},"context":{"library":{"name":"analytics-node","version":"2.1.0"},"ip":"203.0.113.7"},` +
		`"integrations":{},"receivedAt":"2024-05-01T12:00:04.000Z"}`)
	wire, err := queued.Body(collected, store.FormCollected)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		d    store.Delivery
	}{
		{"wire", store.Delivery{Body: wire, Form: store.FormWire}},
		{"collected", store.Delivery{Body: collected, Form: store.FormCollected}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := queued.Body(bc.d.Body, bc.d.Form); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
