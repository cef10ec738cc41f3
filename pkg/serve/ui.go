package serve

import (
	"errors"
	"fmt"
	"net"

	"github.com/evfwd/evfwd/pkg/admin"
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
			return fmt.Errorf("inspector: listen %s: %w", addr, err)
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
		is := inspector.ServeSource{Name: src.Name, Webhooks: src.Webhooks.Enabled, Endpoints: []string{}}
		for _, ep := range src.Webhooks.Endpoints {
			is.Endpoints = append(is.Endpoints, ep.Display()) // never the URL's credentials
		}
		cfg.Sources = append(cfg.Sources, is)
	}
	ui, err := inspector.NewServe(cfg)
	if err != nil {
		s.uiLn.Close()
		return err
	}
	s.ui = ui
	return nil
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
