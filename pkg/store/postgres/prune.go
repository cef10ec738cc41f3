package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/prune"
	"github.com/jackc/pgx/v5"
)

// Prune implements store.Store: the pass of package prune, a short
// transaction per step as on SQLite. Nodes may prune at once: a step locks
// the deliveries of the messages it examines (skipping messages another
// node holds) before it checks that none is pending, so a concurrent retry
// either waits for the step or makes its delivery pending first and keeps
// the message. Deleted rows are left to autovacuum, which the tables are
// tuned for (see migrations).
func (s *Store) Prune(ctx context.Context, before time.Time) (store.Pruned, error) {
	leave, err := s.enter()
	if err != nil {
		return store.Pruned{}, err
	}
	defer leave()
	return prune.Pass(store.Millis(before), func(step func(context.Context, prune.Tx) error) error {
		return retryTransient(func() error {
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return step(ctx, pruneTx{tx}) })
		})
	})
}

// pruneTx is a prune step's statements in its transaction.
type pruneTx struct{ tx pgx.Tx }

// Candidates implements prune.Tx: it locks the messages it examines, then
// their deliveries, and only then keeps the messages with none pending.
func (p pruneTx) Candidates(ctx context.Context, after, cutoff int64) ([]int64, int64, bool, error) {
	rows, err := p.tx.Query(ctx, `SELECT id, received_at < $2 AND type != 'delete', received_at < $2
		FROM messages WHERE id > $1 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`, after, cutoff, store.PruneStep)
	if err != nil {
		return nil, after, false, err
	}
	ids, last, done, err := prune.Scan(rows, after)
	rows.Close()
	if err != nil || len(ids) == 0 {
		return ids, last, done, err
	}
	if _, err := p.tx.Exec(ctx, `SELECT 1 FROM deliveries WHERE message = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
		return nil, last, false, err
	}
	err = p.tx.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM unnest($1::bigint[]) AS c (id)
		WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message = c.id AND d.status = 'pending')`, ids).Scan(&ids)
	return ids, last, done, err
}

// Remove implements prune.Tx.
func (p pruneTx) Remove(ctx context.Context, stmt string, ids []int64) (int64, error) {
	tag, err := p.tx.Exec(ctx, fmt.Sprintf(stmt, "= ANY($1)"), ids)
	return tag.RowsAffected(), err
}
