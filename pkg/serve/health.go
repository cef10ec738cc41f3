package serve

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/prometheus/client_golang/prometheus"
)

// storeUp adds evfwd_store_up to m: 1 while h finds the store reachable,
// 0 while it does not (what /healthz says, for alerts and dashboards).
// While it does not, a scrape answers at once, without the queue gauges:
// on a cut link their query would hold it for statsTimeout (5 s). It is
// called before the metrics are served.
func (m *Metrics) storeUp(h *forwarder.StoreHealth) {
	m.health = h
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "evfwd_store_up",
		Help: "1 while the store can be reached, 0 while it cannot (/healthz answers 503 then)."},
		func() float64 {
			if _, err := h.Unavailable(); err != nil {
				return 0
			}
			return 1
		}))
}

// forwarderStalled adds evfwd_forwarder_stalled to m: 1 while f has work
// it has not moved for forwarder.StallAfter (/readyz answers 503 then).
func (m *Metrics) forwarderStalled(f *forwarder.Forwarder) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "evfwd_forwarder_stalled",
		Help: "1 while the forwarder has due work and has recorded no delivery for 30 s (/readyz answers 503 then)."},
		func() float64 {
			if _, why := f.Stalled(); why != "" {
				return 1
			}
			return 0
		}))
}

// healthy answers /healthz: whether the node should take traffic. 503
// while it drains, and while its store cannot be reached (the forwarder's
// StoreHealth: its calls' outcomes and a probe), with the reason, so a
// load balancer sends requests to nodes that can commit them; 200
// otherwise.
func (s *Server) healthy(w http.ResponseWriter, r *http.Request) { s.answerHealth(w, false) }

// ready answers /readyz: /healthz, and 503 while the forwarder is stalled
// (it has due work and has recorded no delivery for 30 s), with why.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) { s.answerHealth(w, true) }

func (s *Server) answerHealth(w http.ResponseWriter, stall bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"status":"draining"}` + "\n"))
		return
	}
	if since, err := s.forwarder.StoreHealth().Unavailable(); err != nil {
		b, _ := json.Marshal(map[string]string{"status": "unavailable", "store": err.Error(),
			"since": since.UTC().Format(time.RFC3339)})
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write(append(b, '\n'))
		return
	}
	if since, why := s.forwarder.Stalled(); stall && why != "" {
		b, _ := json.Marshal(map[string]string{"status": "stalled", "forwarder": why,
			"since": since.UTC().Format(time.RFC3339)})
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write(append(b, '\n'))
		return
	}
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// live answers /livez, which says whether the process should be left
// running: 200 as long as it serves HTTP at all, whatever its store and
// even while it drains. Restarting a node does not bring its database
// back, and killing a draining one loses its grace period; an orchestrator
// that restarts on a failed liveness check must only do so for a process
// that no longer answers.
func live(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}
