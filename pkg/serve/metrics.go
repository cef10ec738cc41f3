package serve

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// latencyBuckets are the upper bounds, in seconds, of the attempt latency
// histogram: from a local receiver's millisecond to the 5 s deadline.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// statsTimeout bounds the store's part of one scrape.
const statsTimeout = 5 * time.Second

// Metrics counts what the service does, per source, in a Prometheus
// registry of its own (with the Go runtime and process collectors), and
// serves it with the store's queue gauges (see Handler). It implements
// forwarder.Observer.
type Metrics struct {
	reg                                        *prometheus.Registry
	ingested, delivered, retried, failed, dead *prometheus.CounterVec
	latency                                    *prometheus.HistogramVec
	pruned                                     prometheus.Counter
	endpointState                              *prometheus.GaugeVec
	skipped                                    *prometheus.CounterVec
	dest                                       destinationMetrics

	mu      sync.RWMutex
	sources map[string]*sourceMetrics

	// health, once storeUp has set it, is what a scrape asks before it
	// queries the store: while the store is known to be unreachable, the
	// queue gauges are left out at once rather than after statsTimeout.
	health *forwarder.StoreHealth
}

// sourceMetrics are one source's series, looked up once.
type sourceMetrics struct {
	ingested, delivered, retried, failed, dead prometheus.Counter
	latency                                    prometheus.Observer
}

// NewMetrics returns empty metrics for the named sources: each is exposed,
// at zero, from the start.
func NewMetrics(sources ...string) *Metrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"source"})
	}
	m := &Metrics{
		reg:       prometheus.NewRegistry(),
		ingested:  counter("evfwd_ingested_total", "Messages stored by the collection API."),
		delivered: counter("evfwd_delivered_total", "Deliveries an endpoint accepted."),
		retried:   counter("evfwd_retried_total", "Deliveries scheduled for another attempt."),
		failed:    counter("evfwd_failed_total", "Deliveries that failed finally (4xx, 3xx, TLS)."),
		dead:      counter("evfwd_dead_total", "Deliveries whose retry window closed."),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "evfwd_attempt_duration_seconds", Help: "Latency of one webhook POST.", Buckets: latencyBuckets,
		}, []string{"source"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "evfwd_pruned_messages_total",
			Help: "Finished messages removed, with their deliveries and attempts, once older than the retention window."}),
		endpointState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "evfwd_endpoint_state",
			Help: "Health of each webhook endpoint in this process: 0 closed, 1 open (requests skipped), 2 half-open (a probe in flight)."},
			[]string{"source", "url"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evfwd_endpoint_skipped_total",
			Help: "Requests not made because their endpoint was open."}, []string{"source", "url"}),
		sources: map[string]*sourceMetrics{},
	}
	m.reg.MustRegister(m.ingested, m.delivered, m.retried, m.failed, m.dead, m.latency, m.pruned, m.endpointState, m.skipped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.dest = newDestinationMetrics(m.reg)
	for _, s := range sources {
		m.source(s)
	}
	return m
}

// source returns the series of source, creating them (at zero) the first
// time.
func (m *Metrics) source(name string) *sourceMetrics {
	m.mu.RLock()
	s := m.sources[name]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.sources[name]; s == nil {
		s = &sourceMetrics{
			ingested:  m.ingested.WithLabelValues(name),
			delivered: m.delivered.WithLabelValues(name),
			retried:   m.retried.WithLabelValues(name),
			failed:    m.failed.WithLabelValues(name),
			dead:      m.dead.WithLabelValues(name),
			latency:   m.latency.WithLabelValues(name),
		}
		m.sources[name] = s
	}
	return s
}

// names returns the sources seen so far.
func (m *Metrics) names() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Collect(maps.Keys(m.sources))
}

// Ingested counts n messages stored for source.
func (m *Metrics) Ingested(source string, n int) {
	m.source(source).ingested.Add(float64(n))
}

// Pruned counts n messages removed by retention.
func (m *Metrics) Pruned(n int64) { m.pruned.Add(float64(n)) }

// Attempt implements forwarder.Observer.
func (m *Metrics) Attempt(source string, _ int64, a webhook.Attempt) {
	m.source(source).latency.Observe(a.Latency.Seconds())
}

// Finished implements forwarder.Observer.
func (m *Metrics) Finished(source string, _ int64, status store.Status, retry bool) {
	s := m.source(source)
	switch {
	case retry:
		s.retried.Inc()
	case status == store.Delivered:
		s.delivered.Inc()
	case status == store.Failed:
		s.failed.Inc()
	case status == store.Dead:
		s.dead.Inc()
	}
}

