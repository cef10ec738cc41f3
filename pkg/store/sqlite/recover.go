package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/syncrun"
)

// What a stopped process left unfinished (the deletions it was purging,
// the sync runs it was staging or moving) is finished after Open returns,
// on a goroutine of the store's, so that serve answers ingest at once
// instead of after seconds of that work (issue 31). Before returning, Open
// takes what keeps that work atomic to every reader:
//
//   - the turn of every key a sync run was left for (syncTurns): a sync of
//     the key waits until its runs are finished or dropped, as it would
//     behind a running sync. Readers need nothing more: a run left before
//     its flip is in no list a reader looks at, and one left after it is
//     the current list already (syncrun).
//   - the deletions' turn: a new request is recorded at once, and purges
//     after the ones left unfinished are done (deletions.Finish).
//   - a hold on every unfinished deletion's messages (held): Lease leaves
//     their deliveries alone until the purge has cancelled them, so none
//     of them is sent after its deletion was asked for. Reads of the
//     request say it is not done (store.Deletion.Done).
//
// An error is logged and the work tried again after a pause (a full disk
// frees up); Close stops it, and the next Open takes it up again.

// recovery is the store's background work and how Close stops it.
type recovery struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the work is over, finished or stopped
}

// Recovered is closed once the work a stopped process left (see Open) is
// finished, or stopped by Close; at once with Options.NoRecover.
func (s *Store) Recovered() <-chan struct{} { return s.recovery.done }

// stopRecovery stops the background work and waits for it.
func (s *Store) stopRecovery() {
	if s.recovery.cancel != nil {
		s.recovery.cancel()
	}
	<-s.recovery.done
}

// startRecovery takes the turns and holds of what a stopped process left
// and finishes it on a goroutine.
func (s *Store) startRecovery(ctx context.Context) error {
	keys, err := s.leftRunKeys(ctx)
	if err != nil {
		return fmt.Errorf("sync runs left unfinished: %w", err)
	}
	holds, err := s.unfinishedDeletions(ctx)
	if err != nil {
		return fmt.Errorf("deletions left unfinished: %w", err)
	}
	unlocks := make([]func(), len(keys))
	for i, k := range keys {
		// Nothing else holds a turn yet: this does not wait.
		if unlocks[i], err = s.syncTurns.lock(ctx, k.kind, k.key); err != nil {
			for _, u := range unlocks[:i] {
				u()
			}
			return err
		}
	}
	for id, h := range holds {
		s.held.add(id, h)
	}
	if len(holds) > 0 {
		s.deletionTurn <- struct{}{}
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.recovery.cancel = cancel
	go func() {
		defer close(s.recovery.done)
		s.waitGate(bg) // when it fails, so does the work, at once
		var wg sync.WaitGroup
		if len(keys) > 0 {
			wg.Go(func() { s.recoverSyncs(bg, keys, unlocks) })
		}
		if len(holds) > 0 {
			wg.Go(func() {
				defer func() { <-s.deletionTurn }()
				s.retry(bg, fmt.Sprintf("%d deletion request(s)", len(holds)), s.finishDeletions)
			})
		}
		wg.Wait()
	}()
	return nil
}

// waitGate waits until Options.recoveryGate (tests') is open or ctx ends.
func (s *Store) waitGate(ctx context.Context) {
	if s.opts.recoveryGate == nil {
		return
	}
	select {
	case <-s.opts.recoveryGate:
	case <-ctx.Done():
	}
}

// recoverSyncs finishes or drops the runs of each key, giving up the key's
// turn once they are dealt with.
func (s *Store) recoverSyncs(ctx context.Context, keys []syncKey, unlocks []func()) {
	for i, k := range keys {
		d := syncDriver{read: s.read, step: s.step, kind: k.kind, key: k.key}
		s.retry(ctx, fmt.Sprintf("the sync of %s %q", k.kind, k.key), func(ctx context.Context) error {
			return syncrun.Recover(ctx, d, s.syncSteps.Or(syncrun.Paced()))
		})
		unlocks[i]()
	}
}

// Pauses between tries of the background work.
const (
	firstRetry = time.Second
	lastRetry  = time.Minute
)

// retry runs fn until it succeeds or ctx ends, logging each failure and
// pausing between tries (from firstRetry, doubling up to lastRetry).
func (s *Store) retry(ctx context.Context, what string, fn func(ctx context.Context) error) {
	start := time.Now()
	pause := firstRetry
	for {
		err := fn(ctx)
		if err == nil {
			s.opts.Logger.Info("store: finished what a stopped process left", "work", what, "took", time.Since(start).Round(time.Millisecond).String())
			return
		}
		if ctx.Err() != nil {
			return // Close: the next Open takes it up again
		}
		s.opts.Logger.Error("store: could not finish what a stopped process left; trying again", "work", what, "retryIn", pause.String(), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, lastRetry)
	}
}

// leftRunKeys lists the keys of the sync runs a stopped process left.
func (s *Store) leftRunKeys(ctx context.Context) ([]syncKey, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT DISTINCT kind, key FROM sync_runs ORDER BY kind, key`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(sc rowscan.Scanner) (k syncKey, err error) { return k, sc.Scan(&k.kind, &k.key) })
}

// hold is what an unfinished deletion purges: the messages of user up to
// upto in sources (delete notifications aside).
type hold struct {
	user    string
	upto    int64
	sources []string
}

// unfinishedDeletions reads the holds of the deletions not done, by id.
func (s *Store) unfinishedDeletions(ctx context.Context) (map[string]hold, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT d.id, d.user_id, d.upto, ds.source FROM deletions d
		LEFT JOIN deletion_sources ds ON ds.deletion = d.id WHERE d.done_at = 0 ORDER BY d.id, ds.source`)
	if err != nil {
		return nil, err
	}
	type row struct {
		id     string
		h      hold
		source sql.NullString // NULL: a request of no source
	}
	all, err := collect(rows, func(sc rowscan.Scanner) (r row, err error) {
		return r, sc.Scan(&r.id, &r.h.user, &r.h.upto, &r.source)
	})
	if err != nil {
		return nil, err
	}
	out := map[string]hold{}
	for _, r := range all {
		h, ok := out[r.id]
		if !ok {
			h = r.h
		}
		if r.source.Valid {
			h.sources = append(h.sources, r.source.String)
		}
		out[r.id] = h
	}
	return out, nil
}

