// Package testsize sizes the slow tests whose property does not depend on
// their size. The race detector slows the pure-Go SQLite about tenfold, so
// under it such a test runs at a smaller size that still shows the
// property (each call site says why); EVFWD_TEST_FULL=1 restores the full
// sizes, for a run that also checks the figures at scale.
package testsize

import "os"

// FullEnv is the variable that asks for the full sizes under -race too.
const FullEnv = "EVFWD_TEST_FULL"

// Full reports whether tests run at their full sizes: without the race
// detector, or with FullEnv=1.
func Full() bool { return !Race || os.Getenv(FullEnv) == "1" }

// Pick returns full when tests run at full size, else small.
func Pick[T any](full, small T) T {
	if Full() {
		return full
	}
	return small
}
