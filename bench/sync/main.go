// Command sync-bench measures what a large audience sync does to ingest:
// it starts evfwd serve in-process (SQLite in a temp dir, or -store
// postgres://...), sends small /v1/batch requests at a steady rate (open
// loop: a stalled store shows as latency, not as fewer requests), measures
// them alone for -idle, then syncs a -members audience through the admin
// API twice: the first sync (every member joins) and a second one in which
// -churn members leave and as many join. It prints, per sync, its duration,
// the ingest latency of the requests sent while it ran (p50, p99, max), and
// the peak size of the SQLite WAL. The forwarder delivers the identify
// messages to a local receiver answering 200 meanwhile, as in production.
// bench/sync/run.sh runs it and prints the table.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/bench/internal/benchpg"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
)

const token = "bench_admin"

var auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("wk_bench:"))

func main() {
	pgURL := flag.String("store", "", "a postgres:// URL to measure PostgreSQL (default: SQLite in a temp dir)")
	members := flag.Int("members", 1_000_000, "audience size")
	churn := flag.Int("churn", 100_000, "members leaving (and as many joining) in the second sync")
	rate := flag.Int("rate", 200, "ingest requests per second")
	size := flag.Int("batch", 5, "events per ingest request")
	forward := flag.Bool("forward", true, "deliver the identify messages to a local receiver meanwhile")
	header := flag.Bool("header", true, "print the table header")
	label := flag.String("label", "", "label of the rows (default: the store)")
	idle := flag.Duration("idle", 10*time.Second, "how long to measure ingest alone first")
	flag.Parse()
	if *label == "" {
		*label = "SQLite"
		if *pgURL != "" {
			*label = "PostgreSQL"
		}
	}

	var delivered atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		delivered.Add(1)
	}))
	defer rcv.Close()

	dir, err := os.MkdirTemp("", "evfwd-sync-bench-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	dbPath := filepath.Join(dir, "evfwd.db")
	storeURL := "sqlite://" + dbPath
	if *pgURL != "" {
		storeURL = benchpg.SchemaURL(*pgURL, "sync")
		defer benchpg.Drop(*pgURL, storeURL)
	}
	cfg := serve.Config{Addr: "127.0.0.1:0", Store: storeURL, AdminToken: token, Sources: []serve.Source{{
		Name: "bench", WriteKey: "wk_bench",
		Webhooks: serve.Webhooks{Enabled: *forward, Destination: webhook.Destination{SharedSecret: "s", Endpoints: []webhook.Endpoint{{URL: rcv.URL}}}},
	}}}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := serve.New(ctx, cfg, serve.Options{})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	base := srv.URL()
	adm := &admin.Client{Endpoint: base, Token: token}

	// The ingest load runs for the whole benchmark; each request records
	// when it was sent and how long its answer took.
	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var mu sync.Mutex
	var samples []sample
	var sent []time.Time // when each request was sent
	var failures atomic.Int64
	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	load.Add(1)
	go func() {
		defer load.Done()
		tick := time.NewTicker(time.Second / time.Duration(*rate))
		defer tick.Stop()
		var inflight sync.WaitGroup
		defer inflight.Wait()
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			case <-tick.C:
			}
			inflight.Add(1)
			at := time.Now()
			mu.Lock()
			sent = append(sent, at)
			mu.Unlock()
			go func() {
				defer inflight.Done()
				if !post(base, batch(fmt.Sprintf("r%d", i), *size, at)) {
					failures.Add(1)
				}
				mu.Lock()
				samples = append(samples, sample{at, time.Since(at)})
				mu.Unlock()
			}()
		}
	}()

	// The WAL's size, sampled every 5 ms (SQLite only).
	var walPeak atomic.Int64
	stopWAL := make(chan struct{})
	go func() {
		for {
			if fi, err := os.Stat(dbPath + "-wal"); err == nil && fi.Size() > walPeak.Load() {
				walPeak.Store(fi.Size())
			}
			select {
			case <-stopWAL:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	defer close(stopWAL)

	if *header {
		fmt.Printf("| store | sync | sync took | messages | ingest requests during sync | p50 | p99 | max | WAL peak |\n")
		fmt.Printf("|---|---|---|---|---|---|---|---|---|\n")
	}
	time.Sleep(time.Second) // the load settles
	for _, step := range []struct {
		what  string
		first int
	}{
		{fmt.Sprintf("none (%v of ingest alone)", *idle), -1},
		{fmt.Sprintf("first, %s members", count(*members)), 0},
		{fmt.Sprintf("%s out, %s in", count(*churn), count(*churn)), *churn},
	} {
		walPeak.Store(0)
		start := time.Now()
		rep := &admin.SyncReport{}
		if step.first < 0 {
			time.Sleep(*idle)
		} else if rep, err = adm.Sync(context.Background(), "audience", "Bench Audience", nil, list(step.first, *members)); err != nil {
			panic(err)
		}
		end := time.Now()
		// Wait for the answers to every request sent before the end.
		during := func() (n, answered int) {
			mu.Lock()
			defer mu.Unlock()
			for _, at := range sent {
				if !at.Before(start) && at.Before(end) {
					n++
				}
			}
			for _, s := range samples {
				if !s.at.Before(start) && s.at.Before(end) {
					answered++
				}
			}
			return n, answered
		}
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if n, answered := during(); answered == n {
				break
			}
		}
		if n, answered := during(); answered < n {
			fmt.Fprintf(os.Stderr, "%d of %d requests sent during the sync got no answer in 5 minutes\n", n-answered, n)
		}
		mu.Lock()
		var lat []time.Duration
		for _, s := range samples {
			if !s.at.Before(start) && s.at.Before(end) {
				lat = append(lat, s.lat)
			}
		}
		mu.Unlock()
		slices.Sort(lat)
		p := func(q float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			return ms(lat[int(q*float64(len(lat)-1))])
		}
		wal := "n/a"
		if *pgURL == "" {
			wal = fmt.Sprintf("%.1f MiB", float64(walPeak.Load())/(1<<20))
		}
		fmt.Printf("| %s | %s | %.1f s | %d | %d | %.1f ms | %.1f ms | %.1f ms | %s |\n", *label, step.what,
			end.Sub(start).Seconds(), rep.Messages, len(lat), p(0.5), p(0.99), p(1), wal)
	}
	close(stopLoad)
	load.Wait()
	if n := failures.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "%d ingest requests failed\n", n)
	}
	fmt.Fprintf(os.Stderr, "%d webhooks delivered by the end\n", delivered.Load())
	cancel()
	<-done
}

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// list streams an NDJSON list of n users from first through a pipe.
func list(first, n int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		b := make([]byte, 0, 64<<10)
		for i := first; i < first+n; i++ {
			b = fmt.Appendf(b, "\"user_%07d\"\n", i)
			if len(b) > 60<<10 {
				if _, err := pw.Write(b); err != nil {
					return
				}
				b = b[:0]
			}
		}
		pw.Write(b)
		pw.Close()
	}()
	return pr
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func batch(prefix string, n int, at time.Time) []byte {
	var b bytes.Buffer
	b.WriteString(`{"batch":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"track","userId":"u_%d","event":"Order Completed","messageId":"%s-%d","timestamp":"%s","properties":{"total":12.5,"currency":"EUR"}}`,
			i, prefix, i, message.FormatTime(at))
	}
	b.WriteString(`],"sentAt":"` + message.FormatTime(at) + `"}`)
	return b.Bytes()
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 5 * time.Minute}

// post sends one request and reports whether it was answered 200.
func post(base string, body []byte) bool {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/batch", bytes.NewReader(body))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
