package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/loadgen"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// TriggerOptions are the inputs of `evfwd trigger`.
type TriggerOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Now     func() time.Time
	Version string // in the User-Agent
	Context context.Context

	Type        string
	URLs        []string
	Data        string // JSON, @file or "-"
	From        string // the sample's kind of source: webhook.SampleSources
	UserID      string
	Event       string
	Secret      cli.Secret
	Scheme      string   // signature scheme, signature.ParseScheme
	Headers     []string // "Name: value"
	CAFile      string
	RetryWindow time.Duration
	Timeout     time.Duration
	Count       int
	Concurrency int

	// RetryInitial is the first backoff (hidden flag: tests shorten it).
	RetryInitial time.Duration

	// Destination sends as that destination of serve's config does
	// (trigger_destination.go); Source names its source.
	Destination string
	Source      string
	Config      *cli.Config
}

// triggerWindow is trigger's default --retry-window: a pass over the URLs
// and a few retries, enough for an endpoint that is still starting, short
// enough that a mistyped port ends in seconds rather than after the
// destination's 4 hours.
const triggerWindow = 30 * time.Second

// NewCmdTrigger builds `evfwd trigger`; runF replaces triggerRun in tests.
func NewCmdTrigger(f *cli.Factory, runF func(*TriggerOptions) error) *cobra.Command {
	opts := &TriggerOptions{}
	typeNames := webhookTypeNames()
	cmd := &cobra.Command{
		Use:   "trigger TYPE --url URL [--url URL ...]",
		Short: "Send a webhook to your endpoint exactly as the destination would",
		Long: `Send one message of TYPE (` + strings.Join(typeNames, ", ") + `) to up to five
webhook URLs as the webhook destination does: a body of type, version and the
message's fields in their order, headers
User-Agent, Content-Type, your --header lines and X-Signature when a secret is
given (--secret-file, EVFWD_SECRET or --secret). --scheme signs the way
another vendor does instead, to test a receiver built for it: github, stripe,
standard (Standard Webhooks, a whsec_ secret), slack or shopify; stripe and
standard sign with every --secret given, as a sender rotating its secret
does, and the timestamps signed are each attempt's. URLs are tried in order; the
first 2xx ends delivery. Each attempt is printed as it happens with what
follows: the next URL, a retry (exponential backoff from 1s to 10m, for at most
--retry-window: 30s by default, 0 for one pass over the URLs, 4h for the
destination's own window; not when every URL refused the connection), or the end. Each attempt has a 5s deadline; redirects are not
followed; an untrusted certificate is an error (--ca-file trusts a private CA).

The message is a realistic sample of TYPE, or yours with --data (JSON, @FILE
or - for stdin); --user-id and --event override fields, and a missing
messageId or timestamp is filled in. --from web or --from mobile makes the
sample one from a web page (Analytics.js) or an app (analytics-kotlin) as
serve forwards it: that library's context, the client's context.ip, and the
device's clock kept as originalTimestamp beside the corrected timestamp.

With --destination NAME (and --source when several sources have one by that
name) the message goes as that destination of serve's config file (--config)
sends it: its URLs, method, headers, secrets and scheme, the body serve would
store (receivedAt added) mapped by its mapping, a batch of one for a
destination that sends batches. TYPE is then optional (track); trigger says
on stderr when the destination's condition, or the message's integrations,
would keep serve from sending it.

With --count N the message is sent N times (fresh messageId each, no retries)
by --concurrency workers, and a latency histogram (p50/p90/p99), status counts
and throughput are printed: a quick load test of your endpoint.

Exit status: 0 delivered (every message with --count), 1 failed, 2 usage
error, 130 interrupted.`,
		Example: `  evfwd trigger track --url http://localhost:8080/hooks
  evfwd trigger identify --url https://hooks.example/a --url https://hooks.example/b --secret-file hook.secret
  evfwd trigger track --data @order.json --event "Order Refunded" --header 'Authorization: Bearer t0k'
  evfwd trigger page --url http://127.0.0.1:9000/ --count 10000 --concurrency 32
  evfwd trigger screen --from mobile --url http://localhost:8080/hooks
  evfwd trigger delete --user-id u_42 --url https://hooks.example/gdpr -o json
  evfwd trigger track --url http://localhost:3000/webhooks/stripe --scheme stripe --secret-file whsec.txt
  evfwd trigger --config evfwd.yaml --destination crm --source web`,
		GroupID:   groupTools,
		Args:      triggerArgs(typeNames),
		ValidArgs: typeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Now, opts.Version = f.IO, f.Format, f.Now, f.Version
			opts.Secret.Lookup(f.Getenv, f.Config)
			opts.Config = f.Config
			opts.Type = string(message.TypeTrack) // --destination's default
			if len(args) > 0 {
				opts.Type = args[0]
			}
			opts.Context = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return triggerRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&opts.URLs, "url", nil, "webhook `URL` (http or https; repeat for up to 5, tried in order)")
	cli.MarkURLFlags(cmd, "url")
	fl.StringVar(&opts.Data, "data", "", "the message: JSON, @FILE, or - for stdin (default: a sample of TYPE)")
	fl.StringVar(&opts.From, "from", "server", "the sample as sent from a server, web (Analytics.js) or mobile (analytics-kotlin) source")
	cmd.RegisterFlagCompletionFunc("from", cobra.FixedCompletions(webhook.SampleSources, cobra.ShellCompDirectiveNoFileComp))
	fl.StringVar(&opts.UserID, "user-id", "", "set the message's userId")
	fl.StringVar(&opts.Event, "event", "", "set the event name (track)")
	opts.Secret.AddFlags(cmd)
	addSchemeFlag(cmd, &opts.Scheme, signature.Segment, false)
	fl.StringArrayVarP(&opts.Headers, "header", "H", nil, "static header `'Name: value'` sent to every URL (repeatable)")
	fl.StringVar(&opts.CAFile, "ca-file", "", "PEM `FILE` of a CA to trust besides the system roots")
	fl.DurationVar(&opts.RetryWindow, "retry-window", triggerWindow, "retry for at most this long after the first attempt (0: one pass over the URLs; 4h: as the destination does)")
	fl.DurationVar(&opts.Timeout, "timeout", webhook.DefaultTimeout, "deadline of each attempt, connect to last byte")
	fl.IntVarP(&opts.Count, "count", "n", 1, "send the message N times (load test; no retries)")
	fl.IntVarP(&opts.Concurrency, "concurrency", "c", 1, "deliveries in flight with --count")
	fl.DurationVar(&opts.RetryInitial, "retry-initial", webhook.DefaultInitial, "first retry delay")
	_ = fl.MarkHidden("retry-initial")
	addTriggerDestinationFlags(cmd, opts)
	return cmd
}

