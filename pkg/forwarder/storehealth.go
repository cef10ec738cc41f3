package forwarder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// Whether the store can be reached: the outcomes of the forwarder's own
// calls (every ingest of the collector goes through Forwarder.Ingest)
// and a cheap probe (store.Pinger) decide. While it cannot be, the lanes
// lease nothing: a lease taken over a failing link may commit with no
// answer, and its deliveries would wait out the lease, or go out twice
// once another node takes them. serve's /healthz reports it, so a load
// balancer sends the node no traffic.

// Probe timing: a probe's deadline is that of the calls it stands for
// (Config.StoreTimeout, store.CallTimeout by default): a
// server slow to answer but within it serves its callers and is healthy;
// one that cannot answer within it is not. While the store is down the
// probe runs every second, so leasing resumes within about a second of
// the heal; while up, every two seconds, so a store that fails with no
// traffic at all shows in /healthz within the period and the deadline.
const (
	probeEveryDown = 1 * time.Second
	probeEveryUp   = 2 * time.Second
)

// StoreHealth is what the forwarder knows of the store's reachability.
// The zero state is healthy; a store that is no store.Pinger is always
// healthy (a SQLite file has no link to lose).
type StoreHealth struct {
	pinger  store.Pinger // nil: no probe, always healthy
	log     *slog.Logger
	suspect chan struct{} // a call failed: probe now
	// timeout bounds a probe and a Lease (Config.StoreTimeout): on a cut
	// link nothing answers, and a lane would wait for the kernel to give
	// up on the connection. A Complete has twice as long: it is the
	// record of attempts made, and one that fails is kept and written
	// again (unrecorded), never lost, but costs the forwarder a pause.
	timeout time.Duration

	down       atomic.Bool  // err != nil, read without the lock on every call
	upAt       atomic.Int64 // when the store was last found reachable again (Unix ns)
	completing atomic.Int64 // Complete calls in flight
	mu         sync.Mutex
	err        error     // why the store is unreachable; nil: reachable
	since      time.Time // when err was first seen
	onUp       func()    // wakes the lanes
}

func newStoreHealth(st store.Store, timeout time.Duration, log *slog.Logger) *StoreHealth {
	p, _ := st.(store.Pinger)
	return &StoreHealth{pinger: p, log: log, timeout: timeout, suspect: make(chan struct{}, 1)}
}

// Unavailable reports since when and why the store cannot be reached, or
// nil while it can.
func (h *StoreHealth) Unavailable() (since time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since, h.err
}

// StoreHealth is the forwarder's view of the store (for /healthz).
func (f *Forwarder) StoreHealth() *StoreHealth { return f.health }

// storeDown reports whether the lanes must not lease now: while the store
// cannot be reached, and just after, while a Complete that was in the air
// during the outage may still be on its way. A delivery whose lease ran
// out meanwhile is due again, and leasing it before its outcome lands
// would send it a second time; within a Complete's deadline (twice
// StoreTimeout) of the heal the lanes wait for the Completes in flight to
// end.
func (f *Forwarder) storeDown() bool {
	h := f.health
	if h.down.Load() {
		return true
	}
	if h.completing.Load() == 0 {
		return false
	}
	up := h.upAt.Load()
	return up != 0 && time.Since(time.Unix(0, up)) < 2*h.timeout
}

// observe takes the outcome of a call made with ctx from start: a success
// says the store answers; a failure, unless the caller gave up, asks for a
// probe now, which decides (one reset connection is no outage).
func (h *StoreHealth) observe(ctx context.Context, start time.Time, err error) {
	if h.pinger == nil {
		return
	}
	switch {
	case err == nil:
		if h.down.Load() {
			h.set(nil, start)
		}
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded),
		errors.Is(err, store.ErrBusy), errors.Is(err, store.ErrClosed):
	default:
		select {
		case h.suspect <- struct{}{}:
		default:
		}
	}
}

// set records the finding of the probe (or of a call) made from start,
// and logs a change. A success made from before the store was found
// unreachable says nothing of it now: its answer was on its way before the
// link went, and taking it would report the store reachable again moments
// after it stopped, so it leaves the store down.
func (h *StoreHealth) set(err error, start time.Time) {
	h.mu.Lock()
	if err == nil && h.err != nil && start.Before(h.since) {
		h.mu.Unlock()
		return
	}
	was, since, onUp := h.err, h.since, h.onUp
	h.err = err
	h.down.Store(err != nil)
	if err != nil && was == nil {
		h.since = time.Now()
	}
	h.mu.Unlock()
	switch {
	case err != nil && was == nil:
		h.log.Warn("store unreachable: leasing paused, /healthz answers 503", "err", err)
	case err == nil && was != nil:
		h.upAt.Store(time.Now().UnixNano())
		h.log.Info("store reachable again: leasing resumed", "down", time.Since(since).Round(time.Millisecond))
		if onUp != nil {
			onUp()
		}
	}
}

// start runs the probe until ctx ends, waking the lanes with onUp when
// the store is reachable again; wait returns once the probe has stopped.
func (h *StoreHealth) start(ctx context.Context, onUp func()) (wait func()) {
	h.mu.Lock()
	h.onUp = onUp
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { defer close(done); h.probe(ctx) }()
	return func() { <-done }
}

// probe runs until ctx ends: a Ping every probeEveryUp while the store
// is reachable, every probeEveryDown while it is not, and at once after a
// failed call.
func (h *StoreHealth) probe(ctx context.Context) {
	if h.pinger == nil {
		return
	}
	timer := time.NewTimer(probeEveryUp)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.suspect:
		case <-timer.C:
		}
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, h.timeout)
		err := h.pinger.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			// Reached, but the server refused the probe (a login
			// refused, say): not a link the lanes can wait out either.
			err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		h.set(err, start)
		next := probeEveryUp
		if err != nil {
			next = probeEveryDown
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// watched is the store as the forwarder calls it: its calls' outcomes go
// to the health, and a Lease, a Release and a Complete have deadlines.
type watched struct {
	store.Store
	h *StoreHealth
}

func (w watched) IngestLeased(ctx context.Context, msgs []store.Message, lease store.IngestLease) ([]store.Delivery, error) {
	start := time.Now()
	ds, err := w.Store.IngestLeased(ctx, msgs, lease)
	w.h.observe(ctx, start, err)
	return ds, err
}

func (w watched) Lease(ctx context.Context, r store.LeaseRequest) ([]store.Delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, w.h.timeout)
	defer cancel()
	start := time.Now()
	ds, err := w.Store.Lease(ctx, r)
	w.h.observe(ctx, start, err)
	return ds, err
}

// Release has a Lease's deadline: it is called from the lanes and from
// delivery goroutines, which must not wait on a link that does not answer.
func (w watched) Release(ctx context.Context, source string, prefixes []string, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, w.h.timeout)
	defer cancel()
	start := time.Now()
	n, err := w.Store.Release(ctx, source, prefixes, now)
	w.h.observe(ctx, start, err)
	return n, err
}

func (w watched) Complete(ctx context.Context, cs []store.Completion) error {
	w.h.completing.Add(1)
	defer w.h.completing.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, 2*w.h.timeout)
	defer cancel()
	start := time.Now()
	err := w.Store.Complete(ctx, cs)
	w.h.observe(ctx, start, err)
	return err
}
