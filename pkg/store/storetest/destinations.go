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

// MsgTo returns Msg(source, id, offset) forwarded to dests.
func MsgTo(source, id string, offset time.Duration, dests ...string) store.Message {
	m := Msg(source, id, offset, false)
	m.Destinations = dests
	return m
}

func leaseDest(t *testing.T, s store.Store, owner, source, dest string, limit int, now time.Time) []store.Delivery {
	t.Helper()
	ds, err := s.Lease(context.Background(), store.LeaseRequest{Owner: owner, Source: source, Destination: dest, Limit: limit,
		Now: now, TTL: time.Minute})
	if err != nil {
		t.Fatalf("Lease(%s/%s): %v", source, dest, err)
	}
	for _, d := range ds {
		if d.Source != source || dest != "" && d.Destination != dest {
			t.Errorf("Lease(%s/%s) returned a delivery of %s/%s", source, dest, d.Source, d.Destination)
		}
	}
	return ds
}

// keyed names deliveries by message and destination.
func keyed(ds []store.Delivery) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.MessageID+">"+d.Destination)
	}
	return out
}

// testLeaseByDestination: a Lease of one destination takes only that
// destination's due deliveries of the source, in due order, each lease
// going on where the last of that destination stopped whatever the
// other's did; one without a destination takes every destination's.
func testLeaseByDestination(t *testing.T, s store.Store) {
	ingest(t, s,
		MsgTo("web", "a", 3*time.Millisecond, "hooks", "crm"),
		MsgTo("web", "b", 1*time.Millisecond, "hooks"),
		MsgTo("web", "c", 2*time.Millisecond, "crm"),
		MsgTo("web", "d", 0, "crm"),
		MsgTo("web", "e", 4*time.Millisecond, "hooks"),
		MsgTo("web", "later", time.Hour, "hooks", "crm"),
		MsgTo("app", "f", 0, "hooks"))
	now := t0.Add(time.Second)
	for _, step := range []struct {
		dest  string
		limit int
		want  []string
	}{
		// Oldest due first, in turns: each destination from where its own
		// last lease stopped.
		{"hooks", 1, []string{"b>hooks"}},
		{"crm", 2, []string{"d>crm", "c>crm"}},
		{"hooks", 1, []string{"a>hooks"}},
		{"crm", 5, []string{"a>crm"}},
		{"hooks", 5, []string{"e>hooks"}},
		{"crm", 5, nil},
		{"nowhere", 5, nil},
	} {
		got := leaseDest(t, s, "n1", "web", step.dest, step.limit, now)
		want := step.want
		if want == nil {
			want = []string{}
		}
		// Lease returns them by id; the due order is what the steps check.
		gotSet := map[string]bool{}
		for _, k := range keyed(got) {
			gotSet[k] = true
		}
		wantSet := map[string]bool{}
		for _, k := range want {
			wantSet[k] = true
		}
		if diff := cmp.Diff(wantSet, gotSet); diff != "" {
			t.Fatalf("Lease(web/%s, %d) mismatch (-want +got):\n%s", step.dest, step.limit, diff)
		}
	}
	// Every destination's, once their leases ran out, oldest due first
	// (each lease's by due time: Lease returns them by id).
	after := now.Add(2 * time.Minute)
	var all []string
	for range 4 {
		ds := leaseDest(t, s, "n2", "web", "", 2, after)
		all = append(all, dueOrder(ds)...)
	}
	// a's two deliveries are due together: either may come first.
	for i, k := range all {
		if k == "a>crm" || k == "a>hooks" {
			all[i] = "a"
		}
	}
	if diff := cmp.Diff([]string{"d>crm", "b>hooks", "c>crm", "a", "a", "e>hooks"}, all); diff != "" {
		t.Errorf("leases of every destination mismatch (-want +got):\n%s", diff)
	}
	if got := leaseDest(t, s, "n3", "app", "hooks", 5, after); len(got) != 1 {
		t.Errorf("app's hooks leased %v, want f", keyed(got))
	}
}

