package cmd

import (
	"fmt"
	"runtime"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/internal/version"
	"github.com/spf13/cobra"
)

// NewCmdVersion prints the version, commit and build date.
func NewCmdVersion(f *cli.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print evfwd's version, commit and build date",
		Args:  cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			info := version.Get()
			if f.Format.JSON() {
				return cli.WriteJSON(f.IO.Out, map[string]string{
					"version": info.Version, "commit": info.Commit, "date": info.Date, "go": runtime.Version(),
				})
			}
			when := "built"
			if info.Committed {
				when = "committed"
			}
			_, err := fmt.Fprintf(f.IO.Out, "evfwd %s (commit %s, %s %s, %s)\n", info.Version, info.Commit, when, info.Date, runtime.Version())
			return err
		},
	}
}
