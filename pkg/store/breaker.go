package store

import "time"

// Health is an endpoint's circuit-breaker state.
type Health string

const (
	// EndpointClosed: requests go to the endpoint.
	EndpointClosed Health = "closed"
	// EndpointOpen: the endpoint failed repeatedly; deliveries skip it and
	// wait while one probe at a time tests it on the retry schedule.
	EndpointOpen Health = "open"
	// EndpointHalfOpen: a probe is in flight.
	EndpointHalfOpen Health = "half-open"
)

// EndpointState is the last circuit-breaker transition recorded for one
// endpoint (a source's webhook URL). The breaker itself lives in the serve
// process (on PostgreSQL, in each node); the store keeps its transitions so
// that `evfwd deliveries endpoints` can show them beside a running serve.
// On a shared store the row is the latest transition any node recorded.
type EndpointState struct {
	Source    string
	URL       string
	State     Health
	Failures  int       // consecutive retryable failures
	Since     time.Time // when the endpoint entered State
	NextProbe time.Time // when open: the earliest next probe
	Node      string    // the process that recorded it
	LastError string    // the failure that opened it or failed the last probe
	UpdatedAt time.Time
}

// ReleaseStep bounds the deliveries Release makes due in one transaction.
const ReleaseStep = 1000
