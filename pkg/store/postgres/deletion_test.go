package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func openURL(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// relationScan is a storetest.Scan of the files of every relation of the
// store's schema: tables, indexes, sequences, the TOAST tables and their
// indexes, each with its segments and forks, and every file it saw before
// (the files a rewrite replaced, which must now be empty or gone). It
// checkpoints first so the files hold what the shared buffers hold, and
// skips the test when the database does not let it (CHECKPOINT and SHOW
// data_directory need a superuser or pg_checkpoint and
// pg_read_all_settings; the files need a reader allowed into the data
// directory, as the CI's root is).
func relationScan(store func() *Store) storetest.Scan {
	seen := map[string]bool{}
	return func(t *testing.T, marker []byte) map[string]int {
		t.Helper()
		ctx := context.Background()
		s := store()
		var dir string
		if err := s.pool.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
			t.Skipf("marker scan needs the data directory: SHOW data_directory: %v", err)
		}
		if _, err := s.pool.Exec(ctx, `CHECKPOINT`); err != nil {
			t.Skipf("marker scan needs the files to hold what the buffers do: CHECKPOINT: %v", err)
		}
		rows, err := s.pool.Query(ctx, `WITH t AS (SELECT oid, reltoastrelid FROM pg_class WHERE relnamespace = current_schema()::regnamespace)
			SELECT pg_relation_filepath(c.oid) FROM pg_class c
			WHERE (c.oid IN (SELECT oid FROM t) OR c.oid IN (SELECT reltoastrelid FROM t)
				OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT reltoastrelid FROM t)))
				AND pg_relation_filepath(c.oid) IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		paths, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			seen[p] = true
		}
		found := map[string]int{}
		for p := range seen {
			names := []string{p, p + "_fsm", p + "_vm", p + "_init"}
			for i := 1; ; i++ { // segments past the first gigabyte
				name := fmt.Sprintf("%s.%d", p, i)
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					break
				}
				names = append(names, name)
			}
			for _, name := range names {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					t.Skipf("marker scan cannot read the relation files: %v", err)
				}
				if n := bytes.Count(b, marker); n > 0 {
					found[name] = n
				}
			}
		}
		if len(paths) < 5 {
			t.Fatalf("found only %d relation files: %v", len(paths), paths)
		}
		return found
	}
}

// walScan counts marker in pg_wal, for the log: the design promises
// nothing about pg_wal at the deletion's answer (see deletion.go).
func walScan(t *testing.T, s *Store, marker []byte) map[string]int {
	var dir string
	if err := s.pool.QueryRow(context.Background(), `SHOW data_directory`).Scan(&dir); err != nil {
		return nil
	}
	found := map[string]int{}
	entries, _ := os.ReadDir(filepath.Join(dir, "pg_wal"))
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, "pg_wal", e.Name())); err == nil {
			if n := bytes.Count(b, marker); n > 0 {
				found[e.Name()] = n
			}
		}
	}
	return found
}

// TestDeletionLeavesNoByte is the marker test on the relation files: heap,
// TOAST, indexes, and the files the rewrite replaced.
func TestDeletionLeavesNoByte(t *testing.T) {
	s := openURL(t, pgtest.URL(t))
	scan := relationScan(func() *Store { return s })
	var marker []byte
	storetest.RunScrub(t, s, func(t *testing.T, m []byte) map[string]int {
		marker = m
		return scan(t, m)
	})
	if !t.Failed() {
		t.Logf("pg_wal still holds the purged marker (until its segments are overwritten): %v", walScan(t, s, marker))
	}
}

// ingestMarked stores n messages of user whose bodies carry marker, and
// one message of another user.
func ingestMarked(t *testing.T, s *Store, user, marker string, n int) {
	t.Helper()
	var msgs []store.Message
	for i := range n {
		m := storetest.Msg("web", fmt.Sprint(user, i), 0, true)
		m.UserID = user
		m.Body = []byte(fmt.Sprintf(`{"userId":%q,"note":"%s %d"}`, user, marker, i))
		msgs = append(msgs, m)
	}
	msgs = append(msgs, storetest.Msg("web", "other", 0, true))
	if err := s.Ingest(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
}

// TestDeletionWaitsForOlderTransactions holds a repeatable-read
// transaction that has read the user's bodies while the deletion runs: a
// rewrite would have to keep the old row versions for it, so the deletion
// waits for it to end before it rewrites and answers.
func TestDeletionWaitsForOlderTransactions(t *testing.T) {
	ctx := context.Background()
	s := openURL(t, pgtest.URL(t))
	marker := fmt.Sprintf("HELDMARK%d", time.Now().UnixNano())
	ingestMarked(t, s, "held", marker, 50)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM messages WHERE user_id = 'held'`).Scan(&n); err != nil || n != 50 {
		t.Fatalf("held transaction read %d, %v", n, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.CreateDeletion(ctx, store.DeletionRequest{ID: "d", UserID: "held", CreatedAt: t0, Sources: []string{"web"}})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("deletion answered (%v) while a transaction that can see the bodies runs", err)
	case <-time.After(300 * time.Millisecond):
	}
	var still int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM messages WHERE user_id = 'held' AND length(body) > 0`).Scan(&still); err != nil || still != 50 {
		t.Fatalf("the held transaction sees %d bodies, %v", still, err)
	}
	tx.Rollback(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if found := relationScan(func() *Store { return s })(t, []byte(marker)); len(found) != 0 {
		t.Errorf("marker found after the deletion: %v", found)
	}
}

// TestDeletionFinishedOnOpen records a deletion as a process would that
// died before its rewrite, and checks that the next Open returns before
// the rewrite (the request reads as not done, ingest goes on) and then
// rewrites and marks it finished.
func TestDeletionFinishedOnOpen(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := openURL(t, url)
	marker := fmt.Sprintf("DIEDMARK%d", time.Now().UnixNano())
	ingestMarked(t, s, "died", marker, 50)
	if err := s.recordDeletion(ctx, store.DeletionRequest{ID: "d", UserID: "died", CreatedAt: t0, Sources: []string{"web"}}); err != nil {
		t.Fatal(err)
	}
	scan := relationScan(func() *Store { return s })
	if found := scan(t, []byte(marker)); len(found) == 0 {
		t.Fatal("the purged bodies are in no file before the rewrite: the scan does not see them")
	}
	s.Close()

	gate := make(chan struct{})
	s, err := Open(ctx, url, Options{recoveryGate: gate})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d, err := s.Deletion(ctx, "d"); err != nil || d.Done {
		t.Errorf("the deletion reads as done (%v) before its rewrite", err)
	}
	if err := s.Ingest(ctx, []store.Message{storetest.Msg("web", "meanwhile", 0, true)}); err != nil {
		t.Errorf("ingest while the rewrite waits: %v", err)
	}
	close(gate)
	<-s.Recovered()
	var unfinished int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM deletions WHERE done_at = 0`).Scan(&unfinished); err != nil || unfinished != 0 {
		t.Errorf("unfinished deletions after Open: %d, %v", unfinished, err)
	}
	if found := scan(t, []byte(marker)); len(found) != 0 { // the files before the rewrite too
		t.Errorf("marker found after Open: %v", found)
	}
	d, err := s.Deletion(ctx, "d")
	if err != nil || !d.Done || len(d.Sources) != 1 || d.Sources[0].Purged != 50 || d.Sources[0].Cancelled != 50 {
		t.Errorf("deletion = %+v, %v", d, err)
	}
}

// describe is what a swap must keep of messages: its columns, indexes,
// constraints, the foreign keys that reference it (and whether they are
// validated), its identity sequence, its grants and its owner.
func describe(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `
		SELECT 'column ' || attnum || ' ' || attname || ' ' || format_type(atttypid, atttypmod) || ' ' || attnotnull || ' ' || attidentity::text || ' ' || attstorage::text
			FROM pg_attribute WHERE attrelid = 'messages'::regclass AND attnum > 0 AND NOT attisdropped
		UNION ALL SELECT 'index ' || pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'messages'::regclass
		UNION ALL SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'messages'::regclass
		UNION ALL SELECT 'referenced by ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) || ' valid ' || convalidated
			FROM pg_constraint WHERE confrelid = 'messages'::regclass
		UNION ALL SELECT 'sequence ' || pg_get_serial_sequence('messages', 'id')
		UNION ALL SELECT 'acl ' || coalesce(relacl::text, '') || ' owner ' || pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'messages'::regclass
		UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger WHERE tgrelid = 'messages'::regclass AND NOT tgisinternal
		UNION ALL SELECT 'leftover ' || relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relname LIKE '%\_scrub%'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRewriteKeepsTheTable checks that the online rewrite puts in place a
// table that is the old one but for the old row versions: same schema,
// same rows, foreign keys validated again, the identity going on where it
// was, grants kept; and that ingest, leasing and a second deletion work on
// it.
func TestRewriteKeepsTheTable(t *testing.T) {
	ctx := context.Background()
	s := openURL(t, pgtest.URL(t))
	if _, err := s.pool.Exec(ctx, `GRANT SELECT ON messages TO PUBLIC`); err != nil {
		t.Fatal(err)
	}
	ingestMarked(t, s, "u1", "KEEPTABLE", 30)
	ingestMarked(t, s, "u2", "KEEPTABLE", 30)
	before := describe(t, s)
	var maxID, rows int64
	if err := s.pool.QueryRow(ctx, `SELECT max(id), count(*) FROM messages`).Scan(&maxID, &rows); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateDeletion(ctx, store.DeletionRequest{ID: "d1", UserID: "u1", CreatedAt: t0, Sources: []string{"web"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, describe(t, s)); diff != "" {
		t.Errorf("table after the rewrite mismatch (-before +after):\n%s", diff)
	}
	var rowsAfter, emptied int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE length(body) = 0) FROM messages`).Scan(&rowsAfter, &emptied); err != nil {
		t.Fatal(err)
	}
	if rowsAfter != rows || emptied != 30 {
		t.Errorf("after the rewrite: %d rows (want %d), %d emptied (want 30)", rowsAfter, rows, emptied)
	}
	late := storetest.Msg("web", "late", 0, true)
	if err := s.Ingest(ctx, []store.Message{late, storetest.Msg("web", "u10", 0, true)}); err != nil { // u10 is known: skipped
		t.Fatal(err)
	}
	var lateID int64
	if err := s.pool.QueryRow(ctx, `SELECT id FROM messages WHERE message_id = 'late'`).Scan(&lateID); err != nil || lateID <= maxID {
		t.Errorf("message ingested after the rewrite has id %d (%v); the last before was %d", lateID, err, maxID)
	}
	if ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "w", Source: "web", Limit: 100, Now: t0, TTL: time.Minute}); err != nil || len(ds) != 32 {
		t.Errorf("leased %d, %v; want the 30 of u2, other and late", len(ds), err)
	}
	if d, err := s.CreateDeletion(ctx, store.DeletionRequest{ID: "d2", UserID: "u2", CreatedAt: t0, Sources: []string{"web"}}); err != nil || d.Sources[0].Purged != 30 {
		t.Errorf("second deletion: %+v, %v", d, err)
	}
	if diff := cmp.Diff(before, describe(t, s)); diff != "" {
		t.Errorf("table after the second rewrite mismatch (-before +after):\n%s", diff)
	}
}

