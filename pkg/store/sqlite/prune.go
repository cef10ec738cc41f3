package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/prune"
)

// Prune implements store.Store: the pass of package prune, each step one
// group-commit op, so ingest waits for at most one step. Pending messages
// (and delete notifications) stay where they are and are stepped over.
func (s *Store) Prune(ctx context.Context, before time.Time) (store.Pruned, error) {
	freeBefore, err := s.freePages(ctx)
	if err != nil {
		return store.Pruned{}, err
	}
	total, err := prune.Pass(store.Millis(before), func(step func(context.Context, prune.Tx) error) error {
		return s.do(ctx, 0, func(ctx context.Context, tx *wtx) error { return step(ctx, pruneTx{tx}) })
	})
	if err != nil {
		return total, err
	}
	return total, s.giveBack(ctx, freeBefore)
}

// freePages is the number of pages on the file's free list.
func (s *Store) freePages(ctx context.Context) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&n)
	return n, err
}

// pruneTx is a prune step's statements in the writer's transaction.
type pruneTx struct{ tx *wtx }

// Candidates implements prune.Tx: the writer is the only one, so the scan
// can judge pending deliveries itself.
func (p pruneTx) Candidates(ctx context.Context, after, cutoff int64) ([]int64, int64, bool, error) {
	rows, err := p.tx.QueryContext(ctx, `SELECT m.id, m.received_at < ? AND m.type != 'delete'
		AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message = m.id AND d.status = 'pending'),
		m.received_at < ?
		FROM messages m WHERE m.id > ? ORDER BY m.id LIMIT ?`, cutoff, cutoff, after, store.PruneStep)
	if err != nil {
		return nil, after, false, err
	}
	defer rows.Close()
	return prune.Scan(rows, after)
}

// Remove implements prune.Tx.
func (p pruneTx) Remove(ctx context.Context, stmt string, ids []int64) (int64, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	res, err := p.tx.ExecContext(ctx, fmt.Sprintf(stmt, "IN (?"+strings.Repeat(",?", len(ids)-1)+")"), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// vacuumStep bounds the pages one incremental vacuum step moves (4 MiB of
// 4 KiB pages).
const vacuumStep = 1024

// giveBack returns free pages to the file system, a step at a time, but
// keeps as many as the pass just freed (free now less freeBefore): under
// steady load ingest takes about that many before the next pass, and pages
// returned only to be grown again are wasted writes. After a burst, or when
// load stops, the next pass frees less than is free and the rest goes back.
func (s *Store) giveBack(ctx context.Context, freeBefore int64) error {
	for {
		var more bool
		err := s.doConn(ctx, func(ctx context.Context, c *wtx) error {
			var free int64
			if err := c.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
				return err
			}
			keep := max(free-freeBefore, 0)
			excess := free - keep
			if excess <= 0 {
				return nil
			}
			n := min(excess, vacuumStep)
			more = excess > n
			// Later steps keep the same number of pages free.
			freeBefore -= n
			// Unprepared: n differs every time.
			_, err := c.c.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, n))
			return err
		})
		if err != nil || !more {
			return err
		}
	}
}
