//go:build unix

package sqlite_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used: a
// benchmark's cost that the disk's fsync times do not move.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
