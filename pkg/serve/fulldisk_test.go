package serve_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/fullfs"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// The forwarder's log lines the test waits for.
const (
	logKept    = "record delivery outcomes; kept to retry, leasing paused"
	logRetried = "record delivery outcomes again"
)

// logCount is a log handler that counts records by message.
type logCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }

func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Message]++
	return nil
}

func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }

func (l *logCount) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[msg]
}

// TestDiskFullSendsOnce: serve on a SQLite file whose file system fills
// while the deliveries of what it collects go out, with leases of 1 s.
// Outcomes it cannot record wait in memory while the disk stays full for
// many times the lease, and no delivery goes out twice; once space is
// freed every outcome is recorded, and every message acknowledged (the
// client's retries of refused batches too) has been delivered once.
func TestDiskFullSendsOnce(t *testing.T) {
	t.Parallel()
	// A lease outlasts the deliveries held at the gate below, however
	// slow the machine.
	const ttl = time.Second
	dir := fullfs.Mount(t, "8m")
	// Deliveries wait at the gate until the disk is full: their
	// outcomes then cannot be recorded.
	recv := newIDCounter(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		recv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(gate.Close)
	t.Cleanup(open)
	logs := &logCount{n: map[string]int{}}
	h := run(t, serve.Config{
		Addr:  "127.0.0.1:0",
		Store: "sqlite://" + filepath.Join(dir, "evfwd.db"),
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true,
			Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: gate.URL}}}}}},
	}, serve.Options{Poll: 5 * time.Millisecond, LeaseTTL: ttl, Logger: slog.New(logs)})

	acked := map[string]bool{}
	type batch struct {
		body []byte
		ids  []string
	}
	var refused []batch
	post := func(n int) {
		body, ids := sizedBatch(t, fmt.Sprint("b", n), 20_000, 400)
		switch got := send(t, h, body, false); got.status {
		case 200:
			for _, id := range ids {
				acked[id] = true
			}
		case 503:
			refused = append(refused, batch{body, ids})
		default:
			t.Fatalf("batch %d: %+v, want 200 or 503", n, got)
		}
	}
	held := time.Now()
	for n := range 5 {
		post(n)
	}
	ballast := filepath.Join(dir, "ballast")
	fullfs.Fill(t, ballast, 0)
	// SQLite writes into the room its WAL file has, then refuses batches
	// and outcomes alike.
	for n := 5; len(refused) < 3; n++ {
		if n == 1000 {
			t.Fatal("1,000 batches on a full disk and none refused")
		}
		post(n)
	}
	open()
	waitFor(t, "an outcome to be refused", func() bool { return logs.count(logKept) > 0 })
	t.Logf("deliveries held at the gate for %v", time.Since(held).Round(time.Millisecond))
	// The disk stays full through eight retries that fail, 4.5 s with
	// the backoff: four leases' time.
	waitFor(t, "eight retries of the outcomes to fail", func() bool { return logs.count(logRetried) >= 8 })
	_, dupsFull := recv.Tally()
	t.Logf("disk full: %d messages acknowledged, %d batches refused, %d duplicates", len(acked), len(refused), dupsFull)

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for _, b := range refused { // the client retries
		if got := send(t, h, b.body, false); got.status != 200 {
			t.Fatalf("retry after space was freed: %+v", got)
		}
		for _, id := range b.ids {
			acked[id] = true
		}
	}
	waitFor(t, "every delivery recorded delivered", func() bool {
		ds := deliveries(t, h, store.Filter{Source: "web", Status: store.Delivered})
		return len(ds) == len(acked)
	})
	missing, dups := recv.WaitAll(acked, time.Now().Add(waitLimit))
	t.Logf("space freed: %d messages, %d never delivered, %d duplicates", len(acked), missing, dups)
	if missing != 0 || dups != 0 {
		t.Errorf("%d of %d messages never delivered, %d duplicates; want none, none", missing, len(acked), dups)
	}
	for _, d := range deliveries(t, h, store.Filter{Source: "web"}) {
		if d.Attempts != 1 {
			t.Fatalf("delivery %d: %s after %d attempts, want delivered after 1", d.ID, d.Status, d.Attempts)
		}
	}
}
