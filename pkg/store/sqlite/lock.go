package sqlite

import (
	"errors"
	"fmt"

	"github.com/gofrs/flock"
)

// ErrLocked means another Open holds the store's lock: another evfwd serve
// (or process), or a Store of this process not yet closed.
var ErrLocked = errors.New("store is in use by another evfwd serve (or process)")

// lock takes the exclusive lock, on PATH.lock beside the database, that
// says one Store uses the file at path: its leases live in that Store's
// memory, so a second one leasing from the file would send deliveries
// twice. It is an flock on Unix and a LockFileEx on Windows, held by the
// open file (a second Open in the same process is refused too), so it dies
// with the process and a crash never leaves it behind. The caller has made
// path's directory (prepareFile).
func lock(path string) (*flock.Flock, error) {
	l := flock.New(path+".lock", flock.SetPermissions(0o600))
	ok, err := l.TryLock()
	if err != nil {
		return nil, pathError(path, err)
	}
	if !ok {
		return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
	}
	// The file stays when it is unlocked: removing it would let a second
	// process lock a new file while a third still holds the old one.
	return l, nil
}

// Locked reports whether the Store holds its file's lock: it was opened
// without NoRecover, and so may lease.
func (s *Store) Locked() bool { return s.lock != nil }
