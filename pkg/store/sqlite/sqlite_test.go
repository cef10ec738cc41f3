package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

func open(t *testing.T) store.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "evfwd.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, open)
}

func TestReopenKeepsDataAndSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ingest(ctx, []store.Message{storetest.Msg("web", "a", 0, true)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ds, err := s.List(ctx, store.Filter{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("after reopen: %v, %v", ds, err)
	}
	if err := s.Ingest(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func TestBusyAndClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "evfwd.db"), sqlite.Options{MaxPending: 1})
	if err != nil {
		t.Fatal(err)
	}
	two := []store.Message{storetest.Msg("web", "a", 0, true), storetest.Msg("web", "b", 0, true)}
	if err := s.Ingest(ctx, two); !errors.Is(err, store.ErrBusy) {
		t.Errorf("Ingest over MaxPending = %v, want ErrBusy", err)
	}
	s.Close()
	if err := s.Ingest(ctx, two[:1]); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ingest after Close = %v, want ErrClosed", err)
	}
}

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	storetest.RunAdmin(t, open)
}

// TestAutoVacuumIncremental: a new file is made with auto_vacuum=INCREMENTAL
// from its first table (so Open rewrites nothing), and a file made without
// it, as before evfwd set it, is converted once by Open. Either way freed
// pages can be given back to the file system.
func TestAutoVacuumIncremental(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mode := func(path string) int {
		t.Helper()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var m int
		if err := db.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	reopen := func(path string, opts sqlite.Options) {
		t.Helper()
		s, err := sqlite.Open(ctx, path, opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}

	// NoRecover skips the conversion: a new file has it from the start.
	fresh := filepath.Join(t.TempDir(), "evfwd.db")
	reopen(fresh, sqlite.Options{NoRecover: true})
	if m := mode(fresh); m != 2 {
		t.Errorf("a new store's auto_vacuum = %d, want 2 (incremental)", m)
	}

	old := filepath.Join(t.TempDir(), "evfwd.db")
	db, err := sql.Open("sqlite", old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE before_evfwd (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m := mode(old); m != 0 {
		t.Fatalf("the old file's auto_vacuum = %d before Open, want 0", m)
	}
	reopen(old, sqlite.Options{})
	if m := mode(old); m != 2 {
		t.Errorf("an old file's auto_vacuum after Open = %d, want 2 (converted)", m)
	}
}

// TestNotAPacer: a store one process uses paces in that process's memory
// (store.Pacer); the SQLite store must not offer to pace for it.
func TestNotAPacer(t *testing.T) {
	var s store.Store = &sqlite.Store{}
	if _, ok := s.(store.Pacer); ok {
		t.Error("*sqlite.Store implements store.Pacer")
	}
}
