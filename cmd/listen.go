package cmd

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/spf13/cobra"
)

// ListenOptions are the inputs of `evfwd listen`.
type ListenOptions struct {
	IO            *cli.IOStreams
	Format        cli.Format
	Now           func() time.Time
	Getenv        func(string) string // says whether GOGC is set
	Secret        cli.Secret
	Scheme        string
	Tolerance     time.Duration
	Addr          string
	Path          string
	AcceptInvalid bool
	Verbose       bool
	Record        string
	Status        int
	Respond       []int
	Delay         time.Duration
	FailRate      float64
	ForwardTo     string
	Count         int
	Type          string
	Timeout       time.Duration
	ReadyFile     string
	TLSCert       string
	TLSKey        string
	UI            bool
	UIAddr        string
	UIToken       string
	AllowReplay   bool // --allow-replay-local
	RedactHeaders []string
	Version       string

	scheme      signature.Scheme // Scheme, parsed by check
	uiTokenFlag bool             // --ui-token was given (not EVFWD_UI_TOKEN)

	ctx    context.Context
	origin func(flag string) string // where a flag's value came from (cli.Config.Origin)
	ready  func(url string)         // tests: called once the port is open
	rand   func() float64           // tests: --fail-rate rolls

	readTimeout time.Duration // tests: replaces receiver.DefaultReadTimeout
	maxBody     int64         // tests: replaces the Handler's body limit
	listener    net.Listener  // tests: listen here instead of on --addr
	uiListener  net.Listener  // tests: serve the inspector here instead of on --ui-addr
	uiReady     func(url string)
}

// NewCmdListen builds `evfwd listen`; runF replaces listenRun in tests.
func NewCmdListen(f *cli.Factory, runF func(*ListenOptions) error) *cobra.Command {
	opts := &ListenOptions{}
	cmd := &cobra.Command{
		Use:   "listen",
		Short: "Run a local webhook receiver that verifies signatures and shows what arrives",
		Long: `Serve HTTP on --addr and show each webhook request as it arrives: its type,
event or user, whether its signature verifies, whether the body has the shape
of a webhook message, duplicates of an earlier messageId, replays of a signed
message, and the answer given.

With a shared secret (--secret-file, EVFWD_SECRET or --secret) requests whose
signature is not valid (missing, wrong, or signed longer than --tolerance
before their arrival; for Standard Webhooks, or as far after) are answered 401 unless --accept-invalid. --scheme says
how requests are signed: segment (X-Signature), github, stripe, standard
(Standard Webhooks, Svix: a whsec_ secret), slack, shopify, or auto (the
default: whichever the request's headers carry). Repeat --secret or
--secret-file to accept any of several secrets, as during a rotation: each
line says which one matched.

A replay is a signed message that came before, among the last 10000: the same
webhook-id (standard), the same timestamp and signature (stripe, slack), or
the same signature, and so body (segment, github, shopify, which sign no
timestamp). A sender's retry counts as one, except a stripe or slack retry,
which signs a fresh timestamp. Replays are flagged, and answered as any
other request.

Failure simulation for testing senders: --status, --respond 500,500,200 (the
last value repeats), --delay 6s (over the 5 s deadline), --fail-rate 0.3.
--forward-to relays each request to your app and answers with its response.

For CI, --count N exits 0 once N requests (of --type, if given) have been
accepted, and --timeout exits 1 if they have not arrived in time. A line
"listening on URL" goes to stderr, and --ready-file is written, once the
port is open. Ctrl-C prints a summary and exits 0 (130 before --count).

-o json prints one NDJSON record per request on stdout; --record FILE appends
the same records to FILE (created 0600), body bytes kept exactly, so that
"evfwd verify --record FILE" can re-check every signature. --redact-header
NAME (repeatable, any case) replaces that header's value with "[redacted]"
in the records, the output and the inspector, after the signature check
and --forward-to have used it: e.g. --redact-header Cookie --redact-header
Authorization.

--ui serves an inspector page on --ui-addr (loopback unless the address says
otherwise): requests appear live, each with its headers, body, signature
check step by step and shape findings; compare two, replay one (re-signed or
as captured) to --forward-to or any URL, copy it as curl or as a file for
"evfwd verify --request". It keeps the last 1000 requests; with --record the
file is the source of truth, and a restarted listen shows its last 1000.
The values of Authorization, Cookie, Proxy-Authorization and X-Api-Key are
hidden on the page until clicked. Anyone who can reach --ui-addr can use the
inspector, unless --ui-token (or EVFWD_UI_TOKEN) gives a token of 16
characters or more that it then needs. On an address beyond loopback (such as
0.0.0.0) it always needs one: without --ui-token, listen makes one and prints
it, once, in the inspector's address (after #token=); and a replay may reach
this machine's loopback addresses only at listen's own URL and --forward-to,
unless --allow-replay-local.

A body over 5 MB is answered 413, and one that has not arrived 30 s after
its request began 408; both close the connection and are recorded without
the body (its size says how much came).

Exit status: 0 stopped or --count reached, 1 --timeout passed first,
2 usage error, 130 interrupted before --count was reached.`,
		Example: `  evfwd listen --secret-file hook.secret
  evfwd listen --scheme stripe --secret whsec_...
  evfwd listen --secret-file old.secret --secret-file new.secret
  evfwd listen --path /hooks --respond 500,500,200
  evfwd listen --count 3 --type track --timeout 30s --ready-file ready &
  evfwd listen --forward-to http://localhost:3000/webhooks --verbose
  evfwd listen -o json --record hooks.ndjson | jq .type
  evfwd listen --ui --record hooks.ndjson --secret-file hook.secret`,
		GroupID: groupTools,
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Now = f.IO, f.Format, f.Now
			opts.Getenv, opts.Version = f.Getenv, f.Version
			opts.uiTokenFlag = cmd.Flags().Changed("ui-token")
			if !opts.uiTokenFlag {
				opts.UIToken = f.Getenv(uiTokenEnv)
			}
			opts.Secret.Lookup(f.Getenv, f.Config)
			opts.ctx = cmd.Context()
			opts.origin = func(flag string) string { return f.Config.Origin(cmd, flag) }
			if runF != nil {
				return runF(opts)
			}
			return listenRun(opts)
		},
	}
	opts.addFlags(cmd)
	return cmd
}

