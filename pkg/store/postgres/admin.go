package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The admin data follows the SQLite store's (see its admin.go), and so do
// syncs: the same bounded steps (stage the list under the run's id in
// sync_lists, diff page by page into sync_outbox, flip syncs.list and mark
// the run committed in one small transaction, then move the outbox into
// the queue and drop the replaced list a chunk at a time), so no
// transaction holds locks or grows for longer than a chunk. What differs
// is that other nodes may be in the middle of a sync:
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

// Sizes of the steps of a sync besides stageChunk and syncPage (declared
// in deletion.go), as in the SQLite store.
const (
	outboxChunk = 1000
	moveChunk   = 1000
	dropChunk   = 5000
)

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

// step runs fn as one transaction on the locked connection.
func (c *syncConn) step(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return retryTransient(func() error { return pgx.BeginFunc(ctx, c.Conn, fn) })
}

// syncRun is one sync as sync_runs records it.
type syncRun struct {
	id        string // also the id of its list
	replaces  string // the list it replaces; "" on a first sync
	committed bool
	at        int64 // the sync's time (created_at of its deliveries)
}

// recoverSyncs finishes or drops the runs dead nodes left (see above), now
// and then every syncSweep until the store closes. Open runs it.
func (s *Store) recoverSyncs(ctx context.Context) error {
	if err := s.sweepSyncs(ctx); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(syncSweep)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
			leave, err := s.enter()
			if err != nil {
				return
			}
			s.sweepSyncs(context.Background())
			leave()
		}
	}()
	return nil
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
		err = sc.recoverKey(ctx)
		sc.unlock()
		if err != nil {
			return fmt.Errorf("sync runs of %s %s: %w", k.kind, k.key, err)
		}
	}
	return nil
}

// recoverKey finishes the committed runs of c's key and drops the others;
// c holds the key's lock, so no live node is running them.
func (c *syncConn) recoverKey(ctx context.Context) error {
	rows, err := c.Query(ctx, `SELECT id, replaces, committed, at FROM sync_runs WHERE kind = $1 AND key = $2 ORDER BY seq`,
		string(c.kind), c.key)
	if err != nil {
		return err
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (syncRun, error) {
		var run syncRun
		return run, r.Scan(&run.id, &run.replaces, &run.committed, &run.at)
	})
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.committed {
			err = c.finish(ctx, r, nil)
		} else {
			err = c.discard(ctx, r)
		}
		if err != nil {
			return fmt.Errorf("run %s: %w", r.id, err)
		}
	}
	return nil
}

// Sync implements store.Admin (see above). It answers after the last step:
// the result's messages are then in the queue.
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
	if err := c.recoverKey(ctx); err != nil {
		return nil, err
	}
	var res store.SyncResult
	r := syncRun{id: newRunID(), at: store.Millis(sy.Now)}
	switch err := c.QueryRow(ctx, `SELECT list FROM syncs WHERE kind = $1 AND key = $2`, string(sy.Kind), sy.Key).Scan(&r.replaces); {
	case errors.Is(err, pgx.ErrNoRows):
		res.First = true
	case err != nil:
		return nil, err
	}
	if _, err := c.Exec(ctx, `INSERT INTO sync_runs (id, kind, key, replaces, at) VALUES ($1, $2, $3, $4, $5)`,
		r.id, string(sy.Kind), sy.Key, r.replaces, r.at); err != nil {
		return nil, err
	}
	// Until the flip, a failure leaves nothing behind (even when ctx has
	// ended); a stop by the test hook leaves what a crash would.
	stopped := false
	hook := func(step string) error {
		err := s.syncHook.Call(step)
		stopped = err != nil
		return err
	}
	fail := func(err error) (*store.SyncResult, error) {
		if !stopped {
			c.discard(context.WithoutCancel(ctx), r)
		}
		return nil, err
	}
	if err := c.stage(ctx, r.id, values); err != nil {
		return fail(err)
	}
	if err := hook(synchook.Staged); err != nil {
		return fail(err)
	}
	if err := c.diff(ctx, r, sy, &res); err != nil {
		return fail(err)
	}
	if err := hook(synchook.Diffed); err != nil {
		return fail(err)
	}
	if err := c.flip(context.WithoutCancel(ctx), r, sy, res.First); err != nil {
		return fail(err)
	}
	// Committed: the rest must happen, even when ctx has ended; if this
	// node dies first, another (or this one restarted) finishes it.
	if err := hook(synchook.Flipped); err != nil {
		return nil, err
	}
	r.committed = true
	err = c.finish(context.WithoutCancel(ctx), r, s.syncHook.Call)
	s.floors.Reset() // its messages are due at the run's time (floor.go)
	if err != nil {
		return nil, fmt.Errorf("sync committed; its messages are queued and go out once a node takes the run over: %w", err)
	}
	return &res, nil
}

