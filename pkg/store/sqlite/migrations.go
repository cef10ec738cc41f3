package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// migrations are applied in order, each once, each in its own transaction;
// schema_migrations records the versions applied. Append, never edit.
var migrations = []string{
	1: `
CREATE TABLE messages (
	id          INTEGER PRIMARY KEY,
	source      TEXT    NOT NULL,
	message_id  TEXT    NOT NULL,
	type        TEXT    NOT NULL,
	user_id     TEXT    NOT NULL DEFAULT '',
	received_at INTEGER NOT NULL,
	body        BLOB    NOT NULL,
	UNIQUE (source, message_id)
);
CREATE TABLE deliveries (
	id               INTEGER PRIMARY KEY,
	message          INTEGER NOT NULL REFERENCES messages (id),
	source           TEXT    NOT NULL,
	destination      TEXT    NOT NULL,
	status           TEXT    NOT NULL,
	attempts         INTEGER NOT NULL DEFAULT 0,
	first_attempt_at INTEGER NOT NULL DEFAULT 0,
	next_attempt_at  INTEGER NOT NULL,
	lease_owner      TEXT,
	lease_expires_at INTEGER NOT NULL DEFAULT 0,
	last_error       TEXT    NOT NULL DEFAULT '',
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL
);
CREATE INDEX deliveries_due ON deliveries (source, next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_status ON deliveries (status, source);
CREATE INDEX deliveries_message ON deliveries (message);
CREATE TABLE attempts (
	id          INTEGER PRIMARY KEY,
	delivery    INTEGER NOT NULL REFERENCES deliveries (id),
	delivery_no INTEGER NOT NULL,
	endpoint    INTEGER NOT NULL,
	url         TEXT    NOT NULL,
	started_at  INTEGER NOT NULL,
	latency_us  INTEGER NOT NULL,
	status      INTEGER NOT NULL,
	class       TEXT    NOT NULL,
	error       TEXT    NOT NULL DEFAULT '',
	excerpt     BLOB,
	outcome     TEXT    NOT NULL
);
CREATE INDEX attempts_delivery ON attempts (delivery);
`,
	// Admin API: deletion requests, audience and computed-trait syncs.
	// Messages are deliberately not indexed by user: random inserts into
	// such an index cost ingest much of its throughput, while a deletion
	// request (rare) scans one source's messages instead.
	2: `
CREATE TABLE deletions (
	id         TEXT    PRIMARY KEY,
	user_id    TEXT    NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE deletion_sources (
	deletion  TEXT    NOT NULL REFERENCES deletions (id),
	source    TEXT    NOT NULL,
	message   INTEGER REFERENCES messages (id),
	cancelled INTEGER NOT NULL,
	purged    INTEGER NOT NULL,
	PRIMARY KEY (deletion, source)
);
CREATE TABLE syncs (
	kind       TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	synced_at  INTEGER NOT NULL,
	PRIMARY KEY (kind, key)
);
CREATE TABLE sync_values (
	kind    TEXT NOT NULL,
	key     TEXT NOT NULL,
	user_id TEXT NOT NULL,
	value   BLOB NOT NULL,
	PRIMARY KEY (kind, key, user_id)
) WITHOUT ROWID;
CREATE TABLE sync_staging (
	sync    TEXT NOT NULL,
	user_id TEXT NOT NULL,
	value   BLOB NOT NULL,
	PRIMARY KEY (sync, user_id)
) WITHOUT ROWID;
`,
	// Syncs in bounded steps (pkg/store/internal/syncrun): each list is kept under an id in
	// sync_lists and syncs.list names the current one, so a new list is
	// staged and diffed beside it and switched to in one small commit;
	// sync_runs records the runs not finished and sync_outbox holds their
	// messages until the switch. The lists stored so far move over.
	`
ALTER TABLE syncs ADD COLUMN list TEXT NOT NULL DEFAULT '';
CREATE TABLE sync_lists (
	list    TEXT NOT NULL,
	user_id TEXT NOT NULL,
	value   BLOB NOT NULL,
	PRIMARY KEY (list, user_id)
) WITHOUT ROWID;
INSERT INTO sync_lists (list, user_id, value) SELECT kind || ':' || key, user_id, value FROM sync_values;
UPDATE syncs SET list = kind || ':' || key;
DROP TABLE sync_values;
DROP TABLE sync_staging;
CREATE TABLE sync_runs (
	id        TEXT    PRIMARY KEY,
	kind      TEXT    NOT NULL,
	key       TEXT    NOT NULL,
	replaces  TEXT    NOT NULL,
	committed INTEGER NOT NULL DEFAULT 0,
	at        INTEGER NOT NULL
);
CREATE TABLE sync_outbox (
	id           INTEGER PRIMARY KEY,
	run          TEXT    NOT NULL,
	source       TEXT    NOT NULL,
	message_id   TEXT    NOT NULL,
	type         TEXT    NOT NULL,
	user_id      TEXT    NOT NULL,
	received_at  INTEGER NOT NULL,
	body         BLOB    NOT NULL,
	destinations TEXT    NOT NULL
);
CREATE INDEX sync_outbox_run ON sync_outbox (run, id);
`,
	// Deletions in bounded steps (deletion.go): upto is the newest message
	// id when the request was recorded (it covers the user's messages up
	// to there), done_at 0 marks one not finished. Earlier requests were
	// finished in their one transaction.
	`
ALTER TABLE deletions ADD COLUMN upto INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deletions ADD COLUMN done_at INTEGER NOT NULL DEFAULT 0;
UPDATE deletions SET done_at = max(created_at, 1);
`,
	// Endpoint health (breaker.go): the last circuit-breaker transition
	// of each source's webhook URL, for evfwd deliveries endpoints.
	`
CREATE TABLE endpoint_states (
	source        TEXT    NOT NULL,
	url           TEXT    NOT NULL,
	state         TEXT    NOT NULL,
	failures      INTEGER NOT NULL,
	since         INTEGER NOT NULL,
	next_probe_at INTEGER NOT NULL,
	node          TEXT    NOT NULL,
	last_error    TEXT    NOT NULL DEFAULT '',
	updated_at    INTEGER NOT NULL,
	PRIMARY KEY (source, url)
);
`,
	// Messages stored as their webhook body (store.FormWire), sent as
	// they are; the rows already stored keep the collected form (0,
	// store.FormCollected), which the forwarder still turns into a body.
	`
ALTER TABLE messages ADD COLUMN body_form INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sync_outbox ADD COLUMN body_form INTEGER NOT NULL DEFAULT 0;
`,
	// Deliveries by status, only for the statuses an operator looks for
	// (pending ones are in deliveries_due): most deliveries are created
	// pending and end delivered, and each of them updated the full index
	// three times, a quarter of the cost of recording an outcome. Listing
	// delivered ones reads the table in id order instead.
	`
DROP INDEX deliveries_status;
CREATE INDEX deliveries_settled ON deliveries (status, source) WHERE status IN ('failed', 'dead', 'cancelled');
`,
	// The same index, with its condition written as comparisons: SQLite
	// evaluates an IN list by building a temporary table, and did so twice
	// for every delivery row written (for its old and its new values), a
	// share of recording an outcome that BenchmarkLeaseComplete shows.
	// A query for one of the three statuses still implies the condition,
	// so the planner still uses the index.
	`
DROP INDEX deliveries_settled;
CREATE INDEX deliveries_settled ON deliveries (status, source) WHERE status = 'failed' OR status = 'dead' OR status = 'cancelled';
`,
	// Each destination of a source leases on its own (a lane and a pace
	// of its own, store.LeaseRequest.Destination): its due deliveries in
	// order, whatever another destination of the source holds (a paused
	// one with a million pending), and CancelPending takes one
	// destination's pending ones. The due index leads with the
	// destination; what reads a source as a whole (a Lease of every
	// destination, Release, Stats) reads it destination by destination
	// (lease.go, breaker.go). One index, not one per order: with the
	// source's beside it every pending delivery cost two entries, 19% more
	// CPU per event ingested.
	`
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (source, destination, next_attempt_at) WHERE status = 'pending';
`,
}

