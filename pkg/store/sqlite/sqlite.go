// Package sqlite is the embedded store: one SQLite file in WAL mode with
// synchronous=FULL, so a committed transaction survives power loss.
//
// Every write goes through one writer goroutine that gathers whatever
// concurrent callers have asked for (ingests, leases, completions) into one
// transaction: one fsync acknowledges many requests (group commit). One
// failing part does not fail the others: a group whose parts may run again
// runs first without savepoints (they cost ingest dearly), and
// only when a part fails is it rolled back and run again with a savepoint
// per part, so that one alone fails; a group with a part that may not run
// again has a savepoint per part from the start (writer.go). Reads use a
// separate pool of connections and never wait for the writer.
//
// The files: sqlite.go opens and closes the file; writer.go is the writer
// and its group commit; wtx.go the writer's connection; ingest.go,
// lease.go (Lease, Complete, Reclaim, Retry) and read.go what callers ask
// for; leases.go the leases, which live in memory.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
	"github.com/evfwd/evfwd/pkg/store/internal/syncrun"
	"github.com/gofrs/flock"
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
	// deliveries) set it, so they never take part in the service's work:
	// nor does such a Store take the file's lock (lock.go), so it must
	// not lease.
	NoRecover bool
	// MustExist refuses a missing file (an error matching fs.ErrNotExist)
	// instead of creating an empty store: a tool pointed at the wrong path
	// would otherwise show an empty store as if it were the service's.
	MustExist bool
	// Logger receives what the store does on its own: the work a stopped
	// process left, finished in the background (recover.go), and its
	// failures (default: discarded).
	Logger *slog.Logger

	// recoveryGate, when set, holds the background work back until it is
	// closed: tests look at the store while that work is under way.
	recoveryGate <-chan struct{}
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	path     string
	read     *sql.DB
	prepared statements // on read (read.go)
	write    *sql.DB
	wtx      *wtx // the writer's connection; only the writer goroutine uses it
	leases   leases
	opts     Options
	ops      chan *op
	pending  atomic.Int64 // messages queued for the writer
	closing  chan struct{}
	done     chan struct{}
	once     sync.Once
	mu       sync.RWMutex // held for reading while queueing; Close takes it to stop queueing
	closed   bool
	lock     *flock.Flock // the file's (lock.go); nil with NoRecover

	commits      atomic.Int64     // group transactions run (benchmarks report ops per commit)
	deletionStep int              // messages per deletion step (deletionPageSize; tests use less)
	syncHook     synchook.Hook    // SetSyncHook's
	syncSteps    syncrun.StepRows // SetSyncSteps'
	syncTurns    syncTurns        // admin.go: the syncs of one key take turns
	deletionTurn chan struct{}    // deletion.go: one finishing of deletions at a time
	held         held             // recover.go: deletions under way, kept out of leases
	recovery     recovery         // recover.go: what a stopped process left, finished in the background
}

var _ store.Store = (*Store)(nil)

// walLimit is the size the WAL is truncated back to after a checkpoint.
const walLimit = 64 << 20

// newFileIncremental gives a new (missing or empty) file
// auto_vacuum=INCREMENTAL before anything else is written to it:
// incrementalVacuum then finds it set and has no VACUUM to run, a fifth of
// opening a new store. The setting only takes on a file with no pages yet,
// before journal_mode=WAL writes the first, hence a connection of its own;
// the VACUUM of the empty file writes that first page with it. A file with
// content is left as it is: one a newer evfwd made must stay untouched.
func newFileIncremental(ctx context.Context, path string) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return nil
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=auto_vacuum(INCREMENTAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `VACUUM`)
	return err
}

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
// file at path and brings its schema up to date. Unless opts.NoRecover, the
// Store holds the file's lock until Close: while it does, every other such
// Open of the file, in any process, fails at once with ErrLocked.
func Open(ctx context.Context, path string, opts Options) (_ *Store, err error) {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxGroup <= 0 {
		opts.MaxGroup = DefaultMaxGroup
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := prepareFile(path, opts.MustExist); err != nil {
		return nil, err
	}
	var lk *flock.Flock
	if !opts.NoRecover {
		if lk, err = lock(path); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				lk.Unlock()
			}
		}()
	}
	if err := newFileIncremental(ctx, path); err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
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
		deletionTurn: make(chan struct{}, 1),
		recovery:     recovery{done: make(chan struct{})},
	}
	s.lock = lk
	go s.writer()
	if opts.NoRecover {
		close(s.recovery.done)
		return s, nil
	}
	// What a stopped process left unfinished goes on in the background,
	// atomic to readers all the same (recover.go).
	if err := s.startRecovery(ctx); err != nil {
		close(s.recovery.done)
		s.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}

// prepareFile checks path (CheckPath: in words, before SQLite says
// "unable to open database file") and, unless mustExist, creates the
// file and its directory when missing.
func prepareFile(path string, mustExist bool) error {
	if err := CheckPath(path, mustExist); err != nil || mustExist {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return pathError(path, err)
	}
	if err := createPrivate(path); err != nil {
		return pathError(path, err)
	}
	return nil
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

// Close stops the work a stopped process left (the next Open takes it up
// again), then the writer after the calls already queued, and closes the
// database.
func (s *Store) Close() error {
	s.stopRecovery()
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.closing)
		s.mu.Unlock()
	})
	<-s.done
	err := errors.Join(s.wtx.close(), s.write.Close(), s.prepared.close(), s.read.Close())
	if s.lock != nil {
		// Last: another Store may use the file once it is free.
		err = errors.Join(err, s.lock.Unlock())
	}
	return err
}
