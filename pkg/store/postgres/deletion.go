package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/deletion"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A deletion request on PostgreSQL, and what it leaves behind (issue 13).
//
// PostgreSQL never overwrites a row in place: emptying a body writes a new
// row version and leaves the old one, body and all, in the table's heap
// (and, for a body over about 2 KB, its chunks in the TOAST table). VACUUM
// makes that space reusable but does not zero it: nearly every purged body
// stays readable in the heap file after a plain VACUUM (docs/PERFORMANCE.md, "Figures behind the code").
// Only new files for the table remove them, so a deletion is two steps:
//
//  1. One transaction cancels the user's pending deliveries, empties the
//     bodies, queues the delete notifications and records the request with
//     done_at 0 (unfinished).
//  2. messages is rewritten into new files without the old row versions,
//     and so is sync_outbox (where a sync's messages wait before they move
//     into messages; small, and only syncs use it); then done_at is set. A
//     request that emptied no body needs no rewrite.
//
// The rewrite is online (swapRewrite in swap.go, as pg_repack does it):
// the live rows are copied into a new table while ingest goes on, the rows written
// meanwhile are copied again, and one short transaction swaps the copy in
// with the same indexes, constraints, foreign keys, identity position and
// grants. Ingest waits only for the swap, not for the copy
// (docs/PERFORMANCE.md, "Figures behind the code"). The swap waits for every transaction
// that has read the table to end (its lock), asking with a 100 ms
// lock_timeout and letting writers through between tries. Like TRUNCATE,
// it is not MVCC-safe for a repeatable-read transaction begun before it
// that first reads the table after it (it sees the table empty); evfwd
// runs none. When the table carries something a swap would lose (see
// canSwap), the rewrite is VACUUM FULL, after waiting until no transaction
// as old as the purges runs (VACUUM FULL copies row versions one might
// still see): that holds every ingest for the whole rewrite, 1.2 s and
// 10 s in the measure above. Either way the rewrite needs free disk for a
// second copy of the table.
//
// When CreateDeletion returns, no relation file of the store (heap, TOAST,
// indexes) holds a byte of the purged bodies; the old files are truncated
// to zero at the swap's commit and unlinked at the next checkpoint. What
// remains is outside evfwd's reach:
//
//   - pg_wal: the WAL records that inserted the bodies, and the full-page
//     images the purge wrote, stay in their segments until those are
//     overwritten. Once a checkpoint no longer needs a segment, it is
//     renamed for reuse (wal_recycle=on, the default) and keeps its bytes
//     until the server has written that much WAL again (up to max_wal_size,
//     1 GB by default), or it is unlinked (wal_recycle=off) at that
//     checkpoint, which comes within checkpoint_timeout (5 min by default)
//     or sooner with SELECT pg_switch_wal(); CHECKPOINT; run by a
//     superuser. Segments kept for wal_keep_size, a replication slot or a
//     failing archive_command stay longer.
//   - WAL archives, base backups, and standbys' own pg_wal hold them as long
//     as those are kept; a standby replays the purge and the swap.
//   - The server log, if it logs statements with their parameters.
//
// A request whose rewrite did not happen (the process died, a lock could
// not be had, a transaction held the horizon past the wait) stays
// unfinished: the next CreateDeletion and the next Open (of any
// node) finish it, and a swap that died half-way is cleared first.

// Bounds of the waits of a rewrite.
const (
	horizonWait    = time.Minute            // for transactions as old as the purge (VACUUM FULL only)
	rewriteLockTry = 100 * time.Millisecond // lock_timeout of one try at a lock
	rewriteTries   = 300                    // tries at one lock, 50 to 500 ms apart
)

// CreateDeletion implements store.Admin. Once the request is recorded its
// rewrite runs to the end even if ctx ends.
func (s *Store) CreateDeletion(ctx context.Context, r store.DeletionRequest) (*store.Deletion, error) {
	return deletion.Create(ctx, deletions{s}, r)
}

// Deletion implements store.Admin.
func (s *Store) Deletion(ctx context.Context, id string) (*store.Deletion, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	return deletion.Read(ctx, deletions{s}, id)
}

// recordDeletion is step 1.
func (s *Store) recordDeletion(ctx context.Context, r store.DeletionRequest) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	t := recordTx{s: s, now: store.Millis(s.opts.Now())}
	return retryTransient(func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			t.tx = tx
			return deletion.Record(ctx, t, r)
		})
	})
}

