// Package postgres is the shared store: one PostgreSQL database that many
// `evfwd serve` nodes use at once, behind any load balancer.
//
// Nodes coordinate only through the database. Ingest is one statement
// (arrays unnested into a multi-row INSERT … ON CONFLICT DO NOTHING), so a
// retried batch that another node already stored is skipped; concurrent
// requests share one statement, committed as one transaction (group
// commit, ingestgroup.go), its messages in (source, message_id) order so
// that statements sharing messages never deadlock (ingest.go).
// Lease picks due deliveries with FOR UPDATE SKIP LOCKED, so nodes leasing
// at the same time get different rows, and a lease carries an expiry, so a
// dead node's deliveries go to the others once it runs out. A call returns
// only after its transaction committed (synchronous_commit as the server
// has it; on by default): a 200 means the messages are in the database.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/leasefloor"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
	"github.com/evfwd/evfwd/pkg/store/internal/syncrun"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of Options.
const (
	DefaultMaxPending = 100_000
	// DefaultMaxConns is the pool size unless the URL sets pool_max_conns:
	// enough for the forwarder's completions and concurrent ingests, small
	// enough that a few nodes stay under the server's max_connections (100).
	DefaultMaxConns = 16
)

// Options tune a Store; zero values take the defaults.
type Options struct {
	// MaxPending bounds the messages being ingested at once; past it
	// Ingest returns store.ErrBusy (back-pressure, answered 429).
	MaxPending int
	// Now is the clock for created/updated times (default time.Now).
	Now func() time.Time
	// NoRecover leaves what a stopped process left unfinished (a sync's
	// runs, a deletion's steps) to the service, which finishes it when it
	// starts. Tools that open the store beside a running serve (evfwd
	// deliveries) set it, so they never take part in the service's work.
	NoRecover bool
	// Logger receives the failures of the work a stopped process left,
	// which Open leaves to the background (default: discarded).
	Logger *slog.Logger

	// recoveryGate, when set, holds the background work back until it is
	// closed: tests look at the store while that work is under way.
	recoveryGate <-chan struct{}
}

// Store is the PostgreSQL implementation of store.Store.
type Store struct {
	pool    *pgxpool.Pool
	name    string
	opts    Options
	pending atomic.Int64
	mu      sync.RWMutex // held for reading by calls; Close takes it to refuse new ones
	closed  bool
	once    sync.Once

	completions chan completion
	ingests     chan *ingestReq
	quit        chan struct{}
	stop        context.Context // ends at Close: what background work runs under
	cancelStop  context.CancelFunc
	// background ends as Close begins, before it waits for the calls in
	// progress: what the store does on its own (the sync sweep, releasing
	// orphans) runs under it, so that Close never waits on it for long.
	background       context.Context
	cancelBackground context.CancelFunc
	orphans          orphans            // leases of ingests whose answer was lost (orphans.go)
	syncHook         synchook.Hook      // SetSyncHook's
	syncSteps        syncrun.StepRows   // SetSyncSteps'
	floors           *leasefloor.Floors // where Lease starts reading each source's due deliveries (floor.go)
	rewriting        sync.Mutex         // takes this Store's deletion rewrites one at a time (deletion.go)
	recovery         recovery           // what a stopped process left, finished after Open (recoverLeft)
}

// recovery is the work Open leaves to the background and how Close stops
// it.
type recovery struct {
	cancel context.CancelFunc
	done   chan struct{}
}

var _ store.Store = (*Store)(nil)

// CheckURL reports whether url is a connection URL Open can use, without
// connecting (`evfwd serve --check`).
func CheckURL(url string) error {
	_, err := parseURL(url)
	return err
}

func parseURL(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's error may quote the URL, password included.
		return nil, errors.New("store: invalid PostgreSQL URL")
	}
	return cfg, nil
}

