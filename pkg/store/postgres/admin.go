package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/syncrun"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The admin data follows the SQLite store's (see its admin.go), and syncs
// run as syncrun lays out, in steps of syncrun.Fixed sizes: a step holds
// its rows' locks no longer, and grows no bigger, than a chunk. What
// differs is that other nodes may be in the middle of a sync:
//
//   - A sync holds a session advisory lock on its key (syncLockClass,
//     hashtext of kind/key) on one connection from start to end, and runs
//     every step on that connection: syncs of one key take turns across
//     nodes, and the lock lives exactly as long as the node does (the
//     server drops it with the connection when the process dies).
//   - So a run of a key whose lock is free is a leftover of a dead node:
//     committed, it is finished as that node would have; otherwise dropped.
//     Open does that for every key it can lock, then again every
//     syncSweep; a sync does it for its own key before it starts.

var _ store.Admin = (*Store)(nil)

// syncLockClass is the first key of the advisory locks on syncs ("evfs").
const syncLockClass = 0x65766673

// syncSweep is how often a node looks for runs left by dead nodes.
const syncSweep = time.Minute

// SetSyncHook sets a function called between the steps of every sync (the
// synchook step names), for tests: an error it returns stops the sync at
// once, leaving the database as a crash at that point would (the key's
// lock is released, as the server releases a dead node's). nil removes it.
func (s *Store) SetSyncHook(fn func(step string) error) { s.syncHook.Set(fn) }

// syncConn is a connection holding the advisory lock of one sync key.
type syncConn struct {
	*pgxpool.Conn
	kind store.SyncKind
	key  string
}

const syncLockKey = `$1::int, hashtext($2 || '/' || $3)`

