package serve_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// TestRetentionPrunesFinishedOnly drives the collector and Prune by hand
// (no forwarder runs, so nothing moves unless the test moves it): a
// finished message older than the window goes, a pending one stays however
// old, and a pruned messageId is collected anew.
func TestRetentionPrunesFinishedOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var clock atomic.Int64 // read by the handler's goroutines
	clock.Store(t0.UnixNano())
	nowf := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	srv, err := serve.New(ctx, serve.Config{
		Addr:      "127.0.0.1:0",
		Store:     "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Retention: time.Hour,
		Sources: []serve.Source{
			{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true,
				Destination: webhook.Destination{Endpoints: []webhook.Endpoint{{URL: "http://127.0.0.1:1/"}}}}},
			{Name: "quiet", WriteKey: "wk_quiet"},
		},
	}, serve.Options{Now: nowf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	api := httptest.NewServer(srv.Handler())
	defer api.Close()
	track := func(key, id string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/track",
			bytes.NewBufferString(`{"userId":"u1","event":"E","messageId":"`+id+`"}`))
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(key+":")))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("track %s: %d", id, resp.StatusCode)
		}
	}
	track("wk_quiet", "q1") // no destination: finished once stored
	track("wk_web", "w1")   // pending until delivered

	clock.Store(t0.Add(2 * time.Hour).UnixNano())
	now := nowf()
	n, err := srv.Prune(ctx)
	if err != nil || n != (store.Pruned{Messages: 1}) {
		t.Fatalf("Prune = %+v, %v; want q1 only", n, err)
	}
	st := srv.Store()
	ds, err := st.Lease(ctx, store.LeaseRequest{Owner: "t", Source: "web", Limit: 1, Now: now, TTL: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("w1 not pending after Prune: %v, %v", ds, err)
	}
	err = st.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "t", Status: store.Delivered, Attempts: 1, FirstAttempt: now,
		Records: []store.Attempt{{Delivery: 1, URL: "http://127.0.0.1:1/", Start: now, Status: 200, Class: "http_2xx", Outcome: "delivered"}}}})
	if err != nil {
		t.Fatal(err)
	}
	// Delivered, but received 2 h ago at t0: older than the window.
	if n, err := srv.Prune(ctx); err != nil || n != (store.Pruned{Messages: 1, Deliveries: 1, Attempts: 1}) {
		t.Fatalf("Prune after delivery = %+v, %v; want w1 with its delivery and attempt", n, err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Host = "localhost:" + srv.Addr()[strings.LastIndex(srv.Addr(), ":")+1:] // /metrics answers its own Host only
	srv.Handler().ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), "\nevfwd_pruned_messages_total 2\n") {
		t.Errorf("metrics do not count 2 pruned messages:\n%s", rec.Body)
	}
	// De-duplication holds within the window: w1 is new again.
	track("wk_web", "w1")
	if ds, _ := st.List(ctx, store.Filter{}); len(ds) != 1 || ds[0].Status != store.Pending {
		t.Errorf("w1 collected again: %+v, want one pending delivery", ds)
	}
}

func TestRetentionMustNotBeNegative(t *testing.T) {
	t.Parallel()
	cfg := serve.Config{Retention: -time.Hour, Sources: []serve.Source{{Name: "web", WriteKey: "wk"}}}
	if err := cfg.Validate(); err == nil {
		t.Error("a negative retention was accepted")
	}
}
