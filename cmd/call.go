package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/spf13/cobra"
)

// The six call commands are one implementation driven by a callKind: the
// per-type string fields and which data object (traits or properties) the
// type carries.

// callField is a per-type string flag and the wire key it sets.
type callField struct {
	flag, key, usage string
}

type callKind struct {
	typ       message.Type
	short     string
	example   string
	fields    []callField
	data      string // "traits", "properties" or "" (alias)
	anonymous bool   // takes --anonymous-id (all but alias)
}

var callKinds = []callKind{
	{typ: message.TypeIdentify, short: "Record who a user is and their traits", data: "traits", anonymous: true,
		example: `  evfwd identify --user-id u_42 --trait email=ada@example.com --trait plan=pro --trait seats=5
  evfwd identify --anonymous-id a_1 --traits @traits.json --timestamp 2024-05-01`},
	{typ: message.TypeTrack, short: "Record an action a user performed", data: "properties", anonymous: true,
		fields: []callField{{"event", "event", "the action's `NAME`, e.g. \"Order Completed\" (required)"}},
		example: `  evfwd track --user-id u_42 --event "Order Completed" --property total=12.50 --property currency=EUR
  evfwd track --user-id u_42 --event Signup --timestamp 1714564800 --properties '{"plan":"pro"}'
  evfwd track --user-id u_42 --event Refund --property 'items:=[1,2]' --dry-run`},
	{typ: message.TypePage, short: "Record a web page view", data: "properties", anonymous: true,
		fields:  []callField{{"name", "name", "the page's `NAME`"}, {"category", "category", "the page's `CATEGORY` (needs --name)"}},
		example: `  evfwd page --anonymous-id a_1 --name Pricing --property url=https://example.com/pricing`},
	{typ: message.TypeScreen, short: "Record a mobile screen view", data: "properties", anonymous: true,
		fields:  []callField{{"name", "name", "the screen's `NAME`"}, {"category", "category", "the screen's `CATEGORY` (needs --name)"}},
		example: `  evfwd screen --user-id u_42 --name Checkout --category Shop`},
	{typ: message.TypeGroup, short: "Associate a user with a group (an account, a company)", data: "traits", anonymous: true,
		fields:  []callField{{"group-id", "groupId", "the group's `ID` (required)"}},
		example: `  evfwd group --user-id u_42 --group-id acme --trait name="Acme Inc" --trait employees=120`},
	{typ: message.TypeAlias, short: "Merge two identities: --previous-id becomes --user-id",
		fields:  []callField{{"previous-id", "previousId", "the identity being merged `ID` (required)"}},
		example: `  evfwd alias --previous-id a_1 --user-id u_42`},
}

// CallOptions are the inputs of the six call commands.
type CallOptions struct {
	IO      *cli.IOStreams
	Format  cli.Format
	Now     func() time.Time
	Version string // sent in User-Agent and context.library
	Context context.Context
	Type    message.Type
	Client  clientFlags

	UserID, AnonymousID string
	Timestamp           string
	MessageID           string
	Fields              map[string]string // wire key → value: event, name, category, groupId, previousId
	DataKey             string            // traits or properties
	Data                string            // --traits / --properties: JSON, @FILE or -
	Pairs               []string          // --trait / --property: key=value or key:=JSON
	ContextJSON         string
	Integrations        string
	Stub, DryRun        bool
}

