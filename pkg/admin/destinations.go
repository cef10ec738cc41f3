package admin

import (
	"context"
	"net/http"
)

// Destination is one destination as the service runs it.
type Destination struct {
	Source string `json:"source"`
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	// Holding is how many of its deliveries the node that answered holds
	// now (being sent, recorded, or leased ahead).
	Holding int `json:"holding"`
}

// Reloaded is what a reload changed, each destination as
// "source/destination".
type Reloaded struct {
	Added     []string       `json:"added"`
	Changed   []string       `json:"changed"`
	Removed   []string       `json:"removed"`
	Cancelled map[string]int `json:"cancelled,omitempty"` // pending deliveries, by removed destination
}

// Control is the service's hold on its destinations: pause, resume, and
// reading the configuration again.
type Control interface {
	Destinations() []Destination
	Pause(source, name string) bool
	Resume(source, name string) bool
	Reload(ctx context.Context) (Reloaded, error)
}

// routeDestinations adds the destination endpoints when the service gave
// a Control.
func (a *Handler) routeDestinations() {
	if a.cfg.Control == nil {
		return
	}
	a.mux.HandleFunc("GET /admin/v1/destinations", func(w http.ResponseWriter, r *http.Request) {
		ds := a.cfg.Control.Destinations()
		if ds == nil {
			ds = []Destination{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"destinations": ds})
	})
	a.mux.HandleFunc("POST /admin/v1/destinations/{source}/{name}/pause", a.pauseResume(true))
	a.mux.HandleFunc("POST /admin/v1/destinations/{source}/{name}/resume", a.pauseResume(false))
	a.mux.HandleFunc("POST /admin/v1/reload", func(w http.ResponseWriter, r *http.Request) {
		res, err := a.cfg.Control.Reload(r.Context())
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, "configuration not reloaded, the running one is kept: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
}

// pauseResume pauses (or resumes) the destination the path names. It
// applies to the node that answers; `paused: true` in every node's
// configuration, and a reload, pause it on all of them.
func (a *Handler) pauseResume(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		source, name := r.PathValue("source"), r.PathValue("name")
		do := a.cfg.Control.Resume
		if pause {
			do = a.cfg.Control.Pause
		}
		if !do(source, name) {
			writeError(w, http.StatusNotFound, "no destination "+name+" in source "+source)
			return
		}
		a.cfg.Logger.Info("admin: destination", "source", source, "destination", name, "paused", pause)
		writeJSON(w, http.StatusOK, Destination{Source: source, Name: name, Paused: pause})
	}
}
