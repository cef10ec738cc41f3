package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/faultproxy"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/classifytest"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestClassify(t *testing.T) {
	pg := func(code string) *pgconn.PgError {
		return &pgconn.PgError{Severity: "ERROR", Code: code, Message: "code " + code}
	}
	classifytest.Run(t, classify, []classifytest.Case{
		{"disk_full", pg("53100"), true},
		{"out_of_memory", pg("53200"), true},
		{"too_many_connections", pg("53300"), true},
		{"insufficient_resources", pg("53000"), true},
		{"a refused connection", fmt.Errorf("failed to connect to `user=evfwd database=evfwd`: %w", pg("53300")), true},
		{"configuration_limit_exceeded", pg("53400"), false},
		{"unique_violation", pg("23505"), false},
		{"deadlock_detected", pg("40P01"), false},
		{"query_canceled", pg("57014"), false},
		{"busy", store.ErrBusy, false},
		{"context", context.DeadlineExceeded, false},
	})
}

// TestClassifyUnavailable: a server going away or not reached is
// store.ErrUnavailable, the driver's error kept inside; an error the server
// answered about the statement, or its capacity, is not.
func TestClassifyUnavailable(t *testing.T) {
	pg := func(code string) *pgconn.PgError {
		return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "code " + code}
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tt := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"admin_shutdown", pg("57P01"), true},
		{"crash_shutdown", pg("57P02"), true},
		{"cannot_connect_now", fmt.Errorf("failed to connect to `user=evfwd database=evfwd`: %w", pg("57P03")), true},
		{"connection_failure", pg("08006"), true},
		{"connection_does_not_exist", pg("08003"), true},
		{"connection refused", fmt.Errorf("failed to connect to `host=127.0.0.1`: %w", refused), true},
		{"connection reset", fmt.Errorf("failed to receive message: %w", reset), true},
		{"unexpected EOF", fmt.Errorf("unexpected EOF: %w", io.ErrUnexpectedEOF), true},
		{"deadline", fmt.Errorf("timeout: %w", context.DeadlineExceeded), true},
		{"query_canceled", pg("57014"), false},
		{"invalid_password", fmt.Errorf("failed to connect: %w", pg("28P01")), false},
		{"disk_full", pg("53100"), false},
		{"unique_violation", pg("23505"), false},
		{"canceled", context.Canceled, false},
		{"busy", store.ErrBusy, false},
	} {
		got := classify(tt.err)
		if errors.Is(got, store.ErrUnavailable) != tt.unavailable || !errors.Is(got, tt.err) {
			t.Errorf("%s: classify(%v) = %v, want ErrUnavailable %v around it", tt.name, tt.err, got, tt.unavailable)
		}
	}
}

