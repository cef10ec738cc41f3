package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// fileSize is the size of the database file.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// deliverAll leases and completes as delivered every due delivery.
func deliverAll(t *testing.T, s store.Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for {
		ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n", Source: "web", Limit: 1000, Now: now, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return
		}
		cs := make([]store.Completion, len(ds))
		for i, d := range ds {
			cs[i] = store.Completion{ID: d.ID, Owner: "n", Status: store.Delivered, Attempts: 1, FirstAttempt: now,
				Records: []store.Attempt{{Delivery: 1, URL: "http://h/", Start: now, Status: 200, Class: "http_2xx", Outcome: "delivered"}}}
		}
		if err := s.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPruneKeepsTheFileFlat: rounds of ingest, delivery and prune reuse the
// pages the last prune freed, and once the load stops, the free pages go
// back to the file system.
func TestPruneKeepsTheFileFlat(t *testing.T) {
	t.Parallel()
	// A round of 500 messages of about 1 KB is some 125 pages to reuse:
	// enough to show the file flat (or growing) under -race, at a sixth of
	// the time.
	perRound := testsize.Pick(3000, 500)
	// Rounds after the two that settle the file: a file that reused no
	// page would grow by half its size with each.
	rounds := testsize.Pick(6, 4)
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pad := bytes.Repeat([]byte("x"), 900)
	round := func(r int) {
		at := time.Date(2024, 5, 1, r, 0, 0, 0, time.UTC)
		var msgs []store.Message
		for i := range perRound {
			m := storetest.Msg("web", fmt.Sprintf("r%d-%d", r, i), 0, true)
			m.ReceivedAt = at
			m.Body = fmt.Appendf(nil, `{"type":"track","userId":"u","pad":%q}`, pad)
			msgs = append(msgs, m)
		}
		if err := s.Ingest(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		deliverAll(t, s, at)
		got, err := s.Prune(ctx, at) // everything of earlier rounds
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(perRound); r > 0 && got.Messages != want {
			t.Fatalf("round %d pruned %d messages, want %d", r, got.Messages, want)
		}
	}
	// The file's size after a checkpoint, which moves the WAL's pages in
	// (left to SQLite, that waits for 1,000 pages of WAL).
	checkpointed := func() int64 {
		if err := s.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		return fileSize(t, path)
	}
	round(0)
	round(1)
	settled := checkpointed()
	for r := range rounds {
		round(2 + r)
	}
	if size := checkpointed(); float64(size) > 1.15*float64(settled) {
		t.Errorf("file grew from %d to %d bytes over %d rounds of the same load", settled, size, rounds)
	} else {
		t.Logf("%d messages a round: %d bytes after 2 rounds, %d after %d", perRound, settled, size, 2+rounds)
	}

	// Everything pruned, then a pass that finds nothing: the file gives
	// its pages back.
	for range 2 {
		if _, err := s.Prune(ctx, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
	}
	checkpointed()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var free, pages int64
	db.QueryRow(`PRAGMA freelist_count`).Scan(&free)
	db.QueryRow(`PRAGMA page_count`).Scan(&pages)
	if free > 0 {
		t.Errorf("after pruning everything %d of %d pages are free, want none", free, pages)
	}
	if size := fileSize(t, path); size > settled/2 {
		t.Errorf("after pruning everything the file is %d bytes, want well under %d", size, settled)
	}
}
