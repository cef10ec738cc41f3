package inspector

import (
	"net/http"
	"slices"
	"strings"

	"github.com/evfwd/evfwd/pkg/store"
)

// A source's destinations on serve's page: what each is (from
// ServeConfig.Destinations, live, else as configured), pausing and
// resuming one, and the outcomes of its deliveries per minute (Settled).

// sources are the sources GET /api/session shows: as configured, with
// their destinations as they run now when the inspector has a
// DestinationControl (a reload adds, changes and removes them).
func (s *Serve) sources() []ServeSource {
	out := make([]ServeSource, 0, len(s.cfg.Sources))
	var live map[string][]ServeDestination
	if s.cfg.Destinations != nil {
		live = map[string][]ServeDestination{}
		for _, d := range s.cfg.Destinations.Destinations() {
			live[d.Source] = append(live[d.Source], d)
		}
	}
	for _, src := range s.cfg.Sources {
		if live != nil {
			src.Destinations = live[src.Name]
		}
		src.Endpoints = slices.Clone(src.Endpoints)
		for _, d := range src.Destinations {
			for _, u := range d.Endpoints {
				if !slices.Contains(src.Endpoints, u) {
					src.Endpoints = append(src.Endpoints, u)
				}
			}
		}
		if src.Endpoints == nil {
			src.Endpoints = []string{}
		}
		src.Destinations = fill(src.Destinations)
		out = append(out, src)
	}
	return out
}

// fill gives a destination list, and its endpoint lists, [] rather than
// null in JSON.
func fill(ds []ServeDestination) []ServeDestination {
	if ds == nil {
		return []ServeDestination{}
	}
	for i := range ds {
		if ds[i].Endpoints == nil {
			ds[i].Endpoints = []string{}
		}
	}
	return ds
}

// listDestinations are every source's destinations, in config order:
// live when the inspector has a DestinationControl, else as configured.
func (s *Serve) listDestinations() []ServeDestination {
	if s.cfg.Destinations != nil {
		return fill(s.cfg.Destinations.Destinations())
	}
	var out []ServeDestination
	for _, src := range s.cfg.Sources {
		for _, d := range src.Destinations {
			d.Source = src.Name
			out = append(out, d)
		}
	}
	return fill(out)
}

// destinations answers GET /api/destinations.
func (s *Serve) destinations(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"destinations": s.listDestinations()})
}

// DestinationRequest is the body of POST /api/pause and /api/resume.
type DestinationRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// pauseResume pauses (or resumes) the destination the body names, on this
// serve process, and answers it as it is now.
func (s *Serve) pauseResume(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req DestinationRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if req.Source == "" || req.Destination == "" {
			writeError(w, http.StatusBadRequest, `give "source" and "destination"`)
			return
		}
		do := s.cfg.Destinations.Resume
		if pause {
			do = s.cfg.Destinations.Pause
		}
		if !do(req.Source, req.Destination) {
			writeError(w, http.StatusNotFound, "no destination "+quote(req.Destination)+" in source "+quote(req.Source))
			return
		}
		s.cfg.Logger.Info("inspector: destination", "source", req.Source, "destination", req.Destination, "paused", pause, "remote", r.RemoteAddr)
		d := ServeDestination{Source: req.Source, Name: req.Destination, Endpoints: []string{}, Paused: pause}
		for _, x := range s.listDestinations() {
			if x.Source == req.Source && x.Name == req.Destination {
				d = x
				d.Paused = pause // what this call did, whatever another did since
				break
			}
		}
		if s.hub.watched() {
			s.publish(eventDestination, d)
		}
		writeJSON(w, http.StatusOK, d)
	}
}

// DestinationStats is one destination in GET /api/stats: its deliveries'
// outcomes over the last hour.
type DestinationStats struct {
	Source  string   `json:"source"`
	Name    string   `json:"name"`
	Paused  bool     `json:"paused"`
	Minutes []Counts `json:"minutes"`
}

// destinationStats are the destinations' last hour: every destination, in
// config order, then any other that deliveries settled for.
func (s *Serve) destinationStats() []DestinationStats {
	out := []DestinationStats{}
	seen := map[Destination]bool{}
	for _, d := range s.listDestinations() {
		key := Destination{d.Source, d.Name}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, DestinationStats{Source: d.Source, Name: d.Name, Paused: d.Paused, Minutes: s.stats.DestinationMinutes(key)})
	}
	extra := s.stats.SeenDestinations()
	slices.SortFunc(extra, func(a, b Destination) int { return strings.Compare(a.Source+"\x00"+a.Name, b.Source+"\x00"+b.Name) })
	for _, d := range extra {
		if !seen[d] {
			out = append(out, DestinationStats{Source: d.Source, Name: d.Name, Minutes: s.stats.DestinationMinutes(d)})
		}
	}
	return out
}

// Settled implements forwarder.DestinationObserver: the delivery's outcome
// counts in its destination's minute.
func (s *Serve) Settled(source, destination string, status store.Status, retry bool) {
	s.stats.Settle(source, destination, status, retry)
}
