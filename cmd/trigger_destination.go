package cmd

import (
	"fmt"
	"strings"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/spf13/cobra"
)

// `evfwd trigger --destination NAME`: the message sent as a destination of
// serve's config sends it — its endpoints, headers, method, scheme and
// secrets, the body mapped by its mapping (a batch of one for a batching
// destination) — instead of as the flags say.

func addTriggerDestinationFlags(cmd *cobra.Command, opts *TriggerOptions) {
	fl := cmd.Flags()
	fl.StringVar(&opts.Destination, "destination", "", "send as this `NAME` of serve's config (--config) sends: its URLs, headers, method, secrets, scheme and mapping (TYPE defaults to track)")
	fl.StringVar(&opts.Source, "source", "", "with --destination, the `SOURCE` it belongs to (when several have one by that name)")
	cmd.MarkFlagsMutuallyExclusive("destination", "url")
	cmd.MarkFlagsMutuallyExclusive("destination", "header")
	cmd.MarkFlagsMutuallyExclusive("destination", "scheme")
	cmd.MarkFlagsMutuallyExclusive("destination", "secret")
	cmd.MarkFlagsMutuallyExclusive("destination", "secret-file")
}

// destinationSend is what the destination sends for the message.
type destinationSend struct {
	d    *destination.Destination
	sent []byte // the request's body
	id   string // its webhook-id
}

// fromDestination takes the destination of serve's config that --source
// and --destination name.
func (tr *trigger) fromDestination() error {
	opts := tr.opts
	if opts.Count > 1 {
		return cli.UsageErrorf("--count is a load test of --url; with --destination trigger sends one message")
	}
	cfg, err := loadSources(opts.Config)
	if err != nil {
		return err
	}
	d, err := findDestination(cfg, opts.Source, opts.Destination)
	if err != nil {
		return err
	}
	wd := d.Webhook // a copy: the sender reads it
	tr.dest = &wd
	tr.route = &destinationSend{d: d}
	return nil
}

// findDestination is the destination name of source, or of the one
// source that has it when source is "".
func findDestination(cfg serve.Config, source, name string) (*destination.Destination, error) {
	var found []*destination.Destination
	var names []string
	for _, src := range cfg.Sources {
		if source != "" && src.Name != source {
			continue
		}
		ds, err := src.Compile(cfg.AllowPrivateEndpoints) // validated already
		if err != nil {
			return nil, cli.UsageErrorf("source %q: %v", src.Name, err)
		}
		for _, d := range ds {
			names = append(names, src.Name+"/"+d.Name)
			if d.Name == name {
				found = append(found, d)
			}
		}
	}
	if source != "" && names == nil {
		if _, err := pickSource(cfg, source); err != nil {
			return nil, err
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		where := "in serve's config"
		if source != "" {
			where = "in source " + source
		}
		if len(names) == 0 {
			return nil, cli.UsageErrorf("--destination %q: no destinations %s", name, where)
		}
		return nil, cli.UsageErrorf("--destination %q: none %s (there are %s)", name, where, strings.Join(names, ", "))
	}
	var sources []string
	for _, d := range found {
		sources = append(sources, d.Source)
	}
	return nil, cli.UsageErrorf("--destination %q: sources %s each have one: say which with --source", name, strings.Join(sources, ", "))
}

// body makes the body the destination sends for tr's message, as serve
// would store and then map it, and says on stderr what serve would do
// otherwise (a condition or integrations that keep the message from it, a
// pause).
func (ds *destinationSend) body(tr *trigger) error {
	d, opts := ds.d, tr.opts
	msg := tr.msg // queued.New adds receivedAt, as serve does
	m, err := queued.New(d.Source, msg, opts.Now(), nil)
	if err != nil {
		return cli.UsageErrorf("--data: %v", err)
	}
	body, err := d.Body(m.Body)
	if err != nil {
		return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("destination %s/%s: mapping: %w", d.Source, d.Name, err)}
	}
	ds.sent, ds.id = body, m.MessageID
	if d.Batching() {
		ds.sent = append(append([]byte{'['}, body...), ']')
		ds.id = destination.BatchID([]string{m.MessageID})
	}
	var notes []string
	integrations, _ := msg.Get("integrations")
	switch {
	case !message.Enabled(integrations, "Webhooks"):
		notes = append(notes, "the message's integrations turn webhooks off: serve would not send it")
	case d.Subscribe != nil && !d.Subscribe.Match(m.Body):
		notes = append(notes, fmt.Sprintf("its subscribe (%s) does not take this message: serve would not send it", d.Config.Subscribe))
	}
	if d.Paused {
		notes = append(notes, "it is paused in the config: serve would keep the message until resumed")
	}
	if d.Batching() {
		notes = append(notes, fmt.Sprintf("it sends batches of up to %d: this is a batch of one", d.Batch.Size))
	}
	st := opts.IO.ErrStyles()
	for _, n := range notes {
		fmt.Fprintf(opts.IO.ErrOut, "%s %s/%s: %s\n", st.Warn.Sprint("note:"), cli.Printable(d.Source), cli.Printable(d.Name), n)
	}
	if !opts.Format.JSON() {
		scheme := "unsigned"
		if tr.dest.SharedSecret != "" {
			scheme = "signed " + string(signature.Segment)
			if tr.dest.Scheme != "" {
				scheme = "signed " + string(tr.dest.Scheme)
			}
		}
		method := tr.dest.Method
		if method == "" {
			method = "POST"
		}
		fmt.Fprintf(opts.IO.Out, "destination %s/%s: %s to %s, %s\n", cli.Printable(d.Source), cli.Printable(d.Name), method,
			plural(len(tr.dest.Endpoints), "endpoint", "endpoints"), scheme)
	}
	return nil
}
