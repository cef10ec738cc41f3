package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/storeurl"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/spf13/cobra"
)

// DeliveriesOptions are the inputs of `evfwd deliveries ...`.
type DeliveriesOptions struct {
	IO     *cli.IOStreams
	Format cli.Format
	Now    func() time.Time
	Getenv func(string) string // for the default store's path
	Store  string
	Status string
	Source string
	// Destination selects one destination's deliveries (with Source, or
	// of every source that has one by that name).
	Destination string
	Limit       int
	Older       time.Duration
	Since       string // resend's --since: a duration back from now, or a time
	// ResendLimit is resend's --limit (list's is Limit, whose default
	// differs); resendLimitSet, whether it was given.
	ResendLimit    int
	resendLimitSet bool
	ctx            context.Context
}

// NewCmdDeliveries builds `evfwd deliveries` and its list, show, retry,
// resend, prune and endpoints.
func NewCmdDeliveries(f *cli.Factory) *cobra.Command {
	opts := &DeliveriesOptions{}
	// bind fills what a subcommand uses, once the root has read --output
	// and the config.
	bind := func(c *cobra.Command) {
		opts.IO, opts.Format, opts.Now, opts.Getenv = f.IO, f.Format, f.Now, f.Getenv
		opts.ctx = c.Context()
	}
	cmd := &cobra.Command{
		Use:   "deliveries",
		Short: "List, show, retry and resend the deliveries in the serve store",
		Long: `Read the store that evfwd serve uses (also while it runs): list deliveries,
show one with its message and every attempt, make failed and dead ones
pending again (retry), or send finished ones again, delivered ones too
(resend), so that the running (or next) serve delivers them.`,
		GroupID: groupServer,
		Args:    cli.Args(cobra.NoArgs),
	}
	cmd.PersistentFlags().StringVar(&opts.Store, "store", "", "store `URL` (default evfwd.db under $XDG_STATE_HOME/evfwd)")
	cli.BindEnv(cmd, "store")
	cli.SharesTopLevel(cmd, "store") // serve's store: what deliveries reads

	list := &cobra.Command{
		Use:     "list",
		Short:   "List deliveries, oldest first",
		Example: "  evfwd deliveries list --status dead --source web\n  evfwd deliveries list --source web --destination crm\n  evfwd deliveries list -o json | jq .id",
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			bind(c)
			return deliveriesList(opts)
		},
	}
	list.Flags().StringVar(&opts.Status, "status", "", "only this `STATUS`: pending, delivered, failed or dead")
	list.Flags().StringVar(&opts.Source, "source", "", "only this `SOURCE`")
	list.Flags().StringVar(&opts.Destination, "destination", "", "only this `DESTINATION` (webhooks: the webhooks block)")
	list.Flags().IntVar(&opts.Limit, "limit", 0, "at most `N` deliveries (default all)")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a delivery: its message and every attempt",
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			bind(c)
			return deliveriesShow(opts, args[0])
		},
	}

	retry := &cobra.Command{
		Use:     "retry [ID...]",
		Short:   "Make deliveries pending again (by ID, or every one with --status)",
		Example: "  evfwd deliveries retry 42\n  evfwd deliveries retry --status dead --source web",
		RunE: func(c *cobra.Command, args []string) error {
			bind(c)
			return deliveriesRetry(opts, args)
		},
	}
	retry.Flags().StringVar(&opts.Status, "status", "", "retry every delivery in this `STATUS` (failed or dead)")
	retry.Flags().StringVar(&opts.Source, "source", "", "with --status, only this `SOURCE`")
	retry.Flags().StringVar(&opts.Destination, "destination", "", "with --status, only this `DESTINATION`")

	cmd.AddCommand(list, show, retry, newCmdDeliveriesResend(opts, bind), newCmdDeliveriesPrune(f, opts, bind),
		newCmdDeliveriesEndpoints(opts, bind))
	return cmd
}

