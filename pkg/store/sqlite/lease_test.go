package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// The in-memory leases follow the file: what an op changed is undone when
// its savepoint is rolled back, and when its whole transaction fails.
func TestLeasesUndoneWithTheirTransaction(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "evfwd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	until := time.Now().Add(time.Hour).UnixMilli()
	now := time.Now().UnixMilli()

	failed := errors.New("op failed")
	if err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		s.leases.take(1, leaseOf{source: "web", owner: "a", until: until})
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("do = %v, want the op's error", err)
	}
	if err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		s.leases.take(2, leaseOf{source: "web", owner: "a", until: until})
		// Ends the transaction under the group, as a failing COMMIT
		// (SQLITE_FULL, an I/O error) does.
		_, err := tx.ExecContext(ctx, "ROLLBACK")
		return err
	}); err == nil {
		t.Fatal("the group committed after its transaction was rolled back")
	}
	if err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		s.leases.take(3, leaseOf{source: "web", owner: "a", until: until})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err = s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		for id, want := range map[int64]bool{1: false, 2: false, 3: true} {
			if got := s.leases.held(id, now); got != want {
				t.Errorf("delivery %d held: %v, want %v", id, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