// NewCmdCall builds the command for one call type; runF replaces callRun
// in tests.
func NewCmdCall(f *cli.Factory, k callKind, runF func(*CallOptions) error) *cobra.Command {
	opts := &CallOptions{Type: k.typ, DataKey: k.data}
	single := strings.TrimSuffix(k.data, "s") // --trait, --property
	if k.data == "properties" {
		single = "property"
	}
	cmd := &cobra.Command{
		Use:   string(k.typ),
		Short: k.short,
		Long: k.short + ` through the batching client: the call is validated, queued,
sent to POST {endpoint}/v1/batch and flushed before the command exits.

--timestamp takes RFC 3339 with any offset, a date (2024-05-01) or Unix
seconds or milliseconds, and is sent as UTC with milliseconds; without it the
call is stamped now, so it suits historical imports. JSON arguments
(--context, --integrations, --traits, --properties) may be @FILE, or - for
stdin. In key=value pairs a value that reads as a JSON number or boolean is
sent as one (digits exactly as typed); key:=JSON sends raw JSON.

--dry-run prints the exact request body and sends nothing; --stub goes
through the client without the network. -o json prints
{"messageId":...,"status":...}.

Exit status: 0 the collection API accepted the call, 1 it was rejected or
could not be delivered after retries, 2 usage or validation error (nothing
sent), 130 interrupted.`,
		Example: k.example,
		GroupID: groupClient,
		Args:    pairArgs(single, &opts.Pairs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.IO, opts.Format, opts.Now, opts.Version = f.IO, f.Format, f.Now, f.Version
			opts.Context = cmd.Context()
			opts.Fields = map[string]string{}
			for _, fl := range k.fields {
				if v, _ := cmd.Flags().GetString(fl.flag); v != "" {
					opts.Fields[fl.key] = v
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return callRun(opts)
		},
	}
	fl := cmd.Flags()
	opts.Client.add(cmd)
	if k.typ == message.TypeAlias {
		fl.StringVar(&opts.UserID, "user-id", "", "the user's new `ID` (required)")
	} else {
		fl.StringVar(&opts.UserID, "user-id", "", "the user's `ID` (this or --anonymous-id is required)")
	}
	if k.anonymous {
		fl.StringVar(&opts.AnonymousID, "anonymous-id", "", "an anonymous visitor `ID`")
	}
	for _, f := range k.fields {
		fl.String(f.flag, "", f.usage)
	}
	if k.data != "" {
		fl.StringVar(&opts.Data, k.data, "", "the call's "+k.data+" as a JSON object, @FILE or -")
		fl.StringArrayVar(&opts.Pairs, single, nil, "set one of the "+k.data+": key=value or key:=JSON (repeatable; wins over --"+k.data+")")
	}
	fl.StringVar(&opts.Timestamp, "timestamp", "", "when it happened: RFC 3339, a date or Unix seconds/ms (default now)")
	fl.StringVar(&opts.MessageID, "message-id", "", "the messageId, for de-duplication (default a random UUID)")
	fl.StringVar(&opts.ContextJSON, "context", "", "context as a JSON object, @FILE or -")
	fl.StringVar(&opts.Integrations, "integrations", "", `integrations as a JSON object, @FILE or - (e.g. {"All":false,"Webhooks":true})`)
	fl.BoolVar(&opts.Stub, "stub", false, "go through the client but send nothing (always succeeds)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print the exact request body and send nothing")
	return cmd
}

// callResult is the -o json form.
type callResult struct {
	MessageID  string `json:"messageId"`
	Status     string `json:"status"` // accepted, rejected, failed, stub
	HTTPStatus int    `json:"httpStatus,omitempty"`
	Error      string `json:"error,omitempty"`
}

func callRun(opts *CallOptions) error {
	raw, err := buildCall(opts)
	if err != nil {
		return err
	}
	id := raw.MessageId()
	if opts.DryRun {
		body, err := analytics.BatchBody(opts.Version, opts.Now(), raw)
		if err != nil {
			return cli.UsageError(err)
		}
		_, err = opts.IO.Out.Write(append(body, '\n'))
		return err
	}
	cfg, err := opts.Client.config(opts.Version, opts.Now, opts.Stub)
	if err != nil {
		return err
	}
	var res analytics.BatchResult
	cfg.OnBatch = func(r analytics.BatchResult) { res = r }
	stopRetries := watchRetries(opts.IO, opts.Now, &cfg)
	client, err := analytics.New(cfg)
	if err != nil {
		stopRetries()
		return configError(err)
	}
	if err := client.Enqueue(raw); err != nil {
		client.Close(context.Background())
		stopRetries()
		return cli.UsageErrorf("%s: %v", opts.Type, err)
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	err = client.Close(ctx)
	stopRetries()
	if err != nil {
		return err // interrupted: exit 130
	}
	out := callResult{MessageID: id, Status: "accepted", HTTPStatus: res.Status}
	switch {
	case opts.Stub:
		out.Status, out.HTTPStatus = "stub", 0
	case res.Err != nil:
		out.Status, out.Error = "failed", res.Err.Error()
		var r interface{ Retryable() bool }
		if errors.As(res.Err, &r) && !r.Retryable() {
			out.Status = "rejected" // refused for good, not out of retries
		}
		if out.HTTPStatus < 0 {
			out.HTTPStatus = 0
		}
	}
	if err := printCallResult(opts, out); err != nil {
		return err
	}
	if res.Err != nil {
		err := fmt.Errorf("%s %s %s: %v", opts.Type, id, out.Status, res.Err)
		if h := opts.Client.hint(res.Err); h != "" {
			err = fmt.Errorf("%w\n%s", err, h)
		}
		return &cli.ExitError{Code: cli.ExitFailure, Err: err}
	}
	return nil
}

func printCallResult(opts *CallOptions, r callResult) error {
	if opts.Format.JSON() {
		return cli.WriteJSON(opts.IO.Out, r)
	}
	if r.Error != "" {
		return nil // the error line on stderr says it
	}
	st := opts.IO.OutStyles()
	note := fmt.Sprintf("(%d)", r.HTTPStatus)
	if r.Status == "stub" {
		note = "(stub: nothing sent)"
	}
	_, err := fmt.Fprintf(opts.IO.Out, "%s %s %s %s %s\n", st.OK.Sprint(cli.SymOK), opts.Type, cli.Printable(r.MessageID), cli.Printable(r.Status), st.Muted.Sprint(note))
	return err
}

// buildCall turns the flags into a validated message, members in the order
// the typed encoders use. A missing messageId and timestamp are made here,
// so that --dry-run shows the message that would be sent.
func buildCall(opts *CallOptions) (*message.Raw, error) {
	stdin := &stdinOnce{io: opts.IO}
	obj := &rawjson.Object{}
	obj.SetString("type", string(opts.Type))
	id := opts.MessageID
	if id == "" {
		id = message.NewID()
	}
	obj.SetString("messageId", id)
	ts := opts.Now()
	if opts.Timestamp != "" {
		t, err := message.ParseTime(opts.Timestamp)
		if err != nil {
			return nil, cli.UsageErrorf("--timestamp: %v", err)
		}
		ts = t
	}
	obj.SetString("timestamp", message.FormatTime(ts))
	setString(obj, "userId", opts.UserID)
	setString(obj, "anonymousId", opts.AnonymousID)
	for _, k := range [...]string{"event", "groupId", "previousId", "name", "category"} {
		setString(obj, k, opts.Fields[k])
	}
	if opts.DataKey != "" {
		data, err := jsonArg(stdin, "--"+opts.DataKey, opts.Data)
		if err != nil {
			return nil, err
		}
		if len(opts.Pairs) > 0 && data == nil {
			data = &rawjson.Object{}
		}
		for _, p := range opts.Pairs {
			k, v, err := parsePair(p)
			if err != nil {
				return nil, cli.UsageErrorf("--%s %q: %v", pairFlag(opts.DataKey), p, err)
			}
			data.Set(k, v)
		}
		if data != nil {
			obj.Set(opts.DataKey, data.AppendJSON(nil))
		}
	}
	for _, a := range []struct{ key, val string }{{"context", opts.ContextJSON}, {"integrations", opts.Integrations}} {
		o, err := jsonArg(stdin, "--"+a.key, a.val)
		if err != nil {
			return nil, err
		}
		if o != nil {
			obj.Set(a.key, o.AppendJSON(nil))
		}
	}
	raw, err := message.NewRaw(obj)
	if err != nil {
		return nil, cli.UsageErrorf("%s: %s", opts.Type, flagWords(err))
	}
	return raw, nil
}

func pairFlag(dataKey string) string {
	if dataKey == "properties" {
		return "property"
	}
	return "trait"
}

func setString(o *rawjson.Object, key, val string) {
	if val != "" {
		o.SetString(key, val)
	}
}

// flagWords says a validation error in flag names: "userId or
// anonymousId is required" reads "--user-id or --anonymous-id is required".
func flagWords(err error) string {
	var ve *message.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	names := strings.Split(ve.Field, " or ")
	for i, n := range names {
		names[i] = "--" + kebab(n)
	}
	return strings.Join(names, " or ") + " " + ve.Reason
}

// kebab turns a message's JSON key into its flag's name: "previousId" is
// "previous-id".
func kebab(key string) string {
	var b strings.Builder
	for _, r := range key {
		if unicode.IsUpper(r) {
			b.WriteByte('-')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
