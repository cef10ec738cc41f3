package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/spf13/cobra"
)

// ServeOptions are the inputs of `evfwd serve`.
type ServeOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Version string // in the webhooks' User-Agent
	// Getenv and Config hold what no flag sets: the sources, the admin
	// token, the default store's path.
	Getenv    func(string) string
	Config    *cli.Config
	Addr      string
	Store     string
	LogFormat string
	LogLevel  string
	Grace     time.Duration
	LeaseTTL  time.Duration
	Retention time.Duration
	Check     bool // validate the config, print the effective settings, and stop
	TLSCert   string
	TLSKey    string
	// ForwardTo are the dev source's webhook URLs (only without
	// configured sources).
	ForwardTo   []string
	LogInterval time.Duration // between INFO summaries; 0: none
	// UI serves the inspector, the delivery log in the browser, on UIAddr.
	UI     bool
	UIAddr string

	ctx      context.Context
	cmd      *cobra.Command           // for a reload's strict check of the file's keys
	origin   func(flag string) string // where a flag's value came from (cli.Config.Origin)
	ready    func(url string)         // tests: called once the port is open
	uiReady  func(url string)         // tests: called with the inspector's URL, with --ui
	hup      chan os.Signal           // tests: stands for SIGHUP
	reloaded func(err error)          // tests: called after each reload of the TLS pair
}

// serveLong is `evfwd serve --help`'s text.
const serveLong = `Collect events on the Segment HTTP Tracking API (/v1/batch, /v1/import,
/v1/identify, /v1/track, ...) and forward each one as a signed webhook POST.
Segment's browser and app libraries work too: serve answers the short paths
they post to (/v1/b, /v1/t, ...) with CORS, and serves the settings document
they load first (/v1/projects/WRITE_KEY/settings), which points them back at
serve: set Analytics.js's cdnURL, or an app's cdnHost and apiHost, to serve.

A 200 means the request's messages are committed to the store (SQLite, WAL,
fsync); the forwarder then delivers them at least once, retrying failed
endpoints for up to 4 hours. Kill it at any moment: nothing acknowledged is
lost, and the next run picks up where this one stopped.

The config file is --config FILE, else EVFWD_CONFIG, else ./evfwd.yaml
(which serve init writes), else $XDG_CONFIG_HOME/evfwd/config.yaml; --config ''
reads none. The start line names the file read. One file holds the
settings of every command: serve's beside the client's (endpoint,
write-key). A top-level key named like a serve flag (addr, tls_cert, ...)
is serve's alone: listen reads its own under listen:.

Without sources in it (or without a file) serve runs a source for local
development, "dev", and says so: its write key and shared secret are
generated once, kept in the state dir ($XDG_STATE_HOME/evfwd/dev-source.json)
and printed at each start as the export lines that evfwd track, send,
listen and verify read (with --log-format json, as one INFO record). Its
events are stored; --forward-to URL (up to 5) delivers them too.

Sources come from the config file (serve init writes one to start from):

  addr: 127.0.0.1:8787
  store: sqlite:///path/to/evfwd.db
  sources:
    - name: web
      write_key: wk_live_123
      kind: web                  # server (default), web or mobile
      allowed_origins: [https://www.example.com]   # default: any
      webhooks:
        enabled: true
        shared_secret: s3cret
        endpoints:
          - url: https://hooks.example.com/a
            headers: { X-Env: prod }

A web or mobile source's messages get context.ip from the request (from
X-Forwarded-For only when the peer is one of trusted_proxies: CIDRs) and
the device clock's error taken out: timestamp becomes receivedAt - (sentAt -
timestamp), the device's own kept as originalTimestamp. A server source's
timestamps stay as sent. Behind a proxy, public_url is the address the
settings document gives clients.

With store: postgres://user:pass@host/db (or EVFWD_STORE), several serve
processes share one queue behind any load balancer: each leases due
deliveries with SKIP LOCKED, and a node that dies has its leased work taken
over by the others after --lease-ttl.

Finished messages (delivered, failed, dead or cancelled) are kept for
--retention (retention: in the file, EVFWD_RETENTION; default 168h) and then
pruned in the background with their deliveries and attempts; pending ones
are never pruned. A messageId is de-duplicated within that window.

The config is strict: a key no command reads is refused with its file, line
and the nearest known key (did you mean "enabled"?). --check validates the
config and the form of the store URL without opening the store, prints the
effective settings with secrets masked (-o json for scripts) and exits 0
when they are valid, 2 when not; serve does not start.

With --tls-cert and --tls-key (tls_cert, tls_key in the file) serve speaks
HTTPS only, TLS 1.2 or later, HTTP/2 or HTTP/1.1: Segment's Ruby client
(analytics-ruby 2.x) has no plain-HTTP mode. SIGHUP reads the pair again:
new connections get the new certificate, open ones are not dropped; a pair
that does not load is logged and the one in use stays.

With --ui, serve also serves the inspector, a page in the browser, on its own
address (--ui-addr, default 127.0.0.1:8790: loopback only unless the address
says otherwise): every delivery with its attempts (status, latency, error,
the start of the response), filtered by source, status and endpoint; retry
one, or all failed or dead, with a click, as evfwd deliveries retry does;
and per endpoint the last hour's delivered, retried and failed attempts and
latency per minute, with the endpoint's health. It needs the admin token
(admin_token in the config or EVFWD_ADMIN_TOKEN). At start serve shows a
sign-in link on its terminal (never the token, and never in the log, text
or JSON: without a terminal there is none): opening it signs the browser
in; it works once, within 10 minutes. Otherwise the page asks for the
token; scripts send it as Authorization: Bearer TOKEN. Its HTTP API is in
docs/INSPECTOR.md. The page loads nothing from the network.

GET /healthz and GET /metrics (Prometheus) are served beside the API.
While there is work, one INFO line per --log-interval says what happened.
SIGTERM or Ctrl-C drains: new requests get 503, requests and deliveries in
flight get --grace to finish, and serve exits 0.

Exit status: 0 stopped by SIGTERM or Ctrl-C, 1 could not start or stopped
on an error, 2 usage or config error.`

