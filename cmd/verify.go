package cmd

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/capture"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/spf13/cobra"
)

// VerifyOptions are the inputs of `evfwd verify`.
type VerifyOptions struct {
	IO        *cli.IOStreams
	Format    cli.Format
	Secret    cli.Secret
	Now       func() time.Time
	File      string
	Scheme    string
	Signature string
	Timestamp string
	ID        string
	Headers   []string
	Tolerance time.Duration
	Request   string
	Record    string // see verify_record.go
}

// NewCmdVerify builds `evfwd verify`; runF replaces verifyRun in tests.
func NewCmdVerify(f *cli.Factory, runF func(*VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [FILE] --signature VALUE | --header 'NAME: VALUE'... | --request FILE | --record FILE",
		Short: "Check a webhook signature offline, any vendor's (exit 0 valid, 1 invalid)",
		Long: `Check that a body was signed with the shared secret, as a webhook receiver
does: the MAC over the exact bytes, compared in constant time. The expected
value is never printed. --scheme names the sender's scheme (see evfwd sign
--help; default segment, the webhook destination's X-Signature); auto picks
it from the headers present, or from the form of a --signature value.

Give the body as FILE (stdin when no FILE or "-") with --signature (and
--timestamp, --id where the scheme signs them apart), or with the headers as
they arrived (--header, repeatable); or give a raw captured HTTP request with
--request, whose headers are checked against its body (Content-Length
honoured); or a file of recorded requests with --record (see evfwd listen
--record), each judged at the time it arrived.

Several secrets (--secret, --secret-file, repeatable) check a rotation: any
one that matches makes the signature valid, and the output says which by
position. A signed timestamp older than --tolerance fails as expired; for
Standard Webhooks, one as far ahead as future (Stripe's and Slack's libraries
accept those).

Reasons (-o json "reason"): ok, missing, malformed, mismatch,
trailing_newline, expired, future, scheme (signed with another scheme),
encoding (hex where base64 is expected, or the reverse).

Exit status: 0 valid, 1 invalid, 2 usage or input error.`,
		Example: `  evfwd verify body.json --signature "$SIG" --secret-file hook.secret
  evfwd verify --request captured.http --secret-file hook.secret && echo signed
  evfwd verify --scheme stripe --request captured.http --secret-file whsec.txt
  evfwd verify body.json --scheme auto --header "Stripe-Signature: $HDR" --secret "$OLD" --secret "$NEW"
  evfwd verify --scheme standard body.json --signature "v1,..." --id msg_1 --timestamp 1700000000 --tolerance 0 --secret "$WHSEC"
  evfwd verify --record hooks.ndjson --scheme auto -o json`,
		GroupID: groupTools,
		Args:    cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Now = f.IO, f.Format, f.Now
			opts.Secret.Lookup(f.Getenv, f.Config)
			if len(args) == 1 {
				opts.File = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return verifyRun(opts)
		},
	}
	opts.Secret.AddFlags(cmd)
	addSchemeFlag(cmd, &opts.Scheme, signature.Segment, true)
	fl := cmd.Flags()
	fl.StringVar(&opts.Signature, "signature", "", "the signature header's `VALUE`, with or without its prefix")
	fl.StringVar(&opts.Timestamp, "timestamp", "", "the signed `TIME`, Unix seconds, for a --signature of slack or standard")
	fl.StringVar(&opts.ID, "id", "", "the signed message `ID`, for a --signature of standard (webhook-id)")
	fl.StringArrayVar(&opts.Headers, "header", nil, "a request header as it arrived, `'NAME: VALUE'`, repeatable")
	fl.DurationVar(&opts.Tolerance, "tolerance", signature.DefaultTolerance, "how old a signed timestamp may be (0: no limit)")
	fl.StringVar(&opts.Record, "record", "", "re-check every request in `FILE`, as written by evfwd listen --record")
	fl.StringVar(&opts.Request, "request", "", "raw HTTP request `FILE` (request line, headers, blank line, body)")
	return cmd
}

