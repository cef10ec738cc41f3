package cmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/ndjson"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/spf13/cobra"
)

func init() { register(func(f *cli.Factory) *cobra.Command { return NewCmdDemo(f) }) }

// DemoOptions are the inputs of `evfwd demo`.
type DemoOptions struct {
	Factory *cli.Factory
	File    string
	// FileGiven: --file was set, so a missing file is an error rather
	// than a reason to use the built-in samples.
	FileGiven bool
	Timeout   time.Duration
	ctx       context.Context
}

// NewCmdDemo builds `evfwd demo`.
func NewCmdDemo(f *cli.Factory) *cobra.Command {
	opts := &DemoOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole pipeline on loopback: send → serve → signed webhooks → listen",
		Long: `Start evfwd serve (with a temporary store) and a listen receiver on free
loopback ports, with a random shared secret; send the sample events through
the batching client; show each signed webhook as it arrives and whether its
X-Signature verifies; then print a summary. Nothing is left behind.

Exit status: 0 when every sample event arrived with a valid signature,
1 otherwise.`,
		Example: "  go run . demo\n  evfwd demo --file my-events.ndjson",
		GroupID: groupServer,
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
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
		var out []*message.Raw
		for _, t := range message.Types {
			obj, err := webhook.Sample(t, o.Factory.Now(), message.NewID())
			if err != nil {
				return nil, err
			}
			obj.Delete("receivedAt")
			r, err := message.NewRaw(obj)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
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
	f := o.Factory
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	events, err := demoEvents(o)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "evfwd-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	key := make([]byte, 16)
	rand.Read(key)
	secret := hex.EncodeToString(key)
	st := f.IO.OutStyles()
	out := f.IO.Out

	// The receiver: evfwd listen's handler, checking X-Signature.
	var (
		mu       sync.Mutex
		verified = map[string]bool{}
		arrived  = make(chan struct{}, len(events)*4)
	)
	rcv, err := receiver.New(receiver.Options{Secret: []byte(secret), OnRequest: func(r *receiver.Request) {
		ok := r.Signature.Verdict == receiver.SigValid
		mu.Lock()
		defer mu.Unlock()
		verified[r.MessageID] = verified[r.MessageID] || ok
		sig := st.OK.Sprint("sig " + cli.SymOK)
		if !ok {
			sig = st.Fail.Sprint("sig ✗ " + r.Signature.Reason)
		}
		what := r.Event
		if what != "" {
			what = fmt.Sprintf("%q", what)
		}
		fmt.Fprintf(out, "  webhook  %-8s %-22s user=%-10s %s → %d\n", r.Type, what, r.UserID, sig, r.Status)
		select { // a wake-up is enough; never block while holding mu
		case arrived <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		return err
	}
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rsrv := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go rsrv.Serve(rln)
	defer func() { rsrv.Close(); rcv.Close() }()
	hookURL := "http://" + rln.Addr().String() + "/webhooks"

	// The service, on its own free port and temporary store.
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	cfg := serve.Config{Store: filepath.Join(dir, "evfwd.db"), Sources: []serve.Source{{
		Name: "demo", WriteKey: "wk_demo",
		Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: hookURL}}}},
	}}}
	srv, err := serve.New(ctx, cfg, serve.Options{Version: f.Version, Listener: sln, Grace: 2 * time.Second})
	if err != nil {
		sln.Close()
		return err
	}
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Run(srvCtx) }()
	defer func() { stopSrv(); <-srvDone }()

	fmt.Fprintf(f.IO.ErrOut, "serve   %s  (store %s)\n", srv.URL(), cfg.Store)
	fmt.Fprintf(f.IO.ErrOut, "listen  %s  (random shared secret)\n", hookURL)
	fmt.Fprintf(f.IO.ErrOut, "send    %d events through the batching client\n\n", len(events))

	var rejected int
	client, err := analytics.New(analytics.Config{WriteKey: "wk_demo", Endpoint: srv.URL(),
		OnError: func(status int, msg string) { rejected++; fmt.Fprintf(f.IO.ErrOut, "rejected: %d %s\n", status, msg) }})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, r := range events {
		if err := client.Enqueue(r); err != nil {
			return err
		}
		want[r.MessageId()] = true
	}
	if err := client.Close(ctx); err != nil {
		return err
	}

	timeout := time.After(o.Timeout)
	count := func() (got int) {
		mu.Lock()
		defer mu.Unlock()
		for id := range want {
			if verified[id] {
				got++
			}
		}
		return got
	}
wait:
	for count() < len(want) {
		select {
		case <-arrived:
		case <-timeout:
			break wait
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	got := count()
	mu.Lock() // late duplicates may still be printing
	defer mu.Unlock()
	fmt.Fprintln(out)
	summary := fmt.Sprintf("%d events sent, %d webhooks arrived with a valid X-Signature", len(want), got)
	if got == len(want) && rejected == 0 {
		fmt.Fprintln(out, st.OK.Sprint(cli.SymOK)+" "+summary)
		return nil
	}
	fmt.Fprintln(out, st.Fail.Sprint("✗")+" "+summary)
	return cli.Silent(cli.ExitFailure)
}
