package cmd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/internal/tlscert"
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

	ctx   context.Context
	ready func(url string) // tests: called once the port is open
	rand  func() float64   // tests: --fail-rate rolls

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
			if runF != nil {
				return runF(opts)
			}
			return listenRun(opts)
		},
	}
	opts.Secret.AddFlags(cmd)
	fl := cmd.Flags()
	addSchemeFlag(cmd, &opts.Scheme, signature.Auto, true)
	fl.DurationVar(&opts.Tolerance, "tolerance", signature.DefaultTolerance, "how old a signed timestamp may be at a request's arrival (0: no limit)")
	fl.StringVar(&opts.Addr, "addr", "127.0.0.1:8788", "`HOST:PORT` to listen on (port 0 picks a free one)")
	fl.StringVar(&opts.Path, "path", "", "serve only this `PATH`; others get 404 (default any path)")
	fl.BoolVar(&opts.AcceptInvalid, "accept-invalid", false, "answer requests with a missing or wrong signature normally (the verdict is still shown)")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "also print headers and the pretty-printed body")
	fl.StringVar(&opts.Record, "record", "", "append every request as an NDJSON record to `FILE`")
	fl.IntVar(&opts.Status, "status", 0, "answer every request with this status `CODE`")
	fl.IntSliceVar(&opts.Respond, "respond", nil, "answer with this sequence of `CODES`, the last repeating (e.g. 500,500,200)")
	fl.DurationVar(&opts.Delay, "delay", 0, "hold each answer back this long (e.g. 6s)")
	fl.Float64Var(&opts.FailRate, "fail-rate", 0, "answer this fraction of requests 500 (0 to 1)")
	fl.StringVar(&opts.ForwardTo, "forward-to", "", "relay each request to `URL` and answer with its response")
	fl.IntVar(&opts.Count, "count", 0, "exit 0 after `N` accepted requests")
	fl.StringVar(&opts.Type, "type", "", "with --count, count only messages of this `TYPE`")
	fl.DurationVar(&opts.Timeout, "timeout", 0, "stop after this long; exit 1 if --count was not reached")
	fl.StringVar(&opts.ReadyFile, "ready-file", "", "write the listening URL to `PATH` once the port is open")
	fl.StringVar(&opts.TLSCert, "tls-cert", "", "serve HTTPS with this certificate `FILE` (PEM)")
	fl.StringVar(&opts.TLSKey, "tls-key", "", "private key `FILE` (PEM) for --tls-cert")
	fl.BoolVar(&opts.UI, "ui", false, "serve an inspector page in the browser on --ui-addr")
	fl.StringVar(&opts.UIAddr, "ui-addr", "127.0.0.1:8789", "`HOST:PORT` of the --ui inspector (port 0 picks a free one)")
	fl.StringVar(&opts.UIToken, "ui-token", "", "the --ui inspector's API needs this `TOKEN` (16+ characters; default EVFWD_UI_TOKEN, else one made up beyond loopback)")
	fl.BoolVar(&opts.AllowReplay, "allow-replay-local", false, "let an inspector reachable beyond loopback replay to this machine's loopback addresses")
	fl.StringArrayVar(&opts.RedactHeaders, "redact-header", nil, "keep this header's value (`NAME`, any case) out of the records, output and inspector (repeatable)")
	return cmd
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

