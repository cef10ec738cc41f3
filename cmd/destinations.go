package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/spf13/cobra"
)

// DestinationsOptions are the inputs of `evfwd destinations ...`.
type DestinationsOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Version string // sent in User-Agent
	Context context.Context
	Admin   adminFlags
	Source  string // pause/resume: the source of a NAME given alone
}

// NewCmdDestinations builds `evfwd destinations` and its list, pause,
// resume and reload; runF replaces the subcommands' run in tests (it gets
// the subcommand's name and arguments).
func NewCmdDestinations(f *cli.Factory, runF func(opts *DestinationsOptions, verb string, args []string) error) *cobra.Command {
	opts := &DestinationsOptions{}
	run := func(verb string) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Version = f.IO, f.Format, f.Version
			opts.Context = c.Context()
			if runF != nil {
				return runF(opts, verb, args)
			}
			return destinationsRun(opts, verb, args)
		}
	}
	cmd := &cobra.Command{
		Use:   "destinations",
		Short: "List, pause, resume and reload a running serve's destinations",
		Long: `Call the admin API of a running evfwd serve about its sources'
destinations: list them with their state, pause one (its deliveries are kept
and none is sent until it is resumed), resume it, or have serve read its
config file again (reload: the same as SIGHUP) and apply what it says of the
destinations.

Pause and resume act on the node that answers; on several nodes (PostgreSQL)
set paused: true in every node's config and reload each instead. A
destination is SOURCE/NAME, or NAME alone with --source, or NAME alone when
one source has a destination of that name.

Exit status: 0 done, 1 the admin API refused the token or could not be
reached, 2 usage error, an unknown destination, or a config that reload
refused (the running one is kept).`,
		Example: `  evfwd destinations list
  evfwd destinations pause web/crm
  evfwd destinations resume crm --source web
  evfwd destinations reload -o json`,
		GroupID: groupServer,
		Args:    cli.Args(cobra.NoArgs),
	}

	list := &cobra.Command{
		Use:     "list",
		Short:   "List every source's destinations: paused or running, deliveries held",
		Example: "  evfwd destinations list\n  evfwd destinations list -o json | jq 'select(.paused)'",
		Args:    cli.Args(cobra.NoArgs),
		RunE:    run("list"),
	}
	pause := &cobra.Command{
		Use:   "pause SOURCE/NAME",
		Short: "Stop sending a destination's deliveries, keeping them until resume",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE:  run("pause"),
	}
	resume := &cobra.Command{
		Use:   "resume SOURCE/NAME",
		Short: "Send a paused destination's deliveries again",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE:  run("resume"),
	}
	for _, c := range []*cobra.Command{pause, resume} {
		c.Flags().StringVar(&opts.Source, "source", "", "the `SOURCE` of a destination given by NAME alone")
	}
	reload := &cobra.Command{
		Use:   "reload",
		Short: "Have serve read its config file again and apply its destinations",
		Long: `Have a running serve read its config file again, as SIGHUP does, and apply
what it says of the sources' destinations: added ones start, changed ones
take their new settings (a changed condition decides the messages stored from
then on), removed ones stop and have their pending deliveries cancelled. A
config that does not pass serve --check is refused and the running one kept
(exit 2). Other settings take effect at serve's next start.`,
		Example: "  evfwd destinations reload",
		Args:    cli.Args(cobra.NoArgs),
		RunE:    run("reload"),
	}
	for _, c := range []*cobra.Command{list, pause, resume, reload} {
		opts.Admin.addConn(c)
		cmd.AddCommand(c)
	}
	return cmd
}

