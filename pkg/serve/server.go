package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/internal/hostcheck"
	"github.com/evfwd/evfwd/internal/tlscert"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// DefaultGrace is how long a drain waits for requests and deliveries in
// flight.
const DefaultGrace = 10 * time.Second

// Options are what the caller supplies besides Config.
type Options struct {
	Logger  *slog.Logger
	Version string
	// Now is the clock of the collector and forwarder (default time.Now).
	Now func() time.Time
	// Sender configures the webhook sender (User-Agent, CAs, timeout).
	Sender webhook.Options
	// Policy is the retry schedule (default: the destination's).
	Policy webhook.Policy
	// Grace bounds the drain after the context of Run ends.
	Grace time.Duration
	// Forwarder tuning; zero values take the forwarder's defaults.
	MaxInFlight, PerSource int
	Poll                   time.Duration
	// Listener, when set, is used instead of listening on Config.Addr.
	Listener net.Listener
	// LeaseTTL is how long a delivery stays leased to this process (the
	// forwarder's default unless set); on a shared store it is how soon
	// other nodes take over the work of one that died.
	LeaseTTL time.Duration
	// Breaker configures the endpoints' health state (the forwarder's
	// defaults unless set).
	Breaker forwarder.BreakerConfig
	// StoreTimeout bounds each call to the store made for a request or by
	// the forwarder (default store.CallTimeout): past it a
	// request is answered 503 and the forwarder probes the store.
	StoreTimeout time.Duration
	// Store, when set, is the store to serve from instead of opening the
	// one Config.Store names (leave that empty). It stays the caller's:
	// serve never closes it, and locks a SQLite file only while it runs
	// (see store.go).
	Store store.Store
	// LogInterval is how often Run logs a summary line at INFO while
	// there is work (see logSummaries); 0 logs none.
	LogInterval time.Duration
	// UI serves the inspector (pkg/inspector, docs/INSPECTOR.md) on its
	// own listener: UIListener when set, else one on UIAddr (default
	// DefaultUIAddr). It needs Config.AdminToken.
	UI         bool
	UIAddr     string
	UIListener net.Listener
	// ConfigFile is the config file the settings came from, for the start
	// line ("" when none: "(none)").
	ConfigFile string
	// Reload, when set, reads the configuration again for Server.Reload
	// (SIGHUP, POST /admin/v1/reload).
	Reload func() (Config, error)
}

// DefaultUIAddr is where the inspector listens by default: loopback only.
const DefaultUIAddr = "127.0.0.1:8790"

// Server is a configured, listening service; Run serves until its context
// ends.
type Server struct {
	cfg       Config
	opts      Options
	log       *slog.Logger
	store     store.Store
	release   func() error // closes the store serve opened
	ln        net.Listener
	collector *collector.Handler
	forwarder *forwarder.Forwarder
	metrics   *Metrics
	draining  atomic.Bool
	admin     *admin.Handler
	tls       *tlscert.Reloader // nil: plain HTTP
	ui        *inspector.Serve  // nil without Options.UI
	uiLn      net.Listener
	dests     destinations
}

