package serve_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/storeurl"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// scrape GETs url's /metrics and parses the text exposition.
func scrape(tb testing.TB, url string) map[string]*dto.MetricFamily {
	tb.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /metrics: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		tb.Fatalf("Content-Type = %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return mfs
}

// sample finds the series of family name whose source label is source
// ("" for a family without labels).
func sample(mfs map[string]*dto.MetricFamily, name, source string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		got := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "source" {
				got = l.GetValue()
			}
		}
		if got == source {
			return m
		}
	}
	return nil
}

// value is the value of a counter or gauge series, or -1 when it is absent.
func value(mfs map[string]*dto.MetricFamily, name, source string) float64 {
	m := sample(mfs, name, source)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	rcv := newHook(t, 500) // the first POST fails; every later one succeeds
	h := start(t, serve.Options{Now: c.Now, Policy: webhook.Policy{Initial: time.Hour, Jitter: -1}}, rcv.URL)

	mfs := scrape(t, h.url)
	for _, src := range []string{"web", "quiet"} {
		for _, name := range []string{"evfwd_ingested_total", "evfwd_delivered_total", "evfwd_retried_total",
			"evfwd_failed_total", "evfwd_dead_total", "evfwd_queue_depth", "evfwd_oldest_pending_seconds"} {
			if got := value(mfs, name, src); got != 0 {
				t.Errorf("before any message: %s{source=%q} = %v, want 0", name, src, got)
			}
		}
	}
	if got := value(mfs, "evfwd_store_size_bytes", ""); got <= 0 {
		t.Errorf("evfwd_store_size_bytes = %v, want > 0", got)
	}
	if mfs["go_goroutines"] == nil || mfs["go_gc_duration_seconds"] == nil {
		t.Error("the Go collector's metrics are missing")
	}
	if runtime.GOOS == "linux" && mfs["process_start_time_seconds"] == nil {
		t.Error("the process collector's metrics are missing")
	}
	if mf := mfs["evfwd_attempt_duration_seconds"]; mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("evfwd_attempt_duration_seconds: %v", mf)
	} else {
		var les []float64
		for _, b := range sample(mfs, "evfwd_attempt_duration_seconds", "web").GetHistogram().GetBucket() {
			les = append(les, b.GetUpperBound())
		}
		if want := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, math.Inf(1)}; !slices.Equal(les, want) {
			t.Errorf("buckets = %v, want %v", les, want)
		}
	}

	batch := `{"batch":[{"type":"track","userId":"u","event":"A"},{"type":"track","userId":"u","event":"B"}]}`
	if code, body := h.post(t, "/v1/batch", "wk_web", batch); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	waitFor(t, "one delivered, one retried", func() bool {
		mfs = scrape(t, h.url)
		return value(mfs, "evfwd_delivered_total", "web") == 1 && value(mfs, "evfwd_retried_total", "web") == 1
	})
	c.Add(90 * time.Second) // the retry is due in an hour
	mfs = scrape(t, h.url)
	for _, tt := range []struct {
		name, source string
		want         float64
	}{
		{"evfwd_ingested_total", "web", 2},
		{"evfwd_queue_depth", "web", 1},
		{"evfwd_oldest_pending_seconds", "web", 90},
		{"evfwd_queue_depth", "quiet", 0},
		{"evfwd_oldest_pending_seconds", "quiet", 0},
		{"evfwd_failed_total", "web", 0},
	} {
		if got := value(mfs, tt.name, tt.source); got != tt.want {
			t.Errorf("%s{source=%q} = %v, want %v", tt.name, tt.source, got, tt.want)
		}
	}
	if got := sample(mfs, "evfwd_attempt_duration_seconds", "web").GetHistogram().GetSampleCount(); got != 2 {
		t.Errorf("evfwd_attempt_duration_seconds_count{source=\"web\"} = %d, want 2", got)
	}

	c.Add(time.Hour)
	waitFor(t, "the retry delivered", func() bool {
		mfs = scrape(t, h.url)
		return value(mfs, "evfwd_delivered_total", "web") == 2
	})
	if d, o := value(mfs, "evfwd_queue_depth", "web"), value(mfs, "evfwd_oldest_pending_seconds", "web"); d != 0 || o != 0 {
		t.Errorf("after delivery: queue depth %v, oldest %v; want 0, 0", d, o)
	}
}

