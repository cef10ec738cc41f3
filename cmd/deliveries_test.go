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
	st := openStoreAt(t, path, now)
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

// TestDeliveriesResend: resend sends a delivered delivery again as a new
// attempt (pending, due now, its attempt kept), reports the IDs it left
// alone and why (exit 1), selects by --status/--source, and refuses to
// run with neither IDs nor a filter (exit 2).
func TestDeliveriesResend(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st := openStoreAt(t, path, now)
	if err := st.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true)}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	markDelivered(t, path, now)
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	later := now.Add(time.Hour)
	resend := func(args ...string) result {
		t.Helper()
		f := testFactory(t, "", false, env)
		f.Now = func() time.Time { return later }
		return execute(t, f, append([]string{"deliveries", "resend"}, args...)...)
	}
	if res := resend("1"); res.Code != 0 || res.Stdout != "1 delivery resent\n" || res.Stderr != "store: "+path+"\n" {
		t.Errorf("resend 1: code %d, stdout %q, stderr %q; want 0 and 1 delivery resent", res.Code, res.Stdout, res.Stderr)
	}
	st = openStoreAt(t, path, later)
	d, err := st.Get(ctx, 1)
	st.Close()
	if err != nil || d.Status != store.Pending || !d.NextAttempt.Equal(later) || len(d.Records) != 1 {
		t.Errorf("resent delivery: %+v, %v; want pending, due %s, its attempt kept", d, err, later)
	}
	res := resend("1", "2", "99")
	if res.Code != 1 || res.Stdout != "0 deliveries resent\n" || !strings.Contains(res.Stderr, "1, 2: still pending, left alone") ||
		!strings.Contains(res.Stderr, "99: no such delivery") {
		t.Errorf("resend 1 2 99: code %d, stdout %q, stderr %q; want 1, saying 1 and 2 are pending and 99 unknown", res.Code, res.Stdout, res.Stderr)
	}
	if res := resend("-o", "json", "2", "99"); res.Code != 1 || res.Stdout != `{"resent":0,"pending":[2],"purged":[],"unknown":[99],"skipped":0}`+"\n" || res.Stderr != "" {
		t.Errorf("resend -o json: code %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	for _, args := range [][]string{{}, {"--status", "pending"}, {"--status", "cancelled"}, {"1", "--status", "delivered"},
		{"1", "--source", "web"}, {"1", "--since", "1h"}, {"--since", "yesterday"}, {"--since", "-1h"}, {"x"}} {
		if res := resend(args...); res.Code != 2 || res.Stdout != "" {
			t.Errorf("resend %v: code %d, stdout %q, stderr %q; want 2", args, res.Code, res.Stdout, res.Stderr)
		}
	}
	if res := resend("--status", "delivered", "--source", "web"); res.Code != 0 || res.Stdout != "0 deliveries resent\n" {
		t.Errorf("resend --status delivered: code %d, stdout %q, stderr %q; want 0 resent (1 is pending again)", res.Code, res.Stdout, res.Stderr)
	}
	// The store stamps deliveries on its clock (now): --since 30m (from
	// later) selects none, a date before them all.
	markDelivered(t, path, now)
	if res := resend("--since", "30m"); res.Code != 0 || res.Stdout != "0 deliveries resent\n" {
		t.Errorf("resend --since 30m: code %d, stdout %q, stderr %q; want 0 resent", res.Code, res.Stdout, res.Stderr)
	}
	if res := resend("--since", "2024-05-01"); res.Code != 0 || res.Stdout != "1 delivery resent\n" {
		t.Errorf("resend --since 2024-05-01: code %d, stdout %q, stderr %q; want 1 resent", res.Code, res.Stdout, res.Stderr)
	}
}

