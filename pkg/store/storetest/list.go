package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// testListPages: newest first, paged back with Before, and narrowed to
// the deliveries with an attempt to one URL; Retry takes the same
// filters.
func testListPages(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "a", 0, true), Msg("web", "b", 0, true), Msg("app", "c", 0, true),
		Msg("web", "d", 0, true), Msg("web", "e", 0, true))
	all, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	id := map[string]int64{}
	for _, d := range all {
		id[d.MessageID] = d.ID
	}
	// a and d tried u1, then u2; b only u2; e only u1; c none.
	web := lease(t, s, "n1", "web", 4, t0)
	urls := map[string][]string{"a": {"http://h/u1", "http://h/u2"}, "b": {"http://h/u2"}, "d": {"http://h/u1", "http://h/u2"}, "e": {"http://h/u1"}}
	var cs []store.Completion
	for _, d := range web {
		c := store.Completion{ID: d.ID, Owner: "n1", Status: store.Failed, Attempts: 1, FirstAttempt: t0}
		for i, u := range urls[d.MessageID] {
			c.Records = append(c.Records, store.Attempt{Delivery: 1, Endpoint: i, URL: u, Start: t0, Latency: time.Millisecond,
				Status: 400, Class: "http_4xx", Outcome: "final"})
		}
		cs = append(cs, c)
	}
	if err := s.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		f    store.Filter
		want []string
	}{
		{store.Filter{Desc: true}, []string{"e", "d", "c", "b", "a"}},
		{store.Filter{Desc: true, Limit: 2}, []string{"e", "d"}},
		{store.Filter{Desc: true, Limit: 2, Before: id["d"]}, []string{"c", "b"}},
		{store.Filter{Desc: true, Limit: 2, Before: id["b"]}, []string{"a"}},
		{store.Filter{Before: id["d"]}, []string{"a", "b", "c"}},
		{store.Filter{Desc: true, Source: "web", Before: id["d"]}, []string{"b", "a"}},
		{store.Filter{Endpoint: "http://h/u1"}, []string{"a", "d", "e"}},
		{store.Filter{Endpoint: "http://h/u2", Desc: true}, []string{"d", "b", "a"}},
		{store.Filter{Endpoint: "http://h/u2", Desc: true, Limit: 1, Before: id["d"]}, []string{"b"}},
		{store.Filter{Endpoint: "http://h/u1", Status: store.Failed, Source: "web", After: id["a"]}, []string{"d", "e"}},
		{store.Filter{Endpoint: "http://h/none"}, []string{}},
	} {
		got, err := s.List(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
			t.Errorf("List(%+v) mismatch (-want +got):\n%s", tt.f, diff)
		}
	}
	later := t0.Add(time.Hour)
	n, err := s.Retry(ctx, nil, store.Filter{Status: store.Failed, Endpoint: "http://h/u1", Before: id["e"]}, later)
	if err != nil || n != 2 {
		t.Fatalf("Retry(failed, endpoint u1, before e) = %d, %v; want 2 (a and d)", n, err)
	}
	got, err := s.List(ctx, store.Filter{Status: store.Pending, Source: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "d"}, ids(got)); diff != "" {
		t.Errorf("pending after Retry mismatch (-want +got):\n%s", diff)
	}
}
