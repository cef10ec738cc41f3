package forwarder

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

func TestRetryDelay(t *testing.T) {
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	for fails, w := range want {
		if got := retryDelay(fails); got != w {
			t.Errorf("after %d failed retries: %v, want %v", fails, got, w)
		}
	}
	if got := retryDelay(1000); got != retryMax {
		t.Errorf("after 1000 failed retries: %v, want %v", got, retryMax)
	}
}

// The completer retries what waits a group at a time, oldest first, and
// the lanes stay paused until the last one is dropped.
func TestUnrecordedGroups(t *testing.T) {
	u := newUnrecorded()
	if u.waiting() {
		t.Fatal("waiting when empty")
	}
	var group []finishing
	for i := range maxCompleteGroup + 88 {
		group = append(group, finishing{c: store.Completion{ID: int64(i + 1)}})
	}
	u.keep(group[:100])
	u.keep(group[100:])
	first := u.first(maxCompleteGroup)
	if len(first) != maxCompleteGroup || first[0].c.ID != 1 || first[len(first)-1].c.ID != maxCompleteGroup {
		t.Fatalf("first group: %d from %d, want %d from 1", len(first), first[0].c.ID, maxCompleteGroup)
	}
	if u.len() != maxCompleteGroup+88 {
		t.Fatalf("%d wait while the first group is written, want all %d", u.len(), maxCompleteGroup+88)
	}
	u.drop(len(first))
	if rest := u.first(maxCompleteGroup); len(rest) != 88 || rest[0].c.ID != maxCompleteGroup+1 || !u.waiting() {
		t.Fatalf("after the first group: %d wait from %d, want 88 from %d", len(rest), rest[0].c.ID, maxCompleteGroup+1)
	}
	u.drop(88)
	if u.waiting() || u.len() != 0 {
		t.Fatalf("%d wait after all were dropped", u.len())
	}
}

// An outcome the store refuses waits: the lane leases nothing, even once
// the delivery's lease ran out, and Ingest sends nothing fresh; once the
// store writes again the outcome is recorded and the lane goes on. Each
// message is sent once.
func TestUnrecordedPausesUntilRecorded(t *testing.T) {
	c := newClock()
	const ttl = time.Minute
	s := openStore(t, c)
	watched := &watchedStore{Store: s, changed: changed(t)}
	watched.fail.Store(true)
	h := newHook(t)
	ingest(t, s, msg("web", "m1"), msg("web", "m2"), msg("web", "m3"))
	seen := &deliveredIDs{ids: map[int64]bool{}}
	r := start(t, c, Config{Store: watched, LeaseTTL: ttl, Observer: seen,
		Destinations: map[string]*webhook.Destination{"web": dest(h)}})

	waitFor(t, "3 requests whose outcomes wait", func() bool { return h.Count() == 3 && r.unrecorded.len() == 3 })
	r.drained(t, "web")
	if !r.paused() {
		t.Fatal("not paused while outcomes wait")
	}
	c.Set(c.Now().Add(ttl + time.Second))
	if n := r.settle(t, "web"); n != 0 {
		t.Fatalf("leased %d while outcomes waited", n)
	}
	if err := r.Ingest(context.Background(), []store.Message{msg("web", "m4")}); err != nil {
		t.Fatal(err)
	}
	r.drained(t, "web")
	if got := h.Count(); got != 3 {
		t.Fatalf("%d requests while outcomes waited, want the 3 first", got)
	}

	watched.fail.Store(false)
	waitFor(t, "4 deliveries recorded delivered", func() bool { return seen.len() == 4 })
	r.drained(t, "web")
	ids := map[string]int{}
	for _, q := range h.Requests() {
		ids[bodyID(t, q.Body)]++
	}
	if len(ids) != 4 || h.Count() != 4 {
		t.Errorf("requests per messageId %v, want m1..m4 once each", ids)
	}
	for _, d := range list(t, s, store.Filter{}) {
		if d.Status != store.Delivered || d.Attempts != 1 {
			t.Errorf("delivery %d: %s after %d attempts, want delivered after 1", d.ID, d.Status, d.Attempts)
		}
	}
}