// webhookTypeNames are the types trigger sends, in the destination's order.
func webhookTypeNames() []string {
	names := make([]string, len(webhook.Types))
	for i, t := range webhook.Types {
		names[i] = string(t)
	}
	return names
}

// triggerArgs wants one TYPE and, without it, lists the types to pick
// from, as stripe trigger does, rather than cobra's count of arguments.
func triggerArgs(types []string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		list := strings.Join(types[:len(types)-1], ", ") + " or " + types[len(types)-1]
		switch {
		case len(args) == 0 && cmd.Flags().Changed("destination"):
			return nil // a track
		case len(args) == 0:
			return cli.UsageErrorf("give the TYPE of message to send: %s\n  e.g. evfwd trigger track --url http://localhost:8080/hooks", list)
		case len(args) > 1:
			return cli.UsageErrorf("one TYPE at a time (%s), got %d arguments: %s", list, len(args), cli.Printable(strings.Join(args, " ")))
		}
		return nil
	}
}

// trigger is one run: the checked inputs and what prints the results.
type trigger struct {
	opts *TriggerOptions
	ctx  context.Context
	typ  message.Type
	msg  *rawjson.Object
	dest *webhook.Destination
	// route, with --destination: what it sends (the body mapped, its id).
	route  *destinationSend
	sender *webhook.Sender
	out    *attemptPrinter
}

func triggerRun(opts *TriggerOptions) error {
	tr, err := newTrigger(opts)
	if err != nil {
		return err
	}
	defer tr.sender.CloseIdleConnections()
	if opts.Count > 1 {
		return tr.load()
	}
	return tr.once()
}

