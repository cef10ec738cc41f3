package forwarder

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/retry"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// Defaults of BreakerConfig.
const (
	// DefaultThreshold is how many retryable failures in a row open an
	// endpoint.
	DefaultThreshold = 5
	// DefaultProbeMax caps the time between probes of an open endpoint.
	// Probes follow the retry schedule (about 1 s after opening, doubling,
	// jittered, Retry-After honoured) but stop doubling here: one request
	// every few seconds costs a dead endpoint nothing, and it bounds how
	// long a recovered endpoint goes unnoticed. Each message's own
	// schedule (doubling to 10 minutes, dead after 4 h) is unchanged.
	DefaultProbeMax = 2 * time.Second
)

// BreakerConfig configures the endpoints' health state (a circuit breaker
// per source and URL). The zero value is the default breaker.
type BreakerConfig struct {
	// Disabled turns the breaker off: every due delivery calls every URL.
	Disabled bool
	// Threshold is the number of retryable failures in a row (timeouts,
	// connection errors, 5xx, 408, 429) that opens an endpoint.
	Threshold int
	// ProbeInitial is the wait before the first probe (the retry policy's
	// Initial when zero), ProbeMax the most between two (DefaultProbeMax
	// when zero), Jitter the spread of each (the policy's when zero).
	ProbeInitial, ProbeMax time.Duration
	Jitter                 float64
	// Rand returns a number in [0, 1); math/rand/v2 when nil.
	Rand func() float64
}

func (c BreakerConfig) withDefaults(p webhook.Policy) BreakerConfig {
	if c.Threshold <= 0 {
		c.Threshold = DefaultThreshold
	}
	if c.ProbeInitial <= 0 {
		c.ProbeInitial = p.Initial
	}
	if c.ProbeInitial <= 0 {
		c.ProbeInitial = webhook.DefaultInitial
	}
	if c.ProbeMax <= 0 {
		c.ProbeMax = DefaultProbeMax
	}
	c.ProbeMax = max(c.ProbeMax, c.ProbeInitial)
	if c.Jitter == 0 {
		c.Jitter = p.Jitter
	}
	if c.Jitter == 0 {
		c.Jitter = webhook.DefaultJitter
	}
	if c.Jitter < 0 {
		c.Jitter = 0
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// breaker is the health state of one endpoint of one source, in this
// process:
//
//   - closed: requests go through; Threshold retryable failures in a row
//     open it.
//   - open: deliveries skip the endpoint without a request. Once probeAt
//     has come, the next delivery that reaches it is let through as the
//     probe and the endpoint is half-open.
//   - half-open: that one probe is in flight; every other delivery skips
//     the endpoint. A retryable failure opens it again with the next probe
//     a step further along the schedule; any answer that is not a
//     retryable failure (2xx, or a final 4xx: the endpoint answers) closes
//     it.
//
// A request that was already under way when the endpoint opened reports
// too: a success closes the endpoint, a failure changes nothing. It is
// safe for concurrent use; now is always passed in, so a test drives it
// with a fake clock.
type breaker struct {
	source, url string
	cfg         BreakerConfig

	mu      sync.Mutex
	state   store.Health
	fails   int       // retryable failures in a row
	step    int       // probes failed since it opened, +1: the schedule's position
	since   time.Time // when it entered state
	probeAt time.Time // when open: the earliest next probe
	lastErr string
	closes  uint64 // how many times it closed

	persistMu sync.Mutex // orders the store writes of its transitions
}

func newBreaker(source, url string, cfg BreakerConfig) *breaker {
	return &breaker{source: source, url: url, cfg: cfg, state: store.EndpointClosed}
}

// admit asks to send a request to the endpoint at now: yes when closed;
// when open and a probe is due, yes as the probe (it is half-open then);
// otherwise no. changed reports a transition.
func (b *breaker) admit(now time.Time) (ok, probe, changed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case store.EndpointClosed:
		return true, false, false
	case store.EndpointOpen:
		if !now.Before(b.probeAt) {
			b.state, b.since = store.EndpointHalfOpen, now
			return true, true, true
		}
	}
	return false, false, false
}

// mode is what a lane may lease for, given its endpoints' states.
type mode int

const (
	modeNone  mode = iota // every endpoint open, no probe due: lease nothing
	modeProbe             // every endpoint open, a probe is due: lease one
	modeAll               // an endpoint is closed
)

// ready reports whether the endpoint takes any request at now, and whether
// that would be a probe; it changes nothing.
func (b *breaker) ready(now time.Time) (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case store.EndpointClosed:
		return true, false
	case store.EndpointOpen:
		return !now.Before(b.probeAt), true
	}
	return false, false
}

// unused gives back a probe admitted but not made (an earlier endpoint
// answered first, or the delivery was stopped): the endpoint is open with
// its probe due, so the next delivery makes it.
func (b *breaker) unused(now time.Time) (changed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != store.EndpointHalfOpen {
		return false
	}
	b.state, b.since = store.EndpointOpen, now
	return true
}