// TestMetricsStoreDown: when the store cannot answer, the scrape still
// serves the counters, without the store's gauges.
func TestMetricsStoreDown(t *testing.T) {
	t.Parallel()
	st, err := storeurl.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "evfwd.db"), storeurl.Options{NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	m := serve.NewMetrics("web")
	m.Ingested("web", 3)
	m.Finished("web", 1, store.Dead, false)
	srv := httptest.NewServer(m.Handler(st, nil, nil))
	defer srv.Close()
	mfs := scrape(t, srv.URL)
	if got := value(mfs, "evfwd_ingested_total", "web"); got != 3 {
		t.Errorf("evfwd_ingested_total = %v, want 3", got)
	}
	if got := value(mfs, "evfwd_dead_total", "web"); got != 1 {
		t.Errorf("evfwd_dead_total = %v, want 1", got)
	}
	for _, name := range []string{"evfwd_queue_depth", "evfwd_oldest_pending_seconds", "evfwd_store_size_bytes"} {
		if mfs[name] != nil {
			t.Errorf("%s served although the store is closed", name)
		}
	}
}

// fillHistory writes delivered deliveries of source "web" (one message
// each) and pending ones, due in a day, straight into the store's tables:
// the store's own Ingest would take minutes for a million.
func fillHistory(tb testing.TB, path string, delivered, pending int) {
	tb.Helper()
	ctx := context.Background()
	st, err := storeurl.Open(ctx, "sqlite://"+path, storeurl.Options{NoRecover: true}) // creates the schema
	if err != nil {
		tb.Fatal(err)
	}
	st.Close()
	if delivered+pending == 0 {
		return
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=synchronous(OFF)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMilli()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO messages (source, message_id, type, user_id, received_at, body)
			SELECT 'web', 'm-' || i, 'track', 'u_' || (i % 5000), ? - (? - i) * 100,
				'{"type":"track","event":"Order Completed","userId":"u_' || (i % 5000) || '","messageId":"m-' || i ||
				'","properties":{"total":129.95,"currency":"EUR"}}'
			FROM n`, []any{delivered + pending, now, delivered + pending}},
		{`INSERT INTO deliveries (message, source, destination, status, attempts, first_attempt_at, next_attempt_at, created_at, updated_at)
			SELECT id, source, 'webhooks', 'delivered', 1, received_at, received_at, received_at, received_at
			FROM messages WHERE id <= ?`, []any{delivered}},
		{`INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
			SELECT id, source, 'webhooks', 'pending', ? + 86400000, received_at, received_at
			FROM messages WHERE id > ?`, []any{now, delivered}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkMetricsScrape measures GET /metrics on a running service whose
// SQLite store holds a history of delivered deliveries and some pending
// ones: what a scrape costs must not grow with the history.
//
//	go test -run '^$' -bench MetricsScrape ./pkg/serve/
func BenchmarkMetricsScrape(b *testing.B) {
	for _, tt := range []struct{ delivered, pending int }{{0, 0}, {1_000_000, 1000}} {
		b.Run(fmt.Sprintf("delivered=%d/pending=%d", tt.delivered, tt.pending), func(b *testing.B) {
			if tt.delivered > 100_000 && testing.Short() {
				b.Skip("fills a store with a million deliveries; not in -short")
			}
			path := filepath.Join(b.TempDir(), "evfwd.db")
			fillHistory(b, path, tt.delivered, tt.pending)
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			defer rcv.Close()
			cfg := serve.Config{
				Addr:  "127.0.0.1:0",
				Store: "sqlite://" + path,
				Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true,
					Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: rcv.URL}}}}}},
			}
			ctx, cancel := context.WithCancel(context.Background())
			srv, err := serve.New(ctx, cfg, serve.Options{})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Error(err)
				}
			}()
			mfs := scrape(b, srv.URL())
			if got := value(mfs, "evfwd_queue_depth", "web"); got != float64(tt.pending) {
				b.Fatalf("evfwd_queue_depth = %v, want %d", got, tt.pending)
			}
			for b.Loop() {
				resp, err := http.Get(srv.URL() + "/metrics")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
