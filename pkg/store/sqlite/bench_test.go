package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// benchBody is a typical webhook body (about 300 bytes).
var benchBody = []byte(`{"type":"track","version":1,"userId":"user-12345","event":"Order Completed","properties":{"total":129.95,"currency":"USD","items":3},"context":{"library":{"name":"analytics-ruby","version":"2.4.0"},"ip":"10.0.0.1"},"messageId":"x","timestamp":"2026-01-01T00:00:00Z"}`)

// benchBatch is the n-th batch of size messages of one client: unique ids.
func benchBatch(client, n, size int) []store.Message {
	msgs := make([]store.Message, size)
	now := time.Now()
	for i := range msgs {
		msgs[i] = store.Message{Source: "web", MessageID: fmt.Sprintf("%d-%d-%d", client, n, i), Type: "track",
			UserID: "user-12345", ReceivedAt: now, Body: benchBody, Form: store.FormWire,
			Destinations: []string{store.DestinationWebhooks}}
	}
	return msgs
}

func openBench(b *testing.B) *sqlite.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkIngest: 8 concurrent callers ingest batches of 100, each
// committed (synchronous=FULL) before it returns, as the collector does.
func BenchmarkIngest(b *testing.B) {
	benchIngest(b, openBench(b), func(msgs []store.Message) {})
}