// deletions is the store as package deletion's Engine: Record and Finish
// are steps 1 and 2, Request and Sources the read.
type deletions struct{ s *Store }

func (d deletions) Record(ctx context.Context, r store.DeletionRequest) error {
	return d.s.recordDeletion(ctx, r)
}

func (d deletions) Finish(ctx context.Context) error { return d.s.finishDeletions(ctx) }

func (d deletions) Request(ctx context.Context, id string) (user string, created int64, done, found bool, err error) {
	err = d.s.pool.QueryRow(ctx, `SELECT user_id, created_at, done_at != 0 FROM deletions WHERE id = $1`, id).Scan(&user, &created, &done)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false, false, nil
	}
	return user, created, done, err == nil, err
}

func (d deletions) Sources(ctx context.Context, id string) ([]store.DeletionSource, error) {
	rows, err := d.s.pool.Query(ctx, deletion.SourcesQuery("$1", ` COLLATE "C"`), id)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.DeletionSource)
}

// recordTx is step 1's statements in its transaction.
type recordTx struct {
	s   *Store
	tx  pgx.Tx
	now int64
}

// Insert implements deletion.Tx.
func (t recordTx) Insert(ctx context.Context, r store.DeletionRequest) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO deletions (id, user_id, created_at, done_at) VALUES ($1, $2, $3, 0)`,
		r.ID, r.UserID, store.Millis(r.CreatedAt))
	return err
}

// Purge implements deletion.Tx: the rewrite of step 2 takes the bodies out
// of the files, so they are emptied at once.
func (t recordTx) Purge(ctx context.Context, r store.DeletionRequest, src string) (deletion.Counts, error) {
	const mine = `SELECT id FROM messages WHERE user_id = $1 AND source = $2 AND type != 'delete'`
	c, err := t.tx.Exec(ctx, `UPDATE deliveries SET status = 'cancelled', lease_owner = NULL,
		lease_expires_at = 0, last_error = $3, updated_at = $4
		WHERE status = 'pending' AND source = $2 AND message IN (`+mine+`)`,
		r.UserID, src, deletion.Reason(r.ID), t.now)
	if err != nil {
		return deletion.Counts{}, err
	}
	p, err := t.tx.Exec(ctx, `UPDATE messages SET body = '' WHERE id IN (`+mine+`) AND length(body) > 0`, r.UserID, src)
	return deletion.Counts{Cancelled: c.RowsAffected(), Purged: p.RowsAffected()}, err
}

// Notify implements deletion.Tx.
func (t recordTx) Notify(ctx context.Context, msgs []store.Message) error {
	t.s.floors.Reset()
	return ingestExec(ctx, t.tx, msgs, t.now)
}

// MessageRow implements deletion.Tx.
func (t recordTx) MessageRow(ctx context.Context, source, messageID string) (int64, error) {
	var id int64
	err := t.tx.QueryRow(ctx, `SELECT id FROM messages WHERE source = $1 AND message_id = $2`, source, messageID).Scan(&id)
	return id, err
}

// AddSource implements deletion.Tx.
func (t recordTx) AddSource(ctx context.Context, request, source string, message *int64, c deletion.Counts) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO deletion_sources (deletion, source, message, cancelled, purged)
		VALUES ($1, $2, $3, $4, $5)`, request, source, message, c.Cancelled, c.Purged)
	return err
}

