package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/forwarder"
)

// routing is every source's destinations and the router that picks among
// them for each message. It is replaced whole on a reload.
type routing struct {
	routes  []*destination.Destination
	routers map[string]*destination.Router // by source
}

// compileRoutes compiles every source's destinations (validated before).
func compileRoutes(cfg Config) (*routing, error) {
	r := &routing{routers: map[string]*destination.Router{}}
	var errs []error
	for _, src := range cfg.Sources {
		ds, err := src.Compile(cfg.AllowPrivateEndpoints)
		if err != nil {
			errs = append(errs, fmt.Errorf("source %q: %w", src.Name, err))
			continue
		}
		r.routes = append(r.routes, ds...)
		r.routers[src.Name] = destination.NewRouter(ds)
	}
	return r, errors.Join(errs...)
}

// destinations holds the routing in use and serializes reloads.
type destinations struct {
	now    atomic.Pointer[routing]
	reload sync.Mutex
}

// route names the destinations of source that take a message with this
// webhook body.
func (d *destinations) route(source string, body []byte) []string {
	if r := d.now.Load().routers[source]; r != nil {
		return r.Route(body)
	}
	return nil
}

// ErrNoReload is Reload's error when serve runs without a configuration
// file to read again.
var ErrNoReload = errors.New("reload: serve was started without a configuration file to read again")

// Reload reads the configuration again (Options.Reload) and applies what
// it says of the sources' destinations: added ones start at once, changed
// ones take their new settings (a changed condition decides the messages
// stored from now on), and removed ones stop and have their pending
// deliveries cancelled. A configuration that does not pass `serve
// --check` is refused and the running one kept. Other settings (listen
// address, store, sources and their keys) take effect at the next start:
// each one changed is logged.
func (s *Server) Reload(ctx context.Context) (forwarder.Reconfigured, error) {
	s.dests.reload.Lock()
	defer s.dests.reload.Unlock()
	if s.opts.Reload == nil {
		return forwarder.Reconfigured{}, ErrNoReload
	}
	cfg, err := s.opts.Reload()
	if err == nil {
		err = cfg.Validate()
	}
	var r *routing
	if err == nil {
		r, err = compileRoutes(cfg)
	}
	if err != nil {
		s.log.Error("configuration not reloaded; the running one is kept", "err", err)
		return forwarder.Reconfigured{}, err
	}
	s.notReloaded(cfg)
	// Messages stop going to a removed destination before its lane stops.
	known := map[string]bool{}
	for _, src := range s.cfg.Sources {
		known[src.Name] = true
	}
	for name := range r.routers {
		if !known[name] {
			delete(r.routers, name)
		}
	}
	r.routes = slices.DeleteFunc(r.routes, func(d *destination.Destination) bool { return !known[d.Source] })
	s.dests.now.Store(r)
	res, err := s.forwarder.Reconfigure(ctx, r.routes)
	s.metrics.destinations(s.forwarder)
	if err != nil {
		s.log.Error("configuration reloaded; cancelling the removed destinations' deliveries failed", "err", err)
		return res, err
	}
	s.log.Info("configuration reloaded", "added", res.Added, "changed", res.Changed, "removed", res.Removed, "cancelled", res.Cancelled)
	return res, nil
}

// notReloaded logs each setting cfg changes that a reload does not apply.
func (s *Server) notReloaded(cfg Config) {
	old := map[string]Source{}
	for _, src := range s.cfg.Sources {
		old[src.Name] = src
	}
	for _, src := range cfg.Sources {
		o, ok := old[src.Name]
		switch {
		case !ok:
			s.log.Warn("reload: a new source takes effect at the next start", "source", src.Name)
		case o.WriteKey != src.WriteKey || o.Kind != src.Kind || !slices.Equal(o.AllowedOrigins, src.AllowedOrigins):
			s.log.Warn("reload: a source's write key, kind and origins take effect at the next start", "source", src.Name)
		}
		delete(old, src.Name)
	}
	for name := range old {
		s.log.Warn("reload: a removed source is removed at the next start; its destinations keep running", "source", name)
	}
	if cfg.Addr != s.cfg.Addr || cfg.Store != s.cfg.Store || cfg.AdminToken != s.cfg.AdminToken {
		s.log.Warn("reload: addr, store and admin_token take effect at the next start")
	}
}

// control is the admin API's hold on the destinations (admin.Control).
type control struct{ s *Server }

func (c control) Destinations() []admin.Destination {
	var out []admin.Destination
	for _, d := range c.s.forwarder.Destinations() {
		out = append(out, admin.Destination{Source: d.Source, Name: d.Name, Paused: d.Paused, Holding: d.Holding})
	}
	return out
}

func (c control) Pause(source, name string) bool {
	ok := c.s.forwarder.Pause(source, name)
	c.s.metrics.destinations(c.s.forwarder)
	return ok
}

func (c control) Resume(source, name string) bool {
	ok := c.s.forwarder.Resume(source, name)
	c.s.metrics.destinations(c.s.forwarder)
	return ok
}

func (c control) Reload(ctx context.Context) (admin.Reloaded, error) {
	r, err := c.s.Reload(ctx)
	return admin.Reloaded{Added: r.Added, Changed: r.Changed, Removed: r.Removed, Cancelled: r.Cancelled}, err
}
