package message

import (
	"errors"
	"fmt"
)

// MaxMessageBytes is the largest serialized message the client accepts
// (spec 8: "32 KB should not be exceeded"). It is checked at enqueue, on
// the bytes that would be sent, after messageId, timestamp and
// context.library are added.
const MaxMessageBytes = 32 << 10

// MaxMessageIDLength is the longest messageId accepted (DESIGN §2).
const MaxMessageIDLength = 100

// ErrTooLarge is matched by every *SizeError (errors.Is).
var ErrTooLarge = errors.New("message too large")

// ValidationError reports a message that breaks a rule of spec 2.4. Field
// is the offending field's JSON key as the message carries it, e.g.
// "event" or "userId or anonymousId"; Error reads "<field> <reason>".
type ValidationError struct {
	Type   Type // the message's type when known
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return e.Field + " " + e.Reason }

func invalid(t Type, field, reason string) error {
	return &ValidationError{Type: t, Field: field, Reason: reason}
}

// SizeError reports a message whose serialized form is over MaxMessageBytes.
type SizeError struct {
	Size  int // serialized size in bytes
	Limit int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("message is %d bytes, over the %d-byte limit", e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) true for a *SizeError.
func (e *SizeError) Is(target error) bool { return target == ErrTooLarge }

// CheckSize returns a *SizeError when a serialized message of n bytes is
// over MaxMessageBytes.
func CheckSize(n int) error {
	if n > MaxMessageBytes {
		return &SizeError{Size: n, Limit: MaxMessageBytes}
	}
	return nil
}