// addFlags registers listen's flags.
func (o *ListenOptions) addFlags(cmd *cobra.Command) {
	o.Secret.AddFlags(cmd)
	fl := cmd.Flags()
	addSchemeFlag(cmd, &o.Scheme, signature.Auto, true)
	fl.DurationVar(&o.Tolerance, "tolerance", signature.DefaultTolerance, "how old a signed timestamp may be at a request's arrival (0: no limit)")
	fl.StringVar(&o.Addr, "addr", defaultListenAddr, "`HOST:PORT` to listen on (port 0 picks a free one; in the config file, under listen:)")
	fl.StringVar(&o.Path, "path", "", "serve only this `PATH`; others get 404 (default any path)")
	fl.BoolVar(&o.AcceptInvalid, "accept-invalid", false, "answer requests with a missing or wrong signature normally (the verdict is still shown)")
	fl.BoolVarP(&o.Verbose, "verbose", "v", false, "also print headers and the pretty-printed body")
	fl.StringVar(&o.Record, "record", "", "append every request as an NDJSON record to `FILE`")
	fl.IntVar(&o.Status, "status", 0, "answer every request with this status `CODE`")
	fl.IntSliceVar(&o.Respond, "respond", nil, "answer with this sequence of `CODES`, the last repeating (e.g. 500,500,200)")
	fl.DurationVar(&o.Delay, "delay", 0, "hold each answer back this long (e.g. 6s)")
	fl.Float64Var(&o.FailRate, "fail-rate", 0, "answer this fraction of requests 500 (0 to 1)")
	fl.StringVar(&o.ForwardTo, "forward-to", "", "relay each request to `URL` and answer with its response")
	cli.MarkURLFlags(cmd, "forward-to")
	fl.IntVar(&o.Count, "count", 0, "exit 0 after `N` accepted requests")
	fl.StringVar(&o.Type, "type", "", "with --count, count only messages of this `TYPE`")
	fl.DurationVar(&o.Timeout, "timeout", 0, "stop after this long; exit 1 if --count was not reached")
	fl.StringVar(&o.ReadyFile, "ready-file", "", "write the listening URL to `PATH` once the port is open")
	fl.StringVar(&o.TLSCert, "tls-cert", "", "serve HTTPS with this certificate `FILE` (PEM)")
	fl.StringVar(&o.TLSKey, "tls-key", "", "private key `FILE` (PEM) for --tls-cert")
	fl.BoolVar(&o.UI, "ui", false, "serve an inspector page in the browser on --ui-addr")
	fl.StringVar(&o.UIAddr, "ui-addr", defaultListenUIAddr, "`HOST:PORT` of the --ui inspector (port 0 picks a free one)")
	fl.StringVar(&o.UIToken, "ui-token", "", "the --ui inspector's API needs this `TOKEN` (16+ characters; default EVFWD_UI_TOKEN, else one made up beyond loopback)")
	fl.BoolVar(&o.AllowReplay, "allow-replay-local", false, "let an inspector reachable beyond loopback replay to this machine's loopback addresses")
	fl.StringArrayVar(&o.RedactHeaders, "redact-header", nil, "keep this header's value (`NAME`, any case) out of the records, output and inspector (repeatable)")
}

