package analytics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/evfwd/evfwd/pkg/message"
)

// Abandon called from OnBatch stops the client before its next request:
// what was queued fails without one, and new messages are refused.
func TestAbandonFromOnBatch(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(401)
	}))
	defer srv.Close()
	var c *Client
	var closed atomic.Int32
	release := make(chan struct{})
	c, err := New(Config{WriteKey: "k", Endpoint: srv.URL, BatchSize: 10, OnBatch: func(res BatchResult) {
		<-release // the whole queue is there before the first answer counts
		if errors.Is(res.Err, ErrClosed) {
			closed.Add(int32(len(res.Tags)))
		}
		c.Abandon()
	}})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := c.Track(message.Track{UserId: "u", Event: "e"}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	c.Flush(context.Background())
	if err := c.Track(message.Track{UserId: "u", Event: "e"}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Abandon: %v, want ErrClosed", err)
	}
	c.Close(context.Background())
	if st := c.Stats(); requests.Load() != 1 || st.Failed != 100 || closed.Load() < 90 {
		t.Errorf("%d requests, %d closed, stats %+v", requests.Load(), closed.Load(), st)
	}
}
