package postgres

import (
	"context"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/jackc/pgx/v5"
)

// Prune implements store.Store, a short transaction per step as on SQLite.
// Nodes may prune at once: a step locks the deliveries of the messages it
// examines (skipping messages another node holds) before it checks that
// none is pending, so a concurrent retry either waits for the step or makes
// its delivery pending first and keeps the message. Deleted rows are left
// to autovacuum, which the tables are tuned for (see migrations).
func (s *Store) Prune(ctx context.Context, before time.Time) (store.Pruned, error) {
	leave, err := s.enter()
	if err != nil {
		return store.Pruned{}, err
	}
	defer leave()
	var total store.Pruned
	cutoff := store.Millis(before)
	var after int64
	for {
		var step store.Pruned
		var done bool
		err := retryTransient(func() error {
			step = store.Pruned{}
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				var err error
				after, done, err = pruneStep(ctx, tx, after, cutoff, &step)
				return err
			})
		})
		if err != nil {
			return total, err
		}
		total.Add(step)
		if done {
			return total, nil
		}
	}
}

// pruneStep examines up to store.PruneStep messages after id after and
// removes the prunable ones; see the SQLite store's pruneStep.
func pruneStep(ctx context.Context, tx pgx.Tx, after, cutoff int64, n *store.Pruned) (int64, bool, error) {
	rows, err := tx.Query(ctx, `SELECT id, received_at < $2 AND type != 'delete', received_at < $2
		FROM messages WHERE id > $1 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`, after, cutoff, store.PruneStep)
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
	// Lock the candidates' deliveries, then keep only messages with none
	// pending.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM deliveries WHERE message = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
		return after, false, err
	}
	if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM unnest($1::bigint[]) AS c (id)
		WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message = c.id AND d.status = 'pending')`, ids).Scan(&ids); err != nil {
		return after, false, err
	}
	for _, q := range []struct {
		sql string
		n   *int64
	}{
		{`DELETE FROM attempts WHERE delivery IN (SELECT id FROM deliveries WHERE message = ANY($1))`, &n.Attempts},
		{`DELETE FROM deliveries WHERE message = ANY($1)`, &n.Deliveries},
		{`DELETE FROM messages WHERE id = ANY($1)`, &n.Messages},
	} {
		tag, err := tx.Exec(ctx, q.sql, ids)
		if err != nil {
			return after, false, err
		}
		*q.n += tag.RowsAffected()
	}
	return after, done, nil
}
