// Package storetest is the conformance suite of store.Store: every
// implementation runs Run from its own tests, so they all behave alike.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// Open returns a new, empty store for one subtest; the suite closes it.
type Open func(t *testing.T) store.Store

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// tripSlack is how precisely the suite places a lease's end, on either
// side. PostgreSQL's lease lasts from its own clock when the statement
// runs (store.LeaseRequest), later than the caller read its own by the
// trip to the server; and the suite's fixed times reach the server's
// clock through the trip of the statement that judges the lease, which
// sees it end that much sooner. SQLite's leases end exactly.
const tripSlack = 500 * time.Millisecond

// Run runs the conformance suite against stores made by open.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"IngestCreatesDeliveries", testIngest},
		{"IngestSkipsKnownMessageIDs", testIngestDuplicate},
		{"IngestLeased", testIngestLeased},
		{"IngestLeasedThenComplete", testIngestLeasedComplete},
		{"IngestLeasedKeys", testIngestLeasedKeys},
		{"LeaseIsExclusiveUntilExpiry", testLeaseExclusive},
		{"LeaseOnlyDueOfSource", testLeaseDueSource},
		{"LeaseWithinOneMillisecond", testLeaseOneMillisecond},
		{"CompleteRecordsAttempts", testComplete},
		{"CompleteWithLostLease", testCompleteLostLease},
		{"CompleteBatch", testCompleteBatch},
		{"Reclaim", testReclaim},
		{"ListFilters", testList},
		{"ListNewestFirstByEndpoint", testListPages},
		{"Retry", testRetry},
		{"Resend", testResend},
		{"ResendLimit", testResendLimit},
		{"ConcurrentIngest", testConcurrentIngest},
		{"Stats", testStats},
		{"PruneFinishedBeforeWindow", testPrune},
		{"EndpointStates", testEndpoints},
		{"ReleaseWaitingDeliveries", testRelease},
		{"BodyForms", testBodyForms},
		{"LeaseByDestination", testLeaseByDestination},
		{"LeaseDestinationBehindBacklog", testLeaseDestinationBacklog},
		{"LeaseEveryDestination", testLeaseEveryDestination},
		{"FilterByDestination", testFilterByDestination},
		{"CancelPending", testCancelPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case has a store of its own
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tt.fn(t, s)
		})
	}
}

// Msg returns a test message of source with id, due at t0+offset.
func Msg(source, id string, offset time.Duration, forward bool) store.Message {
	m := store.Message{
		Source: source, MessageID: id, Type: "track", UserID: "u_" + id,
		ReceivedAt: t0.Add(offset),
		Body:       []byte(fmt.Sprintf(`{"type":"track","event":"E","userId":"u_%s","messageId":%q}`, id, id)),
	}
	if forward {
		m.Destinations = []string{store.DestinationWebhooks}
	}
	return m
}

func ingest(t *testing.T, s store.Store, msgs ...store.Message) {
	t.Helper()
	if err := s.Ingest(context.Background(), msgs); err != nil {
		t.Fatalf("Ingest: %v", err)
	}
}

func lease(t *testing.T, s store.Store, owner, source string, limit int, now time.Time) []store.Delivery {
	t.Helper()
	ds, err := s.Lease(context.Background(), store.LeaseRequest{Owner: owner, Source: source, Limit: limit, Now: now, TTL: time.Minute})
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	return ds
}

func ids(ds []store.Delivery) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.MessageID)
	}
	return out
}

