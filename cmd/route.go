package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/importer"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/ndjson"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/spf13/cobra"
)

// RouteOptions are the inputs of `evfwd route`.
type RouteOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Now     func() time.Time // receivedAt, and the time signatures are made at
	Version string           // in the User-Agent shown
	Config  *cli.Config      // serve's: its sources and their destinations

	Files  []string
	Source string

	// newID makes the messageId of a line without one (tests fix it).
	newID func() string
}

// NewCmdRoute builds `evfwd route`; runF replaces routeRun in tests.
func NewCmdRoute(f *cli.Factory, runF func(*RouteOptions) error) *cobra.Command {
	opts := &RouteOptions{}
	cmd := &cobra.Command{
		Use:   "route [FILE...]",
		Short: "Show which destinations take each NDJSON message, and what each would send",
		Long: `Try a source's destinations offline: read NDJSON calls as evfwd send reads
them (FILEs in order, stdin when none or "-", gzip too), make of each the
webhook body serve would store, and say for every destination of the source
whether it takes the message (its subscribe condition, and the message's
integrations: "Webhooks": false or "All": false turn all of them off) and,
for each that does, the request it would make: method, every endpoint URL
(credentials masked), headers in full (static header values masked as serve
--check masks them), signature (X-Signature or the scheme's headers, with
the webhook-id) and the body, mapped by the destination's mapping. Nothing is
sent and nothing is stored.

The sources come from serve's config file (--config FILE, as serve reads it);
--source names the source when it has several. A missing messageId is
filled with a fresh one and a missing timestamp with the time of the run,
which is also receivedAt and the time timestamped signatures are made at.
The context serve adds from a request (a web or mobile source's context.ip
and clock correction) and the context.library a sending library adds are
not added.

A destination that sends batches shows the message mapped, and the headers
of a batch holding this message alone: serve sends it in a JSON array of up
to batch.size such bodies.

A bad line (invalid JSON, a missing required field, over 32 KB) is reported
as FILE:LINE: reason on stderr, as send reports it, and the other lines go
on; so does a mapping that fails, naming the destination. After the messages
comes a count per destination (-o json: one object per message, then a
summary object).

Exit status: 0 every line routed, 1 a line rejected or a mapping failed, 2
usage or config error (a condition that does not parse is shown with a caret
under the place) or a FILE not read.`,
		Example: `  evfwd route --config evfwd.yaml events.ndjson
  evfwd track --user-id u_42 --event "Order Completed" --dry-run | evfwd route --source web
  evfwd route --config evfwd.yaml --source web -o json events.ndjson | jq 'select(.record == "message") | .destinations[] | select(.takes) | .name'`,
		GroupID: groupServer,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Now, opts.Version, opts.Config = f.IO, f.Format, f.Now, f.Version, f.Config
			opts.Files = args
			if runF != nil {
				return runF(opts)
			}
			return routeRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Source, "source", "", "the `SOURCE` whose destinations decide (required when the config has several)")
	return cmd
}

// loadSources reads serve's sources from the config file as serve does
// (each mapping as the file holds it) and validates them as serve --check
// does: a config error is exit 2.
func loadSources(c *cli.Config) (serve.Config, error) {
	cfg, err := serve.ReadFile(serveFile(c), serve.Config{})
	if err != nil {
		return cfg, err
	}
	where := "config"
	if c.File != "" {
		where = "config " + c.File
	}
	if len(cfg.Sources) == 0 {
		if c.File == "" {
			return cfg, cli.UsageErrorf("no config file: give serve's with --config FILE (or %sCONFIG)", cli.EnvPrefix)
		}
		return cfg, cli.UsageErrorf("%s has no sources", where)
	}
	if err := cfg.Validate(); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "\n  ")
		return cfg, cli.UsageErrorf("%s:\n  %s", where, msg)
	}
	return cfg, nil
}

