package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/jackc/pgx/v5"
)

// CreateDeletion implements store.Admin.
func (s *Store) CreateDeletion(ctx context.Context, r store.DeletionRequest) (*store.Deletion, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	now := store.Millis(s.opts.Now())
	err = again(func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO deletions (id, user_id, created_at) VALUES ($1, $2, $3)`,
				r.ID, r.UserID, store.Millis(r.CreatedAt)); err != nil {
				return err
			}
			type did struct{ cancelled, purged int64 }
			done := map[string]did{}
			for _, src := range r.Sources {
				// Earlier delete notifications are the customer's clean-up
				// signal: they are neither withdrawn nor emptied.
				const mine = `SELECT id FROM messages WHERE user_id = $1 AND source = $2 AND type != 'delete'`
				c, err := tx.Exec(ctx, `UPDATE deliveries SET status = 'cancelled', lease_owner = NULL,
					lease_expires_at = 0, last_error = $3, updated_at = $4
					WHERE status = 'pending' AND source = $2 AND message IN (`+mine+`)`,
					r.UserID, src, "cancelled by deletion request "+r.ID, now)
				if err != nil {
					return err
				}
				p, err := tx.Exec(ctx, `UPDATE messages SET body = '' WHERE id IN (`+mine+`) AND length(body) > 0`, r.UserID, src)
				if err != nil {
					return err
				}
				done[src] = did{c.RowsAffected(), p.RowsAffected()}
			}
			if len(r.Messages) > 0 {
				if err := ingestExec(ctx, tx, r.Messages, now); err != nil {
					return err
				}
			}
			notified := map[string]string{}
			for _, m := range r.Messages {
				notified[m.Source] = m.MessageID
			}
			for _, src := range r.Sources {
				var msg *int64 // NULL when the source got no notification
				if id, ok := notified[src]; ok {
					var rowid int64
					if err := tx.QueryRow(ctx, `SELECT id FROM messages WHERE source = $1 AND message_id = $2`, src, id).Scan(&rowid); err != nil {
						return fmt.Errorf("delete message of %s: %w", src, err)
					}
					msg = &rowid
				}
				if _, err := tx.Exec(ctx, `INSERT INTO deletion_sources (deletion, source, message, cancelled, purged)
					VALUES ($1, $2, $3, $4, $5)`, r.ID, src, msg, done[src].cancelled, done[src].purged); err != nil {
					return err
				}
			}
			return nil
		})
	})
	leave()
	if err != nil {
		return nil, err
	}
	return s.Deletion(ctx, r.ID)
}

// Deletion implements store.Admin.
func (s *Store) Deletion(ctx context.Context, id string) (*store.Deletion, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	d := &store.Deletion{ID: id}
	var created int64
	err = s.pool.QueryRow(ctx, `SELECT user_id, created_at FROM deletions WHERE id = $1`, id).Scan(&d.UserID, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("deletion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	d.CreatedAt = store.FromMillis(created)
	rows, err := s.pool.Query(ctx, `SELECT `+rowscan.DeletionSourceColumns+`
		FROM deletion_sources ds LEFT JOIN messages m ON m.id = ds.message LEFT JOIN deliveries dl ON dl.message = ds.message
		WHERE ds.deletion = $1 ORDER BY ds.source COLLATE "C"`, id)
	if err != nil {
		return nil, err
	}
	if d.Sources, err = collect(rows, rowscan.DeletionSource); err != nil {
		return nil, err
	}
	return d, nil
}

// Sizes of the steps of a sync: rows staged per statement, and users
// diffed per page. Each bounds what is held in memory at once.
const (
	stageChunk = 2000
	syncPage   = 1000
)