// NewCmdServe builds `evfwd serve`; runF replaces serveRun in tests.
func NewCmdServe(f *cli.Factory, runF func(*ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the event-collection service with durable webhook forwarding",
		Long:  serveLong,
		Example: `  evfwd serve                                  # the dev source, keys printed
  evfwd serve --forward-to http://127.0.0.1:8788/hooks
  evfwd serve init && evfwd serve              # reads ./evfwd.yaml
  evfwd serve --config evfwd.yaml --check
  EVFWD_STORE=sqlite:///var/lib/evfwd/evfwd.db evfwd serve --log-format json
  EVFWD_STORE=postgres://evfwd:pw@db.internal/evfwd evfwd serve --addr 0.0.0.0:8787
  evfwd serve --config evfwd.yaml --tls-cert cert.pem --tls-key key.pem   # kill -HUP reloads them
  EVFWD_ADMIN_TOKEN=$(openssl rand -hex 16) evfwd serve --ui   # then open the sign-in link it prints
  evfwd deliveries list --status dead`,
		GroupID: groupServer,
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Version = f.IO, f.Format, f.Version
			opts.Getenv, opts.Config = f.Getenv, f.Config
			opts.ctx, opts.cmd = cmd.Context(), cmd
			opts.origin = func(flag string) string { return f.Config.Origin(cmd, flag) }
			if runF != nil {
				return runF(opts)
			}
			return serveRun(opts)
		},
	}
	cmd.AddCommand(newCmdServeInit(f))
	opts.addFlags(cmd)
	return cmd
}