func newTrigger(opts *TriggerOptions) (*trigger, error) {
	tr := &trigger{opts: opts, ctx: opts.Context, typ: message.Type(opts.Type)}
	if tr.ctx == nil {
		tr.ctx = context.Background()
	}
	if !webhook.ValidType(tr.typ) {
		return nil, cli.UsageErrorf("unknown type %q: want one of %s", opts.Type, strings.Join(webhookTypeNames(), ", "))
	}
	switch {
	case opts.Count < 1:
		return nil, cli.UsageErrorf("--count must be at least 1")
	case opts.Concurrency < 1:
		return nil, cli.UsageErrorf("--concurrency must be at least 1")
	case opts.RetryWindow < 0:
		return nil, cli.UsageErrorf("--retry-window must not be negative")
	case opts.Timeout <= 0:
		return nil, cli.UsageErrorf("--timeout must be positive")
	}
	var err error
	if opts.Destination != "" {
		err = tr.fromDestination()
	} else {
		err = tr.fromFlags()
	}
	if err != nil {
		return nil, err
	}

	if tr.msg, err = tr.message(); err != nil {
		return nil, err
	}
	if _, err := webhook.Body(tr.msg); err != nil {
		return nil, cli.UsageErrorf("--data: %v", err)
	}
	if tr.route != nil {
		if err := tr.route.body(tr); err != nil {
			return nil, err
		}
	}

	tr.sender, err = webhook.NewSender(webhook.Options{
		UserAgent:       webhook.UserAgent(opts.Version),
		Timeout:         opts.Timeout,
		CAFile:          opts.CAFile,
		Now:             opts.Now,
		MaxConnsPerHost: 0,
		// The user calls the URL they typed, from their own machine, as
		// curl would: serve's refusal of link-local and metadata
		// addresses guards a service's endpoints, which others configure.
		AllowPrivateEndpoints: true,
	})
	if err != nil {
		return nil, cli.UsageErrorf("--ca-file: %v", err)
	}
	tr.out = newAttemptPrinter(opts, len(tr.dest.Endpoints))
	return tr, nil
}

// fromFlags makes the destination of the flags: --url, --header, the
// secrets and --scheme.
func (tr *trigger) fromFlags() error {
	opts := tr.opts
	if len(opts.URLs) == 0 {
		return cli.UsageErrorf(`required flag(s) "url" not set (or --destination NAME of serve's config)`)
	}
	headers := map[string]string{}
	for _, h := range opts.Headers {
		name, value, err := parseHeader(h)
		if err != nil {
			return cli.UsageError(err)
		}
		canon := http.CanonicalHeaderKey(name)
		for k := range headers {
			if http.CanonicalHeaderKey(k) == canon {
				return cli.UsageErrorf("--header %q: %s given twice", h, canon)
			}
		}
		headers[name] = value
	}
	scheme, err := signature.ParseScheme(opts.Scheme, false)
	if err != nil {
		return cli.UsageErrorf("--scheme: %v", err)
	}
	secrets, err := opts.Secret.ResolveAll("trigger", false)
	if err != nil {
		return err
	}
	switch {
	case len(secrets) == 0 && scheme != signature.Segment:
		return cli.UsageErrorf("--scheme %s signs with a secret: give --secret-file FILE, %sSECRET or --secret", scheme, cli.EnvPrefix)
	case len(secrets) > 1 && !scheme.CarriesSeveral():
		return cli.UsageErrorf("%d secrets given: a %s signature carries one, give one secret (stripe and standard sign with several)", len(secrets), scheme)
	}
	tr.dest = &webhook.Destination{Scheme: scheme}
	if len(secrets) > 0 {
		// Checked here, with the flag's name, rather than as an endpoint
		// error: a standard secret must be whsec_ and base64.
		if _, err := signature.NewSigner(scheme, secrets, signature.Params{ID: "msg_check"}); err != nil {
			return cli.UsageErrorf("--secret: %v", err)
		}
		tr.dest.SharedSecret = string(secrets[0])
		for _, s := range secrets[1:] {
			tr.dest.ExtraSecrets = append(tr.dest.ExtraSecrets, string(s))
		}
	}
	for _, u := range opts.URLs {
		if err := cli.CheckURLScheme("--url", u); err != nil {
			return err
		}
		tr.dest.Endpoints = append(tr.dest.Endpoints, webhook.Endpoint{URL: u, Headers: headers})
	}
	if err := tr.dest.Validate(); err != nil {
		return cli.UsageError(flagConfigError(err))
	}
	return nil
}