func testIngest(t *testing.T, s store.Store) {
	ingest(t, s, Msg("web", "a", 0, true), Msg("web", "b", time.Millisecond, false), Msg("web", "c", 2*time.Millisecond, true))
	ds, err := s.List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "c"}, ids(ds)); diff != "" {
		t.Fatalf("deliveries mismatch (-want +got):\n%s", diff)
	}
	d := ds[0]
	if d.Status != store.Pending || d.Source != "web" || d.Destination != store.DestinationWebhooks ||
		d.Type != "track" || d.UserID != "u_a" || !d.NextAttempt.Equal(t0) || d.Attempts != 0 {
		t.Errorf("delivery = %+v", d)
	}
	got, err := s.Get(context.Background(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != string(Msg("web", "a", 0, true).Body) {
		t.Errorf("body = %s", got.Body)
	}
	if _, err := s.Get(context.Background(), 999999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}
}

func testIngestDuplicate(t *testing.T, s store.Store) {
	ingest(t, s, Msg("web", "a", 0, true))
	ingest(t, s, Msg("web", "a", 0, true), Msg("app", "a", 0, true))
	ds, _ := s.List(context.Background(), store.Filter{})
	if len(ds) != 2 {
		t.Fatalf("got %d deliveries, want 2 (one per source): %+v", len(ds), ds)
	}
}

func testLeaseExclusive(t *testing.T, s store.Store) {
	ingest(t, s, Msg("web", "a", 0, true), Msg("web", "b", time.Millisecond, true), Msg("web", "c", 2*time.Millisecond, true))
	now := t0.Add(time.Second)
	first := lease(t, s, "n1", "web", 2, now)
	if diff := cmp.Diff([]string{"a", "b"}, ids(first)); diff != "" {
		t.Fatalf("first lease mismatch (-want +got):\n%s", diff)
	}
	if len(first[0].Body) == 0 {
		t.Error("leased delivery has no body")
	}
	if end := now.Add(time.Minute); !first[0].LeaseEnd.Equal(end) {
		t.Errorf("LeaseEnd = %v, want %v (Now+TTL)", first[0].LeaseEnd, end)
	}
	second := lease(t, s, "n2", "web", 5, now)
	if diff := cmp.Diff([]string{"c"}, ids(second)); diff != "" {
		t.Fatalf("second lease mismatch (-want +got):\n%s", diff)
	}
	if got := lease(t, s, "n2", "web", 5, now.Add(30*time.Second)); len(got) != 0 {
		t.Fatalf("leased again before expiry: %v", ids(got))
	}
	again := lease(t, s, "n3", "web", 5, now.Add(2*time.Minute))
	if diff := cmp.Diff([]string{"a", "b", "c"}, ids(again)); diff != "" {
		t.Fatalf("after expiry mismatch (-want +got):\n%s", diff)
	}
}

func testLeaseDueSource(t *testing.T, s store.Store) {
	ingest(t, s, Msg("web", "a", 0, true), Msg("app", "b", 0, true), Msg("web", "later", time.Hour, true))
	got := lease(t, s, "n1", "web", 10, t0.Add(time.Minute))
	if diff := cmp.Diff([]string{"a"}, ids(got)); diff != "" {
		t.Fatalf("lease mismatch (-want +got):\n%s", diff)
	}
}

// testLeaseOneMillisecond: deliveries due in one millisecond (a request's
// messages share their receivedAt) are leased in turns, each delivery
// once, however a store remembers where its last lease stopped; one given
// back due in that millisecond is leased again, at the latest by the lease
// that finds too few after where the last one stopped (SQLite's cursor
// passes it over until then, or for up to a second).
func testLeaseOneMillisecond(t *testing.T, s store.Store) {
	const n, group = 400, 100
	msgs := make([]store.Message, n)
	for i := range msgs {
		msgs[i] = Msg("web", fmt.Sprintf("m%03d", i), 0, true)
	}
	ingest(t, s, msgs...)
	seen := map[string]bool{}
	var first store.Delivery
	take := func(turn string, want int) []store.Delivery {
		t.Helper()
		ds := lease(t, s, "n1", "web", group, t0)
		if len(ds) != want {
			t.Fatalf("%s: leased %d, want %d", turn, len(ds), want)
		}
		for _, d := range ds {
			if seen[d.MessageID] {
				t.Fatalf("%s: %s leased twice", turn, d.MessageID)
			}
			seen[d.MessageID] = true
		}
		return ds
	}
	for turn := range n/group - 1 {
		ds := take(fmt.Sprint("turn ", turn), group)
		if turn == 0 {
			first = ds[0]
		}
	}
	if err := s.Complete(context.Background(), []store.Completion{{ID: first.ID, Owner: "n1", Status: store.Pending,
		Attempts: 1, FirstAttempt: t0, NextAttempt: t0, LastError: "HTTP 503"}}); err != nil {
		t.Fatal(err)
	}
	delete(seen, first.MessageID)
	take("after the give-back", group)
	take("the rest", 1)
	take("none left", 0)
	if !seen[first.MessageID] {
		t.Errorf("%s, given back, was not leased again", first.MessageID)
	}
}

func testComplete(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "a", 0, true), Msg("web", "b", 0, true))
	ds := lease(t, s, "n1", "web", 2, t0)
	rec := store.Attempt{Delivery: 1, Endpoint: 0, URL: "http://h/a", Start: t0, Latency: 1500 * time.Microsecond,
		Status: 500, Class: "http_5xx", Excerpt: []byte("oops"), Outcome: "retryable"}
	next := t0.Add(time.Second)
	err := s.Complete(ctx, []store.Completion{
		{ID: ds[0].ID, Owner: "n1", Status: store.Pending, Attempts: 1, FirstAttempt: t0, NextAttempt: next, LastError: "500", Records: []store.Attempt{rec}},
		{ID: ds[1].ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t0, Records: []store.Attempt{{Delivery: 1, URL: "http://h/a", Start: t0, Status: 200, Class: "http_2xx", Outcome: "delivered"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, ds[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != store.Pending || d.Attempts != 1 || !d.FirstAttempt.Equal(t0) || !d.NextAttempt.Equal(next) || d.LastError != "500" {
		t.Errorf("after retryable completion: %+v", d.Delivery)
	}
	if diff := cmp.Diff([]store.Attempt{rec}, d.Records); diff != "" {
		t.Errorf("records mismatch (-want +got):\n%s", diff)
	}
	if got := lease(t, s, "n2", "web", 5, t0.Add(500*time.Millisecond)); len(got) != 0 {
		t.Errorf("leased before its next attempt: %v", ids(got))
	}
	if got := lease(t, s, "n2", "web", 5, next); len(got) != 1 || got[0].Attempts != 1 {
		t.Errorf("not leased when due: %+v", got)
	}
	d2, _ := s.Get(ctx, ds[1].ID)
	if d2.Status != store.Delivered {
		t.Errorf("status = %s, want delivered", d2.Status)
	}
}

func testCompleteLostLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "a", 0, true))
	ds := lease(t, s, "n1", "web", 1, t0)
	lease(t, s, "n2", "web", 1, t0.Add(2*time.Minute)) // n1's lease expired; n2 took over
	err := s.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "n1", Status: store.Failed, Attempts: 1,
		Records: []store.Attempt{{Delivery: 1, URL: "u", Start: t0, Status: 400, Class: "http_4xx", Outcome: "final"}}}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := s.Get(ctx, ds[0].ID)
	if d.Status != store.Pending || len(d.Records) != 1 {
		t.Errorf("lost lease changed the delivery or lost the attempt: %+v, %d records", d.Delivery, len(d.Records))
	}
}

func testReclaim(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "a", 0, true))
	lease(t, s, "gone", "web", 1, t0)
	// A shared store releases only expired leases; one used by a single
	// process may release all. Either way, after expiry it is released.
	if _, err := s.Reclaim(ctx, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := lease(t, s, "new", "web", 1, t0.Add(2*time.Minute)); len(got) != 1 {
		t.Errorf("reclaimed delivery not leased: %v", ids(got))
	}
}