// addFlags registers serve's flags, and the environment and config keys
// that fill them.
func (o *ServeOptions) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&o.Addr, "addr", serve.DefaultAddr, "`HOST:PORT` to listen on")
	fl.StringVar(&o.Store, "store", "", "store `URL`: sqlite:///path/to/evfwd.db (default evfwd.db under $XDG_STATE_HOME/evfwd) or postgres://user:pass@host/db")
	fl.StringVar(&o.LogFormat, "log-format", "text", "log format on stderr: text or json")
	fl.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.DurationVar(&o.Grace, "grace", serve.DefaultGrace, "on SIGTERM, how long to let requests and deliveries in flight finish")
	fl.DurationVar(&o.LeaseTTL, "lease-ttl", forwarder.DefaultLeaseTTL, "how long a delivery stays leased; on PostgreSQL, how soon other nodes take over a dead node's work")
	fl.DurationVar(&o.Retention, "retention", store.DefaultRetention, "keep finished messages this long, then prune them (0 keeps everything)")
	fl.BoolVar(&o.Check, "check", false, "validate the config, print the effective settings (secrets masked) and exit without serving")
	fl.StringVar(&o.TLSCert, "tls-cert", "", "serve HTTPS with this certificate `FILE` (PEM; reloaded on SIGHUP)")
	fl.StringVar(&o.TLSKey, "tls-key", "", "private key `FILE` (PEM) for --tls-cert")
	fl.StringArrayVar(&o.ForwardTo, "forward-to", nil, "without a config file: deliver the dev source's events to `URL` (repeatable, up to 5, tried in order)")
	cli.MarkURLFlags(cmd, "forward-to")
	fl.DurationVar(&o.LogInterval, "log-interval", serve.DefaultLogInterval, "log a summary at INFO this often while there is work (0: never)")
	fl.BoolVar(&o.UI, "ui", false, "serve the inspector, the delivery log in the browser, on --ui-addr (needs the admin token)")
	fl.StringVar(&o.UIAddr, "ui-addr", serve.DefaultUIAddr, "`HOST:PORT` of the inspector")
	cli.BindEnv(cmd, "addr", "store", "log-format", "log-level", "lease-ttl", "retention", "tls-cert", "tls-key", "log-interval", "ui-addr")
	// The file's addr, store, sources, ... are known keys for every command,
	// and the top level's addr, tls_cert, ... are serve's, as serve init
	// writes them: listen's --addr is never serve's (issue 41).
	cli.ReadsConfig(cmd, serve.Config{})
	cli.OwnsTopLevel(cmd)
}

// serveFile is the config file as pkg/serve reads it.
func serveFile(c *cli.Config) serve.File {
	return serve.File{Name: c.File, Viper: c.Viper(), JSONAt: c.JSONAt}
}

// flags are serve's flags, as serve.LoadConfig takes them.
func (o *ServeOptions) flags() serve.Flags {
	return serve.Flags{
		Addr: o.Addr, Store: o.Store, Retention: o.Retention, TLSCert: o.TLSCert, TLSKey: o.TLSKey,
		ForwardTo: o.ForwardTo, UI: o.UI, UIAddr: o.UIAddr, Check: o.Check, Getenv: o.Getenv,
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, cli.UsageErrorf("--log-level %q: want debug, info, warn or error", level)
	}
	ho := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		// Log values can carry a sender's data (ids, paths, errors
		// quoting answers): a terminal reading the log must not act on it.
		ho.ReplaceAttr = cli.PrintableAttr
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, cli.UsageErrorf("--log-format %q: want text or json", format)
}

func serveRun(opts *ServeOptions) error {
	log, err := newLogger(opts.IO.ErrOut, opts.LogFormat, opts.LogLevel)
	if err != nil {
		return err
	}
	l, err := serve.LoadConfig(serveFile(opts.Config), opts.flags())
	if err != nil {
		return err
	}
	if opts.Check {
		return serveCheck(opts, l.Config)
	}
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	defer tuneGC(opts.Getenv)()
	srv, err := serve.New(ctx, l.Config, serve.Options{Logger: log, Version: opts.Version, Grace: opts.Grace, LeaseTTL: opts.LeaseTTL, LogInterval: opts.LogInterval,
		UI: opts.UI, UIAddr: opts.UIAddr, ConfigFile: opts.Config.File, Reload: reloadConfig(opts)})
	if err != nil {
		return serveError(opts, err)
	}
	if l.Dev {
		printDev(opts, log, l, srv.URL())
	}
	if srv.UIURL() != "" {
		showSignIn(opts, log, srv)
	}
	defer reloadOnHUP(ctx, srv, opts.hup, opts.reloaded)()
	if opts.uiReady != nil && srv.UIURL() != "" {
		opts.uiReady(srv.UIURL())
	}
	if opts.ready != nil {
		opts.ready(srv.URL())
	}
	// A drain after SIGTERM or Ctrl-C is the normal way to stop: exit 0.
	return srv.Run(ctx)
}

// serveError is what serve says when it could not start: a setting at
// fault as it is (exit 2), a port another program holds with the setting
// that chose it (exit 1), anything else as serve's.
func serveError(opts *ServeOptions, err error) error {
	var le *serve.ListenError
	switch {
	case errors.As(err, new(*serve.ConfigError)):
		return err
	case errors.As(err, &le) && errors.Is(err, syscall.EADDRINUSE):
		if le.UI {
			return portInUse("evfwd serve --ui", "--ui-addr", le.Addr, opts.origin)
		}
		return portInUse("evfwd serve", "--addr", le.Addr, opts.origin)
	}
	return fmt.Errorf("serve: %w", err)
}