// parseHeader splits a --header value "Name: value". The name must be a
// header token; surrounding spaces of the value are dropped as HTTP does.
func parseHeader(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return "", "", fmt.Errorf("--header %q: want 'Name: value'", s)
	}
	return name, strings.Trim(value, " \t"), nil
}

// flagConfigError restates destination errors in terms of the flags.
func flagConfigError(err error) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var lines []string
	for _, e := range errs {
		var ce *webhook.ConfigError
		switch {
		case errors.As(e, &ce) && ce.Index < 0:
			lines = append(lines, "--url: "+strings.Replace(ce.Reason, "webhook URLs", "URLs", 1))
		case errors.As(e, &ce) && strings.HasPrefix(ce.Reason, "header "):
			lines = append(lines, "--"+ce.Reason)
		case errors.As(e, &ce):
			lines = append(lines, fmt.Sprintf("--url %q: %s", ce.URL, ce.Reason))
		default:
			lines = append(lines, e.Error())
		}
	}
	// Static headers apply to every URL: say each problem once.
	return errors.New(strings.Join(slices.Compact(lines), "\n"))
}

// message builds the message to send (webhook.NewMessage: the sample, or
// --data, filled in) and applies --user-id and --event.
func (tr *trigger) message() (*rawjson.Object, error) {
	opts := tr.opts
	var data []byte
	name := ""
	if opts.Data != "" {
		var err error
		if data, name, err = opts.IO.ReadArg("--data", opts.Data); err != nil {
			return nil, err
		}
	}
	if !slices.Contains(webhook.SampleSources, opts.From) {
		return nil, cli.UsageErrorf("--from %q: want server, web or mobile", opts.From)
	}
	var msg *rawjson.Object
	var err error
	switch {
	case opts.From != "server" && data != nil:
		return nil, cli.UsageErrorf("--from picks a sample; --data is your own message: give one")
	case data == nil:
		msg, err = webhook.SampleFrom(opts.From, tr.typ, opts.Now(), uuid.NewString())
	default:
		msg, err = webhook.NewMessage(tr.typ, data, opts.Now(), uuid.NewString())
	}
	var te *webhook.TypeError
	switch {
	case errors.As(err, &te):
		return nil, cli.UsageErrorf("--data %s has type %q but TYPE is %q", name, te.Got, opts.Type)
	case err != nil:
		return nil, cli.UsageErrorf("--data %s: %v", name, err)
	}
	if opts.UserID != "" {
		msg.SetString("userId", opts.UserID)
	}
	if opts.Event != "" {
		if tr.typ != message.TypeTrack {
			return nil, cli.UsageErrorf("--event applies to track messages, not %s", opts.Type)
		}
		msg.SetString("event", opts.Event)
	}
	return msg, nil
}

// once delivers the message with retries and reports each attempt.
func (tr *trigger) once() error {
	body, _ := webhook.Body(tr.msg)
	// The messageId is Standard Webhooks' webhook-id, as serve sends it.
	id, _ := tr.msg.GetString("messageId")
	if tr.route != nil {
		body, id = tr.route.sent, tr.route.id
	}
	tr.out.intro(tr.typ, tr.msg, body, tr.dest.SignedFields(body, id, tr.opts.Now()))
	p := webhook.RetryFor(tr.opts.RetryWindow)
	p.Initial, p.Now = tr.opts.RetryInitial, tr.opts.Now
	p.StopRefused = true // a mistyped port fails at once, not after the window
	attempts := 0
	res, deliveries := tr.sender.RetryMessage(tr.ctx, tr.dest, body, id, p, func(a webhook.Attempt) {
		attempts++
		tr.out.attempt(a, tr.msg)
	})
	err := tr.out.verdict(res, deliveries, attempts, tr.msg, body, tr.signedScheme())
	if h := giveUpHint(res); h != "" {
		fmt.Fprintln(tr.opts.IO.ErrOut, tr.opts.IO.ErrStyles().Warn.Sprint(h))
	}
	return err
}

// signedScheme is the scheme that signs, "" when nothing does.
func (tr *trigger) signedScheme() signature.Scheme {
	if tr.dest.SharedSecret == "" {
		return ""
	}
	return tr.dest.Scheme
}

