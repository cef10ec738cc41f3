package analytics_test

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
)

var throughput = flag.Bool("throughput", false, "run TestThroughput: 1,000,000 events into a null server")

// typicalTrack encodes to about 350 bytes once id, timestamp and
// context.library are added.
func typicalTrack() message.Track {
	return message.Track{
		UserId: "user_8f14e45f",
		Event:  "Order Completed",
		Properties: map[string]any{
			"order_id": "ord_0042", "total": 129.95, "currency": "EUR",
			"products": []any{map[string]any{"sku": "SKU-1", "price": 129.95, "quantity": 1}},
		},
		Context: map[string]any{"ip": "203.0.113.7", "locale": "en-US"},
	}
}

const typicalLine = `{"type":"track","userId":"user_8f14e45f","event":"Order Completed","properties":{"order_id":"ord_0042","total":129.95,"currency":"EUR","products":[{"sku":"SKU-1","price":129.95,"quantity":1}]},"context":{"ip":"203.0.113.7","locale":"en-US"}}`

func BenchmarkEnqueue(b *testing.B) {
	c, err := analytics.New(analytics.Config{WriteKey: "k", Stub: true, MaxQueueSize: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	m := typicalTrack()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Track(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEnqueueRaw(b *testing.B) {
	c, err := analytics.New(analytics.Config{WriteKey: "k", Stub: true, MaxQueueSize: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	line := []byte(typicalLine)
	b.ReportAllocs()
	for b.Loop() {
		r, err := message.ParseRaw(line)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.EnqueueWait(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTypicalTrackSize(t *testing.T) {
	m := typicalTrack()
	m.MessageId, m.Timestamp = "0b9a9c4c-2b1f-4a4e-9a52-6f2b4f1f6a10", fixedNow
	b, err := m.AppendJSON(nil, &message.EncodeOptions{Library: message.LibraryJSON("evfwd", "1.0.0")})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 300 || len(b) > 400 {
		t.Errorf("typical track is %d bytes, want about 350", len(b))
	}
}

// TestThroughput pushes 1,000,000 events through a client into an
// in-process server that discards bodies, and prints events/s, MB/s and
// the peak live heap. Run: go test -run TestThroughput -throughput -v
func TestThroughput(t *testing.T) {
	if !*throughput {
		t.Skip("pass -throughput to run")
	}
	const events = 1_000_000
	t.Logf("%-22s %10s %12s %9s %9s %14s", "producer, batch", "batches", "events/s", "MB/s", "peak heap", "alloc/event")
	for _, tc := range []struct {
		name  string
		batch int
		raw   bool
	}{
		{"typed Track, 100", 100, false},
		{"typed Track, max", 1 << 20, false},
		{"raw line, 100", 100, true},
		{"raw line, max", 1 << 20, true},
	} {
		var bodyBytes, requests atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			bodyBytes.Add(n)
			requests.Add(1)
			io.WriteString(w, `{"success":true}`)
		}))
		c, err := analytics.New(analytics.Config{WriteKey: "k", Endpoint: srv.URL, BatchSize: tc.batch})
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := make(chan struct{})
		peak := make(chan uint64)
		go samplePeakHeap(stop, peak)

		start := time.Now()
		m := typicalTrack()
		line := []byte(typicalLine)
		ctx := context.Background()
		for i := 0; i < events; i++ {
			if tc.raw {
				r, err := message.ParseRaw(line)
				if err != nil {
					t.Fatal(err)
				}
				err = c.EnqueueWait(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				continue
			}
			for {
				err := c.Track(m)
				if err == nil {
					break
				}
				// Back-pressure for typed calls: wait out what is queued.
				if err := c.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		close(stop)
		peakHeap := <-peak
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		srv.Close()
		st := c.Stats()
		if st.Sent != events {
			t.Fatalf("%s: sent %d of %d (%+v)", tc.name, st.Sent, events, st)
		}
		t.Logf("%-22s %10d %12.0f %9.1f %8.1fM %14.2f", tc.name, requests.Load(),
			events/elapsed.Seconds(), float64(bodyBytes.Load())/1e6/elapsed.Seconds(),
			float64(peakHeap)/(1<<20), float64(after.Mallocs-before.Mallocs)/events)
	}
}

// samplePeakHeap reports the largest live heap (objects in use) seen
// every millisecond until stop closes; runtime/metrics reads it without
// stopping the world.
func samplePeakHeap(stop <-chan struct{}, out chan<- uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		metrics.Read(s)
		peak = max(peak, s[0].Value.Uint64())
		select {
		case <-stop:
			out <- peak
			return
		case <-tick.C:
		}
	}
}
