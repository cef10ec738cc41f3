package cmd

import (
	"fmt"
	"strconv"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/spf13/cobra"
)

// SignOptions are the inputs of `evfwd sign`.
type SignOptions struct {
	IO        *cli.IOStreams
	Format    cli.Format
	Secret    cli.Secret
	File      string
	Header    bool
	Scheme    string
	Timestamp string
	ID        string
}

// NewCmdSign builds `evfwd sign`; runF replaces signRun in tests.
func NewCmdSign(f *cli.Factory, runF func(*SignOptions) error) *cobra.Command {
	opts := &SignOptions{}
	cmd := &cobra.Command{
		Use:   "sign [FILE]",
		Short: "Print the signature of a body, in any vendor's scheme",
		Long: `Sign the exact bytes of FILE (stdin when no FILE or "-") as a webhook sender
does. By default, as the webhook destination does: X-Signature, the lowercase
hex HMAC-SHA1 keyed by the shared secret. --scheme signs as another sender:

  segment    X-Signature: hex HMAC-SHA1 of the body (default)
  github     X-Hub-Signature-256: sha256=<hex> (and the legacy X-Hub-Signature)
  stripe     Stripe-Signature: t=<unix>,v1=<hex> of "t.body"
  standard   Standard Webhooks (Svix): webhook-id, webhook-timestamp and
             webhook-signature: v1,<base64> of "id.timestamp.body";
             the secret is whsec_ and base64
  slack      X-Slack-Signature: v0=<hex> of "v0:timestamp:body", with
             X-Slack-Request-Timestamp
  shopify    X-Shopify-Hmac-Sha256: <base64> of the body

Schemes that sign a timestamp sign now unless --timestamp says when; Standard
Webhooks signs a fresh msg_ id unless --id names one. Stripe and Standard
Webhooks carry one signature per --secret, as a sender rotating its secret
does. Any size is signed in constant memory.`,
		Example: `  evfwd sign --secret-file hook.secret body.json
  printf '%s' "$BODY" | EVFWD_SECRET=s3cret evfwd sign --header
  evfwd sign --scheme stripe --secret-file whsec.txt --header body.json
  evfwd sign --scheme standard --secret "$WHSEC" --id msg_1 --timestamp 1700000000 --header body.json
  evfwd sign body.json -o json --secret-file hook.secret`,
		GroupID: groupTools,
		Args:    cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format = f.IO, f.Format
			opts.Secret.Lookup(f.Getenv, f.Config)
			if len(args) == 1 {
				opts.File = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return signRun(opts)
		},
	}
	opts.Secret.AddFlags(cmd)
	cmd.Flags().BoolVar(&opts.Header, "header", false, "print every header line the scheme sends, e.g. X-Signature: <hex>")
	addSchemeFlag(cmd, &opts.Scheme, signature.Segment, false)
	cmd.Flags().StringVar(&opts.Timestamp, "timestamp", "", "sign this `TIME` (Unix seconds or RFC 3339) instead of now (stripe, standard, slack)")
	cmd.Flags().StringVar(&opts.ID, "id", "", "sign this message `ID` instead of a fresh one (standard)")
	return cmd
}

// signResult is the -o json form.
type signResult struct {
	Scheme    signature.Scheme  `json:"scheme"`
	Algorithm string            `json:"algorithm"`
	Signature string            `json:"signature"`
	Headers   map[string]string `json:"headers"`
	Timestamp int64             `json:"timestamp,omitempty"`
	ID        string            `json:"id,omitempty"`
	Bytes     int64             `json:"bytes"`
}

func signRun(opts *SignOptions) error {
	scheme, err := signature.ParseScheme(opts.Scheme, false)
	if err != nil {
		return cli.UsageError(err)
	}
	var p signature.Params
	if p.Timestamp, err = parseSignedTime(opts.Timestamp, scheme); err != nil {
		return err
	}
	if opts.ID != "" && !scheme.SignsID() {
		return cli.UsageErrorf("--id: the %s scheme signs no message id", scheme)
	}
	p.ID = opts.ID
	secrets, err := opts.Secret.ResolveAll("sign", true)
	if err != nil {
		return err
	}
	in, name, err := openInput(opts.IO, opts.File)
	if err != nil {
		return err
	}
	defer in.Close()
	g, err := signature.NewSigner(scheme, secrets, p)
	if err != nil {
		return cli.UsageError(err)
	}
	if _, err := copyInput(g, in); err != nil {
		return cli.UsageErrorf("read %s: %v", name, err)
	}
	switch {
	case opts.Format.JSON():
		res := signResult{Scheme: scheme, Algorithm: scheme.Algorithm(), Signature: g.Value(), Headers: map[string]string{},
			Timestamp: g.Timestamp(), ID: g.ID(), Bytes: g.Len()}
		for _, f := range g.Fields() {
			res.Headers[f.Name] = f.Value
		}
		return cli.WriteJSON(opts.IO.Out, res)
	case opts.Header:
		for _, f := range g.Fields() {
			if _, err := fmt.Fprintf(opts.IO.Out, "%s: %s\n", f.Name, f.Value); err != nil {
				return err
			}
		}
		return nil
	default:
		_, err = fmt.Fprintln(opts.IO.Out, g.Value())
		return err
	}
}

// parseSignedTime reads --timestamp: Unix seconds or RFC 3339, for
// schemes that sign one. Empty means now (the zero time).
func parseSignedTime(v string, scheme signature.Scheme) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if !scheme.SignsTimestamp() {
		return time.Time{}, cli.UsageErrorf("--timestamp: the %s scheme signs no timestamp", scheme)
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > signature.MaxTimestamp {
			return time.Time{}, cli.UsageErrorf("--timestamp %d: want Unix seconds from 0 to %d", n, int64(signature.MaxTimestamp))
		}
		return time.Unix(n, 0), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, cli.UsageErrorf("--timestamp %q: want Unix seconds or RFC 3339 (2024-05-01T12:00:00Z)", v)
	}
	return t, nil
}