// lockSync takes a connection and waits for the lock of kind/key on it.
func (s *Store) lockSync(ctx context.Context, kind store.SyncKind, key string) (*syncConn, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(`+syncLockKey+`)`, syncLockClass, string(kind), key); err != nil {
		c.Release()
		return nil, err
	}
	return &syncConn{c, kind, key}, nil
}

// tryLockSync takes the lock of kind/key on c unless another session
// holds it.
func tryLockSync(ctx context.Context, c *pgxpool.Conn, kind store.SyncKind, key string) (*syncConn, bool, error) {
	var ok bool
	err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+syncLockKey+`)`, syncLockClass, string(kind), key).Scan(&ok)
	if err != nil || !ok {
		return nil, false, err
	}
	return &syncConn{c, kind, key}, true, nil
}

// unlock releases the key's lock; a connection that cannot say it did is
// closed, which releases it too.
func (c *syncConn) unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, `SELECT pg_advisory_unlock(`+syncLockKey+`)`, syncLockClass, string(c.kind), c.key); err != nil {
		c.Conn.Conn().Close(ctx)
	}
}

// recoverSyncs finishes or drops the runs dead nodes left (see above), now
// and then every syncSweep until the store closes, and reports the first
// sweep's error. Open's background work (recoverLeft) runs it.
func (s *Store) recoverSyncs(ctx context.Context) error {
	err := s.sweepSyncs(ctx)
	go func() {
		t := time.NewTicker(syncSweep)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
			if !s.sweepTick() {
				return
			}
		}
	}()
	return err
}

// sweepTick is one sweep of the ticker's: within callTimeout, and under
// the store's background context, which Close ends before it waits for
// the calls in progress, so that a sweep on a link that answers nothing
// (it once ran without a deadline) holds Close up no longer than pgconn
// takes to give up on its statement. It reports false once the store is
// closed.
func (s *Store) sweepTick() bool {
	leave, err := s.enter()
	if err != nil {
		return false
	}
	defer leave()
	ctx, cancel := context.WithTimeout(s.background, callTimeout)
	defer cancel()
	s.sweepSyncs(ctx)
	return true
}

// sweepSyncs deals with the runs of every key whose lock is free.
func (s *Store) sweepSyncs(ctx context.Context) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	rows, err := c.Query(ctx, `SELECT DISTINCT kind, key FROM sync_runs`)
	if err != nil {
		return err
	}
	type kk struct {
		kind store.SyncKind
		key  string
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kk, error) {
		var k kk
		return k, r.Scan(&k.kind, &k.key)
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		sc, ok, err := tryLockSync(ctx, c, k.kind, k.key)
		if err != nil {
			return err
		}
		if !ok {
			continue // a live node's sync: it finishes its own
		}
		err = syncrun.Recover(ctx, sc, s.syncSteps.Or(syncrun.Fixed()))
		if ctx.Err() != nil {
			// Ended (Close, the deadline): the lock goes with the
			// connection rather than wait on a link that may not answer.
			c.Conn().Close(context.Background())
			return ctx.Err()
		}
		sc.unlock()
		if err != nil {
			return fmt.Errorf("sync runs of %s %s: %w", k.kind, k.key, err)
		}
	}
	return nil
}

// SetSyncSteps makes every step of the syncs that follow rows rows (0: the
// fixed sizes of production), for tests: a small list then takes several
// steps of each kind.
func (s *Store) SetSyncSteps(rows int) { s.syncSteps.Set(rows) }

// Sync implements store.Admin (see syncrun). It answers after the last
// step: the result's messages are then in the queue.
func (s *Store) Sync(ctx context.Context, sy store.Sync, values iter.Seq2[store.Value, error]) (*store.SyncResult, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	c, err := s.lockSync(ctx, sy.Kind, sy.Key)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	defer c.unlock()
	res, err := syncrun.Sync(ctx, c, syncrun.Config{Sizes: s.syncSteps.Or(syncrun.Fixed()), Hook: s.syncHook.Call,
		Later: "once a node takes the run over"}, sy, values)
	s.floors.Reset() // a committed sync's messages are due at the run's time (pkg/store/internal/leasefloor)
	return res, err
}

// syncConn is syncrun's driver for the runs of its key.
var _ syncrun.Driver[pgx.Tx] = (*syncConn)(nil)

// Step runs fn as one transaction on the locked connection. ctx stops
// fn's statements but not BEGIN, COMMIT or ROLLBACK: pgx closes a
// connection whose transaction control fails, and this one holds the lock
// that the discard of a cancelled sync still runs under.
func (c *syncConn) Step(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return retryTransient(func() error {
		return pgx.BeginFunc(context.WithoutCancel(ctx), c.Conn, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

func (c *syncConn) Current(ctx context.Context) (string, bool, error) {
	var list string
	err := c.QueryRow(ctx, `SELECT list FROM syncs WHERE kind = $1 AND key = $2`, string(c.kind), c.key).Scan(&list)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return list, err == nil, err
}

func (c *syncConn) Runs(ctx context.Context) ([]syncrun.Run, error) {
	rows, err := c.Query(ctx, `SELECT id, replaces, committed, at FROM sync_runs WHERE kind = $1 AND key = $2 ORDER BY seq`,
		string(c.kind), c.key)
	if err != nil {
		return nil, err
	}
	return collect(rows, syncrun.ScanRun)
}

func (c *syncConn) Listed(ctx context.Context, r syncrun.Run, after string, limit int) ([]syncrun.Row, error) {
	return c.page(ctx, `SELECT n.user_id, n.value, o.value, true FROM sync_lists n
		LEFT JOIN sync_lists o ON o.list = $1 AND o.user_id = n.user_id
		WHERE n.list = $2 AND n.user_id > $3 ORDER BY n.user_id LIMIT $4`, r.Replaces, r.ID, after, limit)
}

func (c *syncConn) Replaced(ctx context.Context, r syncrun.Run, after string, limit int) ([]syncrun.Row, error) {
	return c.page(ctx, `SELECT o.user_id, o.value, NULL::bytea, n.user_id IS NOT NULL FROM sync_lists o
		LEFT JOIN sync_lists n ON n.list = $1 AND n.user_id = o.user_id
		WHERE o.list = $2 AND o.user_id > $3 ORDER BY o.user_id LIMIT $4`, r.ID, r.Replaces, after, limit)
}

func (c *syncConn) page(ctx context.Context, q string, args ...any) ([]syncrun.Row, error) {
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, syncrun.ScanRow)
}

func (c *syncConn) InsertRun(ctx context.Context, tx pgx.Tx, r syncrun.Run) error {
	_, err := tx.Exec(ctx, `INSERT INTO sync_runs (id, kind, key, replaces, at) VALUES ($1, $2, $3, $4, $5)`,
		r.ID, string(c.kind), c.key, r.Replaces, r.At)
	return err
}

func (*syncConn) Stage(ctx context.Context, tx pgx.Tx, list string, values []store.Value) error {
	users, vals := make([]string, len(values)), make([][]byte, len(values))
	for i, v := range values {
		users[i], vals[i] = v.UserID, v.Value
	}
	_, err := tx.Exec(ctx, `INSERT INTO sync_lists (list, user_id, value)
		SELECT $1, * FROM unnest($2::text[], $3::bytea[])
		ON CONFLICT (list, user_id) DO UPDATE SET value = excluded.value`, list, users, vals)
	return err
}

// WriteOutbox writes msgs in one statement.
func (*syncConn) WriteOutbox(ctx context.Context, tx pgx.Tx, run string, msgs []store.Message) error {
	n := len(msgs)
	src, mid, typ, uid := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	recv, body, form, dests := make([]int64, 0, n), make([][]byte, 0, n), make([]int16, 0, n), make([]string, 0, n)
	for i := range msgs {
		m := &msgs[i]
		d, err := json.Marshal(m.Destinations)
		if err != nil {
			return err
		}
		src, mid, typ, uid = append(src, m.Source), append(mid, m.MessageID), append(typ, m.Type), append(uid, m.UserID)
		recv, body, dests = append(recv, store.Millis(m.ReceivedAt)), append(body, m.Body), append(dests, string(d))
		form = append(form, int16(m.Form))
	}
	_, err := tx.Exec(ctx, `INSERT INTO sync_outbox (run, source, message_id, type, user_id, received_at, body, body_form, destinations)
		SELECT $1, m.source, m.message_id, m.type, m.user_id, m.received_at, m.body, m.body_form, m.destinations
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bytea[], $8::smallint[], $9::text[])
			WITH ORDINALITY AS m (source, message_id, type, user_id, received_at, body, body_form, destinations, n)
		ORDER BY m.n`,
		run, src, mid, typ, uid, recv, body, form, dests)
	return err
}

func (c *syncConn) Flip(ctx context.Context, tx pgx.Tx, r syncrun.Run, sy store.Sync, first bool) (bool, error) {
	var sql string
	args := []any{string(c.kind), c.key, sy.Name, r.At, r.ID, r.Replaces}
	if first {
		sql = `INSERT INTO syncs (kind, key, name, created_at, synced_at, list)
			SELECT $1::text, $2::text, $3::text, $4::bigint, $4::bigint, $5::text WHERE $6::text = ''
			ON CONFLICT (kind, key) DO NOTHING`
	} else {
		sql = `UPDATE syncs SET name = $3, synced_at = $4, list = $5 WHERE kind = $1 AND key = $2 AND list = $6`
	}
	tag, err := tx.Exec(ctx, sql, args...)
	return err == nil && tag.RowsAffected() == 1, err
}

func (*syncConn) Commit(ctx context.Context, tx pgx.Tx, run string) error {
	_, err := tx.Exec(ctx, `UPDATE sync_runs SET committed = true WHERE id = $1`, run)
	return err
}

// MoveOutbox reads the messages and ingests them as Ingest does.
func (*syncConn) MoveOutbox(ctx context.Context, tx pgx.Tx, r syncrun.Run, limit int) (int, error) {
	rows, err := tx.Query(ctx, `SELECT id, source, message_id, type, user_id, received_at, body, body_form, destinations
		FROM sync_outbox WHERE run = $1 ORDER BY id LIMIT $2`, r.ID, limit)
	if err != nil {
		return 0, err
	}
	var last int64
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Message, error) {
		var m store.Message
		var received int64
		var form int16
		var dests string
		if err := r.Scan(&last, &m.Source, &m.MessageID, &m.Type, &m.UserID, &received, &m.Body, &form, &dests); err != nil {
			return m, err
		}
		m.ReceivedAt, m.Form = store.FromMillis(received), store.Form(form)
		if err := json.Unmarshal([]byte(dests), &m.Destinations); err != nil {
			return m, fmt.Errorf("outbox message %s: destinations: %w", m.MessageID, err)
		}
		return m, nil
	})
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	if err := ingestExec(ctx, tx, msgs, r.At); err != nil {
		return 0, err
	}
	_, err = tx.Exec(ctx, `DELETE FROM sync_outbox WHERE run = $1 AND id <= $2`, r.ID, last)
	return len(msgs), err
}

func (*syncConn) DropList(ctx context.Context, tx pgx.Tx, list string, limit int) (int, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM sync_lists WHERE list = $1 AND user_id IN
		(SELECT user_id FROM sync_lists WHERE list = $1 ORDER BY user_id LIMIT $2)`, list, limit)
	return int(tag.RowsAffected()), err
}