// dueOrder is keyed(ds) sorted by due time, then id.
func dueOrder(ds []store.Delivery) []string {
	sorted := append([]store.Delivery(nil), ds...)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			a, b := sorted[i], sorted[j]
			if b.NextAttempt.Before(a.NextAttempt) || b.NextAttempt.Equal(a.NextAttempt) && b.ID < a.ID {
				sorted[i], sorted[j] = b, a
			}
		}
	}
	return keyed(sorted)
}

// testLeaseEveryDestination: Leases of every destination of a source
// (none named) take its due deliveries in due order across its
// destinations, each lease the first free ones after the last, however
// unevenly the destinations hold them, ties in a millisecond by id, and
// around what a lease of one destination took meanwhile; none twice and
// none not due.
func testLeaseEveryDestination(t *testing.T, s store.Store) {
	var msgs []store.Message
	want := 0
	for i := range 40 {
		var dests []string
		switch i % 4 {
		case 0:
			dests = []string{"a", "b"}
		case 1, 2:
			dests = []string{"c"}
		case 3:
			dests = []string{"a"}
		}
		want += len(dests)
		msgs = append(msgs, MsgTo("web", fmt.Sprintf("m%02d", i), time.Duration(i/3)*time.Millisecond, dests...))
	}
	msgs = append(msgs, MsgTo("web", "later", time.Hour, "a", "b", "c"))
	ingest(t, s, msgs...)
	now := t0.Add(time.Second)
	seen := map[int64]bool{}
	var every []store.Delivery // in lease order, each lease's in due order
	for n := 0; ; n++ {
		if n == 2 {
			// One destination's lane takes some of its own meanwhile.
			for _, d := range leaseDest(t, s, "n1", "web", "a", 3, now) {
				seen[d.ID] = true
			}
		}
		ds := leaseDest(t, s, "n2", "web", "", 7, now)
		if len(ds) == 0 {
			break
		}
		if len(ds) < 7 && len(seen)+len(ds) != want {
			t.Fatalf("lease %d: %d, fewer than 7 before the last", n, len(ds))
		}
		sortDue(ds)
		for _, d := range ds {
			if seen[d.ID] {
				t.Fatalf("lease %d: %s leased twice", n, keyed([]store.Delivery{d}))
			}
			seen[d.ID] = true
			if d.NextAttempt.After(now) {
				t.Fatalf("lease %d: %s not due", n, keyed([]store.Delivery{d}))
			}
		}
		every = append(every, ds...)
	}
	if len(seen) != want {
		t.Errorf("leased %d, want %d", len(seen), want)
	}
	for i := 1; i < len(every); i++ {
		a, b := every[i-1], every[i]
		if b.NextAttempt.Before(a.NextAttempt) || b.NextAttempt.Equal(a.NextAttempt) && b.ID < a.ID {
			t.Fatalf("not in due order: %s (%d) before %s (%d)", keyed(every[i-1:i]), a.ID, keyed(every[i:i+1]), b.ID)
		}
	}
}

// sortDue sorts ds by due time, then id.
func sortDue(ds []store.Delivery) {
	slices.SortFunc(ds, func(a, b store.Delivery) int {
		if c := a.NextAttempt.Compare(b.NextAttempt); c != 0 {
			return c
		}
		return int(min(max(a.ID-b.ID, -1), 1))
	})
}

