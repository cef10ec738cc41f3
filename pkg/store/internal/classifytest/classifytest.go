// Package classifytest checks an engine's classify, the function that
// wraps store.ErrFull around the driver's errors that mean "no room to
// write now", the same way for both engines' tests.
package classifytest

import (
	"errors"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
)

// Case is an error and whether classify must call it full. An alias of
// an unnamed struct, so that a table of cases can be written unkeyed.
type Case = struct {
	Name string
	Err  error
	Full bool
}

// Run checks classify on each case: store.ErrFull exactly where the case
// says, the driver's error kept inside, and nil left nil.
func Run(t *testing.T, classify func(error) error, cases []Case) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			got := classify(tt.Err)
			if errors.Is(got, store.ErrFull) != tt.Full {
				t.Fatalf("classify(%v) = %v: ErrFull %v, want %v", tt.Err, got, !tt.Full, tt.Full)
			}
			if !errors.Is(got, tt.Err) {
				t.Errorf("classify(%v) = %v lost the driver's error", tt.Err, got)
			}
		})
	}
	if classify(nil) != nil {
		t.Error("classify(nil) is not nil")
	}
}
