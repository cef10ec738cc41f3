package loadgen

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHistogram(t *testing.T) {
	var h Histogram
	for i := 100; i >= 1; i-- { // out of order: Record does not sort
		h.Record(time.Duration(i) * time.Millisecond)
	}
	got := []time.Duration{h.Percentile(0.5), h.Percentile(0.9), h.Percentile(0.99), h.Percentile(1)}
	if diff := cmp.Diff([]time.Duration{50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond}, got); diff != "" {
		t.Errorf("percentiles mismatch (-want +got):\n%s", diff)
	}
	want := []Bucket{
		{Above: 500 * time.Microsecond, UpTo: time.Millisecond, Count: 1},
		{Above: time.Millisecond, UpTo: 2 * time.Millisecond, Count: 1},
		{Above: 2 * time.Millisecond, UpTo: 5 * time.Millisecond, Count: 3},
		{Above: 5 * time.Millisecond, UpTo: 10 * time.Millisecond, Count: 5},
		{Above: 10 * time.Millisecond, UpTo: 20 * time.Millisecond, Count: 10},
		{Above: 20 * time.Millisecond, UpTo: 50 * time.Millisecond, Count: 30},
		{Above: 50 * time.Millisecond, UpTo: 100 * time.Millisecond, Count: 50},
	}
	if diff := cmp.Diff(want, h.Buckets()); diff != "" {
		t.Errorf("buckets mismatch (-want +got):\n%s", diff)
	}
}

func TestHistogramEdges(t *testing.T) {
	var empty Histogram
	if p, b := empty.Percentile(0.5), empty.Buckets(); p != 0 || b != nil {
		t.Errorf("empty: p50 %v, buckets %v; want 0, none", p, b)
	}
	var a, b Histogram
	a.Record(100 * time.Microsecond)
	a.Record(5 * time.Second) // on the last bound: inside it
	b.Record(7 * time.Second)
	a.Merge(&b)
	want := []Bucket{
		{UpTo: 500 * time.Microsecond, Count: 1},
		{Above: 2500 * time.Millisecond, UpTo: 5 * time.Second, Count: 1},
		{Above: 5 * time.Second, Count: 1},
	}
	if diff := cmp.Diff(want, a.Buckets()); diff != "" {
		t.Errorf("buckets mismatch (-want +got):\n%s", diff)
	}
	if got := []any{a.Count(), a.Percentile(0.01), a.Percentile(1)}; !cmp.Equal(got, []any{3, 100 * time.Microsecond, 7 * time.Second}) {
		t.Errorf("count, min, max = %v", got)
	}
}

// BenchmarkHistogram is what a load test of 10,000 messages costs: each
// latency recorded, then the four percentiles and the buckets of the
// summary.
func BenchmarkHistogram(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 10_000)
	for i := range lat {
		lat[i] = time.Duration(r.ExpFloat64() * float64(5*time.Millisecond))
	}
	b.ReportAllocs()
	for b.Loop() {
		var h Histogram
		for _, d := range lat {
			h.Record(d)
		}
		_ = h.Percentile(0.5) + h.Percentile(0.9) + h.Percentile(0.99) + h.Percentile(1)
		_ = h.Buckets()
	}
}
