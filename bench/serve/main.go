// Command serve-bench measures evfwd serve in-process on loopback: ingest
// events/s (1 and 8 clients, batches of 100), forward webhooks/s to a
// receiver answering 200, and ingest→webhook latency at 1,000 events/s.
// With -store postgres://... it runs -nodes serve instances on one
// PostgreSQL database (a fresh schema per run), clients spread over them.
// bench/serve/run.sh runs it and prints the table.
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

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
)

var auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("wk_bench:"))

type sink struct {
	mu    sync.Mutex
	n     atomic.Int64
	first time.Time
	last  time.Time
	at    map[string]time.Time
}

func main() {
	pgURL := flag.String("store", "", "a postgres:// URL to measure PostgreSQL (default: SQLite in a temp dir)")
	nodes := flag.Int("nodes", 1, "serve instances sharing the PostgreSQL store")
	header := flag.Bool("header", true, "print the table header")
	flag.Parse()
	label := "SQLite"
	if *pgURL != "" {
		label = fmt.Sprintf("PostgreSQL, %d node(s)", *nodes)
	} else {
		*nodes = 1
	}
	dir, _ := os.MkdirTemp("", "evfwd-bench-")
	defer os.RemoveAll(dir)
	s := &sink{at: map[string]time.Time{}}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		now := time.Now()
		obj, _ := rawjson.ParseObject(body)
		id, _ := obj.GetString("messageId")
		s.mu.Lock()
		if s.first.IsZero() {
			s.first = now
		}
		s.last = now
		s.at[id] = now
		s.mu.Unlock()
		s.n.Add(1)
	}))
	defer rcv.Close()

	// run starts the nodes on a fresh store, hands their URLs to fn and
	// stops them.
	run := func(name string, forward bool, fn func(urls []string)) {
		storeURL := filepath.Join(dir, name+".db")
		if *pgURL != "" {
			storeURL = benchpg.SchemaURL(*pgURL, name)
			defer benchpg.Drop(*pgURL, storeURL)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var urls []string
		var done []chan error
		for range *nodes {
			cfg := serve.Config{Addr: "127.0.0.1:0", Store: storeURL, Sources: []serve.Source{{
				Name: "bench", WriteKey: "wk_bench",
				Webhooks: serve.Webhooks{Enabled: forward, Destination: webhook.Destination{SharedSecret: "s", Endpoints: []webhook.Endpoint{{URL: rcv.URL}}}},
			}}}
			srv, err := serve.New(ctx, cfg, serve.Options{})
			if err != nil {
				panic(err)
			}
			d := make(chan error)
			go func() { d <- srv.Run(ctx) }()
			urls, done = append(urls, srv.URL()), append(done, d)
		}
		fn(urls)
		cancel()
		for _, d := range done {
			<-d
		}
	}

	if *header {
		fmt.Printf("| store | measure | result | target |\n|---|---|---|---|\n")
	}
	for _, clients := range []int{1, 8} {
		run(fmt.Sprintf("ingest%d", clients), false, func(urls []string) {
			const perClient = 300 // batches
			start := time.Now()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for b := range perClient {
						post(urls[(c+b)%len(urls)], batch(fmt.Sprintf("c%d-b%d", c, b), 100, time.Now()))
					}
				}()
			}
			wg.Wait()
			rate := float64(clients*perClient*100) / time.Since(start).Seconds()
			fmt.Printf("| %s | ingest, %d client(s), batches of 100 | %.0f events/s | ≥ 50,000 |\n", label, clients, rate)
		})
	}

	run("forward", true, func(urls []string) {
		const n = 30_000
		s.n.Store(0)
		s.first = time.Time{}
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := range n / 100 / 4 {
					post(urls[(c+b)%len(urls)], batch(fmt.Sprintf("f%d-%d", c, b), 100, time.Now()))
				}
			}()
		}
		wg.Wait()
		for s.n.Load() < n {
			time.Sleep(5 * time.Millisecond)
		}
		s.mu.Lock()
		rate := float64(n) / s.last.Sub(s.first).Seconds()
		s.mu.Unlock()
		fmt.Printf("| %s | forward to a local 200 receiver | %.0f webhooks/s | ≥ 5,000 |\n", label, rate)
	})

	run("latency", true, func(urls []string) {
		// 1,000 events/s as batches of 10 every 10 ms, for 5 s.
		sent := map[string]time.Time{}
		tick := time.NewTicker(10 * time.Millisecond)
		for i := range 500 {
			<-tick.C
			prefix := fmt.Sprintf("l%d", i)
			t := time.Now()
			for j := range 10 {
				sent[fmt.Sprintf("%s-%d", prefix, j)] = t
			}
			go post(urls[i%len(urls)], batch(prefix, 10, t))
		}
		tick.Stop()
		time.Sleep(time.Second)
		var lat []time.Duration
		s.mu.Lock()
		for id, t := range sent {
			if at, ok := s.at[id]; ok {
				lat = append(lat, at.Sub(t))
			}
		}
		s.mu.Unlock()
		slices.Sort(lat)
		p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
		fmt.Printf("| %s | ingest→webhook latency at 1,000 events/s (%d events) | p50 %.1f ms, p99 %.1f ms | p99 < 100 ms |\n",
			label, len(lat), ms(p(0.50)), ms(p(0.99)))
	})
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func batch(prefix string, n int, at time.Time) []byte {
	var b bytes.Buffer
	b.WriteString(`{"batch":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"track","userId":"u_%d","event":"Order Completed","messageId":"%s-%d","timestamp":"%s","properties":{"total":12.5,"currency":"EUR","sku":"SKU-123"},"context":{"ip":"203.0.113.7","library":{"name":"bench","version":"1"}}}`,
			i, prefix, i, message.FormatTime(at))
	}
	b.WriteString(`],"sentAt":"` + message.FormatTime(at) + `"}`)
	return b.Bytes()
}

func post(url string, body []byte) {
	for {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/batch", bytes.NewReader(body))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			return
		}
		if resp.StatusCode != 429 {
			panic(fmt.Sprintf("status %d", resp.StatusCode))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