// createSchemaMigrations makes the table of the versions applied, and
// recordVersion records one.
const (
	createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`
	recordVersion = `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`
)

// migrate brings the schema to the newest version. A store that records a
// version newer than this build knows is refused (*store.SchemaError)
// before anything is applied; each step checks again in its transaction,
// so a newer evfwd migrating the file meanwhile is seen too. An up-to-date
// file is left at the first transaction, and a new one gets the newest
// schema at once (newSchema).
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, createSchemaMigrations); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := checkNewer(ctx, tx); err != nil {
		if errors.Is(err, store.ErrSchemaNewer) {
			return err
		}
		return fmt.Errorf("migrate: %w", err)
	}
	var applied, objects int
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM schema_migrations),
		(SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%')`).Scan(&applied, &objects); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	switch {
	case applied == SchemaVersion():
		return nil // up to date: no transaction per migration to find that out
	case applied == 0 && objects == 1: // nothing but schema_migrations
		if err := createNewest(ctx, tx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return tx.Commit()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return applyEach(ctx, db)
}

// applyEach applies the migrations not yet applied, one by one, each in
// its own transaction.
func applyEach(ctx context.Context, db *sql.DB) error {
	for v := 1; v < len(migrations); v++ {
		if err := apply(ctx, db, v); err != nil {
			if errors.Is(err, store.ErrSchemaNewer) {
				return err
			}
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
	}
	return nil
}

// createNewest gives a new file the newest schema in tx and records every
// migration as applied.
func createNewest(ctx context.Context, tx *sql.Tx) error {
	stmts, err := newSchema()
	if err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	now := time.Now().UnixMilli()
	for v := 1; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, recordVersion, v, now); err != nil {
			return err
		}
	}
	return nil
}

// newSchema is the CREATE statements of the schema the migrations build,
// as SQLite records them after running every migration on an empty
// in-memory database: the same tables and indexes, defined by the same
// text, so migrations stay the one source of the schema. Creating them
// takes about half the time of running the migrations (their ALTER TABLEs
// and DROPs make SQLite parse the whole schema again each time), which the
// tests, opening many new stores, feel most.
// It is worked out once per process, and only by a process that makes a
// new store.
var newSchema = sync.OnceValues(func() ([]string, error) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection, one in-memory database
	for _, m := range migrations[1:] {
		if _, err := db.Exec(m); err != nil {
			return nil, err
		}
	}
	// Tables before the indexes on them; sqlite_ objects come with the
	// tables that need them.
	rows, err := db.Query(`SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'
		ORDER BY type <> 'table', rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var stmts []string
	for rows.Next() {
		var stmt string
		if err := rows.Scan(&stmt); err != nil {
			return nil, err
		}
		stmts = append(stmts, stmt)
	}
	return stmts, rows.Err()
})

// checkNewer refuses a schema newer than this build knows.
func checkNewer(ctx context.Context, tx *sql.Tx) error {
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return err
	}
	return store.CheckSchema(have, SchemaVersion())
}

func apply(ctx context.Context, db *sql.DB, v int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := checkNewer(ctx, tx); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, v).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, recordVersion, v, time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int { return len(migrations) - 1 }
