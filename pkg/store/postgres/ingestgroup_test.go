package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// TestConcurrentIngestLeased: many callers at once, some sharing messages
// (grouped into one transaction or not): every message is stored once with
// one delivery, each caller's leases are its own and within its limit,
// and no delivery is leased twice.
func TestConcurrentIngestLeased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{})
	defer s.Close()
	const callers, per = 16, 20
	until := time.Now().Add(time.Hour)
	got := make([][]store.Delivery, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var msgs []store.Message
			for i := range per {
				// Half of each caller's messages are its neighbour's too.
				id := fmt.Sprintf("m%d-%d", c, i)
				if i%2 == 1 {
					id = fmt.Sprintf("m%d-%d", (c+1)%callers, i)
				}
				msgs = append(msgs, storetest.Msg("web", id, 0, true))
			}
			got[c], errs[c] = s.IngestLeased(ctx, msgs, store.IngestLease{Owner: fmt.Sprint("c", c), Until: until, Limit: 5})
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for c := range callers {
		if errs[c] != nil {
			t.Fatalf("caller %d: %v", c, errs[c])
		}
		if len(got[c]) > 5 {
			t.Errorf("caller %d leased %d, limit 5", c, len(got[c]))
		}
		for _, d := range got[c] {
			if seen[d.ID] {
				t.Errorf("delivery %d leased twice", d.ID)
			}
			seen[d.ID] = true
			detail, err := s.Get(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			var owner string
			if err := s.Pool().QueryRow(ctx, `SELECT lease_owner FROM deliveries WHERE id = $1`, d.ID).Scan(&owner); err != nil || owner != fmt.Sprint("c", c) {
				t.Errorf("delivery %d returned to c%d is leased to %q (%v)", d.ID, c, owner, err)
			}
			if detail.Delivery.MessageID != d.MessageID || string(detail.Body) != string(d.Body) {
				t.Errorf("delivery %d: returned %s, stored %s", d.ID, d.MessageID, detail.MessageID)
			}
		}
	}
	var msgs, dels int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM deliveries)`).Scan(&msgs, &dels); err != nil {
		t.Fatal(err)
	}
	// Caller c's odd ids are caller c+1's odd ids too: callers*per ids
	// in all, each stored once.
	if want := callers * per; msgs != want || dels != want {
		t.Errorf("%d messages, %d deliveries; want %d of each", msgs, dels, want)
	}
}

// TestIngestGroupRefusedRequest: a request the server refuses (a NUL byte
// in a text column) fails alone; the requests grouped with it are stored.
func TestIngestGroupRefusedRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{})
	defer s.Close()
	const callers = 12
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("ok", c)
			if c == 3 {
				id = "bad\x00id"
			}
			_, errs[c] = s.IngestLeased(ctx, []store.Message{storetest.Msg("web", id, 0, true)}, store.IngestLease{Owner: "n1", Until: time.Now().Add(time.Hour), Limit: 1})
		}()
	}
	wg.Wait()
	for c, err := range errs {
		if (err != nil) != (c == 3) {
			t.Errorf("caller %d: %v", c, err)
		}
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM messages`).Scan(&n); err != nil || n != callers-1 {
		t.Errorf("%d messages stored (%v), want %d", n, err, callers-1)
	}
}

// TestIngestCancelledWhileQueued: a caller whose context ends is answered
// at once; the store goes on serving the others.
func TestIngestCancelledWhileQueued(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t), postgres.Options{})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Ingest(ctx, []store.Message{storetest.Msg("web", "a", 0, true)}); err == nil {
		t.Error("Ingest with an ended context succeeded")
	}
	if err := s.Ingest(context.Background(), []store.Message{storetest.Msg("web", "b", 0, true)}); err != nil {
		t.Fatal(err)
	}
}