func (*syncConn) DropOutbox(ctx context.Context, tx pgx.Tx, run string, limit int) (int, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM sync_outbox WHERE id IN
		(SELECT id FROM sync_outbox WHERE run = $1 ORDER BY id LIMIT $2)`, run, limit)
	return int(tag.RowsAffected()), err
}

func (*syncConn) ForgetRun(ctx context.Context, tx pgx.Tx, run string) error {
	_, err := tx.Exec(ctx, `DELETE FROM sync_runs WHERE id = $1`, run)
	return err
}

// SyncValues yields the stored list of an audience or computed trait, in
// user id order: one statement, so one consistent state (the list before
// or after any sync, never a mix).
func (s *Store) SyncValues(ctx context.Context, kind store.SyncKind, key string) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		leave, err := s.enter()
		if err != nil {
			yield(store.Value{}, err)
			return
		}
		defer leave()
		rows, err := s.pool.Query(ctx, `SELECT l.user_id, l.value FROM syncs s JOIN sync_lists l ON l.list = s.list
			WHERE s.kind = $1 AND s.key = $2 ORDER BY l.user_id`, string(kind), key)
		if err != nil {
			yield(store.Value{}, err)
			return
		}
		defer rows.Close()
		rowscan.Values(rows, yield)
	}
}

// SyncLeftovers counts what syncrun.LeftoversSQL does: 0 when no sync
// is running and none was left behind.
func (s *Store) SyncLeftovers(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, syncrun.LeftoversSQL).Scan(&n)
	return n, err
}
