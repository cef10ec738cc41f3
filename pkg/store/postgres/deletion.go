package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A deletion request on PostgreSQL, and what it leaves behind (issue 13).
//
// PostgreSQL never overwrites a row in place: emptying a body writes a new
// row version and leaves the old one, body and all, in the table's heap
// (and, for a body over about 2 KB, its chunks in the TOAST table). VACUUM
// makes that space reusable but does not zero it: measured on PostgreSQL
// 15, 992 of 1000 purged bodies were still readable in the heap file after
// a plain VACUUM. Only new files for the table remove them, so a deletion
// is two steps:
//
//  1. One transaction cancels the user's pending deliveries, empties the
//     bodies, queues the delete notifications and records the request with
//     done_at 0 (unfinished).
//  2. messages is rewritten into new files without the old row versions,
//     and so is sync_outbox (where a sync's messages wait before they move
//     into messages; small, and only syncs use it); then done_at is set. A
//     request that emptied no body needs no rewrite.
//
// The rewrite is online (swapRewrite, as pg_repack does it): the live rows
// are copied into a new table while ingest goes on, the rows written
// meanwhile are copied again, and one short transaction swaps the copy in
// with the same indexes, constraints, foreign keys, identity position and
// grants. Ingest waits only for the swap: measured on PostgreSQL 15 (2
// cores, bodies of 400 bytes; BenchmarkCreateDeletion) while one client
// ingested without pause, the longest ingest was 35 to 63 ms with 100,000
// messages (the deletion took 0.9 s) and 139 to 198 ms with 1,000,000 (6.5
// to 12 s), over two runs on a shared machine. The swap waits for every transaction
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

// rewriting takes the rewrites of this process one at a time: a request
// that waited for another's rewrite usually finds itself finished by it.
var rewriting sync.Mutex

// CreateDeletion implements store.Admin. Once the request is recorded its
// rewrite runs to the end even if ctx ends.
func (s *Store) CreateDeletion(ctx context.Context, r store.DeletionRequest) (*store.Deletion, error) {
	if err := s.recordDeletion(ctx, r); err != nil {
		return nil, err
	}
	if err := s.finishDeletions(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("deletion %s is recorded but its bodies are not yet rewritten away (the next request or start does it): %w", r.ID, err)
	}
	return s.Deletion(ctx, r.ID)
}

