package inspector_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/receiver"
)

// BenchmarkAdd is what listen --ui adds to each request: encoding its
// record line (shared with --record and -o json), keeping it and
// publishing it, with no page watching and with one.
func BenchmarkAdd(b *testing.B) {
	for _, watching := range []bool{false, true} {
		name := "unwatched"
		if watching {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			insp := inspector.NewListen(inspector.ListenConfig{})
			defer insp.Close()
			if watching {
				stop := inspector.Watch(insp)
				defer stop()
			}
			r := &receiver.Request{ReceivedAt: time.Unix(1, 0), Method: "POST", Path: "/hooks",
				Header: http.Header{"Content-Type": {"application/json"}, "X-Signature": {"5b7f0c2e9a1d3f4b6c8e0a2b4d6f8a0c2e4b6d8f"}},
				Body:   []byte(track), Size: len(track), Type: "track", Event: "Order Completed", UserID: "u1", MessageID: "m1",
				Signature: receiver.Signature{Verdict: receiver.SigValid, Scheme: "segment", Reason: "ok"}, Shape: receiver.Shape{OK: true}, Status: 200}
			b.ReportAllocs()
			for b.Loop() {
				req := *r // a request's record line is encoded once, here
				insp.Add(&req)
			}
		})
	}
}
