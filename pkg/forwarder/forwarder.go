// Package forwarder moves deliveries from the store to webhook endpoints:
// it leases due deliveries, sends each through pkg/webhook, records every
// attempt, and stores what follows — delivered, the next attempt from the
// retry policy, failed, or dead once the retry window is over.
//
// Each source has its own lane with its own bound on deliveries in flight,
// under a bound for the whole process, so a slow or dead endpoint fills only
// its own lane and never holds back other sources' deliveries.
//
// Fresh messages skip the queue: Ingest stores them with their first
// deliveries already leased to this process (store.IngestLeased) and sends
// those at once, within a second bound per lane, so that a new event goes
// out as soon as it is committed even while a backlog drains, and without
// a Lease round trip. What does not fit waits in the store for a lane to
// lease it, as every delivery did before.
//
// Each endpoint (source and URL) has a health state in this process, a
// circuit breaker (breaker.go): after Threshold retryable failures in a row
// it is open, deliveries skip it without a request (and go to the next URL),
// and one probe at a time tests it on the retry schedule. A delivery whose
// URLs are all open waits without spending an attempt ("held"). When a
// probe succeeds the endpoint closes and what waited on it is made due at
// once (store.Release), so the backlog drains at full speed. Transitions
// are recorded in the store (store.EndpointState) for evfwd deliveries.
package forwarder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// Defaults of Config.
const (
	DefaultMaxInFlight = 256
	DefaultPerSource   = 64
	// DefaultLeaseTTL outlasts the longest delivery: five endpoints that
	// each use their whole attempt deadline.
	DefaultLeaseTTL = 2 * time.Minute
	DefaultPoll     = 250 * time.Millisecond
	DefaultGrace    = 10 * time.Second
)

// stopSlack is how long past its grace period a stopping forwarder may
// still wait for the store: to record the outcomes of the deliveries the
// grace period let finish, and give back what it leased ahead. What the
// store has not taken by then is made again after a restart (at least
// once), rather than hold the process on a link that does not answer.
const stopSlack = 500 * time.Millisecond

// workerIdle is how long a delivery's goroutine waits for the next one
// before it ends.
const workerIdle = 2 * time.Second

// Observer is told what the forwarder does (metrics, the inspector). Calls
// come from many goroutines.
type Observer interface {
	// Attempt reports one request of delivery (its store id) as it ends.
	// Its Then is decided: the last attempt of a delivery that failed
	// says ThenRetry (with RetryAt) or ThenGiveUp, as the delivery's
	// completion will.
	Attempt(source string, delivery int64, a webhook.Attempt)
	// Finished reports the status a delivery took after one delivery
	// attempt; retry is true when another attempt is scheduled.
	Finished(source string, delivery int64, status store.Status, retry bool)
}

// Config configures a Forwarder.
type Config struct {
	Store  store.Store
	Sender *webhook.Sender
	// Destinations maps each source with a webhooks block to it: the
	// destination named "webhooks" (destination.Webhooks).
	Destinations map[string]*webhook.Destination
	// Routes are more destinations, each of its source (Source) and
	// with its own lane. Deliveries of a destination in neither stay
	// pending.
	Routes []*destination.Destination
	// Policy is the retry schedule; its Now defaults to Config.Now.
	Policy webhook.Policy
	// Owner names this process's leases; unique per process.
	Owner       string
	MaxInFlight int           // deliveries in flight in total
	PerSource   int           // deliveries in flight per source
	LeaseTTL    time.Duration // how long a lease lasts
	Poll        time.Duration // how often an idle lane looks for due work
	// Grace is how long Run waits, after its context ends, for deliveries
	// in flight before it interrupts them (they stay pending).
	Grace  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
	// Observer is told what happens; when it is an EndpointObserver it is
	// told about endpoint health too.
	Observer Observer
	// Breaker configures the endpoints' health state.
	Breaker BreakerConfig
	// StoreTimeout bounds a Lease and the store's probe, and twice it a
	// Complete (default store.CallTimeout): see StoreHealth.
	StoreTimeout time.Duration
}

