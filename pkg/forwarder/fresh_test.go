package forwarder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// A fresh message goes out at once, beside a backlog that fills its lane,
// in the room fresh ones always have (freshReserve); what does not fit
// waits in the store for the lane, leased by no one.
func TestIngestSendsFreshAheadOfBacklog(t *testing.T) {
	t.Parallel()
	c, s, h, f := backlogged(t, 5)

	fresh := []store.Message{msg("web", "f0"), msg("web", "f1"), msg("web", "f2")}
	if err := f.Ingest(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a fresh delivery in flight beside the backlog", func() bool { cur, _ := h.InFlight(); return cur == 5 })
	f.quiet(t, "web")
	if cur, peak := h.InFlight(); cur != 5 || peak != 5 {
		t.Fatalf("%d in flight, peak %d; want 5 (4 leased by the lane, 1 fresh)", cur, peak)
	}
	var ids []string
	for _, r := range h.Requests()[4:] {
		ids = append(ids, messageID(t, r.Body))
	}
	if fmt.Sprint(ids) != "[f0]" {
		t.Errorf("fresh requests %v, want [f0]", ids)
	}
	// f1 and f2 wait in the store, free for a lane to lease; the fresh
	// one is leased to f.
	ds, err := s.Lease(context.Background(), store.LeaseRequest{Owner: "other", Source: "web", Limit: 10, Now: c.Now(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.MessageID == "f0" {
			t.Errorf("%s, in flight, could be leased by another owner", d.MessageID)
		}
	}
	// b4 and f1 are leased ahead by the busy lane (PerSource/2 = 2); f2
	// is free.
	if len(ds) != 1 || ds[0].MessageID != "f2" {
		t.Errorf("another owner leased %v, want f2", ds)
	}
}

// With Run not running, Ingest only stores: the lanes take the messages
// once it runs.
func TestIngestBeforeRunOnlyStores(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t)
	cfg := Config{Store: s, Sender: mustSender(t, c), Owner: "o", Now: c.Now, Poll: time.Hour,
		Destinations: map[string]*webhook.Destination{"web": dest(h)}}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Ingest(context.Background(), []store.Message{msg("web", "m1")}); err != nil {
		t.Fatal(err)
	}
	d := only(t, s)
	if d.Status != store.Pending || h.Count() != 0 {
		t.Fatalf("status %s, %d requests; want pending, none", d.Status, h.Count())
	}
	start(t, c, Config{Store: s, Destinations: map[string]*webhook.Destination{"web": dest(h)}})
	waitFor(t, "delivered", func() bool { return only(t, s).Status == store.Delivered })
}

// failingStore fails IngestLeased while fail is set.
type failingStore struct {
	store.Store
	fail bool
}

func (fs *failingStore) IngestLeased(ctx context.Context, msgs []store.Message, l store.IngestLease) ([]store.Delivery, error) {
	if fs.fail {
		return nil, errors.New("disk on fire")
	}
	return fs.Store.IngestLeased(ctx, msgs, l)
}

// An ingest the store refuses gives its claims back: the next one gets
// the whole fresh bound again.
func TestIngestErrorGivesClaimsBack(t *testing.T) {
	t.Parallel()
	c := newClock()
	fs := &failingStore{Store: openStore(t, c), fail: true}
	h := newHook(t, held)
	f := start(t, c, Config{Store: fs, PerSource: 2, MaxInFlight: 2, Destinations: map[string]*webhook.Destination{"web": dest(h)}})
	for i := range 3 {
		if err := f.Ingest(context.Background(), []store.Message{msg("web", fmt.Sprint("x", i)), msg("web", fmt.Sprint("y", i))}); err == nil {
			t.Fatal("Ingest of a failing store returned nil")
		}
	}
	fs.fail = false
	if err := f.Ingest(context.Background(), []store.Message{msg("web", "a"), msg("web", "b")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both sent fresh", func() bool { cur, _ := h.InFlight(); return cur == 2 })
}

func mustSender(t *testing.T, c *webhooktest.Clock) *webhook.Sender {
	t.Helper()
	sender, err := webhook.NewSender(webhook.Options{Timeout: time.Hour, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.CloseIdleConnections)
	return sender
}

func messageID(t *testing.T, body []byte) string {
	t.Helper()
	var m struct {
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m.MessageID
}

// What a busy lane leased ahead goes back when Run stops: due at once for
// the next forwarder, no attempt spent, like the deliveries it interrupted.
func TestStopGivesBackWhatWasLeasedAhead(t *testing.T) {
	t.Parallel()
	c, s, _, f := backlogged(t, 6)
	f.quiet(t, "web")
	if n := f.tracer.leased("web", 0); n != 4+f.readAhead() {
		t.Fatalf("leased %d, want 4 in flight and %d ahead", n, f.readAhead())
	}
	f.stop(t) // the grace period ends with the four held requests interrupted
	ds, err := s.Lease(context.Background(), store.LeaseRequest{Owner: "next", Source: "web", Limit: 10, Now: c.Now(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 6 {
		t.Fatalf("the next forwarder leased %d deliveries, want all 6", len(ds))
	}
	for _, d := range ds {
		if d.Attempts != 0 {
			t.Errorf("%s: %d attempts counted, want 0", d.MessageID, d.Attempts)
		}
	}
}

// backlogged stores n messages for a held endpoint and runs a forwarder
// of PerSource 4 on them until its lane is full, no fresh ones having
// come: four requests held at the endpoint.
func backlogged(t *testing.T, n int) (*webhooktest.Clock, store.Store, *webhooktest.Receiver, *running) {
	t.Helper()
	c := newClock()
	s := openStore(t, c)
	h := newHook(t, held)
	var backlog []store.Message
	for i := range n {
		backlog = append(backlog, msg("web", fmt.Sprint("b", i)))
	}
	ingest(t, s, backlog...)
	f := start(t, c, Config{Store: s, PerSource: 4, MaxInFlight: 8, Destinations: map[string]*webhook.Destination{"web": dest(h)}})
	waitFor(t, "the backlog to fill the lane", func() bool { cur, _ := h.InFlight(); return cur == 4 })
	return c, s, h, f
}
