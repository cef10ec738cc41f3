package analytics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// request is what the test server saw of one request.
type request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// batchBody is the decoded shape of a /v1/batch body.
type batchBody struct {
	Batch  []map[string]json.RawMessage `json:"batch"`
	SentAt string                       `json:"sentAt"`
}

func (r request) decode(t *testing.T) batchBody {
	t.Helper()
	var b batchBody
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("request body is not a batch: %v\n%s", err, r.Body)
	}
	return b
}

func (r request) ids(t *testing.T) []string {
	var ids []string
	for _, m := range r.decode(t).Batch {
		var id string
		json.Unmarshal(m["messageId"], &id)
		ids = append(ids, id)
	}
	return ids
}

// recorder is a test collection API: it records every request, asserts
// that requests never overlap, and answers with respond (200 by default).
// Each arrival is announced on arrived.
type recorder struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []request
	flights map[*flight]bool // requests being served
	arrived chan int         // index of each request as it arrives
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

// flight is one request being served. abandoned: its client gave up on it
// (a timeout) before it was answered; the client may then retry while the
// server is still unwinding it, which is no overlap.
type flight struct {
	done      chan struct{}
	hijacked  bool // the handler dropped the connection: the client sees an error at once
	abandoned bool
}

// hijackMark notes that a handler took the connection over (to drop it).
type hijackMark struct {
	http.ResponseWriter
	f *flight
}

func (h hijackMark) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.f.hijacked = true
	return h.ResponseWriter.(http.Hijacker).Hijack()
}

func newRecorder(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *recorder {
	rec := &recorder{t: t, flights: map[*flight]bool{}, arrived: make(chan int, 100000), respond: respond}
	rec.srv = httptest.NewServer(http.HandlerFunc(rec.serve))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) serve(w http.ResponseWriter, r *http.Request) {
	me := &flight{done: make(chan struct{})}
	rec.mu.Lock()
	var others []*flight
	for f := range rec.flights {
		others = append(others, f)
	}
	rec.flights[me] = true
	rec.mu.Unlock()
	defer func() {
		me.abandoned = me.hijacked || r.Context().Err() != nil // the client went away first
		rec.mu.Lock()
		delete(rec.flights, me)
		rec.mu.Unlock()
		close(me.done)
	}()
	for _, o := range others {
		select {
		case <-o.done:
			if !o.abandoned {
				rec.t.Errorf("2 requests in flight at once")
			}
		case <-time.After(5 * time.Second):
			rec.t.Errorf("2 requests in flight at once (the earlier one still unanswered)")
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		rec.t.Errorf("reading body: %v", err)
	}
	rec.mu.Lock()
	n := len(rec.reqs)
	rec.reqs = append(rec.reqs, request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	rec.mu.Unlock()
	rec.arrived <- n
	if rec.respond != nil {
		rec.respond(n, hijackMark{w, me}, r)
		return
	}
	io.WriteString(w, `{"success":true}`)
}

func (rec *recorder) requests() []request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]request(nil), rec.reqs...)
}

// waitArrival blocks until request n has arrived (a guard, not a sleep:
// the timeout only turns a hang into a failure).
func (rec *recorder) waitArrival(n int) {
	rec.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-rec.arrived:
			if got >= n {
				return
			}
		case <-timeout:
			rec.t.Fatalf("request %d never arrived", n)
		}
	}
}

// gate holds the answer to the requests it is applied to until opened.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate  { return &gate{ch: make(chan struct{})} }
func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait(r *http.Request) {
	select {
	case <-g.ch:
	case <-r.Context().Done():
	}
}

// holdFirst answers the first request only once g opens, so the messages
// queued meanwhile form predictable batches.
func holdFirst(g *gate) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			g.wait(r)
		}
		io.WriteString(w, `{"success":true}`)
	}
}

// noSleep records the retry delays the client asks for and returns at once.
type noSleep struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *noSleep) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *noSleep) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

func flush(t *testing.T, c interface{ Flush(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}
