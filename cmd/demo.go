package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/demo"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/ndjson"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/spf13/cobra"
)

// DemoOptions are the inputs of `evfwd demo`.
type DemoOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Now     func() time.Time // stamps the built-in samples
	Version string           // the client reports it
	File    string
	// FileGiven: --file was set, so a missing file is an error rather
	// than a reason to use the built-in samples.
	FileGiven bool
	Timeout   time.Duration
	ctx       context.Context
}

// NewCmdDemo builds `evfwd demo`.
func NewCmdDemo(f *cli.Factory) *cobra.Command {
	opts := &DemoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole pipeline on loopback: send → serve → signed webhooks → listen",
		Long: `Start evfwd serve (with a temporary store) and a listen receiver on free
loopback ports, with a random shared secret; send the sample events through
the batching client; show each signed webhook as it arrives and whether its
X-Signature verifies; then print a summary. Nothing is left behind.

With -o json, stdout holds one record a line, each with a "record" key:
start (the URLs and store), webhook (as listen -o json prints a request),
rejected (a batch that failed for good) and summary.

Exit status: 0 when every sample event arrived with a valid signature,
1 otherwise.`,
		Example: "  go run . demo\n  evfwd demo --file my-events.ndjson",
		GroupID: groupServer,
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Now, opts.Version = f.IO, f.Format, f.Now, f.Version
			opts.ctx = c.Context()
			opts.FileGiven = c.Flags().Changed("file")
			return demoRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.File, "file", filepath.Join("testdata", "events.ndjson"), "NDJSON events to send (built-in samples when the default file is absent)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Second, "give up waiting for webhooks after this long")
	return cmd
}

// demoEvents reads the NDJSON file, or makes one sample of each type when
// the default file is not there (an installed binary outside the repo).
func demoEvents(o *DemoOptions) ([]*message.Raw, error) {
	file, err := os.Open(o.File)
	if errors.Is(err, os.ErrNotExist) && !o.FileGiven {
		return demo.Samples(o.Now())
	}
	if err != nil {
		return nil, cli.UsageError(err)
	}
	defer file.Close()
	rd, err := ndjson.NewReader(file, o.File, ndjson.Options{})
	if err != nil {
		return nil, cli.UsageError(err)
	}
	var out []*message.Raw
	for rd.Next() {
		l := rd.Line()
		if l.Err != nil {
			return nil, cli.UsageErrorf("%s: %v", l.Pos(), l.Err)
		}
		if len(l.Bytes) == 0 {
			continue
		}
		r, err := message.ParseRaw(bytes.Clone(l.Bytes))
		if err != nil {
			return nil, cli.UsageErrorf("%s: %v", l.Pos(), err)
		}
		out = append(out, r)
	}
	return out, rd.Err()
}

func demoRun(o *DemoOptions) error {
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	events, err := demoEvents(o)
	if err != nil {
		return err
	}
	pr := &demoPrinter{io: o.IO, json: o.Format.JSON(), st: o.IO.OutStyles()}
	p, err := demo.Start(ctx, demo.Options{Version: o.Version, OnWebhook: pr.webhook, OnError: pr.rejected})
	if err != nil {
		return err
	}
	defer p.Close()

	pr.start(p, len(events))
	if err := p.Send(ctx, events); err != nil {
		return err
	}
	rep, err := p.Wait(ctx, o.Timeout)
	if err != nil {
		return err
	}
	if err := pr.summary(rep); err != nil {
		return err
	}
	if !rep.OK() {
		return cli.Silent(cli.ExitFailure)
	}
	return nil
}

// demoPrinter shows the demo's progress: lines for people, or with -o json
// one record a line on stdout, each with a "record" key as trigger's are:
// start, webhook (listen's -o json record), rejected, summary.
type demoPrinter struct {
	io   *cli.IOStreams
	json bool
	st   *cli.Styles
}

func (pr *demoPrinter) start(p *demo.Pipeline, events int) {
	if pr.json {
		cli.WriteJSON(pr.io.Out, demoStart{Record: "start", Serve: p.ServeURL(), Listen: p.HookURL(), Store: p.StorePath(), Events: events})
		return
	}
	errOut := pr.io.ErrOut
	fmt.Fprintf(errOut, "serve   %s  (store %s)\n", p.ServeURL(), p.StorePath())
	fmt.Fprintf(errOut, "listen  %s  (random shared secret)\n", p.HookURL())
	fmt.Fprintf(errOut, "send    %s through the batching client\n\n", plural(events, "event", "events"))
}

// webhook prints one request the receiver answered; demo.Pipeline calls
// it one request at a time.
func (pr *demoPrinter) webhook(r *receiver.Request) {
	if pr.json {
		// listen's record, tagged like trigger's records.
		line := append([]byte(`{"record":"webhook",`), r.Line()[1:]...)
		pr.io.Out.Write(line)
		return
	}
	st := pr.st
	sig := st.OK.Sprint("sig " + cli.SymOK)
	if r.Signature.Verdict != receiver.SigValid {
		sig = st.Fail.Sprint("sig ✗ " + r.Signature.Reason)
	}
	what := r.Event
	if what != "" {
		what = fmt.Sprintf("%q", what)
	}
	fmt.Fprintf(pr.io.Out, "  webhook  %-8s %-22s user=%-10s %s → %d\n", cli.Printable(r.Type), what, cli.Printable(r.UserID), sig, r.Status)
}

func (pr *demoPrinter) rejected(status int, msg string) {
	if pr.json {
		cli.WriteJSON(pr.io.Out, demoRejected{Record: "rejected", Status: status, Message: msg})
		return
	}
	fmt.Fprintf(pr.io.ErrOut, "rejected: %d %s\n", status, cli.Printable(msg))
}

func (pr *demoPrinter) summary(rep demo.Report) error {
	if pr.json {
		return cli.WriteJSON(pr.io.Out, demoSummary{Record: "summary", Sent: rep.Sent, Verified: rep.Verified, Rejected: rep.Rejected, OK: rep.OK()})
	}
	st, out := pr.st, pr.io.Out
	fmt.Fprintln(out)
	summary := fmt.Sprintf("%s sent, %s arrived with a valid X-Signature",
		plural(rep.Sent, "event", "events"), plural(rep.Verified, "webhook", "webhooks"))
	if rep.OK() {
		fmt.Fprintln(out, st.OK.Sprint(cli.SymOK)+" "+summary)
	} else {
		fmt.Fprintln(out, st.Fail.Sprint(cli.SymFail)+" "+summary)
	}
	return nil
}

// The -o json records of demo.
type (
	demoStart struct {
		Record string `json:"record"`
		Serve  string `json:"serve"`  // the collection API's base URL
		Listen string `json:"listen"` // the receiver's URL, the webhook endpoint
		Store  string `json:"store"`  // the temporary SQLite file
		Events int    `json:"events"` // read to send
	}
	demoRejected struct {
		Record  string `json:"record"`
		Status  int    `json:"status"` // -1: a transport error
		Message string `json:"message"`
	}
	demoSummary struct {
		Record   string `json:"record"`
		Sent     int    `json:"sent"`
		Verified int    `json:"verified"` // arrived with a valid X-Signature
		Rejected int    `json:"rejected"` // batches that failed for good
		OK       bool   `json:"ok"`
	}
)
