package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// fixedStore makes a store at a fixed time: m1 dead after one attempt, m2
// pending, and one open endpoint, so every deliveries command has
// something to print the same way on every run.
func fixedStore(t *testing.T) (path string, now time.Time) {
	t.Helper()
	now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	path = filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true)}); err != nil {
		t.Fatal(err)
	}
	ds, err := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 1, Now: now, TTL: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Lease: %v, %d", err, len(ds))
	}
	err = st.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "o", Status: store.Dead, Attempts: 1, LastError: "http://x: HTTP 500",
		Records: []store.Attempt{{Delivery: 1, URL: "http://x", Start: now, Latency: 12 * time.Millisecond, Status: 500,
			Class: "http_5xx", Outcome: "retryable", Excerpt: []byte("oops")}}}})
	if err != nil {
		t.Fatal(err)
	}
	err = st.SaveEndpoint(ctx, store.EndpointState{Source: "web", URL: "http://x", State: store.EndpointOpen,
		Failures: 5, Since: now, NextProbe: now.Add(2 * time.Second), LastError: "HTTP 500", Node: "n1", UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	return path, now
}

// TestDeliveriesJSONGolden pins the -o json shape of every deliveries
// subcommand.
func TestDeliveriesJSONGolden(t *testing.T) {
	path, now := fixedStore(t)
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"deliveries/list.json", []string{"list"}},
		{"deliveries/show.json", []string{"show", "1"}},
		{"deliveries/endpoints.json", []string{"endpoints"}},
		{"deliveries/retry.json", []string{"retry", "1"}},
		{"deliveries/prune.json", []string{"prune", "--older-than", "1h"}},
	} {
		f := testFactory(t, "", false, env)
		f.Now = func() time.Time { return now.Add(48 * time.Hour) }
		res := execute(t, f, append([]string{"deliveries", "-o", "json"}, tt.args...)...)
		if res.Code != 0 || res.Stderr != "" {
			t.Errorf("%v: code %d, stderr %q", tt.args, res.Code, res.Stderr)
		}
		golden(t, tt.golden, res.Stdout)
	}
}

// TestDeliveriesSaysWhichStore: text output names the store it read on
// stderr; machine output keeps stderr clean.
func TestDeliveriesSaysWhichStore(t *testing.T) {
	path, _ := fixedStore(t)
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	for _, args := range [][]string{{"list"}, {"show", "1"}, {"endpoints"}, {"retry", "1"}, {"prune"}} {
		res := execute(t, testFactory(t, "", false, env), append([]string{"deliveries"}, args...)...)
		if res.Code != 0 || !strings.HasPrefix(res.Stderr, "store: "+path+"\n") {
			t.Errorf("%v: code %d, stderr %q; want it to start with store: %s", args, res.Code, res.Stderr, path)
		}
	}
}

// TestDeliveriesMissingStore: without a store at the path (no --config,
// nothing under $XDG_STATE_HOME), every subcommand refuses with exit 2,
// names the path and how to point elsewhere, and creates nothing.
func TestDeliveriesMissingStore(t *testing.T) {
	state := t.TempDir()
	want := filepath.Join(state, "evfwd", "evfwd.db")
	for _, args := range [][]string{{"list"}, {"list", "-o", "json"}, {"show", "1"}, {"endpoints"}, {"retry", "1"}, {"prune"}} {
		res := execute(t, testFactory(t, "", false, map[string]string{"XDG_STATE_HOME": state}), append([]string{"deliveries"}, args...)...)
		if res.Code != 2 || res.Stdout != "" || !strings.Contains(res.Stderr, want) ||
			!strings.Contains(res.Stderr, "--store") || !strings.Contains(res.Stderr, "EVFWD_STORE") || !strings.Contains(res.Stderr, "--config") {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 2 and an error naming %s and --store, EVFWD_STORE, --config", args, res.Code, res.Stdout, res.Stderr, want)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "evfwd")); !os.IsNotExist(err) {
		t.Errorf("the state directory was touched: %v", err)
	}
}
