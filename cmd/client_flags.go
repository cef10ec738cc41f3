package cmd

import (
	"errors"
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
}

func (c *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.WriteKey, "write-key", "", "the source's write `KEY` (sent as Basic auth)")
	endpointFlag(cmd, &c.Endpoint, analytics.DefaultEndpoint, "collection API base `URL` (/v1/batch is appended)")
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
	return analytics.Config{
		WriteKey: key, Endpoint: c.Endpoint, Stub: stub, Now: now, Version: version,
		Retry: analytics.RetryPolicy{BaseDelay: c.RetryBase},
	}, nil
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