// newCmdDeliveriesResend builds `evfwd deliveries resend`; bind fills
// opts.
func newCmdDeliveriesResend(opts *DeliveriesOptions, bind func(*cobra.Command)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resend [ID...]",
		Short: "Send finished deliveries again, delivered ones too (by ID, or every one --status/--source select)",
		Long: `Send deliveries that are finished (delivered, failed or dead) again, as a
new attempt to the same webhook, as the resend of Svix's and Stripe's
dashboards does: each becomes pending and due now, and the running (or
next) serve sends it, signed as usual, with the same message id. Its
earlier attempts stay in its history (evfwd deliveries show ID).

retry is for what failed; resend also replays what was delivered, for
an endpoint that lost it or a new endpoint that needs it. A pending
delivery is left alone (it is on its way), and so is one whose message a
deletion request withdrew (cancelled, or its body purged): there is
nothing left to send. Without IDs, --status, --source, --destination and/or
--since select the deliveries; one of them is required, so that a bare resend
never sends everything again. Of those, one run resends at most --limit,
those finished longest ago first, and says how many more match: run it
again for the next ones (those it resent come last, should they fail
again).`,
		Example: "  evfwd deliveries resend 42 43\n  evfwd deliveries resend --status delivered --source web --since 24h\n  evfwd deliveries resend --status dead --limit 50000",
		RunE: func(c *cobra.Command, args []string) error {
			bind(c)
			opts.resendLimitSet = c.Flags().Changed("limit")
			return deliveriesResend(opts, args)
		},
	}
	cmd.Flags().StringVar(&opts.Status, "status", "", "resend every delivery in this `STATUS` (delivered, failed or dead)")
	cmd.Flags().StringVar(&opts.Source, "source", "", "resend the finished deliveries of this `SOURCE` only")
	cmd.Flags().StringVar(&opts.Destination, "destination", "", "resend the finished deliveries of this `DESTINATION` only")
	cmd.Flags().StringVar(&opts.Since, "since", "", "resend the finished deliveries created since `WHEN`: a duration back from now (24h) or a time (2026-11-26, RFC 3339)")
	cmd.Flags().IntVar(&opts.ResendLimit, "limit", admin.DefaultResendLimit,
		fmt.Sprintf("with --status/--source/--destination/--since, resend at most `N` (up to %d), those finished longest ago first", admin.MaxResendLimit))
	return cmd
}

// newCmdDeliveriesPrune builds `evfwd deliveries prune`; bind fills opts.
func newCmdDeliveriesPrune(f *cli.Factory, opts *DeliveriesOptions, bind func(*cobra.Command)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove finished messages older than --older-than, now",
		Long: `Remove the messages received longer ago than --older-than whose deliveries
are all finished (delivered, failed, dead or cancelled), with their deliveries
and attempts, and print what was removed. Pending deliveries are never
touched; deletion requests and their delete notifications are kept.

serve does this in the background for its retention window; prune does it on
demand, for example before a backup or after lowering the window. It works
beside a running serve, a short step at a time.`,
		Example: "  evfwd deliveries prune --older-than 24h\n  evfwd deliveries prune --store postgres://evfwd@db/evfwd -o json",
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			bind(c)
			if !c.Flags().Changed("older-than") {
				// The serve config's window, when the file sets one.
				cfg, err := serve.ReadFile(serveFile(f.Config), serve.Config{Retention: opts.Older})
				if err != nil {
					return err
				}
				opts.Older = cfg.Retention
			}
			return deliveriesPrune(opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Older, "older-than", store.DefaultRetention, "prune finished messages received longer ago than `DURATION` (default: the config's retention, else 168h)")
	return cmd
}

// newCmdDeliveriesEndpoints builds `evfwd deliveries endpoints`; bind
// fills opts.
func newCmdDeliveriesEndpoints(opts *DeliveriesOptions, bind func(*cobra.Command)) *cobra.Command {
	return &cobra.Command{
		Use:   "endpoints",
		Short: "Show each webhook endpoint's health: closed, open or half-open",
		Long: `Show the health state serve keeps for each source's webhook URLs, as last
recorded in the store: closed (requests go through), open (after repeated
failures: deliveries skip it and wait, one probe at a time tests it) or
half-open (a probe is in flight), since when, the failures in a row, the
next probe and the failure that opened it. The state lives in the serve
process; on PostgreSQL each node keeps its own and the row is the latest
any node recorded (NODE).`,
		Example: "  evfwd deliveries endpoints\n  evfwd deliveries endpoints -o json",
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			bind(c)
			return deliveriesEndpoints(opts)
		},
	}
}