// testLeaseDestinationBacklog: a destination's backlog, however long
// (more than a lease reads, all due before), never holds up another
// destination of the source, nor a lease from the head of that other.
func testLeaseDestinationBacklog(t *testing.T, s store.Store) {
	var msgs []store.Message
	for i := range 600 {
		msgs = append(msgs, MsgTo("web", fmt.Sprintf("p%03d", i), 0, "paused"))
	}
	msgs = append(msgs, MsgTo("web", "x", time.Millisecond, "live"), MsgTo("web", "y", 2*time.Millisecond, "live"))
	ingest(t, s, msgs...)
	now := t0.Add(time.Second)
	if got := leaseDest(t, s, "n1", "web", "live", 1, now); fmt.Sprint(keyed(got)) != "[x>live]" {
		t.Fatalf("live leased %v, want x", keyed(got))
	}
	if got := leaseDest(t, s, "n1", "web", "live", 10, now); fmt.Sprint(keyed(got)) != "[y>live]" {
		t.Fatalf("live leased %v, want y", keyed(got))
	}
	if got := leaseDest(t, s, "n1", "web", "paused", 1000, now); len(got) != 600 {
		t.Fatalf("paused leased %d, want 600", len(got))
	}
}

// testFilterByDestination: List, Retry and Resend select by destination.
func testFilterByDestination(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, MsgTo("web", "a", 0, "hooks", "crm"), MsgTo("web", "b", 0, "crm"), MsgTo("app", "c", 0, "crm"))
	list := func(f store.Filter) []string {
		t.Helper()
		ds, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return keyed(ds)
	}
	for _, tt := range []struct {
		f    store.Filter
		want []string
	}{
		{store.Filter{Destination: "crm"}, []string{"a>crm", "b>crm", "c>crm"}},
		{store.Filter{Source: "web", Destination: "crm"}, []string{"a>crm", "b>crm"}},
		{store.Filter{Destination: "hooks", Status: store.Pending}, []string{"a>hooks"}},
		{store.Filter{Destination: "nowhere"}, []string{}},
	} {
		if diff := cmp.Diff(tt.want, list(tt.f)); diff != "" {
			t.Errorf("List(%+v) mismatch (-want +got):\n%s", tt.f, diff)
		}
	}
	// Every delivery of web fails.
	ds := leaseDest(t, s, "n1", "web", "", 10, t0)
	var cs []store.Completion
	for _, d := range ds {
		cs = append(cs, store.Completion{ID: d.ID, Owner: "n1", Status: store.Failed, Attempts: 1, FirstAttempt: t0})
	}
	if err := s.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	if n, err := s.Retry(ctx, nil, store.Filter{Source: "web", Destination: "hooks"}, later); err != nil || n != 1 {
		t.Fatalf("Retry(web, hooks) = %d, %v; want 1", n, err)
	}
	if diff := cmp.Diff([]string{"a>hooks"}, list(store.Filter{Source: "web", Status: store.Pending})); diff != "" {
		t.Errorf("pending after Retry(hooks) mismatch (-want +got):\n%s", diff)
	}
	got, err := s.Resend(ctx, nil, store.Filter{Source: "web", Destination: "crm", Limit: 1}, later)
	if err != nil || got.N != 1 || got.Skipped != 1 {
		t.Fatalf("Resend(web, crm, limit 1) = %+v, %v; want 1 resent, 1 skipped", got, err)
	}
	if got, err := s.Resend(ctx, nil, store.Filter{Source: "web", Destination: "crm"}, later); err != nil || got.N != 1 {
		t.Fatalf("Resend(web, crm) = %+v, %v; want the other 1", got, err)
	}
	if diff := cmp.Diff([]string{"a>hooks", "a>crm", "b>crm"}, list(store.Filter{Source: "web", Status: store.Pending})); diff != "" {
		t.Errorf("pending after Resend(crm) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c>crm"}, list(store.Filter{Source: "app", Destination: "crm", Status: store.Pending})); diff != "" {
		t.Errorf("app's crm delivery mismatch (-want +got):\n%s", diff)
	}
}

