package demo

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/google/go-cmp/cmp"
)

func TestPipeline(t *testing.T) {
	ctx := context.Background()
	var (
		mu    sync.Mutex
		types []string
	)
	p, err := Start(ctx, Options{Version: "0.0.0-test", OnWebhook: func(r *receiver.Request) {
		if r.Signature.Verdict != receiver.SigValid || r.Status != 200 {
			t.Errorf("%s: signature %s, status %d", r.Type, r.Signature.Verdict, r.Status)
		}
		mu.Lock()
		types = append(types, r.Type)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	events, err := Samples(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Send(ctx, events); err != nil {
		t.Fatal(err)
	}
	r, err := p.Wait(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Report{Sent: 6, Verified: 6}, r); diff != "" || !r.OK() {
		t.Errorf("report mismatch (-want +got):\n%s", diff)
	}
	mu.Lock()
	slices.Sort(types)
	if diff := cmp.Diff([]string{"alias", "group", "identify", "page", "screen", "track"}, types); diff != "" {
		t.Errorf("webhooks mismatch (-want +got):\n%s", diff)
	}
	mu.Unlock()
	store := p.StorePath()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Stat(store); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store left behind: %v", err)
	}
}

// TestWaitInterrupted: an event the destination never gets (webhooks
// disabled for it) keeps Wait waiting until its context ends.
func TestWaitInterrupted(t *testing.T) {
	p, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := message.ParseRaw([]byte(`{"type":"track","userId":"u","event":"E","messageId":"m1","integrations":{"Webhooks":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), []*message.Raw{r}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait: %v, want context.Canceled", err)
	}
}

// An event the client refuses ends Send with its error, and the client is
// closed all the same: its consumer goroutine does not outlive Send.
func TestSendRefusedClosesClient(t *testing.T) {
	ctx := context.Background()
	p, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	event := func(props string) *message.Raw {
		r, err := message.ParseRaw([]byte(`{"type":"track","userId":"u","event":"E","properties":{"p":"` + props + `"}}`))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	client, err := analytics.New(analytics.Config{WriteKey: writeKey, Endpoint: p.ServeURL()})
	if err != nil {
		t.Fatal(err)
	}
	err = p.send(ctx, client, []*message.Raw{event("ok"), event(strings.Repeat("x", 40<<10))})
	if se := (*message.SizeError)(nil); !errors.As(err, &se) {
		t.Fatalf("send: %v, want a *message.SizeError", err)
	}
	if err := client.Enqueue(event("late")); !errors.Is(err, analytics.ErrClosed) {
		client.Close(ctx)
		t.Errorf("client still open after a refused event: Enqueue gave %v", err)
	}
	if err := p.Send(ctx, []*message.Raw{event(strings.Repeat("x", 40<<10))}); err == nil {
		t.Error("Send of an oversized event succeeded")
	}
}

// Close may be called again (cmd/demo defers it, Start calls it on
// failure): it returns the first call's result rather than blocking.
func TestCloseTwice(t *testing.T) {
	p, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := p.Close()
	if err := p.Close(); err != first {
		t.Errorf("second Close: %v, want %v", err, first)
	}
}
