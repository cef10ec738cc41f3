package storetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// RunAdmin runs the conformance suite of store.Admin against stores made
// by open, which must implement it.
func RunAdmin(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, a store.Admin)
	}{
		{"DeletionCancelsAndPurges", testDeletion},
		{"DeletionUnknown", testDeletionUnknown},
		{"ResendPurged", testResendPurged},
		{"DeletionInSteps", testDeletionInSteps},
		{"DeletionWhileIngesting", testDeletionWhileIngesting},
		{"SyncAudienceDiff", testSyncAudience},
		{"SyncTraitValues", testSyncTrait},
		{"SyncFailedListChangesNothing", testSyncFailed},
		{"FormsKept", testAdminForms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case has a store of its own
			s := open(t)
			t.Cleanup(func() { s.Close() })
			a, ok := s.(store.Admin)
			if !ok {
				t.Fatalf("%T does not implement store.Admin", s)
			}
			tt.fn(t, s, a)
		})
	}
}

// userMsg is a forwarded track message of user in source.
func userMsg(source, id, user string) store.Message {
	m := Msg(source, id, 0, true)
	m.UserID = user
	return m
}

// DeleteMsg is the delete notification of deletion id for source.
func DeleteMsg(source, id, user string) store.Message {
	return store.Message{
		Source: source, MessageID: id, Type: "delete", UserID: user, ReceivedAt: t0,
		Body:         []byte(fmt.Sprintf(`{"type":"delete","userId":%q,"timestamp":"2024-05-01T12:00:00.000Z","messageId":%q}`, user, id)),
		Destinations: []string{store.DestinationWebhooks},
	}
}

func byMessage(t *testing.T, s store.Store) map[string]store.Delivery {
	t.Helper()
	ds, err := s.List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Delivery{}
	for _, d := range ds {
		out[d.Source+"/"+d.MessageID] = d
	}
	return out
}

func testDeletion(t *testing.T, s store.Store, a store.Admin) {
	ctx := context.Background()
	ingest(t, s, userMsg("web", "w1", "u1"), userMsg("web", "w2", "u1"), userMsg("web", "w3", "u2"),
		userMsg("app", "a1", "u1"), userMsg("other", "o1", "u1"), DeleteMsg("web", "old-del", "u1"))
	// w1 is delivered before the request; w2 stays pending.
	ds := lease(t, s, "w", "web", 1, t0)
	if len(ds) != 1 || ds[0].MessageID != "w1" {
		t.Fatalf("leased %v, want w1", ids(ds))
	}
	if err := s.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "w", Status: store.Delivered, Attempts: 1, FirstAttempt: t0}}); err != nil {
		t.Fatal(err)
	}
	got, err := a.CreateDeletion(ctx, store.DeletionRequest{
		ID: "del-1", UserID: "u1", CreatedAt: t0.Add(time.Minute), Sources: []string{"app", "web"},
		Messages: []store.Message{DeleteMsg("web", "del-1", "u1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &store.Deletion{ID: "del-1", UserID: "u1", CreatedAt: t0.Add(time.Minute), Done: true, Sources: []store.DeletionSource{
		{Source: "app", Cancelled: 1, Purged: 1},
		{Source: "web", Notified: true, MessageID: "del-1", Status: store.Pending, Cancelled: 1, Purged: 2},
	}}
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Delivery" }, cmp.Ignore())); diff != "" {
		t.Errorf("deletion mismatch (-want +got):\n%s", diff)
	}
	all := byMessage(t, s)
	if len(got.Sources) == 2 && got.Sources[1].Delivery != all["web/del-1"].ID {
		t.Errorf("deletion delivery = %d, want %d", got.Sources[1].Delivery, all["web/del-1"].ID)
	}
	wantStatus := map[string]store.Status{
		"web/w1": store.Delivered, "web/w2": store.Cancelled, "web/w3": store.Pending, "app/a1": store.Cancelled,
		"other/o1": store.Pending, "web/old-del": store.Pending, "web/del-1": store.Pending,
	}
	gotStatus := map[string]store.Status{}
	for k, d := range all {
		gotStatus[k] = d.Status
	}
	if diff := cmp.Diff(wantStatus, gotStatus); diff != "" {
		t.Errorf("statuses mismatch (-want +got):\n%s", diff)
	}
	for k, purged := range map[string]bool{"web/w1": true, "web/w2": true, "app/a1": true, "web/w3": false, "other/o1": false, "web/old-del": false, "web/del-1": false} {
		d, err := s.Get(ctx, all[k].ID)
		if err != nil {
			t.Fatal(err)
		}
		if (len(d.Body) == 0) != purged {
			t.Errorf("%s body = %q, purged want %v", k, d.Body, purged)
		}
	}
	// Cancelled deliveries are never leased or retried.
	if n, err := s.Retry(ctx, nil, store.Filter{Status: store.Cancelled}, t0.Add(2*time.Minute)); err != nil || n != 0 {
		t.Errorf("Retry(status cancelled) = %d, %v; want 0", n, err)
	}
	if n, err := s.Retry(ctx, []int64{all["web/w2"].ID}, store.Filter{}, t0.Add(2*time.Minute)); err != nil || n != 0 {
		t.Errorf("Retry(cancelled) = %d, %v; want 0", n, err)
	}
	leased := ids(lease(t, s, "w", "web", 10, t0.Add(time.Hour)))
	slices.Sort(leased)
	if diff := cmp.Diff([]string{"del-1", "old-del", "w3"}, leased); diff != "" {
		t.Errorf("leased after deletion mismatch (-want +got):\n%s", diff)
	}
	again, err := a.Deletion(ctx, "del-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("Deletion mismatch (-want +got):\n%s", diff)
	}
}

