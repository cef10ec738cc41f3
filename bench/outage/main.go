// Command outage runs evfwd serve in-process on SQLite against a receiver
// that answers 503 for -outage and 200 after, while -events events are
// collected during the outage, and prints what the dead endpoint cost and
// how fast the backlog drained: requests during the outage, their peak
// per second, and the time from recovery to the last delivery. -compare
// also runs it with the endpoint breaker off. bench/outage/run.sh runs it.
// Loopback only; it stops by itself.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
)

func main() {
	events := flag.Int("events", 50_000, "events to collect during the outage")
	outage := flag.Duration("outage", 3*time.Minute, "how long the receiver answers 503")
	spread := flag.Duration("spread", 0, "send the events over this long from the outage's start (default: half the outage)")
	batch := flag.Int("batch", 100, "events per request")
	breaker := flag.Bool("breaker", true, "run with the endpoint breaker")
	compare := flag.Bool("compare", false, "also run with the breaker off")
	limit := flag.Duration("limit", 10*time.Minute, "give up waiting for the backlog after this long past recovery")
	flag.Parse()
	if *spread == 0 {
		*spread = *outage / 2
	}
	runs := []bool{*breaker}
	if *compare {
		runs = []bool{true, false}
	}
	fmt.Printf("%d events over %s of a %s outage (503), then 200; SQLite\n\n", *events, *spread, *outage)
	fmt.Println("| breaker | requests during the outage | peak requests/s | recovery → last delivery | delivered |")
	fmt.Println("|---|---|---|---|---|")
	for _, on := range runs {
		r, err := run(*events, *outage, *spread, *batch, on, *limit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "outage:", err)
			os.Exit(1)
		}
		state := "on"
		if !on {
			state = "off"
		}
		fmt.Printf("| %s | %d | %d | %.2f s | %d |\n", state, r.requests, r.peak, r.drain.Seconds(), r.delivered)
	}
}

type result struct {
	requests, peak, delivered int64
	drain                     time.Duration
}

// receiver answers 503 while down, 200 after, and counts.
type receiver struct {
	down      atomic.Bool
	failed    atomic.Int64 // requests answered 503
	mu        sync.Mutex
	perSecond map[int64]int64 // unix second -> 503 answers
	seen      map[string]bool // messageIds answered 200
	last      time.Time       // the last new messageId answered 200
	all       chan struct{}
	want      int
}

var idKey = []byte(`"messageId":"`)

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if rc.down.Load() {
		rc.failed.Add(1)
		rc.mu.Lock()
		rc.perSecond[time.Now().Unix()]++
		rc.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	id := ""
	if i := bytes.Index(body, idKey); i >= 0 {
		rest := body[i+len(idKey):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			id = string(rest[:j])
		}
	}
	rc.mu.Lock()
	if !rc.seen[id] {
		rc.seen[id] = true
		rc.last = time.Now()
		if len(rc.seen) == rc.want {
			close(rc.all)
		}
	}
	rc.mu.Unlock()
}

func run(events int, outage, spread time.Duration, batch int, breaker bool, limit time.Duration) (result, error) {
	dir, err := os.MkdirTemp("", "evfwd-outage-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	rc := &receiver{perSecond: map[int64]int64{}, seen: map[string]bool{}, all: make(chan struct{}), want: events}
	rc.down.Store(true)
	rcv := httptest.NewServer(rc)
	defer rcv.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := serve.New(ctx, serve.Config{
		Store: "sqlite://" + filepath.Join(dir, "evfwd.db"),
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_outage", Webhooks: serve.Webhooks{Enabled: true,
			Destination: webhook.Destination{SharedSecret: "s3cret", Endpoints: []webhook.Endpoint{{URL: rcv.URL + "/hook"}}}}}},
	}, serve.Options{Listener: ln, Breaker: forwarder.BreakerConfig{Disabled: !breaker}})
	if err != nil {
		return result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	start := time.Now()
	requests := (events + batch - 1) / batch
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("wk_outage:"))
	var body bytes.Buffer
	for j := range requests {
		if at := start.Add(spread * time.Duration(j) / time.Duration(requests)); time.Until(at) > 0 {
			time.Sleep(time.Until(at))
		}
		body.Reset()
		body.WriteString(`{"batch":[`)
		for i := range min(batch, events-j*batch) {
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"type":"track","userId":"user_%d","event":"Order Completed","messageId":"m-%d-%d","properties":{"total":129.95}}`,
				(j*batch+i)%5000, j, i)
		}
		body.WriteString(`]}`)
		for {
			req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/v1/batch", bytes.NewReader(body.Bytes()))
			req.Header.Set("Authorization", auth)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(time.Until(start.Add(outage)))
	rc.down.Store(false)
	recovered := time.Now()
	var r result
	r.requests = rc.failed.Load()
	rc.mu.Lock()
	for _, n := range rc.perSecond {
		r.peak = max(r.peak, n)
	}
	rc.mu.Unlock()
	select {
	case <-rc.all:
	case <-time.After(limit):
	}
	rc.mu.Lock()
	r.delivered = int64(len(rc.seen))
	r.drain = rc.last.Sub(recovered)
	rc.mu.Unlock()
	cancel()
	return r, <-done
}
