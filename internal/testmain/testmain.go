// Package testmain is the TestMain of every test binary in evfwd.
//
// Under -race the runtime sleeps a second before the process exits, so
// that a goroutine still running can report a race first. With some thirty
// test packages that second, paid by each, was a sixth of the time `go
// test -race ./...` took on two cores. The testing package already fails
// the test during which a race happens, so Run exits without the sleep.
package testmain

import (
	"os"
	"syscall"
	"testing"

	"github.com/evfwd/evfwd/internal/testsize"
)

// Run runs the tests, then each of after (what the tests of the binary
// share, to stop), and exits with the tests' status. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testmain.Run(m) }
func Run(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	if testsize.Race {
		// os.Exit would run the race runtime's finaliser and its sleep.
		syscall.Exit(code)
	}
	os.Exit(code)
}
