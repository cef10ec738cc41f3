//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/signature"
)

// destReceiver is the endpoint of the destinations rows: each destination
// posts to url/<its name>. It verifies every X-Signature (over the body, a
// JSON array for a batch), answers 200 over keep-alive and keeps, per
// destination, the requests and the events they carried (the messageIds
// in the body: one for a single message, one per element of a batch), the
// first and last arrival and, when asked, every request's arrival time and
// every messageId, to check that each event arrived exactly once.
type destReceiver struct {
	secret []byte
	url    string
	srv    *http.Server
	bufs   sync.Pool
	bad    atomic.Int64
	// latency is how long each answer waits (ns): a receiver across a
	// network rather than in this process.
	latency atomic.Int64

	mu    sync.Mutex
	lanes map[string]*laneLog
}

// laneLog is what one destination sent.
type laneLog struct {
	requests, items int
	first, last     time.Time
	noID            int // requests without a messageId
	times           []time.Time
	keepTimes       bool
	ids             map[string]int32 // messageId → times seen; nil: not kept
	dups            int              // messageIds seen again
}

func startDestReceiver(secret string) (*destReceiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &destReceiver{secret: []byte(secret), url: "http://" + l.Addr().String() + "/d", lanes: map[string]*laneLog{}}
	r.bufs.New = func() any { return new(bytes.Buffer) }
	r.srv = &http.Server{Handler: r}
	go r.srv.Serve(l)
	return r, nil
}

// endpoint is the URL destination name posts to.
func (r *destReceiver) endpoint(name string) string { return r.url + "/" + name }

var idKey = []byte(`"messageId"`)

func (r *destReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	buf := r.bufs.Get().(*bytes.Buffer)
	defer r.bufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(req.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	body := buf.Bytes()
	if d := time.Duration(r.latency.Load()); d > 0 {
		time.Sleep(d)
	}
	if signature.Verify(r.secret, body, req.Header.Get(signature.Header)) != nil {
		r.bad.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	name := strings.TrimPrefix(req.URL.Path, "/d/")
	r.mu.Lock()
	l := r.lane(name)
	l.requests++
	if l.first.IsZero() {
		l.first = now
	}
	if now.After(l.last) {
		l.last = now
	}
	if l.keepTimes {
		l.times = append(l.times, now)
	}
	found := 0
	for rest := body; ; {
		id, after, ok := nextID(rest)
		if !ok {
			break
		}
		rest = after
		found++
		if l.ids != nil {
			k := string(id)
			if l.ids[k]++; l.ids[k] > 1 {
				l.dups++
			}
		}
	}
	if found == 0 {
		l.noID++
		found = 1
	}
	l.items += found
	r.mu.Unlock()
	w.Write([]byte("OK"))
}

// nextID finds the next "messageId" key in b and returns its string value
// and what follows it. The bench's messageIds hold no escapes; whatever
// spacing a mapping's output has around the colon is skipped.
func nextID(b []byte) (id, rest []byte, ok bool) {
	for {
		i := bytes.Index(b, idKey)
		if i < 0 {
			return nil, nil, false
		}
		b = bytes.TrimLeft(b[i+len(idKey):], " \t\r\n")
		if len(b) == 0 || b[0] != ':' {
			continue // the string "messageId" as a value, not a key
		}
		b = bytes.TrimLeft(b[1:], " \t\r\n")
		if len(b) == 0 || b[0] != '"' {
			continue
		}
		j := bytes.IndexByte(b[1:], '"')
		if j < 0 {
			return nil, nil, false
		}
		return b[1 : 1+j], b[2+j:], true
	}
}

// reset forgets everything, then keeps arrival times (times) and
// messageIds (ids) of the named destinations from now on.
func (r *destReceiver) reset(times, ids []string) {
	r.bad.Store(0)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lanes = map[string]*laneLog{}
	for _, name := range times {
		r.lane(name).keepTimes = true
	}
	for _, name := range ids {
		r.lane(name).ids = map[string]int32{}
	}
}

// lane is name's log, created when missing; r.mu is held.
func (r *destReceiver) lane(name string) *laneLog {
	l := r.lanes[name]
	if l == nil {
		l = &laneLog{}
		r.lanes[name] = l
	}
	return l
}

// snapshot is a copy of name's log so far (its ids left out).
func (r *destReceiver) snapshot(name string) laneLog {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := *r.lane(name)
	l.times = append([]time.Time(nil), l.times...)
	l.ids = nil
	return l
}

// rate is events over the span from the first to the last arrival.
func (l laneLog) rate() float64 {
	if s := l.last.Sub(l.first); s > 0 {
		return float64(l.items) / s.Seconds()
	}
	return 0
}

// exactlyOnce reports an error unless every one of n events arrived at
// name exactly once (n distinct messageIds, none twice) with a valid
// signature.
func (r *destReceiver) exactlyOnce(name string, n int) error {
	if bad := r.bad.Load(); bad > 0 {
		return fmt.Errorf("receiver: %d bad signatures", bad)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lane(name)
	switch {
	case l.ids == nil:
		return fmt.Errorf("receiver: %s: messageIds not kept", name)
	case l.noID > 0:
		return fmt.Errorf("receiver: %s: %d requests without a messageId", name, l.noID)
	case l.dups > 0 || len(l.ids) != n || l.items != n:
		return fmt.Errorf("receiver: %s: %d events, %d distinct, %d seen again; want %d, each once", name, l.items, len(l.ids), l.dups, n)
	}
	return nil
}

// waitItems waits until name received n events (n distinct messageIds
// when it keeps them): an error when nothing arrives for stall, or after
// max.
func (r *destReceiver) waitItems(name string, n int, stall, max time.Duration) error {
	start := time.Now()
	seen, moved := -1, start
	for {
		got := r.snapshotItems(name)
		if got >= n {
			return nil
		}
		now := time.Now()
		if got != seen {
			seen, moved = got, now
		}
		if now.Sub(moved) > stall || now.Sub(start) > max {
			return fmt.Errorf("receiver: %s: %d of %d events after %s (stalled %s)", name, got, n, now.Sub(start).Round(time.Second), now.Sub(moved).Round(time.Second))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *destReceiver) snapshotItems(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lane(name)
	if l.ids != nil {
		return len(l.ids)
	}
	return l.items
}

// total is the events every destination received.
func (r *destReceiver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lanes {
		n += l.items
	}
	return n
}

func (r *destReceiver) close() { r.srv.Close() }
