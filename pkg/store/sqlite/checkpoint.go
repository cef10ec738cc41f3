package sqlite

import (
	"context"
	"time"
)

// checkpointEvery is how many commits the writer makes between two
// background checkpoints (and checkpointAfter the longest it waits with
// commits pending one).
const (
	checkpointEvery = 32
	checkpointAfter = 200 * time.Millisecond
)

// checkpointer copies the WAL into the database file in the background,
// on a connection of the read pool: the writer's connection does not
// checkpoint (wal_autocheckpoint=0), so the copy and its fsync of the
// file never hold up a commit. PASSIVE mode takes no lock a writer or a
// reader waits on; what it cannot copy yet, a later one does. It runs
// until stop is closed.
func (s *Store) checkpointer(kick <-chan struct{}, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-kick:
		}
		var busy, log, copied int
		// An error (the file is gone, the disk is full) is the writer's to
		// report; the next kick tries again.
		s.read.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied)
	}
}

// committed tells the checkpointer about a commit, every checkpointEvery
// of them, or after checkpointAfter when fewer came.
func (s *Store) committed() {
	s.commits++
	if s.commits < checkpointEvery && time.Since(s.kicked) < checkpointAfter {
		return
	}
	s.commits, s.kicked = 0, time.Now()
	select {
	case s.kick <- struct{}{}:
	default: // one is under way
	}
}
