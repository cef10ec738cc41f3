package inspector_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
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

// BenchmarkFirstStats is the first GET /api/stats of a serve just started,
// which reads the hour before from the store: at the bound, 2,000
// deliveries of that hour with an attempt each, on SQLite.
func BenchmarkFirstStats(b *testing.B) {
	created := time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC)
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "evfwd.db"), sqlite.Options{Now: func() time.Time { return created }})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	const n = 2000
	var msgs []store.Message
	for i := range n {
		msgs = append(msgs, storetest.Msg("web", fmt.Sprintf("m%d", i), 0, true))
	}
	if err := st.Ingest(ctx, msgs); err != nil {
		b.Fatal(err)
	}
	ds, err := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: n, Now: created, TTL: time.Hour})
	if err != nil || len(ds) != n {
		b.Fatalf("Lease: %v, %d", err, len(ds))
	}
	var cs []store.Completion
	for _, d := range ds {
		cs = append(cs, store.Completion{ID: d.ID, Owner: "o", Status: store.Delivered, Attempts: 1, FirstAttempt: created,
			Records: []store.Attempt{{Delivery: 1, URL: okURL, Start: created, Latency: time.Millisecond, Status: 200, Outcome: "delivered"}}})
	}
	if err := st.Complete(ctx, cs); err != nil {
		b.Fatal(err)
	}
	const addr = "127.0.0.1:8789"
	for b.Loop() {
		insp, err := inspector.NewServe(inspector.ServeConfig{Addr: addr, Token: adminToken, Store: st,
			Now: func() time.Time { return created.Add(30 * time.Minute) }, Sources: []inspector.ServeSource{{Name: "web", Webhooks: true, Endpoints: []string{okURL}}}})
		if err != nil {
			b.Fatal(err)
		}
		r := httptest.NewRequest("GET", "http://"+addr+"/api/stats", nil)
		r.Header.Set("Authorization", "Bearer "+adminToken)
		w := httptest.NewRecorder()
		insp.ServeHTTP(w, r)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"delivered":2000`) {
			b.Fatalf("%d %.300s", w.Code, w.Body)
		}
		insp.Close()
	}
}
