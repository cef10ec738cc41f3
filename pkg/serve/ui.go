package serve

import (
	"errors"
	"net"
	"slices"
	"strings"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// ErrUINeedsToken is New's error for Options.UI without an admin token.
var ErrUINeedsToken = errors.New("the inspector (--ui) needs the admin token, which it asks for: set admin_token in the config or " + admin.TokenEnv)

// listenUI opens the inspector's listener and makes the inspector, when
// Options.UI asks for it; the forwarder made next reports to it.
func (s *Server) listenUI() error {
	if !s.opts.UI && s.opts.UIListener == nil {
		return nil
	}
	if s.cfg.AdminToken == "" {
		return ErrUINeedsToken
	}
	if s.uiLn = s.opts.UIListener; s.uiLn == nil {
		addr := s.opts.UIAddr
		if addr == "" {
			addr = DefaultUIAddr
		}
		var err error
		if s.uiLn, err = net.Listen("tcp", addr); err != nil {
			return &ListenError{Addr: addr, UI: true, Err: err}
		}
	}
	name := s.cfg.Store
	if name == "" {
		name = storeName(s.store)
	}
	failures := s.metrics.uiLoginFailures(inspector.LoginWrongToken, inspector.LoginRateLimited)
	cfg := inspector.ServeConfig{
		Addr: s.uiLn.Addr().String(), Token: s.cfg.AdminToken, Store: s.store,
		StoreName: MaskURL(name), Version: s.opts.Version, Now: s.opts.Now, Logger: s.log,
		LoginFailure: func(reason string) { failures.WithLabelValues(reason).Inc() },
		// The forwarder is made after the inspector, and before either
		// is used.
		Wake: func(source string) { s.forwarder.Notify(source) },
	}
	if !s.opts.Breaker.Disabled {
		cfg.Health = func() []store.EndpointState { return s.forwarder.Health() }
	}
	for _, src := range s.cfg.Sources {
		is := inspector.ServeSource{Name: src.Name, Webhooks: src.Webhooks.Enabled || len(src.Destinations) > 0, Endpoints: []string{}}
		ds, _ := src.Compile(s.cfg.AllowPrivateEndpoints) // validated
		for _, d := range ds {
			sd := uiDestination(d)
			for _, u := range sd.Endpoints {
				if !slices.Contains(is.Endpoints, u) {
					is.Endpoints = append(is.Endpoints, u)
				}
			}
			is.Destinations = append(is.Destinations, sd)
		}
		cfg.Sources = append(cfg.Sources, is)
	}
	cfg.Destinations = uiControl{control{s}}
	ui, err := inspector.NewServe(cfg)
	if err != nil {
		s.uiLn.Close()
		return err
	}
	s.ui = ui
	return nil
}

// uiDestination is d as the inspector shows it, paused as configured.
func uiDestination(d *destination.Destination) inspector.ServeDestination {
	sd := inspector.ServeDestination{
		Source: d.Source, Name: d.Name, Endpoints: []string{}, Subscribe: strings.TrimSpace(d.Config.Subscribe),
		Maps: d.Mapping != nil, PerSecond: d.Rate.PerSecond, Paused: d.Paused,
	}
	for _, ep := range d.Webhook.Endpoints {
		sd.Endpoints = append(sd.Endpoints, ep.Display()) // never the URL's credentials
	}
	if d.Batching() {
		sd.Batch = d.Batch.Size
	}
	return sd
}

// uiControl is the inspector's hold on the destinations
// (inspector.DestinationControl): the admin API's, listing them with
// their settings as the routing in use has them (a reload changes it) and
// their state as the forwarder runs them.
type uiControl struct{ control }

func (c uiControl) Destinations() []inspector.ServeDestination {
	r := c.s.dests.now.Load()
	if r == nil || c.s.forwarder == nil {
		return nil // not built yet
	}
	type key struct{ source, name string }
	state := map[key]forwarder.DestinationState{}
	for _, d := range c.s.forwarder.Destinations() {
		state[key{d.Source, d.Name}] = d
	}
	out := make([]inspector.ServeDestination, 0, len(r.routes))
	for _, d := range r.routes {
		sd := uiDestination(d)
		if st, ok := state[key{d.Source, d.Name}]; ok {
			sd.Paused, sd.Holding = st.Paused, st.Holding
		}
		out = append(out, sd)
	}
	return out
}

// UIURL is the inspector's page, "" when it is off. Like URL, it is a
// loopback address when the inspector listens on every address.
func (s *Server) UIURL() string {
	if s.uiLn == nil {
		return ""
	}
	return "http://" + inspector.DialAddr(s.uiLn.Addr().String()) + "/"
}

// SignInLink returns a link that signs a browser in to the inspector
// once, within inspector.SignInTTL, without the admin token (see
// inspector.Serve.SignInLink); "" when the inspector is off. Each call
// makes a new link.
func (s *Server) SignInLink() string {
	if s.ui == nil {
		return ""
	}
	return s.ui.SignInLink(s.UIURL())
}

// observer is what the forwarder reports to: the metrics, and the
// inspector too when it is on.
func (s *Server) observer() forwarder.Observer {
	if s.ui == nil {
		return s.metrics
	}
	return observers{s.metrics, s.ui}
}

// observers passes what the forwarder observes on to each of its members,
// and endpoint health to those that hear it.
type observers []forwarder.Observer

func (o observers) Attempt(source string, delivery int64, a webhook.Attempt) {
	for _, x := range o {
		x.Attempt(source, delivery, a)
	}
}

func (o observers) Finished(source string, delivery int64, status store.Status, retry bool) {
	for _, x := range o {
		x.Finished(source, delivery, status, retry)
	}
}

func (o observers) EndpointState(source, url string, state store.Health) {
	for _, x := range o {
		if e, ok := x.(forwarder.EndpointObserver); ok {
			e.EndpointState(source, url, state)
		}
	}
}

func (o observers) Skipped(source, url string) {
	for _, x := range o {
		if e, ok := x.(forwarder.EndpointObserver); ok {
			e.Skipped(source, url)
		}
	}
}

func (o observers) Settled(source, destination string, status store.Status, retry bool) {
	for _, x := range o {
		if e, ok := x.(forwarder.DestinationObserver); ok {
			e.Settled(source, destination, status, retry)
		}
	}
}