// TestRewriteFallsBackToVacuumFull: a table evfwd cannot swap without
// losing what an operator added (here a view and a trigger of their own)
// is rewritten with VACUUM FULL, and the bodies are gone all the same.
func TestRewriteFallsBackToVacuumFull(t *testing.T) {
	for name, ddl := range map[string]string{
		"view": `CREATE VIEW report AS SELECT id, source FROM messages`,
		"trigger": `CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
			CREATE TRIGGER audit AFTER DELETE ON messages FOR EACH STATEMENT EXECUTE FUNCTION audit()`,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := openURL(t, pgtest.URL(t))
			if _, err := s.pool.Exec(ctx, ddl); err != nil {
				t.Fatal(err)
			}
			marker := fmt.Sprintf("FALLMARK%d", time.Now().UnixNano())
			ingestMarked(t, s, "u1", marker, 40)
			before := describe(t, s)
			scan := relationScan(func() *Store { return s })
			if found := scan(t, []byte(marker)); len(found) == 0 {
				t.Fatal("the bodies are in no file before the deletion: the scan does not see them")
			}
			_, err := s.CreateDeletion(ctx, store.DeletionRequest{ID: "d", UserID: "u1", CreatedAt: t0, Sources: []string{"web"}})
			if errors.Is(err, errHorizon) {
				// Right: the rewrite would have kept the bodies.
				t.Skipf("sessions outside this test held the database's horizon: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if found := scan(t, []byte(marker)); len(found) != 0 {
				t.Errorf("marker found after the deletion: %v", found)
			}
			if diff := cmp.Diff(before, describe(t, s)); diff != "" {
				t.Errorf("table mismatch (-before +after):\n%s", diff)
			}
		})
	}
}

