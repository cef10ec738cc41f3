package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"sync"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
	"github.com/evfwd/evfwd/pkg/store/internal/syncrun"
)

var _ store.Admin = (*Store)(nil)

// Syncs run as syncrun lays out, each step its own small transaction
// through the writer, so ingest commits between them (issue 13), sized by
// syncrun.Paced to about the same writer time each. The file lock means
// one process syncs a file at a time: Open deals with every run a crashed
// process left, in the background holding the key's turn (recover.go), and
// the syncs of one key take turns within the process (syncTurns), since
// the diff of one must see the list the previous one committed.

// SetSyncHook sets a function called between the steps of every sync (the
// synchook step names), for tests: an error it returns stops the sync at
// once, leaving the file as a crash at that point would. nil removes it.
func (s *Store) SetSyncHook(fn func(step string) error) { s.syncHook.Set(fn) }

// syncTurns makes the syncs of one key take turns within the process.
type syncTurns struct {
	mu sync.Mutex
	m  map[syncKey]*keyTurn
}

type syncKey struct {
	kind store.SyncKind
	key  string
}

type keyTurn struct {
	sem   chan struct{}
	users int
}

// lock waits for the turn of kind/key; the caller runs unlock.
func (st *syncTurns) lock(ctx context.Context, kind store.SyncKind, key string) (unlock func(), err error) {
	k := syncKey{kind, key}
	st.mu.Lock()
	if st.m == nil {
		st.m = map[syncKey]*keyTurn{}
	}
	t := st.m[k]
	if t == nil {
		t = &keyTurn{sem: make(chan struct{}, 1)}
		st.m[k] = t
	}
	t.users++
	st.mu.Unlock()
	leave := func() {
		st.mu.Lock()
		if t.users--; t.users == 0 {
			delete(st.m, k)
		}
		st.mu.Unlock()
	}
	select {
	case t.sem <- struct{}{}:
		return func() { <-t.sem; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// stepFunc runs fn as one transaction.
type stepFunc func(ctx context.Context, fn func(ctx context.Context, tx *wtx) error) error

func (s *Store) step(ctx context.Context, fn func(ctx context.Context, tx *wtx) error) error {
	return s.do(ctx, 0, fn)
}

// SetSyncSteps makes every step of the syncs that follow rows rows (0:
// paced, as in production), for tests: a small list then takes several
// steps of each kind.
func (s *Store) SetSyncSteps(rows int) { s.syncSteps.Set(rows) }

// Sync implements store.Admin (see syncrun). It answers after the last
// step: the result's messages are then in the queue.
func (s *Store) Sync(ctx context.Context, sy store.Sync, values iter.Seq2[store.Value, error]) (*store.SyncResult, error) {
	unlock, err := s.syncTurns.lock(ctx, sy.Kind, sy.Key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	d := syncDriver{read: s.read, step: s.step, kind: sy.Kind, key: sy.Key}
	return syncrun.Sync(ctx, d, syncrun.Config{Sizes: s.syncSteps.Or(syncrun.Paced()), Hook: s.syncHook.Call, Later: "after a restart"}, sy, values)
}

// syncDriver is syncrun's driver: the runs of one key, read from read,
// their steps run by step.
type syncDriver struct {
	read *sql.DB
	step stepFunc
	kind store.SyncKind
	key  string
}

var _ syncrun.Driver[*wtx] = syncDriver{}

func (d syncDriver) Step(ctx context.Context, fn func(ctx context.Context, tx *wtx) error) error {
	return d.step(ctx, fn)
}

func (d syncDriver) Current(ctx context.Context) (string, bool, error) {
	q, args := syncrun.CurrentSQL(d.kind, d.key, sharedsql.Question)
	var list string
	err := d.read.QueryRowContext(ctx, q, args...).Scan(&list)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return list, err == nil, err
}

func (d syncDriver) Runs(ctx context.Context) ([]syncrun.Run, error) {
	q, args := syncrun.RunsSQL(d.kind, d.key, "rowid", sharedsql.Question)
	rows, err := d.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, syncrun.ScanRun)
}

func (d syncDriver) Listed(ctx context.Context, r syncrun.Run, after string, limit int) ([]syncrun.Row, error) {
	return d.page(ctx)(syncrun.ListedSQL(r, after, limit, sharedsql.Question))
}

func (d syncDriver) Replaced(ctx context.Context, r syncrun.Run, after string, limit int) ([]syncrun.Row, error) {
	return d.page(ctx)(syncrun.ReplacedSQL(r, after, limit, sharedsql.Question))
}

// page returns a reader of a diff page by a statement and its parameters.
func (d syncDriver) page(ctx context.Context) func(q string, args []any) ([]syncrun.Row, error) {
	return func(q string, args []any) ([]syncrun.Row, error) {
		rows, err := d.read.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		return collect(rows, syncrun.ScanRow)
	}
}

func (d syncDriver) InsertRun(ctx context.Context, tx *wtx, r syncrun.Run) error {
	return exec(ctx, tx)(syncrun.InsertRunSQL(d.kind, d.key, r, sharedsql.Question))
}

func (syncDriver) Stage(ctx context.Context, tx *wtx, list string, values []store.Value) error {
	var q strings.Builder
	q.WriteString(`INSERT INTO sync_lists (list, user_id, value) VALUES `)
	args := make([]any, 0, 3*len(values))
	for i, v := range values {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?)")
		args = append(args, list, v.UserID, v.Value)
	}
	q.WriteString(` ON CONFLICT (list, user_id) DO UPDATE SET value = excluded.value`)
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

func (syncDriver) WriteOutbox(ctx context.Context, tx *wtx, run string, msgs []store.Message) error {
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

func (d syncDriver) Flip(ctx context.Context, tx *wtx, r syncrun.Run, sy store.Sync, first bool) (bool, error) {
	n, err := changed(ctx, tx)(syncrun.FlipSQL(d.kind, d.key, r, sy.Name, first, sharedsql.Question))
	return n == 1, err
}

func (syncDriver) Commit(ctx context.Context, tx *wtx, run string) error {
	return exec(ctx, tx)(syncrun.CommitSQL(run, sharedsql.Question))
}

// MoveOutbox is Ingest done in SQL, the bodies never leaving the database:
// a message already in the queue is skipped (and gets no deliveries), and
// a repeat within the outbox keeps its first occurrence.
func (syncDriver) MoveOutbox(ctx context.Context, tx *wtx, r syncrun.Run, limit int) (int, error) {
	var n int
	var last sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT count(*), max(id) FROM
		(SELECT id FROM sync_outbox WHERE run = ? ORDER BY id LIMIT ?)`, r.ID, limit).Scan(&n, &last); err != nil || n == 0 {
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
		ON CONFLICT (source, message_id) DO NOTHING`, r.ID, last.Int64); err != nil {
		return 0, err
	}
	// The outbox rows lead the join (CROSS JOIN fixes the order), each
	// finding its message by the unique (source, message_id).
	if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
		SELECT f.message, f.source, d.value, 'pending', f.received_at, ?, ?
		FROM (SELECT m.id AS message, m.source AS source, m.received_at AS received_at, o.destinations AS destinations, min(o.id)
			FROM sync_outbox o CROSS JOIN messages m ON m.source = o.source AND m.message_id = o.message_id
			WHERE o.run = ? AND o.id <= ? AND m.id > ? GROUP BY m.id) f, json_each(f.destinations) d
		WHERE d.type = 'text' ORDER BY f.message, d.key`, r.At, r.At, r.ID, last.Int64, before); err != nil {
		return 0, err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM sync_outbox WHERE run = ? AND id <= ?`, r.ID, last.Int64)
	return n, err
}

func (syncDriver) DropList(ctx context.Context, tx *wtx, list string, limit int) (int, error) {
	return changed(ctx, tx)(syncrun.DropListSQL(list, limit, sharedsql.Question))
}

func (syncDriver) DropOutbox(ctx context.Context, tx *wtx, run string, limit int) (int, error) {
	return changed(ctx, tx)(syncrun.DropOutboxSQL(run, limit, sharedsql.Question))
}

func (syncDriver) ForgetRun(ctx context.Context, tx *wtx, run string) error {
	return exec(ctx, tx)(syncrun.ForgetRunSQL(run, sharedsql.Question))
}

// changed returns a runner of a statement (with its parameters, as
// syncrun writes them) on tx that reports the rows it changed.
func changed(ctx context.Context, tx *wtx) func(q string, args []any) (int, error) {
	return func(q string, args []any) (int, error) {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		n, err := res.RowsAffected()
		return int(n), err
	}
}

// exec is changed for a statement whose count does not matter.
func exec(ctx context.Context, tx *wtx) func(q string, args []any) error {
	return func(q string, args []any) error {
		_, err := changed(ctx, tx)(q, args)
		return err
	}
}

// SyncValues yields the stored list of an audience or computed trait, in
// user id order: one query, so one consistent state (the list before or
// after any sync, never a mix).
func (s *Store) SyncValues(ctx context.Context, kind store.SyncKind, key string) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		q, args := syncrun.ValuesSQL(kind, key, sharedsql.Question)
		rows, err := s.read.QueryContext(ctx, q, args...)
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
	err := s.read.QueryRowContext(ctx, syncrun.LeftoversSQL).Scan(&n)
	return n, err
}