func (o *DeliveriesOptions) open() (store.Store, error) {
	dsn := o.Store
	if dsn == "" {
		dsn = serve.DefaultStorePath(o.Getenv)
	}
	loc, err := storeurl.Parse(dsn)
	if err != nil {
		return nil, cli.UsageError(err)
	}
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	// Beside a running serve: what a stopped one left unfinished is the
	// next serve's to finish. A missing file is a wrong path, not an empty
	// store: creating one would show nothing as if nothing were there.
	st, err := loc.Open(ctx, storeurl.Options{NoRecover: true, MustExist: true})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, cli.UsageErrorf("store %s does not exist: point at serve's store with --store URL, EVFWD_STORE, or store: in --config FILE", loc.Path)
	}
	if err != nil {
		return nil, err
	}
	if !o.Format.JSON() {
		// Which store answered, since an empty table from the wrong one
		// looks like an empty queue.
		fmt.Fprintf(o.IO.ErrOut, "store: %s\n", cli.Printable(st.Path()))
	}
	return st, nil
}

func (o *DeliveriesOptions) filter() (store.Filter, error) {
	f := store.Filter{Status: store.Status(o.Status), Source: o.Source, Destination: o.Destination, Limit: o.Limit}
	if f.Status != "" && !f.Status.Valid() {
		return f, cli.UsageErrorf("--status %q: want pending, delivered, failed or dead", o.Status)
	}
	return f, nil
}

