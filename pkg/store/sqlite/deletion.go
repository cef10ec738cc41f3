package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
)

// CreateDeletion implements store.Admin.
func (s *Store) CreateDeletion(ctx context.Context, r store.DeletionRequest) (*store.Deletion, error) {
	now := store.Millis(s.opts.Now())
	err := s.do(ctx, len(r.Messages), func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO deletions (id, user_id, created_at) VALUES (?, ?, ?)`,
			r.ID, r.UserID, store.Millis(r.CreatedAt)); err != nil {
			return err
		}
		type did struct{ cancelled, purged int64 }
		done := map[string]did{}
		for _, src := range r.Sources {
			// Earlier delete notifications are the customer's clean-up
			// signal: they are neither withdrawn nor emptied.
			const mine = `SELECT id FROM messages WHERE user_id = ? AND source = ? AND type != 'delete'`
			res, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = 'cancelled', lease_owner = NULL,
				lease_expires_at = 0, last_error = ?, updated_at = ?
				WHERE status = 'pending' AND source = ? AND message IN (`+mine+`)`,
				"cancelled by deletion request "+r.ID, now, src, r.UserID, src)
			if err != nil {
				return err
			}
			c, _ := res.RowsAffected()
			res, err = tx.ExecContext(ctx, `UPDATE messages SET body = X'' WHERE id IN (`+mine+`) AND length(body) > 0`,
				r.UserID, src)
			if err != nil {
				return err
			}
			p, _ := res.RowsAffected()
			done[src] = did{c, p}
		}
		if len(r.Messages) > 0 {
			if err := insertChunkTx(ctx, tx, r.Messages, now); err != nil {
				return err
			}
		}
		notified := map[string]string{}
		for _, m := range r.Messages {
			notified[m.Source] = m.MessageID
		}
		for _, src := range r.Sources {
			var msg any // NULL when the source got no notification
			if id, ok := notified[src]; ok {
				var rowid int64
				if err := tx.QueryRowContext(ctx, `SELECT id FROM messages WHERE source = ? AND message_id = ?`, src, id).Scan(&rowid); err != nil {
					return fmt.Errorf("delete message of %s: %w", src, err)
				}
				msg = rowid
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO deletion_sources (deletion, source, message, cancelled, purged)
				VALUES (?, ?, ?, ?, ?)`, r.ID, src, msg, done[src].cancelled, done[src].purged); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Deletion(ctx, r.ID)
}

// Deletion implements store.Admin.
func (s *Store) Deletion(ctx context.Context, id string) (*store.Deletion, error) {
	d := &store.Deletion{ID: id}
	var created int64
	err := s.read.QueryRowContext(ctx, `SELECT user_id, created_at FROM deletions WHERE id = ?`, id).Scan(&d.UserID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("deletion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	d.CreatedAt = store.FromMillis(created)
	rows, err := s.read.QueryContext(ctx, `SELECT `+rowscan.DeletionSourceColumns+`
		FROM deletion_sources ds LEFT JOIN messages m ON m.id = ds.message LEFT JOIN deliveries dl ON dl.message = ds.message
		WHERE ds.deletion = ? ORDER BY ds.source`, id)
	if err != nil {
		return nil, err
	}
	if d.Sources, err = collect(rows, rowscan.DeletionSource); err != nil {
		return nil, err
	}
	return d, nil
}