// exportVar is one line of `export NAME=VALUE` for the user's shell.
type exportVar struct{ Name, Value string }

// exportsFor are the variables that point evfwd track, send, listen and
// verify at src on a server at endpoint (EVFWD_ENDPOINT only off the
// default).
func exportsFor(src serve.Source, endpoint string) []exportVar {
	vars := []exportVar{
		{cli.EnvName("write-key"), src.WriteKey},
		{cli.EnvPrefix + "SECRET", src.Webhooks.SharedSecret},
	}
	if endpoint != analytics.DefaultEndpoint {
		vars = append(vars, exportVar{cli.EnvName("endpoint"), endpoint})
	}
	return vars
}

// writeExports prints vars as export lines, whole and bold, to paste.
func writeExports(ios *cli.IOStreams, vars []exportVar) {
	w, st := ios.ErrOut, ios.ErrStyles()
	fmt.Fprintf(w, "  %s\n", st.Muted.Sprint("for evfwd track/send/listen/verify, in your shell:"))
	for _, v := range vars {
		fmt.Fprintf(w, "  %s\n", st.Bold.Sprint("export "+v.Name+"="+v.Value))
	}
}

// printDev tells, like `stripe listen` does, what the dev source is and
// the lines that make the other commands use it. Under --log-format json
// it is one record instead, so that stderr stays a stream of JSON; the
// keys are in it on purpose, being dev keys meant for the developer.
func printDev(opts *ServeOptions, log *slog.Logger, l serve.Loaded, endpoint string) {
	src, keyFile := l.Sources[0], serve.DevSourcePath(serve.StateDir(opts.Getenv))
	vars := exportsFor(src, endpoint)
	if opts.LogFormat == "json" {
		attrs := []any{"source", src.Name, "key_file", keyFile}
		for _, v := range vars {
			attrs = append(attrs, strings.ToLower(strings.TrimPrefix(v.Name, cli.EnvPrefix)), v.Value)
		}
		if src.Webhooks.Enabled {
			urls := make([]string, len(src.Webhooks.Endpoints))
			for i, ep := range src.Webhooks.Endpoints {
				urls[i] = ep.Display()
			}
			attrs = append(attrs, "forward_to", urls)
		}
		if l.DevTokenFile != "" {
			attrs = append(attrs, "admin_token_file", l.DevTokenFile)
		}
		if opts.Config.File != "" {
			log.Info("dev source: no sources in the config file", append(attrs, "config", opts.Config.File)...)
		} else {
			log.Info("dev source: no config file", attrs...)
		}
		return
	}
	w, st := opts.IO.ErrOut, opts.IO.ErrStyles()
	why := "no config file"
	if opts.Config.File != "" {
		why = "config " + cli.Printable(opts.Config.File) + " has no sources"
	}
	fmt.Fprintf(w, "%s %s: running source %s for local development (keys kept in %s)\n",
		st.Accent.Sprint(">"), why, st.Bold.Sprintf("%q", src.Name), cli.Printable(keyFile))
	if src.Webhooks.Enabled {
		for _, ep := range src.Webhooks.Endpoints {
			fmt.Fprintf(w, "  webhooks signed and sent to %s\n", cli.Printable(ep.Display()))
		}
	} else {
		fmt.Fprintf(w, "  webhooks off: events are stored; add --forward-to URL to deliver them\n")
	}
	if l.DevTokenFile != "" {
		// The token itself stays out of the output: logs are kept and shared.
		fmt.Fprintf(w, "  inspector: its admin token, for scripts, is in %s (admin_token or %s replaces it)\n",
			l.DevTokenFile, admin.TokenEnv)
	}
	writeExports(opts.IO, vars)
	fmt.Fprintf(w, "  %s\n", st.Muted.Sprint("for a web page (Analytics.js 2.0, npm @segment/analytics-next), settings and events from here:"))
	for _, line := range analyticsJS(src.WriteKey, endpoint) {
		fmt.Fprintf(w, "  %s\n", st.Bold.Sprint(line))
	}
}

