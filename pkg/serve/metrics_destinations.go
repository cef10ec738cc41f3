package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/store"
)

// destinationMetrics are the series labelled by destination: what each
// destination's deliveries came to, and whether it is paused.
type destinationMetrics struct {
	settled *prometheus.CounterVec
	paused  *prometheus.GaugeVec
}

func newDestinationMetrics(reg *prometheus.Registry) destinationMetrics {
	d := destinationMetrics{
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evfwd_destination_deliveries_total",
			Help: "Delivery attempts' outcomes by destination: delivered, retried (another attempt scheduled), failed, dead."},
			[]string{"source", "destination", "outcome"}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "evfwd_destination_paused",
			Help: "1 while a destination is paused in this process (it sends nothing; its deliveries wait)."},
			[]string{"source", "destination"}),
	}
	reg.MustRegister(d.settled, d.paused)
	return d
}

// Settled implements forwarder.DestinationObserver.
func (m *Metrics) Settled(source, destination string, status store.Status, retry bool) {
	outcome := string(status)
	if retry {
		outcome = "retried"
	} else if status == store.Pending {
		return // given back, not attempted
	}
	m.dest.settled.WithLabelValues(source, destination, outcome).Inc()
}

// destinations sets the paused gauge of every destination f runs, and
// drops those it no longer runs.
func (m *Metrics) destinations(f *forwarder.Forwarder) {
	m.dest.paused.Reset()
	for _, d := range f.Destinations() {
		v := 0.0
		if d.Paused {
			v = 1
		}
		m.dest.paused.WithLabelValues(d.Source, d.Name).Set(v)
	}
}
