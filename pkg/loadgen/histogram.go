package loadgen

import (
	"slices"
	"time"
)

// bounds are the inclusive upper bounds of the histogram's buckets.
var bounds = [...]time.Duration{
	500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
	5 * time.Second,
}

// Histogram keeps every latency recorded, so percentiles are exact rather
// than interpolated from buckets; a load test's few thousand to a few
// million samples fit in memory. The zero value is empty and ready. It is
// not safe for concurrent use: give each goroutine its own and Merge.
type Histogram struct {
	samples []time.Duration
	sorted  bool
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	h.samples = append(h.samples, d)
	h.sorted = false
}

// Merge adds every latency of o.
func (h *Histogram) Merge(o *Histogram) {
	h.samples = append(h.samples, o.samples...)
	h.sorted = false
}

// Count is the number of latencies recorded.
func (h *Histogram) Count() int { return len(h.samples) }

func (h *Histogram) sort() []time.Duration {
	if !h.sorted {
		slices.Sort(h.samples)
		h.sorted = true
	}
	return h.samples
}

// Percentile returns the nearest-rank percentile p (0 < p ≤ 1: 0.99 is
// p99, 1 the maximum), or 0 when nothing was recorded.
func (h *Histogram) Percentile(p float64) time.Duration {
	s := h.sort()
	if len(s) == 0 {
		return 0
	}
	k := int(float64(len(s))*p+0.999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// Bucket counts the latencies d with Above < d ≤ UpTo. The last bucket
// has UpTo 0: it counts everything over the last bound (Above).
type Bucket struct {
	Above, UpTo time.Duration
	Count       int
}

// Buckets counts the latencies in fixed buckets, 500µs to 5s at about
// twice the bound each, leaving out the empty ones.
func (h *Histogram) Buckets() []Bucket {
	s := h.sort()
	var out []Bucket
	i := 0
	var above time.Duration
	for _, b := range bounds {
		j := i
		for j < len(s) && s[j] <= b {
			j++
		}
		if j > i {
			out = append(out, Bucket{Above: above, UpTo: b, Count: j - i})
		}
		i, above = j, b
	}
	if i < len(s) {
		out = append(out, Bucket{Above: above, Count: len(s) - i})
	}
	return out
}
