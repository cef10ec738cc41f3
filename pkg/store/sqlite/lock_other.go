//go:build !unix

package sqlite

import "errors"

// ErrLocked means another process holds the store's lock.
var ErrLocked = errors.New("store is in use by another evfwd serve")

// Lock is a no-op where flock is not available: run one serve per file.
func Lock(path string) (release func(), err error) { return func() {}, nil }
