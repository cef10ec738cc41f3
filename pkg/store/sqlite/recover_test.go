package sqlite

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
)

// traitSync is a sync of trait key whose messages say "user=value".
func traitSync(key string) store.Sync {
	return store.Sync{Kind: store.KindTrait, Key: key, Name: key, Now: t0, Removed: []byte("null"),
		Messages: func(user string, value []byte) []store.Message {
			return []store.Message{{Source: "web", MessageID: fmt.Sprintf("%s-%s-%s", key, user, value), Type: "identify", UserID: user,
				ReceivedAt: t0, Body: []byte(user + "=" + string(value)), Destinations: []string{store.DestinationWebhooks}}}
		}}
}

// traitList is n users, each with value.
func traitList(n int, value string) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		for i := range n {
			if !yield(store.Value{UserID: fmt.Sprintf("u%04d", i), Value: []byte(value)}, nil) {
				return
			}
		}
	}
}

// waitTurns waits until users hold or wait for the turn of key.
func waitTurns(t *testing.T, s *Store, key syncKey, users int) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		s.syncTurns.mu.Lock()
		n := 0
		if k := s.syncTurns.m[key]; k != nil {
			n = k.users
		}
		s.syncTurns.mu.Unlock()
		if n == users {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d hold or wait for the turn of %v after 10s, want %d", n, key, users)
		}
	}
}

var errStopped = errors.New("stopped as by a crash")

// TestSyncFinishedInBackground stops a sync after its flip and its first
// move, as a process that dies would, and opens the file again with the
// work that sync left held back: readers see the new list at once, a sync
// of another key runs meanwhile, and one of the same key waits for its
// turn; once the work is done, each of the stopped sync's messages is
// queued exactly once and the waiting sync finds nothing changed.
func TestSyncFinishedInBackground(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 1000
	path := filepath.Join(t.TempDir(), "evfwd.db")
	s := openAt(t, path)
	s.SetSyncSteps(100)
	if _, err := s.Sync(ctx, traitSync("ltv"), traitList(n, "1")); err != nil {
		t.Fatal(err)
	}
	s.SetSyncHook(func(step string) error {
		if step == synchook.Moved {
			return errStopped
		}
		return nil
	})
	if _, err := s.Sync(ctx, traitSync("ltv"), traitList(n, "2")); !errors.Is(err, errStopped) {
		t.Fatalf("sync stopped after its first move: %v", err)
	}
	s.Close()

	gate := make(chan struct{})
	s, err := Open(ctx, path, Options{recoveryGate: gate})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetSyncSteps(100)
	for v, err := range s.SyncValues(ctx, store.KindTrait, "ltv") {
		if err != nil || string(v.Value) != "2" {
			t.Fatalf("right after Open the list holds %s=%s (%v), want the new list", v.UserID, v.Value, err)
		}
	}
	if left, err := s.SyncLeftovers(ctx); err != nil || left == 0 {
		t.Fatalf("%d rows left over while the work is held back (%v): nothing was left to finish", left, err)
	}
	if _, err := s.Sync(ctx, traitSync("other"), traitList(10, "x")); err != nil {
		t.Fatalf("a sync of another key while the work is held back: %v", err)
	}
	again := make(chan error, 1)
	go func() {
		res, err := s.Sync(ctx, traitSync("ltv"), traitList(n, "2"))
		if err == nil && (res.Unchanged != n || res.Added+res.Removed+res.Changed != 0) {
			err = fmt.Errorf("%+v, want %d unchanged", res, n)
		}
		again <- err
	}()
	waitTurns(t, s, syncKey{store.KindTrait, "ltv"}, 2) // the work's and the sync's
	select {
	case err := <-again:
		t.Fatalf("the sync of the same key ended before the work left for it: %v", err)
	default:
	}
	close(gate)
	if err := <-again; err != nil {
		t.Errorf("the sync of the same key: %v", err)
	}
	<-s.Recovered()
	var queued, distinct int
	if err := s.read.QueryRow(`SELECT count(*), count(DISTINCT user_id) FROM messages WHERE message_id LIKE 'ltv-%-2'`).Scan(&queued, &distinct); err != nil {
		t.Fatal(err)
	}
	if queued != n || distinct != n {
		t.Errorf("the stopped sync queued %d messages for %d users, want %d once each", queued, distinct, n)
	}
	if left, err := s.SyncLeftovers(ctx); err != nil || left != 0 {
		t.Errorf("%d rows left over once the work is done (%v)", left, err)
	}
}
