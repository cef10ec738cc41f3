package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"iter"
	"strings"

	"github.com/evfwd/evfwd/pkg/store"
)

var _ store.Admin = (*Store)(nil)

// clearStaging drops sync lists a crashed process left half staged; the
// file lock means no sync is in flight when Open runs.
func clearStaging(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `DELETE FROM sync_staging`)
	return err
}

// Sizes of the steps of a sync: rows staged per transaction, and users
// diffed per page. Each bounds what is held in memory at once.
const (
	stageChunk = 2000
	syncPage   = 1000
)

// Sync implements store.Admin. The list is staged in sync_staging in
// chunks, each its own small transaction, so the writer is never held
// while the caller's input arrives; then one transaction diffs the staged
// list against sync_values page by page, queues the messages, updates the
// values and drops the staged rows.
func (s *Store) Sync(ctx context.Context, sy store.Sync, values iter.Seq2[store.Value, error]) (*store.SyncResult, error) {
	b := make([]byte, 8)
	rand.Read(b)
	id := hex.EncodeToString(b)
	if err := s.stage(ctx, id, values); err != nil {
		// Leave nothing behind, even when ctx has ended.
		s.do(context.WithoutCancel(ctx), 0, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM sync_staging WHERE sync = ?`, id)
			return err
		})
		return nil, err
	}
	var res store.SyncResult
	err := s.do(context.WithoutCancel(ctx), 0, func(ctx context.Context, tx *sql.Tx) error {
		res = store.SyncResult{}
		return applySync(ctx, tx, id, sy, &res)
	})
	if err != nil {
		s.do(context.WithoutCancel(ctx), 0, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM sync_staging WHERE sync = ?`, id)
			return err
		})
		return nil, err
	}
	return &res, nil
}

// stage writes values into sync_staging under id, a chunk at a time.
func (s *Store) stage(ctx context.Context, id string, values iter.Seq2[store.Value, error]) error {
	chunk := make([]store.Value, 0, stageChunk)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		var q strings.Builder
		q.WriteString(`INSERT INTO sync_staging (sync, user_id, value) VALUES `)
		args := make([]any, 0, 3*len(chunk))
		for i, v := range chunk {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?)")
			args = append(args, id, v.UserID, v.Value)
		}
		q.WriteString(` ON CONFLICT (sync, user_id) DO UPDATE SET value = excluded.value`)
		err := s.do(ctx, 0, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, q.String(), args...)
			return err
		})
		chunk = chunk[:0]
		return err
	}
	for v, err := range values {
		if err != nil {
			return err
		}
		// Copy: the caller may reuse its buffers.
		chunk = append(chunk, store.Value{UserID: v.UserID, Value: append([]byte(nil), v.Value...)})
		if len(chunk) == stageChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// applySync is the transaction of a sync (see Sync).
func applySync(ctx context.Context, tx *sql.Tx, id string, sy store.Sync, res *store.SyncResult) error {
	now := store.Millis(sy.Now)
	var known int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM syncs WHERE kind = ? AND key = ?`, sy.Kind, sy.Key).Scan(&known); err != nil {
		return err
	}
	res.First = known == 0
	if _, err := tx.ExecContext(ctx, `INSERT INTO syncs (kind, key, name, created_at, synced_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (kind, key) DO UPDATE SET name = excluded.name, synced_at = excluded.synced_at`,
		sy.Kind, sy.Key, sy.Name, now, now); err != nil {
		return err
	}
	var staged int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sync_staging WHERE sync = ?`, id).Scan(&staged); err != nil {
		return err
	}

	// Listed users whose value is new or different, in user id order.
	var msgs []store.Message
	var page []store.Value
	after := ""
	for {
		page = page[:0]
		rows, err := tx.QueryContext(ctx, `SELECT s.user_id, s.value, v.user_id IS NULL FROM sync_staging s
			LEFT JOIN sync_values v ON v.kind = ? AND v.key = ? AND v.user_id = s.user_id
			WHERE s.sync = ? AND s.user_id > ? AND (v.user_id IS NULL OR v.value != s.value)
			ORDER BY s.user_id LIMIT ?`, sy.Kind, sy.Key, id, after, syncPage)
		if err != nil {
			return err
		}
		for rows.Next() {
			var v store.Value
			var added bool
			if err := rows.Scan(&v.UserID, &v.Value, &added); err != nil {
				rows.Close()
				return err
			}
			if added {
				res.Added++
			} else {
				res.Changed++
			}
			page = append(page, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		after = page[len(page)-1].UserID
		msgs = msgs[:0]
		for _, v := range page {
			msgs = append(msgs, sy.Messages(v.UserID, v.Value)...)
		}
		if err := insertMessages(ctx, tx, msgs, now); err != nil {
			return err
		}
		res.Messages += len(msgs)
		if err := upsertValues(ctx, tx, sy, page); err != nil {
			return err
		}
	}
	res.Unchanged = staged - res.Added - res.Changed

	// Stored users no longer listed.
	after = ""
	for {
		page = page[:0]
		rows, err := tx.QueryContext(ctx, `SELECT v.user_id FROM sync_values v
			WHERE v.kind = ? AND v.key = ? AND v.user_id > ?
			AND NOT EXISTS (SELECT 1 FROM sync_staging s WHERE s.sync = ? AND s.user_id = v.user_id)
			ORDER BY v.user_id LIMIT ?`, sy.Kind, sy.Key, after, id, syncPage)
		if err != nil {
			return err
		}
		for rows.Next() {
			var v store.Value
			if err := rows.Scan(&v.UserID); err != nil {
				rows.Close()
				return err
			}
			page = append(page, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		after = page[len(page)-1].UserID
		res.Removed += len(page)
		msgs = msgs[:0]
		args := []any{sy.Kind, sy.Key}
		for _, v := range page {
			msgs = append(msgs, sy.Messages(v.UserID, sy.Removed)...)
			args = append(args, v.UserID)
		}
		if err := insertMessages(ctx, tx, msgs, now); err != nil {
			return err
		}
		res.Messages += len(msgs)
		if _, err := tx.ExecContext(ctx, `DELETE FROM sync_values WHERE kind = ? AND key = ? AND user_id IN (?`+
			strings.Repeat(",?", len(page)-1)+`)`, args...); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM sync_staging WHERE sync = ?`, id)
	return err
}

func insertMessages(ctx context.Context, tx *sql.Tx, msgs []store.Message, now int64) error {
	for len(msgs) > 0 {
		n := min(len(msgs), insertChunk)
		if err := insertChunkTx(ctx, tx, msgs[:n], now); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

func upsertValues(ctx context.Context, tx *sql.Tx, sy store.Sync, vs []store.Value) error {
	for len(vs) > 0 {
		n := min(len(vs), 500)
		var q strings.Builder
		q.WriteString(`INSERT INTO sync_values (kind, key, user_id, value) VALUES `)
		args := make([]any, 0, 4*n)
		for i, v := range vs[:n] {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?)")
			args = append(args, sy.Kind, sy.Key, v.UserID, v.Value)
		}
		q.WriteString(` ON CONFLICT (kind, key, user_id) DO UPDATE SET value = excluded.value`)
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		vs = vs[n:]
	}
	return nil
}