// recordDeletion is step 1.
func (s *Store) recordDeletion(ctx context.Context, r store.DeletionRequest) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	now := store.Millis(s.opts.Now())
	return again(func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO deletions (id, user_id, created_at, done_at) VALUES ($1, $2, $3, 0)`,
				r.ID, r.UserID, store.Millis(r.CreatedAt)); err != nil {
				return err
			}
			type did struct{ cancelled, purged int64 }
			done := map[string]did{}
			for _, src := range r.Sources {
				// Earlier delete notifications are the customer's clean-up
				// signal: they are neither withdrawn nor emptied.
				const mine = `SELECT id FROM messages WHERE user_id = $1 AND source = $2 AND type != 'delete'`
				c, err := tx.Exec(ctx, `UPDATE deliveries SET status = 'cancelled', lease_owner = NULL,
					lease_expires_at = 0, last_error = $3, updated_at = $4
					WHERE status = 'pending' AND source = $2 AND message IN (`+mine+`)`,
					r.UserID, src, "cancelled by deletion request "+r.ID, now)
				if err != nil {
					return err
				}
				p, err := tx.Exec(ctx, `UPDATE messages SET body = '' WHERE id IN (`+mine+`) AND length(body) > 0`, r.UserID, src)
				if err != nil {
					return err
				}
				done[src] = did{c.RowsAffected(), p.RowsAffected()}
			}
			if len(r.Messages) > 0 {
				s.floors.reset()
				if err := ingestExec(ctx, tx, r.Messages, now); err != nil {
					return err
				}
			}
			notified := map[string]string{}
			for _, m := range r.Messages {
				notified[m.Source] = m.MessageID
			}
			for _, src := range r.Sources {
				var msg *int64 // NULL when the source got no notification
				if id, ok := notified[src]; ok {
					var rowid int64
					if err := tx.QueryRow(ctx, `SELECT id FROM messages WHERE source = $1 AND message_id = $2`, src, id).Scan(&rowid); err != nil {
						return fmt.Errorf("delete message of %s: %w", src, err)
					}
					msg = &rowid
				}
				if _, err := tx.Exec(ctx, `INSERT INTO deletion_sources (deletion, source, message, cancelled, purged)
					VALUES ($1, $2, $3, $4, $5)`, r.ID, src, msg, done[src].cancelled, done[src].purged); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// finishDeletions runs step 2 for every unfinished request: one rewrite
// for all that emptied a body.
func (s *Store) finishDeletions(ctx context.Context) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	rewriting.Lock()
	defer rewriting.Unlock()
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

// swapNames are the objects a swap of one table makes beside it.
type swapNames struct {
	table, copy, log, note      string // sanitized identifiers
	qualifiedLog, qualifiedCopy string
	prefix                      string // of the copy's index names
}

func namesFor(schema, table string) swapNames {
	return swapNames{
		table: pgx.Identifier{table}.Sanitize(), copy: pgx.Identifier{table + "_scrub"}.Sanitize(),
		log: pgx.Identifier{table + "_scrub_log"}.Sanitize(), note: pgx.Identifier{table + "_scrub_note"}.Sanitize(),
		qualifiedLog: pgx.Identifier{schema, table + "_scrub_log"}.Sanitize(), qualifiedCopy: pgx.Identifier{schema, table + "_scrub"}.Sanitize(),
		prefix: table + "_scrub_",
	}
}

// dropSwapLeftovers removes what a swap of table that did not finish left:
// its triggers (with the function and the log they fill), its copy.
func dropSwapLeftovers(ctx context.Context, c *pgx.Conn, table string) error {
	n := namesFor("", table)
	return locked(ctx, func() error {
		_, err := c.Exec(ctx, `DROP TABLE IF EXISTS `+n.copy+`; DROP FUNCTION IF EXISTS `+n.note+`() CASCADE; DROP TABLE IF EXISTS `+n.log)
		return err
	})
}

// canSwap reports whether table $1 has nothing that dropping it and
// renaming a copy in its place would lose or refuse: evfwd's own schema,
// owned by this role. An operator's trigger, row security policy,
// publication, inheritance, tablespace, storage option, column grant or
// extended statistics sends the rewrite to VACUUM FULL instead (a view on
// the table makes the swap fail, which does too).
const canSwap = `SELECT c.relkind = 'r' AND NOT c.relrowsecurity AND c.reltablespace = 0 AND c.reloptions IS NULL
		AND pg_get_userbyid(c.relowner) = current_user
		AND NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = c.oid AND NOT tgisinternal)
		AND NOT EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = c.oid)
		AND NOT EXISTS (SELECT 1 FROM pg_publication_rel WHERE prrelid = c.oid)
		AND NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = c.oid OR inhparent = c.oid)
		AND NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = c.oid AND attacl IS NOT NULL)
		AND NOT EXISTS (SELECT 1 FROM pg_statistic_ext WHERE stxrelid = c.oid)
	FROM pg_class c WHERE c.oid = $1::regclass`

// swapIndex is an index of the table and the one built for it on the copy.
type swapIndex struct {
	name, def, constraint, kind string // kind: p, u or "" (no constraint)
	tmp                         string
}

// swapRewrite rewrites table online, as pg_repack does:
//
//  1. statement triggers on the table note the id of every row written
//     from now on in a log table;
//  2. a copy table gets the live rows (writers go on), then the indexes of
//     the table;
//  3. the noted rows are copied again, a batch at a time, until few are
//     left;
//  4. one short transaction locks the table (and the tables whose foreign
//     keys reference it), copies the last noted rows, drops the table and
//     renames the copy in its place with the same indexes, constraints,
//     identity sequence position, foreign keys (NOT VALID, validated
//     afterwards) and grants.
//
// Writers wait only for step 4: tens of milliseconds. The copy holds the
// live rows only, so no transaction's view of the old ones matters: one
// that has read the table keeps its lock, and step 4 waits for it.
func swapRewrite(ctx context.Context, c *pgx.Conn, table string) error {
	var ok bool
	var schema string
	if err := c.QueryRow(ctx, `SELECT (`+canSwap+`), current_schema()`, table).Scan(&ok, &schema); err != nil {
		return err
	}
	if !ok {
		return errNoSwap
	}
	n := namesFor(schema, table)
	err := locked(ctx, func() error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			q := `CREATE TABLE ` + n.log + ` (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id bigint NOT NULL);
				CREATE FUNCTION ` + n.note + `() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN INSERT INTO ` + n.qualifiedLog + ` (id) SELECT id FROM changed; RETURN NULL; END $$;`
			for _, ev := range []struct{ op, rows string }{{"INSERT", "NEW"}, {"UPDATE", "NEW"}, {"DELETE", "OLD"}} {
				q += fmt.Sprintf(`CREATE TRIGGER %s AFTER %s ON %s REFERENCING %s TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION %s();`,
					pgx.Identifier{n.prefix + strings.ToLower(ev.op)}.Sanitize(), ev.op, n.table, ev.rows, n.note)
			}
			_, err := tx.Exec(ctx, q)
			return err
		})
	})
	if err != nil {
		return err
	}
	// Every transaction that wrote the table before the triggers existed
	// has ended (CREATE TRIGGER waited for them), so this copy and the
	// noted ids together hold every row.
	if _, err := c.Exec(ctx, `CREATE TABLE `+n.copy+` (LIKE `+n.table+` INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING STORAGE);
		INSERT INTO `+n.copy+` OVERRIDING SYSTEM VALUE SELECT * FROM `+n.table); err != nil {
		return err
	}
	rows, err := c.Query(ctx, `SELECT quote_ident(x.relname), pg_get_indexdef(i.indexrelid), coalesce(quote_ident(k.conname), ''), coalesce(k.contype::text, '')
		FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
			LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid
		WHERE i.indrelid = $1::regclass ORDER BY i.indexrelid`, table)
	if err != nil {
		return err
	}
	indexes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ix swapIndex, err error) {
		return ix, r.Scan(&ix.name, &ix.def, &ix.constraint, &ix.kind)
	})
	if err != nil {
		return err
	}
	for i := range indexes {
		ix := &indexes[i]
		using := strings.Index(ix.def, " USING ")
		if using < 0 || ix.kind != "" && ix.kind != "p" && ix.kind != "u" {
			return errNoSwap
		}
		ix.tmp = pgx.Identifier{fmt.Sprint(n.prefix, i)}.Sanitize()
		unique := ""
		if strings.HasPrefix(ix.def, "CREATE UNIQUE ") {
			unique = "UNIQUE "
		}
		if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE %sINDEX %s ON %s%s`, unique, ix.tmp, n.qualifiedCopy, ix.def[using:])); err != nil {
			return err
		}
	}
	for try := 0; try < 20; try++ {
		done, err := catchUp(ctx, c, n, 10_000)
		if err != nil {
			return err
		}
		if done < 1000 {
			break
		}
	}
	rows, err = c.Query(ctx, `SELECT conrelid::regclass::text, quote_ident(conname), pg_get_constraintdef(oid)
		FROM pg_constraint WHERE confrelid = $1::regclass AND contype = 'f' ORDER BY conrelid, conname`, table)
	if err != nil {
		return err
	}
	type fkey struct{ table, name, def string }
	fkeys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (k fkey, err error) {
		err = r.Scan(&k.table, &k.name, &k.def)
		k.def = strings.TrimSuffix(k.def, " NOT VALID") // one a crash left unvalidated
		return k, err
	})
	if err != nil {
		return err
	}
	// The referencing tables are locked first: leasing locks deliveries
	// before it reads messages.
	lock := "LOCK TABLE "
	for i, k := range fkeys {
		if i == 0 || k.table != fkeys[i-1].table {
			lock += k.table + ", "
		}
	}
	lock += n.table + " IN ACCESS EXCLUSIVE MODE"
	err = locked(ctx, func() error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lock); err != nil {
				return err
			}
			for {
				done, err := catchUp(ctx, tx, n, 100_000)
				if err != nil {
					return err
				}
				if done == 0 {
					break
				}
			}
			var ddl []string
			for _, k := range fkeys {
				ddl = append(ddl, `ALTER TABLE `+k.table+` DROP CONSTRAINT `+k.name)
			}
			ddl = append(ddl, `DROP TABLE `+n.table, `ALTER TABLE `+n.copy+` RENAME TO `+n.table)
			// The copy's identity sequence takes the name and the position
			// of the original's.
			var oldSeq, seqName, seq *string
			if err := tx.QueryRow(ctx, `SELECT pg_get_serial_sequence($1, 'id'), (SELECT quote_ident(relname) FROM pg_class
				WHERE oid = pg_get_serial_sequence($1, 'id')::regclass), pg_get_serial_sequence($2, 'id')`, table, table+"_scrub").Scan(&oldSeq, &seqName, &seq); err != nil {
				return err
			}
			if oldSeq != nil && seq != nil {
				var last int64
				var called bool
				if err := tx.QueryRow(ctx, `SELECT last_value, is_called FROM `+*oldSeq).Scan(&last, &called); err != nil {
					return err
				}
				ddl = append(ddl, `ALTER SEQUENCE `+*seq+` RENAME TO `+*seqName,
					fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s', 'id'), %d, %t)`, table, last, called))
			}
			for _, ix := range indexes {
				switch ix.kind {
				case "p":
					ddl = append(ddl, `ALTER TABLE `+n.table+` ADD CONSTRAINT `+ix.constraint+` PRIMARY KEY USING INDEX `+ix.tmp)
				case "u":
					ddl = append(ddl, `ALTER TABLE `+n.table+` ADD CONSTRAINT `+ix.constraint+` UNIQUE USING INDEX `+ix.tmp)
				default:
					ddl = append(ddl, `ALTER INDEX `+ix.tmp+` RENAME TO `+ix.name)
				}
			}
			for _, k := range fkeys {
				ddl = append(ddl, `ALTER TABLE `+k.table+` ADD CONSTRAINT `+k.name+` `+k.def+` NOT VALID`)
			}
			rows, err := tx.Query(ctx, `SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END, a.is_grantable
				FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = $1::regclass AND a.grantee <> c.relowner`, table)
			if err != nil {
				return err
			}
			grants, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
				var priv, grantee string
				var option bool
				err := r.Scan(&priv, &grantee, &option)
				g := "GRANT " + priv + " ON " + n.table + " TO " + grantee
				if option {
					g += " WITH GRANT OPTION"
				}
				return g, err
			})
			if err != nil {
				return err
			}
			ddl = append(ddl, grants...)
			ddl = append(ddl, `DROP FUNCTION `+n.note+`() CASCADE`, `DROP TABLE `+n.log)
			for _, q := range ddl {
				if _, err := tx.Exec(ctx, q); err != nil {
					var pe *pgconn.PgError
					if errors.As(err, &pe) && pe.Code == "2BP01" { // dependent_objects_still_exist: a view, say
						return fmt.Errorf("%w: %v", errNoSwap, err)
					}
					return fmt.Errorf("swap: %s: %w", q, err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	// The foreign keys were added without a scan under the lock; checking
	// them now takes no lock writers wait for, nor does ANALYZE, which the
	// new table needs for its plans. The old rows are gone either way: a
	// failure here is left to the next rewrite (or autovacuum).
	for _, k := range fkeys {
		locked(ctx, func() error {
			_, err := c.Exec(ctx, `ALTER TABLE `+k.table+` VALIDATE CONSTRAINT `+k.name)
			return err
		})
	}
	locked(ctx, func() error {
		_, err := c.Exec(ctx, `ANALYZE `+n.table)
		return err
	})
	return nil
}

// catchUp copies again up to limit rows noted since the copy (their
// latest state, or nothing for one deleted) and reports how many notes it
// took.
func catchUp(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, n swapNames, limit int) (int, error) {
	rows, err := q.Query(ctx, `DELETE FROM `+n.log+` WHERE seq IN (SELECT seq FROM `+n.log+` ORDER BY seq LIMIT $1) RETURNING id`, limit)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if _, err := q.Exec(ctx, `DELETE FROM `+n.copy+` WHERE id = ANY($1)`, ids); err != nil {
		return 0, err
	}
	_, err = q.Exec(ctx, `INSERT INTO `+n.copy+` OVERRIDING SYSTEM VALUE SELECT * FROM `+n.table+` WHERE id = ANY($1)`, ids)
	return len(ids), err
}

// Deletion implements store.Admin.
func (s *Store) Deletion(ctx context.Context, id string) (*store.Deletion, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	d := &store.Deletion{ID: id}
	var created int64
	err = s.pool.QueryRow(ctx, `SELECT user_id, created_at FROM deletions WHERE id = $1`, id).Scan(&d.UserID, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("deletion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	d.CreatedAt = store.FromMillis(created)
	rows, err := s.pool.Query(ctx, `SELECT `+rowscan.DeletionSourceColumns+`
		FROM deletion_sources ds LEFT JOIN messages m ON m.id = ds.message LEFT JOIN deliveries dl ON dl.message = ds.message
		WHERE ds.deletion = $1 ORDER BY ds.source COLLATE "C"`, id)
	if err != nil {
		return nil, err
	}
	if d.Sources, err = collect(rows, rowscan.DeletionSource); err != nil {
		return nil, err
	}
	return d, nil
}