// Open connects to the database at url (postgres://user:pass@host/db?...)
// and brings its schema up to date. A search_path parameter in the URL
// names the schema to use, created when missing, so several deployments
// (or test runs) can share one database.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	configurePool(cfg, url)
	schema := cfg.ConnConfig.RuntimeParams["search_path"]
	name := fmt.Sprintf("postgres://%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if schema != "" {
		name += "?search_path=" + schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	if err := migrate(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	s := &Store{pool: pool, name: name, opts: opts, completions: make(chan completion, maxGroup),
		ingests: make(chan *ingestReq, 64), quit: make(chan struct{}), floors: newFloors(),
		recovery: recovery{done: make(chan struct{})}}
	s.stop, s.cancelStop = context.WithCancel(context.Background())
	s.background, s.cancelBackground = context.WithCancel(context.Background())
	go s.completer()
	for range ingesters(cfg.MaxConns) {
		go s.ingester()
	}
	if opts.NoRecover {
		close(s.recovery.done)
		return s, nil
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.recovery.cancel = cancel
	go s.recoverLeft(bg)
	return s, nil
}

// recoverLeft finishes what stopped processes left, after Open has
// returned, so that serve answers ingest at once (issue 31): readers need
// no more than they have, since a sync's runs are finished under the
// key's advisory lock, which a sync of the key waits for, and a deletion
// purged its messages in the transaction that recorded it (what is left
// is the rewrite, and the request reads as not done until then). A failure
// is logged: the sweep every syncSweep, the next deletion request or the
// next start tries again.
func (s *Store) recoverLeft(ctx context.Context) {
	defer close(s.recovery.done)
	if s.opts.recoveryGate != nil {
		select {
		case <-s.opts.recoveryGate:
		case <-ctx.Done():
			return
		}
	}
	if err := s.recoverSyncs(ctx); err != nil && ctx.Err() == nil { // admin.go: finish or drop syncs that dead nodes left
		s.opts.Logger.Error("store: could not finish the sync runs a stopped process left", "err", err)
	}
	if err := s.finishDeletions(ctx); err != nil && ctx.Err() == nil { // deletion.go: rewrite away what a stopped process left
		s.opts.Logger.Error("store: could not finish the deletion requests a stopped process left", "err", err)
	}
}

// Recovered is closed once the work a stopped process left is done (or
// stopped by Close); at once with Options.NoRecover.
func (s *Store) Recovered() <-chan struct{} { return s.recovery.done }

// Path names the database (without credentials), for logs.
func (s *Store) Path() string { return s.name }

// Pool is the connection pool, for tests and tools that read the tables.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close waits for the calls in progress and closes the pool.
func (s *Store) Close() error {
	s.cancelBackground()
	if s.recovery.cancel != nil {
		s.recovery.cancel()
	}
	<-s.recovery.done
	s.once.Do(func() {
		// Calls still in flight end now, not at their deadlines: the
		// lock below waits for them, and on a link that answers nothing
		// they would hold a stopping process for a store deadline.
		s.cancelStop()
		s.mu.Lock()
		s.closed = true
		close(s.quit)
		s.mu.Unlock()
		// A connection whose statement was cancelled is closed after a
		// cancel request to the server, which pgx waits up to 15 s on:
		// on a link that answers nothing, that would hold a stopping
		// process. Past closeWait those finish in the background.
		closed := make(chan struct{})
		go func() { defer close(closed); s.pool.Close() }()
		select {
		case <-closed:
		case <-time.After(closeWait):
		}
	})
	return nil
}

// closeWait bounds how long Close waits for the pool's connections to
// close.
const closeWait = 250 * time.Millisecond

// enter admits a call unless the store is closed; the caller runs leave.
func (s *Store) enter() (leave func(), err error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// transient reports errors a transaction may simply run again after:
// deadlock and serialization failures between nodes.
func transient(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// retryTransient runs fn, running it again (a few times) after a transient
// error.
func retryTransient(fn func() error) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = fn(); err == nil || !transient(err) {
			return err
		}
		time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
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
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if s.pending.Add(int64(len(msgs))) > int64(s.opts.MaxPending) {
		s.pending.Add(-int64(len(msgs)))
		return nil, store.ErrBusy
	}
	defer s.pending.Add(-int64(len(msgs)))

	// The group's statements commit together (ingestgroup.go): nil means
	// committed. Once its group started, the request is applied or refused
	// whatever ctx does, and its caller waits for which: one that left
	// after the commit would leave deliveries leased to it that nobody
	// sends until the lease runs out. The group's statements end by the
	// latest deadline of its callers (groupDeadline), so the wait is
	// bounded too. Until its group starts, the caller may give up.
	r := &ingestReq{ctx: ctx, in: newIngest(msgs, store.Millis(s.opts.Now()), lease), done: make(chan ingestDone, 1)}
	select {
	case s.ingests <- r:
	case <-ctx.Done():
		return nil, classify(ctx.Err())
	}
	var d ingestDone
	select {
	case d = <-r.done:
	case <-ctx.Done():
		if r.abandon() {
			return nil, classify(ctx.Err())
		}
		d = <-r.done
	}
	if d.err != nil {
		return nil, classify(d.err)
	}
	for i := range msgs {
		if len(msgs[i].Destinations) > 0 {
			s.floors.Lower(msgs[i].Source, store.Millis(msgs[i].ReceivedAt))
		}
	}
	return d.leased, nil
}

// collect reads every row with scan and closes rows.
func collect[T any](rows pgx.Rows, scan func(rowscan.Scanner) (T, error)) ([]T, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}
