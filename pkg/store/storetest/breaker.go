package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// testEndpoints: SaveEndpoint replaces the state of its (source, URL) and
// Endpoints reads them back by source and URL.
func testEndpoints(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got, err := s.Endpoints(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Endpoints of an empty store = %v, %v", got, err)
	}
	a := store.EndpointState{Source: "web", URL: "https://b.example/h", State: store.EndpointOpen, Failures: 5,
		Since: t0, NextProbe: t0.Add(time.Second), Node: "n1", LastError: "HTTP 503", UpdatedAt: t0}
	b := store.EndpointState{Source: "app", URL: "https://a.example/h", State: store.EndpointClosed, Since: t0, Node: "n2", UpdatedAt: t0}
	c := a
	c.URL = "https://a.example/h"
	for _, st := range []store.EndpointState{a, b, c} {
		if err := s.SaveEndpoint(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	a2 := a
	a2.State, a2.Failures, a2.Since, a2.NextProbe, a2.LastError, a2.UpdatedAt = store.EndpointClosed, 0, t0.Add(time.Minute), time.Time{}, "", t0.Add(time.Minute)
	if err := s.SaveEndpoint(ctx, a2); err != nil {
		t.Fatal(err)
	}
	got, err := s.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.EndpointState{b, c, a2}, got); diff != "" {
		t.Errorf("Endpoints (-want +got):\n%s", diff)
	}
}

// testRelease: Release makes due the pending deliveries of its source that
// are scheduled later and whose last error starts with a prefix (matched
// as text: % and _ are not wildcards), and nothing else; it works through
// more than one step.
func testRelease(t *testing.T, s store.Store) {
	ctx := context.Background()
	const url = "http://h_1.example/a%b"
	n := store.ReleaseStep + 7
	var msgs []store.Message
	for i := range n {
		msgs = append(msgs, Msg("web", fmt.Sprint("held", i), 0, true))
	}
	for _, id := range []string{"other-url", "like", "due", "failed", "noerr"} {
		msgs = append(msgs, Msg("web", id, 0, true))
	}
	msgs = append(msgs, Msg("app", "app", 0, true))
	ingest(t, s, msgs...)
	later := t0.Add(time.Hour)
	complete := func(source string, errFor func(d store.Delivery) (store.Status, string, time.Time)) {
		t.Helper()
		ds := lease(t, s, "n1", source, n+10, t0)
		var cs []store.Completion
		for _, d := range ds {
			st, e, next := errFor(d)
			cs = append(cs, store.Completion{ID: d.ID, Owner: "n1", Status: st, Attempts: 1, FirstAttempt: t0, NextAttempt: next, LastError: e})
		}
		if err := s.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	complete("web", func(d store.Delivery) (store.Status, string, time.Time) {
		switch d.MessageID {
		case "other-url":
			return store.Pending, "http://other.example/: HTTP 503", later
		case "like":
			return store.Pending, "http://hx1.example/axb: HTTP 503", later
		case "due":
			return store.Pending, url + ": HTTP 503", t0
		case "failed":
			return store.Failed, url + ": HTTP 503", time.Time{}
		case "noerr":
			return store.Pending, "", later
		}
		if len(d.MessageID) > 5 && d.MessageID[4] == '1' {
			return store.Pending, "held: " + url, later
		}
		return store.Pending, url + ": HTTP 503", later
	})
	complete("app", func(store.Delivery) (store.Status, string, time.Time) {
		return store.Pending, url + ": HTTP 503", later
	})
	now := t0.Add(time.Minute)
	got, err := s.Release(ctx, "web", []string{url + ": ", "held: "}, now)
	if err != nil || got != n {
		t.Fatalf("Release = %d, %v; want %d", got, err, n)
	}
	ds, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		wantNow := d.Source == "web" && len(d.MessageID) > 4 && d.MessageID[:4] == "held"
		switch {
		case d.MessageID == "due":
			if !d.NextAttempt.Equal(t0) {
				t.Errorf("due delivery moved to %v", d.NextAttempt)
			}
		case d.Status != store.Pending:
			if d.MessageID != "failed" {
				t.Errorf("%s: %s", d.MessageID, d.Status)
			}
		case wantNow != d.NextAttempt.Equal(now):
			t.Errorf("%s/%s (%q): next %v; released %v", d.Source, d.MessageID, d.LastError, d.NextAttempt, wantNow)
		}
	}
	if got, err := s.Release(ctx, "web", []string{url + ": "}, now); err != nil || got != 0 {
		t.Errorf("second Release = %d, %v; want 0", got, err)
	}
	if got := lease(t, s, "n2", "web", 2*n, now); len(got) != n+1 {
		t.Errorf("leased %d after the release, want %d", len(got), n+1)
	}
}
