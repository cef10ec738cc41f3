//go:build !unix

package serve_test

// lockDir does not lock where there is no flock: two test processes of
// one tree building the binary at the same moment is rare there, and
// unguarded.
func lockDir(string) (unlock func(), err error) { return func() {}, nil }
