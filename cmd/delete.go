package cmd

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/spf13/cobra"
)

// DeleteOptions are the inputs of `evfwd delete`.
type DeleteOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Version string // sent in User-Agent
	Context context.Context
	Admin   adminFlags
	UserID  string
}

// NewCmdDelete builds `evfwd delete`; runF replaces deleteRun in tests.
func NewCmdDelete(f *cli.Factory, runF func(*DeleteOptions) error) *cobra.Command {
	opts := &DeleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete --user-id ID",
		Short: "Create a deletion request: notify webhooks, cancel and purge a user's messages",
		Long: `Create a deletion request on a running evfwd serve (its admin API).

Every affected source (all, or those named with --source) has the user's
pending deliveries cancelled and the user's stored message bodies emptied;
each affected source with webhooks enabled is sent one delete message:

  {"type":"delete","userId":"u_42","timestamp":"2024-05-01T12:00:00.000Z"}

through the same durable forwarder as collected events. The request is
printed with what it did in each source and its notification's status.`,
		Example: `  EVFWD_ADMIN_TOKEN=... evfwd delete --user-id u_42
  evfwd delete --user-id u_42 --source web --source app -o json`,
		GroupID: groupServer,
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.Format, opts.Version = f.IO, f.Format, f.Version
			opts.Context = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return deleteRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.UserID, "user-id", "", "the user to delete `ID` (required)")
	opts.Admin.add(cmd, "only this `SOURCE` (repeatable; default every source)")
	return cmd
}

func deleteRun(opts *DeleteOptions) error {
	if opts.UserID == "" {
		return cli.UsageErrorf("--user-id is required")
	}
	c, err := opts.Admin.client(opts.Version)
	if err != nil {
		return err
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	d, err := c.CreateDeletion(ctx, opts.UserID, opts.Admin.Sources)
	if err != nil {
		return adminErr(err, "")
	}
	if opts.Format.JSON() {
		return cli.WriteJSON(opts.IO.Out, d)
	}
	return printDeletion(opts.IO.Out, d)
}

func printDeletion(w io.Writer, d *admin.Deletion) error {
	state := ""
	if !d.Done {
		state = "  in progress (counts so far)"
	}
	fmt.Fprintf(w, "deletion %s  user %s  %s%s\n", cli.Printable(d.ID), cli.Printable(d.UserID), d.CreatedAt, state)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tNOTIFICATION\tDELIVERY\tCANCELLED\tPURGED")
	for _, s := range d.Sources {
		status, delivery := "none (webhooks off)", "-"
		if s.Notified {
			status, delivery = string(s.Status), fmt.Sprint(s.Delivery)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", cli.Printable(s.Source), status, delivery, s.Cancelled, s.Purged)
	}
	return tw.Flush()
}
