// Package sqlite is the embedded store: one SQLite file in WAL mode with
// synchronous=FULL, so a committed transaction survives power loss.
//
// Every write goes through one writer goroutine that gathers whatever
// concurrent callers have asked for (ingests, leases, completions) into one
// transaction: one fsync acknowledges many requests (group commit). Each
// caller's part runs in a savepoint, so one failing part does not fail the
// others. Reads use a separate pool of connections and never wait for the
// writer.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Defaults of Options.
const (
	DefaultMaxPending = 100_000
	DefaultMaxGroup   = 256
)

// Options tune a Store; zero values take the defaults.
type Options struct {
	// MaxPending bounds the messages waiting for the writer; past it
	// Ingest returns store.ErrBusy (back-pressure, answered 429).
	MaxPending int
	// MaxGroup bounds the calls committed in one transaction.
	MaxGroup int
	// Now is the clock for created/updated times (default time.Now).
	Now func() time.Time
	// NoRecover leaves what a stopped process left unfinished (a sync's
	// runs, a deletion's steps) and the one-time conversion of an old file to the service, which finishes it when it
	// starts. Tools that open the store beside a running serve (evfwd
	// deliveries) set it, so they never take part in the service's work.
	NoRecover bool
	// MustExist refuses a missing file (an error matching fs.ErrNotExist)
	// instead of creating an empty store: a tool pointed at the wrong path
	// would otherwise show an empty store as if it were the service's.
	MustExist bool
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	path    string
	read    *sql.DB
	write   *sql.DB
	wtx     *wtx // the writer's connection; only the writer goroutine uses it
	leases  leases
	opts    Options
	ops     chan *op
	pending atomic.Int64 // messages queued for the writer
	closing chan struct{}
	done    chan struct{}
	once    sync.Once
	mu      sync.RWMutex // held for reading while queueing; Close takes it to stop queueing
	closed  bool

	commits      atomic.Int64  // group transactions run (benchmarks report ops per commit)
	deletionStep int           // messages per deletion step (deletionPageSize; tests use less)
	syncHook     synchook.Hook // SetSyncHook's
	syncTurns    syncTurns     // admin.go: the syncs of one key take turns
}

var _ store.Store = (*Store)(nil)

// op is one caller's part of a group transaction, or, when conn is set,
// work the writer does alone on its connection outside any transaction (a
// checkpoint, an incremental vacuum).
type op struct {
	msgs  int // counted against MaxPending
	apply func(ctx context.Context, tx *wtx) error
	conn  func(ctx context.Context, tx *wtx) error
	done  chan error
	// read says apply writes nothing to the file (a Lease): the writer
	// runs such ops ahead of its group, in a transaction of their own that
	// commits without an fsync, so that they never wait on the group's.
	read bool
	// again says apply may run a second time after its transaction was
	// rolled back: it changes nothing outside the transaction but the
	// leases, through their journal (see Store.commit).
	again bool
}

// walLimit is the size the WAL is truncated back to after a checkpoint.
const walLimit = 64 << 20

// incrementalVacuum makes sure the file can give freed pages back
// (auto_vacuum=INCREMENTAL). A file made before evfwd set it is converted
// once by a VACUUM, which rewrites it.
func incrementalVacuum(ctx context.Context, db *sql.DB) error {
	var mode int
	if err := db.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return err
	}
	if mode == 2 {
		return nil
	}
	if _, err := db.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `VACUUM`)
	return err
}

