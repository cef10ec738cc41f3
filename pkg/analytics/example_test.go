package analytics_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
)

// A client queues calls and sends them in batches in the background; Close
// flushes what is queued before the program exits.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"success":true}`) // a Segment-compatible collection API
	}))
	defer api.Close()

	client, err := analytics.New(analytics.Config{
		WriteKey: "wk_live_123",
		Endpoint: api.URL,
		OnError:  func(status int, msg string) { log.Printf("analytics: %d %s", status, msg) },
	})
	if err != nil {
		log.Fatal(err)
	}
	client.Track(message.Track{
		UserId:     "u_42",
		Event:      "Order Completed",
		Properties: map[string]any{"total": 129.95, "currency": "EUR"},
		Timestamp:  time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), // historical import
	})
	if err := client.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("sent %d\n", client.Stats().Sent)
	// Output: sent 1
}
