//go:build unix

package testmain

import (
	"os"
	"strings"
	"syscall"

	"github.com/evfwd/evfwd/internal/testsize"
)

// canReexec: a process can replace itself here.
const canReexec = true

// raceNoExitSleep replaces the process, under -race, with the same binary
// and arguments and atexit_sleep_ms=0 added to GORACE, unless GORACE
// already says how long to sleep. It returns when there is nothing to do
// or the exec failed (the tests then run, and pay the sleep).
func raceNoExitSleep() {
	gorace := os.Getenv("GORACE")
	if !testsize.Race || strings.Contains(gorace, "atexit_sleep_ms") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	os.Setenv("GORACE", strings.TrimSpace(gorace+" atexit_sleep_ms=0"))
	syscall.Exec(exe, os.Args, os.Environ())
	os.Setenv("GORACE", gorace)
}
