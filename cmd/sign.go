package cmd

import (
	"fmt"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/spf13/cobra"
)

// SignOptions are the inputs of `evfwd sign`.
type SignOptions struct {
	IO     *cli.IOStreams
	Format cli.Format
	Secret cli.Secret
	File   string
	Header bool
}

// NewCmdSign builds `evfwd sign`; runF replaces signRun in tests.
func NewCmdSign(f *cli.Factory, runF func(*SignOptions) error) *cobra.Command {
	opts := &SignOptions{}
	cmd := &cobra.Command{
		Use:   "sign [FILE]",
		Short: "Print the X-Signature of a body (HMAC-SHA1, hex)",
		Long: `Sign the exact bytes of FILE (stdin when no FILE or "-") as the webhook
destination does: the lowercase hex HMAC-SHA1 keyed by the shared secret.
Any size is signed in constant memory.`,
		Example: `  evfwd sign --secret-file hook.secret body.json
  printf '%s' "$BODY" | EVFWD_SECRET=s3cret evfwd sign --header
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
	cmd.Flags().BoolVar(&opts.Header, "header", false, "print a ready header line: X-Signature: <hex>")
	return cmd
}

// signResult is the -o json form.
type signResult struct {
	Algorithm string `json:"algorithm"`
	Signature string `json:"signature"`
	Bytes     int64  `json:"bytes"`
}

func signRun(opts *SignOptions) error {
	secret, err := opts.Secret.Resolve("sign", true)
	if err != nil {
		return err
	}
	in, name, err := openInput(opts.IO, opts.File)
	if err != nil {
		return err
	}
	defer in.Close()
	sig, n, err := signature.SignReader(secret, in)
	if err != nil {
		return cli.UsageErrorf("read %s: %v", name, err)
	}
	switch {
	case opts.Format.JSON():
		return cli.WriteJSON(opts.IO.Out, signResult{Algorithm: signature.Algorithm, Signature: sig, Bytes: n})
	case opts.Header:
		_, err = fmt.Fprintf(opts.IO.Out, "%s: %s\n", signature.Header, sig)
	default:
		_, err = fmt.Fprintln(opts.IO.Out, sig)
	}
	return err
}
