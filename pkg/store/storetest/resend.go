package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// testResend: a delivered, a failed and a dead delivery are sent again as
// a new attempt (pending, due now, a new retry window) with their attempt
// history kept; a pending one, one in flight and an unknown id are left
// alone and reported.
func testResend(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "a", 0, true), Msg("web", "b", 0, true), Msg("web", "c", 0, true),
		Msg("web", "d", time.Second, true), Msg("web", "e", time.Second, true), Msg("app", "f", 0, true))
	ds := lease(t, s, "n1", "web", 3, t0)
	rec := store.Attempt{Delivery: 1, URL: "http://h/u", Start: t0, Status: 200, Class: "ok", Outcome: "delivered"}
	err := s.Complete(ctx, []store.Completion{
		{ID: ds[0].ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t0, Records: []store.Attempt{rec}},
		{ID: ds[1].ID, Owner: "n1", Status: store.Failed, Attempts: 1, FirstAttempt: t0},
		{ID: ds[2].ID, Owner: "n1", Status: store.Dead, Attempts: 9, FirstAttempt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	inFlight := lease(t, s, "n1", "web", 1, t0.Add(time.Second)) // d; e stays pending
	if len(inFlight) != 1 {
		t.Fatalf("leased %v, want d", ids(inFlight))
	}
	all := byMessage(t, s)
	later := t0.Add(time.Hour)
	const unknown = 1 << 40
	got, err := s.Resend(ctx, []int64{all["web/a"].ID, all["web/d"].ID, all["web/e"].ID, unknown, all["web/a"].ID}, store.Filter{}, later)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Resent{N: 1, Pending: []int64{all["web/d"].ID, all["web/e"].ID}, Unknown: []int64{unknown}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Resend(ids) mismatch (-want +got):\n%s", diff)
	}
	d, err := s.Get(ctx, all["web/a"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != store.Pending || d.Attempts != 0 || !d.FirstAttempt.IsZero() || !d.NextAttempt.Equal(later) || len(d.Records) != 1 {
		t.Errorf("resent delivery: %+v with %d attempt records; want pending, due %s, its 1 record kept", d.Delivery, len(d.Records), later)
	}
	// By filter: none created in ten years' time (on whichever clock
	// the store stamps them); every finished one of web created since a
	// year before (b failed, c dead), no other source's.
	future := time.Now().AddDate(10, 0, 0)
	if got, err := s.Resend(ctx, nil, store.Filter{Source: "web", Since: future}, later); err != nil || got.N != 0 {
		t.Fatalf("Resend(source web, since %s) = %+v, %v; want 0", future, got, err)
	}
	if got, err := s.Resend(ctx, nil, store.Filter{Source: "web", Since: t0.AddDate(-1, 0, 0)}, later); err != nil || got.N != 2 {
		t.Fatalf("Resend(source web) = %+v, %v; want 2 (b and c)", got, err)
	}
	for _, k := range []string{"web/b", "web/c", "web/d", "web/e", "app/f"} {
		if d, _ := s.Get(ctx, all[k].ID); d == nil || d.Status != store.Pending {
			t.Errorf("%s after resend: %+v, want pending", k, d)
		}
	}
	// d's lease ran out by then.
	leased := ids(lease(t, s, "n2", "web", 10, later))
	slices.Sort(leased)
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e"}, leased); diff != "" {
		t.Errorf("leased after resend mismatch (-want +got):\n%s", diff)
	}
}

// testResendPurged: a delivery whose message a deletion request withdrew,
// cancelled or delivered with its body purged since, has nothing to send:
// Resend leaves it alone and says why.
func testResendPurged(t *testing.T, s store.Store, a store.Admin) {
	ctx := context.Background()
	ingest(t, s, userMsg("web", "w1", "u1"), userMsg("web", "w2", "u1"), userMsg("web", "w3", "u2"))
	ds := lease(t, s, "w", "web", 1, t0)
	if err := s.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "w", Status: store.Delivered, Attempts: 1, FirstAttempt: t0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateDeletion(ctx, store.DeletionRequest{ID: "del-1", UserID: "u1", CreatedAt: t0, Sources: []string{"web"}}); err != nil {
		t.Fatal(err)
	}
	all := byMessage(t, s)
	got, err := s.Resend(ctx, []int64{all["web/w1"].ID, all["web/w2"].ID}, store.Filter{}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.Resent{Purged: []int64{all["web/w1"].ID, all["web/w2"].ID}}, got); diff != "" {
		t.Errorf("Resend(purged) mismatch (-want +got):\n%s", diff)
	}
	if got, err := s.Resend(ctx, nil, store.Filter{Status: store.Delivered}, t0.Add(time.Minute)); err != nil || got.N != 0 {
		t.Errorf("Resend(status delivered) = %+v, %v; want 0: w1's body is purged", got, err)
	}
}

// testResendLimit: by filter with a limit, Resend makes at most that many
// pending, those finished longest ago first (then by id), and says how
// many more the filter selects; a second run goes on with the rest before
// taking again those the first resent that failed again.
func testResendLimit(t *testing.T, s store.Store) {
	ctx := context.Background()
	ingest(t, s, Msg("web", "a", 0, true), Msg("web", "b", 0, true), Msg("web", "c", 0, true),
		Msg("web", "d", 0, true), Msg("web", "e", 0, true), Msg("app", "f", 0, true))
	fail := func(ds ...store.Delivery) {
		t.Helper()
		cs := make([]store.Completion, len(ds))
		for i, d := range ds {
			cs[i] = store.Completion{ID: d.ID, Owner: "n1", Status: store.Failed, Attempts: 1, FirstAttempt: t0}
		}
		if err := s.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
		// A delivery finishes at the store's clock, in milliseconds:
		// those failed next finish after these.
		for ms := time.Now().UnixMilli(); time.Now().UnixMilli() <= ms; {
		}
	}
	resend := func(limit int, now time.Time, wantN, wantSkipped int, want ...string) {
		t.Helper()
		got, err := s.Resend(ctx, nil, store.Filter{Status: store.Failed, Source: "web", Limit: limit}, now)
		if err != nil {
			t.Fatal(err)
		}
		if got.N != wantN || got.Skipped != wantSkipped {
			t.Errorf("Resend(failed, web, limit %d) = %+v, want %d resent, %d skipped", limit, got, wantN, wantSkipped)
		}
		var pending []string
		for k, d := range byMessage(t, s) {
			if d.Status == store.Pending {
				pending = append(pending, k)
			}
		}
		slices.Sort(pending)
		if diff := cmp.Diff(want, pending); diff != "" {
			t.Errorf("pending after Resend(limit %d) mismatch (-want +got):\n%s", limit, diff)
		}
	}
	ds := lease(t, s, "n1", "web", 5, t0) // a..e
	fail(ds[3], ds[4])                    // d, e finish first
	fail(ds[0], ds[1], ds[2])
	fail(lease(t, s, "n1", "app", 1, t0)...) // another source's: never selected
	later := t0.Add(time.Hour)
	resend(3, later, 3, 2, "web/a", "web/d", "web/e")
	// They fail again, finishing last: the next run takes b and c first.
	fail(lease(t, s, "n1", "web", 5, later)...)
	resend(3, later.Add(time.Hour), 3, 2, "web/a", "web/b", "web/c")
	fail(lease(t, s, "n1", "web", 5, later.Add(time.Hour))...)
	resend(2, later.Add(2*time.Hour), 2, 3, "web/d", "web/e")
	fail(lease(t, s, "n1", "web", 5, later.Add(2*time.Hour))...)
	// Exactly the limit selected: none skipped; no limit: every one.
	resend(5, later.Add(3*time.Hour), 5, 0, "web/a", "web/b", "web/c", "web/d", "web/e")
	fail(lease(t, s, "n1", "web", 5, later.Add(3*time.Hour))...)
	resend(0, later.Add(4*time.Hour), 5, 0, "web/a", "web/b", "web/c", "web/d", "web/e")
}