// TestRewriteLeftoversDropped: a process that died in the middle of a swap
// leaves its triggers on messages, their log and the half-made copy; the
// next Open finishes the deletion and removes them.
func TestRewriteLeftoversDropped(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := openURL(t, url)
	marker := fmt.Sprintf("LEFTMARK%d", time.Now().UnixNano())
	ingestMarked(t, s, "u1", marker, 40)
	clean := describe(t, s)
	if err := s.recordDeletion(ctx, store.DeletionRequest{ID: "d", UserID: "u1", CreatedAt: t0, Sources: []string{"web"}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.pool.Exec(ctx, `CREATE TABLE messages_scrub_log (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id bigint NOT NULL);
		CREATE FUNCTION messages_scrub_note() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN INSERT INTO messages_scrub_log (id) SELECT id FROM changed; RETURN NULL; END $$;
		CREATE TRIGGER messages_scrub_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS changed
			FOR EACH STATEMENT EXECUTE FUNCTION messages_scrub_note();
		CREATE TABLE messages_scrub (LIKE messages INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING STORAGE);
		INSERT INTO messages_scrub OVERRIDING SYSTEM VALUE SELECT * FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	scan := relationScan(func() *Store { return s })
	scan(t, []byte(marker))
	s.Close()

	s = openURL(t, url)
	<-s.Recovered() // Open leaves the rewrite to the background
	if diff := cmp.Diff(clean, describe(t, s)); diff != "" {
		t.Errorf("table after Open mismatch (-before +after):\n%s", diff)
	}
	if found := scan(t, []byte(marker)); len(found) != 0 {
		t.Errorf("marker found after Open: %v", found)
	}
}
