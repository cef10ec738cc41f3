package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/evfwd/evfwd/internal/gather"
	"github.com/evfwd/evfwd/pkg/store"
)

// op is one caller's part of a group transaction, or, when conn is set,
// work the writer does alone on its connection outside any transaction (a
// checkpoint, an incremental vacuum).
type op struct {
	msgs  int // counted against MaxPending
	apply func(ctx context.Context, tx *wtx) error
	conn  func(ctx context.Context, tx *wtx) error
	done  chan error
	// read says apply writes nothing to the file (a Lease): the writer
	// runs such ops ahead of its group, in a transaction of their own that
	// commits without an fsync, so that they never wait on the group's.
	read bool
	// replayable says apply may run a second time after its transaction
	// was rolled back: it changes nothing outside the transaction but the
	// leases, through their journal (see Store.commit).
	replayable bool
}

// doConn runs fn on the writer's connection between group transactions,
// alone, and waits for it.
func (s *Store) doConn(ctx context.Context, fn func(context.Context, *wtx) error) error {
	o := &op{conn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	select {
	case s.ops <- o:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	return <-o.done
}

// do queues fn for the next group transaction and waits for its commit.
func (s *Store) do(ctx context.Context, msgs int, fn func(context.Context, *wtx) error) error {
	return s.queue(ctx, &op{msgs: msgs, apply: fn, done: make(chan error, 1)})
}

// doReplayable is do for an fn that may run again (see op.replayable).
func (s *Store) doReplayable(ctx context.Context, msgs int, fn func(context.Context, *wtx) error) error {
	return s.queue(ctx, &op{msgs: msgs, apply: fn, done: make(chan error, 1), replayable: true})
}

// doRead is doReplayable for an fn that writes nothing to the file (see
// op.read).
func (s *Store) doRead(ctx context.Context, fn func(context.Context, *wtx) error) error {
	return s.queue(ctx, &op{apply: fn, done: make(chan error, 1), read: true, replayable: true})
}

// queue queues o and waits for its outcome.
func (s *Store) queue(ctx context.Context, o *op) error {
	msgs := o.msgs
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	if msgs > 0 {
		if s.pending.Add(int64(msgs)) > int64(s.opts.MaxPending) {
			s.pending.Add(-int64(msgs))
			s.mu.RUnlock()
			return store.ErrBusy
		}
	}
	select {
	case s.ops <- o:
	case <-ctx.Done():
		s.pending.Add(-int64(msgs))
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	// Once queued, the op is committed or failed by the writer; waiting for
	// that even after ctx ends keeps "returned nil" meaning "on disk".
	return <-o.done
}

// writer runs group transactions until Close, then the groups of what is
// queued (Close holds mu while closing, so no op is queued after that).
// A group waits a little for more writes when it holds fewer than the
// last (gather.Gatherer.Linger): callers of one message each otherwise
// make small and large groups in turn, the small ones paying a whole
// fsync for a few ops. Reads and connection ops do not wait; a connection
// op ends its group (run runs it after the others' transaction).
func (s *Store) writer() {
	defer close(s.done)
	g := gather.Gatherer[*op]{In: s.ops, Stop: s.closing, Max: s.opts.MaxGroup, Linger: maxGatherWait,
		Ends:  func(o *op) bool { return o.conn != nil },
		Hurry: func(o *op) bool { return o.read }}
	g.Run(s.run)
}

// maxGatherWait bounds how long a group waits for more writes: less than
// the commit the late callers would otherwise wait for.
const maxGatherWait = 5 * time.Millisecond

// run commits group, whose last op may be a connection op: that one runs
// after the others' transaction, on its own.
func (s *Store) run(group []*op) {
	if reads := readsFirst(group); reads > 0 && reads < len(group) {
		s.commit(group[:reads])
		group = group[reads:]
	}
	last := group[len(group)-1]
	if last.conn == nil {
		s.commit(group)
		return
	}
	if len(group) > 1 {
		s.commit(group[:len(group)-1])
	}
	last.done <- last.conn(context.Background(), s.wtx)
}

// readsFirst moves group's read ops (but a connection op, which stays
// last) to its front, in order, and reports how many there are.
func readsFirst(group []*op) int {
	n := 0
	for i, o := range group {
		if o.read && o.conn == nil {
			copy(group[n+1:i+1], group[n:i])
			group[n] = o
			n++
		}
	}
	return n
}

// commit runs group in one transaction and answers every op. A group
// whose ops may all run again runs first without savepoints, a large part
// of ingest's time (docs/PERFORMANCE.md, "Figures behind the code"); should one of them fail, the
// transaction is rolled back and the group runs again with a savepoint
// per op, so that only that op fails. A transaction that fails by itself
// (BEGIN, COMMIT) fails every op, as it would with savepoints.
func (s *Store) commit(group []*op) {
	s.commits.Add(1)
	errs := make([]error, len(group))
	var err error
	if replayable := !slices.ContainsFunc(group, func(o *op) bool { return !o.replayable }); !replayable {
		err = s.transact(group, errs, true)
	} else if err = s.transact(group, errs, false); errors.Is(err, errOpFailed) {
		clear(errs)
		err = s.transact(group, errs, true)
	}
	for i, o := range group {
		if o.msgs > 0 {
			s.pending.Add(-int64(o.msgs))
		}
		if err != nil {
			o.done <- fmt.Errorf("store: commit: %w", err)
		} else {
			o.done <- errs[i]
		}
	}
}

// errOpFailed says an op of a group without savepoints failed.
var errOpFailed = errors.New("store: an op of the group failed")

// transact runs group in one transaction: each op in a savepoint of its
// own, whose failure is recorded in errs and rolls back that op alone,
// or, without savepoints, each op as part of the whole, whose failure
// rolls back the transaction (transact returns errOpFailed). Any other
// error (BEGIN, COMMIT) is the transaction's, and returned.
func (s *Store) transact(group []*op, errs []error, savepoints bool) error {
	ctx := context.Background()
	tx := s.wtx
	// What an op did to the leases in memory is undone with what it did
	// to the file: when it fails, or when the whole transaction does.
	defer s.leases.settle()
	err := tx.run(ctx, func() error {
		for i, o := range group {
			if !savepoints {
				if errs[i] = o.apply(ctx, tx); errs[i] != nil {
					return errOpFailed
				}
				continue
			}
			if _, err := tx.ExecContext(ctx, "SAVEPOINT op"); err != nil {
				return err
			}
			mark := s.leases.mark()
			if errs[i] = o.apply(ctx, tx); errs[i] != nil {
				s.leases.undo(mark)
				if _, err := tx.ExecContext(ctx, "ROLLBACK TO op"); err != nil {
					// SQLite rolled the whole transaction back (it may on
					// SQLITE_FULL): the op's error is why.
					return fmt.Errorf("%w (rollback to savepoint: %v)", errs[i], err)
				}
			}
			if _, err := tx.ExecContext(ctx, "RELEASE op"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.leases.undo(0)
	}
	return err
}
