package forwarder

import (
	"cmp"
	"slices"

	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/store"
)

// laneSet is every lane, one per source and destination. It is replaced
// whole (Reconfigure), never changed, so readers take it without a lock.
type laneSet struct {
	all      []*lane // by source, then destination
	bySource map[string][]*lane
}

func newLaneSet(ls []*lane) *laneSet {
	slices.SortFunc(ls, func(a, b *lane) int {
		return cmp.Or(cmp.Compare(a.source, b.source), cmp.Compare(a.name, b.name))
	})
	s := &laneSet{all: ls, bySource: map[string][]*lane{}}
	for _, l := range ls {
		s.bySource[l.source] = append(s.bySource[l.source], l)
	}
	return s
}

// find is the lane of source's destination name, or nil.
func (s *laneSet) find(source, name string) *lane {
	for _, l := range s.bySource[source] {
		if l.name == name {
			return l
		}
	}
	return nil
}

// lanes is the forwarder's lanes now.
func (f *Forwarder) lanes() *laneSet { return f.set.Load() }

// newLane makes the lane of d. Its breakers are those of its source's
// other lanes for the endpoints they share (known by how an endpoint is
// shown, never by the credentials its URL may carry: in metrics, logs and
// the store's endpoint states), so that an endpoint has one health
// whichever destination calls it, as the store keeps one state per source
// and URL.
func (f *Forwarder) newLane(d *destination.Destination, byURL map[string]*breaker) *lane {
	l := &lane{source: d.Source, name: d.Name, route: d, dest: &d.Webhook, wake: make(chan struct{}, 1),
		inflight: inflight{tokens: f.tokens, perSource: f.cfg.PerSource}}
	l.paused.Store(d.Paused)
	switch {
	case d.Batching():
		// Its slots are batches' messages: a few batches at once.
		l.inflight.perSource = d.Batch.Size * batchesInFlight
	case d.Rate.PerSecond > 0:
		// A paced delivery waits for its turn in its slot: no more slots
		// than a second's turns, so that none waits much longer.
		l.inflight.perSource = max(1, min(f.cfg.PerSource, d.Rate.Burst+int(d.Rate.PerSecond+0.999)))
	}
	if d.Rate.PerSecond > 0 {
		l.pace = f.newPace(d)
	}
	if !f.cfg.Breaker.Disabled {
		for _, ep := range d.Webhook.Endpoints {
			name := ep.Display()
			b := byURL[name]
			if b == nil {
				b = newBreaker(d.Source, name, f.cfg.Breaker)
				byURL[name] = b
				if f.endpoints != nil {
					f.endpoints.EndpointState(d.Source, name, store.EndpointClosed)
				}
			}
			l.addBreaker(b)
		}
	}
	return l
}

// pokeSource wakes every lane of source.
func (f *Forwarder) pokeSource(source string) {
	for _, l := range f.lanes().bySource[source] {
		l.poke()
	}
}

// label is how logs and the stall report name l: its source, and its
// destination unless that is the source's webhooks block.
func (l *lane) label() string {
	if l.name == destination.WebhooksName {
		return l.source
	}
	return l.source + "/" + l.name
}

// plain reports whether l sends each message on its own, as fast as its
// endpoints take them: what Ingest may start at once (fresh).
func (l *lane) plain() bool {
	return !l.route.Batching() && l.pace == nil && !l.paused.Load()
}

// Pause stops source's destination from sending: it leases nothing and
// Ingest starts nothing for it; what is in flight finishes, what it
// leased ahead goes back, and every delivery waits in the store. It
// reports false for an unknown destination.
func (f *Forwarder) Pause(source, name string) bool {
	l := f.lanes().find(source, name)
	if l == nil {
		return false
	}
	if !l.paused.Swap(true) {
		f.giveBackAhead(l)
		f.cfg.Logger.Info("destination paused", "source", source, "destination", name)
	}
	return true
}

// Resume lets a paused destination send again.
func (f *Forwarder) Resume(source, name string) bool {
	l := f.lanes().find(source, name)
	if l == nil {
		return false
	}
	if l.paused.Swap(false) {
		f.cfg.Logger.Info("destination resumed", "source", source, "destination", name)
		l.progress.mark(f.cfg.Now())
	}
	l.poke()
	return true
}

// DestinationObserver is an Observer that is also told each delivery's
// outcome with its destination (metrics by destination).
type DestinationObserver interface {
	Settled(source, destination string, status store.Status, retry bool)
}

// DestinationState is a destination as this forwarder runs it.
type DestinationState struct {
	Source, Name string
	Paused       bool
	// Holding is how many of its deliveries this process holds now
	// (being sent, recorded, or leased ahead).
	Holding int
}

// Destinations returns every destination's state, by source and name.
func (f *Forwarder) Destinations() []DestinationState {
	var out []DestinationState
	for _, l := range f.lanes().all {
		out = append(out, DestinationState{Source: l.source, Name: l.name, Paused: l.paused.Load(), Holding: l.inflight.holding()})
	}
	return out
}

// lane is source's webhooks lane (tests).
func (f *Forwarder) lane(source string) *lane {
	return f.lanes().find(source, destination.WebhooksName)
}
