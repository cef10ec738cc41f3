package forwarder

import (
	"context"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// heldError starts the last error of a delivery that waited, without a
// request, because every endpoint of its source was open; Release finds
// such deliveries by it.
const heldError = "waiting: every endpoint is open"

// persistTimeout bounds the store write of one transition.
const persistTimeout = 5 * time.Second

// mode says what the lane may lease for at now: for every endpoint (one
// is closed), for a probe (all are open, b's probe is due), or nothing.
func (l *lane) mode(now time.Time) (mode, *breaker) {
	if l.breakers == nil {
		return modeAll, nil
	}
	var probe *breaker
	for _, b := range l.breakers {
		ok, pr := b.ready(now)
		if ok && !pr {
			return modeAll, nil
		}
		if ok && probe == nil {
			probe = b
		}
	}
	if probe != nil {
		return modeProbe, probe
	}
	return modeNone, nil
}

// closings is how many times the lane's endpoints have closed, together.
func (l *lane) closings() uint64 {
	var n uint64
	for _, b := range l.breakers {
		n += b.closings()
	}
	return n
}

// gate is what the endpoints' health decided for one delivery: which
// endpoints it calls (as probes or not) and which it skips.
type gate struct {
	now     time.Time
	probes  []bool // by breaker (l.breakers): admitted as its probe
	allowed []int  // endpoints called, in order
	skipped []int  // endpoints skipped; nil when none
	dest    *webhook.Destination
	closes  uint64 // l.closings() before the decision
}

// gate admits d's requests, once per breaker, and so endpoint by endpoint.
// probe is the breaker the lane admitted d to probe, if any.
func (f *Forwarder) gate(l *lane, probe *breaker) *gate {
	g := &gate{now: f.cfg.Now()}
	if l.breakers == nil {
		return g
	}
	g.closes = l.closings()
	ok := make([]bool, len(l.breakers))
	g.probes = make([]bool, len(l.breakers))
	for j, b := range l.breakers {
		if b == probe {
			ok[j], g.probes[j] = true, true
			continue
		}
		var changed bool
		ok[j], g.probes[j], changed = b.admit(g.now)
		if changed {
			f.transition(l, b)
		}
	}
	for i, j := range l.breakerOf {
		if ok[j] {
			g.allowed = append(g.allowed, i)
		} else {
			g.skipped = append(g.skipped, i)
			if f.endpoints != nil {
				f.endpoints.Skipped(l.source, l.breakers[j].url)
			}
		}
	}
	if g.skipped != nil && len(g.allowed) > 0 {
		d := *l.dest // the signing settings too
		d.Endpoints = nil
		g.dest = &d
		for _, i := range g.allowed {
			g.dest.Endpoints = append(g.dest.Endpoints, l.dest.Endpoints[i])
		}
	}
	return g
}

// allSkipped reports that every endpoint was skipped: the delivery is
// held (see hold).
func (g *gate) allSkipped() bool { return g.probes != nil && len(g.allowed) == 0 }

// remap turns an attempt's endpoint index in g.dest into the configured one.
func (g *gate) remap(a *webhook.Attempt) {
	if g.skipped != nil {
		a.Endpoint = g.allowed[a.Endpoint]
	}
}

// reportHealth tells each endpoint's breaker how its request ended, and
// gives back probes admitted but not made.
func (f *Forwarder) reportHealth(l *lane, g *gate, res webhook.Result) {
	if l.breakers == nil {
		return
	}
	now := f.cfg.Now()
	used := make([]bool, len(l.breakers))
	for _, a := range res.Attempts {
		j := l.breakerOf[a.Endpoint]
		used[j] = true
		if changed, _ := l.breakers[j].report(now, a, g.probes[j]); changed {
			f.transition(l, l.breakers[j])
		}
	}
	for j, b := range l.breakers {
		if g.probes[j] && !used[j] && b.unused(now) {
			f.transition(l, b)
		}
	}
}

// hold records that d waited because every endpoint was open: no request,
// no attempt spent. It is scheduled for the end of its retry window (dead
// then if its endpoints are still open) and made due again when one
// closes (release). A delivery never attempted waits a window from now.
func (f *Forwarder) hold(l *lane, d store.Delivery, c store.Completion, g *gate, fresh bool) {
	window := f.cfg.Policy.Window
	if window <= 0 {
		window = webhook.DefaultWindow
	}
	c.Attempts, c.FirstAttempt = d.Attempts, d.FirstAttempt
	urls := make([]string, 0, len(l.dest.Endpoints))
	for _, ep := range l.dest.Endpoints {
		urls = append(urls, ep.Display())
	}
	c.LastError = heldError + " (" + strings.Join(urls, ", ") + ")"
	switch {
	case d.FirstAttempt.IsZero():
		c.Status, c.NextAttempt = store.Pending, g.now.Add(window)
	case g.now.Before(d.FirstAttempt.Add(window)):
		c.Status, c.NextAttempt = store.Pending, d.FirstAttempt.Add(window)
	default:
		c.Status = store.Dead
	}
	// On record at once, not through the completer: the lane's next pass
	// may release held deliveries for a probe, and this one must be among
	// them. record releases again when an endpoint closed while this was
	// decided.
	x := []finishing{{l: l, c: c, closes: g.closes, fresh: fresh}}
	f.record(x, f.cfg.Store.Complete(f.calls, []store.Completion{c}))
}

// transition records b's state: the observer's gauge and the store's row,
// in the order they happen (each write takes the state as it is when its
// turn comes). When b closed, what waited on it is released.
func (f *Forwarder) transition(l *lane, b *breaker) {
	b.persistMu.Lock()
	st := f.persistLocked(b)
	b.persistMu.Unlock()
	if st == store.EndpointClosed {
		f.cfg.Logger.Info("endpoint closed", "source", l.source, "url", b.url)
		f.release(l)
	} else if st == store.EndpointOpen {
		f.cfg.Logger.Debug("endpoint open", "source", l.source, "url", b.url)
	}
}

func (f *Forwarder) persist(b *breaker) {
	b.persistMu.Lock()
	defer b.persistMu.Unlock()
	f.persistLocked(b)
}

func (f *Forwarder) persistLocked(b *breaker) store.Health {
	st := b.snapshot(f.cfg.Owner, f.cfg.Now())
	if f.endpoints != nil {
		f.endpoints.EndpointState(st.Source, st.URL, st.State)
	}
	ctx, cancel := context.WithTimeout(f.calls, persistTimeout)
	defer cancel()
	if err := f.cfg.Store.SaveEndpoint(ctx, st); err != nil {
		f.cfg.Logger.Warn("record endpoint state", "source", st.Source, "url", st.URL, "state", st.State, "err", err)
	}
	return st.State
}

// release makes due now the deliveries of l's source that waited on its
// endpoints: held ones, and those whose last failure was at an endpoint
// that is closed now. The lane is woken before (what is due already goes)
// and after.
func (f *Forwarder) release(l *lane) {
	l.poke()
	prefixes := []string{heldError}
	for _, b := range l.breakers {
		if ok, probe := b.ready(f.cfg.Now()); ok && !probe {
			prefixes = append(prefixes, b.url+": ")
		}
	}
	n, err := f.cfg.Store.Release(f.calls, l.source, prefixes, f.cfg.Now())
	if err != nil {
		f.cfg.Logger.Error("release deliveries", "source", l.source, "err", err)
	}
	if n > 0 {
		f.cfg.Logger.Info("deliveries due again", "source", l.source, "n", n)
	}
	// Release is the source's: its other destinations' may be due too.
	f.pokeSource(l.source)
}
