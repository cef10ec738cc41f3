package syncrun

import (
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
)

// The statements of a Driver that both engines run alike, each with its
// parameters, p writing the engine's placeholders. Stage, WriteOutbox and
// MoveOutbox stay in each engine: SQLite writes many rows as one VALUES
// list and moves the outbox in SQL, PostgreSQL passes arrays (unnest) and
// moves it through its Ingest statement.

// CurrentSQL is Driver.Current's statement: the list of the key, one row
// or none.
func CurrentSQL(kind store.SyncKind, key string, p sharedsql.Placeholder) (string, []any) {
	return `SELECT list FROM syncs WHERE kind = ` + p() + ` AND key = ` + p(), []any{string(kind), key}
}

// RunsSQL is Driver.Runs' statement, rows for ScanRun; order is the
// column of sync_runs that grows with each insert (SQLite's rowid,
// PostgreSQL's identity seq).
func RunsSQL(kind store.SyncKind, key, order string, p sharedsql.Placeholder) (string, []any) {
	return `SELECT id, replaces, committed, at FROM sync_runs WHERE kind = ` + p() + ` AND key = ` + p() + ` ORDER BY ` + order,
		[]any{string(kind), key}
}

// ListedSQL is Driver.Listed's statement, rows for ScanRow.
func ListedSQL(r Run, after string, limit int, p sharedsql.Placeholder) (string, []any) {
	return `SELECT n.user_id, n.value, o.value, true FROM sync_lists n
		LEFT JOIN sync_lists o ON o.list = ` + p() + ` AND o.user_id = n.user_id
		WHERE n.list = ` + p() + ` AND n.user_id > ` + p() + ` ORDER BY n.user_id LIMIT ` + p(),
		[]any{r.Replaces, r.ID, after, limit}
}

// ReplacedSQL is Driver.Replaced's statement, rows for ScanRow. The NULL
// is cast for PostgreSQL, which would type it text; SQLite keeps a NULL
// whatever the cast.
func ReplacedSQL(r Run, after string, limit int, p sharedsql.Placeholder) (string, []any) {
	return `SELECT o.user_id, o.value, CAST(NULL AS bytea), n.user_id IS NOT NULL FROM sync_lists o
		LEFT JOIN sync_lists n ON n.list = ` + p() + ` AND n.user_id = o.user_id
		WHERE o.list = ` + p() + ` AND o.user_id > ` + p() + ` ORDER BY o.user_id LIMIT ` + p(),
		[]any{r.ID, r.Replaces, after, limit}
}

// InsertRunSQL is Driver.InsertRun's statement.
func InsertRunSQL(kind store.SyncKind, key string, r Run, p sharedsql.Placeholder) (string, []any) {
	return `INSERT INTO sync_runs (id, kind, key, replaces, at) VALUES (` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `)`,
		[]any{r.ID, string(kind), key, r.Replaces, r.At}
}

// FlipSQL is Driver.Flip's statement, which changes one row when it flips.
func FlipSQL(kind store.SyncKind, key string, r Run, name string, first bool, p sharedsql.Placeholder) (string, []any) {
	if first {
		return `INSERT INTO syncs (kind, key, name, created_at, synced_at, list)
			VALUES (` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `)
			ON CONFLICT (kind, key) DO NOTHING`, []any{string(kind), key, name, r.At, r.At, r.ID}
	}
	return `UPDATE syncs SET name = ` + p() + `, synced_at = ` + p() + `, list = ` + p() +
			` WHERE kind = ` + p() + ` AND key = ` + p() + ` AND list = ` + p(),
		[]any{name, r.At, r.ID, string(kind), key, r.Replaces}
}

// CommitSQL is Driver.Commit's statement.
func CommitSQL(run string, p sharedsql.Placeholder) (string, []any) {
	return `UPDATE sync_runs SET committed = true WHERE id = ` + p(), []any{run}
}

// DropListSQL is Driver.DropList's statement, which changes the rows it
// drops.
func DropListSQL(list string, limit int, p sharedsql.Placeholder) (string, []any) {
	return `DELETE FROM sync_lists WHERE list = ` + p() + ` AND user_id IN
		(SELECT user_id FROM sync_lists WHERE list = ` + p() + ` ORDER BY user_id LIMIT ` + p() + `)`, []any{list, list, limit}
}

// DropOutboxSQL is Driver.DropOutbox's statement, which changes the rows
// it drops.
func DropOutboxSQL(run string, limit int, p sharedsql.Placeholder) (string, []any) {
	return `DELETE FROM sync_outbox WHERE id IN
		(SELECT id FROM sync_outbox WHERE run = ` + p() + ` ORDER BY id LIMIT ` + p() + `)`, []any{run, limit}
}

// ForgetRunSQL is Driver.ForgetRun's statement.
func ForgetRunSQL(run string, p sharedsql.Placeholder) (string, []any) {
	return `DELETE FROM sync_runs WHERE id = ` + p(), []any{run}
}

// ValuesSQL is the stores' SyncValues' statement: the key's current list
// in user id order, rows of user id and value (rowscan.Values).
func ValuesSQL(kind store.SyncKind, key string, p sharedsql.Placeholder) (string, []any) {
	return `SELECT l.user_id, l.value FROM syncs s JOIN sync_lists l ON l.list = s.list
		WHERE s.kind = ` + p() + ` AND s.key = ` + p() + ` ORDER BY l.user_id`, []any{string(kind), key}
}