// testCancelPending: every pending delivery of one destination of a
// source is cancelled, in steps, leased ones too, with the reason as last
// error; a Complete by a lease's holder after it records the attempts and
// leaves the delivery cancelled; other destinations, other sources and
// finished deliveries are untouched.
func testCancelPending(t *testing.T, s store.Store) {
	ctx := context.Background()
	n := store.ReleaseStep + 5
	var msgs []store.Message
	for i := range n {
		msgs = append(msgs, MsgTo("web", fmt.Sprintf("m%04d", i), 0, "crm", "hooks"))
	}
	msgs = append(msgs, MsgTo("web", "later", time.Hour, "crm"), MsgTo("app", "other", 0, "crm"))
	ingest(t, s, msgs...)
	// Of crm: one delivered before, two leased (one to be completed as a
	// retry, one as delivered after the cancel).
	ds := leaseDest(t, s, "n1", "web", "crm", 3, t0)
	if len(ds) != 3 {
		t.Fatalf("leased %d, want 3", len(ds))
	}
	if err := s.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t0}}); err != nil {
		t.Fatal(err)
	}
	const reason = "destination crm removed"
	now := t0.Add(time.Minute)
	got, err := s.CancelPending(ctx, "web", "crm", reason, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := n + 1 - 1; got != want { // every crm delivery of web, the later one too, but the delivered one
		t.Errorf("CancelPending = %d, want %d", got, want)
	}
	rec := store.Attempt{Delivery: 1, URL: "http://h/crm", Start: t0, Status: 503, Class: "http_5xx", Outcome: "retryable"}
	err = s.Complete(ctx, []store.Completion{
		{ID: ds[1].ID, Owner: "n1", Status: store.Pending, Attempts: 1, FirstAttempt: t0, NextAttempt: now, LastError: "HTTP 503",
			Records: []store.Attempt{rec}},
		{ID: ds[2].ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t0, Records: []store.Attempt{rec}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds[1:] {
		got, err := s.Get(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.Cancelled || got.LastError != reason || len(got.Records) != 1 {
			t.Errorf("leased delivery completed after the cancel: %s %q with %d records; want cancelled, %q, its 1 record",
				got.Status, got.LastError, len(got.Records), reason)
		}
	}
	counts := map[string]int{}
	all, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		counts[d.Source+"/"+d.Destination+" "+string(d.Status)]++
		if d.Status == store.Cancelled && d.LastError != reason {
			t.Errorf("%s cancelled with last error %q, want %q", d.MessageID, d.LastError, reason)
		}
	}
	want := map[string]int{
		"web/crm delivered": 1, "web/crm cancelled": n + 1 - 1,
		"web/hooks pending": n, "app/crm pending": 1,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("deliveries by destination and status mismatch (-want +got):\n%s", diff)
	}
	if got := leaseDest(t, s, "n2", "web", "crm", 10, t0.Add(2*time.Hour)); len(got) != 0 {
		t.Errorf("cancelled deliveries leased: %v", keyed(got))
	}
	if got, err := s.CancelPending(ctx, "web", "crm", reason, now); err != nil || got != 0 {
		t.Errorf("CancelPending again = %d, %v; want 0", got, err)
	}
}

// DestinationsSeedDue is when the deliveries a test seeds in a schema
// before destinations' leases are due (Unix ms): web's message m1 to
// hooks and to crm, and m2 to crm a millisecond later.
const DestinationsSeedDue = 1714564802000

// CheckDestinationsMigrated checks a store opened on a database an older
// schema wrote, with the pending deliveries DestinationsSeedDue describes:
// each destination leases its own, and CancelPending cancels one's.
func CheckDestinationsMigrated(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	now := store.FromMillis(DestinationsSeedDue).Add(time.Second)
	if diff := cmp.Diff([]string{"m1>crm", "m2>crm"}, dueOrder(leaseDest(t, s, "n1", "web", "crm", 10, now))); diff != "" {
		t.Errorf("crm's lease mismatch (-want +got):\n%s", diff)
	}
	if n, err := s.CancelPending(ctx, "web", "hooks", "removed", now); err != nil || n != 1 {
		t.Fatalf("CancelPending(web, hooks) = %d, %v; want 1", n, err)
	}
	ds, err := s.List(ctx, store.Filter{Destination: "hooks", Status: store.Cancelled})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"m1>hooks"}, keyed(ds)); diff != "" {
		t.Errorf("hooks' cancelled mismatch (-want +got):\n%s", diff)
	}
}