func destinationsRun(opts *DestinationsOptions, verb string, args []string) error {
	c, err := opts.Admin.client(opts.Version)
	if err != nil {
		return err
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	switch verb {
	case "list":
		ds, err := c.Destinations(ctx)
		if err != nil {
			return destinationsErr(err)
		}
		return printDestinations(opts, ds)
	case "pause", "resume":
		source, name, err := opts.resolve(ctx, c, args[0])
		if err != nil {
			return err
		}
		do := c.Resume
		if verb == "pause" {
			do = c.Pause
		}
		d, err := do(ctx, source, name)
		if err != nil {
			return destinationsErr(err)
		}
		if opts.Format.JSON() {
			return cli.WriteJSON(opts.IO.Out, d)
		}
		st := opts.IO.OutStyles()
		if d.Paused {
			fmt.Fprintf(opts.IO.Out, "%s paused %s/%s: its deliveries are kept until resumed (on the node that answered)\n", st.Warn.Sprint(cli.SymNone), cli.Printable(d.Source), cli.Printable(d.Name))
		} else {
			fmt.Fprintf(opts.IO.Out, "%s resumed %s/%s\n", st.OK.Sprint(cli.SymOK), cli.Printable(d.Source), cli.Printable(d.Name))
		}
		return nil
	case "reload":
		r, err := c.Reload(ctx)
		if err != nil {
			return destinationsErr(err)
		}
		if opts.Format.JSON() {
			return cli.WriteJSON(opts.IO.Out, r)
		}
		return printReloaded(opts, r)
	}
	return cli.UsageErrorf("unknown subcommand %q", verb)
}

// resolve names the destination of arg: SOURCE/NAME, or NAME with
// --source, or NAME alone when one source has it.
func (o *DestinationsOptions) resolve(ctx context.Context, c *admin.Client, arg string) (source, name string, err error) {
	if s, n, ok := strings.Cut(arg, "/"); ok {
		if s == "" || n == "" || strings.Contains(n, "/") {
			return "", "", cli.UsageErrorf("%q: want SOURCE/NAME, or NAME with --source", arg)
		}
		if o.Source != "" && o.Source != s {
			return "", "", cli.UsageErrorf("%q names source %s, --source says %s: give one", arg, s, o.Source)
		}
		return s, n, nil
	}
	if o.Source != "" {
		return o.Source, arg, nil
	}
	ds, err := c.Destinations(ctx)
	if err != nil {
		return "", "", destinationsErr(err)
	}
	var sources []string
	for _, d := range ds {
		if d.Name == arg {
			sources = append(sources, d.Source)
		}
	}
	switch len(sources) {
	case 0:
		return "", "", cli.UsageErrorf("no destination %q in any source (evfwd destinations list shows them)", arg)
	case 1:
		return sources[0], arg, nil
	}
	slices.Sort(sources)
	return "", "", cli.UsageErrorf("sources %s each have a destination %q: give SOURCE/%s or --source", strings.Join(sources, ", "), arg, arg)
}

// destinationsErr is adminErr, and an unknown destination or a config
// reload refused is the user's input (exit 2).
func destinationsErr(err error) error {
	var ae *admin.Error
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusUnprocessableEntity) {
		return cli.UsageError(errors.New(ae.Message))
	}
	return adminErr(err, "")
}

func printDestinations(opts *DestinationsOptions, ds []admin.Destination) error {
	if opts.Format.JSON() {
		for _, d := range ds {
			if err := cli.WriteJSON(opts.IO.Out, d); err != nil {
				return err
			}
		}
		return nil
	}
	if len(ds) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no destinations: serve's sources forward nowhere")
		return nil
	}
	tw := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tDESTINATION\tSTATE\tHOLDING")
	for _, d := range ds {
		state := "running"
		if d.Paused {
			state = "paused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", cli.Printable(d.Source), cli.Printable(d.Name), state, d.Holding)
	}
	return tw.Flush()
}

func printReloaded(opts *DestinationsOptions, r *admin.Reloaded) error {
	w := opts.IO.Out
	if len(r.Added)+len(r.Changed)+len(r.Removed) == 0 {
		_, err := fmt.Fprintln(w, "reloaded: no destination changed")
		return err
	}
	fmt.Fprintln(w, "reloaded:")
	for _, g := range []struct {
		what  string
		names []string
	}{{"added", r.Added}, {"changed", r.Changed}, {"removed", r.Removed}} {
		for _, n := range g.names {
			line := fmt.Sprintf("  %-8s %s", g.what, cli.Printable(n))
			if c := r.Cancelled[n]; c > 0 {
				line += fmt.Sprintf(" (%s cancelled)", plural(c, "pending delivery", "pending deliveries"))
			}
			fmt.Fprintln(w, line)
		}
	}
	return nil
}