// showSignIn shows the inspector's one-time sign-in link, as Jupyter
// prints its ?token= link, on a terminal and never in a log: it works for
// a few minutes without the admin token, and logs are kept and shipped.
// It goes to the controlling terminal (IOStreams.Terminal) whatever stderr
// is and whatever --log-format, else to stderr when that is a terminal;
// with neither (a service, a container without -t) no link is made, and
// the log says to sign in with the admin token. The admin token itself is
// never printed.
func showSignIn(opts *ServeOptions, log *slog.Logger, srv *serve.Server) {
	w, done := io.Writer(nil), func() {}
	if opts.IO.Terminal != nil {
		if tty, err := opts.IO.Terminal(); err == nil {
			w, done = tty, func() { tty.Close() }
		}
	}
	if w == nil && opts.IO.ErrTTY {
		w = opts.IO.ErrOut
	}
	if w == nil {
		log.Info("inspector: sign in with the admin token (no terminal to show a one-time sign-in link on)", "url", srv.UIURL())
		return
	}
	defer done()
	ttl := fmt.Sprintf("%d minutes", int(inspector.SignInTTL.Minutes()))
	st := opts.IO.ErrStyles()
	fmt.Fprintf(w, "%s inspector: open this link to sign in (it works once, within %s):\n  %s\n",
		st.Accent.Sprint(">"), ttl, st.Bold.Sprint(srv.SignInLink()))
	log.Info("inspector: sign-in link shown on the terminal", "url", srv.UIURL())
}

// analyticsJS are the two lines that make a web page send its events to
// serve at endpoint: Analytics.js loads its settings from there, and they
// point it back at serve.
func analyticsJS(writeKey, endpoint string) []string {
	return []string{
		"import { AnalyticsBrowser } from '@segment/analytics-next'",
		fmt.Sprintf("export const analytics = AnalyticsBrowser.load({ writeKey: '%s', cdnURL: '%s' })", writeKey, endpoint),
	}
}

// reloadConfig reads the config file again, as serve read it at start,
// for a reload: nil without a file (nothing to read again).
func reloadConfig(opts *ServeOptions) func() (serve.Config, error) {
	if opts.Config.File == "" || opts.cmd == nil {
		return nil
	}
	return func() (serve.Config, error) {
		c, err := cli.LoadConfig(opts.Config.File, true)
		if err != nil {
			return serve.Config{}, err
		}
		if err := c.CheckKeys(opts.cmd); err != nil {
			return serve.Config{}, err
		}
		l, err := serve.LoadConfig(serveFile(c), opts.flags())
		return l.Config, err
	}
}

// reloadOnHUP, on each SIGHUP (on hup, when a test gives one) until the
// returned stop is called, reads the TLS pair again when serve has one,
// and the config file's destinations (Server.Reload). Each logs its
// outcome; a failure keeps what is in use. done, when set, hears each one.
func reloadOnHUP(ctx context.Context, srv *serve.Server, hup chan os.Signal, done func(error)) (stop func()) {
	if hup == nil {
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-hup:
				err := srv.ReloadTLS()
				if errors.Is(err, serve.ErrTLSOff) {
					err = nil
				}
				if _, rerr := srv.Reload(ctx); !errors.Is(rerr, serve.ErrNoReload) {
					err = errors.Join(err, rerr)
				}
				if done != nil {
					done(err)
				}
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(quit)
		<-finished
	}
}

// serveSettings is what `serve --check` prints: the effective settings,
// secrets masked.
type serveSettings struct {
	Config    string       `json:"config"` // the file read, "" when none
	Addr      string       `json:"addr"`
	Store     string       `json:"store"`
	Retention string       `json:"retention"`
	LeaseTTL  string       `json:"leaseTtl"`
	Grace     string       `json:"grace"`
	LogFormat string       `json:"logFormat"`
	LogLevel  string       `json:"logLevel"`
	AdminAPI  bool         `json:"adminApi"`
	UI        *uiSettings  `json:"ui,omitempty"`  // nil: no --ui
	TLS       *tlsSettings `json:"tls,omitempty"` // nil: plain HTTP
	PublicURL string       `json:"publicUrl,omitempty"`
	// TrustedProxies give web and mobile clients' addresses.
	TrustedProxies []string `json:"trustedProxies,omitempty"`
	// AllowedHosts are the names /metrics, /healthz and the admin API
	// answer besides serve's address, localhost and IP addresses.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// AllowPrivateEndpoints: link-local and metadata addresses may be
	// called.
	AllowPrivateEndpoints bool             `json:"allowPrivateEndpoints,omitempty"`
	Sources               []sourceSettings `json:"sources"`
}

