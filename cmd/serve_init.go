package cmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/spf13/cobra"
)

// defaultInitConfig is where `serve init` writes without --config: the
// file every command finds in the working directory.
const defaultInitConfig = cli.LocalConfigFile

// ServeInitOptions are the inputs of `evfwd serve init`.
type ServeInitOptions struct {
	IO     *cli.IOStreams
	Format cli.Format
	Path   string // --config, else defaultInitConfig
	Force  bool
	// EnvConfig is EVFWD_CONFIG, which serve would read instead of
	// ./evfwd.yaml.
	EnvConfig string
}

// newCmdServeInit builds `evfwd serve init`.
func newCmdServeInit(f *cli.Factory) *cobra.Command {
	opts := &ServeInitOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented serve config to start from",
		Long: `Write a commented configuration for evfwd serve to --config FILE, else
./evfwd.yaml: one source with a freshly generated write key and shared
secret, its webhooks going to evfwd listen on its default address. The file
is readable by its owner only, as it holds secrets, and passes
evfwd serve --check as written.

An existing file is left alone (exit 2) unless --force.`,
		Example: `  evfwd serve init && evfwd serve --check     # finds ./evfwd.yaml
  evfwd serve init --config /etc/evfwd/evfwd.yaml --force`,
		Args: cli.Args(cobra.NoArgs),
		// The root's hook would read --config, the file this writes.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			out, _ := cmd.Flags().GetString("output")
			format, err := cli.ParseFormat(out)
			opts.Format = format
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IO, opts.EnvConfig = f.IO, f.Getenv(cli.EnvPrefix+"CONFIG")
			opts.Path, _ = cmd.Flags().GetString("config")
			if opts.Path == "" {
				opts.Path = defaultInitConfig
			}
			return serveInitRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite the file if it exists")
	return cmd
}

func serveInitRun(opts *ServeInitOptions) error {
	src, err := serve.WriteInitConfig(opts.Path, opts.Force)
	if errors.Is(err, os.ErrExist) {
		return cli.UsageErrorf("%s exists; --force overwrites it", opts.Path)
	}
	if err != nil {
		return cli.UsageError(err)
	}
	if opts.Format.JSON() {
		return cli.WriteJSON(opts.IO.Out, map[string]string{"config": opts.Path, "writeKey": src.WriteKey, "secret": src.Webhooks.SharedSecret})
	}
	st := opts.IO.ErrStyles()
	// serve finds ./evfwd.yaml by itself, unless EVFWD_CONFIG names
	// another; another file must be named.
	flag := " --config " + opts.Path
	if filepath.Clean(opts.Path) == filepath.Clean(cli.LocalConfigFile) && opts.EnvConfig == "" {
		flag = ""
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s wrote %s\n  check it:  evfwd serve --check%s\n  start:     evfwd serve%[3]s\n",
		st.OK.Sprint(cli.SymOK), opts.Path, flag)
	// Its webhooks go to evfwd listen, which needs the secret; its addr is
	// the default endpoint.
	writeExports(opts.IO, exportsFor(src, analytics.DefaultEndpoint))
	return nil
}
