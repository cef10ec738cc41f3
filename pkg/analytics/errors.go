package analytics

import (
	"errors"
	"fmt"

	"github.com/evfwd/evfwd/internal/retry"
)

var (
	// ErrQueueFull refuses a message when MaxQueueSize messages wait;
	// nothing already queued is lost.
	ErrQueueFull = errors.New("analytics: queue full")
	// ErrClosed refuses a message after Close, and fails messages that a
	// Close whose context ran out left unsent.
	ErrClosed = errors.New("analytics: client closed")
)

// APIError is a batch's final failure answered by the server.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("analytics: server answered %d: %s", e.Status, e.Message)
}

// Retryable reports whether the answer was worth another attempt (5xx, 408,
// 429): true means the batch failed because its retries ran out, false
// that the server refused it for good.
func (e *APIError) Retryable() bool { return retry.Status(e.Status) }

// TransportError is a batch's final failure without an answer: the
// connection failed or an attempt timed out.
type TransportError struct {
	Err error
}

func (e *TransportError) Error() string { return e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// Retryable is always true: nothing refused the batch, so only the retries
// ran out.
func (e *TransportError) Retryable() bool { return true }

// retryable applies the one retry rule to an attempt's error: an answer
// per its status, anything else (no answer) is worth another try.
func retryable(err error) bool {
	var r interface{ Retryable() bool }
	return !errors.As(err, &r) || r.Retryable()
}
