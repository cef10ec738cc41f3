// Package analytics is evfwd's batching client for the Segment HTTP
// Tracking API (the Go counterpart of the spec's Ruby client): calls
// validate and queue a message without blocking, and one consumer per
// client sends queued messages in batches to POST {endpoint}/v1/batch, one
// request at a time, retrying what can be retried.
package analytics

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/retry"
)

// LibraryName is the context.library name of every message sent.
const LibraryName = "evfwd"

// Defaults used when a Config field is left zero.
const (
	DefaultEndpoint     = "http://127.0.0.1:8787" // where `evfwd serve` listens
	DefaultMaxQueueSize = 10000
	DefaultBatchSize    = 100
	DefaultTimeout      = 10 * time.Second
)

// MaxBatchBytes bounds one request body (spec 8: "500 KB"). It is the
// decimal reading, the stricter of the two, so no server refuses it.
const MaxBatchBytes = 500_000

// Config configures a Client. Zero values mean the defaults.
type Config struct {
	// WriteKey identifies the source; required. Sent as Basic auth user.
	WriteKey string
	// Endpoint is the collection API's base URL; /v1/batch is appended.
	Endpoint string
	// Version is sent in User-Agent (evfwd/VERSION) and context.library
	// (default: the version of the evfwd module the program was built
	// with, or "dev" when the build does not say).
	Version string
	// OnError is called after a batch has finally failed, with the HTTP
	// status (-1 for a transport error) and the server's message. It runs
	// on the client's consumer goroutine: keep it short.
	OnError func(status int, msg string)
	// OnBatch, when set, is called once per batch after its final outcome,
	// in queue order, on the consumer goroutine. It must not call Flush or
	// Close.
	OnBatch func(BatchResult)
	// OnRetry, when set, is called after each failed attempt that will be
	// retried, before the wait, on the consumer goroutine: a caller can
	// show that the client is still trying and why. Keep it short.
	OnRetry func(RetryEvent)
	// MaxQueueSize bounds the messages waiting to be sent (default 10000).
	MaxQueueSize int
	// BatchSize bounds the messages in one request (default 100); a batch
	// also stays within MaxBatchBytes.
	BatchSize int
	// Stub: nothing reaches the network and every batch counts as sent.
	Stub bool
	// HTTPClient sends the requests (default: a client with no overall
	// timeout, on http.DefaultTransport as it is when New runs, tuned for
	// batches when it is net/http's own; Timeout bounds each attempt).
	HTTPClient *http.Client
	// Timeout bounds each attempt, connect to last byte (default 10s).
	Timeout time.Duration
	// Retry says how failed requests are retried.
	Retry RetryPolicy
	// Now is the clock for timestamp and sentAt (default time.Now).
	Now func() time.Time
	// NewID makes messageIds (default: message.NewID, a random UUIDv4).
	NewID func() string

	// sleep waits between attempts; tests replace it to record delays.
	sleep func(ctx context.Context, d time.Duration) error
}

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return "analytics: config: " + e.Field + " " + e.Reason
}

// withDefaults returns c with zero fields set to their defaults, or a
// *ConfigError.
func (c Config) withDefaults() (Config, error) {
	if strings.TrimSpace(c.WriteKey) == "" {
		return c, &ConfigError{Field: "WriteKey", Reason: "is required"}
	}
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, &ConfigError{Field: "Endpoint", Reason: fmt.Sprintf("must be an http or https URL, got %q", c.Endpoint)}
	}
	c.Endpoint = strings.TrimRight(c.Endpoint, "/")
	switch {
	case c.MaxQueueSize < 0:
		return c, &ConfigError{Field: "MaxQueueSize", Reason: "must not be negative"}
	case c.MaxQueueSize == 0:
		c.MaxQueueSize = DefaultMaxQueueSize
	}
	switch {
	case c.BatchSize < 0:
		return c, &ConfigError{Field: "BatchSize", Reason: "must not be negative"}
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	}
	switch {
	case c.Timeout < 0:
		return c, &ConfigError{Field: "Timeout", Reason: "must not be negative"}
	case c.Timeout == 0:
		c.Timeout = DefaultTimeout
	}
	if c.Version == "" {
		c.Version = defaultVersion()
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: defaultTransport()}
	}
	if c.Retry, err = c.Retry.withDefaults(); err != nil {
		return c, err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.sleep == nil {
		c.sleep = retry.Sleep
	}
	return c, nil
}

// modulePath is evfwd's module, whose version a program records when it
// depends on it.
const modulePath = "github.com/evfwd/evfwd"

// defaultVersion is the evfwd version a program embedding the client was
// built with. evfwd's own binary sets Config.Version (it knows its release
// version); its tests and `go run` builds record none and send "dev".
var defaultVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == modulePath && m.Version != "" && m.Version != "(devel)" {
				return m.Version
			}
		}
	}
	return "dev"
})

// stockTransport is net/http's own http.DefaultTransport (nil if another
// package replaced it even earlier). Only the pointer is read at start-up:
// a program may still replace the variable, or change the transport's
// settings, before it builds a client.
var stockTransport, _ = http.DefaultTransport.(*http.Transport)

// tunedTransport is stockTransport with a write buffer that holds a typical
// batch whole, so an HTTP/1.1 request goes out in one write rather than
// headers and 4 KB pieces in several, and room for an idle connection per
// client when many share it (send --workers). It is cloned when the first
// client needs it, so settings given to the stock transport before then
// carry over.
var tunedTransport = sync.OnceValue(func() http.RoundTripper {
	t := stockTransport.Clone()
	t.WriteBufferSize = 64 << 10
	t.MaxIdleConnsPerHost = 64
	return t
})

// defaultTransport is what a client without an HTTPClient sends through,
// decided when the client is built: the tuned stock transport, or
// http.DefaultTransport as it is when a program has replaced it.
func defaultTransport() http.RoundTripper {
	if t, ok := http.DefaultTransport.(*http.Transport); ok && t == stockTransport {
		return tunedTransport()
	}
	return http.DefaultTransport
}
