//go:build !linux

package testmain

// memoryTempDir is "" where there is no /dev/shm tmpfs to use.
func memoryTempDir() string { return "" }