func (o *ListenOptions) check() error {
	if o.Path != "" && !strings.HasPrefix(o.Path, "/") {
		o.Path = "/" + o.Path
	}
	scheme, err := signature.ParseScheme(o.Scheme, true)
	if err != nil {
		return cli.UsageErrorf("--scheme: %v", err)
	}
	o.scheme = scheme
	switch {
	case o.Tolerance < 0:
		return cli.UsageErrorf("--tolerance must not be negative (0 means no limit)")
	case o.Count < 0:
		return cli.UsageErrorf("--count must not be negative")
	case o.Type != "" && o.Count == 0:
		return cli.UsageErrorf("--type counts messages for --count: give --count N too")
	case o.Type != "" && !webhook.ValidType(message.Type(o.Type)):
		return cli.UsageErrorf("--type %q: want identify, track, page, screen, group, alias or delete", o.Type)
	case o.Timeout < 0:
		return cli.UsageErrorf("--timeout must not be negative")
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return cli.UsageErrorf("--tls-cert and --tls-key go together")
	case o.Status != 0 && len(o.Respond) > 0:
		return cli.UsageErrorf("--status and --respond: give one, not both")
	case o.ForwardTo != "" && (o.Status != 0 || len(o.Respond) > 0):
		return cli.UsageErrorf("--forward-to answers with the app's status: drop --status/--respond")
	}
	if err := cli.CheckURLScheme("--forward-to", o.ForwardTo); err != nil {
		return err
	}
	if !o.UI && (o.UIToken != "" && o.uiTokenFlag || o.AllowReplay) {
		return cli.UsageErrorf("--ui-token and --allow-replay-local are for the inspector: give --ui too")
	}
	if o.UIToken != "" && len(strings.TrimSpace(o.UIToken)) < 16 {
		return cli.UsageErrorf("--ui-token: want at least 16 characters, not all spaces (or leave it out: beyond loopback listen makes one)")
	}
	for _, name := range o.RedactHeaders {
		if name == "" || strings.ContainsAny(name, " \t:") {
			return cli.UsageErrorf("--redact-header %q: want a header name, such as Cookie", name)
		}
	}
	return nil
}

// listenRun prints each request as the receiver answers it, until Ctrl-C,
// --count or --timeout stops the receiver.Server, then the summary.
func listenRun(opts *ListenOptions) error {
	if err := opts.check(); err != nil {
		return err
	}
	secrets, err := opts.secrets()
	if err != nil {
		return err
	}
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	// Requests make short-lived garbage at a high rate; a larger heap
	// target halves the GC work for a few MB (GOGC still wins if set).
	if opts.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	record, err := openRecord(opts.Record)
	if err != nil {
		return err
	}
	if record != nil {
		defer record.Close()
	}
	out := newListenPrinter(opts.IO, opts.Format, opts.Verbose)
	tally := newTally()
	h, err := receiver.New(opts.handlerOptions(secrets, record, func(r *receiver.Request) {
		out.print(r)
		tally.add(r)
	}))
	if err != nil {
		return cli.UsageError(err)
	}
	srv, ui, events, err := opts.start(secrets)
	if err != nil {
		h.Close()
		return err
	}
	defer srv.Close()
	stop, err := srv.Serve(ctx, h, ui, events)
	if errors.As(err, new(*receiver.SetupError)) { // --ready-file
		h.Close()
		return opts.setupError(err)
	}
	result := err
	if result == nil {
		result = opts.stopped(stop, srv.Accepted(), tally)
	}
	if err := h.Close(); err != nil && result == nil {
		result = fmt.Errorf("--record %s: %w", opts.Record, err)
	}
	if err := out.close(); err != nil && result == nil {
		result = err
	}
	tally.summary(opts.IO)
	return result
}

