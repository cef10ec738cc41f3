package analytics

import (
	"math/rand/v2"
	"time"

	"github.com/evfwd/evfwd/internal/retry"
)

// RetryPolicy says how a failed batch is retried: network errors,
// timeouts, 5xx, 408 and 429 are retried with exponential backoff and
// jitter; other statuses are final. Zero fields take the defaults.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included (default 10;
	// 1 turns retries off).
	MaxAttempts int
	// BaseDelay is the wait after the first failure (default 100ms); each
	// later wait doubles, up to MaxDelay (default 10s).
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Jitter is the fraction of each wait drawn at random, so clients that
	// failed together do not retry together: a wait d becomes a value in
	// [d*(1-Jitter), d]. 0 means the default 0.5; negative means none.
	Jitter float64
	// MaxRetryAfter caps how long a server's Retry-After can hold the
	// client (default 1 minute).
	MaxRetryAfter time.Duration
	// StopOnRefused makes a refused connection (nothing listens at the
	// endpoint) final at once. For an endpoint nobody chose, such as the
	// default one, a refusal means no server was started, and retrying
	// only delays saying so; a chosen server may be restarting.
	StopOnRefused bool
}

// RetryEvent describes a failed attempt that will be retried.
type RetryEvent struct {
	Attempt     int           // the attempt that failed, 1-based
	MaxAttempts int           // the policy's limit, the first attempt included
	Delay       time.Duration // the wait before attempt Attempt+1
	Status      int           // the HTTP status, -1 when no answer came
	Err         error         // an *APIError or a *TransportError
	Messages    int           // how many messages the batch carries
}

// IsRefused reports whether err is a connection refused by the endpoint's
// host: nothing listens there.
func IsRefused(err error) bool { return retry.Refused(err) }

// Default retry policy values.
const (
	DefaultMaxAttempts   = 10
	DefaultBaseDelay     = 100 * time.Millisecond
	DefaultMaxDelay      = 10 * time.Second
	DefaultJitter        = 0.5
	DefaultMaxRetryAfter = time.Minute
)

func (p RetryPolicy) withDefaults() (RetryPolicy, error) {
	if p.MaxAttempts < 0 {
		return p, &ConfigError{Field: "Retry.MaxAttempts", Reason: "must not be negative"}
	}
	if p.BaseDelay < 0 || p.MaxDelay < 0 || p.MaxRetryAfter < 0 {
		return p, &ConfigError{Field: "Retry", Reason: "delays must not be negative"}
	}
	if p.Jitter > 1 {
		return p, &ConfigError{Field: "Retry.Jitter", Reason: "must be at most 1"}
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxDelay < p.BaseDelay {
		p.MaxDelay = p.BaseDelay
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = DefaultJitter
	case p.Jitter < 0:
		p.Jitter = 0
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	return p, nil
}

// backoff is the wait before attempt n+1 after n failed attempts (n ≥ 1).
func (p RetryPolicy) backoff(n int) time.Duration {
	d := retry.Exponential(p.BaseDelay, p.MaxDelay, n)
	if p.Jitter > 0 && d > 0 {
		d -= time.Duration(rand.Float64() * p.Jitter * float64(d))
	}
	return d
}