// giveUpHint says what to do when trigger stopped retrying (its window
// is short, unlike the destination's), or "" when it did not.
func giveUpHint(res webhook.Result) string {
	if res.Outcome != webhook.Retryable {
		return ""
	}
	var urls []string
	answered, slow := false, false
	for _, a := range res.Attempts {
		if !slices.Contains(urls, a.URL) {
			urls = append(urls, a.URL)
		}
		answered = answered || a.Status != 0
		slow = slow || a.Class == webhook.ClassTimeout
	}
	where := strings.Join(urls, ", ")
	switch {
	case res.Refused():
		return "nothing listens at " + where + " (connection refused): is your endpoint running, on that port?"
	case answered:
		return "no success from " + where + " within the retry window (--retry-window to keep trying)"
	case slow:
		// A running endpoint that answers too late is not "not running".
		return "no answer from " + where + " within --timeout (--timeout to wait longer, --retry-window to keep trying)"
	}
	return "nothing answered at " + where + ": is your endpoint running? (--retry-window to keep trying)"
}

// attemptPrinter writes attempts and summaries in the chosen format.
type attemptPrinter struct {
	now       func() time.Time
	w         io.Writer
	st        *cli.Styles
	json      bool
	endpoints int
	mu        sync.Mutex // load mode prints from many workers
}

func newAttemptPrinter(opts *TriggerOptions, endpoints int) *attemptPrinter {
	return &attemptPrinter{now: opts.Now, w: opts.IO.Out, st: opts.IO.OutStyles(), json: opts.Format.JSON(), endpoints: endpoints}
}

func (p *attemptPrinter) intro(t message.Type, msg *rawjson.Object, body []byte, fields []signature.Field) {
	if p.json {
		return
	}
	id, _ := msg.GetString("messageId")
	signed := p.st.Muted.Sprint("unsigned")
	if len(fields) > 0 {
		lines := make([]string, len(fields))
		for i, f := range fields {
			lines[i] = f.Name + ": " + f.Value
		}
		// One header a line, under the first.
		signed = "signed " + p.st.Muted.Sprint(strings.Join(lines, "\n  "))
	}
	fmt.Fprintf(p.w, "%s %s  %d bytes  %s\n%s\n\n", p.st.Bold.Sprint(string(t)), p.st.Muted.Sprint(cli.Printable(id)), len(body), signed, cli.PrintableText(string(body)))
}

// attempt prints one attempt line, or one NDJSON record.
func (p *attemptPrinter) attempt(a webhook.Attempt, msg *rawjson.Object) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		b, _ := json.Marshal(a)
		id, _ := msg.GetString("messageId")
		rec := append([]byte(`{"record":"attempt","messageId":`), rawjson.AppendString(nil, id)...)
		rec = append(append(rec, ','), b[1:]...)
		p.w.Write(append(rec, '\n'))
		return
	}
	st := p.st
	var answer string
	switch {
	case a.Status != 0 && a.Outcome == webhook.Delivered:
		answer = st.OK.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
	case a.Status != 0:
		answer = st.Fail.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
	default:
		answer = st.Fail.Sprint(string(a.Class))
	}
	fmt.Fprintf(p.w, "%s  #%d  %s  → %s  %s  %s\n",
		st.Muted.Sprint(a.Start.Local().Format("15:04:05.000")), a.Delivery, cli.Printable(a.URL), answer,
		fmtLatency(a.Latency), p.next(a))
	if a.Err != nil {
		fmt.Fprintf(p.w, "    %s\n", st.Muted.Sprint(cli.Printable(a.Err.Error())))
	} else if a.Outcome != webhook.Delivered && len(a.Body) > 0 {
		fmt.Fprintf(p.w, "    %s\n", st.Muted.Sprint(excerptLine(a.Body)))
	}
}

// next says what follows an attempt, in words.
func (p *attemptPrinter) next(a webhook.Attempt) string {
	st := p.st
	why := a.Outcome.String()
	if a.Outcome == webhook.TLSError {
		why = "TLS error"
	}
	switch a.Then {
	case webhook.ThenDone:
		return st.OK.Sprint("delivered")
	case webhook.ThenNextURL:
		return st.Warn.Sprintf("%s, trying the next URL", why)
	case webhook.ThenRetry:
		wait := a.RetryAt.Sub(p.now()).Round(10 * time.Millisecond)
		s := fmt.Sprintf("retryable, retry in %s at %s", wait, a.RetryAt.Local().Format("15:04:05"))
		if a.RetryAfter > 0 {
			s += fmt.Sprintf(" (Retry-After %s)", a.RetryAfter)
		}
		return st.Warn.Sprint(s)
	case webhook.ThenGiveUp:
		if a.Class == webhook.ClassRefused {
			return st.Fail.Sprint("connection refused: giving up")
		}
		if a.Outcome == webhook.Retryable {
			return st.Fail.Sprint("retryable, but the retry window is over: giving up")
		}
		return st.Fail.Sprintf("%s, not retried", why)
	case webhook.ThenStop:
		return st.Warn.Sprint("interrupted")
	}
	return st.Fail.Sprint(why)
}