// secrets resolves the secrets and checks that --scheme can use them.
func (o *ListenOptions) secrets() ([][]byte, error) {
	secrets, err := o.Secret.ResolveAll("listen", false)
	if err != nil {
		return nil, err
	}
	if o.scheme != signature.Auto {
		if err := signature.CheckSecrets(o.scheme, secrets); err != nil {
			return nil, cli.UsageErrorf("--scheme %s: %v", o.scheme, err)
		}
	}
	return secrets, nil
}

// tolerance is --tolerance for the receiver, whose zero is the default
// and ours no limit.
func (o *ListenOptions) tolerance() time.Duration {
	if o.Tolerance == 0 {
		return -1
	}
	return o.Tolerance
}

// openRecord opens --record for appending (nil without it), ending a line
// a killed listen left torn.
func openRecord(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	// 0600: records hold whole requests, headers included.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, cli.UsageErrorf("--record: %v", err)
	}
	if err := receiver.EndTornLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--record: %w", err)
	}
	return f, nil
}

// handlerOptions are the receiver's options; report sees each request.
func (o *ListenOptions) handlerOptions(secrets [][]byte, record *os.File, report func(*receiver.Request)) receiver.Options {
	ropts := receiver.Options{
		Secrets:       secrets,
		Scheme:        o.scheme,
		Tolerance:     o.tolerance(),
		AcceptInvalid: o.AcceptInvalid,
		Path:          o.Path,
		Simulate: receiver.Simulation{
			Status: o.Status, Respond: o.Respond, Delay: o.Delay,
			FailRate: o.FailRate, Rand: o.rand,
		},
		ForwardTo:     o.ForwardTo,
		MaxBodyBytes:  o.maxBody,
		Now:           o.Now,
		RedactHeaders: o.RedactHeaders,
		OnRequest:     report,
	}
	if record != nil { // not a nil *os.File in the interface
		ropts.Record = record
	}
	return ropts
}

// start opens the ports and, with --ui, builds the inspector; it returns
// what Serve takes besides the handler.
func (o *ListenOptions) start(secrets [][]byte) (*receiver.Server, receiver.UI, receiver.Events, error) {
	events := receiver.Events{
		Listening: func(url string) { o.announce(url, len(secrets)) },
		Ready:     o.ready,
	}
	var cas *x509.CertPool
	if o.UI {
		var err error
		if cas, err = trustOwnCert(o.TLSCert); err != nil {
			return nil, nil, events, err
		}
	}
	cfg := receiver.ServerConfig{
		Addr: o.Addr, Listener: o.listener, TLSCert: o.TLSCert, TLSKey: o.TLSKey,
		ReadTimeout: o.readTimeout, ReadyFile: o.ReadyFile,
		Count: o.Count, CountType: o.Type, Timeout: o.Timeout,
	}
	if o.UI {
		cfg.UIAddr, cfg.UIListener = o.UIAddr, o.uiListener
	}
	srv, err := receiver.NewServer(cfg)
	if err != nil {
		return nil, nil, events, o.setupError(err)
	}
	if !o.UI {
		return srv, nil, events, nil
	}
	a := o.uiAccess(srv.UIAddr())
	insp := inspector.NewListen(inspector.ListenConfig{
		ForwardTo: o.ForwardTo, Scheme: o.scheme, Secrets: secrets, Tolerance: o.tolerance(),
		Record: o.Record, Version: o.Version, Now: o.Now, RootCAs: cas,
		Token: a.token, NoLoopbackReplay: a.beyond && !o.AllowReplay,
	})
	if err := loadRecord(insp, o.Record); err != nil {
		srv.Close()
		return nil, nil, events, err
	}
	events.UIServing = func(addr net.Addr) { o.announceUI(addr, a) }
	return srv, insp, events, nil
}

// setupError says which flag a receiver.SetupError is about: a port
// another program has is exit 1, the rest usage errors.
func (o *ListenOptions) setupError(err error) error {
	var e *receiver.SetupError
	if !errors.As(err, &e) {
		return err
	}
	switch e.Setting {
	case "TLS":
		return cli.UsageErrorf("--tls-cert/--tls-key: %v", e.Err)
	case "ReadyFile":
		return cli.UsageErrorf("--ready-file: %v", e.Err)
	}
	flag, addr, self := "--addr", o.Addr, "evfwd listen"
	if e.Setting == "UIAddr" {
		flag, addr, self = "--ui-addr", o.UIAddr, "evfwd listen --ui"
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return portInUse(self, flag, addr, o.origin)
	}
	return cli.UsageErrorf("%s %s: %v", flag, addr, e.Err)
}

