// Package webhooktest is the kit of the tests that send webhooks: a
// scripted receiver on loopback (Receiver), a receiver that counts
// messageIds (IDCounter), a clock only the test moves (Clock) and the one
// way those tests wait for a condition (Await).
//
// The receiver is a real HTTP server, as GitHub CLI's httpmock is a real
// http.RoundTripper: the code under test sends through its own client,
// and the test scripts the answers and reads back what arrived.
package webhooktest

import (
	"cmp"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/broadcast"
)

// Reply is one scripted answer.
type Reply struct {
	Status int      // 200 when 0
	Header []string // name, value pairs
	Body   string   // http.StatusText(Status) when empty
	// Delay waits this long before the answer (less after Release; none
	// when the client gives up first).
	Delay time.Duration
	// Hang holds the request until Release, the client gives up or the
	// test ends; then it answers.
	Hang bool
	// Reset drops the connection without an answer (an RST, not a FIN).
	Reset bool
	// Handle, when set, answers instead.
	Handle http.HandlerFunc
}

// Request is what the receiver got.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Gauge counts requests being handled, by one receiver or several.
type Gauge struct {
	mu        sync.Mutex
	now, peak int
}

func (g *Gauge) add(d int) {
	g.mu.Lock()
	g.now += d
	g.peak = max(g.peak, g.now)
	g.mu.Unlock()
}

// Get returns how many requests are being handled and the most at once.
func (g *Gauge) Get() (now, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now, g.peak
}

// Receiver is a webhook endpoint on loopback that answers each request
// with the next Reply of its script (the last one repeats; 200 without a
// script) and records what it got.
type Receiver struct {
	*httptest.Server
	script  []Reply
	notify  *broadcast.Signal
	gauge   Gauge
	shared  *Gauge
	counted func(body []byte) // IDCounter's, before notify fires

	mu   sync.Mutex
	reqs []Request

	release     chan struct{}
	releaseOnce sync.Once
}

// Option configures a Receiver.
type Option func(*Receiver)

// Script sets the answers, one per request, the last repeating.
func Script(replies ...Reply) Option { return func(r *Receiver) { r.script = replies } }

// Statuses scripts answers with these statuses.
func Statuses(codes ...int) Option {
	replies := make([]Reply, len(codes))
	for i, c := range codes {
		replies[i].Status = c
	}
	return Script(replies...)
}

// Notify fires s at each request, once it is recorded.
func Notify(s *broadcast.Signal) Option { return func(r *Receiver) { r.notify = s } }

// Share counts the requests being handled on g as well (several receivers
// sharing a bound).
func Share(g *Gauge) Option { return func(r *Receiver) { r.shared = g } }

// New starts a Receiver, closed when the test ends.
func New(t testing.TB, opts ...Option) *Receiver {
	t.Helper()
	r := &Receiver{release: make(chan struct{})}
	for _, o := range opts {
		o(r)
	}
	r.Server = httptest.NewServer(r)
	// Cleanups run last first: held requests are let go before Close,
	// which waits for them.
	t.Cleanup(r.Close)
	t.Cleanup(r.Release)
	return r
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.inFlight(1)
	r.mu.Lock()
	n := len(r.reqs)
	r.reqs = append(r.reqs, Request{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: body})
	r.mu.Unlock()
	if r.counted != nil {
		r.counted(body)
	}
	if r.notify != nil {
		r.notify.Fire()
	}
	var reply Reply
	if len(r.script) > 0 {
		reply = r.script[min(n, len(r.script)-1)]
	}
	r.wait(req, reply)
	// Out of the count before the answer leaves: a client that sends its
	// next request on this answer never finds this one still counted.
	r.inFlight(-1)
	if req.Context().Err() == nil {
		answer(w, req, reply)
	}
}

func (r *Receiver) inFlight(d int) {
	r.gauge.add(d)
	if r.shared != nil {
		r.shared.add(d)
	}
}

// wait holds the request as reply says.
func (r *Receiver) wait(req *http.Request, reply Reply) {
	if reply.Delay > 0 || reply.Hang {
		var wait <-chan time.Time // nil, never ready, for Hang
		if !reply.Hang {
			wait = time.After(reply.Delay)
		}
		select {
		case <-wait:
		case <-r.release:
		case <-req.Context().Done():
		}
	}
}

func answer(w http.ResponseWriter, req *http.Request, reply Reply) {
	switch {
	case reply.Handle != nil:
		reply.Handle(w, req)
		return
	case reply.Reset:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
		return
	}
	for i := 0; i+1 < len(reply.Header); i += 2 {
		w.Header().Set(reply.Header[i], reply.Header[i+1])
	}
	status := cmp.Or(reply.Status, http.StatusOK)
	w.WriteHeader(status)
	io.WriteString(w, cmp.Or(reply.Body, http.StatusText(status)))
}

// Release lets every request held by Hang answer, and every later one
// answer at once.
func (r *Receiver) Release() { r.releaseOnce.Do(func() { close(r.release) }) }

// Requests returns what the receiver got, in order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Count is how many requests the receiver got.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// InFlight returns how many requests the receiver is handling and the
// most it handled at once.
func (r *Receiver) InFlight() (now, peak int) { return r.gauge.Get() }
