package sqlite

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
)

var _ store.Admin = (*Store)(nil)

// A sync runs in bounded steps, each its own small transaction through the
// writer, so ingest commits between them (issue 13); a pacer sizes each
// kind of step to about stepTarget of writer time:
//
//  1. stage: the list goes into sync_lists under the run's id, a chunk per
//     transaction; no reader looks there, since syncs.list names the
//     current list of each audience or trait.
//  2. diff: pages of the new list and the current one are read from the
//     read pool (both are fixed while the run holds its key); the messages
//     of each page's changes go into sync_outbox under the run's id, where
//     neither readers nor the forwarder look.
//  3. flip: one small transaction points syncs.list at the new list and
//     marks the run committed. Before it the sync has changed nothing
//     visible; after it the sync is done, whatever happens to the process.
//  4. finish: the run's outbox rows move into messages and deliveries a
//     chunk per transaction (in the order the diff wrote them), then the
//     replaced list's rows are dropped a chunk at a time, then the run's
//     row.
//
// sync_runs records every run not finished. At Open (clearStaging), a run
// not committed is garbage: its list and outbox rows are dropped. A
// committed run is finished exactly as the process that crashed would have
// finished it (a moved chunk leaves the outbox in the same transaction, so
// no message is queued twice). Syncs of one key take turns (syncKeys): the
// diff of one must see the list the previous one committed.

// syncPage is the users read per diff page (from the read pool: no writer
// held).
const syncPage = 2000

// stepTarget is the writer time a step of a sync aims at: an ingest that
// arrives during a step waits about that long, plus the step's share of
// the group commit.
const stepTarget = 15 * time.Millisecond

// A pacer sizes the steps of one kind (rows per transaction) so that each
// holds the writer for about stepTarget, however fast the machine is at
// the moment: it starts at start rows and follows the time the steps take,
// within [least, most].
type pacer struct {
	n, least, most int
}

func newPacer(start, least, most int) *pacer { return &pacer{start, least, most} }

func (p *pacer) size() int { return p.n }

// took adjusts the size after a step of rows rows took d.
func (p *pacer) took(rows int, d time.Duration) {
	if rows < p.n/2 {
		return // a short last step says little
	}
	// Halfway to the size that would have taken stepTarget.
	want := float64(rows) * float64(stepTarget) / float64(max(d, time.Microsecond))
	p.n = min(max(int((float64(p.n)+want)/2), p.least), p.most)
}

// The pacers of one sync (or recovery) for each kind of step.
type pacers struct {
	stage, outbox, move, drop *pacer
}

func newPacers() *pacers {
	return &pacers{
		stage:  newPacer(2000, 100, 10_000), // list rows staged
		outbox: newPacer(1000, 50, 5000),    // outbox rows written
		move:   newPacer(500, 50, 5000),     // outbox rows moved into messages and deliveries
		drop:   newPacer(2000, 100, 20_000), // rows of a replaced or abandoned list deleted
	}
}

// paced runs fn as a step and tells p how long it held the writer for the
// rows it reports.
func paced(ctx context.Context, step stepFunc, p *pacer, fn func(ctx context.Context, tx *wtx) (int, error)) (int, error) {
	var n int
	err := step(ctx, func(ctx context.Context, tx *wtx) error {
		start := time.Now()
		var err error
		n, err = fn(ctx, tx)
		p.took(n, time.Since(start))
		return err
	})
	return n, err
}

// SetSyncHook sets a function called between the steps of every sync (the
// synchook step names), for tests: an error it returns stops the sync at
// once, leaving the file as a crash at that point would. nil removes it.
func (s *Store) SetSyncHook(fn func(step string) error) { s.syncHook.Set(fn) }

// syncKeys makes the syncs of one key take turns within the process (one
// process uses a file at a time; see Lock).
var syncKeys = struct {
	sync.Mutex
	m map[syncKey]*keyTurn
}{m: map[syncKey]*keyTurn{}}