// doConn runs fn on the writer's connection between group transactions,
// alone, and waits for it.
func (s *Store) doConn(ctx context.Context, fn func(context.Context, *wtx) error) error {
	o := &op{conn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	select {
	case s.ops <- o:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	return <-o.done
}

// Checkpoint copies the WAL into the database file and truncates the WAL
// to zero bytes, so that nothing the WAL held (a purged body's old pages)
// stays in it. Readers in the middle of a read transaction can keep it from
// completing: it tries a few times and reports when it could not.
func (s *Store) Checkpoint(ctx context.Context) error {
	return s.doConn(ctx, func(ctx context.Context, c *wtx) error {
		for try := 0; ; try++ {
			var busy, logPages, done int
			if err := c.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &done); err != nil {
				return err
			}
			if busy == 0 {
				return nil
			}
			if try == 50 {
				return errors.New("store: checkpoint: readers kept the WAL busy")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
}

// Open opens (creating when missing, unless opts.MustExist) the database
// file at path and brings its schema up to date.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxGroup <= 0 {
		opts.MaxGroup = DefaultMaxGroup
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MustExist {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("store %s: %w", path, fs.ErrNotExist)
		}
	} else {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("store %s: %w", path, err)
			}
		}
		if err := createPrivate(path); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	}
	q := url.Values{}
	// secure_delete zeroes what a DELETE or UPDATE frees, so a purged body
	// is not left readable in free pages; journal_size_limit truncates the
	// WAL back after a checkpoint instead of keeping its largest size.
	// Foreign keys are declared but not enforced (SQLite's default):
	// nothing relies on them, and checking each attempt's delivery was
	// a tenth of the cost of recording an outcome.
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)",
		"secure_delete(ON)", fmt.Sprintf("journal_size_limit(%d)", walLimit)} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	write, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if err := migrate(ctx, write); err != nil {
		write.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if !opts.NoRecover {
		// After migrate, which refuses a file a newer evfwd made.
		if err := incrementalVacuum(ctx, write); err != nil {
			write.Close()
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		if err := clearStaging(ctx, write); err != nil {
			write.Close()
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	}
	read, err := sql.Open("sqlite", dsn)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	// The writer keeps the one write connection for the life of the
	// store, with the statements it prepared on it.
	c, err := write.Conn(ctx)
	if err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	s := &Store{
		path: path, read: read, write: write, wtx: newWtx(c), leases: newLeases(), opts: opts,
		deletionStep: deletionPageSize,
		ops:          make(chan *op, 4096),
		closing:      make(chan struct{}),
		done:         make(chan struct{}),
	}
	go s.writer()
	if opts.NoRecover {
		return s, nil
	}
	if err := s.finishDeletions(ctx); err != nil { // what a stopped process left unfinished
		s.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}

// createPrivate creates the database file, when missing, empty (SQLite
// takes an empty file for an empty database) and readable by its owner
// alone. SQLite would create it 0644 less the umask, and it gives the
// -wal and -shm files it makes the mode of the database file (then fixes
// it against the umask): so all three hold the events for the owner only,
// whatever the umask. A file that exists keeps the mode it has.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close stops the writer after the calls already queued and closes the
// database.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.closing)
		s.mu.Unlock()
	})
	<-s.done
	return errors.Join(s.wtx.close(), s.write.Close(), s.read.Close())
}

// do queues fn for the next group transaction and waits for its commit.
func (s *Store) do(ctx context.Context, msgs int, fn func(context.Context, *wtx) error) error {
	return s.queue(ctx, &op{msgs: msgs, apply: fn, done: make(chan error, 1)})
}

// doAgain is do for an fn that may run again (see op.again).
func (s *Store) doAgain(ctx context.Context, msgs int, fn func(context.Context, *wtx) error) error {
	return s.queue(ctx, &op{msgs: msgs, apply: fn, done: make(chan error, 1), again: true})
}

// doRead is doAgain for an fn that writes nothing to the file (see
// op.read).
func (s *Store) doRead(ctx context.Context, fn func(context.Context, *wtx) error) error {
	return s.queue(ctx, &op{apply: fn, done: make(chan error, 1), read: true, again: true})
}

