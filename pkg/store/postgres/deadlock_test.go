package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestOverlappingIngestNoDeadlock (issue 43, row 8): clients on three
// nodes post batches that share messageIds, each in its own order, as two
// clients of one source, or a client retrying a batch whose first try is
// still in flight, do. The server detects no deadlock (its count for the
// test's own database stays 0: a deadlock the store ran again would not
// reach the caller, but it costs the server's deadlock_timeout, a second),
// no caller gets an error, every message is stored once with each of its
// deliveries once, and each delivery created leased is returned to the one
// caller it is leased to.
func TestOverlappingIngestNoDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Database(t)
	const nodes, writers, window, batch = 3, 24, 48, 16
	rounds := testsize.Pick(40, 15)
	stores := make([]*postgres.Store, nodes)
	for i := range stores {
		stores[i] = open(t, url, postgres.Options{})
	}
	dests := []string{store.DestinationWebhooks, "archive"}
	until := time.Now().Add(time.Hour)

	type result struct {
		owner  string
		leased []store.Delivery
	}
	var (
		mu      sync.Mutex
		results []result
		errs    []error
		posted  = map[string]bool{}
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			s := stores[w%nodes]
			rng := rand.New(rand.NewPCG(uint64(w), 43))
			owner := fmt.Sprint("w", w)
			for r := range rounds {
				// batch of the round's window of ids, in an order of this
				// writer's: every two writers' batches share some.
				var msgs []store.Message
				for _, k := range rng.Perm(window)[:batch] {
					id := fmt.Sprintf("r%d-%d", r, k)
					msgs = append(msgs, store.Message{Source: "web", MessageID: id, Type: "track", UserID: "u" + id,
						ReceivedAt: time.UnixMilli(1_700_000_000_000), Body: []byte(`{"messageId":"` + id + `"}`), Destinations: dests})
				}
				leased, err := s.IngestLeased(ctx, msgs, store.IngestLease{Owner: owner, Until: until, Limit: 4})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s round %d: %w", owner, r, err))
				} else {
					for _, m := range msgs {
						posted[m.MessageID] = true
					}
					results = append(results, result{owner, leased})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "40P01" {
			t.Errorf("a deadlock reached the caller: %v", err)
		} else {
			t.Errorf("IngestLeased: %v", err)
		}
	}

	// Each delivery created leased is its caller's, and no one else's.
	seen := map[int64]string{}
	for _, r := range results {
		for _, d := range r.leased {
			if prev, dup := seen[d.ID]; dup {
				t.Errorf("delivery %d returned leased to %s and to %s", d.ID, prev, r.owner)
			}
			seen[d.ID] = r.owner
		}
	}
	pool := stores[0].Pool()
	rows, err := pool.Query(ctx, `SELECT id, lease_owner FROM deliveries WHERE lease_owner IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	owners, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (result, error) {
		var id int64
		var owner string
		err := r.Scan(&id, &owner)
		return result{owner, []store.Delivery{{ID: id}}}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		if got := seen[o.leased[0].ID]; got != o.owner {
			t.Errorf("delivery %d is leased to %s in the database, returned to %q", o.leased[0].ID, o.owner, got)
		}
	}
	if len(owners) != len(seen) {
		t.Errorf("%d deliveries leased in the database, %d returned leased", len(owners), len(seen))
	}

	// Every message once, each with one delivery per destination.
	var msgs, dels, wrong int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM deliveries),
		(SELECT count(*) FROM (SELECT m.id FROM messages m LEFT JOIN deliveries d ON d.message = m.id
			GROUP BY m.id HAVING count(d.id) <> 2 OR count(DISTINCT d.destination) <> 2) x)`).Scan(&msgs, &dels, &wrong); err != nil {
		t.Fatal(err)
	}
	if msgs != len(posted) || dels != 2*len(posted) || wrong != 0 {
		t.Errorf("%d messages and %d deliveries stored (%d messages without exactly one delivery per destination); want %d and %d",
			msgs, dels, wrong, len(posted), 2*len(posted))
	}

	// The server's count, once every session of the stores has ended (a
	// session reports its count when it goes idle, at most once a second,
	// and at its end at the latest).
	for _, s := range stores {
		s.Close()
	}
	if n := deadlocks(t, url); n != 0 {
		t.Errorf("the server detected %d deadlocks; want 0", n)
	}
	t.Logf("%d writers on %d nodes, %d batches of %d from windows of %d: %d messages, %d deliveries, %d leased at ingest",
		writers, nodes, writers*rounds, batch, window, msgs, dels, len(seen))
}

// deadlocks is pg_stat_database.deadlocks of url's database once no other
// session is connected to it.
func deadlocks(t *testing.T, url string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for {
		var others int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d other sessions still on the database", others)
		case <-time.After(10 * time.Millisecond): // a session's end has no signal to wait on
		}
	}
	var n int64
	if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