func testDeletionUnknown(t *testing.T, s store.Store, a store.Admin) {
	if _, err := a.Deletion(context.Background(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Deletion(unknown) = %v, want ErrNotFound", err)
	}
	// A request for a user with nothing stored is recorded all the same.
	d, err := a.CreateDeletion(context.Background(), store.DeletionRequest{ID: "d", UserID: "ghost", CreatedAt: t0, Sources: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.DeletionSource{{Source: "web"}}, d.Sources); diff != "" {
		t.Errorf("sources mismatch (-want +got):\n%s", diff)
	}
}

// list yields the users of a sync list, each with value.
func list(value string, users ...string) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		for _, u := range users {
			if !yield(store.Value{UserID: u, Value: []byte(value)}, nil) {
				return
			}
		}
	}
}

func pairs(kv ...string) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		for i := 0; i < len(kv); i += 2 {
			if !yield(store.Value{UserID: kv[i], Value: []byte(kv[i+1])}, nil) {
				return
			}
		}
	}
}

// sync returns a Sync of kind and key whose messages are one identify per
// user for source "web", with the value as body: the tests read it back.
func newSync(kind store.SyncKind, key string, n *int) store.Sync {
	removed := "false"
	if kind == store.KindTrait {
		removed = "null"
	}
	return store.Sync{
		Kind: kind, Key: key, Name: key, Now: t0, Removed: []byte(removed),
		Messages: func(user string, value []byte) []store.Message {
			*n++
			return []store.Message{{
				Source: "web", MessageID: fmt.Sprintf("%s-%d", key, *n), Type: "identify", UserID: user, ReceivedAt: t0,
				Body: []byte(fmt.Sprintf(`%s=%s`, user, value)), Destinations: []string{store.DestinationWebhooks},
			}}
		},
	}
}

// sent returns "user=value" of the messages stored since delivery id after.
func sent(t *testing.T, s store.Store, after *int64) []string {
	t.Helper()
	ds, err := s.List(context.Background(), store.Filter{After: *after})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, d := range ds {
		full, err := s.Get(context.Background(), d.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(full.Body))
		*after = d.ID
	}
	slices.Sort(out)
	return out
}