// Verdict is the outcome of one check; the -o json form.
type Verdict struct {
	Valid bool `json:"valid"`
	// Reason is a stable code: see signature.Reason.
	Reason  signature.Reason `json:"reason"`
	Message string           `json:"message"`
	Scheme  signature.Scheme `json:"scheme"`
	// Secret is the position of the secret that matched, when several
	// were given.
	Secret    int    `json:"secret,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"`
	ID        string `json:"id,omitempty"`
}

func verdictOf(r signature.Result) Verdict {
	v := Verdict{Valid: r.Valid, Reason: r.Reason, Message: r.Message(), Scheme: r.Scheme, Timestamp: r.Timestamp, ID: r.ID}
	if r.Reason == signature.ReasonScheme {
		v.Message += ": try --scheme " + string(r.Other) + " or --scheme auto"
	}
	if r.Secrets > 1 {
		v.Secret = r.Secret
	}
	return v
}

// verifySetup is what every form of verify needs.
type verifySetup struct {
	scheme signature.Scheme
	opts   signature.Options
}

func newVerifySetup(o *VerifyOptions) (*verifySetup, error) {
	scheme, err := signature.ParseScheme(o.Scheme, true)
	if err != nil {
		return nil, cli.UsageError(err)
	}
	if o.Tolerance < 0 {
		return nil, cli.UsageErrorf("--tolerance %s: want 0 (no limit) or more", o.Tolerance)
	}
	secrets, err := o.Secret.ResolveAll("verify", true)
	if err != nil {
		return nil, err
	}
	if scheme != signature.Auto {
		if err := signature.CheckSecrets(scheme, secrets); err != nil {
			return nil, cli.UsageError(err)
		}
	}
	s := &verifySetup{scheme: scheme, opts: signature.Options{Secrets: secrets, Tolerance: o.Tolerance, Now: o.Now()}}
	if o.Tolerance == 0 {
		s.opts.Tolerance = -1
	}
	return s, nil
}

// newCheck starts a check of headers h, judging timestamps at now (the
// zero time: the command's clock).
func (s *verifySetup) newCheck(h http.Header, now time.Time) (*signature.Check, error) {
	opts := s.opts
	if !now.IsZero() {
		opts.Now = now
	}
	c, err := signature.NewCheck(s.scheme, h, opts)
	if err != nil {
		return nil, cli.UsageError(err)
	}
	return c, nil
}

// check streams body through a check of headers h.
func (s *verifySetup) check(h http.Header, body io.Reader, name string) (Verdict, error) {
	c, err := s.newCheck(h, time.Time{})
	if err != nil {
		return Verdict{}, err
	}
	if _, err := copyInput(c, body); err != nil {
		return Verdict{}, cli.UsageErrorf("read %s: %v", name, err)
	}
	return verdictOf(c.Result()), nil
}

func verifyRun(opts *VerifyOptions) error {
	if opts.Record != "" {
		return verifyRecordRun(opts)
	}
	bodyOnly := opts.File != "" || opts.Signature != "" || len(opts.Headers) > 0
	switch {
	case opts.Request != "" && bodyOnly:
		return cli.UsageErrorf("--request takes the body and headers from the request file: give no FILE, --signature or --header")
	case opts.Request == "" && opts.Signature == "" && len(opts.Headers) == 0:
		return cli.UsageErrorf("nothing to check: give --signature VALUE or --header 'NAME: VALUE' (with FILE or stdin), or --request FILE")
	case opts.Signature != "" && len(opts.Headers) > 0:
		return cli.UsageErrorf("--signature and --header: give the signature one way, not both")
	case (opts.Timestamp != "" || opts.ID != "") && opts.Signature == "":
		return cli.UsageErrorf("--timestamp and --id go with --signature; with headers, give them as --header lines")
	}
	setup, err := newVerifySetup(opts)
	if err != nil {
		return err
	}
	var v Verdict
	if opts.Request != "" {
		v, err = verifyRequest(opts.IO, setup, opts.Request)
	} else {
		v, err = verifyBody(opts, setup)
	}
	if err != nil {
		return err
	}
	if err := printVerdict(opts, v); err != nil {
		return err
	}
	if !v.Valid {
		return cli.Silent(cli.ExitFailure)
	}
	return nil
}

