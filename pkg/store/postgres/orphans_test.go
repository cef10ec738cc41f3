package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestLostIngestAnswerReleasesLeases (issue 43, row 2): an ingest commits
// but its answer is lost (the link goes quiet, the server restarts): the
// caller gets an error and sends none of the deliveries it would have had,
// and a retry of the request skips the messages as stored. The store
// releases the deliveries the lost ingest leased once the server answers,
// so that they are leased and sent at once, not after the lease's two
// minutes; no delivery is left leased to the node that lost the answer.
func TestLostIngestAnswerReleasesLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := pgtest.URL(t)
	mb := newMiddlebox(t, direct)
	s := open(t, mb.url, postgres.Options{})
	defer s.Close()
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	leased := func() (n int) {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE lease_owner = 'n1'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var msgs []store.Message
	for try := 1; ; try++ {
		// The statement is prepared on the pool's connection first:
		// muted, its preparation's answer would be lost instead of the
		// commit's.
		if _, err := s.IngestLeased(ctx, []store.Message{{Source: "web", MessageID: fmt.Sprint("warm", try), Type: "track", ReceivedAt: time.Now(),
			Body: []byte(`{}`)}}, store.IngestLease{Owner: "n0", Until: time.Now().Add(time.Minute), Limit: 1}); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[:0]
		for i := range 5 {
			msgs = append(msgs, store.Message{Source: "web", MessageID: fmt.Sprintf("lost%d-%d", try, i), Type: "track",
				ReceivedAt: time.Now(), Body: []byte(`{}`), Destinations: []string{store.DestinationWebhooks}})
		}
		mb.mute()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.IngestLeased(cctx, msgs, store.IngestLease{Owner: "n1", Until: time.Now().Add(2 * time.Minute), Limit: 3})
		cancel()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("IngestLeased with its answer lost: %v, want store.ErrUnavailable", err)
		}
		if leased() == 3 {
			break // the statement reached the server and committed
		}
		// It never did: the pool sent it on a connection it opened (or
		// checked with a ping) while muted, whose handshake never ended
		// (seen with both cores busy). Nothing to release: again.
		t.Logf("try %d: the ingest never reached the server", try)
		mb.unmute()
		if try == 5 {
			t.Fatal("5 tries, and the ingest never reached the server")
		}
	}
	mb.unmute()
	healed := time.Now()
	waitUntil(t, "the lost ingest's leases released", func() bool { return leased() == 0 })
	t.Logf("released %v after the answers passed again", time.Since(healed).Round(time.Millisecond))

	// The retry skips the messages; another node's Lease takes all five.
	if ds, err := s.IngestLeased(ctx, msgs, store.IngestLease{Owner: "n1", Until: time.Now().Add(time.Minute), Limit: 3}); err != nil || len(ds) != 0 {
		t.Fatalf("retry: %d leased, %v; want none", len(ds), err)
	}
	ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n2", Source: "web", Limit: 10, Now: time.Now(), TTL: time.Minute})
	if err != nil || len(ds) != 5 {
		t.Fatalf("Lease after the release: %d, %v; want 5", len(ds), err)
	}
}

// waitUntil polls cond (the database gives no signal) every 20 ms, for
// 20 s at most.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for limit := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(limit) {
			t.Fatalf("20 s passed waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
