package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// testIngestLeased: IngestLeased leases the first Limit new deliveries, in
// order, and returns them as Lease would; the rest are pending for Lease.
func testIngestLeased(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "known", 0, true))
	msgs := []store.Message{
		Msg("web", "known", 0, true), // a client's retry: no new delivery
		Msg("web", "a", time.Millisecond, true),
		Msg("web", "quiet", 2*time.Millisecond, false), // stored, not forwarded
		Msg("web", "b", 3*time.Millisecond, true),
		Msg("web", "a", time.Millisecond, true), // a repeat within the request
		Msg("web", "c", 4*time.Millisecond, true),
	}
	until := t0.Add(time.Minute)
	got, err := s.IngestLeased(ctx, msgs, store.IngestLease{Owner: "n1", Until: until, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, ids(got)); diff != "" {
		t.Fatalf("leased mismatch (-want +got):\n%s", diff)
	}
	asStored(t, s, got)
	// Leased: another owner gets only the rest until the lease runs out.
	if diff := cmp.Diff([]string{"known", "c"}, ids(lease(t, s, "n2", "web", 10, t0.Add(time.Second)))); diff != "" {
		t.Errorf("lease beside the leased mismatch (-want +got):\n%s", diff)
	}
	if got := lease(t, s, "n3", "web", 10, until.Add(-tripSlack)); len(got) != 0 {
		t.Errorf("leased before the lease's end: %v", ids(got))
	}
	if diff := cmp.Diff([]string{"a", "b"}, ids(lease(t, s, "n3", "web", 10, until.Add(tripSlack)))); diff != "" {
		t.Errorf("lease after expiry mismatch (-want +got):\n%s", diff)
	}

	// Every message forwarded, as a request's are, with a known one and
	// a repeat among them.
	uniform := []store.Message{
		Msg("web", "d", 5*time.Millisecond, true),
		Msg("web", "a", time.Millisecond, true), // known
		Msg("web", "e", 6*time.Millisecond, true),
		Msg("web", "d", 5*time.Millisecond, true), // a repeat within the request
		Msg("web", "f", 7*time.Millisecond, true),
	}
	got, err = s.IngestLeased(ctx, uniform, store.IngestLease{Owner: "n1", Until: until, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"d", "e"}, ids(got)); diff != "" {
		t.Fatalf("leased mismatch (-want +got):\n%s", diff)
	}
	asStored(t, s, got)
}

// testIngestLeasedKeys: a message is its source and id together, and a
// lease never covers more deliveries than its limit, whatever the
// messages ask for.
func testIngestLeasedKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	until := t0.Add(time.Minute)
	ingest(t, s, Msg("app", "x", 0, true))
	got, err := s.IngestLeased(ctx, []store.Message{Msg("app", "x", 0, true), Msg("web", "x", 0, true)},
		store.IngestLease{Owner: "n1", Until: until, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Source != "web" || string(got[0].Body) != string(Msg("web", "x", 0, true).Body) {
		t.Fatalf("leased %+v, want web's x alone", got)
	}
	asStored(t, s, got)

	twice := Msg("web", "y", 0, true)
	twice.Destinations = append(twice.Destinations, store.DestinationWebhooks)
	got, err = s.IngestLeased(ctx, []store.Message{twice}, store.IngestLease{Owner: "n1", Until: until, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("leased %d deliveries with a limit of 1", len(got))
	}
}

// testIngestLeasedComplete: the owner completes what IngestLeased leased to
// it, with no Lease call between.
func testIngestLeasedComplete(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.IngestLeased(ctx, []store.Message{Msg("web", "a", 0, true), Msg("web", "b", 0, true)},
		store.IngestLease{Owner: "n1", Until: t0.Add(time.Minute), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, ids(got)); diff != "" {
		t.Fatalf("leased mismatch (-want +got):\n%s", diff)
	}
	var cs []store.Completion
	for _, d := range got {
		cs = append(cs, store.Completion{ID: d.ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t0,
			Records: []store.Attempt{{Delivery: 1, URL: "http://h/a", Start: t0, Status: 200, Class: "http_2xx", Outcome: "delivered"}}})
	}
	if err := s.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	for _, d := range got {
		detail, err := s.Get(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if detail.Status != store.Delivered || len(detail.Records) != 1 {
			t.Errorf("%s: status %s with %d attempts, want delivered with 1", d.MessageID, detail.Status, len(detail.Records))
		}
	}
	// Limit 0 leases none: IngestLeased is Ingest.
	none, err := s.IngestLeased(ctx, []store.Message{Msg("web", "c", 0, true)}, store.IngestLease{Owner: "n1", Until: t0.Add(time.Minute)})
	if err != nil || len(none) != 0 {
		t.Fatalf("IngestLeased with no limit = %v, %v; want none", ids(none), err)
	}
	if diff := cmp.Diff([]string{"c"}, ids(lease(t, s, "n2", "web", 10, t0))); diff != "" {
		t.Errorf("lease mismatch (-want +got):\n%s", diff)
	}
	// Reclaim takes back a lease whose owner is gone, as after a crash
	// between the commit and the send; a shared store only once expired.
	if _, err := s.IngestLeased(ctx, []store.Message{Msg("web", "d", 0, true)}, store.IngestLease{Owner: "gone", Until: t0.Add(time.Minute), Limit: 1}); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(2 * time.Minute)
	if _, err := s.Reclaim(ctx, later); err != nil {
		t.Fatal(err)
	}
	// c's lease (n2's, above) has run out by then too.
	if diff := cmp.Diff([]string{"c", "d"}, ids(lease(t, s, "n2", "web", 10, later))); diff != "" {
		t.Errorf("lease after Reclaim mismatch (-want +got):\n%s", diff)
	}
}

// asStored checks that each delivery IngestLeased returned is the one
// stored, as Get reads it.
func asStored(t *testing.T, s store.Store, got []store.Delivery) {
	t.Helper()
	for _, d := range got {
		detail, err := s.Get(context.Background(), d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.LeaseEnd.IsZero() {
			t.Errorf("delivery %d: no LeaseEnd", d.ID)
		}
		// LeaseEnd is the lease's holder's, not the stored row's.
		d.LeaseEnd = time.Time{}
		if diff := cmp.Diff(detail.Delivery, d); diff != "" {
			t.Errorf("returned delivery differs from the stored one (-stored +returned):\n%s", diff)
		}
	}
}
