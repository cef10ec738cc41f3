package serve

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// DefaultLogInterval is how often `evfwd serve` logs what it did, at INFO.
const DefaultLogInterval = time.Minute

// Totals are the service's counts since it started, over all sources, and
// how many endpoints are failing (open or half-open) now.
type Totals struct {
	Ingested, Delivered, Retried, Failed, Dead int64
	FailingEndpoints                           int
}

// Totals reads the counters the metrics hold.
func (m *Metrics) Totals() Totals {
	sum := func(c prometheus.Collector) (n int64) {
		each(c, func(d *dto.Metric) { n += int64(d.GetCounter().GetValue()) })
		return n
	}
	t := Totals{Ingested: sum(m.ingested), Delivered: sum(m.delivered), Retried: sum(m.retried), Failed: sum(m.failed), Dead: sum(m.dead)}
	each(m.endpointState, func(d *dto.Metric) {
		if d.GetGauge().GetValue() != 0 {
			t.FailingEndpoints++
		}
	})
	return t
}

// each calls fn with every series c collects.
func each(c prometheus.Collector, fn func(*dto.Metric)) {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			fn(&d)
		}
	}
}

// logSummaries logs, every interval until ctx ends, one INFO line with
// what happened since the last one, so that a running serve shows it is
// working without a line per event. An idle interval (no counts, no
// failing endpoint) logs nothing; interval <= 0 turns the lines off.
func logSummaries(ctx context.Context, m *Metrics, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := m.Totals()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := m.Totals()
		d := Totals{
			Ingested: now.Ingested - last.Ingested, Delivered: now.Delivered - last.Delivered,
			Retried: now.Retried - last.Retried, Failed: now.Failed - last.Failed, Dead: now.Dead - last.Dead,
			FailingEndpoints: now.FailingEndpoints,
		}
		last = now
		if d == (Totals{}) {
			continue
		}
		log.Info("summary", "last", interval, "ingested", d.Ingested, "delivered", d.Delivered,
			"retrying", d.Retried, "failed", d.Failed+d.Dead, "failing_endpoints", d.FailingEndpoints)
	}
}