// queue queues o and waits for its outcome.
func (s *Store) queue(ctx context.Context, o *op) error {
	msgs := o.msgs
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	if msgs > 0 {
		if s.pending.Add(int64(msgs)) > int64(s.opts.MaxPending) {
			s.pending.Add(-int64(msgs))
			s.mu.RUnlock()
			return store.ErrBusy
		}
	}
	select {
	case s.ops <- o:
	case <-ctx.Done():
		s.pending.Add(-int64(msgs))
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	// Once queued, the op is committed or failed by the writer; waiting for
	// that even after ctx ends keeps "returned nil" meaning "on disk".
	return <-o.done
}

// writer runs group transactions until Close, then drains what is queued.
func (s *Store) writer() {
	defer close(s.done)
	group := make([]*op, 0, s.opts.MaxGroup)
	var last writes
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	for {
		group = group[:0]
		select {
		case o := <-s.ops:
			group = append(group, o)
		case <-s.closing:
			// Close holds mu while closing, so no op is queued after this.
			for {
				select {
				case o := <-s.ops:
					s.run([]*op{o})
				default:
					return
				}
			}
		}
	gather:
		for len(group) < s.opts.MaxGroup && group[len(group)-1].conn == nil {
			select {
			case o := <-s.ops:
				group = append(group, o)
			default:
				break gather
			}
		}
		group = s.gatherMore(group, last, wait)
		start := time.Now()
		s.run(group)
		last = writes{ops: countWrites(group), took: time.Since(start)}
	}
}

// writes is what the writer's last group committed: its write ops and
// how long its run took.
type writes struct {
	ops  int
	took time.Duration
}

// maxGatherWait bounds how long gatherMore waits.
const maxGatherWait = 5 * time.Millisecond

// gatherMore waits a little for more writes when group holds fewer than
// last: the callers a commit answers come back over the moments after
// it, and the first of them would otherwise start a transaction of its
// own, paying a whole fsync for one or two ops while the others queue for
// the next (16 callers of one message each made groups of 1-3 and 13-15
// in turn, half of them one fsync apart). It waits until the group holds
// as many writes as last, a read or connection op arrives (those do not
// wait), or half of last's run has passed (at most maxGatherWait): less
// than the commit the late callers would otherwise wait for.
func (s *Store) gatherMore(group []*op, last writes, wait *time.Timer) []*op {
	want := min(last.ops, s.opts.MaxGroup)
	if len(group) >= want || countWrites(group) < len(group) {
		return group
	}
	wait.Reset(min(last.took/2, maxGatherWait))
	defer wait.Stop() // and no stale tick is left in wait.C (Go 1.23 timers)
	for len(group) < want {
		select {
		case o := <-s.ops:
			group = append(group, o)
			if o.read || o.conn != nil {
				return group
			}
		case <-wait.C:
			return group
		case <-s.closing:
			return group
		}
	}
	return group
}

// countWrites counts group's ops that write in a group transaction: not
// reads, not connection ops.
func countWrites(group []*op) int {
	n := 0
	for _, o := range group {
		if !o.read && o.conn == nil {
			n++
		}
	}
	return n
}

// run commits group, whose last op may be a connection op: that one runs
// after the others' transaction, on its own.
func (s *Store) run(group []*op) {
	if reads := readsFirst(group); reads > 0 && reads < len(group) {
		s.commit(group[:reads])
		group = group[reads:]
	}
	last := group[len(group)-1]
	if last.conn == nil {
		s.commit(group)
		return
	}
	if len(group) > 1 {
		s.commit(group[:len(group)-1])
	}
	last.done <- last.conn(context.Background(), s.wtx)
}

// readsFirst moves group's read ops (but a connection op, which stays
// last) to its front, in order, and reports how many there are.
func readsFirst(group []*op) int {
	n := 0
	for i, o := range group {
		if o.read && o.conn == nil {
			copy(group[n+1:i+1], group[n:i])
			group[n] = o
			n++
		}
	}
	return n
}

// commit runs group in one transaction and answers every op. A group
// whose ops may all run again runs first without savepoints, which cost
// about a sixth of ingest's time; should one of them fail, the
// transaction is rolled back and the group runs again with a savepoint
// per op, so that only that op fails. A transaction that fails by itself
// (BEGIN, COMMIT) fails every op, as it would with savepoints.
func (s *Store) commit(group []*op) {
	s.commits.Add(1)
	errs := make([]error, len(group))
	var err error
	if again := !slices.ContainsFunc(group, func(o *op) bool { return !o.again }); !again {
		err = s.transact(group, errs, true)
	} else if err = s.transact(group, errs, false); errors.Is(err, errOpFailed) {
		clear(errs)
		err = s.transact(group, errs, true)
	}
	for i, o := range group {
		if o.msgs > 0 {
			s.pending.Add(-int64(o.msgs))
		}
		if err != nil {
			o.done <- fmt.Errorf("store: commit: %w", err)
		} else {
			o.done <- errs[i]
		}
	}
}

// errOpFailed says an op of a group without savepoints failed.
var errOpFailed = errors.New("store: an op of the group failed")

// transact runs group in one transaction: each op in a savepoint of its
// own, whose failure is recorded in errs and rolls back that op alone,
// or, without savepoints, each op as part of the whole, whose failure
// rolls back the transaction (transact returns errOpFailed). Any other
// error (BEGIN, COMMIT) is the transaction's, and returned.
func (s *Store) transact(group []*op, errs []error, savepoints bool) error {
	ctx := context.Background()
	tx := s.wtx
	// What an op did to the leases in memory is undone with what it did
	// to the file: when it fails, or when the whole transaction does.
	defer s.leases.settle()
	err := tx.run(ctx, func() error {
		for i, o := range group {
			if !savepoints {
				if errs[i] = o.apply(ctx, tx); errs[i] != nil {
					return errOpFailed
				}
				continue
			}
			if _, err := tx.ExecContext(ctx, "SAVEPOINT op"); err != nil {
				return err
			}
			mark := s.leases.mark()
			if errs[i] = o.apply(ctx, tx); errs[i] != nil {
				s.leases.undo(mark)
				if _, err := tx.ExecContext(ctx, "ROLLBACK TO op"); err != nil {
					// SQLite rolled the whole transaction back (it may on
					// SQLITE_FULL): the op's error is why.
					return fmt.Errorf("%w (rollback to savepoint: %v)", errs[i], err)
				}
			}
			if _, err := tx.ExecContext(ctx, "RELEASE op"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.leases.undo(0)
	}
	return err
}

// Ingest implements store.Store.
func (s *Store) Ingest(ctx context.Context, msgs []store.Message) error {
	_, err := s.IngestLeased(ctx, msgs, store.IngestLease{})
	return err
}

// IngestLeased implements store.Store.
func (s *Store) IngestLeased(ctx context.Context, msgs []store.Message, lease store.IngestLease) ([]store.Delivery, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	now := store.Millis(s.opts.Now())
	var leased []store.Delivery
	err := s.doAgain(ctx, len(msgs), func(ctx context.Context, tx *wtx) error {
		var err error
		if leased, err = insertMessages(ctx, tx, msgs, now, lease); err != nil {
			return err
		}
		until := store.Millis(lease.Until)
		for _, d := range leased {
			s.leases.take(d.ID, leaseOf{source: d.Source, owner: lease.Owner, until: until})
		}
		return nil
	})
	if err != nil {
		return nil, classify(err)
	}
	return leased, nil
}

// insertMessages stores msgs and their deliveries, leasing the first
// lease.Limit deliveries (see IngestLeased), and returns those.
func insertMessages(ctx context.Context, tx *wtx, msgs []store.Message, now int64, lease store.IngestLease) ([]store.Delivery, error) {
	in := ingestion{now: now, limit: lease.Limit, room: lease.Limit}
	for len(msgs) > 0 {
		n := min(len(msgs), insertChunk)
		if err := in.chunk(ctx, tx, msgs[:n]); err != nil {
			return nil, err
		}
		msgs = msgs[n:]
	}
	return in.leased, nil
}

// insertChunk bounds the rows of one multi-row INSERT (7 parameters each,
// far below SQLite's limit). One statement per chunk, not per row, is what
// makes ingest fast.
const insertChunk = 100

// ingestion is one IngestLeased call's progress through its chunks.
type ingestion struct {
	now    int64
	limit  int // deliveries to lease at most
	room   int // deliveries still to lease
	leased []store.Delivery
}

func (in *ingestion) chunk(ctx context.Context, tx *wtx, msgs []store.Message) error {
	args := make([]any, 0, len(msgs)*7)
	for i := range msgs {
		m := &msgs[i]
		args = append(args, m.Source, m.MessageID, m.Type, m.UserID, store.Millis(m.ReceivedAt), m.Body, m.Form)
	}
	// Rows already stored (a client's retry) are skipped.
	res, err := tx.ExecContext(ctx, insertMessagesSQL[len(msgs)], args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return err
	}
	// The rows this statement inserted are the n past the largest id
	// before it: the writer is the only one, and a rowid table gives each
	// new row the largest id plus one, so they are consecutive and end at
	// the last one inserted (a row skipped as known takes no id). Read
	// from the statement's result, not by a SELECT max(id) before it: that
	// was a second statement for every ingest, the half of its cost for a
	// request of one message.
	last, err := res.LastInsertId()
	if err != nil {
		return err
	}
	before := last - n
	if dest, ok := oneDestination(msgs); ok {
		return in.deliverAll(ctx, tx, msgs, before, int(n), dest)
	}
	return in.deliverEach(ctx, tx, msgs, before)
}

// insertMessagesSQL[n] inserts n messages.
var insertMessagesSQL = func() (qs [insertChunk + 1]string) {
	for n := 1; n <= insertChunk; n++ {
		qs[n] = `INSERT INTO messages (source, message_id, type, user_id, received_at, body, body_form) VALUES ` +
			strings.Repeat("(?,?,?,?,?,?,?),", n-1) + `(?,?,?,?,?,?,?) ON CONFLICT (source, message_id) DO NOTHING`
	}
	return qs
}()

// oneDestination reports the one destination every message has ("" for
// none), as the messages of a request share their source's.
func oneDestination(msgs []store.Message) (string, bool) {
	dest := ""
	for i, m := range msgs {
		if len(m.Destinations) > 1 {
			return "", false
		}
		d := ""
		if len(m.Destinations) == 1 {
			d = m.Destinations[0]
		}
		if i > 0 && d != dest {
			return "", false
		}
		dest = d
	}
	return dest, true
}

// deliverAll creates a delivery to dest for each of the n messages stored
// past id before, with one statement: no parameters per row, and nothing
// read back but when some are leased.
func (in *ingestion) deliverAll(ctx context.Context, tx *wtx, msgs []store.Message, before int64, n int, dest string) error {
	if dest == "" {
		return nil
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
		SELECT id, source, ?, 'pending', received_at, ?, ? FROM messages WHERE id > ? ORDER BY id`, dest, in.now, in.now, before)
	if err != nil || in.room == 0 {
		return err
	}
	last, err := res.LastInsertId()
	if err != nil {
		return err
	}
	first := last - int64(n) + 1 // consecutive, in message order
	// The stored messages in id order: all of msgs, or those a SELECT
	// names when some were known already.
	stored := make([]*store.Message, 0, n)
	if n == len(msgs) {
		for i := range msgs {
			stored = append(stored, &msgs[i])
		}
	} else {
		type key struct{ source, id string }
		byKey := make(map[key]*store.Message, len(msgs))
		for i := range msgs {
			k := key{msgs[i].Source, msgs[i].MessageID}
			if _, dup := byKey[k]; !dup {
				byKey[k] = &msgs[i]
			}
		}
		rows, err := tx.QueryContext(ctx, `SELECT source, message_id FROM messages WHERE id > ? ORDER BY id`, before)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.source, &k.id); err != nil {
				rows.Close()
				return err
			}
			stored = append(stored, byKey[k])
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	for j, m := range stored {
		if in.room == 0 {
			break
		}
		in.room--
		in.leased = append(in.leased, in.delivery(first+int64(j), dest, m))
	}
	return nil
}

// delivery is the new delivery id of m to dest, as Lease returns it.
func (in *ingestion) delivery(id int64, dest string, m *store.Message) store.Delivery {
	return store.Delivery{
		ID: id, Source: m.Source, Destination: dest, MessageID: m.MessageID, Type: m.Type, UserID: m.UserID,
		Status: store.Pending, NextAttempt: store.FromMillis(store.Millis(m.ReceivedAt)),
		CreatedAt: store.FromMillis(in.now), UpdatedAt: store.FromMillis(in.now), Body: m.Body, Form: m.Form,
	}
}

// deliverEach creates the deliveries of the messages stored past id
// before, each to its own destinations.
func (in *ingestion) deliverEach(ctx context.Context, tx *wtx, msgs []store.Message, before int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, source, message_id FROM messages WHERE id > ?`, before)
	if err != nil {
		return err
	}
	type key struct{ source, id string }
	inserted := map[key]int64{}
	for rows.Next() {
		var k key
		var id int64
		if err := rows.Scan(&id, &k.source, &k.id); err != nil {
			rows.Close()
			return err
		}
		inserted[k] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var q strings.Builder
	var args []any
	q.WriteString(`INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at) VALUES `)
	// The deliveries to lease: their messages by row id and destination.
	type leaseKey struct {
		msg  int64
		dest string
	}
	var lease map[leaseKey]*store.Message
	for i := range msgs {
		m := &msgs[i]
		id, ok := inserted[key{m.Source, m.MessageID}]
		if !ok {
			continue
		}
		delete(inserted, key{m.Source, m.MessageID}) // a repeat within the request
		for _, dest := range m.Destinations {
			if len(args) > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,'pending',?,?,?)")
			args = append(args, id, m.Source, dest, store.Millis(m.ReceivedAt), in.now, in.now)
			if in.room > 0 {
				in.room--
				if lease == nil {
					lease = map[leaseKey]*store.Message{}
				}
				lease[leaseKey{id, dest}] = m
			}
		}
	}
	if len(args) == 0 {
		return nil
	}
	if lease == nil {
		_, err = tx.ExecContext(ctx, q.String(), args...)
		return err
	}
	q.WriteString(` RETURNING id, message, destination`)
	rows, err = tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	start := len(in.leased)
	for rows.Next() {
		var d store.Delivery
		var msg int64
		if err := rows.Scan(&d.ID, &msg, &d.Destination); err != nil {
			return err
		}
		m := lease[leaseKey{msg, d.Destination}]
		if m == nil || len(in.leased) == in.limit {
			continue // not leased; or a destination named twice
		}
		in.leased = append(in.leased, in.delivery(d.ID, d.Destination, m))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// RETURNING's order is not promised; ids follow msgs' order.
	slices.SortFunc(in.leased[start:], func(a, b store.Delivery) int { return cmp.Compare(a.ID, b.ID) })
	return rows.Close()
}

// collect reads every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(rowscan.Scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Lease implements store.Store.
func (s *Store) Lease(ctx context.Context, r store.LeaseRequest) ([]store.Delivery, error) {
	if r.Limit <= 0 {
		return nil, nil
	}
	now := store.Millis(r.Now)
	until := store.Millis(r.Now.Add(r.TTL))
	var out []store.Delivery
	err := s.doRead(ctx, func(ctx context.Context, tx *wtx) error {
		out = nil // a second run starts afresh (see op.again)
		// The due deliveries in the index's order, past those leased: on
		// from where the last Lease stopped, or from the start once a
		// second and when that finds too few.
		c, ok := s.leases.cursors[r.Source]
		var err error
		if ok && now-c.scanned < 1000 {
			out, c, err = s.due(ctx, tx, r.Source, c, now, r.Limit)
		}
		if err == nil && len(out) < r.Limit {
			var start cursor
			var free bool
			if start, free, err = s.firstFree(ctx, tx, r.Source, now); free {
				out, c, err = s.due(ctx, tx, r.Source, start, now, r.Limit)
			}
			c.scanned = now
		}
		if err != nil || len(out) == 0 {
			return err
		}
		s.leases.move(r.Source, c)
		for _, d := range out {
			s.leases.take(d.ID, leaseOf{source: r.Source, owner: r.Owner, until: until})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// firstFree is the cursor right before the first due delivery of source
// not leased at now, found in the due index alone: the deliveries in
// flight sit at its head, and reading their rows and bodies only to skip
// them would cost a lease from the start more than the rows it takes.
// free is false when every due delivery is leased.
func (s *Store) firstFree(ctx context.Context, tx *wtx, source string, now int64) (c cursor, free bool, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, next_attempt_at FROM deliveries INDEXED BY deliveries_due
		WHERE source = ? AND status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, id`, source, now)
	if err != nil {
		return c, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, at int64
		if err := rows.Scan(&id, &at); err != nil {
			return c, false, err
		}
		if !s.leases.held(id, now) {
			return cursor{at: at, id: id - 1}, true, nil
		}
	}
	return c, false, rows.Err()
}

// due reads up to limit due deliveries of source that are not leased at
// now, in the due index's order, after c, and where it stopped. Two
// statements, because SQLite seeks the index on (next_attempt_at, id)
// only through an equality on the first: the rest of c's millisecond,
// then the ones after it. A leased row is read and skipped: past the
// cursor, or the first one free, there are few.
func (s *Store) due(ctx context.Context, tx *wtx, source string, c cursor, now int64, limit int) ([]store.Delivery, cursor, error) {
	var out []store.Delivery
	scan := rowscan.Leased(source)
	read := func(q string, args ...any) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for len(out) < limit && rows.Next() {
			d, err := scan(rows)
			if err != nil {
				return err
			}
			c.at, c.id = store.Millis(d.NextAttempt), d.ID
			if !s.leases.held(d.ID, now) {
				out = append(out, d)
			}
		}
		return rows.Err()
	}
	const from = `SELECT ` + rowscan.LeasedColumns + ` FROM deliveries d INDEXED BY deliveries_due
		JOIN messages m ON m.id = d.message WHERE d.source = ? AND d.status = 'pending' AND `
	if c.at <= now {
		if err := read(from+`d.next_attempt_at = ? AND d.id > ? ORDER BY d.id`, source, c.at, c.id); err != nil {
			return nil, c, err
		}
	}
	if len(out) < limit {
		if err := read(from+`d.next_attempt_at > ? AND d.next_attempt_at <= ? ORDER BY d.next_attempt_at, d.id`,
			source, c.at, now); err != nil {
			return nil, c, err
		}
	}
	return out, c, nil
}

// Complete implements store.Store.
func (s *Store) Complete(ctx context.Context, cs []store.Completion) error {
	if len(cs) == 0 {
		return nil
	}
	now := store.Millis(s.opts.Now())
	// A completion is applied even when ctx has ended: the attempts were
	// made and must be on record.
	return s.doAgain(context.WithoutCancel(ctx), 0, func(ctx context.Context, tx *wtx) error {
		// A completion applies while its owner holds the lease; its
		// attempts are recorded either way.
		held := make([]bool, len(cs))
		for i, c := range cs {
			held[i] = s.leases.holds(c.ID, c.Owner)
		}
		for i := 0; i < len(cs); i += completeChunk {
			j := min(len(cs), i+completeChunk)
			if err := completeTx(ctx, tx, cs[i:j], held[i:j], now); err != nil {
				return err
			}
		}
		for i, c := range cs {
			if held[i] {
				s.leases.drop(c.ID)
			}
		}
		return nil
	})
}

// completeChunk bounds the completions, and the attempts, one statement
// applies: statements are prepared per row count, and a statement per
// group rather than per row is what makes recording outcomes cheap.
const completeChunk = 64

// completeTx applies cs (at most completeChunk), those whose lease is
// held, with one UPDATE, and records all their attempts with a multi-row
// INSERT per completeChunk attempts.
func completeTx(ctx context.Context, tx *wtx, cs []store.Completion, held []bool, now int64) error {
	var q strings.Builder
	q.WriteString(`UPDATE deliveries SET status = c.column2, attempts = c.column3, first_attempt_at = c.column4,
		next_attempt_at = c.column5, last_error = c.column6, updated_at = ? FROM (VALUES `)
	args := make([]any, 0, 1+len(cs)*6)
	args = append(args, now)
	records := 0
	for i, c := range cs {
		records += len(c.Records)
		if !held[i] {
			continue
		}
		if len(args) > 1 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,?,?)")
		args = append(args, c.ID, string(c.Status), c.Attempts, store.Millis(c.FirstAttempt), store.Millis(c.NextAttempt),
			c.LastError)
	}
	q.WriteString(`) AS c WHERE deliveries.id = c.column1 AND deliveries.status = 'pending'`)
	if len(args) > 1 {
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	if records == 0 {
		return nil
	}
	// attemptColumns is the parameters of one attempt row.
	const attemptColumns = 11
	args = make([]any, 0, min(records, completeChunk)*attemptColumns)
	insert := func() error {
		q.Reset()
		q.WriteString(`INSERT INTO attempts (delivery, delivery_no, endpoint, url, started_at, latency_us, status, class,
			error, excerpt, outcome) VALUES `)
		for i := range len(args) / attemptColumns {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?,?,?,?,?,?,?,?)")
		}
		_, err := tx.ExecContext(ctx, q.String(), args...)
		args = args[:0]
		return err
	}
	for _, c := range cs {
		for _, a := range c.Records {
			args = append(args, c.ID, a.Delivery, a.Endpoint, a.URL, store.Millis(a.Start), a.Latency.Microseconds(), a.Status,
				a.Class, a.Error, a.Excerpt, a.Outcome)
			if len(args) == completeChunk*attemptColumns {
				if err := insert(); err != nil {
					return err
				}
			}
		}
	}
	if len(args) > 0 {
		return insert()
	}
	return nil
}

// Reclaim implements store.Store: one process uses the file at a time (see
// Lock), so every lease left behind belongs to a process that is gone.
func (s *Store) Reclaim(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		// Leases are in memory (lease.go); a file an evfwd before them
		// left may hold some in its rows.
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET lease_owner = NULL, lease_expires_at = 0
			WHERE lease_owner IS NOT NULL`)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		n += int64(s.leases.clear())
		return err
	})
	return int(n), err
}

// where builds the WHERE clause of a filter on deliveries d.
func where(f store.Filter) (string, []any) {
	clause, args := " WHERE d.id > ?", []any{f.After}
	switch {
	case f.Status.Valid():
		// A literal, not a parameter, so that the planner can use the
		// partial index of that status (deliveries_due, deliveries_settled).
		clause += " AND d.status = '" + string(f.Status) + "'"
	case f.Status != "":
		clause += " AND 0" // no delivery has an unknown status
	}
	if f.Source != "" {
		clause += " AND d.source = ?"
		args = append(args, f.Source)
	}
	if f.Before > 0 {
		clause += " AND d.id < ?"
		args = append(args, f.Before)
	}
	if f.Endpoint != "" {
		// A semi-join probing attempts_delivery per delivery, in the
		// order the deliveries are walked: no index on attempts.url
		// (it would cost every attempt's insert), and a page stops at
		// Limit matches.
		clause += " AND EXISTS (SELECT 1 FROM attempts a WHERE a.delivery = d.id AND a.url = ?)"
		args = append(args, f.Endpoint)
	}
	return clause, args
}

// order is the ORDER BY of List.
func order(f store.Filter) string {
	if f.Desc {
		return " ORDER BY d.id DESC"
	}
	return " ORDER BY d.id"
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, f store.Filter) ([]store.Delivery, error) {
	clause, args := where(f)
	q := `SELECT ` + rowscan.DeliveryColumns + ` FROM deliveries d JOIN messages m ON m.id = d.message` + clause + order(f)
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.DeliveryRow)
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id int64) (*store.Detail, error) {
	var d store.Detail
	row := s.read.QueryRowContext(ctx, `SELECT `+rowscan.DeliveryColumns+`, `+rowscan.BodyColumns+` FROM deliveries d
		JOIN messages m ON m.id = d.message WHERE d.id = ?`, id)
	if err := rowscan.DeliveryBody(row, &d.Delivery); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("delivery %d: %w", id, store.ErrNotFound)
		}
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+rowscan.AttemptColumns+` FROM attempts WHERE delivery = ? ORDER BY id`, id)
	if err != nil {
		return nil, err
	}
	if d.Records, err = collect(rows, rowscan.Attempt); err != nil {
		return nil, err
	}
	return &d, nil
}

// Retry implements store.Store. A pending delivery under a live lease is
// left to its holder; a cancelled one stays cancelled.
func (s *Store) Retry(ctx context.Context, ids []int64, f store.Filter, now time.Time) (int, error) {
	var n int64
	at := store.Millis(now)
	err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		const set = `UPDATE deliveries SET status = 'pending', attempts = 0, first_attempt_at = 0, next_attempt_at = ?,
			last_error = '', updated_at = ? WHERE id IN (SELECT d.id FROM deliveries d`
		const keep = ` AND d.status NOT IN ('delivered', 'cancelled') AND d.id NOT IN (SELECT value FROM json_each(?)))`
		live := s.leases.live(at)
		if len(ids) > 0 {
			for _, id := range ids {
				res, err := tx.ExecContext(ctx, set+` WHERE d.id = ?`+keep, at, at, id, live)
				if err != nil {
					return err
				}
				k, _ := res.RowsAffected()
				n += k
			}
			return nil
		}
		clause, args := where(f)
		res, err := tx.ExecContext(ctx, set+clause+keep, append(append([]any{at, at}, args...), live)...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) ([]store.Count, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+rowscan.CountColumns+` FROM deliveries GROUP BY source, status ORDER BY source, status`)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.Count)
}