// Forwarder runs the lanes; make one with New and call Run.
type Forwarder struct {
	cfg Config
	// set is every lane (lanes.go); Reconfigure replaces it.
	set atomic.Pointer[laneSet]
	// tokens bound the deliveries in flight in the process; every lane's
	// inflight shares them, and Run waits for them all back.
	tokens tokens
	// workers run the deliveries, on goroutines kept between them.
	workers *workers

	// Test seams; New leaves them nil and nothing else sets them, so they
	// change nothing in production. A test of this concurrent code must
	// not sleep and hope the lanes got somewhere: trace tells it, as each
	// happens, what every lane does (so it can wait for "lane L has looked
	// at the store since I moved the clock" on a channel), and after lets
	// it end the grace period of Run when it chooses, not after a wall-clock
	// delay. See forwarder_test.go.
	trace func(source string, ev laneEvent, leased int) // nil: no one listens
	after func(time.Duration) <-chan time.Time          // nil: time.After

	endpoints    EndpointObserver    // cfg.Observer when it is one
	destinations DestinationObserver // cfg.Observer when it is one

	// running is Run's delivery context while Run accepts fresh
	// deliveries, nil before and after; mu guards it so that no claim
	// takes a token once Run waits for them all.
	mu      sync.Mutex
	running context.Context
	run     *runState // the lanes' goroutines while Run runs (reconfigure.go)
	// pacer is the store's, when several nodes share it (pace.go).
	pacer store.Pacer

	// calls is the context of the forwarder's own store calls (each has
	// its deadline besides, see watched): it ends stopSlack after the
	// grace period once Run's context ended, so that no record, give-back
	// or release holds a stopping process on a link that does not answer.
	calls context.Context

	completions chan finishing // to the completer, while Run runs
	unrecorded  *unrecorded    // outcomes the store refused (complete.go)
	health      *StoreHealth   // whether the store answers (storehealth.go)
}

// laneEvent is a step of a lane, as told to Forwarder.trace.
type laneEvent int

const (
	// lanePass: the lane starts a pass (fill): at its start, after a
	// wake-up or poll, or at once after a pass that got all it asked for.
	lanePass laneEvent = iota
	// laneStarved: the pass has room but waits for a process token.
	laneStarved
	// laneLeased: the pass's Lease returned leased deliveries (maybe 0).
	laneLeased
	// laneIdle: the pass is over and the lane waits for a wake-up, its
	// poll, or the end of its context.
	laneIdle
)

// tell reports a lane's step to the trace seam, if a test set one.
func (f *Forwarder) tell(l *lane, ev laneEvent, leased int) {
	if f.trace != nil {
		f.trace(l.source, ev, leased)
	}
}

// lane is one destination's share of the work: a source's deliveries to
// one of its destinations.
type lane struct {
	source string
	name   string // the destination's
	route  *destination.Destination
	dest   *webhook.Destination // &route.Webhook
	// pace, when set, holds the destination to its rate (pace.go).
	pace   pacer
	paused atomic.Bool
	// breakers holds the health of the lane's endpoints, each once in
	// their order: two endpoints with one URL share one, and endpoint
	// i's is breakers[breakerOf[i]]. Both nil with the breaker off.
	breakers  []*breaker
	breakerOf []int
	wake      chan struct{}
	inflight  inflight // what the lane holds, and its share of the tokens
	progress  progress // when it last moved (stall.go)
}

