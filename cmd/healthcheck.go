package cmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/internal/retry"
	"github.com/evfwd/evfwd/internal/tlscert"
	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/spf13/cobra"
)

// HealthcheckOptions are the inputs of `evfwd healthcheck`.
type HealthcheckOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	URL     string // a full URL, or a path on serve's address
	Addr    string // serve's --addr
	TLSCert string // serve's --tls-cert: dial HTTPS and accept only it
	Timeout time.Duration
	ctx     context.Context
}

// NewCmdHealthcheck builds `evfwd healthcheck`; runF replaces
// healthcheckRun in tests.
func NewCmdHealthcheck(f *cli.Factory, runF func(*HealthcheckOptions) error) *cobra.Command {
	opts := &HealthcheckOptions{}
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Ask a running serve whether it is ready (exit 0) or not (exit 1)",
		Long: `GET serve's /readyz (or --url) and exit 0 when it answers 200, 1 otherwise
(another status, no answer within --timeout, no connection). For a
container image, which has no shell or curl: its HEALTHCHECK runs it.

By default it asks the serve of this environment and config file: --addr
and --tls-cert are serve's own (EVFWD_ADDR, EVFWD_TLS_CERT, addr and
tls_cert in the file), an address on every interface (0.0.0.0:8787) is
asked on loopback, and with a certificate it speaks HTTPS and accepts that
certificate only, whatever names it holds. --url /livez asks another path
of that address; a full URL is asked as it is, verified as any client would.

It prints the status and the body's first line on stdout (-o json: one
object); a failure goes to stderr.`,
		Example: `  evfwd healthcheck                            # GET http://127.0.0.1:8787/readyz
  evfwd healthcheck --url /livez
  EVFWD_ADDR=0.0.0.0:9000 evfwd healthcheck    # GET http://127.0.0.1:9000/readyz
  evfwd healthcheck --url https://evfwd.internal/readyz --timeout 5s`,
		GroupID: groupServer,
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.ctx = f.IO, f.Format, cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return healthcheckRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.URL, "url", "/readyz", "`URL` to GET, or a path on serve's --addr")
	fl.StringVar(&opts.Addr, "addr", serve.DefaultAddr, "serve's `HOST:PORT`")
	fl.StringVar(&opts.TLSCert, "tls-cert", "", "serve's certificate `FILE`: ask over HTTPS and accept only this certificate")
	fl.DurationVar(&opts.Timeout, "timeout", 2*time.Second, "give up after this long")
	cli.BindEnv(cmd, "addr", "tls-cert")
	return cmd
}

func healthcheckRun(opts *HealthcheckOptions) error {
	url, client, err := healthcheckClient(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(opts.ctx, opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return cli.UsageErrorf("--url %q: %v", opts.URL, err)
	}
	resp, err := client.Do(req)
	if retry.Refused(err) {
		err = fmt.Errorf("nothing listens at %s (connection refused): is evfwd serve running, on that address?", url)
	}
	if err != nil {
		return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("healthcheck: %w", err)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	body, _, _ := strings.Cut(string(b), "\n")
	if resp.StatusCode != http.StatusOK {
		return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("healthcheck %s: %d %s", url, resp.StatusCode, body)}
	}
	if opts.Format.JSON() {
		return cli.WriteJSON(opts.IO.Out, map[string]any{"url": url, "status": resp.StatusCode, "body": body})
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%d %s\n", resp.StatusCode, body)
	return err
}

// healthcheckClient resolves the URL to ask and the client to ask it
// with. A path is asked of serve's address; with serve's certificate the
// client pins it, since serve's names (what a client outside would verify)
// seldom include the loopback address the check dials.
func healthcheckClient(opts *HealthcheckOptions) (string, *http.Client, error) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if !strings.HasPrefix(opts.URL, "/") {
		return opts.URL, client, cli.CheckURLScheme("--url", opts.URL)
	}
	if opts.TLSCert == "" {
		return "http://" + inspector.DialAddr(opts.Addr) + opts.URL, client, nil
	}
	leaf, err := tlscert.Leaf(opts.TLSCert)
	if err != nil {
		return "", nil, cli.UsageErrorf("--tls-cert: %v", err)
	}
	client.Transport = &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], leaf) {
				return errors.New("serve's certificate is not the one in " + opts.TLSCert)
			}
			return nil
		},
	}}
	return "https://" + inspector.DialAddr(opts.Addr) + opts.URL, client, nil
}
