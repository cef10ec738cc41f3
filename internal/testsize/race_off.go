//go:build !race

package testsize

// Race reports whether the binary was built with the race detector.
const Race = false
