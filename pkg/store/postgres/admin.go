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
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
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
	q, args := syncrun.CurrentSQL(c.kind, c.key, sharedsql.Numbered(1))
	var list string
	err := c.QueryRow(ctx, q, args...).Scan(&list)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return list, err == nil, err
}

func (c *syncConn) Runs(ctx context.Context) ([]syncrun.Run, error) {
	q, args := syncrun.RunsSQL(c.kind, c.key, "seq", sharedsql.Numbered(1))
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, syncrun.ScanRun)
}

func (c *syncConn) Listed(ctx context.Context, r syncrun.Run, after string, limit int) ([]syncrun.Row, error) {
	return c.page(ctx)(syncrun.ListedSQL(r, after, limit, sharedsql.Numbered(1)))
}

func (c *syncConn) Replaced(ctx context.Context, r syncrun.Run, after string, limit int) ([]syncrun.Row, error) {
	return c.page(ctx)(syncrun.ReplacedSQL(r, after, limit, sharedsql.Numbered(1)))
}

// page returns a reader of a diff page by a statement and its parameters.
func (c *syncConn) page(ctx context.Context) func(q string, args []any) ([]syncrun.Row, error) {
	return func(q string, args []any) ([]syncrun.Row, error) {
		rows, err := c.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		return collect(rows, syncrun.ScanRow)
	}
}

func (c *syncConn) InsertRun(ctx context.Context, tx pgx.Tx, r syncrun.Run) error {
	return exec(ctx, tx)(syncrun.InsertRunSQL(c.kind, c.key, r, sharedsql.Numbered(1)))
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
	n, err := changed(ctx, tx)(syncrun.FlipSQL(c.kind, c.key, r, sy.Name, first, sharedsql.Numbered(1)))
	return n == 1, err
}

func (*syncConn) Commit(ctx context.Context, tx pgx.Tx, run string) error {
	return exec(ctx, tx)(syncrun.CommitSQL(run, sharedsql.Numbered(1)))
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
	return changed(ctx, tx)(syncrun.DropListSQL(list, limit, sharedsql.Numbered(1)))
}

func (*syncConn) DropOutbox(ctx context.Context, tx pgx.Tx, run string, limit int) (int, error) {
	return changed(ctx, tx)(syncrun.DropOutboxSQL(run, limit, sharedsql.Numbered(1)))
}

func (*syncConn) ForgetRun(ctx context.Context, tx pgx.Tx, run string) error {
	return exec(ctx, tx)(syncrun.ForgetRunSQL(run, sharedsql.Numbered(1)))
}

// changed returns a runner of a statement (with its parameters, as
// syncrun writes them) in tx that reports the rows it changed.
func changed(ctx context.Context, tx pgx.Tx) func(q string, args []any) (int, error) {
	return func(q string, args []any) (int, error) {
		tag, err := tx.Exec(ctx, q, args...)
		return int(tag.RowsAffected()), err
	}
}

// exec is changed for a statement whose count does not matter.
func exec(ctx context.Context, tx pgx.Tx) func(q string, args []any) error {
	return func(q string, args []any) error {
		_, err := changed(ctx, tx)(q, args)
		return err
	}
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
		q, args := syncrun.ValuesSQL(kind, key, sharedsql.Numbered(1))
		rows, err := s.pool.Query(ctx, q, args...)
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