// EndpointState implements forwarder.EndpointObserver: the endpoint's
// gauge, and its skipped counter shown from zero.
func (m *Metrics) EndpointState(source, url string, state store.Health) {
	m.endpointState.WithLabelValues(source, url).Set(forwarder.Gauge(state))
	m.skipped.WithLabelValues(source, url)
}

// Skipped implements forwarder.EndpointObserver.
func (m *Metrics) Skipped(source, url string) { m.skipped.WithLabelValues(source, url).Inc() }

// Handler serves the metrics with promhttp, together with gauges read
// from st at each scrape (see storeCollector); now is the clock the store's
// times are measured against (nil: time.Now). When the store cannot answer,
// or is known to be unreachable (see storeUp), its gauges are left out of
// that scrape, the rest is served, and the error goes to log (when not nil).
func (m *Metrics) Handler(st store.Store, now func() time.Time, log *slog.Logger) http.Handler {
	if now == nil {
		now = time.Now
	}
	storeReg := prometheus.NewRegistry()
	storeReg.MustRegister(&storeCollector{m: m, st: st, now: now})
	opts := promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}
	if log != nil {
		opts.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	return promhttp.HandlerFor(prometheus.Gatherers{m.reg, storeReg}, opts)
}

var (
	queueDepthDesc = prometheus.NewDesc("evfwd_queue_depth",
		"Deliveries pending (due, scheduled or in flight).", []string{"source"}, nil)
	oldestPendingDesc = prometheus.NewDesc("evfwd_oldest_pending_seconds",
		"Age of the oldest pending delivery, since it was stored; 0 when none is pending.", []string{"source"}, nil)
	storeSizeDesc = prometheus.NewDesc("evfwd_store_size_bytes",
		"Size of the store on disk: the SQLite file and its WAL, or evfwd's PostgreSQL tables with their indexes.", nil, nil)
)

// storeCollector reads the queue gauges from the store at scrape time with
// store.Stats, which reads pending deliveries only: a scrape costs the same
// however many finished deliveries the store keeps. Every source the
// metrics know is reported, at 0 when it has nothing pending, and so is any
// other source with pending deliveries (one removed from the config, or
// another node's on a shared store).
type storeCollector struct {
	m   *Metrics
	st  store.Store
	now func() time.Time
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- oldestPendingDesc
	ch <- storeSizeDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if h := c.m.health; h != nil {
		if _, err := h.Unavailable(); err != nil {
			ch <- prometheus.NewInvalidMetric(queueDepthDesc, err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	stats, err := c.st.Stats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queueDepthDesc, err)
		return
	}
	now := c.now()
	seen := make(map[string]bool, len(stats.Pending))
	for _, p := range stats.Pending {
		seen[p.Source] = true
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(p.N), p.Source)
		ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, max(now.Sub(p.Oldest).Seconds(), 0), p.Source)
	}
	for _, name := range c.m.names() {
		if !seen[name] {
			ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, 0, name)
			ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, 0, name)
		}
	}
	ch <- prometheus.MustNewConstMetric(storeSizeDesc, prometheus.GaugeValue, float64(stats.SizeBytes))
}

// uiLoginFailures registers and returns the counter of failed logins at
// the inspector (serve --ui), by reason (inspector.LoginWrongToken,
// inspector.LoginRateLimited).
func (m *Metrics) uiLoginFailures(reasons ...string) *prometheus.CounterVec {
	return m.byReason("evfwd_ui_login_failures_total",
		"Failed logins at the inspector (serve --ui): wrong_token, a wrong admin token; rate_limited, refused (429) after too many.", reasons)
}

// adminAuthFailures registers and returns the counter of requests the
// admin API refused for their token, by reason (admin.AuthWrongToken,
// admin.AuthRateLimited).
func (m *Metrics) adminAuthFailures(reasons ...string) *prometheus.CounterVec {
	return m.byReason("evfwd_admin_auth_failures_total",
		"Admin API requests refused for their token: wrong_token, a wrong admin token; rate_limited, refused (429) after too many.", reasons)
}

// byReason registers a counter labelled by reason, each of reasons at
// zero from the start, so that a scrape shows them before the first.
func (m *Metrics) byReason(name, help string, reasons []string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"reason"})
	for _, r := range reasons {
		c.WithLabelValues(r)
	}
	m.reg.MustRegister(c)
	return c
}
