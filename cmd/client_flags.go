package cmd

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/spf13/cobra"
)

// clientFlags are the batching-client settings shared by the call
// commands and send.
type clientFlags struct {
	WriteKey string
	Endpoint string
	// RetryBase is the first retry's backoff (hidden: tests shorten it).
	RetryBase time.Duration
	// Fallback replaces analytics.DefaultEndpoint as the endpoint nobody
	// chose (tests point it at a closed port).
	Fallback string
}

func (c *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.WriteKey, "write-key", "", "the source's write `KEY` (sent as Basic auth)")
	// No flag default: an empty Endpoint says nobody chose one (flag,
	// environment or config file), which decides how a refusal is taken.
	endpointFlag(cmd, &c.Endpoint, "", "collection API base `URL`, /v1/batch appended (default "+analytics.DefaultEndpoint+", evfwd serve's)")
	cli.BindEnv(cmd, "write-key")
	cmd.Flags().DurationVar(&c.RetryBase, "retry-base", 0, "first retry backoff")
	cmd.Flags().MarkHidden("retry-base")
}

// endpointFlag is the --endpoint flag (env EVFWD_ENDPOINT, or endpoint in
// the config file) of every command that calls a server: the call
// commands and send (collection API), the admin commands (admin API).
func endpointFlag(cmd *cobra.Command, p *string, def, usage string) {
	cmd.Flags().StringVar(p, "endpoint", def, usage)
	cli.BindEnv(cmd, "endpoint")
	cli.MarkURLFlags(cmd, "endpoint")
}

// config returns the client config of evfwd at version, or a usage error
// for a missing write key (required unless the client is a stub).
func (c *clientFlags) config(version string, now func() time.Time, stub bool) (analytics.Config, error) {
	key := c.WriteKey
	if key == "" {
		if !stub {
			return analytics.Config{}, cli.UsageErrorf("a write key is required: use --write-key or %s", cli.EnvName("write-key"))
		}
		key = "stub"
	}
	if err := cli.CheckURLScheme("--endpoint", c.Endpoint); err != nil {
		return analytics.Config{}, err
	}
	endpoint := c.Endpoint
	if endpoint == "" {
		endpoint = c.Fallback // analytics.DefaultEndpoint when empty too
	}
	return analytics.Config{
		WriteKey: key, Endpoint: endpoint, Stub: stub, Now: now, Version: version,
		// A refusal at the default endpoint means evfwd serve is not
		// running, which no retry changes; a chosen server may be
		// restarting, so it gets the retries.
		Retry: analytics.RetryPolicy{BaseDelay: c.RetryBase, StopOnRefused: c.Endpoint == ""},
	}, nil
}

// serveHint is what to do when nothing listens at the default endpoint.
const serveHint = "is evfwd serve running? start it with: evfwd serve"

// hint is a line of advice for a batch's final error, or "".
func (c *clientFlags) hint(err error) string {
	if c.Endpoint == "" && analytics.IsRefused(err) {
		return serveHint
	}
	return ""
}

// retryStatus shows a client waiting to retry on a terminal: one stderr
// line, redrawn, with the next attempt, the time left until it and the
// last error. Off a terminal it shows nothing: the call commands have no
// -v, a log gains nothing from up to nine transient lines, and the final
// error says what failed; the default endpoint fails fast anyway.
type retryStatus struct {
	con *console
	now func() time.Time

	life    sync.Mutex // orders event and stop
	started bool
	stopped bool

	mu   sync.Mutex // guards ev and next: render runs on the console's ticker
	ev   analytics.RetryEvent
	next time.Time
}

// watchRetries sets cfg.OnRetry to draw the retry line when stderr is a
// terminal; the caller calls stop once the client is closed.
func watchRetries(ios *cli.IOStreams, now func() time.Time, cfg *analytics.Config) (stop func()) {
	if !ios.ErrTTY {
		return func() {}
	}
	r := &retryStatus{con: newConsole(ios), now: now}
	cfg.OnRetry = r.event
	return r.stop
}

func (r *retryStatus) event(e analytics.RetryEvent) {
	r.life.Lock()
	defer r.life.Unlock()
	if r.stopped {
		return
	}
	r.mu.Lock()
	r.ev, r.next = e, r.now().Add(e.Delay)
	r.mu.Unlock()
	// The line appears at the first retry only, so a call that succeeds
	// at once writes nothing to stderr; the ticker keeps the countdown.
	if !r.started {
		r.started = true
		r.con.startProgress(r.render)
	}
	r.con.draw(r.render())
}

func (r *retryStatus) render() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	wait := max(r.next.Sub(r.now()), 0).Round(100 * time.Millisecond)
	return fmt.Sprintf("retrying: attempt %d of %d in %s  %s", r.ev.Attempt+1, r.ev.MaxAttempts, wait, oneLine(r.ev.Err.Error(), 100))
}

func (r *retryStatus) stop() {
	r.life.Lock()
	defer r.life.Unlock()
	r.stopped = true
	if r.started {
		r.con.stopProgress()
	}
}

// oneLine is s on one line, cut to at most n runes so that the redrawn
// line does not wrap on a common terminal.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// configFlags names the flag behind each client config field.
var configFlags = map[string]string{"Endpoint": "--endpoint", "BatchSize": "--batch-size", "MaxQueueSize": "--max-queue-size"}

// configError turns a client's *analytics.ConfigError into a usage error
// naming its flag; other errors pass unchanged.
func configError(err error) error {
	var ce *analytics.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	name := configFlags[ce.Field]
	if name == "" {
		name = ce.Field
	}
	return cli.UsageErrorf("%s %s", name, ce.Reason)
}
