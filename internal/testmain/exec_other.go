//go:build !unix

package testmain

const canReexec = false

// raceNoExitSleep does nothing where a process cannot replace itself: the
// tests pay the race runtime's sleep at exit unless GORACE says
// atexit_sleep_ms=0.
func raceNoExitSleep() {}
