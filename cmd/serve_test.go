package cmd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

func TestServeConfigErrorsNameSourceAndEndpoint(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", `sources:
  - name: web
    write_key: wk
    webhooks:
      enabled: true
      endpoints:
        - url: ftp://hooks.example.com/a
`)
	res := execute(t, testFactory(t, "", false, nil), "serve", "--config", cfg, "--store", filepath.Join(t.TempDir(), "x.db"))
	if res.Code != 2 || !strings.Contains(res.Stderr, `source "web": webhooks:`) || !strings.Contains(res.Stderr, "ftp://hooks.example.com/a") {
		t.Errorf("code %d stderr %s", res.Code, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, nil), "serve", "--log-format", "xml")
	if res.Code != 2 {
		t.Errorf("bad --log-format: code %d", res.Code)
	}
}

func TestServeRunsAndDrains(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")
	ctx, cancel := context.WithCancel(context.Background())
	f := testFactory(t, "", false, map[string]string{"EVFWD_STORE": "sqlite://" + filepath.Join(t.TempDir(), "e.db"), "EVFWD_ADDR": "127.0.0.1:0"})
	done := make(chan result, 1)
	go func() { done <- executeCtx(t, ctx, f, "serve", "--config", cfg, "--log-format", "json") }()
	time.Sleep(300 * time.Millisecond)
	cancel()
	res := <-done
	if res.Code != 0 || !strings.Contains(res.Stderr, `"msg":"serving"`) || !strings.Contains(res.Stderr, `"msg":"stopped"`) {
		t.Errorf("code %d stderr %s", res.Code, res.Stderr)
	}
}

func TestDeliveriesListShowRetry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true)})
	ds, _ := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 1, Now: time.Now(), TTL: time.Minute})
	st.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "o", Status: store.Dead, Attempts: 3, LastError: "http://x: HTTP 500",
		Records: []store.Attempt{{Delivery: 1, URL: "http://x", Start: time.Now(), Status: 500, Class: "http_5xx", Outcome: "retryable"}}}})
	st.Close()
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}

	res := execute(t, testFactory(t, "", false, env), "deliveries", "list", "--status", "dead")
	if res.Code != 0 || !strings.Contains(res.Stdout, "dead") || !strings.Contains(res.Stdout, "m1") || strings.Contains(res.Stdout, "m2") {
		t.Errorf("list: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "list", "-o", "json")
	if res.Code != 0 || strings.Count(res.Stdout, "\n") != 2 {
		t.Errorf("list json: %q", res.Stdout)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "show", "1")
	if res.Code != 0 || !strings.Contains(res.Stdout, "http://x") || !strings.Contains(res.Stdout, `"messageId":"m1"`) {
		t.Errorf("show: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "retry", "--status", "dead")
	if res.Code != 0 || !strings.Contains(res.Stdout, "1 deliveries scheduled") {
		t.Errorf("retry: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	for _, args := range [][]string{{"deliveries", "retry"}, {"deliveries", "show", "x"}, {"deliveries", "list", "--status", "nope"}} {
		if res := execute(t, testFactory(t, "", false, env), args...); res.Code != 2 {
			t.Errorf("%v: code %d, want 2", args, res.Code)
		}
	}
}

func TestDemo(t *testing.T) {
	res := execute(t, testFactory(t, "", false, nil), "demo", "--timeout", "20s")
	if res.Code != 0 || !strings.Contains(res.Stdout, "6 events sent, 6 webhooks arrived with a valid X-Signature") {
		t.Errorf("demo: %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
}

func TestDeliveriesPrune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Received in 2024: m1 dead (finished), m2 still pending.
	st.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true)})
	ds, _ := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 1, Now: time.Now(), TTL: time.Minute})
	st.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "o", Status: store.Dead, Attempts: 3,
		Records: []store.Attempt{{Delivery: 1, URL: "http://x", Start: time.Now(), Status: 500, Class: "http_5xx", Outcome: "retryable"}}}})
	st.Close()
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}

	// The config's retention is the default window; this one keeps all.
	cfg := writeFile(t, "evfwd.yaml", "retention: 876000h\n")
	res := execute(t, testFactory(t, "", false, env), "deliveries", "prune", "--config", cfg)
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, "pruned 0 messages") {
		t.Errorf("prune within the config's window: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "prune", "--older-than", "24h", "-o", "json")
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, `{"messages":1,"deliveries":1,"attempts":1,"before":"`) {
		t.Errorf("prune: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "list", "-o", "json")
	if res.Code != 0 || strings.Count(res.Stdout, "\n") != 1 || !strings.Contains(res.Stdout, `"messageId":"m2"`) {
		t.Errorf("after prune, list: %q", res.Stdout)
	}
	if res := execute(t, testFactory(t, "", false, env), "deliveries", "prune", "--older-than", "0s"); res.Code != 2 {
		t.Errorf("--older-than 0s: code %d, want 2", res.Code)
	}
}
