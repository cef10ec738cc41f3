package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// testPrune: finished messages older than the window go with their
// deliveries and attempts; pending ones, delete notifications and younger
// ones stay; a pruned messageId may be collected again.
func testPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	// More old finished messages than one step examines, so the pass
	// takes several steps.
	var bulk []store.Message
	for i := range store.PruneStep + 150 {
		bulk = append(bulk, Msg("web", fmt.Sprintf("bulk%04d", i), 0, true))
	}
	ingest(t, s, bulk...)
	ingest(t, s,
		Msg("web", "failed", time.Minute, true),
		Msg("web", "pending", time.Minute, true),
		Msg("web", "stored", time.Minute, false), // no destination: nothing to wait for
		DeleteMsg("web", "del_1", "u_x"),
		Msg("web", "young", 2*time.Hour, true),
	)
	ds := lease(t, s, "n1", "web", len(bulk)+10, t0.Add(3*time.Hour))
	var cs []store.Completion
	for _, d := range ds {
		c := store.Completion{ID: d.ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t0,
			Records: []store.Attempt{{Delivery: 1, URL: "http://h/a", Start: t0, Status: 200, Class: "http_2xx", Outcome: "delivered"}}}
		switch d.MessageID {
		case "failed":
			c.Status = store.Failed
		case "pending":
			c.Status, c.NextAttempt = store.Pending, t0.Add(time.Hour)
		}
		cs = append(cs, c)
	}
	if err := s.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}

	got, err := s.Prune(ctx, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(bulk)) + 1 // the bulk and "failed", each with one delivery and one attempt
	want := store.Pruned{Messages: n + 1, Deliveries: n, Attempts: n}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prune removed (-want +got):\n%s", diff)
	}
	left, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(left), []string{"pending", "del_1", "young"}; !slices.Equal(got, want) {
		t.Errorf("deliveries left = %v, want %v", got, want)
	}
	d, err := s.Get(ctx, left[0].ID)
	if err != nil || len(d.Records) != 1 || len(d.Body) == 0 {
		t.Errorf("the pending delivery lost its history: %+v, %v", d, err)
	}

	// Again: nothing more to remove.
	if got, err := s.Prune(ctx, t0.Add(time.Hour)); err != nil || got != (store.Pruned{}) {
		t.Errorf("second Prune = %+v, %v; want nothing", got, err)
	}
	// De-duplication holds within the window only: a pruned id is new again.
	ingest(t, s, Msg("web", "bulk0000", 3*time.Hour, true))
	if ds, _ := s.List(ctx, store.Filter{}); len(ds) != 4 {
		t.Errorf("re-collected a pruned messageId: %d deliveries, want 4", len(ds))
	}
	// A cancelled context stops the pass.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Prune(cctx, t0.Add(10*time.Hour)); err == nil {
		t.Error("Prune with a cancelled context: no error")
	}
}
