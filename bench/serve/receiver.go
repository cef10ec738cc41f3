//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/signature"
)

// tagPrefix starts the messageId of every latency-tagged event; no other
// part of a bench body contains `"lat-`.
const tagPrefix = "lat-"

var tagMarker = []byte(`"` + tagPrefix)

// receiver is the webhook endpoint of every row, for trigger and serve
// alike: it reads the body, verifies X-Signature, answers 200 over
// keep-alive, counts, and keeps the first and last arrival of untagged
// webhooks. Only tagged ones (a few thousand) get an arrival time each, so
// its memory stays flat however large the backlog.
type receiver struct {
	secret []byte
	url    string
	srv    *http.Server
	bufs   sync.Pool

	n, tagged, bad atomic.Int64
	first, last    atomic.Int64 // unix nanoseconds of untagged arrivals

	mu sync.Mutex
	at map[string]time.Time // tagged messageId → arrival
}

func startReceiver(secret string) (*receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{secret: []byte(secret), url: "http://" + l.Addr().String() + "/hook", at: map[string]time.Time{}}
	r.bufs.New = func() any { return new(bytes.Buffer) }
	r.srv = &http.Server{Handler: r}
	go r.srv.Serve(l)
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	buf := r.bufs.Get().(*bytes.Buffer)
	defer r.bufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(req.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	body := buf.Bytes()
	if signature.Verify(r.secret, body, req.Header.Get(signature.Header)) != nil {
		r.bad.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if id := taggedID(body); id != "" {
		r.mu.Lock()
		r.at[id] = now
		r.mu.Unlock()
		r.tagged.Add(1)
	} else {
		ns := now.UnixNano()
		r.first.CompareAndSwap(0, ns)
		for last := r.last.Load(); ns > last && !r.last.CompareAndSwap(last, ns); last = r.last.Load() {
		}
		r.n.Add(1)
	}
	w.Write([]byte("OK"))
}

// taggedID is the messageId of a tagged body, or "".
func taggedID(body []byte) string {
	i := bytes.Index(body, tagMarker)
	if i < 0 {
		return ""
	}
	id := body[i+1:]
	if j := bytes.IndexByte(id, '"'); j >= 0 {
		return string(id[:j])
	}
	return ""
}

// reset forgets everything received so far (between rows).
func (r *receiver) reset() {
	r.n.Store(0)
	r.tagged.Store(0)
	r.bad.Store(0)
	r.first.Store(0)
	r.last.Store(0)
	r.mu.Lock()
	r.at = map[string]time.Time{}
	r.mu.Unlock()
}

// span is the time from the first to the last untagged arrival.
func (r *receiver) span() time.Duration {
	return time.Duration(r.last.Load() - r.first.Load())
}

// rate is n untagged webhooks over their arrival span.
func (r *receiver) rate() float64 {
	if s := r.span(); s > 0 {
		return float64(r.n.Load()) / s.Seconds()
	}
	return 0
}

func (r *receiver) arrival(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[id]
	return t, ok
}

func (r *receiver) close() { r.srv.Close() }

// check reports an error unless exactly n untagged and tagged tagged
// webhooks arrived, all correctly signed.
func (r *receiver) check(n, tagged int) error {
	if bad := r.bad.Load(); bad > 0 {
		return fmt.Errorf("receiver: %d bad signatures", bad)
	}
	if got, gotTagged := r.n.Load(), r.tagged.Load(); got != int64(n) || gotTagged != int64(tagged) {
		return fmt.Errorf("receiver: %d webhooks and %d tagged, want %d and %d", got, gotTagged, n, tagged)
	}
	return nil
}

// waitFor waits until n untagged and tagged tagged webhooks arrived
// (then checks them): an error when nothing arrives for stall, or after
// max.
func (r *receiver) waitFor(n, tagged int, stall, max time.Duration) error {
	start := time.Now()
	seen, moved := int64(-1), start
	for {
		got := r.n.Load() + r.tagged.Load()
		if got >= int64(n+tagged) {
			return r.check(n, tagged)
		}
		now := time.Now()
		if got != seen {
			seen, moved = got, now
		}
		if now.Sub(moved) > stall || now.Sub(start) > max {
			return fmt.Errorf("receiver: %d of %d webhooks after %s (stalled %s)", got, n+tagged, now.Sub(start).Round(time.Second), now.Sub(moved).Round(time.Second))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
