//go:build !unix

package collector_test

// openFiles is the process's limit of open files (0: unknown).
func openFiles() uint64 { return 0 }
