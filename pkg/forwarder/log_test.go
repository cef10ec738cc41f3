package forwarder

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// A finished delivery's log line names a next attempt only when one is
// scheduled: a dead delivery once logged next=0001-01-01T00:00:00.000Z.
func TestDeliveryLogOmitsZeroFields(t *testing.T) {
	next := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		c    store.Completion
		want string
	}{
		{"dead", store.Completion{ID: 7, Status: store.Dead, Attempts: 3, LastError: "http://x: HTTP 500"},
			`level=WARN msg=delivery source=web delivery=7 status=dead attempts=3 error="http://x: HTTP 500"`},
		{"retry", store.Completion{ID: 7, Status: store.Pending, Attempts: 1, NextAttempt: next, LastError: "http://x: HTTP 500"},
			`level=WARN msg=delivery source=web delivery=7 status=pending attempts=1 next=2024-05-01T12:00:00.000Z error="http://x: HTTP 500"`},
		{"delivered", store.Completion{ID: 7, Status: store.Delivered, Attempts: 1},
			`level=WARN msg=delivery source=web delivery=7 status=delivered attempts=1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			noTime := func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}
			log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: noTime}))
			log.Log(context.Background(), slog.LevelWarn, "delivery", deliveryLog("web", tt.c)...)
			if got := b.String(); got != tt.want+"\n" {
				t.Errorf("log line\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