// excerptLine is the start of an endpoint's answer on one line, printable:
// the endpoint chose it.
func excerptLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return cli.Printable(s)
}

func fmtLatency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return d.Round(10 * time.Millisecond).String()
}

// onceSummary is the -o json summary of a single message.
type onceSummary struct {
	Record      string          `json:"record"`
	Type        string          `json:"type"`
	MessageID   string          `json:"messageId,omitempty"`
	Scheme      string          `json:"scheme,omitempty"` // that signed; none when unsigned
	Outcome     webhook.Outcome `json:"outcome"`
	DeliveredTo string          `json:"deliveredTo,omitempty"`
	Deliveries  int             `json:"deliveries"`
	Attempts    int             `json:"attempts"`
	Body        json.RawMessage `json:"body"`
}

// verdict prints the end of a single delivery and picks the exit code.
func (p *attemptPrinter) verdict(res webhook.Result, deliveries, attempts int, msg *rawjson.Object, body []byte, scheme signature.Scheme) error {
	last := res.Last()
	if p.json {
		id, _ := msg.GetString("messageId")
		typ, _ := msg.GetString("type")
		s := onceSummary{Record: "summary", Type: typ, MessageID: id, Scheme: string(scheme), Outcome: res.Outcome,
			Deliveries: deliveries, Attempts: attempts, Body: body}
		if res.Delivered() {
			s.DeliveredTo = last.URL
		}
		if err := cli.WriteJSON(p.w, s); err != nil {
			return err
		}
	} else {
		st := p.st
		// A try is one pass over the URLs (the #N of the attempt lines);
		// requests are worth naming only when a pass made more than one.
		tries := plural(deliveries, "try", "tries")
		if attempts != deliveries {
			tries += ", " + plural(attempts, "request", "requests")
		}
		switch res.Outcome {
		case webhook.Delivered:
			fmt.Fprintf(p.w, "\n%s delivered to %s (%s)\n", st.OK.Sprint(cli.SymOK), cli.Printable(last.URL), tries)
		case webhook.Interrupted:
			fmt.Fprintf(p.w, "\n%s interrupted, not delivered (%s)\n", st.Warn.Sprint(cli.SymNone), tries)
		default:
			fmt.Fprintf(p.w, "\n%s not delivered: %s (%s)\n", st.Fail.Sprint(cli.SymFail), res.Outcome, tries)
		}
	}
	switch res.Outcome {
	case webhook.Delivered:
		return nil
	case webhook.Interrupted:
		return cli.Silent(cli.ExitInterrupted)
	}
	return cli.Silent(cli.ExitFailure)
}

// load sends the message Count times from Concurrency workers (see
// loadgen) and reports latency percentiles, a histogram, status counts
// and throughput.
func (tr *trigger) load() error {
	o := loadgen.Options{
		Sender: tr.sender, Destination: tr.dest, Message: tr.msg,
		Count: tr.opts.Count, Concurrency: tr.opts.Concurrency,
	}
	if tr.out.json {
		o.OnAttempt = tr.out.attempt
	}
	g, err := loadgen.New(o)
	if err != nil {
		return err
	}
	progress := newConsole(tr.opts.IO)
	if tr.opts.IO.ErrTTY {
		start := time.Now()
		progress.startProgress(func() string {
			d := g.Done()
			return fmt.Sprintf("  %d/%d  %.0f/s", d, o.Count, float64(d)/time.Since(start).Seconds())
		})
	}
	rep := g.Run(tr.ctx)
	progress.stopProgress()
	if err := tr.out.loadSummary(tr.typ, tr.signedScheme(), rep); err != nil {
		return err
	}
	switch {
	case tr.ctx.Err() != nil:
		return cli.Silent(cli.ExitInterrupted)
	case rep.Failed > 0:
		return cli.Silent(cli.ExitFailure)
	}
	return nil
}