func verifyBody(opts *VerifyOptions, setup *verifySetup) (Verdict, error) {
	var h http.Header
	if opts.Signature != "" {
		if setup.scheme == signature.Auto {
			s, ok := signature.SchemeOfValue(opts.Signature)
			if !ok {
				return Verdict{}, cli.UsageErrorf("--scheme auto cannot tell the scheme of this --signature value: name it with --scheme")
			}
			setup.scheme = s
		}
		if opts.Timestamp != "" && !setup.scheme.SignsTimestamp() {
			return Verdict{}, cli.UsageErrorf("--timestamp: the %s scheme signs no timestamp", setup.scheme)
		}
		if opts.ID != "" && !setup.scheme.SignsID() {
			return Verdict{}, cli.UsageErrorf("--id: the %s scheme signs no message id", setup.scheme)
		}
		// Slack and Standard Webhooks send what they sign beside the
		// signature, so a bare value needs them too.
		if what, flags := apartFlags(setup.scheme, opts); flags != "" {
			return Verdict{}, cli.UsageErrorf("a %s signature goes with the %s it signs: give %s", setup.scheme, what, flags)
		}
		h = signature.HeaderOf(setup.scheme, opts.Signature, opts.Timestamp, opts.ID)
	} else {
		h = http.Header{}
		for _, line := range opts.Headers {
			name, value, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(name) == "" {
				return Verdict{}, cli.UsageErrorf("--header %q: want 'NAME: VALUE'", line)
			}
			h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
	}
	in, name, err := openInput(opts.IO, opts.File)
	if err != nil {
		return Verdict{}, err
	}
	defer in.Close()
	return setup.check(h, in, name)
}

// apartFlags names what a --signature of scheme needs and lacks, and its
// flags: what the scheme sends in headers of its own.
func apartFlags(scheme signature.Scheme, opts *VerifyOptions) (what, flags string) {
	var whats, fl []string
	if scheme.SignsTimestamp() && scheme != signature.Stripe && opts.Timestamp == "" {
		whats, fl = append(whats, "timestamp"), append(fl, "--timestamp")
	}
	if scheme.SignsID() && opts.ID == "" {
		whats, fl = append(whats, "message id"), append(fl, "--id")
	}
	return strings.Join(whats, " and "), strings.Join(fl, " and ")
}

func verifyRequest(ios *cli.IOStreams, setup *verifySetup, path string) (Verdict, error) {
	in, name, err := openInput(ios, path)
	if err != nil {
		return Verdict{}, err
	}
	defer in.Close()
	req, err := capture.Parse(in)
	if err != nil {
		return Verdict{}, cli.UsageErrorf("%s: %v", name, err)
	}
	return setup.check(http.Header(req.Header), req.Body, name)
}

// line is a verdict in a sentence, with its scheme unless it is the
// default one; printable, since the message may quote a header's value.
func (v Verdict) line() string {
	if v.Scheme == signature.Segment {
		return cli.Printable(v.Message)
	}
	return string(v.Scheme) + ": " + cli.Printable(v.Message)
}

func printVerdict(opts *VerifyOptions, v Verdict) error {
	if opts.Format.JSON() {
		return cli.WriteJSON(opts.IO.Out, v)
	}
	st := opts.IO.OutStyles()
	mark := st.OK.Sprint(cli.SymOK)
	if !v.Valid {
		mark = st.Fail.Sprint(cli.SymFail)
	}
	_, err := fmt.Fprintf(opts.IO.Out, "%s %s\n", mark, v.line())
	return err
}
