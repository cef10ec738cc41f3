package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
)

// BenchmarkCreateDeletion measures a deletion request on a table of many
// messages (bodies of about 400 bytes) while one client ingests a message
// at a time, and reports the longest such ingest: the deletion's rewrite
// of messages (VACUUM FULL, see deletion.go) holds its lock that long.
func BenchmarkCreateDeletion(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, err := postgres.Open(ctx, pgtest.URL(b), postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			body := []byte(fmt.Sprintf(`{"type":"track","userId":"u","event":"Order Completed","properties":{"total":129.95,"note":%q}}`,
				"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit."))
			batch := make([]store.Message, 0, 5000)
			for i := range n {
				batch = append(batch, store.Message{Source: "web", MessageID: fmt.Sprint("m", i), Type: "track",
					UserID: fmt.Sprint("u", i%50_000), ReceivedAt: time.Now(), Body: body, Destinations: []string{store.DestinationWebhooks}})
				if len(batch) == cap(batch) {
					if err := s.Ingest(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			stop, worst := make(chan struct{}), make(chan time.Duration)
			go func() {
				var w time.Duration
				for i := 0; ; i++ {
					select {
					case <-stop:
						worst <- w
						return
					default:
					}
					start := time.Now()
					if err := s.Ingest(ctx, []store.Message{{Source: "web", MessageID: fmt.Sprint("x", i), Type: "track", UserID: "x",
						ReceivedAt: time.Now(), Body: body}}); err != nil {
						b.Error(err)
					}
					w = max(w, time.Since(start))
					time.Sleep(time.Millisecond)
				}
			}()
			b.ResetTimer()
			for i := range b.N {
				_, err := s.CreateDeletion(ctx, store.DeletionRequest{ID: fmt.Sprint("del", i), UserID: fmt.Sprint("u", i),
					CreatedAt: time.Now(), Sources: []string{"web"}})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			b.ReportMetric(float64((<-worst).Milliseconds()), "ingest-max-ms")
		})
	}
}
