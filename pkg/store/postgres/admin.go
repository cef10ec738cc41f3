package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"iter"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/jackc/pgx/v5"
)

// The admin data follows the SQLite store's (see its admin.go); what
// differs is that a sync's staged list is not cleared at Open, since other
// nodes may be staging theirs: sync_staging is unlogged, so a crash of the
// server empties it, and a node that dies mid-sync leaves only its own
// rows under a random id.

var _ store.Admin = (*Store)(nil)

// Sync implements store.Admin. The list is staged in sync_staging in
// chunks, then one transaction diffs it against sync_values page by page,
// queues the messages, updates the values and drops the staged rows. The
// transaction first takes an advisory lock on the sync's key, so two nodes
// syncing the same audience at once apply one after the other.
func (s *Store) Sync(ctx context.Context, sy store.Sync, values iter.Seq2[store.Value, error]) (*store.SyncResult, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	b := make([]byte, 8)
	rand.Read(b)
	id := hex.EncodeToString(b)
	cleanup := func() {
		s.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM sync_staging WHERE sync = $1`, id)
	}
	if err := s.stage(ctx, id, values); err != nil {
		cleanup()
		return nil, err
	}
	var res store.SyncResult
	err = again(func() error {
		return pgx.BeginFunc(context.WithoutCancel(ctx), s.pool, func(tx pgx.Tx) error {
			res = store.SyncResult{}
			return applySync(context.WithoutCancel(ctx), tx, id, sy, &res)
		})
	})
	if err != nil {
		cleanup()
		return nil, err
	}
	return &res, nil
}

// stage writes values into sync_staging under id, a chunk at a time.
func (s *Store) stage(ctx context.Context, id string, values iter.Seq2[store.Value, error]) error {
	users, vals := make([]string, 0, stageChunk), make([][]byte, 0, stageChunk)
	flush := func() error {
		if len(users) == 0 {
			return nil
		}
		// A user listed twice takes the last value: later chunks
		// overwrite, and within a chunk only the last is sent.
		last := make(map[string]int, len(users))
		for i, u := range users {
			last[u] = i
		}
		var u2 []string
		var v2 [][]byte
		for i, u := range users {
			if last[u] == i {
				u2, v2 = append(u2, u), append(v2, vals[i])
			}
		}
		_, err := s.pool.Exec(ctx, `INSERT INTO sync_staging (sync, user_id, value)
			SELECT $1, * FROM unnest($2::text[], $3::bytea[])
			ON CONFLICT (sync, user_id) DO UPDATE SET value = excluded.value`, id, u2, v2)
		users, vals = users[:0], vals[:0]
		return err
	}
	for v, err := range values {
		if err != nil {
			return err
		}
		// Copy: the caller may reuse its buffers.
		users, vals = append(users, v.UserID), append(vals, append([]byte(nil), v.Value...))
		if len(users) == stageChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// applySync is the transaction of a sync (see Sync).
func applySync(ctx context.Context, tx pgx.Tx, id string, sy store.Sync, res *store.SyncResult) error {
	now := store.Millis(sy.Now)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1 || '/' || $2))`, string(sy.Kind), sy.Key); err != nil {
		return err
	}
	var known int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM syncs WHERE kind = $1 AND key = $2`, sy.Kind, sy.Key).Scan(&known); err != nil {
		return err
	}
	res.First = known == 0
	if _, err := tx.Exec(ctx, `INSERT INTO syncs (kind, key, name, created_at, synced_at) VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (kind, key) DO UPDATE SET name = excluded.name, synced_at = excluded.synced_at`,
		sy.Kind, sy.Key, sy.Name, now); err != nil {
		return err
	}
	var staged int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM sync_staging WHERE sync = $1`, id).Scan(&staged); err != nil {
		return err
	}

	// Listed users whose value is new or different, in user id order.
	var msgs []store.Message
	after := ""
	for {
		rows, err := tx.Query(ctx, `SELECT s.user_id, s.value, v.user_id IS NULL FROM sync_staging s
			LEFT JOIN sync_values v ON v.kind = $1 AND v.key = $2 AND v.user_id = s.user_id
			WHERE s.sync = $3 AND s.user_id > $4 AND (v.user_id IS NULL OR v.value != s.value)
			ORDER BY s.user_id LIMIT $5`, sy.Kind, sy.Key, id, after, syncPage)
		if err != nil {
			return err
		}
		var users []string
		var vals [][]byte
		for rows.Next() {
			var u string
			var v []byte
			var added bool
			if err := rows.Scan(&u, &v, &added); err != nil {
				rows.Close()
				return err
			}
			if added {
				res.Added++
			} else {
				res.Changed++
			}
			users, vals = append(users, u), append(vals, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(users) == 0 {
			break
		}
		after = users[len(users)-1]
		msgs = msgs[:0]
		for i, u := range users {
			msgs = append(msgs, sy.Messages(u, vals[i])...)
		}
		if len(msgs) > 0 {
			if err := ingestExec(ctx, tx, msgs, now); err != nil {
				return err
			}
		}
		res.Messages += len(msgs)
		if _, err := tx.Exec(ctx, `INSERT INTO sync_values (kind, key, user_id, value)
			SELECT $1, $2, * FROM unnest($3::text[], $4::bytea[])
			ON CONFLICT (kind, key, user_id) DO UPDATE SET value = excluded.value`, sy.Kind, sy.Key, users, vals); err != nil {
			return err
		}
	}
	res.Unchanged = staged - res.Added - res.Changed

	// Stored users no longer listed.
	after = ""
	for {
		rows, err := tx.Query(ctx, `SELECT v.user_id FROM sync_values v
			WHERE v.kind = $1 AND v.key = $2 AND v.user_id > $3
			AND NOT EXISTS (SELECT 1 FROM sync_staging s WHERE s.sync = $4 AND s.user_id = v.user_id)
			ORDER BY v.user_id LIMIT $5`, sy.Kind, sy.Key, after, id, syncPage)
		if err != nil {
			return err
		}
		users, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(users) == 0 {
			break
		}
		after = users[len(users)-1]
		res.Removed += len(users)
		msgs = msgs[:0]
		for _, u := range users {
			msgs = append(msgs, sy.Messages(u, sy.Removed)...)
		}
		if len(msgs) > 0 {
			if err := ingestExec(ctx, tx, msgs, now); err != nil {
				return err
			}
		}
		res.Messages += len(msgs)
		if _, err := tx.Exec(ctx, `DELETE FROM sync_values WHERE kind = $1 AND key = $2 AND user_id = ANY($3)`,
			sy.Kind, sy.Key, users); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `DELETE FROM sync_staging WHERE sync = $1`, id)
	return err
}
