// Package postgres is the shared store: one PostgreSQL database that many
// `evfwd serve` nodes use at once, behind any load balancer.
//
// Nodes coordinate only through the database. Ingest is one statement per
// request (arrays unnested into a multi-row INSERT … ON CONFLICT DO
// NOTHING), so a retried batch that another node already stored is skipped;
// the statements of concurrent requests are sent together and committed as
// one transaction (group commit, ingestgroup.go).
// Lease picks due deliveries with FOR UPDATE SKIP LOCKED, so nodes leasing
// at the same time get different rows, and a lease carries an expiry, so a
// dead node's deliveries go to the others once it runs out. A call returns
// only after its transaction committed (synchronous_commit as the server
// has it; on by default): a 200 means the messages are in the database.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	syncHook    synchook.Hook      // SetSyncHook's
	syncSteps   syncrun.StepRows   // SetSyncSteps'
	floors      *leasefloor.Floors // where Lease starts reading each source's due deliveries (floor.go)
	rewriting   sync.Mutex         // takes this Store's deletion rewrites one at a time (deletion.go)
	recovery    recovery           // what a stopped process left, finished after Open (recoverLeft)
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

// ingestSQL stores messages and their deliveries in one statement, so one
// round trip and one commit per request. Messages already stored are not
// returned by the INSERT and so get no deliveries. The first $12 new
// deliveries, in the request's order (d.ord), are created leased to $13
// until $14 after the database's clock (IngestLeased; see leaseSQL), and
// the statement returns those.
const ingestSQL = `WITH m AS (
	INSERT INTO messages (source, message_id, type, user_id, received_at, body, body_form)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bytea[], $11::smallint[])
	ON CONFLICT (source, message_id) DO NOTHING
	RETURNING id, source, message_id, received_at),
l AS (
	INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at,
		lease_owner, lease_expires_at)
	SELECT m.id, m.source, d.destination, 'pending', m.received_at, $10, $10,
		CASE WHEN row_number() OVER w <= $12 THEN $13::text END,
		CASE WHEN row_number() OVER w <= $12 THEN ` + clockSQL + ` + $14::bigint ELSE 0 END
	FROM m JOIN unnest($7::text[], $8::text[], $9::text[]) WITH ORDINALITY AS d (source, message_id, destination, ord)
		ON d.source = m.source AND d.message_id = m.message_id
	WINDOW w AS (ORDER BY d.ord)
	ORDER BY d.ord
	RETURNING id, message, destination, lease_owner IS NOT NULL AS leased)
SELECT l.id, m.source, m.message_id, l.destination FROM l JOIN m ON m.id = l.message WHERE l.leased`

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

// ingest is one IngestLeased call's statement: its arguments, and what
// turns the leased rows it returns into deliveries.
type ingest struct {
	msgs  []store.Message
	now   int64
	lease store.IngestLease
	first map[msgKey]int // index in msgs of each message's first occurrence

	src, mid, typ, uid []string
	recv               []int64
	body               [][]byte
	form               []int16
	dSrc, dMid, dDest  []string
}

type msgKey struct{ source, id string }

// newIngest builds the statement's arrays. Rows go in request order, so ids
// follow it as in the SQLite store; a repeat within the request keeps its
// first occurrence. Two requests sharing messages in opposite orders can
// deadlock; the server detects it and retryTransient runs the loser once more.
func newIngest(msgs []store.Message, now int64, lease store.IngestLease) *ingest {
	n := len(msgs)
	in := &ingest{msgs: msgs, now: now, lease: lease, first: make(map[msgKey]int, n),
		src: make([]string, 0, n), mid: make([]string, 0, n), typ: make([]string, 0, n), uid: make([]string, 0, n),
		recv: make([]int64, 0, n), body: make([][]byte, 0, n), form: make([]int16, 0, n),
		dSrc: make([]string, 0, n), dMid: make([]string, 0, n), dDest: make([]string, 0, n)}
	for i := range msgs {
		m := &msgs[i]
		k := msgKey{m.Source, m.MessageID}
		if _, dup := in.first[k]; dup {
			continue
		}
		in.first[k] = i
		in.src, in.mid, in.typ, in.uid = append(in.src, m.Source), append(in.mid, m.MessageID), append(in.typ, m.Type), append(in.uid, m.UserID)
		in.recv, in.body, in.form = append(in.recv, store.Millis(m.ReceivedAt)), append(in.body, m.Body), append(in.form, int16(m.Form))
		for _, d := range m.Destinations {
			in.dSrc, in.dMid, in.dDest = append(in.dSrc, m.Source), append(in.dMid, m.MessageID), append(in.dDest, d)
		}
	}
	return in
}

// args are ingestSQL's parameters; until is the lease's end after the
// database's clock (Store.leaseClock of lease.Until, just before sending).
func (in *ingest) args(until int64) []any {
	limit := int64(max(in.lease.Limit, 0))
	var owner *string
	if limit > 0 {
		owner = &in.lease.Owner
	}
	return []any{in.src, in.mid, in.typ, in.uid, in.recv, in.body, in.dSrc, in.dMid, in.dDest, in.now, in.form,
		limit, owner, until}
}

// read turns the leased rows ingestSQL returns into deliveries as Lease
// returns them (the row as inserted, the body as sent), in request order.
func (in *ingest) read(rows pgx.Rows) ([]store.Delivery, error) {
	var out []store.Delivery
	for rows.Next() {
		var d store.Delivery
		if err := rows.Scan(&d.ID, &d.Source, &d.MessageID, &d.Destination); err != nil {
			rows.Close()
			return nil, err
		}
		m := &in.msgs[in.first[msgKey{d.Source, d.MessageID}]]
		d.Type, d.UserID, d.Status = m.Type, m.UserID, store.Pending
		d.NextAttempt = store.FromMillis(store.Millis(m.ReceivedAt))
		d.CreatedAt, d.UpdatedAt = store.FromMillis(in.now), store.FromMillis(in.now)
		d.Body, d.Form, d.LeaseEnd = m.Body, m.Form, in.lease.Until
		out = append(out, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Ids follow the request's order (the INSERT's ORDER BY).
	slices.SortFunc(out, func(a, b store.Delivery) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ingestExec stores msgs (see IngestLeased, leasing none) through q.
func ingestExec(ctx context.Context, q execer, msgs []store.Message, now int64) error {
	_, err := q.Exec(ctx, ingestSQL, newIngest(msgs, now, store.IngestLease{}).args(0)...)
	return err
}

// collect reads every row with scan and closes rows.
func collect[T any](rows pgx.Rows, scan func(rowscan.Scanner) (T, error)) ([]T, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}
