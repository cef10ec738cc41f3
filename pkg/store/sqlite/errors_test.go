package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/fullfs"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/classifytest"
)

// driverErr is what the driver returns for the statement q on a fresh
// database set up by setup.
func driverErr(t *testing.T, setup []string, q string, args ...any) error {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // max_page_count holds per connection
	for _, s := range setup {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	_, err = db.Exec(q, args...)
	if err == nil {
		t.Fatalf("%s: no error", q)
	}
	return err
}

// fakeCode is a driver error with any result code.
type fakeCode int

func (c fakeCode) Error() string { return fmt.Sprintf("sqlite error %d", int(c)) }
func (c fakeCode) Code() int     { return int(c) }

func TestClassify(t *testing.T) {
	// A genuine SQLITE_FULL from the driver: the file may not grow past
	// max_page_count, as it cannot past a full disk.
	full := driverErr(t, []string{`CREATE TABLE t (b BLOB)`, `PRAGMA max_page_count = 8`},
		`INSERT INTO t VALUES (?)`, make([]byte, 64<<10))
	if !strings.Contains(full.Error(), "database or disk is full") {
		t.Fatalf("not SQLITE_FULL: %v", full)
	}
	constraint := driverErr(t, []string{`CREATE TABLE t (k PRIMARY KEY)`, `INSERT INTO t VALUES (1)`}, `INSERT INTO t VALUES (1)`)
	syntax := driverErr(t, nil, `INSERT INTO nowhere VALUES (1)`)
	classifytest.Run(t, classify, []classifytest.Case{
		{"SQLITE_FULL", full, true},
		{"SQLITE_FULL in a failed commit", fmt.Errorf("store: commit: %w", full), true},
		{"SQLITE_FULL then a lost savepoint", fmt.Errorf("store: commit: %w (rollback to savepoint: %v)", full, syntax), true},
		{"code 13", fakeCode(13), true},
		{"SQLITE_IOERR_WRITE", fakeCode(10 | 3<<8), false},
		{"SQLITE_CONSTRAINT_PRIMARYKEY", constraint, false},
		{"SQLITE_ERROR", syntax, false},
		{"busy", store.ErrBusy, false},
		{"context", context.Canceled, false},
	})
}

// TestIngestOnFullDisk: on a file system that is full, Ingest fails with
// store.ErrFull and stores nothing, whether SQLite fails at commit (a small
// transaction) or while writing pages out of its cache mid-transaction (a
// large one, which SQLite then rolls back whole); once space is freed the
// store writes again.
func TestIngestOnFullDisk(t *testing.T) {
	dir := fullfs.Mount(t, "8m")
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(dir, "evfwd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	next := 0
	batch := func(n, size int) []store.Message {
		body := []byte(`{"p":"` + strings.Repeat("x", size) + `"}`)
		var ms []store.Message
		for range n {
			next++
			ms = append(ms, store.Message{Source: "web", MessageID: fmt.Sprint("m", next), Type: "track",
				ReceivedAt: time.UnixMilli(1714564800000), Body: body, Destinations: []string{store.DestinationWebhooks}})
		}
		return ms
	}
	count := func() (n int) {
		if err := s.read.QueryRow(`SELECT count(*) FROM messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := s.Ingest(ctx, batch(10, 1000)); err != nil {
		t.Fatal(err)
	}
	ballast := filepath.Join(dir, "ballast")

	// 3 MiB free and a 5 MB transaction: SQLite's page cache (2 MB)
	// spills into the WAL before the commit and the disk fills then.
	fullfs.Fill(t, ballast, 3<<20)
	err = s.Ingest(ctx, batch(50, 100_000))
	t.Logf("mid-transaction: %v", err)
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("a transaction that filled the disk mid-way: %v, want store.ErrFull", err)
	}
	// Nothing free: small transactions go into the room the WAL file has
	// already (it keeps its size), then fail at their commit.
	fullfs.Fill(t, ballast, 0)
	acked := count()
	for i, refused := 0, 0; refused < 3; i++ {
		if i == 1000 {
			t.Fatal("the disk never filled")
		}
		b := batch(20, 3000)
		switch err := s.Ingest(ctx, b); {
		case err == nil:
			acked += len(b)
		case errors.Is(err, store.ErrFull):
			refused++
		default:
			t.Fatalf("a small transaction on a full disk: %v, want store.ErrFull", err)
		}
	}
	if n := count(); n != acked {
		t.Errorf("%d messages stored, want the %d acknowledged", n, acked)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if err := s.Ingest(ctx, batch(20, 3000)); err != nil {
		t.Fatalf("after space was freed: %v", err)
	}
	if n := count(); n != acked+20 {
		t.Errorf("%d messages stored, want %d", n, acked+20)
	}
}