// bucket is a histogram bucket as -o json prints it.
type bucket struct {
	LE    *float64 `json:"leMs"` // nil: above the last bound
	Count int      `json:"count"`
}

type loadSummaryJSON struct {
	Record      string             `json:"record"`
	Type        string             `json:"type"`
	Scheme      string             `json:"scheme,omitempty"` // that signed; none when unsigned
	Count       int                `json:"count"`
	Sent        int                `json:"sent"`
	Delivered   int                `json:"delivered"`
	Failed      int                `json:"failed"`
	Interrupted bool               `json:"interrupted,omitempty"`
	Concurrency int                `json:"concurrency"`
	ElapsedMS   float64            `json:"elapsedMs"`
	PerSecond   float64            `json:"perSecond"`
	LatencyMS   map[string]float64 `json:"latencyMs"`
	Status      map[string]int     `json:"status"`
	Histogram   []bucket           `json:"histogram"`
}

func (p *attemptPrinter) loadSummary(t message.Type, scheme signature.Scheme, r *loadgen.Report) error {
	n, c, elapsed := r.Count, r.Concurrency, r.Elapsed
	sent, rate := r.Sent(), r.PerSecond()
	pcts := []struct {
		name string
		d    time.Duration
	}{
		{"p50", r.Latency.Percentile(0.50)}, {"p90", r.Latency.Percentile(0.90)}, {"p99", r.Latency.Percentile(0.99)}, {"max", r.Latency.Percentile(1)},
	}
	status := map[string]int{}
	for k, v := range r.Status {
		status[strconv.Itoa(k)] = v
	}
	for k, v := range r.Errors {
		status[string(k)] = v
	}
	hist := r.Latency.Buckets()
	if p.json {
		ms := map[string]float64{}
		for _, q := range pcts {
			ms[q.name] = float64(q.d.Microseconds()) / 1000
		}
		var buckets []bucket
		for _, h := range hist {
			b := bucket{Count: h.Count}
			if h.UpTo > 0 {
				le := float64(h.UpTo.Microseconds()) / 1000
				b.LE = &le
			}
			buckets = append(buckets, b)
		}
		return cli.WriteJSON(p.w, loadSummaryJSON{
			Record: "summary", Type: string(t), Scheme: string(scheme), Count: n, Sent: sent, Delivered: r.Delivered, Failed: r.Failed,
			Interrupted: r.Interrupted, Concurrency: c,
			ElapsedMS: float64(elapsed.Microseconds()) / 1000, PerSecond: rate,
			LatencyMS: ms, Status: status, Histogram: buckets,
		})
	}
	st := p.st
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %d of %d sent by %s in %s: %s deliveries/s\n",
		st.Bold.Sprint(string(t)), sent, n, plural(c, "worker", "workers"), elapsed.Round(time.Millisecond), st.Bold.Sprintf("%.0f", rate))
	verdict := st.OK.Sprint(cli.SymOK)
	if r.Failed > 0 {
		verdict = st.Fail.Sprint(cli.SymFail)
	}
	fmt.Fprintf(&b, "%s delivered %d  failed %d", verdict, r.Delivered, r.Failed)
	if sent < n {
		fmt.Fprintf(&b, "  %s", st.Warn.Sprintf("interrupted, %d not sent", n-sent))
	}
	b.WriteString("\nstatus  ")
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range status {
			if !yield(k) {
				return
			}
		}
	})
	for i, k := range keys {
		if i > 0 {
			b.WriteString("  ")
		}
		fmt.Fprintf(&b, "%s ×%d", k, status[k])
	}
	b.WriteString("\nlatency ")
	for _, q := range pcts {
		fmt.Fprintf(&b, " %s %s", q.name, fmtLatency(q.d))
	}
	b.WriteString("\n")
	most := 0
	for _, h := range hist {
		most = max(most, h.Count)
	}
	for _, h := range hist {
		label := "> " + fmtLatency(h.Above)
		if h.UpTo > 0 {
			label = "≤ " + fmtLatency(h.UpTo)
		}
		bar := strings.Repeat("█", max(1, h.Count*40/max(most, 1)))
		fmt.Fprintf(&b, "  %9s %s %d\n", label, st.Accent.Sprint(bar), h.Count)
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}