// pickSource is the source named, or the only one.
func pickSource(cfg serve.Config, name string) (serve.Source, error) {
	var names []string
	for _, s := range cfg.Sources {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	switch {
	case name != "":
		return serve.Source{}, cli.UsageErrorf("--source %q: no such source (the config has %s)", name, strings.Join(names, ", "))
	case len(cfg.Sources) == 1:
		return cfg.Sources[0], nil
	}
	return serve.Source{}, cli.UsageErrorf("the config has %d sources: say which with --source (%s)", len(names), strings.Join(names, ", "))
}

// router is one source's destinations as serve runs them, and a sender
// that shows their requests without sending them.
type router struct {
	source string
	dests  []*destination.Destination
	route  *destination.Router
	sender *webhook.Sender
}

func newRouter(src serve.Source, allowPrivate bool, version string) (*router, error) {
	ds, err := src.Compile(allowPrivate) // validated already
	if err != nil {
		return nil, cli.UsageErrorf("source %q: %v", src.Name, err)
	}
	if len(ds) == 0 {
		return nil, cli.UsageErrorf("source %q has no destinations: give it webhooks (enabled: true) or destinations", src.Name)
	}
	s, err := webhook.NewSender(webhook.Options{UserAgent: webhook.UserAgent(version), AllowPrivateEndpoints: true})
	if err != nil {
		return nil, err
	}
	return &router{source: src.Name, dests: ds, route: destination.NewRouter(ds), sender: s}, nil
}

// routed is one message and what each destination does with it: the
// -o json record of a message.
type routed struct {
	Record    string          `json:"record"` // "message"
	Input     string          `json:"input"`
	Line      int64           `json:"line"`
	Type      string          `json:"type"`
	MessageID string          `json:"messageId"`
	Body      json.RawMessage `json:"body"` // the webhook body serve stores
	Dests     []routedDest    `json:"destinations"`
}

// routedDest is what one destination does with a message.
type routedDest struct {
	Name  string `json:"name"`
	Takes bool   `json:"takes"`
	// Why it does not: "subscribe" (its condition), "integrations".
	Skipped   string `json:"skipped,omitempty"`
	Subscribe string `json:"subscribe,omitempty"`
	Paused    bool   `json:"paused,omitempty"`
	Method    string `json:"method,omitempty"`
	// Batch, for a destination that sends batches: Body goes in an array
	// of up to Size such bodies; Requests are those of a batch of it alone.
	Batch     *destination.BatchConfig `json:"batch,omitempty"`
	WebhookID string                   `json:"webhookId,omitempty"`
	Body      json.RawMessage          `json:"body,omitempty"`
	Requests  []routedRequest          `json:"requests,omitempty"`
	Error     string                   `json:"error,omitempty"` // the mapping's
}

type routedRequest struct {
	URL     string            `json:"url"` // credentials masked
	Headers map[string]string `json:"headers"`
}

// routeCount is a destination's line of the summary.
type routeCount struct {
	Name          string `json:"name"`
	Takes         int    `json:"takes"`
	Skips         int    `json:"skips"`
	MappingErrors int    `json:"mappingErrors"`
}

type routeSummary struct {
	Record       string       `json:"record"` // "summary"
	Source       string       `json:"source"`
	Lines        int64        `json:"lines"`
	Messages     int          `json:"messages"`
	Rejected     int          `json:"rejected"`
	Destinations []routeCount `json:"destinations"`
}

func routeRun(opts *RouteOptions) error {
	cfg, err := loadSources(opts.Config)
	if err != nil {
		return err
	}
	src, err := pickSource(cfg, opts.Source)
	if err != nil {
		return err
	}
	rt, err := newRouter(src, cfg.AllowPrivateEndpoints, opts.Version)
	if err != nil {
		return err
	}
	defer rt.sender.CloseIdleConnections()
	if opts.newID == nil {
		opts.newID = message.NewID
	}
	inputs, unread, err := sendInputs(opts.IO, opts.Files)
	if err != nil {
		return err
	}
	for _, e := range unread {
		fmt.Fprintln(opts.IO.ErrOut, "error: "+cli.Printable(e.Error()))
	}
	out := newRoutePrinter(opts)
	sum := routeSummary{Record: "summary", Source: src.Name}
	counts := make([]routeCount, len(rt.dests))
	for i, d := range rt.dests {
		counts[i].Name = d.Name
	}
	failed := false
	var raw message.Raw
	for _, in := range inputs {
		rc, err := in.Open()
		if err != nil {
			continue // said above
		}
		r, err := ndjson.NewReader(rc, in.Name, ndjson.Options{})
		if err != nil {
			rc.Close()
			unread = append(unread, &importer.ReadError{Input: in.Name, Err: err})
			fmt.Fprintln(opts.IO.ErrOut, "error: "+cli.Printable(err.Error()))
			continue
		}
		for r.Next() {
			l := r.Line()
			sum.Lines++
			msg, lerr := rt.message(&raw, l, opts.Now(), opts.newID)
			if lerr != nil {
				sum.Rejected++
				fmt.Fprintln(opts.IO.ErrOut, cli.Printable(lerr.Error()))
				continue
			}
			if msg == nil { // blank or a # note
				continue
			}
			sum.Messages++
			for i := range msg.Dests {
				d := &msg.Dests[i]
				switch {
				case d.Error != "":
					counts[i].MappingErrors++
					failed = true
					fmt.Fprintf(opts.IO.ErrOut, "%s:%d: destination %s: %s\n", cli.Printable(in.Name), l.Num, d.Name, cli.Printable(d.Error))
				case d.Takes:
					counts[i].Takes++
				default:
					counts[i].Skips++
				}
			}
			if err := out.message(msg); err != nil {
				return err
			}
		}
		if err := r.Err(); err != nil {
			re := &importer.ReadError{Input: in.Name, Line: r.Line().Num, Err: err}
			unread = append(unread, re)
			fmt.Fprintln(opts.IO.ErrOut, "error: "+cli.Printable(re.Error()))
		}
		rc.Close()
	}
	sum.Destinations = counts
	if sum.Lines == 0 && len(unread) == len(inputs) {
		return cli.Silent(cli.ExitUsage) // no input opened: the errors said it all
	}
	if err := out.summary(sum); err != nil {
		return err
	}
	switch {
	case len(unread) > 0:
		return cli.UsageErrorf("%d of %s not read to the end: %s", len(unread), plural(len(inputs), "input", "inputs"), strings.Join(readErrorInputs(unread), ", "))
	case failed && sum.Rejected > 0:
		return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("%s rejected and a mapping failed", plural(sum.Rejected, "line", "lines"))}
	case failed:
		return cli.Silent(cli.ExitFailure) // each failure named above
	case sum.Rejected > 0:
		return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("%d of %s rejected as bad input", sum.Rejected, plural(sum.Lines, "line", "lines"))}
	}
	return nil
}

