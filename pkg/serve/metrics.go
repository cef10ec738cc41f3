package serve

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// latencyBuckets are the upper bounds, in seconds, of the attempt latency
// histogram: from a local receiver's millisecond to the 5 s deadline.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Metrics counts what the service does, per source, and writes it in the
// Prometheus text format. It implements forwarder.Observer.
type Metrics struct {
	mu      sync.Mutex
	sources map[string]*sourceMetrics
}

type sourceMetrics struct {
	ingested, delivered, retried, failed, dead uint64
	attempts                                   uint64
	latencySum                                 float64
	buckets                                    []uint64 // cumulative at write time, not here
}

// NewMetrics returns empty metrics for the named sources.
func NewMetrics(sources ...string) *Metrics {
	m := &Metrics{sources: map[string]*sourceMetrics{}}
	for _, s := range sources {
		m.source(s)
	}
	return m
}

func (m *Metrics) source(name string) *sourceMetrics {
	s := m.sources[name]
	if s == nil {
		s = &sourceMetrics{buckets: make([]uint64, len(latencyBuckets))}
		m.sources[name] = s
	}
	return s
}

// Ingested counts n messages stored for source.
func (m *Metrics) Ingested(source string, n int) {
	m.mu.Lock()
	m.source(source).ingested += uint64(n)
	m.mu.Unlock()
}

// Attempt implements forwarder.Observer.
func (m *Metrics) Attempt(source string, a webhook.Attempt) {
	sec := a.Latency.Seconds()
	m.mu.Lock()
	s := m.source(source)
	s.attempts++
	s.latencySum += sec
	if i, _ := slices.BinarySearch(latencyBuckets, sec); i < len(latencyBuckets) {
		s.buckets[i]++
	}
	m.mu.Unlock()
}

// Finished implements forwarder.Observer.
func (m *Metrics) Finished(source string, status store.Status, retry bool) {
	m.mu.Lock()
	s := m.source(source)
	switch {
	case retry:
		s.retried++
	case status == store.Delivered:
		s.delivered++
	case status == store.Failed:
		s.failed++
	case status == store.Dead:
		s.dead++
	}
	m.mu.Unlock()
}

// Write writes every metric; queue depth comes from the store.
func (m *Metrics) Write(ctx context.Context, w io.Writer, st store.Store) error {
	depth := map[string]int64{}
	if counts, err := st.Counts(ctx); err == nil {
		for _, c := range counts {
			if c.Status == store.Pending {
				depth[c.Source] += c.N
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.sources))
	for n := range m.sources {
		names = append(names, n)
	}
	slices.Sort(names)
	counter := func(name, help string, get func(*sourceMetrics) uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		for _, n := range names {
			fmt.Fprintf(w, "%s{source=%q} %d\n", name, n, get(m.sources[n]))
		}
	}
	counter("evfwd_ingested_total", "Messages stored by the collection API.", func(s *sourceMetrics) uint64 { return s.ingested })
	counter("evfwd_delivered_total", "Deliveries an endpoint accepted.", func(s *sourceMetrics) uint64 { return s.delivered })
	counter("evfwd_retried_total", "Deliveries scheduled for another attempt.", func(s *sourceMetrics) uint64 { return s.retried })
	counter("evfwd_failed_total", "Deliveries that failed finally (4xx, 3xx, TLS).", func(s *sourceMetrics) uint64 { return s.failed })
	counter("evfwd_dead_total", "Deliveries whose retry window closed.", func(s *sourceMetrics) uint64 { return s.dead })
	fmt.Fprintf(w, "# HELP evfwd_queue_depth Deliveries pending (due, scheduled or in flight).\n# TYPE evfwd_queue_depth gauge\n")
	for _, n := range names {
		fmt.Fprintf(w, "evfwd_queue_depth{source=%q} %d\n", n, depth[n])
	}
	fmt.Fprintf(w, "# HELP evfwd_attempt_duration_seconds Latency of one webhook POST.\n# TYPE evfwd_attempt_duration_seconds histogram\n")
	for _, n := range names {
		s := m.sources[n]
		var cum uint64
		for i, le := range latencyBuckets {
			cum += s.buckets[i]
			fmt.Fprintf(w, "evfwd_attempt_duration_seconds_bucket{source=%q,le=\"%g\"} %d\n", n, le, cum)
		}
		fmt.Fprintf(w, "evfwd_attempt_duration_seconds_bucket{source=%q,le=\"+Inf\"} %d\n", n, s.attempts)
		fmt.Fprintf(w, "evfwd_attempt_duration_seconds_sum{source=%q} %g\n", n, s.latencySum)
		fmt.Fprintf(w, "evfwd_attempt_duration_seconds_count{source=%q} %d\n", n, s.attempts)
	}
	return nil
}