func testSyncAudience(t *testing.T, s store.Store, a store.Admin) {
	ctx := context.Background()
	var n int
	var after int64
	sy := newSync(store.KindAudience, "vip", &n)
	steps := []struct {
		users []string
		want  store.SyncResult
		sent  []string
	}{
		{[]string{"a", "b", "c", "b"}, store.SyncResult{First: true, Added: 3, Messages: 3}, []string{"a=true", "b=true", "c=true"}},
		{[]string{"d", "c", "b"}, store.SyncResult{Added: 1, Removed: 1, Unchanged: 2, Messages: 2}, []string{"a=false", "d=true"}},
		{[]string{"b", "c", "d"}, store.SyncResult{Unchanged: 3}, []string{}},
		{nil, store.SyncResult{Removed: 3, Messages: 3}, []string{"b=false", "c=false", "d=false"}},
	}
	for i, st := range steps {
		syncStep(t, s, a, sy, i, list("true", st.users...), st.want, st.sent, &after)
	}
	// Another audience has its own members.
	got, err := a.Sync(ctx, newSync(store.KindAudience, "other", &n), list("true", "b"))
	if err != nil || !got.First || got.Added != 1 {
		t.Errorf("other audience = %+v, %v", got, err)
	}
}

// syncStep applies one sync and checks its result and the messages it
// queued (those after *after, which it advances).
func syncStep(t *testing.T, s store.Store, a store.Admin, sy store.Sync, i int, values iter.Seq2[store.Value, error], want store.SyncResult, wantSent []string, after *int64) {
	t.Helper()
	got, err := a.Sync(context.Background(), sy, values)
	if err != nil {
		t.Fatalf("sync %d: %v", i, err)
	}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("sync %d result mismatch (-want +got):\n%s", i, diff)
	}
	if diff := cmp.Diff(wantSent, sent(t, s, after)); diff != "" {
		t.Errorf("sync %d messages mismatch (-want +got):\n%s", i, diff)
	}
}

func testSyncTrait(t *testing.T, s store.Store, a store.Admin) {
	ctx := context.Background()
	var n int
	var after int64
	sy := newSync(store.KindTrait, "ltv", &n)
	steps := []struct {
		kv   []string
		want store.SyncResult
		sent []string
	}{
		{[]string{"a", "1", "b", `"x"`}, store.SyncResult{First: true, Added: 2, Messages: 2}, []string{"a=1", `b="x"`}},
		{[]string{"a", "2", "b", `"x"`, "c", "true"}, store.SyncResult{Added: 1, Changed: 1, Unchanged: 1, Messages: 2}, []string{"a=2", "c=true"}},
		{[]string{"a", "2", "c", "true"}, store.SyncResult{Removed: 1, Unchanged: 2, Messages: 1}, []string{"b=null"}},
	}
	for i, st := range steps {
		syncStep(t, s, a, sy, i, pairs(st.kv...), st.want, st.sent, &after)
	}
	// An audience with the same key is a different thing.
	got, err := a.Sync(ctx, newSync(store.KindAudience, "ltv", &n), list("true", "a"))
	if err != nil || !got.First {
		t.Errorf("audience ltv = %+v, %v", got, err)
	}
}

func testSyncFailed(t *testing.T, s store.Store, a store.Admin) {
	ctx := context.Background()
	var n int
	var after int64
	sy := newSync(store.KindAudience, "vip", &n)
	if _, err := a.Sync(ctx, sy, list("true", "a", "b")); err != nil {
		t.Fatal(err)
	}
	sent(t, s, &after)
	bad := errors.New("line 3: bad")
	// Long enough to be staged in more than one chunk (1,000 values)
	// before it fails.
	failing := func(yield func(store.Value, error) bool) {
		for i := range 2500 {
			if !yield(store.Value{UserID: fmt.Sprintf("u%05d", i), Value: []byte("true")}, nil) {
				return
			}
		}
		yield(store.Value{}, bad)
	}
	if _, err := a.Sync(ctx, sy, failing); !errors.Is(err, bad) {
		t.Fatalf("Sync with a failing list = %v, want %v", err, bad)
	}
	if got := sent(t, s, &after); len(got) != 0 {
		t.Errorf("failed sync sent %v", got)
	}
	got, err := a.Sync(ctx, sy, list("true", "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.SyncResult{Unchanged: 2}, *got); diff != "" {
		t.Errorf("after a failed sync mismatch (-want +got):\n%s", diff)
	}
}