func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// stage writes values into sync_lists under list, a chunk per statement.
func (c *syncConn) stage(ctx context.Context, list string, values iter.Seq2[store.Value, error]) error {
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
		_, err := c.Exec(ctx, `INSERT INTO sync_lists (list, user_id, value)
			SELECT $1, * FROM unnest($2::text[], $3::bytea[])
			ON CONFLICT (list, user_id) DO UPDATE SET value = excluded.value`, list, u2, v2)
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

// diff compares the staged list with the one it replaces, page by page,
// counts into res and writes the messages of the changes to the outbox:
// first the listed users whose value is new or different, then the users
// no longer listed, each in user id order.
func (c *syncConn) diff(ctx context.Context, r syncRun, sy store.Sync, res *store.SyncResult) error {
	var out []store.Message
	flush := func(all bool) error {
		for len(out) >= outboxChunk || all && len(out) > 0 {
			n := min(len(out), outboxChunk)
			if err := writeOutbox(ctx, c, r.id, out[:n]); err != nil {
				return err
			}
			res.Messages += n
			out = out[n:]
		}
		return nil
	}
	type row struct {
		user        string
		value, prev []byte
		listed      bool
	}
	page := func(q string, args ...any) ([]row, error) {
		rows, err := c.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
			var r row
			return r, cr.Scan(&r.user, &r.value, &r.prev, &r.listed)
		})
	}
	for after := ""; ; {
		rows, err := page(`SELECT n.user_id, n.value, o.value, true FROM sync_lists n
			LEFT JOIN sync_lists o ON o.list = $1 AND o.user_id = n.user_id
			WHERE n.list = $2 AND n.user_id > $3 ORDER BY n.user_id LIMIT $4`, r.replaces, r.id, after, syncPage)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		after = rows[len(rows)-1].user
		for _, v := range rows {
			switch {
			case v.prev == nil:
				res.Added++
			case bytes.Equal(v.prev, v.value):
				res.Unchanged++
				continue
			default:
				res.Changed++
			}
			out = append(out, sy.Messages(v.user, v.value)...)
		}
		if err := flush(false); err != nil {
			return err
		}
	}
	for after := ""; r.replaces != ""; {
		rows, err := page(`SELECT o.user_id, o.value, NULL::bytea, n.user_id IS NOT NULL FROM sync_lists o
			LEFT JOIN sync_lists n ON n.list = $1 AND n.user_id = o.user_id
			WHERE o.list = $2 AND o.user_id > $3 ORDER BY o.user_id LIMIT $4`, r.id, r.replaces, after, syncPage)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		after = rows[len(rows)-1].user
		for _, v := range rows {
			if !v.listed {
				res.Removed++
				out = append(out, sy.Messages(v.user, sy.Removed)...)
			}
		}
		if err := flush(false); err != nil {
			return err
		}
	}
	return flush(true)
}

// writeOutbox adds msgs to the outbox of run, in order, in one statement.
func writeOutbox(ctx context.Context, q execer, run string, msgs []store.Message) error {
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
	_, err := q.Exec(ctx, `INSERT INTO sync_outbox (run, source, message_id, type, user_id, received_at, body, body_form, destinations)
		SELECT $1, m.source, m.message_id, m.type, m.user_id, m.received_at, m.body, m.body_form, m.destinations
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bytea[], $8::smallint[], $9::text[])
			WITH ORDINALITY AS m (source, message_id, type, user_id, received_at, body, body_form, destinations, n)
		ORDER BY m.n`,
		run, src, mid, typ, uid, recv, body, form, dests)
	return err
}