// held are the holds of the deletions under way, by request id: Lease
// skips the deliveries of their messages (see clause).
type held struct {
	mu sync.Mutex
	by map[string]hold
}

func (h *held) add(id string, x hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[string]hold{}
	}
	h.by[id] = x
}

func (h *held) drop(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.by, id)
	}
}

// clause is the condition, on deliveries d joined with messages m, that
// leaves out of a lease of source the messages a deletion under way
// purges, with its arguments; "" when none does. Usually no deletion is
// under way, and a lease's statement is the same as without.
func (h *held) clause(source string) (string, []any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var q strings.Builder
	var args []any
	for _, x := range h.by {
		for _, src := range x.sources {
			if src == source {
				q.WriteString(` AND NOT (m.user_id = ? AND d.message <= ? AND m.type != 'delete')`)
				args = append(args, x.user, x.upto)
				break
			}
		}
	}
	return q.String(), args
}

// covers reports whether a deletion under way purges message msg of
// source, user and type typ (msg 0: any message of theirs).
func (h *held) covers(source, user, typ string, msg int64) bool {
	if typ == "delete" {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.by {
		if x.user == user && msg <= x.upto && slices.Contains(x.sources, source) {
			return true
		}
	}
	return false
}

// heldDeletion adds the hold of request r, just recorded.
func (s *Store) heldDeletion(ctx context.Context, r store.DeletionRequest) error {
	var upto int64
	if err := s.read.QueryRowContext(ctx, `SELECT upto FROM deletions WHERE id = ?`, r.ID).Scan(&upto); err != nil {
		return err
	}
	s.held.add(r.ID, hold{user: r.UserID, upto: upto, sources: r.Sources})
	return nil
}