// uiSettings is where --ui serves the inspector.
type uiSettings struct {
	Addr string `json:"addr"`
	URL  string `json:"url"`
}

type tlsSettings struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

type sourceSettings struct {
	Name           string   `json:"name"`
	WriteKey       string   `json:"writeKey"`
	Kind           string   `json:"kind"`
	AllowedOrigins []string `json:"allowedOrigins,omitempty"` // none: any
	Webhooks       struct {
		Enabled      bool               `json:"enabled"`
		SharedSecret string             `json:"sharedSecret"` // "" when webhooks go unsigned
		Endpoints    []webhook.Endpoint `json:"endpoints"`
	} `json:"webhooks"`
	Destinations []destinationSettings `json:"destinations,omitempty"`
}

// destinationSettings is one of a source's destinations, secrets masked.
type destinationSettings struct {
	destination.Config
	SharedSecret string `json:"sharedSecret,omitempty"`
}

// serveCheck prints the settings serve would run with; serveConfig has
// validated them and the store is not opened.
func serveCheck(opts *ServeOptions, cfg serve.Config) error {
	cfg = cfg.Masked()
	st := serveSettings{
		Config: opts.Config.File, Addr: cfg.Addr, Store: cfg.Store, Retention: shortDuration(cfg.Retention),
		LeaseTTL: shortDuration(opts.LeaseTTL), Grace: shortDuration(opts.Grace),
		LogFormat: opts.LogFormat, LogLevel: opts.LogLevel, AdminAPI: cfg.AdminToken != "",
		PublicURL: cfg.PublicURL, TrustedProxies: cfg.TrustedProxies, AllowedHosts: cfg.AllowedHosts,
		AllowPrivateEndpoints: cfg.AllowPrivateEndpoints, Sources: make([]sourceSettings, len(cfg.Sources)),
	}
	if cfg.TLSCert != "" {
		st.TLS = &tlsSettings{Cert: cfg.TLSCert, Key: cfg.TLSKey}
	}
	if opts.UI {
		st.UI = &uiSettings{Addr: opts.UIAddr, URL: "http://" + inspector.DialAddr(opts.UIAddr) + "/"}
	}
	for i, src := range cfg.Sources {
		s := &st.Sources[i]
		s.Name, s.WriteKey, s.AllowedOrigins = src.Name, src.WriteKey, src.AllowedOrigins
		kind, _ := collector.ParseKind(src.Kind) // validated
		s.Kind = string(kind)
		s.Webhooks.Enabled, s.Webhooks.SharedSecret = src.Webhooks.Enabled, src.Webhooks.SharedSecret
		s.Webhooks.Endpoints = append([]webhook.Endpoint{}, src.Webhooks.Endpoints...)
		for _, d := range src.Destinations {
			ds := destinationSettings{Config: d, SharedSecret: d.SharedSecret}
			if len(d.SharedSecrets) > 0 {
				ds.SharedSecret = strings.Join(d.SharedSecrets, ", ")
			}
			s.Destinations = append(s.Destinations, ds)
		}
	}
	if opts.Format.JSON() {
		return cli.WriteJSON(opts.IO.Out, st)
	}
	writeSettings(opts.IO.Out, st)
	fmt.Fprintf(opts.IO.ErrOut, "%s config valid; serve not started\n", opts.IO.ErrStyles().OK.Sprint(cli.SymOK))
	return nil
}

