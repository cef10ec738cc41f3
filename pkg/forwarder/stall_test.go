package forwarder

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// A forwarder whose outcomes the store keeps refusing has work it cannot
// move: after StallAfter it says so (Stalled, one WARN line), and once the
// store records them it moves again (one INFO line).
func TestStalledWhileOutcomesWait(t *testing.T) {
	c := newClock()
	s := openStore(t, c)
	watched := &watchedStore{Store: s, changed: changed(t)}
	watched.fail.Store(true)
	h := newHook(t)
	ingest(t, s, msg("web", "m1"), msg("web", "m2"))
	logs := newLogCount()
	seen := &deliveredIDs{ids: map[int64]bool{}}
	r := start(t, c, Config{Store: watched, Observer: seen, Logger: slog.New(logs),
		Destinations: map[string]*webhook.Destination{"web": dest(h)}})
	waitFor(t, "2 requests whose outcomes wait", func() bool { return h.Count() == 2 && r.unrecorded.len() == 2 })

	c.Set(c.Now().Add(StallAfter - time.Second))
	if _, why := r.Stalled(); why != "" {
		t.Fatalf("stalled %v before StallAfter: %s", StallAfter-time.Second, why)
	}
	c.Set(c.Now().Add(2 * time.Second))
	since, why := r.Stalled()
	if why == "" || !strings.Contains(why, "web (2 held)") || !strings.Contains(why, "2 outcomes wait") || !since.Equal(t0) {
		t.Fatalf("Stalled = %v, %q; want since the start, naming web and the 2 outcomes", since, why)
	}
	if !r.logStall(false) || !r.logStall(true) || logs.count(msgStalled) != 1 {
		t.Fatalf("%d stall warnings, want 1", logs.count(msgStalled))
	}

	watched.fail.Store(false)
	waitFor(t, "2 deliveries recorded", func() bool { return seen.len() == 2 })
	if _, why := r.Stalled(); why != "" {
		t.Fatalf("still stalled once the outcomes were recorded: %s", why)
	}
	if r.logStall(true) || logs.count(msgMoving) != 1 {
		t.Fatalf("%d lines saying it moves again, want 1", logs.count(msgMoving))
	}
}

// Work that waits on others is no stall: a lane with nothing due, and a
// lane whose only endpoint is open (its deliveries wait for a probe) or
// failing (they wait for their retries), however long.
func TestNotStalledWaitingOnOthers(t *testing.T) {
	c := newClock()
	s := openStore(t, c)
	dead := newHook(t, webhooktest.Statuses(503, 503, 503, 503, 503, 503, 503, 503, 503, 503))
	idle := newHook(t)
	for i := range 5 {
		ingest(t, s, msg("dead", "d"+string(rune('0'+i))))
	}
	r := start(t, c, Config{Store: s, Breaker: BreakerConfig{Threshold: 3},
		Policy:       webhook.Policy{Initial: time.Minute},
		Destinations: map[string]*webhook.Destination{"dead": dest(dead), "idle": dest(idle)}})
	waitFor(t, "the dead endpoint's failures on record", func() bool {
		return dead.Count() >= 3 && r.lane("dead").inflight.holding() == 0
	})
	for range 4 {
		c.Set(c.Now().Add(StallAfter / 2))
		r.settle(t, "idle")
		r.settle(t, "dead")
		if _, why := r.Stalled(); why != "" {
			t.Fatalf("stalled at %v waiting on an endpoint or on nothing: %s", c.Now().Sub(t0), why)
		}
	}
}
