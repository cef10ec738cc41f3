package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are applied in order, each once, each in its own transaction;
// schema_migrations records the versions applied. Append, never edit. The
// tables follow the SQLite store's (times in epoch millis) so the two read
// alike; attempts also name the node that made them.
var migrations = []string{
	1: `
CREATE TABLE messages (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	source      text   NOT NULL,
	message_id  text   NOT NULL,
	type        text   NOT NULL,
	user_id     text   NOT NULL DEFAULT '',
	received_at bigint NOT NULL,
	body        bytea  NOT NULL,
	UNIQUE (source, message_id)
);
-- Leasing rewrites a delivery row several times; room on the page lets
-- those be HOT updates (no index columns change).
CREATE TABLE deliveries (
	id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	message          bigint NOT NULL REFERENCES messages (id),
	source           text   NOT NULL,
	destination      text   NOT NULL,
	status           text   NOT NULL,
	attempts         int    NOT NULL DEFAULT 0,
	first_attempt_at bigint NOT NULL DEFAULT 0,
	next_attempt_at  bigint NOT NULL,
	lease_owner      text,
	lease_expires_at bigint NOT NULL DEFAULT 0,
	last_error       text   NOT NULL DEFAULT '',
	created_at       bigint NOT NULL,
	updated_at       bigint NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX deliveries_due ON deliveries (source, next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX deliveries_status ON deliveries (status, source);
CREATE INDEX deliveries_message ON deliveries (message);
CREATE TABLE attempts (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	delivery    bigint NOT NULL REFERENCES deliveries (id),
	owner       text   NOT NULL DEFAULT '',
	delivery_no int    NOT NULL,
	endpoint    int    NOT NULL,
	url         text   NOT NULL,
	started_at  bigint NOT NULL,
	latency_us  bigint NOT NULL,
	status      int    NOT NULL,
	class       text   NOT NULL,
	error       text   NOT NULL DEFAULT '',
	excerpt     bytea,
	outcome     text   NOT NULL
);
CREATE INDEX attempts_delivery ON attempts (delivery);
`,
	// Admin API: deletion requests, audience and computed-trait syncs. User
	// ids collate as bytes so that paging by user id matches SQLite's.
	2: `
CREATE INDEX messages_user ON messages (user_id, source);
CREATE TABLE deletions (
	id         text   PRIMARY KEY,
	user_id    text   NOT NULL,
	created_at bigint NOT NULL
);
CREATE TABLE deletion_sources (
	deletion  text   NOT NULL REFERENCES deletions (id),
	source    text   NOT NULL,
	message   bigint REFERENCES messages (id),
	cancelled bigint NOT NULL,
	purged    bigint NOT NULL,
	PRIMARY KEY (deletion, source)
);
CREATE TABLE syncs (
	kind       text   NOT NULL,
	key        text   NOT NULL,
	name       text   NOT NULL,
	created_at bigint NOT NULL,
	synced_at  bigint NOT NULL,
	PRIMARY KEY (kind, key)
);
CREATE TABLE sync_values (
	kind    text NOT NULL,
	key     text NOT NULL,
	user_id text COLLATE "C" NOT NULL,
	value   bytea NOT NULL,
	PRIMARY KEY (kind, key, user_id)
);
-- Unlogged: a staged list is worthless after a crash, and a crash empties it.
CREATE UNLOGGED TABLE sync_staging (
	sync    text NOT NULL,
	user_id text COLLATE "C" NOT NULL,
	value   bytea NOT NULL,
	PRIMARY KEY (sync, user_id)
);
`,
	// Syncs in bounded steps (pkg/store/internal/syncrun): each list is kept under an id in
	// sync_lists and syncs.list names the current one, so a new list is
	// staged and diffed beside it and switched to in one small commit;
	// sync_runs records the runs not finished and sync_outbox holds their
	// messages until the switch. The lists stored so far move over.
	`
ALTER TABLE syncs ADD COLUMN list text NOT NULL DEFAULT '';
CREATE TABLE sync_lists (
	list    text NOT NULL,
	user_id text COLLATE "C" NOT NULL,
	value   bytea NOT NULL,
	PRIMARY KEY (list, user_id)
);
INSERT INTO sync_lists (list, user_id, value) SELECT kind || ':' || key, user_id, value FROM sync_values;
UPDATE syncs SET list = kind || ':' || key;
DROP TABLE sync_values;
DROP TABLE sync_staging;
CREATE TABLE sync_runs (
	seq       bigint  GENERATED ALWAYS AS IDENTITY,
	id        text    PRIMARY KEY,
	kind      text    NOT NULL,
	key       text    NOT NULL,
	replaces  text    NOT NULL,
	committed boolean NOT NULL DEFAULT false,
	at        bigint  NOT NULL
);
CREATE TABLE sync_outbox (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run          text   NOT NULL,
	source       text   NOT NULL,
	message_id   text   NOT NULL,
	type         text   NOT NULL,
	user_id      text   NOT NULL,
	received_at  bigint NOT NULL,
	body         bytea  NOT NULL,
	destinations text   NOT NULL
);
CREATE INDEX sync_outbox_run ON sync_outbox (run, id);
`,
	// Deletions finish after their transaction (deletion.go): done_at 0
	// marks one whose rewrite has not run. Earlier requests were finished
	// in their one transaction.
	`
ALTER TABLE deletions ADD COLUMN done_at bigint NOT NULL DEFAULT 0;
UPDATE deletions SET done_at = greatest(created_at, 1);
`,
	// Retention (prune.go) deletes as many rows as ingest adds: vacuum the
	// queue's busiest tables after 5% of their rows died rather than the
	// default 20%, so their size stays near the live rows. messages keeps
	// the defaults: a deletion request rewrites it (deletion.go), and a
	// storage option on it would make that fall back to VACUUM FULL.
	`
ALTER TABLE deliveries SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE attempts SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
`,
	// Endpoint health (breaker.go): the last circuit-breaker transition
	// of each source's webhook URL, for evfwd deliveries endpoints.
	`
CREATE TABLE endpoint_states (
	source        text   NOT NULL,
	url           text   NOT NULL,
	state         text   NOT NULL,
	failures      int    NOT NULL,
	since         bigint NOT NULL,
	next_probe_at bigint NOT NULL,
	node          text   NOT NULL,
	last_error    text   NOT NULL DEFAULT '',
	updated_at    bigint NOT NULL,
	PRIMARY KEY (source, url)
);
`,
	// Messages stored as their webhook body (store.FormWire), sent as
	// they are; the rows already stored keep the collected form (0,
	// store.FormCollected), which the forwarder still turns into a body.
	// A constant default adds the column without rewriting the table.
	`
ALTER TABLE messages ADD COLUMN body_form smallint NOT NULL DEFAULT 0;
ALTER TABLE sync_outbox ADD COLUMN body_form smallint NOT NULL DEFAULT 0;
`,
	// The queue's foreign keys go: ingest inserts a delivery only with the
	// message the same statement inserted, and prune deletes attempts,
	// deliveries and messages in that order. The keys cost a lookup and a
	// row lock (a WAL record) per delivery and per attempt, a fifth of an
	// ingest's time, and no evfwd relied on them. What they refused, an
	// attempt Complete records for a delivery pruned meanwhile, is now
	// kept without it, as SQLite (which never enforced them) keeps it.
	`
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_message_fkey;
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_delivery_fkey;
`,
	// Deliveries by status are indexed only where an operator looks for
	// them: failed, dead and cancelled (List and Retry by status; pending
	// ones are in deliveries_due), as in the SQLite store's schema 7. An
	// index of every delivery's status took an entry per row version
	// written, and no write of a delivery is a HOT update (ingest, lease
	// and completion each change an indexed column): a tenth or more of
	// the server's work per delivery forwarded. Building the new index
	// reads the table once (it holds few rows), under a lock that makes
	// writes wait for that read: about a second per million deliveries.
	`
CREATE INDEX deliveries_settled ON deliveries (status, source) WHERE status IN ('failed', 'dead', 'cancelled');
DROP INDEX deliveries_status;
`,
	// Room on the pages of deliveries for the row versions leases write. A
	// lease changes no indexed column, so its update is HOT (no index
	// entry, a WAL record) when the new version fits on the row's page;
	// pages that ingest packed full (the default fillfactor, 100) had no
	// room, and every lease wrote an entry in each index of the table
	// (more than twice the WAL: docs/PERFORMANCE.md, "Figures behind the
	// code"). Pages written from now on keep half their space free.
	`
ALTER TABLE deliveries SET (fillfactor = 50);
`,
	// Each destination of a source leases on its own (a lane and a pace
	// of its own, store.LeaseRequest.Destination): its due deliveries in
	// order, whatever another destination of the source holds (a paused
	// one with a million pending), and CancelPending takes one
	// destination's pending ones. The due index leads with the
	// destination; what reads a source as a whole (a Lease of every
	// destination, Release, Stats) reads it destination by destination
	// (lease.go, breaker.go). One index, not one per order: with the
	// source's beside it every pending delivery cost two entries. A lease
	// changes none of its columns: it stays a HOT update. Building it
	// reads the table under the lock DROP INDEX takes, which makes reads
	// and writes wait: about a second per million deliveries, as schema
	// 9's.
	`
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (source, destination, next_attempt_at, id) WHERE status = 'pending';
`,
	// Paces shared by every node (pacer.go): one schedule per key, its
	// theoretical arrival time (tat) and when it was last reserved (at),
	// both in microseconds of the database's clock.
	`
CREATE TABLE pace_schedules (
	key text   PRIMARY KEY,
	tat bigint NOT NULL,
	at  bigint NOT NULL
);
`,
}

