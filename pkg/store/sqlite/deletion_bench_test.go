package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// BenchmarkCreateDeletion measures a deletion request on a source holding
// many messages: messages are not indexed by user (see migration 2), so
// this is the scan a deletion pays for faster ingest.
func BenchmarkCreateDeletion(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, b.TempDir()+"/evfwd.db", sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			body := []byte(`{"type":"track","userId":"u","event":"E","properties":{"total":129.95}}`)
			batch := make([]store.Message, 0, 1000)
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
			b.ResetTimer()
			for i := range b.N {
				_, err := s.CreateDeletion(ctx, store.DeletionRequest{ID: fmt.Sprint("del", i), UserID: fmt.Sprint("u", i),
					CreatedAt: time.Now(), Sources: []string{"web"}})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
