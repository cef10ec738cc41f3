package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/audience"
	"github.com/evfwd/evfwd/pkg/ndjson"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/spf13/cobra"
)

// SyncOptions are the inputs of `evfwd audience sync` and `evfwd trait sync`.
type SyncOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Version string // sent in User-Agent
	Context context.Context
	Admin   adminFlags
	Kind    store.SyncKind
	Name    string
	File    string
}

// NewCmdSync builds `evfwd audience` or `evfwd trait` (kind) with its sync
// subcommand; runF replaces syncRun in tests.
func NewCmdSync(f *cli.Factory, kind store.SyncKind, runF func(*SyncOptions) error) *cobra.Command {
	opts := &SyncOptions{Kind: kind}
	parent := &cobra.Command{
		Use:     string(kind),
		Short:   "Sync an audience's members to the webhook destinations as identify messages",
		GroupID: groupServer,
		Args:    cli.Args(cobra.NoArgs),
	}
	sync := &cobra.Command{
		Use:   "sync NAME FILE",
		Short: "Send the full member list of audience NAME; members who joined or left get an identify",
		Long: `Send the full current member list of audience NAME to a running evfwd serve.
The server keeps each audience's members: the first sync sends an identify
for every member with the trait snake_case(NAME): true (e.g. "High Value
Users" → high_value_users); later syncs send true for members who joined,
false for members who left, and nothing for the others.

FILE ("-" for stdin, .gz read as gzip) has one userId per line, or NDJSON
lines that are JSON strings or objects with "userId". It is streamed, so a
list of any size is sent in constant memory. A bad line fails the whole
sync (it would look like a member leaving) and nothing is changed.`,
		Example: `  evfwd audience sync "High Value Users" members.txt
  export-members | evfwd audience sync VIP - --source web -o json`,
		Args: cli.Args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Version = f.IO, f.Format, f.Version
			opts.Context, opts.Name, opts.File = cmd.Context(), args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return syncRun(opts)
		},
	}
	if kind == store.KindTrait {
		parent.Short = "Sync a computed trait's values to the webhook destinations as identify messages"
		sync.Short = "Send every user's value of computed trait NAME; users whose value changed get an identify"
		sync.Long = `Send every user's current value of computed trait NAME to a running evfwd
serve. The server keeps each trait's values and sends an identify with
snake_case(NAME): value only for users whose value changed: new users, new
values, and users no longer listed (value null).

FILE ("-" for stdin, .gz read as gzip) is NDJSON, one {"userId": ..., "value":
...} per line; a null value is the same as not listed. It is streamed. A bad
line fails the whole sync and nothing is changed.`
		sync.Example = `  evfwd trait sync "Lifetime Value" ltv.ndjson
  evfwd trait sync churn_risk - --source web < scores.ndjson`
	}
	opts.Admin.add(sync, "send the identify messages to this `SOURCE`'s webhooks (repeatable; default every source with webhooks enabled)")
	parent.AddCommand(sync)
	return parent
}

func syncRun(opts *SyncOptions) error {
	c, err := opts.Admin.client(opts.Version)
	if err != nil {
		return err
	}
	in, name, err := openInput(opts.IO, opts.File)
	if err != nil {
		return err
	}
	defer in.Close()
	lines, err := ndjson.NewReader(in, name, ndjson.Options{})
	if err != nil {
		return cli.UsageErrorf("%s: %v", name, err)
	}
	defer lines.Close()
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeList(pw, lines, opts.Kind == store.KindTrait)) }()
	rep, err := c.Sync(ctx, opts.Kind, opts.Name, opts.Admin.Sources, pr)
	pr.CloseWithError(io.ErrClosedPipe) // stops writeList when the request ended early
	if err != nil {
		return adminErr(err, name)
	}
	if opts.Format.JSON() {
		return cli.WriteJSON(opts.IO.Out, rep)
	}
	return printSync(opts.IO.Out, rep)
}

// writeList copies lines to w as the admin API's NDJSON, one line for one
// (audience.AppendLine).
func writeList(w io.Writer, lines *ndjson.Reader, traits bool) error {
	var b []byte
	for lines.Next() {
		l := lines.Line()
		if l.Err != nil {
			return cli.UsageErrorf("%s: %v", l.Pos(), l.Err)
		}
		b = audience.AppendLine(b[:0], l.Bytes, traits)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return lines.Err()
}

func printSync(w io.Writer, r *admin.SyncReport) error {
	first := ""
	if r.First {
		first = " (first sync)"
	}
	fmt.Fprintf(w, "%s %q → trait %s%s\n", r.Kind, r.Name, cli.Printable(r.Trait), first)
	counts := fmt.Sprintf("added %d, removed %d", r.Added, r.Removed)
	if r.Kind == store.KindTrait {
		counts += fmt.Sprintf(", changed %d", r.Changed)
	}
	sources := cli.Printable(strings.Join(r.Sources, ", "))
	if sources == "" {
		sources = "no source with webhooks enabled"
	}
	_, err := fmt.Fprintf(w, "%s, unchanged %d; %d identify messages queued for %s\n", counts, r.Unchanged, r.Messages, sources)
	return err
}