// TestDeliveriesResendLimit: by --status, resend sends at most --limit
// and says how many more match; --limit goes with a filter only, within
// its bounds (exit 2).
func TestDeliveriesResendLimit(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "evfwd.db")
	st := openStoreAt(t, path, now)
	if err := st.Ingest(context.Background(), []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true),
		storetest.Msg("web", "m3", 0, true)}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for range 3 {
		markDelivered(t, path, now)
	}
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	resend := func(args ...string) result {
		t.Helper()
		f := testFactory(t, "", false, env)
		f.Now = func() time.Time { return now.Add(time.Hour) }
		return execute(t, f, append([]string{"deliveries", "resend"}, args...)...)
	}
	if res := resend("--status", "delivered", "--limit", "2"); res.Code != 0 ||
		res.Stdout != "2 deliveries resent; 1 more match: run again, or raise --limit (up to 100,000)\n" {
		t.Errorf("--limit 2: code %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	if res := resend("--status", "delivered", "-o", "json"); res.Code != 0 ||
		res.Stdout != `{"resent":1,"pending":[],"purged":[],"unknown":[],"skipped":0}`+"\n" {
		t.Errorf("the rest: code %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "delivered", "--limit", "0"}, "--limit 0: want 1 to 100000"},
		{[]string{"--status", "delivered", "--limit", "100001"}, "--limit 100001: want 1 to 100000"},
		{[]string{"1", "--limit", "5"}, "--limit goes with --status/--source/--destination/--since"},
	} {
		if res := resend(tt.args...); res.Code != 2 || !strings.Contains(res.Stderr, tt.want) {
			t.Errorf("resend %v: code %d, stderr %q; want 2 and %q", tt.args, res.Code, res.Stderr, tt.want)
		}
	}
}

// openStoreAt opens the SQLite store at path on a clock stopped at now.
func openStoreAt(t *testing.T, path string, now time.Time) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// markDelivered leases one due delivery of web in the store at path and
// completes it delivered, with its attempt on record.
func markDelivered(t *testing.T, path string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	st := openStoreAt(t, path, now)
	defer st.Close()
	ds, err := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 1, Now: now.Add(2 * time.Hour), TTL: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Lease: %v, %d", err, len(ds))
	}
	if err := st.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "o", Status: store.Delivered, Attempts: 1, FirstAttempt: now,
		Records: []store.Attempt{{Delivery: 1, URL: "http://x", Start: now, Status: 200, Class: "ok", Outcome: "delivered"}}}}); err != nil {
		t.Fatal(err)
	}
}

// TestDeliveriesRetryPointsToResend: retry of a delivered delivery leaves
// it alone and says which command sends it again.
func TestDeliveriesRetryPointsToResend(t *testing.T) {
	path, _ := fixedStore(t)
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	if res := execute(t, testFactory(t, "", false, env), "deliveries", "retry", "99"); res.Code != 1 ||
		!strings.Contains(res.Stderr, "1 left alone") || !strings.Contains(res.Stderr, "evfwd deliveries resend ID") {
		t.Errorf("retry 99: code %d, stderr %q; want 1 naming evfwd deliveries resend", res.Code, res.Stderr)
	}
}

// TestDeliveriesDestination: list shows each delivery's destination, and
// --destination selects one destination's deliveries for list, retry and
// resend. The selection needs the stores to honour store.Filter.Destination.
func TestDeliveriesDestination(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "evfwd.db")
	st := openStoreAt(t, path, now)
	m := storetest.Msg("web", "m1", 0, true)
	m.Destinations = []string{store.DestinationWebhooks, "crm"}
	if err := st.Ingest(context.Background(), []store.Message{m}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	res := execute(t, testFactory(t, "", false, env), "deliveries", "list")
	if res.Code != 0 || !strings.Contains(res.Stdout, "DESTINATION") || !strings.Contains(res.Stdout, " crm ") || !strings.Contains(res.Stdout, " webhooks ") {
		t.Fatalf("list: code %d, stdout:\n%s", res.Code, res.Stdout)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "list", "--destination", "crm", "-o", "json")
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if res.Code != 0 || len(lines) != 1 || !strings.Contains(lines[0], `"destination":"crm"`) {
		t.Errorf("list --destination crm: code %d, stdout:\n%s", res.Code, res.Stdout)
	}
	if res := execute(t, testFactory(t, "", false, env), "deliveries", "retry", "1", "--destination", "crm"); res.Code != 2 ||
		!strings.Contains(res.Stderr, "--source and --destination go with --status") {
		t.Errorf("retry ID --destination: code %d, stderr %q", res.Code, res.Stderr)
	}
}