// benchIngest has 8 concurrent callers ingest b.N batches of 100 into s,
// each shaped by route first, and reports events/s and the process's CPU
// time an event (steadier than the rate on a shared machine).
func benchIngest(b *testing.B, s *sqlite.Store, route func([]store.Message)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	for c := range 8 {
		wg.Go(func() {
			for n := int(next.Add(1)) - 1; n < b.N; n = int(next.Add(1)) - 1 {
				msgs := benchBatch(c, n, 100)
				route(msgs)
				if err := s.Ingest(context.Background(), msgs); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*100)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*100), "cpu-ns/event")
}

// BenchmarkIngestSingles: 16 or 128 concurrent callers ingest one
// message each call, committed before it returns, as the collector does
// for a web source's single-event requests; with no destination (webhooks
// off) and with one.
func BenchmarkIngestSingles(b *testing.B) {
	for _, callers := range []int{16, 128} {
		for _, dest := range []string{"none", "webhooks"} {
			b.Run(fmt.Sprintf("callers=%d/dest=%s", callers, dest), func(b *testing.B) {
				s := openBench(b)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start, cpu := time.Now(), cpuTime()
				for c := range callers {
					wg.Go(func() {
						for n := int(next.Add(1)) - 1; n < b.N; n = int(next.Add(1)) - 1 {
							msgs := benchBatch(c, n, 1)
							if dest == "none" {
								msgs[0].Destinations = nil
							}
							if err := s.Ingest(context.Background(), msgs); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
				b.ReportMetric(float64(b.N)/float64(sqlite.Commits(s)), "events/commit")
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/event")
			})
		}
	}
}

// BenchmarkLeaseComplete leases 64 deliveries of a backlog and records
// their outcomes in one Complete, as the forwarder's completer groups
// them, in a loop; it reports deliveries/s and the µs per delivery of
// each step. The lease is of the webhooks destination, as the forwarder
// leases (dest=webhooks), or of every destination of the source
// (dest=every: the due order across destinations, off the hot path).
//
// batch=100 is dest=webhooks a batch request of 100 at a time, as a
// batching destination of that size leases and records.
func BenchmarkLeaseComplete(b *testing.B) {
	for _, dest := range []string{store.DestinationWebhooks, ""} {
		b.Run("dest="+cmpOr(dest, "every"), func(b *testing.B) { benchLeaseComplete(b, dest, 64) })
	}
	b.Run("batch=100", func(b *testing.B) { benchLeaseComplete(b, store.DestinationWebhooks, 100) })
}

// cmpOr is s, or or when s is empty.
func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

func benchLeaseComplete(b *testing.B, dest string, group int) {
	ctx := context.Background()
	s := openBench(b)
	total := b.N * group
	for n := 0; n*1000 < total; n++ {
		if err := s.Ingest(ctx, benchBatch(0, n, min(1000, total-n*1000))); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	var leasing, completing time.Duration
	for done := 0; done < total; {
		t := time.Now()
		ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: "web", Destination: dest, Limit: group,
			Now: time.Now(), TTL: time.Minute})
		if err != nil || len(ds) == 0 {
			b.Fatalf("lease after %d of %d: %d, %v", done, total, len(ds), err)
		}
		leasing += time.Since(t)
		t = time.Now()
		cs := make([]store.Completion, len(ds))
		for i, d := range ds {
			cs[i] = store.Completion{ID: d.ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t,
				Records: []store.Attempt{{Delivery: 1, URL: "http://127.0.0.1/hook", Start: t, Latency: time.Millisecond,
					Status: 200, Class: "http_2xx", Excerpt: []byte("ok"), Outcome: "delivered"}}}
		}
		if err := s.Complete(ctx, cs); err != nil {
			b.Fatal(err)
		}
		completing += time.Since(t)
		done += len(ds)
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "deliveries/s")
	b.ReportMetric(float64(leasing.Nanoseconds())/1e3/float64(total), "lease-µs/delivery")
	b.ReportMetric(float64(completing.Nanoseconds())/1e3/float64(total), "complete-µs/delivery")
}

// BenchmarkWALPerEvent measures what ingest writes to the WAL per event:
// messages of about 800 bytes with random ids, 330 a commit (the groups
// the 8-client serve bench makes), into the messages table as it is (with
// its unique index on (source, message_id)) and without that index. It
// is the reason ingest waits on its commits: every random id lands on an
// index page of its own.
func BenchmarkWALPerEvent(b *testing.B) {
	for _, tc := range []struct{ name, unique string }{{"unique", ", UNIQUE (source, message_id)"}, {"no-index", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "wal.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if _, err := db.Exec(`CREATE TABLE messages (id INTEGER PRIMARY KEY, source TEXT NOT NULL, message_id TEXT NOT NULL,
				type TEXT NOT NULL, user_id TEXT NOT NULL, received_at INTEGER NOT NULL, body BLOB NOT NULL` + tc.unique + `)`); err != nil {
				b.Fatal(err)
			}
			body := bytes.Repeat([]byte("x"), 800)
			rng := rand.New(rand.NewPCG(1, 2))
			const perCommit = 330
			b.ResetTimer()
			for range b.N {
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				for range perCommit {
					id := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
					if _, err := tx.Exec(`INSERT INTO messages (source, message_id, type, user_id, received_at, body) VALUES (?, ?, ?, ?, ?, ?)`,
						"web", id, "track", "user-1", 1, body); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			fi, err := os.Stat(path + "-wal")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(fi.Size())/float64(b.N*perCommit), "WAL-bytes/event")
		})
	}
}

// BenchmarkLeaseCaughtUp: a lane that has caught up leases what just
// arrived while 128 deliveries are in flight at the head of the due index:
// the lease finds too few after its cursor and reads from the start. It
// leases the webhooks destination, as the forwarder does.
func BenchmarkLeaseCaughtUp(b *testing.B) {
	ctx := context.Background()
	s := openBench(b)
	if err := s.Ingest(ctx, benchBatch(0, 0, 128)); err != nil {
		b.Fatal(err)
	}
	if ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: "web", Destination: store.DestinationWebhooks, Limit: 128, Now: time.Now(), TTL: time.Hour}); err != nil || len(ds) != 128 {
		b.Fatalf("lease in flight: %d, %v", len(ds), err)
	}
	var leasing time.Duration
	b.ResetTimer()
	for n := range b.N {
		if err := s.Ingest(ctx, benchBatch(1, n, 1)); err != nil {
			b.Fatal(err)
		}
		t := time.Now()
		ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: "web", Destination: store.DestinationWebhooks, Limit: 64,
			Now: time.Now(), TTL: time.Hour})
		leasing += time.Since(t)
		if err != nil || len(ds) != 1 {
			b.Fatalf("lease: %d, %v", len(ds), err)
		}
		if err := s.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: t}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(leasing.Nanoseconds())/1e3/float64(b.N), "lease-µs")
}

// BenchmarkLeaseDestination: one destination of a source leases 64 just
// arrived, and completes them, while another destination of the source
// (paused) holds a backlog due before them; it reports the µs per Lease,
// which the backlog must not change.
func BenchmarkLeaseDestination(b *testing.B) {
	for _, backlog := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			ctx := context.Background()
			s := openBench(b)
			for n := 0; n*1000 < backlog; n++ {
				msgs := benchBatch(0, n, 1000)
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
				msgs := benchBatch(1, n, 64)
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
			b.ReportMetric(float64(leasing.Nanoseconds())/1e3/float64(b.N), "lease-µs")
		})
	}
}

// BenchmarkIngestDestinations: BenchmarkIngest into a source with one
// destination, and with ten, each message routed to one of them in turn
// (bench/serve's destinations rows, measured in the store alone); with
// overlap, every other message to the next one too (1.5 deliveries a
// message).
func BenchmarkIngestDestinations(b *testing.B) {
	for _, c := range []struct {
		n       int
		overlap bool
	}{{1, false}, {10, false}, {10, true}} {
		name := fmt.Sprintf("dests=%d", c.n)
		if c.overlap {
			name += "/overlap"
		}
		b.Run(name, func(b *testing.B) {
			n := c.n
			names := make([][]string, n)
			for i := range names {
				names[i] = []string{fmt.Sprintf("dest-%02d", i)}
				if c.overlap && i%2 == 1 {
					names[i] = append(names[i], fmt.Sprintf("dest-%02d", (i+1)%n))
				}
			}
			benchIngest(b, openBench(b), func(msgs []store.Message) {
				for i := range msgs {
					msgs[i].Destinations = names[i%n]
				}
			})
		})
	}
}