// postpone moves a due probe that found no delivery to make it with one
// step along the schedule (no request, so nothing was learnt).
func (b *breaker) postpone(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == store.EndpointOpen && !now.Before(b.probeAt) {
		b.probeAt = now.Add(b.delay(b.step))
	}
}

// report tells the breaker how a request admitted at its state ended;
// probe says it was admitted as the probe. closed reports a transition
// to closed.
func (b *breaker) report(now time.Time, a webhook.Attempt, probe bool) (changed, closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	probe = probe && b.state == store.EndpointHalfOpen
	switch a.Outcome {
	case webhook.Interrupted:
		if probe {
			b.state, b.since = store.EndpointOpen, now
			return true, false
		}
		return false, false
	case webhook.Retryable:
		b.fails++
		b.lastErr = describe(&a)
		switch {
		case probe:
			b.step++
			b.open(now, a.RetryAfter)
			return true, false
		case b.state == store.EndpointClosed && b.fails >= b.cfg.Threshold:
			b.step = 1
			b.open(now, a.RetryAfter)
			return true, false
		case b.state != store.EndpointClosed && a.RetryAfter > 0:
			// A request under way when it opened: only a longer wait
			// asked for changes the schedule.
			if at := now.Add(a.RetryAfter); at.After(b.probeAt) {
				b.probeAt = at
			}
		}
		return false, false
	}
	// Delivered, or a final answer: the endpoint answers.
	b.fails = 0
	if b.state == store.EndpointClosed {
		return false, false
	}
	b.state, b.since, b.probeAt, b.step, b.lastErr = store.EndpointClosed, now, time.Time{}, 0, ""
	b.closes++
	return true, true
}

func (b *breaker) open(now time.Time, retryAfter time.Duration) {
	b.state, b.since = store.EndpointOpen, now
	b.probeAt = now.Add(max(b.delay(b.step), retryAfter))
}

// delay is the wait before probe number step (1-based), jittered.
func (b *breaker) delay(step int) time.Duration {
	d := retry.Exponential(b.cfg.ProbeInitial, b.cfg.ProbeMax, max(step, 1))
	if j := b.cfg.Jitter; j > 0 {
		d = time.Duration(float64(d) * (1 + j*(2*b.cfg.Rand()-1)))
	}
	return d
}

// closings is how many times the endpoint has closed.
func (b *breaker) closings() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// snapshot is the state as the store records it.
func (b *breaker) snapshot(node string, now time.Time) store.EndpointState {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := store.EndpointState{Source: b.source, URL: b.url, State: b.state, Failures: b.fails, Since: b.since,
		Node: node, LastError: b.lastErr, UpdatedAt: now}
	if b.state != store.EndpointClosed {
		st.NextProbe = b.probeAt
	}
	return st
}

// Gauge is the state as a number: 0 closed, 1 open, 2 half-open.
func Gauge(h store.Health) float64 {
	switch h {
	case store.EndpointOpen:
		return 1
	case store.EndpointHalfOpen:
		return 2
	}
	return 0
}

// EndpointObserver is an Observer that is also told about endpoint health:
// each transition of an endpoint (and every endpoint's state, closed, when
// the forwarder is made), and each request skipped because its endpoint
// was open.
type EndpointObserver interface {
	EndpointState(source, url string, state store.Health)
	Skipped(source, url string)
}

// nextProbe is when the next probe is due; zero unless open.
func (b *breaker) nextProbe() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != store.EndpointOpen {
		return time.Time{}
	}
	return b.probeAt
}

// Health returns the live health of every endpoint in this process, by
// source name and then in configured order (a URL configured twice once):
// what the breakers hold now, with the failures counted since the last
// transition, rather than the last transition the store recorded. None
// when the breaker is disabled.
func (f *Forwarder) Health() []store.EndpointState {
	now := f.cfg.Now()
	var out []store.EndpointState
	for _, b := range f.lanes().breakers() {
		out = append(out, b.snapshot(f.cfg.Owner, now))
	}
	return out
}

// An endpoint's one breaker may appear several times: at each endpoint of
// a lane with its URL, and in each lane of its source that calls it.
// addOnce is the one place that keeps it once: a lane's breakers, and
// every lane's, hold each breaker once, in the order first met.

// addOnce returns bs with b appended unless it is there already, and b's
// index in it.
func addOnce(bs []*breaker, b *breaker) ([]*breaker, int) {
	if i := slices.Index(bs, b); i >= 0 {
		return bs, i
	}
	return append(bs, b), len(bs)
}

// addBreaker gives the lane's next endpoint the health b.
func (l *lane) addBreaker(b *breaker) {
	var i int
	l.breakers, i = addOnce(l.breakers, b)
	l.breakerOf = append(l.breakerOf, i)
}

// breakers is every lane's breakers, each once: by source, then in the
// order its lanes meet them.
func (s *laneSet) breakers() []*breaker {
	var all []*breaker
	for _, l := range s.all {
		for _, b := range l.breakers {
			all, _ = addOnce(all, b)
		}
	}
	return all
}