// At shutdown the completer tries once more; what it cannot record is
// counted in the log, and Run returns all the same. Its deliveries stay
// pending in the store, to be made again (at least once).
func TestUnrecordedAtShutdown(t *testing.T) {
	log := &syncbuf.Buffer{}
	s, watched, r := twoWaiting(t, slog.New(slog.NewTextHandler(log, nil)))
	before := watched.failed.Load()
	r.stop(t)
	if watched.failed.Load() == before {
		t.Error("no last try at shutdown")
	}
	if out := log.String(); !strings.Contains(out, `msg="delivery outcomes not recorded at shutdown`) || !strings.Contains(out, " n=2") {
		t.Errorf("log does not count the 2 outcomes left:\n%s", out)
	}
	for _, d := range list(t, s, store.Filter{}) {
		if d.Status != store.Pending || d.Attempts != 0 {
			t.Errorf("delivery %d: %s after %d attempts, want pending, none on record", d.ID, d.Status, d.Attempts)
		}
	}
}

// Outcomes that wait when Run stops, with the store writing again, are
// recorded: by a retry, or by the last try.
func TestUnrecordedRecordedAtShutdown(t *testing.T) {
	s, watched, r := twoWaiting(t, nil)
	watched.fail.Store(false)
	r.stop(t)
	for _, d := range list(t, s, store.Filter{}) {
		if d.Status != store.Delivered || d.Attempts != 1 {
			t.Errorf("delivery %d: %s after %d attempts, want delivered after 1", d.ID, d.Status, d.Attempts)
		}
	}
}

// bodyID is the messageId of a webhook body.
func bodyID(t *testing.T, body []byte) string {
	t.Helper()
	const key = `"messageId":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		t.Fatalf("no messageId in %s", body)
	}
	rest := body[i+len(key):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

// twoWaiting starts a forwarder (logging to logger, if not nil) over a
// store that refuses every Complete, and returns once the requests of its
// two messages are made and their outcomes wait.
func twoWaiting(t *testing.T, logger *slog.Logger) (store.Store, *watchedStore, *running) {
	t.Helper()
	c := newClock()
	s := openStore(t, c)
	watched := &watchedStore{Store: s, changed: changed(t)}
	watched.fail.Store(true)
	h := newHook(t)
	ingest(t, s, msg("web", "m1"), msg("web", "m2"))
	r := start(t, c, Config{Store: watched, Logger: logger, Destinations: map[string]*webhook.Destination{"web": dest(h)}})
	waitFor(t, "2 requests whose outcomes wait", func() bool { return h.Count() == 2 && r.unrecorded.len() == 2 })
	return s, watched, r
}

// What a lane leased ahead stays with it while outcomes wait to be
// recorded (a give-back would fail as the record did): once the store
// records again it goes out at once, not when its lease runs out.
func TestPausedKeepsWhatWasLeasedAhead(t *testing.T) {
	c := newClock()
	s := openStore(t, c)
	watched := &watchedStore{Store: s, changed: changed(t)}
	h := newHook(t, held)
	var msgs []store.Message
	for i := range 5 {
		msgs = append(msgs, msg("web", fmt.Sprint("m", i)))
	}
	ingest(t, s, msgs...)
	seen := &deliveredIDs{ids: map[int64]bool{}}
	// PerSource 2: two in flight, one leased ahead.
	r := start(t, c, Config{Store: watched, PerSource: 2, LeaseTTL: time.Minute, Observer: seen,
		Destinations: map[string]*webhook.Destination{"web": dest(h)}})
	waitFor(t, "2 in flight", func() bool { cur, _ := h.InFlight(); return cur == 2 })
	r.quiet(t, "web")
	if _, queued, _ := r.lane("web").inflight.look(); queued != 1 {
		t.Fatalf("%d leased ahead, want 1", queued)
	}
	watched.fail.Store(true)
	h.Release()
	waitFor(t, "the outcomes refused", func() bool { return r.unrecorded.len() == 2 })
	r.drained(t, "web")
	if _, queued, _ := r.lane("web").inflight.look(); queued != 1 {
		t.Fatalf("%d leased ahead while paused, want the one kept", queued)
	}
	watched.fail.Store(false)
	waitFor(t, "all 5 delivered, the clock never moved", func() bool { return seen.len() == 5 })
	if h.Count() != 5 {
		t.Errorf("%d requests, want 5", h.Count())
	}
}