// New validates cfg, loads the TLS pair when set, opens and locks the
// store (unless opts.Store is one), and listens.
func New(ctx context.Context, cfg Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Store != nil && cfg.Store != "" {
		return nil, fmt.Errorf("store %q and Options.Store are both set: give one", MaskURL(cfg.Store))
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Sender.Now == nil {
		opts.Sender.Now = opts.Now
	}
	if opts.Sender.UserAgent == "" {
		opts.Sender.UserAgent = webhook.UserAgent(opts.Version)
	}
	if cfg.AllowPrivateEndpoints {
		opts.Sender.AllowPrivateEndpoints = true
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	s := &Server{cfg: cfg, opts: opts, log: opts.Logger, metrics: NewMetrics()}
	if err := s.useTLS(); err != nil {
		return nil, err
	}
	var err error
	if opts.Store != nil {
		s.store = opts.Store
		if s.release, err = checkReady(opts.Store); err != nil {
			return nil, err
		}
	} else {
		if s.store, s.release, err = openLocked(ctx, cfg.Store, opts.Now, s.log); err != nil {
			return nil, storePathError(err)
		}
	}
	if err := s.listenUI(); err != nil {
		s.release()
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		if s.uiLn != nil {
			s.uiLn.Close()
		}
		s.release()
		return nil, err
	}
	if err := s.build(ctx); err != nil {
		return fail(err)
	}
	if s.ln = opts.Listener; s.ln == nil {
		if s.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return fail(&ListenError{Addr: cfg.Addr, Err: err})
		}
	}
	s.ln = s.listenTLS(s.ln)
	if s.ui != nil {
		s.ui.SetURL(s.URL())
	}
	s.warnHostInSettings()
	return s, nil
}

// ListenError is New's error when a port cannot be opened: the collection
// API's (Config.Addr), or with UI the inspector's (Options.UIAddr). It
// wraps the system's error (syscall.EADDRINUSE: another program has it).
type ListenError struct {
	Addr string
	UI   bool
	Err  error
}

func (e *ListenError) Error() string {
	if e.UI {
		return "inspector: listen " + e.Addr + ": " + e.Err.Error()
	}
	return "listen " + e.Addr + ": " + e.Err.Error()
}

func (e *ListenError) Unwrap() error { return e.Err }

// warnHostInSettings logs one warning when web or mobile sources are
// served beyond loopback without public_url: their settings document then
// points clients at whatever Host a request names (the collector keeps it
// out of shared caches for that: issue 43), where behind a proxy or a CDN
// it should name the address clients reach.
func (s *Server) warnHostInSettings() {
	if s.cfg.PublicURL != "" {
		return
	}
	if ap, err := netip.ParseAddrPort(s.Addr()); err == nil && ap.Addr().Unmap().IsLoopback() {
		return
	}
	var sources []string
	for _, src := range s.cfg.Sources {
		if k, _ := collector.ParseKind(src.Kind); k == collector.KindWeb || k == collector.KindMobile {
			sources = append(sources, src.Name)
		}
	}
	if len(sources) > 0 {
		s.log.Warn("public_url is not set: the settings document of web and mobile sources sends clients to the Host each request names, and is not cached by shared caches; set public_url to the address clients reach",
			"sources", strings.Join(sources, ","), "addr", s.Addr())
	}
}

// build makes the collector and forwarder, and takes back the leases a
// crashed predecessor left (on SQLite the lock says no other serve uses the
// file; on PostgreSQL only expired leases are taken back).
func (s *Server) build(ctx context.Context) error {
	sender, err := webhook.NewSender(s.opts.Sender)
	if err != nil {
		return err
	}
	routes, err := compileRoutes(s.cfg)
	if err != nil {
		return err
	}
	s.dests.now.Store(routes)
	var sources []collector.Source
	var adminSources []admin.Source
	for _, src := range s.cfg.Sources {
		s.metrics.source(src.Name)
		cs := collector.Source{Name: src.Name, WriteKey: src.WriteKey}
		cs.Kind, _ = collector.ParseKind(src.Kind) // validated
		for _, o := range src.AllowedOrigins {
			o, _ = collector.CheckOrigin(o)
			cs.AllowedOrigins = append(cs.AllowedOrigins, o)
		}
		forwards := src.Webhooks.Enabled || len(src.Destinations) > 0
		if forwards {
			// Every destination is a webhook destination: the message's
			// integrations turn them on or off together ("Webhooks"),
			// and then their subscriptions choose (Route).
			cs.Destinations = []string{store.DestinationWebhooks}
			name := src.Name
			cs.Route = func(body []byte) []string { return s.dests.route(name, body) }
		}
		sources = append(sources, cs)
		adminSources = append(adminSources, admin.Source{Name: src.Name, Webhooks: forwards})
	}
	if s.forwarder, err = forwarder.New(forwarder.Config{
		Store: s.store, Sender: sender, Routes: routes.routes, Policy: s.opts.Policy,
		Owner: owner(), LeaseTTL: s.opts.LeaseTTL, MaxInFlight: s.opts.MaxInFlight, PerSource: s.opts.PerSource, Poll: s.opts.Poll,
		Grace: s.opts.Grace, Now: s.opts.Now, Logger: s.log, Observer: s.observer(), Breaker: s.opts.Breaker,
		StoreTimeout: s.opts.StoreTimeout,
	}); err != nil {
		return err
	}
	s.metrics.storeUp(s.forwarder.StoreHealth())
	s.metrics.forwarderStalled(s.forwarder)
	s.metrics.destinations(s.forwarder)
	// The forwarder stores what the collector takes, and sends at once
	// what it has room for (forwarder.Ingest).
	trusted, _ := collector.ParseTrustedProxies(s.cfg.TrustedProxies) // validated
	s.collector, err = collector.New(collector.Config{
		Sources: sources, Store: s.forwarder, Now: s.opts.Now, TrustedProxies: trusted, PublicURL: s.cfg.PublicURL,
		IngestTimeout: s.opts.StoreTimeout,
		OnStored:      func(source string, msgs []store.Message) { s.stored(source, len(msgs)) },
		OnError:       func(status int, err error) { s.log.Warn("collect", "status", status, "err", err) },
	})
	if err != nil {
		return err
	}
	authFailures := s.metrics.adminAuthFailures(admin.AuthWrongToken, admin.AuthRateLimited)
	if s.admin, err = admin.New(admin.Config{
		Token: s.cfg.AdminToken, Store: s.store, Sources: adminSources, Now: s.opts.Now, Logger: s.log, Queued: s.queued,
		Route: s.dests.route, Control: control{s},
		AuthFailure: func(reason string) { authFailures.WithLabelValues(reason).Inc() },
	}); err != nil {
		return err
	}
	n, err := s.store.Reclaim(ctx, s.opts.Now())
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.Info("took back leases of a previous run", "deliveries", n)
	}
	return nil
}