func deliveriesList(o *DeliveriesOptions) error {
	f, err := o.filter()
	if err != nil {
		return err
	}
	st, err := o.open()
	if err != nil {
		return err
	}
	defer st.Close()
	ds, err := st.List(o.ctx, f)
	if err != nil {
		return err
	}
	io := o.IO
	if o.Format.JSON() {
		for _, d := range ds {
			if err := cli.WriteJSON(io.Out, admin.ViewDelivery(d)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSOURCE\tDESTINATION\tTYPE\tMESSAGE ID\tATTEMPTS\tNEXT ATTEMPT\tLAST ERROR")
	for _, d := range ds {
		next := "-"
		if d.Status == store.Pending {
			next = admin.WireTime(d.NextAttempt)
		}
		// Type and message id are the sender's, the error quotes the
		// endpoint's answer: printable, one line and one column each.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Status, cli.Printable(d.Source), cli.Printable(d.Destination), cli.Printable(d.Type),
			cli.Printable(d.MessageID), d.Attempts, next, cli.Printable(d.LastError))
	}
	return tw.Flush()
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, cli.UsageErrorf("delivery ID %q: want a positive number (see evfwd deliveries list)", s)
	}
	return id, nil
}

func deliveriesShow(o *DeliveriesOptions, arg string) error {
	id, err := parseID(arg)
	if err != nil {
		return err
	}
	st, err := o.open()
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := st.Get(o.ctx, id)
	if err != nil {
		return err
	}
	j := admin.ViewDetail(d)
	io := o.IO
	if o.Format.JSON() {
		return cli.WriteJSON(io.Out, j)
	}
	w := io.Out
	fmt.Fprintf(w, "delivery %d  %s\n", j.ID, j.Status)
	// What the sender chose (type, ids, body) and what endpoints answered
	// is shown printable.
	fmt.Fprintf(w, "source      %s → %s\n", cli.Printable(j.Source), cli.Printable(j.Destination))
	fmt.Fprintf(w, "message     %s %s (user %s)\n", cli.Printable(j.Type), cli.Printable(j.MessageID), cli.Printable(j.UserID))
	fmt.Fprintf(w, "attempts    %d", j.Attempts)
	if j.FirstAttempt != "" {
		fmt.Fprintf(w, ", first %s", j.FirstAttempt)
	}
	if j.NextAttempt != "" {
		fmt.Fprintf(w, ", next %s", j.NextAttempt)
	}
	fmt.Fprintln(w)
	if j.LastError != "" {
		fmt.Fprintf(w, "last error  %s\n", cli.Printable(j.LastError))
	}
	fmt.Fprintf(w, "\n%s\n", cli.PrintableText(string(admin.SentBody(d.Delivery))))
	if len(j.Records) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tSTART\tURL\tRESULT\tLATENCY\tOUTCOME")
		labels := attemptLabels(j.Records)
		for i, a := range j.Records {
			result := a.Class
			if a.Status != 0 {
				result = strconv.Itoa(a.Status)
			}
			if a.Error != "" {
				result += " " + a.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%dms\t%s\n", labels[i], a.Start, cli.Printable(a.URL), cli.Printable(result), a.LatencyMs, a.Outcome)
		}
		tw.Flush()
	}
	return nil
}

// attemptLabels numbers attempts ROUND.ENDPOINT, oldest first, counting
// rounds over the whole history: a retry or a resend starts the count the
// store keeps again at 1 (its attempts keep that count), which would label
// two rounds alike. A round is a pass over the endpoints in order, so one
// begins where that count changes or the endpoint does not go up.
func attemptLabels(rs []admin.AttemptView) []string {
	out := make([]string, len(rs))
	round := 0
	for i, a := range rs {
		if i == 0 || a.Delivery != rs[i-1].Delivery || a.Endpoint <= rs[i-1].Endpoint {
			round++
		}
		out[i] = fmt.Sprintf("%d.%d", round, a.Endpoint+1)
	}
	return out
}

func deliveriesRetry(o *DeliveriesOptions, args []string) error {
	if (len(args) == 0) == (o.Status == "") {
		return cli.UsageErrorf("give delivery IDs or --status failed|dead, not both")
	}
	if len(args) > 0 && (o.Source != "" || o.Destination != "") {
		return cli.UsageErrorf("--source and --destination go with --status; IDs are retried as given")
	}
	if o.Status == string(store.Delivered) || o.Status == string(store.Pending) {
		return cli.UsageErrorf("--status %s: only failed or dead deliveries are retried", o.Status)
	}
	f, err := o.filter()
	if err != nil {
		return err
	}
	ids, err := parseIDs(args)
	if err != nil {
		return err
	}
	st, err := o.open()
	if err != nil {
		return err
	}
	defer st.Close()
	n, err := st.Retry(o.ctx, ids, f, o.Now())
	if err != nil {
		return err
	}
	if o.Format.JSON() {
		return cli.WriteJSON(o.IO.Out, map[string]int{"retried": n})
	}
	fmt.Fprintf(o.IO.Out, "%s scheduled for retry\n", plural(n, "delivery", "deliveries"))
	if len(ids) > 0 && n < len(ids) {
		fmt.Fprintf(o.IO.ErrOut, "%d left alone: unknown, in flight, or delivered (to send a delivered one again: evfwd deliveries resend ID)\n", len(ids)-n)
		return cli.Silent(cli.ExitFailure)
	}
	return nil
}

// parseIDs parses the delivery IDs of args.
func parseIDs(args []string) ([]int64, error) {
	var out []int64
	for _, a := range args {
		id, err := parseID(a)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

func deliveriesResend(o *DeliveriesOptions, args []string) error {
	req := admin.ResendRequest{Status: store.Status(o.Status), Source: o.Source}
	byFilter := o.Status != "" || o.Source != "" || o.Destination != "" || o.Since != ""
	switch {
	case len(args) == 0 && !byFilter:
		return cli.UsageErrorf("give delivery IDs, or --status (delivered, failed or dead), --source, --destination and/or --since to resend every finished delivery they select")
	case len(args) > 0 && byFilter:
		return cli.UsageErrorf("give delivery IDs or --status/--source/--destination/--since, not both")
	case req.Status != "" && !slices.Contains(admin.Resendable(), req.Status):
		return cli.UsageErrorf("--status %q: only delivered, failed or dead deliveries are resent (pending ones are on their way)", o.Status)
	case len(args) > 0 && o.resendLimitSet:
		return cli.UsageErrorf("--limit goes with --status/--source/--destination/--since; IDs are resent as given")
	case o.ResendLimit < 1 || o.ResendLimit > admin.MaxResendLimit:
		return cli.UsageErrorf("--limit %d: want 1 to %d", o.ResendLimit, admin.MaxResendLimit)
	}
	if byFilter {
		req.Limit = o.ResendLimit
	}
	var err error
	if req.IDs, err = parseIDs(args); err != nil {
		return err
	}
	if o.Since != "" {
		if req.Since, err = parseSince(o.Since, o.Now()); err != nil {
			return err
		}
	}
	st, err := o.open()
	if err != nil {
		return err
	}
	defer st.Close()
	filter := req.Filter()
	filter.Destination = o.Destination
	res, err := st.Resend(o.ctx, req.IDs, filter, o.Now())
	if err != nil {
		return err
	}
	if o.Format.JSON() {
		if err := cli.WriteJSON(o.IO.Out, admin.ViewResent(res)); err != nil {
			return err
		}
	} else {
		if res.Skipped > 0 {
			fmt.Fprintf(o.IO.Out, "%s resent; %s more match: run again, or raise --limit (up to %s)\n",
				plural(res.N, "delivery", "deliveries"), groupDigits(int64(res.Skipped)), groupDigits(admin.MaxResendLimit))
		} else {
			fmt.Fprintf(o.IO.Out, "%s resent\n", plural(res.N, "delivery", "deliveries"))
		}
		w := o.IO.ErrOut
		leftAlone(w, res.Pending, "still pending, left alone: it goes when due (evfwd deliveries show ID)")
		leftAlone(w, res.Purged, "cannot be resent: a deletion request withdrew its message")
		leftAlone(w, res.Unknown, "no such delivery (never stored, or pruned)")
	}
	if len(res.Pending)+len(res.Purged)+len(res.Unknown) > 0 {
		return cli.Silent(cli.ExitFailure)
	}
	return nil
}

// parseSince reads --since: a duration back from now, an RFC 3339 time, or
// a date (midnight UTC).
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, cli.UsageErrorf("--since %q: want a positive duration back from now (24h, 90m) or a time (2026-11-26 or 2026-11-26T10:00:00Z)", s)
}

// leftAlone prints the ids a resend left alone for one reason.
func leftAlone(w io.Writer, ids []int64, why string) {
	if len(ids) == 0 {
		return
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	fmt.Fprintf(w, "%s: %s\n", strings.Join(s, ", "), why)
}

func deliveriesPrune(o *DeliveriesOptions) error {
	if o.Older <= 0 {
		return cli.UsageErrorf("--older-than %s: want a positive duration, such as 24h", o.Older)
	}
	st, err := o.open()
	if err != nil {
		return err
	}
	defer st.Close()
	before := o.Now().Add(-o.Older)
	n, err := st.Prune(o.ctx, before)
	if err != nil {
		if n.Messages > 0 {
			fmt.Fprintf(o.IO.ErrOut, "stopped after pruning %s\n", plural(n.Messages, "message", "messages"))
		}
		return err
	}
	if o.Format.JSON() {
		return cli.WriteJSON(o.IO.Out, struct {
			store.Pruned
			Before string `json:"before"`
		}{n, admin.WireTime(before)})
	}
	fmt.Fprintf(o.IO.Out, "pruned %s (%s, %s) received before %s\n", plural(n.Messages, "message", "messages"),
		plural(n.Deliveries, "delivery", "deliveries"), plural(n.Attempts, "attempt", "attempts"), admin.WireTime(before))
	return nil
}

func deliveriesEndpoints(o *DeliveriesOptions) error {
	st, err := o.open()
	if err != nil {
		return err
	}
	defer st.Close()
	eps, err := st.Endpoints(o.ctx)
	if err != nil {
		return err
	}
	io := o.IO
	if o.Format.JSON() {
		for _, e := range eps {
			if err := cli.WriteJSON(io.Out, admin.ViewEndpoint(e)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(eps) == 0 {
		fmt.Fprintln(io.ErrOut, "no endpoint state recorded yet (serve records it when it starts)")
		return nil
	}
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tURL\tSTATE\tSINCE\tFAILURES\tNEXT PROBE\tLAST ERROR")
	for _, e := range eps {
		next := "-"
		if !e.NextProbe.IsZero() {
			next = admin.WireTime(e.NextProbe)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cli.Printable(e.Source), cli.Printable(webhook.RedactURL(e.URL)), e.State, admin.WireTime(e.Since), e.Failures, next, cli.Printable(e.LastError))
	}
	return tw.Flush()
}
