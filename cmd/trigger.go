package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/loadgen"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/webhook"
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
		return cli.UsageError(webhook.SettingErrors(err, "--url", "--header"))
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
		msg, err = webhook.SampleFrom(opts.From, tr.typ, opts.Now(), message.NewID())
	default:
		msg, err = webhook.NewMessage(tr.typ, data, opts.Now(), message.NewID())
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
