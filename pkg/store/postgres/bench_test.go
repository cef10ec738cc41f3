package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
)

// benchBody is a typical webhook body (about 300 bytes).
var benchBody = []byte(`{"type":"track","version":1,"userId":"user-12345","event":"Order Completed","properties":{"total":129.95,"currency":"USD","items":3},"context":{"library":{"name":"analytics-ruby","version":"2.4.0"},"ip":"10.0.0.1"},"messageId":"x","timestamp":"2026-01-01T00:00:00Z"}`)

// benchBatch is the n-th batch of size messages of one client: unique ids.
func benchBatch(run string, client, n, size int) []store.Message {
	msgs := make([]store.Message, size)
	now := time.Now()
	for i := range msgs {
		msgs[i] = store.Message{Source: "web", MessageID: fmt.Sprintf("%s-%d-%d-%d", run, client, n, i), Type: "track",
			UserID: "user-12345", ReceivedAt: now, Body: benchBody, Form: store.FormWire,
			Destinations: []string{store.DestinationWebhooks}}
	}
	return msgs
}

// benchIngest runs b.N batches of 100 messages from clients concurrent
// callers, through fn, and reports events/s.
func benchIngest(b *testing.B, clients int, fn func(s *postgres.Store, msgs []store.Message) error) {
	benchIngestURL(b, pgtest.URL(b), clients, fn)
}

func benchIngestURL(b *testing.B, url string, clients int, fn func(s *postgres.Store, msgs []store.Message) error) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const size = 100
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= b.N {
					return
				}
				if err := fn(s, benchBatch("r", c, n, size)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*size)/elapsed.Seconds(), "events/s")
}

// BenchmarkIngest: 8 concurrent callers ingest batches of 100.
func BenchmarkIngest(b *testing.B) {
	benchIngest(b, 8, func(s *postgres.Store, msgs []store.Message) error {
		return s.Ingest(context.Background(), msgs)
	})
}

// BenchmarkIngestLeased: as BenchmarkIngest, each call leasing up to 64 of
// its deliveries.
func BenchmarkIngestLeased(b *testing.B) {
	benchIngest(b, 8, func(s *postgres.Store, msgs []store.Message) error {
		_, err := s.IngestLeased(context.Background(), msgs, store.IngestLease{Owner: "n1", Until: time.Now().Add(time.Minute), Limit: 64})
		return err
	})
}

// BenchmarkIngestSerial: one caller at a time, batches of 100.
func BenchmarkIngestSerial(b *testing.B) {
	benchIngest(b, 1, func(s *postgres.Store, msgs []store.Message) error {
		return s.Ingest(context.Background(), msgs)
	})
}

// BenchmarkLeaseComplete leases 64 deliveries and completes them, one
// Complete per delivery from 64 goroutines as the forwarder does, in a
// loop, through a backlog ingested just before (stats=stale: as after a
// burst, before autovacuum analyzed the table) or analyzed since
// (stats=fresh); it reports deliveries/s. It leases the webhooks
// destination, as the forwarder does.
func BenchmarkLeaseComplete(b *testing.B) {
	b.Run("stats=stale", func(b *testing.B) { benchLeaseComplete(b, false) })
	b.Run("stats=fresh", func(b *testing.B) { benchLeaseComplete(b, true) })
}

func benchLeaseComplete(b *testing.B, analyze bool) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.URL(b), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const group = 64
	total := b.N * group
	for n := 0; n*1000 < total; n++ {
		if err := s.Ingest(ctx, benchBatch("r", 0, n, min(1000, total-n*1000))); err != nil {
			b.Fatal(err)
		}
	}
	if analyze {
		if _, err := s.Pool().Exec(ctx, `ANALYZE deliveries`); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	done := 0
	var leasing, completing time.Duration
	for done < total {
		t := time.Now()
		ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: "web", Destination: store.DestinationWebhooks, Limit: group,
			Now: time.Now(), TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(ds) == 0 {
			b.Fatalf("leased none after %d of %d", done, total)
		}
		leasing += time.Since(t)
		t = time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(ds))
		for i, d := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				now := time.Now()
				errs[i] = s.Complete(ctx, []store.Completion{{ID: d.ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: now,
					Records: []store.Attempt{{Delivery: 1, URL: "http://127.0.0.1/hook", Start: now, Latency: time.Millisecond,
						Status: 200, Class: "http_2xx", Excerpt: []byte("ok"), Outcome: "delivered"}}}})
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		completing += time.Since(t)
		done += len(ds)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(done)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(leasing.Microseconds())/float64(b.N), "lease-µs/op")
	b.ReportMetric(float64(completing.Microseconds())/float64(b.N), "complete-µs/op")
}

// BenchmarkCompleteConcurrent: 8 workers each lease 64 and complete them
// one by one from goroutines, concurrently, as a forwarder with several
// sources (or larger lease groups) does; it reports deliveries/s.
func BenchmarkCompleteConcurrent(b *testing.B) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.URL(b), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const group, workers = 64, 8
	total := b.N * group
	for n := 0; n*1000 < total; n++ {
		msgs := benchBatch("r", 0, n, min(1000, total-n*1000))
		for i := range msgs {
			msgs[i].Source = fmt.Sprint("s", i%workers)
		}
		if err := s.Ingest(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: fmt.Sprint("s", w), Limit: group, Now: time.Now(), TTL: time.Minute})
				if err != nil {
					b.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				var cwg sync.WaitGroup
				for _, d := range ds {
					cwg.Add(1)
					go func() {
						defer cwg.Done()
						now := time.Now()
						if err := s.Complete(ctx, []store.Completion{{ID: d.ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: now,
							Records: []store.Attempt{{Delivery: 1, URL: "http://127.0.0.1/hook", Start: now, Latency: time.Millisecond,
								Status: 200, Class: "http_2xx", Excerpt: []byte("ok"), Outcome: "delivered"}}}}); err != nil {
							b.Error(err)
						}
					}()
				}
				cwg.Wait()
				done.Add(int64(len(ds)))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(done.Load())/elapsed.Seconds(), "deliveries/s")
}

// BenchmarkLeaseDestination: one destination of a source leases 64 just
// arrived, and completes them, while another destination of the source
// (paused) holds a backlog due before them; it reports the µs per Lease,
// which the backlog must not change.
func BenchmarkLeaseDestination(b *testing.B) {
	for _, backlog := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			ctx := context.Background()
			s, err := postgres.Open(ctx, pgtest.URL(b), postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for n := 0; n*1000 < backlog; n++ {
				msgs := benchBatch("p", 0, n, 1000)
				for i := range msgs {
					msgs[i].Destinations = []string{"paused"}
				}
				if err := s.Ingest(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
			var leasing time.Duration
			b.ResetTimer()
			for n := range b.N {
				msgs := benchBatch("l", 1, n, 64)
				for i := range msgs {
					msgs[i].Destinations = []string{"live"}
				}
				if err := s.Ingest(ctx, msgs); err != nil {
					b.Fatal(err)
				}
				t := time.Now()
				ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: "web", Destination: "live", Limit: 64,
					Now: time.Now(), TTL: time.Hour})
				leasing += time.Since(t)
				if err != nil || len(ds) != 64 {
					b.Fatalf("lease: %d, %v", len(ds), err)
				}
				cs := make([]store.Completion, len(ds))
				for i, d := range ds {
					cs[i] = store.Completion{ID: d.ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t}
				}
				if err := s.Complete(ctx, cs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(leasing.Nanoseconds())/1e3/float64(b.N), "lease-µs")
		})
	}
}