func testList(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "a", 0, true), Msg("app", "b", 0, true), Msg("web", "c", 0, true))
	ds := lease(t, s, "n1", "web", 1, t0)
	if err := s.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "n1", Status: store.Dead, Attempts: 3}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		f    store.Filter
		want []string
	}{
		{store.Filter{}, []string{"a", "b", "c"}},
		{store.Filter{Source: "web"}, []string{"a", "c"}},
		{store.Filter{Status: store.Dead}, []string{"a"}},
		{store.Filter{Status: store.Pending, Source: "web"}, []string{"c"}},
		{store.Filter{Limit: 2}, []string{"a", "b"}},
		{store.Filter{After: ds[0].ID}, []string{"b", "c"}},
	} {
		got, err := s.List(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
			t.Errorf("List(%+v) mismatch (-want +got):\n%s", tt.f, diff)
		}
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Count{{Source: "app", Status: store.Pending, N: 1}, {Source: "web", Status: store.Dead, N: 1}, {Source: "web", Status: store.Pending, N: 1}}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("Counts mismatch (-want +got):\n%s", diff)
	}
}

func testRetry(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "a", 0, true), Msg("web", "b", 0, true), Msg("web", "c", 0, true))
	ds := lease(t, s, "n1", "web", 3, t0)
	err := s.Complete(ctx, []store.Completion{
		{ID: ds[0].ID, Owner: "n1", Status: store.Dead, Attempts: 9, FirstAttempt: t0},
		{ID: ds[1].ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t0},
		{ID: ds[2].ID, Owner: "n1", Status: store.Failed, Attempts: 1, FirstAttempt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	n, err := s.Retry(ctx, []int64{ds[0].ID, ds[1].ID}, store.Filter{}, later)
	if err != nil || n != 1 {
		t.Fatalf("Retry(ids) = %d, %v; want 1 (delivered ones stay)", n, err)
	}
	d, _ := s.Get(ctx, ds[0].ID)
	if d.Status != store.Pending || d.Attempts != 0 || !d.FirstAttempt.IsZero() || !d.NextAttempt.Equal(later) {
		t.Errorf("retried delivery: %+v", d.Delivery)
	}
	if n, err := s.Retry(ctx, nil, store.Filter{Status: store.Failed}, later); err != nil || n != 1 {
		t.Fatalf("Retry(status failed) = %d, %v; want 1", n, err)
	}
	if got := lease(t, s, "n2", "web", 5, later); len(got) != 2 {
		t.Errorf("retried deliveries leased: %v, want 2", ids(got))
	}
}

func testConcurrentIngest(t *testing.T, s store.Store) {
	const clients, per = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if err := s.Ingest(context.Background(), []store.Message{Msg("web", fmt.Sprintf("%d-%d", c, i), 0, true)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ds, err := s.List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != clients*per {
		t.Errorf("got %d deliveries, want %d", len(ds), clients*per)
	}
}

// testCompleteBatch: one Complete holding a batch's outcomes (the same
// outcome and attempt for many deliveries, one of them leased by another
// node) beside outcomes of their own: each delivery gets its own, and
// every attempt is recorded, once, with its delivery.
func testCompleteBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	var msgs []store.Message
	for i := range 12 {
		msgs = append(msgs, Msg("web", fmt.Sprintf("m%02d", i), 0, true))
	}
	ingest(t, s, msgs...)
	mine := lease(t, s, "n1", "web", 10, t0)
	theirs := lease(t, s, "n2", "web", 2, t0)
	if len(mine) != 10 || len(theirs) != 2 {
		t.Fatalf("leased %d and %d, want 10 and 2", len(mine), len(theirs))
	}
	sent := t0.Add(time.Second)
	// The batch's request: its first endpoint failed, the second took it.
	first := store.Attempt{Delivery: 1, URL: "https://a.example/hook", Start: sent, Latency: time.Millisecond,
		Status: 503, Class: "http_5xx", Outcome: "retryable"}
	batch := store.Attempt{Delivery: 1, Endpoint: 1, URL: "https://b.example/hook", Start: sent, Latency: 3 * time.Millisecond,
		Status: 200, Class: "http_2xx", Excerpt: []byte("ok"), Outcome: "delivered"}
	retry := t0.Add(time.Minute)
	var cs []store.Completion
	want := map[int64]store.Status{}
	for i, d := range append(mine, theirs...) {
		c := store.Completion{ID: d.ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: sent,
			Records: []store.Attempt{first, batch}}
		switch i {
		case 9: // a first attempt of its own, then the batch's second: its two in their order
			own := first
			own.Start = sent.Add(-time.Second)
			c.Records = []store.Attempt{own, batch}
		case 6, 7: // refused, each in its own words
			c.Status, c.LastError = store.Failed, fmt.Sprintf("HTTP 40%d", i)
			c.Records = []store.Attempt{{Delivery: 1, URL: "https://b.example/hook", Start: sent.Add(time.Duration(i) * time.Millisecond),
				Status: 400 + i, Class: "http_4xx", Outcome: "final"}}
		case 8: // both endpoints failed: retried later
			c.Status, c.NextAttempt, c.LastError = store.Pending, retry, "HTTP 503"
			c.Records = []store.Attempt{
				{Delivery: 1, Endpoint: 0, URL: "https://a.example/hook", Start: sent, Status: 503, Class: "http_5xx", Outcome: "retryable"},
				{Delivery: 1, Endpoint: 1, URL: "https://b.example/hook", Start: sent, Status: 503, Class: "http_5xx", Outcome: "retryable"}}
		}
		cs = append(cs, c)
		want[d.ID] = c.Status
		if i >= 10 {
			want[d.ID] = store.Pending // n2's: its outcome is n2's to record
		}
	}
	if err := s.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		d, err := s.Get(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != want[c.ID] {
			t.Errorf("delivery %d: %s, want %s", c.ID, d.Status, want[c.ID])
		}
		if want[c.ID] == c.Status && d.Status != store.Pending {
			if d.Attempts != 1 || !d.FirstAttempt.Equal(sent) || d.LastError != c.LastError {
				t.Errorf("delivery %d: attempts %d, first %v, last error %q; want 1, %v, %q", c.ID, d.Attempts, d.FirstAttempt, d.LastError, sent, c.LastError)
			}
		}
		if c.Status == store.Pending && !d.NextAttempt.Equal(retry) {
			t.Errorf("delivery %d: next attempt %v, want %v", c.ID, d.NextAttempt, retry)
		}
		type rec struct {
			No, Endpoint, Status int
			URL, Class, Outcome  string
			Start                time.Time
			Latency              time.Duration
			Excerpt              string
		}
		var got, wantRecs []rec
		for _, a := range d.Records {
			got = append(got, rec{a.Delivery, a.Endpoint, a.Status, a.URL, a.Class, a.Outcome, a.Start.UTC(), a.Latency, string(a.Excerpt)})
		}
		for _, a := range c.Records {
			wantRecs = append(wantRecs, rec{a.Delivery, a.Endpoint, a.Status, a.URL, a.Class, a.Outcome, a.Start.UTC(), a.Latency, string(a.Excerpt)})
		}
		if diff := cmp.Diff(wantRecs, got); diff != "" {
			t.Errorf("delivery %d's attempts mismatch (-want +got):\n%s", c.ID, diff)
		}
	}
}
