package cmd

import (
	"errors"
	"fmt"
	"io"

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
	File      string
	Signature string
	Request   string
	Record    string // see verify_record.go
}

// NewCmdVerify builds `evfwd verify`; runF replaces verifyRun in tests.
func NewCmdVerify(f *cli.Factory, runF func(*VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [FILE] --signature HEX | --request FILE",
		Short: "Check an X-Signature offline (exit 0 valid, 1 invalid)",
		Long: `Check that a body was signed with the shared secret, as a webhook receiver
does: HMAC-SHA1 over the exact bytes, hex compared in constant time, upper or
lower case. The expected value is never printed.

Give the body as FILE (stdin when no FILE or "-") with --signature, or give a
raw captured HTTP request with --request: its X-Signature header is checked
against its body (Content-Length honoured).

Exit status: 0 valid, 1 invalid, 2 usage or input error.`,
		Example: `  evfwd verify body.json --signature "$SIG" --secret-file hook.secret
  evfwd verify --request captured.http --secret-file hook.secret && echo signed
  evfwd verify -o json --request captured.http`,
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
			return verifyRun(opts)
		},
	}
	opts.Secret.AddFlags(cmd)
	cmd.Flags().StringVar(&opts.Signature, "signature", "", "expected signature, 40 hex digits")
	cmd.Flags().StringVar(&opts.Record, "record", "", "re-check every request in `FILE`, as written by evfwd listen --record")
	cmd.Flags().StringVar(&opts.Request, "request", "", "raw HTTP request `FILE` (request line, headers, blank line, body)")
	return cmd
}

// Verdict is the outcome of one check; the -o json form.
type Verdict struct {
	Valid bool `json:"valid"`
	// Reason is a stable code: ok, missing, malformed, trailing_newline,
	// mismatch.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func verifyRun(opts *VerifyOptions) error {
	if opts.Record != "" {
		return verifyRecordRun(opts)
	}
	switch {
	case opts.Request != "" && (opts.File != "" || opts.Signature != ""):
		return cli.UsageErrorf("--request takes the body and signature from the request file: give no FILE or --signature")
	case opts.Request == "" && opts.Signature == "":
		return cli.UsageErrorf("nothing to check: give --signature HEX (with FILE or stdin) or --request FILE")
	}
	secret, err := opts.Secret.Resolve("verify", true)
	if err != nil {
		return err
	}
	var v Verdict
	if opts.Request != "" {
		v, err = verifyRequest(opts.IO, secret, opts.Request)
	} else {
		v, err = verifyBody(opts.IO, secret, opts.File, opts.Signature)
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

func verifyBody(ios *cli.IOStreams, secret []byte, path, sig string) (Verdict, error) {
	in, name, err := openInput(ios, path)
	if err != nil {
		return Verdict{}, err
	}
	defer in.Close()
	return check(secret, in, name, sig)
}

func verifyRequest(ios *cli.IOStreams, secret []byte, path string) (Verdict, error) {
	in, name, err := openInput(ios, path)
	if err != nil {
		return Verdict{}, err
	}
	defer in.Close()
	req, err := capture.Parse(in)
	if err != nil {
		return Verdict{}, cli.UsageErrorf("%s: %v", name, err)
	}
	sig := req.Header.Get(signature.Header)
	if _, present := req.Header[signature.Header]; !present {
		return Verdict{Reason: "missing", Message: "the request has no X-Signature header (was the shared secret set on the sender?)"}, nil
	}
	return check(secret, req.Body, name, sig)
}

// check streams body through a Verifier and explains a failure as far as
// the bytes allow: a wrong secret and a changed body look alike.
func check(secret []byte, body io.Reader, name, sig string) (Verdict, error) {
	v := signature.NewVerifier(secret)
	if _, err := io.Copy(v, body); err != nil {
		return Verdict{}, cli.UsageErrorf("read %s: %v", name, err)
	}
	trailingNewline, err := v.Check(sig)
	switch {
	case err == nil:
		return Verdict{Valid: true, Reason: "ok", Message: "signature valid (" + plural(v.Len(), "byte", "bytes") + ")"}, nil
	case errors.Is(err, signature.ErrMissing):
		return Verdict{Reason: "missing", Message: "the signature is empty"}, nil
	case errors.Is(err, signature.ErrMalformed):
		return Verdict{Reason: "malformed", Message: fmt.Sprintf("the signature is not %d hex digits (got %d characters)", signature.HexSize, len(sig))}, nil
	case trailingNewline:
		return Verdict{Reason: "trailing_newline", Message: "body differs: it ends with a newline the signed body did not have (without it, the signature verifies)"}, nil
	default:
		return Verdict{Reason: "mismatch", Message: fmt.Sprintf("signature does not match: the secret is wrong or the %d-byte body is not the one that was signed", v.Len())}, nil
	}
}

func printVerdict(opts *VerifyOptions, v Verdict) error {
	if opts.Format.JSON() {
		return cli.WriteJSON(opts.IO.Out, v)
	}
	st := opts.IO.OutStyles()
	var err error
	if v.Valid {
		_, err = fmt.Fprintf(opts.IO.Out, "%s %s\n", st.OK.Sprint(cli.SymOK), v.Message)
	} else {
		_, err = fmt.Fprintf(opts.IO.Out, "%s %s\n", st.Fail.Sprint(cli.SymFail), v.Message)
	}
	return err
}
