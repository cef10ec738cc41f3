package cmd

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/spf13/cobra"
)

// adminFlags are what the admin commands (delete, audience sync, trait
// sync, destinations) share: where serve is and the admin API's bearer
// token.
type adminFlags struct {
	Endpoint string
	Token    string
	Sources  []string
}

func (a *adminFlags) add(cmd *cobra.Command, sourceUsage string) {
	a.addConn(cmd)
	cmd.Flags().StringArrayVar(&a.Sources, "source", nil, sourceUsage)
}

const (
	adminEndpointUsage = "evfwd serve's base `URL` (its admin API is under /admin/v1)"
	adminTokenUsage    = "the admin API's bearer `TOKEN` (serve's admin_token)"
)

// addConn adds --endpoint and --admin-token, without --source.
func (a *adminFlags) addConn(cmd *cobra.Command) {
	endpointFlag(cmd, &a.Endpoint, "http://"+serve.DefaultAddr, adminEndpointUsage)
	cmd.Flags().StringVar(&a.Token, "admin-token", "", adminTokenUsage)
	cli.BindEnv(cmd, "admin-token")
}

// client returns the admin client of evfwd at version, or a usage error
// without a token.
func (a *adminFlags) client(version string) (*admin.Client, error) {
	if a.Token == "" {
		return nil, cli.UsageErrorf("an admin token is required: use --admin-token or %s (serve's admin_token)", cli.EnvName("admin-token"))
	}
	if err := cli.CheckURLScheme("--endpoint", a.Endpoint); err != nil {
		return nil, err
	}
	return &admin.Client{Endpoint: a.Endpoint, Token: a.Token, UserAgent: "evfwd/" + version}, nil
}

// adminErr turns an admin API failure into the command's error: a refused
// token or a failed request exits 1, input the server refused exits 2.
func adminErr(err error, input string) error {
	var ae *admin.Error
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ae):
		return err
	case ae.RateLimited():
		// Not retried: every request before the wait is over is refused
		// again, and makes it no shorter.
		return fmt.Errorf("admin API: %s; check --admin-token or %s", ae.Message, cli.EnvName("admin-token"))
	case ae.Auth():
		return fmt.Errorf("the admin API refused the token (%d %s: %s): check --admin-token or %s",
			ae.Status, http.StatusText(ae.Status), ae.Message, cli.EnvName("admin-token"))
	case ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge:
		if input != "" {
			return cli.UsageErrorf("%s: %s", input, ae.Message)
		}
		return cli.UsageError(errors.New(ae.Message))
	}
	return fmt.Errorf("admin API: %w", ae)
}
