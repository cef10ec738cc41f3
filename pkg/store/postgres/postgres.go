// Package postgres is the shared store: one PostgreSQL database that many
// `evfwd serve` nodes use at once, behind any load balancer.
//
// Nodes coordinate only through the database. Ingest is one statement per
// request (arrays unnested into a multi-row INSERT … ON CONFLICT DO
// NOTHING), so a retried batch that another node already stored is skipped.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
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
	quit        chan struct{}
	syncHook    synchook.Hook // SetSyncHook's
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
	cfg, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
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
	s := &Store{pool: pool, name: name, opts: opts, completions: make(chan completion, maxGroup), quit: make(chan struct{})}
	go s.completer()
	if opts.NoRecover {
		return s, nil
	}
	if err := s.recoverSyncs(ctx); err != nil { // admin.go: finish or drop syncs that dead nodes left
		s.Close()
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	if err := s.finishDeletions(ctx); err != nil { // deletion.go: rewrite away what a stopped process left
		s.Close()
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	return s, nil
}

// Path names the database (without credentials), for logs.
func (s *Store) Path() string { return s.name }

// Pool is the connection pool, for tests and tools that read the tables.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close waits for the calls in progress and closes the pool.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.quit)
		s.mu.Unlock()
		s.pool.Close()
	})
	return nil
}

// enter admits a call unless the store is closed; the caller runs leave.
func (s *Store) enter() (leave func(), err error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// retryable reports errors a transaction may simply run again after:
// deadlock and serialization failures between nodes.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// again runs fn, running it again (a few times) after a retryable error.
func again(fn func() error) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = fn(); err == nil || !retryable(err) {
			return err
		}
		time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
	}
	return err
}

// ingestSQL stores messages and their deliveries in one statement, so one
// round trip and one commit per request. Messages already stored are not
// returned by the INSERT and so get no deliveries.
const ingestSQL = `WITH m AS (
	INSERT INTO messages (source, message_id, type, user_id, received_at, body, body_form)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bytea[], $11::smallint[])
	ON CONFLICT (source, message_id) DO NOTHING
	RETURNING id, source, message_id, received_at)
INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
SELECT m.id, m.source, d.destination, 'pending', m.received_at, $10, $10
FROM m JOIN unnest($7::text[], $8::text[], $9::text[]) AS d (source, message_id, destination)
	ON d.source = m.source AND d.message_id = m.message_id
ORDER BY m.id`

// Ingest implements store.Store.
func (s *Store) Ingest(ctx context.Context, msgs []store.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	if s.pending.Add(int64(len(msgs))) > int64(s.opts.MaxPending) {
		s.pending.Add(-int64(len(msgs)))
		return store.ErrBusy
	}
	defer s.pending.Add(-int64(len(msgs)))

	now := store.Millis(s.opts.Now())
	// The statement commits on its own (autocommit): nil means committed;
	// an error, even a cancelled ctx after commit, is only not acknowledged
	// and the client's retry is skipped as a known messageId.
	return classify(again(func() error { return ingestExec(ctx, s.pool, msgs, now) }))
}

// IngestLeased implements store.Store. For now it leases none, which the
// contract allows: every delivery stays pending for Lease.
func (s *Store) IngestLeased(ctx context.Context, msgs []store.Message, _ store.IngestLease) ([]store.Delivery, error) {
	return nil, s.Ingest(ctx, msgs)
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ingestExec stores msgs (see Ingest) through q.
func ingestExec(ctx context.Context, q execer, msgs []store.Message, now int64) error {
	// Rows go in request order, so ids follow it as in the SQLite store;
	// a repeat within the request keeps its first occurrence. Two requests
	// sharing messages in opposite orders can deadlock; the server detects
	// it and again() runs the loser once more.
	type key struct{ source, id string }
	seen := make(map[key]struct{}, len(msgs))
	n := len(msgs)
	src, mid, typ, uid := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	recv, body, form := make([]int64, 0, n), make([][]byte, 0, n), make([]int16, 0, n)
	var dSrc, dMid, dDest []string
	for i := range msgs {
		m := &msgs[i]
		k := key{m.Source, m.MessageID}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		src, mid, typ, uid = append(src, m.Source), append(mid, m.MessageID), append(typ, m.Type), append(uid, m.UserID)
		recv, body, form = append(recv, store.Millis(m.ReceivedAt)), append(body, m.Body), append(form, int16(m.Form))
		for _, d := range m.Destinations {
			dSrc, dMid, dDest = append(dSrc, m.Source), append(dMid, m.MessageID), append(dDest, d)
		}
	}
	_, err := q.Exec(ctx, ingestSQL, src, mid, typ, uid, recv, body, dSrc, dMid, dDest, now, form)
	return err
}

// collect reads every row with scan and closes rows.
func collect[T any](rows pgx.Rows, scan func(rowscan.Scanner) (T, error)) ([]T, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}
