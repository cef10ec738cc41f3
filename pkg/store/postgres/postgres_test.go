package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

func open(t *testing.T, url string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgtest.URL(t), postgres.Options{}) })
}

// TestShared runs the cases that need two handles on one database: two
// nodes.
func TestShared(t *testing.T) {
	t.Parallel()
	storetest.RunShared(t, func(t *testing.T) (store.Store, store.Store) {
		url := pgtest.URL(t)
		return open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	})
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), url, postgres.Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s := open(t, url, postgres.Options{})
	defer s.Close()
	var n, v int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != postgres.SchemaVersion() || v != postgres.SchemaVersion() {
		t.Errorf("schema_migrations: %d rows, newest %d; want %d", n, v, postgres.SchemaVersion())
	}
}

func TestBusyAndClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{MaxPending: 1})
	two := []store.Message{storetest.Msg("web", "a", 0, true), storetest.Msg("web", "b", 0, true)}
	if err := s.Ingest(ctx, two); !errors.Is(err, store.ErrBusy) {
		t.Errorf("Ingest over MaxPending = %v, want ErrBusy", err)
	}
	s.Close()
	if err := s.Ingest(ctx, two[:1]); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ingest after Close = %v, want ErrClosed", err)
	}
}

func TestRepeatWithinRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.URL(t), postgres.Options{})
	defer s.Close()
	first := storetest.Msg("web", "a", 0, true)
	second := first
	second.Body = []byte(`{"second":true}`)
	if err := s.Ingest(ctx, []store.Message{first, second}); err != nil {
		t.Fatal(err)
	}
	ds, _ := s.List(ctx, store.Filter{})
	if len(ds) != 1 {
		t.Fatalf("got %d deliveries, want 1", len(ds))
	}
	d, _ := s.Get(ctx, ds[0].ID)
	if string(d.Body) != string(first.Body) {
		t.Errorf("kept %s, want the first occurrence", d.Body)
	}
}

func TestInvalidURLHidesPassword(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(context.Background(), "postgres://u:s3cret@host:notaport/db", postgres.Options{})
	if err == nil {
		t.Fatal("want an error")
	}
	if got := err.Error(); strings.Contains(got, "s3cret") {
		t.Errorf("error shows the password: %s", got)
	}
}

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	storetest.RunAdmin(t, func(t *testing.T) store.Store { return open(t, pgtest.URL(t), postgres.Options{}) })
}
