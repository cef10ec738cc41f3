package serve

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/pkg/store"
)

func TestLogSummaries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := NewMetrics("web")
		var out syncbuf.Buffer
		log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); logSummaries(ctx, m, time.Minute, log) }()

		step := func() string {
			time.Sleep(time.Minute) // the bubble's clock: no real wait
			synctest.Wait()
			return out.Take()
		}
		if got := step(); got != "" {
			t.Errorf("idle minute logged %q", got)
		}
		m.Ingested("web", 3)
		m.Finished("web", 1, store.Delivered, false)
		m.Finished("web", 1, store.Pending, true)
		m.Finished("web", 1, store.Dead, false)
		m.EndpointState("web", "https://hooks.example.com/a", store.EndpointOpen)
		want := "level=INFO msg=summary last=1m0s ingested=3 delivered=1 retrying=1 failed=1 failing_endpoints=1\n"
		if got := step(); got != want {
			t.Errorf("got %q\nwant %q", got, want)
		}
		// Counts are per interval; a failing endpoint keeps a line coming.
		if got, want := step(), "ingested=0 delivered=0 retrying=0 failed=0 failing_endpoints=1"; !strings.Contains(got, want) {
			t.Errorf("got %q, want it to hold %q", got, want)
		}
		m.EndpointState("web", "https://hooks.example.com/a", store.EndpointClosed)
		if got := step(); got != "" {
			t.Errorf("recovered and idle, logged %q", got)
		}
		cancel()
		<-done
	})
}

func TestLogSummariesOff(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	go func() { defer close(done); logSummaries(t.Context(), NewMetrics(), 0, slog.New(slog.DiscardHandler)) }()
	<-done // returns at once
}
