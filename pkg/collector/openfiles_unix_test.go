//go:build unix

package collector_test

import "syscall"

// openFiles is the process's limit of open files (0: unknown). Go raises
// the soft limit to the hard one as it starts.
func openFiles() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}