// message makes one line into the body serve stores and routes it: nil
// for a blank line or a # note, a *importer.LineError for a line send
// would refuse.
func (rt *router) message(raw *message.Raw, l *ndjson.Line, now time.Time, newID func() string) (*routed, error) {
	lineErr := func(err error) error { return &importer.LineError{Input: l.File, Line: l.Num, Err: err} }
	if l.Err != nil {
		return nil, lineErr(l.Err)
	}
	b := l.Bytes
	if len(bytes.Trim(b, " \t\r")) == 0 || b[0] == '#' {
		return nil, nil
	}
	b = bytes.Clone(b) // the message reads it after the next line
	if err := raw.Parse(b); err != nil {
		return nil, lineErr(err)
	}
	// What the collector does with a message it accepted (pkg/collector).
	raw.Fill(newID, func() time.Time { return now })
	if enc, err := raw.AppendJSON(nil, nil); err == nil {
		if err := message.CheckSize(len(enc)); err != nil {
			return nil, lineErr(err)
		}
	}
	obj := raw.Object()
	obj.Delete("writeKey")
	obj.Delete("_metadata")
	m, err := queued.New(rt.source, obj, now, nil)
	if err != nil {
		return nil, lineErr(err)
	}
	msg := &routed{Record: "message", Input: l.File, Line: l.Num, Type: m.Type, MessageID: m.MessageID, Body: m.Body}
	integrations, _ := obj.Get("integrations")
	on := message.Enabled(integrations, "Webhooks")
	var takes []string
	if on {
		takes = rt.route.Route(m.Body)
	}
	for _, d := range rt.dests {
		rd := routedDest{Name: d.Name, Paused: d.Paused}
		switch {
		case !on:
			rd.Skipped = "integrations"
		case !slices.Contains(takes, d.Name):
			rd.Skipped, rd.Subscribe = "subscribe", d.Config.Subscribe
		default:
			rd.Takes = true
			rt.preview(&rd, d, m.Body, m.MessageID, now)
		}
		msg.Dests = append(msg.Dests, rd)
	}
	return msg, nil
}

// preview fills in what d sends for a message with this webhook body.
func (rt *router) preview(rd *routedDest, d *destination.Destination, wire []byte, id string, at time.Time) {
	body, err := d.Body(wire)
	if err != nil {
		rd.Error = "mapping: " + err.Error()
		return
	}
	rd.Body, rd.Method, rd.WebhookID = body, d.Webhook.Method, id
	if rd.Method == "" {
		rd.Method = http.MethodPost
	}
	sent := body
	if d.Batching() {
		b := d.Batch
		rd.Batch = &b
		rd.WebhookID = destination.BatchID([]string{id})
		sent = append(append([]byte{'['}, body...), ']')
	}
	reqs, err := rt.sender.Preview(&d.Webhook, sent, rd.WebhookID, at)
	if err != nil {
		rd.Error = "signing: " + err.Error()
		return
	}
	for _, r := range reqs {
		h := map[string]string{}
		for name, vs := range r.Header {
			v := strings.Join(vs, ", ")
			if static(d.Webhook.Endpoints[r.Endpoint], name) {
				v = "****" // as serve --check shows them: they may be credentials
			}
			h[name] = v
		}
		rd.Requests = append(rd.Requests, routedRequest{URL: webhook.RedactURL(r.URL), Headers: h})
	}
}