// queued counts n messages that the collector or the admin API committed
// for source, and wakes the forwarder for them.
func (s *Server) queued(source string, n int) {
	s.stored(source, n)
	s.forwarder.Notify(source)
}

// stored counts n messages stored for source, and tells the inspector.
func (s *Server) stored(source string, n int) {
	s.metrics.Ingested(source, n)
	if s.ui != nil {
		s.ui.Stored(source, n)
	}
}

func owner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Addr is the address the service listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the service's base URL, for clients: https when TLS is on, and
// loopback when it listens on every address (0.0.0.0 or ::), which is no
// address to dial.
func (s *Server) URL() string {
	if s.tls != nil {
		return "https://" + inspector.DialAddr(s.Addr())
	}
	return "http://" + inspector.DialAddr(s.Addr())
}

// Store is the service's store (for tests and `evfwd demo`), whoever
// opened it.
func (s *Server) Store() store.Store { return s.store }

// Handler serves the collection API, /healthz, /readyz, /livez
// (health.go), /metrics and the admin API. All but the collection API
// answer only requests whose Host names serve (see hostGuard); the
// collection API answers any.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	guard := s.hostGuard()
	mux.Handle("GET /healthz", guard(http.HandlerFunc(s.healthy)))
	mux.Handle("GET /readyz", guard(http.HandlerFunc(s.ready)))
	mux.Handle("GET /livez", guard(http.HandlerFunc(live)))
	mux.Handle("GET /metrics", guard(s.metrics.Handler(s.store, s.opts.Now, s.log)))
	mux.Handle("/admin/", guard(s.admin))
	mux.Handle("/", s.collector)
	return mux
}

// hostGuard refuses, with 421, a request whose Host is a DNS name other
// than serve's own host, localhost or a name in allowed_hosts (an IP
// address is fine): what a DNS-rebinding page sends to read /metrics or
// call the admin API as its own origin. The check is the inspectors'
// (internal/hostcheck). A request with no Host at all (HTTP/1.0, some
// load balancers' health checks) comes from no browser and is answered.
func (s *Server) hostGuard() func(http.Handler) http.Handler {
	port := "80"
	if s.tls != nil {
		port = "443"
	}
	check := hostcheck.New(s.Addr(), port, s.cfg.AllowedHosts...)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host != "" && !check.Allows(r.Host) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Content-Type-Options", "nosniff")
				w.WriteHeader(http.StatusMisdirectedRequest)
				b, _ := json.Marshal(map[string]string{"error": "unexpected Host " + strconv.Quote(r.Host) +
					": " + r.URL.Path + " answers the address serve listens on, localhost, an IP address or a name in allowed_hosts"})
				w.Write(append(b, '\n'))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Run serves until ctx ends, then drains: new requests get 503, requests
// and deliveries in flight get the grace period, and every attempt is on
// record before the store closes. It returns nil after a clean drain.
func (s *Server) Run(ctx context.Context) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	fwdDone := make(chan error, 1)
	go func() { fwdDone <- s.forwarder.Run(runCtx) }()
	prunerDone := make(chan struct{})
	go func() { defer close(prunerDone); s.pruner(runCtx) }()
	summaryDone := make(chan struct{})
	go func() { defer close(summaryDone); logSummaries(runCtx, s.metrics, s.opts.LogInterval, s.log) }()
	srvErr := make(chan error, 2)
	go func() { srvErr <- hs.Serve(s.ln) }()
	config := s.opts.ConfigFile
	if config == "" {
		config = "(none)"
	}
	s.log.Info("serving", "addr", s.Addr(), "url", s.URL(), "config", config, "store", storeName(s.store), "sources", len(s.cfg.Sources), "retention", s.cfg.Retention)
	var uis *http.Server
	if s.ui != nil {
		uis = &http.Server{
			Handler:           s.ui,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			WriteTimeout:      60 * time.Second, // the event stream lifts it for itself
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		}
		go func() { srvErr <- uis.Serve(s.uiLn) }()
		s.log.Info("inspector on "+s.UIURL(), "url", s.UIURL())
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-srvErr:
	}
	stop()
	s.log.Info("draining", "grace", s.opts.Grace)
	s.draining.Store(true)
	s.collector.Drain()
	s.admin.Drain()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Grace)
	defer cancel()
	if uis != nil {
		// The event streams first: Shutdown waits for every open request,
		// and a page's stream never ends by itself.
		s.ui.Close()
		uis.Shutdown(shutdownCtx)
	}
	hs.Shutdown(shutdownCtx)
	if err == nil && ctx.Err() == nil {
		// The listener failed; stop the forwarder too.
		err = errors.New("server stopped")
	}
	<-fwdDone
	<-prunerDone
	<-summaryDone
	s.Close()
	s.log.Info("stopped")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close closes the store, and so frees its lock, when serve opened it (a store
// from Options.Store stays open); Run calls it.
func (s *Server) Close() error { return s.release() }