type syncKey struct {
	s    *Store
	kind store.SyncKind
	key  string
}

type keyTurn struct {
	sem   chan struct{}
	users int
}

// lockKey waits for the turn of kind/key; the caller runs unlock.
func (s *Store) lockKey(ctx context.Context, kind store.SyncKind, key string) (unlock func(), err error) {
	k := syncKey{s, kind, key}
	syncKeys.Lock()
	t := syncKeys.m[k]
	if t == nil {
		t = &keyTurn{sem: make(chan struct{}, 1)}
		syncKeys.m[k] = t
	}
	t.users++
	syncKeys.Unlock()
	leave := func() {
		syncKeys.Lock()
		if t.users--; t.users == 0 {
			delete(syncKeys.m, k)
		}
		syncKeys.Unlock()
	}
	select {
	case t.sem <- struct{}{}:
		return func() { <-t.sem; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// stepFunc runs fn as one transaction: through the writer while the store
// runs, on the database directly at Open.
type stepFunc func(ctx context.Context, fn func(ctx context.Context, tx *wtx) error) error

func (s *Store) step(ctx context.Context, fn func(ctx context.Context, tx *wtx) error) error {
	return s.do(ctx, 0, fn)
}

func dbStep(db *sql.DB) stepFunc {
	return func(ctx context.Context, fn func(ctx context.Context, tx *wtx) error) error {
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		tx := newWtx(c)
		defer tx.close()
		return tx.run(ctx, func() error { return fn(ctx, tx) })
	}
}

// clearStaging runs at Open, before the writer starts, and deals with the
// syncs a crashed process left unfinished (the file lock means no sync is
// in flight): a committed run is finished, any other dropped. Each step is
// its own bounded transaction, so the WAL stays small.
func clearStaging(ctx context.Context, db *sql.DB) error {
	return recoverRuns(ctx, db, dbStep(db), `1`)
}

// recoverKey does the same for the runs of one key that calls of this
// process left (a step after the flip failed, or a clean-up); the caller
// holds the key.
func (s *Store) recoverKey(ctx context.Context, kind store.SyncKind, key string) error {
	return recoverRuns(ctx, s.read, s.step, `kind = ? AND key = ?`, kind, key)
}

// recoverRuns finishes the committed runs that where selects and drops the
// others, oldest first.
func recoverRuns(ctx context.Context, db *sql.DB, step stepFunc, where string, args ...any) error {
	rows, err := db.QueryContext(ctx, `SELECT id, replaces, committed, at FROM sync_runs WHERE `+where+` ORDER BY rowid`, args...)
	if err != nil {
		return err
	}
	var runs []syncRun
	for rows.Next() {
		r := syncRun{pace: newPacers()}
		if err := rows.Scan(&r.id, &r.replaces, &r.committed, &r.at); err != nil {
			rows.Close()
			return err
		}
		runs = append(runs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range runs {
		if r.committed {
			_, err = r.finish(ctx, step, nil)
		} else {
			err = r.discard(ctx, step)
		}
		if err != nil {
			return fmt.Errorf("sync run %s: %w", r.id, err)
		}
	}
	return nil
}

// syncRun is one sync as sync_runs records it.
type syncRun struct {
	id        string // also the id of its list
	replaces  string // the list it replaces; "" on a first sync
	committed bool
	at        int64   // the sync's time (created_at of its deliveries)
	pace      *pacers // the sizes of its steps
}

// Sync implements store.Admin (see the steps above). It answers after the
// last step: the result's messages are then in the queue.
func (s *Store) Sync(ctx context.Context, sy store.Sync, values iter.Seq2[store.Value, error]) (*store.SyncResult, error) {
	unlock, err := s.lockKey(ctx, sy.Kind, sy.Key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.recoverKey(ctx, sy.Kind, sy.Key); err != nil {
		return nil, err
	}
	var res store.SyncResult
	r := syncRun{id: newRunID(), at: store.Millis(sy.Now), pace: newPacers()}
	switch err := s.read.QueryRowContext(ctx, `SELECT list FROM syncs WHERE kind = ? AND key = ?`, sy.Kind, sy.Key).Scan(&r.replaces); {
	case errors.Is(err, sql.ErrNoRows):
		res.First = true
	case err != nil:
		return nil, err
	}
	if err := s.step(ctx, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sync_runs (id, kind, key, replaces, at) VALUES (?, ?, ?, ?, ?)`,
			r.id, sy.Kind, sy.Key, r.replaces, r.at)
		return err
	}); err != nil {
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
			r.discard(context.WithoutCancel(ctx), s.step)
		}
		return nil, err
	}
	if err := s.stage(ctx, r, values); err != nil {
		return fail(err)
	}
	if err := hook(synchook.Staged); err != nil {
		return fail(err)
	}
	if err := s.diff(ctx, r, sy, &res); err != nil {
		return fail(err)
	}
	if err := hook(synchook.Diffed); err != nil {
		return fail(err)
	}
	if err := s.flip(context.WithoutCancel(ctx), r, sy, res.First); err != nil {
		return fail(err)
	}
	// Committed: the rest must happen, even when ctx has ended; if the
	// store closes first, the next Open finishes it.
	if err := hook(synchook.Flipped); err != nil {
		return nil, err
	}
	r.committed = true
	if _, err := r.finish(context.WithoutCancel(ctx), s.step, s.syncHook.Call); err != nil {
		return nil, fmt.Errorf("sync committed; its messages are queued and go out after a restart: %w", err)
	}
	return &res, nil
}

func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// stage writes values into sync_lists under the run's id, a chunk per
// transaction.
func (s *Store) stage(ctx context.Context, r syncRun, values iter.Seq2[store.Value, error]) error {
	var chunk []store.Value
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		var q strings.Builder
		q.WriteString(`INSERT INTO sync_lists (list, user_id, value) VALUES `)
		args := make([]any, 0, 3*len(chunk))
		for i, v := range chunk {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?)")
			args = append(args, r.id, v.UserID, v.Value)
		}
		// A user listed twice takes the last value.
		q.WriteString(` ON CONFLICT (list, user_id) DO UPDATE SET value = excluded.value`)
		_, err := paced(ctx, s.step, r.pace.stage, func(ctx context.Context, tx *wtx) (int, error) {
			_, err := tx.ExecContext(ctx, q.String(), args...)
			return len(chunk), err
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
		if len(chunk) >= r.pace.stage.size() {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// diff compares the staged list with the one it replaces, page by page
// from the read pool, counts into res and writes the messages of the
// changes to the outbox: first the listed users whose value is new or
// different, then the users no longer listed, each in user id order.
func (s *Store) diff(ctx context.Context, r syncRun, sy store.Sync, res *store.SyncResult) error {
	var out []store.Message
	flush := func(all bool) error {
		for len(out) >= r.pace.outbox.size() || all && len(out) > 0 {
			n := min(len(out), r.pace.outbox.size())
			if _, err := paced(ctx, s.step, r.pace.outbox, func(ctx context.Context, tx *wtx) (int, error) {
				return n, writeOutbox(ctx, tx, r.id, out[:n])
			}); err != nil {
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
		rows, err := s.read.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var list []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.user, &r.value, &r.prev, &r.listed); err != nil {
				return nil, err
			}
			list = append(list, r)
		}
		return list, rows.Err()
	}
	for after := ""; ; {
		rows, err := page(`SELECT n.user_id, n.value, o.value, 1 FROM sync_lists n
			LEFT JOIN sync_lists o ON o.list = ? AND o.user_id = n.user_id
			WHERE n.list = ? AND n.user_id > ? ORDER BY n.user_id LIMIT ?`, r.replaces, r.id, after, syncPage)
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
		rows, err := page(`SELECT o.user_id, o.value, NULL, n.user_id IS NOT NULL FROM sync_lists o
			LEFT JOIN sync_lists n ON n.list = ? AND n.user_id = o.user_id
			WHERE o.list = ? AND o.user_id > ? ORDER BY o.user_id LIMIT ?`, r.id, r.replaces, after, syncPage)
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

// writeOutbox adds msgs to the outbox of run, in order.
func writeOutbox(ctx context.Context, tx *wtx, run string, msgs []store.Message) error {
	for len(msgs) > 0 {
		n := min(len(msgs), insertChunk)
		var q strings.Builder
		q.WriteString(`INSERT INTO sync_outbox (run, source, message_id, type, user_id, received_at, body, body_form, destinations) VALUES `)
		args := make([]any, 0, 9*n)
		for i := range msgs[:n] {
			m := &msgs[i]
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?,?,?,?,?,?)")
			dests, err := json.Marshal(m.Destinations)
			if err != nil {
				return err
			}
			args = append(args, run, m.Source, m.MessageID, m.Type, m.UserID, store.Millis(m.ReceivedAt), m.Body, m.Form, string(dests))
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

// flip is the commit of a sync: syncs names the new list, the run is
// committed. The run held its key throughout, so the current list is the
// one it diffed against; it checks all the same.
func (s *Store) flip(ctx context.Context, r syncRun, sy store.Sync, first bool) error {
	return s.step(ctx, func(ctx context.Context, tx *wtx) error {
		var res sql.Result
		var err error
		if first {
			res, err = tx.ExecContext(ctx, `INSERT INTO syncs (kind, key, name, created_at, synced_at, list) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (kind, key) DO NOTHING`, sy.Kind, sy.Key, sy.Name, r.at, r.at, r.id)
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE syncs SET name = ?, synced_at = ?, list = ? WHERE kind = ? AND key = ? AND list = ?`,
				sy.Name, r.at, r.id, sy.Kind, sy.Key, r.replaces)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(err, fmt.Errorf("sync %s %s: its list changed during the sync", sy.Kind, sy.Key))
		}
		_, err = tx.ExecContext(ctx, `UPDATE sync_runs SET committed = 1 WHERE id = ?`, r.id)
		return err
	})
}

// finish moves the committed run's outbox into the queue, drops the list it
// replaced and forgets the run, a bounded step at a time; hook, when not
// nil, is called after each step. It reports the messages moved.
func (r syncRun) finish(ctx context.Context, step stepFunc, hook func(string) error) (int, error) {
	moved := 0
	for {
		n, err := paced(ctx, step, r.pace.move, func(ctx context.Context, tx *wtx) (int, error) {
			return moveOutbox(ctx, tx, r.id, r.at, r.pace.move.size())
		})
		if err != nil {
			return moved, err
		}
		if n == 0 {
			break
		}
		moved += n
		if hook != nil {
			if err := hook(synchook.Moved); err != nil {
				return moved, err
			}
		}
	}
	if r.replaces != "" {
		if err := dropList(ctx, step, r.pace.drop, r.replaces, hook); err != nil {
			return moved, err
		}
	}
	return moved, step(ctx, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sync_runs WHERE id = ?`, r.id)
		return err
	})
}

// moveOutbox moves the first limit messages of run's outbox into the
// queue, deliveries created at at, and reports how many it moved. It is
// Ingest done in SQL, the bodies never leaving the database: a message
// already in the queue is skipped (and gets no deliveries), and a repeat
// within the outbox keeps its first occurrence.
func moveOutbox(ctx context.Context, tx *wtx, run string, at int64, limit int) (int, error) {
	var n int
	var last sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT count(*), max(id) FROM
		(SELECT id FROM sync_outbox WHERE run = ? ORDER BY id LIMIT ?)`, run, limit).Scan(&n, &last); err != nil || n == 0 {
		return 0, err
	}
	// Message ids only grow (no AUTOINCREMENT, but a new rowid is always
	// above the largest), so the ones this step adds are those above
	// before.
	var before int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&before); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO messages (source, message_id, type, user_id, received_at, body, body_form)
		SELECT source, message_id, type, user_id, received_at, body, body_form FROM sync_outbox
		WHERE run = ? AND id <= ? ORDER BY id
		ON CONFLICT (source, message_id) DO NOTHING`, run, last.Int64); err != nil {
		return 0, err
	}
	// The outbox rows lead the join (CROSS JOIN fixes the order), each
	// finding its message by the unique (source, message_id).
	if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
		SELECT f.message, f.source, d.value, 'pending', f.received_at, ?, ?
		FROM (SELECT m.id AS message, m.source AS source, m.received_at AS received_at, o.destinations AS destinations, min(o.id)
			FROM sync_outbox o CROSS JOIN messages m ON m.source = o.source AND m.message_id = o.message_id
			WHERE o.run = ? AND o.id <= ? AND m.id > ? GROUP BY m.id) f, json_each(f.destinations) d
		WHERE d.type = 'text' ORDER BY f.message, d.key`, at, at, run, last.Int64, before); err != nil {
		return 0, err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM sync_outbox WHERE run = ? AND id <= ?`, run, last.Int64)
	return n, err
}

// dropList deletes the rows of list, a chunk per step.
func dropList(ctx context.Context, step stepFunc, p *pacer, list string, hook func(string) error) error {
	for {
		n, err := paced(ctx, step, p, func(ctx context.Context, tx *wtx) (int, error) {
			res, err := tx.ExecContext(ctx, `DELETE FROM sync_lists WHERE list = ? AND user_id IN
				(SELECT user_id FROM sync_lists WHERE list = ? ORDER BY user_id LIMIT ?)`, list, list, p.size())
			if err != nil {
				return 0, err
			}
			n, err := res.RowsAffected()
			return int(n), err
		})
		if err != nil || n == 0 {
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
func (r syncRun) discard(ctx context.Context, step stepFunc) error {
	for {
		n, err := paced(ctx, step, r.pace.outbox, func(ctx context.Context, tx *wtx) (int, error) {
			res, err := tx.ExecContext(ctx, `DELETE FROM sync_outbox WHERE run = ? AND id IN
				(SELECT id FROM sync_outbox WHERE run = ? ORDER BY id LIMIT ?)`, r.id, r.id, r.pace.outbox.size())
			if err != nil {
				return 0, err
			}
			n, err := res.RowsAffected()
			return int(n), err
		})
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	if err := dropList(ctx, step, r.pace.drop, r.id, nil); err != nil {
		return err
	}
	return step(ctx, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sync_runs WHERE id = ?`, r.id)
		return err
	})
}

// SyncValues yields the stored list of an audience or computed trait, in
// user id order: one query, so one consistent state (the list before or
// after any sync, never a mix).
func (s *Store) SyncValues(ctx context.Context, kind store.SyncKind, key string) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		rows, err := s.read.QueryContext(ctx, `SELECT l.user_id, l.value FROM syncs s JOIN sync_lists l ON l.list = s.list
			WHERE s.kind = ? AND s.key = ? ORDER BY l.user_id`, kind, key)
		if err != nil {
			yield(store.Value{}, err)
			return
		}
		defer rows.Close()
		rowscan.Values(rows, yield)
	}
}

// SyncLeftovers counts the rows of syncs still in progress or left behind:
// runs, their outbox messages, and stored values of no current list. It
// is 0 when no sync is running.
func (s *Store) SyncLeftovers(ctx context.Context) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM sync_runs) + (SELECT count(*) FROM sync_outbox)
		+ (SELECT count(*) FROM sync_lists WHERE list NOT IN (SELECT list FROM syncs))`).Scan(&n)
	return n, err
}
