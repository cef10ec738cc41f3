package forwarder

import (
	"context"
	"time"

	"github.com/evfwd/evfwd/pkg/destination"
)

// laneRun is a lane's goroutine while Run runs: its own context, ended
// when Reconfigure removes or replaces the lane, and its end.
type laneRun struct {
	stop context.CancelFunc
	done chan struct{}
}

// runState is what Reconfigure needs of a running Run: f.mu guards it.
type runState struct {
	ctx, deliverCtx context.Context
	lanes           map[*lane]*laneRun
}

// buildLanes makes a lane for each destination, keeping the lanes of old
// (nil: none) whose destination did not change, and the breakers of the
// endpoints old's lanes of a source share with the new ones.
func (f *Forwarder) buildLanes(routes []*destination.Destination, old *laneSet) *laneSet {
	breakers := map[string]map[string]*breaker{} // by source, then endpoint
	if old != nil {
		for _, l := range old.all {
			byURL := breakers[l.source]
			if byURL == nil {
				byURL = map[string]*breaker{}
				breakers[l.source] = byURL
			}
			for _, b := range l.breakers {
				byURL[b.url] = b
			}
		}
	}
	ls := make([]*lane, 0, len(routes))
	for _, d := range routes {
		if old != nil {
			if l := old.find(d.Source, d.Name); l != nil && l.route.Same(d) {
				ls = append(ls, l)
				continue
			}
		}
		byURL := breakers[d.Source]
		if byURL == nil {
			byURL = map[string]*breaker{}
			breakers[d.Source] = byURL
		}
		ls = append(ls, f.newLane(d, byURL))
	}
	return newLaneSet(ls)
}

// startLanes starts every lane's goroutine; Run calls it once.
func (f *Forwarder) startLanes(ctx, deliverCtx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.run = &runState{ctx: ctx, deliverCtx: deliverCtx, lanes: map[*lane]*laneRun{}}
	for _, l := range f.lanes().all {
		f.startLaneLocked(l)
	}
}

func (f *Forwarder) startLaneLocked(l *lane) {
	ctx, stop := context.WithCancel(f.run.ctx)
	r := &laneRun{stop: stop, done: make(chan struct{})}
	f.run.lanes[l] = r
	l.progress.mark(f.cfg.Now())
	// Read under f.mu: stopLanes clears f.run while the goroutine may
	// still be starting.
	deliverCtx := f.run.deliverCtx
	go func() {
		defer close(r.done)
		f.runLane(ctx, deliverCtx, l)
	}()
}

// stopLanes waits for every lane's goroutine to end (Run's context has).
func (f *Forwarder) stopLanes() {
	f.mu.Lock()
	runs := f.run.lanes
	f.run = nil
	f.mu.Unlock()
	for _, r := range runs {
		r.stop()
		<-r.done
	}
}

// Reconfigured is what Reconfigure changed.
type Reconfigured struct {
	Added, Changed, Removed []string // "source/destination"
	// Cancelled counts, by removed destination, the pending deliveries
	// it cancelled.
	Cancelled map[string]int
}

// drainWait is how often Reconfigure looks whether a removed lane's
// deliveries in flight are on record.
const drainWait = 10 * time.Millisecond

// Reconfigure makes routes the forwarder's destinations while it runs (or
// before): added ones start at once, changed ones start again with their
// new settings, removed ones stop. What a lane that stops has in flight
// finishes and is recorded as always; what it leased ahead goes back.
// Then the pending deliveries of each removed destination are cancelled
// (store.CancelPending), so they do not wait for a destination that is
// gone. Calls are not concurrent (serve's reload holds its own lock).
func (f *Forwarder) Reconfigure(ctx context.Context, routes []*destination.Destination) (Reconfigured, error) {
	old := f.lanes()
	next := f.buildLanes(routes, old)
	var r Reconfigured
	kept := map[*lane]bool{}
	for _, l := range next.all {
		kept[l] = true
		switch o := old.find(l.source, l.name); {
		case o == nil:
			r.Added = append(r.Added, l.source+"/"+l.name)
		case o != l:
			r.Changed = append(r.Changed, l.source+"/"+l.name)
		}
	}
	var retired, removed []*lane
	for _, l := range old.all {
		if kept[l] {
			continue
		}
		retired = append(retired, l)
		if next.find(l.source, l.name) == nil {
			removed = append(removed, l)
			r.Removed = append(r.Removed, l.source+"/"+l.name)
		}
	}
	f.set.Store(next)
	for _, l := range next.all {
		if !old.has(l) {
			f.warnShortLease(l)
		}
	}
	var waits []chan struct{}
	f.mu.Lock()
	if f.run != nil {
		for _, l := range retired {
			if run := f.run.lanes[l]; run != nil {
				run.stop()
				waits = append(waits, run.done)
				delete(f.run.lanes, l)
			}
		}
		for _, l := range next.all {
			if f.run.lanes[l] == nil {
				f.startLaneLocked(l)
			}
		}
	}
	f.mu.Unlock()
	for _, w := range waits {
		<-w
	}
	for _, l := range retired {
		f.giveBackAhead(l)
	}
	// A removed lane's deliveries in flight end as always (within the
	// grace period) before the rest of its deliveries are cancelled.
	deadline := time.Now().Add(f.cfg.Grace)
	for _, l := range removed {
		for l.inflight.holding() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(drainWait)
		}
		n, err := f.cfg.Store.CancelPending(ctx, l.source, l.name, "destination removed from the configuration", f.cfg.Now())
		if r.Cancelled == nil {
			r.Cancelled = map[string]int{}
		}
		r.Cancelled[l.source+"/"+l.name] = n
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// has reports whether l is one of s's lanes.
func (s *laneSet) has(l *lane) bool { return s.find(l.source, l.name) == l }
