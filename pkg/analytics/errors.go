package analytics

import (
	"errors"
	"fmt"
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
