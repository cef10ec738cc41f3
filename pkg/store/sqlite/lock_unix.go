//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrLocked means another process holds the store's lock.
var ErrLocked = errors.New("store is in use by another evfwd serve")

// Lock takes the exclusive lock that says one serve process uses the file
// at path (it is what lets Reclaim release every lease). The lock dies with
// the process, so a crash never leaves it behind; release it by calling the
// returned function.
//
// A path that cannot be the store (a directory, a file it may not read or
// write: CheckPath) is refused before the lock file is made, so that
// nothing is left beside it; a missing directory is made.
func Lock(path string) (release func(), err error) {
	if err := CheckPath(path, false); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, pathError(path, err)
	}
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, pathError(path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The file stays: removing it would let a second process lock a new
	// file while a third still holds the old one.
	return func() { f.Close() }, nil
}