// stopped is listen's result for why the server stopped: Ctrl-C is how a
// server stops (exit 0), but it cuts a --count wait short; so does
// --timeout, with the shortfall.
func (o *ListenOptions) stopped(stop receiver.Stop, accepted int, t *tally) error {
	if o.Count == 0 {
		return nil
	}
	switch stop {
	case receiver.StopTimeout:
		return &cli.ExitError{Code: cli.ExitFailure, Err: t.shortfall(o.Timeout, accepted, o.Count, o.Type)}
	case receiver.StopDone:
		return cli.Silent(cli.ExitInterrupted)
	}
	return nil
}

// loadRecord has the inspector show the last requests of the --record file,
// when there is one already.
func loadRecord(insp *inspector.Listen, path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return cli.UsageErrorf("--record: %v", err)
	}
	defer f.Close()
	if err := insp.Load(f); err != nil {
		return fmt.Errorf("--record %s: %w", path, err)
	}
	return nil
}

// trustOwnCert returns the system's roots and the --tls-cert certificate,
// so that the inspector's replays to listen itself verify; nil without one.
func trustOwnCert(certFile string) (*x509.CertPool, error) {
	if certFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, cli.UsageErrorf("--tls-cert: %v", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	pool.AppendCertsFromPEM(pem)
	return pool, nil
}

// uiTokenEnv gives --ui-token when the flag is not.
const uiTokenEnv = "EVFWD_UI_TOKEN"

// uiAccess is who may use the inspector.
type uiAccess struct {
	beyond    bool   // reachable beyond loopback
	token     string // what the API needs ("" nothing)
	generated bool   // token was made up here, and is printed once
}

// uiAccess decides the inspector's token, for a port on addr: --ui-token,
// else, beyond loopback, 32 random bytes.
func (o *ListenOptions) uiAccess(addr net.Addr) uiAccess {
	a := uiAccess{beyond: !inspector.IsLoopback(addr.String()), token: o.UIToken}
	if a.token == "" && a.beyond {
		b := make([]byte, 32)
		rand.Read(b)
		a.token, a.generated = base64.RawURLEncoding.EncodeToString(b), true
	}
	return a
}

// announceUI says on stderr where the inspector serves, warning when it is
// reachable beyond loopback.
func (o *ListenOptions) announceUI(addr net.Addr, a uiAccess) {
	url := "http://" + inspector.DialAddr(addr.String()) + "/"
	st := o.IO.ErrStyles()
	if a.beyond {
		replays := "replays to this machine's loopback addresses go only to listen itself and --forward-to (--allow-replay-local lifts that)"
		if o.AllowReplay {
			replays = "replays may reach this machine's loopback addresses (--allow-replay-local)"
		}
		fmt.Fprintf(o.IO.ErrOut, "%s the inspector listens on %s, beyond loopback: its API needs the token; %s\n",
			st.Warn.Sprint("warning:"), addr, replays)
	}
	shown := url
	if a.generated {
		// The fragment stays in the browser, which the page reads it from.
		shown += "#token=" + a.token
	}
	fmt.Fprintf(o.IO.ErrOut, "inspector on %s\n", st.Bold.Sprint(shown))
	if o.uiReady != nil {
		o.uiReady(url)
	}
}

// announce prints the readiness line.
func (o *ListenOptions) announce(url string, secrets int) {
	st := o.IO.ErrStyles()
	fmt.Fprintf(o.IO.ErrOut, "listening on %s  %s\n", url, st.Muted.Sprint("("+checkNote(o, secrets)+")"))
	if secrets == 0 {
		fmt.Fprintln(o.IO.ErrOut, noSecretWarning(st))
	}
}

// checkNote says what announce's line says about signatures, e.g.
// "verifying stripe signatures, 2 secrets, timestamps within 5m0s".
func checkNote(opts *ListenOptions, secrets int) string {
	if secrets == 0 {
		return "signatures NOT checked: no secret"
	}
	note := "verifying " + string(opts.scheme) + " signatures"
	if opts.scheme == signature.Auto {
		note = "verifying signatures of any scheme"
	}
	if secrets > 1 {
		note += fmt.Sprintf(", %d secrets", secrets)
	}
	if opts.scheme == signature.Auto || opts.scheme.SignsTimestamp() {
		if opts.Tolerance > 0 {
			note += ", timestamps within " + shortDuration(opts.Tolerance)
		} else {
			note += ", timestamps not limited"
		}
	}
	if opts.AcceptInvalid {
		note += ", accepting invalid"
	}
	return note
}