// static reports whether the header name is one of ep's static headers.
func static(ep webhook.Endpoint, name string) bool {
	for k := range ep.Headers {
		if http.CanonicalHeaderKey(k) == name {
			return true
		}
	}
	return false
}

// routePrinter prints messages and the summary in the chosen format.
type routePrinter struct {
	w    io.Writer
	st   *cli.Styles
	json bool
}

func newRoutePrinter(opts *RouteOptions) *routePrinter {
	return &routePrinter{w: opts.IO.Out, st: opts.IO.OutStyles(), json: opts.Format.JSON()}
}

// writeJSON writes v as one line; bodies keep their bytes (no HTML
// escaping), so that a signature shown checks against the body shown.
func (p *routePrinter) writeJSON(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return nil
}

func (p *routePrinter) message(m *routed) error {
	if p.json {
		return p.writeJSON(m)
	}
	st := p.st
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s %s\n", st.Accent.Sprintf("%s:%d", cli.Printable(m.Input), m.Line), st.Bold.Sprint(cli.Printable(m.Type)), st.Muted.Sprint(cli.Printable(m.MessageID)))
	fmt.Fprintf(&b, "  stored  %s\n", cli.PrintableText(string(m.Body)))
	for _, d := range m.Dests {
		switch {
		case d.Error != "":
			fmt.Fprintf(&b, "  %s %s  %s\n", st.Fail.Sprint(cli.SymFail), st.Bold.Sprint(d.Name), st.Fail.Sprint(cli.Printable(d.Error)))
			continue
		case d.Skipped == "integrations":
			fmt.Fprintf(&b, "  %s %s  %s\n", st.Muted.Sprint(cli.SymNone), d.Name, st.Muted.Sprint("not taken: the message's integrations turn webhooks off"))
			continue
		case !d.Takes:
			fmt.Fprintf(&b, "  %s %s  %s\n", st.Muted.Sprint(cli.SymNone), d.Name, st.Muted.Sprint("not taken: subscribe "+cli.Printable(d.Subscribe)))
			continue
		}
		var notes []string
		if d.Batch != nil {
			notes = append(notes, fmt.Sprintf("in a batch of up to %d (a JSON array); headers of a batch of this message alone", d.Batch.Size))
		}
		if d.Paused {
			notes = append(notes, "paused: kept until resumed")
		}
		note := ""
		if len(notes) > 0 {
			note = "  " + st.Warn.Sprint(strings.Join(notes, "; "))
		}
		fmt.Fprintf(&b, "  %s %s  webhook-id %s%s\n", st.OK.Sprint(cli.SymOK), st.Bold.Sprint(d.Name), cli.Printable(d.WebhookID), note)
		for _, r := range d.Requests {
			fmt.Fprintf(&b, "      %s %s\n", d.Method, cli.Printable(r.URL))
			names := make([]string, 0, len(r.Headers))
			for k := range r.Headers {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, k := range names {
				fmt.Fprintf(&b, "        %s: %s\n", k, st.Muted.Sprint(cli.Printable(r.Headers[k])))
			}
		}
		if bytes.Equal(d.Body, m.Body) {
			fmt.Fprintf(&b, "      %s\n", st.Muted.Sprint("body as stored"))
		} else {
			fmt.Fprintf(&b, "      %s\n", cli.PrintableText(string(d.Body)))
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(p.w, b.String())
	return err
}

func (p *routePrinter) summary(s routeSummary) error {
	if p.json {
		return p.writeJSON(s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s of source %s", plural(s.Messages, "message", "messages"), cli.Printable(s.Source))
	if s.Rejected > 0 {
		fmt.Fprintf(&b, " (%s rejected)", plural(s.Rejected, "line", "lines"))
	}
	b.WriteString("\n")
	io.WriteString(p.w, b.String())
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DESTINATION\tTAKES\tSKIPS\tMAPPING ERRORS")
	for _, c := range s.Destinations {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", c.Name, c.Takes, c.Skips, c.MappingErrors)
	}
	return tw.Flush()
}