// TestIngestDiskFull: the server answering disk_full to the INSERT (a
// trigger raises it, as PostgreSQL does when it cannot extend a file)
// makes Ingest fail with store.ErrFull and store nothing; once the server
// writes again, so does Ingest.
func TestIngestDiskFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.pool.Exec(ctx, `
		CREATE FUNCTION evfwd_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file "base/16384/16385": No space left on device' USING ERRCODE = 'disk_full'; END $$;
		CREATE TRIGGER evfwd_test_disk_full BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION evfwd_test_disk_full();`); err != nil {
		t.Fatal(err)
	}
	msgs := func(ids ...string) (ms []store.Message) {
		for _, id := range ids {
			ms = append(ms, store.Message{Source: "web", MessageID: id, Type: "track", ReceivedAt: time.UnixMilli(1714564800000),
				Body: []byte(`{"type":"track"}`), Destinations: []string{store.DestinationWebhooks}})
		}
		return ms
	}
	err = s.Ingest(ctx, msgs("a", "b"))
	var pe *pgconn.PgError
	if !errors.Is(err, store.ErrFull) || !errors.As(err, &pe) || pe.Code != "53100" {
		t.Fatalf("Ingest on a full disk: %v, want store.ErrFull around SQLSTATE 53100", err)
	}
	if _, err := s.pool.Exec(ctx, `DROP TRIGGER evfwd_test_disk_full ON messages`); err != nil {
		t.Fatal(err)
	}
	if err := s.Ingest(ctx, msgs("c")); err != nil {
		t.Fatalf("after the disk was freed: %v", err)
	}
	var ids []string
	rows, err := s.pool.Query(ctx, `SELECT message_id FROM messages ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	if rows.Err() != nil || fmt.Sprint(ids) != "[c]" {
		t.Errorf("stored %v (%v), want only [c]", ids, rows.Err())
	}
}

// TestCutLink: with the link to the server black-holed, Ingest, Lease,
// Complete and Ping end at their callers' deadlines with
// store.ErrUnavailable (an ingest queued behind a stuck group as well as
// the group's own), and work again once the link passes.
func TestCutLink(t *testing.T) {
	t.Parallel()
	dbURL, proxy := faultproxy.InFront(t, pgtest.URL(t))
	ctx := context.Background()
	s, err := Open(ctx, dbURL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg := func(id string) []store.Message {
		return []store.Message{{Source: "web", MessageID: id, Type: "track", ReceivedAt: time.UnixMilli(1714564800000),
			Body: []byte(`{"type":"track"}`), Destinations: []string{store.DestinationWebhooks}}}
	}
	if err := s.Ingest(ctx, []store.Message{storetest.Msg("web", "leased", 0, true)}); err != nil {
		t.Fatal(err)
	}
	leased, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: "web", Limit: 1, Now: time.Now(), TTL: time.Minute})
	if err != nil || len(leased) != 1 {
		t.Fatalf("Lease before the cut: %v, %v", leased, err)
	}
	proxy.SetMode(faultproxy.Blackhole)
	const deadline = time.Second
	within := func(call string, f func(context.Context) error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		if err := f(cctx); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s on a cut link: %v, want store.ErrUnavailable", call, err)
		}
		if took := time.Since(start); took > 3*deadline {
			t.Errorf("%s on a cut link answered after %v, want about its deadline %v", call, took, deadline)
		}
	}
	within("Lease", func(ctx context.Context) error {
		_, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: "web", Limit: 1, Now: time.Now(), TTL: time.Minute})
		return err
	})
	done := store.Completion{ID: leased[0].ID, Owner: "n1", Status: store.Delivered, Attempts: 1,
		FirstAttempt: time.Now(), NextAttempt: time.Now()}
	within("Complete", func(ctx context.Context) error { return s.Complete(ctx, []store.Completion{done}) })
	errs := make(chan error, 8)
	start := time.Now()
	for i := range cap(errs) {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			errs <- s.Ingest(cctx, msg(fmt.Sprint("cut-", i)))
		}()
	}
	for range cap(errs) {
		if err := <-errs; !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Ingest on a cut link: %v, want store.ErrUnavailable", err)
		}
	}
	if took := time.Since(start); took > 3*deadline {
		t.Errorf("Ingest on a cut link answered after %v, want about its deadline %v", took, deadline)
	}
	pctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	if err := s.Ping(pctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping on a cut link: %v, want store.ErrUnavailable", err)
	}
	proxy.SetMode(faultproxy.Pass)
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after the heal: %v", err)
	}
	if err := s.Ingest(ctx, msg("after")); err != nil {
		t.Errorf("Ingest after the heal: %v", err)
	}
	// The outcome refused on the cut link is written when tried again.
	if err := s.Complete(ctx, []store.Completion{done}); err != nil {
		t.Errorf("Complete after the heal: %v", err)
	}
	var status string
	if err := s.pool.QueryRow(ctx, `SELECT status FROM deliveries WHERE id = $1`, done.ID).Scan(&status); err != nil || status != "delivered" {
		t.Errorf("delivery after the heal: %q (%v), want delivered", status, err)
	}
}
