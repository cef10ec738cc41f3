package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
			if got := s.leases.leasedAt(id, now); got != want {
				t.Errorf("delivery %d held: %v, want %v", id, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A group whose ops may run again goes without savepoints; when one of
// them fails, the group runs again with savepoints, and that op alone
// fails: the others' rows and leases are kept, once. (The first run
// stops at the failing op.)
func TestFailingOpInAGroupFailsAlone(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "evfwd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE scratch (x INTEGER)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UnixMilli()
	failed := errors.New("op failed")
	runs := map[int64]int{}
	newOp := func(id int64, err error) *op {
		return &op{replayable: true, done: make(chan error, 1), apply: func(ctx context.Context, tx *wtx) error {
			runs[id]++
			s.leases.take(id, leaseOf{source: "web", owner: "a", until: until})
			if _, err := tx.ExecContext(ctx, "INSERT INTO scratch (x) VALUES (?)", id); err != nil {
				return err
			}
			return err
		}}
	}
	group := []*op{newOp(1, nil), newOp(2, failed), newOp(3, nil)}
	// On the writer's goroutine, as the writer commits a group.
	if err := s.doConn(ctx, func(context.Context, *wtx) error { s.commit(group); return nil }); err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, failed, nil} {
		if got := <-group[i].done; !errors.Is(got, want) {
			t.Errorf("op %d: %v, want %v", i+1, got, want)
		}
	}
	if diff := cmp.Diff(map[int64]int{1: 2, 2: 2, 3: 1}, runs); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	// A transaction that fails by itself (here its COMMIT, as on an I/O
	// error) fails every op of the group, and is not run again.
	ended := &op{replayable: true, done: make(chan error, 1), apply: func(ctx context.Context, tx *wtx) error {
		runs[5]++
		_, err := tx.ExecContext(ctx, "ROLLBACK")
		return err
	}}
	group = []*op{newOp(4, nil), ended}
	if err := s.doConn(ctx, func(context.Context, *wtx) error { s.commit(group); return nil }); err != nil {
		t.Fatal(err)
	}
	for i, o := range group {
		if err := <-o.done; err == nil {
			t.Errorf("op %d of the group whose commit failed: no error", i+1)
		}
	}
	if runs[4] != 1 || runs[5] != 1 {
		t.Errorf("the group whose commit failed ran again: runs %v", runs)
	}
	err = s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		var rows string
		if err := tx.QueryRowContext(ctx, "SELECT group_concat(x) FROM (SELECT x FROM scratch ORDER BY x)").Scan(&rows); err != nil {
			return err
		}
		if rows != "1,3" {
			t.Errorf("rows %q, want 1,3", rows)
		}
		now := time.Now().UnixMilli()
		for id, want := range map[int64]bool{1: true, 2: false, 3: true} {
			if got := s.leases.leasedAt(id, now); got != want {
				t.Errorf("delivery %d held: %v, want %v", id, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
