package sqlite_test

import (
	"context"
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

func TestLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	release, err := sqlite.Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Lock(path); !errors.Is(err, sqlite.ErrLocked) {
		t.Errorf("second Lock = %v, want ErrLocked", err)
	}
	release()
	release2, err := sqlite.Lock(path)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	release2()
}

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	storetest.RunAdmin(t, open)
}
