package webhook

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/evfwd/evfwd/internal/retry"
	"github.com/evfwd/evfwd/pkg/signature"
)

// Defaults of the retry schedule (DESIGN §4, spec 7-8).
const (
	DefaultInitial = time.Second
	DefaultMax     = 10 * time.Minute
	DefaultWindow  = 4 * time.Hour
	DefaultJitter  = 0.2
)

// Policy is the retry schedule of a failed delivery: exponential backoff
// from Initial, doubling up to Max, each delay spread by ±Jitter, and no
// attempt starting later than Window after the first. Zero fields take
// the defaults, so Policy{} is the destination's schedule.
//
// A Policy holds no state: a durable forwarder persists the first attempt
// time and the number of deliveries made, and asks NextAttempt again after
// a restart.
type Policy struct {
	Initial time.Duration
	Max     time.Duration
	Window  time.Duration
	// Jitter is the fraction by which a delay is spread, uniformly, both
	// ways: 0.2 turns 10s into 8-12s. Negative means none.
	Jitter float64

	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Rand returns a number in [0, 1); math/rand/v2 when nil.
	Rand func() float64
	// StopRefused ends the retries after a delivery whose every attempt
	// had its connection refused (ClassRefused): nothing listens there, as
	// at a mistyped port, which is `evfwd trigger`'s case, not an outage's.
	StopRefused bool

	once bool // RetryFor(0): one delivery, never a retry
}

// RetryFor returns the destination's schedule (zero fields take the
// defaults) with retries for at most window after the first delivery. A
// window of zero or less means one delivery and no retry, which the Window
// field cannot say: zero there means DefaultWindow.
func RetryFor(window time.Duration) Policy {
	if window <= 0 {
		return Policy{once: true}
	}
	return Policy{Window: window}
}

func (p Policy) withDefaults() Policy {
	if p.Initial <= 0 {
		p.Initial = DefaultInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultMax
	}
	if p.Window <= 0 {
		p.Window = DefaultWindow
	}
	if p.Jitter == 0 {
		p.Jitter = DefaultJitter
	}
	if p.Jitter < 0 {
		p.Jitter = 0
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	return p
}

// Delay is the backoff before delivery attempt+1 after delivery number
// attempt (1-based) failed, before jitter: Initial·2^(attempt-1), at most
// Max.
func (p Policy) Delay(attempt int) time.Duration {
	p = p.withDefaults()
	return retry.Exponential(p.Initial, p.Max, attempt)
}

// NextAttempt decides when delivery number attempt+1 of a message starts,
// given that its first delivery started at first and delivery number
// attempt (1-based) ended with last. It reports false when there is none:
// the message was delivered, failed finally (Final, TLSError), or the next
// start would fall after first+Window (the message is dead). A Retry-After
// longer than the backoff is honoured; if it points past the window the
// message is dead too.
func (p Policy) NextAttempt(first time.Time, attempt int, last Result) (time.Time, bool) {
	if p.once {
		return time.Time{}, false
	}
	switch last.Outcome {
	case Retryable, Interrupted:
	default:
		return time.Time{}, false
	}
	if p.StopRefused && last.Refused() {
		return time.Time{}, false
	}
	p = p.withDefaults()
	now := p.Now()
	d := p.Delay(attempt)
	if p.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + p.Jitter*(2*p.Rand()-1)))
	}
	d = max(d, last.RetryAfter)
	at := now.Add(d)
	if at.After(first.Add(p.Window)) {
		return time.Time{}, false
	}
	return at, true
}

// Retry delivers body until it is delivered, fails finally, the window
// closes or ctx ends, waiting between deliveries as p says. onAttempt, when
// set, sees every attempt as it happens, the last one of each delivery with
// its Then and RetryAt decided. It returns the last delivery's result and
// the number of deliveries made.
func (s *Sender) Retry(ctx context.Context, dest *Destination, body []byte, p Policy, onAttempt func(Attempt)) (Result, int) {
	return s.RetryMessage(ctx, dest, body, "", p, onAttempt)
}

// RetryMessage is Retry for a message with an id, as DeliverMessage
// takes it; without one, a fresh id serves every delivery of the run.
func (s *Sender) RetryMessage(ctx context.Context, dest *Destination, body []byte, id string, p Policy, onAttempt func(Attempt)) (Result, int) {
	if id == "" && dest.signsPerAttempt() {
		id = signature.NewMessageID()
	}
	p = p.withDefaults()
	first := p.Now()
	for n := 1; ; n++ {
		var next time.Time
		decide := func(r *Result) {
			last := r.Last()
			at, ok := p.NextAttempt(first, n, *r)
			if ok {
				next = at
				last.Then, last.RetryAt = ThenRetry, at
			} else {
				last.Then = ThenGiveUp
			}
		}
		res := s.deliver(ctx, dest, body, id, n, decide, onAttempt)
		if next.IsZero() {
			return res, n
		}
		t := time.NewTimer(next.Sub(p.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			res.Outcome = Interrupted
			return res, n
		case <-t.C:
		}
	}
}