// migrateLock is the advisory lock key every node takes around migrations,
// so nodes starting together apply each version once ("evfwdmig").
const migrateLock = 0x657666776d6967

// migrate creates schema (when set) and brings it to the newest version.
// Each step holds the advisory lock for its transaction: a node that waits
// for it then sees the version applied and skips it. A schema that records
// a version newer than this build knows is refused (*store.SchemaError)
// under the lock before anything is applied, and again at every step, so a
// newer node that migrates between this node's steps is seen too.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	step := func(fn func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
				return err
			}
			return fn(tx)
		})
	}
	err := step(func(tx pgx.Tx) error {
		if schema != "" {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version int PRIMARY KEY, applied_at bigint NOT NULL)`); err != nil {
			return err
		}
		return checkNewer(ctx, tx)
	})
	if errors.Is(err, store.ErrSchemaNewer) {
		return err
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for v := 1; v < len(migrations); v++ {
		err := step(func(tx pgx.Tx) error {
			if err := checkNewer(ctx, tx); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = $1`, v).Scan(&n); err != nil || n > 0 {
				return err
			}
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, v, time.Now().UnixMilli())
			return err
		})
		if errors.Is(err, store.ErrSchemaNewer) {
			return err
		}
		if err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
	}
	return nil
}

// checkNewer refuses a schema newer than this build knows; it runs under
// the migration lock.
func checkNewer(ctx context.Context, tx pgx.Tx) error {
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return err
	}
	return store.CheckSchema(have, SchemaVersion())
}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int { return len(migrations) - 1 }
