package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// wireMsg is Msg as evfwd stores a message now: its webhook body.
func wireMsg(source, id string, offset time.Duration) store.Message {
	m := Msg(source, id, offset, true)
	m.Body = fmt.Appendf(nil, `{"type":"track","version":1,"event":"E","userId":"u_%s","messageId":%q,"receivedAt":"2024-05-01T12:00:00.000Z","timestamp":"2024-05-01T12:00:00.000Z"}`, id, id)
	m.Form = store.FormWire
	return m
}

// form is what a test reads back of a stored message.
type form struct {
	Body string
	Form store.Form
}

// testBodyForms: a message keeps its body and the form it is in through
// Lease and Get, wire (new messages) and collected (rows stored before).
func testBodyForms(t *testing.T, s store.Store) {
	ctx := context.Background()
	collected, wire := Msg("web", "old", 0, true), wireMsg("web", "new", time.Millisecond)
	ingest(t, s, collected, wire)
	want := map[string]form{
		"old": {string(collected.Body), store.FormCollected},
		"new": {string(wire.Body), store.FormWire},
	}
	leased := map[string]form{}
	got := map[string]form{}
	for _, d := range lease(t, s, "n1", "web", 10, t0.Add(time.Second)) {
		leased[d.MessageID] = form{string(d.Body), d.Form}
		full, err := s.Get(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		got[d.MessageID] = form{string(full.Body), full.Form}
	}
	if diff := cmp.Diff(want, leased); diff != "" {
		t.Errorf("Lease mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get mismatch (-want +got):\n%s", diff)
	}
}

// testAdminForms: a deletion's delete messages and a sync's identifies
// keep the form they are in, through the sync's outbox too.
func testAdminForms(t *testing.T, s store.Store, a store.Admin) {
	ctx := context.Background()
	del := DeleteMsg("web", "del-1", "u1")
	del.Body, del.Form = []byte(`{"type":"delete","userId":"u1","timestamp":"2024-05-01T12:00:00.000Z"}`), store.FormWire
	if _, err := a.CreateDeletion(ctx, store.DeletionRequest{ID: "del-1", UserID: "u1", CreatedAt: t0, Sources: []string{"web"},
		Messages: []store.Message{del}}); err != nil {
		t.Fatal(err)
	}
	var n int
	sy := newSync(store.KindAudience, "vip", &n)
	messages := sy.Messages
	sy.Messages = func(user string, value []byte) []store.Message {
		ms := messages(user, value)
		for i := range ms {
			ms[i].Form = store.FormWire
		}
		return ms
	}
	if _, err := a.Sync(ctx, sy, list("true", "u2")); err != nil {
		t.Fatal(err)
	}
	got := map[string]form{}
	for _, d := range lease(t, s, "n1", "web", 10, t0.Add(time.Second)) {
		got[d.MessageID] = form{string(d.Body), d.Form}
	}
	want := map[string]form{"del-1": {string(del.Body), store.FormWire}, "vip-1": {"u2=true", store.FormWire}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leased mismatch (-want +got):\n%s", diff)
	}
}

// CollectedBody is a message as a store held it before the wire form:
// collected, writeKey and sentAt still in, for an engine's test to store
// with the schema before body_form. An alias: the body the webhook layout
// changes most.
const CollectedBody = `{"type":"alias","userId":"u_2","previousId":"a_1","writeKey":"wk","sentAt":"2024-05-01T12:00:01Z",` +
	`"timestamp":"2024-05-01T12:00:00Z","context":{"ip":"203.0.113.7"},"receivedAt":"2024-05-01T12:00:02.000Z"}`

// CheckCollectedRow checks a store opened on a database that an older
// evfwd wrote: one message of source, with a delivery, stored as
// CollectedBody. Leased, it is still that body, byte for byte, in the
// collected form (pkg/queued's tests check that such a body becomes the
// webhook body evfwd sent for it before).
func CheckCollectedRow(t *testing.T, s store.Store, source string) {
	t.Helper()
	ds := lease(t, s, "n1", source, 10, time.Now().Add(time.Hour))
	if len(ds) != 1 {
		t.Fatalf("leased %d deliveries, want 1", len(ds))
	}
	d := ds[0]
	if d.Form != store.FormCollected || string(d.Body) != CollectedBody {
		t.Fatalf("leased form %d body %s, want %d %s", d.Form, d.Body, store.FormCollected, CollectedBody)
	}
}

// CheckSyncListMigrated checks a store opened on a database that schema
// version 2 wrote, its list of audience vip (name VIP) holding users a and
// b (true): the next sync diffs against that list.
func CheckSyncListMigrated(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	var sent []string
	sy := store.Sync{Kind: store.KindAudience, Key: "vip", Name: "VIP", Now: time.Now(), Removed: []byte("false"),
		Messages: func(user string, value []byte) []store.Message {
			sent = append(sent, user+"="+string(value))
			return []store.Message{{Source: "web", MessageID: fmt.Sprint(len(sent)), Type: "identify", UserID: user,
				ReceivedAt: time.Now(), Body: []byte("{}")}}
		}}
	res, err := s.(store.Admin).Sync(ctx, sy, list("true", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.SyncResult{Added: 1, Removed: 1, Unchanged: 1, Messages: 2}); *res != want {
		t.Errorf("result %+v, want %+v", *res, want)
	}
	if fmt.Sprint(sent) != "[c=true a=false]" {
		t.Errorf("sent %v", sent)
	}
	if n, err := s.(SyncStepper).SyncLeftovers(ctx); err != nil || n != 0 {
		t.Errorf("leftovers %d, %v", n, err)
	}
}
