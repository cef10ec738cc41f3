package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
)

// Prune implements store.Store. Each step is one group-commit op, so
// ingest waits for at most one step. Messages are examined in id order,
// which is the order they arrived in: a pass ends at the first message
// inside the window. Pending ones (and delete notifications) stay where
// they are and are stepped over.
func (s *Store) Prune(ctx context.Context, before time.Time) (store.Pruned, error) {
	var total store.Pruned
	freeBefore, err := s.freePages(ctx)
	if err != nil {
		return total, err
	}
	cutoff := store.Millis(before)
	var after int64
	for {
		var step store.Pruned
		var done bool
		err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
			step = store.Pruned{}
			var err error
			after, done, err = pruneStep(ctx, tx, after, cutoff, &step)
			return err
		})
		if err != nil {
			return total, err
		}
		total.Add(step)
		if done {
			break
		}
	}
	return total, s.giveBack(ctx, freeBefore)
}

// freePages is the number of pages on the file's free list.
func (s *Store) freePages(ctx context.Context) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&n)
	return n, err
}

// pruneStep examines up to store.PruneStep messages after id after and
// removes the prunable ones. It returns the last id examined and whether
// the pass is over.
func pruneStep(ctx context.Context, tx *wtx, after, cutoff int64, n *store.Pruned) (int64, bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT m.id, m.received_at < ? AND m.type != 'delete'
		AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message = m.id AND d.status = 'pending'),
		m.received_at < ?
		FROM messages m WHERE m.id > ? ORDER BY m.id LIMIT ?`, cutoff, cutoff, after, store.PruneStep)
	if err != nil {
		return after, false, err
	}
	ids, after, done, err := rowscan.PruneScan(rows, after)
	rows.Close()
	if err != nil {
		return after, false, err
	}
	if len(ids) == 0 {
		return after, done, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	in := "(?" + strings.Repeat(",?", len(ids)-1) + ")"
	for _, q := range []struct {
		sql string
		n   *int64
	}{
		{`DELETE FROM attempts WHERE delivery IN (SELECT id FROM deliveries WHERE message IN ` + in + `)`, &n.Attempts},
		{`DELETE FROM deliveries WHERE message IN ` + in, &n.Deliveries},
		{`DELETE FROM messages WHERE id IN ` + in, &n.Messages},
	} {
		res, err := tx.ExecContext(ctx, q.sql, args...)
		if err != nil {
			return after, false, err
		}
		k, _ := res.RowsAffected()
		*q.n += k
	}
	return after, done, nil
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