// New checks cfg and returns a Forwarder.
func New(cfg Config) (*Forwarder, error) {
	if cfg.Store == nil || cfg.Sender == nil {
		return nil, errors.New("forwarder: store and sender are required")
	}
	if cfg.Owner == "" {
		return nil, errors.New("forwarder: owner is required")
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.PerSource <= 0 {
		cfg.PerSource = DefaultPerSource
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Policy.Now == nil {
		cfg.Policy.Now = cfg.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = store.CallTimeout
	}
	cfg.Breaker = cfg.Breaker.withDefaults(cfg.Policy)
	f := &Forwarder{cfg: cfg, tokens: make(tokens, cfg.MaxInFlight), workers: newWorkers(workerIdle),
		unrecorded: newUnrecorded(), calls: context.Background()}

	f.pacer, _ = cfg.Store.(store.Pacer)
	f.health = newStoreHealth(cfg.Store, cfg.StoreTimeout, cfg.Logger)
	f.cfg.Store = watched{cfg.Store, f.health}
	f.endpoints, _ = cfg.Observer.(EndpointObserver)
	f.destinations, _ = cfg.Observer.(DestinationObserver)
	routes := slices.Clone(cfg.Routes)
	for source, dest := range cfg.Destinations {
		routes = append(routes, destination.Webhooks(source, *dest))
	}
	f.set.Store(f.buildLanes(routes, nil))
	for _, l := range f.lanes().all {
		f.warnShortLease(l)
	}
	return f, nil
}

// Notify tells source's lanes that new deliveries may be due now.
func (f *Forwarder) Notify(source string) { f.pokeSource(source) }

func (l *lane) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run forwards until ctx ends, then stops leasing, gives deliveries in
// flight the grace period to finish, interrupts the rest, and returns once
// every attempt is on record.
func (f *Forwarder) Run(ctx context.Context) error {
	deliverCtx, interrupt := context.WithCancel(context.WithoutCancel(ctx))
	defer interrupt()
	calls, endCalls := context.WithCancel(context.Background())
	defer endCalls()
	f.calls = calls // before any goroutine of Run reads it
	stopCalls := context.AfterFunc(ctx, func() { time.AfterFunc(f.cfg.Grace+stopSlack, endCalls) })
	defer stopCalls()
	// A state recorded by an earlier run is stale: this one starts closed.
	for _, b := range f.lanes().breakers() {
		f.persist(b)
	}
	probed := f.health.start(ctx, f.roomMade)
	defer probed()
	f.completions = make(chan finishing, maxCompleteGroup)
	recorded := make(chan struct{})
	go func() { defer close(recorded); f.completer(f.completions) }()
	f.mu.Lock()
	f.running = deliverCtx
	f.mu.Unlock()
	go f.watchStall(ctx)
	f.startLanes(ctx, deliverCtx)
	<-ctx.Done()
	f.stopLanes()
	f.mu.Lock()
	f.running = nil
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.tokens.waitIdle(); close(done) }()
	after := f.after
	if after == nil {
		after = time.After
	}
	select {
	case <-done:
	case <-after(f.cfg.Grace):
		f.cfg.Logger.Warn("grace period over, interrupting deliveries in flight")
		interrupt()
		<-done
	}
	for _, l := range f.lanes().all {
		f.giveBackAhead(l)
	}
	close(f.completions)
	<-recorded
	f.workers.stop()
	return nil
}

func (f *Forwarder) runLane(ctx, deliverCtx context.Context, l *lane) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ctx.Err() == nil {
		f.tell(l, lanePass, 0)
		fill := f.fill
		if l.route.Batching() {
			fill = f.fillBatch
		}
		got, full := fill(ctx, deliverCtx, l)
		if got && full {
			continue // there may be more due right now
		}
		timer.Reset(f.cfg.Poll)
		f.tell(l, laneIdle, 0)
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// fill leases as many due deliveries as the lane and the process have room
// for and starts them. It reports whether it started any and whether it
// got all it asked for.
func (f *Forwarder) fill(ctx, deliverCtx context.Context, l *lane) (got, full bool) {
	if f.held(l) {
		return false, false
	}
	p, probe := f.plan(l)
	if p.slots+p.ahead == 0 {
		return false, false
	}
	n, ok := f.takeTokens(ctx, l, p)
	if !ok || probe != nil && !f.admitProbe(l, probe, n) {
		return false, false
	}
	// Deliveries leased ahead go first.
	first := l.inflight.takeAhead(n)
	limit := n - len(first) + p.ahead
	leased, asked := f.lease(ctx, l, limit)
	if probe != nil && len(leased) == 0 {
		f.noProbeDue(ctx, l, probe)
	}
	for _, d := range l.inflight.start(n, first, leased) {
		f.workers.run(func() { f.send(ctx, deliverCtx, l, d, probe) })
	}
	return len(leased) > 0, asked == limit
}

// held reports whether a pass of l must lease nothing now. Its destination
// is paused: waiting by choice, which is no stall (stall.go). Or outcomes
// wait to be recorded, or the store cannot be reached: the lanes wake once
// they are, or once a probe answers. What a lane leased ahead stays: a
// give-back would fail as the record did, and leave it to wait out its
// lease. Once the store answers it goes out if its lease still has room,
// and is left to lapse otherwise (startable), for whichever node leases it
// next.
func (f *Forwarder) held(l *lane) bool {
	if l.paused.Load() {
		l.progress.mark(f.cfg.Now())
		return true
	}
	return f.paused() || f.storeDown()
}

// plan decides what a pass of l leases (planLease), from what l holds and
// its endpoints' health. When every endpoint is open, what l leased ahead
// goes back: what it leases next is a probe, or nothing.
func (f *Forwarder) plan(l *lane) (leasePlan, *breaker) {
	room, queued, busy := l.inflight.look()
	m, probe := l.mode(f.cfg.Now())
	if m != modeAll {
		f.giveBackAhead(l)
	}
	if m == modeNone {
		// Waiting on its endpoints, not on this process: no stall.
		l.progress.mark(f.cfg.Now())
	}
	return planLease(m, room, queued, busy, f.readAhead(), f.leaseMin()), probe
}

// takeTokens takes a process token for each of p's slots that one is free
// for, and reports false when ctx ended first. With none free, a pass
// that also leases ahead does only that; one that does not waits for the
// first token rather than sleep a whole Poll: another lane may hold them
// only for its Lease and hand them back unused, which wakes no one.
func (f *Forwarder) takeTokens(ctx context.Context, l *lane, p leasePlan) (int, bool) {
	if p.slots == 0 {
		return 0, true
	}
	if !f.tokens.tryTake() {
		if p.ahead > 0 {
			return 0, true
		}
		f.tell(l, laneStarved, 0) // say so first (to a test)
		if !f.tokens.take(ctx) {
			return 0, false
		}
	}
	return 1 + f.tokens.takeUpTo(p.slots-1), true
}

// admitProbe admits the pass's probe before its Lease, so that the next
// pass does not lease a second. When the probe is no longer due, the
// pass's tokens go back and it leases nothing.
func (f *Forwarder) admitProbe(l *lane, probe *breaker, tokens int) bool {
	ok, _, changed := probe.admit(f.cfg.Now())
	if !ok {
		f.tokens.handBack(tokens)
		return false
	}
	if changed {
		f.transition(l, probe)
	}
	return true
}

// lease leases up to limit due deliveries of l's source. It returns
// those l does not hold already (inflight.admit) and how many the store
// returned.
func (f *Forwarder) lease(ctx context.Context, l *lane, limit int) ([]store.Delivery, int) {
	// The lease is this node's from sent, read just before the call, to
	// sent+LeaseTTL (each delivery's LeaseEnd): the store keeps it at least
	// that long however slow the call (store.LeaseRequest).
	sent := f.cfg.Now()
	leased, err := f.cfg.Store.Lease(ctx, store.LeaseRequest{
		Owner: f.cfg.Owner, Source: l.source, Destination: l.name, Limit: limit, Now: sent, TTL: f.cfg.LeaseTTL,
	})
	if err != nil && ctx.Err() == nil {
		f.cfg.Logger.Error("lease deliveries", "source", l.source, "destination", l.name, "err", err)
	}
	if err == nil && len(leased) == 0 && l.inflight.holding() == 0 {
		l.progress.mark(f.cfg.Now()) // nothing due, nothing held
	}
	f.tooLate(l, sent, leased)
	n := len(leased)
	leased, dropped := l.inflight.admit(leased)
	if dropped > 0 {
		// Their leases ran out while this node still sends them, or
		// waits to record their outcome: the store took them back.
		f.cfg.Logger.Debug("leased again while held; not sent again", "source", l.source, "n", dropped)
	}
	f.tell(l, laneLeased, len(leased))
	return leased, n
}

// leaseMargin is how long before its lease ends a delivery of l may no
// longer start: the longest delivery, each endpoint taking the whole
// request timeout, so that its last request ends while the lease holds
// and no other node has it (DefaultLeaseTTL outlasts that at five
// endpoints). A lease shorter than twice that keeps its second half for
// the deliveries started in the first (see warnShortLease).
func (f *Forwarder) leaseMargin(l *lane) time.Duration {
	return min(f.longestDelivery(l), f.cfg.LeaseTTL/2)
}

// longestDelivery is how long a delivery of l may take: every endpoint
// its whole request timeout.
func (f *Forwarder) longestDelivery(l *lane) time.Duration {
	return time.Duration(len(l.dest.Endpoints)) * f.cfg.Sender.Timeout()
}

// warnShortLease says so when l's leases are too short for leaseMargin to
// cover its longest delivery: a receiver that takes nearly the whole
// timeout may still be answering when the lease ends and another node
// takes the delivery.
func (f *Forwarder) warnShortLease(l *lane) {
	if longest := f.longestDelivery(l); f.leaseMargin(l) < longest {
		f.cfg.Logger.Warn("lease TTL shorter than twice the longest delivery; a slow receiver may get a delivery twice",
			"source", l.source, "lease_ttl", f.cfg.LeaseTTL, "longest_delivery", longest)
	}
}

// startable reports whether d's delivery may start now: its lease ends
// (LeaseEnd, on this node's clock) no sooner than l's longest delivery.
// A store that does not say when (a zero LeaseEnd) is trusted.
func (f *Forwarder) startable(l *lane, d store.Delivery) bool {
	return d.LeaseEnd.IsZero() || f.cfg.Now().Before(d.LeaseEnd.Add(-f.leaseMargin(l)))
}

// tooLate warns when a Lease sent at sent returned deliveries none of
// which may start any more: the store's round trip outlasts the lease,
// and this node delivers nothing it leases. They are left to lapse, and
// another node (or this one's next lease) makes them.
func (f *Forwarder) tooLate(l *lane, sent time.Time, leased []store.Delivery) {
	if len(leased) == 0 || f.startable(l, leased[0]) {
		return
	}
	f.cfg.Logger.Warn("leases came back too late to use; left to lapse", "source", l.source, "n", len(leased),
		"round_trip", f.cfg.Now().Sub(sent), "lease_ttl", f.cfg.LeaseTTL, "margin", f.leaseMargin(l))
}

// letLapse leaves d, whose lease ends too soon for its delivery to start,
// to its lease's end: it is due again then, for any node. A probe it was
// admitted for is given back.
func (f *Forwarder) letLapse(l *lane, d store.Delivery, probe *breaker) {
	f.cfg.Logger.Debug("lease ends before the delivery could; left to lapse", "source", l.source, "delivery", d.ID,
		"lease_end", d.LeaseEnd)
	if probe != nil && probe.unused(f.cfg.Now()) {
		f.transition(l, probe)
	}
}

// noProbeDue handles a probe's Lease that found nothing due to make the
// probe with. Held deliveries wait for one: they are made due, and the
// next pass takes one. With none, the probe waits a step (each failed
// delivery's own next attempt is due by then or later, and probes it).
func (f *Forwarder) noProbeDue(ctx context.Context, l *lane, probe *breaker) {
	now := f.cfg.Now()
	probe.unused(now)
	n, err := f.cfg.Store.Release(ctx, l.source, []string{heldError}, now)
	if err != nil && ctx.Err() == nil {
		f.cfg.Logger.Error("release held deliveries", "source", l.source, "err", err)
	}
	if n == 0 {
		probe.postpone(now)
	} else {
		l.poke()
	}
	f.transition(l, probe)
}

// send delivers d and then, while the lane runs, those leased ahead, in
// one slot, and frees the slot when none is left.
func (f *Forwarder) send(ctx, deliverCtx context.Context, l *lane, d store.Delivery, probe *breaker) {
	for {
		f.deliver(deliverCtx, l, d, probe, false)
		probe = nil
		next, left, ok := l.inflight.next(ctx.Err() != nil)
		if !ok {
			f.roomMade()
			return
		}
		if left < f.readAhead()/2 {
			l.poke()
		}
		d = next
	}
}

// readAhead is how many deliveries a busy lane keeps leased ahead.
func (f *Forwarder) readAhead() int { return f.cfg.PerSource / 2 }

// leaseMin is the group a busy lane waits to have room for.
func (f *Forwarder) leaseMin() int { return max(1, f.cfg.PerSource/8) }

// giveBackAhead gives back what l leased ahead: due again now, its
// attempts as they were. The lane stops (its leases would run out
// unsent), or its endpoints are open (what it leases next is a probe).
func (f *Forwarder) giveBackAhead(l *lane) {
	ahead := l.inflight.dropAhead()
	if len(ahead) == 0 {
		return
	}
	f.giveBack(l, ahead)
	// A Lease that ran meanwhile may have returned some again, after
	// they were given back: that lease goes back too.
	f.giveBack(l, l.inflight.forget(ahead))
}

// giveBack makes ds, leased to this node and not sent, due again now,
// their attempts as they were.
func (f *Forwarder) giveBack(l *lane, ds []store.Delivery) {
	if len(ds) == 0 {
		return
	}
	cs := make([]store.Completion, len(ds))
	for i, d := range ds {
		cs[i] = store.Completion{ID: d.ID, Owner: f.cfg.Owner, Status: store.Pending, Attempts: d.Attempts,
			FirstAttempt: d.FirstAttempt, NextAttempt: f.cfg.Now(), LastError: d.LastError}
	}
	if err := f.cfg.Store.Complete(f.calls, cs); err != nil {
		// Their leases run out, and they are due then.
		f.cfg.Logger.Error("give back leased deliveries", "source", l.source, "n", len(cs), "err", err)
	}
}

// roomMade wakes every lane after deliveries gave back their room, in
// their lane and in the process (tokens).
func (f *Forwarder) roomMade() {
	for _, l := range f.lanes().all {
		l.poke()
	}
}

// endFresh frees the room of n of l's fresh deliveries that were never
// handed in, and wakes the lanes.
func (f *Forwarder) endFresh(l *lane, n int) {
	if n == 0 {
		return
	}
	l.inflight.endFresh(n)
	f.roomMade()
}

// free ends what l holds of delivery id (inflight.free) and wakes l: its
// slot is free. It reports whether a Lease returned the delivery again
// meanwhile (see inflight).
func (f *Forwarder) free(l *lane, id int64, fresh bool) (letAgain bool) {
	letAgain = l.inflight.free(id, fresh)
	l.poke()
	return letAgain
}

// Ingest stores msgs, as store.Store.Ingest does, and sends at once the
// deliveries the lane of their source has room for: up to PerSource fresh
// deliveries in flight, besides those the lane leased, and within
// MaxInFlight. The collector calls it with one source's messages.
func (f *Forwarder) Ingest(ctx context.Context, msgs []store.Message) error {
	l, deliverCtx, n := f.claim(msgs)
	// Its tokens are Run's to wait for. Once Run interrupts what is in
	// flight (its grace period is over) they go back at once, rather than
	// hold a stopping process until the store call ends, on a link that
	// does not answer at its deadline; what the call leased is then left
	// to its lease's end.
	keep := func() bool { return true } // false: the tokens went back
	if n > 0 {
		keep = context.AfterFunc(deliverCtx, func() { f.endFresh(l, n) })
	}
	// As lease's: this node's clock just before the call, plus the TTL.
	sent := f.cfg.Now()
	ds, err := f.cfg.Store.IngestLeased(ctx, msgs, store.IngestLease{
		Owner: f.cfg.Owner, Until: sent.Add(f.cfg.LeaseTTL), Limit: n,
	})
	if !keep() {
		return err
	}
	if err != nil {
		if l != nil {
			f.endFresh(l, n)
		}
		return err
	}
	if l == nil {
		f.Notify(msgs[0].Source)
		return nil
	}
	if len(ds) > n {
		// More than the lease asked for breaks the store's contract;
		// those wait for their lease to run out rather than overrun the
		// bound and its accounting.
		f.cfg.Logger.Error("store leased more than asked", "source", l.source, "asked", n, "leased", len(ds))
		ds = ds[:n]
	}
	f.endFresh(l, n-len(ds))
	f.tooLate(l, sent, ds)
	ds, _ = l.inflight.admit(ds) // new ones: none is held
	for _, d := range ds {
		f.workers.run(func() {
			f.deliver(deliverCtx, l, d, nil, true)
			f.tokens.handBack(1)
			f.roomMade()
		})
	}
	if len(ds) < n || n < deliveries(msgs) {
		// Some wait in the store (or were known already): the lane
		// looks.
		l.poke()
	}
	return nil
}

// claim reserves fresh slots and tokens for msgs' deliveries: none unless
// Run is running and every message is of one source whose endpoints are
// healthy (a lane in probe or hold mode leases its own).
func (f *Forwarder) claim(msgs []store.Message) (*lane, context.Context, int) {
	if len(msgs) == 0 {
		return nil, nil, 0
	}
	// Fresh deliveries go to a source's one lane that sends each message
	// at once; with several destinations, each lane leases its own (a
	// Lease round trip later).
	ls := f.lanes().bySource[msgs[0].Source]
	if len(ls) != 1 {
		return nil, nil, 0
	}
	l := ls[0]
	for _, m := range msgs[1:] {
		if m.Source != l.source {
			return nil, nil, 0
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == nil {
		return l, nil, 0
	}
	if m, _ := l.mode(f.cfg.Now()); m != modeAll || f.paused() || !l.plain() {
		return l, nil, 0
	}
	return l, f.running, l.inflight.claimFresh(deliveries(msgs))
}

// deliveries counts the deliveries msgs ask for.
func deliveries(msgs []store.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Destinations)
	}
	return n
}

// deliver makes one delivery attempt of d and hands its outcome to the
// completer, which frees its slot (fresh: its fresh room) once it is on
// record. probe, when set, is the endpoint the lane admitted d to probe.
func (f *Forwarder) deliver(ctx context.Context, l *lane, d store.Delivery, probe *breaker, fresh bool) {
	if !f.startable(l, d) {
		f.letLapse(l, d, probe)
		if f.free(l, d.ID, fresh) {
			f.giveBack(l, []store.Delivery{d})
		}
		return
	}
	c := store.Completion{ID: d.ID, Owner: f.cfg.Owner, Attempts: d.Attempts + 1, FirstAttempt: d.FirstAttempt}
	if c.FirstAttempt.IsZero() {
		c.FirstAttempt = f.cfg.Now()
	}
	// Signed per send by the Sender; a wire body is sent as stored, or
	// as the destination's mapping shapes it.
	body, err := f.body(l, d)
	if err != nil {
		// Not something a later attempt can fix.
		c.Status, c.LastError = store.Failed, err.Error()
		f.complete(finishing{l: l, c: c, closes: l.closings(), fresh: fresh})
		return
	}
	if l.pace != nil && l.pace.wait(ctx) != nil {
		// Stopping while it waited its turn: not attempted.
		c.Status, c.NextAttempt, c.Attempts, c.FirstAttempt = store.Pending, f.cfg.Now(), d.Attempts, d.FirstAttempt
		f.complete(finishing{l: l, c: c, closes: l.closings(), fresh: fresh})
		return
	}
	g := f.gate(l, probe)
	if g.allSkipped() {
		f.hold(l, d, c, g, fresh)
		return
	}
	// The messageId is the webhook-id of endpoints signing the Standard
	// Webhooks way: the same at every attempt, as receivers dedupe on it.
	res, last := f.request(ctx, l, g, body, d.MessageID, d.ID)
	c, retry := f.outcome(d, c, res)
	f.tellLast(l, d.ID, last, c, retry)
	f.complete(finishing{l: l, c: c, retry: retry, closes: g.closes, fresh: fresh})
}

// undecided is the last attempt of a delivery whose Then the retry policy
// decides once the request is over; ok is false when there is none to
// report. (Kept by value: keeping &a would move every attempt to the
// heap.)
type undecided struct {
	a  webhook.Attempt
	ok bool
}

// request sends body to l's endpoints that g lets through, as delivery's
// attempts, id its webhook-id. The observer hears of each attempt as it
// ends, but for the last of a failed delivery (last), which tellLast
// reports once its outcome is decided. The endpoints' breakers hear how
// each request ended.
func (f *Forwarder) request(ctx context.Context, l *lane, g *gate, body []byte, id string, delivery int64) (webhook.Result, undecided) {
	dest := l.dest
	if g.skipped != nil {
		dest = g.dest
	}
	var last undecided
	res := f.cfg.Sender.DeliverMessage(ctx, dest, body, id, func(a webhook.Attempt) {
		g.remap(&a)
		switch {
		case f.cfg.Observer == nil:
		case a.Then == webhook.ThenUndecided:
			last = undecided{a, true}
		default:
			f.cfg.Observer.Attempt(l.source, delivery, a)
		}
	})
	for i := range res.Attempts {
		g.remap(&res.Attempts[i])
	}
	f.reportHealth(l, g, res)
	if g.skipped != nil && (res.Outcome == webhook.Final || res.Outcome == webhook.TLSError) {
		// An open endpoint was skipped, not refused: it may take the
		// message later.
		res.Outcome = webhook.Retryable
	}
	return res, last
}

// tellLast reports last, delivery's last attempt, with what its outcome c
// decided.
func (f *Forwarder) tellLast(l *lane, delivery int64, last undecided, c store.Completion, retry bool) {
	if !last.ok {
		return
	}
	if retry {
		last.a.Then, last.a.RetryAt = webhook.ThenRetry, c.NextAttempt
	} else {
		last.a.Then = webhook.ThenGiveUp
	}
	f.cfg.Observer.Attempt(l.source, delivery, last.a)
}

// body is what l sends for d: its webhook body, mapped by l's mapping.
func (f *Forwarder) body(l *lane, d store.Delivery) ([]byte, error) {
	body, err := queued.Body(d.Body, d.Form)
	if err != nil {
		return nil, err
	}
	return l.route.Body(body)
}

// outcome completes c, d's completion, from res: its attempts' records,
// the last error, and what follows, by the retry policy; retry is true
// when another attempt is scheduled.
func (f *Forwarder) outcome(d store.Delivery, c store.Completion, res webhook.Result) (_ store.Completion, retry bool) {
	for _, a := range res.Attempts {
		c.Records = append(c.Records, record(c.Attempts, a))
	}
	if last := res.Last(); last != nil && !res.Delivered() {
		c.LastError = describe(last)
	}
	switch res.Outcome {
	case webhook.Delivered:
		c.Status = store.Delivered
	case webhook.Interrupted:
		// Shutdown cut it short: nothing is known, so it does not count.
		c.Status, c.NextAttempt, c.Attempts = store.Pending, f.cfg.Now(), d.Attempts
		if d.FirstAttempt.IsZero() {
			c.FirstAttempt = time.Time{}
		}
	default:
		if next, ok := f.cfg.Policy.NextAttempt(c.FirstAttempt, c.Attempts, res); ok {
			c.Status, c.NextAttempt, retry = store.Pending, next, true
		} else if res.Outcome == webhook.Retryable {
			c.Status = store.Dead
		} else {
			c.Status = store.Failed
		}
	}
	return c, retry
}

// deliveryLog is the key-value list of a finished delivery's log line. A
// final status has no next attempt, whose zero time would read as year 1,
// and a delivered one no error.
func deliveryLog(source string, c store.Completion) []any {
	kv := []any{"source", source, "delivery", c.ID, "status", c.Status, "attempts", c.Attempts}
	if !c.NextAttempt.IsZero() {
		kv = append(kv, "next", c.NextAttempt)
	}
	if c.LastError != "" {
		kv = append(kv, "error", c.LastError)
	}
	return kv
}

func record(delivery int, a webhook.Attempt) store.Attempt {
	r := store.Attempt{
		Delivery: delivery, Endpoint: a.Endpoint, URL: a.URL, Start: a.Start, Latency: a.Latency,
		Status: a.Status, Class: string(a.Class), Excerpt: a.Body, Outcome: a.Outcome.String(),
	}
	if a.Err != nil {
		r.Error = a.Err.Error()
	}
	return r
}

func describe(a *webhook.Attempt) string {
	if a.Err != nil {
		return fmt.Sprintf("%s: %s: %v", a.URL, a.Class, a.Err)
	}
	return fmt.Sprintf("%s: HTTP %d", a.URL, a.Status)
}