func listenRun(opts *ListenOptions) error {
	if err := opts.check(); err != nil {
		return err
	}
	secrets, err := opts.Secret.ResolveAll("listen", false)
	if err != nil {
		return err
	}
	if opts.scheme != signature.Auto {
		if err := signature.CheckSecrets(opts.scheme, secrets); err != nil {
			return cli.UsageErrorf("--scheme %s: %v", opts.scheme, err)
		}
	}
	tolerance := opts.Tolerance
	if tolerance == 0 {
		tolerance = -1 // the receiver's zero is the default, ours no limit
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

	var record *os.File
	if opts.Record != "" {
		// 0600: records hold whole requests, headers included.
		if record, err = os.OpenFile(opts.Record, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			return cli.UsageErrorf("--record: %v", err)
		}
		defer record.Close()
		if err := receiver.EndTornLine(record); err != nil {
			return fmt.Errorf("--record: %w", err)
		}
	}
	out := newListenPrinter(opts.IO, opts.Format, opts.Verbose)
	tally := newTally(opts.Count, opts.Type)
	var insp *inspector.Listen
	var ui uiAccess
	if opts.UI {
		cas, err := trustOwnCert(opts.TLSCert)
		if err != nil {
			return err
		}
		if ui, err = listenUI(opts); err != nil {
			return err
		}
		defer ui.ln.Close() // when listen stops before serving it
		insp = inspector.NewListen(inspector.ListenConfig{
			ForwardTo: opts.ForwardTo, Scheme: opts.scheme, Secrets: secrets, Tolerance: tolerance,
			Record: opts.Record, Version: opts.Version, Now: opts.Now, RootCAs: cas,
			Token: ui.token, NoLoopbackReplay: ui.beyond && !opts.AllowReplay,
		})
		if err := loadRecord(insp, opts.Record); err != nil {
			return err
		}
	}
	ropts := receiver.Options{
		Secrets:       secrets,
		Scheme:        opts.scheme,
		Tolerance:     tolerance,
		AcceptInvalid: opts.AcceptInvalid,
		Path:          opts.Path,
		Simulate: receiver.Simulation{
			Status: opts.Status, Respond: opts.Respond, Delay: opts.Delay,
			FailRate: opts.FailRate, Rand: opts.rand,
		},
		ForwardTo:     opts.ForwardTo,
		MaxBodyBytes:  opts.maxBody,
		Now:           opts.Now,
		RedactHeaders: opts.RedactHeaders,
		OnRequest: func(r *receiver.Request) {
			out.print(r)
			tally.add(r)
			if insp != nil {
				insp.Add(r)
			}
		},
	}
	if record != nil {
		ropts.Record = record
	}
	h, err := receiver.New(ropts)
	if err != nil {
		return cli.UsageError(err)
	}

	ln, scheme, err := listen(opts)
	if err != nil {
		h.Close()
		return err
	}
	// Cancelling base aborts --delay waits when the listener stops.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := h.Server(opts.readTimeout)
	srv.BaseContext = func(net.Listener) context.Context { return base }
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	url := scheme + "://" + ln.Addr().String() + opts.Path
	var uiSrv *http.Server
	if insp != nil {
		uiSrv = serveInspector(opts, insp, ui, url)
	}
	if err := announce(opts, url, len(secrets)); err != nil {
		srv.Close()
		h.Close()
		return err
	}
	if opts.ready != nil {
		opts.ready(url)
	}

	var timeout <-chan time.Time
	if opts.Timeout > 0 {
		t := time.NewTimer(opts.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var result error
	select {
	case <-ctx.Done(): // Ctrl-C: how a server stops (exit 0), but it cuts a --count wait short
		if opts.Count > 0 {
			result = cli.Silent(cli.ExitInterrupted)
		}
	case <-tally.reached:
	case <-timeout:
		if opts.Count > 0 {
			result = &cli.ExitError{Code: cli.ExitFailure, Err: tally.shortfall(opts.Timeout)}
		}
	case err := <-served:
		result = fmt.Errorf("serve: %w", err)
	}

	cancelBase()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if uiSrv != nil {
		insp.Close() // ends the pages' event streams, which Shutdown would wait on
		if err := uiSrv.Shutdown(sctx); err != nil {
			uiSrv.Close()
		}
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

// listen opens the port, with TLS when asked.
func listen(opts *ListenOptions) (net.Listener, string, error) {
	var cfg *tls.Config
	if opts.TLSCert != "" {
		certs, err := tlscert.NewReloader(opts.TLSCert, opts.TLSKey)
		if err != nil {
			return nil, "", cli.UsageErrorf("--tls-cert/--tls-key: %v", err)
		}
		cfg = certs.ServerConfig()
	}
	ln, err := opts.listener, error(nil)
	if ln == nil {
		ln, err = net.Listen("tcp", opts.Addr)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		// Not a usage mistake: another program has the port (exit 1).
		return nil, "", fmt.Errorf("--addr %s: port in use (another evfwd listen? try --addr 127.0.0.1:0)", opts.Addr)
	}
	if err != nil {
		return nil, "", cli.UsageErrorf("--addr %s: %v", opts.Addr, err)
	}
	if cfg != nil {
		return tls.NewListener(ln, cfg), "https", nil
	}
	return ln, "http", nil
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

// uiAccess is the inspector's port and who may use it.
type uiAccess struct {
	ln        net.Listener
	beyond    bool   // reachable beyond loopback
	token     string // what the API needs ("" nothing)
	generated bool   // token was made up here, and is printed once
}

// listenUI opens --ui-addr and decides the inspector's token: --ui-token,
// else, beyond loopback, 32 random bytes.
func listenUI(opts *ListenOptions) (uiAccess, error) {
	ln, err := opts.uiListener, error(nil)
	if ln == nil {
		ln, err = net.Listen("tcp", opts.UIAddr)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return uiAccess{}, fmt.Errorf("--ui-addr %s: port in use (another evfwd listen --ui? try --ui-addr 127.0.0.1:0)", opts.UIAddr)
	}
	if err != nil {
		return uiAccess{}, cli.UsageErrorf("--ui-addr %s: %v", opts.UIAddr, err)
	}
	a := uiAccess{ln: ln, beyond: !inspector.IsLoopback(ln.Addr().String()), token: opts.UIToken}
	if a.token == "" && a.beyond {
		b := make([]byte, 32)
		rand.Read(b)
		a.token, a.generated = base64.RawURLEncoding.EncodeToString(b), true
	}
	return a, nil
}

// serveInspector serves the inspector on the port listenUI opened, saying
// where on stderr, and warning when it is reachable beyond loopback.
func serveInspector(opts *ListenOptions, insp *inspector.Listen, a uiAccess, listenURL string) *http.Server {
	insp.SetURL(listenURL)
	ln := a.ln
	// The limits serve's inspector has: a caller that trickles its
	// headers or body, or idles, loses its connection. A replay (up to
	// the receiver's 30 s forward timeout) fits in the write timeout; the
	// event stream lifts it for itself.
	srv := &http.Server{
		Handler:           insp.Handler(ln.Addr().String()),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	go srv.Serve(ln)
	url := "http://" + inspector.DialAddr(ln.Addr().String()) + "/"
	st := opts.IO.ErrStyles()
	if a.beyond {
		replays := "replays to this machine's loopback addresses go only to listen itself and --forward-to (--allow-replay-local lifts that)"
		if opts.AllowReplay {
			replays = "replays may reach this machine's loopback addresses (--allow-replay-local)"
		}
		fmt.Fprintf(opts.IO.ErrOut, "%s the inspector listens on %s, beyond loopback: its API needs the token; %s\n",
			st.Warn.Sprint("warning:"), ln.Addr(), replays)
	}
	shown := url
	if a.generated {
		// The fragment stays in the browser, which the page reads it from.
		shown += "#token=" + a.token
	}
	fmt.Fprintf(opts.IO.ErrOut, "inspector on %s\n", st.Bold.Sprint(shown))
	if opts.uiReady != nil {
		opts.uiReady(url)
	}
	return srv
}

// announce prints the readiness line and writes --ready-file.
func announce(opts *ListenOptions, url string, secrets int) error {
	st := opts.IO.ErrStyles()
	fmt.Fprintf(opts.IO.ErrOut, "listening on %s  %s\n", url, st.Muted.Sprint("("+checkNote(opts, secrets)+")"))
	if opts.ReadyFile == "" {
		return nil
	}
	// Write then rename, so a CI step polling for the file never reads
	// half of it.
	tmp := filepath.Join(filepath.Dir(opts.ReadyFile), "."+filepath.Base(opts.ReadyFile)+".tmp")
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o644); err != nil {
		return cli.UsageErrorf("--ready-file: %v", err)
	}
	if err := os.Rename(tmp, opts.ReadyFile); err != nil {
		return cli.UsageErrorf("--ready-file: %v", err)
	}
	return nil
}

// checkNote says what announce's line says about signatures, e.g.
// "verifying stripe signatures, 2 secrets, timestamps within 5m0s".
func checkNote(opts *ListenOptions, secrets int) string {
	if secrets == 0 {
		return "no secret: signatures not checked"
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

// tally counts what arrived, for --count and the summary.
type tally struct {
	mu       sync.Mutex
	want     int
	typ      string
	counted  int
	total    int
	byType   map[string]int
	bySig    map[receiver.SigVerdict]int
	badShape int
	dups     int
	replays  int
	byStatus map[int]int
	refused  map[string]int
	reached  chan struct{}
}

func newTally(want int, typ string) *tally {
	return &tally{
		want: want, typ: typ,
		byType: map[string]int{}, bySig: map[receiver.SigVerdict]int{}, byStatus: map[int]int{}, refused: map[string]int{},
		reached: make(chan struct{}),
	}
}

// add counts r. Toward --count go the requests that were accepted: on the
// path, readable, and not refused for their signature, so a CI job waiting
// for N events fails when the sender signs wrong.
func (t *tally) add(r *receiver.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total++
	typ := r.Type
	if typ == "" {
		typ = "(none)"
	}
	if r.Refused != receiver.RefusedPath {
		t.byType[typ]++
	}
	if r.Refused != receiver.RefusedPath { // nothing was checked
		t.bySig[r.Signature.Verdict]++
		if !r.Shape.OK {
			t.badShape++
		}
	}
	if r.Duplicate {
		t.dups++
	}
	if r.Replay {
		t.replays++
	}
	t.byStatus[r.Status]++
	if r.Refused != "" {
		t.refused[r.Refused]++
	}
	if t.want == 0 || r.Refused != "" || (t.typ != "" && r.Type != t.typ) {
		return
	}
	t.counted++
	if t.counted == t.want {
		close(t.reached)
	}
}

func (t *tally) shortfall(d time.Duration) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	what := "requests"
	if t.typ != "" {
		what = t.typ + " messages"
	}
	msg := fmt.Sprintf("timeout after %s: %d of %d %s arrived", d, t.counted, t.want, what)
	if n := t.refused[receiver.RefusedSignature]; n > 0 {
		msg += fmt.Sprintf("; %d refused for an invalid signature", n)
	}
	return errors.New(msg)
}