// flip is the commit of a sync: syncs names the new list, the run is
// committed. The run held its key's lock throughout, so the current list
// is the one it diffed against; it checks all the same.
func (c *syncConn) flip(ctx context.Context, r syncRun, sy store.Sync, first bool) error {
	return c.step(ctx, func(tx pgx.Tx) error {
		var sql string
		args := []any{string(sy.Kind), sy.Key, sy.Name, r.at, r.id, r.replaces}
		if first {
			sql = `INSERT INTO syncs (kind, key, name, created_at, synced_at, list)
				SELECT $1::text, $2::text, $3::text, $4::bigint, $4::bigint, $5::text WHERE $6::text = ''
				ON CONFLICT (kind, key) DO NOTHING`
		} else {
			sql = `UPDATE syncs SET name = $3, synced_at = $4, list = $5 WHERE kind = $1 AND key = $2 AND list = $6`
		}
		tag, err := tx.Exec(ctx, sql, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("sync %s %s: its list changed during the sync", sy.Kind, sy.Key)
		}
		_, err = tx.Exec(ctx, `UPDATE sync_runs SET committed = true WHERE id = $1`, r.id)
		return err
	})
}

// finish moves the committed run's outbox into the queue, drops the list it
// replaced and forgets the run, a bounded step at a time; hook, when not
// nil, is called after each step.
func (c *syncConn) finish(ctx context.Context, r syncRun, hook func(string) error) error {
	for {
		n := 0
		if err := c.step(ctx, func(tx pgx.Tx) error {
			var err error
			n, err = moveOutbox(ctx, tx, r.id, r.at)
			return err
		}); err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if hook != nil {
			if err := hook(synchook.Moved); err != nil {
				return err
			}
		}
	}
	if r.replaces != "" {
		if err := c.dropList(ctx, r.replaces, hook); err != nil {
			return err
		}
	}
	_, err := c.Exec(ctx, `DELETE FROM sync_runs WHERE id = $1`, r.id)
	return err
}

// moveOutbox moves the first moveChunk messages of run's outbox into the
// queue, deliveries created at at, and reports how many it moved. A message
// already in the queue is skipped, as Ingest skips it.
func moveOutbox(ctx context.Context, tx pgx.Tx, run string, at int64) (int, error) {
	rows, err := tx.Query(ctx, `SELECT id, source, message_id, type, user_id, received_at, body, body_form, destinations
		FROM sync_outbox WHERE run = $1 ORDER BY id LIMIT $2`, run, moveChunk)
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
	if err := ingestExec(ctx, tx, msgs, at); err != nil {
		return 0, err
	}
	_, err = tx.Exec(ctx, `DELETE FROM sync_outbox WHERE run = $1 AND id <= $2`, run, last)
	return len(msgs), err
}

// dropList deletes the rows of list, a chunk per statement.
func (c *syncConn) dropList(ctx context.Context, list string, hook func(string) error) error {
	for {
		tag, err := c.Exec(ctx, `DELETE FROM sync_lists WHERE list = $1 AND user_id IN
			(SELECT user_id FROM sync_lists WHERE list = $1 ORDER BY user_id LIMIT $2)`, list, dropChunk)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if hook != nil {
			if err := hook(synchook.Dropped); err != nil {
				return err
			}
		}
	}
}

// discard drops what a run not committed wrote: its outbox, its list and
// its row.
func (c *syncConn) discard(ctx context.Context, r syncRun) error {
	for {
		tag, err := c.Exec(ctx, `DELETE FROM sync_outbox WHERE id IN
			(SELECT id FROM sync_outbox WHERE run = $1 ORDER BY id LIMIT $2)`, r.id, dropChunk)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			break
		}
	}
	if err := c.dropList(ctx, r.id, nil); err != nil {
		return err
	}
	_, err := c.Exec(ctx, `DELETE FROM sync_runs WHERE id = $1`, r.id)
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

// SyncLeftovers counts the rows of syncs still in progress or left behind:
// runs, their outbox messages, and stored values of no current list (a
// scan of every list). It is 0 when no sync is running.
func (s *Store) SyncLeftovers(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM sync_runs) + (SELECT count(*) FROM sync_outbox)
		+ (SELECT count(*) FROM sync_lists WHERE list NOT IN (SELECT list FROM syncs))`).Scan(&n)
	return n, err
}
