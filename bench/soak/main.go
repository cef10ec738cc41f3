// Command soak runs evfwd serve in-process on SQLite with a short retention
// window and a steady load through a receiver answering 200, and prints,
// every -every, the store's size on disk (database file and WAL), what was
// collected and delivered so far, and how long a /metrics scrape took.
// bench/soak/run.sh runs it. Loopback only; it stops by itself.
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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
)

func main() {
	events := flag.Int("events", 1_000_000, "events to send")
	duration := flag.Duration("duration", 3*time.Minute, "spread the events over this long")
	retention := flag.Duration("retention", 30*time.Second, "serve's retention window")
	every := flag.Duration("every", 10*time.Second, "report interval")
	batch := flag.Int("batch", 100, "events per request")
	clients := flag.Int("clients", 4, "concurrent senders")
	flag.Parse()
	if err := run(*events, *duration, *retention, *every, *batch, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(events int, duration, retention, every time.Duration, batch, clients int) error {
	dir, err := os.MkdirTemp("", "evfwd-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var delivered atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		delivered.Add(1)
	}))
	defer rcv.Close()

	db := filepath.Join(dir, "evfwd.db")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := serve.New(ctx, serve.Config{
		Store: "sqlite://" + db, Retention: retention,
		Sources: []serve.Source{{Name: "soak", WriteKey: "wk_soak", Webhooks: serve.Webhooks{Enabled: true,
			Destination: webhook.Destination{SharedSecret: "s3cret", Endpoints: []webhook.Endpoint{{URL: rcv.URL + "/hook"}}}}}},
	}, serve.Options{Listener: ln})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	base := srv.URL()

	var sent, refused atomic.Int64
	requests := events / batch
	interval := duration / time.Duration(requests)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("wk_soak:"))
	tick := time.NewTicker(interval)
	jobs := make(chan int, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body bytes.Buffer
			for j := range jobs {
				body.Reset()
				body.WriteString(`{"batch":[`)
				for i := range batch {
					if i > 0 {
						body.WriteByte(',')
					}
					fmt.Fprintf(&body, `{"type":"track","userId":"user_%d","event":"Order Completed","messageId":"m-%d-%d",`+
						`"properties":{"orderId":"o_%d","total":129.95,"currency":"EUR","items":3},`+
						`"context":{"ip":"203.0.113.7","userAgent":"soak/1.0","page":{"path":"/checkout","title":"Checkout"}}}`,
						(j*batch+i)%5000, j, i, j*batch+i)
				}
				body.WriteString(`]}`)
				for {
					req, _ := http.NewRequest(http.MethodPost, base+"/v1/batch", bytes.NewReader(body.Bytes()))
					req.Header.Set("Authorization", auth)
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == 200 {
							sent.Add(int64(batch))
							break
						}
					}
					refused.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for j := range requests {
			<-tick.C
			jobs <- j
		}
	}()

	fmt.Printf("retention %s, %d events over %s in batches of %d\n\n", retention, events, duration, batch)
	fmt.Println("| t | collected | delivered | store size (db + WAL) | /metrics scrape |")
	fmt.Println("|---|---|---|---|---|")
	start := time.Now()
	report := time.NewTicker(every)
	defer report.Stop()
	var sizes []int64
	var scrapes []time.Duration
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for loading := true; ; {
		select {
		case <-report.C:
		case <-finished:
			finished, loading = nil, false
			continue
		}
		size := storeSize(db)
		took, err := scrape(base + "/metrics")
		if err != nil {
			return err
		}
		t := time.Since(start)
		fmt.Printf("| %3.0fs | %d | %d | %.1f MB | %.2f ms |\n", t.Seconds(), sent.Load(), delivered.Load(),
			float64(size)/1e6, float64(took.Microseconds())/1000)
		// Flat is judged under load, once the first window has passed
		// twice over (when the load stops, the pruner gives pages back).
		if loading && t > 2*retention+every {
			sizes = append(sizes, size)
		}
		scrapes = append(scrapes, took)
		if !loading && delivered.Load() >= sent.Load() {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		return err
	}
	lo, hi := slices.Min(sizes), slices.Max(sizes)
	var sum int64
	for _, s := range sizes {
		sum += s
	}
	mean := float64(sum) / float64(len(sizes))
	slices.Sort(scrapes)
	fmt.Printf("\nsize under load after %s: min %.1f MB, max %.1f MB, mean %.1f MB (%+.0f%% / %+.0f%% of the mean); "+
		"scrape max %.2f ms; %d requests refused and retried\n",
		2*retention+every, float64(lo)/1e6, float64(hi)/1e6, mean/1e6,
		100*(float64(lo)/mean-1), 100*(float64(hi)/mean-1), float64(scrapes[len(scrapes)-1].Microseconds())/1000, refused.Load())
	return nil
}

func storeSize(db string) int64 {
	var n int64
	for _, p := range []string{db, db + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// scraper keeps its own connection, as Prometheus does, rather than
// queueing for one of the load's.
var scraper = &http.Client{Transport: &http.Transport{}}

func scrape(url string) (time.Duration, error) {
	start := time.Now()
	resp, err := scraper.Get(url)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start), err
}
