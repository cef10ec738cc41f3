package forwarder

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// StallAfter is how long a lane may go without progress while it has work
// before the forwarder says it is stalled: longer than the longest
// delivery (five endpoints, each its whole 5 s timeout), so a slow
// endpoint is no stall.
const StallAfter = 30 * time.Second

// The log lines of a stall and of its end.
const (
	msgStalled = "forwarder stalled: /readyz answers 503"
	msgMoving  = "forwarder moving again"
)

// stallCheckEvery is how often Run looks for a stall, to log it.
const stallCheckEvery = 5 * time.Second

// progress is when a lane last moved: an outcome of one of its deliveries
// on record, or a look at the store that found it had nothing to do (no
// due delivery, nothing held, or every endpoint open and no probe due: a
// dead endpoint is not a stalled forwarder). Unix nanoseconds on the
// forwarder's clock.
type progress struct{ at atomic.Int64 }

func (p *progress) mark(now time.Time) { p.at.Store(now.UnixNano()) }

func (p *progress) since() time.Time { return time.Unix(0, p.at.Load()) }

// Stalled reports since when and why the forwarder has work it has not
// moved for StallAfter: a lane whose due deliveries are neither sent nor
// recorded (outcomes the store keeps refusing, leases that keep failing,
// a store that cannot be reached). why is empty while every lane moves.
func (f *Forwarder) Stalled() (since time.Time, why string) {
	now := f.cfg.Now()
	var stuck []string
	for _, l := range f.lanes().all {
		at := l.progress.since()
		if now.Sub(at) < StallAfter {
			continue
		}
		if since.IsZero() || at.Before(since) {
			since = at
		}
		stuck = append(stuck, fmt.Sprintf("%s (%d held)", l.label(), l.inflight.holding()))
	}
	if stuck == nil {
		return time.Time{}, ""
	}
	sort.Strings(stuck)
	why = fmt.Sprintf("no delivery recorded for %v with work to do: %s", now.Sub(since).Round(time.Second), strings.Join(stuck, ", "))
	if n := f.unrecorded.len(); n > 0 {
		why += fmt.Sprintf("; %d outcomes wait for the store to record them", n)
	}
	if _, err := f.health.Unavailable(); err != nil {
		why += "; store unreachable: " + err.Error()
	}
	return since, why
}

// watchStall logs, once each, when the forwarder stalls and when it moves
// again, until ctx ends.
func (f *Forwarder) watchStall(ctx context.Context) {
	t := time.NewTicker(stallCheckEvery)
	defer t.Stop()
	stalled := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stalled = f.logStall(stalled)
	}
}

// logStall logs a change of the stall state from was, and returns it.
func (f *Forwarder) logStall(was bool) bool {
	since, why := f.Stalled()
	switch {
	case why != "" && !was:
		f.cfg.Logger.Warn(msgStalled, "why", why, "since", since)
	case why == "" && was:
		f.cfg.Logger.Info(msgMoving)
	}
	return why != ""
}