// finishDeletions runs step 2 for every unfinished request: one rewrite
// for all that emptied a body. The Store's rewrites run one at a time, so
// a request that waited for another's usually finds itself finished by it.
// That is what the mutex is for: the advisory lock (rewriteKey) is what
// keeps rewrites apart, between nodes and between Stores of one process,
// which is why the mutex is the Store's and not the process's (a process
// wide one would also hold up Stores of other databases and schemas).
func (s *Store) finishDeletions(ctx context.Context) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	s.rewriting.Lock()
	defer s.rewriting.Unlock()
	var ids []string
	var purged int64
	var xmax string
	err = s.pool.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}'), coalesce(sum(p), 0), pg_snapshot_xmax(pg_current_snapshot())::text
		FROM (SELECT d.id, (SELECT coalesce(sum(purged), 0) FROM deletion_sources WHERE deletion = d.id) AS p
			FROM deletions d WHERE d.done_at = 0) u`).Scan(&ids, &purged, &xmax)
	if err != nil || len(ids) == 0 {
		return err
	}
	if purged > 0 {
		if err := s.rewrite(ctx, xmax); err != nil {
			return err
		}
	}
	_, err = s.pool.Exec(ctx, `UPDATE deletions SET done_at = $1 WHERE id = ANY($2) AND done_at = 0`, store.Millis(s.opts.Now()), ids)
	return err
}

// rewriteKey, with the hash of the schema, is the advisory lock a rewrite
// holds, so that nodes rewrite one at a time.
const rewriteKey = 0x65767363 // "evsc"

// rewritten are the tables a deletion rewrites: messages, and sync_outbox,
// where a sync's messages wait before they move into messages (the rows
// moved out stay there as dead versions, bodies and all).
var rewritten = []string{"messages", "sync_outbox"}

// errHorizon says sessions kept the horizon back too long (waitHorizon).
var errHorizon = errors.New("transactions as old as the purge still run")

// errNoSwap says a table has something a swap would lose (see canSwap).
var errNoSwap = errors.New("table cannot be swapped")

// rewrite rewrites each table of rewritten into new files without its old
// row versions: online (swapRewrite) when the table is as evfwd made it,
// else with VACUUM FULL, which holds every writer for the whole rewrite and
// first waits for the horizon (xmax: see waitHorizon).
func (s *Store) rewrite(ctx context.Context, xmax string) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	c := pc.Conn()
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, rewriteKey); err != nil {
		return err
	}
	defer c.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, rewriteKey)
	// Every lock is asked for with a short timeout, again and again, so
	// that a rewrite waiting behind a long transaction holds the ingests
	// queued behind it for no longer than that.
	if _, err := c.Exec(ctx, fmt.Sprintf(`SET lock_timeout = %d`, rewriteLockTry.Milliseconds())); err != nil {
		return err
	}
	defer c.Exec(context.WithoutCancel(ctx), `RESET lock_timeout`)
	for _, table := range rewritten {
		if err := rewriteTable(ctx, c, table, xmax); err != nil {
			return fmt.Errorf("rewrite %s: %w", table, err)
		}
	}
	return nil
}

func rewriteTable(ctx context.Context, c *pgx.Conn, table, xmax string) error {
	if err := dropSwapLeftovers(ctx, c, table); err != nil {
		return err
	}
	err := swapRewrite(ctx, c, table)
	if err == nil {
		return nil
	}
	if err := dropSwapLeftovers(ctx, c, table); err != nil {
		return err
	}
	if !errors.Is(err, errNoSwap) {
		return err
	}
	if err := waitHorizon(ctx, c, xmax); err != nil {
		return err
	}
	return locked(ctx, func() error {
		_, err := c.Exec(ctx, `VACUUM (FULL) `+pgx.Identifier{table}.Sanitize())
		return err
	})
}

// waitHorizon waits until the oldest transaction id any session of this
// database still counts with (its own, or the oldest running when it took
// its snapshot), a standby's feedback, a replication slot or a prepared
// transaction is at least xmax, the next id when the unfinished requests
// were read: every row version their purges replaced (and every sync
// outbox row deleted before them) is then dead to all, and VACUUM FULL
// drops it instead of copying it. Vacuums, which the horizon leaves out,
// are not waited for. A session of another role shows its transaction ids
// only to a role with pg_read_all_stats, so on a database shared with
// other roles this wait is only as good as what the role may see.
func waitHorizon(ctx context.Context, c *pgx.Conn, xmax string) error {
	deadline := time.Now().Add(horizonWait)
	for {
		var n int
		err := c.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()
				AND (datname = current_database() AND backend_type <> 'autovacuum worker' OR backend_type = 'walsender')
				AND (age(backend_xmin) > age($1::text::xid) OR age(backend_xid) > age($1::text::xid)))
			+ (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database() AND age(transaction) > age($1::text::xid))
			+ (SELECT count(*) FROM pg_replication_slots WHERE age(xmin) > age($1::text::xid))`, xmax).Scan(&n)
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v (%d): VACUUM FULL would keep the old row versions", errHorizon, horizonWait, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// locked runs fn again after a lock timeout or a deadlock, a bounded
// number of times, pausing in between so that the writers it held up get
// through.
func locked(ctx context.Context, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || pe.Code != "55P03" && pe.Code != "40P01" || try == rewriteTries {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(min(try, 10)) * 50 * time.Millisecond):
		}
	}
}
