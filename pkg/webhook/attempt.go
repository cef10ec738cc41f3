package webhook

import (
	"encoding/json"
	"time"
)

// Outcome classifies an attempt or a whole delivery (DESIGN §4).
type Outcome uint8

const (
	// Delivered: the endpoint answered 2xx.
	Delivered Outcome = iota + 1
	// Retryable: timeout, connection error, 5xx, 408 or 429; the message is
	// tried again later, within the retry window.
	Retryable
	// Final: another 4xx, or a 3xx (redirects are not followed), or an
	// address refused (ClassBlocked). Not retried.
	Final
	// TLSError: the certificate was not trusted or the handshake failed; no
	// HTTP request was written. Not retried.
	TLSError
	// Interrupted: the caller's context ended the attempt (shutdown,
	// Ctrl-C). Nothing is known about the endpoint; a durable caller tries
	// again later.
	Interrupted
)

var outcomeNames = [...]string{"", "delivered", "retryable", "final", "tls_error", "interrupted"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// MarshalText implements encoding.TextMarshaler.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Class says what happened in one attempt: an HTTP status class or a
// transport error class. It is what records and metrics group by.
type Class string

const (
	ClassOK              Class = "http_2xx"
	ClassRedirect        Class = "http_3xx"
	ClassRequestTimeout  Class = "http_408"
	ClassTooManyRequests Class = "http_429"
	ClassClientError     Class = "http_4xx"
	ClassServerError     Class = "http_5xx"
	ClassOtherStatus     Class = "http_other" // 1xx or out of range
	ClassTimeout         Class = "timeout"    // no complete answer within the deadline
	ClassRefused         Class = "connection_refused"
	ClassReset           Class = "connection_reset" // reset or closed before an answer
	ClassDNS             Class = "dns"
	ClassTLS             Class = "tls"
	ClassBlocked         Class = "blocked_address" // link-local or metadata (ErrBlockedAddress); nothing was sent
	ClassNetwork         Class = "network"         // any other transport error
	ClassCanceled        Class = "canceled"
)

// Then says what follows an attempt.
type Then uint8

const (
	// ThenUndecided: the last endpoint failed and no Policy was consulted
	// (Sender.Deliver alone); the caller decides.
	ThenUndecided Then = iota
	// ThenDone: delivered; no further URL is called.
	ThenDone
	// ThenNextURL: the next endpoint is tried now.
	ThenNextURL
	// ThenRetry: the whole message is tried again at RetryAt.
	ThenRetry
	// ThenGiveUp: a final outcome, or the retry window is over.
	ThenGiveUp
	// ThenStop: interrupted by the caller.
	ThenStop
)

var thenNames = [...]string{"undecided", "done", "next_url", "retry", "give_up", "stop"}

func (t Then) String() string {
	if int(t) < len(thenNames) {
		return thenNames[t]
	}
	return "unknown"
}

// MarshalText implements encoding.TextMarshaler.
func (t Then) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// ExcerptSize is how much of a response body an attempt keeps.
const ExcerptSize = 1 << 10

// Attempt records one POST to one URL.
type Attempt struct {
	Delivery   int           // 1-based number of the delivery (1 for the first try of a message)
	Endpoint   int           // index into Destination.Endpoints
	URL        string        // the endpoint as shown (Endpoint.Display), never its credentials
	Start      time.Time     // when the request started
	Latency    time.Duration // from start to the last byte read or the error
	Status     int           // HTTP status; 0 when there was no answer
	Class      Class
	Err        error  // transport error; nil when a status was received
	Body       []byte // the first ExcerptSize bytes of the response body
	Outcome    Outcome
	RetryAfter time.Duration // what a 429/503 asked for, 0 when none
	Then       Then
	RetryAt    time.Time // when Then == ThenRetry
}

// attemptJSON is the machine-readable record (`evfwd trigger -o json`, the
// store's attempt log).
type attemptJSON struct {
	Delivery     int      `json:"delivery"`
	Endpoint     int      `json:"endpoint"`
	URL          string   `json:"url"`
	Start        string   `json:"start"`
	LatencyMS    float64  `json:"latencyMs"`
	Status       int      `json:"status,omitempty"`
	Class        Class    `json:"class"`
	Error        string   `json:"error,omitempty"`
	Body         string   `json:"body,omitempty"`
	Outcome      Outcome  `json:"outcome"`
	RetryAfterMS *float64 `json:"retryAfterMs,omitempty"`
	Then         Then     `json:"then"`
	RetryAt      string   `json:"retryAt,omitempty"`
}

// MarshalJSON writes the attempt as one flat record with times in the
// wire form and durations in milliseconds.
func (a Attempt) MarshalJSON() ([]byte, error) {
	j := attemptJSON{
		Delivery: a.Delivery, Endpoint: a.Endpoint, URL: a.URL,
		Start:     formatTime(a.Start),
		LatencyMS: millis(a.Latency),
		Status:    a.Status, Class: a.Class, Body: string(a.Body),
		Outcome: a.Outcome, Then: a.Then,
	}
	if a.Err != nil {
		j.Error = a.Err.Error()
	}
	if a.RetryAfter > 0 {
		ms := millis(a.RetryAfter)
		j.RetryAfterMS = &ms
	}
	if a.Then == ThenRetry {
		j.RetryAt = formatTime(a.RetryAt)
	}
	return json.Marshal(j)
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Result is one delivery of a message: the endpoints tried in order until
// one answered 2xx or all failed.
type Result struct {
	Attempts []Attempt
	// Outcome is Delivered when an endpoint answered 2xx; when all failed,
	// Interrupted if the caller stopped it, Retryable if any endpoint may
	// succeed later, otherwise the shared final outcome (Final, or TLSError
	// when every endpoint failed TLS).
	Outcome Outcome
	// RetryAfter is the longest Retry-After any endpoint asked for: the
	// whole message is retried, so no endpoint is called before it asked.
	RetryAfter time.Duration
}

// Delivered reports whether an endpoint accepted the message.
func (r *Result) Delivered() bool { return r.Outcome == Delivered }

// Refused reports whether every attempt had its connection refused:
// nothing listens at any of the URLs.
func (r *Result) Refused() bool {
	for _, a := range r.Attempts {
		if a.Class != ClassRefused {
			return false
		}
	}
	return len(r.Attempts) > 0
}

// Last returns the last attempt, or nil when none was made.
func (r *Result) Last() *Attempt {
	if len(r.Attempts) == 0 {
		return nil
	}
	return &r.Attempts[len(r.Attempts)-1]
}

// aggregate computes the delivery outcome from its attempts.
func aggregate(attempts []Attempt) (Outcome, time.Duration) {
	var out Outcome
	var ra time.Duration
	for i := range attempts {
		a := &attempts[i]
		ra = max(ra, a.RetryAfter)
		switch {
		case a.Outcome == Delivered || a.Outcome == Interrupted:
			return a.Outcome, ra
		case out == 0:
			out = a.Outcome
		case a.Outcome == Retryable || out == Retryable:
			out = Retryable
		case a.Outcome != out:
			out = Final
		}
	}
	return out, ra
}