// writeSettings prints st for people, a setting a line.
func writeSettings(w io.Writer, st serveSettings) {
	config := st.Config
	if config == "" {
		config = "(none)"
	}
	admin := "off"
	if st.AdminAPI {
		admin = "on"
	}
	retention := st.Retention
	if retention == "0s" {
		retention += " (keep everything)"
	}
	ui := "off (--ui serves it)"
	if st.UI != nil {
		ui = st.UI.URL + " (sign in with the link serve prints at start, or the admin token)"
	}
	for _, row := range [][2]string{
		{"config", config}, {"addr", st.Addr}, {"store", st.Store}, {"retention", retention},
		{"lease-ttl", st.LeaseTTL}, {"grace", st.Grace}, {"log", st.LogFormat + ", " + st.LogLevel}, {"admin API", admin},
		{"inspector", ui},
	} {
		fmt.Fprintf(w, "%-10s %s\n", row[0], cli.Printable(row[1]))
	}
	if st.TLS != nil {
		fmt.Fprintf(w, "%-10s cert %s, key %s\n", "tls", cli.Printable(st.TLS.Cert), cli.Printable(st.TLS.Key))
	}
	if st.PublicURL != "" {
		fmt.Fprintf(w, "%-10s %s (in the settings document)\n", "public", st.PublicURL)
	}
	if len(st.TrustedProxies) > 0 {
		fmt.Fprintf(w, "%-10s %s (X-Forwarded-For believed from these)\n", "proxies", strings.Join(st.TrustedProxies, ", "))
	}
	if len(st.AllowedHosts) > 0 {
		fmt.Fprintf(w, "%-10s %s (as Host on /metrics, /healthz, /admin/)\n", "hosts", strings.Join(st.AllowedHosts, ", "))
	}
	if st.AllowPrivateEndpoints {
		fmt.Fprintf(w, "%-10s link-local and cloud metadata addresses allowed (allow_private_endpoints)\n", "endpoints")
	}
	for _, s := range st.Sources {
		fmt.Fprintf(w, "source %s\n  write_key  %s\n", cli.Printable(s.Name), cli.Printable(s.WriteKey))
		if s.Kind != string(collector.KindServer) {
			fmt.Fprintf(w, "  kind       %s: context.ip added, device clock skew corrected\n", s.Kind)
		}
		if len(s.AllowedOrigins) > 0 {
			fmt.Fprintf(w, "  origins    %s\n", cli.Printable(strings.Join(s.AllowedOrigins, ", ")))
		}
		hooks := "disabled: messages are stored, none delivered"
		switch {
		case !s.Webhooks.Enabled && len(s.Destinations) > 0:
			hooks = "disabled (the destinations below deliver)"
		case s.Webhooks.Enabled && s.Webhooks.SharedSecret != "":
			hooks = "enabled, signed (shared_secret " + s.Webhooks.SharedSecret + ")"
		case s.Webhooks.Enabled:
			hooks = "enabled, unsigned (no shared_secret)"
		}
		fmt.Fprintf(w, "  webhooks   %s\n", hooks)
		for j, ep := range s.Webhooks.Endpoints {
			if ep.Name != "" {
				fmt.Fprintf(w, "  endpoint %d %s (%s)\n", j+1, cli.Printable(ep.Name), cli.Printable(ep.URL))
			} else {
				fmt.Fprintf(w, "  endpoint %d %s\n", j+1, cli.Printable(ep.URL))
			}
			if ep.Signing != "" {
				fmt.Fprintf(w, "    also signed: %s (signing_secret %s)\n", ep.Signing, ep.SigningSecret)
			}
			for _, name := range slices.Sorted(maps.Keys(ep.Headers)) {
				fmt.Fprintf(w, "    %s: %s\n", cli.Printable(name), cli.Printable(ep.Headers[name]))
			}
		}
		for _, d := range s.Destinations {
			writeDestination(w, d)
		}
	}
}

// writeDestination prints one destination's settings for people.
func writeDestination(w io.Writer, d destinationSettings) {
	var what []string
	if d.Subscribe != "" {
		what = append(what, "takes "+cli.Printable(d.Subscribe))
	} else {
		what = append(what, "takes every message")
	}
	if d.Mapping != nil {
		what = append(what, "mapped")
	}
	if d.Method != "" && !strings.EqualFold(d.Method, "POST") {
		what = append(what, strings.ToUpper(d.Method))
	}
	if d.Batch.Size > 1 {
		what = append(what, fmt.Sprintf("batches of up to %d", d.Batch.Size))
	}
	if d.RateLimit.PerSecond > 0 {
		what = append(what, fmt.Sprintf("at most %g requests/s", d.RateLimit.PerSecond))
	}
	if d.SharedSecret != "" {
		what = append(what, "signed ("+d.SharedSecret+")")
	} else {
		what = append(what, "unsigned")
	}
	if d.Paused {
		what = append(what, "PAUSED")
	}
	fmt.Fprintf(w, "  destination %s: %s\n", cli.Printable(d.Name), strings.Join(what, ", "))
	for j, ep := range d.Endpoints {
		fmt.Fprintf(w, "    endpoint %d %s\n", j+1, cli.Printable(ep.URL))
	}
}

// shortDuration drops a duration's zero minutes and seconds: 168h, 2m, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
