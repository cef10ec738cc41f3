//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrLocked means another process holds the store's lock.
var ErrLocked = errors.New("store is in use by another evfwd serve")

// Lock takes the exclusive lock that says one serve process uses the file
// at path (it is what lets Reclaim release every lease). The lock dies with
// the process, so a crash never leaves it behind; release it by calling the
// returned function.
func Lock(path string) (release func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
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
